/* exec.c - the container backend: running a command in a sandbox through
 * its init or the exec helper, its output, timeout and cleanup.
 */
#include "ct.h"

/* ---- exec ----------------------------------------------------------------- */

void cgref_put(struct ct_cgref *r)
{
	if (--r->refs == 0) {
		be_cg_free(r->cg);
		free(r);
	}
}

static void kill_work(void *arg)
{
	struct ct_cgref *r = arg;

	be_cg_kill(r->cg);
}

static void kill_done(void *arg)
{
	cgref_put(arg);
}

struct ct_xstream;

/* Kills what the exec left; the group is removed, or, when it is to be
 * the sandbox's spare, kept if it is empty: the next exec then makes no
 * group (a mkdir and an rmdir in every hierarchy fewer per command). */
void xclean_work(void *arg)
{
	struct ct_xclean *x = arg;

	if (be_cg_kill(x->cg->cg) < 0)
		x->keep = false;
	if (!x->keep)
		be_cg_remove(x->cg->cg);
}

void xclean_done(void *arg)
{
	struct ct_xclean *x = arg;
	struct ct_sb *sb = x->sb;

	if (x->keep) {
		sb->keeping = false;
		if (!sb->destroying && !sb->spare) {
			sb->spare = x->cg;	/* our reference goes with it */
			x->cg = NULL;
		}
	}
	if (x->cg)
		cgref_put(x->cg);
	sb->busy--;
	sb_maybe_destroy(sb);
	free(x);
}

/* Drops the spare group's reference (the sandbox's teardown removes it). */
void spare_put(struct ct_sb *sb)
{
	if (sb->spare)
		cgref_put(sb->spare);
	sb->spare = NULL;
}

void exec_close(struct ct_exec *x)
{
	struct ev_loop *loop = x->sb->be->host->loop;

	ev_io_stop(loop, &x->out_w);
	ev_io_stop(loop, &x->err_w);
	ev_io_stop(loop, &x->st_w);
	ev_timer_stop(loop, &x->timer);
	be_child_hand_over(loop, &x->cw, &x->sb->be->reap);
	if (x->out_fd >= 0)
		close(x->out_fd);
	if (x->err_fd >= 0)
		close(x->err_fd);
	if (x->st_fd >= 0)
		close(x->st_fd);
	x->out_fd = x->err_fd = x->st_fd = -1;
}

/* An ended command, once its done has run (or fini dropped it). */
void exec_free(struct ct_exec *x)
{
	dsec_buf_free(&x->st);
	xstream_free(x->stream);
	free(x);
}

/* Decide the result, queue done, and kill what the exec left. */
void exec_finish(struct ct_exec *x, int rc, const struct dsec_err *err)
{
	struct ct_sb *sb = x->sb;
	struct ct_be *be = sb->be;
	struct ct_xclean *c;

	if (x->finished)
		return;
	x->finished = true;
	exec_close(x);
	/* A command cut short may have been cut by its init's end: tell
	 * dsecd first, so that its reply says the sandbox is lost. */
	if (!sb->lost && !sb->destroying && (rc < 0 || x->res->signal == SIGKILL)) {
		bool sig;
		int num;

		if (init_gone(sb, &sig, &num))
			sb_lost(sb, sig, num);
	}
	/* A helper that reported stays a moment to answer the filter for
	 * what its command left (container-init exec_watch). */
	if (x->pid > 0 && !x->reaped && !x->reported && !x->cw.ended)
		kill(x->pid, SIGKILL);	/* be->reap reaps it */
	x->res->duration = (double)(dsec_now_ns() - x->t0) / 1e9;
	if (rc < 0) {
		/* A failed result has no output (backend.h). */
		dsec_buf_free(&x->res->out);
		dsec_buf_free(&x->res->err);
	}
	for (struct ct_exec **pp = &sb->execs; *pp; pp = &(*pp)->next)
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	be->running--;
	be->ncalls++;
	c = xcalloc(1, sizeof(*c));
	c->sb = sb;
	c->cg = x->cg;
	x->cg = NULL;
	/* x stays until its done has run: the caller may use its handle
	 * (exec_signal, exec_resize) until then. */
	defer_x(be, x->done, x->arg, rc, err, x);
	if (sb->destroying) {
		/* The teardown kills and removes the whole tree. */
		cgref_put(c->cg);
		sb->busy--;
		free(c);
		return;
	}
	if (!sb->spare && !sb->keeping && c->cg->refs == 1) {
		/* Usually the command left nothing: keep the group as the
		 * spare now, on the loop (two small reads), so that a command
		 * sent right after this one's reply finds it rather than
		 * racing the pool thread and making (and later removing) a
		 * group of its own. */
		if (!sb->paused && !be_cg_populated(c->cg->cg)) {
			sb->spare = c->cg;
			free(c);
			sb->busy--;	/* not destroying: nothing waits for it */
			return;
		}
		c->keep = true;
		sb->keeping = true;
	}
	if (sb->paused) {
		/* Its leftovers are frozen: a kill would wait for the thaw. */
		c->next = sb->held;
		sb->held = c;
		return;
	}
	ct_submit(be, xclean_work, xclean_done, c);	/* sb->busy drops there */
}

