/* fncall.c - the FnCall backend: stateless calls into a pre-warmed pool.
 *
 * One zygote per runtime (fncall-zygote in helper_dir, started here with fork +
 * exec and nothing else in between, since the daemon has threads) keeps
 * pool_size units ready, each already inside its own pid, mount, network
 * and IPC namespaces (uts is the zygote's), under the zygote's seccomp
 * filter, and in its per-call cgroup (see fncall-zygote-helper.c).  Every
 * sandbox and every one-shot call runs as a uid of its own (see uid_take).
 * A call on the loop is: make the stdout/stderr pipes (and a sealed memfd
 * for stdin), send the job and the descriptors over the runtime's
 * SOCK_SEQPACKET socket, watch the pipes with ev_io and a timeout with
 * ev_timer, and complete when the zygote reports the wait status and both
 * pipes are at EOF.  Nothing here blocks the loop; the zygote refills its
 * pool by itself.
 *
 * A sandbox (create) is a runtime plus a scratch tmpfs mounted on the host
 * under state_dir; each exec attaches an open_tree() clone of it at /work
 * inside the call, so files persist between the calls of a sandbox and
 * processes never do.  `call` skips the scratch: its working directory is
 * the unit's private /tmp.  File operations run on host->submit threads
 * and resolve paths with openat2(RESOLVE_BENEATH) inside the scratch.
 *
 * The code: fncall.c (configuration, tenants' uids, sandboxes, files,
 * destroy, init, fini, stats, the ops table), call.c (a call in flight and
 * its start), zygote.c (the runtimes' zygotes); fc.h is their private
 * header.
 */
#include "fc.h"

/* Every key the backend knows; adding one is adding a row. */
static const struct be_conf_key conf_table[] = {
#define F(f) offsetof(struct fc_conf, f)
	{ "runtimes", BE_K_STR, F(runtimes), "sh,python3" },
	{ "pool_size", BE_K_COUNT, F(pool_size), "4" },
	{ "memory", BE_K_SIZE, F(memory), "256M" },
	{ "cpus", BE_K_CPUS, F(cpus), "1" },
	{ "pids", BE_K_COUNT, F(pids), "64" },
	{ "nofile", BE_K_COUNT, F(nofile), "256" },
	{ "scratch", BE_K_SIZE, F(scratch), "64M" },
	{ "uid_base", BE_K_COUNT, F(uid_base), "2000000000" },
	{ "uids", BE_K_COUNT, F(uids), "8192" },
	{ "max_running", BE_K_COUNT, F(max_running), "256" },
	{ "timeout", BE_K_SECS, F(timeout), "300" },
	{ "zygotes", BE_K_COUNT, F(zygotes), "0" },
#undef F
};

/* Runtimes this backend can run; a row per runtime. */
static const struct fc_rtdesc rt_table[] = {
	{ .name = "sh", .kind = "c", .exe = "/bin/sh" },
	{ .name = "bash", .kind = "c", .exe = "/bin/bash" },
	{ .name = "python3", .kind = "py", .exe = "/usr/bin/python3" },
};

static void fc_free(struct fc_be *be);

/* Pool work through be_task: fini waits for it, and the backend outlives
 * done callbacks dsecd's pool may still run after fini (they still run). */
static void fc_release(void *be)
{
	fc_free(be);
}

static int fc_submit(struct fc_be *be, void (*work)(void *), void (*done)(void *), void *arg)
{
	return be_task_submit(&be->tasks, work, done, arg);
}

/* ---- config --------------------------------------------------------------- */

static int conf_load(struct fc_be *be, struct dsec_err *err)
{
	int rc;

	if ((rc = be_conf_load(be->host, "fncall", conf_table, DSEC_ARRAY_LEN(conf_table),
				&be->conf, err)) < 0)
		return rc;
	if (be->conf.pool_size > 1024 || be->conf.max_running == 0 || be->conf.pids < 2 ||
	    be->conf.nofile < 16 || be->conf.memory < (4u << 20) || be->conf.scratch < 4096)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "fncall limits out of range (pool_size <= 1024, max_running >= 1, "
				     "pids >= 2, nofile >= 16, memory >= 4M, scratch >= 4k)");
	if (be->conf.uid_base < 100000 || be->conf.uids < 1 || be->conf.uids > FC_UIDS_MAX ||
	    be->conf.uid_base + be->conf.uids > UINT32_MAX - 1)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "fncall.uid_base %" PRIu64 " must be at least 100000 and "
				     "fncall.uids %" PRIu64 " 1 to %u, within 32-bit ids",
				     be->conf.uid_base, be->conf.uids, FC_UIDS_MAX);
	return 0;
}

