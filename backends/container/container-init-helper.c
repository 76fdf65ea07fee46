/* container-init-helper.c - container-init: the container
 * backend's helper, started by container.so with fork + exec (dsecd has
 * threads, so nothing but exec runs after its fork).  Two modes:
 *
 *   container-init create --dir D --rootfs R|- --disk BYTES --cg N
 *	fd 3: status pipe (one line: "ok PID" or "err ERRNO message")
 *	fd 4: the init's end of dsecd's command socket (ct_exec.h)
 *	fd 5: the socket the image's layers come on (user namespaces, and
 *	any sandbox cloned from the base namespace: --base 1)
 *	fds 6..6+N-1: cgroup.procs of the sandbox's cgroup in each
 *	hierarchy, opened by dsecd, written "0" to join; --filter FD: a
 *	memfd with the commands' seccomp filter compiled by dsecd;
 *	--preload FD: container-preload.so, for the warm shell (ct_exec.h)
 *   Started by clone() in new mount, pid, net, uts and ipc namespaces, so
 *   it is the sandbox's pid 1 and dsecd's child.  Joins the cgroup,
 *   builds the root (a size-capped tmpfs holding the overlay's upper and
 *   work dirs, the overlay over R or over a skeleton with the host's /usr,
 *   /bin, /lib*, /etc bound read-only on it; /dev with a devpts of its own
 *   (--ptys), /proc with the sensitive entries masked and meminfo, loadavg
 *   and stat made up (--memory), /sys read-only), enters it (a chroot
 *   with --base 1, in a namespace cloned from container.so's base one;
 *   else pivot_root), unshares its cgroup namespace, reports, loads the
 *   commands' seccomp filter on itself, counting what it refuses (a thread
 *   of its own answers and counts each refusal: see count_start), then
 *   reaps zombies and starts the commands dsecd sends on fd CT_FD_CTL
 *   (ct_exec.h) until it is killed.
 *   All mounts live only in the sandbox's mount namespace: the host never
 *   sees them and they vanish with the sandbox's last process.
 *
 *   container-init exec --uid U --gid G --cwd DIR --nofile N --cg DESC
 *	(for requests too large for the init's socket, shell sessions and streams)
 *		[--session FD] [--pid 1] [--tty 1] -- ARGV...
 *	fds 0-2: the command's stdin, stdout, stderr; fd 3: status pipe
 *	(one line: "st WAITSTATUS [DENIED]" or "err ERRNO message", then
 *	closed; a session's shell's count also in "sc DENIED" lines as it
 *	grows); fd 4: pidfd of the
 *	sandbox's init; fd 5: O_PATH fd of its root; fds 6..: the exec's cgroup.
 *	With --session (a shell session, see be_session.c): FD is the write
 *	end of the session's marker pipe, which the command gets as its fd 3,
 *	and the status pipe first carries "pid PID" (the command's pid on the
 *	host, so dsecd can spare the shell when it kills its children).
 *	With --pid 1 (a streaming exec) the status pipe too starts with "pid
 *	PID" (the command is its process group's leader: dsecd signals the
 *	group).  With --tty 1 fds 0-2 are a terminal of the sandbox's devpts,
 *	which the command takes as its controlling terminal.
 *   Enters the namespaces of the init (a session: all but its pid
 *   namespace, and a pid and a mount namespace of the session's own with
 *   its own /proc), forks the command (the pid namespace
 *   applies to children), which joins the exec's cgroup and the cgroup
 *   namespace, chroots, drops every capability, sets no_new_privs and the
 *   seccomp filter (with a listener it hands back: the helper answers and
 *   counts the calls it refuses, exec_watch) and execs argv with this
 *   program's environment.  The helper itself stays outside the exec's
 *   cgroup so that a timeout kill of the cgroup still lets it report the
 *   wait status ("st WAITSTATUS DENIED": ct_exec.h).
 *
 * Its parts: this file (both modes, the root, exec, the init serving
 * commands), init-count.c (counting what the filter refuses) and
 * init-tpl.c (the warm shell); what they share is in ct_init.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/magic.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <grp.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "be_cred.h"
#include "be_io.h"
#include "be_seccomp.h"
#include "be_net.h"
#include "be_path.h"
#include "be_procmask.h"
#include "be_scnotify.h"
#include "be_title.h"
#include "be_cgroup.h"
#include "ct_exec.h"
#include "ct_init.h"
#include "ct_root.h"
#include "util.h"

/* Where the sandbox's init keeps an O_PATH fd of the overlay's upper dir
 * (D/rw/upper on the sandbox's tmpfs, which the root leaves reachable only
 * through the overlay): the host reads it as /proc/INIT/fd/3 to snapshot
 * the sandbox.  The init is not dumpable, so only the host's root (with
 * CAP_SYS_PTRACE over the init) can follow that link, not root inside. */
#define FD_UPPER 3
#define FD_READY (CT_FD_PRELOAD + 1)	/* the status pipe, from the create to serve */

/* The sandbox's seccomp_deny ("a,b,c"), from --deny; "" = none. */
static const char *extra_deny = "";

_Noreturn void fail(int e, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	dprintf(FD_STATUS, "err %d %s\n", e ? e : EIO, msg);
	_exit(126);
}

int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void xmount(const char *src, const char *dst, const char *type, unsigned long fl,
		   const char *data)
{
	if (mount(src, dst, type, fl, data) < 0)
		fail(errno, "cannot mount '%s' on '%s': %s", src ? src : type ? type : "(remount)",
		     dst, strerror(errno));
}

static void xmkdir(const char *p, mode_t m)
{
	if (mkdir(p, m) < 0 && errno != EEXIST)
		fail(errno, "cannot mkdir '%s': %s", p, strerror(errno));
}

/* What the default root binds read-only from the host: its top
 * directories (symlinks such as /bin -> usr/bin followed) and what
 * programs need of /etc.  The shared skeleton holds their mount points,
 * so a create makes none of them in its overlay (make_skel). */
static const char *const top_dirs[] = CT_TOP_DIRS;
static const char *const etc_dirs[] = CT_ETC_DIRS;

/* Bind host path read-only at root/host (directories and files).  A
 * symlink such as /bin -> usr/bin is bound as the directory it names when
 * follow (a symlink in the root would be the sandbox's to repoint, and with
 * it every later command's /bin/sh and dynamic loader), else recreated.
 * The mount point is made only when the bind finds none: in the default
 * root the skeleton has it, and making it would be an overlay mkdir (or,
 * opening a file for writing, a copy-up) on every create. */
