/* container.c - the container backend: stateful sandboxes made of
 * namespaces, an overlay root and cgroups; commands enter from outside.
 *
 * create: a pool thread makes the sandbox's cgroup (below
 * dsec-container.<pid>) and its limits; the loop then clones + execs
 * container-init (helper_dir) in new mount, pid, net (loopback only), uts and
 * ipc namespaces.  It joins the cgroup, builds the root (overlay over
 * container.rootfs, or over a skeleton with the host's /usr, /bin, /lib*
 * bound read-only; the upper dir on a tmpfs of container.disk bytes),
 * pivots, unshares its cgroup namespace and stays as the sandbox's pid 1,
 * a child of dsecd that the loop reaps.  Every mount lives in the
 * sandbox's mount namespace only.  The loop reads "ok" from a status pipe,
 * opens a pidfd of pid 1 and an O_PATH fd of /proc/PID/root, and completes.
 *
 * exec: the loop makes a per-exec child cgroup, pipes and a stdin memfd and
 * fork + execs container-init exec, which setns()es through the pidfd,
 * chroots to the root fd and forks the command (capabilities dropped,
 * no_new_privs, seccomp).  Output is watched with ev_io and capped, the
 * timeout kills the exec's cgroup (the command's whole tree, not the
 * sandbox), the status comes on a pipe.  Processes an exec leaves behind
 * are killed when it completes: files persist between execs, processes do
 * not.
 *
 * The file operations go, one at a time, to the sandbox's file server
 * (container-files, a command's credentials in the sandbox's namespaces),
 * which resolves with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
 * from the sandbox's root (be_fs.c).  destroy kills the sandbox's
 * cgroup (pid 1 and with it the namespaces and mounts go), removes the
 * cgroups and the state directory.
 */
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
#define CT_LOWER_MAX 3000		/* bytes of lowerdir= (overlay options fit a page) */
#define CT_URANGE 65536u		/* uids (and gids) of one sandbox's user namespace */
#define CT_MAX_LAYERS 64		/* layers of one image */
#define CT_FREEZE_TIMEOUT_MS 2000	/* ms pause waits for the kernel to freeze */
#define CT_FD_UPPER 3			/* the init's fd of the upper dir (container-init) */
/* The floors of a sandbox's limits (requests and config alike): below
 * them a sandbox cannot do its work (pids: the init, the warm shell's
 * template and its child, a command; nofile: stdio and a few more), and a
 * CPU quota below 1 ms per 100 ms period the kernel refuses. */
#define CT_MIN_MEMORY (8ull << 20)
#define CT_MIN_DISK (1ull << 20)
#define CT_MIN_PIDS 4
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
	uint64_t ptys;		/* terminals of one sandbox's devpts at once */
};

/* Every key the backend knows; adding one is adding a row. */
static const struct be_conf_key conf_table[] = {
#define F(f) offsetof(struct ct_conf, f)
	{ "rootfs", BE_K_STR, F(rootfs), "" },
	{ "disk", BE_K_SIZE, F(disk), "256M" },
	{ "memory", BE_K_SIZE, F(memory), "512M" },
	{ "cpus", BE_K_CPUS, F(cpus), "1" },
	{ "pids", BE_K_COUNT, F(pids), "512" },
	{ "nofile", BE_K_COUNT, F(nofile), "1024" },
	{ "uid", BE_K_COUNT, F(uid), "0" },
	{ "gid", BE_K_COUNT, F(gid), "0" },
	{ "max_sandboxes", BE_K_COUNT, F(max_sandboxes), "1024" },
	{ "timeout", BE_K_SECS, F(timeout), "300" },
	{ "network", BE_K_STR, F(network), "none" },
	{ "bridge", BE_K_STR, F(bridge), "dsec0" },
	{ "subnet", BE_K_STR, F(subnet), "10.231.0.0/16" },
	{ "host_port", BE_K_STR, F(host_port), "" },
	{ "userns", BE_K_BOOL, F(userns), "true" },
	{ "uid_base", BE_K_COUNT, F(uid_base), "1000000000" },
	{ "max_sessions", BE_K_COUNT, F(max_sessions), "16" },
	{ "warm_shell", BE_K_BOOL, F(warm_shell), "true" },
	{ "ptys", BE_K_COUNT, F(ptys), "64" },
#undef F
};

/* ---- state -------------------------------------------------------------- */

struct ct_be;

struct ct_exec;

/* A done callback waiting for the reaper (never called inside an op). */
struct ct_pending {
	struct ct_pending *next;	/* queue */
	dsec_be_done_fn done;		/* caller's */
	void *arg;			/* its argument */
	int rc;				/* 0 or -errno */
	struct dsec_err err;		/* why, when rc < 0 */
	struct ct_exec *x;		/* an ended command, freed after done (its handle
					 * is the caller's until then), or NULL */
};

/* A cgroup shared by an exec and the pool work killing it. */
struct ct_cgref {
	struct be_cg *cg;		/* the group */
	int refs;			/* holders; freed (loop) at 0 */
};

struct ct_sb {
	struct ct_be *be;		/* backend */
	struct ct_sb *next;		/* be->sbs */
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
	int netfd;			/* the sandbox's network namespace, -1 = none */
	struct dsec_be_limits lim;	/* limits asked for, disk the one made */
	uint32_t cpu_weight;		/* and the CPU weight, 0 = default */
	struct be_cg *cg;		/* the sandbox's group */
	pid_t helper;			/* container-init: the sandbox's pid 1 */
	pid_t init;			/* the same, once it reported ready */
	int pidfd;			/* pidfd of init */
	int rootfd;			/* O_PATH /proc/init/root */
	int ctl;			/* commands to the init (ct_exec.h), -1 = none */
	int filter_fd;			/* its own filter (seccomp_deny), compiled, or -1 */
	int st_fd;			/* create status pipe */
	struct dsec_buf st;		/* its bytes */
	ev_io st_w;			/* on st_fd */
	ev_timer ctimer;		/* create timeout */
	ev_child cw;			/* create helper */
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
	uint64_t spare_oom;		/* its OOM kill count when it was emptied */
	bool keeping;			/* a cleanup will keep its group as spare */
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
};

struct ct_exec {
	struct ct_sb *sb;		/* sandbox */
	struct ct_exec *next;		/* sb->execs */
	struct dsec_exec_res *res;	/* caller's */
	dsec_be_done_fn done;		/* caller's */
	void *arg;			/* its argument */
	struct ct_cgref *cg;		/* per-exec group */
	uint64_t oom0;			/* its OOM kill count before the exec */
	pid_t pid;			/* helper */
	int out_fd, err_fd, st_fd;	/* our ends, -1 at EOF */
	ev_io out_w, err_w, st_w;	/* on them */
	ev_timer timer;			/* timeout, then grace */
	ev_child cw;			/* helper */
	struct dsec_buf st;		/* status bytes */
	size_t cap;			/* output cap */
	uint64_t t0;			/* start, ns (moved on by time spent paused) */
	double left;			/* while paused: seconds left on timer, < 0 none */
	bool reaped;			/* helper reaped (or no ev_child) */
	bool killed;			/* cgroup kill sent */
	bool finished;			/* result decided */
	struct ct_xstream *stream;	/* exec_start's extras, NULL for exec */
};

struct ct_be {
	const struct dsec_be_host *host;	/* daemon services */
	struct ct_conf conf;		/* configuration */
	struct be_cg *cg;		/* dsec-container.<pid> */
	struct ct_sb *sbs;		/* live sandboxes */
	uint32_t nsbs;			/* their number */
	uint32_t running;		/* execs in flight */
	uint64_t ncalls;		/* execs completed */
	uint64_t next_sb;		/* sandbox dir names */
	struct ct_pending *pend, **pend_tail;	/* done queue */
	ev_check check;			/* drains it */
	ev_idle idle;			/* keeps the loop spinning while it is not empty */
	bool stopping;			/* fini started */
	struct be_bridge br;		/* allowlisted sandboxes' bridge (up on first use) */
	uint8_t *uslots;		/* uid ranges in use, a bit per max_sandboxes */
	pthread_mutex_t br_lock;	/* serialises bringing it up */
	struct be_tasks tasks;		/* work on dsecd's pool */
	char *skel;			/* the default root's shared skeleton, NULL = none */
	int filter_fd;			/* commands' seccomp filter, compiled (memfd), or -1 */
	int preload_fd;			/* container-preload.so for the inits, or -1 */
	struct ct_fsd *fsds;		/* file servers not reaped yet */
	int home_fd;			/* the loop thread's working directory (enter_dir) */
	bool oom_warned;		/* said that inits cannot be exempted from the OOM killer */
	bool owner_warned;		/* said that user namespaces cannot be given owners */
};

#define LOG(be, lvl, ...) ((be)->host->log((lvl), __VA_ARGS__))

static void ct_free(struct ct_be *be)
{
	free(be->conf.rootfs);
	free(be->conf.network);
	free(be->conf.bridge);
	free(be->conf.subnet);
	free(be->conf.host_port);
	free(be->skel);
	if (be->filter_fd >= 0)
		close(be->filter_fd);
	if (be->preload_fd >= 0)
		close(be->preload_fd);
	if (be->home_fd >= 0)
		close(be->home_fd);
	free(be->uslots);
	pthread_mutex_destroy(&be->br_lock);
	pthread_mutex_destroy(&be->br.lock);
	free(be);
}

/* ---- pool work and deferred completions --------------------------------- */

static void ct_release(void *be)
{
	ct_free(be);
}

/* Run work on a pool thread, done on the loop (be_task: fini waits for
 * it, and done is skipped once fini began); without a pool thread both run
 * here (done must tolerate it: it never calls a caller's done directly). */
static void ct_submit(struct ct_be *be, void (*work)(void *), void (*done)(void *), void *arg)
{
	if (be_task_submit(&be->tasks, work, done, arg) < 0) {
		work(arg);
		if (!be->stopping)
			done(arg);
	}
}

static void exec_free(struct ct_exec *x);

/* Queues done(arg, rc, err) for the reaper; x (an ended command, or NULL)
 * is freed after it, so that its handle stays valid until done. */
static void defer_x(struct ct_be *be, dsec_be_done_fn done, void *arg, int rc,
		    const struct dsec_err *err, struct ct_exec *x)
{
	struct ct_pending *p = xcalloc(1, sizeof(*p));

	p->x = x;
	p->done = done;
	p->arg = arg;
	p->rc = rc;
	if (rc < 0 && err)
		p->err = *err;
	else if (rc < 0)
		dsec_err_setc(&p->err, DSEC_E_BACKEND, -rc, "container: %s", strerror(-rc));
	*be->pend_tail = p;
	be->pend_tail = &p->next;
	ev_idle_start(be->host->loop, &be->idle);
}

static void defer(struct ct_be *be, dsec_be_done_fn done, void *arg, int rc,
		  const struct dsec_err *err)
{
	defer_x(be, done, arg, rc, err, NULL);
}

static void reap_cb(struct ev_loop *loop, ev_check *w, int revents)
{
	struct ct_be *be = dsec_container_of(w, struct ct_be, check);

	while (be->pend) {
		struct ct_pending *p = be->pend;

		be->pend = p->next;
		if (!be->pend)
			be->pend_tail = &be->pend;
		if (!be->stopping)
			p->done(p->arg, p->rc, p->rc < 0 ? &p->err : NULL);
		if (p->x)
			exec_free(p->x);
		free(p);
	}
	ev_idle_stop(loop, &be->idle);
}

static void idle_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
}

/* ---- config --------------------------------------------------------------- */

static int conf_load(struct ct_be *be, struct dsec_err *err)
{
	struct stat st;
	int rc;

	if ((rc = be_conf_load(be->host, "container", conf_table, DSEC_ARRAY_LEN(conf_table),
				&be->conf, err)) < 0)
		return rc;
	if (be->conf.pids < CT_MIN_PIDS || be->conf.nofile < CT_MIN_NOFILE ||
	    be->conf.memory < CT_MIN_MEMORY || be->conf.disk < CT_MIN_DISK ||
	    be->conf.cpus < CT_MIN_CPUS)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "container limits out of range (pids >= %d, nofile >= %d, "
				     "memory >= %lluM, disk >= %lluM, cpus >= %g)", CT_MIN_PIDS,
				     CT_MIN_NOFILE, CT_MIN_MEMORY >> 20, CT_MIN_DISK >> 20,
				     CT_MIN_CPUS);
	/* The default disk shrinks to fit the memory; one set explicitly
	 * must fit (see CT_MEM_RESERVE). */
	if (be->conf.disk + CT_MEM_RESERVE > be->conf.memory) {
		if (be->host->conf_get("container.disk"))
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "container.disk %" PRIu64 " does not fit "
					     "container.memory %" PRIu64 ": the writable layer is "
					     "in memory and needs disk + %llu MiB of it",
					     be->conf.disk, be->conf.memory, CT_MEM_RESERVE >> 20);
		be->conf.disk = be->conf.memory - CT_MEM_RESERVE;
	}
	if (be->conf.ptys < 1 || be->conf.ptys > (1u << 20))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "container.ptys %" PRIu64 " is not between 1 and 1048576",
				     be->conf.ptys);
	if (*be->conf.rootfs && (be->conf.rootfs[0] != '/' || stat(be->conf.rootfs, &st) < 0 ||
				 !S_ISDIR(st.st_mode) || strchr(be->conf.rootfs, ',') ||
				 strchr(be->conf.rootfs, ':')))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "container.rootfs '%s' is not an absolute directory path "
				     "without ',' or ':'", be->conf.rootfs);
	if (strcmp(be->conf.network, "none") && strcmp(be->conf.network, "allowlist"))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "container.network '%s' is not 'none' or 'allowlist'",
				     be->conf.network);
	if (be->conf.userns &&
	    (be->conf.uid_base < 100000 ||
	     be->conf.uid_base + be->conf.max_sandboxes * CT_URANGE > UINT32_MAX - 1))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "container.uid_base %" PRIu64 " must be at least 100000 and "
				     "leave %" PRIu64 " ranges of %u uids below 2^32",
				     be->conf.uid_base, be->conf.max_sandboxes, CT_URANGE);
	if ((rc = be_bridge_conf(&be->br, be->conf.bridge, be->conf.subnet, be->conf.host_port,
				 err)) < 0) {
		dsec_err_prefix(err, "container.bridge, container.subnet or container.host_port");
		return rc;
	}
	be->br.log = be->host->log;
	return 0;
}

/* ---- spawning the helper ------------------------------------------------ */

/* What the helper's child needs: it runs on its own stack, sharing the
 * daemon's memory until it execs (CLONE_VM|CLONE_VFORK, as posix_spawn). */
struct spawn_args {
	const char *helper;		/* program */
	char *const *argv, *const *envp;	/* its argv and environment */
	const int *fds;			/* fds[i] goes to fd i */
	int nfds;			/* how many */
	int go_fd;			/* read a byte from it before exec, -1 = none */
	int exec_fd;			/* kept open until the exec (closed by it), or -1 */
	int securebits;			/* set them to this before the exec, -1 = leave */
};

/* The children's stack: they share the daemon's memory until they exec, and
 * the loop thread, the only one that spawns, waits for that exec. */
static char spawn_stack[64 << 10] __attribute__((aligned(16)));

/* The child: only async-signal-safe calls, no writes to shared memory.
 * It places its fds first and closes every other one, so that it holds
 * nothing of dsecd's while it waits for the go byte: not the write end
 * of that pipe (dsecd's death must reach it as EOF, not leave it blocked
 * for ever as pid 1 of fresh namespaces) and not dsecd's state lock (an
 * flock is on the open file description: a copy held until the exec keeps
 * a restarted daemon out).  It dies with dsecd (PR_SET_PDEATHSIG, set
 * again after the switch of ids, which clears it). */
static int spawn_child(void *arg)
{
	const struct spawn_args *a = arg;
	struct sigaction sa = { .sa_handler = SIG_DFL };
	sigset_t none;
	int high[16], go = -1, ex = -1, n = a->nfds;

	for (int s = 1; s < NSIG; s++)
		sigaction(s, &sa, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (int i = 0; i < n; i++)
		high[i] = a->fds[i] >= 0 ? fcntl(a->fds[i], F_DUPFD, 100) : -1;
	if (a->go_fd >= 0 && (go = fcntl(a->go_fd, F_DUPFD, 100)) < 0)
		_exit(127);
	if (a->exec_fd >= 0 && (ex = fcntl(a->exec_fd, F_DUPFD_CLOEXEC, 100)) < 0)
		_exit(127);
	for (int i = 0; i < n; i++) {
		if (high[i] >= 0) {
			if (dup2(high[i], i) < 0)
				_exit(127);
		} else if (i > 2) {
			close(i);	/* not one of the daemon's */
		} else {
			int nul = open("/dev/null", O_RDWR);

			if (nul >= 0 && nul != i) {
				dup2(nul, i);
				close(nul);
			}
		}
	}
	/* The go pipe at n, the exec pipe (close-on-exec) at n + 1. */
	if ((go >= 0 && dup2(go, n) < 0) || (ex >= 0 && dup3(ex, n + 1, O_CLOEXEC) < 0))
		_exit(127);
	syscall(SYS_close_range, go >= 0 || ex >= 0 ? n + 2 : n, ~0U, 0);
	if (go >= 0) {
		char c;

		if (read(n, &c, 1) != 1)
			_exit(127);	/* dsecd is gone, or gave up on us */
		close(n);
	}
	if (go >= 0) {
		/* Our ids are mapped now: become root of the new user namespace,
		 * so the exec keeps its capabilities there.  Raw syscalls: glibc's
		 * would signal the daemon's threads, whose memory we share. */
		if (syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setresgid, 0, 0, 0) < 0 ||
		    syscall(SYS_setresuid, 0, 0, 0) < 0)
			_exit(126);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
	}
	if (a->securebits >= 0 && prctl(PR_SET_SECUREBITS, a->securebits, 0, 0, 0) < 0)
		_exit(126);
	execve(a->helper, a->argv, a->envp);
	_exit(127);
}