/* ---- the tenants' uids ---------------------------------------------------- */

/* Every sandbox and every one-shot call runs as a uid (and gid) of its own
 * from uid_base on, so that the kernel's per-user limits (inotify
 * instances and watches, RLIMIT_NPROC, pipe buffers, message queue bytes)
 * are per tenant.  The lowest free one is taken: the zygotes' /etc/passwd
 * lists the range in order, and a lookup reads it up to the entry.  A uid
 * whose processes may still be dying (a call that was cut off before its
 * unit reported its end) is not reused for FC_UID_COOL seconds. */
int uid_take(struct fc_be *be, uint32_t *uid, struct dsec_err *err)
{
	double now = 0;

	for (uint32_t i = be->uid_lo; i < be->conf.uids; i++) {
		if (be->uid_free[i] == INFINITY)
			continue;
		if (be->uid_free[i] > 0 && be->uid_free[i] > (now ? now : (now = dsec_now())))
			continue;
		be->uid_free[i] = INFINITY;
		while (be->uid_lo < be->conf.uids && be->uid_free[be->uid_lo] == INFINITY)
			be->uid_lo++;
		*uid = (uint32_t)(be->conf.uid_base + i);
		return 0;
	}
	return dsec_err_setc(err, DSEC_E_CAPACITY, EBUSY,
			     "fncall has no free uid: %" PRIu64 " sandboxes and calls (fncall.uids)",
			     be->conf.uids);
}

/* Gives uid back, reusable from dsec_now() + cool on. */
void uid_put(struct fc_be *be, uint32_t uid, double cool)
{
	uint32_t i = uid - (uint32_t)be->conf.uid_base;

	if (!be->uid_free || i >= be->conf.uids || be->uid_free[i] != INFINITY)
		return;
	be->uid_free[i] = cool > 0 ? dsec_now() + cool : 0;
	if (i < be->uid_lo)
		be->uid_lo = i;
}

/* ---- the reaper: done callbacks run from host->defer, never inside an operation ---- */

void list_del(struct fc_call **head, struct fc_call *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else if (*head == c)
		*head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->next = c->prev = NULL;
}

void list_add(struct fc_call **head, struct fc_call *c)
{
	c->prev = NULL;
	c->next = *head;
	if (*head)
		(*head)->prev = c;
	*head = c;
}

/* A finished call, deferred by call_finish: its done (not once fini began,
 * nor when the host cancels it), then the call is freed. */
void call_reap(struct dsec_be_defer *d, bool cancelled)
{
	struct fc_call *c = dsec_container_of(d, struct fc_call, reap);

	if (!cancelled && !c->be->stopping)
		c->done(c->arg, c->rc, c->rc < 0 ? &c->err : NULL);
	free(c);
}

/* ---- sandboxes -------------------------------------------------------- */

/* Blocking work for the pool threads; `rc`/`err` carry the result. */
struct fc_work {
	struct fc_be *be;		/* backend */
	struct fc_sb *sb;		/* sandbox */
	dsec_be_done_fn done;		/* caller's callback */
	void *arg;			/* its argument */
	int rc;				/* 0 or -errno */
	struct dsec_err err;		/* why */
	char *path;			/* file ops: path inside */
	uint64_t offset, len;		/* file_read */
	struct dsec_buf *out;		/* file_read output */
	const void *data;		/* file_write data (caller's) */
	size_t dlen;			/* its length */
	uint32_t mode;			/* file_write mode */
	const struct dsec_file_req *req;	/* file: the request (caller's) */
	struct dsec_file_res *res;	/* file: its result (caller's) */
	struct dsec_be_usage *usage;	/* usage: the caller's */
	bool sc_on;			/* usage: the sandbox's refused calls are counted */
	uint64_t sc_denied;		/* and how many, as the loop saw them */
};

