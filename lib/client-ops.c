/* client-ops.c - libdsec: the typed calls, each a request packed with the
 * counting map builder, sent on the client's own call (client.c), and a
 * reply whose every field is checked before anything is handed out. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nng/nng.h>

#include "client.h"
#include "client-int.h"
#include "dsec.h"
#include "proto.h"

void dcl_reply_free(struct reply *r)
{
	dsec_msg_free(&r->msg);
	if (r->raw)
		nng_msg_free(r->raw);
	r->raw = NULL;
}

/* Objects the reply of an op whose result has a fixed shape may decode
 * to, and one that carries a list (list, info, file_list): the smallest
 * entry of those lists is more than 3 bytes an object, so this keeps what
 * a daemon can make us allocate within 8 times its reply's size. */
#define OBJS_FIXED 0
#define OBJS_LIST 1

static size_t reply_objs_max(int shape, size_t len)
{
	return DSEC_OBJ_MAX + (shape == OBJS_LIST ? len / 3 : 0);
}

/* The daemon's error reply as *err: its code and message; a reply that
 * says it failed without a code that is an error is a protocol error. */
static int reply_error(const char *url, const msgpack_object *root, struct dsec_err *err)
{
	const msgpack_object *e = dsec_map_get(root, "error");
	const msgpack_object *code = dsec_map_get(e, "code");
	const msgpack_object *m = dsec_map_get(e, "message");
	int mlen = m && m->type == MSGPACK_OBJECT_STR ? (int)m->via.str.size : 13;
	const char *mtext = m && m->type == MSGPACK_OBJECT_STR ? m->via.str.ptr : "unknown error";
	enum dsec_code cd;

	if (mlen > DSEC_ERR_MSG_MAX)
		mlen = DSEC_ERR_MSG_MAX;
	if (!code || code->type != MSGPACK_OBJECT_STR)
		return dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO,
				     "bad reply from '%s': an error without a code: %.*s", url,
				     mlen, mtext);
	cd = dsec_code_from_name(code->via.str.ptr, code->via.str.size);
	if (cd == DSEC_E_OK)
		return dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO,
				     "bad reply from '%s': an error whose code is 'ok': %.*s", url,
				     mlen, mtext);
	if (cd == DSEC_E_INTERNAL && (code->via.str.size != 8 ||
				      memcmp(code->via.str.ptr, "internal", 8)))
		return dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO,
				     "bad reply from '%s': unknown error code '%.*s': %.*s", url,
				     code->via.str.size > 64 ? 64 : (int)code->via.str.size,
				     code->via.str.ptr, mlen, mtext);
	return dsec_err_setc(err, cd, EIO, "%.*s", mlen, mtext);
}

/* Decodes the reply frame data (len bytes) into r, of the shape given
 * (OBJS_FIXED or OBJS_LIST).  A daemon error becomes *err with the
 * daemon's code; rc < 0. */
static int reply_decode(struct reply *r, const void *data, size_t len, int shape,
			struct dsec_err *err)
{
	bool ok = false;

	r->len = len;
	if (dsec_msg_parse_n(&r->msg, data, len, CLIENT_RECV_MAX, reply_objs_max(shape, len),
			     err) < 0) {
		dsec_err_prefix(err, "bad reply from '%s'", r->url);
		err->code = DSEC_E_INTERNAL;
		return -EPROTO;
	}
	if (dsec_get_bool(r->msg.root, "ok", &ok, err) < 0)
		return dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO,
				     "bad reply from '%s': no 'ok' field", r->url);
	if (!ok)
		return reply_error(r->url, r->msg.root, err);
	r->result = dsec_map_get(r->msg.root, "result");
	if (!r->result || r->result->type != MSGPACK_OBJECT_MAP)
		return dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO,
				     "bad reply from '%s': no result map", r->url);
	return 0;
}

int dsec_reply_check(const struct dsec_client *c, const void *reply, size_t len,
		     struct dsec_err *err)
{
	struct reply r;
	int rc;

	memset(&r, 0, sizeof(r));
	r.url = dsec_client_url(c);
	msgpack_unpacked_init(&r.msg.up);
	rc = reply_decode(&r, reply, len, OBJS_LIST, err);
	dcl_reply_free(&r);
	return rc;
}

/* Sends the packed request p (consumed) and decodes the reply, of the
 * shape given.  extra = seconds the request itself may take. */
