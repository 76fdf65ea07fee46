/* create.c - the container backend: making a sandbox (its cgroup, root,
 * namespaces and init) and noticing when its init dies on its own.
 */
#include "ct.h"
#include "ct_root.h"

/* ---- create --------------------------------------------------------------- */

/* Out of be->sbs, where it is from create on (fini tears down those that
 * are still being made too); O(1): a walk of the list made a mass destroy
 * of 10,000 sandboxes 50 million steps of the loop.  Once only. */
void sb_unlink(struct ct_sb *sb)
{
	if (!sb->pprev)
		return;
	*sb->pprev = sb->next;
	if (sb->next)
		sb->next->pprev = sb->pprev;
	sb->pprev = NULL;
	sb->next = NULL;
	sb->be->nsbs--;
}

/* On a pool thread, for a new sandbox: the cgroup of a destroyed one
 * (cg_keep), with its spare command group, when one is kept.  What the
 * group counted before (CPU time, OOM kills) is taken off what sb reads. */
static bool cg_take(struct ct_sb *sb)
{
	struct ct_be *be = sb->be;
	struct dsec_be_usage u = { .struct_size = sizeof(u) };
	struct ct_cgkeep k;

	pthread_mutex_lock(&be->keep_lock);
	if (!be->nkeep) {
		pthread_mutex_unlock(&be->keep_lock);
		return false;
	}
	k = be->keep[--be->nkeep];	/* the newest: the oldest go first (cg_trim) */
	pthread_mutex_unlock(&be->keep_lock);
	sb->cg = k.cg;
	sb->cg_kept = true;
	sb->cg_peak = k.peak_reset;
	be_cg_usage(sb->cg, &u);
	sb->cg_cpu0 = u.cpu_ns;
	be_cg_oom_kills(sb->cg, &sb->cg_oom0);
	sb->next_x = k.next_x;
	if (k.spare) {
		sb->spare = xcalloc(1, sizeof(*sb->spare));
		sb->spare->cg = k.spare;
		sb->spare->refs = 1;
	}
	return true;
}

/* On a pool thread, for a sandbox being destroyed: its emptied cgroup,
 * and its spare command group, kept for a new sandbox (cg_take) rather
 * than removed (those beyond CT_CG_KEEP later, cg_trim).  Removing a memory
 * cgroup makes the kernel walk a list as long as the node has mounted
 * file systems (memcg_reparent_list_lrus): on a node of thousands of
 * sandboxes each removal took milliseconds of a core and held up the
 * mounts of the creates beside it.  Then sb->cg is NULL. */
void cg_keep(struct ct_sb *sb)
{
	struct ct_be *be = sb->be;
	struct ct_cgkeep k = { 0 };
	struct dsec_be_usage u = { .struct_size = sizeof(u) };
	const char *spare = NULL;
	bool unused;

	if (!sb->cg || be->stopping || sb->cg->mode == BE_CG_NONE)
		return;
	if (be_cg_kill(sb->cg) < 0)
		return;
	if (sb->keep_spare)
		spare = strrchr(sb->keep_spare->path, '/') + 1;
	if (be_cg_remove_children_but(sb->cg, spare) < 0 || be_cg_reuse(sb->cg, &k.peak_reset) < 0)
		return;
	/* The page cache it leaves is charged to the next sandbox: a little
	 * (its image's files, shared) is fine, more is removed with it. */
	be_cg_usage(sb->cg, &u);
	if ((u.have & DSEC_USAGE_MEMORY) && u.memory > CT_CG_KEEP_LEFT)
		return;
	if (sb->keep_spare && be_cg_reuse(sb->keep_spare, &unused) == 0)
		k.spare = sb->keep_spare;
	k.cg = sb->cg;
	k.next_x = sb->next_x;
	k.since = dsec_now_ns();
	pthread_mutex_lock(&be->keep_lock);
	if (be->nkeep == be->capkeep) {
		be->capkeep = be->capkeep ? 2 * be->capkeep : CT_CG_KEEP;
		be->keep = xrealloc(be->keep, be->capkeep * sizeof(*be->keep));
	}
	be->keep[be->nkeep++] = k;
	sb->cg = NULL;
	if (k.spare)
		sb->keep_spare = NULL;
	pthread_mutex_unlock(&be->keep_lock);
}

/* ---- kept cgroups beyond CT_CG_KEEP ------------------------------------------
 *
 * Every destroyed sandbox's group is kept, however many go at once: a
 * daemon stopping, or a trainer destroying its 10,000 sandboxes, would
 * otherwise remove each while the others still have their file systems
 * mounted, at a cost that grows with them (a SIGTERM of 5,000 took 35 s).
 * Those beyond CT_CG_KEEP that nobody took for CT_CG_TRIM_AFTER seconds
 * are removed one at a time on the pool; at fini, once every sandbox's
 * processes and mounts are gone, all of them with the backend's group. */
struct ct_trim {
	struct ct_be *be;
	struct ct_cgkeep k;
};

static void cg_trim_work(void *arg)
{
	struct ct_trim *t = arg;

	be_cg_remove(t->k.cg);	/* and its spare, below it */
}

static void cg_trim_done(void *arg)
{
	struct ct_trim *t = arg;

	t->be->trimming = false;
	be_cg_free(t->k.cg);
	be_cg_free(t->k.spare);
	free(t);
}

static void cg_trim_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct ct_be *be = dsec_container_of(w, struct ct_be, trim_w);
	uint64_t now = dsec_now_ns();
	struct ct_trim *t = NULL;

	(void)revents;
	if (be->trimming)
		return;
	pthread_mutex_lock(&be->keep_lock);
	if (be->nkeep <= CT_CG_KEEP || be->stopping)
		ev_timer_stop(loop, w);
	else if (now - be->keep[0].since >= (uint64_t)(CT_CG_TRIM_AFTER * 1e9)) {
		t = xcalloc(1, sizeof(*t));
		t->be = be;
		t->k = be->keep[0];
		memmove(be->keep, be->keep + 1, --be->nkeep * sizeof(*be->keep));
	}
	pthread_mutex_unlock(&be->keep_lock);
	if (t) {
		be->trimming = true;
		ct_submit(be, cg_trim_work, cg_trim_done, t);
	}
}

