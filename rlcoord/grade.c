/* grade.c - grading in a sandbox the agent never touched: its diff, then trusted layers on top.
 *
 * A create may name grade_layers: images (the tests, the grader, the
 * answers, trusted tools) that never reach the agent's sandbox.  `grade`
 * runs a grader command in a sandbox of its own made of: the agent's
 * sandbox as it is now (a snapshot: its image plus one layer of what the
 * agent changed), then the grade layers stacked over it, the last on top,
 * no network.  What the agent changed cannot hijack the grader: a file of
 * a grade layer hides the agent's at the same path (a replaced /bin/sh, a
 * planted sitecustomize.py, an edited test), and nothing the agent left
 * running is in the grading sandbox.  The chain is the daemon's own
 * requests (dsecd_request): snapshot, create, exec, destroy; then the
 * snapshot's tag is removed (fs3 gc takes its data).  The reply is the
 * grader's exec result plus "grader": {image, sandbox, layers}.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "dsec.h"
#include "fs3.h"
#include "log.h"
#include "ops.h"
#include "proto.h"
#include "rlc.h"
#include "rlc-int.h"

struct grade {
	struct dsecd_req *r;		/* the grade request, answered at the end */
	struct dsecd *d;
	char *tag;			/* the snapshot's */
	char *image;			/* its digest */
	char *gid;			/* the grading sandbox */
	void *result;			/* the grader's exec reply, or NULL */
	size_t result_len;
	void *marks;			/* the agent's misbehaviour map (packed), or NULL */
	size_t marks_len;
	char **after;			/* the hashes of its watch files now */
	size_t nafter;
	struct dsec_err err;		/* the first failure */
	bool failed;
};

static void grade_free(struct grade *g)
{
	free(g->tag);
	free(g->image);
	free(g->gid);
	free(g->result);
	free(g->marks);
	rlc_watch_free(g->after, g->nafter);
	free(g);
}

void rlc_reply_error(const void *reply, size_t len, const char *what, struct dsec_err *err)
{
	struct dsec_msg m = { 0 };
	const msgpack_object *e, *c, *msg;

	dsec_err_setc(err, DSEC_E_INTERNAL, EIO, "%s: no reply", what);
	if (reply && dsec_msg_parse_n(&m, reply, len, SIZE_MAX, SIZE_MAX, NULL) == 0 &&
	    (e = dsec_map_get(m.root, "error")) && e->type == MSGPACK_OBJECT_MAP &&
	    (c = dsec_map_get(e, "code")) && c->type == MSGPACK_OBJECT_STR &&
	    (msg = dsec_map_get(e, "message")) && msg->type == MSGPACK_OBJECT_STR)
		dsec_err_setc(err, dsec_code_from_name(c->via.str.ptr, c->via.str.size), EIO,
			      "%s: %.*s", what, (int)msg->via.str.size, msg->via.str.ptr);
	dsec_msg_free(&m);
}

const msgpack_object *rlc_reply_result(struct dsec_msg *m, const void *reply, size_t len)
{
	const msgpack_object *ok, *res;

	if (!reply || dsec_msg_parse_n(m, reply, len, SIZE_MAX, SIZE_MAX, NULL) < 0)
		return NULL;
	ok = dsec_map_get(m->root, "ok");
	res = dsec_map_get(m->root, "result");
	return ok && ok->type == MSGPACK_OBJECT_BOOLEAN && ok->via.boolean && res &&
	       res->type == MSGPACK_OBJECT_MAP ? res : NULL;
}

void rlc_send(struct dsecd *d, struct dsec_pk *p, dsecd_reply_fn fn, void *arg, bool unlogged)
{
	size_t len;
	void *frame = dsec_pk_detach(p, &len);

	if (unlogged)
		dsecd_request_unlogged(d, frame, len, fn, arg);
	else
		dsecd_request(d, frame, len, fn, arg);
}