static void bind_ro(const char *root, const char *host, unsigned long extra, bool follow)
{
	char dst[PATH_MAX], lnk[PATH_MAX], real[PATH_MAX];
	struct stat st;
	ssize_t n;

	if (lstat(host, &st) < 0)
		return;
	snprintf(dst, sizeof(dst), "%s%s", root, host);
	if (S_ISLNK(st.st_mode) && follow) {
		if (!realpath(host, real) || stat(real, &st) < 0)
			return;
		host = real;
	} else if (S_ISLNK(st.st_mode)) {
		if ((n = readlink(host, lnk, sizeof(lnk) - 1)) > 0) {
			lnk[n] = '\0';
			unlink(dst);
			(void)!symlink(lnk, dst);
		}
		return;
	}
	if (mount(host, dst, NULL, MS_BIND | MS_REC, NULL) < 0) {
		if (errno != ENOENT)
			fail(errno, "cannot mount '%s' on '%s': %s", host, dst, strerror(errno));
		if (S_ISDIR(st.st_mode)) {
			xmkdir(dst, 0755);
		} else {
			int fd = open(dst, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);

			if (fd < 0)
				fail(errno, "cannot create '%s': %s", dst, strerror(errno));
			close(fd);
		}
		xmount(host, dst, NULL, MS_BIND | MS_REC, NULL);
	}
	xmount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | extra, NULL);
}

/* The sandbox's one empty read-only directory, bound over every masked
 * one (build_root): a bind is no new file system, and each file system a
 * sandbox mounts costs the whole node (a shrinker and two lists the kernel
 * walks per memory cgroup).  "" = none yet: a tmpfs of its own. */
static char mask_src[PATH_MAX];

/* An empty read-only directory over dir, when it exists. */
static void mask_dir(const char *dir)
{
	struct stat st;

	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return;
	if (mask_src[0])	/* a bind of a read-only mount is read-only */
		xmount(mask_src, dir, NULL, MS_BIND, NULL);
	else
		xmount("dsec-mask", dir, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		       "size=0,mode=0500");
}

/* A directory of the sandbox's tmpfs at rw/NAME (mode), bound at dst with
 * flags (a bind keeps the tmpfs's nosuid and nodev): /dev and /dev/shm
 * are parts of its disk, not file systems of their own. */
static void bind_rw_dir(const char *rw, const char *name, mode_t mode, const char *dst,
			unsigned long flags)
{
	char src[PATH_MAX];

	snprintf(src, sizeof(src), "%s/%s", rw, name);
	xmkdir(src, mode);
	if (chmod(src, mode) < 0)
		fail(errno, "cannot chmod '%s': %s", src, strerror(errno));
	xmount(src, dst, NULL, MS_BIND, NULL);
	xmount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | flags, NULL);
}

/* Write root/rel, rel resolved inside root: an image's /etc may hold
 * symlinks (resolv.conf often is one), and they must neither fail the
 * sandbox nor lead outside its root.  A symlink at rel is replaced. */
static void put_file(const char *root, const char *rel, const char *data)
{
	const int flags = O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW;
	int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC), fd = -errno;

	if (rfd >= 0) {
		fd = be_open_in_root(rfd, rel, flags, 0644);
		if (fd == -ELOOP) {
			char parent[PATH_MAX];
			const char *base = strrchr(rel, '/') + 1;
			int dfd;

			snprintf(parent, sizeof(parent), "%.*s", (int)(base - rel), rel);
			dfd = be_open_in_root(rfd, parent, O_PATH | O_DIRECTORY, 0);
			if (dfd >= 0 && unlinkat(dfd, base, 0) == 0)
				fd = be_open_in_root(rfd, rel, flags, 0644);
			if (dfd >= 0)
				close(dfd);
		}
		close(rfd);
	}
	if (fd < 0)
		fail(-fd, "cannot write '%s' in the sandbox's root: %s", rel, strerror(-fd));
	if (dsec_write_all(fd, data, strlen(data)) < 0)
		fail(errno, "cannot write '%s' in the sandbox's root: %s", rel, strerror(errno));
	close(fd);
}

/* Copy a small host file (or symlink) to root/host if it exists. */
static void copy_in(const char *root, const char *host)
{
	char dst[PATH_MAX], lnk[PATH_MAX];
	_cleanup_free_ char *data = NULL;
	struct stat st;
	size_t len;
	ssize_t n;

	if (lstat(host, &st) < 0)
		return;
	snprintf(dst, sizeof(dst), "%s%s", root, host);
	if (S_ISLNK(st.st_mode)) {
		if ((n = readlink(host, lnk, sizeof(lnk) - 1)) > 0) {
			lnk[n] = '\0';
			(void)!symlink(lnk, dst);
		}
	} else if (S_ISREG(st.st_mode) && dsec_read_file(host, &data, &len) == 0) {
		int fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);

		if (fd >= 0) {
			(void)!dsec_write_all(fd, data, len);
			close(fd);
		}
	}
}

/* An empty file at path, made if missing. */
static void put_empty(const char *path)
{
	int fd = open(path, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);

	if (fd < 0)
		fail(errno, "cannot create '%s': %s", path, strerror(errno));
	close(fd);
}

/* In skeleton dir, the directory a bind of host directory host lands on
 * (a symlink to a directory too, when follow). */
static void skel_point(const char *dir, const char *host, bool follow)
{
	char q[PATH_MAX];
	struct stat st;

	if ((follow ? stat(host, &st) : lstat(host, &st)) < 0 || !S_ISDIR(st.st_mode))
		return;
	snprintf(q, sizeof(q), "%s%s", dir, host);
	xmkdir(q, 0755);
}

/* The default root's skeleton: its top directories, the host's /etc files
 * that programs need (no secrets) and a passwd and group of its own, made
 * in dir.  Made once per daemon (container-init skel) and shared by every
 * sandbox with the default root as the overlay's lower layer; made in the
 * sandbox's tmpfs only when there is no shared one. */