/* Makes dir the working directory of the loop thread (its own: ct_init
 * unshares CLONE_FS) for a clone: a child in a new mount namespace starts
 * in its own copy of dir (the kernel moves a cloned cwd into the copied
 * namespace), with no walk of a path it may not walk (in a user namespace
 * its ids own nothing on the way) and not in a mount of the daemon's
 * namespace (where an fd of dir would lead).  Returns an fd for
 * leave_dir, -1 for dir NULL, or -2 with errno. */
static int enter_dir(const char *dir)
{
	int fd;

	if (!dir)
		return -1;
	if ((fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -2;
	if (fchdir(fd) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -2;
	}
	return fd;
}

static void leave_dir(struct ct_be *be, int fd)
{
	if (fd < 0)
		return;
	if (fchdir(be->home_fd) < 0)
		DSEC_BUG("cannot go back to the daemon's directory: %s", strerror(errno));
	close(fd);
}

/* Starts the helper with fds[i] placed at fd i (-1: /dev/null for 0-2,
 * closed otherwise), in new namespaces when clone_flags says so, in
 * directory cwd (or ours).
 * CLONE_VM|CLONE_VFORK, not fork: copying the daemon's page tables (its
 * threads, its heap) for a child that execs at once cost a quarter of the
 * CPU of an exec.  Signals are blocked across the clone so no handler of
 * the daemon runs in the child; it resets them before unblocking. */
static pid_t spawn_prog(struct ct_be *be, const char *prog, char *const *argv,
			char *const *envp, const int *fds, int nfds, unsigned long clone_flags,
			const char *cwd)
{
	_cleanup_free_ char *helper = xasprintf("%s/%s", be->host->helper_dir, prog);
	struct spawn_args a = { helper, argv, envp, fds, nfds, -1, -1, -1 };
	int dir = enter_dir(cwd), e;
	sigset_t all, old;
	pid_t pid;

	DSEC_ASSERT(nfds <= 16);
	if (dir == -2)
		return -1;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid = clone(spawn_child, spawn_stack + sizeof(spawn_stack),
		    (int)(clone_flags | CLONE_VM | CLONE_VFORK | SIGCHLD), &a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	e = errno;
	leave_dir(be, dir);
	errno = e;
	return pid < 0 ? -1 : pid;
}

/* spawn_prog of container-init. */
static pid_t spawn_helper(struct ct_be *be, char *const *argv, char *const *envp,
			  const int *fds, int nfds, unsigned long clone_flags, const char *cwd)
{
	return spawn_prog(be, CT_HELPER, argv, envp, fds, nfds, clone_flags, cwd);
}

/* clone() with this thread's effective ids switched to owner for the
 * call, so that the user namespace it makes (CLONE_NEWUSER) is owner's,
 * not root's: the kernel charges what a namespace's users hold (inotify
 * instances and watches, user namespaces, pending signals, locked memory
 * and the like) up the chain to the namespace's owner, so that per-user
 * limits are each sandbox's own instead of one root-wide pool.  Raw
 * syscalls act on this thread alone (glibc's would switch the daemon's
 * other threads too), and SECBIT_NO_SETUID_FIXUP keeps its capabilities
 * through the switch (a user namespace may need CAP_SYS_ADMIN to make);
 * the child sets the securebits back (a->securebits) before its exec.
 * Everything is back before this returns; a failure to get back aborts. */
static pid_t clone_as(struct ct_be *be, uid_t owner, int (*fn)(void *), void *stack, int flags,
		      struct spawn_args *a)
{
	int bits = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0), e;
	pid_t pid = -1;

	if (bits < 0 || prctl(PR_SET_SECUREBITS, bits | SECBIT_NO_SETUID_FIXUP, 0, 0, 0) < 0) {
		/* No CAP_SETPCAP: root owns the namespace, as it did. */
		if (!be->owner_warned)
			LOG(be, DSEC_LOG_WARN, "container: sandboxes' user namespaces are root's, "
			    "their per-user limits shared (cannot set securebits: %s)",
			    strerror(errno));
		be->owner_warned = true;
		return clone(fn, stack, flags, a);
	}
	a->securebits = bits;
	if (syscall(SYS_setresgid, -1, owner, -1) == 0) {
		if (syscall(SYS_setresuid, -1, owner, -1) == 0) {
			pid = clone(fn, stack, flags, a);
			e = errno;
			if (syscall(SYS_setresuid, -1, 0, -1) < 0)
				DSEC_BUG("cannot switch back to uid 0: %s", strerror(errno));
			errno = e;
		}
		e = errno;
		if (syscall(SYS_setresgid, -1, 0, -1) < 0)
			DSEC_BUG("cannot switch back to gid 0: %s", strerror(errno));
		errno = e;
	}
	e = errno;
	if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0)
		DSEC_BUG("cannot set the securebits back: %s", strerror(errno));
	errno = e;
	return pid;
}

/* spawn_helper for a child in a new user namespace of owner's: its uid
 * and gid maps must be written, from outside, before it execs (an exec
 * with no uid mapped would drop its capabilities), so the child waits on a
 * pipe while setup(pid, arg) runs, and we wait for its exec (the end of
 * the shared stack's use) on a close-on-exec pipe: the wait a vfork has
 * anyway.  If setup fails the child is killed and reaped; returns -1 with
 * errno. */
static pid_t spawn_helper_setup(struct ct_be *be, char *const *argv, char *const *envp,
				const int *fds, int nfds, unsigned long clone_flags, const char *cwd,
				uid_t owner, int (*setup)(pid_t pid, void *arg), void *arg)
{
	_cleanup_free_ char *helper = xasprintf("%s/" CT_HELPER, be->host->helper_dir);
	struct spawn_args a = { helper, argv, envp, fds, nfds, -1, -1, -1 };
	int go[2] = { -1, -1 }, ex[2] = { -1, -1 }, rc, e, dir = -1;
	sigset_t all, old;
	pid_t pid;
	char c;

	DSEC_ASSERT(nfds <= 16);
	if (pipe2(go, O_CLOEXEC) < 0 || pipe2(ex, O_CLOEXEC) < 0 || (dir = enter_dir(cwd)) == -2)
		goto fail;
	a.go_fd = go[0];
	a.exec_fd = ex[1];
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid = clone_as(be, owner, spawn_child, spawn_stack + sizeof(spawn_stack),
		       (int)(clone_flags | CLONE_VM | SIGCHLD), &a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	e = errno;
	leave_dir(be, dir);
	dir = -1;
	errno = e;
	if (pid < 0)
		goto fail;
	close(ex[1]);
	ex[1] = -1;
	rc = setup(pid, arg);
	e = errno;
	if (rc == 0 && write(go[1], "g", 1) != 1) {
		rc = -1;
		e = errno;
	}
	if (rc < 0)
		kill(pid, SIGKILL);
	close(go[1]);
	while (read(ex[0], &c, 1) < 0 && errno == EINTR)
		;	/* EOF: it exec'd or died; the stack is ours again */
	close(ex[0]);
	close(go[0]);
	if (rc < 0) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		errno = e;
		return -1;
	}
	return pid;
fail:
	e = errno;
	for (int i = 0; i < 2; i++) {
		if (go[i] >= 0)
			close(go[i]);
		if (ex[i] >= 0)
			close(ex[i]);
	}
	errno = e;
	return -1;
}

/* ---- create --------------------------------------------------------------- */

static void spare_put(struct ct_sb *sb);
static void files_stop(struct ct_sb *sb);

/* Out of be->sbs, where it is from create on (fini tears down those that
 * are still being made too). */
static void sb_unlink(struct ct_sb *sb)
{
	for (struct ct_sb **pp = &sb->be->sbs; *pp; pp = &(*pp)->next)
		if (*pp == sb) {
			*pp = sb->next;
			sb->be->nsbs--;
			return;
		}
}

static void sb_free(struct ct_sb *sb)
{
	struct ev_loop *loop = sb->be->host->loop;

	spare_put(sb);
	be_sess_set_free(sb->sess);
	files_stop(sb);
	ev_child_stop(loop, &sb->cw);
	ev_io_stop(loop, &sb->st_w);
	ev_timer_stop(loop, &sb->ctimer);
	if (sb->pidfd >= 0)
		close(sb->pidfd);
	if (sb->rootfd >= 0)
		close(sb->rootfd);
	if (sb->ctl >= 0)
		close(sb->ctl);
	if (sb->filter_fd >= 0)
		close(sb->filter_fd);
	if (sb->st_fd >= 0)
		close(sb->st_fd);
	if (sb->cg)
		be_cg_free(sb->cg);
	dsec_buf_free(&sb->st);
	dsec_strv_free(sb->env);
	free(sb->cwd);
	free(sb->lower);
	free(sb->deny);
	dsec_strv_free(sb->layers);
	if (sb->uslot >= 0)
		sb->be->uslots[sb->uslot / 8] &= (uint8_t)~(1u << (sb->uslot % 8));
	free(sb->rules);
	if (sb->netfd >= 0)
		close(sb->netfd);
	free(sb->dir);
	free(sb->id);
	free(sb);
}

/* Kill, remove the groups and the (empty on the host) directories. */
static void sb_teardown(struct ct_sb *sb)
{
	struct ct_be *be = sb->be;
	_cleanup_free_ char *rw = xasprintf("%s/rw", sb->dir);
	_cleanup_free_ char *root = xasprintf("%s/root", sb->dir);

	if (sb->cg) {
		if (be_cg_kill(sb->cg) < 0)
			LOG(be, DSEC_LOG_WARN, "container: processes of '%s' survive a kill", sb->id);
		if (be_cg_remove(sb->cg) < 0)
			LOG(be, DSEC_LOG_WARN, "container: cannot remove cgroup '%s'", sb->cg->path);
	}
	if (sb->netfd >= 0) {
		close(sb->netfd);
		sb->netfd = -1;
	}
	if (sb->host_if[0])
		be_veth_del(sb->host_if);
	be_bridge_ip_put(&be->br, sb->ip);
	sb->ip = 0;
	rmdir(rw);
	rmdir(root);
	for (size_t i = 0; sb->layers && sb->layers[i]; i++) {
		_cleanup_free_ char *l = xasprintf("%s/lower.%zu", sb->dir, i);

		rmdir(l);	/* the mount points of the layers (user namespaces) */
	}
	if (rmdir(sb->dir) < 0 && errno != ENOENT)
		LOG(be, DSEC_LOG_WARN, "container: cannot remove '%s': %s", sb->dir,
		    strerror(errno));
}

struct ct_cwork {
	struct ct_sb *sb;		/* sandbox */
	int rc;				/* 0 or -errno */
	struct dsec_err err;		/* why */
};

static void create_prep_work(void *arg)
{
	struct ct_cwork *w = arg;
	struct ct_sb *sb = w->sb;
	struct ct_be *be = sb->be;
	struct be_cg_limits lim = {
		.memory = sb->lim.memory ? sb->lim.memory : be->conf.memory,
		.cpus = sb->lim.cpus > 0 ? sb->lim.cpus : be->conf.cpus,
		.pids = sb->lim.pids ? sb->lim.pids : (uint32_t)be->conf.pids,
		.weight = sb->cpu_weight,
	};
	char name[64];
	int rc;

	/* A filter of its own, compiled here rather than by its init on the
	 * first command's path; if this fails the init compiles it. */
	if (sb->deny)
		be_seccomp_container_export(sb->deny, &sb->filter_fd);
	if (mkdir(sb->dir, 0700) < 0 && errno != EEXIST) {
		w->rc = dsec_err_set(&w->err, errno, "cannot create '%s': %s", sb->dir,
				     strerror(errno));
		return;
	}
	if (sb->ubase) {
		/* The helper, root of the sandbox's user namespace, mounts on
		 * these: they are its. */
		size_t n = sb->layers ? dsec_strv_len((const char *const *)sb->layers) : 0;

		for (size_t i = 0; i < n + 3; i++) {
			_cleanup_free_ char *p = i == 0 ? xstrdup(sb->dir)
					       : i == 1 ? xasprintf("%s/rw", sb->dir)
					       : i == 2 ? xasprintf("%s/root", sb->dir)
							: xasprintf("%s/lower.%zu", sb->dir, i - 3);

			if ((i && mkdir(p, 0700) < 0 && errno != EEXIST) ||
			    lchown(p, sb->ubase, sb->ubase) < 0) {
				w->rc = dsec_err_set(&w->err, errno, "cannot prepare '%s': %s", p,
						     strerror(errno));
				return;
			}
		}
	}
	snprintf(name, sizeof(name), "%s", strrchr(sb->dir, '/') + 1);
	if ((w->rc = be_cg_child(be->cg, name, true, true, &sb->cg, &w->err)) < 0)
		return;
	if ((rc = be_cg_set_limits(sb->cg, &lim)) < 0)
		w->rc = dsec_err_set(&w->err, -rc, "cannot set the limits of sandbox '%s': %s",
				     sb->id, strerror(-rc));
}

static void create_fail_done(void *arg)
{
	struct ct_cwork *w = arg;
	struct ct_sb *sb = w->sb;

	defer(sb->be, sb->cdone, sb->carg, w->rc, &w->err);
	sb_unlink(sb);
	sb_free(sb);
	free(w);
}

static void create_fail_work(void *arg)
{
	struct ct_cwork *w = arg;

	sb_teardown(w->sb);
}

/* Creation failed after the prep: tear down on a pool thread, then report. */
static void create_fail(struct ct_sb *sb, int rc, const struct dsec_err *err)
{
	struct ct_be *be = sb->be;
	struct ct_cwork *w = xcalloc(1, sizeof(*w));
	struct ev_loop *loop = be->host->loop;

	ev_io_stop(loop, &sb->st_w);
	ev_timer_stop(loop, &sb->ctimer);
	if (sb->st_fd >= 0)
		close(sb->st_fd);
	sb->st_fd = -1;
	if (sb->helper > 0)
		kill(sb->helper, SIGKILL);
	w->sb = sb;
	w->rc = rc;
	w->err = *err;
	ct_submit(be, create_fail_work, create_fail_done, w);
}

static void create_ready(struct ct_sb *sb)
{
	sb->ready = true;
	defer(sb->be, sb->cdone, sb->carg, 0, NULL);
}

static int open_in_root(int rootfd, const char *path, int flags, mode_t mode);

/* The allowlisted network of a new sandbox, on a pool thread: the filter
 * first (so eth0 never carries a packet unfiltered), then the bridge (once
 * per daemon), an address, the veth, and the resolver in /etc/resolv.conf. */
static void net_setup_work(void *arg)
{
	struct ct_cwork *w = arg;
	struct ct_sb *sb = w->sb;
	struct ct_be *be = sb->be;
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)sb->init);
	if ((sb->netfd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		w->rc = dsec_err_set(&w->err, errno, "cannot open the network namespace of '%s': %s",
				     sb->id, strerror(errno));
		return;
	}
	if ((w->rc = be_netns_filter(&be->br, sb->netfd, sb->rules, sb->nrules, sb->dns,
				     &w->err)) < 0)
		return;
	pthread_mutex_lock(&be->br_lock);
	if (!be->br.ifindex)
		w->rc = be_bridge_up(&be->br, &w->err);
	pthread_mutex_unlock(&be->br_lock);
	if (w->rc < 0 || (w->rc = be_bridge_ip_get(&be->br, &sb->ip, &w->err)) < 0)
		return;
	snprintf(sb->host_if, sizeof(sb->host_if), BE_VETH_PREFIX "%05x%06" PRIx64,
		 (unsigned)getpid() & 0xfffff, sb->serial & 0xffffff);
	if ((w->rc = be_veth_attach(&be->br, sb->netfd, sb->host_if, sb->ip, &w->err)) < 0) {
		sb->host_if[0] = '\0';
		return;
	}
	if (sb->dns) {
		struct in_addr a = { .s_addr = htonl(sb->dns) };
		char line[64], ip[INET_ADDRSTRLEN];
		int fd = open_in_root(sb->rootfd, "/etc/resolv.conf",
				      O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644);

		snprintf(line, sizeof(line), "nameserver %s\n",
			 inet_ntop(AF_INET, &a, ip, sizeof(ip)));
		if (fd < 0 || dsec_write_all(fd, line, strlen(line)) < 0)
			w->rc = dsec_err_set(&w->err, fd < 0 ? -fd : errno,
					     "cannot write the sandbox's /etc/resolv.conf: %s",
					     strerror(fd < 0 ? -fd : errno));
		if (fd >= 0)
			close(fd);
	}
}

