/* files.c - the container backend: the file API, done by each sandbox's
 * file server, and the network allowlist of a running sandbox.
 */
#include "ct.h"

/* ---- files ----------------------------------------------------------------
 *
 * Every file operation of a sandbox is done by its file server
 * (container-files): a process with exactly a command's credentials in
 * the sandbox's namespaces (be_fs.h does the work, the server tells why
 * it is that process), started at the sandbox's first file operation and
 * kept until destroy.  Operations go to it one at a time, in order, from
 * a pool thread; the others wait in sb->fwait (as they do while a
 * snapshot holds the sandbox).  A server found gone before an operation
 * reached it is started again once for that operation.
 */

struct ct_fwork {
	struct ct_sb *sb;		/* sandbox */
	dsec_be_done_fn done;		/* caller's */
	void *arg;			/* its argument */
	int rc;				/* 0 or -errno */
	struct dsec_err err;		/* why */
	int sock;			/* the server's socket, for the pool thread */
	bool retried;			/* the server was started again for it */
	char *path;			/* path inside */
	uint64_t offset, len;		/* file_read */
	struct dsec_buf *out;		/* file_read output */
	struct dsec_file_req wreq;	/* file_write: the request it makes */
	const struct dsec_file_req *req;	/* file: the request (caller's, or &wreq) */
	struct dsec_file_res *res;	/* file: its result (caller's, or &wres) */
	struct dsec_file_res wres;	/* file_write: its (empty) result */
	void (*work)(void *);		/* its work */
	struct ct_fwork *next;		/* sb->fwait */
};

/* A file server, from its start until it is reaped (it may outlive its
 * sandbox by the moment it takes to see its socket close). */
struct ct_fsd {
	struct ct_be *be;		/* backend */
	struct ct_fsd *next;		/* be->fsds */
	struct ct_sb *sb;		/* its sandbox, NULL once that stopped it */
	pid_t pid;			/* the server */
	struct be_child cw;		/* its end */
};

static void fsd_free(struct ct_fsd *f)
{
	for (struct ct_fsd **pp = &f->be->fsds; *pp; pp = &(*pp)->next)
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	if (f->sb)
		f->sb->fsd = NULL;
	be_child_stop(f->be->host->loop, &f->cw);
	free(f);
}

static void fsd_child_cb(struct ev_loop *loop, struct be_child *c)
{
	(void)loop;
	fsd_free(dsec_container_of(c, struct ct_fsd, cw));
}

/* Ends sb's file server (it is killed: an operation it is in the middle
 * of matters no more) and closes its socket; on the loop, with no file
 * operation on a pool thread. */
void files_stop(struct ct_sb *sb)
{
	if (sb->fsd) {
		kill(sb->fsd->pid, SIGKILL);
		sb->fsd->sb = NULL;
		sb->fsd = NULL;
	}
	if (sb->fsock >= 0)
		close(sb->fsock);
	sb->fsock = -1;
}

/* At fini: every file server is killed, so that an operation a pool
 * thread waits on ends at once; once no pool work runs (drained), their
 * sockets are closed and they are reaped (the loop will not run again to
 * do it). */
void files_fini(struct ct_be *be, bool drained)
{
	for (struct ct_fsd *f = be->fsds; f && !drained; f = f->next)
		kill(f->pid, SIGKILL);
	if (!drained)
		return;
	for (struct ct_sb *sb = be->sbs; sb; sb = sb->next)
		files_stop(sb);
	while (be->fsds) {
		struct ct_fsd *f = be->fsds;

		kill(f->pid, SIGKILL);
		while (waitpid(f->pid, NULL, 0) < 0 && errno == EINTR)
			;
		fsd_free(f);
	}
}

/* Starts sb's file server: container-files with a socket, the init's
 * pidfd, the root and the commands' filter (as the init gets it). */
