/* stream.c - the container backend: streaming exec (a command whose
 * stdin and output are the caller's, optionally on a pty).
 */
#include "ct.h"

/* ---- streaming exec ----------------------------------------------------------
 *
 * exec_start runs the command as exec does (the same helper, per-exec
 * cgroup, timeout, status pipe and completion), but its stdin and output
 * ends go to the caller, who reads them at its own pace; the exec
 * completes once the status is known.  The helper reports the command's
 * pid first ("pid PID"), so exec_signal can signal its process group.
 *
 * With a pty the terminal is allocated in the sandbox's own devpts
 * instance (mounted newinstance by container-init): we open its ptmx
 * through the root fd (openat2, RESOLVE_IN_ROOT), check that it is one,
 * and take the peer with TIOCGPTPEER, so no path of the host's /dev/pts is
 * ever involved and the command sees /dev/pts/N of its own.  The slave
 * becomes the command's fds 0-2 and its controlling terminal; the master
 * goes to the caller (stdin and output), a copy stays here for resizes.
 */

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif
#define CT_DEVPTS_MAGIC 0x1cd1	/* DEVPTS_SUPER_MAGIC */

void xstream_free(struct ct_xstream *s)
{
	if (!s)
		return;
	if (s->ptm >= 0)
		close(s->ptm);
	free(s);
}

/* A new pty of sb's devpts: *ptm its master, returns the slave's fd (owned
 * by the ids commands run as) or -errno with *err. */
static int open_pty(struct ct_sb *sb, const struct dsec_exec_stream_opts *o, int *ptm,
		    struct dsec_err *err)
{
	struct winsize ws = { .ws_row = o->rows ? o->rows : 24, .ws_col = o->cols ? o->cols : 80 };
	char self[64];
	struct statfs fs;
	struct stat st;
	int m, s, unlock = 0;

	/* Looked at before it is opened: the path is the sandbox's, and an
	 * open of some other device node may do something. */
	{
		int root = ct_init_open(sb, "root", O_PATH | O_DIRECTORY);

		m = root < 0 ? root : be_open_in_root(root, "dev/pts/ptmx", O_PATH | O_NOFOLLOW, 0);
		if (root >= 0)
			close(root);
	}
	if (m < 0)
		return dsec_err_set(err, -m, "cannot open the terminal multiplexer of sandbox "
				    "'%s': %s", sb->id, strerror(-m));
	if (fstat(m, &st) < 0 || fstatfs(m, &fs) < 0 || !S_ISCHR(st.st_mode) ||
	    major(st.st_rdev) != 5 || minor(st.st_rdev) != 2 || fs.f_type != CT_DEVPTS_MAGIC) {
		close(m);
		return dsec_err_setc(err, DSEC_E_BACKEND, ENOTTY, "sandbox '%s' has no devpts of "
				     "its own at /dev/pts", sb->id);
	}
	snprintf(self, sizeof(self), "/proc/self/fd/%d", m);
	s = open(self, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	close(m);
	if ((m = s) < 0)
		return dsec_err_set(err, errno, "cannot open the terminal multiplexer of sandbox "
				    "'%s': %s", sb->id, strerror(errno));
	if (ioctl(m, TIOCSPTLCK, &unlock) < 0 || ioctl(m, TIOCSWINSZ, &ws) < 0 ||
	    (s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
		int e = errno;

		close(m);
		return dsec_err_set(err, e, "cannot make a terminal in sandbox '%s': %s", sb->id,
				    strerror(e));
	}
	if (fchown(s, (uid_t)(sb->ubase + sb->uid), (gid_t)(sb->ubase + sb->gid)) < 0)
		LOG(sb->be, DSEC_LOG_DEBUG, "container: cannot chown a terminal of '%s': %s",
		    sb->id, strerror(errno));
	*ptm = m;
	return s;
}

/* The command's pid from the helper's "pid PID" line, reading what the
 * status pipe has if it has not come yet; 0 if it still has not. */
static pid_t xstream_pid(struct ct_exec *x)
{
	char buf[256];
	ssize_t n;
	int pid;

	if (x->st_fd >= 0 && (!x->st.data || !strchr(x->st.data, '\n')) &&
	    (n = read(x->st_fd, buf, sizeof(buf))) > 0)
		dsec_buf_add(&x->st, buf, (size_t)n);
	if (x->st.data && sscanf(x->st.data, "pid %d\n", &pid) == 1 && pid > 0)
		return pid;
	return 0;
}

int ct_exec_start(void *vsb, const struct dsec_exec_req *req,
		  const struct dsec_exec_stream_opts *o, struct dsec_exec_stream *out,
		  struct dsec_exec_res *res, dsec_be_done_fn done, void *arg,
		  struct dsec_err *err)
{
	static const char *const pty_env[] = { "TERM=xterm-256color", NULL };
	struct ct_sb *sb = vsb;
	struct ct_be *be = sb->be;
	_cleanup_free_ char **env = NULL;
	_cleanup_free_ char **argv = NULL;
	size_t nenv = 0, i;
	char desc[256], name[32];
	struct exec_nums nums;
	int fds[6 + BE_CG_MAXH], rc;
	int p[3][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 } }, ps[2] = { -1, -1 };
	int ptm = -1, pts = -1, ptm2 = -1;
	struct be_cg *cg = NULL;
	uint64_t oom0, forkf0;
	struct ct_exec *x;
	pid_t pid;

	if ((rc = exec_can_start(sb, err)) < 0)
		return rc;
	if ((!req->argv || !req->argv[0]) && !req->code)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "exec_start needs argv or code");
	env_merge(&env, &nenv, base_env);
	if (o->pty)
		env_merge(&env, &nenv, pty_env);
	env_merge(&env, &nenv, (const char *const *)sb->env);
	env_merge(&env, &nenv, req->env);

