/* container-criu-helper.c - container-criu: runs criu (deps/criu) inside a
 * container sandbox's mount namespace, to checkpoint a shell session of
 * the sandbox and to restore it beside another sandbox (a fork).
 *
 *   container-criu [--new] [--stay] [--cg PROCS]... PID -- CRIU ARGS...
 *   container-criu --restore-session IMG WORK CG NCG CRIU
 *
 * The second form is a session's shell restored by the backend (criu.c),
 * started as sessions.c starts a shell: see restore_session().
 * criu runs in the mount namespace of PID (a session's shell, to dump
 * it) or, with --new, in a copy of it (PID the fork's init, to restore
 * into): so criu dumps no mount namespace and restores none, and every
 * path the tree uses (its chroot, /root, its files) is the same in the
 * fork, whose root is another overlay at the same place.  A sandbox's
 * mount namespace is cloned from the backend's base namespace (basens.c),
 * whose root is a read-only tmpfs with empty tmp/ and run/: criu gets
 * there, outside the sandbox's root (where no process of it can reach),
 * a tmpfs on /tmp and /run for its probes, the host's /dev (a copy of its
 * tree, for devpts's and devtmpfs's identity) and a proc of the host's
 * pid namespace on /proc.  CRIU (criu's path) is opened before, and
 * executed from that descriptor.
 *
 * --cg: cgroup.procs files this process joins first (writes "0"), so a
 * tree criu restores with --manage-cgroups=ignore is in them.  --stay: the
 * restored tree's parent (criu restore -d --restore-sibling): once criu
 * has ended, prints "criu STATUS" on standard output, takes criu's mounts
 * away from the tree's own mount namespace (criu's patch 0004 gives it a
 * copy of this one), and stays until the tree's root ends, as a session's
 * helper does (the shell's parent-death signal ends it with this process).
 *
 * It refuses a PID whose mount namespace is its own or not a sandbox's
 * (no base root with container-init in it), and takes its mounts away
 * only from namespaces that are a sandbox's: it mounts over /proc, /dev,
 * /tmp and /run, which on the host are the host's.
 *
 * Exit status: criu's (or, with --stay, criu's when it failed, else 0
 * once the tree has ended); 1 when criu could not be started.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "be_cgroup.h"
#include "be_procmask.h"

#define MAX_CG 16

extern char **environ;

/* What criu gets in the namespace, outside the sandbox's root. */
static const char *const criu_mounts[] = { "/proc", "/tmp", "/run", "/dev" };

static int fail(const char *what)
{
	fprintf(stderr, "container-criu: %s: %s\n", what, strerror(errno));
	return 1;
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -1;
	if (write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		rc = -1;
	close(fd);
	return rc;
}

/* The namespace file of kind ("mnt", "pid") of pid, or -1. */
static int ns_open(pid_t pid, const char *kind)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, kind);
	return open(path, O_RDONLY | O_CLOEXEC);
}