static void untag_work(void *arg)
{
	struct grade *g = arg;
	struct dsec_err err;

	dsec_err_clear(&err);
	if (g->d->images && fs3_untag(g->d->images, g->tag, &err) < 0)
		log_warn("grade: cannot remove the tag %s of its snapshot: %s", g->tag, err.msg);
}

/* The end: the grade's reply, then the snapshot's tag goes. */
static void finish(void *arg)
{
	struct grade *g = arg;
	struct dsecd_req *r = g->r;
	struct dsec_msg m = { 0 };
	const msgpack_object *res;
	struct dsec_pk p;

	r->d->ops_inflight--;
	if (g->failed) {
		reply_err(r, &g->err);
	} else if (!(res = rlc_reply_result(&m, g->result, g->result_len))) {
		rlc_reply_error(g->result, g->result_len, "the grader's command", &g->err);
		reply_err(r, &g->err);
	} else {
		dsec_pk_init(&p);
		dsec_pk_reply_begin(&p);
		for (uint32_t i = 0; i < res->via.map.size; i++) {
			dsec_pk_object(&p, &res->via.map.ptr[i].key);
			dsec_pk_object(&p, &res->via.map.ptr[i].val);
		}
		dsec_pk_str(&p, "grader");
		dsec_pk_map_begin(&p);
		dsec_pk_kv_str(&p, "image", g->image);
		dsec_pk_kv_str(&p, "sandbox", g->gid);
		dsec_pk_kv_strv(&p, "layers", (const char *const *)r->sb->grade_layers);
		dsec_pk_end(&p);
		if (g->marks) {
			dsec_pk_str(&p, "misbehaviour");
			dsec_pk_raw(&p, g->marks, g->marks_len);
		} else {
			dsecd_sb_pack_marks(r->sb, &p, NULL);
		}
		if (r->sb->watch && g->after)
			rlc_pack_watched(r->sb, g->after, &p);
		dsec_pk_end(&p);
		req_complete(r, &p);
	}
	dsec_msg_free(&m);
	grade_free(g);
}

static void end_chain(struct grade *g)
{
	/* The tag goes on the pool (fs3 writes the store); then the reply. */
	if (g->tag && g->image) {
		if (dsecd_pool_submit(g->d->pool, untag_work, finish, g) == 0)
			return;
	}
	finish(g);
}

static void destroyed(void *arg, const void *reply, size_t len, enum dsec_code code)
{
	struct grade *g = arg;

	if (code != DSEC_E_OK)
		log_warn("grade: cannot destroy the grading sandbox %s", g->gid);
	end_chain(g);
}

static void graded(void *arg, const void *reply, size_t len, enum dsec_code code)
{
	struct grade *g = arg;
	struct dsec_pk p;

	g->result = xmalloc(len ? len : 1);
	memcpy(g->result, reply, len);
	g->result_len = len;
	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "destroy");
	dsec_pk_kv_str(&p, "id", g->gid);
	dsec_pk_end(&p);
	rlc_send(g->d, &p, destroyed, g, false);
}

static void created(void *arg, const void *reply, size_t len, enum dsec_code code)
{
	struct grade *g = arg;
	const msgpack_object *root = g->r->msg.root, *res;
	static const char *const keys[] = { "argv", "code", "stdin", "env", "cwd", "timeout",
					    "output_cap" };
	struct dsec_msg m = { 0 };
	struct dsec_pk p;

	if (!(res = rlc_reply_result(&m, reply, len)) || dsec_get_str(res, "id", &g->gid, NULL) < 0) {
		rlc_reply_error(reply, len, "cannot make the grading sandbox", &g->err);
		g->failed = true;
		dsec_msg_free(&m);
		return end_chain(g);
	}
	dsec_msg_free(&m);
	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "exec");
	dsec_pk_kv_str(&p, "id", g->gid);
	for (size_t i = 0; i < DSEC_ARRAY_LEN(keys); i++) {
		const msgpack_object *v = dsec_map_get(root, keys[i]);
		if (v) {
			dsec_pk_str(&p, keys[i]);
			dsec_pk_object(&p, v);
		}
	}
	dsec_pk_end(&p);
	rlc_send(g->d, &p, graded, g, false);
}

