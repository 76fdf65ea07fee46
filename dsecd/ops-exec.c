/* ops-exec.c - commands: exec, call and shell sessions. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "daemon.h"
#include "dsec.h"
#include "fs3.h"
#include "log.h"
#include "ops.h"
#include "proto.h"

/* The state of create, call, exec, exec_start and net_allow, and what
 * the session ops share with them. */
static void cmd_free(struct dsecd_req *r)
{
	dsec_strv_free(r->argv);
	free(r->code);
	dsec_strv_free(r->env);
	free(r->cwd);
	dsec_exec_res_free(&r->eres);
	dsec_strv_free(r->cenv);
	free(r->ccwd);
	dsec_strv_free(r->allow);
}

void req_run_free(struct dsecd_req *r)
{
	cmd_free(r);
	free(r->image);
	free(r->runtime);
	dsec_strv_free(r->layers);
	free(r->network);
	free(r->dns);
	dsec_strv_free(r->deny);
	dsec_strv_free(r->ienv);
	dsec_strv_free(r->grade.protect);
	dsecd_image_release(r->d, r->grade.img);
	free(r->call_id);
	if (r->labels)
		dsec_strv_free(r->labels);
}

void req_session_free(struct dsecd_req *r)
{
	cmd_free(r);
	free(r->session);
	free(r->shell);
	free(r->sname);
	free(r->sres.cwd);
}

/* Packs an exec result's entries into the open result map; caps are
 * already applied by the backend. */
static void pack_exec_res(struct dsec_pk *p, const struct dsec_exec_res *res)
{
	dsec_pk_kv_i64(p, "exit_code", res->exit_code);
	dsec_pk_kv_u64(p, "signal", (uint64_t)(res->signal > 0 ? res->signal : 0));
	dsec_pk_kv_bool(p, "timed_out", res->timed_out);
	dsec_pk_kv_bin(p, "stdout", res->out.data, res->out.len);
	dsec_pk_kv_bin(p, "stderr", res->err.data, res->err.len);
	dsec_pk_kv_bool(p, "stdout_truncated", res->out_truncated);
	dsec_pk_kv_bool(p, "stderr_truncated", res->err_truncated);
	dsec_pk_kv_double(p, "duration", res->duration);
	dsec_pk_kv_bool(p, "oom_killed", res->oom_killed);
	dsec_pk_kv_bool(p, "pids_limited", res->pids_limited);
	dsec_pk_kv_u64(p, "seccomp_denied", res->seccomp_denied);
}

/* Reads argv/code, stdin, env, cwd, timeout, output_cap (exec and call). */
int parse_exec(struct dsecd_req *r, struct dsec_err *err)
{
	struct dsecd *d = r->d;
	const msgpack_object *m = r->msg.root;
	struct dsec_exec_req *q = &r->ereq;
	int rc;

	if ((rc = dsec_get_strv_opt(m, "argv", &r->argv, err)) < 0)
		return rc;
	if ((rc = dsec_get_text_opt(m, "code", d->conf.max_frame, &r->code, err)) < 0)
		return rc;
	if (!r->argv == !r->code)
		return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EINVAL,
				     "%s needs exactly one of 'argv' or 'code'", dsecd_ops[r->op].name);
	if (r->argv && !r->argv[0])
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "field 'argv' is empty");
	if ((rc = dsec_get_bin_opt(m, "stdin", d->conf.max_frame, &q->stdin_data, &q->stdin_len,
				   err)) < 0)
		return rc;
	if ((rc = dsec_get_env_opt(m, "env", &r->env, err)) < 0 ||
	    (rc = dsec_get_str_opt(m, "cwd", &r->cwd, err)) < 0)
		return rc;
	if ((rc = parse_timeout_cap(r, err)) < 0)
		return rc;
	q->argv = (const char *const *)r->argv;
	q->code = r->code;
	q->env = (const char *const *)r->env;
	q->cwd = r->cwd;
	return 0;
}

