/* ct.h - the container backend's private header: its configuration,
 * the state of the backend, a sandbox and a command, and the functions
 * its files (container.c, spawn.c, create.c, exec.c, stream.c, files.c,
 * control.c, sessions.c) share.  See container.c for how it works.
 */
#ifndef CT_H
#define CT_H

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <linux/securebits.h>
#include <net/if.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "be_child.h"
#include "be_conf.h"
#include "be_io.h"
#include "be_seccomp.h"
#include "ct_exec.h"
#include "be_cgroup.h"
#include "be_netpol.h"
#include "be_task.h"
#include "be_fs.h"
#include "be_session.h"
#include "log.h"
#include "util.h"

#define CT_HELPER "container-init"
#define CT_PRELOAD "container-preload.so"
#define CT_FILES "container-files"
#define CT_DEFAULT_CAP (1u << 20)	/* output_cap 0 */
#define CT_GRACE 1.0			/* s to wait for pipe EOF after the exit */
#define CT_KILL_GRACE 5.0		/* s to wait for the status after a kill */
#define CT_CREATE_TIMEOUT 30.0		/* s for the helper to build a sandbox */
#define CT_FINI_REAP_NS (10 * 1000000000ULL)	/* at fini, for the inits to be reaped */
#define CT_ALONE_WAIT_NS (50 * 1000000ULL)	/* before a kill, for inits' threads to end */
#define CT_LOWER_MAX 3000		/* bytes of lowerdir= (overlay options fit a page) */
#define CT_URANGE 65536u		/* uids (and gids) of one sandbox's user namespace */
/* From one sandbox's range to the next: 128 more than a range, so that
 * their first uids (the namespaces' owners, and root inside) fall into
 * every chain of the kernel's hash of users (128 chains, (uid >> 7) + uid),
 * not all in one: with ranges 65536 apart every setresuid to one walked a
 * chain of every sandbox's, 0.85 ms of a create at 10,000 sandboxes. */
#define CT_USTRIDE (CT_URANGE + 128u)
#define CT_MAX_LAYERS 64		/* layers of one image */
#define CT_FREEZE_TIMEOUT_MS 2000	/* ms pause waits for the kernel to freeze */
#define CT_FD_UPPER 3			/* the init's fd of the upper dir (container-init) */
#define CT_CG_KEEP 64			/* emptied sandbox cgroups kept for new sandboxes */
#define CT_CG_TRIM_AFTER 10.0		/* s after which those beyond are removed */
#define CT_CG_KEEP_LEFT (16ull << 20)	/* ... when they hold no more memory than this */
#define CT_SLOTS 20			/* spawn slots: 16 fds, 2 pipes, /dev/null */
#define CT_BASE_WATCHES 3		/* directories of the host the base holds files of */
#define CT_NET_KEEP 64			/* network namespaces kept for new sandboxes */
#define CT_NET_LOOK 8			/* ... looked at by one create at most */
#define CT_NET_STALE 120.0		/* s after which one still in use is dropped */
#define CT_NET_BURY_QUIET 0.2		/* s without a destroy before those to drop go */
#define CT_NET_BURY_MAX 4096		/* ... or once this many are held */
#define CT_NETPROC_USES 256		/* namespaces set through one proc (netpool.c) */
#define CT_CKPT_STOP_MAX 10.0		/* s a checkpoint's processes wait for the snapshot */
/* The floors of a sandbox's limits (requests and config alike): below
 * them a sandbox cannot do its work (pids: the init and its watcher
 * thread, the warm shell's template and its child, a command; nofile:
 * stdio and a few more), and a CPU quota below 1 ms per 100 ms period the
 * kernel refuses. */
#define CT_MIN_MEMORY (8ull << 20)
#define CT_MIN_DISK (1ull << 20)
#define CT_MIN_PIDS 5
#define CT_MIN_NOFILE 16
#define CT_MIN_CPUS 0.01
/* The writable layer is a tmpfs, and what is written there is charged to
 * the sandbox's memory: the disk may take the memory limit less this, so
 * that a full disk leaves room for the init and a small command and the
 * OOM killer has a command to pick rather than nothing. */
#define CT_MEM_RESERVE (4ull << 20)

/* ---- configuration ------------------------------------------------------ */