void cg_trim_start(struct ct_be *be)
{
	bool over;

	pthread_mutex_lock(&be->keep_lock);
	over = be->nkeep > CT_CG_KEEP;
	pthread_mutex_unlock(&be->keep_lock);
	if (!over || ev_is_active(&be->trim_w) || be->stopping)
		return;
	/* Ten removals a second at most: the creates beside them come first. */
	ev_timer_init(&be->trim_w, cg_trim_cb, 0.1, 0.1);
	ev_timer_start(be->host->loop, &be->trim_w);
}

void sb_free(struct ct_sb *sb)
{
	struct ev_loop *loop = sb->be->host->loop;

	spare_put(sb);
	ct_probe_drop(sb);
	ct_continue(sb);
	be_sess_set_free(sb->sess);
	files_stop(sb);
	ct_ctl_close(sb);
	be_child_hand_over(loop, &sb->cw, &sb->be->reap);
	ev_io_stop(loop, &sb->st_w);
	ev_timer_stop(loop, &sb->ctimer);
	if (sb->filter_fd >= 0)
		close(sb->filter_fd);
	if (sb->st_fd >= 0)
		close(sb->st_fd);
	if (sb->netns >= 0)
		close(sb->netns);
	if (sb->cg)
		be_cg_free(sb->cg);
	be_cg_free(sb->keep_spare);
	dsec_buf_free(&sb->st);
	dsec_strv_free(sb->env);
	free(sb->cwd);
	free(sb->lower);
	free(sb->deny);
	dsec_strv_free(sb->layers);
	if (sb->uslot >= 0)
		sb->be->uslots[sb->uslot / 8] &= (uint8_t)~(1u << (sb->uslot % 8));
	free(sb->rules);
	free(sb->dir);
	free(sb->id);
	free(sb);
}

/* Kill, remove the groups and the (empty on the host) directories. */
void sb_teardown(struct ct_sb *sb)
{
	struct ct_be *be = sb->be;
	_cleanup_free_ char *rw = xasprintf("%s/rw", sb->dir);
	_cleanup_free_ char *root = xasprintf("%s/root", sb->dir);
	_cleanup_free_ char *sys = xasprintf("%s/sys", sb->dir);

	if (sb->cg) {
		if (be_cg_kill(sb->cg) < 0) {
			LOG(be, DSEC_LOG_WARN, "container: processes of '%s' survive a kill", sb->id);
			sb->kill_failed = true;
		}
		if (be_cg_remove(sb->cg) < 0)
			LOG(be, DSEC_LOG_WARN, "container: cannot remove cgroup '%s'", sb->cg->path);
	}
	sb->net_ready = false;
	if (sb->netns >= 0) {
		/* Its processes are gone (or it was never cloned into it). */
		if (sb->kill_failed || sb->net_changed)
			ct_net_bury(be, sb->netns);
		else
			ct_net_give(be, sb->netns);
		sb->netns = -1;
	}
	if (sb->host_if[0])
		be_veth_del(sb->host_if);
	be_bridge_ip_put(&be->br, sb->ip);
	sb->ip = 0;
	rmdir(rw);
	rmdir(root);
	rmdir(sys);	/* where the node's /sys was lent (sys_lend) */
	if (sb->nprobes) {
		_cleanup_free_ char *pl = xasprintf("%s/pl", sb->dir);

		dsec_rm_rf(pl);	/* the stand-ins' mount points (probe.c) */
	}
	for (size_t i = 0; sb->layers && sb->layers[i]; i++) {
		_cleanup_free_ char *l = xasprintf("%s/lower.%zu", sb->dir, i);

		rmdir(l);	/* the mount points of the layers (user namespaces) */
	}
	if (rmdir(sb->dir) < 0 && errno != ENOENT)
		LOG(be, DSEC_LOG_WARN, "container: cannot remove '%s': %s", sb->dir,
		    strerror(errno));
}

struct ct_cwork {
	struct ct_sb *sb;		/* sandbox */
	int rc;				/* 0 or -errno */
	struct dsec_err err;		/* why */
};

static void create_prep_work(void *arg)
{
	struct ct_cwork *w = arg;
	struct ct_sb *sb = w->sb;
	struct ct_be *be = sb->be;
	struct be_cg_limits lim = {
		.memory = sb->lim.memory ? sb->lim.memory : be->conf.memory,
		.cpus = sb->lim.cpus > 0 ? sb->lim.cpus : be->conf.cpus,
		.pids = sb->lim.pids ? sb->lim.pids : (uint32_t)be->conf.pids,
		.weight = sb->cpu_weight,
	};
	char name[64];
	int rc;

	/* A filter of its own, compiled here rather than by its init on the
	 * first command's path; if this fails the init compiles it. */
	if (sb->deny)
		be_seccomp_container_export(sb->deny, &sb->filter_fd);
	if (mkdir(sb->dir, 0700) < 0 && errno != EEXIST) {
		w->rc = dsec_err_set(&w->err, errno, "cannot create '%s': %s", sb->dir,
				     strerror(errno));
		return;
	}
	/* Its stand-ins' layer goes on top of its layers, before they are
	 * counted below. */
	ct_probe_add(sb);
	if (sb->ubase && be->base_ns < 0) {
		/* The helper, root of the sandbox's user namespace, mounts on
		 * these: they are its (cloned from the base namespace, it mounts
		 * on that namespace's). */
		size_t n = sb->layers ? dsec_strv_len((const char *const *)sb->layers) : 0;

		for (size_t i = 0; i < n + 3; i++) {
			_cleanup_free_ char *p = i == 0 ? xstrdup(sb->dir)
					       : i == 1 ? xasprintf("%s/rw", sb->dir)
					       : i == 2 ? xasprintf("%s/root", sb->dir)
							: xasprintf("%s/lower.%zu", sb->dir, i - 3);

			if ((i && mkdir(p, 0700) < 0 && errno != EEXIST) ||
			    lchown(p, sb->ubase, sb->ubase) < 0) {
				w->rc = dsec_err_set(&w->err, errno, "cannot prepare '%s': %s", p,
						     strerror(errno));
				return;
			}
		}
	}
	snprintf(name, sizeof(name), "%s", strrchr(sb->dir, '/') + 1);
	/* No controller delegated below it (on v2 it holds the init): its
	 * command groups are light (be_cg_child_light). */
	if (!cg_take(sb) && (w->rc = be_cg_child(be->cg, name, true, false, &sb->cg, &w->err)) < 0)
		return;
	if ((rc = be_cg_set_limits(sb->cg, &lim)) < 0)
		w->rc = dsec_err_set(&w->err, -rc, "cannot set the limits of sandbox '%s': %s",
				     sb->id, strerror(-rc));
	/* Its network namespace, made here or kept from a destroyed sandbox
	 * (netpool.c); without one the clone makes it. */
	else if ((rc = ct_net_take(be)) >= 0)
		sb->netns = rc;
	/* Its calls open what they need: an idle sandbox holds no cgroup
	 * descriptor (thousands of them would hold five each). */
	be_cg_close(sb->cg);
}

