/* ops.c - requests: parsing, the op table, routing, dispatch, replies.
 *
 * A request is parsed strictly, checked for version and op, routed by its
 * op's row (route(): where the cluster's forwarding plugs in), checked
 * against the row's rules (a sandbox named, running, the node not shutting
 * down), then handed to its handler.  Handlers start backend work and
 * return; the backend's done callback packs the reply.  Every request ends
 * in exactly one reply, ok or error, through req_complete() (reply_err()
 * packs an error and calls it), which runs the reply hook and frees it.
 * The handlers are in the ops-*.c files, one per family of ops, and
 * stream.c.
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
#include "ops.h"
#include "proto.h"
#include "rlc.h"
#include "rlc-int.h"

static void req_free(struct dsecd_req *r)
{
	rlc_req_free(r);
	dsec_strv_free(r->grade_layers);
	dsec_strv_free(r->watch);
	/* The op's own first: it may still look at its sandbox. */
	if (dsecd_ops[r->op].free)
		dsecd_ops[r->op].free(r);
	if (r->sb)
		dsecd_sb_unref(r->d, r->sb);
	free(r->placing);
	dsec_msg_free(&r->msg);
	free(r->own_frame);
	free(r);
}

void dsecd_reply_hook_set(struct dsecd *d, dsecd_reply_hook_fn fn, void *arg)
{
	d->reply_hook = fn;
	d->reply_hook_arg = arg;
}

/* Why one exit for every reply: whatever must happen before a client
 * learns the outcome (the trajectory log's durable entry; later, the
 * reply of a forwarded request) happens in one place, for every op and
 * every error.  Without a hook this costs one test. */
void req_complete(struct dsecd_req *r, struct dsec_pk *p)
{
	size_t len;
	void *reply;

	DSEC_ASSERT(!r->reply);
	reply = dsec_pk_detach(p, &len);
	req_complete_frame(r, reply, len);
}

void req_complete_frame(struct dsecd_req *r, void *reply, size_t len)
{
	struct dsecd *d = r->d;

	DSEC_ASSERT(!r->reply);
	r->reply = reply;
	r->reply_len = len;
	if (d->reply_hook && d->reply_hook(d->reply_hook_arg, r)) {
		d->replies_held++;
		r->held = true;
		return;
	}
	dsecd_req_release(r);
}

void dsecd_req_release(struct dsecd_req *r)
{
	if (r->held) {
		r->held = false;
		r->d->replies_held--;
	}
	double secs = (double)(dsec_now_ns() - r->t0) / 1e9;
	log_debug("op %s done in %.3f ms", dsecd_ops[r->op].name, secs * 1e3);
	if (!r->fwd && r->d->op_stats)	/* a forwarded one is counted where it ran */
		dsecd_metrics_request(r->d, r->op, r->reply_code, secs);
	/* The first command of a sandbox this node created: create -> first exec. */
	if (r->sb && r->sb->create_t0 && !r->fwd && r->reply_code == DSEC_E_OK &&
	    (r->op == DSEC_OP_EXEC || r->op == DSEC_OP_SESSION_EXEC ||
	     r->op == DSEC_OP_EXEC_START)) {
		dsecd_hist_observe(&r->sb->be->phase[DSECD_PHASE_FIRST_EXEC],
				   (double)(dsec_now_ns() - r->sb->create_t0) / 1e9);
		r->sb->create_t0 = 0;
	}
	if (r->on_reply) {
		/* The daemon's own request (dsecd_request): its reply goes to
		 * the function that made it. */
		r->on_reply(r->on_reply_arg, r->reply, r->reply_len, r->reply_code);
		free(r->reply);
		r->reply = NULL;
		req_free(r);
		return;
	}
	if (r->parent) {
		/* One of a batch: its reply goes into the batch's, which may
		 * answer and be freed then; this one is gone first. */
		struct dsecd_req *batch = r->parent;
		size_t index = r->index;
		void *reply = r->reply;
		size_t len = r->reply_len;
		enum dsec_code code = r->reply_code;
		r->reply = NULL;
		req_free(r);
		dsecd_batch_done(batch, index, reply, len, code);
		return;
	}
	dsecd_server_reply(r->d->server, r->conn, r->reply, r->reply_len);
	r->reply = NULL;
	req_free(r);
}

