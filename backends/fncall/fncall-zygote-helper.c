/* fncall-zygote - the warm pool behind one fncall runtime.
 *
 * Started by backends/fncall.so (fork + exec, nothing else in the daemon),
 * one per runtime.  After exec it builds the isolation once: private mount,
 * net (loopback only), ipc and uts namespaces, a minimal read-only root made
 * of a tmpfs with /usr, /etc bits and a few device nodes bound in, and the
 * seccomp filter, loaded here with no_new_privs and inherited by every unit
 * (see build_seccomp; where the kernel can, in the form that counts each
 * call it refuses for the unit that made it, see "counting" below).  Then
 * it keeps `pool` units ready.
 *
 * A unit is pid 1 of new pid and mount namespaces, cloned from here (uts
 * is the zygote's); it mounts its own /proc, masked as a container's
 * (be_procmask.h: the masks and made-up files are prepared here once, a
 * unit binds them), and a private tmpfs on /tmp and execs the runtime's
 * shell with fncall-preload.so preloaded, which moves into network and
 * IPC namespaces of the unit's own (be_callns.h), waits until the zygote
 * has put it into its per-call cgroup ("go") and then serves calls one at
 * a time: for each it forks a child that blocks on the unit socket for a
 * job, sets it up (pipes, sandbox scratch, limits, the tenant's
 * unprivileged uid) and runs it, and when that child
 * ends pid 1 kills whatever else is left in the namespace, reports the
 * wait status and renews the unit (see fncall-preload.c), with fresh
 * network and IPC namespaces if the call left anything there.  The
 * critical path of a call is therefore: the job arrives here and is
 * forwarded (with its descriptors) to the unit ready longest, whose child
 * runs it; no process outlives its call.  A timeout is a SIGKILL to pid 1,
 * which kills the whole tree and ends the unit; the pool refills here.
 *
 * For the python3 runtime the units are not forked from this program but
 * from a warm python process (fncall_zygote.py, the "template") that this
 * program starts inside the same isolation; the template clones units
 * with CLONE_PARENT so they are still our children, their pid 1 serves
 * calls the same way, and everything else (jobs, cgroups, reaping,
 * reporting) stays here.
 *
 * The cgroup driver is compiled in (see the include below) because the
 * Makefile links helpers with libdsec only.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <linux/sched.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <unistd.h>

#include "be_seccomp.h"
#include "be_net.h"
#include "be_cgroup.h"
#include "be_fncall.h"
#include "be_io.h"
#include "be_procmask.h"
#include "be_relayout.h"
#include "err.h"
#include "proto.h"
#include "util.h"
#include "zygote-count.h"

#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif

#define NEWROOT "/tmp/.dsec-root"

/* Configuration from the command line. */
static struct {
	const char *runtime;	/* "sh", "python3" */
	const char *kind;	/* "c" (exec per call) or "py" (python template) */
	const char *exe;	/* /bin/sh, /usr/bin/python3 */
	const char *py;		/* path of fncall_zygote.py (kind py) */
	const char *preload;	/* path of fncall-preload.so (kind c) */
	const char *cgdesc;	/* be_cg_export() description */
	unsigned pool;		/* warm units to keep */
	unsigned max_units;	/* units alive at most */
	uid_t uid_base;		/* first uid (= gid) of the tenants' range */
	unsigned uids;		/* how many: each job names its own */
	uint64_t scratch;	/* bytes of the per-unit /tmp */
	uint64_t nofile;	/* RLIMIT_NOFILE of calls */
	struct be_cg_limits lim;	/* default per-call cgroup limits */
} cfg = {
	.kind = "c", .pool = 4, .max_units = 260, .uid_base = 2000000000, .uids = 1,
	.scratch = 64 << 20, .nofile = 256,
	.lim = { .memory = 256 << 20, .cpus = 1, .pids = 64 },
};

/* The masks of the units' /proc (proc_prepare): the host's entries as
 * probed before the pivot, the made-up files' sources in FC_PROC_DIR; a
 * unit adds its slot's meminfo. */
static struct be_procmask unit_pm = BE_PROCMASK_INIT;
/* The node's figures for the made-up files, read before the pivot. */
static struct be_proc_host proc_host;
/* A writable detached copy of FC_PROC_DIR (read-only in the root), for
 * the slots' meminfo files. */
static int proc_dirfd = -1;

/* The compiled seccomp filter, loaded by the zygote once set-up is done. */
static struct sock_fprog seccomp_prog;
static int seccomp_memfd = -1;

/* One line on stderr (the daemon's log): "fncall-zygote[RT]: KIND...". */
static void say(const char *kind, const char *fmt, va_list ap) DSEC_PRINTF(2, 0);
static void say(const char *kind, const char *fmt, va_list ap)
{
	char buf[512];
	int n;

	n = snprintf(buf, sizeof(buf), "fncall-zygote[%s]: %s", cfg.runtime ? cfg.runtime : "?",
		     kind);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	(void)!write(2, buf, (size_t)n);
}

static _Noreturn void die(const char *fmt, ...) DSEC_PRINTF(1, 2);
static _Noreturn void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say("", fmt, ap);
	va_end(ap);
	_exit(1);
}

static void warnx_(const char *fmt, ...) DSEC_PRINTF(1, 2);
static void warnx_(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say("warning: ", fmt, ap);
	va_end(ap);
}

/* ---- isolation set up once -------------------------------------------- */

static void xmount(const char *src, const char *dst, const char *type, unsigned long fl,
		   const char *data)
{
	if (mount(src, dst, type, fl, data) < 0)
		die("cannot mount '%s' on '%s': %s", src ? src : type ? type : "(remount)", dst, strerror(errno));
}

static void put_file(const char *path, const char *data, size_t len, int mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	if (fd < 0 || dsec_write_all(fd, data, len) < 0)
		die("cannot write '%s': %s", path, strerror(errno));
	close(fd);
}

/* Copy a small host file or symlink into the new root if it exists. */
/* Recreates the symlink host at dst inside the new root. */
static void mirror_link(const char *host, const char *dst)
{
	char lnk[PATH_MAX];
	ssize_t n = readlink(host, lnk, sizeof(lnk) - 1);

	if (n > 0) {
		lnk[n] = '\0';
		(void)!symlink(lnk, dst);
	}
}

static void copy_in(const char *host)
{
	char dst[PATH_MAX];
	_cleanup_free_ char *data = NULL;
	struct stat st;
	size_t len;

	if (lstat(host, &st) < 0)
		return;
	snprintf(dst, sizeof(dst), NEWROOT "%s", host);
	if (S_ISLNK(st.st_mode)) {
		mirror_link(host, dst);
	} else if (S_ISREG(st.st_mode) && dsec_read_file(host, &data, &len) == 0) {
		put_file(dst, data, len, 0644);
	}
}

/* Bind a host directory read-only (or mirror a top-level symlink such as
 * /bin -> usr/bin on merged-/usr systems). */