static bool same_file(int a, int b)
{
	struct stat sa, sb;

	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/* Whether this process is now in a namespace cloned from the backend's
 * base (basens.c): a tmpfs root holding container-init.  Nothing is
 * mounted on /proc, /dev, /tmp or /run anywhere else (the host's). */
static bool in_base_ns(void)
{
	struct statfs fs;
	struct stat st;

	return statfs("/", &fs) == 0 && fs.f_type == TMPFS_MAGIC &&
	       stat("/container-init", &st) == 0 && stat("/tmp", &st) == 0 && S_ISDIR(st.st_mode);
}

/* The restored tree's root: our child in another pid namespace than ours
 * (criu --restore-sibling makes it ours; a process that executed this
 * one may have left others). */
static pid_t tree_root(void)
{
	char path[64], buf[4096], *p, *end;
	int fd, self = ns_open(getpid(), "pid");
	pid_t found = -1;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	for (p = buf; self >= 0 && found < 0 && *p; p = end) {
		pid_t c = (pid_t)strtol(p, &end, 10);
		int ns;

		if (end == p)
			break;
		ns = ns_open(c, "pid");
		if (ns >= 0 && !same_file(ns, self))
			found = c;
		if (ns >= 0)
			close(ns);
	}
	if (self >= 0)
		close(self);
	return found;
}

/* Takes criu's mounts away from our namespace and from the mount
 * namespace of pid (the tree's copy of ours, criu's patch 0004), but
 * never from the host's (host: our namespace before the setns). */
static void unmount_criu(pid_t pid, int host)
{
	int fd = pid > 0 ? ns_open(pid, "mnt") : -1;

	for (size_t i = 0; i < sizeof(criu_mounts) / sizeof(criu_mounts[0]); i++)
		umount2(criu_mounts[i], MNT_DETACH);
	if (fd >= 0 && !same_file(fd, host) && setns(fd, CLONE_NEWNS) == 0 && in_base_ns())
		for (size_t i = 0; i < sizeof(criu_mounts) / sizeof(criu_mounts[0]); i++)
			umount2(criu_mounts[i], MNT_DETACH);
	if (fd >= 0)
		close(fd);
}

/* Runs criu (argv[0] its path) in the mount namespace of pid or a copy of
 * it (new_ns), with criu's mounts; stays there.  *host: our namespace
 * before.  Returns criu's status, or -1 when it could not run (said). */
static int run_criu(pid_t pid, bool new_ns, char **argv, int *host)
{
	int exe, ns, dev, run, st;
	pid_t c;

	exe = open(argv[0], O_RDONLY | O_CLOEXEC);
	if (exe < 0)
		return fail(argv[0]), -1;
	dev = (int)syscall(SYS_open_tree, AT_FDCWD, "/dev",
			   OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	if (dev < 0)
		return fail("cannot copy /dev"), -1;
	/* criu's cache of what it learnt of the kernel (the backend's tmpfs),
	 * else a tmpfs of this run's. */
	run = getenv("DSEC_CRIU_RUN") ? (int)syscall(SYS_open_tree, AT_FDCWD,
						     getenv("DSEC_CRIU_RUN"),
						     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC) : -1;
	*host = ns_open(getpid(), "mnt");
	ns = ns_open(pid, "mnt");
	if (*host < 0 || ns < 0 || same_file(ns, *host) || setns(ns, CLONE_NEWNS) < 0)
		return fail("cannot enter the sandbox's mount namespace"), -1;
	close(ns);
	if (!in_base_ns()) {
		errno = EINVAL;
		return fail("not a container sandbox's mount namespace"), -1;
	}
	if (new_ns && unshare(CLONE_NEWNS) < 0)
		return fail("cannot copy the sandbox's mount namespace"), -1;
	if (syscall(SYS_move_mount, dev, "", AT_FDCWD, "/dev", MOVE_MOUNT_F_EMPTY_PATH) < 0 ||
	    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 ||
	    mount("criu-tmp", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=0700") < 0 ||
	    (run >= 0 ? syscall(SYS_move_mount, run, "", AT_FDCWD, "/run",
				MOVE_MOUNT_F_EMPTY_PATH) :
			mount("criu-run", "/run", "tmpfs", MS_NOSUID | MS_NODEV,
			      "size=16m,mode=0700")) < 0)
		return fail("cannot mount criu's /dev, /proc, /tmp and /run"), -1;
	close(dev);
	if (run >= 0)
		close(run);
	if (chdir("/") < 0)
		return fail("chdir"), -1;
	c = fork();
	if (c < 0)
		return fail("fork"), -1;
	if (c == 0) {
		syscall(SYS_execveat, exe, "", argv, environ, AT_EMPTY_PATH);
		fail("cannot execute criu");
		_exit(127);
	}
	close(exe);
	while (waitpid(c, &st, 0) < 0)
		if (errno != EINTR)
			return fail("waitpid"), -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The restored session's own /proc, as container-init gives a session
 * (session_proc): a proc of its pid namespace over the fork's at
 * /root/proc of its mount namespace, with the masks and the made-up
 * files.  Done from a process in that pid namespace, which leaves at
 * once.  0, or -1. */
static int session_proc(pid_t root)
{
	int mnt = ns_open(root, "mnt"), pidns = ns_open(root, "pid"), st = -1;
	pid_t c;

	if (mnt < 0 || pidns < 0 || (c = fork()) < 0)
		return -1;
	if (c == 0) {
		if (setns(mnt, CLONE_NEWNS) < 0 || !in_base_ns() || setns(pidns, CLONE_NEWPID) < 0)
			_exit(1);
		c = fork();
		if (c == 0) {
			struct be_procmask m = BE_PROCMASK_INIT;
			struct dsec_err err;

			be_procmask_clone(&m, "/root/proc");
			if (mount("proc", "/root/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
				  NULL) < 0)
				_exit(1);
			m.ro = true;
			m.unpriv = true;
			_exit(be_procmask_apply(&m, "/root/proc", &err) < 0 ? 1 : 0);
		}
		while (c > 0 && waitpid(c, &st, 0) < 0 && errno == EINTR)
			;
		_exit(c > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : 1);
	}
	close(mnt);
	close(pidns);
	while (waitpid(c, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* The pid a pidfd is of (its fdinfo), or -1. */
static pid_t pidfd_pid(int fd)
{
	char path[64], line[128];
	pid_t pid = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Pid: %d", &pid) == 1)
			break;
	if (f)
		fclose(f);
	return pid;
}

/* --restore-session IMG WORK CG NCG CRIU: a session's shell restored as
 * sessions.c starts one (fds as container-init exec --session has them:
 * 0, 1, 2 the shell's, 3 the status pipe, 4 a pidfd of the fork's init,
 * 5 its root, 6.. the NCG descriptors of the session's group
 * (be_cg_export's, CG its description), then the marker pipe).  IMG holds criu's images of the dumped shell and "pipes",
 * the inodes of its stdin, stdout, stderr and marker pipe then; WORK is
 * this restore's own directory (criu's log, the pid file).  The status
 * pipe gets "pid PID" (the restored shell on the host) and, when it ends,
 * "st WAITSTATUS", or "err ERRNO message". */
static int restore_session(char **argv)
{
	char path[4096], ext[4][64], netk[32], a_pid[16], line[256] = "";
	struct be_cg *cg = NULL;
	struct dsec_err err;
	unsigned long ino[4];
	int ncg = atoi(argv[3]), host, st, fd;
	pid_t init, root;
	FILE *f;

	dsec_err_clear(&err);
	if (strcmp(argv[2], "none")) {
		if (be_cg_import(&cg, argv[2], 6, &err) < 0) {
			dprintf(3, "err %d %s\n", err.errnum, err.msg);
			return 1;
		}
		if ((st = be_cg_attach(cg, 0)) < 0) {
			dprintf(3, "err %d cannot join the session's cgroup: %s\n", -st,
				strerror(-st));
			return 1;
		}
	}

	init = pidfd_pid(4);
	snprintf(path, sizeof(path), "%s/pipes", argv[0]);
	f = fopen(path, "re");
	if (init <= 0 || !f || fscanf(f, "%lu %lu %lu %lu", &ino[0], &ino[1], &ino[2], &ino[3]) != 4) {
		dprintf(3, "err %d cannot read the checkpoint '%s'\n", EINVAL, argv[0]);
		return 1;
	}
	fclose(f);
	/* The shell's pipes to 20..23, the checkpoint to 30, the work
	 * directory to 31, the fork's network namespace to 32; criu's own
	 * standard streams are /dev/null. */
	if (dup2(0, 20) < 0 || dup2(1, 21) < 0 || dup2(2, 22) < 0 || dup2(6 + ncg, 23) < 0)
		return 1;
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)init);
	if ((fd = open(argv[0], O_RDONLY | O_DIRECTORY)) < 0 || dup2(fd, 30) < 0 ||
	    (fd = open(argv[1], O_RDONLY | O_DIRECTORY)) < 0 || dup2(fd, 31) < 0 ||
	    (fd = open(path, O_RDONLY)) < 0 || dup2(fd, 32) < 0) {
		dprintf(3, "err %d cannot open the checkpoint: %s\n", errno, strerror(errno));
		return 1;
	}
	fd = open("/dev/null", O_RDWR);
	for (int k = 0; k < 3; k++)
		dup2(fd, k);
	for (int k = 4; k < 20; k++)
		if (k != 3)
			close(k);
	close(fd);
	for (int k = 0; k < 4; k++)
		snprintf(ext[k], sizeof(ext[k]), "fd[%d]:pipe:[%lu]", 20 + k, ino[k]);
	snprintf(netk, sizeof(netk), "fd[32]:sbnet");
	snprintf(a_pid, sizeof(a_pid), "%d", (int)init);
	char *cargv[] = { argv[4], (char *)"restore", (char *)"-D", (char *)"/proc/self/fd/30",
			  (char *)"-W", (char *)"/proc/self/fd/31", (char *)"-o",
			  (char *)"restore.log", (char *)"-v4", (char *)"-d",
			  (char *)"--restore-sibling", (char *)"--userns-maps-from", a_pid,
			  (char *)"--manage-cgroups=ignore", (char *)"--pidfile",
			  (char *)"restored.pid", (char *)"--inherit-fd", netk,
			  (char *)"--inherit-fd", ext[0], (char *)"--inherit-fd", ext[1],
			  (char *)"--inherit-fd", ext[2], (char *)"--inherit-fd", ext[3], NULL };
	st = run_criu(init, true, cargv, &host);
	snprintf(path, sizeof(path), "/proc/self/fd/31/restored.pid");
	f = st == 0 ? fopen(path, "re") : NULL;
	root = f && fscanf(f, "%d", &root) == 1 ? root : -1;
	if (f)
		fclose(f);
	if (root <= 0) {
		/* The first error criu logged, for the reply. */
		snprintf(path, sizeof(path), "/proc/self/fd/31/restore.log");
		f = fopen(path, "re");
		/* The first error that is not one criu gets past: its own
		 * RLIMIT_NOFILE, which it may not raise; a proc it may not
		 * mount in our namespace (patch 0004 then makes its own). */
		char l[256];

		while (f && fgets(l, sizeof(l), f))
			if (!line[0] && strstr(l, "Error (") && !strstr(l, "RLIMIT_NOFILE for self") &&
			    !strstr(l, "Unable to open the proc file system"))
				snprintf(line, sizeof(line), "%s", l);
		if (f)
			fclose(f);
		line[strcspn(line, "\n")] = '\0';
		dprintf(3, "err %d criu restore failed (status %d): %s\n", EIO, st, line);
		unmount_criu(-1, host);
		return 1;
	}
	for (int k = 20; k < 33; k++)
		close(k);
	unmount_criu(root, host);
	if (session_proc(root) < 0) {
		kill(root, SIGKILL);
		dprintf(3, "err %d cannot mount the restored session's /proc\n", EIO);
		return 1;
	}
	dprintf(3, "pid %d\n", (int)root);
	while (waitpid(root, &st, 0) < 0)
		if (errno != EINTR)
			return 1;
	dprintf(3, "st %d\n", st);
	return 0;
}

int main(int argc, char **argv)
{
	const char *cg[MAX_CG];
	bool new_ns = false, stay = false;
	int ncg = 0, i, host, st;
	pid_t pid;

	if (argc == 7 && !strcmp(argv[1], "--restore-session"))
		return restore_session(argv + 2);
	for (i = 1; i < argc && argv[i][0] == '-' && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "--new"))
			new_ns = true;
		else if (!strcmp(argv[i], "--stay"))
			stay = true;
		else if (!strcmp(argv[i], "--cg") && i + 1 < argc && ncg < MAX_CG)
			cg[ncg++] = argv[++i];
		else
			break;
	}
	if (i + 2 >= argc || strcmp(argv[i + 1], "--")) {
		fprintf(stderr, "usage: container-criu [--new] [--stay] [--cg PROCS]... PID -- "
			"CRIU ARGS...\n"
			"       container-criu --restore-session IMG WORK CG NCG CRIU\n");
		return 2;
	}
	pid = (pid_t)atoi(argv[i]);
	argv += i + 2;
	for (i = 0; i < ncg; i++)
		if (write_str(cg[i], "0") < 0)
			return fail(cg[i]);
	st = run_criu(pid, new_ns, argv, &host);
	if (st < 0)
		return 1;
	if (!stay) {
		unmount_criu(-1, host);
		return st;
	}
	printf("criu %d\n", st);
	fflush(stdout);
	unmount_criu(st == 0 ? tree_root() : -1, host);
	if (st != 0)
		return st;
	while (wait(NULL) > 0 || errno == EINTR)
		;
	return 0;
}
