/* recover.c - rlcoord: a dead node's sandbox made again from its log.
 *
 * Every entry of a sandbox's trajectory is on two peers before its reply
 * (replica.c).  When its node dies, `recover` on one of those peers reads
 * that copy page by page (the daemon's own trajectory requests with
 * replica: true) and makes the sandbox again:
 *   1. a create of the logged create's request (without its token, its
 *      lease and fwd: they were the dead node's; with a trajectory and the
 *      label dsec.recovered_from) and the token dsec.recover:ID: not placed
 *      but sent to that token's home, so every recover of one sandbox, on
 *      either peer and sent again after a timeout, gets the same one;
 *   2. each later entry that changed or observed the sandbox's files,
 *      sessions or network, sent again in order on the new sandbox with its
 *      step, so that the new log has every step: a trainer that re-sends
 *      its steps to the new id is answered from it, and its next step runs
 *      on the state the logged steps made;
 *   3. each replayed reply compared with the logged one: the steps whose
 *      results differ (a command that reads the clock, the network, a
 *      random source) are named, and so are the entries that cannot be
 *      replayed (pauses, snapshots, grades, forks, usage reads): what
 *      could not be recovered.  A streamed command is started again where
 *      it was (with its step), given the input, signals and terminal
 *      sizes logged for it (exec_write, exec_signal, exec_resize, named
 *      with the new stream; an input refused busy, the command not
 *      having read what came before, is sent again every 10 ms for up to
 *      30 s) and read to its end where the log has its end, its output
 *      and status compared so.
 * With a snapshot in the log whose image the node can read (a store whose
 * origin the nodes share: in production a distributed file system), the
 * log is read twice: once for its last snapshot, then the sandbox is made
 * of that image, and the entries up to the snapshot are not run again
 * (their effects on the files are in the image): those with a step are
 * logged in the new log with their logged replies (the request field
 * logged_reply, tlog.c), so a trainer's re-sent steps are answered as
 * before, and so is the logged end of a stream begun by such a step (an
 * exec_read with logged_reply and stream_step), so that the stream reads
 * from the new log.  Only the entries after it are sent again.  A snapshot image the
 * node cannot find (not_found) falls back to the create and every step.
 * What the dead node held beyond its log and its snapshots (processes) is
 * gone.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "dsec.h"
#include "log.h"
#include "ops.h"
#include "proto.h"
#include "rlc.h"
#include "rlc-int.h"

struct recover {
	struct dsecd_req *r;		/* the recover request, answered at the end */
	struct dsecd *d;
	char *from;			/* the dead sandbox's id */
	char *id;			/* the new one, once made */
	uint64_t next;			/* the next page's first seq */
	bool end;			/* the page read last is the log's last */
	void *page;			/* its reply bytes (m points into them) */
	struct dsec_msg m;
	const msgpack_object *ents;	/* its entries */
	uint32_t at;			/* the next of them */
	const msgpack_object *cur;	/* the entry being replayed */
	uint64_t entries, replayed;
	struct dsec_pk skipped, differs;	/* arrays of {seq, op} and {seq, step, op} */
	struct dsec_err err;
	bool scanning;			/* the first read: for the last snapshot */
	char *snap;			/* its image ("sha256:HEX"), NULL = none */
	uint64_t snap_seq;		/* its entry */
	bool use_snap;			/* the sandbox is made of it */
	char *snap_missed;		/* why it was not (not_found), or NULL */
	uint64_t restored, imported;	/* entries up to it; of them logged again */
	const msgpack_object *create_req;	/* the logged create's request (in page) */
	uint64_t base_seq;		/* a recovered sandbox's log: its create's snapshot_steps */
	uint64_t nimport, snap_nimport;	/* entries with a step seen; up to the snapshot */
	/* Streams: a logged exec_start's name and the new one's (started
	 * again), or NULL (its step imported: its end is imported too). */
	struct { char *logged, *now; uint64_t step; } *st;
	size_t nst;
	const char *reading;		/* the one read to its end now (in st) */
	uint64_t read_until;		/* dsec_now_ns: then it is killed (it ran longer
					 * than twice as long as logged, and 10 s) */
	bool killed;
	struct dsec_buf out[2];		/* its stdout and stderr so far */
	/* An input the stream started again has no room for yet ("busy": the
	 * command has not read what came before; replay writes faster than
	 * the trainer did) is sent again every RETRY_S until busy_until. */
	ev_timer retry;
	uint64_t busy_until;		/* dsec_now_ns; 0: not busy */
};

#define RETRY_S 0.01
#define BUSY_MAX_NS (30 * 1000000000ull)

/* An entry a recover from a snapshot logs again: a step, its request and
 * its reply. */