void dsecd_req_release_frame(struct dsecd_req *r, void *reply, size_t len)
{
	DSEC_ASSERT(!r->reply);
	r->reply = reply;
	r->reply_len = len;
	dsecd_req_release(r);
}

const char *dsecd_req_op(const struct dsecd_req *r)
{
	return dsecd_ops[r->op].name;
}

struct dsecd_sb *dsecd_req_sandbox(const struct dsecd_req *r)
{
	return r->sb;
}

const void *dsecd_req_reply(const struct dsecd_req *r, size_t *len)
{
	*len = r->reply_len;
	return r->reply;
}

void reply_err(struct dsecd_req *r, const struct dsec_err *err)
{
	struct dsec_err lost;
	struct dsec_pk p;

	/* Whatever failed on a sandbox that is lost failed because it is. */
	if (r->sb && r->sb->state == SB_FAILED && err->code != DSEC_E_SANDBOX_LOST) {
		dsecd_sb_lost_err(r->sb, &lost);
		err = &lost;
	}
	r->reply_code = err->code ? err->code : DSEC_E_INTERNAL;
	dsec_pk_init(&p);
	dsec_pk_reply_err(&p, err);
	req_complete(r, &p);
}

void reply_empty(struct dsecd_req *r)
{
	struct dsec_pk p;

	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	dsec_pk_end(&p);
	req_complete(r, &p);
}

/* A command's result from a sandbox lost meanwhile is not the command's:
 * true when r got sandbox_lost instead. */
bool reply_if_lost(struct dsecd_req *r)
{
	struct dsec_err err;

	if (!r->sb || r->sb->state != SB_FAILED)
		return false;
	dsecd_sb_lost_err(r->sb, &err);
	reply_err(r, &err);
	return true;
}

/* Finds the sandbox named by 'id', ready for work; takes a ref on it. */
int get_sandbox(struct dsecd_req *r, struct dsec_err *err)
{
	_cleanup_free_ char *id = NULL;
	int rc = dsec_get_str(r->msg.root, "id", &id, err);
	struct dsecd_sb *sb;

	if (rc == -ENOENT)
		return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EINVAL, "%s needs field 'id'",
				     dsecd_ops[r->op].name);
	if (rc < 0)
		return rc;
	if (!(sb = dsecd_sb_find(r->d, id, err)))
		return -ENOENT;
	if (sb->state == SB_FAILED && !(dsecd_ops[r->op].flags & DSECD_OP_LOST_OK))
		return dsecd_sb_lost_err(sb, err);
	if (sb->state != SB_READY && sb->state != SB_FAILED)
		return dsec_err_setc(err, DSEC_E_INVALID, EBUSY, "sandbox '%s' is still being created",
				     id);
	dsecd_sb_ref(sb);
	r->sb = sb;
	dsecd_sb_touch(r->d, sb);
	return 0;
}

int unsupported(struct dsecd_req *r, struct dsec_err *err)
{
	return dsec_err_setc(err, DSEC_E_UNSUPPORTED, ENOTSUP, "backend '%s' cannot %s",
			     r->sb->be->name, dsecd_ops[r->op].summary);
}

#define LOCAL DSECD_ROUTE_LOCAL
#define OWNER DSECD_ROUTE_OWNER
#define PLACE DSECD_ROUTE_PLACE
#define QUICK DSECD_OP_QUICK
#define ID DSECD_OP_NEEDS_ID
#define RUNNING DSECD_OP_NEEDS_RUNNING
#define SHUTDOWN_OK DSECD_OP_SHUTDOWN_OK
#define LOST_OK DSECD_OP_LOST_OK
#define LOGGED DSECD_OP_LOGGED

/* The op table: one row per op, the columns in struct dsecd_op (ops.h).
 * Adding an op is adding a row here and writing its handler. */
