/* client.c - libdsec: the C client over nng REQ/REP. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#include "dsec.h"
#include "proto.h"

/* Replies may carry a whole file or captured output; allow generously. */
#define CLIENT_RECV_MAX (256u << 20)

/* nng's message with a lowercase first letter, as our messages are. */
static const char *nng_why(int rc, char *buf, size_t len)
{
	snprintf(buf, len, "%s", nng_strerror(rc));
	if (buf[0] >= 'A' && buf[0] <= 'Z')
		buf[0] = (char)(buf[0] - 'A' + 'a');
	return buf;
}

struct dsec_client {
	nng_socket sock;	/* REQ socket, dialed to url */
	char *url;		/* address in nng form */
	double timeout;		/* seconds added to a request's own timeout */
};

int dsec_connect(struct dsec_client **out, const char *url, struct dsec_err *err)
{
	struct dsec_client *c;
	char why[128];
	int rc;

	if (!url || !*url)
		url = getenv("DSEC_HOST");
	if (!url || !*url)
		url = DSEC_DEFAULT_URL;
	c = xcalloc(1, sizeof(*c));
	c->url = xstrdup(url);
	c->timeout = 30;
	if ((rc = nng_req0_open(&c->sock)) != 0) {
		dsec_err_setc(err, DSEC_E_INTERNAL, ENOMEM, "cannot open nng socket: %s",
			      nng_why(rc, why, sizeof(why)));
		goto fail;
	}
	nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, CLIENT_RECV_MAX);
	nng_socket_set_ms(c->sock, NNG_OPT_RECONNMINT, 20);
	nng_socket_set_ms(c->sock, NNG_OPT_RECONNMAXT, 500);
	/* Non-blocking dial: the daemon may come up later; requests wait. */
	if ((rc = nng_dial(c->sock, url, NULL, NNG_FLAG_NONBLOCK)) != 0) {
		dsec_err_setc(err, rc == NNG_EADDRINVAL || rc == NNG_ENOTSUP ? DSEC_E_INVALID
									: DSEC_E_UNAVAILABLE,
			      EINVAL, "cannot connect to '%s': %s", url, nng_why(rc, why, sizeof(why)));
		nng_close(c->sock);
		goto fail;
	}
	*out = c;
	return 0;
fail:
	free(c->url);
	free(c);
	return -EINVAL;
}

void dsec_close(struct dsec_client *c)
{
	if (!c)
		return;
	nng_close(c->sock);
	free(c->url);
	free(c);
}

void dsec_set_timeout(struct dsec_client *c, double seconds)
{
	c->timeout = seconds;
}

const char *dsec_client_url(const struct dsec_client *c)
{
	return c->url;
}

/* Sends req and waits for the reply message (caller frees it with
 * nng_msg_free): the reply is decoded in place, never copied. */
static int raw_timeout(struct dsec_client *c, const void *req, size_t len, double extra,
		       nng_msg **reply, struct dsec_err *err)
{
	nng_msg *msg;
	char why[128];
	int rc;
	double t = c->timeout + extra;

	nng_socket_set_ms(c->sock, NNG_OPT_SENDTIMEO, (nng_duration)(c->timeout * 1000));
	nng_socket_set_ms(c->sock, NNG_OPT_RECVTIMEO, t > 2e6 ? NNG_DURATION_INFINITE
							       : (nng_duration)(t * 1000));
	if ((rc = nng_msg_alloc(&msg, 0)) != 0 || (rc = nng_msg_append(msg, req, len)) != 0)
		return dsec_err_setc(err, DSEC_E_INTERNAL, ENOMEM, "cannot build request: %s",
				     nng_why(rc, why, sizeof(why)));
	if ((rc = nng_sendmsg(c->sock, msg, 0)) != 0) {
		nng_msg_free(msg);
		return dsec_err_setc(err, DSEC_E_UNAVAILABLE, ECONNREFUSED,
				     "cannot send request to '%s': %s", c->url, nng_why(rc, why, sizeof(why)));
	}
	if ((rc = nng_recvmsg(c->sock, reply, 0)) != 0)
		return dsec_err_setc(err, DSEC_E_UNAVAILABLE,
				     rc == NNG_ETIMEDOUT ? ETIMEDOUT : ECONNREFUSED,
				     "no reply from '%s': %s", c->url, nng_why(rc, why, sizeof(why)));
	return 0;
}

int dsec_raw(struct dsec_client *c, const void *req, size_t len, void **reply,
	     size_t *reply_len, struct dsec_err *err)
{
	nng_msg *msg;
	int rc = raw_timeout(c, req, len, 0, &msg, err);

	if (rc < 0)
		return rc;
	*reply_len = nng_msg_len(msg);
	*reply = xmemdup(nng_msg_body(msg), *reply_len);
	nng_msg_free(msg);
	return 0;
}