static bool importable(const msgpack_object *e)
{
	const msgpack_object *step = dsec_map_get(e, "step"), *req = dsec_map_get(e, "request");
	const msgpack_object *reply = dsec_map_get(e, "reply");

	return step && step->type == MSGPACK_OBJECT_POSITIVE_INTEGER && req &&
	       req->type == MSGPACK_OBJECT_MAP && reply && reply->type == MSGPACK_OBJECT_MAP;
}

/* The last entry whose effect the new sandbox's image holds: the snapshot's
 * when made of it, else what the logged create says (a sandbox recover made
 * of a snapshot: its first snapshot_steps entries came with its image). */
static uint64_t restored_to(const struct recover *v)
{
	return v->use_snap ? v->snap_seq : v->base_seq;
}

static void fetch(struct recover *v);
static void replay_next(struct recover *v);
static void created(void *arg, const void *reply, size_t len, enum dsec_code code);

static void recover_free(struct recover *v)
{
	free(v->from);
	free(v->id);
	free(v->snap);
	free(v->snap_missed);
	free(v->page);
	dsec_msg_free(&v->m);
	dsec_pk_free(&v->skipped);
	dsec_pk_free(&v->differs);
	for (size_t i = 0; i < v->nst; i++) {
		free(v->st[i].logged);
		free(v->st[i].now);
	}
	free(v->st);
	dsec_buf_free(&v->out[0]);
	dsec_buf_free(&v->out[1]);
	free(v);
}

static bool is_str(const msgpack_object *o, const char *s)
{
	return o && o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(s) &&
	       !memcmp(o->via.str.ptr, s, o->via.str.size);
}

static void finish(struct recover *v)
{
	struct dsecd_req *r = v->r;
	struct dsec_pk p;

	r->d->ops_inflight--;
	dsec_pk_end(&v->skipped);
	dsec_pk_end(&v->differs);
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	dsec_pk_kv_str(&p, "id", v->id);
	dsec_pk_kv_str(&p, "from", v->from);
	dsec_pk_kv_u64(&p, "entries", v->entries);
	dsec_pk_kv_u64(&p, "replayed", v->replayed);
	dsec_pk_str(&p, "skipped");
	dsec_pk_raw(&p, v->skipped.sb.data, v->skipped.sb.size);
	dsec_pk_str(&p, "differs");
	dsec_pk_raw(&p, v->differs.sb.data, v->differs.sb.size);
	dsec_pk_str(&p, "snapshot");
	if (v->use_snap)
		dsec_pk_str(&p, v->snap);
	else
		dsec_pk_nil(&p);
	dsec_pk_kv_u64(&p, "restored", v->restored);
	dsec_pk_kv_u64(&p, "imported", v->imported);
	if (v->snap_missed)
		dsec_pk_kv_str(&p, "snapshot_missed", v->snap_missed);
	dsec_pk_end(&p);
	req_complete(r, &p);
	recover_free(v);
}

static void failed_destroyed(void *arg, const void *reply, size_t len, enum dsec_code code)
{
	struct recover *v = arg;

	v->r->d->ops_inflight--;
	reply_err(v->r, &v->err);
	recover_free(v);
}

/* v->err says why: the sandbox made so far goes, then the error. */
static void fail(struct recover *v)
{
	struct dsec_pk p;

	if (!v->id) {
		v->r->d->ops_inflight--;
		reply_err(v->r, &v->err);
		return recover_free(v);
	}
	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "destroy");
	dsec_pk_kv_str(&p, "id", v->id);
	dsec_pk_end(&p);
	rlc_send(v->d, &p, failed_destroyed, v, false);
}

/* ---- what a logged entry's request becomes --------------------------------- */

/* Ops sent again: they made the sandbox's state or read it, and do the same
 * on the new one.  The rest is named in skipped. */
static bool replayable(const msgpack_object *op)
{
	static const char *const ops[] = { "exec", "call", "session_open", "session_exec",
					   "session_close", "file_write", "file_read", "file_stat",
					   "file_list", "file_mkdir", "file_remove", "file_upload",
					   "net_allow", "reset", "exec_write", "exec_signal",
					   "exec_resize", NULL };

	for (size_t i = 0; ops[i]; i++)
		if (is_str(op, ops[i]))
			return true;
	return false;
}

/* The logged create again: without token, lease, fwd, step and trajectory,
 * with a trajectory, the label dsec.recovered_from and the token
 * dsec.recover:OLD (made on that token's home). */