struct ct_conf {
	char *rootfs;		/* lower layer directory, "" = assembled from the host */
	uint64_t disk;		/* bytes of the upper dir */
	uint64_t memory;	/* bytes per sandbox */
	double cpus;		/* cores per sandbox */
	uint64_t pids;		/* tasks per sandbox */
	uint64_t nofile;	/* RLIMIT_NOFILE per command */
	uint64_t uid;		/* uid commands run as inside */
	uint64_t gid;		/* gid commands run as inside */
	uint64_t max_sandboxes;	/* sandboxes before "capacity" */
	double timeout;		/* seconds when a request gives none */
	char *network;		/* "none" or "allowlist" when a request gives none */
	char *bridge;		/* the node's bridge for allowlisted sandboxes */
	char *subnet;		/* its IPv4 subnet */
	char *host_port;	/* "PORT[/PROTO]" of the gateway sandboxes may reach, "" = none */
	bool userns;		/* root inside is an unprivileged uid range outside */
	uint64_t uid_base;	/* first host uid of those ranges */
	uint64_t max_sessions;	/* shell sessions open at once per sandbox */
	bool warm_shell;	/* keep a shell template in busy sandboxes (ct_exec.h) */
	bool base_ns;		/* clone the inits from a base namespace (basens.c) */
	bool net_reuse;		/* give a destroyed sandbox's network namespace to another */
	uint64_t ptys;		/* terminals of one sandbox's devpts at once */
	char *criu;		/* criu's path (fork with processes), "" = none */
};
/* ---- state -------------------------------------------------------------- */

struct ct_be;

struct ct_exec;

/* A done callback waiting for the reaper (never called inside an op). */
struct ct_pending {
	struct dsec_be_defer node;	/* host->defer's */
	struct ct_be *be;		/* backend */
	dsec_be_done_fn done;		/* caller's */
	void *arg;			/* its argument */
	int rc;				/* 0 or -errno */
	struct dsec_err err;		/* why, when rc < 0 */
	struct ct_exec *x;		/* an ended command, freed after done (its handle
					 * is the caller's until then), or NULL */
};

/* A destroyed sandbox's cgroup, emptied and kept for a new sandbox: the
 * kernel's removal of a memory cgroup walks every list_lru of the host (two
 * per mounted file system, a dozen per sandbox), so each removal costs
 * more the more sandboxes the node holds (create.c). */
struct ct_cgkeep {
	struct be_cg *cg;		/* the group (closed) */
	struct be_cg *spare;		/* its kept command group, or NULL */
	uint64_t next_x;		/* command group names used below it */
	uint64_t since;			/* when it was kept, dsec_now_ns */
	bool peak_reset;		/* its memory peak counts from 0 again */
};

/* A destroyed sandbox's network namespace, kept for a new one (netpool.c). */
struct ct_netkeep {
	int fd;				/* the namespace */
	uint64_t since;			/* when it was kept, dsec_now_ns */
};

/* A cgroup shared by an exec and the pool work killing it. */
struct ct_cgref {
	struct be_cg *cg;		/* the group */
	int refs;			/* holders; freed (loop) at 0 */
};