static void bind_ro(const char *host, bool dev)
{
	char dst[PATH_MAX];
	struct stat st;

	if (lstat(host, &st) < 0)
		return;
	snprintf(dst, sizeof(dst), NEWROOT "%s", host);
	if (S_ISLNK(st.st_mode)) {
		mirror_link(host, dst);
		return;
	}
	if (S_ISDIR(st.st_mode)) {
		if (mkdir(dst, 0755) < 0 && errno != EEXIST)
			die("cannot mkdir '%s': %s", dst, strerror(errno));
	} else {
		put_file(dst, "", 0, 0644);
	}
	xmount(host, dst, NULL, MS_BIND | MS_REC, NULL);
	xmount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID |
	       (dev ? 0 : MS_NODEV), NULL);
}

/* What the units mount over their /proc, made once, while the host's
 * /proc is still there to look at (be_procmask.h): the entries it has
 * that a call could read (calls are never root and hold no capability:
 * what only root may open needs no mask, and costs no mount), and in
 * FC_PROC_DIR, which the root's remount makes read-only and so every bind
 * of it, an empty directory and the made-up loadavg and stat; each slot's
 * meminfo comes later (slot_meminfo).  A unit's pid 1 then masks its
 * /proc with one bind per entry (unit_main; the python template reads the
 * same binds from FC_PROC_PLAN), no lookup, no new filesystem.  The
 * directory is root's: a call cannot read the other slots' limits. */
static void proc_prepare(void)
{
	struct dsec_err err;
	struct dsec_buf b;

	be_proc_host_read(&proc_host);
	unit_pm.unpriv = true;
	be_procmask_probe(&unit_pm, "/proc");
	if (mkdir(NEWROOT FC_PROC_DIR, 0700) < 0 || mkdir(NEWROOT FC_PROC_DIR "/empty", 0555) < 0)
		die("cannot mkdir '%s': %s", NEWROOT FC_PROC_DIR, strerror(errno));
	if (be_procmask_write(NEWROOT FC_PROC_DIR, &proc_host, cfg.lim.memory, &err) < 0)
		die("%s", err.msg);
	unit_pm.empty = FC_PROC_DIR "/empty";
	unit_pm.virt_path[BE_PROC_LOADAVG] = FC_PROC_DIR "/loadavg";
	unit_pm.virt_path[BE_PROC_STAT] = FC_PROC_DIR "/stat";
	dsec_buf_init(&b);
	if (be_procmask_plan(&unit_pm, "/proc", &b, &err) < 0)
		die("%s", err.msg);
	put_file(NEWROOT FC_PROC_DIR "/" FC_PROC_PLAN, b.data, b.len, 0644);
	dsec_buf_free(&b);
	proc_dirfd = (int)syscall(SYS_open_tree, AT_FDCWD, NEWROOT FC_PROC_DIR,
				  OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (proc_dirfd < 0)
		die("cannot clone '%s': %s", NEWROOT FC_PROC_DIR, strerror(errno));
}

/* The root every unit sees: a tmpfs, read-only once built. */
static void build_root(const char *py_src, size_t py_len, const char *pl_src, size_t pl_len)
{
	static const char *const top[] = { "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
					   "/libx32" };
	static const char *const etc_dirs[] = { "/etc/alternatives", "/etc/ssl",
						"/etc/ld.so.conf.d", "/etc/ca-certificates" };
	static const char *const etc_files[] = { "/etc/ld.so.cache", "/etc/ld.so.conf",
						 "/etc/localtime", "/etc/os-release",
						 "/etc/debian_version", "/etc/nsswitch.conf",
						 "/etc/mime.types", "/etc/protocols",
						 "/etc/services" };
	static const char *const devs[] = { "/dev/null", "/dev/zero", "/dev/full",
					    "/dev/random", "/dev/urandom" };
	struct dsec_buf b;
	char buf[1024];
	int n;

	xmount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0700");
	if (mkdir(NEWROOT, 0755) < 0)
		die("cannot mkdir '%s': %s", NEWROOT, strerror(errno));
	xmount("tmpfs", NEWROOT, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=0755");
	for (size_t i = 0; i < DSEC_ARRAY_LEN(top); i++)
		bind_ro(top[i], false);
	mkdir(NEWROOT "/etc", 0755);
	for (size_t i = 0; i < DSEC_ARRAY_LEN(etc_dirs); i++)
		bind_ro(etc_dirs[i], false);
	for (size_t i = 0; i < DSEC_ARRAY_LEN(etc_files); i++)
		copy_in(etc_files[i]);
	/* Every uid of the tenants' range is "sandbox", lowest first (the
	 * backend hands out the lowest free one, so a lookup stops early). */
	dsec_buf_init(&b);
	dsec_buf_addf(&b, "root:x:0:0:root:/root:/bin/sh\n"
		      "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
	for (unsigned i = 0; i < cfg.uids; i++)
		dsec_buf_addf(&b, "sandbox:x:%u:%u:sandbox:/tmp:/bin/sh\n", cfg.uid_base + i,
			      cfg.uid_base + i);
	put_file(NEWROOT "/etc/passwd", b.data, b.len, 0644);
	b.len = 0;
	dsec_buf_addf(&b, "root:x:0:\nnogroup:x:65534:\n");
	for (unsigned i = 0; i < cfg.uids; i++)
		dsec_buf_addf(&b, "sandbox:x:%u:\n", cfg.uid_base + i);
	put_file(NEWROOT "/etc/group", b.data, b.len, 0644);
	dsec_buf_free(&b);
	n = snprintf(buf, sizeof(buf), "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost\n");
	put_file(NEWROOT "/etc/hosts", buf, (size_t)n, 0644);
	put_file(NEWROOT "/etc/hostname", "sandbox\n", 8, 0644);
	put_file(NEWROOT "/etc/resolv.conf", "", 0, 0644);
	mkdir(NEWROOT "/dev", 0755);
	for (size_t i = 0; i < DSEC_ARRAY_LEN(devs); i++)
		bind_ro(devs[i], true);
	/* bind_ro made them read-only; the nodes must stay writable. */
	for (size_t i = 0; i < DSEC_ARRAY_LEN(devs); i++) {
		char dst[64];

		snprintf(dst, sizeof(dst), NEWROOT "%s", devs[i]);
		mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC, NULL);
	}
	(void)!symlink("/proc/self/fd", NEWROOT "/dev/fd");
	(void)!symlink("/proc/self/fd/0", NEWROOT "/dev/stdin");
	(void)!symlink("/proc/self/fd/1", NEWROOT "/dev/stdout");
	(void)!symlink("/proc/self/fd/2", NEWROOT "/dev/stderr");
	(void)!symlink("/tmp", NEWROOT "/dev/shm");
	mkdir(NEWROOT "/proc", 0555);
	mkdir(NEWROOT "/tmp", 01777);
	chmod(NEWROOT "/tmp", 01777);
	mkdir(NEWROOT "/work", 0755);
	mkdir(NEWROOT "/root", 0700);
	mkdir(NEWROOT "/.dsec", 0755);
	if (py_src)
		put_file(NEWROOT "/.dsec/" FC_PY_ZYGOTE, py_src, py_len, 0644);
	if (pl_src)
		put_file(NEWROOT "/.dsec/" FC_PRELOAD, pl_src, pl_len, 0644);
	proc_prepare();
	xmount(NULL, NEWROOT, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);

	if (chdir(NEWROOT) < 0 || syscall(SYS_pivot_root, ".", ".") < 0)
		die("cannot pivot into the new root: %s", strerror(errno));
	if (umount2(".", MNT_DETACH) < 0)
		die("cannot detach the old root: %s", strerror(errno));
	if (chdir("/") < 0)
		die("cannot chdir to the new root: %s", strerror(errno));
}

static void setup_namespaces(void)
{
	if (unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) < 0)
		die("cannot unshare namespaces: %s", strerror(errno));
	xmount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
	if (sethostname("sandbox", 7) < 0)
		warnx_("cannot set hostname: %s", strerror(errno));
	be_lo_up();
}

/* Deny what a call never needs and what widens the kernel's attack
 * surface; EPERM rather than a kill so programs can fall back.
 *
 * The filter is loaded once, in the zygote, and inherited by every unit:
 * loading it per call JIT-compiles it per call, which on this kind of VM
 * cost more than the exec itself.  So it must allow what the zygote and
 * a unit's pid 1 still do after set-up: mount (/proc, /tmp, mqueue),
 * open_tree and move_mount (a sandbox's /work), clone with
 * CLONE_NEWPID|CLONE_NEWNS, unshare with CLONE_NEWNET|CLONE_NEWIPC (a
 * unit's own network and IPC namespaces, see be_callns.h).  A call runs as
 * an unprivileged uid with no capabilities and no_new_privs, so those
 * calls fail with EPERM for it anyway; what the filter keeps from it is new
 * user namespaces (the way to capabilities) and the syscalls that only
 * widen the kernel's attack surface. */
static void build_seccomp(void)
{
	static const char *const deny[] = {
		"pivot_root", "chroot", "kexec_load", "kexec_file_load",
		"bpf", "perf_event_open", "keyctl", "add_key", "request_key", "ptrace",
		"process_vm_readv", "process_vm_writev", "userfaultfd", "open_by_handle_at",
		"name_to_handle_at", "init_module", "finit_module", "delete_module", "reboot",
		"swapon", "swapoff", "setns", "acct", "quotactl", "quotactl_fd",
		"sethostname", "setdomainname", "settimeofday", "clock_settime",
		"clock_adjtime", "adjtimex", "iopl", "ioperm", "syslog", "vhangup",
		"lookup_dcookie", "fanotify_init", "fsopen",
		"fsconfig", "fsmount", "fspick", "mount_setattr", "io_uring_setup",
		"io_uring_enter", "io_uring_register", "kcmp", "pidfd_getfd", "nfsservctl",
		"uselib", "ustat", "sysfs", "_sysctl", "create_module", "get_kernel_syms",
		"query_module", "lsm_set_self_attr", "landlock_create_ruleset",
	};
	static const unsigned long ns_flags[] = {
		CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWNET, CLONE_NEWCGROUP,
		0x00000080 /* CLONE_NEWTIME */,
	};
	/* unshare: everything but CLONE_NEWNET and CLONE_NEWIPC, which a
	 * unit's pid 1 uses (the flags that are no namespace are harmless
	 * and need no privilege). */
	static const unsigned long unshare_flags[] = {
		CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWCGROUP,
		0x00000080 /* CLONE_NEWTIME */,
	};
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	char path[] = "/fncall-seccomp";
	struct stat st;
	int fd, rc = 0;

	if (!ctx)
		die("cannot initialise seccomp");
	rc = be_seccomp_rules(ctx, deny, DSEC_ARRAY_LEN(deny), ns_flags, DSEC_ARRAY_LEN(ns_flags));
	if (!rc)
		rc = be_seccomp_deny_flags(ctx, SCMP_SYS(unshare), unshare_flags,
					   DSEC_ARRAY_LEN(unshare_flags));
	if (rc)
		die("cannot build the seccomp filter: %s", strerror(-rc));
	if ((fd = memfd_create(path + 1, MFD_CLOEXEC)) < 0)
		die("cannot create a memfd: %s", strerror(errno));
	if ((rc = seccomp_export_bpf(ctx, fd)) < 0)
		die("cannot export the seccomp filter: %s", strerror(-rc));
	seccomp_release(ctx);
	if (fstat(fd, &st) < 0 || st.st_size <= 0 || st.st_size % sizeof(struct sock_filter))
		die("bad seccomp filter size");
	seccomp_prog.len = (unsigned short)(st.st_size / (off_t)sizeof(struct sock_filter));
	seccomp_prog.filter = xmalloc((size_t)st.st_size);
	if (pread(fd, seccomp_prog.filter, (size_t)st.st_size, 0) != st.st_size)
		die("cannot read back the seccomp filter");
	seccomp_memfd = fd;
}

/* Loads the filter on the zygote's thread (no_new_privs first: every unit
 * runs with it anyway, and with it the load needs no capability): the
 * counting form and its watcher where the kernel has them (zygote-count.c),
 * else the plain one. */
static void load_seccomp(void)
{
	char why[256];

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		die("cannot set no_new_privs: %s", strerror(errno));
	if (zc_load(&seccomp_prog, cfg.max_units, why, sizeof(why)) == 0)
		return;
	warnx_("%s, refused calls are not counted", why);
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &seccomp_prog, 0, 0) < 0)
		die("cannot load the seccomp filter: %s", strerror(errno));
}