static void pack_create(struct recover *v, const msgpack_object *req, struct dsec_pk *p)
{
	static const char *const drop[] = { "v", "op", "token", "lease", "fwd", "step",
					    "trajectory", "labels", "logged_reply", NULL };
	const msgpack_object *labels = dsec_map_get(req, "labels");

	dsec_pk_init(p);
	dsec_pk_request_begin(p, "create");
	for (uint32_t i = 0; i < req->via.map.size; i++) {
		const msgpack_object *k = &req->via.map.ptr[i].key;
		bool skip = k->type != MSGPACK_OBJECT_STR;

		for (size_t j = 0; drop[j] && !skip; j++)
			skip = is_str(k, drop[j]);
		if (v->use_snap && (is_str(k, "image") || is_str(k, "creation_image") ||
				    is_str(k, "snapshot_steps")))
			skip = true;
		if (!skip) {
			dsec_pk_object(p, k);
			dsec_pk_object(p, &req->via.map.ptr[i].val);
		}
	}
	dsec_pk_kv_bool(p, "trajectory", true);
	if (v->use_snap) {
		/* Made of the snapshot; reset goes back to the create's image
		 * (reset.c), and a recover of this one knows which of its
		 * entries came with the image. */
		const msgpack_object *img = dsec_map_get(req, "creation_image");

		if (!img || img->type != MSGPACK_OBJECT_STR)
			img = dsec_map_get(req, "image");
		dsec_pk_kv_str(p, "image", v->snap);
		dsec_pk_kv_u64(p, "snapshot_steps", v->snap_nimport);
		if (img && img->type == MSGPACK_OBJECT_STR) {
			dsec_pk_str(p, "creation_image");
			dsec_pk_strn(p, img->via.str.ptr, img->via.str.size);
		}
	}
	dsec_pk_str(p, "labels");
	dsec_pk_map_begin(p);
	if (labels && labels->type == MSGPACK_OBJECT_MAP)
		for (uint32_t i = 0; i < labels->via.map.size; i++)
			if (!is_str(&labels->via.map.ptr[i].key, "dsec.recovered_from")) {
				dsec_pk_object(p, &labels->via.map.ptr[i].key);
				dsec_pk_object(p, &labels->via.map.ptr[i].val);
			}
	dsec_pk_kv_str(p, "dsec.recovered_from", v->from);
	dsec_pk_end(p);
	/* A recover sent again (its client timed out), or sent to the other
	 * peer, gets the same sandbox, whose log then answers the steps it
	 * sends again. */
	char *token = xasprintf("dsec.recover:%s", v->from);
	dsec_pk_kv_str(p, "token", token);
	free(token);
	dsec_pk_end(p);
}

/* A logged request again, on the new sandbox (its id; fwd left out);
 * with reply, logged with it and not run (tlog.c's logged_reply); with
 * exec, naming that stream (the one started again for the logged one). */
static void pack_again(struct recover *v, const msgpack_object *req, const msgpack_object *reply,
		       const char *exec, struct dsec_pk *p)
{
	dsec_pk_init(p);
	dsec_pk_map_begin(p);
	for (uint32_t i = 0; i < req->via.map.size; i++) {
		const msgpack_object *k = &req->via.map.ptr[i].key;

		if (is_str(k, "fwd") || is_str(k, "id") || is_str(k, "logged_reply") ||
		    (exec && is_str(k, "exec")))
			continue;
		dsec_pk_object(p, k);
		dsec_pk_object(p, &req->via.map.ptr[i].val);
	}
	dsec_pk_kv_str(p, "id", v->id);
	if (exec)
		dsec_pk_kv_str(p, "exec", exec);
	if (reply) {
		struct dsec_pk r;

		dsec_pk_init(&r);
		dsec_pk_object(&r, reply);
		dsec_pk_str(p, "logged_reply");
		dsec_pk_bin(p, r.sb.data, r.sb.size);
		dsec_pk_free(&r);
	}
	dsec_pk_end(p);
}

/* ---- comparing a reply with the logged one ---------------------------------- */

static bool same_obj(const msgpack_object *a, const msgpack_object *b)
{
	if (!a || !b)
		return !a && !b;
	return msgpack_object_equal(*a, *b);
}

/* Does the new reply say what the logged one said?  The same ok and error
 * code; for a command, the same exit, signal, timeout and output; for a
 * read, the same bytes. */
static bool same_reply(const msgpack_object *op, const msgpack_object *logged,
		       const msgpack_object *now)
{
	static const char *const cmd[] = { "exit_code", "signal", "timed_out", "stdout",
					   "stderr", NULL };
	static const char *const rd[] = { "data", NULL };
	const msgpack_object *lok, *nok, *lr, *nr;
	const char *const *keys = NULL;

	if (!logged || !now || logged->type != MSGPACK_OBJECT_MAP ||
	    now->type != MSGPACK_OBJECT_MAP)
		return false;
	lok = dsec_map_get(logged, "ok");
	nok = dsec_map_get(now, "ok");
	if (!same_obj(lok, nok))
		return false;
	if (!lok || lok->type != MSGPACK_OBJECT_BOOLEAN || !lok->via.boolean) {
		const msgpack_object *le = dsec_map_get(logged, "error");
		const msgpack_object *ne = dsec_map_get(now, "error");
		return le && ne && le->type == MSGPACK_OBJECT_MAP &&
		       ne->type == MSGPACK_OBJECT_MAP &&
		       same_obj(dsec_map_get(le, "code"), dsec_map_get(ne, "code"));
	}
	if (is_str(op, "exec") || is_str(op, "call") || is_str(op, "session_exec"))
		keys = cmd;
	else if (is_str(op, "file_read"))
		keys = rd;
	lr = dsec_map_get(logged, "result");
	nr = dsec_map_get(now, "result");
	for (size_t i = 0; keys && keys[i]; i++)
		if (!lr || !nr || lr->type != MSGPACK_OBJECT_MAP ||
		    nr->type != MSGPACK_OBJECT_MAP ||
		    !same_obj(dsec_map_get(lr, keys[i]), dsec_map_get(nr, keys[i])))
			return false;
	return true;
}