const struct dsecd_op dsecd_ops[DSEC_OP__COUNT] = {
	[DSEC_OP_PING] = { .name = "ping", .run = op_ping,
			   .route = LOCAL, .flags = QUICK | SHUTDOWN_OK,
			   .summary = "check the daemon answers" },
	[DSEC_OP_INFO] = { .name = "info", .run = op_info,
			   .route = OWNER, .flags = QUICK | SHUTDOWN_OK,
			   .summary = "node or sandbox information" },
	[DSEC_OP_LIST] = { .name = "list", .run = op_list,
			   .route = LOCAL, .flags = QUICK | SHUTDOWN_OK,
			   .summary = "list sandboxes" },
	[DSEC_OP_CREATE] = { .name = "create", .run = op_create,
			     .free = req_run_free, .route = PLACE, .flags = LOGGED,
			     .summary = "create a sandbox" },
	[DSEC_OP_EXEC] = { .name = "exec", .run = op_exec,
			   .free = req_run_free, .route = OWNER, .flags = ID | RUNNING | LOGGED,
			   .summary = "run a command in a sandbox" },
	[DSEC_OP_CALL] = { .name = "call", .run = op_call,
			   .free = req_run_free, .route = PLACE, .flags = 0,
			   .summary = "run a command in a fresh one-shot sandbox" },
	[DSEC_OP_FILE_READ] = { .name = "file_read", .run = op_file,
				.free = req_file_free, .route = OWNER, .flags = ID | RUNNING | LOGGED,
				.summary = "read a file in a sandbox" },
	[DSEC_OP_FILE_WRITE] = { .name = "file_write", .run = op_file,
				 .free = req_file_free, .route = OWNER, .flags = ID | RUNNING | LOGGED,
				 .summary = "write a file in a sandbox" },
	[DSEC_OP_DESTROY] = { .name = "destroy", .run = op_destroy,
			      .route = OWNER, .flags = ID | LOST_OK,
			      .summary = "destroy a sandbox" },
	[DSEC_OP_SET_TTL] = { .name = "set_ttl", .run = op_set_ttl,
			      .route = OWNER, .flags = ID | QUICK,
			      .summary = "give a live sandbox more time: its TTL from now, its idle TTL" },
	[DSEC_OP_NET_ALLOW] = { .name = "net_allow", .run = op_net_allow,
				.free = req_run_free, .route = OWNER, .flags = ID | LOGGED,
				.summary = "change what a sandbox's network may reach" },
	[DSEC_OP_PAUSE] = { .name = "pause", .run = op_switch,
			    .route = OWNER, .flags = ID | LOGGED,
			    .summary = "pause a sandbox" },
	[DSEC_OP_RESUME] = { .name = "resume", .run = op_switch,
			     .route = OWNER, .flags = ID | LOGGED,
			     .summary = "resume a paused sandbox" },
	[DSEC_OP_FILE_STAT] = { .name = "file_stat", .run = op_fs,
				.free = req_file_free, .route = OWNER, .flags = ID | RUNNING | LOGGED,
				.summary = "describe a file in a sandbox" },
	[DSEC_OP_FILE_LIST] = { .name = "file_list", .run = op_fs,
				.free = req_file_free, .route = OWNER, .flags = ID | RUNNING | LOGGED,
				.summary = "list a directory in a sandbox" },
	[DSEC_OP_FILE_MKDIR] = { .name = "file_mkdir", .run = op_fs,
				 .free = req_file_free, .route = OWNER, .flags = ID | RUNNING | LOGGED,
				 .summary = "make a directory in a sandbox" },
	[DSEC_OP_FILE_REMOVE] = { .name = "file_remove", .run = op_fs,
				  .free = req_file_free, .route = OWNER, .flags = ID | RUNNING | LOGGED,
				  .summary = "remove a file in a sandbox" },
	[DSEC_OP_FILE_UPLOAD] = { .name = "file_upload", .run = op_fs,
				  .free = req_file_free, .route = OWNER, .flags = ID | RUNNING | LOGGED,
				  .summary = "unpack a tar archive in a sandbox" },
	[DSEC_OP_FILE_DOWNLOAD] = { .name = "file_download", .run = op_fs,
				    .free = req_file_free, .route = OWNER, .flags = ID | RUNNING | LOGGED,
				    .summary = "pack a tree of a sandbox as a tar archive" },
	[DSEC_OP_SESSION_OPEN] = { .name = "session_open", .run = op_session_open,
				   .free = req_session_free, .route = OWNER, .flags = ID | RUNNING | LOGGED,
				   .summary = "open a persistent shell session in a sandbox" },
	[DSEC_OP_SESSION_EXEC] = { .name = "session_exec", .run = op_session_exec,
				   .free = req_session_free, .route = OWNER, .flags = ID | RUNNING | LOGGED,
				   .summary = "run a command in a shell session" },
	[DSEC_OP_SESSION_CLOSE] = { .name = "session_close", .run = op_session_close,
				    .free = req_session_free, .route = OWNER, .flags = ID | RUNNING | LOGGED,
				    .summary = "close a shell session" },
	[DSEC_OP_SNAPSHOT] = { .name = "snapshot", .run = op_snapshot,
			       .free = req_snap_free, .route = OWNER, .flags = ID | LOGGED,
			       .summary = "save a sandbox's files as a new image" },
	[DSEC_OP_CHUNK_GET] = { .name = "chunk_get", .run = op_chunk_get,
				.free = req_chunk_free, .route = LOCAL, .flags = 0,
				.summary = "an fs3 object this node holds verified (node to node)" },
	[DSEC_OP_EXEC_START] = { .name = "exec_start", .run = op_exec_start,
				 .free = req_run_free, .route = OWNER, .flags = ID | RUNNING | LOGGED,
				 .summary = "start a command whose output is read as it comes" },
	[DSEC_OP_EXEC_READ] = { .name = "exec_read", .run = op_exec_read,
				.route = OWNER, .flags = ID,
				.summary = "read a started command's output and status" },
	[DSEC_OP_EXEC_WRITE] = { .name = "exec_write", .run = op_exec_write,
				 .route = OWNER, .flags = ID | QUICK | LOGGED,
				 .summary = "write to a started command's stdin" },
	[DSEC_OP_EXEC_SIGNAL] = { .name = "exec_signal", .run = op_exec_ctl,
				  .route = OWNER, .flags = ID | QUICK | LOGGED,
				  .summary = "send a signal to a started command" },
	[DSEC_OP_EXEC_RESIZE] = { .name = "exec_resize", .run = op_exec_ctl,
				  .route = OWNER, .flags = ID | QUICK | LOGGED,
				  .summary = "resize a started command's terminal" },
	[DSEC_OP_USAGE] = { .name = "usage", .run = op_usage,
			    .route = OWNER, .flags = ID | LOGGED,
			    .summary = "what a sandbox uses now: CPU, memory, tasks, disk" },
	[DSEC_OP_DRAIN] = { .name = "drain", .run = op_drain,
			    .route = LOCAL, .flags = QUICK,
			    .summary = "stop or start taking new sandboxes on the node" },
	[DSEC_OP_LEAVE] = { .name = "leave", .run = op_leave,
			    .route = LOCAL, .flags = QUICK,
			    .summary = "drain the node and leave the cluster's gossip" },
	[DSEC_OP_BATCH] = { .name = "batch", .run = op_batch, .free = req_batch_free,
			    .route = LOCAL, .flags = 0,
			    .summary = "run several requests in one: each routed as it says" },
	[DSEC_OP_TRAJECTORY] = { .name = "trajectory", .run = op_trajectory,
				 .route = OWNER, .flags = 0,
				 .summary = "read a sandbox's trajectory log, page by page" },
	[DSEC_OP_TLOG_APPEND] = { .name = "tlog_append", .run = op_tlog_append,
				  .route = LOCAL, .flags = 0,
				  .summary = "keep copies of another node's trajectory entries (node to node)" },
	[DSEC_OP_GRADE] = { .name = "grade", .run = op_grade,
			    .route = OWNER, .flags = ID | LOGGED,
			    .summary = "run a grader over a sandbox's changes and its grade layers" },
	[DSEC_OP_RESET] = { .name = "reset", .run = op_reset,
			    .route = OWNER, .flags = ID | LOGGED,
			    .summary = "make a sandbox again from its create or a checkpoint image" },
	[DSEC_OP_FORK] = { .name = "fork", .run = op_fork,
			   .route = OWNER, .flags = ID | LOGGED,
			   .summary = "make N sandboxes of a sandbox as it is now" },
	[DSEC_OP_WATCHED] = { .name = "watched", .run = op_watched,
			      .route = OWNER, .flags = ID | LOGGED,
			      .summary = "hashes of a create's watch files, then and now" },
	[DSEC_OP_RECOVER] = { .name = "recover", .run = op_recover,
			      .route = LOCAL, .flags = 0,
			      .summary = "make a dead node's sandbox again from this node's copy of its log" },
	[DSEC_OP_TOKEN_FIND] = { .name = "token_find", .run = op_token_find,
				 .route = LOCAL, .flags = QUICK,
				 .summary = "whether a node knows a client token (node to node)" },
	[DSEC_OP_LEASE_OPEN] = { .name = "lease_open", .run = op_lease_open,
				 .route = LOCAL, .flags = QUICK,
				 .summary = "open a trainer's lease" },
	[DSEC_OP_LEASE_RENEW] = { .name = "lease_renew", .run = op_lease,
				  .route = OWNER, .flags = QUICK | SHUTDOWN_OK,
				  .summary = "renew a lease (the trainer is alive)" },
	[DSEC_OP_LEASE_INFO] = { .name = "lease_info", .run = op_lease,
				 .route = OWNER, .flags = QUICK | SHUTDOWN_OK,
				 .summary = "a lease's state and sandboxes" },
	[DSEC_OP_LEASE_PAUSE] = { .name = "lease_pause", .run = op_lease,
				  .route = OWNER, .flags = 0,
				  .summary = "pause every sandbox of a lease" },
	[DSEC_OP_LEASE_RESUME] = { .name = "lease_resume", .run = op_lease,
				   .route = OWNER, .flags = 0,
				   .summary = "resume every sandbox of a lease" },
	[DSEC_OP_LEASE_CLOSE] = { .name = "lease_close", .run = op_lease,
				  .route = OWNER, .flags = 0,
				  .summary = "close a lease, destroying its sandboxes" },
};