static int files_start(struct ct_sb *sb, struct dsec_err *err)
{
	struct ct_be *be = sb->be;
	int filter = sb->filter_fd >= 0 ? sb->filter_fd : sb->deny ? -1 : be->filter_fd;
	char uid[24], gid[24], ncgs[16];
	char *argv[] = { (char *)CT_FILES, (char *)"--uid", uid, (char *)"--gid", gid,
			 (char *)"--userns", (char *)(sb->ubase ? "1" : "0"), (char *)"--cg", ncgs,
			 (char *)(sb->deny ? "--deny" : NULL), sb->deny, NULL };
	char *envp[] = { NULL };
	int sv[2], fds[7 + BE_CG_MAXH], cgfds[BE_CG_MAXH], ncg;
	_cleanup_close_ int root = -1, pidfd = -1;
	struct ct_fsd *f;
	pid_t pid;
	int rc;

	if ((rc = ct_init_fds(sb, &pidfd, &root)) < 0)
		return dsec_err_setc(err, DSEC_E_BACKEND, -rc, "sandbox '%s' has no init: %s",
				     sb->id, strerror(-rc));
	snprintf(uid, sizeof(uid), "%" PRIu64, sb->uid);
	snprintf(gid, sizeof(gid), "%" PRIu64, sb->gid);
	/* It joins the sandbox's cgroup after its exec, as the init does:
	 * what it writes to the sandbox's in-memory disk is charged to the
	 * sandbox's memory, not dsecd's. */
	if ((ncg = be_cg_open_procs(sb->cg, cgfds)) < 0)
		return dsec_err_set(err, -ncg, "cannot open the cgroup of sandbox '%s': %s", sb->id,
				    strerror(-ncg));
	snprintf(ncgs, sizeof(ncgs), "%d", ncg);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		for (int i = 0; i < ncg; i++)
			close(cgfds[i]);
		return dsec_err_set(err, errno, "cannot start the file server of sandbox '%s': %s",
				    sb->id, strerror(errno));
	}
	fds[0] = fds[1] = fds[2] = -1;
	fds[3] = sv[1];
	fds[4] = pidfd;
	fds[5] = root;
	fds[6] = filter;
	for (int i = 0; i < ncg; i++)
		fds[7 + i] = cgfds[i];
	pid = spawn_prog(be, CT_FILES, argv, envp, fds, 7 + ncg, 0, NULL);
	close(sv[1]);
	for (int i = 0; i < ncg; i++)
		close(cgfds[i]);
	if (pid < 0) {
		close(sv[0]);
		return dsec_err_set(err, errno, "cannot start the file server of sandbox '%s': %s",
				    sb->id, strerror(errno));
	}
	f = xcalloc(1, sizeof(*f));
	be_child_start(be->host->loop, &f->cw, pid, fsd_child_cb);
	f->be = be;
	f->sb = sb;
	f->pid = pid;
	f->next = be->fsds;
	be->fsds = f;
	sb->fsd = f;
	sb->fsock = sv[0];
	return 0;
}

static void read_work(void *arg)
{
	struct ct_fwork *w = arg;

	w->rc = be_fs_call_read(w->sock, w->path, w->offset, w->len, w->out, &w->err);
}

static void fs_work(void *arg)
{
	struct ct_fwork *w = arg;

	w->rc = be_fs_call(w->sock, w->req, w->res, &w->err);
}

static void file_done(void *arg);

/* Hands w to the pool thread, the server started first if need be; on
 * failure w completes with the error.  On the loop. */
static void file_run(struct ct_fwork *w)
{
	struct ct_sb *sb = w->sb;

	w->rc = sb->fsock < 0 ? files_start(sb, &w->err) : 0;
	w->sock = sb->fsock;
	sb->fbusy = true;
	if (w->rc < 0)
		return file_done(w);
	ct_submit(sb->be, w->work, file_done, w);
}

/* The next waiting file op, unless one runs or a snapshot holds sb. */
void file_next(struct ct_sb *sb)
{
	struct ct_fwork *w = sb->fwait;

	if (!w || sb->fbusy || sb->snapping)
		return;
	sb->fwait = w->next;
	w->next = NULL;
	file_run(w);
}

static void file_done(void *arg)
{
	struct ct_fwork *w = arg;
	struct ct_sb *sb = w->sb;

	sb->fbusy = false;
	if (w->rc == -ENOTCONN || w->rc == -EPIPE || w->rc == -EPROTO)
		files_stop(sb);
	if (w->rc == -ENOTCONN && !w->retried && !sb->destroying) {
		LOG(sb->be, DSEC_LOG_INFO, "container: the file server of '%s' had ended; "
		    "starting another", sb->id);
		w->retried = true;
		return file_run(w);
	}
	sb->busy--;
	defer(sb->be, w->done, w->arg, w->rc, &w->err);
	free(w->path);
	free(w);
	file_next(sb);
	if (sb->pause_wait && !sb->fbusy) {
		struct ct_pwork *p = sb->pause_wait;

		sb->pause_wait = NULL;
		ct_submit(sb->be, pause_work, pause_done, p);
	}
	sb_maybe_destroy(sb);
}

static int file_op(struct ct_sb *sb, void (*work)(void *), struct ct_fwork *t,
		   struct dsec_err *err)
{
	struct ct_fwork *w, **pp = &sb->fwait;

