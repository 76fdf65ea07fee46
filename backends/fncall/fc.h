/* fc.h - the fncall backend's private header: its configuration, the
 * state of the backend, a runtime (its zygotes), a call and a sandbox,
 * and the functions its files (fncall.c, call.c, zygote.c) share.  See
 * fncall.c for how it works.
 */
#ifndef FC_H
#define FC_H

#include <dirent.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "be_child.h"
#include "be_conf.h"
#include "be_io.h"
#include "be_cgroup.h"
#include "be_task.h"
#include "be_fncall.h"
#include "be_fs.h"
#include "log.h"
#include "proto.h"
#include "util.h"

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif

#define FC_DEFAULT_CAP (1u << 20)	/* output_cap 0 */
#define FC_GRACE 1.0			/* s to wait for pipe EOF after the exit */
#define FC_KILL_GRACE 5.0		/* s to wait for the zygote after a kill */

/* ---- configuration ------------------------------------------------------ */

/* Zygotes per runtime when fncall.zygotes is 0 (auto). */
#define FC_AUTO_ZYGOTES 8
/* Largest fncall.uids (the zygotes' /etc/passwd lists every one), and the
 * seconds a uid rests after a call that was cut off (see uid_take). */
#define FC_UIDS_MAX 65536
#define FC_UID_COOL 10.0

struct fc_conf {
	char *runtimes;		/* "sh,python3" */
	uint64_t pool_size;	/* warm units per runtime */
	uint64_t memory;	/* bytes per call */
	double cpus;		/* cores per call */
	uint64_t pids;		/* tasks per call */
	uint64_t nofile;	/* RLIMIT_NOFILE per call */
	uint64_t scratch;	/* bytes of /tmp per call and of a sandbox scratch */
	uint64_t uid_base;	/* first uid (and gid) of the tenants' range */
	uint64_t uids;		/* how many: one per sandbox and per one-shot call */
	uint64_t max_running;	/* calls in flight before "capacity" */
	double timeout;		/* seconds when a request gives none */
	uint64_t zygotes;	/* zygotes per runtime, each pinned to a CPU; 0 = auto */
};

/* A runtime this backend can run: a row of rt_table (fncall.c). */
struct fc_rtdesc {
	const char *name;	/* runtime name in requests */
	const char *kind;	/* "c": exec per call; "py": python template */
	const char *exe;	/* interpreter */
};

/* ---- state -------------------------------------------------------------- */

struct fc_be;
struct fc_sb;

/* A datagram waiting for room in the zygote socket. */
struct fc_out {
	void *data;		/* bytes (owned) */
	size_t len;		/* length */
	int fds[FC_MAX_FDS];	/* descriptors to pass (owned) */
	int nfds;		/* how many */
	uint64_t job;		/* id of the job it carries, 0 for other messages */
	struct fc_out *next;	/* FIFO */
};

/* One runtime and its zygote. */
struct fc_rt {
	struct fc_be *be;		/* backend */
	const struct fc_rtdesc *desc;	/* table row */
	struct be_cg *cg;		/* its cgroup (zygote + u<N> below) */
	pid_t pid;			/* zygote, 0 when down */
	int sock;			/* socket to it, -1 when down */
	ev_io rw;			/* readable */
	ev_io ww;			/* writable, while out is not empty */
	struct be_child cw;		/* zygote exit */
	ev_timer respawn;		/* backoff before restarting it */
	double backoff;			/* current backoff */
	bool up;			/* its "ready" came since it was started */
	bool failing;			/* it died (or could not start) before saying
					 * ready: calls fail at once until one does */
	bool sc;			/* it counts the calls its filter refuses: each
					 * "done" says how many ("sc"), as its "ready" said */
	struct fc_out *out, **out_tail;	/* queued datagrams */
	uint32_t ready;			/* warm units, as last reported */
	uint32_t inflight;		/* calls running on this zygote */
	int cpu;			/* CPU it and its units are pinned to, -1 = none */
	struct fc_rt *next;		/* be->rts */
};

/* One command in flight. */
struct fc_call {
	struct fc_be *be;		/* backend */
	struct fc_rt *rt;		/* runtime it runs on */
	struct fc_sb *sb;		/* sandbox, NULL for call() */
	uint64_t id;			/* job id */
	uint32_t uid;			/* uid and gid it runs as */
	struct dsec_exec_res *res;	/* caller's result */
	dsec_be_done_fn done;		/* caller's callback */
	void *arg;			/* its argument */
	size_t cap;			/* output cap per stream */
	int out_fd, err_fd;		/* pipe read ends, -1 at EOF */
	ev_io out_w, err_w;		/* their watchers */
	ev_timer timer;			/* timeout, then kill/EOF grace */
	uint64_t t0;			/* start, ns */
	bool sent;			/* its job is in the zygote's socket (not queued) */
	bool exited;			/* zygote reported the status */
	bool ended;			/* zygote reported the end (status or error):
					 * no process of the call is left */
	bool killed;			/* kill sent (timeout or cancel) */
	bool finished;			/* result decided, waiting to be reaped */
	int rc;				/* result for done */
	struct dsec_err err;		/* why, when rc < 0 */
	struct fc_call *next, *prev;	/* be->calls, while in flight */
	struct dsec_be_defer reap;	/* host->defer's, once finished (call_reap) */
	struct fc_call *sb_next;	/* sb->calls */
};