/* ---- pid 1 of a unit ---------------------------------------------------- */

/* Argument and environment of a shell unit's exec: the template
 * (fncall-preload.so) finds its configuration there and lays out the
 * calls' argv and environment in the room the padding reserves on the
 * initial stack (FC_TPL_SLOTS pointers, FC_TPL_AREA bytes).  "exit 120"
 * is what the shell runs if the template did not load. */
#define FC_TPL_SLOTS 256
#define FC_TPL_AREA (64 * 1024)
static char *unit_argv[4];
static char *unit_envp[FC_TPL_SLOTS];

static void unit_exec_args(void)
{
	size_t n = 0;

	unit_argv[0] = (char *)cfg.exe;
	unit_argv[1] = (char *)"-c";
	unit_argv[2] = (char *)"exit 120";
	unit_envp[n++] = (char *)"LD_PRELOAD=/.dsec/" FC_PRELOAD;
	/* Resolve every symbol once in pid 1, not again in every child. */
	unit_envp[n++] = (char *)"LD_BIND_NOW=1";
	unit_envp[n++] = xasprintf("DSEC_FNCALL_UNIT=%u %u %llu %llu %llu %s", (unsigned)cfg.uid_base,
				   cfg.uids, (unsigned long long)cfg.nofile,
				   (unsigned long long)cfg.scratch,
				   !strcmp(cfg.cgdesc, "none") ? (unsigned long long)cfg.lim.memory : 0ULL,
				   cfg.exe);
	be_area_pad(unit_argv, unit_envp, n, FC_TPL_SLOTS, xmalloc(FC_TPL_AREA), FC_TPL_AREA);
}