static void net_setup_done(void *arg)
{
	struct ct_cwork *w = arg;
	struct ct_sb *sb = w->sb;

	if (w->rc < 0) {
		dsec_err_prefix(&w->err, "cannot connect sandbox '%s'", sb->id);
		create_fail(sb, w->rc, &w->err);
	} else {
		create_ready(sb);
	}
	free(w);
}

static void create_finish(struct ct_sb *sb)
{
	struct ct_be *be = sb->be;
	struct ev_loop *loop = be->host->loop;
	struct dsec_err err;
	char path[64];
	int pid = 0, e = 0;
	const char *line = sb->st.data ? sb->st.data : "";

	ev_io_stop(loop, &sb->st_w);
	ev_timer_stop(loop, &sb->ctimer);
	close(sb->st_fd);
	sb->st_fd = -1;
	if (sscanf(line, "ok %d", &pid) == 1 && sb->helper > 1) {
		pid = sb->init = sb->helper;
		sb->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
		snprintf(path, sizeof(path), "/proc/%d/root", pid);
		sb->rootfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (sb->pidfd < 0 || sb->rootfd < 0) {
			e = errno;
			dsec_err_setc(&err, DSEC_E_BACKEND, e,
				      "cannot open the init of sandbox '%s': %s", sb->id, strerror(e));
			return create_fail(sb, -e, &err);
		}
		if (sb->net_allow) {
			struct ct_cwork *w = xcalloc(1, sizeof(*w));

			w->sb = sb;
			ct_submit(be, net_setup_work, net_setup_done, w);
			return;
		}
		return create_ready(sb);
	}
	if (sscanf(line, "err %d", &e) == 1 && strchr(line, ' ') && strchr(line + 4, ' ')) {
		char *msg = strchr(line + 4, ' ') + 1;
		size_t n = strcspn(msg, "\n");

		dsec_err_setc(&err, DSEC_E_BACKEND, e, "cannot create sandbox '%s': %.*s", sb->id,
			      (int)n, msg);
	} else {
		e = EIO;
		dsec_err_setc(&err, DSEC_E_BACKEND, e,
			      "cannot create sandbox '%s': the helper died (see the log)", sb->id);
	}
	create_fail(sb, -e, &err);
}

static void create_st_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ct_sb *sb = dsec_container_of(w, struct ct_sb, st_w);
	char buf[1024];
	ssize_t n = read(sb->st_fd, buf, sizeof(buf));

	if (n > 0) {
		dsec_buf_add(&sb->st, buf, (size_t)n);
		if (!memchr(sb->st.data, '\n', sb->st.len) && sb->st.len < 4096)
			return;
	} else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		return;
	}
	create_finish(sb);
}

static void create_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct ct_sb *sb = dsec_container_of(w, struct ct_sb, ctimer);
	struct dsec_err err;

	dsec_err_setc(&err, DSEC_E_TIMEOUT, ETIMEDOUT, "creating sandbox '%s' timed out", sb->id);
	create_fail(sb, -ETIMEDOUT, &err);
}

/* The init of a ready sandbox died on its own (killed from outside,
 * crashed; the OOM killer takes it last, see protect_init): its namespaces,
 * mounts and processes are gone, and so is the sandbox.  dsecd is told
 * (it answers sandbox_lost from then on and destroys it after a grace);
 * signaled says how the init ended and num with what.  Once. */
static void sb_lost(struct ct_sb *sb, bool signaled, int num)
{
	const struct dsec_be_host *host = sb->be->host;
	struct dsec_err why;
	uint64_t ooms = 0;

	if (!sb->ready || sb->destroying || sb->lost)
		return;
	sb->lost = true;
	be_cg_oom_kills(sb->cg, &ooms);
	if (signaled)
		dsec_err_setc(&why, DSEC_E_SANDBOX_LOST, EOWNERDEAD, "its init was killed by SIG%s",
			      sigabbrev_np(num) ? sigabbrev_np(num) : "?");
	else
		dsec_err_setc(&why, DSEC_E_SANDBOX_LOST, EOWNERDEAD, "its init exited with status %d",
			      num);
	if (ooms)
		snprintf(why.msg + strlen(why.msg), sizeof(why.msg) - strlen(why.msg),
			 " after %" PRIu64 " OOM kills in the sandbox", ooms);
	LOG(sb->be, DSEC_LOG_WARN, "container: sandbox '%s' is lost: %s", sb->id, why.msg);
	if (sb->ctl >= 0)
		close(sb->ctl);	/* nobody serves it */
	sb->ctl = -1;
	if (host->struct_size >= offsetof(struct dsec_be_host, sandbox_lost) +
	    sizeof(host->sandbox_lost) && host->sandbox_lost)
		host->sandbox_lost(host, sb->id, &why);
}

#define CT_PF_EXITING 0x4		/* the kernel's task flag, /proc/PID/stat field 9 */

/* Whether the init of sb has ended or is ending, and if so how: the
 * status libev reaped (its callback still to come), or what /proc says of
 * a zombie or a task in do_exit (flags, field 9; exit_code, field 52): a
 * command's pipes close when the dying init's files do, before it is a
 * zombie.  Only asked when a command ended badly (a few reads). */
static bool init_gone(struct ct_sb *sb, bool *signaled, int *num)
{
	_cleanup_free_ char *stat = NULL;
	char path[64], *p, *save = NULL;
	unsigned long flags = 0;
	int st = -1, field = 3;
	bool dying = false;
	size_t len;

	if (sb->init <= 0)
		return false;
	if (ev_is_pending(&sb->cw)) {
		st = sb->cw.rstatus;
	} else {
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)sb->init);
		if (dsec_read_file(path, &stat, &len) < 0 || !(p = strrchr(stat, ')')))
			return false;
		for (char *t = strtok_r(p + 1, " ", &save); t; t = strtok_r(NULL, " ", &save), field++) {
			if (field == 3)
				dying = *t == 'Z' || *t == 'X';
			else if (field == 9)
				flags = strtoul(t, NULL, 10);
			else if (field == 52)
				st = atoi(t);
		}
		if (!dying && !(flags & CT_PF_EXITING))
			return false;
	}
	*signaled = st < 0 || WIFSIGNALED(st);
	*num = st < 0 ? SIGKILL : WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st);
	return true;
}

static void create_child_cb(struct ev_loop *loop, ev_child *w, int revents)
{
	struct ct_sb *sb = dsec_container_of(w, struct ct_sb, cw);

	/* The sandbox's init died (destroy, or a kill from outside). */
	ev_child_stop(loop, w);
	if (!sb->ready && !sb->destroying)
		LOG(sb->be, DSEC_LOG_WARN, "container: the helper of '%s' ended before the sandbox "
		    "was ready (wait status 0x%x)", sb->id, (unsigned)w->rstatus);
	sb_lost(sb, WIFSIGNALED(w->rstatus), WIFSIGNALED(w->rstatus) ? WTERMSIG(w->rstatus) :
		WEXITSTATUS(w->rstatus));
}

/* The OOM killer of the sandbox's memory cgroup never picks its init: it
 * would take the whole sandbox with it.  Commands run with oom_score_adj
 * 1000, the most (container-init run_command), so they go first whatever
 * their size; and the init itself is set to OOM_DISABLE where we may
 * (CAP_SYS_RESOURCE), through the legacy oom_adj (-17 = oom_score_adj
 * -1000), which unlike oom_score_adj leaves oom_score_adj_min at what the
 * init inherited: a command cannot lower itself below that.  Only once
 * pid has exec'd (a process sharing our memory would share the setting,
 * and dsecd would get it). */
static void protect_init(struct ct_be *be, pid_t pid)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/oom_adj", (int)pid);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) < 0 || write(fd, "-17", 3) != 3) {
		if (!be->oom_warned)
			LOG(be, DSEC_LOG_WARN, "container: cannot exempt sandboxes' inits from the "
			    "OOM killer (%s); their commands still go first", strerror(errno));
		be->oom_warned = true;
	}
	if (fd >= 0)
		close(fd);
}

static int write_map(pid_t pid, const char *file, uint32_t base)
{
	char path[64], line[64];
	int fd, n, rc = 0;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	n = snprintf(line, sizeof(line), "0 %u %u\n", base, CT_URANGE);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) < 0)
		return -1;
	if (write(fd, line, (size_t)n) != n)
		rc = -1;
	close(fd);
	return rc;
}

struct userns_setup {
	struct ct_sb *sb;		/* the sandbox */
	int sock;			/* where the layers go */
};

/* Before the helper execs in its new user namespace: map root inside to the
 * sandbox's uid range and hand it each layer as a detached mount idmapped
 * to that namespace, so the layers' root-owned files are root's inside and
 * copy-up works.  Not its cgroup: until it execs it shares dsecd's memory,
 * and a memory cgroup's OOM killer kills every process of an mm it picks
 * (the helper joins after its exec, container-init create). */
static int userns_setup(pid_t pid, void *arg)
{
	struct userns_setup *u = arg;
	struct ct_sb *sb = u->sb;
	size_t n = sb->layers ? dsec_strv_len((const char *const *)sb->layers) : 0;
	int fds[CT_MAX_LAYERS], nfd = 0, uns, rc = -1, e;
	char path[64];

	if (write_map(pid, "uid_map", sb->ubase) < 0 || write_map(pid, "gid_map", sb->ubase) < 0)
		return -1;
	if (n == 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	if ((uns = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		struct mount_attr ma = { .attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)uns };
		int t = (int)syscall(SYS_open_tree, AT_FDCWD, sb->layers[i],
				     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);

		if (t < 0)
			goto out;
		fds[nfd++] = t;
		if (syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH, &ma, sizeof(ma)) < 0)
			goto out;
	}
	if ((rc = be_send_fds(u->sock, "L", 1, fds, nfd, 0)) < 0) {
		errno = -rc;
		rc = -1;
	}
out:
	e = errno;
	for (int i = 0; i < nfd; i++)
		close(fds[i]);
	close(uns);
	errno = e;
	return rc;
}

/* The creation fails after the prep: create_fail keeps a copy of why. */
static void prep_fail(struct ct_cwork *w)
{
	create_fail(w->sb, w->rc, &w->err);
	free(w);
}

static void create_prep_done(void *arg)
{
	struct ct_cwork *w = arg;
	struct ct_sb *sb = w->sb;
	struct ct_be *be = sb->be;
	struct ev_loop *loop = be->host->loop;
	char ncgs[16], disk[32];
	int cgfds[BE_CG_MAXH], ncg, st[2] = { -1, -1 }, fds[8 + BE_CG_MAXH], cv[2] = { -1, -1 };
	int filter = sb->filter_fd >= 0 ? sb->filter_fd : sb->deny ? -1 : be->filter_fd;
	char filter_at[16], preload_at[16], ptys[24], mem[24];

	if (w->rc < 0)
		return prep_fail(w);
	size_t nl = sb->layers ? dsec_strv_len((const char *const *)sb->layers) : 0;
	int sv[2] = { -1, -1 };
	char nlayers[16];

	/* fds: 3 status, 4 its end of the command socket (ct_exec.h), 5 the
	 * layer socket (user namespaces), 6.. the cgroup.procs files of the
	 * sandbox's cgroup, opened here (the helper moves itself in after its
	 * exec, when it no longer shares our memory, and may not open them in
	 * a user namespace), then the compiled filter and the warm shell's
	 * object.  The helper starts in the sandbox's directory. */
	if ((ncg = be_cg_open_procs(sb->cg, cgfds)) < 0) {
		w->rc = dsec_err_set(&w->err, -ncg, "cannot open the cgroup of sandbox '%s': %s",
				     sb->id, strerror(-ncg));
		return prep_fail(w);
	}
	snprintf(ncgs, sizeof(ncgs), "%d", ncg);
	snprintf(disk, sizeof(disk), "%" PRIu64, sb->lim.disk);
	snprintf(nlayers, sizeof(nlayers), "%zu", sb->ubase ? nl : 0);
	snprintf(filter_at, sizeof(filter_at), "%d", filter >= 0 ? 6 + ncg : -1);
	snprintf(preload_at, sizeof(preload_at), "%d", be->preload_fd >= 0 ? 7 + ncg : -1);
	snprintf(ptys, sizeof(ptys), "%" PRIu64, be->conf.ptys);
	snprintf(mem, sizeof(mem), "%" PRIu64, sb->lim.memory ? sb->lim.memory : be->conf.memory);
	char *const argv[] = { (char *)CT_HELPER, (char *)"create", (char *)"--dir", sb->dir,
			       (char *)"--rootfs",
			       sb->lower ? sb->lower : *be->conf.rootfs ? be->conf.rootfs : (char *)"-",
			       (char *)"--disk", disk, (char *)"--cg", ncgs,
			       (char *)"--layers", nlayers,
			       (char *)"--userns", (char *)(sb->ubase ? "1" : "0"),
			       (char *)"--skel", (char *)(sb->skel ? "1" : "0"),
			       (char *)"--filter", filter_at, (char *)"--preload", preload_at,
			       (char *)"--ptys", ptys, (char *)"--memory", mem,
			       (char *)(sb->deny ? "--deny" : NULL), sb->deny, NULL };
	char *const envp[] = { (char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };

	if (pipe2(st, O_CLOEXEC) < 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, cv) < 0 ||
	    (sb->ubase && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)) {
		w->rc = dsec_err_set(&w->err, errno, "cannot prepare the sandbox's helper: %s",
				     strerror(errno));
		for (int i = 0; i < 2; i++) {
			if (st[i] >= 0)
				close(st[i]);
			if (cv[i] >= 0)
				close(cv[i]);
			if (sv[i] >= 0)
				close(sv[i]);
		}
		for (int i = 0; i < ncg; i++)
			close(cgfds[i]);
		return prep_fail(w);
	}
	fds[0] = fds[1] = fds[2] = -1;
	fds[3] = st[1];
	fds[4] = cv[1];
	fds[5] = sv[1];
	for (int i = 0; i < ncg; i++)
		fds[6 + i] = cgfds[i];
	fds[6 + ncg] = filter;	/* -1: not passed (closed in the child) */
	fds[7 + ncg] = be->preload_fd;
	if (sb->ubase) {
		struct userns_setup u = { .sb = sb, .sock = sv[0] };

		sb->helper = spawn_helper_setup(be, argv, envp, fds, 8 + ncg,
						CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID |
						CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC, sb->dir,
						sb->ubase, userns_setup, &u);
	} else {
		sb->helper = spawn_helper(be, argv, envp, fds, 8 + ncg,
					  CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS |
					  CLONE_NEWIPC, sb->dir);
	}
	for (int i = 0; i < 2; i++)
		if (sv[i] >= 0)
			close(sv[i]);
	for (int i = 0; i < ncg; i++)
		close(cgfds[i]);
	close(st[1]);
	close(cv[1]);
	sb->st_fd = st[0];
	sb->ctl = cv[0];
	dsec_set_nonblock(sb->ctl, true);
	if (sb->helper < 0) {
		sb->helper = 0;
		w->rc = dsec_err_set(&w->err, errno, "cannot fork: %s", strerror(errno));
		return prep_fail(w);
	}
	protect_init(be, sb->helper);	/* it has exec'd: both spawns wait for that */
	free(w);
	dsec_set_nonblock(sb->st_fd, true);
	ev_io_init(&sb->st_w, create_st_cb, sb->st_fd, EV_READ);
	ev_io_start(loop, &sb->st_w);
	ev_timer_init(&sb->ctimer, create_timeout_cb, CT_CREATE_TIMEOUT, 0);
	ev_timer_start(loop, &sb->ctimer);
	if (ev_is_default_loop(loop)) {
		ev_child_init(&sb->cw, create_child_cb, sb->helper, 0);
		ev_child_start(loop, &sb->cw);
	}
}

/* The overlay's lower layers for an image: the directories dsecd mounted,
 * joined top first.  A sandbox without an image gets *out = NULL (the
 * configured rootfs or the host skeleton). */
static int image_root(const struct dsec_be_spec *spec, char **out, struct dsec_err *err)
{
	struct dsec_buf b;

	*out = NULL;
	if (!spec->image || !*spec->image)
		return 0;
	if (!spec->layers || !spec->layers[0])
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "image '%s' has no layers here (dsecd runs without fs3)",
				     spec->image);
	if (dsec_strv_len(spec->layers) > CT_MAX_LAYERS)
		return dsec_err_setc(err, DSEC_E_INVALID, E2BIG,
				     "image '%s' has more than %d layers", spec->image, CT_MAX_LAYERS);
	dsec_buf_init(&b);
	for (size_t i = 0; spec->layers[i]; i++) {
		const char *l = spec->layers[i];

		if (l[0] != '/' || strpbrk(l, ":,\\")) {
			dsec_buf_free(&b);
			return dsec_err_setc(err, DSEC_E_INTERNAL, EINVAL,
					     "layer directory '%s' of image '%s' is not an absolute "
					     "path without ':', ',' or '\\'", l, spec->image);
		}
		if (i)
			dsec_buf_add(&b, ":", 1);
		dsec_buf_add(&b, l, strlen(l));
	}
	if (b.len > CT_LOWER_MAX) {
		dsec_buf_free(&b);
		return dsec_err_setc(err, DSEC_E_INVALID, E2BIG,
				     "image '%s' has too many layers for one overlay mount",
				     spec->image);
	}
	dsec_buf_add(&b, "", 1);
	*out = b.data;
	return 0;
}

