/* batch.c - several requests in one (op batch).
 *
 * Each request of the batch is a map as any request is (v comes from the
 * batch); it runs as if it had come alone: parsed, checked, routed (to its
 * sandbox's owner when that is another node), served, with its own reply.
 * The batch answers once all have, with their replies in order: one round
 * trip for a GRPO group's creates or an evaluation sweep's commands.
 * all_or_nothing (creates only): when one fails, those made are destroyed
 * and the batch fails with the first failure.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "dsec.h"
#include "log.h"
#include "ops.h"
#include "proto.h"

/* Requests one batch may hold. */
#define BATCH_MAX 1024
/* Requests of one batch running at once: a batch is one request of the
 * server's max_inflight, so this bounds what one client can start with
 * it (the rest start as those end). */
#define BATCH_WINDOW 32

struct batch_sub {
	void *frame;			/* its request, packed (owned) */
	size_t frame_len;		/* its bytes */
	void *reply;			/* its reply once it came (owned), else NULL */
	size_t reply_len;		/* its bytes */
	enum dsec_code code;		/* its code, DSEC_E_OK for ok */
};

struct dsecd_batch {
	size_t n;			/* requests */
	size_t left;			/* not yet answered */
	size_t next;			/* the next to start */
	size_t running;			/* started, not yet answered */
	bool dispatching;		/* pump() is starting some */
	bool all_or_nothing;		/* creates: all made, or none */
	struct batch_sub *sub;		/* n of them */
};

void req_batch_free(struct dsecd_req *r)
{
	struct dsecd_batch *b = r->batch;

	if (!b)
		return;
	for (size_t i = 0; i < b->n; i++) {
		free(b->sub[i].frame);
		free(b->sub[i].reply);
	}
	free(b->sub);
	free(b);
}

/* The id in a create's reply, or NULL (caller frees). */
static char *created_id(const struct batch_sub *s)
{
	struct dsec_msg m;
	const msgpack_object *res;
	char *id = NULL;

	if (dsec_msg_parse(&m, s->reply, s->reply_len, s->reply_len + 1, NULL) < 0)
		return NULL;
	if ((res = dsec_map_get(m.root, "result")) && res->type == MSGPACK_OBJECT_MAP)
		dsec_get_str(res, "id", &id, NULL);
	dsec_msg_free(&m);
	return id;
}

/* Why one request of the batch failed, from its reply. */
static void sub_error(const struct batch_sub *s, struct dsec_err *err)
{
	struct dsec_msg m;
	const msgpack_object *e;
	_cleanup_free_ char *msg = NULL;

	dsec_err_setc(err, s->code, EIO, "failed");
	if (dsec_msg_parse(&m, s->reply, s->reply_len, s->reply_len + 1, NULL) < 0)
		return;
	if ((e = dsec_map_get(m.root, "error")) && dsec_get_str(e, "message", &msg, NULL) == 0)
		dsec_err_setc(err, s->code, EIO, "%s", msg);
	dsec_msg_free(&m);
}

static void pump(struct dsecd_req *r);

static void finish(struct dsecd_req *r)
{
	struct dsecd_batch *b = r->batch;
	struct dsec_pk p;

	if (b->all_or_nothing) {
		size_t failed = b->n, made = 0;
		for (size_t i = 0; i < b->n; i++)
			if (b->sub[i].code != DSEC_E_OK && failed == b->n)
				failed = i;
		if (failed < b->n) {
			struct dsec_err why, err;
			for (size_t i = 0; i < b->n; i++) {
				if (b->sub[i].code != DSEC_E_OK)
					continue;
				_cleanup_free_ char *id = created_id(&b->sub[i]);
				struct dsecd_sb *sb = id ? dsecd_sb_lookup(r->d, id) : NULL;
				if (sb && (sb->state == SB_READY || sb->state == SB_FAILED)) {
					dsecd_sb_destroy(r->d, sb, "another create of its batch failed",
							 NULL);
					made++;
				}
			}
			sub_error(&b->sub[failed], &why);
			dsec_err_setc(&err, why.code, EIO, "create %zu of the batch's %zu failed, so "
				      "the %zu made were destroyed: %s", failed + 1, b->n, made, why.msg);
			return reply_err(r, &err);
		}
	}
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	dsec_pk_str(&p, "replies");
	dsec_pk_array_begin(&p);
	for (size_t i = 0; i < b->n; i++)
		dsec_pk_raw(&p, b->sub[i].reply, b->sub[i].reply_len);
	dsec_pk_end(&p);
	dsec_pk_end(&p);
	req_complete(r, &p);
}