static void make_skel(const char *dir)
{
	static const char *const etc_files[] = CT_ETC_FILES;
	static const char *const skel[] = { "dev", "proc", "sys", "tmp", "root", "work", "etc",
					    "usr" };
	char q[PATH_MAX];

	xmkdir(dir, 0755);
	for (size_t i = 0; i < DSEC_ARRAY_LEN(skel); i++) {
		snprintf(q, sizeof(q), "%s/%s", dir, skel[i]);
		xmkdir(q, !strcmp(skel[i], "tmp") ? 01777 : 0755);
		if (!strcmp(skel[i], "tmp"))
			chmod(q, 01777);
	}
	for (size_t i = 0; i < DSEC_ARRAY_LEN(etc_files); i++)
		copy_in(dir, etc_files[i]);
	/* The mount points of build_root's binds (bind_ro). */
	for (size_t i = 0; i < DSEC_ARRAY_LEN(top_dirs); i++)
		skel_point(dir, top_dirs[i], true);
	for (size_t i = 0; i < DSEC_ARRAY_LEN(etc_dirs); i++)
		skel_point(dir, etc_dirs[i], false);
	snprintf(q, sizeof(q), "%s/etc/ld.so.preload", dir);
	put_empty(q);
	put_file(dir, "/etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"
		 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
	put_file(dir, "/etc/group", "root:x:0:\nnogroup:x:65534:\n");
}

/* Bind file src read-only at root/rel (made if missing). */
static void bind_file_ro(const char *src, const char *root, const char *rel)
{
	char dst[PATH_MAX];

	snprintf(dst, sizeof(dst), "%s%s", root, rel);
	if (mount(src, dst, NULL, MS_BIND, NULL) < 0) {
		if (errno != ENOENT)
			fail(errno, "cannot mount '%s' on '%s': %s", src, dst, strerror(errno));
		put_empty(dst);
		xmount(src, dst, NULL, MS_BIND, NULL);
	}
	xmount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
	       NULL);
}

/* The root: D/rw is a tmpfs of `disk` bytes with upper/, work/ and (for
 * the default root without a shared skeleton) skel/; D/root is the
 * overlay.  rootfs is the lower layers, or "-" for the default root; with
 * skel, rootfs is the shared skeleton of the default root. */
static void build_root(const char *dir, const char *rootfs, const char *disk, bool userns,
		       bool skel, unsigned long ptys)
{
	char rw[2048], root[2048], opt[PATH_MAX * 3 + 64], p[PATH_MAX];
	bool dflt = !strcmp(rootfs, "-");

	snprintf(rw, sizeof(rw), "%s/rw", dir);
	snprintf(root, sizeof(root), "%s/root", dir);
	xmkdir(rw, 0700);
	xmkdir(root, 0755);
	snprintf(opt, sizeof(opt), "size=%s,mode=0755", disk);
	xmount("dsec-container", rw, "tmpfs", MS_NOSUID | MS_NODEV, opt);
	snprintf(p, sizeof(p), "%s/upper", rw);
	xmkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/work", rw);
	xmkdir(p, 0755);
	snprintf(mask_src, sizeof(mask_src), "%s/mask", rw);
	xmkdir(mask_src, 0500);
	xmount(mask_src, mask_src, NULL, MS_BIND, NULL);
	xmount(NULL, mask_src, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV |
	       MS_NOEXEC, NULL);
	if (dflt) {
		snprintf(p, sizeof(p), "%s/skel", rw);
		make_skel(p);
		snprintf(opt, sizeof(opt), "lowerdir=%s/skel,upperdir=%s/upper,workdir=%s/work%s",
			 rw, rw, rw, userns ? ",userxattr" : "");
	} else {
		snprintf(opt, sizeof(opt), "lowerdir=%s,upperdir=%s/upper,workdir=%s/work%s", rootfs,
			 rw, rw, userns ? ",userxattr" : "");
	}
	xmount("dsec-container", root, "overlay", MS_NOSUID, opt);
	if (dflt || skel) {
		for (size_t i = 0; i < DSEC_ARRAY_LEN(top_dirs); i++)
			bind_ro(root, top_dirs[i], MS_NODEV, true);
		/* Not the host's /etc: only what programs need, no secrets. */
		for (size_t i = 0; i < DSEC_ARRAY_LEN(etc_dirs); i++)
			bind_ro(root, etc_dirs[i], MS_NODEV, false);
		snprintf(p, sizeof(p), "%s/etc/ssl/private", root);
		mask_dir(p);
		/* What the dynamic loader reads of /etc, read-only too: a cache
		 * or a preload list of the sandbox's would choose the libraries
		 * of every later command (a grader's among them). */
		bind_ro(root, "/etc/ld.so.cache", MS_NODEV, false);
		snprintf(p, sizeof(p), "%s/empty", rw);
		put_file(rw, "/empty", "");
		bind_file_ro(p, root, "/etc/ld.so.preload");
	}
	/* Whatever the root, the sandbox's own name and no resolver (the
	 * network is loopback only). */
	snprintf(p, sizeof(p), "%s/etc", root);
	xmkdir(p, 0755);
	put_file(root, "/etc/hosts", "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost\n");
	put_file(root, "/etc/hostname", "sandbox\n");
	put_file(root, "/etc/resolv.conf", "");

	/* /dev: a small tmpfs with the harmless nodes bound from the host. */
	static const char *const devs[] = CT_DEVS;
	snprintf(p, sizeof(p), "%s/dev", root);
	xmkdir(p, 0755);
	bind_rw_dir(rw, "dev", 0755, p, MS_NOSUID | MS_NODEV | MS_NOEXEC);
	for (size_t i = 0; i < DSEC_ARRAY_LEN(devs); i++) {
		char dst[PATH_MAX];
		int fd;

		snprintf(dst, sizeof(dst), "%s%s", root, devs[i]);
		if ((fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0666)) < 0)
			fail(errno, "cannot create '%s': %s", dst, strerror(errno));
		close(fd);
		if (mount(devs[i], dst, NULL, MS_BIND, NULL) < 0)
			unlink(dst);
	}
	snprintf(p, sizeof(p), "%s/dev/pts", root);
	xmkdir(p, 0755);
	/* Its own instance, and at most ptys terminals in it: the kernel's
	 * pool (kernel.pty.max) is shared by every sandbox. */
	snprintf(opt, sizeof(opt), "newinstance,ptmxmode=0666,mode=0620,max=%lu", ptys);
	if (mount("devpts", p, "devpts", MS_NOSUID | MS_NOEXEC, opt) == 0) {
		snprintf(p, sizeof(p), "%s/dev/ptmx", root);
		(void)!symlink("pts/ptmx", p);
	}
	snprintf(p, sizeof(p), "%s/dev/shm", root);
	xmkdir(p, 01777);
	bind_rw_dir(rw, "shm", 01777, p, MS_NOSUID | MS_NODEV);
	static const char *const links[][2] = { { "/proc/self/fd", "fd" },
						{ "/proc/self/fd/0", "stdin" },
						{ "/proc/self/fd/1", "stdout" },
						{ "/proc/self/fd/2", "stderr" } };
	for (size_t i = 0; i < DSEC_ARRAY_LEN(links); i++) {
		snprintf(p, sizeof(p), "%s/dev/%s", root, links[i][1]);
		(void)!symlink(links[i][0], p);
	}
	snprintf(p, sizeof(p), "%s/proc", root);
	xmkdir(p, 0555);
	snprintf(p, sizeof(p), "%s/sys", root);
	xmkdir(p, 0555);
	snprintf(p, sizeof(p), "%s/tmp", root);
	xmkdir(p, 01777);
}