/* "uid[:gid]" of an image, numeric; NULL or "" = the configured ids. */
static int parse_user(struct ct_be *be, const char *user, uint64_t *uid, uint64_t *gid,
		      struct dsec_err *err)
{
	char *end;

	*uid = be->conf.uid;
	*gid = be->conf.gid;
	if (!user || !*user)
		return 0;
	errno = 0;
	*uid = strtoull(user, &end, 10);
	*gid = *uid;
	if (!errno && end != user && *end == ':' && end[1])
		*gid = strtoull(end + 1, &end, 10);
	if (errno || end == user || *end || *uid > UINT32_MAX - 1 || *gid > UINT32_MAX - 1)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "image user '%s' is not a numeric uid[:gid]", user);
	return 0;
}

/* network "none" (loopback only) or "allowlist" with its rules and an
 * optional resolver. */
static int parse_network(struct ct_be *be, const struct dsec_be_spec *spec, bool *allow,
			 struct be_net_rule **rules, size_t *n, uint32_t *dns, struct dsec_err *err)
{
	const char *mode = spec->network && *spec->network ? spec->network : be->conf.network;
	struct in_addr a;
	int rc;

	*allow = false;
	*rules = NULL;
	*n = 0;
	*dns = 0;
	if (!strcmp(mode, "none")) {
		if ((spec->allow && spec->allow[0]) || (spec->dns && *spec->dns))
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "an allowlist or a resolver needs network 'allowlist', "
					     "not 'none'");
		return 0;
	}
	if (strcmp(mode, "allowlist"))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "network '%s' is not 'none' or 'allowlist'", mode);
	if (spec->dns && *spec->dns) {
		if (inet_pton(AF_INET, spec->dns, &a) != 1)
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "resolver '%s' is not an IPv4 address", spec->dns);
		*dns = ntohl(a.s_addr);
	}
	if ((rc = be_net_rules_parse(spec->allow, rules, n, err)) < 0)
		return rc;
	*allow = true;
	return 0;
}

/* A request's limits against the floors, and its disk against its
 * memory: the writable layer is a tmpfs charged to the sandbox's memory.
 * *disk gets the disk to make: the request's, else the configured one
 * shrunk to fit.  0 or -EINVAL with *err (invalid). */
static int check_limits(const struct ct_be *be, const struct dsec_be_spec *spec, uint64_t *disk,
			struct dsec_err *err)
{
	const struct dsec_be_limits *l = &spec->limits;
	uint64_t mem = l->memory ? l->memory : be->conf.memory;
	const struct { const char *name; double v, min; } f[] = {
		{ "memory", (double)l->memory, (double)CT_MIN_MEMORY },
		{ "disk", (double)l->disk, (double)CT_MIN_DISK },
		{ "pids", l->pids, CT_MIN_PIDS },
		{ "nofile", l->nofile, CT_MIN_NOFILE },
		{ "cpus", l->cpus, CT_MIN_CPUS },
	};

	for (size_t i = 0; i < DSEC_ARRAY_LEN(f); i++)
		if (f[i].v > 0 && f[i].v < f[i].min)
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "limits.%s %.10g is below the container backend's floor "
					     "of %.10g", f[i].name, f[i].v, f[i].min);
	if (l->disk && l->disk + CT_MEM_RESERVE > mem)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "limits.disk %" PRIu64 " does not fit memory %" PRIu64
				     ": the writable layer is in memory and needs disk + %llu MiB "
				     "of it", l->disk, mem, CT_MEM_RESERVE >> 20);
	*disk = l->disk ? l->disk : be->conf.disk;
	if (*disk + CT_MEM_RESERVE > mem)
		*disk = mem - CT_MEM_RESERVE;
	return 0;
}

static int ct_create(void *vbe, const struct dsec_be_spec *spec, void **out,
		     dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct ct_be *be = vbe;
	struct ct_cwork *w;
	struct ct_sb *sb;
	struct be_net_rule *rules = NULL;
	char *lower = NULL, *deny = NULL;
	uint64_t uid, gid, disk = 0;
	uint32_t dns = 0;
	size_t nrules = 0;
	bool net_allow;
	int rc, uslot = -1;

	if (be->stopping)
		return dsec_err_setc(err, DSEC_E_SHUTTING_DOWN, ESHUTDOWN, "container is stopping");
	if (be->nsbs >= be->conf.max_sandboxes)
		return dsec_err_setc(err, DSEC_E_CAPACITY, EAGAIN,
				     "container has %u sandboxes, its maximum", be->nsbs);
	if ((rc = check_limits(be, spec, &disk, err)) < 0 ||
	    (rc = parse_user(be, spec->user, &uid, &gid, err)) < 0 ||
	    (rc = parse_network(be, spec, &net_allow, &rules, &nrules, &dns, err)) < 0)
		return rc;
	if ((rc = be_seccomp_deny_join(spec->seccomp_deny, &deny, err)) < 0) {
		free(rules);
		return rc;
	}
	if ((rc = image_root(spec, &lower, err)) < 0) {
		free(rules);
		free(deny);
		return rc;
	}
	if (be->conf.userns) {
		for (uint64_t i = 0; i < be->conf.max_sandboxes && uslot < 0; i++)
			if (!(be->uslots[i / 8] & (1u << (i % 8))))
				uslot = (int)i;
		if (uslot < 0) {
			free(rules);
			free(lower);
			free(deny);
			return dsec_err_setc(err, DSEC_E_CAPACITY, EAGAIN,
					     "container has no free uid range (%" PRIu64 " in use)",
					     be->conf.max_sandboxes);
		}
		be->uslots[uslot / 8] |= (uint8_t)(1u << (uslot % 8));
	}
	sb = xcalloc(1, sizeof(*sb));
	sb->be = be;
	sb->id = xstrdup(spec->id ? spec->id : "");
	sb->serial = ++be->next_sb;
	sb->dir = xasprintf("%s/sb.%" PRIu64, be->host->state_dir, sb->serial);
	sb->pidfd = sb->rootfd = sb->st_fd = sb->ctl = sb->filter_fd = -1;
	sb->netfd = sb->fsock = -1;
	sb->net_allow = net_allow;
	sb->rules = rules;
	sb->nrules = nrules;
	sb->dns = dns;
	sb->cdone = done;
	sb->carg = arg;
	dsec_buf_init(&sb->st);
	if (spec->env) {
		size_t n = dsec_strv_len(spec->env);

		sb->env = xcalloc(n + 1, sizeof(*sb->env));
		for (size_t i = 0; i < n; i++)
			sb->env[i] = xstrdup(spec->env[i]);
	}
	sb->cwd = xstrdup(spec->cwd && *spec->cwd ? spec->cwd : "/");
	sb->lower = lower;
	sb->deny = deny;
	sb->uslot = uslot;
	if (uslot >= 0) {
		sb->ubase = (uint32_t)(be->conf.uid_base + (uint64_t)uslot * CT_URANGE);
		/* The layers go to the helper as idmapped mounts (the configured
		 * rootfs is a layer too); the default root is bound from the host. */
		if (spec->layers && spec->layers[0]) {
			size_t n = dsec_strv_len(spec->layers);

			sb->layers = xcalloc(n + 1, sizeof(char *));
			for (size_t i = 0; i < n; i++)
				sb->layers[i] = xstrdup(spec->layers[i]);
		} else if (*be->conf.rootfs || be->skel) {
			sb->layers = xcalloc(2, sizeof(char *));
			sb->layers[0] = xstrdup(*be->conf.rootfs ? be->conf.rootfs : be->skel);
			sb->skel = !*be->conf.rootfs;
		}
	} else if (!sb->lower && !*be->conf.rootfs && be->skel) {
		sb->lower = xstrdup(be->skel);
		sb->skel = true;
	}
	sb->uid = uid;
	sb->gid = gid;
	sb->next = be->sbs;	/* counted from now on (capacity), torn down by fini */
	be->sbs = sb;
	be->nsbs++;
	sb->lim = spec->limits;
	sb->lim.disk = disk;
	sb->cpu_weight = spec->cpu_weight;
	*out = sb;
	w = xcalloc(1, sizeof(*w));
	w->sb = sb;
	ct_submit(be, create_prep_work, create_prep_done, w);
	return 0;
}

/* ---- exec ----------------------------------------------------------------- */

static void cgref_put(struct ct_cgref *r)
{
	if (--r->refs == 0) {
		be_cg_free(r->cg);
		free(r);
	}
}

static void kill_work(void *arg)
{
	struct ct_cgref *r = arg;

	be_cg_kill(r->cg);
}

static void kill_done(void *arg)
{
	cgref_put(arg);
}

struct ct_xclean {
	struct ct_sb *sb;		/* sandbox */
	struct ct_cgref *cg;		/* the exec's group */
	bool keep;			/* empty it for the next exec rather than remove it */
	uint64_t oom;			/* kept: its OOM kill count */
	struct ct_xclean *next;		/* sb->held */
};

static void sb_maybe_destroy(struct ct_sb *sb);
static void files_fini(struct ct_be *be, bool drained);
struct ct_xstream;
static void xstream_free(struct ct_xstream *s);

/* Kills what the exec left; the group is removed, or, when it is to be
 * the sandbox's spare, kept if it is empty: the next exec then makes no
 * group (a mkdir and an rmdir in every hierarchy fewer per command). */
static void xclean_work(void *arg)
{
	struct ct_xclean *x = arg;

	if (be_cg_kill(x->cg->cg) < 0)
		x->keep = false;
	if (x->keep)
		be_cg_oom_kills(x->cg->cg, &x->oom);	/* 0 where not counted */
	else
		be_cg_remove(x->cg->cg);
}

static void xclean_done(void *arg)
{
	struct ct_xclean *x = arg;
	struct ct_sb *sb = x->sb;

	if (x->keep) {
		sb->keeping = false;
		if (!sb->destroying && !sb->spare) {
			sb->spare = x->cg;	/* our reference goes with it */
			sb->spare_oom = x->oom;
			x->cg = NULL;
		}
	}
	if (x->cg)
		cgref_put(x->cg);
	sb->busy--;
	sb_maybe_destroy(sb);
	free(x);
}

/* Drops the spare group's reference (the sandbox's teardown removes it). */
static void spare_put(struct ct_sb *sb)
{
	if (sb->spare)
		cgref_put(sb->spare);
	sb->spare = NULL;
}

static void exec_close(struct ct_exec *x)
{
	struct ev_loop *loop = x->sb->be->host->loop;

	ev_io_stop(loop, &x->out_w);
	ev_io_stop(loop, &x->err_w);
	ev_io_stop(loop, &x->st_w);
	ev_timer_stop(loop, &x->timer);
	ev_child_stop(loop, &x->cw);
	if (x->out_fd >= 0)
		close(x->out_fd);
	if (x->err_fd >= 0)
		close(x->err_fd);
	if (x->st_fd >= 0)
		close(x->st_fd);
	x->out_fd = x->err_fd = x->st_fd = -1;
}

/* An ended command, once its done has run (or fini dropped it). */
static void exec_free(struct ct_exec *x)
{
	dsec_buf_free(&x->st);
	xstream_free(x->stream);
	free(x);
}

/* Decide the result, queue done, and kill what the exec left. */
static void exec_finish(struct ct_exec *x, int rc, const struct dsec_err *err)
{
	struct ct_sb *sb = x->sb;
	struct ct_be *be = sb->be;
	struct ct_xclean *c;

	if (x->finished)
		return;
	x->finished = true;
	exec_close(x);
	/* A command cut short may have been cut by its init's end: tell
	 * dsecd first, so that its reply says the sandbox is lost. */
	if (!sb->lost && !sb->destroying && (rc < 0 || x->res->signal == SIGKILL)) {
		bool sig;
		int num;

		if (init_gone(sb, &sig, &num))
			sb_lost(sb, sig, num);
	}
	if (x->pid > 0 && !x->reaped)
		kill(x->pid, SIGKILL);	/* libev reaps it */
	x->res->duration = (double)(dsec_now_ns() - x->t0) / 1e9;
	if (rc < 0) {
		/* A failed result has no output (backend.h). */
		dsec_buf_free(&x->res->out);
		dsec_buf_free(&x->res->err);
	}
	for (struct ct_exec **pp = &sb->execs; *pp; pp = &(*pp)->next)
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	be->running--;
	be->ncalls++;
	c = xcalloc(1, sizeof(*c));
	c->sb = sb;
	c->cg = x->cg;
	x->cg = NULL;
	/* x stays until its done has run: the caller may use its handle
	 * (exec_signal, exec_resize) until then. */
	defer_x(be, x->done, x->arg, rc, err, x);
	if (sb->destroying) {
		/* The teardown kills and removes the whole tree. */
		cgref_put(c->cg);
		sb->busy--;
		free(c);
		return;
	}
	if (!sb->spare && !sb->keeping && c->cg->refs == 1) {
		/* Usually the command left nothing: keep the group as the
		 * spare now, on the loop (two small reads), so that a command
		 * sent right after this one's reply finds it rather than
		 * racing the pool thread and making (and later removing) a
		 * group of its own. */
		if (!sb->paused && !be_cg_populated(c->cg->cg)) {
			be_cg_oom_kills(c->cg->cg, &sb->spare_oom);
			sb->spare = c->cg;
			free(c);
			sb->busy--;	/* not destroying: nothing waits for it */
			return;
		}
		c->keep = true;
		sb->keeping = true;
	}
	if (sb->paused) {
		/* Its leftovers are frozen: a kill would wait for the thaw. */
		c->next = sb->held;
		sb->held = c;
		return;
	}
	ct_submit(be, xclean_work, xclean_done, c);	/* sb->busy drops there */
}

static void exec_kill(struct ct_exec *x)
{
	if (x->killed)
		return;
	x->killed = true;
	x->cg->refs++;
	ct_submit(x->sb->be, kill_work, kill_done, x->cg);
}


/* Did the OOM killer kill any process of the exec's group?  Asked only when
 * something could have been killed (one small cgroupfs read). */
static bool exec_oom_killed(struct ct_exec *x)
{
	uint64_t n = 0;

	return be_cg_oom_kills(x->cg->cg, &n) == 0 && n > x->oom0;
}

/* Status known: parse it; complete once the pipes are closed too. */
static void exec_maybe_done(struct ct_exec *x)
{
	struct ev_loop *loop = x->sb->be->host->loop;
	const char *s = x->st.data ? x->st.data : "";
	struct dsec_err err;
	int st, e;

	if (x->st_fd >= 0)
		return;
	if (x->stream && !strncmp(s, "pid ", 4) && strchr(s, '\n'))
		s = strchr(s, '\n') + 1;	/* exec_start's helper says the pid first */
	if (!strncmp(s, "err ", 4) && sscanf(s, "err %d", &e) == 1 && strchr(s + 4, ' ')) {
		const char *msg = strchr(s + 4, ' ') + 1;

		dsec_err_setc(&err, ct_start_code(e, msg), e,
			      "cannot run the command in sandbox '%s': %.*s", x->sb->id,
			      (int)strcspn(msg, "\n"), msg);
		return exec_finish(x, -e, &err);
	}
	if (sscanf(s, "st %d", &st) != 1) {
		dsec_err_setc(&err, DSEC_E_BACKEND, EIO,
			      "cannot run the command in sandbox '%s': the helper died", x->sb->id);
		return exec_finish(x, -EIO, &err);
	}
	if (WIFEXITED(st)) {
		x->res->exit_code = WEXITSTATUS(st);
		x->res->signal = 0;
	} else {
		x->res->exit_code = -1;
		x->res->signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
	}
	x->res->oom_killed = exec_oom_killed(x);
	if ((x->out_fd < 0 && x->err_fd < 0 && x->reaped))
		return exec_finish(x, 0, NULL);
	/* Something left in the background still holds a pipe: a short grace. */
	ev_timer_stop(loop, &x->timer);
	ev_timer_set(&x->timer, CT_GRACE, 0);
	ev_timer_start(loop, &x->timer);
}

static void exec_pipe(struct ct_exec *x, ev_io *w, int *fd, struct dsec_buf *b, bool *trunc)
{
	if (be_drain(*fd, x->cap, b, trunc)) {
		ev_io_stop(x->sb->be->host->loop, w);
		close(*fd);
		*fd = -1;
		exec_maybe_done(x);
	}
}