static void exec_kill(struct ct_exec *x)
{
	if (x->killed)
		return;
	x->killed = true;
	x->cg->refs++;
	ct_submit(x->sb->be, kill_work, kill_done, x->cg);
}

/* What a command's result is judged by, read before it starts: the OOM
 * kills in the sandbox (its command groups have no memory cgroup of their
 * own, be_cg_child_light) and the failed forks its group counts (v1: the
 * group's own, v2: the sandbox's).  0 where the host does not count. */
void exec_counts0(struct be_cg *cg, uint64_t *oom0, uint64_t *forkf0)
{
	be_cg_oom_kills(cg, oom0);
	be_cg_fork_fails(cg, forkf0);
}

/* Did the OOM killer kill any process in the sandbox while the command
 * ran?  Did a fork fail at the pids limit?  (A small cgroupfs read each.) */
static bool exec_oom_killed(struct ct_exec *x)
{
	uint64_t n = 0;

	return be_cg_oom_kills(x->cg->cg, &n) == 0 && n > x->oom0;
}

static bool exec_pids_limited(struct ct_exec *x)
{
	uint64_t n = 0;

	return be_cg_fork_fails(x->cg->cg, &n) == 0 && n > x->forkf0;
}

/* Status known: parse it; complete once the pipes are closed too. */
static void exec_maybe_done(struct ct_exec *x)
{
	struct ev_loop *loop = x->sb->be->host->loop;
	const char *s = x->st.data ? x->st.data : "";
	struct dsec_err err;
	uint64_t denied, total;
	int st, e, n;

	if (x->st_fd >= 0)
		return;
	if (x->stream && !strncmp(s, "pid ", 4) && strchr(s, '\n'))
		s = strchr(s, '\n') + 1;	/* exec_start's helper says the pid first */
	if (!strncmp(s, "err ", 4) && sscanf(s, "err %d", &e) == 1 && strchr(s + 4, ' ')) {
		const char *msg = strchr(s + 4, ' ') + 1;

		dsec_err_setc(&err, ct_start_code(e, msg), e,
			      "cannot run the command in sandbox '%s': %.*s", x->sb->id,
			      (int)strcspn(msg, "\n"), msg);
		return exec_finish(x, -e, &err);
	}
	if ((n = sscanf(s, "st %d %" SCNu64 " %" SCNu64, &st, &denied, &total)) < 1) {
		dsec_err_setc(&err, DSEC_E_BACKEND, EIO,
			      "cannot run the command in sandbox '%s': the helper died", x->sb->id);
		return exec_finish(x, -EIO, &err);
	}
	/* The calls the filter refused: the init's line has the sandbox's
	 * total too, an exec helper's only its command's own (ct_exec.h). */
	if (n >= 2)
		ct_count_cmd(x->sb, x->res, denied, x->pid > 0);
	if (n == 3)
		ct_count_init(x->sb, total);
	x->reported = n >= 2 && x->pid > 0;
	if (WIFEXITED(st)) {
		x->res->exit_code = WEXITSTATUS(st);
		x->res->signal = 0;
	} else {
		x->res->exit_code = -1;
		x->res->signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
	}
	x->res->oom_killed = exec_oom_killed(x);
	x->res->pids_limited = exec_pids_limited(x);
	if (x->out_fd < 0 && x->err_fd < 0 && (x->reaped || x->reported))
		return exec_finish(x, 0, NULL);
	/* Something left in the background still holds a pipe: a short grace. */
	ev_timer_stop(loop, &x->timer);
	ev_timer_set(&x->timer, CT_GRACE, 0);
	ev_timer_start(loop, &x->timer);
}