static void create_fail_done(void *arg)
{
	struct ct_cwork *w = arg;
	struct ct_sb *sb = w->sb;

	defer(sb->be, sb->cdone, sb->carg, w->rc, &w->err);
	sb_unlink(sb);
	sb_free(sb);
	free(w);
}

static void create_fail_work(void *arg)
{
	struct ct_cwork *w = arg;

	sb_teardown(w->sb);
}

/* Creation failed after the prep: tear down on a pool thread, then report. */
static void create_fail(struct ct_sb *sb, int rc, const struct dsec_err *err)
{
	struct ct_be *be = sb->be;
	struct ct_cwork *w = xcalloc(1, sizeof(*w));
	struct ev_loop *loop = be->host->loop;

	ev_io_stop(loop, &sb->st_w);
	ev_timer_stop(loop, &sb->ctimer);
	if (sb->st_fd >= 0)
		close(sb->st_fd);
	sb->st_fd = -1;
	if (sb->helper > 0)
		kill(sb->helper, SIGKILL);
	w->sb = sb;
	w->rc = rc;
	w->err = *err;
	ct_submit(be, create_fail_work, create_fail_done, w);
}

static void create_ready(struct ct_sb *sb)
{
	sb->ready = true;
	ct_probe_ready(sb);
	defer(sb->be, sb->cdone, sb->carg, 0, NULL);
}

/* The allowlisted network of a new sandbox, on a pool thread: the filter
 * first (so eth0 never carries a packet unfiltered), then the bridge (once
 * per daemon), an address, the veth, and the resolver in /etc/resolv.conf. */
static void net_setup_work(void *arg)
{
	struct ct_cwork *w = arg;
	struct ct_sb *sb = w->sb;
	struct ct_be *be = sb->be;
	_cleanup_close_ int netfd = ct_init_open(sb, "ns/net", O_RDONLY);

	sb->net_changed = true;	/* never another sandbox's (netpool.c) */
	if (netfd < 0) {
		w->rc = dsec_err_set(&w->err, -netfd, "cannot open the network namespace of '%s': "
				     "%s", sb->id, strerror(-netfd));
		return;
	}
	if ((w->rc = be_netns_filter(&be->br, netfd, sb->rules, sb->nrules, sb->dns,
				     &w->err)) < 0)
		return;
	sb->net_ready = true;
	pthread_mutex_lock(&be->br_lock);
	if (!be->br.ifindex)
		w->rc = be_bridge_up(&be->br, &w->err);
	pthread_mutex_unlock(&be->br_lock);
	if (w->rc < 0 || (w->rc = be_bridge_ip_get(&be->br, &sb->ip, &w->err)) < 0)
		return;
	snprintf(sb->host_if, sizeof(sb->host_if), BE_VETH_PREFIX "%05x%06" PRIx64,
		 (unsigned)getpid() & 0xfffff, sb->serial & 0xffffff);
	if ((w->rc = be_veth_attach(&be->br, netfd, sb->host_if, sb->ip, &w->err)) < 0) {
		sb->host_if[0] = '\0';
		return;
	}
	if (sb->dns) {
		struct in_addr a = { .s_addr = htonl(sb->dns) };
		char line[64], ip[INET_ADDRSTRLEN];
		_cleanup_close_ int root = ct_init_open(sb, "root", O_PATH | O_DIRECTORY);
		int fd = root < 0 ? root : be_open_in_root(root, "/etc/resolv.conf",
				      O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644);

		snprintf(line, sizeof(line), "nameserver %s\n",
			 inet_ntop(AF_INET, &a, ip, sizeof(ip)));
		if (fd < 0 || dsec_write_all(fd, line, strlen(line)) < 0)
			w->rc = dsec_err_set(&w->err, fd < 0 ? -fd : errno,
					     "cannot write the sandbox's /etc/resolv.conf: %s",
					     strerror(fd < 0 ? -fd : errno));
		if (fd >= 0)
			close(fd);
	}
}

static void net_setup_done(void *arg)
{
	struct ct_cwork *w = arg;
	struct ct_sb *sb = w->sb;

	if (w->rc < 0) {
		dsec_err_prefix(&w->err, "cannot connect sandbox '%s'", sb->id);
		create_fail(sb, w->rc, &w->err);
	} else {
		create_ready(sb);
	}
	free(w);
}