static void sb_free(struct fc_sb *sb)
{
	double left = sb->uid_cool - dsec_now();

	uid_put(sb->be, sb->uid, left > 0 ? left : 0);
	if (sb->dirfd >= 0)
		close(sb->dirfd);
	dsec_strv_free(sb->env);
	free(sb->cwd);
	free(sb->dir);
	free(sb->id);
	free(sb);
}

static void create_work(void *arg)
{
	struct fc_work *w = arg;
	struct fc_sb *sb = w->sb;
	const struct fc_conf *c = &w->be->conf;
	char opt[128];
	int rc;

	if (mkdir(sb->dir, 0700) < 0 && errno != EEXIST) {
		w->rc = dsec_err_set(&w->err, errno, "cannot create '%s': %s", sb->dir,
				     strerror(errno));
		return;
	}
	snprintf(opt, sizeof(opt), "size=%" PRIu64 ",mode=0755,uid=%u,gid=%u",
		 sb->lim.disk ? sb->lim.disk : c->scratch, sb->uid, sb->uid);
	if (mount("dsec-fncall", sb->dir, "tmpfs", MS_NOSUID | MS_NODEV, opt) < 0) {
		w->rc = dsec_err_set(&w->err, errno, "cannot mount the scratch of sandbox '%s': %s",
				     sb->id, strerror(errno));
		rmdir(sb->dir);
		return;
	}
	if ((rc = open(sb->dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		w->rc = dsec_err_set(&w->err, errno, "cannot open '%s': %s", sb->dir,
				     strerror(errno));
		umount2(sb->dir, MNT_DETACH);
		rmdir(sb->dir);
		return;
	}
	sb->dirfd = rc;
}

static void create_done(void *arg)
{
	struct fc_work *w = arg;
	struct fc_be *be = w->be;

	if (w->rc == 0 && be->stopping) {
		umount2(w->sb->dir, MNT_DETACH);
		rmdir(w->sb->dir);
		w->rc = dsec_err_setc(&w->err, DSEC_E_SHUTTING_DOWN, ESHUTDOWN, "fncall is stopping");
	}
	if (w->rc < 0) {
		sb_free(w->sb);
		if (!be->stopping)
			w->done(w->arg, w->rc, &w->err);
	} else {
		w->sb->next = be->sbs;
		be->sbs = w->sb;
		be->nsbs++;
		w->done(w->arg, 0, NULL);
	}
	free(w);
}

/* What fncall cannot give a sandbox is refused, not ignored: an image, a
 * network beyond none, extra seccomp denials (its workers' filter is set
 * when the pool starts), a CPU weight. */
static int spec_check(const struct fc_rt *rt, const struct dsec_be_spec *spec,
		      struct dsec_err *err)
{
	if (!rt)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "fncall has no runtime '%s'",
				     spec->runtime);
	if (spec->image && *spec->image)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "fncall sandboxes have no image (got '%s')", spec->image);
	if ((spec->network && strcmp(spec->network, "none")) || (spec->allow && spec->allow[0]) ||
	    spec->dns)
		return dsec_err_setc(err, DSEC_E_UNSUPPORTED, EOPNOTSUPP,
				     "fncall sandboxes have no network (network \"none\" only)");
	if (spec->seccomp_deny && spec->seccomp_deny[0])
		return dsec_err_setc(err, DSEC_E_UNSUPPORTED, EOPNOTSUPP,
				     "fncall cannot add seccomp_deny to its workers' filter");
	if (spec->cpu_weight)
		return dsec_err_setc(err, DSEC_E_UNSUPPORTED, EOPNOTSUPP,
				     "fncall calls share their pool's CPU weight (no limits.cpu_weight)");
	return 0;
}

