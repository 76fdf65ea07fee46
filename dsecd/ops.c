/* ops.c - one handler per protocol op.
 *
 * A request is parsed strictly, checked for version and op, then handed to
 * its handler.  Handlers start backend work and return; the backend's done
 * callback packs the reply.  Every request ends in exactly one reply, ok or
 * error, through reply_ok()/reply_err(), which also free it.
 */
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
#include "proto.h"
#include "snap.h"

#define REPLY_SLACK DSECD_REPLY_SLACK
#define DSECD_MAX_DENY 256		/* seccomp_deny entries in one create */

struct dsecd_req {
	struct dsecd *d;		/* the daemon */
	struct dsecd_conn *conn;	/* where the reply goes */
	struct dsec_msg msg;		/* the parsed request */
	enum dsec_op op;		/* its op */
	struct dsecd_backend *be;	/* backend (create, call) */
	struct dsecd_sb *sb;		/* sandbox it holds a ref on, or NULL */
	/* exec and call */
	char **argv;			/* argv or NULL */
	char *code;			/* code or NULL */
	char **env;			/* exec env */
	char *cwd;			/* exec cwd */
	struct dsec_exec_req ereq;	/* what the backend gets */
	struct dsec_exec_res eres;	/* what it fills */
	/* create and call */
	char *image, *runtime, *ccwd;	/* create fields */
	char **cenv;			/* create env */
	char **layers;			/* create: images stacked over image, bottom first */
	char *network, *dns;		/* create: network mode and resolver */
	char **deny;			/* create: seccomp_deny */
	char **allow;			/* create and net_allow: the allowlist */
	char **ienv;			/* create: the image's env, then the request's */
	dsec_be_done_fn create_cb;	/* create's completion (create or call) */
	struct dsec_be_spec spec;	/* what the backend gets */
	/* files */
	char *call_id;			/* id given to a one-shot call */
	char *path;			/* file path */
	struct dsec_buf data;		/* file_read result */
	struct dsec_file_req freq;	/* the other file ops: what the backend gets */
	struct dsec_file_res fres;	/* what it fills */
	uint64_t t0;			/* receive time, ns */
	struct dsecd_req *gnext;	/* sb->gate link */
	/* shell sessions */
	char *session;			/* session name asked for */
	char *shell;			/* session_open shell */
	char *sname;			/* name the backend gave (session_open) */
	struct dsec_be_session_res sres;	/* session_exec result */
	struct dsecd_snap *snap;	/* snapshot: its state, or NULL */
	/* chunk_get */
	char *okind, *odigest;		/* object asked for */
	int orc;			/* 0 or -errno of the pool's read */
	struct dsec_err oerr;		/* why */
};

static void rerun(struct dsecd_req *r);
static void snap_free(struct dsecd_snap *s);

static void req_free(struct dsecd_req *r)
{
	if (r->sb)
		dsecd_sb_unref(r->d, r->sb);
	dsec_msg_free(&r->msg);
	dsec_strv_free(r->argv);
	free(r->code);
	dsec_strv_free(r->env);
	free(r->cwd);
	dsec_exec_res_free(&r->eres);
	free(r->image);
	free(r->runtime);
	free(r->ccwd);
	dsec_strv_free(r->cenv);
	dsec_strv_free(r->layers);
	free(r->network);
	free(r->dns);
	dsec_strv_free(r->allow);
	dsec_strv_free(r->deny);
	dsec_strv_free(r->ienv);
	free(r->call_id);
	free(r->path);
	dsec_buf_free(&r->data);
	dsec_file_res_free(&r->fres);
	free(r->session);
	free(r->shell);
	free(r->sname);
	free(r->sres.cwd);
	snap_free(r->snap);
	free(r->okind);
	free(r->odigest);
	free(r);
}

static void send_pk(struct dsecd_req *r, struct dsec_pk *p)
{
	size_t len;
	void *data = dsec_pk_detach(p, &len);

	log_debug("op %s done in %.3f ms", dsec_ops[r->op].name,
		  (double)(dsec_now_ns() - r->t0) / 1e6);
	dsecd_server_reply(r->d->server, r->conn, data, len);
	req_free(r);
}

static void reply_err(struct dsecd_req *r, const struct dsec_err *err)
{
	struct dsec_err lost;
	struct dsec_pk p;

	/* Whatever failed on a sandbox that is lost failed because it is. */
	if (r->sb && r->sb->state == SB_FAILED && err->code != DSEC_E_SANDBOX_LOST) {
		dsecd_sb_lost_err(r->sb, &lost);
		err = &lost;
	}
	dsec_pk_init(&p);
	dsec_pk_reply_err(&p, err);
	send_pk(r, &p);
}

/* A command's result from a sandbox lost meanwhile is not the command's:
 * true when r got sandbox_lost instead. */
static bool reply_if_lost(struct dsecd_req *r)
{
	struct dsec_err err;

	if (!r->sb || r->sb->state != SB_FAILED)
		return false;
	dsecd_sb_lost_err(r->sb, &err);
	reply_err(r, &err);
	return true;
}

/* Packs an exec result (and room for `extra` more entries); caps are
 * already applied by the backend. */
static void pack_exec_res(struct dsec_pk *p, const struct dsec_exec_res *res, size_t extra)
{
	dsec_pk_reply_ok(p, 9 + extra);
	dsec_pk_kv_i64(p, "exit_code", res->exit_code);
	dsec_pk_kv_u64(p, "signal", (uint64_t)(res->signal > 0 ? res->signal : 0));
	dsec_pk_kv_bool(p, "timed_out", res->timed_out);
	dsec_pk_kv_bin(p, "stdout", res->out.data, res->out.len);
	dsec_pk_kv_bin(p, "stderr", res->err.data, res->err.len);
	dsec_pk_kv_bool(p, "stdout_truncated", res->out_truncated);
	dsec_pk_kv_bool(p, "stderr_truncated", res->err_truncated);
	dsec_pk_kv_double(p, "duration", res->duration);
	dsec_pk_kv_bool(p, "oom_killed", res->oom_killed);
}

static void count_session(void *arg, const struct dsec_session_info *i)
{
	(*(size_t *)arg)++;
}

static void pack_session(void *arg, const struct dsec_session_info *i)
{
	struct dsec_pk *p = arg;

	msgpack_pack_map(&p->pk, 5);
	dsec_pk_kv_str(p, "name", i->name);
	dsec_pk_kv_str(p, "shell", i->shell);
	dsec_pk_kv_str(p, "cwd", i->cwd);
	dsec_pk_kv_bool(p, "running", i->running);
	dsec_pk_kv_u64(p, "commands", i->commands);
}

/* A sandbox's map; with_sessions adds "sessions" (info on one sandbox). */
static void pack_sandbox(struct dsecd *d, struct dsec_pk *p, const struct dsecd_sb *sb,
			 bool with_sessions)
{
	static const char *const states[] = { "creating", "running", "destroying", "failed" };
	void (*list)(void *, void (*)(void *, const struct dsec_session_info *), void *) =
		sb->handle && sb->state == SB_READY ? sb->be->ops->session_list : NULL;

	msgpack_pack_map(&p->pk, 12 + with_sessions);
	if (with_sessions) {
		size_t n = 0;

		if (list)
			list(sb->handle, count_session, &n);
		dsec_pk_str(p, "sessions");
		msgpack_pack_array(&p->pk, n);
		if (list)
			list(sb->handle, pack_session, p);
	}
	dsec_pk_kv_str(p, "id", sb->id);
	dsec_pk_kv_str(p, "backend", sb->be->name);
	dsec_pk_kv_str(p, "runtime", sb->runtime ? sb->runtime : "");
	dsec_pk_kv_str(p, "image", sb->image ? sb->image : "");
	dsec_pk_kv_str(p, "state", sb->state == SB_READY && sb->paused ? "paused" :
		       states[sb->state]);
	dsec_pk_kv_double(p, "created", sb->created);
	dsec_pk_kv_double(p, "ttl", sb->ttl);
	dsec_pk_kv_double(p, "idle_ttl", sb->idle_ttl);
	dsec_pk_kv_double(p, "idle", ev_now(d->loop) - sb->last_used);
	dsec_pk_kv_u64(p, "execs", sb->execs);
	dsec_pk_kv_u64(p, "running", sb->running);
	dsec_pk_kv_u64(p, "streams", sb->nstreams);
}

/* Fails the request if the node cannot take another sandbox. */
static int check_capacity(struct dsecd *d, struct dsec_err *err)
{
	/* Sandboxes being created are in the table already; one-shot calls
	 * hold a sandbox for their duration too. */
	if (d->nsandboxes + d->calls >= d->conf.max_sandboxes)
		return dsec_err_setc(err, DSEC_E_CAPACITY, EAGAIN,
				     "node '%s' is at its limit of %llu sandboxes", d->conf.node,
				     (unsigned long long)d->conf.max_sandboxes);
	return 0;
}