	snprintf(name, sizeof(name), "x.%" PRIu64, ++sb->next_x);
	if ((rc = be_cg_child_light(sb->cg, name, true, &cg, err)) < 0)
		return rc;
	exec_counts0(cg, &oom0, &forkf0);
	be_cg_export(cg, desc, sizeof(desc), NULL);
	argv = xcalloc((req->argv ? dsec_strv_len(req->argv) : 3) + 24, sizeof(*argv));
	i = exec_args(sb, argv, req->cwd && *req->cwd ? req->cwd : sb->cwd, desc, &nums);
	argv[i++] = (char *)"--pid";
	argv[i++] = (char *)"1";
	argv[i++] = (char *)"--tty";
	argv[i++] = (char *)(o->pty ? "1" : "0");
	argv[i++] = (char *)"--";
	for (size_t k = 0; req->argv && req->argv[k]; k++)
		argv[i++] = (char *)req->argv[k];
	if (!req->argv) {
		argv[i++] = (char *)"/bin/sh";
		argv[i++] = (char *)"-c";
		argv[i++] = (char *)req->code;
	}
	if (o->pty) {
		if ((pts = rc = open_pty(sb, o, &ptm, err)) < 0)
			goto fail;
		if ((ptm2 = fcntl(ptm, F_DUPFD_CLOEXEC, 3)) < 0) {
			rc = dsec_err_set(err, errno, "cannot duplicate a terminal: %s",
					  strerror(errno));
			goto fail;
		}
		fds[0] = fds[1] = fds[2] = pts;
	} else {
		for (int k = 0; k < 3; k++)
			if (pipe2(p[k], O_CLOEXEC) < 0) {
				rc = dsec_err_set(err, errno, "cannot make pipes: %s", strerror(errno));
				goto fail;
			}
		fds[0] = p[0][0];
		fds[1] = p[1][1];
		fds[2] = p[2][1];
	}
	if (pipe2(ps, O_CLOEXEC) < 0) {
		rc = dsec_err_set(err, errno, "cannot make pipes: %s", strerror(errno));
		goto fail;
	}
	pid = exec_spawn(sb, argv, env, fds, ps[1], cg);
	if (pid < 0) {
		rc = dsec_err_set(err, errno, "cannot fork: %s", strerror(errno));
		goto fail;
	}
	close(ps[1]);
	if (o->pty) {
		close(pts);
		out->in_fd = ptm;
		out->out_fd = ptm2;
		out->err_fd = -1;
	} else {
		close(p[0][0]);
		close(p[1][1]);
		close(p[2][1]);
		out->in_fd = p[0][1];
		out->out_fd = p[1][0];
		out->err_fd = p[2][0];
	}

