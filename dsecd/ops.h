/* ops.h - what the files serving the protocol's ops share (dsecd only).
 *
 * ops.c parses a request and hands it to its op's handler; the handlers
 * are in ops-node.c (ping, info, list), ops-sandbox.c (create, pause,
 * resume, net_allow, destroy), ops-exec.c (exec, call, sessions),
 * ops-file.c (the file API), ops-image.c (snapshot, chunk_get) and
 * stream.c (exec_start and the streams it makes).  Every request ends in
 * exactly one reply, through req_complete() or reply_err(), which free it.
 */
#ifndef DSECD_OPS_H
#define DSECD_OPS_H

#include "daemon.h"
#include "proto.h"

#define REPLY_SLACK DSECD_REPLY_SLACK
#define DSECD_MAX_DENY 256		/* seccomp_deny entries in one create */

struct dsecd_snap;
struct dsecd_req;

/* The ops, each a row of dsecd_ops[] (ops.c).  Their names are the wire's,
 * documented in dsec-protocol(7); the values are only dsecd's. */
enum dsec_op {
	DSEC_OP_PING,
	DSEC_OP_INFO,
	DSEC_OP_LIST,
	DSEC_OP_CREATE,
	DSEC_OP_EXEC,
	DSEC_OP_CALL,
	DSEC_OP_FILE_READ,
	DSEC_OP_FILE_WRITE,
	DSEC_OP_DESTROY,
	DSEC_OP_NET_ALLOW,
	DSEC_OP_PAUSE,
	DSEC_OP_RESUME,
	DSEC_OP_FILE_STAT,
	DSEC_OP_FILE_LIST,
	DSEC_OP_FILE_MKDIR,
	DSEC_OP_FILE_REMOVE,
	DSEC_OP_FILE_UPLOAD,
	DSEC_OP_FILE_DOWNLOAD,
	DSEC_OP_SESSION_OPEN,
	DSEC_OP_SESSION_EXEC,
	DSEC_OP_SESSION_CLOSE,
	DSEC_OP_SNAPSHOT,
	DSEC_OP_CHUNK_GET,
	DSEC_OP_EXEC_START,
	DSEC_OP_EXEC_READ,
	DSEC_OP_EXEC_WRITE,
	DSEC_OP_EXEC_SIGNAL,
	DSEC_OP_EXEC_RESIZE,
	DSEC_OP_USAGE,
	DSEC_OP_DRAIN,
	DSEC_OP_BATCH,
	DSEC_OP_LEAVE,
	DSEC_OP_TRAJECTORY,
	DSEC_OP_LEASE_OPEN,
	DSEC_OP_LEASE_RENEW,
	DSEC_OP_LEASE_INFO,
	DSEC_OP_LEASE_PAUSE,
	DSEC_OP_LEASE_RESUME,
	DSEC_OP_LEASE_CLOSE,
	DSEC_OP_TLOG_APPEND,
	DSEC_OP_GRADE,
	DSEC_OP_RESET,
	DSEC_OP_FORK,
	DSEC_OP_WATCHED,
	DSEC_OP_RECOVER,
	DSEC_OP_TOKEN_FIND,
	DSEC_OP_SET_TTL,
	DSEC_OP__COUNT
};

/* Which node serves an op (dsecd_handle routes a frame by it before any
 * handler runs; see route() in ops.c for where forwarding plugs in). */
enum dsecd_route {
	DSECD_ROUTE_LOCAL,		/* the node asked: node ops, node to node */
	DSECD_ROUTE_OWNER,		/* the node named in the sandbox id ('id' is
					 * NODE:SERIAL); without an id, the node asked */
	DSECD_ROUTE_PLACE,		/* a node placement picks (makes a sandbox) */
};

/* Flags of an op (dsecd_op.flags). */
#define DSECD_OP_QUICK		(1u << 0)	/* answered at once on the loop, never
						 * waiting on a backend or a timer: served
						 * beyond max_inflight (a health check must
						 * not wait behind long commands) */
#define DSECD_OP_NEEDS_ID	(1u << 1)	/* works on the sandbox 'id' names: r->sb
						 * is found, ready, and held before the
						 * handler runs (get_sandbox) */
#define DSECD_OP_NEEDS_RUNNING	(1u << 2)	/* and not paused: a paused one resumes
						 * first, and the request runs again then */
#define DSECD_OP_SHUTDOWN_OK	(1u << 3)	/* served while the node shuts down */
#define DSECD_OP_LOST_OK	(1u << 4)	/* also on a lost sandbox (SB_FAILED) */
#define DSECD_OP_LOGGED		(1u << 5)	/* changes or observes its sandbox: an
						 * entry of its trajectory log, and may
						 * carry a step (rlcoord/tlog.c) */