/* Reads timeout and output_cap into r->ereq (exec, call, session_exec). */
int parse_timeout_cap(struct dsecd_req *r, struct dsec_err *err)
{
	struct dsecd *d = r->d;
	const msgpack_object *m = r->msg.root;
	struct dsec_exec_req *q = &r->ereq;
	uint64_t cap = d->conf.output_cap, max_cap = (d->conf.max_frame - REPLY_SLACK) / 2;
	int rc;

	q->timeout = d->conf.exec_timeout;
	if ((rc = dsec_get_seconds_opt(m, "timeout", &q->timeout, err)) < 0)
		return rc;
	if (q->timeout <= 0)
		q->timeout = d->conf.exec_timeout;
	if (q->timeout > d->conf.max_exec_timeout)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "timeout %.0f s is over this node's max_exec_timeout of %.0f s",
				     q->timeout, d->conf.max_exec_timeout);
	if ((rc = dsec_get_u64_opt(m, "output_cap", &cap, err)) < 0)
		return rc;
	if (cap > max_cap)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "output_cap %llu is over %llu (half of max_frame less slack)",
				     (unsigned long long)cap, (unsigned long long)max_cap);
	q->output_cap = cap ? cap : d->conf.output_cap;
	return 0;
}

/* While the daemon stops, a command that was cut off (its sandbox destroyed
 * by the shutdown, rc -ECANCELED, or its backend's shutdown) fails with
 * the same shutting_down on every backend; *e holds it.  Other errors are
 * returned as they are. */
const struct dsec_err *cut_err(struct dsecd *d, int rc, const struct dsec_err *err,
			       struct dsec_err *e)
{
	if (!d->shutting_down || (rc != -ECANCELED && err->code != DSEC_E_SHUTTING_DOWN))
		return err;
	dsec_err_setc(e, DSEC_E_SHUTTING_DOWN, ESHUTDOWN,
		      "node '%s' is shutting down: the command was cut off", d->conf.node);
	return e;
}

/* What every command's completion does first (exec, call, session_exec):
 * the command no longer runs; a failure, or a result from a sandbox lost
 * meanwhile, is the reply.  True when r has been answered so. */
static bool cmd_end(struct dsecd_req *r, int rc, const struct dsec_err *err)
{
	struct dsec_err e;

	r->d->ops_inflight--;
	if (r->sb) {
		r->sb->running--;
		dsecd_sb_touch(r->d, r->sb);
	}
	if (rc < 0) {
		reply_err(r, cut_err(r->d, rc, err, &e));
		return true;
	}
	if (r->sb)
		dsecd_sb_mark(r->sb, &r->eres);
	return reply_if_lost(r);
}

static void exec_done(void *arg, int rc, const struct dsec_err *err)
{
	struct dsecd_req *r = arg;
	struct dsec_pk p;

	if (cmd_end(r, rc, err))
		return;
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	pack_exec_res(&p, &r->eres);
	dsec_pk_end(&p);
	req_complete(r, &p);
}

/* A sandbox from a warm pool: its create's env first, then env (taken
 * over); returns the vector to use. */
static char **with_sb_env(const struct dsecd_sb *sb, char **env)
{
	size_t a, b;
	char **v;

	if (!sb->env)
		return env;
	a = dsec_strv_len((const char *const *)sb->env);
	b = env ? dsec_strv_len((const char *const *)env) : 0;
	v = xcalloc(a + b + 1, sizeof(char *));
	for (size_t i = 0; i < a; i++)
		v[i] = xstrdup(sb->env[i]);
	for (size_t i = 0; i < b; i++)
		v[a + i] = env[i];
	free(env);
	return v;
}

/* The env and cwd a warm pool's sandbox was handed over with. */
void exec_sb_defaults(struct dsecd_req *r)
{
	if (r->sb->env) {
		r->env = with_sb_env(r->sb, r->env);
		r->ereq.env = (const char *const *)r->env;
	}
	if (!r->ereq.cwd && r->sb->cwd)
		r->ereq.cwd = r->sb->cwd;
}