static void create_finish(struct ct_sb *sb)
{
	struct ct_be *be = sb->be;
	struct ev_loop *loop = be->host->loop;
	struct dsec_err err;
	int pid = 0, e = 0;
	const char *line = sb->st.data ? sb->st.data : "";

	ev_io_stop(loop, &sb->st_w);
	ev_timer_stop(loop, &sb->ctimer);
	close(sb->st_fd);
	sb->st_fd = -1;
	if (sscanf(line, "ok %d", &pid) == 1 && sb->helper > 1) {
		pid = sb->init = sb->helper;
		if (strstr(line, " sc"))
			sb->sc_on = true;	/* it counts refused calls: 0 so far */
		/* Not reaped: the loop thread reaps, and it is here. */
		if (!(sb->init_start = ct_proc_start(pid))) {
			e = ESRCH;
			dsec_err_setc(&err, DSEC_E_BACKEND, e,
				      "cannot open the init of sandbox '%s': %s", sb->id, strerror(e));
			return create_fail(sb, -e, &err);
		}
		if (sb->net_allow) {
			struct ct_cwork *w = xcalloc(1, sizeof(*w));

			w->sb = sb;
			ct_submit(be, net_setup_work, net_setup_done, w);
			return;
		}
		return create_ready(sb);
	}
	if (sscanf(line, "err %d", &e) == 1 && strchr(line, ' ') && strchr(line + 4, ' ')) {
		char *msg = strchr(line + 4, ' ') + 1;
		size_t n = strcspn(msg, "\n");

		dsec_err_setc(&err, DSEC_E_BACKEND, e, "cannot create sandbox '%s': %.*s", sb->id,
			      (int)n, msg);
	} else {
		e = EIO;
		dsec_err_setc(&err, DSEC_E_BACKEND, e,
			      "cannot create sandbox '%s': the helper died (see the log)", sb->id);
	}
	create_fail(sb, -e, &err);
}

static void create_st_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ct_sb *sb = dsec_container_of(w, struct ct_sb, st_w);
	char buf[1024];
	ssize_t n = read(sb->st_fd, buf, sizeof(buf));

	if (n > 0) {
		dsec_buf_add(&sb->st, buf, (size_t)n);
		if (!memchr(sb->st.data, '\n', sb->st.len) && sb->st.len < 4096)
			return;
	} else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		return;
	}
	create_finish(sb);
}

static void create_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct ct_sb *sb = dsec_container_of(w, struct ct_sb, ctimer);
	struct dsec_err err;

	dsec_err_setc(&err, DSEC_E_TIMEOUT, ETIMEDOUT, "creating sandbox '%s' timed out", sb->id);
	create_fail(sb, -ETIMEDOUT, &err);
}

/* The init of a ready sandbox died on its own (killed from outside,
 * crashed; the OOM killer takes it last, see protect_init): its namespaces,
 * mounts and processes are gone, and so is the sandbox.  dsecd is told
 * (it answers sandbox_lost from then on and destroys it after a grace);
 * signaled says how the init ended and num with what.  Once. */
void sb_lost(struct ct_sb *sb, bool signaled, int num)
{
	const struct dsec_be_host *host = sb->be->host;
	struct dsec_err why;
	uint64_t ooms = 0;

	if (!sb->ready || sb->destroying || sb->lost)
		return;
	sb->lost = true;
	be_cg_oom_kills(sb->cg, &ooms);
	ooms = ooms > sb->cg_oom0 ? ooms - sb->cg_oom0 : 0;
	if (signaled)
		dsec_err_setc(&why, DSEC_E_SANDBOX_LOST, EOWNERDEAD, "its init was killed by SIG%s",
			      sigabbrev_np(num) ? sigabbrev_np(num) : "?");
	else
		dsec_err_setc(&why, DSEC_E_SANDBOX_LOST, EOWNERDEAD, "its init exited with status %d",
			      num);
	if (ooms)
		snprintf(why.msg + strlen(why.msg), sizeof(why.msg) - strlen(why.msg),
			 " after %" PRIu64 " OOM kills in the sandbox", ooms);
	LOG(sb->be, DSEC_LOG_WARN, "container: sandbox '%s' is lost: %s", sb->id, why.msg);
	ct_ctl_close(sb);	/* nobody serves it */
	if (host->struct_size >= offsetof(struct dsec_be_host, sandbox_lost) +
	    sizeof(host->sandbox_lost) && host->sandbox_lost)
		host->sandbox_lost(host, sb->id, &why);
}

#define CT_PF_EXITING 0x4		/* the kernel's task flag, /proc/PID/stat field 9 */

/* Whether the init of sb has ended or is ending, and if so how: the
 * status it was reaped with, or what /proc says of
 * a zombie or a task in do_exit (flags, field 9; exit_code, field 52): a
 * command's pipes close when the dying init's files do, before it is a
 * zombie.  Only asked when a command ended badly (a few reads). */
bool init_gone(struct ct_sb *sb, bool *signaled, int *num)
{
	_cleanup_free_ char *stat = NULL;
	char path[64], *p, *save = NULL;
	unsigned long flags = 0;
	int st = -1, field = 3;
	bool dying = false;
	size_t len;

	if (sb->init <= 0)
		return false;
	if (sb->cw.ended) {
		st = sb->cw.status;
	} else {
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)sb->init);
		if (dsec_read_file(path, &stat, &len) < 0 || !(p = strrchr(stat, ')')))
			return false;
		for (char *t = strtok_r(p + 1, " ", &save); t; t = strtok_r(NULL, " ", &save), field++) {
			if (field == 3)
				dying = *t == 'Z' || *t == 'X';
			else if (field == 9)
				flags = strtoul(t, NULL, 10);
			else if (field == 52)
				st = atoi(t);
		}
		if (!dying && !(flags & CT_PF_EXITING))
			return false;
	}
	*signaled = st < 0 || WIFSIGNALED(st);
	*num = st < 0 ? SIGKILL : WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st);
	return true;
}

/* How dsecd learns that a sandbox's init died without a descriptor of its
 * own for it: the init's end of the command socket closes when it dies (no
 * other process has it, ct_exec.h), and from then on (or once the socket is
 * closed for another reason) it is watched by its pid, briefly, with a
 * pidfd (be_child.h).  An idle sandbox holds that one socket. */
static void create_child_cb(struct ev_loop *loop, struct be_child *c);

void init_watch(struct ct_sb *sb)
{
	struct ev_loop *loop = sb->be->host->loop;

	ev_io_stop(loop, &sb->ctl_w);
	if (sb->helper > 0 && !sb->cw.ended && !be_child_active(&sb->cw))
		be_child_start(loop, &sb->cw, sb->helper, create_child_cb);
}