static int fc_create(void *vbe, const struct dsec_be_spec *spec, void **out,
		     dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct fc_be *be = vbe;
	struct fc_rt *rt = rt_find(be, spec->runtime);
	struct fc_work *w;
	struct fc_sb *sb;
	int rc;

	if (be->stopping || be->shutting)
		return dsec_err_setc(err, DSEC_E_SHUTTING_DOWN, ESHUTDOWN, "fncall is stopping");
	if ((rc = spec_check(rt, spec, err)) < 0)
		return rc;
	sb = xcalloc(1, sizeof(*sb));
	sb->be = be;
	sb->rt = rt;
	sb->id = xstrdup(spec->id ? spec->id : "");
	sb->dir = xasprintf("%s/sb.%" PRIu64, be->host->state_dir, ++be->next_sb);
	sb->dirfd = -1;
	if (spec->env) {
		size_t n = dsec_strv_len(spec->env);

		sb->env = xcalloc(n + 1, sizeof(*sb->env));
		for (size_t i = 0; i < n; i++)
			sb->env[i] = xstrdup(spec->env[i]);
	}
	if (spec->cwd && *spec->cwd)
		sb->cwd = spec->cwd[0] == '/' ? xstrdup(spec->cwd) : xasprintf("/work/%s", spec->cwd);
	sb->lim = spec->limits;
	if ((rc = uid_take(be, &sb->uid, err)) < 0) {
		sb_free(sb);
		return rc;
	}
	w = xcalloc(1, sizeof(*w));
	w->be = be;
	w->sb = sb;
	w->done = done;
	w->arg = arg;
	*out = sb;
	if ((rc = fc_submit(be, create_work, create_done, w)) < 0) {
		free(w);
		sb_free(sb);
		return dsec_err_set(err, -rc, "cannot queue the creation: %s", strerror(-rc));
	}
	return 0;
}

static int fc_exec(void *vsb, const struct dsec_exec_req *req, struct dsec_exec_res *res,
		   dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct fc_sb *sb = vsb;

	if (sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT, "sandbox '%s' is being destroyed",
				     sb->id);
	/* A sandbox is only its scratch: any zygote of its runtime serves it,
	 * and while its own is down another live one does. */
	if (!sb->rt->up) {
		struct fc_rt *rt = rt_find(sb->be, sb->rt->desc->name);

		if (rt && rt->up)
			sb->rt = rt;
	}
	return call_start(sb->be, sb->rt, sb, NULL, req, res, done, arg, err);
}

static int fc_call(void *vbe, const struct dsec_be_spec *spec, const struct dsec_exec_req *req,
		   struct dsec_exec_res *res, dsec_be_done_fn done, void *arg,
		   struct dsec_err *err)
{
	struct fc_be *be = vbe;
	struct fc_rt *rt = rt_find(be, spec->runtime);
	int rc;

	if ((rc = spec_check(rt, spec, err)) < 0)
		return rc;
	return call_start(be, rt, NULL, spec, req, res, done, arg, err);
}

/* ---- files ------------------------------------------------------------- */

/* The scratch as be_fs sees it: "/work/x" and "x" name scratch/x, nothing
 * leaves it; what is made belongs to the sandbox's uid. */
static void fs_root(const struct fc_work *w, struct be_fs_root *root)
{
	*root = (struct be_fs_root){ .fd = w->sb->dirfd, .in_root = false, .prefix = "/work",
				     .uid = w->sb->uid, .gid = w->sb->uid, .mode_mask = 0777 };
}

static void read_work(void *arg)
{
	struct fc_work *w = arg;
	struct be_fs_root root;

	fs_root(w, &root);
	w->rc = be_fs_read(&root, w->path, w->offset, w->len, w->out, &w->err);
}

static void write_work(void *arg)
{
	struct fc_work *w = arg;
	struct be_fs_root root;

	fs_root(w, &root);
	w->rc = be_fs_write(&root, w->path, w->data, w->dlen, w->mode, &w->err);
}

static void fs_work(void *arg)
{
	struct fc_work *w = arg;
	struct be_fs_root root;

	fs_root(w, &root);
	w->rc = be_fs_run(&root, w->req, w->res, &w->err);
}

static void sb_cleanup_submit(struct fc_sb *sb);

static void file_done(void *arg)
{
	struct fc_work *w = arg;
	struct fc_sb *sb = w->sb;

	sb->nops--;
	if (sb->be->stopping) {
		/* fini unmounted it and left it to us. */
		free(w->path);
		free(w);
		if (sb->nops == 0 && !sb->destroying)
			sb_free(sb);
		return;
	}
	w->done(w->arg, w->rc, w->rc < 0 ? &w->err : NULL);
	free(w->path);
	free(w);
	if (sb->destroying && sb->nops == 0 && !sb->calls)
		sb_cleanup_submit(sb);
}

static int file_op(struct fc_sb *sb, void (*work)(void *), struct fc_work *t,
		   struct dsec_err *err)
{
	struct fc_work *w;
	int rc;