/* Reads backend, image, runtime, env, cwd and limits (create and call). */
static int parse_spec(struct dsecd_req *r, struct dsec_err *err)
{
	struct dsecd *d = r->d;
	const msgpack_object *m = r->msg.root, *lim;
	_cleanup_free_ char *backend = NULL;
	int rc;

	if ((rc = dsec_get_str(m, "backend", &backend, err)) < 0 && rc != -ENOENT)
		return rc;
	r->be = dsecd_backend_find(d, backend ? backend : d->conf.default_backend);
	if (!r->be)
		return dsec_err_setc(err, DSEC_E_NO_BACKEND, ENOENT,
				     "backend '%s' is not loaded on node '%s'",
				     backend ? backend : d->conf.default_backend, d->conf.node);
	if (((rc = dsec_get_str(m, "image", &r->image, err)) < 0 && rc != -ENOENT) ||
	    ((rc = dsec_get_str(m, "runtime", &r->runtime, err)) < 0 && rc != -ENOENT) ||
	    ((rc = dsec_get_env(m, "env", &r->cenv, err)) < 0 && rc != -ENOENT))
		return rc;
	if (r->op == DSEC_OP_CREATE &&
	    (rc = dsec_get_str(m, "cwd", &r->ccwd, err)) < 0 && rc != -ENOENT)
		return rc;
	if ((rc = dsec_get_strv(m, "layers", &r->layers, err)) < 0 && rc != -ENOENT)
		return rc;
	if (r->layers && !r->layers[0]) {
		dsec_strv_free(r->layers);	/* [] = none */
		r->layers = NULL;
	}
	if (r->layers) {
		if (!r->image || !*r->image)
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "field 'layers' needs an image to stack them on");
		if (!(r->be->ops->caps & DSEC_BE_CAP_LAYERS))
			return dsec_err_setc(err, DSEC_E_UNSUPPORTED, ENOTSUP,
					     "backend '%s' does not run images from layers",
					     r->be->name);
		/* Each image has a layer at least (fs3 counts them exactly). */
		if (dsec_strv_len((const char *const *)r->layers) >= FS3_STACK_MAX)
			return dsec_err_setc(err, DSEC_E_INVALID, E2BIG,
					     "field 'layers' has %zu images: a stack takes at most %d "
					     "layers", dsec_strv_len((const char *const *)r->layers),
					     FS3_STACK_MAX);
	}
	if (((rc = dsec_get_str(m, "network", &r->network, err)) < 0 && rc != -ENOENT) ||
	    ((rc = dsec_get_strv(m, "allow", &r->allow, err)) < 0 && rc != -ENOENT) ||
	    ((rc = dsec_get_str(m, "dns", &r->dns, err)) < 0 && rc != -ENOENT) ||
	    ((rc = dsec_get_strv(m, "seccomp_deny", &r->deny, err)) < 0 && rc != -ENOENT))
		return rc;
	if (r->deny && dsec_strv_len((const char *const *)r->deny) > DSECD_MAX_DENY)
		return dsec_err_setc(err, DSEC_E_INVALID, E2BIG,
				     "seccomp_deny lists more than %d system calls", DSECD_MAX_DENY);
	lim = dsec_map_get(m, "limits");
	if (lim && lim->type != MSGPACK_OBJECT_NIL) {
		uint64_t v;
		if (lim->type != MSGPACK_OBJECT_MAP)
			return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EINVAL,
					     "field 'limits' must be a map");
		struct dsec_be_limits *l = &r->spec.limits;
		if ((rc = dsec_get_double(lim, "cpus", &l->cpus, err)) < 0 && rc != -ENOENT)
			return rc;
		if (l->cpus < 0 || l->cpus > 4096)
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "limits.cpus must be between 0 and 4096");
		if ((rc = dsec_get_u64(lim, "memory", &l->memory, err)) < 0 && rc != -ENOENT)
			return rc;
		if ((rc = dsec_get_u64(lim, "disk", &l->disk, err)) < 0 && rc != -ENOENT)
			return rc;
		v = 0;
		if ((rc = dsec_get_u64(lim, "pids", &v, err)) < 0 && rc != -ENOENT)
			return rc;
		if (v > UINT32_MAX)
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "limits.pids is too large");
		l->pids = (uint32_t)v;
		v = 0;
		if ((rc = dsec_get_u64(lim, "nofile", &v, err)) < 0 && rc != -ENOENT)
			return rc;
		if (v > UINT32_MAX)
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "limits.nofile is too large");
		l->nofile = (uint32_t)v;
		v = 0;
		if ((rc = dsec_get_u64(lim, "cpu_weight", &v, err)) < 0 && rc != -ENOENT)
			return rc;
		if (v > 10000)
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "limits.cpu_weight must be between 1 and 10000");
		r->spec.cpu_weight = (uint32_t)v;
	}
	r->spec.image = r->image;
	r->spec.runtime = r->runtime;
	r->spec.env = (const char *const *)r->cenv;
	r->spec.cwd = r->ccwd;
	r->spec.network = r->network;
	r->spec.allow = (const char *const *)r->allow;
	r->spec.dns = r->dns;
	r->spec.seccomp_deny = (const char *const *)r->deny;
	return 0;
}

static int parse_timeout_cap(struct dsecd_req *r, struct dsec_err *err);

/* Reads argv/code, stdin, env, cwd, timeout, output_cap (exec and call). */
static int parse_exec(struct dsecd_req *r, struct dsec_err *err)
{
	struct dsecd *d = r->d;
	const msgpack_object *m = r->msg.root;
	struct dsec_exec_req *q = &r->ereq;
	int rc;

	if ((rc = dsec_get_strv(m, "argv", &r->argv, err)) < 0 && rc != -ENOENT)
		return rc;
	if ((rc = dsec_get_text(m, "code", d->conf.max_frame, &r->code, err)) < 0 && rc != -ENOENT)
		return rc;
	if (!r->argv == !r->code)
		return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EINVAL,
				     "%s needs exactly one of 'argv' or 'code'", dsec_ops[r->op].name);
	if (r->argv && !r->argv[0])
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "field 'argv' is empty");
	if ((rc = dsec_get_bin(m, "stdin", d->conf.max_frame, &q->stdin_data, &q->stdin_len,
			       err)) < 0 && rc != -ENOENT)
		return rc;
	if (((rc = dsec_get_env(m, "env", &r->env, err)) < 0 && rc != -ENOENT) ||
	    ((rc = dsec_get_str(m, "cwd", &r->cwd, err)) < 0 && rc != -ENOENT))
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
static int parse_timeout_cap(struct dsecd_req *r, struct dsec_err *err)
{
	struct dsecd *d = r->d;
	const msgpack_object *m = r->msg.root;
	struct dsec_exec_req *q = &r->ereq;
	uint64_t cap = d->conf.output_cap, max_cap = (d->conf.max_frame - REPLY_SLACK) / 2;
	int rc;

	q->timeout = d->conf.exec_timeout;
	if ((rc = dsec_get_seconds(m, "timeout", &q->timeout, err)) < 0 && rc != -ENOENT)
		return rc;
	if (q->timeout <= 0)
		q->timeout = d->conf.exec_timeout;
	if (q->timeout > d->conf.max_exec_timeout)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "timeout %.0f s is over this node's max_exec_timeout of %.0f s",
				     q->timeout, d->conf.max_exec_timeout);
	if ((rc = dsec_get_u64(m, "output_cap", &cap, err)) < 0 && rc != -ENOENT)
		return rc;
	if (cap > max_cap)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "output_cap %llu is over %llu (half of max_frame less slack)",
				     (unsigned long long)cap, (unsigned long long)max_cap);
	q->output_cap = cap ? cap : d->conf.output_cap;
	return 0;
}

/* Finds the sandbox named by 'id', ready for work; takes a ref on it. */
static int get_sandbox(struct dsecd_req *r, struct dsec_err *err)
{
	_cleanup_free_ char *id = NULL;
	int rc = dsec_get_str(r->msg.root, "id", &id, err);
	struct dsecd_sb *sb;

	if (rc == -ENOENT)
		return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EINVAL, "%s needs field 'id'",
				     dsec_ops[r->op].name);
	if (rc < 0)
		return rc;
	if (!(sb = dsecd_sb_find(r->d, id, err)))
		return -ENOENT;
	if (sb->state == SB_FAILED && r->op != DSEC_OP_DESTROY)
		return dsecd_sb_lost_err(sb, err);
	if (sb->state != SB_READY && sb->state != SB_FAILED)
		return dsec_err_setc(err, DSEC_E_INVALID, EBUSY, "sandbox '%s' is still being created",
				     id);
	dsecd_sb_ref(sb);
	r->sb = sb;
	dsecd_sb_touch(r->d, sb);
	return 0;
}

/* ---- pause and resume ------------------------------------------------------
 *
 * One backend pause or resume at a time per sandbox.  While one is in
 * flight, every request that depends on the outcome (pause, resume, exec,
 * file_read, file_write) waits in sb->gate; when the backend answers they
 * all run again from the start, in order, so each sees the new state.
 * The request that started the switch gets the backend's error if it
 * failed (the others run again and may try for themselves).  exec and the
 * file operations on a paused sandbox start a resume first and wait for
 * it: paused sandboxes resume on the next request, transparently.
 */

static void gate_add(struct dsecd_sb *sb, struct dsecd_req *r)
{
	if (!sb->gate)
		sb->gate_tail = &sb->gate;
	r->gnext = NULL;
	*sb->gate_tail = r;
	sb->gate_tail = &r->gnext;
}

static void switch_done(void *arg, int rc, const struct dsec_err *err)
{
	struct dsecd_sb *sb = arg;
	struct dsecd *d = dsecd_global;
	struct dsecd_req *q = sb->gate, *first = sb->switcher;

	d->ops_inflight--;
	sb->switching = false;
	sb->switcher = NULL;
	sb->gate = NULL;
	if (rc == 0) {
		sb->paused = !sb->paused;
		log_debug("sandbox %s %s", sb->id, sb->paused ? "paused" : "resumed");
		if (sb->state == SB_READY)
			dsecd_sb_touch(d, sb);
	}
	while (q) {
		struct dsecd_req *r = q;

		q = q->gnext;
		r->gnext = NULL;
		if (r == first && rc < 0)
			reply_err(r, err);
		else
			rerun(r);
	}
	dsecd_sb_unref(d, sb);
}

/* Asks the backend to pause (or resume) r->sb; r waits for the answer in
 * the gate.  Returns 0, or -errno with *err when it could not start. */
static int start_switch(struct dsecd_req *r, bool pause, struct dsec_err *err)
{
	struct dsecd_sb *sb = r->sb;
	const struct dsec_be_ops *ops = sb->be->ops;
	int (*fn)(void *, dsec_be_done_fn, void *, struct dsec_err *) =
		pause ? ops->pause : ops->resume;
	int rc;

	if (!fn)
		return dsec_err_setc(err, DSEC_E_UNSUPPORTED, ENOTSUP,
				     "backend '%s' cannot pause or resume sandboxes", sb->be->name);
	if ((rc = fn(sb->handle, switch_done, sb, err)) < 0)
		return rc;
	r->d->ops_inflight++;
	dsecd_sb_ref(sb);
	sb->switching = true;
	sb->switcher = r;
	gate_add(sb, r);
	return 0;
}

/* For exec and the file operations, after get_sandbox: true when r can go
 * on now; false when it waits for a pause or resume (started here for a
 * paused sandbox) and will run again, or has been answered. */
static bool need_running(struct dsecd_req *r)
{
	struct dsecd_sb *sb = r->sb;
	struct dsec_err err;

	if (sb->switching) {
		gate_add(sb, r);
		return false;
	}
	if (!sb->paused)
		return true;
	log_debug("sandbox %s: resuming for %s", sb->id, dsec_ops[r->op].name);
	dsec_err_clear(&err);
	if (start_switch(r, false, &err) < 0)
		reply_err(r, &err);
	return false;
}

static void op_switch(struct dsecd_req *r)
{
	bool pause = r->op == DSEC_OP_PAUSE;
	struct dsec_err err;
	struct dsec_pk p;

	dsec_err_clear(&err);
	if (get_sandbox(r, &err) < 0)
		return reply_err(r, &err);
	if (r->sb->switching)
		return gate_add(r->sb, r);
	if (r->sb->paused != pause) {
		if (start_switch(r, pause, &err) < 0)
			return reply_err(r, &err);
		return;
	}
	/* There already (also the second time round, after the switch). */
	dsec_pk_init(&p);
	dsec_pk_reply_ok(&p, 2);
	dsec_pk_kv_str(&p, "id", r->sb->id);
	dsec_pk_kv_str(&p, "state", pause ? "paused" : "running");
	send_pk(r, &p);
}

static void op_ping(struct dsecd_req *r)
{
	struct dsec_pk p;

	dsec_pk_init(&p);
	dsec_pk_reply_ok(&p, 4);
	dsec_pk_kv_bool(&p, "pong", true);
	dsec_pk_kv_str(&p, "node", r->d->conf.node);
	dsec_pk_kv_str(&p, "version", DSEC_VERSION);
	dsec_pk_kv_u64(&p, "proto", DSEC_PROTO_VERSION);
	send_pk(r, &p);
}