#undef LOCAL
#undef OWNER
#undef PLACE
#undef QUICK
#undef ID
#undef RUNNING
#undef SHUTDOWN_OK
#undef LOST_OK
#undef LOGGED

const struct dsecd_op *dsecd_op_find(const char *name, size_t len)
{
	for (size_t i = 0; i < DSEC_OP__COUNT; i++)
		if (strlen(dsecd_ops[i].name) == len && !memcmp(dsecd_ops[i].name, name, len))
			return &dsecd_ops[i];
	return NULL;
}

const struct dsecd_op *dsecd_frame_op(const void *frame, size_t len)
{
	const char *name;
	size_t nlen;

	return dsec_frame_op(frame, len, &name, &nlen) ? dsecd_op_find(name, nlen) : NULL;
}

/* The rules of r's row that hold for every op, then its handler: the
 * sandbox it names found and held, and running. */
static void run(struct dsecd_req *r)
{
	const struct dsecd_op *op = &dsecd_ops[r->op];
	struct dsec_err err;

	if (op->flags & DSECD_OP_NEEDS_ID) {
		dsec_err_clear(&err);
		if (get_sandbox(r, &err) < 0)
			return reply_err(r, &err);
		/* A step the trajectory log answers runs nothing (and does
		 * not resume a paused sandbox). */
		if (rlc_step(r))
			return;
		if ((op->flags & DSECD_OP_NEEDS_RUNNING) && !need_running(r))
			return;
	}
	op->run(r);
}