/* Runs right after clone() in the new pid and mount namespaces: mount
 * this unit's /proc (masked, with the meminfo of its slot) and /tmp, then
 * become the shell with its template preloaded (see fncall-preload.c),
 * which serves the unit's calls. */
static _Noreturn void unit_main(int sock, int slot)
{
	char opt[64], meminfo[64];
	struct dsec_err err;
	sigset_t none;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* Warming up (exec, mounts, page faults) must not take the CPU from
	 * calls that are running: it happens at idle priority; the template
	 * goes back to normal once placed. */
	struct sched_param sp = { 0 };
	sched_setscheduler(0, SCHED_IDLE, &sp);
	if (sock == FC_UNIT_FD)
		dsec_set_cloexec(sock, false);
	else if (dup2(sock, FC_UNIT_FD) < 0)
		_exit(1);
	syscall(SYS_close_range, FC_UNIT_FD + 1, ~0U, 0);
	prctl(PR_SET_DUMPABLE, 0);
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		die("unit: cannot mount /proc: %s", strerror(errno));
	snprintf(meminfo, sizeof(meminfo), FC_PROC_DIR "/meminfo.%d", slot);
	unit_pm.virt_path[BE_PROC_MEMINFO] = meminfo;
	if (be_procmask_apply(&unit_pm, "/proc", &err) < 0)
		die("unit: %s", err.msg);
	snprintf(opt, sizeof(opt), "size=%llu,mode=1777", (unsigned long long)cfg.scratch);
	if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opt) < 0)
		die("unit: cannot mount /tmp: %s", strerror(errno));
	signal(SIGPIPE, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execve(cfg.exe, unit_argv, unit_envp);
	die("unit: cannot execute '%s': %s", cfg.exe, strerror(errno));
}

/* ---- the zygote's loop -------------------------------------------------- */

/* A unit serves one call at a time, many in its life: READY -> BUSY ->
 * (its pid 1 reports the call's status and renews itself) READY; it ends
 * when it is killed (timeout) or its pid 1 gives up. */
enum ustate {
	U_SPAWNING,	/* python template asked, pid not known yet */
	U_READY,	/* placed and told "go": can take a job */
	U_BUSY,		/* running a job */
	U_DONE,		/* job reported, waiting to be reaped */
};

struct slot {
	struct be_cg *cg;		/* per-call group "u<N>", NULL without cgroups */
	struct be_cg_limits cur;	/* limits written to it */
	int oomfd;			/* its OOM kill count (be_cg_oom_open), or -1 */
	uint64_t oom;			/* that count when last read */
	uint64_t meminfo;		/* memory its made-up meminfo shows, 0 none yet */
	bool used;			/* taken by a live unit */
};

struct unit {
	pid_t pid;			/* pid 1 of the unit, in our namespace */
	int sock;			/* our end of the unit socket */
	int slot;			/* index into slots */
	enum ustate st;			/* lifecycle */
	uint64_t job;			/* job id while busy */
	uint64_t idle_since;		/* z.seq when it last became ready */
	double ready_at;		/* dsec_now() then */
	uint64_t sc0;			/* its slot's sc count when the job came */
	bool placed;			/* entered its cgroup by itself */
	bool reported;			/* done sent to the backend */
	bool killed;			/* SIGKILLed: never ready again */
	int err_no;			/* pid 2 could not start: errno */
	char *err_msg;			/* and why (owned) */
	struct unit *next;		/* all units */
};

/* A job waiting for a unit. */
struct pending {
	uint64_t id;			/* job id */
	void *data;			/* datagram (owned) */
	size_t len;			/* its length */
	int fds[FC_MAX_FDS];		/* descriptors (owned) */
	int nfds;			/* how many */
	struct be_cg_limits lim;	/* requested limits, 0 = default */
	struct pending *next;		/* FIFO link */
};

static struct {
	int sock;			/* backend socket */
	int ep;				/* epoll */
	int sfd;			/* signalfd for SIGCHLD */
	struct be_cg *cg;		/* runtime group (children: zygote, u<N>) */
	struct slot *slots;		/* per-call groups */
	int nslots;			/* allocated */
	struct unit *units;		/* every live unit */
	unsigned nunits;		/* how many */
	unsigned nready;		/* in U_READY or U_SPAWNING */
	struct pending *pq, **pq_tail;	/* jobs waiting for a unit */
	pid_t tpid;			/* python template, 0 for kind c */
	int tsock;			/* its control socket */
	bool thello;			/* template said hello */
	bool spawn_backoff;		/* the last clone failed: refill slowly */
	uint64_t seq;			/* counts units becoming ready */
	unsigned sent_ready;		/* nready as the backend last heard it */
	double sent_at;			/* dsec_now() then */
} z = { .sock = FC_FD_SOCK, .tsock = -1 };

#define EV_SOCK 1
#define EV_SIG 2
#define EV_TMPL 3