struct paused_count {
	const struct dsecd_backend *be;	/* count this backend's, NULL = all */
	uint64_t n;			/* paused sandboxes */
};

static void count_paused(struct dsecd *d, struct dsecd_sb *sb, void *arg)
{
	struct paused_count *c = arg;

	if (!sb->pooled && sb->state == SB_READY && sb->paused && (!c->be || sb->be == c->be))
		c->n++;
}

/* "images": what the node's fs3 store fetched (from where) and served to
 * peers; nil without a store. */
static void pack_images(struct dsecd *d, struct dsec_pk *p)
{
	struct fs3_stats st;

	dsec_pk_str(p, "images");
	if (!d->images) {
		msgpack_pack_nil(&p->pk);
		return;
	}
	fs3_get_stats(d->images, &st);
	msgpack_pack_map(&p->pk, 5);
	dsec_pk_kv_u64(p, "fetched_objects", st.src_objects);
	dsec_pk_kv_u64(p, "fetched_bytes", st.src_bytes);
	dsec_pk_kv_u64(p, "served_objects", st.served_objects);
	dsec_pk_kv_u64(p, "served_bytes", st.served_bytes);
	dsec_pk_str(p, "sources");
	msgpack_pack_array(&p->pk, st.nsrc);
	for (size_t i = 0; i < st.nsrc; i++) {
		msgpack_pack_map(&p->pk, 3);
		dsec_pk_kv_str(p, "name", st.src[i].name);
		dsec_pk_kv_u64(p, "objects", st.src[i].objects);
		dsec_pk_kv_u64(p, "bytes", st.src[i].bytes);
	}
}

static void op_info(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	struct dsec_err err;
	struct dsec_pk p;
	size_t nb = 0;

	dsec_err_clear(&err);
	if (dsec_has(r->msg.root, "id")) {
		if (get_sandbox(r, &err) < 0 && err.code != DSEC_E_INVALID &&
		    err.code != DSEC_E_SANDBOX_LOST)
			return reply_err(r, &err);
		if (!r->sb) {
			/* A sandbox being created, or lost, is still worth
			 * describing. */
			_cleanup_free_ char *id = NULL;
			dsec_get_str(r->msg.root, "id", &id, NULL);
			struct dsecd_sb *sb = id ? dsecd_sb_find(d, id, &err) : NULL;
			if (!sb)
				return reply_err(r, &err);
			dsecd_sb_ref(sb);
			r->sb = sb;
		}
		dsec_pk_init(&p);
		msgpack_pack_map(&p.pk, 2);
		dsec_pk_kv_bool(&p, "ok", true);
		dsec_pk_str(&p, "result");
		pack_sandbox(d, &p, r->sb, true);
		return send_pk(r, &p);
	}
	for (struct dsecd_backend *b = d->backends; b; b = b->next)
		nb++;
	dsec_pk_init(&p);
	dsec_pk_reply_ok(&p, 13);
	dsec_pk_kv_str(&p, "version", DSEC_VERSION);
	dsec_pk_kv_str(&p, "node", d->conf.node);
	dsec_pk_kv_u64(&p, "proto", DSEC_PROTO_VERSION);
	dsec_pk_kv_u64(&p, "pid", (uint64_t)getpid());
	dsec_pk_kv_double(&p, "uptime", ev_now(d->loop) - d->started);
	dsec_pk_kv_u64(&p, "sandboxes", d->nsandboxes);
	{
		struct paused_count all = { NULL, 0 };

		dsecd_sb_foreach(d, count_paused, &all);
		dsec_pk_kv_u64(&p, "paused", all.n);
	}
	dsec_pk_kv_u64(&p, "max_sandboxes", d->conf.max_sandboxes);
	dsec_pk_kv_u64(&p, "inflight", dsecd_server_inflight(d->server));
	dsec_pk_kv_strv(&p, "listen", (const char *const *)d->conf.listen);
	dsecd_warm_pack(d, &p);
	pack_images(d, &p);
	dsec_pk_str(&p, "backends");
	msgpack_pack_array(&p.pk, nb);
	for (struct dsecd_backend *b = d->backends; b; b = b->next) {
		struct paused_count pc = { b, 0 };
		struct dsec_be_stats st;
		memset(&st, 0, sizeof(st));
		b->ops->stats(b->be, &st);
		dsecd_sb_foreach(d, count_paused, &pc);
		msgpack_pack_map(&p.pk, 9);
		dsec_pk_kv_str(&p, "name", b->name);
		dsec_pk_kv_str(&p, "description", b->ops->description ? b->ops->description : "");
		dsec_pk_kv_u64(&p, "sandboxes", b->sandboxes);
		dsec_pk_kv_u64(&p, "paused", pc.n);
		dsec_pk_kv_u64(&p, "capacity", st.capacity);
		dsec_pk_kv_u64(&p, "running", st.running);
		dsec_pk_kv_u64(&p, "pool_ready", st.pool_ready);
		dsec_pk_kv_u64(&p, "pool_target", st.pool_target);
		dsec_pk_kv_u64(&p, "calls", st.calls);
	}
	send_pk(r, &p);
}

static void list_one(struct dsecd *d, struct dsecd_sb *sb, void *arg)
{
	if (!sb->pooled)
		pack_sandbox(d, arg, sb, false);
}

static void count_one(struct dsecd *d, struct dsecd_sb *sb, void *arg)
{
	*(size_t *)arg += !sb->pooled;
}

static void op_list(struct dsecd_req *r)
{
	struct dsec_pk p;
	size_t n = 0;

	dsecd_sb_foreach(r->d, count_one, &n);
	dsec_pk_init(&p);
	dsec_pk_reply_ok(&p, 1);
	dsec_pk_str(&p, "sandboxes");
	msgpack_pack_array(&p.pk, n);
	dsecd_sb_foreach(r->d, list_one, &p);
	send_pk(r, &p);
}

static int be_create(struct dsecd_req *r, struct dsec_err *err)
{
	if (dsecd_backend_spec_check(r->be, &r->spec, err) < 0)
		return -1;
	if (r->be->ops->create(r->be->be, &r->spec, &r->sb->handle, r->create_cb, r, err) < 0) {
		r->sb->handle = NULL;
		return -1;
	}
	r->d->ops_inflight++;
	return 0;
}

/* The image's layers are mounted: the backend gets them, the image's env
 * under the request's, and its cwd and user unless the request says. */
static void image_acquired(void *arg, struct fs3_acquired *a, int rc, const struct dsec_err *err)
{
	struct dsecd_req *r = arg;
	struct dsecd *d = r->d;
	struct dsec_err e;

	dsec_err_clear(&e);
	if (rc < 0) {
		e = *err;
	} else {
		r->sb->img = a;	/* released when the sandbox is gone */
		if (d->shutting_down) {
			rc = dsec_err_setc(&e, DSEC_E_SHUTTING_DOWN, ESHUTDOWN,
					   "node '%s' is shutting down", d->conf.node);
		} else {
			r->ienv = dsecd_image_spec(&r->spec, a, r->cenv);
			if (be_create(r, &e) == 0)
				return;
			rc = e.errnum ? -e.errnum : -EIO;
		}
	}
	/* Fail the way the backend's own failure would: the create callback
	 * destroys the sandbox and replies. */
	d->ops_inflight++;
	r->create_cb(r, rc, &e);
}

/* Starts the backend's create of r->sb, done = create's completion; a
 * backend that runs images from layers gets the image acquired first.
 * Returns 0, or -1 with *err (the caller destroys r->sb and replies). */
static int start_create(struct dsecd_req *r, dsec_be_done_fn done, struct dsec_err *err)
{
	r->create_cb = done;
	if (r->image && *r->image && (r->be->ops->caps & DSEC_BE_CAP_LAYERS))
		return dsecd_image_acquire(r->d, r->image, r->layers, image_acquired, r, err) < 0
			       ? -1 : 0;
	return be_create(r, err);
}

static void create_done(void *arg, int rc, const struct dsec_err *err)
{
	struct dsecd_req *r = arg;
	struct dsecd *d = r->d;
	struct dsecd_sb *sb = r->sb;
	struct dsec_err e;
	struct dsec_pk p;

	d->ops_inflight--;
	if (rc < 0) {
		e = *err;
		dsec_err_prefix(&e, "cannot create %s sandbox", r->be->name);
		sb->handle = NULL;
		dsecd_sb_destroy(d, sb, "create failed", NULL);
		return reply_err(r, &e);
	}
	if (d->shutting_down) {
		dsecd_sb_destroy(d, sb, "daemon shutting down", NULL);
		dsec_err_setc(&e, DSEC_E_SHUTTING_DOWN, ESHUTDOWN, "node '%s' is shutting down",
			      d->conf.node);
		return reply_err(r, &e);
	}
	dsecd_sb_ready(d, sb);
	log_debug("sandbox %s ready", sb->id);
	dsec_pk_init(&p);
	dsec_pk_reply_ok(&p, 3);
	dsec_pk_kv_str(&p, "id", sb->id);
	dsec_pk_kv_str(&p, "node", d->conf.node);
	dsec_pk_kv_str(&p, "backend", r->be->name);
	send_pk(r, &p);
}

static void op_create(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	const msgpack_object *m = r->msg.root;
	struct dsec_err err;
	double ttl = d->conf.ttl, idle = d->conf.idle_ttl;
	int rc;

	dsec_err_clear(&err);
	if (parse_spec(r, &err) < 0 ||
	    ((rc = dsec_get_seconds(m, "ttl", &ttl, &err)) < 0 && rc != -ENOENT) ||
	    ((rc = dsec_get_seconds(m, "idle_ttl", &idle, &err)) < 0 && rc != -ENOENT))
		return reply_err(r, &err);
	if (ttl <= 0)
		ttl = d->conf.ttl;
	if (idle <= 0)
		idle = d->conf.idle_ttl;
	if (ttl > d->conf.max_ttl) {
		dsec_err_setc(&err, DSEC_E_INVALID, EINVAL, "ttl %.0f s is over max_ttl of %.0f s",
			      ttl, d->conf.max_ttl);
		return reply_err(r, &err);
	}
	struct dsecd_sb *sb;
	const struct dsec_be_limits *l = &r->spec.limits;

	/* A warm pool's sandbox, when the request asks for nothing it lacks. */
	if (!(l->cpus > 0 || l->memory || l->pids || l->nofile || l->disk || r->spec.cpu_weight) &&
	    !r->network && !r->allow && !r->dns && !r->deny && !r->layers &&
	    (sb = dsecd_warm_take(d, r->be, r->image))) {
		struct dsec_pk p;

		sb->ttl = ttl;
		sb->idle_ttl = idle;
		sb->runtime = r->runtime ? xstrdup(r->runtime) : NULL;
		sb->env = r->cenv;
		r->cenv = NULL;
		sb->cwd = r->ccwd;
		r->ccwd = NULL;
		sb->created = ev_now(d->loop) - d->started + d->started_wall;
		dsecd_sb_ready(d, sb);
		dsecd_sb_touch(d, sb);
		log_debug("sandbox %s handed over from a warm pool", sb->id);
		dsec_pk_init(&p);
		dsec_pk_reply_ok(&p, 3);
		dsec_pk_kv_str(&p, "id", sb->id);
		dsec_pk_kv_str(&p, "node", d->conf.node);
		dsec_pk_kv_str(&p, "backend", r->be->name);
		return send_pk(r, &p);
	}
	if (check_capacity(d, &err) < 0)
		return reply_err(r, &err);
	sb = dsecd_sb_new(d, r->be);
	sb->ttl = ttl;
	sb->idle_ttl = idle;
	sb->runtime = r->runtime ? xstrdup(r->runtime) : NULL;
	sb->image = r->image ? xstrdup(r->image) : NULL;
	dsecd_sb_ref(sb);
	r->sb = sb;
	r->spec.id = sb->id;
	if (start_create(r, create_done, &err) < 0) {
		dsecd_sb_destroy(d, sb, "create failed", NULL);
		dsec_err_prefix(&err, "cannot create %s sandbox", r->be->name);
		return reply_err(r, &err);
	}
}