/* An entry's field key into the open map p (nil when it has none). */
static void pack_field(struct dsec_pk *p, const msgpack_object *e, const char *key)
{
	const msgpack_object *o = dsec_map_get(e, key);

	dsec_pk_str(p, key);
	if (o)
		dsec_pk_object(p, o);
	else
		dsec_pk_nil(p);
}

static void pack_seq_op(struct dsec_pk *p, const msgpack_object *e, bool step)
{
	dsec_pk_map_begin(p);
	pack_field(p, e, "seq");
	if (step)
		pack_field(p, e, "step");
	pack_field(p, e, "op");
	dsec_pk_end(p);
}

/* ---- the chain --------------------------------------------------------------- */

static ssize_t stream_named(const struct recover *v, const msgpack_object *req);
static void replayed(void *arg, const void *reply, size_t len, enum dsec_code code);

/* v->cur sent again, to the stream started again for it if any. */
static void send_again(struct recover *v, ssize_t si)
{
	struct dsec_pk p;

	pack_again(v, dsec_map_get(v->cur, "request"), NULL, si >= 0 ? v->st[si].now : NULL, &p);
	rlc_send(v->d, &p, replayed, v, false);
}

static void retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct recover *v = (struct recover *)((char *)w - offsetof(struct recover, retry));

	send_again(v, stream_named(v, dsec_map_get(v->cur, "request")));
}

/* Whether a reply to an input (v->cur) said busy and is to be sent again
 * (the timer started): until BUSY_MAX_NS after the first busy, and not
 * while the node stops. */
static bool input_busy(struct recover *v, const void *reply, size_t len)
{
	struct dsec_err err;
	uint64_t now = dsec_now_ns();

	if (!is_str(dsec_map_get(v->cur, "op"), "exec_write"))
		return false;
	rlc_reply_error(reply, len, "", &err);
	if (err.code != DSEC_E_BUSY || v->d->shutting_down) {
		v->busy_until = 0;
		return false;
	}
	if (!v->busy_until)
		v->busy_until = now + BUSY_MAX_NS;
	if (now >= v->busy_until) {
		log_info("recover of %s: an input still refused busy after %llu s",
			 v->from, BUSY_MAX_NS / 1000000000ull);
		v->busy_until = 0;
		return false;
	}
	ev_timer_set(&v->retry, RETRY_S, 0);
	ev_timer_start(v->d->loop, &v->retry);
	return true;
}

static void replayed(void *arg, const void *reply, size_t len, enum dsec_code code)
{
	struct recover *v = arg;
	const msgpack_object *e = v->cur;
	struct dsec_msg m = { 0 };

	if (reply && input_busy(v, reply, len))
		return;
	v->replayed++;
	if (dsec_msg_parse_n(&m, reply, len, SIZE_MAX, SIZE_MAX, NULL) < 0 ||
	    !same_reply(dsec_map_get(e, "op"), dsec_map_get(e, "reply"), m.root))
		pack_seq_op(&v->differs, e, true);
	dsec_msg_free(&m);
	replay_next(v);
}

/* A step of the snapshot's logged in the new log: the reply is the logged
 * one (or, for a recover sent again, that one marked replayed). */
static void imported(void *arg, const void *reply, size_t len, enum dsec_code code)
{
	struct recover *v = arg;
	const msgpack_object *e = v->cur;
	struct dsec_msg m = { 0 };

	if (dsec_msg_parse_n(&m, reply, len, SIZE_MAX, SIZE_MAX, NULL) < 0 ||
	    !same_reply(dsec_map_get(e, "op"), dsec_map_get(e, "reply"), m.root)) {
		log_info("recover of %s: a step of its snapshot cannot be logged again: %.*s",
			 v->from, (int)(len > 300 ? 300 : len), (const char *)reply);
		pack_seq_op(&v->differs, e, true);
	} else {
		v->imported++;
	}
	dsec_msg_free(&m);
	replay_next(v);
}

/* ---- streams ----------------------------------------------------------------- */

