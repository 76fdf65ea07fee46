/* rlc-int.h - what the files of rlcoord share (not dsecd's). */
#ifndef DSEC_RLC_INT_H
#define DSEC_RLC_INT_H

#include <ev.h>

struct dsecd;
struct dsecd_req;
struct dsecd_sb;
struct dsec_err;

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"
#include "rlc.h"

#define RLC_TOKEN_BUCKETS 1024
#define RLC_REPLICAS 2			/* copies of a log on peers */
#define RLC_PEER_CLIENTS 16		/* the writer's connections to peers, at most */

/* A logged step: where its entry is and what its request hashed to. */
struct rlc_step {
	uint64_t step;
	uint64_t off;			/* its record's offset in the file */
	uint32_t len;			/* and length, header included */
	uint8_t hash[RLC_HASH];
	uint16_t op;			/* enum dsec_op */
	uint32_t reply_len;
	void *reply;			/* its reply kept in memory (a replay of it then
					 * reads no disk), or NULL */
};

/* A sandbox's log (sb->tlog; queued entries hold refs). */
struct rlc_log {
	unsigned refs;
	char *id;			/* the sandbox's */
	char *path;			/* its file */
	uint64_t seq;			/* entries queued so far: the next one's seq */
	uint64_t entries;		/* of them, on disk */
	uint64_t bytes;			/* the file's bytes on disk (loop) */
	uint64_t wsize;			/* the file's bytes (the writer's, during a batch) */
	int err;			/* errno of a write that failed: no more steps */
	int werr;			/* the writer's: the same, as it found it */
	uint32_t jgen;			/* the writer's: the journal's generation it is marked in */
	char *name;			/* its file's name in the directory */
	struct rlc_step *steps;		/* logged steps, by step */
	size_t nsteps, capsteps;
	size_t cached;			/* bytes of their replies kept in memory */
	struct dsecd_req *pending;	/* requests with a step running now (r->rl_next) */
	struct rlc_xend *xends;		/* logged ends of streams begun by a step */
	size_t nxends, capxends;
	struct dsec_buf wbuf;		/* the writer's: this batch's records */
	struct rlc_log *bnext;		/* the writer's: logs of this batch */
	bool in_batch;
};

/* One entry on its way to disk. */
struct rlc_ent {
	struct rlc_ent *next;
	struct dsecd_req *r;		/* the held request */
	struct rlc_log *log;		/* a ref */
	uint64_t seq;
	uint64_t step;
	bool has_step;
	uint16_t op;
	uint8_t hash[RLC_HASH];
	enum dsec_code code;
	double t;			/* unix time the request came */
	uint64_t dur_us;		/* until its reply */
	void *req;			/* its frame, a copy */
	size_t req_len;
	const void *reply;		/* r's reply (held with r) */
	size_t reply_len;
	uint64_t off;			/* where it went (the writer's) */
	uint32_t len;
	size_t boff;			/* the writer's: its record's place in log->wbuf */
	char *peer[RLC_REPLICAS];	/* API addresses of its log's replicas, or NULL */
	unsigned copies;		/* of them, how many acknowledged it */
	void *own_reply;		/* a stream's end: the reply logged, r's is another */
	char exec[24];			/* a stream's end: the stream's name, or "" */
	bool exec_step;			/* ... begun by a step (exec_step_n) */
	uint64_t exec_step_n;
};

/* The logged end of a stream begun by a step: an exec_read of that name
 * whose stream has gone is answered from the log. */
struct rlc_xend {
	char exec[24];
	uint64_t step;			/* exec_start's */
	uint64_t off;			/* its record */
	uint32_t len;
};



/* A create's client token (token.c). */
struct rlc_token {
	struct rlc_token *next;		/* hash chain */
	char *token;
	char *id;			/* the sandbox it made, NULL while making */
	struct dsecd_req *maker;	/* the create making it, or NULL */
	struct dsecd_req *waiters;	/* creates sent again meanwhile (r->rl_next) */
	bool probing;			/* maker waits for the node it asked (token_find) */
	char *claimer;			/* the node that makes it, another (its token_find
					 * found none here, or this node yielded to it), or
					 * NULL */
	uint64_t claimed_ns;		/* when (dsec_now_ns) */
	bool remote;			/* made by another node's token_find: a claim
					 * alone, counted in nclaims */
};

