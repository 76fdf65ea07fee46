/* rlc.h - rlcoord: what keeps a rollout alive past its trainer (dsecd only).
 *
 *   tlog.c   the trajectory log: per sandbox, in order, every op that
 *            changes or observes it, with a hash of its request and its
 *            reply (zstd), durable (fdatasync, group commit through the
 *            before-reply hook) before the reply goes out; fast-forward
 *            of a request whose step is logged
 *   export.c the trajectory op (a log read back), old logs removed
 *   token.c  idempotent creates: a create's client token names the
 *            sandbox the first one with it made (or is making)
 *   lease.c  trainer leases: sandboxes that belong to a lease are paused
 *            when it lapses and destroyed when its grace ends
 *
 * The log's format and the ops are in dsec-protocol(7) and dsec-rlcoord(7).
 */
#ifndef DSEC_RLC_H
#define DSEC_RLC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dsecd;
struct dsecd_req;
struct dsecd_sb;
struct dsec_err;
struct dsec_pk;

/* SHA-256 bytes of a request's hash. */
#define RLC_HASH 32

struct rlc;
struct rlc_lease;

/* Starts rlcoord (the trajectory directory, its writer thread, the
 * before-reply hook); after the pools.  0 or -errno with err. */
int rlc_open(struct dsecd *d, struct dsec_err *err);
/* Waits for the log's writes and frees rlcoord; after the loop ended. */
void rlc_close(struct dsecd *d);

/* A create asked for a trajectory: sb's log begins (its file is made by
 * the first write). */
void rlc_log_start(struct dsecd *d, struct dsecd_sb *sb);
/* sb is freed: its log's memory goes (its file stays, see trajectory_keep). */
void rlc_log_drop(struct dsecd *d, struct dsecd_sb *sb);
/* Reads r's "step", for an op on sandbox r->sb, before anything runs:
 * true when r is taken (answered from the log, diverged, or joined to the
 * same step still running), false when it runs.  Replies with an error
 * (and returns true) for a step on a sandbox without a trajectory. */
bool rlc_step(struct dsecd_req *r);
/* A stream of sb, a sandbox with a trajectory, ended with a status: its
 * end is logged, an entry of op exec_read whose reply (se->reply,
 * se->reply_len bytes, taken) is exec_read's with the whole output the
 * stream kept.  With r, the exec_read that takes its last bytes, the entry
 * is that request's and r's own reply waits until it is durable (call it
 * before r's reply); without, the entry's request is made here.  A stream
 * begun by a step (se->has_step) is then answered from the log when read
 * again once it has gone (rlc_stream_answer). */
struct rlc_stream_end {
	const char *exec;		/* the stream's name */
	bool has_step;
	uint64_t step;			/* its exec_start's */
	double t;			/* unix time it began */
	uint64_t dur_us;		/* until it ended */
	void *reply;
	size_t reply_len;
};
void rlc_stream_end(struct dsecd *d, struct dsecd_sb *sb, struct dsecd_req *r,
		    const struct rlc_stream_end *se);
/* exec_read r names no stream of its sandbox: true when r is taken, its
 * stream begun by a step whose end the log has (answered from the log,
 * with "replayed": the step); false when it is not (r gets not_found). */
bool rlc_stream_answer(struct dsecd_req *r);
/* info's "trajectory" entry of a sandbox (nothing without a log), and the
 * node's (the log's directory, its durability, what it wrote). */
void rlc_pack_sb(struct dsecd *d, const struct dsecd_sb *sb, struct dsec_pk *p);
void rlc_pack_node(struct dsecd *d, struct dsec_pk *p);
/* The node's counters for its metrics (metrics.c), on the loop: false
 * when the node keeps no trajectory (rlc_open failed or was not run). */
struct rlc_stats {
	uint64_t written, failed, bytes, batches, syncs;
	double sync_seconds;		/* the journal's syncs, summed */
	uint64_t replayed, joined, diverged, imported;	/* steps that ran nothing */
	uint64_t replicated, under_replicated, replica_entries;
	bool peers;			/* entries go to peers too (gossip) */
	uint64_t leases_open, leases_lapsed, leases_expired;
	uint64_t tokens_held, tokens_reused;
};
bool rlc_get_stats(struct dsecd *d, struct rlc_stats *out);