struct ct_sb {
	struct ct_be *be;		/* backend */
	struct ct_sb *next;		/* be->sbs */
	struct ct_sb **pprev;		/* what points at it there, NULL once out */
	char *id;			/* sandbox id */
	char *dir;			/* state_dir/sb.N (empty on the host) */
	uint64_t serial;		/* the N */
	char **env;			/* create env, NULL-terminated */
	char *cwd;			/* default working directory */
	char *lower;			/* the image's layers joined by ':', NULL = rootfs */
	char *deny;			/* seccomp_deny joined by ',', NULL = none */
	uint64_t uid, gid;		/* ids commands run as */
	int uslot;			/* its uid range (userns), -1 = none */
	uint32_t ubase;			/* host uid of root inside (0 without userns) */
	char **layers;			/* the image's layer dirs, top first, or NULL */
	bool skel;			/* default root over the shared skeleton */
	bool net_allow;			/* network "allowlist" (else loopback only) */
	struct be_net_rule *rules;	/* the allowlist now in force */
	size_t nrules;			/* entries in rules */
	uint32_t dns;			/* allowed resolver, host order, 0 = none */
	uint32_t ip;			/* address on the bridge, 0 = none yet */
	char host_if[IFNAMSIZ];		/* host end of the veth, "" = none */
	bool net_ready;			/* its allowlist filter is in force */
	bool net_changed;		/* dsecd set up an allowlist in its namespace */
	bool net_pooled;		/* its network namespace is the backend's (netpool.c) */
	int netns;			/* that namespace from the create's prep to the clone,
					 * and from the destroy to its return; else -1 */
	bool kill_failed;		/* its processes survived the destroy's kill */
	struct dsec_be_limits lim;	/* limits asked for, disk the one made */
	uint32_t cpu_weight;		/* and the CPU weight, 0 = default */
	struct be_cg *cg;		/* the sandbox's group */
	pid_t helper;			/* container-init: the sandbox's pid 1 */
	pid_t init;			/* the same, once it reported ready */
	pid_t alone_pid;		/* destroy: the init to wait for (ct_wait_alone) */
	uint64_t init_start;		/* its start time (ct_init_check), 0 = none or gone */
	int ctl;			/* commands to the init (ct_exec.h), -1 = none */
	int filter_fd;			/* its own filter (seccomp_deny), compiled, or -1 */
	int st_fd;			/* create status pipe */
	struct dsec_buf st;		/* its bytes */
	ev_io st_w;			/* on st_fd */
	ev_timer ctimer;		/* create timeout */
	ev_io ctl_w;			/* ctl, for the init's end closing (init_watch) */
	struct be_child cw;		/* its init (the create helper), once ctl closed */
	dsec_be_done_fn cdone;		/* create's */
	void *carg;			/* its argument */
	bool ready;			/* create completed */
	bool destroying;		/* destroy called */
	unsigned busy;			/* execs (incl. cleanup) and file ops */
	struct ct_exec *execs;		/* running */
	dsec_be_done_fn ddone;		/* destroy's */
	void *darg;			/* its argument */
	uint64_t next_x;		/* exec cgroup names */
	struct ct_cgref *spare;		/* an emptied exec group kept for the next exec */
	bool keeping;			/* a cleanup will keep its group as spare */
	bool cg_kept;			/* cg was another sandbox's (struct ct_cgkeep) */
	bool cg_peak;			/* ... and its memory peak is this sandbox's */
	uint64_t cg_cpu0;		/* ... and the CPU time it had then, ns */
	uint64_t cg_oom0;		/* ... and its OOM kills */
	struct be_cg *keep_spare;	/* the spare, to keep with cg at its destroy */
	bool paused;			/* pause began and no resume has completed */
	bool switching;			/* a pause or resume is on a pool thread */
	uint64_t paused_at;		/* when the pause began, ns */
	struct ct_xclean *held;		/* exec cleanups waiting for the thaw */
	struct be_sess_set *sess;	/* shell sessions, made at the first open */
	bool snapping;			/* a snapshot holds it frozen */
	bool lost;			/* its init died on its own: dsecd was told */
	struct ct_fwork *fwait;		/* file ops waiting for the snapshot's end or their turn */
	bool fbusy;			/* a file op is on a pool thread (one at a time) */
	struct ct_pwork *pause_wait;	/* a pause waiting for the file ops to end */
	int fsock;			/* the file server's socket (container-files), -1 = none */
	struct ct_fsd *fsd;		/* that server while it runs, NULL = reaped or none */
	bool sc_on;			/* its init counts refused system calls (ct_exec.h) */
	uint64_t sc_init;		/* the most its init reported of them */
	uint64_t sc_helpers;		/* and the exec helpers (their commands' own) */
	char **protect;			/* spec.protect (probe.c), NULL = none or given up */
	struct ct_probe **probes;	/* its stand-ins (probe.c) */
	size_t nprobes;			/* their number */
	const char *restore_from;	/* the next session's shell is restored from this
					 * checkpoint (criu.c), not started; NULL = started */
	struct ct_ckpt *ckpt;		/* a checkpoint or restore in progress, or NULL */
	int *stopped;			/* pidfds of what a checkpoint left stopped, continued
					 * when the next snapshot ends (criu.c) */
	unsigned nstopped;		/* their number */
	ev_timer cont_w;		/* ... or after CT_CKPT_STOP_MAX */
};