static void exec_out_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ct_exec *x = dsec_container_of(w, struct ct_exec, out_w);

	exec_pipe(x, w, &x->out_fd, &x->res->out, &x->res->out_truncated);
}

static void exec_err_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ct_exec *x = dsec_container_of(w, struct ct_exec, err_w);

	exec_pipe(x, w, &x->err_fd, &x->res->err, &x->res->err_truncated);
}

static void exec_st_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct ct_exec *x = dsec_container_of(w, struct ct_exec, st_w);
	char buf[1024];
	ssize_t n = read(x->st_fd, buf, sizeof(buf));

	if (n > 0) {
		if (x->st.len < 4096)
			dsec_buf_add(&x->st, buf, (size_t)n);
		return;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	ev_io_stop(loop, w);
	close(x->st_fd);
	x->st_fd = -1;
	exec_maybe_done(x);
}

static void exec_child_cb(struct ev_loop *loop, ev_child *w, int revents)
{
	struct ct_exec *x = dsec_container_of(w, struct ct_exec, cw);

	ev_child_stop(loop, w);
	x->reaped = true;
	exec_maybe_done(x);
}

static void exec_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct ct_exec *x = dsec_container_of(w, struct ct_exec, timer);
	struct dsec_err err;

	if (x->st_fd < 0) {
		/* Exited; the grace for the pipes is over. */
		if (x->out_fd >= 0)
			be_drain(x->out_fd, x->cap, &x->res->out, &x->res->out_truncated);
		if (x->err_fd >= 0)
			be_drain(x->err_fd, x->cap, &x->res->err, &x->res->err_truncated);
		return exec_finish(x, 0, NULL);
	}
	if (!x->killed) {
		x->res->timed_out = true;
		exec_kill(x);
		ev_timer_set(w, CT_KILL_GRACE, 0);
		ev_timer_start(loop, w);
		return;
	}
	dsec_err_setc(&err, DSEC_E_BACKEND, EIO, "a command in sandbox '%s' did not stop",
		      x->sb->id);
	exec_finish(x, -EIO, &err);
}

/* A command may start in sb: 0, or -errno with *err. */
static int exec_can_start(const struct ct_sb *sb, struct dsec_err *err)
{
	if (sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT, "sandbox '%s' is being destroyed",
				     sb->id);
	if (sb->paused)
		return dsec_err_setc(err, DSEC_E_INVALID, EBUSY,
				     "sandbox '%s' is paused: resume it first", sb->id);
	return 0;
}

/* Starts the helper in exec mode with fds[0..2] (the command's stdin,
 * stdout, stderr; fds has room for 6 + BE_CG_MAXH), status pipe st and the
 * exec's cgroup fds; -1 with errno. */
static pid_t exec_spawn(struct ct_sb *sb, char **argv, char **env, int *fds, int st,
			const int *cgfds, int ncg)
{
	fds[3] = st;
	fds[4] = sb->pidfd;
	fds[5] = sb->rootfd;
	for (int k = 0; k < ncg; k++)
		fds[6 + k] = cgfds[k];
	return spawn_helper(sb->be, argv, env, fds, 6 + ncg, 0, NULL);
}

/* An exec's helper is running: watch its status pipe, its exit and the
 * timeout (seconds, <= 0 = the configured one), and count it as running. */
static void exec_track(struct ct_exec *x, double timeout)
{
	struct ct_sb *sb = x->sb;
	struct ct_be *be = sb->be;
	struct ev_loop *loop = be->host->loop;

	dsec_set_nonblock(x->st_fd, true);
	ev_io_init(&x->st_w, exec_st_cb, x->st_fd, EV_READ);
	ev_io_start(loop, &x->st_w);
	ev_timer_init(&x->timer, exec_timer_cb, timeout > 0 ? timeout : be->conf.timeout, 0);
	ev_timer_start(loop, &x->timer);
	if (x->pid > 0 && ev_is_default_loop(loop)) {
		ev_child_init(&x->cw, exec_child_cb, x->pid, 0);
		ev_child_start(loop, &x->cw);
	} else {
		x->reaped = true;	/* none, or the init reaps what it started */
	}
	x->next = sb->execs;
	sb->execs = x;
	sb->busy++;
	be->running++;
}

static const char *env_key_end(const char *kv)
{
	const char *eq = strchr(kv, '=');

	return eq ? eq : kv + strlen(kv);
}

/* Later entries replace earlier ones with the same key. */
static void env_merge(char ***v, size_t *n, const char *const *add)
{
	for (size_t i = 0; add && add[i]; i++) {
		size_t kl = (size_t)(env_key_end(add[i]) - add[i]);
		size_t j;

		for (j = 0; j < *n; j++)
			if (!strncmp((*v)[j], add[i], kl) && (*v)[j][kl] == '=')
				break;
		if (j == *n) {
			*v = xrealloc(*v, (*n + 2) * sizeof(**v));
			(*n)++;
		}
		(*v)[j] = (char *)add[i];
		(*v)[*n] = NULL;
	}
}

/* Text behind the numeric arguments of the helper's exec mode. */
struct exec_nums {
	char uid[24];			/* --uid */
	char gid[24];			/* --gid */
	char nofile[24];		/* --nofile */
};

/* Puts the helper's exec-mode arguments before "--" into argv (room for
 * 16); returns how many. */
static size_t exec_args(const struct ct_sb *sb, char **argv, const char *cwd, char *desc,
			struct exec_nums *n)
{
	const struct ct_be *be = sb->be;
	size_t i = 0;

	snprintf(n->uid, sizeof(n->uid), "%" PRIu64, sb->uid);
	snprintf(n->gid, sizeof(n->gid), "%" PRIu64, sb->gid);
	snprintf(n->nofile, sizeof(n->nofile), "%" PRIu64,
		 sb->lim.nofile ? (uint64_t)sb->lim.nofile : be->conf.nofile);
	argv[i++] = (char *)CT_HELPER;
	argv[i++] = (char *)"exec";
	argv[i++] = (char *)"--uid";
	argv[i++] = n->uid;
	argv[i++] = (char *)"--gid";
	argv[i++] = n->gid;
	argv[i++] = (char *)"--cwd";
	argv[i++] = (char *)cwd;
	argv[i++] = (char *)"--nofile";
	argv[i++] = n->nofile;
	argv[i++] = (char *)"--cg";
	argv[i++] = desc;
	argv[i++] = (char *)"--userns";
	argv[i++] = (char *)(sb->ubase ? "1" : "0");
	if (sb->deny) {
		argv[i++] = (char *)"--deny";
		argv[i++] = sb->deny;
	}
	return i;
}

/* Every command's environment starts with these. */
static const char *const base_env[] = {
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/root", "HOSTNAME=sandbox", "LANG=C.UTF-8", "TERM=dumb", NULL };

/* Asks the sandbox's init to start cmd (ct_exec.h): stdin in (-1: none),
 * stdout, stderr and status pipes, the exec's group cg.  0, or -errno when
 * the caller should start it through the exec helper instead (request too
 * large, socket full, init gone). */
static int exec_via_init(struct ct_sb *sb, char *const *cmd, char *const *env, const char *cwd,
			 struct be_cg *cg, int in, int out, int errfd, int st)
{
	struct ct_xmsg h = { .magic = CT_XMSG_MAGIC, .uid = (uint32_t)sb->uid,
			     .gid = (uint32_t)sb->gid };
	int fds[4 + BE_CG_MAXH], procs[BE_CG_MAXH], n = 0, ncg, rc;
	struct dsec_buf b;

	if ((ncg = be_cg_open_procs(cg, procs)) < 0)
		return ncg;

	h.flags = (in >= 0 ? CT_X_STDIN : 0) | (sb->ubase ? CT_X_USERNS : 0);
	h.nofile = sb->lim.nofile ? (uint64_t)sb->lim.nofile : sb->be->conf.nofile;
	while (cmd[h.argc])
		h.argc++;
	while (env[h.envc])
		h.envc++;
	dsec_buf_init(&b);
	dsec_buf_add(&b, &h, sizeof(h));
	dsec_buf_add(&b, cwd, strlen(cwd) + 1);
	for (uint32_t i = 0; i < h.argc && b.len <= CT_XMSG_MAX; i++)
		dsec_buf_add(&b, cmd[i], strlen(cmd[i]) + 1);
	for (uint32_t i = 0; i < h.envc && b.len <= CT_XMSG_MAX; i++)
		dsec_buf_add(&b, env[i], strlen(env[i]) + 1);
	fds[n++] = out;
	fds[n++] = errfd;
	fds[n++] = st;
	if (in >= 0)
		fds[n++] = in;
	for (int i = 0; i < ncg; i++)
		fds[n++] = procs[i];
	rc = b.len > CT_XMSG_MAX ? -EMSGSIZE : be_send_fds(sb->ctl, b.data, b.len, fds, n,
							    MSG_DONTWAIT);
	dsec_buf_free(&b);
	for (int i = 0; i < ncg; i++)
		close(procs[i]);
	if (rc < 0 && rc != -EMSGSIZE && rc != -EAGAIN && rc != -ENOBUFS) {
		/* The init is gone (or never served): stop asking it. */
		close(sb->ctl);
		sb->ctl = -1;
	}
	return rc;
}

static int ct_exec(void *vsb, const struct dsec_exec_req *req, struct dsec_exec_res *res,
		   dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct ct_sb *sb = vsb;
	struct ct_be *be = sb->be;
	struct ev_loop *loop = be->host->loop;
	_cleanup_free_ char **env = NULL;
	_cleanup_free_ char **argv = NULL;
	size_t nenv = 0, nargv = 0, i = 0, cmd0;
	char desc[256], name[32];
	struct exec_nums nums;
	int cgfds[BE_CG_MAXH], ncg, po[2] = { -1, -1 }, pe[2] = { -1, -1 }, ps[2] = { -1, -1 };
	int in = -1, fds[6 + BE_CG_MAXH], rc;
	struct ct_cgref *spare = NULL;
	struct be_cg *cg = NULL;
	struct ct_exec *x;
	pid_t pid;

	if ((rc = exec_can_start(sb, err)) < 0)
		return rc;
	if (!req->argv && !req->code)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "exec needs argv or code");
	if (req->argv && !req->argv[0])
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "empty argv");
	env_merge(&env, &nenv, base_env);
	env_merge(&env, &nenv, (const char *const *)sb->env);
	env_merge(&env, &nenv, req->env);
	if (!env) {
		env = xcalloc(1, sizeof(*env));
	}

	if (sb->spare) {
		spare = sb->spare;
		sb->spare = NULL;
		cg = spare->cg;
	} else {
		snprintf(name, sizeof(name), "x.%" PRIu64, ++sb->next_x);
		if ((rc = be_cg_child(sb->cg, name, true, false, &cg, err)) < 0)
			return rc;
	}
	ncg = be_cg_export(cg, desc, sizeof(desc), cgfds);
	const char *cwd = req->cwd && *req->cwd ? req->cwd : sb->cwd;
	nargv = req->argv ? dsec_strv_len(req->argv) : 3;
	argv = xcalloc(nargv + 20, sizeof(*argv));
	i = exec_args(sb, argv, cwd, desc, &nums);
	argv[i++] = (char *)"--";
	cmd0 = i;
	if (req->argv) {
		for (size_t k = 0; k < nargv; k++)
			argv[i++] = (char *)req->argv[k];
	} else {
		argv[i++] = (char *)"/bin/sh";
		argv[i++] = (char *)"-c";
		argv[i++] = (char *)req->code;
	}
	argv[i] = NULL;

	if (req->stdin_len) {
		if ((in = memfd_create("dsec-stdin", MFD_CLOEXEC)) < 0 ||
		    dsec_write_all(in, req->stdin_data, req->stdin_len) < 0 ||
		    lseek(in, 0, SEEK_SET) < 0) {
			rc = dsec_err_set(err, errno, "cannot buffer stdin: %s", strerror(errno));
			goto fail;
		}
	}
	if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0 || pipe2(ps, O_CLOEXEC) < 0) {
		rc = dsec_err_set(err, errno, "cannot make pipes: %s", strerror(errno));
		goto fail;
	}
	fds[0] = in;
	fds[1] = po[1];
	fds[2] = pe[1];
	/* The init forks it: no helper to exec, load and enter namespaces
	 * with; the exec helper when the init cannot take it. */
	if (sb->ctl >= 0 &&
	    exec_via_init(sb, argv + cmd0, env, cwd, cg, in, po[1], pe[1], ps[1]) == 0)
		pid = 0;
	else
		pid = exec_spawn(sb, argv, env, fds, ps[1], cgfds, ncg);
	if (pid < 0) {
		rc = dsec_err_set(err, errno, "cannot fork: %s", strerror(errno));
		goto fail;
	}
	close(po[1]);
	close(pe[1]);
	close(ps[1]);
	if (in >= 0)
		close(in);

	x = xcalloc(1, sizeof(*x));
	x->sb = sb;
	x->res = res;
	x->done = done;
	x->arg = arg;
	if (spare) {
		x->cg = spare;
		x->oom0 = sb->spare_oom;
	} else {
		x->cg = xcalloc(1, sizeof(*x->cg));
		x->cg->cg = cg;
		x->cg->refs = 1;
	}
	x->pid = pid;
	x->out_fd = po[0];
	x->err_fd = pe[0];
	x->st_fd = ps[0];
	x->cap = req->output_cap ? req->output_cap : CT_DEFAULT_CAP;
	x->t0 = dsec_now_ns();
	x->left = -1;
	dsec_buf_init(&x->st);
	res->exit_code = -1;
	res->signal = 0;
	res->timed_out = res->out_truncated = res->err_truncated = false;
	dsec_set_nonblock(x->out_fd, true);
	dsec_set_nonblock(x->err_fd, true);
	ev_io_init(&x->out_w, exec_out_cb, x->out_fd, EV_READ);
	ev_io_init(&x->err_w, exec_err_cb, x->err_fd, EV_READ);
	ev_io_start(loop, &x->out_w);
	ev_io_start(loop, &x->err_w);
	exec_track(x, req->timeout);
	return 0;

fail:
	for (int k = 0; k < 2; k++) {
		if (po[k] >= 0)
			close(po[k]);
		if (pe[k] >= 0)
			close(pe[k]);
		if (ps[k] >= 0)
			close(ps[k]);
	}
	if (in >= 0)
		close(in);
	if (spare) {
		sb->spare = spare;	/* still empty */
	} else {
		be_cg_remove(cg);
		be_cg_free(cg);
	}
	return rc;
}

/* ---- streaming exec ----------------------------------------------------------
 *
 * exec_start runs the command as exec does (the same helper, per-exec
 * cgroup, timeout, status pipe and completion), but its stdin and output
 * ends go to the caller, who reads them at its own pace; the exec
 * completes once the status is known.  The helper reports the command's
 * pid first ("pid PID"), so exec_signal can signal its process group.
 *
 * With a pty the terminal is allocated in the sandbox's own devpts
 * instance (mounted newinstance by container-init): we open its ptmx
 * through the root fd (openat2, RESOLVE_IN_ROOT), check that it is one,
 * and take the peer with TIOCGPTPEER, so no path of the host's /dev/pts is
 * ever involved and the command sees /dev/pts/N of its own.  The slave
 * becomes the command's fds 0-2 and its controlling terminal; the master
 * goes to the caller (stdin and output), a copy stays here for resizes.
 */

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif
#define CT_DEVPTS_MAGIC 0x1cd1	/* DEVPTS_SUPER_MAGIC */

/* What a streaming exec keeps besides struct ct_exec. */
struct ct_xstream {
	int ptm;			/* the pty's master (resizes), -1 = no pty */
};

static void xstream_free(struct ct_xstream *s)
{
	if (!s)
		return;
	if (s->ptm >= 0)
		close(s->ptm);
	free(s);
}

/* A new pty of sb's devpts: *ptm its master, returns the slave's fd (owned
 * by the ids commands run as) or -errno with *err. */
static int open_pty(struct ct_sb *sb, const struct dsec_exec_stream_opts *o, int *ptm,
		    struct dsec_err *err)
{
	struct winsize ws = { .ws_row = o->rows ? o->rows : 24, .ws_col = o->cols ? o->cols : 80 };
	char self[64];
	struct statfs fs;
	struct stat st;
	int m, s, unlock = 0;

