/* daemon.h - the daemon's state and the modules that share it.
 *
 * One struct dsecd, owned by the loop thread: configuration, the API
 * server, the worker pool, loaded backends and the sandbox table.
 *   loader.c   backends: dlopen, ABI checks, host services
 *   sandbox.c  the sandbox table, ids, TTL and idle TTL timers
 *   ops.c      requests: parsing, dispatch, replies (ops.h); the handlers
 *              in ops-node.c, ops-sandbox.c, ops-exec.c, ops-file.c,
 *              ops-image.c and stream.c
 *   image.c    images: fs3 acquire/release on the worker pool
 *   main.c     start-up, signals, shutdown
 */
#ifndef DSECD_DAEMON_H
#define DSECD_DAEMON_H

#include <ev.h>
#include "backend.h"
#include "config.h"
#include "pool.h"
#include "server.h"

/* Bounds (seconds) of the request-duration histograms' buckets (metrics.c),
 * and one more bucket above the last. */
#define DSECD_METRIC_BUCKETS 16
extern const double dsecd_metric_buckets[DSECD_METRIC_BUCKETS];

/* A latency histogram of the metrics endpoint. */
struct dsecd_hist {
	uint64_t buckets[DSECD_METRIC_BUCKETS + 1];	/* by duration (not cumulative) */
	double sum;			/* seconds, all of them */
	uint64_t count;			/* how many */
};

/* One op's requests answered here, for the metrics. */
struct dsecd_op_stats {
	uint64_t codes[DSEC_E__COUNT];	/* by the reply's code (DSEC_E_OK: ok) */
	struct dsecd_hist h;		/* time to the reply */
};

/* What a create's time is spent on, by backend (dsec_create_phase_seconds
 * and dsec_first_exec_seconds in the metrics). */
enum dsecd_phase {
	DSECD_PHASE_IMAGE,		/* its image's layers fetched and mounted */
	DSECD_PHASE_BACKEND,		/* the backend's create */
	DSECD_PHASE_WARM,		/* a create handed a warm pool's sandbox, whole */
	DSECD_PHASE_FIRST_EXEC,		/* a create's arrival to its first command's end */
	DSECD_PHASE__COUNT
};

void dsecd_hist_observe(struct dsecd_hist *h, double secs);

struct dsecd_backend {
	char *name;			/* "fncall" */
	char *path;			/* absolute path of the .so */
	void *dl;			/* dlopen handle */
	const struct dsec_be_ops *ops;	/* its table, checked: &ops_buf */
	struct dsec_be_ops ops_buf;	/* a copy, fields past its struct_size zero */
	void *be;			/* its handle from init */
	struct dsec_be_host host;	/* services given to it */
	char *state_dir;		/* STATE_DIR/backends/NAME */
	uint32_t sandboxes;		/* sandboxes of this backend in the table */
	struct dsecd_hist phase[DSECD_PHASE__COUNT];	/* its creates' phases */
	struct dsecd_backend *next;	/* list link */
};

/* SB_FAILED: its backend reported it lost (dsec_be_host.sandbox_lost); every
 * op but info, list and destroy fails sandbox_lost until it is destroyed. */
enum dsecd_sb_state { SB_CREATING, SB_READY, SB_DESTROYING, SB_FAILED };