struct ct_exec {
	struct ct_sb *sb;		/* sandbox */
	struct ct_exec *next;		/* sb->execs */
	struct dsec_exec_res *res;	/* caller's */
	dsec_be_done_fn done;		/* caller's */
	void *arg;			/* its argument */
	struct ct_cgref *cg;		/* per-exec group */
	uint64_t oom0;			/* the sandbox's OOM kill count before the exec */
	uint64_t forkf0;		/* the group's failed forks before it (be_cg_fork_fails) */
	pid_t pid;			/* helper */
	int out_fd, err_fd, st_fd;	/* our ends, -1 at EOF */
	ev_io out_w, err_w, st_w;	/* on them */
	ev_timer timer;			/* timeout, then grace */
	struct be_child cw;		/* helper */
	struct dsec_buf st;		/* status bytes */
	size_t cap;			/* output cap */
	uint64_t t0;			/* start, ns (moved on by time spent paused) */
	double left;			/* while paused: seconds left on timer, < 0 none */
	bool reaped;			/* helper reaped (or no ev_child) */
	bool reported;			/* a counting helper wrote its last status line */
	bool killed;			/* cgroup kill sent */
	bool finished;			/* result decided */
	struct ct_xstream *stream;	/* exec_start's extras, NULL for exec */
};

struct ct_be {
	const struct dsec_be_host *host;	/* daemon services */
	struct ct_conf conf;		/* configuration */
	struct be_cg *cg;		/* dsec-container.<pid> */
	struct be_reaper reap;		/* children nobody waits for */
	struct ct_sb *sbs;		/* live sandboxes */
	uint32_t nsbs;			/* their number */
	uint32_t running;		/* execs in flight */
	uint64_t ncalls;		/* execs completed */
	uint64_t next_sb;		/* sandbox dir names */
	bool stopping;			/* fini started */
	struct be_bridge br;		/* allowlisted sandboxes' bridge (up on first use) */
	uint8_t *uslots;		/* uid ranges in use, a bit per max_sandboxes */
	uint64_t uslot_next;		/* where the search for a free one starts */
	pthread_mutex_t br_lock;	/* serialises bringing it up */
	struct be_tasks tasks;		/* work on dsecd's pool */
	char *skel;			/* the default root's shared skeleton, NULL = none */
	int filter_fd;			/* commands' seccomp filter, compiled (memfd), or -1 */
	int preload_fd;			/* container-preload.so for the inits, or -1 */
	struct ct_fsd *fsds;		/* file servers not reaped yet */
	pthread_mutex_t keep_lock;	/* guards keep and nkeep (pool threads) */
	struct ct_cgkeep *keep;		/* cgroups of destroyed sandboxes, oldest first */
	unsigned nkeep, capkeep;	/* entries of keep, and room */
	ev_timer trim_w;		/* removes those beyond CT_CG_KEEP (cg_trim) */
	bool trimming;			/* a removal is on the pool */
	char *sys;			/* the sandboxes' shared /sys, NULL = none */
	char *criu_run;			/* criu's /run (ct_criu_up), NULL = none */
	int home_fd;			/* the loop thread's working directory (enter_dir) */
	int base_ns, host_ns;		/* the base mount namespace, ours (basens.c), or -1 */
	int base_watch;			/* inotify of what the base holds of the host, or -1 */
	int base_wd[CT_BASE_WATCHES];	/* its watches: /, /etc, /dev */
	uint64_t base_builds;		/* base namespaces made since start */
	bool base_stale;		/* it lost a file and could not be made again */
	int slot0;			/* CT_SLOTS fds kept for spawns (spawn.c), -1 = none */
	int host_net;			/* our network namespace (netpool.c), -1 = no pool */
	pthread_mutex_t net_lock;	/* guards nets and nnets (pool threads) */
	struct ct_netkeep nets[CT_NET_KEEP];	/* namespaces kept, oldest first */
	unsigned nnets;			/* entries of nets */
	bool net_port_warned;		/* said that low ports cannot be opened to all */
	int *buried;			/* namespaces to drop together (netpool.c) */
	unsigned nburied, capburied;	/* entries of buried, and room */
	ev_timer bury_w;		/* drops them when destroys stop coming */
	pthread_mutex_t netproc_lock;	/* guards netproc and netproc_uses */
	char *netproc;			/* our proc for the namespaces' sysctl, NULL = /proc */
	unsigned netproc_uses;		/* namespaces set through it since it was mounted */
	bool oom_warned;		/* said that inits cannot be exempted from the OOM killer */
	bool owner_warned;		/* said that user namespaces cannot be given owners */
	struct ct_pfs *pfs;		/* the stand-ins' file system (probe.c), NULL until the
					 * first sandbox with stand-ins */
	pthread_mutex_t pfs_lock;	/* guards starting it (pool threads) */
	ev_async probe_async;		/* its thread: stand-ins were probed (probe.c) */
};