/* While the daemon stops, a command that was cut off (its sandbox destroyed
 * by the shutdown, rc -ECANCELED, or its backend's shutdown) fails with
 * the same shutting_down on every backend; *e holds it.  Other errors are
 * returned as they are. */
static const struct dsec_err *cut_err(struct dsecd *d, int rc, const struct dsec_err *err,
				      struct dsec_err *e)
{
	if (!d->shutting_down || (rc != -ECANCELED && err->code != DSEC_E_SHUTTING_DOWN))
		return err;
	dsec_err_setc(e, DSEC_E_SHUTTING_DOWN, ESHUTDOWN,
		      "node '%s' is shutting down: the command was cut off", d->conf.node);
	return e;
}

static void exec_done(void *arg, int rc, const struct dsec_err *err)
{
	struct dsecd_req *r = arg;
	struct dsec_err e;
	struct dsec_pk p;

	r->d->ops_inflight--;
	if (r->sb) {
		r->sb->running--;
		dsecd_sb_touch(r->d, r->sb);
	}
	if (rc < 0)
		return reply_err(r, cut_err(r->d, rc, err, &e));
	if (reply_if_lost(r))
		return;
	dsec_pk_init(&p);
	pack_exec_res(&p, &r->eres, 0);
	send_pk(r, &p);
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
static void exec_sb_defaults(struct dsecd_req *r)
{
	if (r->sb->env) {
		r->env = with_sb_env(r->sb, r->env);
		r->ereq.env = (const char *const *)r->env;
	}
	if (!r->ereq.cwd && r->sb->cwd)
		r->ereq.cwd = r->sb->cwd;
}

static void op_exec(struct dsecd_req *r)
{
	struct dsec_err err;

	dsec_err_clear(&err);
	if (get_sandbox(r, &err) < 0)
		return reply_err(r, &err);
	if (!need_running(r))
		return;
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

static void op_call(struct dsecd_req *r)
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

static void file_done(void *arg, int rc, const struct dsec_err *err)
{
	struct dsecd_req *r = arg;
	struct dsec_pk p;

	r->d->ops_inflight--;
	if (rc < 0)
		return reply_err(r, err);
	dsec_pk_init(&p);
	if (r->op == DSEC_OP_FILE_READ) {
		dsec_pk_reply_ok(&p, 2);
		dsec_pk_kv_bin(&p, "data", r->data.data, r->data.len);
		dsec_pk_kv_u64(&p, "size", r->data.len);
	} else {
		dsec_pk_reply_ok(&p, 0);
	}
	send_pk(r, &p);
}

/* Sandbox and 'path', which every file op needs. */
static int get_file_target(struct dsecd_req *r, struct dsec_err *err)
{
	int rc;

	if (get_sandbox(r, err) < 0)
		return -EINVAL;
	free(r->path);	/* parsed before, when the request runs again after a resume */
	r->path = NULL;
	if ((rc = dsec_get_str(r->msg.root, "path", &r->path, err)) == -ENOENT)
		return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EINVAL, "%s needs field 'path'",
				     dsec_ops[r->op].name);
	return rc;
}

/* Optional 'mode' (permission bits, at most 07777); 0 when absent. */
static int get_mode(const msgpack_object *m, uint32_t *out, struct dsec_err *err)
{
	uint64_t mode = 0;
	int rc;

	if ((rc = dsec_get_u64(m, "mode", &mode, err)) < 0 && rc != -ENOENT)
		return rc;
	if (mode > 07777)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "mode %llo is not a file mode",
				     (unsigned long long)mode);
	*out = (uint32_t)mode;
	return 0;
}

/* Optional 'uid' and 'gid'; DSEC_OWNER_DEFAULT when absent. */
static int get_owner(const msgpack_object *m, struct dsec_file_req *q, struct dsec_err *err)
{
	static const char *const keys[] = { "uid", "gid" };
	int64_t *outs[] = { &q->uid, &q->gid };

	for (size_t i = 0; i < 2; i++) {
		uint64_t v;
		int rc = dsec_get_u64(m, keys[i], &v, err);

		*outs[i] = DSEC_OWNER_DEFAULT;
		if (rc == -ENOENT)
			continue;
		if (rc < 0)
			return rc;
		if (v >= UINT32_MAX)
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "%s %llu is out of range",
					     keys[i], (unsigned long long)v);
		*outs[i] = (int64_t)v;
	}
	return 0;
}

static int unsupported(struct dsecd_req *r, struct dsec_err *err)
{
	return dsec_err_setc(err, DSEC_E_UNSUPPORTED, ENOTSUP, "backend '%s' cannot %s",
			     r->sb->be->name, dsec_ops[r->op].summary);
}

static void fs_done(void *arg, int rc, const struct dsec_err *err);

static void op_file(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	const msgpack_object *m = r->msg.root;
	const struct dsec_be_ops *ops;
	struct dsec_err err;
	int rc;

	dsec_err_clear(&err);
	if (get_file_target(r, &err) < 0)
		return reply_err(r, &err);
	if (!need_running(r))
		return;
	ops = r->sb->be->ops;
	if (r->op == DSEC_OP_FILE_READ) {
		uint64_t off = 0, len = 0, max = d->conf.max_frame - REPLY_SLACK;
		if (((rc = dsec_get_u64(m, "offset", &off, &err)) < 0 && rc != -ENOENT) ||
		    ((rc = dsec_get_u64(m, "length", &len, &err)) < 0 && rc != -ENOENT))
			return reply_err(r, &err);
		if (len > max) {
			dsec_err_setc(&err, DSEC_E_TOO_LARGE, E2BIG,
				      "length %llu is over the %llu bytes a reply can carry: read in parts",
				      (unsigned long long)len, (unsigned long long)max);
			return reply_err(r, &err);
		}
		if (!ops->file_read) {
			unsupported(r, &err);
			return reply_err(r, &err);
		}
		rc = ops->file_read(r->sb->handle, r->path, off, len ? len : max, &r->data,
				    file_done, r, &err);
	} else {
		struct dsec_file_req *q = &r->freq;
		if ((rc = dsec_get_bin(m, "data", d->conf.max_frame, &q->data, &q->len, &err)) < 0) {
			if (rc == -ENOENT)
				dsec_err_setc(&err, DSEC_E_BAD_REQUEST, EINVAL,
					      "file_write needs field 'data'");
			return reply_err(r, &err);
		}
		if (get_mode(m, &q->mode, &err) < 0 || get_owner(m, q, &err) < 0)
			return reply_err(r, &err);
		q->op = DSEC_FILE_WRITE;
		q->path = r->path;
		/* The file API when the backend has it (owner included). */
		if (ops->file)
			rc = ops->file(r->sb->handle, q, &r->fres, fs_done, r, &err);
		else if (!ops->file_write || q->uid != DSEC_OWNER_DEFAULT ||
			 q->gid != DSEC_OWNER_DEFAULT)
			rc = unsupported(r, &err);
		else
			rc = ops->file_write(r->sb->handle, r->path, q->data, q->len,
					     q->mode ? q->mode : 0644, file_done, r, &err);
	}
	if (rc < 0)
		return reply_err(r, &err);
	d->ops_inflight++;
}

static void pack_info(struct dsec_pk *p, const struct dsec_file_info *i)
{
	msgpack_pack_map(&p->pk, 8);
	dsec_pk_kv_str(p, "name", i->name);
	dsec_pk_kv_str(p, "type", dsec_file_type_name(i->type));
	dsec_pk_kv_u64(p, "mode", i->mode);
	dsec_pk_kv_u64(p, "size", i->size);
	dsec_pk_kv_u64(p, "uid", i->uid);
	dsec_pk_kv_u64(p, "gid", i->gid);
	dsec_pk_kv_double(p, "mtime", i->mtime);
	dsec_pk_kv_str(p, "target", i->target);
}

/* Completion of every op that goes through the backend's file entry. */
static void fs_done(void *arg, int rc, const struct dsec_err *err)
{
	struct dsecd_req *r = arg;
	const struct dsec_file_res *res = &r->fres;
	struct dsec_pk p;

	r->d->ops_inflight--;
	if (rc < 0)
		return reply_err(r, err);
	dsec_pk_init(&p);
	switch (r->freq.op) {
	case DSEC_FILE_STAT:
		msgpack_pack_map(&p.pk, 2);
		dsec_pk_kv_bool(&p, "ok", true);
		dsec_pk_str(&p, "result");
		pack_info(&p, &res->info);
		break;
	case DSEC_FILE_LIST:
		dsec_pk_reply_ok(&p, 2);
		dsec_pk_str(&p, "entries");
		msgpack_pack_array(&p.pk, res->nentries);
		for (size_t i = 0; i < res->nentries; i++)
			pack_info(&p, &res->entries[i]);
		dsec_pk_kv_bool(&p, "truncated", res->truncated);
		break;
	case DSEC_FILE_REMOVE:
		dsec_pk_reply_ok(&p, 1);
		dsec_pk_kv_u64(&p, "removed", res->count);
		break;
	case DSEC_FILE_UPLOAD:
		dsec_pk_reply_ok(&p, 1);
		dsec_pk_kv_u64(&p, "entries", res->count);
		break;
	case DSEC_FILE_DOWNLOAD:
		dsec_pk_reply_ok(&p, 3);
		dsec_pk_kv_bin(&p, "data", res->data.data, res->data.len);
		dsec_pk_kv_u64(&p, "size", res->data.len);
		dsec_pk_kv_u64(&p, "entries", res->count);
		break;
	default:
		dsec_pk_reply_ok(&p, 0);
		break;
	}
	send_pk(r, &p);
}

/* Optional 'format' of upload and download: "tar" (default) or "tar.zst". */
static int get_format(const msgpack_object *m, enum dsec_file_format *out, struct dsec_err *err)
{
	_cleanup_free_ char *f = NULL;
	int rc = dsec_get_str(m, "format", &f, err), fmt;

	*out = DSEC_FMT_TAR;
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	if ((fmt = dsec_file_format_lookup(f)) < 0)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "format '%.64s' is not one of 'tar', 'tar.zst'", f);
	*out = (enum dsec_file_format)fmt;
	return 0;
}

