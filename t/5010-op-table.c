/* 5010-op-table - dsecd's op table and what dsecd_handle does by a row
 * before any handler runs.
 *
 * Links dsecd's own objects (but main.c and server.c: this file is the
 * server, replies land in dsecd_server_reply below).  No backend: every
 * frame here is answered inside dsecd_handle.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "daemon.h"
#include "log.h"
#include "ops.h"
#include "proto.h"

struct dsecd *dsecd_global;		/* main.c's, which is not linked */
static struct dsecd node;		/* the daemon */
static void *last;			/* the last reply */
static size_t last_len;			/* its bytes */
static unsigned nreplies;		/* replies sent */

void dsecd_server_reply(struct dsecd_server *s, struct dsecd_conn *conn, void *data, size_t len)
{
	free(last);
	last = data;
	last_len = len;
	nreplies++;
}

unsigned dsecd_server_inflight(const struct dsecd_server *s)
{
	return 0;
}

/* Hands {v: 1, op, id?} to dsecd; the code of the error it got, or "ok",
 * and its message in msg. */
static const char *ask(const char *op, const char *id, char *msg, size_t msglen)
{
	static char code[64];
	struct dsec_msg m;
	struct dsec_err err;
	struct dsec_pk p;
	const msgpack_object *e, *v;
	unsigned before = nreplies;
	size_t len;
	void *f;
	bool ok = false;

	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, op);
	if (id)
		dsec_pk_kv_str(&p, "id", id);
	dsec_pk_end(&p);
	f = dsec_pk_detach(&p, &len);
	dsecd_handle(&node, NULL, f, len);
	free(f);
	msg[0] = '\0';
	if (nreplies != before + 1)
		return "no reply";
	if (dsec_msg_parse(&m, last, last_len, SIZE_MAX, &err) < 0)
		return "bad reply";
	dsec_get_bool(m.root, "ok", &ok, NULL);
	snprintf(code, sizeof(code), "ok");
	if (!ok) {
		e = dsec_map_get(m.root, "error");
		if ((v = dsec_map_get(e, "code")) && v->type == MSGPACK_OBJECT_STR)
			snprintf(code, sizeof(code), "%.*s", (int)v->via.str.size, v->via.str.ptr);
		if ((v = dsec_map_get(e, "message")) && v->type == MSGPACK_OBJECT_STR)
			snprintf(msg, msglen, "%.*s", (int)v->via.str.size, v->via.str.ptr);
	}
	dsec_msg_free(&m);
	return code;
}

int main(void)
{
	struct dsecd *d = &node;
	const struct dsecd_op *op;
	struct dsec_err err;
	char *argv[] = { "t5010", "--config", "/dev/null", "--node", "t", "--state-dir",
			 "/nonexistent", NULL };
	char msg[512];
	unsigned bad = 0;
	size_t len;
	void *f;

	plan(12);
	ok((op = dsecd_op_find("file_read", 9)) && op == &dsecd_ops[DSEC_OP_FILE_READ],
	   "op table finds file_read");
	ok(!dsecd_op_find("file_rea", 8), "op table refuses a prefix");
	for (int i = 0; i < DSEC_OP__COUNT; i++) {
		op = &dsecd_ops[i];
		if (!op->name || !op->run || !op->summary ||
		    dsecd_op_find(op->name, strlen(op->name)) != op ||
		    ((op->flags & DSECD_OP_NEEDS_RUNNING) && !(op->flags & DSECD_OP_NEEDS_ID)))
			bad++;
	}
	is_int(bad, 0, "every op has a row: a name of its own, a handler, a summary");

	{
		struct dsec_pk p;

		dsec_pk_init(&p);
		dsec_pk_request_begin(&p, "exec_write");
		dsec_pk_kv_str(&p, "id", "t:0000000000000001");
		dsec_pk_end(&p);
		f = dsec_pk_detach(&p, &len);
	}
	op = dsecd_frame_op(f, len);
	ok(op == &dsecd_ops[DSEC_OP_EXEC_WRITE] && (op->flags & DSECD_OP_QUICK) &&
	   (op->flags & DSECD_OP_NEEDS_ID) && op->route == DSECD_ROUTE_OWNER,
	   "a frame's row: exec_write is quick, names a sandbox and goes to its owner");
	free(f);
	ok(dsecd_ops[DSEC_OP_CREATE].route == DSECD_ROUTE_PLACE &&
	   dsecd_ops[DSEC_OP_CALL].route == DSECD_ROUTE_PLACE &&
	   dsecd_ops[DSEC_OP_CHUNK_GET].route == DSECD_ROUTE_LOCAL,
	   "create and call go where placement says, chunk_get stays on the node asked");

	dsec_log_set_level(DSEC_LOG_ERROR);
	if (dsecd_conf_load(&d->conf, 7, argv, &err) != 0)
		DSEC_BUG("config: %s", err.msg);
	d->loop = ev_loop_new(0);
	dsecd_global = d;
	dsecd_sb_table_init(d);
	d->started = ev_now(d->loop);

	is_str(ask("exec", NULL, msg, sizeof(msg)), "bad_request", "exec without id: bad_request");
	is_str(msg, "exec needs field 'id'", "from the row's rule, before the handler");
	is_str(ask("pause", "t:0000000000000001", msg, sizeof(msg)), "not_found",
	       "pause of a sandbox that is not there: not_found");
	is_str(ask("ping", NULL, msg, sizeof(msg)), "ok", "ping: ok");
	d->shutting_down = true;
	is_str(ask("ping", NULL, msg, sizeof(msg)), "ok", "shutting down, ping is still served");
	is_str(ask("list", NULL, msg, sizeof(msg)), "ok", "and list");
	is_str(ask("exec", "t:0000000000000001", msg, sizeof(msg)), "shutting_down",
	       "but not exec");

	free(last);
	dsecd_sb_table_free(d);
	dsecd_conf_free(&d->conf);
	return done_testing();
}