#define LOG(be, lvl, ...) ((be)->host->log((lvl), __VA_ARGS__))

struct ct_xclean {
	struct ct_sb *sb;		/* sandbox */
	struct ct_cgref *cg;		/* the exec's group */
	bool keep;			/* empty it for the next exec rather than remove it */
	struct ct_xclean *next;		/* sb->held */
};

/* Text behind the numeric arguments of the helper's exec mode. */
struct exec_nums {
	char uid[24];			/* --uid */
	char gid[24];			/* --gid */
	char nofile[24];		/* --nofile */
};

/* What a streaming exec keeps besides struct ct_exec. */
struct ct_xstream {
	int ptm;			/* the pty's master (resizes), -1 = no pty */
	int pending_sig;		/* sent before the pid was known, 0 = none */
};

void xstream_pid_known(struct ct_exec *x);

struct ct_pwork {
	struct ct_sb *sb;		/* sandbox */
	dsec_be_done_fn done;		/* caller's */
	void *arg;			/* its argument */
	int rc;				/* 0 or -errno */
	struct dsec_err err;		/* why */
	uint64_t before, after;		/* memory usage around the reclaim */
	uint64_t t0;			/* start, ns */
	struct ct_cgref *spare;		/* pause: the kept exec group, removed */
};

extern const char *const base_env[];

/* ---- container.c ---- */

void ct_submit(struct ct_be *be, void (*work)(void *), void (*done)(void *), void *arg);
void defer_x(struct ct_be *be, dsec_be_done_fn done, void *arg, int rc,
	     const struct dsec_err *err, struct ct_exec *x);
void defer(struct ct_be *be, dsec_be_done_fn done, void *arg, int rc,
	   const struct dsec_err *err);

/* ---- basens.c ---- */

void ct_base_up(struct ct_be *be);
void ct_base_down(struct ct_be *be);
/* On the loop, before a clone from the base: makes it again if the host
 * replaced a file it holds (basens.c). */
void ct_base_check(struct ct_be *be);
int ct_base_enter(struct ct_be *be);
void ct_base_leave(struct ct_be *be);

/* ---- netpool.c ---- */

void ct_net_init(struct ct_be *be);
/* Once the state directory is there: the proc new namespaces are set
 * through (netpool.c). */
void ct_net_up(struct ct_be *be);
void ct_net_fini(struct ct_be *be);
/* On a pool thread: a network namespace for a new sandbox, kept or made
 * now; its fd (the caller's) or -errno. */
int ct_net_take(struct ct_be *be);
/* On a pool thread, once a destroyed sandbox's processes are gone: its
 * namespace fd, kept for a new sandbox if nothing of it is left there, or
 * closed.  Takes ownership of fd. */
void ct_net_give(struct ct_be *be, int fd);
/* On any thread: fd to drop with the others (netpool.c).  Takes
 * ownership of fd. */
void ct_net_bury(struct ct_be *be, int fd);
/* On the loop, after a destroy: drops the namespaces held to drop once
 * destroys stop coming (or at once when many are held). */
void ct_net_destroyed(struct ct_be *be);
/* Drops them now (the loop, or fini). */
void ct_net_drop(struct ct_be *be);
/* At fini, once every sandbox is gone: drops them and the kept ones, all
 * together. */
void ct_net_stop(struct ct_be *be);
/* This thread into namespace fd (0 or -1 with errno), and back. */
int ct_net_enter(struct ct_be *be, int fd);
void ct_net_leave(struct ct_be *be);

/* ---- spawn.c ---- */

/* In spawn_helper's clone_flags: clone in the base namespace (cwd ignored). */
#define CT_SPAWN_BASE (1UL << 40)

int spawn_slots_init(struct ct_be *be);
void spawn_slots_fini(struct ct_be *be);
pid_t spawn_prog(struct ct_be *be, const char *prog, char *const *argv,
		 char *const *envp, const int *fds, int nfds, unsigned long clone_flags,
		 const char *cwd);
