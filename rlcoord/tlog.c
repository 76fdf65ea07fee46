/* tlog.c - the trajectory log: durable before the reply, answered from on a re-sent step.
 *
 * A sandbox created with trajectory: true has a log, TRAJECTORY_DIR/ID.log:
 * an entry per op that changed or observed it (the rows flagged
 * DSECD_OP_LOGGED, and its create first), in the order their replies were
 * made.  The before-reply hook (dsecd_reply_hook_set) holds each such reply
 * and queues its entry; an ev_prepare, once per loop iteration, hands the
 * queue to the log's own writer thread, which compresses each entry's
 * request and reply (zstd), appends them to their files, fdatasyncs each
 * file once (and its directory once, when the file is new) and returns;
 * then the replies go out in order.  Group commit: the replies of one loop
 * iteration share one sync per sandbox (redis' appendfsync from
 * beforeSleep).  While a batch is on disk the next one gathers.
 *
 * A record is u32 length (little-endian), u32 check (FNV-1a of the
 * payload, folded), then the payload: a msgpack map {seq, step (or nil),
 * op, hash (bin 32), t (unix s), dur_us, code, req (zstd), req_len, reply
 * (zstd), reply_len}.  A record cut short by a crash fails its length or
 * check and ends the log there (what a reader believes); so does a zero
 * length: the file is zero-filled ahead of its end (zero_ahead), so that
 * an entry's sync flushes its data and not the journal.
 *
 * Steps.  A request on a logged sandbox may carry "step" (an unsigned
 * integer the trainer numbers its actions with).  A step the log has with
 * the same request hash is answered from the log without running anything
 * (the reply as logged, plus "replayed": STEP); a different request at a
 * logged step is refused "diverged" (both hashes named); a step running
 * now gets the running one's reply when it comes (a trainer that re-sent
 * it after a timeout must not run it twice); any other step runs.  Replies
 * that say nothing ran (bad_request, invalid, too_large, unsupported,
 * busy, capacity, shutting_down, unavailable, internal, sandbox_lost,
 * node_lost, backend_error) are not logged: the step runs when re-sent.
 * What is logged is ok and the codes a command or a file op answers
 * having looked: not_found, exists, timeout, permission.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <zstd.h>

#include "daemon.h"
#include "dsec.h"
#include "log.h"
#include "ops.h"
#include "proto.h"
#include "rlc.h"
#include "rlc-int.h"

#define ZLEVEL 1			/* zstd level: the loop waits on the writer */

void rlc_hash_hex(const uint8_t *h, char out[RLC_HASH_HEX])
{
	memcpy(out, "sha256:", 7);
	for (size_t i = 0; i < RLC_HASH; i++)
		snprintf(out + 7 + 2 * i, 3, "%02x", h[i]);
}

/* ---- the request hash ---------------------------------------------------- */

static bool hashed_key(const msgpack_object *k)
{
	static const char *const skip[] = { "v", "id", "fwd", "step", "logged_reply" };

	if (k->type != MSGPACK_OBJECT_STR)
		return true;
	for (size_t i = 0; i < DSEC_ARRAY_LEN(skip); i++)
		if (k->via.str.size == strlen(skip[i]) &&
		    !memcmp(k->via.str.ptr, skip[i], k->via.str.size))
			return false;
	return true;
}

static int key_cmp(const void *a, const void *b)
{
	const msgpack_object_kv *x = *(const msgpack_object_kv *const *)a;
	const msgpack_object_kv *y = *(const msgpack_object_kv *const *)b;
	size_t n = x->key.via.str.size < y->key.via.str.size ? x->key.via.str.size
							     : y->key.via.str.size;
	int c = memcmp(x->key.via.str.ptr, y->key.via.str.ptr, n);

	if (c)
		return c;
	return x->key.via.str.size < y->key.via.str.size ? -1
	       : x->key.via.str.size > y->key.via.str.size;
}

static int sbuf_write(void *data, const char *buf, size_t len)
{
	EVP_DigestUpdate(data, buf, len);
	return 0;
}

void rlc_request_hash(const msgpack_object *root, uint8_t out[RLC_HASH])
{
	const msgpack_object_kv **keys = xmalloc((root->via.map.size + 1) * sizeof(*keys));
	size_t n = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	msgpack_packer pk;

	DSEC_ASSERT(ctx);
	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	/* Keys in byte order (a map from the wire has str keys: the parser
	 * took it; a key of another type is hashed as it comes, last). */
	for (uint32_t i = 0; i < root->via.map.size; i++)
		if (hashed_key(&root->via.map.ptr[i].key) &&
		    root->via.map.ptr[i].key.type == MSGPACK_OBJECT_STR)
			keys[n++] = &root->via.map.ptr[i];
	qsort(keys, n, sizeof(keys[0]), key_cmp);
	msgpack_packer_init(&pk, ctx, sbuf_write);
	for (size_t i = 0; i < n; i++) {
		msgpack_pack_object(&pk, keys[i]->key);
		msgpack_pack_object(&pk, keys[i]->val);
	}
	for (uint32_t i = 0; i < root->via.map.size; i++)
		if (root->via.map.ptr[i].key.type != MSGPACK_OBJECT_STR) {
			msgpack_pack_object(&pk, root->via.map.ptr[i].key);
			msgpack_pack_object(&pk, root->via.map.ptr[i].val);
		}
	unsigned len = RLC_HASH;
	EVP_DigestFinal_ex(ctx, out, &len);
	EVP_MD_CTX_free(ctx);
	free(keys);
}

/* ---- logs ---------------------------------------------------------------- */

/* The replies of logged steps kept in memory, so that a trainer's re-sent
 * steps are answered on the loop without a read of the log: up to
 * CACHE_LOG_MAX bytes a log and CACHE_NODE_MAX in all (one daemon a
 * process), the rest read from the file. */
#define CACHE_LOG_MAX (256u << 10)
#define CACHE_NODE_MAX (128ull << 20)
static uint64_t cache_total;

static void log_unref(struct rlc_log *L)
{
	if (!L || --L->refs)
		return;
	DSEC_ASSERT(!L->pending);
	for (size_t i = 0; i < L->nsteps; i++)
		free(L->steps[i].reply);
	cache_total -= L->cached;
	free(L->id);
	free(L->path);
	free(L->name);
	free(L->steps);
	free(L->xends);
	dsec_buf_free(&L->wbuf);
	free(L);
}