static int roundtrip_n(struct dsec_client *c, struct dsec_pk *p, double extra, int shape,
		       struct reply *r, struct dsec_err *err)
{
	size_t len;
	void *req;
	int rc;

	/* Every request's map counts its own entries (dsec_pk_request_begin):
	 * it is closed here, where it is sent. */
	while (p->depth)
		dsec_pk_end(p);
	req = dsec_pk_detach(p, &len);
	memset(r, 0, sizeof(*r));
	r->url = dsec_client_url(c);
	msgpack_unpacked_init(&r->msg.up);
	rc = dsec_call_sync(c, req, len, extra, &r->raw, err);
	free(req);
	if (rc < 0)
		return rc;
	return reply_decode(r, nng_msg_body(r->raw), nng_msg_len(r->raw), shape, err);
}

int dcl_roundtrip(struct dsec_client *c, struct dsec_pk *p, double extra, struct reply *r,
		  struct dsec_err *err)
{
	return roundtrip_n(c, p, extra, OBJS_FIXED, r, err);
}

int dcl_roundtrip_list(struct dsec_client *c, struct dsec_pk *p, struct reply *r,
		       struct dsec_err *err)
{
	return roundtrip_n(c, p, 0, OBJS_LIST, r, err);
}

/* The protocol error of a result without field key (or with it of the
 * wrong type, or nil) where op's result always has it. */
int dcl_no_field(const struct reply *r, const char *op, const char *key, struct dsec_err *err)
{
	return dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO, "bad reply from '%s': %s reply has no '%s'",
			     r->url, op, key);
}

/* rc, or when it is 0 the protocol error of the first field the decoding
 * found of the wrong type (read as absent meanwhile). */
int dcl_reply_done(const struct reply *r, const char *op, int rc, struct dsec_err *err)
{
	if (rc == 0 && r->bad)
		return dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO,
				     "bad reply from '%s': field '%s' of the %s reply has the wrong type",
				     r->url, r->bad, op);
	return rc;
}

/* Getters of result fields that may be absent: absent gives the default;
 * of the wrong type it gives the default too and marks the reply bad (the
 * call then fails with dcl_reply_done). */
void dcl_mark_bad(struct reply *r, int rc, const char *key)
{
	if (rc < 0 && rc != -ENOENT && !r->bad)
		r->bad = key;
}

char *dcl_get_str_or(struct reply *r, const msgpack_object *map, const char *key,
		     const char *dflt)
{
	char *s = NULL;
	int rc = dsec_get_text(map, key, CLIENT_RECV_MAX, &s, NULL);

	dcl_mark_bad(r, rc, key);
	return rc < 0 ? xstrdup(dflt) : s;
}

double dcl_get_double_or(struct reply *r, const msgpack_object *map, const char *key,
			 double dflt)
{
	double v = dflt;

	dcl_mark_bad(r, dsec_get_double(map, key, &v, NULL), key);
	return v;
}

uint64_t dcl_get_u64_or(struct reply *r, const msgpack_object *map, const char *key,
			uint64_t dflt)
{
	uint64_t v = dflt;

	dcl_mark_bad(r, dsec_get_u64(map, key, &v, NULL), key);
	return v;
}

void dcl_get_bool_or(struct reply *r, const msgpack_object *map, const char *key, bool *out)
{
	dcl_mark_bad(r, dsec_get_bool(map, key, out, NULL), key);
}

/* A string field the op's result always has: *out (caller frees), or the
 * protocol error. */
int dcl_get_str_need(struct reply *r, const char *op, const char *key, char **out,
		     struct dsec_err *err)
{
	*out = NULL;
	if (dsec_get_text(r->result, key, CLIENT_RECV_MAX, out, NULL) < 0)
		return dcl_no_field(r, op, key, err);
	return 0;
}

/* The same for bytes, added to out. */
int dcl_get_bin_need(struct reply *r, const char *op, const char *key, struct dsec_buf *out,
		     struct dsec_err *err)
{
	const void *d;
	size_t n;

	if (dsec_get_bin(r->result, key, SIZE_MAX, &d, &n, NULL) < 0)
		return dcl_no_field(r, op, key, err);
	dsec_buf_add(out, d, n);
	return 0;
}