enum rlc_lease_state { RLC_LEASE_ACTIVE, RLC_LEASE_LAPSED };

/* A trainer's lease (lease.c). */
struct rlc_lease {
	struct rlc_lease *next;
	struct rlc *rl;
	char *id;			/* NODE:lHEX */
	char **labels;			/* "K=V", or NULL */
	double timeout, grace;		/* seconds */
	enum rlc_lease_state state;
	ev_timer timer;			/* active: the timeout; lapsed: the grace */
	uint64_t nsb;			/* sandboxes of it in the table */
	double opened_wall;		/* unix time */
	double renewed, lapsed_at;	/* loop times */
	uint64_t lapses;
};

struct rlc {
	struct dsecd *d;
	char *dir;			/* trajectory_dir */
	struct dsecd_pool *writer;	/* one thread: batches in order */
	ev_prepare prep;		/* starts a batch once per loop iteration */
	struct rlc_ent *queue, **qtail;	/* entries gathering */
	struct rlc_ent *batch;		/* entries on their way to disk, or NULL */
	int batch_rc;			/* 0 or -errno of the batch's writes */
	char batch_err[160];		/* what failed */
	/* counted for info */
	uint64_t written, wbytes, batches, syncs, replayed, diverged, joined, failed;
	uint64_t imported;		/* steps logged with a reply recover gave (logged_reply) */
	uint64_t batch_ns;		/* the writer's time on batches, in all */
	uint64_t sync_ns;		/* of it, on open, write, fdatasync and close */
	struct ZSTD_CCtx_s *zc;		/* the writer's compressor */
	struct rlc_journal *journal;	/* the writer's */
	/* replica.c (the writer's, but the counters) */
	struct dsec_cq *cq;		/* replies of the peers, NULL without gossip */
	struct { char *url; struct dsec_client *c; } peers[RLC_PEER_CLIENTS];
	size_t npeers;
	char *tls_ca, *tls_cert;	/* the node's credential, for tls+tcp:// peers */
	bool *peer_failed, *answered;	/* per peer of the batch being sent */
	uintptr_t batch_seq;		/* tags the peers' replies with their batch */
	char peer_err[640];		/* why a peer last refused, for the log */
	uint64_t replicated;		/* entries with both copies acknowledged */
	uint64_t under_replicated;	/* entries with fewer (a peer failed or none alive) */
	uint64_t replica_entries;	/* entries of other nodes' logs kept here */
	ev_timer sweep_timer;		/* removes logs older than trajectory_keep */
	bool sweeping;			/* a sweep is on the writer */
	uint64_t swept;			/* logs it removed */
	/* token.c */
	struct rlc_token *tokens[RLC_TOKEN_BUCKETS];
	size_t ntokens;			/* records but claims */
	size_t nclaims;			/* records of another node's claim */
	uint64_t tokens_reused;		/* creates answered by their token */
	/* lease.c */
	struct rlc_lease *leases;
	size_t nleases;
	uint64_t leases_lapsed, leases_expired;
};

/* FNV-1a of n bytes folded to 32 bits: a record's check. */
uint32_t rlc_check(const void *p, size_t n);
/* tlog.c's records: u32 length, u32 check, then the entry (see there). */
#define REC_HEAD 8			/* length + check */
#define REC_MAX (64u << 20)		/* a record longer is not one (a torn header) */
/* A read of one logged entry (fast-forward) or of a page (trajectory). */
struct rlc_read {
	struct dsecd_req *r;
	char *path;
	uint64_t off, from, limit, max_bytes;
	uint32_t len;
	int rc;
	struct dsec_err err;
	void *out;			/* the reply as logged / the page's packed entries */
	size_t out_len;
	uint64_t n, next;		/* page: entries packed, seq after the last */
	bool end;			/* page: the log ends there */
};
struct dsec_buf;
struct dsec_msg;
/* The record at off of fd (len bytes with its header) parsed into m (its
 * bytes in b); 0 or -errno with err. */