void ct_ctl_close(struct ct_sb *sb)
{
	if (sb->ctl < 0)
		return;
	init_watch(sb);
	close(sb->ctl);
	sb->ctl = -1;
}

static void init_ctl_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ct_sb *sb = dsec_container_of(w, struct ct_sb, ctl_w);
	struct ct_count c;
	ssize_t n = recv(sb->ctl, &c, sizeof(c), MSG_DONTWAIT);

	(void)loop;
	(void)revents;
	if (n == (ssize_t)sizeof(c) && c.magic == CT_COUNT_MAGIC)
		ct_count_init(sb, c.denied);	/* the one thing sent back (ct_exec.h) */
	if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
		return;	/* anything else: dropped */
	init_watch(sb);
}

static void create_child_cb(struct ev_loop *loop, struct be_child *c)
{
	struct ct_sb *sb = dsec_container_of(c, struct ct_sb, cw);

	/* The sandbox's init died (destroy, or a kill from outside). */
	(void)loop;
	if (!sb->ready && !sb->destroying)
		LOG(sb->be, DSEC_LOG_WARN, "container: the helper of '%s' ended before the sandbox "
		    "was ready (wait status 0x%x)", sb->id, (unsigned)c->status);
	sb_lost(sb, WIFSIGNALED(c->status), WIFSIGNALED(c->status) ? WTERMSIG(c->status) :
		WEXITSTATUS(c->status));
}

/* The OOM killer of the sandbox's memory cgroup never picks its init: it
 * would take the whole sandbox with it.  Commands run with oom_score_adj
 * 1000, the most (container-init run_command), so they go first whatever
 * their size; and the init itself is set to OOM_DISABLE where we may
 * (CAP_SYS_RESOURCE), through the legacy oom_adj (-17 = oom_score_adj
 * -1000), which unlike oom_score_adj leaves oom_score_adj_min at what the
 * init inherited: a command cannot lower itself below that.  Only once
 * pid has exec'd (a process sharing our memory would share the setting,
 * and dsecd would get it). */
static void protect_init(struct ct_be *be, pid_t pid)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/oom_adj", (int)pid);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) < 0 || write(fd, "-17", 3) != 3) {
		if (!be->oom_warned)
			LOG(be, DSEC_LOG_WARN, "container: cannot exempt sandboxes' inits from the "
			    "OOM killer (%s); their commands still go first", strerror(errno));
		be->oom_warned = true;
	}
	if (fd >= 0)
		close(fd);
}

static int write_map(pid_t pid, const char *file, uint32_t base)
{
	char path[64], line[64];
	int fd, n, rc = 0;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	n = snprintf(line, sizeof(line), "0 %u %u\n", base, CT_URANGE);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) < 0)
		return -1;
	if (write(fd, line, (size_t)n) != n)
		rc = -1;
	close(fd);
	return rc;
}

struct userns_setup {
	struct ct_sb *sb;		/* the sandbox */
	int sock;			/* where the layers go */
	const char *noidmap;		/* the layer that could not be idmapped, or NULL */
	int noidmap_errno;		/* and why */
};

/* Before the helper execs in its new user namespace: map root inside to the
 * sandbox's uid range and hand it each layer as a detached mount idmapped
 * to that namespace, so the layers' root-owned files are root's inside and
 * copy-up works.  Not its cgroup: until it execs it shares dsecd's memory,
 * and a memory cgroup's OOM killer kills every process of an mm it picks
 * (the helper joins after its exec, container-init create). */
/* Each of sb's layers on sock, as a detached mount (idmapped to user
 * namespace uns, unless it is -1): the helper mounts them (it may not
 * walk their paths in a user namespace, nor reach them from the base
 * namespace).  0, or -1 with errno. */
static int send_layers(struct ct_sb *sb, int sock, int uns, struct userns_setup *u)
{
	size_t n = sb->layers ? dsec_strv_len((const char *const *)sb->layers) : 0;
	int fds[CT_MAX_LAYERS], nfd = 0, rc = -1, e;

	for (size_t i = 0; i < n; i++) {
		struct mount_attr ma = { .attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)uns };
		int t = (int)syscall(SYS_open_tree, AT_FDCWD, sb->layers[i],
				     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);

		if (t < 0)
			goto out;
		fds[nfd++] = t;
		if (uns >= 0 &&
		    syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH, &ma, sizeof(ma)) < 0) {
			if (u) {
				u->noidmap = sb->layers[i];
				u->noidmap_errno = errno;
			}
			goto out;
		}
	}
	if (nfd && (rc = be_send_fds(sock, "L", 1, fds, nfd, 0)) < 0) {
		errno = -rc;
		rc = -1;
	} else {
		rc = 0;
	}
out:
	e = errno;
	for (int i = 0; i < nfd; i++)
		close(fds[i]);
	errno = e;
	return rc;
}