/* The entries of the list at key in map, *n of them; absent is 0 entries
 * unless need.  Each entry must be a map and becomes a struct with
 * strings of its own, so a list with more entries than the reply could
 * carry at min_bytes each (less than what the daemon's entries take: their
 * field names alone) is a protocol error: a hostile reply of empty
 * entries cannot make us allocate many times its size. */
int dcl_get_list(struct reply *r, const char *op, const msgpack_object *map, const char *key,
		 bool need, size_t min_bytes, const msgpack_object **entries, size_t *n,
		 struct dsec_err *err)
{
	const msgpack_object *a = dsec_map_get(map, key);

	*entries = NULL;
	*n = 0;
	if (!a || a->type == MSGPACK_OBJECT_NIL)
		return need ? dcl_no_field(r, op, key, err) : 0;
	if (a->type != MSGPACK_OBJECT_ARRAY)
		return dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO,
				     "bad reply from '%s': '%s' of the %s reply is not a list", r->url,
				     key, op);
	if (!a->via.array.size)
		return 0;
	if (a->via.array.size > r->len / min_bytes)
		return dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO,
				     "bad reply from '%s': %u entries in '%s' cannot fit in %zu bytes",
				     r->url, a->via.array.size, key, r->len);
	for (uint32_t i = 0; i < a->via.array.size; i++)
		if (a->via.array.ptr[i].type != MSGPACK_OBJECT_MAP)
			return dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO,
					     "bad reply from '%s': entry %u of '%s' of the %s reply "
					     "is not a map", r->url, i, key, op);
	*entries = a->via.array.ptr;
	*n = a->via.array.size;
	return 0;
}

/* What the daemon would refuse anyway, refused before anything is sent:
 * a negative (or not finite) ttl or idle_ttl must not quietly become the
 * default, as the "0 = default" packing would make it. */
static int check_create(const struct dsec_create_opts *o, struct dsec_err *err)
{
	if (!o)
		return 0;
	if (!(o->ttl >= 0 && o->ttl <= 1e9))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "ttl %g must be seconds between 0 and 1e9", o->ttl);
	if (!(o->idle_ttl >= 0 && o->idle_ttl <= 1e9))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "idle_ttl %g must be seconds between 0 and 1e9", o->idle_ttl);
	if (!(o->limits.cpus >= 0 && o->limits.cpus <= 4096))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "limits.cpus %g must be between 0 and 4096", o->limits.cpus);
	return 0;
}

/* The same for a command's timeout (exec, call, exec_start, session_exec). */
int dcl_check_timeout(double timeout, struct dsec_err *err)
{
	if (!(timeout >= 0 && timeout <= 1e9))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "timeout %g must be seconds between 0 and 1e9", timeout);
	return 0;
}

static void pack_limits(struct dsec_pk *p, const struct dsec_limits *l, uint32_t weight)
{
	dsec_pk_str(p, "limits");
	dsec_pk_map_begin(p);
	if (l->cpus > 0)
		dsec_pk_kv_double(p, "cpus", l->cpus);
	if (l->memory)
		dsec_pk_kv_u64(p, "memory", l->memory);
	if (l->pids)
		dsec_pk_kv_u64(p, "pids", l->pids);
	if (l->nofile)
		dsec_pk_kv_u64(p, "nofile", l->nofile);
	if (l->disk)
		dsec_pk_kv_u64(p, "disk", l->disk);
	if (weight)
		dsec_pk_kv_u64(p, "cpu_weight", weight);
	dsec_pk_end(p);
}

static void pack_create(struct dsec_pk *p, const struct dsec_create_opts *o, bool call)
{
	if (!o)
		return;
	if (o->backend)
		dsec_pk_kv_str(p, "backend", o->backend);
	if (o->image)
		dsec_pk_kv_str(p, "image", o->image);
	if (o->runtime)
		dsec_pk_kv_str(p, "runtime", o->runtime);
	if (o->ttl > 0)
		dsec_pk_kv_double(p, "ttl", o->ttl);
	if (o->idle_ttl > 0)
		dsec_pk_kv_double(p, "idle_ttl", o->idle_ttl);
	if (o->env && !call)
		dsec_pk_kv_env(p, "env", o->env);
	if (o->cwd && !call)
		dsec_pk_kv_str(p, "cwd", o->cwd);
	if (o->network)
		dsec_pk_kv_str(p, "network", o->network);
	if (o->allow)
		dsec_pk_kv_strv(p, "allow", o->allow);
	if (o->dns)
		dsec_pk_kv_str(p, "dns", o->dns);
	if (o->seccomp_deny)
		dsec_pk_kv_strv(p, "seccomp_deny", o->seccomp_deny);
	if (o->layers)
		dsec_pk_kv_strv(p, "layers", o->layers);
	pack_limits(p, &o->limits, o->cpu_weight);
}