struct dsecd_sb {
	struct dsecd *d;		/* the daemon whose table it is in */
	char *id;			/* "NODE:SERIAL" */
	uint64_t serial;		/* the part after the colon */
	struct dsecd_backend *be;	/* its backend */
	void *handle;			/* the backend's sandbox handle */
	enum dsecd_sb_state state;	/* lifecycle */
	char *runtime;			/* runtime asked for, or NULL */
	char *image;			/* image asked for, or NULL */
	double created;			/* unix time */
	double ttl;			/* wall TTL, 0 = none */
	double idle_ttl;		/* idle TTL, 0 = none */
	double last_used;		/* loop time of the last request */
	uint64_t create_t0;		/* its create's arrival (dsec_now_ns), until its
					 * first command's reply; 0 after, or unknown */
	uint64_t execs;			/* commands run */
	uint32_t running;		/* commands running now */
	struct fs3_acquired *img;	/* its image's mounted layers, or NULL */
	struct fs3_acquired *grade_img;	/* its grade_layers, acquired at create for their
					 * top-level names (held until it is gone), or NULL */
	bool pooled;			/* in a warm pool: no request can name it */
	char **env;			/* env every exec gets (handed over from a pool) */
	char **labels;			/* its create's labels, "K=V", NULL-terminated, or NULL */
	char *cwd;			/* default cwd of execs (handed over from a pool) */
	unsigned refs;			/* table + in-flight requests */
	ev_timer ttl_timer;		/* wall TTL; once lost, the lost_grace */
	char *lost;			/* why it was lost (SB_FAILED), else NULL */
	ev_timer idle_timer;		/* idle TTL */
	struct dsecd_req *waiters;	/* the destroy request waiting for completion */
	struct dsecd_sb *hnext;		/* hash chain */
	struct dsecd_sb *anext, *aprev;	/* d->all: every entry not yet freed */
	bool paused;			/* frozen by pause until a resume completes */
	bool switching;			/* a backend pause or resume is in flight */
	struct dsecd_req *gate;		/* requests waiting for it to end, in order */
	struct dsecd_req **gate_tail;	/* where the next one goes */
	struct dsecd_req *switcher;	/* the request that started it, or NULL */
	struct dsecd_xs *streams;	/* exec_start commands not yet read to their end */
	uint32_t nstreams;		/* how many */
	uint64_t mem;			/* memory committed to it (its create's limit), bytes */
	struct rlc_log *tlog;		/* its trajectory log (rlcoord/tlog.c), or NULL */
	double ttl_left;		/* paused: what was left of its wall TTL, s (0: none) */
	struct rlc_lease *lease;	/* the lease it belongs to (rlcoord/lease.c), or NULL */
	char *token;			/* its create's client token, or NULL */
	char **grade_layers;		/* images grade stacks over its snapshot, or NULL */
	void *spec_frame;		/* its create's request, for reset and fork */
	size_t spec_len;
	char *be_id;			/* the id its backend sandbox was made with, when not id
					 * (a reset swapped it in), else NULL */
	char **watch;			/* its create's watch (paths), or NULL */
	char **watch_before;		/* their hashes when it was made (rlc_watch_hash) */
	struct dsecd_marks {		/* what its commands did that a grader wants to know */
		uint64_t oom_kills;	/* commands the OOM killer hit (memory bombs) */
		uint64_t pids_limited;	/* commands whose fork failed at the pids limit */
		uint64_t output_floods;	/* commands whose output passed its cap */
		uint64_t timeouts;	/* commands killed at their timeout */
		uint64_t protected_probes;	/* opens of its stand-ins of grade_layers'
						 * paths, lookups below them (the backend's
						 * sandbox_mark) */
	} marks;
	bool probes_counted;		/* its backend made stand-ins for its grade_layers and
					 * counts protected_probes */
	struct dsecd_stage *stages;	/* staged writes and downloads (stage.c), or NULL */
	struct dsecd_snap *snap;	/* its snapshot until the backend lets go of the
					 * copy (ops-image.c), or NULL */
};

/* A staged write or download of a sandbox (stage.c). */
struct dsecd_stage {
	struct dsecd_stage *next;	/* sb->stages */
	struct dsecd_sb *sb;		/* whose */
	char id[17];			/* what the client names it by: 16 hex digits */
	char *path;			/* write: the file it becomes; download: the archive */
	char *tmp;			/* the file in the sandbox that holds it */
	uint64_t size;			/* write: bytes its parts put in tmp */
	bool download;			/* a staged download, not a write */
	bool busy;			/* a request on it is in flight */
	bool dropped;			/* its sandbox went while busy: off sb->stages */
	ev_timer timer;			/* stage_grace after the last request on it */
};

struct fs3;
struct fs3_acquired;

struct dsec_pk;

/* Creates whose times info's percentiles are taken over. */
#define DSECD_CREATE_RING 1024

struct dsecd_metrics;

/* The machine's figures for this node's capacity (placing.c samples them
 * each second, gossip re-sends them when they changed). */
struct dsecd_sys {
	uint64_t mem_total;		/* MemTotal, bytes */
	uint64_t disk_free;		/* free bytes under state_dir */
	uint32_t load;			/* 1-minute load per core, per mille, capped at 1000 */
	uint32_t ncpu;			/* cores online */
};