/* The request hash the log keeps: SHA-256 over the op and the request's
 * fields but v, id, fwd and step, in key order, each value as msgpack-c
 * packs it (so two clients that send the same request get the same hash
 * whatever their encoders' integer widths or key order). */
struct msgpack_object;
void rlc_request_hash(const struct msgpack_object *root, uint8_t out[RLC_HASH]);
/* r is freed: whatever of its step is still pending ends. */
void rlc_req_free(struct dsecd_req *r);

/* The trajectory op (export of a log, page by page). */
void op_trajectory(struct dsecd_req *r);

/* token.c: a create's "token", before it makes anything: true when r is
 * answered (the sandbox the token made, an error) or waits for the create
 * making it; false when it goes on (and its reply ends the wait of the
 * others: rlc_token_made, from the reply hook). */
bool rlc_token_create(struct dsecd_req *r);
/* route() of a create or call that names a lease or a token: *pinned true
 * when it does; then the member it must be served by (the lease's node,
 * the token's home), or NULL for this node. */
struct dsecd_member;
struct dsecd_member *rlc_pin(struct dsecd_req *r, bool *pinned);
void rlc_token_made(struct dsecd_req *r);
/* route() of a create with a token that this node serves: true when r is
 * taken while the token is looked for on the node that ranks next for it
 * (its home before a member joined); then r goes there when that node has
 * it, or runs here. */
bool rlc_token_probe(struct dsecd_req *r);
/* The token_find op (node to node): {found, pending, id} of a token here,
 * or, with "to" naming another node, the answer of that node. */
void op_token_find(struct dsecd_req *r);

/* lease.c: a create's "lease", found in r->lease (renewed; *trajectory
 * set true unless the create says), or 0 without one; -errno with err. */
int rlc_lease_create(struct dsecd_req *r, bool *trajectory, struct dsec_err *err);
/* sb, made by a create in lease L (NULL: none), belongs to it. */
void rlc_lease_join(struct dsecd *d, struct dsecd_sb *sb, struct rlc_lease *L);
/* sb is being destroyed: it leaves its lease, its token is forgotten. */
void rlc_sb_gone(struct dsecd *d, struct dsecd_sb *sb);
/* The lease ops: lease_open; lease_renew, lease_info, lease_pause,
 * lease_resume and lease_close (op_lease, on the lease 'id' names). */
void op_lease_open(struct dsecd_req *r);
/* grade.c: the grade op (on the sandbox 'id' names). */
void op_grade(struct dsecd_req *r);

/* watch.c: a create's "watch" (absolute paths, at most 64) into *out (NULL
 * when absent or empty); 0 or -errno with err. */
int rlc_watch_parse(const struct msgpack_object *m, char ***out, struct dsec_err *err);
/* SHA-256 of each of sb->watch now, through the daemon's own unlogged
 * file_read requests: fn(arg, hashes, n) with n of them ("sha256:HEX",
 * NULL for a file that is not there, "error:CODE"), which fn frees with
 * rlc_watch_free. */
typedef void (*rlc_hashed_fn)(void *arg, char **hashes, size_t n);
void rlc_watch_hash(struct dsecd *d, struct dsecd_sb *sb, rlc_hashed_fn fn, void *arg);
void rlc_watch_free(char **hashes, size_t n);
/* "watched": [{path, before, after, changed}] into the open map p. */
void rlc_pack_watched(const struct dsecd_sb *sb, char **after, struct dsec_pk *p);
/* The watched op: that list now. */
void op_watched(struct dsecd_req *r);

/* recover.c: the recover op, a dead node's sandbox made again from the
 * copy of its log this node keeps (its create, then its logged steps). */
void op_recover(struct dsecd_req *r);
/* reset.c: sb keeps its create's request (frame, len bytes), which reset
 * and fork make it again from; the reset and fork ops. */
void rlc_keep_spec(struct dsecd_sb *sb, const void *frame, size_t len);
void op_reset(struct dsecd_req *r);
void op_fork(struct dsecd_req *r);
void op_lease(struct dsecd_req *r);

#endif