int dsec_create(struct dsec_client *c, const struct dsec_create_opts *o, char **id,
		struct dsec_err *err)
{
	return dsec_create_rl(c, o, NULL, id, err);
}

int dsec_create_rl(struct dsec_client *c, const struct dsec_create_opts *o,
		   const struct dsec_rl_opts *rl, char **id, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	if ((rc = check_create(o, err)) < 0)
		return rc;
	if (rl && rl->struct_size < sizeof(size_t))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "dsec_rl_opts.struct_size is "
				     "not set");
	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "create");
	pack_create(&p, o, false);
	/* Fields past the caller's struct_size are not read (an older
	 * program's struct is smaller). */
#define HAS(f) (rl && rl->struct_size >= offsetof(struct dsec_rl_opts, f) + sizeof(rl->f))
	if (HAS(token) && rl->token)
		dsec_pk_kv_str(&p, "token", rl->token);
	if (HAS(lease) && rl->lease)
		dsec_pk_kv_str(&p, "lease", rl->lease);
	if (HAS(trajectory) && rl->trajectory >= 0)
		dsec_pk_kv_bool(&p, "trajectory", rl->trajectory > 0);
	if (HAS(grade_layers) && rl->grade_layers && rl->grade_layers[0])
		dsec_pk_kv_strv(&p, "grade_layers", rl->grade_layers);
	if (HAS(watch) && rl->watch && rl->watch[0])
		dsec_pk_kv_strv(&p, "watch", rl->watch);
#undef HAS
	/* Creating may take long (a VM boots): wait beyond the client timeout. */
	rc = dcl_roundtrip(c, &p, 300, &r, err);
	if (rc == 0)
		rc = dcl_get_str_need(&r, "create", "id", id, err);
	dcl_reply_free(&r);
	return rc;
}

void dcl_pack_exec(struct dsec_pk *p, const struct dsec_cmd *q)
{
	if (q->argv)
		dsec_pk_kv_strv(p, "argv", q->argv);
	if (q->code)
		dsec_pk_kv_str(p, "code", q->code);
	if (q->stdin_len)
		dsec_pk_kv_bin(p, "stdin", q->stdin_data, q->stdin_len);
	if (q->env)
		dsec_pk_kv_env(p, "env", q->env);
	if (q->cwd)
		dsec_pk_kv_str(p, "cwd", q->cwd);
	if (q->timeout > 0)
		dsec_pk_kv_double(p, "timeout", q->timeout);
	if (q->output_cap)
		dsec_pk_kv_u64(p, "output_cap", q->output_cap);
}

/* Its new fields went into padding: the size is libdsec.so.1's. */
_Static_assert(sizeof(struct dsec_cmd_res) == offsetof(struct dsec_cmd_res, oom_killed) + 8,
	       "struct dsec_cmd_res grew");

/* A command's result (exec, call, exec_read, session_exec): exit_code is
 * always there; on failure res holds nothing to free. */
int dcl_unpack_exec(struct reply *r, const char *op, struct dsec_cmd_res *res,
		    struct dsec_err *err)
{
	const msgpack_object *m = r->result, *ec = dsec_map_get(m, "exit_code");
	const void *d;
	size_t n;
	int rc;