/* What the node knows of another's health (gossip's view; static members
 * are alive). */
enum dsecd_member_state {
	DSECD_MEMBER_ALIVE,
	DSECD_MEMBER_SUSPECT,
	DSECD_MEMBER_DEAD,
	DSECD_MEMBER_LEFT,
};

/* A node's capacity as it gossips it (placing.c packs this node's and
 * parses the others'): what placement reads. */
#define DSECD_CAP_BACKENDS 8		/* = PLACE_BACKENDS_MAX */
#define DSECD_CAP_NAME 32		/* bytes of a backend name, NUL included */
#define DSECD_CAP_IMAGES 6		/* images a node names as local */
#define DSECD_CAP_IMAGE 49		/* bytes of one (a longer ref is cut), NUL included */
struct dsecd_cap {
	bool known;			/* parsed from its metadata (else no figures) */
	bool draining;			/* takes no new sandboxes */
	uint64_t version;		/* grows with each change it gossips */
	uint64_t sandboxes;		/* its sandboxes, those being created included */
	uint64_t max;			/* max_sandboxes */
	uint64_t calls;			/* one-shot calls running (hold a slot each) */
	uint64_t creating;		/* creates accepted, not yet finished */
	uint64_t creates;		/* creates ended since start (ok or not) */
	uint64_t mem_total;		/* the machine's memory, bytes */
	uint64_t mem_free;		/* of it, not committed to sandboxes (their memory
					 * limits), bytes: placement's memory share */
	uint64_t disk_free;		/* free bytes under state_dir */
	uint32_t load;			/* 1-minute load per core, per mille (capped at 1000) */
	uint32_t ncpu;			/* cores online */
	unsigned nbe;			/* entries of the per-backend arrays */
	char be_name[DSECD_CAP_BACKENDS][DSECD_CAP_NAME];	/* backends it offers */
	uint32_t be_used[DSECD_CAP_BACKENDS];	/* their sandboxes */
	uint32_t be_cap[DSECD_CAP_BACKENDS];	/* the room each reports: how many more it takes */
	unsigned nimages;		/* entries of images */
	char images[DSECD_CAP_IMAGES][DSECD_CAP_IMAGE];	/* images local there: its
					 * sandboxes' (as their creates named them), then
					 * those it had lately (their chunks still cached) */
	double heard;			/* loop time it arrived (a member's) */
};

/* Another node of the cluster (cluster.c). */
struct dsecd_member {
	char *name;			/* its node name, as its sandbox ids begin */
	char *url;			/* its API address */
	enum dsecd_member_state state;	/* its health */
	struct dsec_client *c;		/* connection for forwarding, NULL until used */
	uint64_t forwarded;		/* requests sent on to it */
	uint64_t failed;		/* of those, how many got no answer */
	struct dsecd_cap cap;		/* its gossiped capacity, parsed (placing.c) */
	uint64_t placed;		/* creates and calls this node placed on it */
	uint64_t refused;		/* of those, how many it refused (placed again) */
};