static void exec_pipe(struct ct_exec *x, ev_io *w, int *fd, struct dsec_buf *b, bool *trunc)
{
	if (be_drain(*fd, x->cap, b, trunc)) {
		ev_io_stop(x->sb->be->host->loop, w);
		close(*fd);
		*fd = -1;
		exec_maybe_done(x);
	}
}

static void exec_out_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ct_exec *x = dsec_container_of(w, struct ct_exec, out_w);

	exec_pipe(x, w, &x->out_fd, &x->res->out, &x->res->out_truncated);
}

static void exec_err_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ct_exec *x = dsec_container_of(w, struct ct_exec, err_w);

	exec_pipe(x, w, &x->err_fd, &x->res->err, &x->res->err_truncated);
}

static void exec_st_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ct_exec *x = dsec_container_of(w, struct ct_exec, st_w);
	char buf[1024];
	ssize_t n = read(x->st_fd, buf, sizeof(buf));

	if (n > 0) {
		if (x->st.len < 4096)
			dsec_buf_add(&x->st, buf, (size_t)n);
		if (x->stream && x->stream->pending_sig)
			xstream_pid_known(x);
		return;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	ev_io_stop(loop, w);
	close(x->st_fd);
	x->st_fd = -1;
	exec_maybe_done(x);
}

static void exec_child_cb(struct ev_loop *loop, struct be_child *c)
{
	struct ct_exec *x = dsec_container_of(c, struct ct_exec, cw);

	(void)loop;
	x->reaped = true;
	exec_maybe_done(x);
}

static void exec_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct ct_exec *x = dsec_container_of(w, struct ct_exec, timer);
	struct dsec_err err;

	if (x->st_fd < 0) {
		/* Exited; the grace for the pipes is over. */
		if (x->out_fd >= 0)
			be_drain(x->out_fd, x->cap, &x->res->out, &x->res->out_truncated);
		if (x->err_fd >= 0)
			be_drain(x->err_fd, x->cap, &x->res->err, &x->res->err_truncated);
		return exec_finish(x, 0, NULL);
	}
	if (!x->killed) {
		x->res->timed_out = true;
		exec_kill(x);
		ev_timer_set(w, CT_KILL_GRACE, 0);
		ev_timer_start(loop, w);
		return;
	}
	dsec_err_setc(&err, DSEC_E_BACKEND, EIO, "a command in sandbox '%s' did not stop",
		      x->sb->id);
	exec_finish(x, -EIO, &err);
}

/* A command may start in sb: 0, or -errno with *err. */
int exec_can_start(const struct ct_sb *sb, struct dsec_err *err)
{
	if (sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT, "sandbox '%s' is being destroyed",
				     sb->id);
	if (sb->paused)
		return dsec_err_setc(err, DSEC_E_INVALID, EBUSY,
				     "sandbox '%s' is paused: resume it first", sb->id);
	return 0;
}

/* Starts the helper in exec mode with fds[0..2] (the command's stdin,
 * stdout, stderr; fds has room for 6 + BE_CG_MAXH), status pipe st and the
 * descriptors of the exec's cgroup cg (be_cg_export's, for the call);
 * -1 with errno. */
