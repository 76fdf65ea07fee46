/* ops.h - what the files serving the protocol's ops share (dsecd only).
 *
 * ops.c parses a request and hands it to its op's handler; the handlers
 * are in ops-node.c (ping, info, list), ops-sandbox.c (create, pause,
 * resume, net_allow, destroy), ops-exec.c (exec, call, sessions),
 * ops-file.c (the file API), ops-image.c (snapshot, chunk_get) and
 * stream.c (exec_start and the streams it makes).  Every request ends in
 * exactly one reply, through send_pk() or reply_err(), which free it.
 */
#ifndef DSECD_OPS_H
#define DSECD_OPS_H

#include "daemon.h"
#include "proto.h"

#define REPLY_SLACK DSECD_REPLY_SLACK
#define DSECD_MAX_DENY 256		/* seccomp_deny entries in one create */

struct dsecd_snap;

struct dsecd_req {
	struct dsecd *d;		/* the daemon */
	struct dsecd_conn *conn;	/* where the reply goes */
	struct dsec_msg msg;		/* the parsed request */
	enum dsec_op op;		/* its op */
	struct dsecd_backend *be;	/* backend (create, call) */
	struct dsecd_sb *sb;		/* sandbox it holds a ref on, or NULL */
	/* exec and call */
	char **argv;			/* argv or NULL */
	char *code;			/* code or NULL */
	char **env;			/* exec env */
	char *cwd;			/* exec cwd */
	struct dsec_exec_req ereq;	/* what the backend gets */
	struct dsec_exec_res eres;	/* what it fills */
	/* create and call */
	char *image, *runtime, *ccwd;	/* create fields */
	char **cenv;			/* create env */
	char **layers;			/* create: images stacked over image, bottom first */
	char *network, *dns;		/* create: network mode and resolver */
	char **deny;			/* create: seccomp_deny */
	char **allow;			/* create and net_allow: the allowlist */
	char **ienv;			/* create: the image's env, then the request's */
	dsec_be_done_fn create_cb;	/* create's completion (create or call) */
	struct dsec_be_spec spec;	/* what the backend gets */
	/* files */
	char *call_id;			/* id given to a one-shot call */
	char *path;			/* file path */
	struct dsec_buf data;		/* file_read result */
	struct dsec_file_req freq;	/* the other file ops: what the backend gets */
	struct dsec_file_res fres;	/* what it fills */
	uint64_t t0;			/* receive time, ns */
	struct dsecd_req *gnext;	/* sb->gate link */
	/* shell sessions */
	char *session;			/* session name asked for */
	char *shell;			/* session_open shell */
	char *sname;			/* name the backend gave (session_open) */
	struct dsec_session_res sres;	/* session_exec result */
	struct dsecd_snap *snap;	/* snapshot: its state, or NULL */
	/* chunk_get */
	char *okind, *odigest;		/* object asked for */
	int orc;			/* 0 or -errno of the pool's read */
	struct dsec_err oerr;		/* why */
};

/* ops.c: replies (each frees r) and what every op on a sandbox does first. */
void send_pk(struct dsecd_req *r, struct dsec_pk *p);
void reply_err(struct dsecd_req *r, const struct dsec_err *err);
/* A command's result from a sandbox lost meanwhile is not the command's:
 * true when r got sandbox_lost instead. */
bool reply_if_lost(struct dsecd_req *r);
/* Finds the sandbox named by 'id', ready for work; takes a ref on it. */
int get_sandbox(struct dsecd_req *r, struct dsec_err *err);
/* "unsupported": r's backend cannot do r's op. */
int unsupported(struct dsecd_req *r, struct dsec_err *err);
/* A request that waited for a pause or resume runs again from the start. */
void rerun(struct dsecd_req *r);

/* ops-node.c */
void op_ping(struct dsecd_req *r);
void op_info(struct dsecd_req *r);
void op_list(struct dsecd_req *r);

/* ops-sandbox.c */
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
void op_create(struct dsecd_req *r);
void op_net_allow(struct dsecd_req *r);
void op_destroy(struct dsecd_req *r);

/* ops-exec.c */
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
void op_file(struct dsecd_req *r);
void op_fs(struct dsecd_req *r);

/* ops-image.c */
void snap_free(struct dsecd_snap *s);
void op_snapshot(struct dsecd_req *r);
void op_chunk_get(struct dsecd_req *r);

/* stream.c */
void op_exec_start(struct dsecd_req *r);
void op_exec_read(struct dsecd_req *r);
void op_exec_write(struct dsecd_req *r);
void op_exec_ctl(struct dsecd_req *r);

#endif