struct dsecd {
	struct ev_loop *loop;		/* the default loop */
	struct fs3 *images;		/* the node's image store (fs3), or NULL */
	struct dsecd_warm *warm;	/* warm pools */
	struct dsecd_conf conf;		/* settings */
	struct dsecd_server *server;	/* API endpoint */
	struct dsecd_pool *pool;	/* blocking work */
	struct dsecd_pool *serve_pool;	/* chunk_get's cache reads: never queued behind the
					 * pool's image fetches, which may wait on a peer
					 * that is asking us */
	struct dsecd_backend *backends;	/* loaded backends */
	struct dsecd_sb **buckets;	/* sandbox hash table */
	size_t nbuckets;		/* power of two */
	size_t nsandboxes;		/* entries in the table */
	unsigned calls;			/* one-shot calls in flight (count against capacity) */
	uint64_t next_serial;		/* next sandbox serial */
	unsigned ops_inflight;		/* backend operations not yet completed */
	double started;			/* loop time at start */
	double started_wall;		/* unix time at start */
	bool shutting_down;		/* SIGTERM seen */
	ev_signal sigterm, sigint;	/* shutdown */
	ev_signal sighup;		/* reopen the log file */
	char *log_path;			/* log file, NULL when logging to stderr */
	int log_fd;			/* its descriptor, -1 when none */
	ev_timer shutdown_timer;	/* polls for the end of in-flight work */
	double shutdown_deadline;	/* loop time when the grace ends */
	ev_prepare reaper;		/* frees sandboxes outside callbacks */
	struct dsecd_sb *dead;		/* sandboxes to free at the next prepare */
	struct dsecd_sb *all;		/* every sandbox not yet freed, in the table or not */
	bool (*reply_hook)(void *, struct dsecd_req *);	/* before-reply hook, or NULL */
	void *reply_hook_arg;		/* its argument */
	unsigned replies_held;		/* replies it holds now (shutdown waits for them) */
	struct dsecd_member *members;	/* the other nodes (cluster.c) */
	size_t nmembers;		/* entries in members */
	struct dsec_cq *cq;		/* forwarded requests' replies, NULL with no members */
	ev_io cq_watcher;		/* its descriptor */
	bool draining;			/* creates and calls refused (drain op) */
	uint64_t creates_ok;		/* sandboxes created since start (warm handovers too) */
	uint64_t creates_failed;	/* creates that failed */
	uint32_t create_us[DSECD_CREATE_RING];	/* the latest creates' times, µs, a ring */
	unsigned create_next;		/* where the next goes */
	uint64_t refused_full;		/* creates and calls refused: max_sandboxes */
	uint64_t refused_draining;	/* and: draining */
	struct dsecd_op_stats *op_stats;	/* per op (DSEC_OP__COUNT entries) */
	struct dsecd_metrics *metrics;	/* the metrics endpoint, or NULL */
	struct dsecd_gossip *gossip;	/* SWIM membership (gossip.c), or NULL */
	unsigned creating;		/* creates started on a backend, not yet ended */
	uint64_t mem_committed;		/* the memory limits of the sandboxes in the table */
	struct dsecd_img_use *img_use;	/* images of its sandboxes, counted (placing.c) */
	size_t nimg_use;		/* entries in img_use */
	struct place *placer;		/* placement (placing.c), NULL: every create is local */
	struct dsecd_sys sys;		/* the machine's figures, sampled each second */
	uint64_t placed_here;		/* creates and calls placement kept on this node */
	uint64_t placed_away;		/* and sent to another */
	uint64_t placed_again;		/* refusals placed again */
	uint64_t placed_none;		/* answered capacity: no node had room */
	struct rlc *rlc;		/* rlcoord (rlcoord/rlc.h), NULL before it starts */
};

extern struct dsecd *dsecd_global;

/* gossip.c: membership by SWIM (gossip_listen; none when unset) */
struct dsecd_gossip;
int dsecd_gossip_open(struct dsecd *d, struct dsec_err *err);
/* Starts a graceful leave (the others see "left"); shutdown and the
 * leave op. */
void dsecd_gossip_leave(struct dsecd *d);
/* The leave's messages are still going out (shutdown waits, bounded). */
bool dsecd_gossip_leaving(struct dsecd *d);
void dsecd_gossip_close(struct dsecd *d);
/* info's "gossip" entry (nothing without gossip). */
void dsecd_gossip_pack(struct dsecd *d, struct dsec_pk *p);
/* The member of that name made or updated: its API address (url NULL:
 * kept) and state; NULL for this node's own name. */
struct dsecd_member *dsecd_member_set(struct dsecd *d, const char *name, const char *url,
				      enum dsecd_member_state state);

/* placing.c: where a create or call runs, and the capacity gossip carries */
struct dsecd_req;
int dsecd_place_open(struct dsecd *d, struct dsec_err *err);
void dsecd_place_close(struct dsecd *d);
/* Samples d->sys (the machine's memory, disk, load); rounded so that an
 * idle node's figures do not change every second. */
void dsecd_sys_sample(struct dsecd *d);
/* The machine's 1, 5 and 15 minute load averages and its memory, total
 * and available, bytes (/proc; zeros for what cannot be read). */