pid_t spawn_helper(struct ct_be *be, char *const *argv, char *const *envp,
		   const int *fds, int nfds, unsigned long clone_flags, const char *cwd);
pid_t spawn_helper_setup(struct ct_be *be, char *const *argv, char *const *envp,
			 const int *fds, int nfds, unsigned long clone_flags, const char *cwd,
			 uid_t owner, int (*setup)(pid_t pid, void *arg), void *arg);

/* ---- create.c ---- */

void sb_unlink(struct ct_sb *sb);
void sb_free(struct ct_sb *sb);
void cg_keep(struct ct_sb *sb);
/* Starts, on the loop, the removal of kept cgroups beyond CT_CG_KEEP. */
void cg_trim_start(struct ct_be *be);
bool sys_lend(struct ct_sb *sb);
void sys_unlend(struct ct_sb *sb);
void sb_teardown(struct ct_sb *sb);
void sb_lost(struct ct_sb *sb, bool signaled, int num);
/* Watches the init by its pid from now on (create.c); ct_ctl_close closes
 * the command socket, which a ready sandbox's init is watched through. */
void init_watch(struct ct_sb *sb);
void ct_ctl_close(struct ct_sb *sb);
bool init_gone(struct ct_sb *sb, bool *signaled, int *num);
int ct_create(void *vbe, const struct dsec_be_spec *spec, void **out,
	      dsec_be_done_fn done, void *arg, struct dsec_err *err);

/* ---- exec.c ---- */

void cgref_put(struct ct_cgref *r);
void xclean_work(void *arg);
void xclean_done(void *arg);
void spare_put(struct ct_sb *sb);
void exec_counts0(struct be_cg *cg, uint64_t *oom0, uint64_t *forkf0);
void exec_close(struct ct_exec *x);
void exec_free(struct ct_exec *x);
void exec_finish(struct ct_exec *x, int rc, const struct dsec_err *err);
int exec_can_start(const struct ct_sb *sb, struct dsec_err *err);
pid_t exec_spawn(struct ct_sb *sb, char **argv, char **env, int *fds, int st,
		 const struct be_cg *cg);
void exec_track(struct ct_exec *x, double timeout);
void env_merge(char ***v, size_t *n, const char *const *add);
size_t exec_args(const struct ct_sb *sb, char **argv, const char *cwd, char *desc,
		 struct exec_nums *n);
int ct_exec(void *vsb, const struct dsec_exec_req *req, struct dsec_exec_res *res,
	    dsec_be_done_fn done, void *arg, struct dsec_err *err);

/* ---- stream.c ---- */

void xstream_free(struct ct_xstream *s);
int ct_exec_start(void *vsb, const struct dsec_exec_req *req,
		  const struct dsec_exec_stream_opts *o, struct dsec_exec_stream *out,
		  struct dsec_exec_res *res, dsec_be_done_fn done, void *arg,
		  struct dsec_err *err);
int ct_exec_signal(void *vsb, void *handle, int sig, struct dsec_err *err);
int ct_exec_resize(void *vsb, void *handle, uint16_t rows, uint16_t cols,
		   struct dsec_err *err);

/* ---- files.c ---- */

void files_stop(struct ct_sb *sb);
void files_fini(struct ct_be *be, bool drained);
void file_next(struct ct_sb *sb);
int ct_file_read(void *vsb, const char *path, uint64_t offset, uint64_t len,
		 struct dsec_buf *out, dsec_be_done_fn done, void *arg,
		 struct dsec_err *err);
int ct_file_write(void *vsb, const char *path, const void *data, size_t len,
		  uint32_t mode, dsec_be_done_fn done, void *arg, struct dsec_err *err);
int ct_net_allow(void *vsb, const char *const *allow, dsec_be_done_fn done, void *arg,
		 struct dsec_err *err);
int ct_file(void *vsb, const struct dsec_file_req *req, struct dsec_file_res *res,
	    dsec_be_done_fn done, void *arg, struct dsec_err *err);

/* ---- control.c ---- */

void drop_held(struct ct_sb *sb);
void pause_work(void *arg);
void pause_done(void *arg);
int ct_pause(void *vsb, dsec_be_done_fn done, void *arg, struct dsec_err *err);
int ct_resume(void *vsb, dsec_be_done_fn done, void *arg, struct dsec_err *err);
int ct_snapshot(void *vsb, dsec_be_read_diff_fn read, void *read_arg,
		dsec_be_done_fn done, void *arg, struct dsec_err *err);