/* A reply being read: the parsed frame and its result map. */
struct reply {
	struct dsec_msg msg;		/* owns the decoded objects */
	nng_msg *raw;			/* the frame bytes, or NULL */
	size_t len;			/* their length */
	const msgpack_object *result;	/* the result map (ok replies) */
};

static void reply_free(struct reply *r)
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
static int reply_error(struct dsec_client *c, const msgpack_object *root, struct dsec_err *err)
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
				     "bad reply from '%s': an error without a code: %.*s", c->url,
				     mlen, mtext);
	cd = dsec_code_from_name(code->via.str.ptr, code->via.str.size);
	if (cd == DSEC_E_OK)
		return dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO,
				     "bad reply from '%s': an error whose code is 'ok': %.*s", c->url,
				     mlen, mtext);
	if (cd == DSEC_E_INTERNAL && (code->via.str.size != 8 ||
				      memcmp(code->via.str.ptr, "internal", 8)))
		return dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO,
				     "bad reply from '%s': unknown error code '%.*s': %.*s", c->url,
				     code->via.str.size > 64 ? 64 : (int)code->via.str.size,
				     code->via.str.ptr, mlen, mtext);
	return dsec_err_setc(err, cd, EIO, "%.*s", mlen, mtext);
}

/* Sends the packed request p (consumed) and decodes the reply, of the
 * shape given (OBJS_FIXED or OBJS_LIST).  A daemon error becomes *err with
 * the daemon's code; rc < 0.  extra = seconds the request itself may take. */
static int roundtrip_n(struct dsec_client *c, struct dsec_pk *p, double extra, int shape,
		       struct reply *r, struct dsec_err *err)
{
	size_t len, rlen;
	void *req = dsec_pk_detach(p, &len);
	int rc;

	memset(r, 0, sizeof(*r));
	msgpack_unpacked_init(&r->msg.up);
	rc = raw_timeout(c, req, len, extra, &r->raw, err);
	free(req);
	if (rc < 0)
		return rc;
	dsec_msg_free(&r->msg);
	rlen = r->len = nng_msg_len(r->raw);
	if (dsec_msg_parse_n(&r->msg, nng_msg_body(r->raw), rlen, CLIENT_RECV_MAX,
			     reply_objs_max(shape, rlen), err) < 0) {
		dsec_err_prefix(err, "bad reply from '%s'", c->url);
		err->code = DSEC_E_INTERNAL;
		return -EPROTO;
	}
	bool ok = false;
	if (dsec_get_bool(r->msg.root, "ok", &ok, err) < 0)
		return dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO,
				     "bad reply from '%s': no 'ok' field", c->url);
	if (!ok)
		return reply_error(c, r->msg.root, err);
	r->result = dsec_map_get(r->msg.root, "result");
	if (!r->result || r->result->type != MSGPACK_OBJECT_MAP)
		return dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO,
				     "bad reply from '%s': no result map", c->url);
	return 0;
}

static int roundtrip(struct dsec_client *c, struct dsec_pk *p, double extra, struct reply *r,
		     struct dsec_err *err)
{
	return roundtrip_n(c, p, extra, OBJS_FIXED, r, err);
}

/* The entries of the list at key in the result, *n of them (0 when it
 * is absent).  Each entry becomes a struct with strings of its own, so
 * a list with more entries than the reply could carry at min_bytes each
 * (less than what the daemon's entries take: their field names alone)
 * is a protocol error: a hostile reply of empty entries cannot make us
 * allocate many times its size. */
static int get_list(struct dsec_client *c, const struct reply *r, const msgpack_object *map,
		    const char *key, size_t min_bytes, const msgpack_object **entries, size_t *n,
		    struct dsec_err *err)
{
	const msgpack_object *a = dsec_map_get(map, key);

	*entries = NULL;
	*n = 0;
	if (!a || a->type != MSGPACK_OBJECT_ARRAY || !a->via.array.size)
		return 0;
	if (a->via.array.size > r->len / min_bytes)
		return dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO,
				     "bad reply from '%s': %u entries in '%s' cannot fit in %zu bytes",
				     c->url, a->via.array.size, key, r->len);
	*entries = a->via.array.ptr;
	*n = a->via.array.size;
	return 0;
}

static char *get_str_or(const msgpack_object *map, const char *key, const char *dflt)
{
	char *s = NULL;

	if (dsec_get_str(map, key, &s, NULL) < 0)
		return xstrdup(dflt);
	return s;
}

static double get_double_or(const msgpack_object *map, const char *key, double dflt)
{
	double v = dflt;

	dsec_get_double(map, key, &v, NULL);
	return v;
}