	if (sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT, "sandbox '%s' is being destroyed",
				     sb->id);
	if (strlen(t->path) > 4096)
		return dsec_err_setc(err, DSEC_E_TOO_LARGE, ENAMETOOLONG, "path too long");
	w = xmemdup(t, sizeof(*t));
	w->path = xstrdup(t->path);
	w->work = work;
	if (w->req == &t->wreq) {
		w->wreq.path = w->path;
		w->req = &w->wreq;
		w->res = &w->wres;
	}
	sb->busy++;
	/* In order; after a snapshot: what it copies is what was there before. */
	while (*pp)
		pp = &(*pp)->next;
	*pp = w;
	file_next(sb);
	return 0;
}

int ct_file_read(void *vsb, const char *path, uint64_t offset, uint64_t len,
		 struct dsec_buf *out, dsec_be_done_fn done, void *arg,
		 struct dsec_err *err)
{
	struct ct_sb *sb = vsb;
	struct ct_fwork t = { .sb = sb, .done = done, .arg = arg, .path = (char *)path,
			      .offset = offset, .len = len, .out = out };

	return file_op(sb, read_work, &t, err);
}

int ct_file_write(void *vsb, const char *path, const void *data, size_t len,
		  uint32_t mode, dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct ct_sb *sb = vsb;
	struct ct_fwork t = { .sb = sb, .done = done, .arg = arg, .path = (char *)path };

	t.wreq = (struct dsec_file_req){ .op = DSEC_FILE_WRITE, .path = path, .data = data,
					 .len = len, .mode = mode ? mode : 0644,
					 .uid = DSEC_OWNER_DEFAULT, .gid = DSEC_OWNER_DEFAULT };
	t.req = &t.wreq;
	return file_op(sb, fs_work, &t, err);
}

/* ---- network allowlist ---------------------------------------------------- */

struct ct_nwork {
	struct ct_sb *sb;		/* sandbox */
	dsec_be_done_fn done;		/* caller's */
	void *arg;			/* its argument */
	int rc;				/* 0 or -errno */
	struct dsec_err err;		/* why */
	struct be_net_rule *rules;	/* the new allowlist (ours until done) */
	size_t n;			/* its entries */
};

static void allow_work(void *arg)
{
	struct ct_nwork *w = arg;

	_cleanup_close_ int netfd = ct_init_open(w->sb, "ns/net", O_RDONLY);

	w->sb->net_changed = true;	/* never another sandbox's (netpool.c) */
	if (netfd < 0)
		w->rc = dsec_err_set(&w->err, -netfd, "cannot open the network namespace of '%s': "
				     "%s", w->sb->id, strerror(-netfd));
	else
		w->rc = be_netns_filter(&w->sb->be->br, netfd, w->rules, w->n, w->sb->dns,
					&w->err);
}

static void allow_done(void *arg)
{
	struct ct_nwork *w = arg;
	struct ct_sb *sb = w->sb;

	sb->busy--;
	if (w->rc == 0) {
		free(sb->rules);
		sb->rules = w->rules;
		sb->nrules = w->n;
		w->rules = NULL;
	}
	defer(sb->be, w->done, w->arg, w->rc, &w->err);
	free(w->rules);
	free(w);
	sb_maybe_destroy(sb);
}

int ct_net_allow(void *vsb, const char *const *allow, dsec_be_done_fn done, void *arg,
		 struct dsec_err *err)
{
	struct ct_sb *sb = vsb;
	struct ct_nwork *w;
	struct be_net_rule *rules;
	size_t n;
	int rc;

	if (sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT, "sandbox '%s' is being destroyed",
				     sb->id);
	if (!sb->net_allow || !sb->net_ready)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "sandbox '%s' has network 'none': create it with network "
				     "'allowlist' to change what it may reach", sb->id);
	if ((rc = be_net_rules_parse(allow, &rules, &n, err)) < 0)
		return rc;
	w = xcalloc(1, sizeof(*w));
	w->sb = sb;
	w->done = done;
	w->arg = arg;
	w->rules = rules;
	w->n = n;
	sb->busy++;
	ct_submit(sb->be, allow_work, allow_done, w);
	return 0;
}

int ct_file(void *vsb, const struct dsec_file_req *req, struct dsec_file_res *res,
	    dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct ct_fwork t = { .sb = vsb, .done = done, .arg = arg, .path = (char *)req->path,
			      .req = req, .res = res };
	const struct ct_sb *sb = vsb;

	if (sb->ubase && ((req->uid != DSEC_OWNER_DEFAULT && req->uid >= CT_URANGE) ||
			  (req->gid != DSEC_OWNER_DEFAULT && req->gid >= CT_URANGE)))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "owner %lld:%lld is outside the sandbox's ids (0 to %u)",
				     (long long)req->uid, (long long)req->gid, CT_URANGE - 1);
	return file_op(vsb, fs_work, &t, err);
}