pid_t exec_spawn(struct ct_sb *sb, char **argv, char **env, int *fds, int st,
		 const struct be_cg *cg)
{
	int cgfds[BE_CG_MAXH], ncg, root, pidfd, e;
	char desc[256];
	pid_t pid;

	if ((e = ct_init_fds(sb, &pidfd, &root)) < 0) {
		errno = -e;
		return -1;
	}
	if ((ncg = be_cg_export(cg, desc, sizeof(desc), cgfds)) < 0) {
		close(root);
		close(pidfd);
		errno = -ncg;
		return -1;
	}
	fds[3] = st;
	fds[4] = pidfd;
	fds[5] = root;
	for (int k = 0; k < ncg; k++)
		fds[6 + k] = cgfds[k];
	pid = spawn_helper(sb->be, argv, env, fds, 6 + ncg, 0, NULL);
	e = errno;
	close(root);
	close(pidfd);
	be_cg_close_fds(cgfds, ncg);
	errno = e;
	return pid;
}

/* An exec's helper is running: watch its status pipe, its exit and the
 * timeout (seconds, <= 0 = the configured one), and count it as running. */
void exec_track(struct ct_exec *x, double timeout)
{
	struct ct_sb *sb = x->sb;
	struct ct_be *be = sb->be;
	struct ev_loop *loop = be->host->loop;

	dsec_set_nonblock(x->st_fd, true);
	ev_io_init(&x->st_w, exec_st_cb, x->st_fd, EV_READ);
	ev_io_start(loop, &x->st_w);
	ev_timer_init(&x->timer, exec_timer_cb, timeout > 0 ? timeout : be->conf.timeout, 0);
	ev_timer_start(loop, &x->timer);
	if (x->pid > 0)
		be_child_start(loop, &x->cw, x->pid, exec_child_cb);
	else
		x->reaped = true;	/* the init reaps what it started */
	x->next = sb->execs;
	sb->execs = x;
	sb->busy++;
	be->running++;
}

static const char *env_key_end(const char *kv)
{
	const char *eq = strchr(kv, '=');

	return eq ? eq : kv + strlen(kv);
}

/* Later entries replace earlier ones with the same key. */
void env_merge(char ***v, size_t *n, const char *const *add)
{
	for (size_t i = 0; add && add[i]; i++) {
		size_t kl = (size_t)(env_key_end(add[i]) - add[i]);
		size_t j;

		for (j = 0; j < *n; j++)
			if (!strncmp((*v)[j], add[i], kl) && (*v)[j][kl] == '=')
				break;
		if (j == *n) {
			*v = xrealloc(*v, (*n + 2) * sizeof(**v));
			(*n)++;
		}
		(*v)[j] = (char *)add[i];
		(*v)[*n] = NULL;
	}
}

/* Puts the helper's exec-mode arguments before "--" into argv (room for
 * 16); returns how many. */
size_t exec_args(const struct ct_sb *sb, char **argv, const char *cwd, char *desc,
		 struct exec_nums *n)
{
	const struct ct_be *be = sb->be;
	size_t i = 0;

	snprintf(n->uid, sizeof(n->uid), "%" PRIu64, sb->uid);
	snprintf(n->gid, sizeof(n->gid), "%" PRIu64, sb->gid);
	snprintf(n->nofile, sizeof(n->nofile), "%" PRIu64,
		 sb->lim.nofile ? (uint64_t)sb->lim.nofile : be->conf.nofile);
	argv[i++] = (char *)CT_HELPER;
	argv[i++] = (char *)"exec";
	argv[i++] = (char *)"--uid";
	argv[i++] = n->uid;
	argv[i++] = (char *)"--gid";
	argv[i++] = n->gid;
	argv[i++] = (char *)"--cwd";
	argv[i++] = (char *)cwd;
	argv[i++] = (char *)"--nofile";
	argv[i++] = n->nofile;
	argv[i++] = (char *)"--cg";
	argv[i++] = desc;
	argv[i++] = (char *)"--userns";
	argv[i++] = (char *)(sb->ubase ? "1" : "0");
	if (sb->deny) {
		argv[i++] = (char *)"--deny";
		argv[i++] = sb->deny;
	}
	return i;
}