	memset(res, 0, sizeof(*res));
	if (!ec || (ec->type != MSGPACK_OBJECT_NEGATIVE_INTEGER &&
		    ec->type != MSGPACK_OBJECT_POSITIVE_INTEGER))
		return dcl_no_field(r, op, "exit_code", err);
	res->exit_code = ec->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ? (int)ec->via.i64
								      : (int)ec->via.u64;
	res->signal = (int)dcl_get_u64_or(r, m, "signal", 0);
	dcl_get_bool_or(r, m, "timed_out", &res->timed_out);
	dcl_get_bool_or(r, m, "stdout_truncated", &res->out_truncated);
	dcl_get_bool_or(r, m, "stderr_truncated", &res->err_truncated);
	res->duration = dcl_get_double_or(r, m, "duration", 0);
	dcl_get_bool_or(r, m, "oom_killed", &res->oom_killed);
	dcl_get_bool_or(r, m, "pids_limited", &res->pids_limited);
	uint64_t sd = dcl_get_u64_or(r, m, "seccomp_denied", 0);
	res->seccomp_denied = sd < UINT32_MAX ? (uint32_t)sd : UINT32_MAX;
	if ((rc = dsec_get_bin(m, "stdout", SIZE_MAX, &d, &n, NULL)) == 0)
		dsec_buf_add(&res->out, d, n);
	dcl_mark_bad(r, rc, "stdout");
	if ((rc = dsec_get_bin(m, "stderr", SIZE_MAX, &d, &n, NULL)) == 0)
		dsec_buf_add(&res->err, d, n);
	dcl_mark_bad(r, rc, "stderr");
	if ((rc = dcl_reply_done(r, op, 0, err)) < 0)
		dsec_cmd_res_free(res);
	return rc;
}

static int exec_common(struct dsec_client *c, const char *id, const struct dsec_cmd *req,
		       const uint64_t *step, bool *replayed, struct dsec_cmd_res *res,
		       struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	if ((rc = dcl_check_timeout(req->timeout, err)) < 0)
		return rc;
	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "exec");
	dsec_pk_kv_str(&p, "id", id);
	dcl_pack_exec(&p, req);
	if (step)
		dsec_pk_kv_u64(&p, "step", *step);
	rc = dcl_roundtrip(c, &p, 300 + (req->timeout > 0 ? req->timeout : 3600), &r, err);
	if (rc == 0 && replayed)
		*replayed = dsec_has(r.result, "replayed");
	if (rc == 0)
		rc = dcl_unpack_exec(&r, "exec", res, err);
	dcl_reply_free(&r);
	return rc;
}

int dsec_exec(struct dsec_client *c, const char *id, const struct dsec_cmd *req,
	      struct dsec_cmd_res *res, struct dsec_err *err)
{
	return exec_common(c, id, req, NULL, NULL, res, err);
}

int dsec_exec_step(struct dsec_client *c, const char *id, uint64_t step,
		   const struct dsec_cmd *req, struct dsec_cmd_res *res, bool *replayed,
		   struct dsec_err *err)
{
	if (replayed)
		*replayed = false;
	return exec_common(c, id, req, &step, replayed, res, err);
}

int dsec_lease_open(struct dsec_client *c, double timeout, double grace,
		    const char *const *labels, char **id, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "lease_open");
	if (timeout > 0)
		dsec_pk_kv_double(&p, "timeout", timeout);
	if (grace > 0)
		dsec_pk_kv_double(&p, "grace", grace);
	if (labels)
		dsec_pk_kv_env(&p, "labels", labels);
	rc = dcl_roundtrip(c, &p, 0, &r, err);
	if (rc == 0)
		rc = dcl_get_str_need(&r, "lease_open", "id", id, err);
	dcl_reply_free(&r);
	return rc;
}

int dsec_lease_renew(struct dsec_client *c, const char *id, struct dsec_err *err)
{
	return dcl_id_op(c, "lease_renew", id, err);
}

int dsec_lease_close(struct dsec_client *c, const char *id, bool destroy, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "lease_close");
	dsec_pk_kv_str(&p, "id", id);
	dsec_pk_kv_bool(&p, "destroy", destroy);
	rc = dcl_roundtrip(c, &p, 60, &r, err);
	dcl_reply_free(&r);
	return rc;
}

int dsec_call(struct dsec_client *c, const struct dsec_create_opts *o,
	      const struct dsec_cmd *req, struct dsec_cmd_res *res, struct dsec_err *err)
{
	struct dsec_cmd q = *req;
	struct dsec_pk p;
	struct reply r;
	int rc;

	if ((rc = check_create(o, err)) < 0 || (rc = dcl_check_timeout(req->timeout, err)) < 0)
		return rc;
	/* The command's env and cwd win; the sandbox's fill in. */
	if (o && !q.env)
		q.env = o->env;
	if (o && !q.cwd)
		q.cwd = o->cwd;
	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "call");
	pack_create(&p, o, true);
	dcl_pack_exec(&p, &q);
	rc = dcl_roundtrip(c, &p, 300 + (q.timeout > 0 ? q.timeout : 3600), &r, err);
	if (rc == 0)
		rc = dcl_unpack_exec(&r, "call", res, err);
	dcl_reply_free(&r);
	return rc;
}