void rlc_log_start(struct dsecd *d, struct dsecd_sb *sb)
{
	struct rlc_log *L;

	if (!d->rlc || sb->tlog)
		return;
	L = xcalloc(1, sizeof(*L));
	L->refs = 1;
	L->id = xstrdup(sb->id);
	L->path = xasprintf("%s/%s.log", d->rlc->dir, sb->id);
	L->name = xasprintf("%s.log", sb->id);
	sb->tlog = L;
}

void rlc_log_drop(struct dsecd *d, struct dsecd_sb *sb)
{
	log_unref(sb->tlog);
	sb->tlog = NULL;
}

static struct rlc_step *step_find(struct rlc_log *L, uint64_t step, size_t *at)
{
	size_t lo = 0, hi = L->nsteps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (L->steps[mid].step < step)
			lo = mid + 1;
		else
			hi = mid;
	}
	*at = lo;
	return lo < L->nsteps && L->steps[lo].step == step ? &L->steps[lo] : NULL;
}

static void step_add(struct rlc_log *L, const struct rlc_ent *e)
{
	size_t at;

	if (step_find(L, e->step, &at))
		return;		/* cannot be: a logged step is never run again */
	if (L->nsteps == L->capsteps) {
		L->capsteps = L->capsteps ? 2 * L->capsteps : 16;
		L->steps = xrealloc(L->steps, L->capsteps * sizeof(*L->steps));
	}
	memmove(&L->steps[at + 1], &L->steps[at], (L->nsteps - at) * sizeof(*L->steps));
	L->nsteps++;
	L->steps[at] = (struct rlc_step){ .step = e->step, .off = e->off, .len = e->len,
					  .op = e->op };
	memcpy(L->steps[at].hash, e->hash, RLC_HASH);
	if (e->reply && e->reply_len <= CACHE_LOG_MAX - L->cached &&
	    cache_total + e->reply_len <= CACHE_NODE_MAX) {
		L->steps[at].reply = xmalloc(e->reply_len ? e->reply_len : 1);
		memcpy(L->steps[at].reply, e->reply, e->reply_len);
		L->steps[at].reply_len = (uint32_t)e->reply_len;
		L->cached += e->reply_len;
		cache_total += e->reply_len;
	}
}

/* ---- replies that are not run ---------------------------------------------- */

static bool key_is(const msgpack_object *k, const char *s)
{
	return k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(s) &&
	       !memcmp(k->via.str.ptr, s, k->via.str.size);
}

/* A map with "replayed": step added (one it had replaced). */
static void pack_marked(struct dsec_pk *p, const msgpack_object *map, uint64_t step)
{
	dsec_pk_map_begin(p);
	for (uint32_t i = 0; i < map->via.map.size; i++)
		if (!key_is(&map->via.map.ptr[i].key, "replayed")) {
			dsec_pk_object(p, &map->via.map.ptr[i].key);
			dsec_pk_object(p, &map->via.map.ptr[i].val);
		}
	dsec_pk_kv_u64(p, "replayed", step);
	dsec_pk_end(p);
}

/* reply (len bytes) with "replayed": step in its result map (or its
 * error map), so a client sees it where it reads the rest. */
static void *mark_replayed(const void *reply, size_t len, uint64_t step, size_t *out_len)
{
	struct dsec_msg m;
	struct dsec_err err;
	struct dsec_pk p;

	dsec_err_clear(&err);
	if (dsec_msg_parse_n(&m, reply, len, SIZE_MAX, SIZE_MAX, &err) < 0) {
		dsec_msg_free(&m);
		void *copy = xmalloc(len ? len : 1);
		memcpy(copy, reply, len);
		*out_len = len;
		return copy;
	}
	dsec_pk_init(&p);
	dsec_pk_map_begin(&p);
	for (uint32_t i = 0; i < m.root->via.map.size; i++) {
		const msgpack_object_kv *kv = &m.root->via.map.ptr[i];
		dsec_pk_object(&p, &kv->key);
		if ((key_is(&kv->key, "result") || key_is(&kv->key, "error")) &&
		    kv->val.type == MSGPACK_OBJECT_MAP)
			pack_marked(&p, &kv->val, step);
		else
			dsec_pk_object(&p, &kv->val);
	}
	dsec_pk_end(&p);
	dsec_msg_free(&m);
	return dsec_pk_detach(&p, out_len);
}

static enum dsec_code reply_code_of(const void *reply, size_t len)
{
	struct dsec_msg m;
	struct dsec_err err;
	enum dsec_code code = DSEC_E_INTERNAL;
	const msgpack_object *ok, *e, *c;

	dsec_err_clear(&err);
	if (dsec_msg_parse_n(&m, reply, len, SIZE_MAX, SIZE_MAX, &err) == 0 &&
	    (ok = dsec_map_get(m.root, "ok")) && ok->type == MSGPACK_OBJECT_BOOLEAN) {
		if (ok->via.boolean)
			code = DSEC_E_OK;
		else if ((e = dsec_map_get(m.root, "error")) && e->type == MSGPACK_OBJECT_MAP &&
			 (c = dsec_map_get(e, "code")) && c->type == MSGPACK_OBJECT_STR)
			code = dsec_code_from_name(c->via.str.ptr, c->via.str.size);
	}
	dsec_msg_free(&m);
	return code;
}

/* An exec_start step answered from the log: the stream its reply names,
 * if it is still running or unread, is read from its start again by the
 * trainer that sent the step again (its output before is no other's). */
static void rewind_stream(struct dsecd_sb *sb, const void *reply, size_t len)
{
	struct dsec_msg m;
	struct dsec_err err;
	const msgpack_object *res, *x;

	dsec_err_clear(&err);
	if (dsec_msg_parse_n(&m, reply, len, SIZE_MAX, SIZE_MAX, &err) == 0 &&
	    (res = dsec_map_get(m.root, "result")) && res->type == MSGPACK_OBJECT_MAP &&
	    (x = dsec_map_get(res, "exec")) && x->type == MSGPACK_OBJECT_STR)
		dsecd_stream_rewind(sb, x->via.str.ptr, x->via.str.size);
	dsec_msg_free(&m);
}