/* The sandbox's own /proc/meminfo, loadavg and stat in directory vdir
 * (be_procmask.h): its memory limit of mem bytes, no load. */
static void virtual_proc(const char *vdir, uint64_t mem)
{
	struct be_proc_host h;
	struct dsec_err err;

	xmkdir(vdir, 0755);
	be_proc_host_read(&h);
	if (be_procmask_write(vdir, &h, mem, &err) < 0)
		fail(err.errnum, "%s", err.msg);
	chmod(vdir, 0555);
}

/* In a user namespace the sandbox's root is not the host's: the /proc
 * entries only the host's root may open (kcore, slabinfo, sysrq-trigger,
 * ...) stay closed to every process of the sandbox without a mask, and
 * the masks are a mount each on every create. */
/* The write end of do_exec's pipe in the command's process: it writes a
 * byte once it leads its own session and group, or -1. */
static int started_fd = -1;
static bool proc_unpriv;

/* Masks, virtual entries and read-only parts over the proc mounted at
 * proc (be_procmask.h): m's detached mounts of the made-up files are taken
 * over. */
static void finish_proc(const char *proc, struct be_procmask *m)
{
	struct dsec_err err;

	m->ro = true;
	m->unpriv = proc_unpriv;
	if (be_procmask_apply(m, proc, &err) < 0)
		fail(err.errnum, "%s", err.msg);
}

/* pid 1's part: /proc of the new pid namespace as commands see it
 * (finish_proc), /sys read-only without the firmware's tables (ACPI, DMI,
 * EFI: the host's, and root's to read), then into the root.  Cloned from
 * the node's base namespace (base: container.so's basens.c), whose root
 * holds nothing of the host but what the default root binds anyway, a
 * chroot is enough, and costs nothing that grows with the node:
 * pivot_root walks every thread on the host holding the lock every mount
 * of the node takes (milliseconds with thousands of sandboxes).  Cloned
 * from the daemon's, the host's whole tree is ours and only pivot_root
 * and a detach of the old root take it away. */