static void ep_add(int fd, uint64_t tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = tag };

	if (epoll_ctl(z.ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		die("epoll_ctl: %s", strerror(errno));
}

static void send_backend(struct dsec_pk *p)
{
	ssize_t n;

	do
		n = send(z.sock, p->sb.data, p->sb.size, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		die("cannot write to the backend: %s", strerror(errno));
	dsec_pk_free(p);
}

static unsigned count_ready(void)
{
	return z.nready;
}

/* Whether the memory cgroup's OOM killer killed a process in slot i since
 * the last look (a unit's placement, its last call's report). */
static bool slot_oom(int i)
{
	struct slot *s = &z.slots[i];
	uint64_t n;

	if (s->oomfd < 0 || be_cg_oom_read(s->oomfd, &n) < 0 || n == s->oom)
		return false;
	s->oom = n;
	return true;
}

static void report(struct unit *u, uint64_t id, int status, int errnum, const char *msg)
{
	struct dsec_pk p;
	bool oom = false;

	if (u) {
		if (u->reported)
			return;
		u->reported = true;
		oom = slot_oom(u->slot);
	}
	dsec_pk_init(&p);
	msgpack_pack_map(&p.pk, (msg ? 5 : 4) + oom + zc_on());
	if (oom)
		dsec_pk_kv_bool(&p, "oom", true);
	/* The calls refused while the job had the unit: once its processes
	 * are gone, every refusal they saw is in the count (a thread killed
	 * while the watcher had its call is in it too, for the moment before
	 * the watcher's answer finds it gone: at most one per thread). */
	if (zc_on())
		dsec_pk_kv_u64(&p, "sc", u ? zc_slot_count(u->slot) - u->sc0 : 0);
	dsec_pk_kv_str(&p, "t", "done");
	dsec_pk_kv_u64(&p, "id", id);
	if (msg) {
		dsec_pk_kv_i64(&p, "errno", errnum);
		dsec_pk_kv_str(&p, "msg", msg);
	} else {
		dsec_pk_kv_i64(&p, "status", status);
	}
	dsec_pk_kv_u64(&p, "ready", count_ready());
	send_backend(&p);
	z.sent_ready = count_ready();
	z.sent_at = dsec_now();
}

/* Before the loop sleeps for timeout ms (-1: until something comes): the
 * backend hears the number of ready units from each call's report, so
 * when it changed otherwise (units retired, the pool refilled after a
 * burst) and the loop is idle, tell it, at most every FC_POOL_EVERY s.
 * Returns the timeout to sleep. */
#define FC_POOL_EVERY 0.1
static int tell_pool(int timeout)
{
	struct dsec_pk p;
	double now, wait;
	int ms;

	if (timeout == 0 || count_ready() == z.sent_ready)
		return timeout;
	now = dsec_now();
	if ((wait = z.sent_at + FC_POOL_EVERY - now) > 0) {
		ms = (int)(wait * 1000) + 1;
		return timeout < 0 || ms < timeout ? ms : timeout;
	}
	dsec_pk_init(&p);
	msgpack_pack_map(&p.pk, 2);
	dsec_pk_kv_str(&p, "t", "pool");
	dsec_pk_kv_u64(&p, "ready", count_ready());
	send_backend(&p);
	z.sent_ready = count_ready();
	z.sent_at = now;
	return timeout;
}

/* The slot's made-up /proc/meminfo (FC_PROC_DIR/meminfo.N, which its
 * units bind) says mem bytes: the limit of the job it is about to get
 * (dispatch; nothing of a call runs in the unit then).  Rewritten in
 * place, the same file, and only when the limit changes.  0 or -1 with
 * errno set. */
static int slot_meminfo(int i, uint64_t mem)
{
	struct slot *s = &z.slots[i];
	struct dsec_buf b;
	char name[32];
	int fd, rc = 0;

	if (s->meminfo == mem)
		return 0;
	snprintf(name, sizeof(name), "meminfo.%d", i);
	dsec_buf_init(&b);
	be_proc_meminfo(&b, &proc_host, mem);
	fd = openat(proc_dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || dsec_write_all(fd, b.data, b.len) < 0)
		rc = -1;
	else
		s->meminfo = mem;
	if (fd >= 0)
		close(fd);
	dsec_buf_free(&b);
	return rc;
}

static int get_slot(void)
{
	struct dsec_err err;
	char name[32];
	int i;

	for (i = 0; i < z.nslots; i++)
		if (!z.slots[i].used)
			break;
	if (i == z.nslots) {
		z.slots = xrealloc(z.slots, sizeof(*z.slots) * (size_t)(z.nslots + 1));
		memset(&z.slots[i], 0, sizeof(z.slots[i]));
		z.slots[i].oomfd = -1;
		z.nslots++;
		if (z.cg->mode != BE_CG_NONE) {
			snprintf(name, sizeof(name), "u%d", i);
			if (be_cg_child(z.cg, name, true, false, &z.slots[i].cg, &err) < 0)
				die("%s", err.msg);
			if (be_cg_set_limits(z.slots[i].cg, &cfg.lim) < 0)
				warnx_("cannot set limits on cgroup '%s'", z.slots[i].cg->path);
			z.slots[i].cur = cfg.lim;
			z.slots[i].oomfd = be_cg_oom_open(z.slots[i].cg);
		}
		/* Its units bind it: it must be there before the first. */
		if (slot_meminfo(i, cfg.lim.memory) < 0)
			die("cannot write the made-up meminfo of slot %d: %s", i, strerror(errno));
	}
	z.slots[i].used = true;
	return i;
}

/* Put the slot's limits to what a job asks (0 fields = defaults). */
static void slot_limits(int i, const struct be_cg_limits *want)
{
	struct slot *s = &z.slots[i];
	struct be_cg_limits l = {
		.memory = want && want->memory ? want->memory : cfg.lim.memory,
		.cpus = want && want->cpus > 0 ? want->cpus : cfg.lim.cpus,
		.pids = want && want->pids ? want->pids : cfg.lim.pids,
	};

	if (!s->cg || (l.memory == s->cur.memory && l.cpus == s->cur.cpus && l.pids == s->cur.pids))
		return;
	if (be_cg_set_limits(s->cg, &l) < 0)
		warnx_("cannot set limits on cgroup '%s'", s->cg->path);
	s->cur = l;
}

static void send_small(int sock, const char *t)
{
	struct dsec_pk p;

	dsec_pk_init(&p);
	msgpack_pack_map(&p.pk, 1);
	dsec_pk_kv_str(&p, "t", t);
	(void)!send(sock, p.sb.data, p.sb.size, MSG_NOSIGNAL | MSG_DONTWAIT);
	dsec_pk_free(&p);
}

/* The unit's pid is known: place it (unless it entered its group itself)
 * and let it go. */
static void unit_place(struct unit *u)
{
	struct slot *s = &z.slots[u->slot];

	if (s->cg && !u->placed && be_cg_attach(s->cg, u->pid) < 0)
		warnx_("cannot move unit %d into cgroup '%s'", (int)u->pid, s->cg->path);
	if (s->cg && (s->cur.memory != cfg.lim.memory || s->cur.pids != cfg.lim.pids ||
		      s->cur.cpus != cfg.lim.cpus))
		slot_limits(u->slot, NULL);
	slot_oom(u->slot);	/* what the unit's start cost is no call's */
	zc_unit_on(u->slot, u->pid);
	send_small(u->sock, "go");
	u->st = U_READY;
	u->idle_since = ++z.seq;
	u->ready_at = dsec_now();
}

static void spawn_unit(void)
{
	int sv[2];
	struct unit *u;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		warnx_("cannot make a unit socket: %s", strerror(errno));
		return;
	}
	u = xcalloc(1, sizeof(*u));
	u->sock = sv[0];
	u->slot = get_slot();
	u->st = U_SPAWNING;
	if (z.tpid) {
		/* Ask the python template; its answer carries the pid. */
		union {
			char b[CMSG_SPACE(sizeof(int))];
			struct cmsghdr h;
		} cbuf;
		struct dsec_pk p;
		struct iovec iov;
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.b,
				     .msg_controllen = sizeof(cbuf.b) };
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		char meminfo[64];

		snprintf(meminfo, sizeof(meminfo), FC_PROC_DIR "/meminfo.%d", u->slot);
		dsec_pk_init(&p);
		msgpack_pack_map(&p.pk, 2);
		dsec_pk_kv_str(&p, "t", "spawn");
		dsec_pk_kv_str(&p, "meminfo", meminfo);
		iov.iov_base = p.sb.data;
		iov.iov_len = p.sb.size;
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &sv[1], sizeof(int));
		if (sendmsg(z.tsock, &mh, MSG_NOSIGNAL) < 0)
			die("cannot talk to the python template: %s", strerror(errno));
		dsec_pk_free(&p);
		close(sv[1]);
	} else {
		/* The unit makes its network and IPC namespaces itself (in
		 * fncall-preload.so, as it warms up): a network namespace costs
		 * about half a millisecond to create, which must not hold up
		 * this loop, and more to tear down (cleanup_net, RCU). */
		pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWPID | CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0);

		if (pid == 0) {
			struct slot *s = &z.slots[u->slot];

			close(sv[0]);
			/* The unit moves itself into its per-call group before
			 * anything runs in it: a move into a group can take a
			 * cgroup v1 hierarchy's lock for tens of milliseconds,
			 * which would hold up every job and report waiting on
			 * the zygote. */
			if (s->cg && be_cg_attach(s->cg, 0) < 0)
				warnx_("cannot move a new unit into cgroup '%s'", s->cg->path);
			unit_main(sv[1], u->slot);
		}
		close(sv[1]);
		if (pid < 0) {
			if (!z.spawn_backoff)
				warnx_("cannot clone a unit: %s", strerror(errno));
			z.spawn_backoff = true;
			z.slots[u->slot].used = false;
			close(sv[0]);
			free(u);
			return;
		}
		u->pid = pid;
		u->placed = true;
		z.spawn_backoff = false;
	}
	u->next = z.units;
	z.units = u;
	z.nunits++;
	z.nready++;
	ep_add(u->sock, (uint64_t)(uintptr_t)u);
	if (u->pid)
		unit_place(u);
}