void dsecd_machine_read(double load[3], uint64_t *mem_total, uint64_t *mem_avail);
/* This node's capacity now (version left 0). */
void dsecd_cap_self(struct dsecd *d, struct dsecd_cap *c);
/* Whether two capacities differ in anything but their version. */
bool dsecd_cap_differs(const struct dsecd_cap *a, const struct dsecd_cap *b);
/* c as gossip metadata (a map: the format is in placing.c), with the API
 * address others reach this node at. */
void dsecd_cap_pack(const struct dsecd_cap *c, const char *api, struct dsec_pk *p);
/* A member's metadata parsed into c (c->known false when it is not a
 * capacity this version reads); the API address it names in *api
 * (malloc'd) when api is not NULL. */
void dsecd_cap_parse(struct dsecd_cap *c, const void *meta, size_t len, char **api);
/* info's "placement" entry, into the map open in p. */
void dsecd_place_pack(struct dsecd *d, struct dsec_pk *p);
/* A sandbox of image ref came (delta 1) or went (-1): the images this
 * node names as local in its capacity. */
void dsecd_image_use(struct dsecd *d, const char *ref, int delta);

/* The version this node's next gossiped capacity carries (a create's
 * reply names it: the first that counts the create), 0 without gossip. */
uint64_t dsecd_gossip_next_version(struct dsecd *d);
/* This node's capacity as it last gossiped it (the others' view of it),
 * or NULL before the first. */
const struct dsecd_cap *dsecd_gossip_last(struct dsecd *d);

/* metrics.c: the Prometheus endpoint (metrics_listen; none when unset) */
int dsecd_metrics_open(struct dsecd *d, struct dsec_err *err);
/* Answers the scrapes queued, stops the server; before the loop ends. */
void dsecd_metrics_close(struct dsecd *d);

/* cluster.c: the other nodes, forwarding to a sandbox's owner */
int dsecd_cluster_open(struct dsecd *d, struct dsec_err *err);
/* Answers the forwarded requests in flight (unavailable) and frees the
 * table; before the API endpoint closes. */
void dsecd_cluster_close(struct dsecd *d);
struct dsecd_member *dsecd_member_find(struct dsecd *d, const char *name, size_t len);
const char *dsecd_member_state_name(enum dsecd_member_state s);
/* info's "cluster" entry, into the map open in p. */
void dsecd_cluster_pack(struct dsecd *d, struct dsec_pk *p);

/* loader.c */
int dsecd_backends_load(struct dsecd *d, struct dsec_err *err);
struct dsecd_backend *dsecd_backend_find(struct dsecd *d, const char *name);
/* "unsupported" when s sets a field appended to the spec after the one b
 * was built with (dsec_be_ops.spec_size), else 0. */
int dsecd_backend_spec_check(const struct dsecd_backend *b, const struct dsec_be_spec *s,
			     struct dsec_err *err);
void dsecd_backends_unload(struct dsecd *d);

/* stage.c: staged writes and downloads */
/* A new stage of sb (touched): a write of path (its tmp beside it) or a
 * download into the archive path; NULL and *err (capacity) when sb has
 * too many. */
struct dsecd_stage *dsecd_stage_new(struct dsecd_sb *sb, const char *path, bool download,
				    struct dsec_err *err);
/* sb's staged write id, of path unless path is NULL; NULL and *err
 * (not_found, invalid for another path, busy while a part is in flight). */
struct dsecd_stage *dsecd_stage_find(struct dsecd_sb *sb, const char *id, const char *path,
				     struct dsec_err *err);
/* sb's staged download whose archive is path, or NULL. */
struct dsecd_stage *dsecd_stage_of_file(struct dsecd_sb *sb, const char *path);
/* A request used st: its stage_grace starts again. */
void dsecd_stage_touch(struct dsecd_stage *st);
/* Forgets st (and frees it), removing its file first when remove. */
void dsecd_stage_end(struct dsecd_stage *st, bool remove);
/* sb is being destroyed: forgets its stages (those busy when their
 * request completes). */
void dsecd_stages_drop(struct dsecd_sb *sb);
/* How many stages sb has. */
unsigned dsecd_stages_count(const struct dsecd_sb *sb);

/* ops-image.c: the file of a stage begun while sb's snapshot s is being
 * copied is left out of it, as those of the stages before it are. */
struct dsecd_snap;
void dsecd_snap_skip(struct dsecd_snap *s, const char *path);