/* file_stat, file_list, file_mkdir, file_remove, file_upload, file_download. */
static void op_fs(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	const msgpack_object *m = r->msg.root;
	struct dsec_file_req *q = &r->freq;
	uint64_t limit = DSEC_LIST_DEFAULT;
	struct dsec_err err;
	int rc = 0;

	dsec_err_clear(&err);
	if (get_file_target(r, &err) < 0)
		return reply_err(r, &err);
	if (!need_running(r))
		return;
	q->path = r->path;
	q->uid = q->gid = DSEC_OWNER_DEFAULT;
	q->max_bytes = d->conf.max_frame - REPLY_SLACK;
	switch (r->op) {
	case DSEC_OP_FILE_STAT:
		q->op = DSEC_FILE_STAT;
		break;
	case DSEC_OP_FILE_LIST:
		q->op = DSEC_FILE_LIST;
		if ((rc = dsec_get_u64(m, "limit", &limit, &err)) < 0 && rc != -ENOENT)
			break;
		rc = 0;
		if (limit > DSEC_LIST_MAX)
			rc = dsec_err_setc(&err, DSEC_E_INVALID, EINVAL,
					   "limit %llu is over %d entries", (unsigned long long)limit,
					   DSEC_LIST_MAX);
		q->max_entries = limit ? limit : DSEC_LIST_DEFAULT;
		break;
	case DSEC_OP_FILE_MKDIR:
		q->op = DSEC_FILE_MKDIR;
		if ((rc = get_mode(m, &q->mode, &err)) < 0 || (rc = get_owner(m, q, &err)) < 0 ||
		    ((rc = dsec_get_bool(m, "parents", &q->parents, &err)) < 0 && rc != -ENOENT))
			break;
		rc = 0;
		break;
	case DSEC_OP_FILE_REMOVE:
		q->op = DSEC_FILE_REMOVE;
		if ((rc = dsec_get_bool(m, "recursive", &q->recursive, &err)) == -ENOENT)
			rc = 0;
		break;
	case DSEC_OP_FILE_UPLOAD:
		q->op = DSEC_FILE_UPLOAD;
		if ((rc = dsec_get_bin(m, "data", d->conf.max_frame, &q->data, &q->len,
				       &err)) == -ENOENT)
			rc = dsec_err_setc(&err, DSEC_E_BAD_REQUEST, EINVAL,
					   "file_upload needs field 'data'");
		if (rc == 0 && (rc = get_format(m, &q->format, &err)) == 0)
			rc = get_owner(m, q, &err);
		break;
	case DSEC_OP_FILE_DOWNLOAD:
		q->op = DSEC_FILE_DOWNLOAD;
		rc = get_format(m, &q->format, &err);
		break;
	default:
		DSEC_BUG("op_fs called for op %d", (int)r->op);
	}
	if (rc < 0)
		return reply_err(r, &err);
	if (!r->sb->be->ops->file) {
		unsupported(r, &err);
		return reply_err(r, &err);
	}
	if (r->sb->be->ops->file(r->sb->handle, q, &r->fres, fs_done, r, &err) < 0)
		return reply_err(r, &err);
	d->ops_inflight++;
}

static void net_allow_done(void *arg, int rc, const struct dsec_err *err)
{
	struct dsecd_req *r = arg;
	struct dsec_pk p;

	r->d->ops_inflight--;
	if (r->sb)
		dsecd_sb_touch(r->d, r->sb);
	if (rc < 0)
		return reply_err(r, err);
	dsec_pk_init(&p);
	dsec_pk_reply_ok(&p, 0);
	send_pk(r, &p);
}

/* Replace a running sandbox's network allowlist. */
static void op_net_allow(struct dsecd_req *r)
{
	const struct dsec_be_ops *ops;
	struct dsec_err err;
	int rc;

	dsec_err_clear(&err);
	if (get_sandbox(r, &err) < 0)
		return reply_err(r, &err);
	if ((rc = dsec_get_strv(r->msg.root, "allow", &r->allow, &err)) < 0) {
		if (rc == -ENOENT)
			dsec_err_setc(&err, DSEC_E_BAD_REQUEST, EINVAL,
				      "net_allow needs field 'allow' (an array, [] for nothing)");
		return reply_err(r, &err);
	}
	ops = r->sb->be->ops;
	if (!ops->net_allow) {
		dsec_err_setc(&err, DSEC_E_UNSUPPORTED, ENOTSUP,
			      "backend '%s' has no network allowlists", r->sb->be->name);
		return reply_err(r, &err);
	}
	if (ops->net_allow(r->sb->handle, (const char *const *)r->allow, net_allow_done, r,
			   &err) < 0)
		return reply_err(r, &err);
	r->d->ops_inflight++;
}

void dsecd_req_destroyed(struct dsecd *d, struct dsecd_req *r)
{
	struct dsec_pk p;

	dsec_pk_init(&p);
	dsec_pk_reply_ok(&p, 0);
	send_pk(r, &p);
}

static void op_destroy(struct dsecd_req *r)
{
	struct dsec_err err;

	dsec_err_clear(&err);
	if (get_sandbox(r, &err) < 0)
		return reply_err(r, &err);
	dsecd_sb_destroy(r->d, r->sb, "destroy requested", r);
}

/* ---- shell sessions ------------------------------------------------------ */

/* Takes a ref on sandbox 'id', checks that its backend has sessions and
 * reads 'session' (required when need_name).  True when r goes on; false
 * when it was answered, or waits for its paused sandbox to resume (it
 * runs again then, from the start). */
static bool session_begin(struct dsecd_req *r, bool need_name)
{
	struct dsec_err err;
	int rc;

	dsec_err_clear(&err);
	if (get_sandbox(r, &err) < 0)
		goto fail;
	if (!r->sb->be->ops->session_open) {
		dsec_err_setc(&err, DSEC_E_UNSUPPORTED, ENOTSUP, "backend '%s' has no shell sessions",
			      r->sb->be->name);
		goto fail;
	}
	if (!need_running(r))
		return false;
	rc = dsec_get_str(r->msg.root, "session", &r->session, &err);
	if (rc == -ENOENT && need_name)
		dsec_err_setc(&err, DSEC_E_BAD_REQUEST, EINVAL, "%s needs field 'session'",
			      dsec_ops[r->op].name);
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
	dsec_pk_reply_ok(&p, open ? 2 : 0);
	if (open) {
		dsec_pk_kv_str(&p, "id", r->sb->id);
		dsec_pk_kv_str(&p, "session", r->sname);
	}
	send_pk(r, &p);
}

static void op_session_open(struct dsecd_req *r)
{
	const msgpack_object *m = r->msg.root;
	struct dsec_session_spec spec;
	struct dsec_err err;
	int rc;

	if (!session_begin(r, false))
		return;
	dsec_err_clear(&err);
	if (((rc = dsec_get_str(m, "shell", &r->shell, &err)) < 0 && rc != -ENOENT) ||
	    ((rc = dsec_get_env(m, "env", &r->cenv, &err)) < 0 && rc != -ENOENT) ||
	    ((rc = dsec_get_str(m, "cwd", &r->ccwd, &err)) < 0 && rc != -ENOENT))
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
	struct dsec_err e;
	struct dsec_pk p;

	r->d->ops_inflight--;
	r->sb->running--;
	dsecd_sb_touch(r->d, r->sb);
	if (rc < 0)
		return reply_err(r, cut_err(r->d, rc, err, &e));
	if (reply_if_lost(r))
		return;
	dsec_pk_init(&p);
	pack_exec_res(&p, &r->eres, 3);
	dsec_pk_kv_str(&p, "cwd", r->sres.cwd ? r->sres.cwd : "");
	dsec_pk_kv_bool(&p, "reset", r->sres.reset);
	dsec_pk_kv_bool(&p, "ended", r->sres.ended);
	send_pk(r, &p);
}

static void op_session_exec(struct dsecd_req *r)
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

static void op_session_close(struct dsecd_req *r)
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

/* ---- snapshot ----------------------------------------------------------------
 *
 * The backend holds the sandbox still and lets us read its upper dir on a
 * pool thread (snap_read: a copy to STATE_DIR/snapshots/snap-XXXXXX/tree
 * with ids shifted back, fs3_diff_copy); the sandbox then runs on while
 * another pool job imports the copy over the sandbox's image (fs3_import
 * with base: mkfs.erofs, chunks, manifest, tag) and removes it. */

struct dsecd_snap {
	struct dsecd *d;		/* the daemon */
	char *tag;			/* tag of the new image */
	char parent[FS3_REF_LEN];	/* digest of the image the sandbox runs */
	char *dir;			/* staging directory, NULL until made */
	int rc;				/* 0 or -errno */
	struct dsec_err err;		/* why */
	struct fs3_diff_stats st;	/* what the copy found */
	struct fs3_import_res res;	/* what the import made */
	double copy_s;			/* seconds of the copy (the sandbox frozen) */
};

static void snap_free(struct dsecd_snap *s)
{
	if (!s)
		return;
	free(s->tag);
	free(s->dir);
	free(s);
}

/* On a pool thread, the sandbox frozen. */
static int snap_read(void *arg, const struct dsec_be_upper *up, struct dsec_err *err)
{
	struct dsecd_snap *s = arg;
	_cleanup_free_ char *top = xasprintf("%s/snapshots", s->d->conf.state_dir);
	_cleanup_free_ char *tree = NULL;
	double t0 = dsec_now();
	int r;

	if ((r = dsec_mkdir_p(top, 0700)) < 0)
		return dsec_err_set(err, -r, "cannot create '%s': %s", top, strerror(-r));
	s->dir = xasprintf("%s/snap-XXXXXX", top);
	if (!mkdtemp(s->dir)) {
		r = dsec_err_set(err, errno, "cannot create a directory in '%s': %s", top,
				 strerror(errno));
		free(s->dir);
		s->dir = NULL;
		return r;
	}
	tree = xasprintf("%s/tree", s->dir);
	/* The upper dir's file system is the sandbox's disk (a tmpfs of its
	 * size): the copy takes no more than it can hold. */
	struct statfs sf;
	uint64_t limit = statfs(up->path, &sf) == 0 ? (uint64_t)sf.f_blocks * sf.f_bsize : 0;
	r = fs3_diff_copy(up->path, tree, up->id_base, up->id_count,
			  up->userxattr ? FS3_DIFF_USERXATTR : 0, limit, &s->st, err);
	s->copy_s = dsec_now() - t0;
	return r;
}

static void snap_commit_work(void *arg)
{
	struct dsecd_req *r = arg;
	struct dsecd_snap *s = r->snap;

	if (s->rc == 0) {
		_cleanup_free_ char *tree = xasprintf("%s/tree", s->dir);
		struct fs3_import_opts o = { .tag = s->tag, .base = s->parent };

		s->rc = fs3_import(s->d->images, tree, &o, &s->res, &s->err);
	}
	if (s->dir)
		dsec_rm_rf(s->dir);
}