static void unit_free(struct unit *u)
{
	for (struct unit **pp = &z.units; *pp; pp = &(*pp)->next)
		if (*pp == u) {
			*pp = u->next;
			break;
		}
	if (u->st == U_READY || u->st == U_SPAWNING)
		z.nready--;
	z.nunits--;
	if (u->pid)
		zc_unit_off(u->slot);
	z.slots[u->slot].used = false;
	close(u->sock);
	free(u->err_msg);
	free(u);
}

/* Read what a unit said: its call could not start, or the wait status of
 * its call; with the status the unit is ready for the next call (its pid 1
 * renews it before it takes the job).  One message unless all: epoll is
 * level-triggered and comes back for the rest, so the usual single report
 * costs no recv that only says EAGAIN; all drains before a reap. */
static void unit_read(struct unit *u, bool all)
{
	char buf[1024];
	struct dsec_msg m;
	ssize_t n = -1;
	int left = all ? INT_MAX : 1;

	while (left-- > 0 && (n = recv(u->sock, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		_cleanup_free_ char *t = NULL, *msg = NULL;
		uint64_t st = 0;
		int64_t v = 0;

		if (dsec_msg_parse(&m, buf, (size_t)n, sizeof(buf), NULL) < 0)
			continue;
		dsec_get_str(m.root, "t", &t, NULL);
		if (t && !strcmp(t, "err")) {
			const msgpack_object *o = dsec_map_get(m.root, "errno");

			if (o && (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER))
				v = (int64_t)o->via.u64;
			dsec_get_str(m.root, "msg", &msg, NULL);
			u->err_no = (int)v ? (int)v : EIO;
			free(u->err_msg);
			u->err_msg = msg ? dsec_steal_pointer(&msg) : xstrdup("cannot start");
		} else if (t && !strcmp(t, "st") && u->st == U_BUSY) {
			const msgpack_object *o = dsec_map_get(m.root, "status");

			if (o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
				st = o->via.u64;
			if (!u->killed) {
				u->st = U_READY;
				u->idle_since = ++z.seq;
				u->ready_at = dsec_now();
				z.nready++;
			} else {
				u->st = U_DONE;
			}
			if (u->err_msg)
				report(u, u->job, 0, u->err_no, u->err_msg);
			else
				report(u, u->job, (int)st, 0, NULL);
			u->reported = u->killed;
			u->err_no = 0;
			free(u->err_msg);
			u->err_msg = NULL;
		}
		dsec_msg_free(&m);
	}
	if (n == 0) {
		/* Both processes are gone; stop polling until the reap. */
		epoll_ctl(z.ep, EPOLL_CTL_DEL, u->sock, NULL);
	}
}

static void pending_free(struct pending *p)
{
	for (int i = 0; i < p->nfds; i++)
		close(p->fds[i]);
	free(p->data);
	free(p);
}

/* Hand a job to a ready unit; false if none could take it. */
static bool dispatch(struct pending *p)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * FC_MAX_FDS)];
		struct cmsghdr h;
	} cbuf;
	struct iovec iov = { .iov_base = p->data, .iov_len = p->len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct unit *u, *best;

	for (;;) {
		best = NULL;
		/* The unit ready the longest is the most likely to have its
		 * next child forked already. */
		for (u = z.units; u; u = u->next)
			if (u->st == U_READY && (!best || u->idle_since < best->idle_since))
				best = u;
		if (!best)
			return false;
		u = best;
		slot_limits(u->slot, &p->lim);
		if (slot_meminfo(u->slot, p->lim.memory ? p->lim.memory : cfg.lim.memory) < 0)
			warnx_("cannot write the made-up meminfo of slot %d: %s", u->slot,
			       strerror(errno));
		if (p->nfds) {
			struct cmsghdr *c;

			mh.msg_control = cbuf.b;
			mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)p->nfds);
			c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)p->nfds);
			memcpy(CMSG_DATA(c), p->fds, sizeof(int) * (size_t)p->nfds);
		}
		u->st = U_BUSY;
		z.nready--;
		u->job = p->id;
		u->sc0 = zc_slot_count(u->slot);
		if (sendmsg(u->sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0)
			return true;
		/* The unit died under us; it will be reaped.  Try another. */
		u->st = U_DONE;
		u->reported = true;
	}
}

static void drain_pending(void)
{
	while (z.pq && dispatch(z.pq)) {
		struct pending *p = z.pq;

		if (!(z.pq = p->next))
			z.pq_tail = &z.pq;
		pending_free(p);
	}
}

/* Units serve many calls, so a burst leaves more of them than the pool
 * needs; end the one idle longest once it has been idle FC_UNIT_IDLE s.
 * Returns the ms until the next one may be due, -1 for none. */
#define FC_UNIT_IDLE 10.0
static int retire_idle(void)
{
	struct unit *old = NULL;
	double now;

	if (z.nready <= cfg.pool)
		return -1;
	for (struct unit *u = z.units; u; u = u->next)
		if (u->st == U_READY && (!old || u->ready_at < old->ready_at))
			old = u;
	if (!old)
		return -1;
	now = dsec_now();
	if (now - old->ready_at < FC_UNIT_IDLE)
		return (int)((FC_UNIT_IDLE - (now - old->ready_at)) * 1000) + 1;
	kill(old->pid, SIGKILL);
	old->killed = true;
	old->reported = true;
	old->st = U_DONE;
	z.nready--;
	return 0;
}

static void kill_job(uint64_t id)
{
	for (struct unit *u = z.units; u; u = u->next)
		if (u->st == U_BUSY && u->job == id) {
			kill(u->pid, SIGKILL);
			u->killed = true;
			return;
		}
	for (struct pending **pp = &z.pq; *pp; pp = &(*pp)->next) {
		struct pending *p = *pp;

		if (p->id != id)
			continue;
		if (!(*pp = p->next))
			z.pq_tail = pp;
		pending_free(p);
		report(NULL, id, SIGKILL, 0, NULL);
		return;
	}
}