static uint64_t get_u64_or(const msgpack_object *map, const char *key, uint64_t dflt)
{
	uint64_t v = dflt;

	dsec_get_u64(map, key, &v, NULL);
	return v;
}

/* Entries create and call share: backend, image, runtime, ttl, env, cwd,
 * limits.  A call carries env and cwd once, in the exec part. */
static size_t count_create(const struct dsec_create_opts *o, bool call)
{
	if (!o)
		return 0;
	return !!o->backend + !!o->image + !!o->runtime + (o->ttl > 0) + (o->idle_ttl > 0) +
	       (!call && o->env) + (!call && o->cwd) + !!o->network + !!o->allow + !!o->dns +
	       !!o->seccomp_deny + !!o->layers + 1;
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
static int check_timeout(double timeout, struct dsec_err *err)
{
	if (!(timeout >= 0 && timeout <= 1e9))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "timeout %g must be seconds between 0 and 1e9", timeout);
	return 0;
}

static void pack_limits(struct dsec_pk *p, const struct dsec_be_limits *l, uint32_t weight)
{
	size_t n = (l->cpus > 0) + !!l->memory + !!l->pids + !!l->nofile + !!l->disk + !!weight;

	dsec_pk_str(p, "limits");
	msgpack_pack_map(&p->pk, n);
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
	struct dsec_pk p;
	struct reply r;
	int rc;

	if ((rc = check_create(o, err)) < 0)
		return rc;
	dsec_pk_init(&p);
	dsec_pk_request(&p, "create", count_create(o, false));
	pack_create(&p, o, false);
	/* Creating may take long (a VM boots): wait beyond the client timeout. */
	rc = roundtrip(c, &p, 300, &r, err);
	if (rc == 0 && dsec_get_str(r.result, "id", id, err) < 0)
		rc = dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO, "create reply has no id");
	reply_free(&r);
	return rc;
}

/* Exec fields: argv or code, stdin, env, cwd, timeout, output_cap. */
static size_t count_exec(const struct dsec_exec_req *q)
{
	return !!q->argv + !!q->code + !!q->stdin_len + !!q->env + !!q->cwd + (q->timeout > 0) +
	       !!q->output_cap;
}

static void pack_exec(struct dsec_pk *p, const struct dsec_exec_req *q)
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

static int unpack_exec(const msgpack_object *m, struct dsec_exec_res *res, struct dsec_err *err)
{
	const void *d;
	size_t n;
	const msgpack_object *ec = dsec_map_get(m, "exit_code");

	memset(res, 0, sizeof(*res));
	if (!ec)
		return dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO, "exec reply has no exit_code");
	res->exit_code = ec->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ? (int)ec->via.i64
								      : (int)ec->via.u64;
	res->signal = (int)get_u64_or(m, "signal", 0);
	dsec_get_bool(m, "timed_out", &res->timed_out, NULL);
	dsec_get_bool(m, "stdout_truncated", &res->out_truncated, NULL);
	dsec_get_bool(m, "stderr_truncated", &res->err_truncated, NULL);
	res->duration = get_double_or(m, "duration", 0);
	dsec_get_bool(m, "oom_killed", &res->oom_killed, NULL);
	if (dsec_get_bin(m, "stdout", SIZE_MAX, &d, &n, NULL) == 0)
		dsec_buf_add(&res->out, d, n);
	if (dsec_get_bin(m, "stderr", SIZE_MAX, &d, &n, NULL) == 0)
		dsec_buf_add(&res->err, d, n);
	return 0;
}

int dsec_exec(struct dsec_client *c, const char *id, const struct dsec_exec_req *req,
	      struct dsec_exec_res *res, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	if ((rc = check_timeout(req->timeout, err)) < 0)
		return rc;
	dsec_pk_init(&p);
	dsec_pk_request(&p, "exec", 1 + count_exec(req));
	dsec_pk_kv_str(&p, "id", id);
	pack_exec(&p, req);
	rc = roundtrip(c, &p, 300 + (req->timeout > 0 ? req->timeout : 3600), &r, err);
	if (rc == 0)
		rc = unpack_exec(r.result, res, err);
	reply_free(&r);
	return rc;
}

int dsec_call(struct dsec_client *c, const struct dsec_create_opts *o,
	      const struct dsec_exec_req *req, struct dsec_exec_res *res, struct dsec_err *err)
{
	struct dsec_exec_req q = *req;
	struct dsec_pk p;
	struct reply r;
	int rc;

	if ((rc = check_create(o, err)) < 0 || (rc = check_timeout(req->timeout, err)) < 0)
		return rc;
	/* The command's env and cwd win; the sandbox's fill in. */
	if (o && !q.env)
		q.env = o->env;
	if (o && !q.cwd)
		q.cwd = o->cwd;
	dsec_pk_init(&p);
	dsec_pk_request(&p, "call", count_create(o, true) + count_exec(&q));
	pack_create(&p, o, true);
	pack_exec(&p, &q);
	rc = roundtrip(c, &p, 300 + (q.timeout > 0 ? q.timeout : 3600), &r, err);
	if (rc == 0)
		rc = unpack_exec(r.result, res, err);
	reply_free(&r);
	return rc;
}