/* r, whose step was answered without running it, gets reply (a copy). */
static void answer(struct dsecd_req *r, const void *reply, size_t len, uint64_t step)
{
	size_t n;
	void *copy = mark_replayed(reply, len, step, &n);

	r->rl_answered = true;
	r->reply_code = reply_code_of(copy, n);
	if (r->op == DSEC_OP_EXEC_START && r->sb && r->reply_code == DSEC_E_OK)
		rewind_stream(r->sb, copy, n);
	dsecd_req_release_frame(r, copy, n);
}

/* r's reply is out (or about to be): the requests that joined its step get it. */
static void pending_end(struct dsecd_req *r)
{
	struct rlc_log *L = r->rl_log;
	struct dsecd_req **pp, *j;

	if (!L)
		return;
	r->rl_log = NULL;
	for (pp = &L->pending; *pp; pp = &(*pp)->rl_next)
		if (*pp == r) {
			*pp = r->rl_next;
			break;
		}
	r->rl_next = NULL;
	while ((j = r->rl_joined)) {
		r->rl_joined = j->rl_next;
		j->rl_next = NULL;
		if (r->reply) {
			answer(j, r->reply, r->reply_len, r->step);
		} else {
			struct dsec_err err;
			dsec_err_setc(&err, DSEC_E_INTERNAL, EIO, "step %" PRIu64 " ended without "
				      "a reply", r->step);
			j->rl_answered = true;
			reply_err(j, &err);
		}
	}
	log_unref(L);
}

static void ent_free(struct rlc_ent *e)
{
	log_unref(e->log);
	free(e->req);
	free(e->own_reply);
	free(e);
}

void rlc_req_free(struct dsecd_req *r)
{
	pending_end(r);
	if (r->rl_xend) {	/* its reply never came (cannot be) */
		ent_free(r->rl_xend);
		r->rl_xend = NULL;
	}
	if (r->rl_token)	/* a create ended without a reply (cannot be) */
		rlc_token_made(r);
}

static void diverged(struct dsecd_req *r, uint64_t step, const uint8_t *logged, uint16_t lop,
		     bool running)
{
	char a[RLC_HASH_HEX], b[RLC_HASH_HEX];
	struct dsec_err err;
	struct dsec_pk p;

	rlc_hash_hex(logged, a);
	rlc_hash_hex(r->rl_hash, b);
	dsec_err_setc(&err, DSEC_E_DIVERGED, EEXIST, "step %" PRIu64 " of sandbox '%s' %s %s "
		      "request %s; this %s request is %s", step, r->sb->id,
		      running ? "is running another" : "is logged with another",
		      dsecd_ops[lop].name, a, dsecd_ops[r->op].name, b);
	r->d->rlc->diverged++;
	r->reply_code = DSEC_E_DIVERGED;
	dsec_pk_init(&p);
	dsec_pk_map_begin(&p);
	dsec_pk_kv_bool(&p, "ok", false);
	dsec_pk_str(&p, "error");
	dsec_pk_map_begin(&p);
	dsec_pk_kv_str(&p, "code", dsec_code_name(DSEC_E_DIVERGED));
	dsec_pk_kv_str(&p, "message", err.msg);
	dsec_pk_kv_u64(&p, "step", step);
	dsec_pk_kv_str(&p, "logged", a);
	dsec_pk_kv_str(&p, "logged_op", dsecd_ops[lop].name);
	dsec_pk_kv_str(&p, "sent", b);
	dsec_pk_end(&p);
	dsec_pk_end(&p);
	r->rl_answered = true;	/* nothing of it is logged */
	req_complete(r, &p);
}

/* ---- reading entries on the writer's thread ------------------------------------ */

/* The record at off (len bytes with its header) parsed; 0 or -errno. */
int rlc_rec_read(int fd, uint64_t off, uint32_t len, struct dsec_buf *b, struct dsec_msg *m,
		    struct dsec_err *err)
{
	uint32_t n, check;

	dsec_buf_reset(b);
	dsec_buf_grow(b, len);
	ssize_t got = pread(fd, b->data, len, (off_t)off);
	if (got != (ssize_t)len)
		return dsec_err_setc(err, DSEC_E_INTERNAL, EIO, "short read of the trajectory log");
	memcpy(&n, b->data, 4);
	memcpy(&check, b->data + 4, 4);
	n = le32toh(n);
	if (n + REC_HEAD != len || rlc_check(b->data + REC_HEAD, n) != le32toh(check))
		return dsec_err_setc(err, DSEC_E_INTERNAL, EIO, "a trajectory log entry fails its "
				     "check");
	return dsec_msg_parse_n(m, b->data + REC_HEAD, n, SIZE_MAX, SIZE_MAX, err);
}

/* The bin of key in entry e decompressed to its logged length (key_len). */
int rlc_unzip(const msgpack_object *e, const char *key, const char *key_len, void **out,
		 size_t *out_len, struct dsec_err *err)
{
	const void *z;
	size_t zn;
	uint64_t n = 0;

	if (dsec_get_bin(e, key, REC_MAX, &z, &zn, err) < 0 ||
	    dsec_get_u64(e, key_len, &n, err) < 0 || n > REC_MAX)
		return dsec_err_setc(err, DSEC_E_INTERNAL, EIO, "a trajectory log entry lacks '%s'",
				     key);
	*out = xmalloc(n ? n : 1);
	size_t got = ZSTD_decompress(*out, n, z, zn);
	if (ZSTD_isError(got) || got != n) {
		free(*out);
		*out = NULL;
		return dsec_err_setc(err, DSEC_E_INTERNAL, EIO, "a trajectory log entry does not "
				     "decompress");
	}
	*out_len = n;
	return 0;
}

static void read_entry_work(void *arg)
{
	struct rlc_read *rd = arg;
	struct dsec_buf b = { 0 };
	struct dsec_msg m = { 0 };
	int fd = open(rd->path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		rd->rc = dsec_err_setc(&rd->err, DSEC_E_INTERNAL, errno, "cannot open '%s': %s",
				       rd->path, strerror(errno));
		return;
	}
	if ((rd->rc = rlc_rec_read(fd, rd->off, rd->len, &b, &m, &rd->err)) == 0)
		rd->rc = rlc_unzip(m.root, "reply", "reply_len", &rd->out, &rd->out_len, &rd->err);
	dsec_msg_free(&m);
	dsec_buf_free(&b);
	close(fd);
}