void dsec_cmd_res_free(struct dsec_cmd_res *res)
{
	dsec_buf_free(&res->out);
	dsec_buf_free(&res->err);
}

static int exec_start(struct dsec_client *c, const char *id, const uint64_t *step,
		      const struct dsec_cmd *req, const struct dsec_exec_start_opts *o, char **exec,
		      bool *replayed, struct dsec_err *err)
{
	static const struct dsec_exec_start_opts none = { 0 };
	struct dsec_pk p;
	struct reply r;
	int rc;

	if (!o)
		o = &none;
	*exec = NULL;
	if ((rc = dcl_check_timeout(req->timeout, err)) < 0)
		return rc;
	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "exec_start");
	dsec_pk_kv_str(&p, "id", id);
	dcl_pack_exec(&p, req);
	if (o->pty)
		dsec_pk_kv_bool(&p, "pty", true);
	if (o->rows)
		dsec_pk_kv_u64(&p, "rows", o->rows);
	if (o->cols)
		dsec_pk_kv_u64(&p, "cols", o->cols);
	if (o->stdin_open)
		dsec_pk_kv_bool(&p, "stdin_open", true);
	if (step)
		dsec_pk_kv_u64(&p, "step", *step);
	rc = dcl_roundtrip(c, &p, 60, &r, err);
	if (rc == 0)
		rc = dcl_get_str_need(&r, "exec_start", "exec", exec, err);
	if (rc == 0 && replayed)
		*replayed = dsec_has(r.result, "replayed");
	dcl_reply_free(&r);
	return rc;
}

int dsec_exec_start(struct dsec_client *c, const char *id, const struct dsec_cmd *req,
		    const struct dsec_exec_start_opts *o, char **exec, struct dsec_err *err)
{
	return exec_start(c, id, NULL, req, o, exec, NULL, err);
}

int dsec_exec_start_step(struct dsec_client *c, const char *id, uint64_t step,
			 const struct dsec_cmd *req, const struct dsec_exec_start_opts *o,
			 char **exec, bool *replayed, struct dsec_err *err)
{
	if (replayed)
		*replayed = false;
	return exec_start(c, id, &step, req, o, exec, replayed, err);
}

/* Starts a request on sandbox id with key: val, more arguments to follow
 * (file ops: path; streaming exec: exec); its map counts them. */
void dcl_pk_id_key(struct dsec_pk *p, const char *op, const char *id, const char *key,
		   const char *val)
{
	dsec_pk_init(p);
	dsec_pk_request_begin(p, op);
	dsec_pk_kv_str(p, "id", id);
	dsec_pk_kv_str(p, key, val);
}

static void pk_exec_op(struct dsec_pk *p, const char *op, const char *id, const char *exec)
{
	dcl_pk_id_key(p, op, id, "exec", exec);
}

int dsec_exec_read(struct dsec_client *c, const char *id, const char *exec, double wait,
		   struct dsec_cmd_res *res, bool *done, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	memset(res, 0, sizeof(*res));
	*done = false;
	pk_exec_op(&p, "exec_read", id, exec);
	dsec_pk_kv_double(&p, "wait", wait);
	rc = dcl_roundtrip(c, &p, wait, &r, err);
	if (rc == 0 && (rc = dcl_unpack_exec(&r, "exec_read", res, err)) == 0) {
		dcl_get_bool_or(&r, r.result, "done", done);
		if ((rc = dcl_reply_done(&r, "exec_read", 0, err)) < 0)
			dsec_cmd_res_free(res);
	}
	dcl_reply_free(&r);
	return rc;
}

static int exec_write(struct dsec_client *c, const char *id, const char *exec,
		      const uint64_t *step, const void *data, size_t len, bool eof, bool *replayed,
		      struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	pk_exec_op(&p, "exec_write", id, exec);
	dsec_pk_kv_bin(&p, "data", data, len);
	dsec_pk_kv_bool(&p, "eof", eof);
	if (step)
		dsec_pk_kv_u64(&p, "step", *step);
	rc = dcl_roundtrip(c, &p, 0, &r, err);
	if (rc == 0 && replayed)
		*replayed = dsec_has(r.result, "replayed");
	dcl_reply_free(&r);
	return rc;
}

int dsec_exec_write(struct dsec_client *c, const char *id, const char *exec, const void *data,
		    size_t len, bool eof, struct dsec_err *err)
{
	return exec_write(c, id, exec, NULL, data, len, eof, NULL, err);
}