void dsec_exec_res_free(struct dsec_exec_res *res)
{
	dsec_buf_free(&res->out);
	dsec_buf_free(&res->err);
}

/* Starts a file request: header, id and path, then n_extra fields. */
int dsec_exec_start(struct dsec_client *c, const char *id, const struct dsec_exec_req *req,
		    const struct dsec_exec_start_opts *o, char **exec, struct dsec_err *err)
{
	static const struct dsec_exec_start_opts none = { 0 };
	struct dsec_pk p;
	struct reply r;
	int rc;

	if (!o)
		o = &none;
	*exec = NULL;
	if ((rc = check_timeout(req->timeout, err)) < 0)
		return rc;
	dsec_pk_init(&p);
	dsec_pk_request(&p, "exec_start", 1 + count_exec(req) + o->pty + !!o->rows + !!o->cols +
			o->stdin_open);
	dsec_pk_kv_str(&p, "id", id);
	pack_exec(&p, req);
	if (o->pty)
		dsec_pk_kv_bool(&p, "pty", true);
	if (o->rows)
		dsec_pk_kv_u64(&p, "rows", o->rows);
	if (o->cols)
		dsec_pk_kv_u64(&p, "cols", o->cols);
	if (o->stdin_open)
		dsec_pk_kv_bool(&p, "stdin_open", true);
	rc = roundtrip(c, &p, 60, &r, err);
	if (rc == 0 && dsec_get_str(r.result, "exec", exec, NULL) < 0)
		rc = dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO, "exec_start reply has no 'exec'");
	reply_free(&r);
	return rc;
}

/* Starts a request on sandbox id with key: val and n more arguments
 * (file ops: path; streaming exec: exec). */
static void pk_id_key(struct dsec_pk *p, const char *op, const char *id, const char *key,
		      const char *val, size_t n)
{
	dsec_pk_init(p);
	dsec_pk_request(p, op, 2 + n);
	dsec_pk_kv_str(p, "id", id);
	dsec_pk_kv_str(p, key, val);
}

static void pk_exec_op(struct dsec_pk *p, const char *op, const char *id, const char *exec,
		       size_t n)
{
	pk_id_key(p, op, id, "exec", exec, n);
}

int dsec_exec_read(struct dsec_client *c, const char *id, const char *exec, double wait,
		   struct dsec_exec_res *res, bool *done, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	memset(res, 0, sizeof(*res));
	*done = false;
	pk_exec_op(&p, "exec_read", id, exec, 1);
	dsec_pk_kv_double(&p, "wait", wait);
	rc = roundtrip(c, &p, wait, &r, err);
	if (rc == 0 && (rc = unpack_exec(r.result, res, err)) == 0)
		dsec_get_bool(r.result, "done", done, NULL);
	reply_free(&r);
	return rc;
}

int dsec_exec_write(struct dsec_client *c, const char *id, const char *exec, const void *data,
		    size_t len, bool eof, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	pk_exec_op(&p, "exec_write", id, exec, 2);
	dsec_pk_kv_bin(&p, "data", data, len);
	dsec_pk_kv_bool(&p, "eof", eof);
	rc = roundtrip(c, &p, 0, &r, err);
	reply_free(&r);
	return rc;
}

int dsec_exec_signal(struct dsec_client *c, const char *id, const char *exec, int sig,
		     struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	pk_exec_op(&p, "exec_signal", id, exec, 1);
	dsec_pk_kv_u64(&p, "signal", (uint64_t)(sig > 0 ? sig : 0));
	rc = roundtrip(c, &p, 0, &r, err);
	reply_free(&r);
	return rc;
}

int dsec_exec_resize(struct dsec_client *c, const char *id, const char *exec, unsigned rows,
		     unsigned cols, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	pk_exec_op(&p, "exec_resize", id, exec, 2);
	dsec_pk_kv_u64(&p, "rows", rows);
	dsec_pk_kv_u64(&p, "cols", cols);
	rc = roundtrip(c, &p, 0, &r, err);
	reply_free(&r);
	return rc;
}

static void pk_file(struct dsec_pk *p, const char *op, const char *id, const char *path,
		    size_t n_extra)
{
	pk_id_key(p, op, id, "path", path, n_extra);
}