static void read_entry_done(void *arg)
{
	struct rlc_read *rd = arg;
	struct dsecd_req *r = rd->r;

	r->d->ops_inflight--;
	if (rd->rc < 0) {
		r->rl_answered = true;
		reply_err(r, &rd->err);
	} else {
		r->d->rlc->replayed++;
		answer(r, rd->out, rd->out_len, r->step);
	}
	free(rd->out);
	free(rd->path);
	free(rd);
}

/* r is answered with the reply of L's record at off (len bytes), read by
 * the writer's thread; 0, or -1 when it cannot be (r is not taken). */
static int read_entry_submit(struct dsecd_req *r, struct rlc_log *L, uint64_t off, uint32_t len)
{
	struct rlc_read *rd = xcalloc(1, sizeof(*rd));

	rd->r = r;
	rd->path = xstrdup(L->path);
	rd->off = off;
	rd->len = len;
	dsec_err_clear(&rd->err);
	if (dsecd_pool_submit(r->d->rlc->writer, read_entry_work, read_entry_done, rd) < 0) {
		free(rd->path);
		free(rd);
		return -1;
	}
	r->d->ops_inflight++;
	return 0;
}

/* ---- steps --------------------------------------------------------------- */

static void step_err(struct dsecd_req *r, enum dsec_code code, const char *fmt, ...)
	DSEC_PRINTF(3, 4);
static void step_err(struct dsecd_req *r, enum dsec_code code, const char *fmt, ...)
{
	struct dsec_err err;
	va_list ap;

	dsec_err_clear(&err);
	err.code = code;
	err.errnum = EINVAL;
	va_start(ap, fmt);
	char tmp[DSEC_ERR_MSG_MAX];
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	dsec_utf8_clean(err.msg, sizeof(err.msg), tmp, strlen(tmp));
	r->rl_answered = true;
	reply_err(r, &err);
}

static bool ran(enum dsec_code c);

/* A recover from a snapshot (recover.c) logs the end of a stream the
 * snapshot holds, so that a trainer reading that stream again after
 * re-sending its step is answered: exec_read with the logged reply, the
 * stream's name (exec) and its exec_start's step (stream_step), node to
 * node only.  Runs nothing; r's reply is the logged one once durable. */
static bool stream_import(struct dsecd_req *r, const msgpack_object *lr)
{
	struct rlc_log *L = r->sb ? r->sb->tlog : NULL;
	const msgpack_object *x = dsec_map_get(r->msg.root, "exec");
	const msgpack_object *st = dsec_map_get(r->msg.root, "stream_step");
	struct dsec_msg m = { 0 };
	struct dsec_err err;
	const msgpack_object *res, *done;
	bool whole;

	if (lr->type != MSGPACK_OBJECT_BIN || !lr->via.bin.size ||
	    (!r->on_reply && !dsec_has(r->msg.root, "fwd"))) {
		step_err(r, DSEC_E_INVALID, "field 'logged_reply' is node to node: bytes of a reply, "
			 "sent by a node's recover");
		return true;
	}
	if (!L || !x || x->type != MSGPACK_OBJECT_STR || !x->via.str.size ||
	    x->via.str.size >= sizeof(((struct rlc_xend *)0)->exec) || !st ||
	    st->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
		step_err(r, DSEC_E_INVALID, "a stream's logged end needs a sandbox with a "
			 "trajectory, 'exec' and 'stream_step'");
		return true;
	}
	dsec_err_clear(&err);
	whole = dsec_msg_parse_n(&m, lr->via.bin.ptr, lr->via.bin.size, SIZE_MAX, SIZE_MAX,
				 &err) == 0 && reply_code_of(lr->via.bin.ptr, lr->via.bin.size) ==
		DSEC_E_OK && (res = dsec_map_get(m.root, "result")) &&
		res->type == MSGPACK_OBJECT_MAP && (done = dsec_map_get(res, "done")) &&
		done->type == MSGPACK_OBJECT_BOOLEAN && done->via.boolean;
	dsec_msg_free(&m);
	if (!whole) {
		step_err(r, DSEC_E_INVALID, "field 'logged_reply' is no stream's end (an ok "
			 "exec_read reply with done)");
		return true;
	}
	char name[sizeof(((struct rlc_xend *)0)->exec)];
	void *copy = xmalloc(lr->via.bin.size), *ack = xmalloc(lr->via.bin.size);

	snprintf(name, sizeof(name), "%.*s", (int)x->via.str.size, x->via.str.ptr);
	memcpy(copy, lr->via.bin.ptr, lr->via.bin.size);
	memcpy(ack, lr->via.bin.ptr, lr->via.bin.size);
	struct rlc_stream_end se = { .exec = name, .has_step = true, .step = st->via.u64,
				     .t = ev_now(r->d->loop) - r->d->started + r->d->started_wall,
				     .reply = copy, .reply_len = lr->via.bin.size };
	rlc_stream_end(r->d, r->sb, r, &se);
	r->d->rlc->imported++;
	r->reply_code = DSEC_E_OK;
	req_complete_frame(r, ack, lr->via.bin.size);
	return true;
}