/* sandbox.c */
void dsecd_sb_table_init(struct dsecd *d);
/* At exit, after the backends are gone: frees every sandbox left, in the
 * table or not (a backend stopped before it completed their create or
 * destroy). */
void dsecd_sb_table_free(struct dsecd *d);
/* Makes an entry in SB_CREATING, in the table, with one ref. */
struct dsecd_sb *dsecd_sb_new(struct dsecd *d, struct dsecd_backend *be);
/* Looks up id; NULL and *err (not_found) if absent or not this node's. */
struct dsecd_sb *dsecd_sb_find(struct dsecd *d, const char *id, struct dsec_err *err);
/* The table's entry of exactly id, pooled ones too; NULL if none. */
struct dsecd_sb *dsecd_sb_lookup(struct dsecd *d, const char *id);
/* Starts TTL timers; marks ready. */
void dsecd_sb_ready(struct dsecd *d, struct dsecd_sb *sb);
/* sb was paused or resumed (sb->paused says which): a paused sandbox's
 * wall TTL stops, what was left of it runs again on resume. */
void dsecd_sb_paused(struct dsecd *d, struct dsecd_sb *sb);
/* A request used the sandbox: restart its idle timer.  A paused sandbox
 * is never idle (the idle timer only looks again later) and its wall TTL
 * is stopped (dsecd_sb_paused). */
void dsecd_sb_touch(struct dsecd *d, struct dsecd_sb *sb);
/* A command of sb completed with res: counts what it did in sb->marks. */
void dsecd_sb_mark(struct dsecd_sb *sb, const struct dsec_exec_res *res);
/* Packs sb->marks as the map "misbehaviour" into the open map p, with
 * egress_denied and seccomp_denied too where the backend's usage u (NULL:
 * none) measured them. */
void dsecd_sb_pack_marks(const struct dsecd_sb *sb, struct dsec_pk *p,
			 const struct dsec_be_usage *u);
void dsecd_sb_ref(struct dsecd_sb *sb);
void dsecd_sb_unref(struct dsecd *d, struct dsecd_sb *sb);
/* Removes from the table, stops timers, asks the backend to destroy it
 * (when it has a handle), drops the table's ref.  reason is logged. */
void dsecd_sb_destroy(struct dsecd *d, struct dsecd_sb *sb, const char *reason,
		      struct dsecd_req *waiter);
/* Its backend says sb died on its own: it becomes SB_FAILED (why is kept
 * for its errors) and is destroyed after lost_grace.  Never calls the
 * backend from inside. */
void dsecd_sb_lost(struct dsecd *d, struct dsecd_sb *sb, const char *why);
/* The error every op on a lost sandbox gets (sandbox_lost); returns -EOWNERDEAD. */
int dsecd_sb_lost_err(const struct dsecd_sb *sb, struct dsec_err *err);
/* Calls fn on every sandbox (safe against removal during the walk). */
void dsecd_sb_foreach(struct dsecd *d, void (*fn)(struct dsecd *, struct dsecd_sb *, void *),
		      void *arg);

/* image.c */
typedef void (*dsecd_image_done_fn)(void *arg, struct fs3_acquired *a, int rc,
				    const struct dsec_err *err);
/* Opens the store (image_store, default STATE_DIR/fs3) as its mounter. */
int dsecd_images_open(struct dsecd *d, struct dsec_err *err);
void dsecd_images_close(struct dsecd *d);
/* With gossip: the image store's peers become the alive members (their
 * API addresses), at most FS3_PEERS_MAX of them; after each change. */
void dsecd_images_peers(struct dsecd *d);
/* What dsecd_image_acquire finds of a create's grade_layers. */
struct dsecd_grade {
	struct fs3_acquired *img;	/* the grade images, held (the caller's), or NULL
					 * when they could not be acquired (logged) */
	char **protect;			/* their layers' top-level entries, "d/NAME" or
					 * "f/NAME" (dsec_be_spec.protect; the caller's),
					 * or NULL with img */
};
/* The most entries of dsecd_grade.protect (the first by name). */
#define DSECD_PROTECT_MAX 64
/* Acquires image ref on the pool, with the images of extras (NULL or a
 * NULL-terminated vector, bottom first; copied) stacked over it (see
 * fs3_image_acquire_stack), with devs its layers as loop devices too
 * (fs3_acquired_devs); done(arg, a, 0, NULL) on the loop with the
 * caller owning a, or done(arg, NULL, -errno, err).  With grade (NULL or
 * a NULL-terminated vector of images; copied) also those images, stacked
 * in the same way, into *gout, which the caller keeps until done; a
 * failure of theirs only leaves *gout empty.  Returns 0 or -errno with
 * *err (done is then not called). */