int dsec_exec_write_step(struct dsec_client *c, const char *id, const char *exec, uint64_t step,
			 const void *data, size_t len, bool eof, bool *replayed,
			 struct dsec_err *err)
{
	if (replayed)
		*replayed = false;
	return exec_write(c, id, exec, &step, data, len, eof, replayed, err);
}

int dsec_exec_signal(struct dsec_client *c, const char *id, const char *exec, int sig,
		     struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	pk_exec_op(&p, "exec_signal", id, exec);
	dsec_pk_kv_u64(&p, "signal", (uint64_t)(sig > 0 ? sig : 0));
	rc = dcl_roundtrip(c, &p, 0, &r, err);
	dcl_reply_free(&r);
	return rc;
}

int dsec_exec_resize(struct dsec_client *c, const char *id, const char *exec, unsigned rows,
		     unsigned cols, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	pk_exec_op(&p, "exec_resize", id, exec);
	dsec_pk_kv_u64(&p, "rows", rows);
	dsec_pk_kv_u64(&p, "cols", cols);
	rc = dcl_roundtrip(c, &p, 0, &r, err);
	dcl_reply_free(&r);
	return rc;
}

int dsec_session_open(struct dsec_client *c, const char *id, const struct dsec_session_opts *o,
		      char **name, struct dsec_err *err)
{
	static const struct dsec_session_opts none;
	struct dsec_pk p;
	struct reply r;
	int rc;

	if (!o)
		o = &none;
	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "session_open");
	dsec_pk_kv_str(&p, "id", id);
	if (o->name)
		dsec_pk_kv_str(&p, "session", o->name);
	if (o->shell)
		dsec_pk_kv_str(&p, "shell", o->shell);
	if (o->env)
		dsec_pk_kv_env(&p, "env", o->env);
	if (o->cwd)
		dsec_pk_kv_str(&p, "cwd", o->cwd);
	rc = dcl_roundtrip(c, &p, 60, &r, err);
	if (rc == 0)
		rc = dcl_get_str_need(&r, "session_open", "session", name, err);
	dcl_reply_free(&r);
	return rc;
}

int dsec_session_exec(struct dsec_client *c, const char *id, const char *session,
		      const char *cmd, double timeout, size_t output_cap,
		      struct dsec_session_cmd_res *res, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	memset(res, 0, sizeof(*res));
	if ((rc = dcl_check_timeout(timeout, err)) < 0)
		return rc;
	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "session_exec");
	dsec_pk_kv_str(&p, "id", id);
	dsec_pk_kv_str(&p, "session", session);
	dsec_pk_kv_str(&p, "cmd", cmd);
	if (timeout > 0)
		dsec_pk_kv_double(&p, "timeout", timeout);
	if (output_cap)
		dsec_pk_kv_u64(&p, "output_cap", output_cap);
	/* A reset adds a grace and a shell start to the timeout. */
	rc = dcl_roundtrip(c, &p, 300 + (timeout > 0 ? timeout : 3600), &r, err);
	if (rc == 0 && (rc = dcl_unpack_exec(&r, "session_exec", &res->exec, err)) == 0) {
		res->cwd = dcl_get_str_or(&r, r.result, "cwd", "");
		dcl_get_bool_or(&r, r.result, "reset", &res->reset);
		dcl_get_bool_or(&r, r.result, "ended", &res->ended);
		if ((rc = dcl_reply_done(&r, "session_exec", 0, err)) < 0)
			dsec_session_cmd_res_free(res);
	}
	dcl_reply_free(&r);
	return rc;
}

int dsec_session_close(struct dsec_client *c, const char *id, const char *session,
		       struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "session_close");
	dsec_pk_kv_str(&p, "id", id);
	dsec_pk_kv_str(&p, "session", session);
	rc = dcl_roundtrip(c, &p, 60, &r, err);
	dcl_reply_free(&r);
	return rc;
}

void dsec_session_cmd_res_free(struct dsec_session_cmd_res *res)
{
	dsec_cmd_res_free(&res->exec);
	free(res->cwd);
	res->cwd = NULL;
}

/* An op whose only field is the sandbox id and whose result is not used
 * (destroy, pause, resume). */