	/* Looked at before it is opened: the path is the sandbox's, and an
	 * open of some other device node may do something. */
	m = open_in_root(sb->rootfd, "dev/pts/ptmx", O_PATH | O_NOFOLLOW, 0);
	if (m < 0)
		return dsec_err_set(err, -m, "cannot open the terminal multiplexer of sandbox "
				    "'%s': %s", sb->id, strerror(-m));
	if (fstat(m, &st) < 0 || fstatfs(m, &fs) < 0 || !S_ISCHR(st.st_mode) ||
	    major(st.st_rdev) != 5 || minor(st.st_rdev) != 2 || fs.f_type != CT_DEVPTS_MAGIC) {
		close(m);
		return dsec_err_setc(err, DSEC_E_BACKEND, ENOTTY, "sandbox '%s' has no devpts of "
				     "its own at /dev/pts", sb->id);
	}
	snprintf(self, sizeof(self), "/proc/self/fd/%d", m);
	s = open(self, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	close(m);
	if ((m = s) < 0)
		return dsec_err_set(err, errno, "cannot open the terminal multiplexer of sandbox "
				    "'%s': %s", sb->id, strerror(errno));
	if (ioctl(m, TIOCSPTLCK, &unlock) < 0 || ioctl(m, TIOCSWINSZ, &ws) < 0 ||
	    (s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
		int e = errno;

		close(m);
		return dsec_err_set(err, e, "cannot make a terminal in sandbox '%s': %s", sb->id,
				    strerror(e));
	}
	if (fchown(s, (uid_t)(sb->ubase + sb->uid), (gid_t)(sb->ubase + sb->gid)) < 0)
		LOG(sb->be, DSEC_LOG_DEBUG, "container: cannot chown a terminal of '%s': %s",
		    sb->id, strerror(errno));
	*ptm = m;
	return s;
}

/* The command's pid from the helper's "pid PID" line, reading what the
 * status pipe has if it has not come yet; 0 if it still has not. */
static pid_t xstream_pid(struct ct_exec *x)
{
	char buf[256];
	ssize_t n;
	int pid;

	if (x->st_fd >= 0 && (!x->st.data || !strchr(x->st.data, '\n')) &&
	    (n = read(x->st_fd, buf, sizeof(buf))) > 0)
		dsec_buf_add(&x->st, buf, (size_t)n);
	if (x->st.data && sscanf(x->st.data, "pid %d\n", &pid) == 1 && pid > 0)
		return pid;
	return 0;
}

static int ct_exec_start(void *vsb, const struct dsec_exec_req *req,
			 const struct dsec_exec_stream_opts *o, struct dsec_exec_stream *out,
			 struct dsec_exec_res *res, dsec_be_done_fn done, void *arg,
			 struct dsec_err *err)
{
	static const char *const pty_env[] = { "TERM=xterm-256color", NULL };
	struct ct_sb *sb = vsb;
	struct ct_be *be = sb->be;
	_cleanup_free_ char **env = NULL;
	_cleanup_free_ char **argv = NULL;
	size_t nenv = 0, i;
	char desc[256], name[32];
	struct exec_nums nums;
	int cgfds[BE_CG_MAXH], ncg, fds[6 + BE_CG_MAXH], rc;
	int p[3][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 } }, ps[2] = { -1, -1 };
	int ptm = -1, pts = -1, ptm2 = -1;
	struct be_cg *cg = NULL;
	struct ct_exec *x;
	pid_t pid;

	if ((rc = exec_can_start(sb, err)) < 0)
		return rc;
	if ((!req->argv || !req->argv[0]) && !req->code)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "exec_start needs argv or code");
	env_merge(&env, &nenv, base_env);
	if (o->pty)
		env_merge(&env, &nenv, pty_env);
	env_merge(&env, &nenv, (const char *const *)sb->env);
	env_merge(&env, &nenv, req->env);

	snprintf(name, sizeof(name), "x.%" PRIu64, ++sb->next_x);
	if ((rc = be_cg_child(sb->cg, name, true, false, &cg, err)) < 0)
		return rc;
	ncg = be_cg_export(cg, desc, sizeof(desc), cgfds);
	argv = xcalloc((req->argv ? dsec_strv_len(req->argv) : 3) + 24, sizeof(*argv));
	i = exec_args(sb, argv, req->cwd && *req->cwd ? req->cwd : sb->cwd, desc, &nums);
	argv[i++] = (char *)"--pid";
	argv[i++] = (char *)"1";
	argv[i++] = (char *)"--tty";
	argv[i++] = (char *)(o->pty ? "1" : "0");
	argv[i++] = (char *)"--";
	for (size_t k = 0; req->argv && req->argv[k]; k++)
		argv[i++] = (char *)req->argv[k];
	if (!req->argv) {
		argv[i++] = (char *)"/bin/sh";
		argv[i++] = (char *)"-c";
		argv[i++] = (char *)req->code;
	}
	if (o->pty) {
		if ((pts = rc = open_pty(sb, o, &ptm, err)) < 0)
			goto fail;
		if ((ptm2 = fcntl(ptm, F_DUPFD_CLOEXEC, 3)) < 0) {
			rc = dsec_err_set(err, errno, "cannot duplicate a terminal: %s",
					  strerror(errno));
			goto fail;
		}
		fds[0] = fds[1] = fds[2] = pts;
	} else {
		for (int k = 0; k < 3; k++)
			if (pipe2(p[k], O_CLOEXEC) < 0) {
				rc = dsec_err_set(err, errno, "cannot make pipes: %s", strerror(errno));
				goto fail;
			}
		fds[0] = p[0][0];
		fds[1] = p[1][1];
		fds[2] = p[2][1];
	}
	if (pipe2(ps, O_CLOEXEC) < 0) {
		rc = dsec_err_set(err, errno, "cannot make pipes: %s", strerror(errno));
		goto fail;
	}
	pid = exec_spawn(sb, argv, env, fds, ps[1], cgfds, ncg);
	if (pid < 0) {
		rc = dsec_err_set(err, errno, "cannot fork: %s", strerror(errno));
		goto fail;
	}
	close(ps[1]);
	if (o->pty) {
		close(pts);
		out->in_fd = ptm;
		out->out_fd = ptm2;
		out->err_fd = -1;
	} else {
		close(p[0][0]);
		close(p[1][1]);
		close(p[2][1]);
		out->in_fd = p[0][1];
		out->out_fd = p[1][0];
		out->err_fd = p[2][0];
	}

	x = xcalloc(1, sizeof(*x));
	x->sb = sb;
	x->res = res;
	x->done = done;
	x->arg = arg;
	x->cg = xcalloc(1, sizeof(*x->cg));
	x->cg->cg = cg;
	x->cg->refs = 1;
	x->pid = pid;
	x->out_fd = x->err_fd = -1;	/* the caller's */
	x->st_fd = ps[0];
	x->t0 = dsec_now_ns();
	x->left = -1;
	x->stream = xcalloc(1, sizeof(*x->stream));
	x->stream->ptm = -1;
	if (o->pty && (x->stream->ptm = fcntl(ptm, F_DUPFD_CLOEXEC, 3)) < 0)
		LOG(be, DSEC_LOG_WARN, "container: cannot keep a terminal of '%s' for resizes: %s",
		    sb->id, strerror(errno));
	dsec_buf_init(&x->st);
	res->exit_code = -1;
	exec_track(x, req->timeout);
	out->handle = x;
	return 0;

fail:
	for (int k = 0; k < 2; k++) {
		if (ps[k] >= 0)
			close(ps[k]);
		for (int j = 0; j < 3; j++)
			if (p[j][k] >= 0)
				close(p[j][k]);
	}
	if (pts >= 0)
		close(pts);
	if (ptm >= 0)
		close(ptm);
	if (ptm2 >= 0)
		close(ptm2);
	be_cg_remove(cg);
	be_cg_free(cg);
	return rc;
}

static int ct_exec_signal(void *vsb, void *handle, int sig, struct dsec_err *err)
{
	struct ct_exec *x = handle;
	pid_t pid;

	if (x->finished)
		return 0;	/* ended, its done on the way: nothing left to signal */
	if (!(pid = xstream_pid(x)))
		return dsec_err_setc(err, DSEC_E_BUSY, EAGAIN, "the command in sandbox '%s' is still "
				     "starting: retry", x->sb->id);
	if (strstr(x->st.data, "\nst "))
		return 0;	/* reaped: its pid may be another's already */
	if (x->sb->paused && sig != SIGKILL && sig != SIGCONT)
		LOG(x->sb->be, DSEC_LOG_DEBUG, "container: signal %d to paused '%s' waits for the "
		    "resume", sig, x->sb->id);
	/* The command leads its group (container-init setsid()s it); a group
	 * that is gone has nothing left to signal. */
	if (kill(-pid, sig) < 0 && errno != ESRCH)
		return dsec_err_set(err, errno, "cannot signal the command in sandbox '%s': %s",
				    x->sb->id, strerror(errno));
	return 0;
}

static int ct_exec_resize(void *vsb, void *handle, uint16_t rows, uint16_t cols,
			  struct dsec_err *err)
{
	struct ct_exec *x = handle;
	struct winsize ws = { .ws_row = rows, .ws_col = cols };

	if (x->finished)
		return 0;	/* ended, its done on the way */
	if (!x->stream || x->stream->ptm < 0)
		return dsec_err_setc(err, DSEC_E_INVALID, ENOTTY, "the command in sandbox '%s' has "
				     "no terminal", x->sb->id);
	if (ioctl(x->stream->ptm, TIOCSWINSZ, &ws) < 0)
		return dsec_err_set(err, errno, "cannot resize the terminal in sandbox '%s': %s",
				    x->sb->id, strerror(errno));
	return 0;
}

/* ---- files ----------------------------------------------------------------
 *
 * Every file operation of a sandbox is done by its file server
 * (container-files): a process with exactly a command's credentials in
 * the sandbox's namespaces (be_fs.h does the work, the server tells why
 * it is that process), started at the sandbox's first file operation and
 * kept until destroy.  Operations go to it one at a time, in order, from
 * a pool thread; the others wait in sb->fwait (as they do while a
 * snapshot holds the sandbox).  A server found gone before an operation
 * reached it is started again once for that operation.
 */

struct ct_fwork {
	struct ct_sb *sb;		/* sandbox */
	dsec_be_done_fn done;		/* caller's */
	void *arg;			/* its argument */
	int rc;				/* 0 or -errno */
	struct dsec_err err;		/* why */
	int sock;			/* the server's socket, for the pool thread */
	bool retried;			/* the server was started again for it */
	char *path;			/* path inside */
	uint64_t offset, len;		/* file_read */
	struct dsec_buf *out;		/* file_read output */
	struct dsec_file_req wreq;	/* file_write: the request it makes */
	const struct dsec_file_req *req;	/* file: the request (caller's, or &wreq) */
	struct dsec_file_res *res;	/* file: its result (caller's, or &wres) */
	struct dsec_file_res wres;	/* file_write: its (empty) result */
	void (*work)(void *);		/* its work */
	struct ct_fwork *next;		/* sb->fwait */
};

/* A file server, from its start until it is reaped (it may outlive its
 * sandbox by the moment it takes to see its socket close). */
struct ct_fsd {
	struct ct_be *be;		/* backend */
	struct ct_fsd *next;		/* be->fsds */
	struct ct_sb *sb;		/* its sandbox, NULL once that stopped it */
	pid_t pid;			/* the server */
	ev_child cw;			/* its end */
};

/* Resolve inside the sandbox's root: ".." stops at the root, absolute
 * symlinks are relative to it, /proc magic links are refused. */
static int open_in_root(int rootfd, const char *path, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.mode = (flags & O_CREAT) ? mode : 0,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, rootfd, *path ? path : ".", &how, sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

static void fsd_free(struct ct_fsd *f)
{
	for (struct ct_fsd **pp = &f->be->fsds; *pp; pp = &(*pp)->next)
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	if (f->sb)
		f->sb->fsd = NULL;
	ev_child_stop(f->be->host->loop, &f->cw);
	free(f);
}

static void fsd_child_cb(struct ev_loop *loop, ev_child *w, int revents)
{
	fsd_free(dsec_container_of(w, struct ct_fsd, cw));
}

/* Ends sb's file server (it is killed: an operation it is in the middle
 * of matters no more) and closes its socket; on the loop, with no file
 * operation on a pool thread. */
static void files_stop(struct ct_sb *sb)
{
	if (sb->fsd) {
		kill(sb->fsd->pid, SIGKILL);
		sb->fsd->sb = NULL;
		sb->fsd = NULL;
	}
	if (sb->fsock >= 0)
		close(sb->fsock);
	sb->fsock = -1;
}

/* At fini: every file server is killed, so that an operation a pool
 * thread waits on ends at once; once no pool work runs (drained), their
 * sockets are closed and they are reaped (the loop will not run again to
 * do it). */
static void files_fini(struct ct_be *be, bool drained)
{
	for (struct ct_fsd *f = be->fsds; f && !drained; f = f->next)
		kill(f->pid, SIGKILL);
	if (!drained)
		return;
	for (struct ct_sb *sb = be->sbs; sb; sb = sb->next)
		files_stop(sb);
	while (be->fsds) {
		struct ct_fsd *f = be->fsds;

		kill(f->pid, SIGKILL);
		while (waitpid(f->pid, NULL, 0) < 0 && errno == EINTR)
			;
		fsd_free(f);
	}
}

/* Starts sb's file server: container-files with a socket, the init's
 * pidfd, the root and the commands' filter (as the init gets it). */
static int files_start(struct ct_sb *sb, struct dsec_err *err)
{
	struct ct_be *be = sb->be;
	int filter = sb->filter_fd >= 0 ? sb->filter_fd : sb->deny ? -1 : be->filter_fd;
	char uid[24], gid[24], ncgs[16];
	char *argv[] = { (char *)CT_FILES, (char *)"--uid", uid, (char *)"--gid", gid,
			 (char *)"--userns", (char *)(sb->ubase ? "1" : "0"), (char *)"--cg", ncgs,
			 (char *)(sb->deny ? "--deny" : NULL), sb->deny, NULL };
	char *envp[] = { NULL };
	int sv[2], fds[7 + BE_CG_MAXH], cgfds[BE_CG_MAXH], ncg;
	struct ct_fsd *f;
	pid_t pid;

	if (sb->pidfd < 0 || sb->rootfd < 0)
		return dsec_err_setc(err, DSEC_E_BACKEND, ESRCH, "sandbox '%s' has no init", sb->id);
	snprintf(uid, sizeof(uid), "%" PRIu64, sb->uid);
	snprintf(gid, sizeof(gid), "%" PRIu64, sb->gid);
	/* It joins the sandbox's cgroup after its exec, as the init does:
	 * what it writes to the sandbox's in-memory disk is charged to the
	 * sandbox's memory, not dsecd's. */
	if ((ncg = be_cg_open_procs(sb->cg, cgfds)) < 0)
		return dsec_err_set(err, -ncg, "cannot open the cgroup of sandbox '%s': %s", sb->id,
				    strerror(-ncg));
	snprintf(ncgs, sizeof(ncgs), "%d", ncg);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		for (int i = 0; i < ncg; i++)
			close(cgfds[i]);
		return dsec_err_set(err, errno, "cannot start the file server of sandbox '%s': %s",
				    sb->id, strerror(errno));
	}
	fds[0] = fds[1] = fds[2] = -1;
	fds[3] = sv[1];
	fds[4] = sb->pidfd;
	fds[5] = sb->rootfd;
	fds[6] = filter;
	for (int i = 0; i < ncg; i++)
		fds[7 + i] = cgfds[i];
	pid = spawn_prog(be, CT_FILES, argv, envp, fds, 7 + ncg, 0, NULL);
	close(sv[1]);
	for (int i = 0; i < ncg; i++)
		close(cgfds[i]);
	if (pid < 0) {
		close(sv[0]);
		return dsec_err_set(err, errno, "cannot start the file server of sandbox '%s': %s",
				    sb->id, strerror(errno));
	}
	f = xcalloc(1, sizeof(*f));
	f->be = be;
	f->sb = sb;
	f->pid = pid;
	f->next = be->fsds;
	be->fsds = f;
	if (ev_is_default_loop(be->host->loop)) {
		ev_child_init(&f->cw, fsd_child_cb, pid, 0);
		ev_child_start(be->host->loop, &f->cw);
	}
	sb->fsd = f;
	sb->fsock = sv[0];
	return 0;
}

static void read_work(void *arg)
{
	struct ct_fwork *w = arg;

	w->rc = be_fs_call_read(w->sock, w->path, w->offset, w->len, w->out, &w->err);
}

static void fs_work(void *arg)
{
	struct ct_fwork *w = arg;

	w->rc = be_fs_call(w->sock, w->req, w->res, &w->err);
}

static void file_done(void *arg);
static void pause_work(void *arg);
static void pause_done(void *arg);

/* Hands w to the pool thread, the server started first if need be; on
 * failure w completes with the error.  On the loop. */
static void file_run(struct ct_fwork *w)
{
	struct ct_sb *sb = w->sb;

	w->rc = sb->fsock < 0 ? files_start(sb, &w->err) : 0;
	w->sock = sb->fsock;
	sb->fbusy = true;
	if (w->rc < 0)
		return file_done(w);
	ct_submit(sb->be, w->work, file_done, w);
}

/* The next waiting file op, unless one runs or a snapshot holds sb. */
static void file_next(struct ct_sb *sb)
{
	struct ct_fwork *w = sb->fwait;

	if (!w || sb->fbusy || sb->snapping)
		return;
	sb->fwait = w->next;
	w->next = NULL;
	file_run(w);
}