/* Starts requests while fewer than BATCH_WINDOW run; some answer at once
 * (a bad one, a quick op), which only counts them: the loop here starts
 * the next, and the batch answers after it, so nothing recurses. */
static void pump(struct dsecd_req *r)
{
	struct dsecd_batch *b = r->batch;

	b->dispatching = true;
	while (b->next < b->n && b->running < BATCH_WINDOW) {
		size_t i = b->next++;
		b->running++;
		dsecd_handle_frame(r->d, NULL, r, i, b->sub[i].frame, b->sub[i].frame_len);
	}
	b->dispatching = false;
	if (b->left == 0)
		finish(r);
}

void dsecd_batch_done(struct dsecd_req *r, size_t index, void *reply, size_t len,
		      enum dsec_code code)
{
	struct dsecd_batch *b = r->batch;

	DSEC_ASSERT(index < b->n && !b->sub[index].reply && b->left > 0);
	b->sub[index].reply = reply;
	b->sub[index].reply_len = len;
	b->sub[index].code = code;
	b->running--;
	b->left--;
	if (b->dispatching)
		return;	/* answered at once: pump() goes on */
	if (b->left == 0)
		finish(r);
	else
		pump(r);
}

/* The request map e of the batch as a frame of its own: v, then e's
 * entries (a v of its own is the batch's). */
static void *sub_frame(const msgpack_object *e, size_t *len)
{
	struct dsec_pk p;

	dsec_pk_init(&p);
	dsec_pk_map_begin(&p);
	dsec_pk_kv_u64(&p, "v", DSEC_PROTO_VERSION);
	for (uint32_t i = 0; i < e->via.map.size; i++) {
		const msgpack_object *k = &e->via.map.ptr[i].key;
		if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == 1 && k->via.str.ptr[0] == 'v')
			continue;
		dsec_pk_object(&p, k);
		dsec_pk_object(&p, &e->via.map.ptr[i].val);
	}
	dsec_pk_end(&p);
	return dsec_pk_detach(&p, len);
}

void op_batch(struct dsecd_req *r)
{
	const msgpack_object *reqs = dsec_map_get(r->msg.root, "requests");
	struct dsec_err err;
	struct dsecd_batch *b;
	bool aon = false;

	dsec_err_clear(&err);
	if (!reqs || reqs->type != MSGPACK_OBJECT_ARRAY) {
		dsec_err_setc(&err, DSEC_E_BAD_REQUEST, EINVAL, "batch needs field 'requests', an "
			      "array of request maps");
		return reply_err(r, &err);
	}
	if (reqs->via.array.size < 1 || reqs->via.array.size > BATCH_MAX) {
		dsec_err_setc(&err, DSEC_E_INVALID, EINVAL, "a batch holds 1 to %d requests, not %u",
			      BATCH_MAX, reqs->via.array.size);
		return reply_err(r, &err);
	}
	if (dsec_get_bool_opt(r->msg.root, "all_or_nothing", &aon, &err) < 0)
		return reply_err(r, &err);
	for (uint32_t i = 0; i < reqs->via.array.size; i++) {
		const msgpack_object *e = &reqs->via.array.ptr[i], *op;
		if (e->type != MSGPACK_OBJECT_MAP) {
			dsec_err_setc(&err, DSEC_E_BAD_REQUEST, EINVAL, "request %u of the batch is "
				      "not a map", i + 1);
			return reply_err(r, &err);
		}
		op = dsec_map_get(e, "op");
		if (aon && (!op || op->type != MSGPACK_OBJECT_STR || op->via.str.size != 6 ||
			    memcmp(op->via.str.ptr, "create", 6))) {
			dsec_err_setc(&err, DSEC_E_INVALID, EINVAL, "all_or_nothing takes creates "
				      "only; request %u is not one", i + 1);
			return reply_err(r, &err);
		}
	}
	b = r->batch = xcalloc(1, sizeof(*b));
	b->n = b->left = reqs->via.array.size;
	b->all_or_nothing = aon;
	b->sub = xcalloc(b->n, sizeof(*b->sub));
	for (size_t i = 0; i < b->n; i++)
		b->sub[i].frame = sub_frame(&reqs->via.array.ptr[i], &b->sub[i].frame_len);
	pump(r);
}