static void snapped(void *arg, const void *reply, size_t len, enum dsec_code code)
{
	struct grade *g = arg;
	struct dsecd_sb *sb = g->r->sb;
	struct dsec_msg m = { 0 };
	const msgpack_object *res;
	struct dsec_pk p;

	if (!(res = rlc_reply_result(&m, reply, len)) || dsec_get_str(res, "image", &g->image, NULL) < 0) {
		rlc_reply_error(reply, len, "cannot snapshot the sandbox to grade it", &g->err);
		g->failed = true;
		dsec_msg_free(&m);
		free(g->tag);
		g->tag = NULL;	/* nothing to remove */
		return end_chain(g);
	}
	dsec_msg_free(&m);
	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "create");
	dsec_pk_kv_str(&p, "backend", sb->be->name);
	dsec_pk_kv_str(&p, "image", g->image);
	dsec_pk_kv_strv(&p, "layers", (const char *const *)sb->grade_layers);
	dsec_pk_kv_str(&p, "network", "none");
	dsec_pk_str(&p, "labels");
	dsec_pk_map_begin(&p);
	dsec_pk_kv_str(&p, "dsec.grade_of", sb->id);
	dsec_pk_end(&p);
	dsec_pk_end(&p);
	rlc_send(g->d, &p, created, g, false);
}

static void snapshot(struct grade *g)
{
	struct dsec_pk p;

	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "snapshot");
	dsec_pk_kv_str(&p, "id", g->r->sb->id);
	dsec_pk_kv_str(&p, "tag", g->tag);
	dsec_pk_end(&p);
	rlc_send(g->d, &p, snapped, g, false);
}

static void hashed(void *arg, char **hashes, size_t n)
{
	struct grade *g = arg;

	g->after = hashes;
	g->nafter = n;
	snapshot(g);
}

/* The agent's misbehaviour counters as they are before grading (usage's,
 * with the backend's egress_denied; a backend that measures nothing leaves
 * the daemon's own counts to the reply), the hashes of its watch files;
 * then its snapshot. */
static void measured(void *arg, const void *reply, size_t len, enum dsec_code code)
{
	struct grade *g = arg;
	struct dsec_msg m = { 0 };
	const msgpack_object *res, *mk;
	struct dsec_pk p;

	if ((res = rlc_reply_result(&m, reply, len)) && (mk = dsec_map_get(res, "misbehaviour")) &&
	    mk->type == MSGPACK_OBJECT_MAP) {
		dsec_pk_init(&p);
		dsec_pk_object(&p, mk);
		g->marks = dsec_pk_detach(&p, &g->marks_len);
	}
	dsec_msg_free(&m);
	if (g->r->sb->watch)
		return rlc_watch_hash(g->d, g->r->sb, hashed, g);
	snapshot(g);
}

void op_grade(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	struct dsecd_sb *sb = r->sb;
	struct dsec_err err;
	struct dsec_pk p;

	dsec_err_clear(&err);
	if (!sb->grade_layers) {
		dsec_err_setc(&err, DSEC_E_INVALID, EINVAL, "sandbox '%s' has no grade_layers: "
			      "name them in its create", sb->id);
		return reply_err(r, &err);
	}
	if (!dsec_has(r->msg.root, "argv") && !dsec_has(r->msg.root, "code")) {
		dsec_err_setc(&err, DSEC_E_BAD_REQUEST, EINVAL, "grade needs 'argv' or 'code': the "
			      "grader's command");
		return reply_err(r, &err);
	}
	struct grade *g = xcalloc(1, sizeof(*g));
	g->r = r;
	g->d = d;
	g->tag = xasprintf("dsec-grade/%s:%016" PRIx64, d->conf.node, d->next_serial++);
	d->ops_inflight++;	/* until finish: the chain holds r */
	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "usage");
	dsec_pk_kv_str(&p, "id", sb->id);
	dsec_pk_end(&p);
	rlc_send(g->d, &p, measured, g, false);
}