bool rlc_step(struct dsecd_req *r)
{
	const msgpack_object *s = dsec_map_get(r->msg.root, "step");
	struct rlc_log *L;
	struct rlc_step *at;
	size_t pos;

	const msgpack_object *lr = dsec_map_get(r->msg.root, "logged_reply");

	if (lr && (!s || s->type == MSGPACK_OBJECT_NIL)) {
		if (r->op == DSEC_OP_EXEC_READ)
			return stream_import(r, lr);
		step_err(r, DSEC_E_INVALID, "field 'logged_reply' needs a 'step'");
		return true;
	}
	if (!s || s->type == MSGPACK_OBJECT_NIL || r->rl_log)
		return false;	/* no step, or run again after a pause or resume */
	if (s->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
		step_err(r, DSEC_E_BAD_REQUEST, "field 'step' must be an unsigned integer");
		return true;
	}
	if (!r->sb || !(L = r->sb->tlog)) {
		step_err(r, DSEC_E_INVALID, "sandbox '%s' keeps no trajectory: a step needs a "
			 "sandbox created with trajectory: true", r->sb ? r->sb->id : "?");
		return true;
	}
	if (!(dsecd_ops[r->op].flags & DSECD_OP_LOGGED)) {
		step_err(r, DSEC_E_INVALID, "%s is not logged: it takes no step",
			 dsecd_ops[r->op].name);
		return true;
	}
	r->has_step = true;
	r->step = s->via.u64;
	rlc_request_hash(r->msg.root, r->rl_hash);
	if ((at = step_find(L, r->step, &pos))) {
		if (memcmp(at->hash, r->rl_hash, RLC_HASH)) {
			diverged(r, r->step, at->hash, at->op, false);
			return true;
		}
		if (at->reply) {
			r->d->rlc->replayed++;
			answer(r, at->reply, at->reply_len, r->step);
			return true;
		}
		if (read_entry_submit(r, L, at->off, at->len) < 0)
			step_err(r, DSEC_E_INTERNAL, "cannot read the trajectory log");
		return true;
	}
	for (struct dsecd_req *p = L->pending; p; p = p->rl_next)
		if (p->step == r->step) {
			if (memcmp(p->rl_hash, r->rl_hash, RLC_HASH)) {
				diverged(r, r->step, p->rl_hash, (uint16_t)p->op, true);
				return true;
			}
			/* The same request, running: it gets that one's reply. */
			r->d->rlc->joined++;
			r->rl_next = p->rl_joined;
			p->rl_joined = r;
			return true;
		}
	if (L->err) {
		step_err(r, dsec_code_from_errno(L->err), "the trajectory log of sandbox '%s' "
			 "cannot be written (%s): it takes no more steps", r->sb->id,
			 strerror(L->err));
		return true;
	}
	/* A recover from a snapshot (recover.c) logs the steps the snapshot
	 * holds with their logged replies, running nothing: node to node
	 * only (the daemon's own request, or one another node forwarded). */
	if (lr && (lr->type != MSGPACK_OBJECT_BIN || !lr->via.bin.size ||
		   (!r->on_reply && !dsec_has(r->msg.root, "fwd")))) {
		step_err(r, DSEC_E_INVALID, "field 'logged_reply' is node to node: bytes of a reply, "
			 "sent by a node's recover");
		return true;
	}
	if (lr && !ran(reply_code_of(lr->via.bin.ptr, lr->via.bin.size))) {
		step_err(r, DSEC_E_INVALID, "field 'logged_reply' is no reply a log keeps (one "
			 "that says its op ran)");
		return true;
	}
	r->rl_log = L;
	L->refs++;
	r->rl_next = L->pending;
	L->pending = r;
	if (lr) {
		void *reply = xmalloc(lr->via.bin.size);

		memcpy(reply, lr->via.bin.ptr, lr->via.bin.size);
		r->reply_code = reply_code_of(reply, lr->via.bin.size);
		r->d->rlc->imported++;
		req_complete_frame(r, reply, lr->via.bin.size);
		return true;
	}
	return false;
}

/* ---- the hook and the writer ----------------------------------------------- */

/* Whether a reply of this code says the op ran (and so is logged). */
static bool ran(enum dsec_code c)
{
	switch (c) {
	case DSEC_E_OK: case DSEC_E_NOT_FOUND: case DSEC_E_EXISTS: case DSEC_E_TIMEOUT:
	case DSEC_E_PERMISSION:
		return true;
	default:
		return false;
	}
}

static void ent_queue(struct rlc *rl, struct rlc_ent *e)
{
	e->seq = e->log->seq++;
	*rl->qtail = e;
	rl->qtail = &e->next;
}

static bool hook(void *arg, struct dsecd_req *r)
{
	struct rlc *rl = arg;
	struct dsecd *d = rl->d;
	struct rlc_log *L = r->sb ? r->sb->tlog : NULL;
	struct rlc_ent *e;

	if (r->rl_answered)
		return false;
	if (r->rl_xend) {
		/* The end of its stream, durable before r's reply. */
		e = r->rl_xend;
		r->rl_xend = NULL;
		if (!L || L->err) {
			ent_free(e);
			return false;
		}
		e->r = r;
		ent_queue(rl, e);
		return true;
	}
	if (r->op == DSEC_OP_CREATE)
		rlc_token_made(r);
	if (r->rl_log && r->rl_log != L) {	/* its sandbox went while it waited */
		pending_end(r);
		return false;
	}
	if (!L || !(dsecd_ops[r->op].flags & DSECD_OP_LOGGED) || r->unlogged)
		return false;
	if (!ran(r->reply_code) || (r->op == DSEC_OP_CREATE && r->reply_code) || L->err) {
		pending_end(r);
		return false;
	}
	e = xcalloc(1, sizeof(*e));
	e->r = r;
	e->log = L;
	L->refs++;
	e->has_step = r->has_step;
	e->step = r->step;
	e->op = (uint16_t)r->op;
	if (r->has_step)
		memcpy(e->hash, r->rl_hash, RLC_HASH);
	else
		rlc_request_hash(r->msg.root, e->hash);
	e->code = r->reply_code;
	uint64_t now = dsec_now_ns();
	e->dur_us = (now - r->t0) / 1000;
	e->t = ev_now(d->loop) - d->started + d->started_wall - (double)e->dur_us / 1e6;
	e->req = xmalloc(r->frame_len ? r->frame_len : 1);
	memcpy(e->req, r->frame, r->frame_len);
	e->req_len = r->frame_len;
	e->reply = r->reply;
	e->reply_len = r->reply_len;
	ent_queue(rl, e);
	return true;
}

/* ---- streams' ends ----------------------------------------------------------- */

void rlc_stream_end(struct dsecd *d, struct dsecd_sb *sb, struct dsecd_req *r,
		    const struct rlc_stream_end *se)
{
	struct rlc_log *L = sb->tlog;
	struct rlc_ent *e;

	if (!d->rlc || !L || L->err) {
		free(se->reply);
		return;
	}
	e = xcalloc(1, sizeof(*e));
	e->log = L;
	L->refs++;
	e->op = DSEC_OP_EXEC_READ;
	e->code = DSEC_E_OK;
	e->t = se->t;
	e->dur_us = se->dur_us;
	e->own_reply = se->reply;
	e->reply = se->reply;
	e->reply_len = se->reply_len;
	snprintf(e->exec, sizeof(e->exec), "%s", se->exec);
	e->exec_step = se->has_step;
	e->exec_step_n = se->step;
	if (r) {
		/* Its request's: queued by the hook when its reply comes. */
		e->req = xmalloc(r->frame_len ? r->frame_len : 1);
		memcpy(e->req, r->frame, r->frame_len);
		e->req_len = r->frame_len;
		rlc_request_hash(r->msg.root, e->hash);
		DSEC_ASSERT(!r->rl_xend);
		r->rl_xend = e;
		return;
	}
	/* Nobody took its last bytes (dropped after stream_grace, or its
	 * reader left): the request is the one that would have. */
	struct dsec_pk p;
	struct dsec_msg m;
	struct dsec_err err;

	dsec_pk_init(&p);
	dsec_pk_map_begin(&p);
	dsec_pk_kv_str(&p, "op", "exec_read");
	dsec_pk_kv_str(&p, "id", sb->id);
	dsec_pk_kv_str(&p, "exec", se->exec);
	dsec_pk_end(&p);
	e->req = dsec_pk_detach(&p, &e->req_len);
	dsec_err_clear(&err);
	if (dsec_msg_parse_n(&m, e->req, e->req_len, SIZE_MAX, SIZE_MAX, &err) == 0)
		rlc_request_hash(m.root, e->hash);
	dsec_msg_free(&m);
	ent_queue(d->rlc, e);
}