/* Packs uid and gid that are not DSEC_OWNER_DEFAULT. */
static void pk_owner(struct dsec_pk *p, int64_t uid, int64_t gid)
{
	if (uid != DSEC_OWNER_DEFAULT)
		dsec_pk_kv_u64(p, "uid", (uint64_t)uid);
	if (gid != DSEC_OWNER_DEFAULT)
		dsec_pk_kv_u64(p, "gid", (uint64_t)gid);
}

static size_t n_owner(int64_t uid, int64_t gid)
{
	return (uid != DSEC_OWNER_DEFAULT) + (gid != DSEC_OWNER_DEFAULT);
}

/* Sends p and drops the result: for requests that return nothing needed. */
static int file_call(struct dsec_client *c, struct dsec_pk *p, struct dsec_err *err)
{
	struct reply r;
	int rc = roundtrip(c, p, 0, &r, err);

	reply_free(&r);
	return rc;
}

int dsec_session_open(struct dsec_client *c, const char *id, const struct dsec_session_spec *o,
		      char **name, struct dsec_err *err)
{
	static const struct dsec_session_spec none;
	struct dsec_pk p;
	struct reply r;
	int rc;

	if (!o)
		o = &none;
	dsec_pk_init(&p);
	dsec_pk_request(&p, "session_open", 1 + !!o->name + !!o->shell + !!o->env + !!o->cwd);
	dsec_pk_kv_str(&p, "id", id);
	if (o->name)
		dsec_pk_kv_str(&p, "session", o->name);
	if (o->shell)
		dsec_pk_kv_str(&p, "shell", o->shell);
	if (o->env)
		dsec_pk_kv_env(&p, "env", o->env);
	if (o->cwd)
		dsec_pk_kv_str(&p, "cwd", o->cwd);
	rc = roundtrip(c, &p, 60, &r, err);
	if (rc == 0 && dsec_get_str(r.result, "session", name, err) < 0)
		rc = dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO, "session_open reply has no session");
	reply_free(&r);
	return rc;
}

int dsec_session_exec(struct dsec_client *c, const char *id, const char *session,
		      const char *cmd, double timeout, size_t output_cap,
		      struct dsec_session_res *res, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	memset(res, 0, sizeof(*res));
	if ((rc = check_timeout(timeout, err)) < 0)
		return rc;
	dsec_pk_init(&p);
	dsec_pk_request(&p, "session_exec", 3 + (timeout > 0) + !!output_cap);
	dsec_pk_kv_str(&p, "id", id);
	dsec_pk_kv_str(&p, "session", session);
	dsec_pk_kv_str(&p, "cmd", cmd);
	if (timeout > 0)
		dsec_pk_kv_double(&p, "timeout", timeout);
	if (output_cap)
		dsec_pk_kv_u64(&p, "output_cap", output_cap);
	/* A reset adds a grace and a shell start to the timeout. */
	rc = roundtrip(c, &p, 300 + (timeout > 0 ? timeout : 3600), &r, err);
	if (rc == 0 && (rc = unpack_exec(r.result, &res->exec, err)) == 0) {
		res->cwd = get_str_or(r.result, "cwd", "");
		dsec_get_bool(r.result, "reset", &res->reset, NULL);
		dsec_get_bool(r.result, "ended", &res->ended, NULL);
	}
	reply_free(&r);
	return rc;
}

int dsec_session_close(struct dsec_client *c, const char *id, const char *session,
		       struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	dsec_pk_init(&p);
	dsec_pk_request(&p, "session_close", 2);
	dsec_pk_kv_str(&p, "id", id);
	dsec_pk_kv_str(&p, "session", session);
	rc = roundtrip(c, &p, 60, &r, err);
	reply_free(&r);
	return rc;
}

void dsec_session_res_free(struct dsec_session_res *res)
{
	dsec_exec_res_free(&res->exec);
	free(res->cwd);
	res->cwd = NULL;
}

int dsec_file_write(struct dsec_client *c, const char *id, const char *path, const void *data,
		    size_t len, uint32_t mode, struct dsec_err *err)
{
	return dsec_file_write_as(c, id, path, data, len, mode, DSEC_OWNER_DEFAULT,
				  DSEC_OWNER_DEFAULT, err);
}

int dsec_file_write_as(struct dsec_client *c, const char *id, const char *path,
		       const void *data, size_t len, uint32_t mode, int64_t uid, int64_t gid,
		       struct dsec_err *err)
{
	struct dsec_pk p;

	pk_file(&p, "file_write", id, path, 1 + !!mode + n_owner(uid, gid));
	dsec_pk_kv_bin(&p, "data", data, len);
	if (mode)
		dsec_pk_kv_u64(&p, "mode", mode);
	pk_owner(&p, uid, gid);
	return file_call(c, &p, err);
}