static void snap_commit_done(void *arg)
{
	struct dsecd_req *r = arg;
	struct dsecd_snap *s = r->snap;
	struct dsec_pk p;

	r->d->ops_inflight--;
	if (s->rc < 0) {
		dsec_err_prefix(&s->err, "cannot snapshot sandbox '%s'", r->sb->id);
		return reply_err(r, &s->err);
	}
	log_info("sandbox %s snapshotted as %s (%s): %llu files, %llu whiteouts, %llu bytes of "
		 "data in %llu of sizes, copied in %.3f s, image in %.3f s", r->sb->id,
		 s->res.digest, s->tag, (unsigned long long)s->st.files,
		 (unsigned long long)s->st.whiteouts, (unsigned long long)s->st.bytes,
		 (unsigned long long)s->st.size, s->copy_s, s->res.seconds);
	dsec_pk_init(&p);
	dsec_pk_reply_ok(&p, 9);
	dsec_pk_kv_str(&p, "image", s->res.digest);
	dsec_pk_kv_str(&p, "tag", s->tag);
	dsec_pk_kv_str(&p, "parent", s->parent);
	dsec_pk_kv_u64(&p, "layers", s->res.nlayers);
	dsec_pk_kv_u64(&p, "size", s->res.logical);
	dsec_pk_kv_u64(&p, "files", s->st.files);
	dsec_pk_kv_u64(&p, "whiteouts", s->st.whiteouts);
	dsec_pk_kv_double(&p, "frozen", s->copy_s);
	dsec_pk_kv_double(&p, "duration", (double)(dsec_now_ns() - r->t0) / 1e9);
	send_pk(r, &p);
}

/* The backend let the sandbox go: import the copy (or remove what is left). */
static void snap_copied(void *arg, int rc, const struct dsec_err *err)
{
	struct dsecd_req *r = arg;
	struct dsecd_snap *s = r->snap;

	if (rc < 0) {
		s->rc = rc;
		s->err = *err;
	}
	if (dsecd_pool_submit(r->d->pool, snap_commit_work, snap_commit_done, r) < 0) {
		snap_commit_work(r);	/* no pool left (teardown): do it here */
		snap_commit_done(r);
	}
}

static void op_snapshot(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	const struct dsec_be_ops *ops;
	struct dsecd_snap *s;
	struct dsec_err err;
	char *tag = NULL;
	int rc;

	dsec_err_clear(&err);
	if (get_sandbox(r, &err) < 0)
		return reply_err(r, &err);
	/* After a pause or resume in flight; a paused sandbox stays paused. */
	if (r->sb->switching)
		return gate_add(r->sb, r);
	if ((rc = dsec_get_str(r->msg.root, "tag", &tag, &err)) < 0) {
		if (rc == -ENOENT)
			dsec_err_setc(&err, DSEC_E_BAD_REQUEST, EINVAL, "snapshot needs field 'tag'");
		return reply_err(r, &err);
	}
	s = r->snap = xcalloc(1, sizeof(*s));
	s->d = d;
	s->tag = tag;
	ops = r->sb->be->ops;
	if (!fs3_tag_valid(tag)) {
		dsec_err_setc(&err, DSEC_E_INVALID, EINVAL, "tag '%s' is not a valid name[:tag]",
			      tag);
		return reply_err(r, &err);
	}
	if (!ops->snapshot || !d->images) {
		dsec_err_setc(&err, DSEC_E_UNSUPPORTED, ENOTSUP, "backend '%s' cannot snapshot "
			      "sandboxes%s", r->sb->be->name, d->images ? "" : " (no image store)");
		return reply_err(r, &err);
	}
	if (!r->sb->img) {
		dsec_err_setc(&err, DSEC_E_UNSUPPORTED, ENOTSUP, "sandbox '%s' was not made from "
			      "an image: only those can be snapshotted", r->sb->id);
		return reply_err(r, &err);
	}
	/* Its diff would be imported over the base image alone, without the
	 * extras its files were made over. */
	if (r->sb->img->extras[0]) {
		dsec_err_setc(&err, DSEC_E_UNSUPPORTED, ENOTSUP, "sandbox '%s' runs extra layers "
			      "over its image: only a sandbox of one image can be snapshotted",
			      r->sb->id);
		return reply_err(r, &err);
	}
	snprintf(s->parent, sizeof(s->parent), "%s", r->sb->img->digest);
	if (ops->snapshot(r->sb->handle, snap_read, s, snap_copied, r, &err) < 0)
		return reply_err(r, &err);
	d->ops_inflight++;
}

/* ---- chunk_get: the peer tier of fs3 ----------------------------------------
 *
 * Another node asks for an object of our cache: it is read and verified on
 * a thread of the serve pool (fs3_serve never asks a source, so nodes asking
 * each other cannot loop, and the serve pool is not the one whose threads
 * may be waiting for that node) and its stored bytes go back as they are. */

static void chunk_get_work(void *arg)
{
	struct dsecd_req *r = arg;

	r->orc = fs3_serve(r->d->images, r->okind, r->odigest, &r->data, &r->oerr);
}

static void chunk_get_done(void *arg)
{
	struct dsecd_req *r = arg;
	struct dsec_pk p;

	r->d->ops_inflight--;
	if (r->orc < 0) {
		log_debug("chunk_get %s %s: %s", r->okind, r->odigest, r->oerr.msg);
		return reply_err(r, &r->oerr);
	}
	dsec_pk_init(&p);
	dsec_pk_reply_ok(&p, 1);
	dsec_pk_kv_bin(&p, "data", r->data.data, r->data.len);
	send_pk(r, &p);
}

static void op_chunk_get(struct dsecd_req *r)
{
	struct dsec_err err;
	int rc;

	dsec_err_clear(&err);
	dsec_err_clear(&r->oerr);
	if (!r->d->images) {
		dsec_err_setc(&err, DSEC_E_UNSUPPORTED, ENOTSUP, "node '%s' has no image store",
			      r->d->conf.node);
		return reply_err(r, &err);
	}
	if ((rc = dsec_get_str(r->msg.root, "kind", &r->okind, &err)) < 0 ||
	    (rc = dsec_get_str(r->msg.root, "digest", &r->odigest, &err)) < 0) {
		if (rc == -ENOENT)
			dsec_err_setc(&err, DSEC_E_BAD_REQUEST, EINVAL,
				      "chunk_get needs fields 'kind' and 'digest'");
		return reply_err(r, &err);
	}
	if ((rc = dsecd_pool_submit(r->d->serve_pool, chunk_get_work, chunk_get_done, r)) < 0) {
		dsec_err_set(&err, -rc, "cannot queue chunk_get: %s", strerror(-rc));
		return reply_err(r, &err);
	}
	r->d->ops_inflight++;
}

/* ---- streaming exec -----------------------------------------------------------
 *
 * exec_start asks the backend for a command whose stdin and output ends
 * come to us (struct dsec_exec_stream): a stream, named "x<serial>" within
 * its sandbox.  Each output is read into a buffer of output_cap bytes; when
 * it is full we stop reading that pipe and the command blocks on its next
 * write until exec_read takes the bytes (backpressure: nothing is dropped,
 * nothing grows).  exec_read is held until there is output or the end, or
 * its wait runs out; a newer exec_read answers the held one at once (empty).
 * exec_write queues stdin, one buffer's worth at a time ("busy" beyond),
 * written as the pipe takes it.  The stream has ended once the backend gave
 * the status and both outputs are at EOF: the exec_read that returns its
 * last bytes says done and frees it.  An exited stream nobody reads is freed
 * stream_grace after the last request for it; destroy frees them all.
 */

#define XS_MAX 256		/* streams open in one sandbox */
#define XS_WAIT_DEFAULT 10.0	/* s an exec_read waits for output */
#define XS_WAIT_MAX 60.0	/* s it may ask */

static uint64_t xs_serial;	/* names of streams: unique on this node while it runs */

struct dsecd_xs {
	struct dsecd *d;		/* the daemon */
	struct dsecd_sb *sb;		/* its sandbox (holds a ref) */
	struct dsecd_xs *next;		/* sb->streams */
	char id[24];			/* "x<serial>": the wire's 'exec' */
	void *handle;			/* the backend's, until its done */
	struct dsec_exec_res res;	/* the status, filled at done */
	int rc;				/* done's rc */
	struct dsec_err err;		/* why, when rc < 0 */
	bool exited;			/* done came */
	bool pty;			/* runs on a terminal */
	int fds[3];			/* stdin, stdout, stderr; -1 once closed */
	ev_io w[3];			/* on them (data = this stream) */
	struct dsec_buf buf[3];		/* stdin to write; output not yet read */
	size_t in_off;			/* bytes of buf[0] written */
	bool in_eof;			/* close stdin once buf[0] is written */
	size_t cap;			/* bytes buffered per output at most */
	struct dsecd_req *reader;	/* the exec_read held, or NULL */
	ev_timer wait;			/* its wait */
	ev_timer grace;			/* after the exit: freed unless asked for */
};

static bool xs_ended(const struct dsecd_xs *x)
{
	return x->exited && x->fds[1] < 0 && x->fds[2] < 0;
}

static void xs_close(struct dsecd_xs *x, int i)
{
	ev_io_stop(x->d->loop, &x->w[i]);
	if (x->fds[i] >= 0)
		close(x->fds[i]);
	x->fds[i] = -1;
}

static struct dsecd_xs *xs_dead;	/* freed streams, reclaimed at the next prepare */
static ev_prepare xs_reaper;		/* does it */

static void xs_reap_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	while (xs_dead) {
		struct dsecd_xs *x = xs_dead;

		xs_dead = x->next;
		free(x);
	}
	ev_prepare_stop(loop, w);
}

/* Only once the backend is done with it (x->exited).  Everything goes now
 * but the struct, which may be in its own callback: the reaper frees it. */
static void xs_free(struct dsecd_xs *x)
{
	struct dsecd_sb *sb = x->sb;

	DSEC_ASSERT(x->exited && !x->reader);
	for (int i = 0; i < 3; i++) {
		xs_close(x, i);
		dsec_buf_free(&x->buf[i]);
	}
	ev_timer_stop(x->d->loop, &x->wait);
	ev_timer_stop(x->d->loop, &x->grace);
	for (struct dsecd_xs **pp = &sb->streams; *pp; pp = &(*pp)->next)
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	sb->nstreams--;
	dsec_exec_res_free(&x->res);
	dsecd_sb_unref(x->d, sb);
	x->next = xs_dead;
	xs_dead = x;
	if (!ev_is_active(&xs_reaper)) {
		ev_prepare_init(&xs_reaper, xs_reap_cb);
		ev_prepare_start(x->d->loop, &xs_reaper);
	}
}

/* Output buffers have room: read the pipes again. */
static void xs_resume_reads(struct dsecd_xs *x)
{
	for (int i = 1; i < 3; i++)
		if (x->fds[i] >= 0 && x->buf[i].len < x->cap)
			ev_io_start(x->d->loop, &x->w[i]);
}