/* A sandbox: a runtime plus a scratch tmpfs on the host. */
struct fc_sb {
	struct fc_be *be;		/* backend */
	struct fc_rt *rt;		/* runtime */
	char *id;			/* sandbox id */
	char *dir;			/* host path of the scratch mount */
	int dirfd;			/* O_PATH fd of its root, -1 until made */
	char **env;			/* "K=V" from create */
	char *cwd;			/* default cwd inside, NULL = /work */
	struct dsec_be_limits lim;	/* limits from create */
	uint32_t uid;			/* uid and gid of its calls and files (a tenant's own) */
	double uid_cool;		/* dsec_now() before which its uid may not be reused */
	struct fc_call *calls;		/* execs in flight */
	unsigned nops;			/* file operations in flight */
	uint64_t sc_denied;		/* calls the filter refused for its commands */
	bool sc_lost;			/* a command ran where nothing counts: usage
					 * says no count rather than a short one */
	bool destroying;		/* destroy() called */
	struct dsec_be_defer dlater;	/* host->defer of destroy's done without a pool */
	dsec_be_done_fn ddone;		/* destroy's callback */
	void *darg;			/* and argument */
	struct fc_sb *next;		/* be->sbs */
};

struct fc_be {
	const struct dsec_be_host *host;	/* daemon services */
	struct fc_conf conf;		/* parsed config */
	struct be_cg *cg;		/* "dsec-fncall.<pid>" */
	struct fc_rt *rts;		/* working runtimes, first = default */
	struct be_reaper reap;		/* killed zygotes */
	struct fc_sb *sbs;		/* live sandboxes */
	struct fc_call *calls;		/* in flight */
	uint64_t next_id;		/* job ids */
	uint64_t next_sb;		/* scratch dir names */
	unsigned nshards;		/* zygotes per runtime */
	unsigned rr;			/* rt_find's turn among equally busy zygotes */
	uint32_t running;		/* calls in flight */
	uint32_t nsbs;			/* sandboxes */
	uint64_t ncalls;		/* completed */
	struct be_tasks tasks;		/* work on dsecd's pool */
	double *uid_free;		/* per uid of the range: 0 free, INFINITY taken,
					 * else free from that dsec_now() on */
	uint32_t uid_lo;		/* no uid below this one is free */
	bool shutting;			/* the daemon is stopping (shutdown op) */
	bool stopping;			/* fini started */
};

#define LOG(be, lvl, ...) ((be)->host->log((lvl), __VA_ARGS__))

/* ---- fncall.c ---- */

int uid_take(struct fc_be *be, uint32_t *uid, struct dsec_err *err);
void uid_put(struct fc_be *be, uint32_t uid, double cool);
void list_del(struct fc_call **head, struct fc_call *c);
void list_add(struct fc_call **head, struct fc_call *c);
void call_reap(struct dsec_be_defer *d, bool cancelled);

/* ---- call.c ---- */

void call_close(struct fc_call *c);
void call_finish(struct fc_call *c, int rc);
void send_kill(struct fc_call *c);
void call_report(struct fc_be *be, const msgpack_object *m);
int call_start(struct fc_be *be, struct fc_rt *rt, struct fc_sb *sb,
	       const struct dsec_be_spec *spec, const struct dsec_exec_req *req,
	       struct dsec_exec_res *res, dsec_be_done_fn done, void *arg,
	       struct dsec_err *err);

/* ---- zygote.c ---- */

void out_free(struct fc_out *o);
bool rt_send(struct fc_rt *rt, struct dsec_pk *p, int *fds, int nfds, uint64_t job);
void rt_drop_out(struct fc_rt *rt);
uint64_t rt_pool(const struct fc_be *be);
int rt_spawn(struct fc_rt *rt, struct dsec_err *err);
void rt_kill(struct fc_rt *rt);
void respawn_cb(struct ev_loop *loop, ev_timer *w, int revents);
int rt_wait_ready(struct fc_rt *rt, struct dsec_err *err);
struct fc_rt *rt_find(struct fc_be *be, const char *name);

#endif