/* e's reply's result's string key (a view into the page), or NULL. */
static const msgpack_object *result_str(const msgpack_object *reply, const char *key)
{
	const msgpack_object *res = reply && reply->type == MSGPACK_OBJECT_MAP ?
				    dsec_map_get(reply, "result") : NULL;
	const msgpack_object *o = res && res->type == MSGPACK_OBJECT_MAP ?
				  dsec_map_get(res, key) : NULL;

	return o && o->type == MSGPACK_OBJECT_STR ? o : NULL;
}

static bool flag(const msgpack_object *map, const char *key)
{
	const msgpack_object *o = map && map->type == MSGPACK_OBJECT_MAP ?
				  dsec_map_get(map, key) : NULL;

	return o && o->type == MSGPACK_OBJECT_BOOLEAN && o->via.boolean;
}

static void stream_add(struct recover *v, const msgpack_object *logged, char *now, uint64_t step)
{
	v->st = xrealloc(v->st, (v->nst + 1) * sizeof(*v->st));
	v->st[v->nst].logged = xstrndup(logged->via.str.ptr, logged->via.str.size);
	v->st[v->nst].now = now;
	v->st[v->nst].step = step;
	v->nst++;
}

/* The stream a logged request names (its exec), or -1. */
static ssize_t stream_named(const struct recover *v, const msgpack_object *req)
{
	const msgpack_object *x = req && req->type == MSGPACK_OBJECT_MAP ?
				  dsec_map_get(req, "exec") : NULL;

	if (!x || x->type != MSGPACK_OBJECT_STR)
		return -1;
	for (size_t i = v->nst; i-- > 0;)
		if (strlen(v->st[i].logged) == x->via.str.size &&
		    !memcmp(v->st[i].logged, x->via.str.ptr, x->via.str.size))
			return (ssize_t)i;
	return -1;
}

/* The stream an exec_read entry e (a stream's end) names, or -1. */
static ssize_t stream_of(const struct recover *v, const msgpack_object *e)
{
	if (!is_str(dsec_map_get(e, "op"), "exec_read"))
		return -1;
	return stream_named(v, dsec_map_get(e, "request"));
}

/* e, the logged end of a stream whose step was imported (not run again):
 * logged in the new log too (tlog.c's stream_import), so the trainer that
 * re-sends the step reads the stream from the log. */
static void import_end(struct recover *v, const msgpack_object *e, size_t i)
{
	struct dsec_pk p, r;

	v->cur = e;
	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "exec_read");
	dsec_pk_kv_str(&p, "id", v->id);
	dsec_pk_kv_str(&p, "exec", v->st[i].logged);
	dsec_pk_kv_u64(&p, "stream_step", v->st[i].step);
	dsec_pk_init(&r);
	dsec_pk_object(&r, dsec_map_get(e, "reply"));
	dsec_pk_str(&p, "logged_reply");
	dsec_pk_bin(&p, r.sb.data, r.sb.size);
	dsec_pk_free(&r);
	dsec_pk_end(&p);
	rlc_send(v->d, &p, imported, v, false);
}

/* A logged exec_start sent again: the new stream's name is kept, to read
 * it where the log has the old one's end. */
static void stream_started(void *arg, const void *reply, size_t len, enum dsec_code code)
{
	struct recover *v = arg;
	const msgpack_object *e = v->cur;
	const msgpack_object *was = result_str(dsec_map_get(e, "reply"), "exec"), *now;
	struct dsec_msg m = { 0 };

	v->replayed++;
	if (dsec_msg_parse_n(&m, reply, len, SIZE_MAX, SIZE_MAX, NULL) < 0 ||
	    !same_reply(dsec_map_get(e, "op"), dsec_map_get(e, "reply"), m.root) ||
	    !(now = result_str(m.root, "exec"))) {
		pack_seq_op(&v->differs, e, true);
	} else if (was) {
		stream_add(v, was, xstrndup(now->via.str.ptr, now->via.str.size), 0);
	}
	dsec_msg_free(&m);
	replay_next(v);
}

/* The output a stream's end logged (key) and the bytes read now agree:
 * equal, or, where the log kept only its first bytes, those. */
static bool same_output(const msgpack_object *res, const char *key, bool cut,
			const struct dsec_buf *now)
{
	const msgpack_object *o = dsec_map_get(res, key);
	const char *p = NULL;
	size_t n = 0;

	if (o && o->type == MSGPACK_OBJECT_BIN) {
		p = o->via.bin.ptr;
		n = o->via.bin.size;
	} else if (o && o->type == MSGPACK_OBJECT_STR) {
		p = o->via.str.ptr;
		n = o->via.str.size;
	} else {
		return false;
	}
	if (cut ? now->len < n : now->len != n)
		return false;
	return !n || !memcmp(p, now->data, n);
}

static void stream_read(struct recover *v);

static void stream_killed(void *arg, const void *reply, size_t len, enum dsec_code code)
{
	stream_read(arg);
}