static void xend_add(struct rlc_log *L, const struct rlc_ent *e)
{
	if (L->nxends == L->capxends) {
		L->capxends = L->capxends ? 2 * L->capxends : 8;
		L->xends = xrealloc(L->xends, L->capxends * sizeof(*L->xends));
	}
	struct rlc_xend *x = &L->xends[L->nxends++];
	snprintf(x->exec, sizeof(x->exec), "%s", e->exec);
	x->step = e->exec_step_n;
	x->off = e->off;
	x->len = e->len;
}

bool rlc_stream_answer(struct dsecd_req *r)
{
	struct rlc_log *L = r->sb ? r->sb->tlog : NULL;
	const msgpack_object *x = L ? dsec_map_get(r->msg.root, "exec") : NULL;

	if (!x || x->type != MSGPACK_OBJECT_STR)
		return false;
	for (size_t i = L->nxends; i-- > 0;) {
		const struct rlc_xend *xe = &L->xends[i];

		if (strlen(xe->exec) != x->via.str.size ||
		    memcmp(xe->exec, x->via.str.ptr, x->via.str.size))
			continue;
		r->step = xe->step;	/* what answer() marks it with */
		return read_entry_submit(r, L, xe->off, xe->len) == 0;
	}
	return false;
}

static void pack_zipped(msgpack_packer *pk, const char *k, const char *klen, const void *p,
			size_t n, struct dsec_buf *z, ZSTD_CCtx *zc)
{
	size_t bound = ZSTD_compressBound(n);

	dsec_buf_reset(z);
	dsec_buf_grow(z, bound);
	size_t zn = ZSTD_compressCCtx(zc, z->data, bound, p, n, ZLEVEL);
	DSEC_ASSERT(!ZSTD_isError(zn));
	msgpack_pack_str_with_body(pk, k, strlen(k));
	msgpack_pack_bin_with_body(pk, z->data, zn);
	msgpack_pack_str_with_body(pk, klen, strlen(klen));
	msgpack_pack_uint64(pk, n);
}

static void pack_entry(const struct rlc_ent *e, msgpack_sbuffer *sb, struct dsec_buf *z,
		       ZSTD_CCtx *zc)
{
	msgpack_packer pk;
	const char *op = dsecd_ops[e->op].name, *code = dsec_code_name(e->code);

	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 11);
	msgpack_pack_str_with_body(&pk, "seq", 3);
	msgpack_pack_uint64(&pk, e->seq);
	msgpack_pack_str_with_body(&pk, "step", 4);
	if (e->has_step)
		msgpack_pack_uint64(&pk, e->step);
	else
		msgpack_pack_nil(&pk);
	msgpack_pack_str_with_body(&pk, "op", 2);
	msgpack_pack_str_with_body(&pk, op, strlen(op));
	msgpack_pack_str_with_body(&pk, "hash", 4);
	msgpack_pack_bin_with_body(&pk, e->hash, RLC_HASH);
	msgpack_pack_str_with_body(&pk, "t", 1);
	msgpack_pack_double(&pk, e->t);
	msgpack_pack_str_with_body(&pk, "dur_us", 6);
	msgpack_pack_uint64(&pk, e->dur_us);
	msgpack_pack_str_with_body(&pk, "code", 4);
	msgpack_pack_str_with_body(&pk, code, strlen(code));
	pack_zipped(&pk, "req", "req_len", e->req, e->req_len, z, zc);
	pack_zipped(&pk, "reply", "reply_len", e->reply, e->reply_len, z, zc);
}

static void batch_work(void *arg)
{
	struct rlc *rl = arg;
	struct rlc_log *logs = NULL;
	msgpack_sbuffer sb;
	struct dsec_buf z = { 0 };
	int rc = 0;
	uint64_t t0 = dsec_now_ns();

	msgpack_sbuffer_init(&sb);
	for (struct rlc_ent *e = rl->batch; e; e = e->next) {
		struct rlc_log *L = e->log;
		uint32_t head[2];

		if (!L->in_batch) {
			L->in_batch = true;
			L->bnext = logs;
			logs = L;
			dsec_buf_reset(&L->wbuf);
		}
		msgpack_sbuffer_clear(&sb);
		pack_entry(e, &sb, &z, rl->zc);
		head[0] = htole32((uint32_t)sb.size);
		head[1] = htole32(rlc_check(sb.data, sb.size));
		e->boff = L->wbuf.len;
		e->off = L->wsize + L->wbuf.len;
		e->len = (uint32_t)(sb.size + REC_HEAD);
		dsec_buf_add(&L->wbuf, head, sizeof(head));
		dsec_buf_add(&L->wbuf, sb.data, sb.size);
	}
	msgpack_sbuffer_destroy(&sb);
	dsec_buf_free(&z);
	/* Durable: the batch in the journal, one sync.  Then each log's
	 * file gets its entries, unsynced (a checkpoint syncs them; after a
	 * crash the journal writes them again). */
	uint64_t s0 = dsec_now_ns();
	const char **peers;
	size_t npeers, ncalls;
	/* The peers' copies go out first and are synced there while this
	 * node syncs its own. */
	rlc_replicate_start(rl, &peers, &npeers, &ncalls);
	for (struct rlc_log *L = logs; L; L = L->bnext)
		if (L->wbuf.len)
			rlc_journal_add(rl->journal, L->name, L->wsize, L->wbuf.data, L->wbuf.len);
	rc = rlc_journal_commit(rl->journal);
	rlc_replicate_wait(rl, peers, npeers, ncalls);
	if (rc < 0) {
		snprintf(rl->batch_err, sizeof(rl->batch_err), "cannot write the journal in '%s': "
			 "%s", rl->dir, strerror(-rc));
		for (struct rlc_log *L = logs; L; L = L->bnext) {
			L->in_batch = false;
			L->werr = -rc;
		}
		rl->batch_rc = rc;
		rl->batch_ns += dsec_now_ns() - t0;
		return;
	}
	rl->sync_ns += dsec_now_ns() - s0;
	__atomic_add_fetch(&rl->syncs, 1, __ATOMIC_RELAXED);
	uint32_t gen = rlc_journal_gen(rl->journal);
	for (struct rlc_log *L = logs; L; L = L->bnext) {
		int fd = open(L->path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600), r = 0;

		L->in_batch = false;
		if (fd < 0 || (r = rlc_pwrite_full(fd, L->wbuf.data, L->wbuf.len, L->wsize)) < 0) {
			r = fd < 0 ? -errno : r;
			/* The journal has them: durable, but this log cannot be
			 * read; it takes no more. */
			if (!rc) {
				rc = r;
				snprintf(rl->batch_err, sizeof(rl->batch_err), "cannot write '%s': %s",
					 L->path, strerror(-r));
			}
			L->werr = -r;
		} else {
			L->wsize += L->wbuf.len;
		}
		if (fd >= 0)
			close(fd);
		if (L->jgen != gen) {
			rlc_journal_mark(rl->journal, L->name);
			L->jgen = gen;
		}
		dsec_buf_reset(&L->wbuf);
	}
	rl->batch_rc = rc;
	rl->batch_ns += dsec_now_ns() - t0;
}