	if (sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT, "sandbox '%s' is being destroyed",
				     sb->id);
	if (strlen(t->path) > DSEC_STR_MAX)
		return dsec_err_setc(err, DSEC_E_TOO_LARGE, ENAMETOOLONG, "path too long");
	w = xmemdup(t, sizeof(*t));
	w->path = xstrdup(t->path);
	if ((rc = fc_submit(sb->be, work, file_done, w)) < 0) {
		free(w->path);
		free(w);
		return dsec_err_set(err, -rc, "cannot queue the file operation: %s", strerror(-rc));
	}
	sb->nops++;
	return 0;
}

static int fc_file_read(void *vsb, const char *path, uint64_t offset, uint64_t len,
			struct dsec_buf *out, dsec_be_done_fn done, void *arg,
			struct dsec_err *err)
{
	struct fc_sb *sb = vsb;
	struct fc_work t = { .be = sb->be, .sb = sb, .done = done, .arg = arg,
			     .path = (char *)path, .offset = offset, .len = len, .out = out };

	return file_op(sb, read_work, &t, err);
}

static int fc_file_write(void *vsb, const char *path, const void *data, size_t len,
			 uint32_t mode, dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct fc_sb *sb = vsb;
	struct fc_work t = { .be = sb->be, .sb = sb, .done = done, .arg = arg,
			     .path = (char *)path, .data = data, .dlen = len,
			     .mode = mode ? mode : 0644 };

	return file_op(sb, write_work, &t, err);
}

static int fc_file(void *vsb, const struct dsec_file_req *req, struct dsec_file_res *res,
		   dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct fc_sb *sb = vsb;
	struct fc_work t = { .be = sb->be, .sb = sb, .done = done, .arg = arg,
			     .path = (char *)req->path, .req = req, .res = res };

	return file_op(sb, fs_work, &t, err);
}

/* What a sandbox uses: its scratch, and the calls the seccomp filter
 * refused to its commands where its zygote counts them.  Its calls run in
 * units of the runtime's shared pool, in cgroups of the zygote's, so CPU,
 * memory and tasks per sandbox are not measured (their bits stay clear). */
static void usage_work(void *arg)
{
	struct fc_work *w = arg;
	struct dsec_be_usage u = { .struct_size = sizeof(u) };
	struct statfs st;

	if (fstatfs(w->sb->dirfd, &st) < 0) {
		w->rc = dsec_err_set(&w->err, errno, "cannot read the scratch of sandbox '%s': %s",
				     w->sb->id, strerror(errno));
		return;
	}
	u.disk = (uint64_t)(st.f_blocks - st.f_bfree) * (uint64_t)st.f_bsize;
	u.have = DSEC_USAGE_DISK;
	if (w->sc_on && w->usage->struct_size >= offsetof(struct dsec_be_usage, seccomp_denied) +
						    sizeof(u.seccomp_denied)) {
		u.seccomp_denied = w->sc_denied;
		u.have |= DSEC_USAGE_SECCOMP_DENIED;
	}
	be_cg_usage_put(w->usage, &u);
}

static int fc_usage(void *vsb, struct dsec_be_usage *out, dsec_be_done_fn done, void *arg,
		    struct dsec_err *err)
{
	struct fc_sb *sb = vsb;
	struct fc_work t = { .be = sb->be, .sb = sb, .done = done, .arg = arg, .path = "",
			     .usage = out, .sc_on = sb->rt->sc && !sb->sc_lost,
			     .sc_denied = sb->sc_denied };

	return file_op(sb, usage_work, &t, err);
}

/* ---- destroy ----------------------------------------------------------- */