static void unpack_info(const msgpack_object *m, struct dsec_file_info *i)
{
	_cleanup_free_ char *type = get_str_or(m, "type", "");
	static const char *const types[] = { "file", "dir", "symlink", "fifo", "socket", "char",
					     "block" };

	memset(i, 0, sizeof(*i));
	i->name = get_str_or(m, "name", "");
	if (dsec_get_str(m, "target", &i->target, NULL) < 0)
		i->target = NULL;
	for (size_t t = 0; t < DSEC_ARRAY_LEN(types); t++)
		if (!strcmp(type, types[t]))
			i->type = (enum dsec_file_type)t;
	i->mode = (uint32_t)get_u64_or(m, "mode", 0);
	i->size = get_u64_or(m, "size", 0);
	i->uid = (uint32_t)get_u64_or(m, "uid", 0);
	i->gid = (uint32_t)get_u64_or(m, "gid", 0);
	i->mtime = get_double_or(m, "mtime", 0);
}

int dsec_file_stat(struct dsec_client *c, const char *id, const char *path,
		   struct dsec_file_info *out, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	memset(out, 0, sizeof(*out));
	pk_file(&p, "file_stat", id, path, 0);
	if ((rc = roundtrip(c, &p, 0, &r, err)) == 0)
		unpack_info(r.result, out);
	reply_free(&r);
	return rc;
}

int dsec_file_list(struct dsec_client *c, const char *id, const char *path, size_t limit,
		   struct dsec_file_info **out, size_t *n, bool *truncated, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	*out = NULL;
	*n = 0;
	*truncated = false;
	pk_file(&p, "file_list", id, path, !!limit);
	if (limit)
		dsec_pk_kv_u64(&p, "limit", limit);
	if ((rc = roundtrip_n(c, &p, 0, OBJS_LIST, &r, err)) == 0) {
		const msgpack_object *a;

		dsec_get_bool(r.result, "truncated", truncated, NULL);
		if ((rc = get_list(c, &r, r.result, "entries", 32, &a, n, err)) == 0) {
			*out = xcalloc(*n ? *n : 1, sizeof(**out));
			for (size_t i = 0; i < *n; i++)
				unpack_info(&a[i], &(*out)[i]);
		}
	}
	reply_free(&r);
	return rc;
}

int dsec_file_mkdir(struct dsec_client *c, const char *id, const char *path, uint32_t mode,
		    bool parents, int64_t uid, int64_t gid, struct dsec_err *err)
{
	struct dsec_pk p;

	pk_file(&p, "file_mkdir", id, path, !!mode + parents + n_owner(uid, gid));
	if (mode)
		dsec_pk_kv_u64(&p, "mode", mode);
	if (parents)
		dsec_pk_kv_bool(&p, "parents", true);
	pk_owner(&p, uid, gid);
	return file_call(c, &p, err);
}

int dsec_file_remove(struct dsec_client *c, const char *id, const char *path, bool recursive,
		     uint64_t *removed, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	pk_file(&p, "file_remove", id, path, recursive);
	if (recursive)
		dsec_pk_kv_bool(&p, "recursive", true);
	rc = roundtrip(c, &p, 0, &r, err);
	if (rc == 0 && removed)
		*removed = get_u64_or(r.result, "removed", 0);
	reply_free(&r);
	return rc;
}

int dsec_file_upload(struct dsec_client *c, const char *id, const char *path,
		     const void *data, size_t len, const char *format, int64_t uid, int64_t gid,
		     struct dsec_err *err)
{
	struct dsec_pk p;

	pk_file(&p, "file_upload", id, path, 1 + !!format + n_owner(uid, gid));
	dsec_pk_kv_bin(&p, "data", data, len);
	if (format)
		dsec_pk_kv_str(&p, "format", format);
	pk_owner(&p, uid, gid);
	return file_call(c, &p, err);
}

int dsec_file_download(struct dsec_client *c, const char *id, const char *path,
		       const char *format, struct dsec_buf *out, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	const void *d;
	size_t n;
	int rc;

	pk_file(&p, "file_download", id, path, !!format);
	if (format)
		dsec_pk_kv_str(&p, "format", format);
	if ((rc = roundtrip(c, &p, 0, &r, err)) == 0) {
		if (dsec_get_bin(r.result, "data", SIZE_MAX, &d, &n, err) < 0)
			rc = dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO,
					   "file_download reply has no data");
		else
			dsec_buf_add(out, d, n);
	}
	reply_free(&r);
	return rc;
}

void dsec_file_info_free(struct dsec_file_info *info)
{
	free(info->name);
	free(info->target);
	memset(info, 0, sizeof(*info));
}

void dsec_file_list_free(struct dsec_file_info *arr, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dsec_file_info_free(&arr[i]);
	free(arr);
}