/* Answers the held exec_read with everything buffered; frees the stream
 * when that was its end. */
static void xs_answer(struct dsecd_xs *x)
{
	struct dsecd_req *r = x->reader;
	bool done = xs_ended(x);
	struct dsec_pk p;

	x->reader = NULL;
	ev_timer_stop(x->d->loop, &x->wait);
	if (reply_if_lost(r)) {
		if (done)
			xs_free(x);
		return;
	}
	if (done && x->rc < 0) {
		reply_err(r, &x->err);
		return xs_free(x);
	}
	dsec_pk_init(&p);
	dsec_pk_reply_ok(&p, 9);
	dsec_pk_kv_bin(&p, "stdout", x->buf[1].data, x->buf[1].len);
	dsec_pk_kv_bin(&p, "stderr", x->buf[2].data, x->buf[2].len);
	dsec_pk_kv_bool(&p, "done", done);
	dsec_pk_kv_i64(&p, "exit_code", done ? x->res.exit_code : -1);
	dsec_pk_kv_u64(&p, "signal", (uint64_t)(done && x->res.signal > 0 ? x->res.signal : 0));
	dsec_pk_kv_bool(&p, "timed_out", done && x->res.timed_out);
	dsec_pk_kv_bool(&p, "oom_killed", done && x->res.oom_killed);
	dsec_pk_kv_double(&p, "duration", done ? x->res.duration : 0);
	dsec_pk_kv_bool(&p, "exited", x->exited);
	send_pk(r, &p);
	dsec_buf_free(&x->buf[1]);
	dsec_buf_free(&x->buf[2]);
	if (done)
		return xs_free(x);
	xs_resume_reads(x);
}

/* Something changed: answer a held exec_read if it has something to get. */
static void xs_pump(struct dsecd_xs *x)
{
	if (x->reader && (x->buf[1].len || x->buf[2].len || xs_ended(x)))
		xs_answer(x);
}

static void xs_out_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct dsecd_xs *x = w->data;
	int i = (int)(w - x->w);
	struct dsec_buf *b = &x->buf[i];
	size_t want = x->cap - b->len;
	ssize_t n;

	if (want > 65536)
		want = 65536;
	dsec_buf_grow(b, want);
	n = read(x->fds[i], b->data + b->len, want);
	if (n > 0) {
		b->len += (size_t)n;
		b->data[b->len] = '\0';
		if (b->len >= x->cap)
			ev_io_stop(loop, w);	/* backpressure until a read */
	} else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		return;
	} else {
		xs_close(x, i);	/* EOF; a pty's master says EIO once the terminal is gone */
	}
	xs_pump(x);
}

static void xs_in_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct dsecd_xs *x = w->data;
	struct dsec_buf *b = &x->buf[0];
	ssize_t n = 0;

	if (b->len > x->in_off) {
		n = write(x->fds[0], b->data + x->in_off, b->len - x->in_off);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n < 0) {
			/* The command closed its stdin: what is left cannot go anywhere. */
			dsec_buf_free(b);
			x->in_off = 0;
			return xs_close(x, 0);
		}
		x->in_off += (size_t)n;
	}
	if (x->in_off < b->len)
		return;
	dsec_buf_free(b);
	x->in_off = 0;
	ev_io_stop(loop, w);
	if (x->in_eof)
		xs_close(x, 0);
}

/* Queue stdin bytes (and EOF) and start writing. */
static void xs_write(struct dsecd_xs *x, const void *data, size_t len, bool eof)
{
	dsec_buf_add(&x->buf[0], data, len);
	if (eof && x->pty)
		dsec_buf_add(&x->buf[0], "\x04", 1);	/* the terminal's EOF: ^D */
	else if (eof)
		x->in_eof = true;
	if (x->buf[0].len > x->in_off || x->in_eof)
		ev_io_start(x->d->loop, &x->w[0]);
}

static void xs_wait_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct dsecd_xs *x = dsec_container_of(w, struct dsecd_xs, wait);

	if (x->reader)
		xs_answer(x);
}

static void xs_grace_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct dsecd_xs *x = dsec_container_of(w, struct dsecd_xs, grace);

	if (x->reader)
		return ev_timer_again(loop, w);
	log_debug("sandbox %s: exec %s was not read to its end: dropped", x->sb->id, x->id);
	xs_free(x);
}

/* The backend has the status. */
static void xs_done(void *arg, int rc, const struct dsec_err *err)
{
	struct dsecd_xs *x = arg;
	struct dsecd_sb *sb = x->sb;

	x->d->ops_inflight--;
	sb->running--;
	x->exited = true;
	x->handle = NULL;
	x->rc = rc;
	if (rc < 0) {
		struct dsec_err e;

		x->err = *cut_err(x->d, rc, err, &e);
	}
	if (sb->state == SB_DESTROYING) {
		/* Its sandbox is gone: so is whatever it did not read. */
		for (int i = 1; i < 3; i++)
			xs_close(x, i);
		if (x->reader)
			xs_answer(x);	/* frees x */
		else
			xs_free(x);
		return;
	}
	dsecd_sb_touch(x->d, sb);
	ev_timer_again(x->d->loop, &x->grace);
	xs_pump(x);
}

/* The sandbox is being destroyed: free its streams that have exited (the
 * backend completes the others, with -ECANCELED, and xs_done frees them). */
void dsecd_streams_drop(struct dsecd *d, struct dsecd_sb *sb)
{
	struct dsecd_xs *x = sb->streams, *next;

	for (; x; x = next) {
		next = x->next;
		if (!x->exited)
			continue;
		for (int i = 1; i < 3; i++)
			xs_close(x, i);
		if (x->reader)
			xs_answer(x);
		else
			xs_free(x);
	}
}

/* The stream named by the request's 'exec' in sandbox 'id' (r->sb gets a
 * ref); NULL with *err. */
static struct dsecd_xs *xs_find(struct dsecd_req *r, struct dsec_err *err)
{
	_cleanup_free_ char *name = NULL;
	int rc;

	if (get_sandbox(r, err) < 0)
		return NULL;
	if ((rc = dsec_get_str(r->msg.root, "exec", &name, err)) < 0) {
		if (rc == -ENOENT)
			dsec_err_setc(err, DSEC_E_BAD_REQUEST, EINVAL, "%s needs field 'exec'",
				      dsec_ops[r->op].name);
		return NULL;
	}
	for (struct dsecd_xs *x = r->sb->streams; x; x = x->next)
		if (!strcmp(x->id, name)) {
			if (x->exited)
				ev_timer_again(r->d->loop, &x->grace);
			return x;
		}
	dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT,
		      "no exec '%s' in sandbox '%s' (never started, or read to its end)", name,
		      r->sb->id);
	return NULL;
}

static void op_exec_start(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	const msgpack_object *m = r->msg.root;
	struct dsec_exec_stream_opts o = { 0 };
	struct dsec_exec_stream st = { -1, -1, -1, NULL };
	const struct dsec_be_ops *ops;
	bool keep_open = false;
	struct dsecd_xs *x;
	struct dsec_err err;
	struct dsec_pk p;
	uint64_t rows = 0, cols = 0;
	int rc;

	dsec_err_clear(&err);
	if (get_sandbox(r, &err) < 0)
		return reply_err(r, &err);
	if (!need_running(r))
		return;
	if (parse_exec(r, &err) < 0 ||
	    ((rc = dsec_get_bool(m, "pty", &o.pty, &err)) < 0 && rc != -ENOENT) ||
	    ((rc = dsec_get_u64(m, "rows", &rows, &err)) < 0 && rc != -ENOENT) ||
	    ((rc = dsec_get_u64(m, "cols", &cols, &err)) < 0 && rc != -ENOENT) ||
	    ((rc = dsec_get_bool(m, "stdin_open", &keep_open, &err)) < 0 && rc != -ENOENT))
		return reply_err(r, &err);
	if (rows > UINT16_MAX || cols > UINT16_MAX) {
		dsec_err_setc(&err, DSEC_E_INVALID, EINVAL, "rows and cols must be at most %u",
			      UINT16_MAX);
		return reply_err(r, &err);
	}
	o.rows = (uint16_t)rows;
	o.cols = (uint16_t)cols;
	ops = r->sb->be->ops;
	if (!ops->exec_start) {
		unsupported(r, &err);
		return reply_err(r, &err);
	}
	if (r->sb->nstreams >= XS_MAX) {
		dsec_err_setc(&err, DSEC_E_CAPACITY, EAGAIN,
			      "sandbox '%s' has %u started commands open: read them to their end",
			      r->sb->id, XS_MAX);
		return reply_err(r, &err);
	}
	exec_sb_defaults(r);
	x = xcalloc(1, sizeof(*x));
	if (ops->exec_start(r->sb->handle, &r->ereq, &o, &st, &x->res, xs_done, x, &err) < 0) {
		free(x);
		return reply_err(r, &err);
	}
	x->d = d;
	x->sb = r->sb;
	dsecd_sb_ref(x->sb);
	snprintf(x->id, sizeof(x->id), "x%" PRIu64, ++xs_serial);
	x->handle = st.handle;
	x->pty = o.pty;
	x->cap = r->ereq.output_cap;
	x->fds[0] = st.in_fd;
	x->fds[1] = st.out_fd;
	x->fds[2] = st.err_fd;
	for (int i = 0; i < 3; i++) {
		dsec_buf_init(&x->buf[i]);
		if (x->fds[i] >= 0)
			dsec_set_nonblock(x->fds[i], true);
		ev_io_init(&x->w[i], i ? xs_out_cb : xs_in_cb, x->fds[i], i ? EV_READ : EV_WRITE);
		x->w[i].data = x;
	}
	ev_init(&x->wait, xs_wait_cb);
	ev_init(&x->grace, xs_grace_cb);
	x->grace.repeat = d->conf.stream_grace > 0 ? d->conf.stream_grace : 1;
	xs_resume_reads(x);
	if (x->fds[0] >= 0 && (r->ereq.stdin_len || !(keep_open || x->pty)))
		xs_write(x, r->ereq.stdin_data, r->ereq.stdin_len, !(keep_open || x->pty));
	x->next = r->sb->streams;
	r->sb->streams = x;
	r->sb->nstreams++;
	r->sb->running++;
	r->sb->execs++;
	d->ops_inflight++;
	dsec_pk_init(&p);
	dsec_pk_reply_ok(&p, 2);
	dsec_pk_kv_str(&p, "id", r->sb->id);
	dsec_pk_kv_str(&p, "exec", x->id);
	send_pk(r, &p);
}