/* A request that waited for a pause or resume runs again from the start:
 * the sandbox may have changed state, or be gone. */
void rerun(struct dsecd_req *r)
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
	run(r);
}

/* Where r is served, decided by its row's route before any handler runs:
 * the hook of the cluster's forwarding.  DSECD_ROUTE_OWNER sends a request
 * whose 'id' names another node to that node (the node is the id's part
 * before the colon: no lookup of the sandbox) through dsecd_forward
 * (cluster.c), the frame as it came plus "fwd", and the answer comes back
 * as an event on the loop.  DSECD_ROUTE_PLACE (a create or call) goes to
 * the node placement picks over the capacity gossip carries (placing.c),
 * this one or another, the same way.  True when r is taken. */
static bool route(struct dsecd_req *r)
{
	switch (dsecd_ops[r->op].route) {
	case DSECD_ROUTE_OWNER:
		/* A replica of a log is read where it is asked. */
		if (r->op == DSEC_OP_TRAJECTORY && dsec_has(r->msg.root, "replica"))
			return false;
		return r->d->nmembers && dsecd_forward(r);
	case DSECD_ROUTE_PLACE:
		/* A token has one home in the cluster and a lease is its
		 * node's (rlcoord): a create naming one is sent there. */
		if (dsec_has(r->msg.root, "token") || dsec_has(r->msg.root, "lease")) {
			struct dsecd_member *m;
			bool pinned;
			struct dsec_err err;
			if (!r->d->nmembers || dsec_map_get(r->msg.root, "fwd") ||
			    !(m = rlc_pin(r, &pinned)))
				return rlc_token_probe(r);	/* served here */
			dsec_err_clear(&err);
			if (m->state == DSECD_MEMBER_DEAD || m->state == DSECD_MEMBER_LEFT)
				dsec_err_setc(&err, DSEC_E_NODE_LOST, EHOSTDOWN, "the lease's node '%s' "
					      "%s", m->name, m->state == DSECD_MEMBER_DEAD ? "is dead"
					      : "left the cluster");
			else
				dsecd_forward_to(r, m, &err);
			if (err.code)
				reply_err(r, &err);
			return true;
		}
		return r->d->placer && dsecd_place(r);
	case DSECD_ROUTE_LOCAL:
		break;
	}
	return false;
}

