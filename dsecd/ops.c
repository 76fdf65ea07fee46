/* ops.c - requests: parsing, dispatch, replies.
 *
 * A request is parsed strictly, checked for version and op, then handed to
 * its handler.  Handlers start backend work and return; the backend's done
 * callback packs the reply.  Every request ends in exactly one reply, ok or
 * error, through reply_ok()/reply_err(), which also free it.  The handlers
 * are in the ops-*.c files, one per family of ops, and stream.c.
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
#include "snap.h"

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
	dsec_exec_res_free(&r->sres.exec);
	free(r->sres.cwd);
	snap_free(r->snap);
	free(r->okind);
	free(r->odigest);
	free(r);
}

void send_pk(struct dsecd_req *r, struct dsec_pk *p)
{
	size_t len;
	void *data = dsec_pk_detach(p, &len);

	log_debug("op %s done in %.3f ms", dsec_ops[r->op].name,
		  (double)(dsec_now_ns() - r->t0) / 1e6);
	dsecd_server_reply(r->d->server, r->conn, data, len);
	req_free(r);
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
	dsec_pk_init(&p);
	dsec_pk_reply_err(&p, err);
	send_pk(r, &p);
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

int unsupported(struct dsecd_req *r, struct dsec_err *err)
{
	return dsec_err_setc(err, DSEC_E_UNSUPPORTED, ENOTSUP, "backend '%s' cannot %s",
			     r->sb->be->name, dsec_ops[r->op].summary);
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