static int userns_setup(pid_t pid, void *arg)
{
	struct userns_setup *u = arg;
	struct ct_sb *sb = u->sb;
	int uns, rc;
	char path[64];

	if (write_map(pid, "uid_map", sb->ubase) < 0 || write_map(pid, "gid_map", sb->ubase) < 0)
		return -1;
	if (!sb->layers || !sb->layers[0])
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	if ((uns = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	rc = send_layers(sb, u->sock, uns, u);
	close(uns);
	return rc;
}

/* The creation fails after the prep: create_fail keeps a copy of why. */
static void prep_fail(struct ct_cwork *w)
{
	create_fail(w->sb, w->rc, &w->err);
	free(w);
}

static void create_prep_done(void *arg)
{
	struct ct_cwork *w = arg;
	struct ct_sb *sb = w->sb;
	struct ct_be *be = sb->be;
	struct ev_loop *loop = be->host->loop;
	char ncgs[16], disk[32];
	int cgfds[BE_CG_MAXH], ncg, st[2] = { -1, -1 }, fds[8 + BE_CG_MAXH], cv[2] = { -1, -1 };
	int filter = sb->filter_fd >= 0 ? sb->filter_fd : sb->deny ? -1 : be->filter_fd;
	char filter_at[16], preload_at[16], ptys[24], mem[24];
	char probes[CT_PROBES_MAX * (NAME_MAX + 2)];
	bool lent = false, base;
	unsigned long net = CLONE_NEWNET;

	if (w->rc < 0)
		return prep_fail(w);
	ct_base_check(be);
	base = be->base_ns >= 0;
	size_t nl = sb->layers ? dsec_strv_len((const char *const *)sb->layers) : 0;
	int sv[2] = { -1, -1 };
	char nlayers[16];

	/* fds: 3 status, 4 its end of the command socket (ct_exec.h), 5 the
	 * layer socket (user namespaces), 6.. the cgroup.procs files of the
	 * sandbox's cgroup, opened here (the helper moves itself in after its
	 * exec, when it no longer shares our memory, and may not open them in
	 * a user namespace), then the compiled filter and the warm shell's
	 * object.  The helper starts in the sandbox's directory. */
	if ((ncg = be_cg_open_procs(sb->cg, cgfds)) < 0) {
		w->rc = dsec_err_set(&w->err, -ncg, "cannot open the cgroup of sandbox '%s': %s",
				     sb->id, strerror(-ncg));
		return prep_fail(w);
	}
	snprintf(ncgs, sizeof(ncgs), "%d", ncg);
	snprintf(disk, sizeof(disk), "%" PRIu64, sb->lim.disk);
	snprintf(nlayers, sizeof(nlayers), "%zu", sb->ubase || base ? nl : 0);
	snprintf(filter_at, sizeof(filter_at), "%d", filter >= 0 ? 6 + ncg : -1);
	snprintf(preload_at, sizeof(preload_at), "%d", be->preload_fd >= 0 ? 7 + ncg : -1);
	snprintf(ptys, sizeof(ptys), "%" PRIu64, be->conf.ptys);
	snprintf(mem, sizeof(mem), "%" PRIu64, sb->lim.memory ? sb->lim.memory : be->conf.memory);
	ct_probe_spec(sb, probes, sizeof(probes));
	char *const argv[] = { (char *)CT_HELPER, (char *)"create", (char *)"--dir", sb->dir,
			       (char *)"--rootfs",
			       sb->lower ? sb->lower : *be->conf.rootfs ? be->conf.rootfs : (char *)"-",
			       (char *)"--disk", disk, (char *)"--cg", ncgs,
			       (char *)"--layers", nlayers,
			       (char *)"--userns", (char *)(sb->ubase ? "1" : "0"),
			       (char *)"--skel", (char *)(sb->skel ? "1" : "0"),
			       (char *)"--filter", filter_at, (char *)"--preload", preload_at,
			       (char *)"--ptys", ptys, (char *)"--memory", mem,
			       (char *)"--base", (char *)(base ? "1" : "0"),
			       (char *)"--probes", probes,
			       (char *)(sb->deny ? "--deny" : NULL), sb->deny, NULL };
	char *const envp[] = { (char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };

	if (pipe2(st, O_CLOEXEC) < 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, cv) < 0 ||
	    ((sb->ubase || (base && nl) || sb->nprobes) &&
	     socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) ||
	    (!sb->ubase && base && nl && send_layers(sb, sv[0], -1, NULL) < 0)) {
		w->rc = dsec_err_set(&w->err, errno, "cannot prepare the sandbox's helper: %s",
				     strerror(errno));
		for (int i = 0; i < 2; i++) {
			if (st[i] >= 0)
				close(st[i]);
			if (cv[i] >= 0)
				close(cv[i]);
			if (sv[i] >= 0)
				close(sv[i]);
		}
		for (int i = 0; i < ncg; i++)
			close(cgfds[i]);
		return prep_fail(w);
	}
	fds[0] = fds[1] = fds[2] = -1;
	fds[3] = st[1];
	fds[4] = cv[1];
	fds[5] = sv[1];
	for (int i = 0; i < ncg; i++)
		fds[6 + i] = cgfds[i];
	fds[6 + ncg] = filter;	/* -1: not passed (closed in the child) */
	fds[7 + ncg] = be->preload_fd;
	if (!base)
		lent = sys_lend(sb);	/* the base namespace has the node's /sys */
	/* Cloned in the network namespace the prep got it (netpool.c). */
	if (sb->netns >= 0 && ct_net_enter(be, sb->netns) == 0)
		net = 0;
	struct userns_setup u = { .sb = sb, .sock = sv[0] };

	if (sb->ubase) {
		sb->helper = spawn_helper_setup(be, argv, envp, fds, 8 + ncg,
						CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID |
						net | CLONE_NEWUTS | CLONE_NEWIPC |
						(base ? CT_SPAWN_BASE : 0), sb->dir,
						sb->ubase, userns_setup, &u);
	} else {
		sb->helper = spawn_helper(be, argv, envp, fds, 8 + ncg,
					  CLONE_NEWNS | CLONE_NEWPID | net | CLONE_NEWUTS |
					  CLONE_NEWIPC | (base ? CT_SPAWN_BASE : 0), sb->dir);
	}
	if (!net) {
		ct_net_leave(be);
		/* The init holds it now; the destroy opens it again. */
		sb->net_pooled = sb->helper > 0;
		if (sb->net_pooled) {
			close(sb->netns);
			sb->netns = -1;
		}
	}
	if (lent)
		sys_unlend(sb);
	/* The stand-ins after the layers; a helper that gets none fails. */
	if (sb->helper > 0 && sb->nprobes)
		ct_probe_send(sb, sv[0]);
	for (int i = 0; i < 2; i++)
		if (sv[i] >= 0)
			close(sv[i]);
	for (int i = 0; i < ncg; i++)
		close(cgfds[i]);
	close(st[1]);
	close(cv[1]);
	sb->st_fd = st[0];
	sb->ctl = cv[0];
	dsec_set_nonblock(sb->ctl, true);
	if (sb->helper < 0 && u.noidmap) {
		/* A kernel whose file system of a layer has no idmapped mounts
		 * (tmpfs before 6.3, 9p, ...): no user namespace can see the
		 * layer's files as root's. */
		sb->helper = 0;
		w->rc = dsec_err_setc(&w->err, DSEC_E_UNSUPPORTED, u.noidmap_errno,
				      "cannot map layer '%s' into the sandbox's user namespace "
				      "(an idmapped mount: %s): its file system cannot be idmapped "
				      "on this kernel; container.userns = false runs sandboxes "
				      "without user namespaces", u.noidmap,
				      strerror(u.noidmap_errno));
		return prep_fail(w);
	}
	if (sb->helper < 0) {
		sb->helper = 0;
		w->rc = dsec_err_set(&w->err, errno, "cannot fork: %s", strerror(errno));
		return prep_fail(w);
	}
	protect_init(be, sb->helper);	/* it has exec'd: both spawns wait for that */
	free(w);
	dsec_set_nonblock(sb->st_fd, true);
	ev_io_init(&sb->st_w, create_st_cb, sb->st_fd, EV_READ);
	ev_io_start(loop, &sb->st_w);
	ev_timer_init(&sb->ctimer, create_timeout_cb, CT_CREATE_TIMEOUT, 0);
	ev_timer_start(loop, &sb->ctimer);
	ev_io_init(&sb->ctl_w, init_ctl_cb, sb->ctl, EV_READ);
	ev_io_start(loop, &sb->ctl_w);
}

/* The overlay's lower layers for an image: the directories dsecd mounted,
 * joined top first.  A sandbox without an image gets *out = NULL (the
 * configured rootfs or the host skeleton). */
static int image_root(const struct dsec_be_spec *spec, char **out, struct dsec_err *err)
{
	struct dsec_buf b;

	*out = NULL;
	if (!spec->image || !*spec->image)
		return 0;
	if (!spec->layers || !spec->layers[0])
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "image '%s' has no layers here (dsecd runs without fs3)",
				     spec->image);
	if (dsec_strv_len(spec->layers) > CT_MAX_LAYERS)
		return dsec_err_setc(err, DSEC_E_INVALID, E2BIG,
				     "image '%s' has more than %d layers", spec->image, CT_MAX_LAYERS);
	dsec_buf_init(&b);
	for (size_t i = 0; spec->layers[i]; i++) {
		const char *l = spec->layers[i];

		if (l[0] != '/' || strpbrk(l, ":,\\")) {
			dsec_buf_free(&b);
			return dsec_err_setc(err, DSEC_E_INTERNAL, EINVAL,
					     "layer directory '%s' of image '%s' is not an absolute "
					     "path without ':', ',' or '\\'", l, spec->image);
		}
		if (i)
			dsec_buf_add(&b, ":", 1);
		dsec_buf_add(&b, l, strlen(l));
	}
	if (b.len > CT_LOWER_MAX) {
		dsec_buf_free(&b);
		return dsec_err_setc(err, DSEC_E_INVALID, E2BIG,
				     "image '%s' has too many layers for one overlay mount",
				     spec->image);
	}
	dsec_buf_add(&b, "", 1);
	*out = b.data;
	return 0;
}

/* "uid[:gid]" of an image, numeric; NULL or "" = the configured ids. */
static int parse_user(struct ct_be *be, const char *user, uint64_t *uid, uint64_t *gid,
		      struct dsec_err *err)
{
	char *end;

	*uid = be->conf.uid;
	*gid = be->conf.gid;
	if (!user || !*user)
		return 0;
	errno = 0;
	*uid = strtoull(user, &end, 10);
	*gid = *uid;
	if (!errno && end != user && *end == ':' && end[1])
		*gid = strtoull(end + 1, &end, 10);
	if (errno || end == user || *end || *uid > UINT32_MAX - 1 || *gid > UINT32_MAX - 1)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "image user '%s' is not a numeric uid[:gid]", user);
	return 0;
}