/* Frame in; exactly one reply out, now or when the backend completes. */
void dsecd_handle(void *arg, struct dsecd_conn *conn, const void *frame, size_t len)
{
	dsecd_handle_frame(arg, conn, NULL, 0, frame, len);
}

static void handle(struct dsecd_req *r);

void dsecd_handle_frame(struct dsecd *d, struct dsecd_conn *conn, struct dsecd_req *parent,
			size_t index, const void *frame, size_t len)
{
	struct dsecd_req *r = xcalloc(1, sizeof(*r));

	r->d = d;
	r->conn = conn;
	r->parent = parent;
	r->index = index;
	r->frame = frame;
	r->frame_len = len;
	handle(r);
}

static void request(struct dsecd *d, void *frame, size_t len, dsecd_reply_fn fn, void *arg,
		    bool unlogged)
{
	struct dsecd_req *r = xcalloc(1, sizeof(*r));

	r->d = d;
	r->unlogged = unlogged;
	r->own_frame = frame;
	r->frame = frame;
	r->frame_len = len;
	r->on_reply = fn;
	r->on_reply_arg = arg;
	handle(r);
}

void dsecd_request(struct dsecd *d, void *frame, size_t len, dsecd_reply_fn fn, void *arg)
{
	request(d, frame, len, fn, arg, false);
}

void dsecd_request_unlogged(struct dsecd *d, void *frame, size_t len, dsecd_reply_fn fn,
			    void *arg)
{
	request(d, frame, len, fn, arg, true);
}

static void handle(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	const void *frame = r->frame;
	size_t len = r->frame_len;
	const struct dsecd_op *desc;
	const msgpack_object *v, *op;
	struct dsec_err err;

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
	if (!(desc = dsecd_op_find(op->via.str.ptr, op->via.str.size))) {
		dsec_err_setc(&err, DSEC_E_UNKNOWN_OP, EINVAL, "unknown op '%.*s'",
			      op->via.str.size > 64 ? 64 : (int)op->via.str.size, op->via.str.ptr);
		return reply_err(r, &err);
	}
	r->op = (enum dsec_op)(desc - dsecd_ops);
	if (r->parent && r->op == DSEC_OP_BATCH) {
		dsec_err_setc(&err, DSEC_E_INVALID, EINVAL, "a batch cannot hold a batch");
		return reply_err(r, &err);
	}
	if (d->shutting_down && !(desc->flags & DSECD_OP_SHUTDOWN_OK)) {
		dsec_err_setc(&err, DSEC_E_SHUTTING_DOWN, ESHUTDOWN, "node '%s' is shutting down",
			      d->conf.node);
		return reply_err(r, &err);
	}
	if (route(r))
		return;
	run(r);
}