/* Every command's environment starts with these. */
const char *const base_env[] = {
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root", "HOSTNAME=sandbox", "LANG=C.UTF-8", "TERM=dumb", NULL };

/* Asks the sandbox's init to start cmd (ct_exec.h): stdin in (-1: none),
 * stdout, stderr and status pipes, the exec's group cg.  0, or -errno when
 * the caller should start it through the exec helper instead (request too
 * large, socket full, init gone). */
static int exec_via_init(struct ct_sb *sb, char *const *cmd, char *const *env, const char *cwd,
			 struct be_cg *cg, int in, int out, int errfd, int st)
{
	struct ct_xmsg h = { .magic = CT_XMSG_MAGIC, .uid = (uint32_t)sb->uid,
			     .gid = (uint32_t)sb->gid };
	int fds[4 + BE_CG_MAXH], procs[BE_CG_MAXH], n = 0, ncg, rc;
	struct dsec_buf b;

	if ((ncg = be_cg_open_procs(cg, procs)) < 0)
		return ncg;

	h.flags = (in >= 0 ? CT_X_STDIN : 0) | (sb->ubase ? CT_X_USERNS : 0);
	h.nofile = sb->lim.nofile ? (uint64_t)sb->lim.nofile : sb->be->conf.nofile;
	while (cmd[h.argc])
		h.argc++;
	while (env[h.envc])
		h.envc++;
	dsec_buf_init(&b);
	dsec_buf_add(&b, &h, sizeof(h));
	dsec_buf_add(&b, cwd, strlen(cwd) + 1);
	for (uint32_t i = 0; i < h.argc && b.len <= CT_XMSG_MAX; i++)
		dsec_buf_add(&b, cmd[i], strlen(cmd[i]) + 1);
	for (uint32_t i = 0; i < h.envc && b.len <= CT_XMSG_MAX; i++)
		dsec_buf_add(&b, env[i], strlen(env[i]) + 1);
	fds[n++] = out;
	fds[n++] = errfd;
	fds[n++] = st;
	if (in >= 0)
		fds[n++] = in;
	for (int i = 0; i < ncg; i++)
		fds[n++] = procs[i];
	rc = b.len > CT_XMSG_MAX ? -EMSGSIZE : be_send_fds(sb->ctl, b.data, b.len, fds, n,
							    MSG_DONTWAIT);
	dsec_buf_free(&b);
	for (int i = 0; i < ncg; i++)
		close(procs[i]);
	if (rc < 0 && rc != -EMSGSIZE && rc != -EAGAIN && rc != -ENOBUFS) {
		/* The init is gone (or never served): stop asking it. */
		ct_ctl_close(sb);
	}
	return rc;
}

int ct_exec(void *vsb, const struct dsec_exec_req *req, struct dsec_exec_res *res,
	    dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct ct_sb *sb = vsb;
	struct ct_be *be = sb->be;
	struct ev_loop *loop = be->host->loop;
	_cleanup_free_ char **env = NULL;
	_cleanup_free_ char **argv = NULL;
	size_t nenv = 0, nargv = 0, i = 0, cmd0;
	char desc[256], name[32];
	struct exec_nums nums;
	int po[2] = { -1, -1 }, pe[2] = { -1, -1 }, ps[2] = { -1, -1 };
	int in = -1, fds[6 + BE_CG_MAXH], rc;
	struct ct_cgref *spare = NULL;
	struct be_cg *cg = NULL;
	uint64_t oom0, forkf0;
	struct ct_exec *x;
	pid_t pid;

	if ((rc = exec_can_start(sb, err)) < 0)
		return rc;
	if (!req->argv && !req->code)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "exec needs argv or code");
	if (req->argv && !req->argv[0])
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "empty argv");
	env_merge(&env, &nenv, base_env);
	env_merge(&env, &nenv, (const char *const *)sb->env);
	env_merge(&env, &nenv, req->env);
	if (!env) {
		env = xcalloc(1, sizeof(*env));
	}

	if (sb->spare) {
		spare = sb->spare;
		sb->spare = NULL;
		cg = spare->cg;
	} else {
		snprintf(name, sizeof(name), "x.%" PRIu64, ++sb->next_x);
		if ((rc = be_cg_child_light(sb->cg, name, true, &cg, err)) < 0)
			return rc;
		be_cg_close(cg);	/* kept as the spare, it holds none */
	}
	exec_counts0(cg, &oom0, &forkf0);
	be_cg_export(cg, desc, sizeof(desc), NULL);
	const char *cwd = req->cwd && *req->cwd ? req->cwd : sb->cwd;
	nargv = req->argv ? dsec_strv_len(req->argv) : 3;
	argv = xcalloc(nargv + 20, sizeof(*argv));
	i = exec_args(sb, argv, cwd, desc, &nums);
	argv[i++] = (char *)"--";
	cmd0 = i;
	if (req->argv) {
		for (size_t k = 0; k < nargv; k++)
			argv[i++] = (char *)req->argv[k];
	} else {
		argv[i++] = (char *)"/bin/sh";
		argv[i++] = (char *)"-c";
		argv[i++] = (char *)req->code;
	}
	argv[i] = NULL;

	if (req->stdin_len) {
		if ((in = memfd_create("dsec-stdin", MFD_CLOEXEC)) < 0 ||
		    dsec_write_all(in, req->stdin_data, req->stdin_len) < 0 ||
		    lseek(in, 0, SEEK_SET) < 0) {
			rc = dsec_err_set(err, errno, "cannot buffer stdin: %s", strerror(errno));
			goto fail;
		}
	}
	if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0 || pipe2(ps, O_CLOEXEC) < 0) {
		rc = dsec_err_set(err, errno, "cannot make pipes: %s", strerror(errno));
		goto fail;
	}
	fds[0] = in;
	fds[1] = po[1];
	fds[2] = pe[1];
	/* The init forks it: no helper to exec, load and enter namespaces
	 * with; the exec helper when the init cannot take it. */
	if (sb->ctl >= 0 &&
	    exec_via_init(sb, argv + cmd0, env, cwd, cg, in, po[1], pe[1], ps[1]) == 0)
		pid = 0;
	else
		pid = exec_spawn(sb, argv, env, fds, ps[1], cg);
	if (pid < 0) {
		rc = dsec_err_set(err, errno, "cannot fork: %s", strerror(errno));
		goto fail;
	}
	close(po[1]);
	close(pe[1]);
	close(ps[1]);
	if (in >= 0)
		close(in);

	x = xcalloc(1, sizeof(*x));
	x->sb = sb;
	x->res = res;
	x->done = done;
	x->arg = arg;
	x->oom0 = oom0;
	x->forkf0 = forkf0;
	if (spare) {
		x->cg = spare;
	} else {
		x->cg = xcalloc(1, sizeof(*x->cg));
		x->cg->cg = cg;
		x->cg->refs = 1;
	}
	x->pid = pid;
	x->out_fd = po[0];
	x->err_fd = pe[0];
	x->st_fd = ps[0];
	x->cap = req->output_cap ? req->output_cap : CT_DEFAULT_CAP;
	x->t0 = dsec_now_ns();
	x->left = -1;
	dsec_buf_init(&x->st);
	res->exit_code = -1;
	res->signal = 0;
	res->timed_out = res->out_truncated = res->err_truncated = false;
	dsec_set_nonblock(x->out_fd, true);
	dsec_set_nonblock(x->err_fd, true);
	ev_io_init(&x->out_w, exec_out_cb, x->out_fd, EV_READ);
	ev_io_init(&x->err_w, exec_err_cb, x->err_fd, EV_READ);
	ev_io_start(loop, &x->out_w);
	ev_io_start(loop, &x->err_w);
	exec_track(x, req->timeout);
	return 0;

fail:
	for (int k = 0; k < 2; k++) {
		if (po[k] >= 0)
			close(po[k]);
		if (pe[k] >= 0)
			close(pe[k]);
		if (ps[k] >= 0)
			close(ps[k]);
	}
	if (in >= 0)
		close(in);
	if (spare) {
		sb->spare = spare;	/* still empty */
	} else {
		be_cg_remove(cg);
		be_cg_free(cg);
	}
	return rc;
}