static void sb_unmount(struct fc_be *be, struct fc_sb *sb)
{
	if (sb->dirfd >= 0) {
		close(sb->dirfd);
		sb->dirfd = -1;
	}
	if (umount2(sb->dir, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		LOG(be, DSEC_LOG_WARN, "fncall: cannot unmount '%s': %s", sb->dir, strerror(errno));
	if (rmdir(sb->dir) < 0 && errno != ENOENT)
		LOG(be, DSEC_LOG_WARN, "fncall: cannot remove '%s': %s", sb->dir, strerror(errno));
}

static void destroy_work(void *arg)
{
	struct fc_sb *sb = arg;

	sb_unmount(sb->be, sb);
}

static void destroy_done(void *arg)
{
	struct fc_sb *sb = arg;
	struct fc_be *be = sb->be;

	for (struct fc_sb **pp = &be->sbs; *pp; pp = &(*pp)->next)
		if (*pp == sb) {
			*pp = sb->next;
			be->nsbs--;
			break;
		}
	if (!be->stopping && sb->ddone)
		sb->ddone(sb->darg, 0, NULL);
	sb_free(sb);
}

static void destroy_later(struct dsec_be_defer *d, bool cancelled)
{
	struct fc_sb *sb = dsec_container_of(d, struct fc_sb, dlater);

	if (cancelled)
		sb->ddone = NULL;	/* freed without a done */
	destroy_done(sb);
}

static void sb_cleanup_submit(struct fc_sb *sb)
{
	if (fc_submit(sb->be, destroy_work, destroy_done, sb) < 0) {
		/* No pool thread: unmount here (it is quick) and still call
		 * done from the loop, never from inside destroy(). */
		destroy_work(sb);
		sb->dlater.fn = destroy_later;
		sb->be->host->defer(sb->be->host, &sb->dlater);
	}
}

static int fc_destroy(void *vsb, dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct fc_sb *sb = vsb;

	if (sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT,
				     "sandbox '%s' is already being destroyed", sb->id);
	sb->destroying = true;
	sb->ddone = done;
	sb->darg = arg;
	while (sb->calls) {
		struct fc_call *c = sb->calls;

		send_kill(c);
		dsec_err_setc(&c->err, DSEC_E_NOT_FOUND, ECANCELED, "sandbox '%s' was destroyed",
			      sb->id);
		call_finish(c, -ECANCELED);	/* unlinks c from sb->calls */
	}
	if (sb->nops == 0)
		sb_cleanup_submit(sb);
	return 0;
}

/* ---- init, fini, stats ------------------------------------------------- */

/* The daemon is stopping: every call ends now with shutting_down (its
 * unit is killed; fini kills the zygotes soon after anyway), new ones are
 * refused.  One-shot calls have no sandbox that dsecd's shutdown destroys,
 * so without this they ran on to their timeout while dsecd waited. */
static void fc_shutdown(void *vbe)
{
	struct fc_be *be = vbe;

	be->shutting = true;
	while (be->calls) {
		struct fc_call *c = be->calls;

		send_kill(c);
		dsec_err_setc(&c->err, DSEC_E_SHUTTING_DOWN, ESHUTDOWN,
			      "fncall is shutting down: the call was cut off");
		call_finish(c, -ESHUTDOWN);	/* unlinks c */
	}
}

static void fc_stats(void *vbe, struct dsec_be_stats *out)
{
	struct fc_be *be = vbe;

	memset(out, 0, sizeof(*out));
	out->sandboxes = be->nsbs;
	out->running = be->running;
	out->capacity = be->running < be->conf.max_running ?
			(uint32_t)(be->conf.max_running - be->running) : 0;
	out->calls = be->ncalls;
	for (struct fc_rt *rt = be->rts; rt; rt = rt->next) {
		out->pool_ready += rt->ready;
		out->pool_target += (uint32_t)rt_pool(be);
	}
}

static void rt_free(struct fc_rt *rt)
{
	struct ev_loop *loop = rt->be->host->loop;

	ev_timer_stop(loop, &rt->respawn);
	rt_kill(rt);
	rt_drop_out(rt);
	if (rt->cg) {
		be_cg_remove(rt->cg);
		be_cg_free(rt->cg);
	}
	free(rt);
}

static void fc_free(struct fc_be *be)
{
	free(be->conf.runtimes);
	free(be->uid_free);
	free(be);
}

static void fc_fini(void *vbe)
{
	struct fc_be *be = vbe;

	be->stopping = true;
	while (be->rts) {
		struct fc_rt *rt = be->rts;

		be->rts = rt->next;
		rt_free(rt);
	}
	be_reaper_fini(&be->reap, be->host->loop);	/* the daemon is exiting */
	/* Calls: their zygotes are gone; no done after fini starts. */
	while (be->calls) {
		struct fc_call *c = be->calls;

		call_close(c);
		list_del(&be->calls, c);
		free(c);
	}
	/* Let running file work finish before its sandbox goes away. */
	be_tasks_drain(&be->tasks);
	while (be->sbs) {
		struct fc_sb *sb = be->sbs;

		be->sbs = sb->next;
		sb_unmount(be, sb);
		/* A pending done (file op, destroy) frees it later. */
		if (sb->nops == 0 && !sb->destroying)
			sb_free(sb);
	}
	if (be->cg) {
		_cleanup_free_ char *rec = xasprintf("%s/cgroups", be->host->state_dir);

		be_cg_kill(be->cg);
		if (be_cg_give_up(be->cg, rec) < 0)
			LOG(be, DSEC_LOG_WARN, "fncall: cannot remove cgroup '%s'", be->cg->path);
		be_cg_free(be->cg);
		be->cg = NULL;
	}
	if (be_tasks_idle(&be->tasks))
		fc_free(be);
}

/* Scratch mounts left in our state dir by a daemon that died without
 * fini: nothing can use them any more. */
static void remove_stale_scratch(struct fc_be *be)
{
	DIR *d = opendir(be->host->state_dir);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		_cleanup_free_ char *p = NULL;

		if (strncmp(de->d_name, "sb.", 3))
			continue;
		p = xasprintf("%s/%s", be->host->state_dir, de->d_name);
		umount2(p, MNT_DETACH);
		if (rmdir(p) < 0)
			LOG(be, DSEC_LOG_WARN, "fncall: cannot remove stale '%s': %s", p,
			    strerror(errno));
		else
			LOG(be, DSEC_LOG_INFO, "fncall: removed stale scratch '%s'", p);
	}
	if (d)
		closedir(d);
}

static int fc_init(const struct dsec_be_host *host, void **out, struct dsec_err *err)
{
	struct fc_be *be = xcalloc(1, sizeof(*be));
	struct fc_rt **tail = &be->rts;
	_cleanup_free_ char *list = NULL;
	char *save = NULL, name[64];
	struct dsec_err e2;
	int rc;

	be->host = host;
	be_tasks_init(&be->tasks, host, &be->stopping, false, fc_release, be);
	if (host->abi_version != DSEC_BE_ABI || host->struct_size < sizeof(*host)) {
		free(be);
		return dsec_err_setc(err, DSEC_E_INTERNAL, EINVAL, "fncall: host ABI mismatch");
	}
	if ((rc = conf_load(be, err)) < 0)
		goto fail;
	be->uid_free = xcalloc(be->conf.uids, sizeof(*be->uid_free));
	if (be->conf.zygotes > 256) {
		rc = dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				   "fncall.zygotes must be 0 (auto) to 256, not %" PRIu64,
				   be->conf.zygotes);
		goto fail;
	}
	if (geteuid() != 0) {
		rc = dsec_err_setc(err, DSEC_E_UNSUPPORTED, EPERM,
				   "fncall needs root (namespaces, mounts, cgroups)");
		goto fail;
	}

	snprintf(name, sizeof(name), "dsec-fncall.%d", (int)getpid());
	if (be_cg_open_root(&be->cg, name, &e2) < 0) {
		LOG(be, DSEC_LOG_WARN, "fncall: %s; calls run without cgroup limits", e2.msg);
		be->cg = NULL;
	} else if (be->cg->mode == BE_CG_NONE) {
		LOG(be, DSEC_LOG_WARN, "fncall: no usable cgroup hierarchy; calls run without "
		    "memory, cpu and pids limits (rlimits only)");
		be_cg_free(be->cg);
		be->cg = NULL;
	} else {
		_cleanup_free_ char *rec = xasprintf("%s/cgroups", host->state_dir);
		int n = be_cg_remove_stale(be->cg, "dsec-fncall.");

		n += be_cg_take_over(be->cg, rec) > 0;	/* a killed daemon's, wherever */

		LOG(be, DSEC_LOG_INFO, "fncall: cgroup %s '%s'%s",
		    be->cg->mode == BE_CG_V2 ? "v2" : "v1", be->cg->path,
		    n ? " (removed groups of dead daemons)" : "");
	}
	remove_stale_scratch(be);

	/* Zygotes per runtime, each pinned with all its units to one CPU: a
	 * call whose processes stay on the CPU of the zygote that forked them
	 * avoids cross-CPU TLB shootdowns and wake-ups, which on a VM with
	 * shadow paging cost more than the fork itself.  Calls go to the
	 * zygote with the fewest in flight.  Auto: one per usable CPU, at most
	 * FC_AUTO_ZYGOTES (python3 zygotes cost memory). */
	cpu_set_t set;
	int cpus[CPU_SETSIZE], ncpus = 0;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		for (int i = 0; i < CPU_SETSIZE; i++)
			if (CPU_ISSET(i, &set))
				cpus[ncpus++] = i;
	if (ncpus == 0)
		cpus[ncpus++] = 0;
	be->nshards = be->conf.zygotes ? (unsigned)be->conf.zygotes
				       : (unsigned)(ncpus < FC_AUTO_ZYGOTES ? ncpus : FC_AUTO_ZYGOTES);

	list = xstrdup(be->conf.runtimes);
	for (char *r = strtok_r(list, ", ", &save); r; r = strtok_r(NULL, ", ", &save)) {
		const struct fc_rtdesc *d = NULL;
		struct fc_rt *rt;

		for (size_t i = 0; i < DSEC_ARRAY_LEN(rt_table); i++)
			if (!strcmp(rt_table[i].name, r))
				d = &rt_table[i];
		if (!d) {
			rc = dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					   "unknown fncall runtime '%s' in 'fncall.runtimes'", r);
			goto fail;
		}
		bool dup = false;

		for (struct fc_rt *o = be->rts; o; o = o->next)
			dup |= !strcmp(o->desc->name, r);
		if (dup)
			continue;

		if (access(d->exe, X_OK) < 0) {
			LOG(be, DSEC_LOG_WARN, "fncall: runtime '%s' skipped: '%s' is missing", r,
			    d->exe);
			continue;
		}
		for (unsigned k = 0; k < be->nshards; k++) {
			char cgname[80];

			rt = xcalloc(1, sizeof(*rt));
			rt->be = be;
			rt->desc = d;
			rt->sock = -1;
			rt->cpu = be->nshards > 1 ? cpus[k % ncpus] : -1;
			rt->out_tail = &rt->out;
			ev_timer_init(&rt->respawn, respawn_cb, 0, 0);
			if (be->nshards > 1)
				snprintf(cgname, sizeof(cgname), "%s.%u", d->name, k);
			else
				snprintf(cgname, sizeof(cgname), "%s", d->name);
			if (be->cg && be_cg_child(be->cg, cgname, true, true, &rt->cg, &e2) < 0) {
				LOG(be, DSEC_LOG_WARN, "fncall: %s", e2.msg);
				rt->cg = NULL;
			}
			if (rt_spawn(rt, &e2) < 0 || rt_wait_ready(rt, &e2) < 0) {
				LOG(be, DSEC_LOG_WARN, "fncall: runtime '%s' skipped: %s", r, e2.msg);
				rt_free(rt);
				continue;
			}
			rt->up = true;
			*tail = rt;
			tail = &rt->next;
		}
	}
	if (!be->rts) {
		rc = dsec_err_setc(err, DSEC_E_BACKEND, ENOENT,
				   "fncall has no working runtime (tried '%s'; see the log)",
				   be->conf.runtimes);
		goto fail;
	}
	*out = be;
	return 0;

fail:
	be->stopping = true;
	if (be->cg) {
		be_cg_kill(be->cg);
		be_cg_remove(be->cg);
		be_cg_free(be->cg);
	}
	free(be->conf.runtimes);
	free(be->uid_free);
	free(be);
	return rc;
}

__attribute__((visibility("default")))
const struct dsec_be_ops dsec_backend = {
	.abi_version = DSEC_BE_ABI,
	.struct_size = sizeof(struct dsec_be_ops),
	.spec_size = sizeof(struct dsec_be_spec),
	.name = "fncall",
	.description = "stateless calls into a pre-warmed pool of isolated processes",
	.init = fc_init,
	.fini = fc_fini,
	.create = fc_create,
	.exec = fc_exec,
	.file_read = fc_file_read,
	.file_write = fc_file_write,
	.destroy = fc_destroy,
	.stats = fc_stats,
	.call = fc_call,
	.file = fc_file,
	.shutdown = fc_shutdown,
	.usage = fc_usage,
};
