/* sessions.c - the container backend: named shell sessions (be_session.c
 * does the work; this is how a session's shell starts in a sandbox).
 */
#include "ct.h"

/* ---- shell sessions (be_session.c does the work) ------------------------- */

/* Start a session's shell: container-init exec as for a command, with the
 * session's group and its marker pipe as the shell's fd 3. */
static int sess_spawn(void *ctx, struct be_cg *cg, const char *cwd, const char *const *env,
		      const char *const *cmd, int mark_w, struct be_sess_proc *p,
		      struct dsec_err *err)
{
	struct ct_sb *sb = ctx;
	_cleanup_free_ char **envv = NULL;
	size_t nenv = 0, i;
	char desc[256], a_mark[16];
	struct exec_nums nums;
	int cgfds[BE_CG_MAXH], ncg, fds[7 + BE_CG_MAXH], pp[4][2], rc, root, pidfd;
	char *argv[24];

	env_merge(&envv, &nenv, base_env);
	env_merge(&envv, &nenv, (const char *const *)sb->env);
	env_merge(&envv, &nenv, env);
	if ((ncg = be_cg_export(cg, desc, sizeof(desc), cgfds)) < 0)
		return dsec_err_set(err, -ncg, "cannot open the cgroup of a session: %s",
				    strerror(-ncg));
	if ((rc = ct_init_fds(sb, &pidfd, &root)) < 0) {
		be_cg_close_fds(cgfds, ncg);
		return dsec_err_setc(err, DSEC_E_BACKEND, -rc, "sandbox '%s' has no init: %s",
				     sb->id, strerror(-rc));
	}
	snprintf(a_mark, sizeof(a_mark), "%d", 6 + ncg);
	i = exec_args(sb, argv, cwd, desc, &nums);
	argv[i++] = (char *)"--session";
	argv[i++] = a_mark;
	argv[i++] = (char *)"--";
	argv[i++] = (char *)cmd[0];
	argv[i] = NULL;
	for (int k = 0; k < 4; k++)
		pp[k][0] = pp[k][1] = -1;
	for (int k = 0; k < 4; k++)
		if (pipe2(pp[k], O_CLOEXEC) < 0) {
			rc = dsec_err_set(err, errno, "cannot make pipes: %s", strerror(errno));
			goto out;
		}
	fds[0] = pp[0][0];
	fds[1] = pp[1][1];
	fds[2] = pp[2][1];
	fds[3] = pp[3][1];
	fds[4] = pidfd;
	fds[5] = root;
	for (int k = 0; k < ncg; k++)
		fds[6 + k] = cgfds[k];
	fds[6 + ncg] = mark_w;
	if (sb->restore_from) {
		/* A shell restored from a checkpoint (criu.c), once. */
		p->pid = ct_criu_spawn(sb, desc, fds, 7 + ncg, ncg);
		p->wait_pid = true;
		sb->restore_from = NULL;
	} else {
		p->pid = spawn_helper(sb->be, argv, envv ? envv : (char *[]){ NULL }, fds,
				      7 + ncg, 0, NULL);
	}
	if (p->pid < 0) {
		rc = dsec_err_set(err, errno, "cannot fork: %s", strerror(errno));
		goto out;
	}
	/* The session follows its shell through the status pipe; the helper
	 * itself is reaped whenever it ends. */
	be_reap(&sb->be->reap, sb->be->host->loop, p->pid);
	/* Hand our ends out; the child's ends close below. */
	p->in = dsec_steal_fd(&pp[0][1]);
	p->out = dsec_steal_fd(&pp[1][0]);
	p->err = dsec_steal_fd(&pp[2][0]);
	p->st = dsec_steal_fd(&pp[3][0]);
	rc = 0;
out:
	close(root);
	close(pidfd);
	be_cg_close_fds(cgfds, ncg);
	for (int k = 0; k < 4; k++) {
		if (pp[k][0] >= 0)
			close(pp[k][0]);
		if (pp[k][1] >= 0)
			close(pp[k][1]);
	}
	return rc;
}

/* Pool work of a session: the sandbox stays until its done has run. */
struct ct_stask {
	struct ct_sb *sb;		/* sandbox (busy while the task runs) */
	void (*work)(void *);		/* be_session's */
	void (*done)(void *);		/* be_session's */
	void *arg;			/* theirs */
};

static void stask_work(void *arg)
{
	struct ct_stask *t = arg;

	t->work(t->arg);
}

static void stask_done(void *arg)
{
	struct ct_stask *t = arg;
	struct ct_sb *sb = t->sb;

	t->done(t->arg);
	free(t);
	sb->busy--;
	sb_maybe_destroy(sb);
}

static void sess_submit(void *ctx, void (*work)(void *), void (*done)(void *), void *arg)
{
	struct ct_sb *sb = ctx;
	struct ct_stask *t = xcalloc(1, sizeof(*t));

	t->sb = sb;
	t->work = work;
	t->done = done;
	t->arg = arg;
	sb->busy++;
	ct_submit(sb->be, stask_work, stask_done, t);
}

static void sess_defer(void *ctx, dsec_be_done_fn done, void *arg, int rc,
		       const struct dsec_err *err)
{
	struct ct_sb *sb = ctx;

	defer(sb->be, done, arg, rc, err);
}

/* A shell's helper counted n more refused calls: the sandbox's. */
static void sess_denied(void *ctx, uint64_t n)
{
	ct_count_cmd(ctx, NULL, n, true);
}

static const struct be_sess_ops sess_ops = {
	.spawn = sess_spawn,
	.submit = sess_submit,
	.defer = sess_defer,
	.start_code = ct_start_code,
	.denied = sess_denied,
};

int ct_session_open(void *vsb, const struct dsec_session_spec *spec, char **name,
		    dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct ct_sb *sb = vsb;

	if (sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT, "sandbox '%s' is being destroyed",
				     sb->id);
	return be_sess_open(ct_sess_set(sb), spec, sb->cwd, name, done, arg, err);
}

struct be_sess_set *ct_sess_set(struct ct_sb *sb)
{
	if (!sb->sess)
		sb->sess = be_sess_set_new(sb->be->host->loop, &sess_ops, sb, sb->cg,
					   (unsigned)sb->be->conf.max_sessions, sb->id);
	return sb->sess;
}

int ct_session_exec(void *vsb, const char *name, const struct dsec_exec_req *req,
		    struct dsec_exec_res *res, struct dsec_be_session_res *sres,
		    dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct ct_sb *sb = vsb;

	if (!sb->sess || sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT,
				     "no session '%.80s' in sandbox '%s'", name, sb->id);
	return be_sess_exec(sb->sess, name, req, res, sres, done, arg, err);
}

int ct_session_close(void *vsb, const char *name, dsec_be_done_fn done, void *arg,
		     struct dsec_err *err)
{
	struct ct_sb *sb = vsb;

	if (!sb->sess || sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT,
				     "no session '%.80s' in sandbox '%s'", name, sb->id);
	return be_sess_close(sb->sess, name, done, arg, err);
}

void ct_session_list(void *vsb, void (*fn)(void *arg, const struct dsec_session_info *),
		     void *arg)
{
	struct ct_sb *sb = vsb;

	be_sess_list(sb->sess, fn, arg);
}