/* One message a call, as unit_read. */
static void backend_read(void)
{
	static char buf[FC_MSG_MAX];
	int fds[FC_MAX_FDS], nfds, n;

	for (int left = 1; left-- > 0;) {
		struct dsec_msg m;
		_cleanup_free_ char *t = NULL;
		uint64_t id = 0, v;

		n = be_recv_fds(z.sock, buf, sizeof(buf), fds, FC_MAX_FDS, &nfds, MSG_DONTWAIT);
		if (n == -EAGAIN)
			return;
		if (n == 0)
			exit(0);	/* the backend closed: leave (units die with us) */
		if (n < 0)
			die("cannot read from the backend: %s", strerror(-n));
		if (dsec_msg_parse(&m, buf, (size_t)n, FC_MSG_MAX, NULL) < 0) {
			warnx_("bad message from the backend");
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
			continue;
		}
		dsec_get_str(m.root, "t", &t, NULL);
		dsec_get_u64(m.root, "id", &id, NULL);
		if (t && !strcmp(t, "job")) {
			struct pending *p = xcalloc(1, sizeof(*p));

			p->id = id;
			p->data = xmemdup(buf, (size_t)n);
			p->len = (size_t)n;
			memcpy(p->fds, fds, sizeof(int) * (size_t)nfds);
			p->nfds = nfds;
			if (dsec_get_u64(m.root, "memory", &v, NULL) == 0)
				p->lim.memory = v;
			if (dsec_get_u64(m.root, "pids", &v, NULL) == 0)
				p->lim.pids = (uint32_t)v;
			if (dsec_get_u64(m.root, "cpus", &v, NULL) == 0)
				p->lim.cpus = (double)v / 1000.0;
			*z.pq_tail = p;
			z.pq_tail = &p->next;
			nfds = 0;
		} else if (t && !strcmp(t, "kill")) {
			kill_job(id);
		}
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		dsec_msg_free(&m);
	}
}

static struct unit *unit_by_pid(pid_t pid)
{
	for (struct unit *u = z.units; u; u = u->next)
		if (u->pid == pid)
			return u;
	return NULL;
}

/* Pids the template reported after they already died. */
static struct { pid_t pid; int st; } early[64];
static int nearly;

static void template_read(void);

static void reap(void)
{
	struct signalfd_siginfo si;
	pid_t pid;
	int st;

	while (read(z.sfd, &si, sizeof(si)) == sizeof(si))
		;
	if (z.tpid)
		template_read();
	while ((pid = waitpid(-1, &st, WNOHANG | __WALL)) > 0) {
		struct unit *u = unit_by_pid(pid);

		if (pid == z.tpid)
			die("the python template exited (status %d)", st);
		if (!u) {
			if (nearly < (int)DSEC_ARRAY_LEN(early)) {
				early[nearly].pid = pid;
				early[nearly++].st = st;
			}
			continue;
		}
		unit_read(u, true);
		if (u->st == U_BUSY) {
			/* Killed (timeout: the status is SIGKILL's), or pid 1
			 * gave up before it could report the call. */
			if (u->err_msg)
				report(u, u->job, 0, u->err_no, u->err_msg);
			else if (WIFEXITED(st))
				report(u, u->job, 0, EIO, "the unit failed before its call ended");
			else
				report(u, u->job, st, 0, NULL);
		}
		unit_free(u);
	}
}

static void template_read(void)
{
	char buf[256];
	ssize_t n;

	while ((n = recv(z.tsock, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		struct dsec_msg m;
		_cleanup_free_ char *t = NULL;
		uint64_t pid = 0;

		if (dsec_msg_parse(&m, buf, (size_t)n, sizeof(buf), NULL) < 0)
			continue;
		dsec_get_str(m.root, "t", &t, NULL);
		dsec_get_u64(m.root, "pid", &pid, NULL);
		if (t && !strcmp(t, "hello")) {
			z.thello = true;
		} else if (t && !strcmp(t, "pid")) {
			/* Answers come in the order of the requests. */
			struct unit *u, *first = NULL;

			for (u = z.units; u; u = u->next)
				if (u->st == U_SPAWNING && !u->pid)
					first = u;
			if (first) {
				first->pid = (pid_t)pid;
				if (pid == 0) {
					/* The template could not clone. */
					first->st = U_DONE;
					first->reported = true;
					z.nready--;
					unit_free(first);
				} else {
					unit_place(first);
					for (int i = 0; i < nearly; i++)
						if (early[i].pid == (pid_t)pid) {
							early[i] = early[--nearly];
							unit_free(first);
							break;
						}
				}
			}
		}
		dsec_msg_free(&m);
	}
	if (n == 0)
		die("the python template closed its socket");
}

static void start_template(void)
{
	int sv[2];
	pid_t pid;
	char uid[16], uids[16], scratch[32], nofile[32], memory[32];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		die("cannot make the template socket: %s", strerror(errno));
	snprintf(uid, sizeof(uid), "%u", (unsigned)cfg.uid_base);
	snprintf(uids, sizeof(uids), "%u", cfg.uids);
	snprintf(scratch, sizeof(scratch), "%llu", (unsigned long long)cfg.scratch);
	snprintf(nofile, sizeof(nofile), "%llu", (unsigned long long)cfg.nofile);
	snprintf(memory, sizeof(memory), "%llu",
		 !strcmp(cfg.cgdesc, "none") ? (unsigned long long)cfg.lim.memory : 0ULL);
	pid = fork();
	if (pid < 0)
		die("cannot fork the python template: %s", strerror(errno));
	if (pid == 0) {
		sigset_t none;
		char *const argv[] = { (char *)cfg.exe, (char *)"-I", (char *)"-S",
				       (char *)"/.dsec/" FC_PY_ZYGOTE, (char *)"--uid_base", uid,
				       (char *)"--uids", uids, (char *)"--scratch", scratch,
				       (char *)"--nofile", nofile, (char *)"--memory", memory,
				       NULL };
		char *const envp[] = { (char *)"PATH=/usr/local/bin:/usr/bin:/bin",
				       (char *)"LANG=C.UTF-8", NULL };

		/* Park both above the target numbers first: either may already
		 * sit on 3 or 4. */
		int a = fcntl(sv[1], F_DUPFD, 16), b = fcntl(seccomp_memfd, F_DUPFD, 16);

		if (a < 0 || b < 0 || dup2(a, 3) < 0 || dup2(b, 4) < 0)
			_exit(127);
		syscall(SYS_close_range, 5, ~0U, 0);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execve(cfg.exe, argv, envp);
		_exit(127);
	}
	close(sv[1]);
	z.tpid = pid;
	z.tsock = sv[0];
	/* Wait (bounded) for the template's hello so a broken runtime is
	 * reported at start rather than on the first call. */
	for (int i = 0; i < 300 && !z.thello; i++) {
		struct pollfd pfd = { .fd = z.tsock, .events = POLLIN };
		int st;

		if (poll(&pfd, 1, 100) > 0)
			template_read();
		if (waitpid(pid, &st, WNOHANG) == pid)
			die("the python template exited at start (status %d)", st);
	}
	if (!z.thello)
		die("the python template did not start within 30 s");
}

static void usage(void)
{
	fprintf(stderr, "usage: fncall-zygote --runtime NAME --kind c|py --exe PATH --cg DESC "
		"[--py FILE] [--preload FILE] [--pool N] [--max-units N] [--uid-base U] [--uids N] [--scratch BYTES] "
		"[--nofile N] [--memory BYTES] [--cpus N] [--pids N]\n"
		"Started by the fncall backend of dsecd; not meant to be run by hand.\n");
	exit(2);
}

static void parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "runtime", 1, NULL, 'r' }, { "kind", 1, NULL, 'k' }, { "exe", 1, NULL, 'e' },
		{ "py", 1, NULL, 'y' }, { "preload", 1, NULL, 'l' }, { "cg", 1, NULL, 'c' },
		{ "pool", 1, NULL, 'p' },
		{ "max-units", 1, NULL, 'M' }, { "uid-base", 1, NULL, 'u' }, { "uids", 1, NULL, 'g' },
		{ "scratch", 1, NULL, 's' }, { "nofile", 1, NULL, 'n' },
		{ "memory", 1, NULL, 'm' }, { "cpus", 1, NULL, 'C' }, { "pids", 1, NULL, 'P' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'r': cfg.runtime = xstrdup(optarg); break;
		case 'k': cfg.kind = xstrdup(optarg); break;
		case 'e': cfg.exe = xstrdup(optarg); break;
		case 'y': cfg.py = xstrdup(optarg); break;
		case 'l': cfg.preload = xstrdup(optarg); break;
		case 'c': cfg.cgdesc = xstrdup(optarg); break;
		case 'p': cfg.pool = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'M': cfg.max_units = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'u': cfg.uid_base = (uid_t)strtoul(optarg, NULL, 10); break;
		case 'g': cfg.uids = (unsigned)strtoul(optarg, NULL, 10); break;
		case 's': cfg.scratch = strtoull(optarg, NULL, 10); break;
		case 'n': cfg.nofile = strtoull(optarg, NULL, 10); break;
		case 'm': cfg.lim.memory = strtoull(optarg, NULL, 10); break;
		case 'C': cfg.lim.cpus = strtod(optarg, NULL); break;
		case 'P': cfg.lim.pids = (uint32_t)strtoul(optarg, NULL, 10); break;
		default: usage();
		}
	}
	if (!cfg.runtime || !cfg.exe || !cfg.cgdesc || optind != argc ||
	    (strcmp(cfg.kind, "c") && strcmp(cfg.kind, "py")) ||
	    (!strcmp(cfg.kind, "py") && !cfg.py) || (!strcmp(cfg.kind, "c") && !cfg.preload))
		usage();
	if (cfg.max_units < cfg.pool + 1)
		cfg.max_units = cfg.pool + 1;
}