/* One row per op (tmux's cmd_entry): adding an op is adding a row and its
 * handler. */
struct dsecd_op {
	const char *name;		/* on the wire */
	void (*run)(struct dsecd_req *r);	/* the handler: replies now or later */
	enum dsecd_route route;		/* which node serves it */
	unsigned flags;			/* DSECD_OP_* */
	void (*free)(struct dsecd_req *r);	/* frees its member of r's union, or NULL */
	const char *summary;		/* one line, for docs and errors */
};

extern const struct dsecd_op dsecd_ops[DSEC_OP__COUNT];
/* The row of the op named name[0..len), or NULL. */
const struct dsecd_op *dsecd_op_find(const char *name, size_t len);
/* The row of the op a frame names (dsec_frame_op), or NULL. */
const struct dsecd_op *dsecd_frame_op(const void *frame, size_t len);

/* A request, from its frame to its reply.  What its op keeps is in the
 * union: each op uses one member (its row's free frees that one). */
struct dsecd_req {
	struct dsecd *d;		/* the daemon */
	struct dsecd_conn *conn;	/* where the reply goes */
	struct dsec_msg msg;		/* the parsed request */
	enum dsec_op op;		/* its op */
	struct dsecd_backend *be;	/* backend (create, call) */
	struct dsecd_sb *sb;		/* sandbox it holds a ref on, or NULL */
	uint64_t t0;			/* receive time, ns */
	uint64_t t_phase;		/* create: its current phase's start, ns */
	struct dsecd_req *gnext;	/* sb->gate link */
	void *reply;			/* its reply, packed, once req_complete ran */
	size_t reply_len;		/* its bytes */
	bool held;			/* the reply hook holds it */
	const void *frame;		/* the request's bytes (the server's, until the reply) */
	size_t frame_len;		/* their length */
	enum dsec_code reply_code;	/* its reply's code (reply_err), DSEC_E_OK for ok */
	struct dsecd_req *parent;	/* the batch it is one of, or NULL (batch.c) */
	size_t index;			/* its place in the batch */
	struct dsecd_batch *batch;	/* a batch's own state (op_batch), or NULL */
	struct dsecd_member *fwd;	/* forwarded to it (cluster.c), or NULL */
	struct dsec_call *fwd_call;	/* that call while it runs */
	struct dsecd_placing *placing;	/* placement's state (placing.c), or NULL */
	void *own_frame;		/* frame, when r owns it (dsecd_request) */
	void (*on_reply)(void *, const void *, size_t, enum dsec_code);	/* dsecd_request's fn */
	void *on_reply_arg;		/* its arg */
	/* rlcoord/tlog.c: its step */
	bool has_step;			/* it carries one */
	bool rl_answered;		/* answered without running (from the log, joined,
					 * diverged): nothing of it is logged */
	uint64_t step;			/* its value */
	uint8_t rl_hash[32];		/* its request's hash (RLC_HASH) */
	struct rlc_log *rl_log;		/* the log it is pending in (a ref), or NULL */
	struct dsecd_req *rl_next;	/* that log's pending list, or a joined list */
	struct dsecd_req *rl_joined;	/* requests of the same step waiting for its reply */
	struct rlc_token *rl_token;	/* create: the token it makes a sandbox for, or NULL */
	struct rlc_ent *rl_xend;	/* exec_read: the end of its stream, logged before
					 * its reply (rlc_stream_end), or NULL */
	struct rlc_lease *lease;	/* create: the lease it makes one in, or NULL */
	char **grade_layers;		/* create: its grade_layers until the sandbox has them */
	char **watch;			/* create: its watch until the sandbox has it */
	bool unlogged;			/* the daemon's own read (dsecd_request_unlogged) */
	bool token_probed;		/* create: its token was looked for on the next node */
	union {
		/* create, call, exec, exec_start, net_allow, the session ops */
		struct {
			char **argv;		/* argv or NULL */
			char *code;		/* code (session_exec: cmd) or NULL */
			char **env;		/* exec env */
			char *cwd;		/* exec cwd */
			struct dsec_exec_req ereq;	/* what the backend gets */
			struct dsec_exec_res eres;	/* what it fills */
			char **cenv;		/* create and session_open env */
			char *ccwd;		/* create and session_open cwd */
			char **allow;		/* create and net_allow: the allowlist */
			union {
				/* create and call (req_run_free) */
				struct {
					char *image, *runtime;	/* create fields */
					char **layers;	/* images stacked over image, bottom first */
					char *network, *dns;	/* network mode and resolver */
					char **deny;	/* seccomp_deny */
					char **ienv;	/* the image's env, then the request's */
					struct dsecd_grade grade;	/* create: its grade
								 * layers, held until
								 * the sandbox has
								 * them, and the names
								 * of spec.protect */
					dsec_be_done_fn create_cb;	/* create's completion
									 * (create or call) */
					struct dsec_be_spec spec;	/* what the backend gets */
					char *call_id;	/* id given to a one-shot call */
					char **labels;	/* create's labels, "K=V", or NULL */
				};
				/* the session ops (req_session_free) */
				struct {
					char *session;	/* session name asked for */
					char *shell;	/* session_open shell */
					char *sname;	/* name the backend gave (session_open) */
					struct dsec_be_session_res sres;	/* session_exec result */
				};
			};
		};
		/* the file ops and chunk_get */
		struct {
			struct dsec_buf data;	/* file_read's and chunk_get's bytes */
			union {
				/* the file ops (req_file_free) */
				struct {
					char *path;	/* file path */
					char *archive;	/* file_upload, file_download:
							 * the archive file's path */
					uint64_t want;	/* file_read: bytes asked for
							 * (one more is read, to see
							 * the end) */
					struct dsec_file_req freq;	/* the other file ops:
									 * what the backend gets */
					struct dsec_file_res fres;	/* what it fills */
					struct dsecd_stage *stage;	/* the staged write or
									 * download it works on
									 * (busy), or NULL */
					char stage_id[17];	/* its id, for the reply */
				};
				/* chunk_get (req_chunk_free) */
				struct {
					char *okind, *odigest;	/* object asked for */
					int orc;	/* 0 or -errno of the pool's read */
					struct dsec_err oerr;	/* why */
				};
			};
		};
		struct dsecd_snap *snap;	/* snapshot: its state, or NULL */
		struct dsec_be_usage usage;	/* usage: what the backend fills */
	};
};