int dcl_id_op(struct dsec_client *c, const char *op, const char *id, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, op);
	dsec_pk_kv_str(&p, "id", id);
	rc = dcl_roundtrip(c, &p, 0, &r, err);
	dcl_reply_free(&r);
	return rc;
}

int dsec_net_allow(struct dsec_client *c, const char *id, const char *const *allow,
		   struct dsec_err *err)
{
	static const char *const none[] = { NULL };
	struct dsec_pk p;
	struct reply r;
	int rc;

	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "net_allow");
	dsec_pk_kv_str(&p, "id", id);
	dsec_pk_kv_strv(&p, "allow", allow ? allow : none);
	rc = dcl_roundtrip(c, &p, 0, &r, err);
	dcl_reply_free(&r);
	return rc;
}

int dsec_usage(struct dsec_client *c, const char *id, struct dsec_usage *out,
	       struct dsec_err *err)
{
	static const struct {
		unsigned bit;		/* DSEC_HAVE_* */
		const char *key;	/* its reply field */
		size_t at;		/* its offset in struct dsec_usage */
	} fields[] = {
		{ DSEC_HAVE_CPU, "cpu_ns", offsetof(struct dsec_usage, cpu_ns) },
		{ DSEC_HAVE_MEMORY, "memory", offsetof(struct dsec_usage, memory) },
		{ DSEC_HAVE_MEMORY_PEAK, "memory_peak", offsetof(struct dsec_usage, memory_peak) },
		{ DSEC_HAVE_PIDS, "pids", offsetof(struct dsec_usage, pids) },
		{ DSEC_HAVE_DISK, "disk", offsetof(struct dsec_usage, disk) },
	};
	struct dsec_pk p;
	struct reply r;
	int rc;

	memset(out, 0, sizeof(*out));
	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "usage");
	dsec_pk_kv_str(&p, "id", id);
	if ((rc = dcl_roundtrip(c, &p, 0, &r, err)) == 0) {
		for (size_t i = 0; i < DSEC_ARRAY_LEN(fields); i++) {
			uint64_t *v = (uint64_t *)((char *)out + fields[i].at);

			if (dsec_map_get(r.result, fields[i].key)) {
				*v = dcl_get_u64_or(&r, r.result, fields[i].key, 0);
				out->have |= fields[i].bit;
			}
		}
		if ((rc = dcl_reply_done(&r, "usage", 0, err)) < 0)
			memset(out, 0, sizeof(*out));
	}
	dcl_reply_free(&r);
	return rc;
}

int dsec_ping(struct dsec_client *c, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "ping");
	rc = dcl_roundtrip(c, &p, 0, &r, err);
	dcl_reply_free(&r);
	return rc;
}

int dsec_drain(struct dsec_client *c, bool drain, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "drain");
	dsec_pk_kv_bool(&p, "drain", drain);
	rc = dcl_roundtrip(c, &p, 0, &r, err);
	dcl_reply_free(&r);
	return rc;
}

int dsec_destroy(struct dsec_client *c, const char *id, struct dsec_err *err)
{
	return dcl_id_op(c, "destroy", id, err);
}

int dsec_pause(struct dsec_client *c, const char *id, struct dsec_err *err)
{
	return dcl_id_op(c, "pause", id, err);
}

int dsec_resume(struct dsec_client *c, const char *id, struct dsec_err *err)
{
	return dcl_id_op(c, "resume", id, err);
}

int dsec_snapshot(struct dsec_client *c, const char *id, const char *tag, char **image,
		  struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "snapshot");
	dsec_pk_kv_str(&p, "id", id);
	dsec_pk_kv_str(&p, "tag", tag);
	/* Copying and packing a large sandbox takes a while. */
	rc = dcl_roundtrip(c, &p, 600, &r, err);
	if (rc == 0)
		rc = dcl_get_str_need(&r, "snapshot", "image", image, err);
	dcl_reply_free(&r);
	return rc;
}

int dsec_chunk_get(struct dsec_client *c, const char *kind, const char *digest,
		   struct dsec_buf *out, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	dsec_buf_reset(out);
	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "chunk_get");
	dsec_pk_kv_str(&p, "kind", kind);
	dsec_pk_kv_str(&p, "digest", digest);
	rc = dcl_roundtrip(c, &p, 0, &r, err);
	if (rc == 0)
		rc = dcl_get_bin_need(&r, "chunk_get", "data", out, err);
	dcl_reply_free(&r);
	return rc;
}