/* network "none" (loopback only) or "allowlist" with its rules and an
 * optional resolver. */
static int parse_network(struct ct_be *be, const struct dsec_be_spec *spec, bool *allow,
			 struct be_net_rule **rules, size_t *n, uint32_t *dns, struct dsec_err *err)
{
	const char *mode = spec->network && *spec->network ? spec->network : be->conf.network;
	struct in_addr a;
	int rc;

	*allow = false;
	*rules = NULL;
	*n = 0;
	*dns = 0;
	if (!strcmp(mode, "none")) {
		if ((spec->allow && spec->allow[0]) || (spec->dns && *spec->dns))
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "an allowlist or a resolver needs network 'allowlist', "
					     "not 'none'");
		return 0;
	}
	if (strcmp(mode, "allowlist"))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "network '%s' is not 'none' or 'allowlist'", mode);
	if (spec->dns && *spec->dns) {
		if (inet_pton(AF_INET, spec->dns, &a) != 1)
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "resolver '%s' is not an IPv4 address", spec->dns);
		*dns = ntohl(a.s_addr);
	}
	if ((rc = be_net_rules_parse(spec->allow, rules, n, err)) < 0)
		return rc;
	*allow = true;
	return 0;
}

/* A request's limits against the floors, and its disk against its
 * memory: the writable layer is a tmpfs charged to the sandbox's memory.
 * *disk gets the disk to make: the request's, else the configured one
 * shrunk to fit.  0 or -EINVAL with *err (invalid). */
static int check_limits(const struct ct_be *be, const struct dsec_be_spec *spec, uint64_t *disk,
			struct dsec_err *err)
{
	const struct dsec_be_limits *l = &spec->limits;
	uint64_t mem = l->memory ? l->memory : be->conf.memory;
	const struct { const char *name; double v, min; } f[] = {
		{ "memory", (double)l->memory, (double)CT_MIN_MEMORY },
		{ "disk", (double)l->disk, (double)CT_MIN_DISK },
		{ "pids", l->pids, CT_MIN_PIDS },
		{ "nofile", l->nofile, CT_MIN_NOFILE },
		{ "cpus", l->cpus, CT_MIN_CPUS },
	};