static void finish_root(const char *dir, bool base)
{
	struct be_procmask m = BE_PROCMASK_INIT;
	char root[2048], p[PATH_MAX], node_sys[PATH_MAX];
	struct statfs fs;

	snprintf(root, sizeof(root), "%s/root", dir);
	snprintf(p, sizeof(p), "%s/proc", root);
	xmount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	be_procmask_clone(&m, "rw/proc");
	m.empty = mask_src[0] ? mask_src : NULL;
	finish_proc(p, &m);
	snprintf(p, sizeof(p), "%s/sys", root);
	snprintf(node_sys, sizeof(node_sys), "%s/sys", dir);	/* container.c's sys_lend */
	/* The node's (container.c), read-only with its mask, else our own. */
	if ((statfs(node_sys, &fs) < 0 || fs.f_type != SYSFS_MAGIC ||
	     mount(node_sys, p, NULL, MS_BIND | MS_REC, NULL) < 0) &&
	    mount("sysfs", p, "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0) {
		snprintf(p, sizeof(p), "%s/sys/firmware", root);
		mask_dir(p);
	}	/* else no /sys rather than no sandbox */
	if (base) {
		if (chdir(root) < 0 || chroot(".") < 0 || chdir("/") < 0)
			fail(errno, "cannot enter the new root: %s", strerror(errno));
		return;
	}
	if (chdir(root) < 0 || syscall(SYS_pivot_root, ".", ".") < 0)
		fail(errno, "cannot pivot into the new root: %s", strerror(errno));
	if (umount2(".", MNT_DETACH) < 0)
		fail(errno, "cannot detach the old root: %s", strerror(errno));
	if (chdir("/") < 0)
		fail(errno, "cannot chdir to the new root: %s", strerror(errno));
}

/* A shell session's own /proc, in the mount namespace the helper made for
 * it, for the pid namespace it is pid 1 of: no other process of the
 * sandbox is in it, so none can be reached through /proc/PID (its memory
 * above all: no Yama here).  Masked and virtual as the sandbox's. */
static void session_proc(void)
{
	struct be_procmask m = BE_PROCMASK_INIT;

	be_procmask_clone(&m, "/proc");
	xmount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	finish_proc("/proc", &m);
}

static const char *arg(int argc, char **argv, const char *name, const char *def)
{
	for (int i = 2; i + 1 < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (!strcmp(argv[i], name))
			return argv[i + 1];
	}
	if (!def)
		fail(EINVAL, "missing %s", name);
	return def;
}

/* Receives n mount fds on fd 5: the image's idmapped layers, then the
 * stand-ins (what). */
static void recv_mounts(int *fds, int n, const char *what)
{
	int got = 0;
	char c;

	if (be_recv_fds(5, &c, 1, fds, n, &got, 0) != 1 || got != n)
		fail(EPROTO, "did not get the %d %s (got %d)", n, what, got);
}

/* The stand-ins of what the create's grade_layers keep from the sandbox
 * (container.so's probe.c): spec is "dNAME/fNAME..." (a directory or a
 * file at /NAME), fds their read-only detached mounts, each moved onto its
 * mount point in root (an empty entry of the same type, in a layer of its
 * own).  A mount point: nothing in the sandbox removes or renames it. */
static void mount_probes(const char *root, const char *spec, const int *fds, int n)
{
	const char *c = spec;

	for (int i = 0; i < n; i++) {
		size_t len = strcspn(c + 1, "/");
		char dst[PATH_MAX];
		struct stat st;

		snprintf(dst, sizeof(dst), "%s/%.*s", root, (int)len, c + 1);
		if (lstat(dst, &st) < 0)
			fail(errno, "no mount point for the stand-in '%s': %s", dst, strerror(errno));
		if ((c[0] == 'd') != S_ISDIR(st.st_mode))
			fail(ENOTDIR, "the mount point of the stand-in '%s' is of another type", dst);
		if (syscall(SYS_move_mount, fds[i], "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) < 0)
			fail(errno, "cannot mount the stand-in '%s': %s", dst, strerror(errno));
		close(fds[i]);
		c += 1 + len + (c[1 + len] == '/');
	}
}

/* Set in the init once it has dropped the bounding set for its commands
 * (they inherit it: one loop of prctl calls per sandbox, not per command). */
static bool bset_dropped;

/* The bounding set goes first, while CAP_SETPCAP is still ours (before
 * the switch to a non-root uid); the remaining sets after it. */
static void drop_bounding_caps(uint64_t keep)
{
	int c = -1, rc = be_cred_bound(keep, &c);

	if (rc < 0)
		fail(-rc, "cannot drop capability %d: %s", c, strerror(-rc));
}

static _Noreturn void serve(void);
static void read_filter(int fd);

static _Noreturn void do_create(int argc, char **argv)
{
	const char *dir = arg(argc, argv, "--dir", NULL);
	const char *rootfs = arg(argc, argv, "--rootfs", "-");
	const char *disk = arg(argc, argv, "--disk", "256m");
	int ncg = atoi(arg(argc, argv, "--cg", "0"));
	unsigned long nlayers = strtoul(arg(argc, argv, "--layers", "0"), NULL, 10);
	bool userns = strcmp(arg(argc, argv, "--userns", "0"), "0") != 0;
	char lowers[64 * 16 + 1] = "";
	const char *probes = arg(argc, argv, "--probes", "");
	sigset_t all;
	int lfd[64], pfd[CT_PROBES_MAX], nprobes = 0, upfd, filter_fd, preload_fd, st;

	proc_unpriv = userns;

	/* A copy: be_retitle below reuses argv's memory. */
	extra_deny = xstrdup(arg(argc, argv, "--deny", ""));
	/* The commands' filter, compiled by dsecd (else serve compiles it). */
	if ((filter_fd = atoi(arg(argc, argv, "--filter", "-1"))) > CT_FD_CTL) {
		read_filter(filter_fd);
		close(filter_fd);
	}
	/* The warm shell's object: kept above every other descriptor until
	 * it goes to CT_FD_PRELOAD, once the rest is closed. */
	if ((preload_fd = atoi(arg(argc, argv, "--preload", "-1"))) > CT_FD_CTL) {
		int hi = fcntl(preload_fd, F_DUPFD_CLOEXEC, 200);

		close(preload_fd);
		preload_fd = hi;
	} else {
		preload_fd = -1;
	}
	if (strlen(dir) > 1024 || strlen(rootfs) > 3000 || nlayers > 64)
		fail(ENAMETOOLONG, "path too long or too many layers");
	for (const char *c = probes; *c; c++)
		nprobes += c == probes || c[-1] == '/';
	if (nprobes > (int)DSEC_ARRAY_LEN(pfd))
		fail(E2BIG, "too many stand-ins");
	/* A copy: be_retitle below reuses argv's memory. */
	probes = xstrdup(probes);
	/* The sandbox's cgroup, first thing after the exec (before it, we
	 * shared dsecd's memory: its OOM killer would have killed dsecd with
	 * us).  dsecd opened the files; the kernel checks a move by the
	 * opener's credentials, so this works in a user namespace too. */
	if (ncg < 0 || ncg > BE_CG_MAXH)
		fail(EINVAL, "bad --cg %d", ncg);
	for (int i = 0; i < ncg; i++) {
		if (write(6 + i, "0", 1) != 1)
			fail(errno, "cannot join the sandbox's cgroup: %s", strerror(errno));
		close(6 + i);
	}
	/* Everything below happens relative to the sandbox's directory, our
	 * working directory: in a user namespace the path to it may not be ours
	 * to walk. */
	if (nlayers)
		recv_mounts(lfd, (int)nlayers, "layers of the image");
	if (nprobes)
		recv_mounts(pfd, nprobes, "stand-ins");
	if (nlayers || nprobes)
		close(5);
	/* container.so cloned us into new mount, pid, net, uts and ipc
	 * namespaces (and a user namespace, when it maps root inside to a
	 * range of its own): we are the sandbox's pid 1 and dsecd's child. */
	if (getpid() != 1)
		fail(EINVAL, "not the init of a new pid namespace");
	xmount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
	/* The image's layers, idmapped to our user namespace by container.so,
	 * become lower.0 (top) .. lower.N-1 here. */
	for (unsigned long i = 0; i < nlayers; i++) {
		char name[16];

		snprintf(name, sizeof(name), "lower.%lu", i);
		if (syscall(SYS_move_mount, lfd[i], "", AT_FDCWD, name, MOVE_MOUNT_F_EMPTY_PATH) < 0)
			fail(errno, "cannot mount layer %lu: %s", i, strerror(errno));
		close(lfd[i]);
		snprintf(lowers + strlen(lowers), sizeof(lowers) - strlen(lowers), "%s%s",
			 i ? ":" : "", name);
	}
	if (nlayers)
		rootfs = lowers;
	dir = ".";
	if (sethostname("sandbox", 7) < 0)
		fail(errno, "cannot set the hostname: %s", strerror(errno));
	be_lo_up();
	build_root(dir, rootfs, disk, userns, strcmp(arg(argc, argv, "--skel", "0"), "0") != 0,
		   strtoul(arg(argc, argv, "--ptys", "64"), NULL, 10));
	mount_probes("root", probes, pfd, nprobes);
	virtual_proc("rw/proc", strtoull(arg(argc, argv, "--memory", "0"), NULL, 10));
	if ((upfd = open("rw/upper", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		fail(errno, "cannot open the upper dir: %s", strerror(errno));
	finish_root(dir, strcmp(arg(argc, argv, "--base", "0"), "0") != 0);
	if (unshare(CLONE_NEWCGROUP) < 0)
		fail(errno, "cannot unshare the cgroup namespace: %s", strerror(errno));
	/* The commands' bounding set, theirs by inheritance; the init keeps
	 * what it holds (a bounding set only limits what an exec gains). */
	drop_bounding_caps(userns ? SMALL_CAPS : 0);
	bset_dropped = true;
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		fail(errno, "cannot make the init undumpable: %s", strerror(errno));
	be_retitle(argc, argv, "dsec-init");
	/* The status pipe says "ok" from serve, once the init counts the
	 * filter's refusals (or cannot): out of the upper dir's way, which
	 * takes its number, to FD_READY. */
	if ((st = fcntl(FD_STATUS, F_DUPFD_CLOEXEC, 64)) < 0)
		fail(errno, "cannot keep the status pipe: %s", strerror(errno));
	if (dup2(upfd, FD_UPPER) < 0)
		fail(errno, "cannot keep the upper dir: %s", strerror(errno));
	syscall(SYS_close_range, 0, FD_UPPER - 1, 0);
	if (preload_fd < 0 || dup3(preload_fd, CT_FD_PRELOAD, O_CLOEXEC) < 0)
		close(CT_FD_PRELOAD);
	if (dup3(st, FD_READY, O_CLOEXEC) < 0)
		_exit(126);
	syscall(SYS_close_range, FD_READY + 1, ~0U, 0);
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	serve();
}

/* ---- exec ----------------------------------------------------------------- */

int load_seccomp(void)
{
	scmp_filter_ctx ctx = be_seccomp_container_ctx(extra_deny);
	int rc;

	if (!ctx)
		return -EINVAL;
	rc = seccomp_load(ctx);
	seccomp_release(ctx);
	return rc;
}

/* Filled by the init once: the filter every command gets, compiled by
 * libseccomp ahead so that a command's child only hands it to the kernel. */
struct sock_fprog exec_filter;

/* Reads the BPF program in fd (be_seccomp_container_export's) into
 * exec_filter.  Left empty on failure. */
static void read_filter(int fd)
{
	(void)be_cred_read_filter(fd, &exec_filter);
}

/* Compiles load_seccomp's filter into exec_filter, when dsecd did not give
 * it compiled (--filter).  Left empty on failure: each child then
 * compiles its own. */
static void compile_filter(void)
{
	int fd;

	if (exec_filter.filter || be_seccomp_container_export(extra_deny, &fd) < 0)
		return;
	read_filter(fd);
	close(fd);
}

/* The command's process: joins the exec's group cg (NULL: none) and, if
 * cgns >= 0, the sandbox's cgroup namespace; starts a session, sets its
 * limit (with tty: takes fd 0, a terminal, as its controlling one), drops
 * to uid/gid with the capabilities keep, changes to cwd, sets
 * no_new_privs and the filter, and execs cmd with envp.  With mark >
 * FD_STATUS (a shell session) that pipe becomes the command's fd 3; with
 * mark CT_MARK_TEMPLATE (the warm shell) fds 3 and 4 stay as placed and
 * the program is fd CT_TPL_EXE_FD's file.
 * Failures before the exec go to FD_STATUS as "err ..." lines.  Writes
 * nothing but its own stack and setup_tid (atomically): the init may share
 * its memory with us. */
_Noreturn void run_command(struct be_cg *cg, int cgns, uid_t uid, gid_t gid, const char *cwd,
			   rlim_t nofile, uint64_t keep, int mark, bool tty, char **cmd,
			   char **envp)
{
	struct rlimit rl = { nofile, nofile };
	int e;

	/* The OOM killer takes commands first, before the init (dsecd exempts
	 * it where it may): a raise anyone may make, and a vfork child's own
	 * (the init sharing our memory keeps its own).  The warm shell's
	 * template sets this value itself while it is dumpable, and its
	 * children inherit it (container-preload). */
	if (mark != CT_MARK_TEMPLATE) {
		if ((e = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC)) < 0 ||
		    write(e, "1000", 4) != 4)
			fail(errno, "cannot set oom_score_adj: %s", strerror(errno));
		close(e);
	}
	if (cg && (e = be_cg_attach(cg, 0)) < 0)
		fail(-e, "cannot join the exec's cgroup: %s", strerror(-e));
	if (cgns >= 0 && setns(cgns, CLONE_NEWCGROUP) < 0)
		fail(errno, "cannot enter the cgroup namespace: %s", strerror(errno));
	setsid();
	/* Our group exists now: the parent may report our pid (see do_exec). */
	if (started_fd >= 0) {
		(void)!write(started_fd, "s", 1);
		close(started_fd);
	}
	/* fds 0-2 are a terminal of the sandbox's devpts: make it ours. */
	if (tty && ioctl(0, TIOCSCTTY, 0) < 0)
		fail(errno, "cannot take the terminal: %s", strerror(errno));
	setrlimit(RLIMIT_NOFILE, &rl);
	if (!bset_dropped)
		drop_bounding_caps(keep);
	if ((e = be_cred_become(uid, gid, keep)) < 0)
		fail(-e, "cannot switch to uid %u: %s", (unsigned)uid, strerror(-e));
	/* A session's shell, pid 1 of a namespace outside the sandbox's, ends
	 * with its helper (and so with dsecd): its namespace then goes too.
	 * After the switch, which clears the parent-death signal. */
	if (mark > FD_STATUS)
		prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* As the command's user, so its permissions apply. */
	if (chdir(cwd) < 0)
		fail(errno, CT_ERR_CHDIR "%s': %s", cwd, strerror(errno));
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		fail(EPERM, "cannot set no_new_privs");
	if (command_filter() < 0)
		fail(EPERM, "cannot load the seccomp filter");
	if (mark == CT_MARK_TEMPLATE) {
		/* The very file tpl_note opened, not whatever its path is now. */
		syscall(SYS_close_range, CT_TPL_EXE_FD + 1, ~0U, 0);
		syscall(SYS_execveat, CT_TPL_EXE_FD, "", cmd, envp, AT_EMPTY_PATH);
		_exit(126);
	} else if (mark > FD_STATUS) {
		/* A session's shell: its marker pipe becomes fd 3. */
		if (dup2(mark, FD_STATUS) < 0)
			_exit(126);
		syscall(SYS_close_range, FD_STATUS + 1, ~0U, 0);
	} else {
		syscall(SYS_close_range, 3, ~0U, 0);
	}
	be_path_exec(cmd, envp);
	e = errno;
	dprintf(2, "%s: %s\n", cmd[0], strerror(e));
	_exit(e == ENOENT ? 127 : 126);
}

static int do_exec(int argc, char **argv, pid_t parent)
{
	uid_t uid = (uid_t)strtoul(arg(argc, argv, "--uid", "0"), NULL, 10);
	gid_t gid = (gid_t)strtoul(arg(argc, argv, "--gid", "0"), NULL, 10);
	const char *cwd = arg(argc, argv, "--cwd", "/");
	rlim_t nofile = (rlim_t)strtoul(arg(argc, argv, "--nofile", "1024"), NULL, 10);
	const char *desc = arg(argc, argv, "--cg", "none");
	bool userns = strcmp(arg(argc, argv, "--userns", "0"), "0") != 0;
	uint64_t keep = userns ? SMALL_CAPS : 0;
	int mark = atoi(arg(argc, argv, "--session", "-1"));
	bool report_pid = strcmp(arg(argc, argv, "--pid", "0"), "0") != 0;
	bool tty = strcmp(arg(argc, argv, "--tty", "0"), "0") != 0;
	struct be_cg *cg = NULL;
	struct dsec_err err;
	char **cmd = NULL;
	pid_t pid;

	proc_unpriv = userns;
	extra_deny = arg(argc, argv, "--deny", "");
	for (int i = 2; i < argc; i++)
		if (!strcmp(argv[i], "--")) {
			cmd = argv + i + 1;
			break;
		}
	if (!cmd || !cmd[0])
		fail(EINVAL, "no command");
	if (strcmp(desc, "none") && be_cg_import(&cg, desc, 6, &err) < 0)
		fail(err.errnum, "%s", err.msg);
	/* A session gets a pid namespace of its own instead of the sandbox's
	 * (a sibling of it: one made below it would need a process between),
	 * and a mount namespace for its /proc (session_proc). */
	if (setns(4, CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
		     (mark > FD_STATUS ? 0 : CLONE_NEWPID) | (userns ? CLONE_NEWUSER : 0)) < 0)
		fail(errno, "cannot enter the sandbox: %s", strerror(errno));
	/* Entering a user namespace changed our credentials, which cleared
	 * the parent-death signal main set: set it again, and end if dsecd
	 * died meanwhile (a helper outliving it would keep a session's shell,
	 * whose own death signal is ours, and its commands alive). */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(126);
	if (fchdir(5) < 0 || chroot(".") < 0 || chdir("/") < 0)
		fail(errno, "cannot enter the sandbox's root: %s", strerror(errno));
	if (mark > FD_STATUS && unshare(CLONE_NEWPID | CLONE_NEWNS) < 0)
		fail(errno, "cannot make the session's namespaces: %s", strerror(errno));
	/* The pid is reported for signals to the command's group: only once
	 * the command has made it (setsid), else a signal sent at once would
	 * find no group and be lost.  The command says so on a pipe. */
	int started[2] = { -1, -1 }, lsock[2] = { -1, -1 }, listener = -1;
	if ((report_pid || mark > FD_STATUS) && pipe2(started, O_CLOEXEC) < 0)
		fail(errno, "cannot make a pipe: %s", strerror(errno));
	started_fd = started[1];
	/* The command's filter, counting, its listener ours (see count_start). */
	compile_filter();
	if (exec_filter.filter &&
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, lsock) == 0) {
		be_scnotify_prog(&exec_filter, &notify_filter);
		listen_sock = lsock[1];
	}
	pid = fork();
	if (pid < 0)
		fail(errno, "cannot fork: %s", strerror(errno));
	if (pid == 0) {
		if (started[0] >= 0)
			close(started[0]);
		if (lsock[0] >= 0)
			close(lsock[0]);
		if (mark > FD_STATUS)
			session_proc();
		run_command(cg, 4, uid, gid, cwd, nofile, keep, mark, tty, cmd, environ);
	}
	if (started[1] >= 0) {
		char c;
		close(started[1]);
		/* One byte, or the end when it failed before: either way on. */
		while (read(started[0], &c, 1) < 0 && errno == EINTR)
			;
		close(started[0]);
	}
	if (lsock[0] >= 0) {
		char c;
		int n = 0;

		/* The listener, or the end when it failed before its filter. */
		close(lsock[1]);
		if (be_recv_fds(lsock[0], &c, 1, &listener, 1, &n, 0) != 1 || n != 1)
			listener = -1;
		close(lsock[0]);
	}
	close(0);
	close(1);
	close(2);
	close(4);
	close(5);
	if (mark > FD_STATUS) {
		/* The session needs the shell's pid as the host sees it. */
		close(mark);
		dprintf(FD_STATUS, "pid %d\n", (int)pid);
	} else if (report_pid) {
		/* A streaming exec signals the command's group by it. */
		dprintf(FD_STATUS, "pid %d\n", (int)pid);
	}
	return exec_watch(pid, listener, mark > FD_STATUS);
}


/* ---- the init serving commands (see ct_exec.h) ---------------------------- */

struct xrun {
	pid_t pid;			/* a command the init started */
	int st;				/* its status pipe */
	uint64_t denied0;		/* the sandbox's refused calls when it started */
};

static struct xrun *xruns;		/* running, in no order */
static size_t nxruns, xcap;

/* Reaps every child that exited: a command's status goes to its pipe,
 * orphans of the sandbox are just collected. */
static void reap_all(void)
{
	int st;
	pid_t pid;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		tpl_reaped(pid, st);
		for (size_t i = 0; i < nxruns; i++)
			if (xruns[i].pid == pid) {
				uint64_t n = __atomic_load_n(&denied, __ATOMIC_SEQ_CST);

				/* Counting: the calls refused while it ran, and so far. */
				if (filter_inherited)
					dprintf(xruns[i].st, "st %d %" PRIu64 " %" PRIu64 "\n", st,
						n - xruns[i].denied0, n);
				else
					dprintf(xruns[i].st, "st %d\n", st);
				close(xruns[i].st);
				xruns[i] = xruns[--nxruns];
				break;
			}
	}
}

/* Next NUL-terminated string at *p before end, or NULL. */
static char *xstr(char **p, char *end)
{
	char *s = *p, *z = memchr(s, 0, (size_t)(end - s));

	if (!z)
		return NULL;
	*p = z + 1;
	return s;
}

/* One request, for its child. */
struct xreq {
	const struct ct_xmsg *h;	/* the header */
	const char *cwd;		/* working directory */
	char **cmd, **envp;		/* argv and environment */
	const int *fds;			/* as received */
	int nfd;			/* how many */
};

/* The child's stack: it shares the init's memory (CLONE_VM|CLONE_VFORK,
 * no page tables to copy), and the init waits for its exec. */
char xstack[64 << 10] __attribute__((aligned(16)));

/* The child of one request: fds[] as received (stdout, stderr, status,
 * [stdin], cgroup.procs files) go to 1, 2, 3, 0 and 6.. */
static int xchild(void *arg)
{
	const struct xreq *r = arg;
	const struct ct_xmsg *h = r->h;
	const int *fds = r->fds;
	int nfd = r->nfd;
	int first = (h->flags & CT_X_STDIN) ? 4 : 3, high[4 + BE_CG_MAXH];
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (int i = 0; i < nfd; i++)
		if ((high[i] = fcntl(fds[i], F_DUPFD, 100)) < 0)
			_exit(126);
	if (dup2(high[2], FD_STATUS) < 0 || dup2(high[0], 1) < 0 || dup2(high[1], 2) < 0)
		_exit(126);
	if (first == 4) {
		if (dup2(high[3], 0) < 0)
			fail(errno, "cannot place stdin: %s", strerror(errno));
	} else {
		int n = open("/dev/null", O_RDWR | O_CLOEXEC);

		if (n < 0 || dup2(n, 0) < 0)
			fail(errno, "cannot open the sandbox's /dev/null: %s", strerror(errno));
	}
	for (int i = first; i < nfd; i++)
		if (dup2(high[i], 6 + i - first) < 0)
			fail(errno, "cannot place the cgroup's files: %s", strerror(errno));
	close(4);
	close(5);
	syscall(SYS_close_range, 6 + nfd - first, ~0U, 0);
	for (int i = 6; i < 6 + nfd - first; i++)
		if (write(i, "0", 1) != 1)
			fail(errno, "cannot join the exec's cgroup: %s", strerror(errno));
	run_command(NULL, -1, h->uid, h->gid, r->cwd, (rlim_t)h->nofile,
		    (h->flags & CT_X_USERNS) ? SMALL_CAPS : 0, -1, false, r->cmd, r->envp);
}

/* Starts the commands waiting on ctl.  Returns -1 once dsecd closed it. */
static int serve_requests(int ctl)
{
	static char buf[CT_XMSG_MAX];

	for (;;) {
		int fds[4 + BE_CG_MAXH], nfd = 0, n, need;
		char *p, *end, *cwd;
		_cleanup_free_ char **v = NULL;
		struct ct_xmsg h;
		pid_t pid;

		n = be_recv_fds(ctl, buf, sizeof(buf), fds, DSEC_ARRAY_LEN(fds), &nfd,
				MSG_DONTWAIT);
		if (n == -EAGAIN || n == -EWOULDBLOCK)
			return 0;
		if (n == 0 || (n < 0 && n != -EMSGSIZE))
			return -1;
		need = 3;
		if (n >= (int)sizeof(h)) {
			memcpy(&h, buf, sizeof(h));
			need += (h.flags & CT_X_STDIN) ? 1 : 0;
		}
		/* A request we cannot read gets no status: dsecd sees its pipe
		 * close and reports that the command could not start. */
		if (n < (int)sizeof(h) || h.magic != CT_XMSG_MAGIC || nfd < need ||
		    h.argc == 0 || h.argc > CT_XMSG_MAX || h.envc > CT_XMSG_MAX)
			goto drop;
		p = buf + sizeof(h);
		end = buf + n;
		v = calloc(h.argc + h.envc + 2, sizeof(*v));
		if (!v || !(cwd = xstr(&p, end)))
			goto drop;
		for (uint32_t i = 0; i < h.argc + h.envc; i++)
			if (!(v[i < h.argc ? i : i + 1] = xstr(&p, end)))
				goto drop;
		if (nxruns == xcap) {
			struct xrun *r = realloc(xruns, (xcap * 2 + 16) * sizeof(*r));

			if (!r)
				goto drop;
			xruns = r;
			xcap = xcap * 2 + 16;
		}
		struct xreq xr = { &h, cwd, v, v + h.argc + 1, fds, nfd };
		/* Before it starts: what it is refused on its way to its exec is its. */
		uint64_t d0 = __atomic_load_n(&denied, __ATOMIC_SEQ_CST);

		if (!(pid = tpl_dispatch(&h, v, v + h.argc + 1, buf, (size_t)n, fds, nfd))) {
			/* setup_tid: its tid, set before it runs (see command_filter). */
			pid = clone(xchild, xstack + sizeof(xstack),
				    CLONE_VM | CLONE_VFORK | CLONE_PARENT_SETTID | SIGCHLD, &xr,
				    &setup_tid);
			__atomic_store_n(&setup_tid, 0, __ATOMIC_SEQ_CST);
			if (pid < 0) {
				dprintf(fds[2], "err %d cannot fork: %s\n", errno, strerror(errno));
				goto drop;
			}
			tpl_note(&h, v, v + h.argc + 1);
		}
		xruns[nxruns++] = (struct xrun){ pid, fds[2], d0 };
		fds[2] = -1;
drop:
		for (int i = 0; i < nfd; i++)
			if (fds[i] >= 0)
				close(fds[i]);
	}
}

/* The init's life once the root is built: reap every child (the sandbox's
 * orphans too) and, while dsecd holds the other end of CT_FD_CTL, start the
 * commands it asks for.  Every signal stays blocked (pid 1 only dies by
 * SIGKILL from the host); SIGCHLD arrives through a signalfd. */
/* The create's last word on the status pipe (FD_READY): "ok 1", and
 * " sc" when the init counts the filter's refusals, so that a usage
 * straight after the create says 0 rather than nothing (the first count
 * on the command socket may come after the create's reply).  Nobody reads
 * it: dsecd died before our PR_SET_PDEATHSIG (main) was set, and no one
 * would ever stop us. */
static void ready(bool counting)
{
	const char *ok = counting ? "ok 1 sc\n" : "ok 1\n";

	if (write(FD_READY, ok, strlen(ok)) != (ssize_t)strlen(ok))
		_exit(126);
	close(FD_READY);
}

static _Noreturn void serve(void)
{
	sigset_t chld;
	int sfd, ctl = CT_FD_CTL;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	if ((sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
		close(ctl);	/* dsecd falls back to the exec helper */
		ready(false);
		for (;;) {
			reap_all();
			sigwaitinfo(&chld, NULL);
		}
	}
	dsec_set_nonblock(ctl, true);
	compile_filter();
	count_start(ctl);
	ready(filter_inherited);
	for (;;) {
		struct pollfd pf[3] = { { sfd, POLLIN, 0 }, { ctl, POLLIN, 0 }, { -1, POLLIN, 0 } };
		struct signalfd_siginfo si;
		size_t running = nxruns;
		int timeout;

		reap_all();
		/* The warm shell: started once the sandbox has been quiet a
		 * moment (not in one that is destroyed after its first command,
		 * nor on the CPU its next command wants), stopped when idle or
		 * when dsecd is gone (tpl_tick). */
		timeout = tpl_tick(nxruns, running != nxruns, ctl >= 0);
		pf[2].fd = tpl_sock();
		if (poll(pf, 3, timeout) < 0)
			continue;
		while (read(sfd, &si, sizeof(si)) > 0)
			;
		if (ctl >= 0 && pf[1].revents && serve_requests(ctl) < 0) {
			close(ctl);
			ctl = -1;
		}
		if (tpl_sock() >= 0 && pf[2].revents)
			tpl_read();
	}
}

int main(int argc, char **argv)
{
	pid_t parent = getppid();

	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(126);	/* dsecd died before the signal was set */
	if (argc >= 2 && !strcmp(argv[1], "create"))
		do_create(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "exec"))
		return do_exec(argc, argv, parent);
	if (argc == 3 && !strcmp(argv[1], "skel")) {
		make_skel(argv[2]);
		return 0;
	}
	fprintf(stderr, "usage: container-init create|exec|skel ...  (run by container.so)\n");
	return 2;
}