void op_exec(struct dsecd_req *r)
{
	struct dsec_err err;

	dsec_err_clear(&err);
	if (parse_exec(r, &err) < 0)
		return reply_err(r, &err);
	exec_sb_defaults(r);
	if (r->sb->be->ops->exec(r->sb->handle, &r->ereq, &r->eres, exec_done, r, &err) < 0)
		return reply_err(r, &err);
	r->d->ops_inflight++;
	r->sb->running++;
	r->sb->execs++;
}

/* One-shot call through the backend's own fast path. */
static void call_done(void *arg, int rc, const struct dsec_err *err)
{
	struct dsecd_req *r = arg;

	r->d->calls--;
	exec_done(arg, rc, err);
}

/* One-shot call composed of exec and destroy, once create is done. */
static void call_execd(void *arg, int rc, const struct dsec_err *err)
{
	struct dsecd_req *r = arg;

	if (r->sb->state == SB_READY || r->sb->state == SB_FAILED)
		dsecd_sb_destroy(r->d, r->sb, "call finished", NULL);
	exec_done(arg, rc, err);
}

static void call_created(void *arg, int rc, const struct dsec_err *err)
{
	struct dsecd_req *r = arg;
	struct dsecd *d = r->d;
	struct dsecd_sb *sb = r->sb;
	struct dsec_err e;

	d->ops_inflight--;
	dsec_err_clear(&e);
	if (rc < 0) {
		e = *err;
		dsec_err_prefix(&e, "cannot create %s sandbox", r->be->name);
		sb->handle = NULL;
	} else if (d->shutting_down) {
		dsec_err_setc(&e, DSEC_E_SHUTTING_DOWN, ESHUTDOWN, "node '%s' is shutting down",
			      d->conf.node);
	} else {
		dsecd_sb_ready(d, sb);
		if (sb->be->ops->exec(sb->handle, &r->ereq, &r->eres, call_execd, r, &e) == 0) {
			d->ops_inflight++;
			sb->running++;
			sb->execs++;
			return;
		}
	}
	dsecd_sb_destroy(d, sb, rc < 0 ? "create failed" : "call not started", NULL);
	reply_err(r, &e);
}

void op_call(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	struct dsec_err err;

	dsec_err_clear(&err);
	if (parse_spec(r, &err) < 0 || parse_exec(r, &err) < 0 || check_capacity(d, &err) < 0)
		return reply_err(r, &err);
	if (!r->be->ops->call) {
		struct dsecd_sb *sb = dsecd_sb_new(d, r->be);
		/* Long enough for the command; 0 leaves the timeout to the backend. */
		sb->ttl = (r->ereq.timeout > 0 ? r->ereq.timeout : d->conf.max_exec_timeout) + 60;
		sb->runtime = r->runtime ? xstrdup(r->runtime) : NULL;
		sb->image = r->image ? xstrdup(r->image) : NULL;
		dsecd_image_use(r->d, sb->image, 1);
		dsecd_sb_ref(sb);
		r->sb = sb;
		r->spec.id = sb->id;
		if (start_create(r, call_created, &err) < 0) {
			dsecd_sb_destroy(d, sb, "create failed", NULL);
			return reply_err(r, &err);
		}
		return;
	}
	r->call_id = xasprintf("%s:%016" PRIx64, d->conf.node, d->next_serial++);
	r->spec.id = r->call_id;
	if (dsecd_backend_spec_check(r->be, &r->spec, &err) < 0 ||
	    r->be->ops->call(r->be->be, &r->spec, &r->ereq, &r->eres, call_done, r, &err) < 0)
		return reply_err(r, &err);
	d->ops_inflight++;
	d->calls++;
}

/* ---- shell sessions ------------------------------------------------------ */

/* Checks that r's sandbox's backend has sessions and reads 'session'
 * (required when need_name).  True when r goes on; false when it was
 * answered. */
