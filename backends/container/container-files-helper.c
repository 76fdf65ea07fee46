/* container-files-helper.c - container-files: a container
 * sandbox's file server, started by container.so (fork + exec, at the
 * sandbox's first file operation) and serving every file operation of
 * that sandbox until dsecd closes its socket.
 *
 *   container-files --uid U --gid G --userns 0|1 --cg N [--deny LIST]
 *	fd 3: its end of a SOCK_STREAM socket pair (be_fs.h's requests)
 *	fd 4: pidfd of the sandbox's init; fd 5: O_PATH fd of its root
 *	fd 6: the commands' seccomp filter compiled by dsecd (a memfd), or
 *	closed (then compiled here from --deny)
 *	fds 7..7+N-1: the sandbox's cgroup.procs files, written "0" to join
 *
 * The file API must act with exactly what a command of the sandbox has:
 * its uid and gid, no supplementary groups, and in a sandbox with a user
 * namespace root's small set of capabilities in that namespace (which
 * act on the sandbox's own ids only: a host file such as
 * /sys/firmware/acpi/tables/DSDT stays closed to it), none without one.
 * A thread of dsecd cannot hold a user namespace's capabilities, so this
 * process joins the sandbox's user, mount, network, IPC and UTS
 * namespaces, chroots to its root and takes a command's credentials,
 * no_new_privs and seccomp filter (container-init's, be_cred.h) before it
 * reads a request.  It stays outside the sandbox's pid namespace, so no
 * process of the sandbox can see or signal it, but joins its cgroup (as
 * soon as it no longer shares dsecd's memory): the pages it writes to the
 * sandbox's in-memory disk count against the sandbox's memory, not
 * dsecd's, and a pause freezes it (container.c pauses only between file
 * operations; dsecd resumes a sandbox before it sends one).  It is not
 * dumpable and was executed from the host's file system, so nothing of
 * the sandbox's files runs in it.  It ends when dsecd closes the socket
 * (or dies: the parent-death signal).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "be_cred.h"
#include "be_fs.h"
#include "be_seccomp.h"

#define FD_SOCK 3
#define FD_PIDFD 4
#define FD_ROOT 5
#define FD_FILTER 6
#define FD_CG 7

static const char *arg(int argc, char **argv, const char *name, const char *def)
{
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], name))
			return argv[i + 1];
	return def;
}

/* The commands' filter: dsecd's compiled one, else ours from deny. */
static int load_filter(const char *deny)
{
	struct sock_fprog prog = { 0 };
	scmp_filter_ctx ctx;
	int rc;

	if (be_cred_read_filter(FD_FILTER, &prog) == 0) {
		rc = be_cred_seccomp(&prog);
		free(prog.filter);
		return rc;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	if (!(ctx = be_seccomp_container_ctx(deny)))
		return -EINVAL;
	rc = seccomp_load(ctx);
	seccomp_release(ctx);
	return rc;
}

/* Tells dsecd why we cannot serve (as the reply to its first request). */
static _Noreturn void fail(int e, const char *what)
{
	struct dsec_err err;

	dsec_err_setc(&err, DSEC_E_BACKEND, e, "cannot start the sandbox's file server: %s: %s",
		      what, strerror(e));
	be_fs_serve_fail(FD_SOCK, &err);
	_exit(1);
}

int main(int argc, char **argv)
{
	uid_t uid = (uid_t)strtoul(arg(argc, argv, "--uid", "0"), NULL, 10);
	gid_t gid = (gid_t)strtoul(arg(argc, argv, "--gid", "0"), NULL, 10);
	bool userns = strcmp(arg(argc, argv, "--userns", "0"), "0") != 0;
	uint64_t keep = userns ? BE_CRED_SMALL_CAPS : 0;
	struct be_fs_root root = { .in_root = true, .uid = uid, .gid = gid, .mode_mask = 07777 };
	int cap = -1, rc;

	pid_t parent = getppid();

	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	/* The sandbox's cgroup first (before the exec we shared dsecd's
	 * memory): dsecd opened the files, the kernel checks the opener. */
	int ncg = atoi(arg(argc, argv, "--cg", "0"));

	for (int i = 0; i < ncg && i < 16; i++) {
		if (write(FD_CG + i, "0", 1) != 1)
			fail(errno, "cannot join the sandbox's cgroup");
		close(FD_CG + i);
	}
	/* Not the pid namespace: only children would enter it, and outside
	 * it the sandbox's processes have no pid of ours to signal. */
	if (setns(FD_PIDFD, CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
		  (userns ? CLONE_NEWUSER : 0)) < 0)
		fail(errno, "cannot enter the sandbox");
	/* The credentials the user namespace gave us cleared the parent-death
	 * signal: again, and gone if dsecd died meanwhile. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	if (fchdir(FD_ROOT) < 0 || chroot(".") < 0 || chdir("/") < 0)
		fail(errno, "cannot enter the sandbox's root");
	close(FD_PIDFD);
	close(FD_ROOT);
	if ((rc = be_cred_bound(keep, &cap)) < 0)
		fail(-rc, "cannot drop the bounding set");
	if ((rc = be_cred_become(uid, gid, keep)) < 0)
		fail(-rc, "cannot take the commands' ids");
	if ((rc = load_filter(arg(argc, argv, "--deny", ""))) < 0)
		fail(-rc, "cannot load the seccomp filter");
	close(FD_FILTER);
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		fail(errno, "cannot make the server undumpable");
	if ((root.fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		fail(errno, "cannot open the sandbox's root");
	return be_fs_serve(FD_SOCK, &root) < 0 ? 1 : 0;
}