static void batch_done(void *arg)
{
	struct rlc *rl = arg;
	struct rlc_ent *e = rl->batch;

	rl->d->ops_inflight--;
	rl->batch = NULL;
	rl->batches++;
	if (rl->batch_rc < 0)
		log_error("trajectory: %s; the sandboxes it concerns take no more steps",
			  rl->batch_err);
	if (rl->peer_err[0]) {
		log_warn("trajectory: a peer did not keep its copies: %s", rl->peer_err);
		rl->peer_err[0] = '\0';
	}
	while (e) {
		struct rlc_ent *next = e->next;
		struct rlc_log *L = e->log;
		struct dsecd_req *r = e->r;

		if (L->werr && !L->err)
			L->err = L->werr;
		if (e->off + e->len <= L->wsize) {
			L->entries++;
			L->bytes = L->wsize;
			rl->written++;
			rl->wbytes += e->len;
			if (e->has_step)
				step_add(L, e);
			if (e->exec_step)
				xend_add(L, e);
		} else {
			rl->failed++;
		}
		/* The command ran: its reply goes out whatever the disk did (a
		 * re-sent step then runs again: the log said so in info and in
		 * every step refused since). */
		if (rl->cq) {
			unsigned want = 0;
			for (size_t k = 0; k < RLC_REPLICAS; k++) {
				want += e->peer[k] != NULL;
				free(e->peer[k]);
			}
			if (want == RLC_REPLICAS && e->copies == RLC_REPLICAS)
				rl->replicated++;
			else
				rl->under_replicated++;
		}
		if (r) {
			pending_end(r);
			dsecd_req_release(r);
		}
		ent_free(e);
		e = next;
	}
}

static void prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct rlc *rl = dsec_container_of(w, struct rlc, prep);

	if (rl->batch || !rl->queue)
		return;
	rl->batch = rl->queue;
	rl->queue = NULL;
	rl->qtail = &rl->queue;
	rl->batch_rc = 0;
	if (rl->cq)
		for (struct rlc_ent *e = rl->batch; e; e = e->next)
			rlc_replica_pick(rl->d, e->log->id, e->peer);
	if (dsecd_pool_submit(rl->writer, batch_work, batch_done, rl) < 0) {
		/* Cannot be (the pool takes every job); written at once then. */
		batch_work(rl);
		rl->d->ops_inflight++;
		batch_done(rl);
		return;
	}
	rl->d->ops_inflight++;
}

/* ---- info, start, stop ------------------------------------------------------ */

void rlc_pack_sb(struct dsecd *d, const struct dsecd_sb *sb, struct dsec_pk *p)
{
	const struct rlc_log *L = sb->tlog;

	if (!L)
		return;
	dsec_pk_str(p, "trajectory");
	dsec_pk_map_begin(p);
	dsec_pk_kv_u64(p, "entries", L->entries);
	dsec_pk_kv_u64(p, "steps", L->nsteps);
	if (L->nsteps)
		dsec_pk_kv_u64(p, "last_step", L->steps[L->nsteps - 1].step);
	dsec_pk_kv_u64(p, "bytes", L->bytes);
	dsec_pk_kv_bool(p, "writable", !L->err);
	dsec_pk_end(p);
}

void rlc_pack_node(struct dsecd *d, struct dsec_pk *p)
{
	struct rlc *rl = d->rlc;

	if (!rl)
		return;
	dsec_pk_str(p, "trajectory");
	dsec_pk_map_begin(p);
	dsec_pk_kv_str(p, "dir", rl->dir);
	/* Where an acknowledged entry is: this node's disk (the journal's
	 * fdatasync) and, with gossip, the disks of two peers. */
	dsec_pk_kv_str(p, "durability", rl->cq ? "local_disk+peers" : "local_disk");
	dsec_pk_kv_u64(p, "replicas", rl->cq ? RLC_REPLICAS : 0);
	dsec_pk_kv_u64(p, "replicated", rl->replicated);
	dsec_pk_kv_u64(p, "under_replicated", rl->under_replicated);
	dsec_pk_kv_u64(p, "replica_entries", rl->replica_entries);
	dsec_pk_kv_u64(p, "checkpoints", rlc_journal_checkpoints(rl->journal));
	dsec_pk_kv_u64(p, "entries", rl->written);
	dsec_pk_kv_u64(p, "bytes", rl->wbytes);
	dsec_pk_kv_u64(p, "batches", rl->batches);
	dsec_pk_kv_u64(p, "syncs", __atomic_load_n(&rl->syncs, __ATOMIC_RELAXED));
	dsec_pk_kv_double(p, "batch_ms", rl->batches ? (double)rl->batch_ns / 1e6 /
			  (double)rl->batches : 0);
	dsec_pk_kv_double(p, "sync_ms", rl->syncs ? (double)rl->sync_ns / 1e6 /
			  (double)rl->syncs : 0);
	dsec_pk_kv_u64(p, "replayed", rl->replayed);
	dsec_pk_kv_u64(p, "joined", rl->joined);
	dsec_pk_kv_u64(p, "diverged", rl->diverged);
	dsec_pk_kv_u64(p, "imported", rl->imported);
	dsec_pk_kv_u64(p, "failed", rl->failed);
	dsec_pk_kv_double(p, "keep", d->conf.trajectory_keep);
	dsec_pk_kv_u64(p, "removed", rl->swept);
	dsec_pk_end(p);
	dsec_pk_str(p, "leases");
	dsec_pk_map_begin(p);
	dsec_pk_kv_u64(p, "open", rl->nleases);
	dsec_pk_kv_u64(p, "lapsed", rl->leases_lapsed);
	dsec_pk_kv_u64(p, "expired", rl->leases_expired);
	dsec_pk_end(p);
	dsec_pk_str(p, "tokens");
	dsec_pk_map_begin(p);
	dsec_pk_kv_u64(p, "held", rl->ntokens);
	dsec_pk_kv_u64(p, "claims", rl->nclaims);
	dsec_pk_kv_u64(p, "reused", rl->tokens_reused);
	dsec_pk_end(p);
}