static void file_done(void *arg)
{
	struct ct_fwork *w = arg;
	struct ct_sb *sb = w->sb;

	sb->fbusy = false;
	if (w->rc == -ENOTCONN || w->rc == -EPIPE || w->rc == -EPROTO)
		files_stop(sb);
	if (w->rc == -ENOTCONN && !w->retried && !sb->destroying) {
		LOG(sb->be, DSEC_LOG_INFO, "container: the file server of '%s' had ended; "
		    "starting another", sb->id);
		w->retried = true;
		return file_run(w);
	}
	sb->busy--;
	defer(sb->be, w->done, w->arg, w->rc, &w->err);
	free(w->path);
	free(w);
	file_next(sb);
	if (sb->pause_wait && !sb->fbusy) {
		struct ct_pwork *p = sb->pause_wait;

		sb->pause_wait = NULL;
		ct_submit(sb->be, pause_work, pause_done, p);
	}
	sb_maybe_destroy(sb);
}

static int file_op(struct ct_sb *sb, void (*work)(void *), struct ct_fwork *t,
		   struct dsec_err *err)
{
	struct ct_fwork *w, **pp = &sb->fwait;

	if (sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT, "sandbox '%s' is being destroyed",
				     sb->id);
	if (strlen(t->path) > 4096)
		return dsec_err_setc(err, DSEC_E_TOO_LARGE, ENAMETOOLONG, "path too long");
	w = xmemdup(t, sizeof(*t));
	w->path = xstrdup(t->path);
	w->work = work;
	if (w->req == &t->wreq) {
		w->wreq.path = w->path;
		w->req = &w->wreq;
		w->res = &w->wres;
	}
	sb->busy++;
	/* In order; after a snapshot: what it copies is what was there before. */
	while (*pp)
		pp = &(*pp)->next;
	*pp = w;
	file_next(sb);
	return 0;
}

static int ct_file_read(void *vsb, const char *path, uint64_t offset, uint64_t len,
			struct dsec_buf *out, dsec_be_done_fn done, void *arg,
			struct dsec_err *err)
{
	struct ct_sb *sb = vsb;
	struct ct_fwork t = { .sb = sb, .done = done, .arg = arg, .path = (char *)path,
			      .offset = offset, .len = len, .out = out };

	return file_op(sb, read_work, &t, err);
}

static int ct_file_write(void *vsb, const char *path, const void *data, size_t len,
			 uint32_t mode, dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct ct_sb *sb = vsb;
	struct ct_fwork t = { .sb = sb, .done = done, .arg = arg, .path = (char *)path };

	t.wreq = (struct dsec_file_req){ .op = DSEC_FILE_WRITE, .path = path, .data = data,
					 .len = len, .mode = mode ? mode : 0644,
					 .uid = DSEC_OWNER_DEFAULT, .gid = DSEC_OWNER_DEFAULT };
	t.req = &t.wreq;
	return file_op(sb, fs_work, &t, err);
}

/* ---- network allowlist ---------------------------------------------------- */

struct ct_nwork {
	struct ct_sb *sb;		/* sandbox */
	dsec_be_done_fn done;		/* caller's */
	void *arg;			/* its argument */
	int rc;				/* 0 or -errno */
	struct dsec_err err;		/* why */
	struct be_net_rule *rules;	/* the new allowlist (ours until done) */
	size_t n;			/* its entries */
};

static void allow_work(void *arg)
{
	struct ct_nwork *w = arg;

	w->rc = be_netns_filter(&w->sb->be->br, w->sb->netfd, w->rules, w->n, w->sb->dns, &w->err);
}

static void allow_done(void *arg)
{
	struct ct_nwork *w = arg;
	struct ct_sb *sb = w->sb;

	sb->busy--;
	if (w->rc == 0) {
		free(sb->rules);
		sb->rules = w->rules;
		sb->nrules = w->n;
		w->rules = NULL;
	}
	defer(sb->be, w->done, w->arg, w->rc, &w->err);
	free(w->rules);
	free(w);
	sb_maybe_destroy(sb);
}

static int ct_net_allow(void *vsb, const char *const *allow, dsec_be_done_fn done, void *arg,
			struct dsec_err *err)
{
	struct ct_sb *sb = vsb;
	struct ct_nwork *w;
	struct be_net_rule *rules;
	size_t n;
	int rc;

	if (sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT, "sandbox '%s' is being destroyed",
				     sb->id);
	if (!sb->net_allow || sb->netfd < 0)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "sandbox '%s' has network 'none': create it with network "
				     "'allowlist' to change what it may reach", sb->id);
	if ((rc = be_net_rules_parse(allow, &rules, &n, err)) < 0)
		return rc;
	w = xcalloc(1, sizeof(*w));
	w->sb = sb;
	w->done = done;
	w->arg = arg;
	w->rules = rules;
	w->n = n;
	sb->busy++;
	ct_submit(sb->be, allow_work, allow_done, w);
	return 0;
}

/* ---- pause and resume --------------------------------------------------------- */

/* Pause freezes the sandbox's cgroup, which holds pid 1 and every exec
 * (their groups are its children), so nothing of it runs; then it asks
 * the kernel to reclaim the group's memory.  Execs in flight are frozen
 * with the rest: their timers stop and their duration leaves the paused
 * time out, so a pause never makes a command time out.  The loop side
 * marks the sandbox paused when the freeze starts, so no timer fires and
 * no cleanup starts on a group that is being frozen. */

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

/* Cleanups of execs that ended while paused: dropped, the teardown does it. */
static void drop_held(struct ct_sb *sb)
{
	while (sb->held) {
		struct ct_xclean *c = sb->held;

		sb->held = c->next;
		if (c->keep)
			sb->keeping = false;
		cgref_put(c->cg);
		sb->busy--;
		free(c);
	}
}

static void stop_exec_timers(struct ct_sb *sb)
{
	struct ev_loop *loop = sb->be->host->loop;

	sb->paused = true;
	sb->paused_at = dsec_now_ns();
	for (struct ct_exec *x = sb->execs; x; x = x->next) {
		x->left = -1;
		if (ev_is_active(&x->timer)) {
			x->left = ev_timer_remaining(loop, &x->timer);
			ev_timer_stop(loop, &x->timer);
		}
	}
}

/* Running again: timers go on where they stopped, held cleanups start. */
static void restart_exec_timers(struct ct_sb *sb)
{
	struct ev_loop *loop = sb->be->host->loop;
	uint64_t was = dsec_now_ns() - sb->paused_at;

	sb->paused = false;
	for (struct ct_exec *x = sb->execs; x; x = x->next) {
		x->t0 += was;
		if (x->left >= 0) {
			ev_timer_set(&x->timer, x->left, 0);
			ev_timer_start(loop, &x->timer);
		}
		x->left = -1;
	}
	while (sb->held) {
		struct ct_xclean *c = sb->held;

		sb->held = c->next;
		ct_submit(sb->be, xclean_work, xclean_done, c);
	}
}

static int switch_err(struct ct_pwork *w, const char *what, int rc)
{
	if (rc == -EOPNOTSUPP)
		return dsec_err_setc(&w->err, DSEC_E_UNSUPPORTED, EOPNOTSUPP,
				     "cannot %s sandbox '%s': this host has no cgroup freezer",
				     what, w->sb->id);
	if (rc == -ETIMEDOUT)
		return dsec_err_setc(&w->err, DSEC_E_TIMEOUT, ETIMEDOUT,
				     "cannot %s sandbox '%s': not frozen after %d ms "
				     "(a process stuck in the kernel?); it keeps running",
				     what, w->sb->id, CT_FREEZE_TIMEOUT_MS);
	return dsec_err_setc(&w->err, DSEC_E_BACKEND, -rc, "cannot %s sandbox '%s': %s", what,
			     w->sb->id, strerror(-rc));
}

static void pause_work(void *arg)
{
	struct ct_pwork *w = arg;
	int rc;

	if ((rc = be_cg_freeze(w->sb->cg, CT_FREEZE_TIMEOUT_MS)) < 0) {
		w->rc = switch_err(w, "pause", rc);
		return;
	}
	/* Best effort: the sandbox is paused whatever the kernel gives back. */
	be_cg_reclaim(w->sb->cg, &w->before, &w->after);
	/* An idle sandbox does not keep an empty exec group (a memory cgroup
	 * costs the kernel some 150 KiB here): the next command makes one. */
	if (w->spare)
		be_cg_remove(w->spare->cg);
}

static void resume_work(void *arg)
{
	struct ct_pwork *w = arg;
	int rc;

	if ((rc = be_cg_thaw(w->sb->cg)) < 0)
		w->rc = switch_err(w, "resume", rc);
}

static void switch_done(struct ct_pwork *w, bool pause)
{
	struct ct_sb *sb = w->sb;
	struct ct_be *be = sb->be;

	sb->busy--;
	sb->switching = false;
	if (w->spare)
		cgref_put(w->spare);
	if (!sb->destroying && (pause ? w->rc < 0 : w->rc == 0))
		restart_exec_timers(sb);
	if (pause && w->rc == 0)
		LOG(be, DSEC_LOG_DEBUG, "container: paused '%s' in %.3f ms, memory %" PRIu64
		    " -> %" PRIu64 " KiB", sb->id, (double)(dsec_now_ns() - w->t0) / 1e6,
		    w->before >> 10, w->after >> 10);
	defer(be, w->done, w->arg, w->rc, &w->err);
	free(w);
	sb_maybe_destroy(sb);
}

static void pause_done(void *arg)
{
	switch_done(arg, true);
}

static void resume_done(void *arg)
{
	switch_done(arg, false);
}

static int start_switch(struct ct_sb *sb, bool pause, dsec_be_done_fn done, void *arg,
			struct dsec_err *err)
{
	struct ct_pwork *w;

	if (sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT, "sandbox '%s' is being destroyed",
				     sb->id);
	if (sb->switching || sb->snapping)
		return dsec_err_setc(err, DSEC_E_INVALID, EBUSY,
				     "a %s of sandbox '%s' is in progress",
				     sb->snapping ? "snapshot" : "pause or resume", sb->id);
	if (sb->paused == pause) {
		defer(sb->be, done, arg, 0, NULL);	/* already there */
		return 0;
	}
	w = xcalloc(1, sizeof(*w));
	w->sb = sb;
	w->done = done;
	w->arg = arg;
	w->t0 = dsec_now_ns();
	if (pause) {
		stop_exec_timers(sb);
		w->spare = sb->spare;
		sb->spare = NULL;
	}
	sb->switching = true;
	sb->busy++;
	if (pause && (sb->fbusy || sb->fwait)) {
		/* The file server is in the sandbox's cgroup: frozen in the
		 * middle of an operation, it would hold a pool thread until the
		 * resume.  The pause goes once the operations queued before it
		 * have ended (dsecd sends no more until it completes). */
		sb->pause_wait = w;
		return 0;
	}
	ct_submit(sb->be, pause ? pause_work : resume_work, pause ? pause_done : resume_done, w);
	return 0;
}

static int ct_pause(void *vsb, dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	return start_switch(vsb, true, done, arg, err);
}

static int ct_resume(void *vsb, dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	return start_switch(vsb, false, done, arg, err);
}

static int ct_file(void *vsb, const struct dsec_file_req *req, struct dsec_file_res *res,
		   dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct ct_fwork t = { .sb = vsb, .done = done, .arg = arg, .path = (char *)req->path,
			      .req = req, .res = res };
	const struct ct_sb *sb = vsb;

	if (sb->ubase && ((req->uid != DSEC_OWNER_DEFAULT && req->uid >= CT_URANGE) ||
			  (req->gid != DSEC_OWNER_DEFAULT && req->gid >= CT_URANGE)))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "owner %lld:%lld is outside the sandbox's ids (0 to %u)",
				     (long long)req->uid, (long long)req->gid, CT_URANGE - 1);
	return file_op(vsb, fs_work, &t, err);
}

/* ---- snapshot ------------------------------------------------------------- */

struct ct_swork {
	struct ct_sb *sb;		/* sandbox */
	dsec_be_read_upper_fn read;	/* the daemon's reader */
	void *read_arg;			/* its argument */
	dsec_be_done_fn done;		/* caller's */
	void *arg;			/* its argument */
	int rc;				/* 0 or -errno */
	struct dsec_err err;		/* why */
	double frozen;			/* seconds the sandbox was frozen */
	bool paused;			/* it was paused: leave the freezer alone */
};

/* On a pool thread: freeze the sandbox's cgroup (every process, execs
 * included; a paused sandbox is frozen already and stays so), reach the upper dir through the fd its init keeps
 * (/proc/INIT/fd/3, a tmpfs of the sandbox's mount namespace that the
 * host's tree does not show), check through the pidfd that the pid was
 * still the init's when we opened it, let the daemon read it, thaw. */
static void snap_work(void *arg)
{
	struct ct_swork *w = arg;
	struct ct_sb *sb = w->sb;
	struct dsec_be_upper up = { 0 };
	char path[64], self[64];
	double t0 = dsec_now();
	int fd, rc;

	if (!w->paused && (rc = be_cg_freeze(sb->cg, CT_FREEZE_TIMEOUT_MS)) < 0) {
		w->rc = dsec_err_setc(&w->err, rc == -EOPNOTSUPP ? DSEC_E_UNSUPPORTED
				      : rc == -ETIMEDOUT ? DSEC_E_TIMEOUT : DSEC_E_BACKEND,
				      -rc, "cannot freeze sandbox '%s': %s", sb->id,
				      rc == -EOPNOTSUPP ? "no cgroup freezer on this host"
				      : strerror(-rc));
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)sb->init, CT_FD_UPPER);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || syscall(SYS_pidfd_send_signal, sb->pidfd, 0, NULL, 0) < 0) {
		w->rc = dsec_err_setc(&w->err, DSEC_E_BACKEND, fd < 0 ? errno : ESRCH,
				      "cannot reach the upper dir of sandbox '%s': %s", sb->id,
				      fd < 0 ? strerror(errno) : "its init is gone");
	} else {
		snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
		up.path = self;
		up.id_base = sb->ubase;
		up.id_count = sb->ubase ? CT_URANGE : 0;
		up.userxattr = sb->ubase != 0;	/* container-init mounts so in a user namespace */
		w->rc = w->read(w->read_arg, &up, &w->err);
	}
	if (fd >= 0)
		close(fd);
	if (!w->paused && (rc = be_cg_thaw(sb->cg)) < 0)
		LOG(sb->be, DSEC_LOG_ERROR, "container: cannot thaw sandbox '%s': %s", sb->id,
		    strerror(-rc));
	w->frozen = dsec_now() - t0;
}

static void snap_done(void *arg)
{
	struct ct_swork *w = arg;
	struct ct_sb *sb = w->sb;

	sb->snapping = false;
	sb->busy--;
	LOG(sb->be, DSEC_LOG_INFO, "container: sandbox '%s' was frozen %.3f s for a snapshot",
	    sb->id, w->frozen);
	file_next(sb);
	defer(sb->be, w->done, w->arg, w->rc, &w->err);
	free(w);
	sb_maybe_destroy(sb);
}

static int ct_snapshot(void *vsb, dsec_be_read_upper_fn read, void *read_arg,
		       dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct ct_sb *sb = vsb;
	struct ct_swork *w;

	if (sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT, "sandbox '%s' is being destroyed",
				     sb->id);
	if (!sb->lower || sb->skel)
		return dsec_err_setc(err, DSEC_E_UNSUPPORTED, ENOTSUP,
				     "sandbox '%s' was not made from an image: only those can be "
				     "snapshotted", sb->id);
	if (sb->snapping || sb->switching)
		return dsec_err_setc(err, DSEC_E_INVALID, EBUSY,
				     "a %s of sandbox '%s' is in progress",
				     sb->snapping ? "snapshot" : "pause or resume", sb->id);
	w = xcalloc(1, sizeof(*w));
	w->sb = sb;
	w->read = read;
	w->read_arg = read_arg;
	w->done = done;
	w->arg = arg;
	w->paused = sb->paused;
	sb->snapping = true;
	sb->busy++;
	ct_submit(sb->be, snap_work, snap_done, w);
	return 0;
}

/* ---- destroy ---------------------------------------------------------------- */

static void destroy_work(void *arg)
{
	sb_teardown(arg);
}

static void destroy_done(void *arg)
{
	struct ct_sb *sb = arg;
	struct ct_be *be = sb->be;

	defer(be, sb->ddone, sb->darg, 0, NULL);
	sb_free(sb);
}

static void sb_maybe_destroy(struct ct_sb *sb)
{
	struct ct_be *be = sb->be;

	if (!sb->destroying || sb->busy)
		return;
	spare_put(sb);
	sb_unlink(sb);
	/* Our references keep the mount namespace alive: drop them first. */
	files_stop(sb);
	close(sb->rootfd);
	close(sb->pidfd);
	sb->rootfd = sb->pidfd = -1;
	if (sb->ctl >= 0)
		close(sb->ctl);
	sb->ctl = -1;
	ct_submit(be, destroy_work, destroy_done, sb);
}