/* One read of the stream started again: its output gathered until done,
 * then compared with the logged end (v->cur). */
static void stream_got(void *arg, const void *reply, size_t len, enum dsec_code code)
{
	struct recover *v = arg;
	const msgpack_object *e = v->cur;
	const msgpack_object *lres = dsec_map_get(dsec_map_get(e, "reply"), "result");
	struct dsec_msg m = { 0 };
	const msgpack_object *res = rlc_reply_result(&m, reply, len);
	static const char *const outs[] = { "stdout", "stderr" };
	static const char *const status[] = { "exit_code", "signal", "timed_out" };
	bool same = res && lres && lres->type == MSGPACK_OBJECT_MAP;

	for (int i = 0; same && i < 2; i++) {
		const msgpack_object *o = dsec_map_get(res, outs[i]);
		if (o && o->type == MSGPACK_OBJECT_BIN)
			dsec_buf_add(&v->out[i], o->via.bin.ptr, o->via.bin.size);
	}
	if (same && !flag(res, "done")) {
		dsec_msg_free(&m);
		if (!v->killed && dsec_now_ns() > v->read_until) {
			/* It does not end as it did: it is killed, and
			 * differs. */
			struct dsec_pk p;

			v->killed = true;
			dsec_pk_init(&p);
			dsec_pk_request_begin(&p, "exec_signal");
			dsec_pk_kv_str(&p, "id", v->id);
			dsec_pk_kv_str(&p, "exec", v->reading);
			dsec_pk_kv_str(&p, "signal", "KILL");
			dsec_pk_end(&p);
			return rlc_send(v->d, &p, stream_killed, v, false);
		}
		return stream_read(v);
	}
	for (size_t i = 0; same && i < DSEC_ARRAY_LEN(status); i++)
		same = same_obj(dsec_map_get(lres, status[i]), dsec_map_get(res, status[i]));
	for (int i = 0; same && i < 2; i++)
		same = same_output(lres, outs[i], flag(lres, i ? "stderr_truncated" :
						     "stdout_truncated"), &v->out[i]);
	if (!same)
		pack_seq_op(&v->differs, e, true);
	v->replayed++;
	dsec_msg_free(&m);
	dsec_buf_free(&v->out[0]);
	dsec_buf_free(&v->out[1]);
	v->reading = NULL;
	replay_next(v);
}

static void stream_read(struct recover *v)
{
	struct dsec_pk p;

	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "exec_read");
	dsec_pk_kv_str(&p, "id", v->id);
	dsec_pk_kv_str(&p, "exec", v->reading);
	dsec_pk_kv_double(&p, "wait", 10);
	dsec_pk_end(&p);
	rlc_send(v->d, &p, stream_got, v, false);
}

/* e, an exec_start (or NULL: an exec_read, a stream's end) sent again:
 * true when it is (the chain goes on in its callback). */
static bool stream_again(struct recover *v, const msgpack_object *e, const msgpack_object *op,
			 const msgpack_object *req)
{
	struct dsec_pk p;

	if (is_str(op, "exec_start")) {
		v->cur = e;
		pack_again(v, req, NULL, NULL, &p);
		rlc_send(v->d, &p, stream_started, v, false);
		return true;
	}
	ssize_t i = stream_of(v, e);
	if (i >= 0 && !v->st[i].now) {
		import_end(v, e, (size_t)i);
		return true;
	}
	if (i < 0)
		return false;	/* its start was not sent again */
	const msgpack_object *dur = dsec_map_get(e, "dur_us");
	uint64_t us = dur && dur->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? dur->via.u64 : 0;

	v->cur = e;
	v->reading = v->st[i].now;
	v->killed = false;
	v->read_until = dsec_now_ns() + 2 * us * 1000 + 10 * 1000000000ull;
	stream_read(v);
	return true;
}

/* e, an entry the image holds: an exec_start step is remembered (its
 * end is imported where the log has it: true, the chain goes on in its
 * callback); false for any other. */
static bool restored_stream(struct recover *v, const msgpack_object *e)
{
	const msgpack_object *step = dsec_map_get(e, "step");
	const msgpack_object *x = result_str(dsec_map_get(e, "reply"), "exec");
	ssize_t i;

	if (is_str(dsec_map_get(e, "op"), "exec_start") && importable(e) && x &&
	    step->type == MSGPACK_OBJECT_POSITIVE_INTEGER && x->via.str.size < 24) {
		stream_add(v, x, NULL, step->via.u64);
		return false;	/* its step is imported as any */
	}
	if ((i = stream_of(v, e)) < 0 || v->st[i].now)
		return false;
	import_end(v, e, (size_t)i);
	return true;
}