void dsec_file_res_free(struct dsec_file_res *res)
{
	dsec_file_info_free(&res->info);
	dsec_file_list_free(res->entries, res->nentries);
	dsec_buf_free(&res->data);
	memset(res, 0, sizeof(*res));
}

int dsec_file_read(struct dsec_client *c, const char *id, const char *path, uint64_t offset,
		   uint64_t len, struct dsec_buf *out, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	const void *d;
	size_t n;
	int rc;

	pk_file(&p, "file_read", id, path, !!offset + !!len);
	if (offset)
		dsec_pk_kv_u64(&p, "offset", offset);
	if (len)
		dsec_pk_kv_u64(&p, "length", len);
	rc = roundtrip(c, &p, 0, &r, err);
	if (rc == 0) {
		if (dsec_get_bin(r.result, "data", SIZE_MAX, &d, &n, err) < 0)
			rc = dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO, "file_read reply has no data");
		else
			dsec_buf_add(out, d, n);
	}
	reply_free(&r);
	return rc;
}

/* An op whose only field is the sandbox id and whose result is not used
 * (destroy, pause, resume). */
static int id_op(struct dsec_client *c, const char *op, const char *id, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	dsec_pk_init(&p);
	dsec_pk_request(&p, op, 1);
	dsec_pk_kv_str(&p, "id", id);
	rc = roundtrip(c, &p, 0, &r, err);
	reply_free(&r);
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
	dsec_pk_request(&p, "net_allow", 2);
	dsec_pk_kv_str(&p, "id", id);
	dsec_pk_kv_strv(&p, "allow", allow ? allow : none);
	rc = roundtrip(c, &p, 0, &r, err);
	reply_free(&r);
	return rc;
}

int dsec_ping(struct dsec_client *c, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	dsec_pk_init(&p);
	dsec_pk_request(&p, "ping", 0);
	rc = roundtrip(c, &p, 0, &r, err);
	reply_free(&r);
	return rc;
}

int dsec_destroy(struct dsec_client *c, const char *id, struct dsec_err *err)
{
	return id_op(c, "destroy", id, err);
}

int dsec_pause(struct dsec_client *c, const char *id, struct dsec_err *err)
{
	return id_op(c, "pause", id, err);
}

int dsec_resume(struct dsec_client *c, const char *id, struct dsec_err *err)
{
	return id_op(c, "resume", id, err);
}

int dsec_snapshot(struct dsec_client *c, const char *id, const char *tag, char **image,
		  struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	dsec_pk_init(&p);
	dsec_pk_request(&p, "snapshot", 2);
	dsec_pk_kv_str(&p, "id", id);
	dsec_pk_kv_str(&p, "tag", tag);
	/* Copying and packing a large sandbox takes a while. */
	rc = roundtrip(c, &p, 600, &r, err);
	if (rc == 0 && dsec_get_str(r.result, "image", image, err) < 0)
		rc = dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO, "snapshot reply has no image");
	reply_free(&r);
	return rc;
}

int dsec_chunk_get(struct dsec_client *c, const char *kind, const char *digest,
		   struct dsec_buf *out, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	const void *data;
	size_t len;
	int rc;

	dsec_buf_reset(out);
	dsec_pk_init(&p);
	dsec_pk_request(&p, "chunk_get", 2);
	dsec_pk_kv_str(&p, "kind", kind);
	dsec_pk_kv_str(&p, "digest", digest);
	rc = roundtrip(c, &p, 0, &r, err);
	if (rc == 0 && dsec_get_bin(r.result, "data", SIZE_MAX, &data, &len, err) < 0)
		rc = dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO, "chunk_get reply has no data");
	if (rc == 0)
		dsec_buf_add(out, data, len);
	reply_free(&r);
	return rc;
}

static void unpack_sandbox(const msgpack_object *m, struct dsec_sandbox_info *s)
{
	s->id = get_str_or(m, "id", "");
	s->backend = get_str_or(m, "backend", "");
	s->runtime = get_str_or(m, "runtime", "");
	s->image = get_str_or(m, "image", "");
	s->state = get_str_or(m, "state", "");
	s->created = get_double_or(m, "created", 0);
	s->ttl = get_double_or(m, "ttl", 0);
	s->idle_ttl = get_double_or(m, "idle_ttl", 0);
	s->idle = get_double_or(m, "idle", 0);
	s->execs = get_u64_or(m, "execs", 0);
	s->running = (uint32_t)get_u64_or(m, "running", 0);
}