/* ops.c: replies (each frees r) and what every op on a sandbox does first. */
/* The one way a reply leaves: takes p's bytes, lets the reply hook hold
 * them (dsecd_reply_hook_set), sends them and frees r unless it does. */
void req_complete(struct dsecd_req *r, struct dsec_pk *p);
/* The same with a reply already packed (len bytes, malloc'd; taken). */
void req_complete_frame(struct dsecd_req *r, void *reply, size_t len);
/* Sends reply (len bytes, malloc'd; taken) as it is and frees r: the
 * answer of the node a request was forwarded to, whose own reply hook
 * ran there. */
void dsecd_req_release_frame(struct dsecd_req *r, void *reply, size_t len);
/* route(): a request on a sandbox of another node goes to it; true when r
 * is taken (sent on, or answered: unknown node, node_lost), false when it
 * is served here (cluster.c). */
bool dsecd_forward(struct dsecd_req *r);
/* Sends r on to member m as it came, with "fwd"; its reply comes to the
 * completion queue.  0, or -errno with err (nothing sent, r not answered). */
int dsecd_forward_to(struct dsecd_req *r, struct dsecd_member *m, struct dsec_err *err);
/* placing.c: route() of a create or call: true when r is taken (sent to
 * another node, or answered capacity), false when it is served here. */
bool dsecd_place(struct dsecd_req *r);
/* A placed request's reply came from its target (rc 0, reply and len) or
 * did not (rc < 0): counted, its code in r->reply_code; true when r is
 * taken again (the target
 * refused: placed on another node, or answered), false when the reply
 * goes to the client as usual. */
bool dsecd_place_reply(struct dsecd_req *r, int rc, const void *reply, size_t len);
/* batch.c: a request of several.  Runs the frame as dsecd_handle does;
 * with parent, as request index of that batch, its reply going to
 * dsecd_batch_done instead of a client. */
/* The daemon's own request (a lease pausing its sandboxes): frame (msgpack,
 * malloc'd; taken) is served as a client's would be, routed, gated and
 * logged the same, and its reply (len bytes and its code, valid during the
 * call) goes to fn(arg, ...) on the loop instead of a client. */
typedef void (*dsecd_reply_fn)(void *arg, const void *reply, size_t len, enum dsec_code code);
void dsecd_request(struct dsecd *d, void *frame, size_t len, dsecd_reply_fn fn, void *arg);
/* The same for a read the daemon makes for itself (the hashes of a
 * create's watch): not an entry of the sandbox's trajectory. */
void dsecd_request_unlogged(struct dsecd *d, void *frame, size_t len, dsecd_reply_fn fn,
			    void *arg);
void dsecd_handle_frame(struct dsecd *d, struct dsecd_conn *conn, struct dsecd_req *parent,
			size_t index, const void *frame, size_t len);