	x = xcalloc(1, sizeof(*x));
	x->sb = sb;
	x->res = res;
	x->done = done;
	x->arg = arg;
	x->cg = xcalloc(1, sizeof(*x->cg));
	x->cg->cg = cg;
	x->cg->refs = 1;
	x->oom0 = oom0;
	x->forkf0 = forkf0;
	x->pid = pid;
	x->out_fd = x->err_fd = -1;	/* the caller's */
	x->st_fd = ps[0];
	x->t0 = dsec_now_ns();
	x->left = -1;
	x->stream = xcalloc(1, sizeof(*x->stream));
	x->stream->ptm = -1;
	if (o->pty && (x->stream->ptm = fcntl(ptm, F_DUPFD_CLOEXEC, 3)) < 0)
		LOG(be, DSEC_LOG_WARN, "container: cannot keep a terminal of '%s' for resizes: %s",
		    sb->id, strerror(errno));
	dsec_buf_init(&x->st);
	res->exit_code = -1;
	exec_track(x, req->timeout);
	out->handle = x;
	return 0;

fail:
	for (int k = 0; k < 2; k++) {
		if (ps[k] >= 0)
			close(ps[k]);
		for (int j = 0; j < 3; j++)
			if (p[j][k] >= 0)
				close(p[j][k]);
	}
	if (pts >= 0)
		close(pts);
	if (ptm >= 0)
		close(ptm);
	if (ptm2 >= 0)
		close(ptm2);
	be_cg_remove(cg);
	be_cg_free(cg);
	return rc;
}

/* The status pipe had more: a signal sent before the pid was known goes
 * now (exec_st_cb, for streams only). */
void xstream_pid_known(struct ct_exec *x)
{
	int sig = x->stream->pending_sig;
	pid_t pid;

	if (!sig || !(pid = xstream_pid(x)))
		return;
	x->stream->pending_sig = 0;
	if (!strstr(x->st.data, "\nst ") && kill(-pid, sig) < 0 && errno != ESRCH)
		LOG(x->sb->be, DSEC_LOG_WARN, "container: cannot signal the command in sandbox "
		    "'%s': %s", x->sb->id, strerror(errno));
}

int ct_exec_signal(void *vsb, void *handle, int sig, struct dsec_err *err)
{
	struct ct_exec *x = handle;
	pid_t pid;

	if (x->finished)
		return 0;	/* ended, its done on the way: nothing left to signal */
	if (!(pid = xstream_pid(x))) {
		/* The helper says the pid once the command leads its group,
		 * which can be after the command's first output: the signal
		 * waits for that line (a KILL is not replaced by a later one). */
		if (x->stream->pending_sig != SIGKILL)
			x->stream->pending_sig = sig;
		return 0;
	}
	if (strstr(x->st.data, "\nst "))
		return 0;	/* reaped: its pid may be another's already */
	if (x->sb->paused && sig != SIGKILL && sig != SIGCONT)
		LOG(x->sb->be, DSEC_LOG_DEBUG, "container: signal %d to paused '%s' waits for the "
		    "resume", sig, x->sb->id);
	/* The command leads its group (container-init setsid()s it); a group
	 * that is gone has nothing left to signal. */
	if (kill(-pid, sig) < 0 && errno != ESRCH)
		return dsec_err_set(err, errno, "cannot signal the command in sandbox '%s': %s",
				    x->sb->id, strerror(errno));
	return 0;
}

int ct_exec_resize(void *vsb, void *handle, uint16_t rows, uint16_t cols,
		   struct dsec_err *err)
{
	struct ct_exec *x = handle;
	struct winsize ws = { .ws_row = rows, .ws_col = cols };

	if (x->finished)
		return 0;	/* ended, its done on the way */
	if (!x->stream || x->stream->ptm < 0)
		return dsec_err_setc(err, DSEC_E_INVALID, ENOTTY, "the command in sandbox '%s' has "
				     "no terminal", x->sb->id);
	if (ioctl(x->stream->ptm, TIOCSWINSZ, &ws) < 0)
		return dsec_err_set(err, errno, "cannot resize the terminal in sandbox '%s': %s",
				    x->sb->id, strerror(errno));
	return 0;
}