bool rlc_get_stats(struct dsecd *d, struct rlc_stats *out)
{
	const struct rlc *rl = d->rlc;

	memset(out, 0, sizeof(*out));
	if (!rl)
		return false;
	out->written = rl->written;
	out->failed = rl->failed;
	out->bytes = rl->wbytes;
	out->batches = rl->batches;
	out->syncs = __atomic_load_n(&rl->syncs, __ATOMIC_RELAXED);
	out->sync_seconds = (double)rl->sync_ns / 1e9;
	out->replayed = rl->replayed;
	out->joined = rl->joined;
	out->diverged = rl->diverged;
	out->imported = rl->imported;
	out->peers = rl->cq != NULL;
	out->replicated = rl->replicated;
	out->under_replicated = rl->under_replicated;
	out->replica_entries = rl->replica_entries;
	out->leases_open = rl->nleases;
	out->leases_lapsed = rl->leases_lapsed;
	out->leases_expired = rl->leases_expired;
	out->tokens_held = rl->ntokens;
	out->tokens_reused = rl->tokens_reused;
	return true;
}

int rlc_open(struct dsecd *d, struct dsec_err *err)
{
	struct rlc *rl;
	char *dir = d->conf.trajectory_dir ? xstrdup(d->conf.trajectory_dir)
					   : xasprintf("%s/trajectory", d->conf.state_dir);
	int rc;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		rc = dsec_err_setc(err, DSEC_E_INTERNAL, errno, "cannot make trajectory_dir '%s': %s",
				   dir, strerror(errno));
		free(dir);
		return rc;
	}
	rl = xcalloc(1, sizeof(*rl));
	rl->d = d;
	rl->dir = dir;
	rl->qtail = &rl->queue;
	rl->zc = ZSTD_createCCtx();
	DSEC_ASSERT(rl->zc);
	if ((rc = rlc_journal_open(dir, &rl->journal, err)) < 0) {
		ZSTD_freeCCtx(rl->zc);
		free(dir);
		free(rl);
		return rc;
	}
	if (d->conf.gossip_listen && (rc = dsec_cq_new(&rl->cq, err)) < 0) {
		rlc_journal_close(rl->journal);
		ZSTD_freeCCtx(rl->zc);
		free(dir);
		free(rl);
		return rc;
	}
	rl->tls_ca = d->conf.tls_ca ? xstrdup(d->conf.tls_ca) : NULL;
	rl->tls_cert = d->conf.tls_cert ? xstrdup(d->conf.tls_cert) : NULL;
	if ((rc = dsecd_pool_new(&rl->writer, d->loop, 1)) < 0) {
		rlc_journal_close(rl->journal);
		dsec_cq_free(rl->cq);
		free(rl->tls_ca);
		free(rl->tls_cert);
		ZSTD_freeCCtx(rl->zc);
		free(dir);
		free(rl);
		return dsec_err_setc(err, DSEC_E_INTERNAL, -rc, "cannot start the trajectory "
				     "writer: %s", strerror(-rc));
	}
	ev_prepare_init(&rl->prep, prepare_cb);
	ev_prepare_start(d->loop, &rl->prep);
	/* Old logs go: soon after a start (a node back from a crash), then
	 * every few minutes. */
	double every = d->conf.trajectory_keep > 0 && d->conf.trajectory_keep < 600
		       ? d->conf.trajectory_keep / 4 : 300;
	ev_timer_init(&rl->sweep_timer, rlc_sweep_cb, every < 1 ? 1 : every, every < 1 ? 1 : every);
	if (d->conf.trajectory_keep > 0) {
		ev_timer_start(d->loop, &rl->sweep_timer);
		ev_unref(d->loop);	/* it keeps no loop alive */
	}
	d->rlc = rl;
	dsecd_reply_hook_set(d, hook, rl);
	return 0;
}

void rlc_close(struct dsecd *d)
{
	struct rlc *rl = d->rlc;

	if (!rl)
		return;
	/* A queue left means the loop ended with replies held: write them
	 * (they are acknowledged to nobody now, but they ran). */
	if (rl->queue && !rl->batch)
		prepare_cb(d->loop, &rl->prep, 0);
	if (ev_is_active(&rl->sweep_timer)) {
		ev_ref(d->loop);
		ev_timer_stop(d->loop, &rl->sweep_timer);
	}
	dsecd_pool_free(rl->writer);
	ev_prepare_stop(d->loop, &rl->prep);
	rlc_leases_free(rl);
	rlc_tokens_free(rl);
	for (size_t i = 0; i < rl->npeers; i++) {
		dsec_close(rl->peers[i].c);
		free(rl->peers[i].url);
	}
	dsec_cq_free(rl->cq);
	free(rl->tls_ca);
	free(rl->tls_cert);
	rlc_journal_close(rl->journal);
	ZSTD_freeCCtx(rl->zc);
	dsecd_reply_hook_set(d, NULL, NULL);
	d->rlc = NULL;
	free(rl->dir);
	free(rl);
}