	for (size_t i = 0; i < DSEC_ARRAY_LEN(f); i++)
		if (f[i].v > 0 && f[i].v < f[i].min)
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "limits.%s %.10g is below the container backend's floor "
					     "of %.10g", f[i].name, f[i].v, f[i].min);
	if (l->disk && l->disk + CT_MEM_RESERVE > mem)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "limits.disk %" PRIu64 " does not fit memory %" PRIu64
				     ": the writable layer is in memory and needs disk + %llu MiB "
				     "of it", l->disk, mem, CT_MEM_RESERVE >> 20);
	*disk = l->disk ? l->disk : be->conf.disk;
	if (*disk + CT_MEM_RESERVE > mem)
		*disk = mem - CT_MEM_RESERVE;
	return 0;
}

int ct_create(void *vbe, const struct dsec_be_spec *spec, void **out,
	      dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct ct_be *be = vbe;
	struct ct_cwork *w;
	struct ct_sb *sb;
	struct be_net_rule *rules = NULL;
	char *lower = NULL, *deny = NULL;
	uint64_t uid, gid, disk = 0;
	uint32_t dns = 0;
	size_t nrules = 0;
	bool net_allow;
	int rc, uslot = -1;

	if (be->stopping)
		return dsec_err_setc(err, DSEC_E_SHUTTING_DOWN, ESHUTDOWN, "container is stopping");
	if (be->nsbs >= be->conf.max_sandboxes)
		return dsec_err_setc(err, DSEC_E_CAPACITY, EAGAIN,
				     "container has %u sandboxes, its maximum", be->nsbs);
	if ((rc = check_limits(be, spec, &disk, err)) < 0 ||
	    (rc = parse_user(be, spec->user, &uid, &gid, err)) < 0 ||
	    (rc = parse_network(be, spec, &net_allow, &rules, &nrules, &dns, err)) < 0)
		return rc;
	if ((rc = be_seccomp_deny_join(spec->seccomp_deny, &deny, err)) < 0) {
		free(rules);
		return rc;
	}
	if ((rc = image_root(spec, &lower, err)) < 0) {
		free(rules);
		free(deny);
		return rc;
	}
	if (be->conf.userns) {
		/* The first free range from the last one taken on: a full node's
		 * creates do not test the bits of every range in use. */
		for (uint64_t k = 0, n = be->conf.max_sandboxes; k < n && uslot < 0; k++) {
			uint64_t i = (be->uslot_next + k) % n;

			if (!(be->uslots[i / 8] & (1u << (i % 8))))
				uslot = (int)i;
			else if (be->uslots[i / 8] == 0xff && i % 8 == 0 && k + 8 <= n)
				k += 7;	/* a whole byte in use */
		}
		if (uslot < 0) {
			free(rules);
			free(lower);
			free(deny);
			return dsec_err_setc(err, DSEC_E_CAPACITY, EAGAIN,
					     "container has no free uid range (%" PRIu64 " in use)",
					     be->conf.max_sandboxes);
		}
		be->uslots[uslot / 8] |= (uint8_t)(1u << (uslot % 8));
		be->uslot_next = (uint64_t)uslot + 1;
	}
	sb = xcalloc(1, sizeof(*sb));
	sb->be = be;
	sb->id = xstrdup(spec->id ? spec->id : "");
	sb->serial = ++be->next_sb;
	sb->dir = xasprintf("%s/sb.%" PRIu64, be->host->state_dir, sb->serial);
	sb->st_fd = sb->ctl = sb->filter_fd = sb->netns = -1;
	sb->fsock = -1;
	sb->net_allow = net_allow;
	sb->rules = rules;
	sb->nrules = nrules;
	sb->dns = dns;
	sb->cdone = done;
	sb->carg = arg;
	dsec_buf_init(&sb->st);
	if (spec->env) {
		size_t n = dsec_strv_len(spec->env);

		sb->env = xcalloc(n + 1, sizeof(*sb->env));
		for (size_t i = 0; i < n; i++)
			sb->env[i] = xstrdup(spec->env[i]);
	}
	sb->cwd = xstrdup(spec->cwd && *spec->cwd ? spec->cwd : "/");
	if (spec->protect)	/* stand-ins made in the prep (probe.c) */
		sb->protect = dsec_strv_dup(spec->protect);
	sb->lower = lower;
	sb->deny = deny;
	sb->uslot = uslot;
	if (uslot >= 0)
		sb->ubase = (uint32_t)(be->conf.uid_base + (uint64_t)uslot * CT_USTRIDE);
	if (uslot >= 0 || be->base_ns >= 0) {
		/* The layers go to the helper as detached mounts, idmapped in a
		 * user namespace (the configured rootfs or the default root's
		 * skeleton is a layer too): a helper in a user namespace may not
		 * walk their paths, one cloned from the base namespace does not
		 * see them.  The default root's directories are bound by path. */
		if (spec->layers && spec->layers[0]) {
			size_t n = dsec_strv_len(spec->layers);

			sb->layers = xcalloc(n + 1, sizeof(char *));
			for (size_t i = 0; i < n; i++)
				sb->layers[i] = xstrdup(spec->layers[i]);
		} else if (*be->conf.rootfs || be->skel) {
			sb->layers = xcalloc(2, sizeof(char *));
			sb->layers[0] = xstrdup(*be->conf.rootfs ? be->conf.rootfs : be->skel);
			sb->skel = !*be->conf.rootfs;
		}
	} else if (!sb->lower && !*be->conf.rootfs && be->skel) {
		sb->lower = xstrdup(be->skel);
		sb->skel = true;
	}
	sb->uid = uid;
	sb->gid = gid;
	sb->next = be->sbs;	/* counted from now on (capacity), torn down by fini */
	if (sb->next)
		sb->next->pprev = &sb->next;
	sb->pprev = &be->sbs;
	be->sbs = sb;
	be->nsbs++;
	sb->lim = spec->limits;
	sb->lim.disk = disk;
	sb->cpu_weight = spec->cpu_weight;
	*out = sb;
	w = xcalloc(1, sizeof(*w));
	w->sb = sb;
	ct_submit(be, create_prep_work, create_prep_done, w);
	return 0;
}