void dsecd_batch_done(struct dsecd_req *batch, size_t index, void *reply, size_t len,
		      enum dsec_code code);
void op_batch(struct dsecd_req *r);
void req_batch_free(struct dsecd_req *r);
/* Counts one request answered here (metrics.c). */
void dsecd_metrics_request(struct dsecd *d, enum dsec_op op, enum dsec_code code, double secs);
/* Completes r with {ok: true, result: {}}. */
void reply_empty(struct dsecd_req *r);
/* Packs err as the reply (sandbox_lost when r's sandbox is lost) and
 * completes r with it. */
void reply_err(struct dsecd_req *r, const struct dsec_err *err);
/* A command's result from a sandbox lost meanwhile is not the command's:
 * true when r got sandbox_lost instead. */
bool reply_if_lost(struct dsecd_req *r);
/* Finds the sandbox named by 'id', ready for work (or lost, for an op
 * with DSECD_OP_LOST_OK); takes a ref on it. */
int get_sandbox(struct dsecd_req *r, struct dsec_err *err);
/* "unsupported": r's backend cannot do r's op. */
int unsupported(struct dsecd_req *r, struct dsec_err *err);
/* A request that waited for a pause or resume runs again from the start. */
void rerun(struct dsecd_req *r);

/* ops-node.c */
void op_ping(struct dsecd_req *r);
void op_info(struct dsecd_req *r);
void op_list(struct dsecd_req *r);
void op_drain(struct dsecd_req *r);
void op_leave(struct dsecd_req *r);

/* ops-sandbox.c */
/* Frees the state of create and call, and of exec, exec_start, net_allow. */
void req_run_free(struct dsecd_req *r);
/* create's and list's "labels" into *out ("K=V", NULL when none), checked. */
int dsecd_labels_get(const msgpack_object *m, char ***out, struct dsec_err *err);
/* Fails the request if the node cannot take another sandbox. */
int check_capacity(struct dsecd *d, struct dsec_err *err);
/* Reads backend, image, runtime, env, cwd and limits (create and call). */
int parse_spec(struct dsecd_req *r, struct dsec_err *err);
/* Queues r in sb's gate: it runs again when the pause or resume in flight ends. */
void gate_add(struct dsecd_sb *sb, struct dsecd_req *r);
/* Starts the backend's create of r->sb, done = create's completion; a
 * backend that runs images from layers gets the image acquired first.
 * Returns 0, or -1 with *err (the caller destroys r->sb and replies). */
int start_create(struct dsecd_req *r, dsec_be_done_fn done, struct dsec_err *err);
/* After get_sandbox: true when r can go on now; false when it waits for a
 * pause or resume (started here for a paused sandbox) and will run again,
 * or has been answered. */
bool need_running(struct dsecd_req *r);
void op_switch(struct dsecd_req *r);
void op_usage(struct dsecd_req *r);
void op_set_ttl(struct dsecd_req *r);
void op_create(struct dsecd_req *r);
void op_net_allow(struct dsecd_req *r);
void op_destroy(struct dsecd_req *r);

/* ops-exec.c */
/* Frees the state of the session ops. */
void req_session_free(struct dsecd_req *r);
/* Reads argv/code, stdin, env, cwd, timeout, output_cap (exec and call). */
int parse_exec(struct dsecd_req *r, struct dsec_err *err);
/* Reads timeout and output_cap into r->ereq (exec, call, session_exec). */
int parse_timeout_cap(struct dsecd_req *r, struct dsec_err *err);
/* While the daemon stops, a command that was cut off fails with
 * shutting_down (*e holds it); other errors are returned as they are. */
const struct dsec_err *cut_err(struct dsecd *d, int rc, const struct dsec_err *err,
			       struct dsec_err *e);
/* The env and cwd a warm pool's sandbox was handed over with. */
void exec_sb_defaults(struct dsecd_req *r);
void op_exec(struct dsecd_req *r);
void op_call(struct dsecd_req *r);
void op_session_open(struct dsecd_req *r);
void op_session_exec(struct dsecd_req *r);
void op_session_close(struct dsecd_req *r);

/* ops-file.c */
void req_file_free(struct dsecd_req *r);
void op_file(struct dsecd_req *r);
void op_fs(struct dsecd_req *r);

/* ops-image.c */
void req_snap_free(struct dsecd_req *r);
void req_chunk_free(struct dsecd_req *r);
void op_snapshot(struct dsecd_req *r);
void op_chunk_get(struct dsecd_req *r);

/* stream.c */
void op_exec_start(struct dsecd_req *r);
void op_exec_read(struct dsecd_req *r);
void op_exec_write(struct dsecd_req *r);
void op_exec_ctl(struct dsecd_req *r);

#endif