void sb_maybe_destroy(struct ct_sb *sb);
int ct_init_open(const struct ct_sb *sb, const char *what, int flags);
int ct_init_check(const struct ct_sb *sb);
int ct_init_fds(const struct ct_sb *sb, int *pidfd, int *root);
uint64_t ct_proc_start(pid_t pid);
void ct_wait_alone(const pid_t *pids, size_t n);
pid_t ct_alone_pid(const struct ct_sb *sb);
int ct_usage(void *vsb, struct dsec_be_usage *out, dsec_be_done_fn done, void *arg,
	     struct dsec_err *err);
/* The system calls its filter refused (ct_exec.h): ct_count_init takes a
 * total its init reported (a struct ct_count, a status line's TOTAL);
 * ct_count_cmd a command's DENIED, into res (NULL: none) and, for an exec
 * helper's command (its own calls, not in the init's total), into the
 * sandbox's. */
void ct_count_init(struct ct_sb *sb, uint64_t total);
void ct_count_cmd(struct ct_sb *sb, struct dsec_exec_res *res, uint64_t denied, bool helper);
int ct_destroy(void *vsb, dsec_be_done_fn done, void *arg, struct dsec_err *err);

/* ---- probe.c ---- */

struct ct_probe;
/* At init, on the loop: the report of probes to dsecd (and a killed
 * daemon's mount of the stand-ins detached); at fini, once every sandbox
 * is freed, the stand-ins' file system goes. */
void ct_probe_init(struct ct_be *be);
void ct_probe_fini(struct ct_be *be);
/* On a pool thread, in sb's prep (sb->dir made, its layers not yet
 * passed): the stand-ins of sb->protect its image lacks, their mount points
 * a layer on top of sb->layers or sb->lower.  On failure, logged, sb gets
 * none and sb->protect goes (its probes are not counted). */
void ct_probe_add(struct ct_sb *sb);
/* The stand-ins as container-init's --probes takes them, "dNAME/fNAME...",
 * into buf; its length. */
size_t ct_probe_spec(const struct ct_sb *sb, char *buf, size_t len);
/* Sends the stand-ins' mounts to the init on sock (after its layers) and
 * closes them.  0 or -errno. */
int ct_probe_send(struct ct_sb *sb, int sock);
/* sb is ready: dsecd hears that its probes are counted (a mark of 0). */
void ct_probe_ready(struct ct_sb *sb);
/* sb's stand-ins go: on the loop (sb_free), or in a prep that failed. */
void ct_probe_drop(struct ct_sb *sb);
/* ---- criu.c ---- */

struct ct_ckpt;
/* At init and fini: the tmpfs criu keeps what it learnt of the kernel in
 * (its /run in the sandboxes' namespaces), when container.criu is set. */
void ct_criu_up(struct ct_be *be);
void ct_criu_down(struct ct_be *be);
/* Continues what a checkpoint of sb left stopped (the loop: a snapshot's
 * end, sb_free). */
void ct_continue(struct ct_sb *sb);
int ct_checkpoint(void *vsb, const char *dir, unsigned *carried, dsec_be_done_fn done,
		  void *arg, struct dsec_err *err);
int ct_restore(void *vsb, const char *dir, dsec_be_done_fn done, void *arg,
	       struct dsec_err *err);
/* sess_spawn's, for a session restored from sb->restore_from. */
pid_t ct_criu_spawn(struct ct_sb *sb, const char *cg, const int *fds, int nfds, int ncg);

/* ---- sessions.c ---- */

int ct_session_open(void *vsb, const struct dsec_session_spec *spec, char **name,
		    dsec_be_done_fn done, void *arg, struct dsec_err *err);
/* The sandbox's session set, made at the first use. */
struct be_sess_set *ct_sess_set(struct ct_sb *sb);
int ct_session_exec(void *vsb, const char *name, const struct dsec_exec_req *req,
		    struct dsec_exec_res *res, struct dsec_be_session_res *sres,
		    dsec_be_done_fn done, void *arg, struct dsec_err *err);
int ct_session_close(void *vsb, const char *name, dsec_be_done_fn done, void *arg,
		     struct dsec_err *err);
void ct_session_list(void *vsb, void (*fn)(void *arg, const struct dsec_session_info *),
		     void *arg);

#endif
