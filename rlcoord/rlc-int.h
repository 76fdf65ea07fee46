/* rlc-int.h - what the files of rlcoord share (not dsecd's). */
#ifndef DSEC_RLC_INT_H
#define DSEC_RLC_INT_H

#include <ev.h>

struct dsecd;
struct dsecd_req;
struct dsecd_sb;
struct dsec_err;

#define RLC_TOKEN_BUCKETS 1024

/* A create's client token (token.c). */
struct rlc_token {
	struct rlc_token *next;		/* hash chain */
	char *token;
	char *id;			/* the sandbox it made, NULL while making */
	struct dsecd_req *maker;	/* the create making it, or NULL */
	struct dsecd_req *waiters;	/* creates sent again meanwhile (r->rl_next) */
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
	uint64_t batch_ns;		/* the writer's time on batches, in all */
	uint64_t sync_ns;		/* of it, on open, write, fdatasync and close */
	struct ZSTD_CCtx_s *zc;		/* the writer's compressor */
	struct rlc_journal *journal;	/* the writer's */
	ev_timer sweep_timer;		/* removes logs older than trajectory_keep */
	bool sweeping;			/* a sweep is on the writer */
	uint64_t swept;			/* logs it removed */
	/* token.c */
	struct rlc_token *tokens[RLC_TOKEN_BUCKETS];
	size_t ntokens;
	uint64_t tokens_reused;		/* creates answered by their token */
	/* lease.c */
	struct rlc_lease *leases;
	size_t nleases;
	uint64_t leases_lapsed, leases_expired;
};

/* FNV-1a of n bytes folded to 32 bits: a record's check. */
uint32_t rlc_check(const void *p, size_t n);
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

struct rlc_lease *rlc_lease_find(struct rlc *rl, const char *id);
void rlc_leases_free(struct rlc *rl);
void rlc_tokens_free(struct rlc *rl);
void rlc_token_gone(struct dsecd *d, struct dsecd_sb *sb);

#endif