int rlc_rec_read(int fd, uint64_t off, uint32_t len, struct dsec_buf *b, struct dsec_msg *m,
		 struct dsec_err *err);
/* The bin of key in entry e decompressed to its logged length (key_len). */
int rlc_unzip(const struct msgpack_object *e, const char *key, const char *key_len, void **out,
	      size_t *out_len, struct dsec_err *err);
/* export.c: the sweep of old logs, every so often (rl->sweep_timer). */
struct ev_loop;
struct ev_timer;
void rlc_sweep_cb(struct ev_loop *loop, struct ev_timer *w, int revents);
/* pwrite of all n bytes at off: 0 or -errno. */
int rlc_pwrite_full(int fd, const void *p, size_t n, uint64_t off);

/* journal.c: the node's write-ahead journal (the writer thread's) */
struct rlc_journal;
/* Opens TRAJECTORY_DIR/journal, writes what it holds again into the logs
 * (after a crash) and starts a new generation. */
int rlc_journal_open(const char *dir, struct rlc_journal **out, struct dsec_err *err);
/* A checkpoint (every log written is synced), then closed. */
void rlc_journal_close(struct rlc_journal *j);
/* One record (rec, len bytes) of the log file name (in the directory) at
 * off, into the batch. */
void rlc_journal_add(struct rlc_journal *j, const char *name, uint64_t off, const void *rec,
		     size_t len);
/* The file name is written: the next checkpoint syncs it.  Once per
 * generation is enough (rlc_journal_gen changes at each checkpoint). */
void rlc_journal_mark(struct rlc_journal *j, const char *name);
uint32_t rlc_journal_gen(const struct rlc_journal *j);
/* Writes the batch and syncs it: 0 (durable) or -errno. */
int rlc_journal_commit(struct rlc_journal *j);
uint64_t rlc_journal_checkpoints(const struct rlc_journal *j);

/* replica.c */
/* The API addresses of the two members that keep id's log (urls[k] NULL
 * when there are fewer alive; malloc'd); the loop's. */
void rlc_replica_pick(struct dsecd *d, const char *id, char *urls[RLC_REPLICAS]);
/* The writer's: sends rl->batch's entries to their peers; then
 * rlc_replicate_wait sets each entry's copies. */
void rlc_replicate_start(struct rlc *rl, const char ***urls, size_t *nurls, size_t *ncalls);
void rlc_replicate_wait(struct rlc *rl, const char **urls, size_t nurls, size_t ncalls);
/* The tlog_append op (node to node). */
void op_tlog_append(struct dsecd_req *r);
/* Whether name is "ID.log" of a sandbox of another node. */
bool rlc_log_name_ok(struct dsecd *d, const char *name);
int rlc_journal_dirfd(const struct rlc_journal *j);

/* grade.c: *err is the error a reply (len bytes, or NULL) holds, its
 * message after what; "internal" for one that holds none. */
void rlc_reply_error(const void *reply, size_t len, const char *what, struct dsec_err *err);
/* The result map of an ok reply, parsed into m (the caller frees it);
 * NULL when the reply failed or is none. */
struct dsec_msg;
struct msgpack_object;
const struct msgpack_object *rlc_reply_result(struct dsec_msg *m, const void *reply, size_t len);
/* tlog.c: "sha256:HEX" of a hash, NUL-terminated. */
#define RLC_HASH_HEX (2 * RLC_HASH + 8)
void rlc_hash_hex(const uint8_t *h, char out[RLC_HASH_HEX]);
/* The request packed in p (consumed) as the daemon's own (dsecd_request,
 * or dsecd_request_unlogged when unlogged): fn(arg, ...) gets its reply. */
struct dsec_pk;
void rlc_send(struct dsecd *d, struct dsec_pk *p,
	      void (*fn)(void *arg, const void *reply, size_t len, enum dsec_code code), void *arg,
	      bool unlogged);

struct rlc_lease *rlc_lease_find(struct rlc *rl, const char *id);
void rlc_leases_free(struct rlc *rl);
void rlc_tokens_free(struct rlc *rl);
void rlc_token_gone(struct dsecd *d, struct dsecd_sb *sb);

#endif