static void replay_next(struct recover *v)
{
	struct dsec_pk p;

	while (v->ents && v->at < v->ents->via.array.size) {
		const msgpack_object *e = &v->ents->via.array.ptr[v->at++];
		const msgpack_object *op = dsec_map_get(e, "op");
		const msgpack_object *req = dsec_map_get(e, "request");
		const msgpack_object *seq = dsec_map_get(e, "seq");
		const msgpack_object *reply = dsec_map_get(e, "reply");

		v->entries++;
		if (seq && seq->type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
		    seq->via.u64 <= restored_to(v)) {
			/* Its effect is in the image: not run again; a step is
			 * logged with its reply, for the trainer's re-sends. */
			v->restored++;
			if (restored_stream(v, e))
				return;
			if (!importable(e))
				continue;
			v->cur = e;
			pack_again(v, req, reply, NULL, &p);
			return rlc_send(v->d, &p, imported, v, false);
		}
		if (req && req->type == MSGPACK_OBJECT_MAP && stream_again(v, e, op, req))
			return;
		if (!replayable(op) || !req || req->type != MSGPACK_OBJECT_MAP) {
			pack_seq_op(&v->skipped, e, false);
			continue;
		}
		/* Input, a signal or a size for a stream: to the one started
		 * again for it; none when its start came with the image (its
		 * processes did not). */
		ssize_t si = is_str(op, "exec_write") || is_str(op, "exec_signal") ||
			     is_str(op, "exec_resize") ? stream_named(v, req) : -1;
		if (si >= 0 && !v->st[si].now) {
			pack_seq_op(&v->skipped, e, false);
			continue;
		}
		v->cur = e;
		return send_again(v, si);
	}
	if (v->end)
		return finish(v);
	fetch(v);
}

static void created(void *arg, const void *reply, size_t len, enum dsec_code code)
{
	struct recover *v = arg;
	struct dsec_msg m = { 0 };
	const msgpack_object *res = rlc_reply_result(&m, reply, len);

	if (!res || dsec_get_str(res, "id", &v->id, NULL) < 0) {
		rlc_reply_error(reply, len, "cannot make the sandbox again", &v->err);
		dsec_msg_free(&m);
		/* (code is not the forwarded create's: its reply says it) */
		if (v->use_snap && v->err.code == DSEC_E_NOT_FOUND) {
			/* Its image is not where this node looks (a store of the
			 * dead node's own): from the create and every step. */
			struct dsec_pk p;

			log_warn("recover of %s: not from its snapshot %s (%s): from its log",
				 v->from, v->snap, v->err.msg);
			v->snap_missed = xstrdup(v->err.msg);
			v->use_snap = false;
			dsec_err_clear(&v->err);
			pack_create(v, v->create_req, &p);
			return rlc_send(v->d, &p, created, v, false);
		}
		return fail(v);
	}
	dsec_msg_free(&m);
	replay_next(v);
}

/* The first read: the last snapshot that succeeded, then the log again
 * from its start. */