static void op_exec_read(struct dsecd_req *r)
{
	double wait = XS_WAIT_DEFAULT;
	struct dsecd_xs *x;
	struct dsec_err err;
	int rc;

	dsec_err_clear(&err);
	if (!(x = xs_find(r, &err)))
		return reply_err(r, &err);
	if ((rc = dsec_get_seconds(r->msg.root, "wait", &wait, &err)) < 0 && rc != -ENOENT)
		return reply_err(r, &err);
	if (wait > XS_WAIT_MAX) {
		dsec_err_setc(&err, DSEC_E_INVALID, EINVAL, "wait %.0f s is over %.0f s", wait,
			      XS_WAIT_MAX);
		return reply_err(r, &err);
	}
	if (x->reader) {
		/* The older one goes back empty (a held reader means nothing is
		 * there to give and the stream has not ended: x stays). */
		DSEC_ASSERT(!xs_ended(x));
		xs_answer(x);
	}
	x->reader = r;
	if (x->buf[1].len || x->buf[2].len || xs_ended(x) || wait <= 0)
		return xs_answer(x);
	ev_timer_set(&x->wait, wait, 0);
	ev_timer_start(r->d->loop, &x->wait);
}

static void reply_empty(struct dsecd_req *r)
{
	struct dsec_pk p;

	dsec_pk_init(&p);
	dsec_pk_reply_ok(&p, 0);
	send_pk(r, &p);
}

static void op_exec_write(struct dsecd_req *r)
{
	const msgpack_object *m = r->msg.root;
	const void *data = NULL;
	size_t len = 0, pending;
	bool eof = false;
	struct dsecd_xs *x;
	struct dsec_err err;
	int rc;

	dsec_err_clear(&err);
	if (!(x = xs_find(r, &err)))
		return reply_err(r, &err);
	if (((rc = dsec_get_bin(m, "data", r->d->conf.max_frame, &data, &len, &err)) < 0 &&
	     rc != -ENOENT) ||
	    ((rc = dsec_get_bool(m, "eof", &eof, &err)) < 0 && rc != -ENOENT))
		return reply_err(r, &err);
	if (x->fds[0] < 0 || x->in_eof || x->exited) {
		dsec_err_setc(&err, DSEC_E_INVALID, EPIPE, "the stdin of exec '%s' is closed%s",
			      x->id, x->exited ? ": the command has exited" : "");
		return reply_err(r, &err);
	}
	pending = x->buf[0].len - x->in_off;
	if (pending && pending + len > x->cap) {
		dsec_err_setc(&err, DSEC_E_BUSY, EAGAIN,
			      "exec '%s' has not read the %zu bytes of stdin before: retry later",
			      x->id, pending);
		return reply_err(r, &err);
	}
	xs_write(x, data, len, eof);
	reply_empty(r);
}

/* Signal names exec_signal takes besides numbers. */
static const struct { const char *name; int sig; } signames[] = {
	{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "KILL", SIGKILL },
	{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "PIPE", SIGPIPE }, { "ALRM", SIGALRM },
	{ "TERM", SIGTERM }, { "CONT", SIGCONT }, { "STOP", SIGSTOP }, { "TSTP", SIGTSTP },
	{ "WINCH", SIGWINCH },
};

/* 'signal': a number 1..64 or a name ("TERM" or "SIGTERM"). */
static int get_signal(const msgpack_object *m, int *sig, struct dsec_err *err)
{
	_cleanup_free_ char *name = NULL;
	uint64_t n = 0;
	int rc = dsec_get_u64(m, "signal", &n, err);

	if (rc == 0) {
		if (n < 1 || n > 64)
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "signal %llu is not 1..64",
					     (unsigned long long)n);
		*sig = (int)n;
		return 0;
	}
	if (rc == -ENOENT)
		return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EINVAL, "exec_signal needs field "
				     "'signal'");
	dsec_err_clear(err);
	if ((rc = dsec_get_str(m, "signal", &name, err)) < 0) {
		dsec_err_setc(err, DSEC_E_BAD_REQUEST, EINVAL, "field 'signal' must be a number "
			      "or a name");
		return rc;
	}
	for (size_t i = 0; i < DSEC_ARRAY_LEN(signames); i++)
		if (!strcmp(signames[i].name, name + (strncmp(name, "SIG", 3) ? 0 : 3))) {
			*sig = signames[i].sig;
			return 0;
		}
	return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "unknown signal '%s'", name);
}

/* exec_signal and exec_resize: the backend acts at once, while it runs. */
static void op_exec_ctl(struct dsecd_req *r)
{
	const struct dsec_be_ops *ops;
	struct dsecd_xs *x;
	struct dsec_err err;
	uint64_t rows = 0, cols = 0;
	int sig = 0, rc;

	dsec_err_clear(&err);
	if (!(x = xs_find(r, &err)))
		return reply_err(r, &err);
	ops = r->sb->be->ops;
	if (r->op == DSEC_OP_EXEC_SIGNAL) {
		if (get_signal(r->msg.root, &sig, &err) < 0)
			return reply_err(r, &err);
	} else {
		if ((rc = dsec_get_u64(r->msg.root, "rows", &rows, &err)) < 0 ||
		    (rc = dsec_get_u64(r->msg.root, "cols", &cols, &err)) < 0) {
			if (rc == -ENOENT)
				dsec_err_setc(&err, DSEC_E_BAD_REQUEST, EINVAL,
					      "exec_resize needs fields 'rows' and 'cols'");
			return reply_err(r, &err);
		}
		if (!rows || !cols || rows > UINT16_MAX || cols > UINT16_MAX) {
			dsec_err_setc(&err, DSEC_E_INVALID, EINVAL,
				      "rows and cols must be 1..%u", UINT16_MAX);
			return reply_err(r, &err);
		}
		if (!x->pty) {
			dsec_err_setc(&err, DSEC_E_INVALID, ENOTTY,
				      "exec '%s' has no terminal (start it with pty)", x->id);
			return reply_err(r, &err);
		}
	}
	if (x->exited) {
		dsec_err_setc(&err, DSEC_E_INVALID, ESRCH, "exec '%s' has exited", x->id);
		return reply_err(r, &err);
	}
	if (r->op == DSEC_OP_EXEC_SIGNAL)
		rc = ops->exec_signal ? ops->exec_signal(r->sb->handle, x->handle, sig, &err)
				      : unsupported(r, &err);
	else
		rc = ops->exec_resize ? ops->exec_resize(r->sb->handle, x->handle, (uint16_t)rows,
							 (uint16_t)cols, &err)
				      : unsupported(r, &err);
	if (rc < 0)
		return reply_err(r, &err);
	reply_empty(r);
}

typedef void (*op_fn)(struct dsecd_req *r);

static const op_fn handlers[DSEC_OP__COUNT] = {
	[DSEC_OP_PING] = op_ping,
	[DSEC_OP_INFO] = op_info,
	[DSEC_OP_LIST] = op_list,
	[DSEC_OP_CREATE] = op_create,
	[DSEC_OP_EXEC] = op_exec,
	[DSEC_OP_CALL] = op_call,
	[DSEC_OP_FILE_READ] = op_file,
	[DSEC_OP_FILE_WRITE] = op_file,
	[DSEC_OP_DESTROY] = op_destroy,
	[DSEC_OP_NET_ALLOW] = op_net_allow,
	[DSEC_OP_PAUSE] = op_switch,
	[DSEC_OP_RESUME] = op_switch,
	[DSEC_OP_FILE_STAT] = op_fs,
	[DSEC_OP_FILE_LIST] = op_fs,
	[DSEC_OP_FILE_MKDIR] = op_fs,
	[DSEC_OP_FILE_REMOVE] = op_fs,
	[DSEC_OP_FILE_UPLOAD] = op_fs,
	[DSEC_OP_FILE_DOWNLOAD] = op_fs,
	[DSEC_OP_SESSION_OPEN] = op_session_open,
	[DSEC_OP_SESSION_EXEC] = op_session_exec,
	[DSEC_OP_SESSION_CLOSE] = op_session_close,
	[DSEC_OP_SNAPSHOT] = op_snapshot,
	[DSEC_OP_CHUNK_GET] = op_chunk_get,
	[DSEC_OP_EXEC_START] = op_exec_start,
	[DSEC_OP_EXEC_READ] = op_exec_read,
	[DSEC_OP_EXEC_WRITE] = op_exec_write,
	[DSEC_OP_EXEC_SIGNAL] = op_exec_ctl,
	[DSEC_OP_EXEC_RESIZE] = op_exec_ctl,
};

/* A request that waited for a pause or resume runs again from the start:
 * the sandbox may have changed state, or be gone. */
static void rerun(struct dsecd_req *r)
{
	struct dsec_err err;

	if (r->sb) {
		dsecd_sb_unref(r->d, r->sb);
		r->sb = NULL;
	}
	if (r->d->shutting_down) {
		dsec_err_setc(&err, DSEC_E_SHUTTING_DOWN, ESHUTDOWN, "node '%s' is shutting down",
			      r->d->conf.node);
		return reply_err(r, &err);
	}
	handlers[r->op](r);
}

/* Frame in; exactly one reply out, now or when the backend completes. */
void dsecd_handle(void *arg, struct dsecd_conn *conn, const void *frame, size_t len)
{
	struct dsecd *d = arg;
	struct dsecd_req *r = xcalloc(1, sizeof(*r));
	const struct dsec_op_desc *desc;
	const msgpack_object *v, *op;
	struct dsec_err err;

	r->d = d;
	r->conn = conn;
	r->t0 = dsec_now_ns();
	r->op = DSEC_OP_PING;
	dsec_err_clear(&err);
	if (dsec_msg_parse(&r->msg, frame, len, d->conf.max_frame, &err) < 0)
		return reply_err(r, &err);
	v = dsec_map_get(r->msg.root, "v");
	if (!v || v->type == MSGPACK_OBJECT_NIL) {
		dsec_err_setc(&err, DSEC_E_VERSION, EPROTO,
			      "request has no protocol version 'v'; this daemon speaks %d",
			      DSEC_PROTO_VERSION);
		return reply_err(r, &err);
	}
	if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER || v->via.u64 != DSEC_PROTO_VERSION) {
		dsec_err_setc(&err, DSEC_E_VERSION, EPROTO,
			      "protocol version %lld is not supported; this daemon speaks %d",
			      v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (long long)v->via.u64
			      : v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ? (long long)v->via.i64 : -1LL,
			      DSEC_PROTO_VERSION);
		return reply_err(r, &err);
	}
	op = dsec_map_get(r->msg.root, "op");
	if (!op || op->type != MSGPACK_OBJECT_STR) {
		dsec_err_setc(&err, DSEC_E_BAD_REQUEST, EINVAL, "field 'op' must be a string");
		return reply_err(r, &err);
	}
	if (!(desc = dsec_op_lookup(op->via.str.ptr, op->via.str.size))) {
		dsec_err_setc(&err, DSEC_E_UNKNOWN_OP, EINVAL, "unknown op '%.*s'",
			      op->via.str.size > 64 ? 64 : (int)op->via.str.size, op->via.str.ptr);
		return reply_err(r, &err);
	}
	r->op = desc->op;
	if (d->shutting_down && r->op != DSEC_OP_PING && r->op != DSEC_OP_INFO &&
	    r->op != DSEC_OP_LIST) {
		dsec_err_setc(&err, DSEC_E_SHUTTING_DOWN, ESHUTDOWN, "node '%s' is shutting down",
			      d->conf.node);
		return reply_err(r, &err);
	}
	handlers[r->op](r);
}
