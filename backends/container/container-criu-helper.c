/* container-criu-helper.c - container-criu: runs criu (deps/criu) inside a
 * container sandbox's mount namespace, to checkpoint a shell session of
 * the sandbox and to restore it beside another sandbox (a fork).
 *
 *   container-criu [--new] [--stay] [--cg PROCS]... PID -- CRIU ARGS...
 *
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

int main(int argc, char **argv)
{
	const char *cg[MAX_CG];
	bool new_ns = false, stay = false;
	int ncg = 0, i, exe, ns, host, dev, st;
	pid_t pid, c;

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
			"CRIU ARGS...\n");
		return 2;
	}
	pid = (pid_t)atoi(argv[i]);
	argv += i + 2;
	for (i = 0; i < ncg; i++)
		if (write_str(cg[i], "0") < 0)
			return fail(cg[i]);
	exe = open(argv[0], O_RDONLY | O_CLOEXEC);
	if (exe < 0)
		return fail(argv[0]);
	dev = (int)syscall(SYS_open_tree, AT_FDCWD, "/dev",
			   OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	if (dev < 0)
		return fail("cannot copy /dev");
	host = ns_open(getpid(), "mnt");
	ns = ns_open(pid, "mnt");
	if (host < 0 || ns < 0 || same_file(ns, host) || setns(ns, CLONE_NEWNS) < 0)
		return fail("cannot enter the sandbox's mount namespace");
	if (!in_base_ns()) {
		errno = EINVAL;
		return fail("not a container sandbox's mount namespace");
	}
	if (new_ns && unshare(CLONE_NEWNS) < 0)
		return fail("cannot copy the sandbox's mount namespace");
	if (syscall(SYS_move_mount, dev, "", AT_FDCWD, "/dev", MOVE_MOUNT_F_EMPTY_PATH) < 0 ||
	    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 ||
	    mount("criu-tmp", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=0700") < 0 ||
	    mount("criu-run", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=0700") < 0)
		return fail("cannot mount criu's /dev, /proc, /tmp and /run (a base namespace?)");
	if (chdir("/") < 0)
		return fail("chdir");
	c = fork();
	if (c < 0)
		return fail("fork");
	if (c == 0) {
		syscall(SYS_execveat, exe, "", argv, environ, AT_EMPTY_PATH);
		fail("cannot execute criu");
		_exit(127);
	}
	while (waitpid(c, &st, 0) < 0)
		if (errno != EINTR)
			return fail("waitpid");
	st = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
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