static bool session_begin(struct dsecd_req *r, bool need_name)
{
	struct dsec_err err;
	int rc;

	dsec_err_clear(&err);
	if (!r->sb->be->ops->session_open) {
		dsec_err_setc(&err, DSEC_E_UNSUPPORTED, ENOTSUP, "backend '%s' has no shell sessions",
			      r->sb->be->name);
		goto fail;
	}
	rc = dsec_get_str(r->msg.root, "session", &r->session, &err);
	if (rc == -ENOENT && need_name)
		dsec_err_setc(&err, DSEC_E_BAD_REQUEST, EINVAL, "%s needs field 'session'",
			      dsecd_ops[r->op].name);
	else if (rc == 0 || rc == -ENOENT)
		return true;
fail:
	reply_err(r, &err);
	return false;
}

/* session_open replies {id, session}, session_close {}. */
static void session_done(void *arg, int rc, const struct dsec_err *err)
{
	struct dsecd_req *r = arg;
	bool open = r->op == DSEC_OP_SESSION_OPEN;
	struct dsec_pk p;

	r->d->ops_inflight--;
	if (rc < 0)
		return reply_err(r, err);
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	if (open) {
		dsec_pk_kv_str(&p, "id", r->sb->id);
		dsec_pk_kv_str(&p, "session", r->sname);
	}
	dsec_pk_end(&p);
	req_complete(r, &p);
}

void op_session_open(struct dsecd_req *r)
{
	const msgpack_object *m = r->msg.root;
	struct dsec_session_spec spec;
	struct dsec_err err;
	int rc;

	if (!session_begin(r, false))
		return;
	dsec_err_clear(&err);
	if ((rc = dsec_get_str_opt(m, "shell", &r->shell, &err)) < 0 ||
	    (rc = dsec_get_env_opt(m, "env", &r->cenv, &err)) < 0 ||
	    (rc = dsec_get_str_opt(m, "cwd", &r->ccwd, &err)) < 0)
		return reply_err(r, &err);
	r->cenv = with_sb_env(r->sb, r->cenv);
	spec.name = r->session;
	spec.shell = r->shell;
	spec.env = (const char *const *)r->cenv;
	spec.cwd = r->ccwd ? r->ccwd : r->sb->cwd;
	if (r->sb->be->ops->session_open(r->sb->handle, &spec, &r->sname, session_done, r,
					 &err) < 0)
		return reply_err(r, &err);
	r->d->ops_inflight++;
}

static void session_exec_done(void *arg, int rc, const struct dsec_err *err)
{
	struct dsecd_req *r = arg;
	struct dsec_pk p;

	if (cmd_end(r, rc, err))
		return;
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	pack_exec_res(&p, &r->eres);
	dsec_pk_kv_str(&p, "cwd", r->sres.cwd ? r->sres.cwd : "");
	dsec_pk_kv_bool(&p, "reset", r->sres.reset);
	dsec_pk_kv_bool(&p, "ended", r->sres.ended);
	dsec_pk_end(&p);
	req_complete(r, &p);
}

void op_session_exec(struct dsecd_req *r)
{
	struct dsec_err err;
	int rc;

	if (!session_begin(r, true))
		return;
	dsec_err_clear(&err);
	if ((rc = dsec_get_text(r->msg.root, "cmd", r->d->conf.max_frame, &r->code, &err)) < 0) {
		if (rc == -ENOENT)
			dsec_err_setc(&err, DSEC_E_BAD_REQUEST, EINVAL, "session_exec needs field 'cmd'");
		return reply_err(r, &err);
	}
	if (parse_timeout_cap(r, &err) < 0)
		return reply_err(r, &err);
	r->ereq.code = r->code;
	if (!r->sb->be->ops->session_exec ||
	    r->sb->be->ops->session_exec(r->sb->handle, r->session, &r->ereq, &r->eres,
					 &r->sres, session_exec_done, r, &err) < 0)
		return reply_err(r, &err);
	r->d->ops_inflight++;
	r->sb->running++;
	r->sb->execs++;
}

void op_session_close(struct dsecd_req *r)
{
	struct dsec_err err;

	if (!session_begin(r, true))
		return;
	dsec_err_clear(&err);
	if (!r->sb->be->ops->session_close ||
	    r->sb->be->ops->session_close(r->sb->handle, r->session, session_done, r,
					  &err) < 0)
		return reply_err(r, &err);
	r->d->ops_inflight++;
}