static int ct_destroy(void *vsb, dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct ct_sb *sb = vsb;

	if (sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT,
				     "sandbox '%s' is already being destroyed", sb->id);
	sb->destroying = true;
	sb->ddone = done;
	sb->darg = arg;
	drop_held(sb);
	while (sb->execs) {
		struct ct_exec *x = sb->execs;
		struct dsec_err e;

		dsec_err_setc(&e, DSEC_E_NOT_FOUND, ECANCELED, "sandbox '%s' was destroyed", sb->id);
		exec_finish(x, -ECANCELED, &e);	/* unlinks x */
	}
	be_sess_set_free(sb->sess);
	sb->sess = NULL;
	sb_maybe_destroy(sb);
	return 0;
}

/* ---- shell sessions (be_session.c does the work) ------------------------- */

/* Start a session's shell: container-init exec as for a command, with the
 * session's group and its marker pipe as the shell's fd 3. */
static int sess_spawn(void *ctx, struct be_cg *cg, const char *cwd, const char *const *env,
		      const char *const *cmd, int mark_w, struct be_sess_proc *p,
		      struct dsec_err *err)
{
	struct ct_sb *sb = ctx;
	_cleanup_free_ char **envv = NULL;
	size_t nenv = 0, i;
	char desc[256], a_mark[16];
	struct exec_nums nums;
	int cgfds[BE_CG_MAXH], ncg, fds[7 + BE_CG_MAXH], pp[4][2], rc;
	char *argv[24];

	env_merge(&envv, &nenv, base_env);
	env_merge(&envv, &nenv, (const char *const *)sb->env);
	env_merge(&envv, &nenv, env);
	ncg = be_cg_export(cg, desc, sizeof(desc), cgfds);
	snprintf(a_mark, sizeof(a_mark), "%d", 6 + ncg);
	i = exec_args(sb, argv, cwd, desc, &nums);
	argv[i++] = (char *)"--session";
	argv[i++] = a_mark;
	argv[i++] = (char *)"--";
	argv[i++] = (char *)cmd[0];
	argv[i] = NULL;
	for (int k = 0; k < 4; k++)
		pp[k][0] = pp[k][1] = -1;
	for (int k = 0; k < 4; k++)
		if (pipe2(pp[k], O_CLOEXEC) < 0) {
			rc = dsec_err_set(err, errno, "cannot make pipes: %s", strerror(errno));
			goto out;
		}
	fds[0] = pp[0][0];
	fds[1] = pp[1][1];
	fds[2] = pp[2][1];
	fds[3] = pp[3][1];
	fds[4] = sb->pidfd;
	fds[5] = sb->rootfd;
	for (int k = 0; k < ncg; k++)
		fds[6 + k] = cgfds[k];
	fds[6 + ncg] = mark_w;
	p->pid = spawn_helper(sb->be, argv, envv ? envv : (char *[]){ NULL }, fds, 7 + ncg, 0,
			      NULL);
	if (p->pid < 0) {
		rc = dsec_err_set(err, errno, "cannot fork: %s", strerror(errno));
		goto out;
	}
	/* Hand our ends out; the child's ends close below. */
	p->in = dsec_steal_fd(&pp[0][1]);
	p->out = dsec_steal_fd(&pp[1][0]);
	p->err = dsec_steal_fd(&pp[2][0]);
	p->st = dsec_steal_fd(&pp[3][0]);
	rc = 0;
out:
	for (int k = 0; k < 4; k++) {
		if (pp[k][0] >= 0)
			close(pp[k][0]);
		if (pp[k][1] >= 0)
			close(pp[k][1]);
	}
	return rc;
}

/* Pool work of a session: the sandbox stays until its done has run. */
struct ct_stask {
	struct ct_sb *sb;		/* sandbox (busy while the task runs) */
	void (*work)(void *);		/* be_session's */
	void (*done)(void *);		/* be_session's */
	void *arg;			/* theirs */
};

static void stask_work(void *arg)
{
	struct ct_stask *t = arg;

	t->work(t->arg);
}

static void stask_done(void *arg)
{
	struct ct_stask *t = arg;
	struct ct_sb *sb = t->sb;

	t->done(t->arg);
	free(t);
	sb->busy--;
	sb_maybe_destroy(sb);
}

static void sess_submit(void *ctx, void (*work)(void *), void (*done)(void *), void *arg)
{
	struct ct_sb *sb = ctx;
	struct ct_stask *t = xcalloc(1, sizeof(*t));

	t->sb = sb;
	t->work = work;
	t->done = done;
	t->arg = arg;
	sb->busy++;
	ct_submit(sb->be, stask_work, stask_done, t);
}

static void sess_defer(void *ctx, dsec_be_done_fn done, void *arg, int rc,
		       const struct dsec_err *err)
{
	struct ct_sb *sb = ctx;

	defer(sb->be, done, arg, rc, err);
}

static const struct be_sess_ops sess_ops = {
	.spawn = sess_spawn,
	.submit = sess_submit,
	.defer = sess_defer,
};

static int ct_session_open(void *vsb, const struct dsec_session_spec *spec, char **name,
			   dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct ct_sb *sb = vsb;

	if (sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT, "sandbox '%s' is being destroyed",
				     sb->id);
	if (!sb->sess)
		sb->sess = be_sess_set_new(sb->be->host->loop, &sess_ops, sb, sb->cg,
					   (unsigned)sb->be->conf.max_sessions, sb->id);
	return be_sess_open(sb->sess, spec, sb->cwd, name, done, arg, err);
}

static int ct_session_exec(void *vsb, const char *name, const struct dsec_exec_req *req,
			   struct dsec_session_res *res, dsec_be_done_fn done, void *arg,
			   struct dsec_err *err)
{
	struct ct_sb *sb = vsb;

	if (!sb->sess || sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT,
				     "no session '%.80s' in sandbox '%s'", name, sb->id);
	return be_sess_exec(sb->sess, name, req, res, done, arg, err);
}

static int ct_session_close(void *vsb, const char *name, dsec_be_done_fn done, void *arg,
			    struct dsec_err *err)
{
	struct ct_sb *sb = vsb;

	if (!sb->sess || sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT,
				     "no session '%.80s' in sandbox '%s'", name, sb->id);
	return be_sess_close(sb->sess, name, done, arg, err);
}

static void ct_session_list(void *vsb, void (*fn)(void *arg, const struct dsec_session_info *),
			    void *arg)
{
	struct ct_sb *sb = vsb;

	be_sess_list(sb->sess, fn, arg);
}

/* ---- init, fini, stats ------------------------------------------------- */

static void ct_stats(void *vbe, struct dsec_be_stats *out)
{
	struct ct_be *be = vbe;

	memset(out, 0, sizeof(*out));
	out->sandboxes = be->nsbs;
	out->running = be->running;
	out->capacity = be->nsbs < be->conf.max_sandboxes ?
			(uint32_t)(be->conf.max_sandboxes - be->nsbs) : 0;
	out->calls = be->ncalls;
}

static void ct_fini(void *vbe)
{
	struct ct_be *be = vbe;
	struct ev_loop *loop = be->host->loop;

	be->stopping = true;
	/* Everything dies with the backend's group. */
	if (be->cg)
		be_cg_kill(be->cg);
	for (struct ct_sb *sb = be->sbs; sb; sb = sb->next) {
		drop_held(sb);
		be_sess_set_free(sb->sess);
		sb->sess = NULL;
		while (sb->execs) {
			struct ct_exec *x = sb->execs;

			exec_close(x);
			sb->execs = x->next;
			cgref_put(x->cg);
			exec_free(x);
		}
	}
	files_fini(be, false);
	be_tasks_drain(&be->tasks);
	files_fini(be, true);
	while (be->sbs) {
		struct ct_sb *sb = be->sbs;

		be->sbs = sb->next;
		if (sb->rootfd >= 0)
			close(sb->rootfd);
		if (sb->pidfd >= 0)
			close(sb->pidfd);
		sb->rootfd = sb->pidfd = -1;
		sb_teardown(sb);
		/* Reap its pid 1 now, killed with its group: the loop will not
		 * run again to do it, and a daemon that exits leaves its
		 * unreaped children as zombies for the host's init. */
		for (int i = 0; sb->helper > 0 && i < 1000; i++) {
			pid_t r = waitpid(sb->helper, NULL, WNOHANG);

			if (r == sb->helper || (r < 0 && errno != EINTR))
				break;
			usleep(1000);
		}
		sb_free(sb);
	}
	while (be->pend) {
		struct ct_pending *p = be->pend;

		be->pend = p->next;
		if (p->x)
			exec_free(p->x);
		free(p);
	}
	ev_idle_stop(loop, &be->idle);
	ev_ref(loop);
	ev_check_stop(loop, &be->check);
	if (be->cg) {
		_cleanup_free_ char *rec = xasprintf("%s/cgroups", be->host->state_dir);

		be_cg_kill(be->cg);
		if (be_cg_give_up(be->cg, rec) < 0)
			LOG(be, DSEC_LOG_WARN, "container: cannot remove cgroup '%s'", be->cg->path);
		be_cg_free(be->cg);
		be->cg = NULL;
	}
	be_bridge_down(&be->br);
	if (be->skel)
		dsec_rm_rf(be->skel);
	if (be_tasks_idle(&be->tasks))
		ct_free(be);
}

/* The default root's skeleton, shared by its sandboxes as the overlay's
 * lower layer (container-init skel): made afresh at each start, so a change
 * of the host's /etc shows in sandboxes made after it.  Without it each
 * sandbox makes its own in its tmpfs, slower and in memory of its own. */
static void make_skel(struct ct_be *be)
{
	_cleanup_free_ char *dir = xasprintf("%s/skel", be->host->state_dir);
	char *const argv[] = { (char *)CT_HELPER, (char *)"skel", dir, NULL };
	char *const envp[] = { NULL };
	int st[2], fds[4], ws = -1;
	char msg[512] = "";
	ssize_t n;
	pid_t pid;

	dsec_rm_rf(dir);
	if (pipe2(st, O_CLOEXEC) < 0)
		return;
	fds[0] = fds[1] = fds[2] = -1;
	fds[3] = st[1];
	pid = spawn_helper(be, argv, envp, fds, 4, 0, NULL);
	close(st[1]);
	if (pid > 0 && (n = read(st[0], msg, sizeof(msg) - 1)) > 0)
		msg[n] = '\0';
	close(st[0]);
	while (pid > 0 && waitpid(pid, &ws, 0) < 0 && errno == EINTR)
		;
	if (pid > 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0) {
		be->skel = xstrdup(dir);
		return;
	}
	LOG(be, DSEC_LOG_WARN, "container: cannot make the shared root skeleton '%s' (%s); "
	    "each sandbox makes its own", dir, *msg ? msg : "the helper failed");
	dsec_rm_rf(dir);
}

/* Directories left by a daemon killed before fini: their mounts lived in
 * namespaces that died with their processes, so they are empty. */
static void remove_stale(struct ct_be *be)
{
	DIR *d = opendir(be->host->state_dir);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		_cleanup_free_ char *p = NULL;

		if (strncmp(de->d_name, "sb.", 3))
			continue;
		p = xasprintf("%s/%s", be->host->state_dir, de->d_name);
		if (dsec_rm_rf(p) < 0)
			LOG(be, DSEC_LOG_WARN, "container: cannot remove stale '%s'", p);
	}
	if (d)
		closedir(d);
}

static int ct_init(const struct dsec_be_host *host, void **out, struct dsec_err *err)
{
	struct ct_be *be = xcalloc(1, sizeof(*be));
	_cleanup_free_ char *helper = NULL;
	char name[64];
	int rc;

	be->host = host;
	be->pend_tail = &be->pend;
	be->filter_fd = be->preload_fd = be->home_fd = -1;
	be_tasks_init(&be->tasks, host, &be->stopping, true, ct_release, be);
	pthread_mutex_init(&be->br_lock, NULL);
	if (host->abi_version != DSEC_BE_ABI || host->struct_size < sizeof(*host)) {
		free(be);
		return dsec_err_setc(err, DSEC_E_INTERNAL, EINVAL, "container: host ABI mismatch");
	}
	if ((rc = conf_load(be, err)) < 0)
		goto fail;
	be->uslots = xcalloc(be->conf.max_sandboxes / 8 + 1, 1);
	if (geteuid() != 0) {
		rc = dsec_err_setc(err, DSEC_E_UNSUPPORTED, EPERM,
				   "container needs root (namespaces, mounts, cgroups)");
		goto fail;
	}
	/* A working directory of the loop thread's own, for enter_dir. */
	if (unshare(CLONE_FS) < 0 ||
	    (be->home_fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		rc = dsec_err_set(err, errno, "container: cannot keep a directory of our own: %s",
				  strerror(errno));
		goto fail;
	}
	helper = xasprintf("%s/" CT_HELPER, host->helper_dir);
	if (access(helper, X_OK) < 0) {
		rc = dsec_err_set(err, errno, "container: cannot run '%s': %s", helper,
				  strerror(errno));
		goto fail;
	}
	snprintf(name, sizeof(name), "dsec-container.%d", (int)getpid());
	if ((rc = be_cg_open_root(&be->cg, name, err)) < 0)
		goto fail;
	if (be->cg->mode == BE_CG_NONE) {
		be_cg_free(be->cg);
		be->cg = NULL;
		rc = dsec_err_setc(err, DSEC_E_UNSUPPORTED, ENOTSUP,
				   "container needs a usable cgroup hierarchy (limits, kill)");
		goto fail;
	}
	/* Hybrid host: pause and kill through the v2 tree (see be_cgroup.h). */
	if ((rc = be_cg_add_unified(be->cg)) < 0)
		LOG(be, DSEC_LOG_WARN, "container: cannot use the unified cgroup tree: %s; "
		    "pause uses the v1 freezer", strerror(-rc));
	/* What a killed daemon left: its groups (and whatever still runs in
	 * them), its sandboxes' directories, its bridge and NAT table. */
	{
		_cleanup_free_ char *rec = xasprintf("%s/cgroups", host->state_dir);
		int n = be_cg_remove_stale(be->cg, "dsec-container.");

		if ((rc = be_cg_take_over(be->cg, rec)) < 0)
			LOG(be, DSEC_LOG_WARN, "container: cannot record our cgroups in '%s': %s", rec,
			    strerror(-rc));
		if ((n += rc > 0 ? rc : 0) > 0)
			LOG(be, DSEC_LOG_INFO, "container: removed %d cgroup trees a killed daemon "
			    "left", n);
	}
	remove_stale(be);
	if (be_bridge_remove_stale(&be->br))
		LOG(be, DSEC_LOG_INFO, "container: removed the bridge '%s' and its NAT table, left by "
		    "a killed daemon", be->br.name);
	if (!*be->conf.rootfs)
		make_skel(be);
	/* Every sandbox's commands get this filter (but those with
	 * seccomp_deny): compiled once, read by each init. */
	if ((rc = be_seccomp_container_export(NULL, &be->filter_fd)) < 0)
		LOG(be, DSEC_LOG_WARN, "container: cannot compile the seccomp filter ahead (%s); "
		    "each sandbox compiles its own", strerror(-rc));
	/* The warm shell's object, for every init (ct_exec.h). */
	if (be->conf.warm_shell) {
		_cleanup_free_ char *so = xasprintf("%s/" CT_PRELOAD, host->helper_dir);

		if ((be->preload_fd = open(so, O_RDONLY | O_CLOEXEC)) < 0)
			LOG(be, DSEC_LOG_WARN, "container: cannot open '%s' (%s); no warm shells",
			    so, strerror(errno));
	}
	ev_idle_init(&be->idle, idle_cb);
	ev_check_init(&be->check, reap_cb);
	ev_check_start(host->loop, &be->check);
	ev_unref(host->loop);
	LOG(be, DSEC_LOG_INFO, "container: cgroup %s '%s', root %s",
	    be->cg->mode == BE_CG_V2 ? "v2" :
	    be->cg->n && !strcmp(be->cg->hname[be->cg->n - 1], "unified") ? "v1 + v2 (hybrid)" :
	    "v1", be->cg->path,
	    *be->conf.rootfs ? be->conf.rootfs : "assembled from the host");
	*out = be;
	return 0;

fail:
	ct_free(be);
	return rc;
}

__attribute__((visibility("default")))
const struct dsec_be_ops dsec_backend = {
	.abi_version = DSEC_BE_ABI,
	.struct_size = sizeof(struct dsec_be_ops),
	.spec_size = sizeof(struct dsec_be_spec),
	.name = "container",
	.description = "stateful sandboxes: namespaces, an overlay root, cgroups, exec from outside",
	.init = ct_init,
	.fini = ct_fini,
	.create = ct_create,
	.exec = ct_exec,
	.file_read = ct_file_read,
	.file_write = ct_file_write,
	.pause = ct_pause,
	.resume = ct_resume,
	.destroy = ct_destroy,
	.stats = ct_stats,
	.call = NULL,
	.net_allow = ct_net_allow,
	.caps = DSEC_BE_CAP_LAYERS,
	.file = ct_file,
	.session_open = ct_session_open,
	.session_exec = ct_session_exec,
	.session_close = ct_session_close,
	.session_list = ct_session_list,
	.snapshot = ct_snapshot,
	.exec_start = ct_exec_start,
	.exec_signal = ct_exec_signal,
	.exec_resize = ct_exec_resize,
};