int dsecd_image_acquire(struct dsecd *d, const char *ref, char *const *extras, bool devs,
			char *const *grade, struct dsecd_grade *gout, dsecd_image_done_fn done,
			void *arg, struct dsec_err *err);
/* Gives a back (on the pool); NULL is a no-op.  Takes ownership. */
void dsecd_image_release(struct dsecd *d, struct fs3_acquired *a);
/* Points spec at a's layers, env (a's env, then cenv), cwd and user (unless
 * spec has them); returns the env vector, which the caller frees after the
 * backend's create. */
char **dsecd_image_spec(struct dsec_be_spec *spec, struct fs3_acquired *a, char *const *cenv);

/* warm.c: warm pools (config key "pool") */
struct dsecd_warm;
struct dsec_pk;
/* Parses conf.pool and starts filling the pools; after the backends load. */
int dsecd_warm_start(struct dsecd *d, struct dsec_err *err);
/* A ready pooled sandbox of be and image, no longer pooled, or NULL. */
struct dsecd_sb *dsecd_warm_take(struct dsecd *d, struct dsecd_backend *be, const char *image);
/* A pooled sandbox is being destroyed: drop it from its pool. */
void dsecd_warm_forget(struct dsecd *d, struct dsecd_sb *sb);
/* Packs "pools": [...] for info. */
void dsecd_warm_pack(struct dsecd *d, struct dsec_pk *p);
void dsecd_warm_free(struct dsecd *d);

/* ops.c, ops-*.c, stream.c */
void dsecd_handle(void *arg, struct dsecd_conn *conn, const void *frame, size_t len);
/* The before-reply hook.  Every reply, ok or error, of every op goes out
 * through one function (req_complete in ops.c), which packs it and then
 * calls fn(arg, r) on the loop, r's reply packed (dsecd_req_reply) and r's
 * sandbox still held.  fn returns false to let it go at once, or true to
 * hold it: r then waits, its client unanswered and its request counted in
 * flight, until fn's owner calls dsecd_req_release(r) on the loop, which
 * sends the reply and frees r.  This is where the trajectory log makes its
 * entry durable before the client sees the result: it appends each held
 * reply's entry to a batch, writes and fsyncs the batch on the pool once
 * per loop iteration (an ev_prepare, as redis flushes its AOF from
 * beforeSleep), then releases the batch's replies in order.  Shutdown waits
 * for held replies (replies_held) as for backend operations; whoever holds
 * one must release it.  One hook per daemon; NULL fn removes it. */
typedef bool (*dsecd_reply_hook_fn)(void *arg, struct dsecd_req *r);
void dsecd_reply_hook_set(struct dsecd *d, dsecd_reply_hook_fn fn, void *arg);
void dsecd_req_release(struct dsecd_req *r);
/* What a hook may look at: r's op (its name on the wire), the sandbox it
 * works on (or NULL) and its packed reply. */
const char *dsecd_req_op(const struct dsecd_req *r);
struct dsecd_sb *dsecd_req_sandbox(const struct dsecd_req *r);
const void *dsecd_req_reply(const struct dsecd_req *r, size_t *len);
/* Replies to a destroy waiter once its sandbox is gone. */
void dsecd_req_destroyed(struct dsecd *d, struct dsecd_req *r);
/* sb is being destroyed: frees its exec_start streams that have exited
 * (the backend's destroy ends the others, which are freed then). */
void dsecd_streams_drop(struct dsecd *d, struct dsecd_sb *sb);
/* A re-sent exec_start step was answered from the log with the stream
 * named name (n bytes): if it is still here, its next exec_read starts
 * from its first byte again (rlcoord/tlog.c). */
void dsecd_stream_rewind(struct dsecd_sb *sb, const char *name, size_t n);

#endif