int main(int argc, char **argv)
{
	_cleanup_free_ char *py_src = NULL, *pl_src = NULL;
	struct dsec_err err;
	struct be_cg *zcg;
	sigset_t mask;
	size_t py_len = 0, pl_len = 0;
	struct dsec_pk p;

	parse_args(argc, argv);
	if (fcntl(FC_FD_SOCK, F_GETFD) < 0)
		die("no backend socket on fd %d", FC_FD_SOCK);
	dsec_set_cloexec(FC_FD_SOCK, true);
	if (be_cg_import(&z.cg, cfg.cgdesc, FC_FD_CG, &err) < 0)
		die("%s", err.msg);
	for (int i = 0; i < z.cg->n; i++)
		dsec_set_cloexec(z.cg->dirfd[i], true);
	if (z.cg->mode != BE_CG_NONE) {
		if (be_cg_child(z.cg, "zygote", true, false, &zcg, &err) < 0)
			die("%s", err.msg);
		if (be_cg_attach(zcg, 0) < 0)
			warnx_("cannot enter cgroup '%s'", zcg->path);
		be_cg_free(zcg);
	}
	if (!strcmp(cfg.kind, "py") && dsec_read_file(cfg.py, &py_src, &py_len) < 0)
		die("cannot read '%s': %s", cfg.py, strerror(errno));
	if (!strcmp(cfg.kind, "c")) {
		if (dsec_read_file(cfg.preload, &pl_src, &pl_len) < 0)
			die("cannot read '%s': %s", cfg.preload, strerror(errno));
		unit_exec_args();
	}
	if (access(cfg.exe, X_OK) < 0)
		die("runtime '%s' needs '%s': %s", cfg.runtime, cfg.exe, strerror(errno));
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	/* Before the pivot leaves no /proc here: the watcher's (zygote-count.c). */
	zc_open_proc();
	build_seccomp();
	setup_namespaces();
	build_root(py_src, py_len, pl_src, pl_len);
	load_seccomp();

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	if ((z.sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC)) < 0)
		die("signalfd: %s", strerror(errno));
	if ((z.ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
		die("epoll: %s", strerror(errno));
	z.pq_tail = &z.pq;
	dsec_set_nonblock(z.sock, false);
	if (!strcmp(cfg.kind, "py")) {
		start_template();
		ep_add(z.tsock, EV_TMPL);
	}
	ep_add(z.sock, EV_SOCK);
	ep_add(z.sfd, EV_SIG);

	dsec_pk_init(&p);
	msgpack_pack_map(&p.pk, 3);
	dsec_pk_kv_str(&p, "t", "ready");
	dsec_pk_kv_u64(&p, "pool", cfg.pool);
	dsec_pk_kv_bool(&p, "sc", zc_on());	/* each "done" has "sc" */
	send_backend(&p);
	z.sent_at = dsec_now();

	for (;;) {
		struct epoll_event evs[64];
		unsigned want;
		int n;

		/* Refill one unit per turn so jobs are never held up behind a
		 * burst of forks; poll without sleeping while short. */
		want = cfg.pool;
		for (struct pending *q = z.pq; q; q = q->next)
			want++;
		n = epoll_wait(z.ep, evs, DSEC_ARRAY_LEN(evs),
			       tell_pool(count_ready() < want && z.nunits < cfg.max_units ?
					 (z.spawn_backoff ? 100 : 0) : retire_idle()));
		if (n < 0 && errno != EINTR)
			die("epoll_wait: %s", strerror(errno));
		for (int i = 0; i < n; i++) {
			uint64_t tag = evs[i].data.u64;

			if (tag == EV_SOCK)
				backend_read();
			else if (tag == EV_SIG)
				reap();
			else if (tag == EV_TMPL)
				template_read();
			else
				unit_read((struct unit *)(uintptr_t)tag, false);
		}
		drain_pending();
		if (count_ready() < want && z.nunits < cfg.max_units) {
			spawn_unit();
			drain_pending();
		}
	}
}