static void scan(struct recover *v)
{
	for (uint32_t i = 0; i < v->ents->via.array.size; i++) {
		const msgpack_object *e = &v->ents->via.array.ptr[i];
		const msgpack_object *seq = dsec_map_get(e, "seq"), *res, *img;
		const msgpack_object *reply = dsec_map_get(e, "reply");

		if (seq && seq->type == MSGPACK_OBJECT_POSITIVE_INTEGER && seq->via.u64 &&
		    importable(e))
			v->nimport++;
		/* So is the end of a stream whose step is (restored_stream). */
		const msgpack_object *x = result_str(reply, "exec");
		const msgpack_object *step = dsec_map_get(e, "step");
		ssize_t k;
		if (is_str(dsec_map_get(e, "op"), "exec_start") && importable(e) && x &&
		    step->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
			stream_add(v, x, NULL, step->via.u64);
		else if ((k = stream_of(v, e)) >= 0 && !v->st[k].now)
			v->nimport++;
		if (!is_str(dsec_map_get(e, "op"), "snapshot") ||
		    !is_str(dsec_map_get(e, "code"), "ok") || !seq ||
		    seq->type != MSGPACK_OBJECT_POSITIVE_INTEGER || !reply ||
		    reply->type != MSGPACK_OBJECT_MAP ||
		    !(res = dsec_map_get(reply, "result")) || res->type != MSGPACK_OBJECT_MAP ||
		    !(img = dsec_map_get(res, "image")) || img->type != MSGPACK_OBJECT_STR ||
		    img->via.str.size < 8 || memcmp(img->via.str.ptr, "sha256:", 7))
			continue;
		free(v->snap);
		v->snap = xstrndup(img->via.str.ptr, img->via.str.size);
		v->snap_seq = seq->via.u64;
		v->snap_nimport = v->nimport;
	}
	if (!v->end)
		return fetch(v);
	for (size_t i = 0; i < v->nst; i++)
		free(v->st[i].logged);
	v->nst = 0;
	v->scanning = false;
	v->use_snap = v->snap != NULL;
	v->next = 0;
	v->end = false;
	v->ents = NULL;
	v->at = 0;
	v->entries = 0;
	free(v->page);
	v->page = NULL;
	dsec_msg_free(&v->m);
	fetch(v);
}

static void page_got(void *arg, const void *reply, size_t len, enum dsec_code code)
{
	struct recover *v = arg;
	const msgpack_object *res, *o;
	bool first = !v->page;

	free(v->page);
	dsec_msg_free(&v->m);
	v->ents = NULL;
	v->at = 0;
	v->page = xmalloc(len ? len : 1);
	memcpy(v->page, reply, len);
	if (!(res = rlc_reply_result(&v->m, v->page, len)) ||
	    !(v->ents = dsec_map_get(res, "entries")) || v->ents->type != MSGPACK_OBJECT_ARRAY) {
		v->ents = NULL;
		rlc_reply_error(reply, len, "cannot read the log's copy", &v->err);
		if (code == DSEC_E_NOT_FOUND)
			dsec_err_setc(&v->err, DSEC_E_NOT_FOUND, ENOENT, "node '%s' keeps no "
				      "copy of the log of '%s': recover it on one of the log's "
				      "two peers (a sandbox created with a trajectory, in a "
				      "cluster)", v->d->conf.node, v->from);
		return fail(v);
	}
	o = dsec_map_get(res, "end");
	v->end = !o || o->type != MSGPACK_OBJECT_BOOLEAN || o->via.boolean;
	o = dsec_map_get(res, "next");
	if (o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 > v->next)
		v->next = o->via.u64;
	else
		v->end = true;	/* a page that does not move on is the last */
	if (first) {
		const msgpack_object *a = v->ents;
		const msgpack_object *e = a->via.array.size ? &a->via.array.ptr[0] : NULL;
		const msgpack_object *req = e ? dsec_map_get(e, "request") : NULL;
		struct dsec_pk p;

		if (!e || !is_str(dsec_map_get(e, "op"), "create") ||
		    !is_str(dsec_map_get(e, "code"), "ok") || !req ||
		    req->type != MSGPACK_OBJECT_MAP) {
			dsec_err_setc(&v->err, DSEC_E_INVALID, EINVAL, "the log of '%s' does not "
				      "begin with its create: it cannot be made again", v->from);
			return fail(v);
		}
		v->at = 1;
		v->entries = 1;
		if (v->scanning) {
			const msgpack_object *n = dsec_map_get(req, "snapshot_steps");
			if (n && n->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
				v->base_seq = n->via.u64;
			v->at = 0;	/* scan() reads the page whole */
			return scan(v);
		}
		v->create_req = req;	/* in v->page until the next page */
		pack_create(v, req, &p);
		return rlc_send(v->d, &p, created, v, false);
	}
	if (v->scanning)
		return scan(v);
	replay_next(v);
}

static void fetch(struct recover *v)
{
	struct dsec_pk p;

	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "trajectory");
	dsec_pk_kv_str(&p, "id", v->from);
	dsec_pk_kv_u64(&p, "from", v->next);
	dsec_pk_kv_bool(&p, "replica", true);
	dsec_pk_end(&p);
	rlc_send(v->d, &p, page_got, v, false);
}

void op_recover(struct dsecd_req *r)
{
	struct recover *v;
	struct dsec_err err;
	char *id = NULL;

	dsec_err_clear(&err);
	if (dsec_get_str(r->msg.root, "id", &id, &err) < 0)
		return reply_err(r, &err);
	/* Only what is lost: a sandbox this node has, or one of a node the
	 * cluster sees alive, is served where it is. */
	const char *colon = strchr(id, ':');
	size_t nl = colon ? (size_t)(colon - id) : 0;
	bool self = nl == strlen(r->d->conf.node) && !memcmp(id, r->d->conf.node, nl);
	struct dsecd_member *m = colon && !self ? dsecd_member_find(r->d, id, nl) : NULL;
	if (dsecd_sb_lookup(r->d, id) ||
	    (m && (m->state == DSECD_MEMBER_ALIVE || m->state == DSECD_MEMBER_SUSPECT))) {
		dsec_err_setc(&err, DSEC_E_INVALID, EEXIST, "sandbox '%s' is not lost: its node "
			      "'%.*s' is alive; send its requests there", id,
			      colon ? (int)(colon - id) : 0, id);
		free(id);
		return reply_err(r, &err);
	}
	v = xcalloc(1, sizeof(*v));
	v->r = r;
	v->d = r->d;
	v->from = id;
	dsec_pk_init(&v->skipped);
	dsec_pk_array_begin(&v->skipped);
	dsec_pk_init(&v->differs);
	dsec_pk_array_begin(&v->differs);
	v->scanning = true;
	ev_init(&v->retry, retry_cb);
	r->d->ops_inflight++;	/* until the reply: the chain holds r */
	fetch(v);
}