int dsec_info(struct dsec_client *c, struct dsec_node_info *out, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	memset(out, 0, sizeof(*out));
	dsec_pk_init(&p);
	dsec_pk_request(&p, "info", 0);
	rc = roundtrip_n(c, &p, 0, OBJS_LIST, &r, err);
	if (rc == 0) {
		const msgpack_object *m = r.result, *b;
		size_t nb;
		out->version = get_str_or(m, "version", "");
		out->node = get_str_or(m, "node", "");
		out->proto = (uint32_t)get_u64_or(m, "proto", 0);
		out->pid = (int32_t)get_u64_or(m, "pid", 0);
		out->uptime = get_double_or(m, "uptime", 0);
		out->sandboxes = (uint32_t)get_u64_or(m, "sandboxes", 0);
		out->inflight = (uint32_t)get_u64_or(m, "inflight", 0);
		if ((rc = get_list(c, &r, m, "backends", 32, &b, &nb, err)) == 0 && nb) {
			out->nbackends = nb;
			out->backends = xcalloc(out->nbackends, sizeof(*out->backends));
			for (size_t i = 0; i < out->nbackends; i++) {
				const msgpack_object *e = &b[i];
				struct dsec_backend_info *bi = &out->backends[i];
				bi->name = get_str_or(e, "name", "");
				bi->description = get_str_or(e, "description", "");
				bi->stats.sandboxes = (uint32_t)get_u64_or(e, "sandboxes", 0);
				bi->stats.capacity = (uint32_t)get_u64_or(e, "capacity", 0);
				bi->stats.running = (uint32_t)get_u64_or(e, "running", 0);
				bi->stats.pool_ready = (uint32_t)get_u64_or(e, "pool_ready", 0);
				bi->stats.pool_target = (uint32_t)get_u64_or(e, "pool_target", 0);
				bi->stats.calls = get_u64_or(e, "calls", 0);
			}
		}
		if (rc < 0)
			dsec_node_info_free(out);	/* the caller frees only what succeeded */
	}
	reply_free(&r);
	return rc;
}

int dsec_sandbox_info(struct dsec_client *c, const char *id, struct dsec_sandbox_info *out,
		      struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	memset(out, 0, sizeof(*out));
	dsec_pk_init(&p);
	dsec_pk_request(&p, "info", 1);
	dsec_pk_kv_str(&p, "id", id);
	rc = roundtrip_n(c, &p, 0, OBJS_LIST, &r, err);
	if (rc == 0) {
		const msgpack_object *a;
		size_t ns;

		unpack_sandbox(r.result, out);
		if ((rc = get_list(c, &r, r.result, "sessions", 16, &a, &ns, err)) == 0 && ns) {
			out->nsessions = ns;
			out->sessions = xcalloc(out->nsessions, sizeof(*out->sessions));
			for (size_t i = 0; i < out->nsessions; i++) {
				const msgpack_object *e = &a[i];
				struct dsec_session_info *si = &out->sessions[i];

				si->name = get_str_or(e, "name", "");
				si->shell = get_str_or(e, "shell", "");
				si->cwd = get_str_or(e, "cwd", "");
				dsec_get_bool(e, "running", &si->running, NULL);
				si->commands = get_u64_or(e, "commands", 0);
			}
		}
		if (rc < 0)
			dsec_sandbox_info_free(out);
	}
	reply_free(&r);
	return rc;
}

int dsec_list(struct dsec_client *c, struct dsec_sandbox_info **out, size_t *n,
	      struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	*out = NULL;
	*n = 0;
	dsec_pk_init(&p);
	dsec_pk_request(&p, "list", 0);
	rc = roundtrip_n(c, &p, 0, OBJS_LIST, &r, err);
	if (rc == 0) {
		const msgpack_object *a;

		if ((rc = get_list(c, &r, r.result, "sandboxes", 64, &a, n, err)) == 0) {
			*out = xcalloc(*n ? *n : 1, sizeof(**out));
			for (size_t i = 0; i < *n; i++)
				unpack_sandbox(&a[i], &(*out)[i]);
		}
	}
	reply_free(&r);
	return rc;
}

void dsec_sandbox_info_free(struct dsec_sandbox_info *s)
{
	free(s->id);
	free(s->backend);
	free(s->runtime);
	free(s->image);
	free(s->state);
	for (size_t i = 0; i < s->nsessions; i++) {
		free((char *)s->sessions[i].name);
		free((char *)s->sessions[i].shell);
		free((char *)s->sessions[i].cwd);
	}
	free(s->sessions);
	memset(s, 0, sizeof(*s));
}

void dsec_sandbox_list_free(struct dsec_sandbox_info *arr, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dsec_sandbox_info_free(&arr[i]);
	free(arr);
}

void dsec_node_info_free(struct dsec_node_info *info)
{
	free(info->version);
	free(info->node);
	for (size_t i = 0; i < info->nbackends; i++) {
		free(info->backends[i].name);
		free(info->backends[i].description);
	}
	free(info->backends);
	memset(info, 0, sizeof(*info));
}
