/* spawn.c - the container backend: spawning container-init (and the
 * file server) from the loop thread, in a sandbox's namespaces or new ones.
 */
#include <linux/close_range.h>
#include <poll.h>

#include "ct.h"

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
	int slot0;			/* the fds are in the spawn slots from here, -1 = not */
};

/* ---- spawn slots ----------------------------------------------------------
 *
 * A child made by clone gets a copy of dsecd's descriptor table and has
 * to close every entry: both cost a step per descriptor dsecd holds, and a
 * node with thousands of sandboxes holds tens of thousands.  So the child
 * shares the table (CLONE_FILES) and makes its own with
 * close_range(CLOSE_RANGE_UNSHARE) from the first entries only: the loop
 * thread (the only one that spawns) has put the child's descriptors in
 * CT_SLOTS entries kept for that, and puts /dev/null (the last slot) back
 * in them once the child has its own table.  The entries below the slots
 * are copied into every child (and closed there), so the slots are the
 * lowest CT_SLOTS free in a row from 32 on (above 2 + 16 + 2, where the
 * child places its own) when the backend starts, not above the highest
 * descriptor open then: one inherited from whatever started dsecd (a
 * shell's 255, a harness's pipe) would put every sandbox's control socket
 * opened after it below the slots, and each spawn would copy and close
 * hundreds. */

static int slot_null(const struct ct_be *be)
{
	return be->slot0 + CT_SLOTS - 1;
}

int spawn_slots_init(struct ct_be *be)
{
	enum { SEEN = 1024 };
	unsigned char open_fd[SEEN] = { 0 };
	int nul, base = 32, fd;
	struct dirent *de;
	DIR *d;

	/* First, so that the scan sees it. */
	if ((nul = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
		return -1;
	if (!(d = opendir("/proc/self/fd"))) {
		close(nul);
		return -1;
	}
	while ((de = readdir(d)))
		if ((fd = atoi(de->d_name)) >= 0 && fd < SEEN)
			open_fd[fd] = 1;
	closedir(d);
	for (int i = 0; base + i < SEEN && i < CT_SLOTS; i++)
		if (open_fd[base + i]) {
			base += i + 1;
			i = -1;
		}
	for (int i = 0; i < CT_SLOTS; i++) {
		int got = fcntl(nul, F_DUPFD_CLOEXEC, base + i);

		if (got != base + i) {	/* taken meanwhile: no slots */
			if (got >= 0)
				close(got);
			while (i-- > 0)
				close(base + i);
			close(nul);
			errno = EBUSY;
			return -1;
		}
	}
	close(nul);
	be->slot0 = base;
	return 0;
}

void spawn_slots_fini(struct ct_be *be)
{
	if (be->slot0 < 0)
		return;
	for (int i = 0; i < CT_SLOTS; i++)
		close(be->slot0 + i);
	be->slot0 = -1;
}

/* The child's descriptors into the slots (a->slot0 set), or nothing to do
 * without slots.  -1 with errno (slots put back). */
static void slots_put_back(const struct ct_be *be, int n);

static int slots_fill(const struct ct_be *be, struct spawn_args *a)
{
	int n = a->nfds;

	a->slot0 = -1;
	if (be->slot0 < 0)
		return 0;
	for (int i = 0; i < n + 2; i++) {
		int fd = i < n ? a->fds[i] : i == n ? a->go_fd : a->exec_fd;

		if (fd >= 0 && dup3(fd, be->slot0 + i, O_CLOEXEC) < 0) {
			int e = errno;

			slots_put_back(be, i);
			errno = e;
			return -1;
		}
	}
	a->slot0 = be->slot0;
	return 0;
}

/* /dev/null back into the first n + 2 slots: dsecd keeps no reference of
 * the child's descriptors (a pipe's write end kept would hold off its EOF). */
static void slots_put_back(const struct ct_be *be, int n)
{
	if (be->slot0 < 0)
		return;
	for (int i = 0; i < n + 2 && i < CT_SLOTS - 1; i++)
		if (dup3(slot_null(be), be->slot0 + i, O_CLOEXEC) < 0)
			DSEC_BUG("cannot put a spawn slot back: %s", strerror(errno));
}

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
	if (a->slot0 >= 0) {
		/* A table of our own: dsecd's first entries and the slots
		 * (above 2 + n: placing one never overwrites another). */
		if (syscall(SYS_close_range, a->slot0 + n + 2, ~0U, CLOSE_RANGE_UNSHARE) < 0)
			_exit(127);
		for (int i = 0; i < n; i++)
			high[i] = a->fds[i] >= 0 ? a->slot0 + i : -1;
		go = a->go_fd >= 0 ? a->slot0 + n : -1;
		ex = a->exec_fd >= 0 ? a->slot0 + n + 1 : -1;
		if (ex >= 0 && write(ex, "u", 1) != 1)	/* spawn_helper_setup waits for it */
			_exit(127);
	} else {
		for (int i = 0; i < n; i++)
			high[i] = a->fds[i] >= 0 ? fcntl(a->fds[i], F_DUPFD, 20) : -1;
		if (a->go_fd >= 0 && (go = fcntl(a->go_fd, F_DUPFD, 20)) < 0)
			_exit(127);
		if (a->exec_fd >= 0 && (ex = fcntl(a->exec_fd, F_DUPFD_CLOEXEC, 20)) < 0)
			_exit(127);
	}
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
pid_t spawn_prog(struct ct_be *be, const char *prog, char *const *argv,
		 char *const *envp, const int *fds, int nfds, unsigned long clone_flags,
		 const char *cwd)
{
	bool base = clone_flags & CT_SPAWN_BASE;
	_cleanup_free_ char *helper = base ? xasprintf("/%s", prog)
					   : xasprintf("%s/%s", be->host->helper_dir, prog);
	struct spawn_args a = { helper, argv, envp, fds, nfds, -1, -1, -1, -1 };
	int dir = base ? -1 : enter_dir(cwd), e;
	sigset_t all, old;
	pid_t pid;

	DSEC_ASSERT(nfds <= 16);
	DSEC_ASSERT(!base || !strcmp(prog, CT_HELPER));
	if (dir == -2)
		return -1;
	if (slots_fill(be, &a) < 0) {
		e = errno;
		leave_dir(be, dir);
		errno = e;
		return -1;
	}
	if (base && ct_base_enter(be) < 0) {
		e = errno;
		slots_put_back(be, nfds);
		errno = e;
		return -1;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	/* vfork: back here once the child has exec'd, its table its own. */
	pid = clone(spawn_child, spawn_stack + sizeof(spawn_stack),
		    (int)((clone_flags & ~CT_SPAWN_BASE) | CLONE_VM | CLONE_VFORK | SIGCHLD |
			  (a.slot0 >= 0 ? CLONE_FILES : 0)), &a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	e = errno;
	if (base)
		ct_base_leave(be);
	slots_put_back(be, nfds);
	leave_dir(be, dir);
	errno = e;
	return pid < 0 ? -1 : pid;
}

/* spawn_prog of container-init. */
pid_t spawn_helper(struct ct_be *be, char *const *argv, char *const *envp,
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

/* The child's "u" on the exec pipe: it has a descriptor table of its own
 * and the slots may be put back.  Until then the slots hold a write end of
 * that pipe, so a child that dies first gives no EOF: look at whether it
 * is alive (without reaping it) between waits.  0, or -1 when it died. */
static int wait_unshared(pid_t pid, int ex)
{
	struct pollfd p = { .fd = ex, .events = POLLIN };
	char c;

	for (;;) {
		siginfo_t si = { 0 };
		int n = poll(&p, 1, 10);

		if (n > 0)
			return read(ex, &c, 1) == 1 && c == 'u' ? 0 : -1;
		if (n < 0 && errno != EINTR)
			return -1;
		if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid)
			return -1;
	}
}

/* spawn_helper for a child in a new user namespace of owner's: its uid
 * and gid maps must be written, from outside, before it execs (an exec
 * with no uid mapped would drop its capabilities), so the child waits on a
 * pipe while setup(pid, arg) runs, and we wait for its exec (the end of
 * the shared stack's use) on a close-on-exec pipe: the wait a vfork has
 * anyway.  If setup fails the child is killed and reaped; returns -1 with
 * errno. */
pid_t spawn_helper_setup(struct ct_be *be, char *const *argv, char *const *envp,
			 const int *fds, int nfds, unsigned long clone_flags, const char *cwd,
			 uid_t owner, int (*setup)(pid_t pid, void *arg), void *arg)
{
	bool base = clone_flags & CT_SPAWN_BASE;
	_cleanup_free_ char *helper = base ? xstrdup("/" CT_HELPER)
					   : xasprintf("%s/" CT_HELPER, be->host->helper_dir);
	struct spawn_args a = { helper, argv, envp, fds, nfds, -1, -1, -1, -1 };
	int go[2] = { -1, -1 }, ex[2] = { -1, -1 }, rc, e, dir = -1;
	sigset_t all, old;
	pid_t pid;
	char c;

	DSEC_ASSERT(nfds <= 16);
	if (pipe2(go, O_CLOEXEC) < 0 || pipe2(ex, O_CLOEXEC) < 0 ||
	    (!base && (dir = enter_dir(cwd)) == -2))
		goto fail;
	a.go_fd = go[0];
	a.exec_fd = ex[1];
	if (slots_fill(be, &a) < 0)
		goto fail;
	if (base && ct_base_enter(be) < 0) {
		e = errno;
		slots_put_back(be, nfds);
		errno = e;
		goto fail;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid = clone_as(be, owner, spawn_child, spawn_stack + sizeof(spawn_stack),
		       (int)((clone_flags & ~CT_SPAWN_BASE) | CLONE_VM | SIGCHLD |
			     (a.slot0 >= 0 ? CLONE_FILES : 0)), &a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	e = errno;
	if (base)
		ct_base_leave(be);
	leave_dir(be, dir);
	dir = -1;
	close(ex[1]);
	ex[1] = -1;
	if (pid >= 0 && a.slot0 >= 0 && wait_unshared(pid, ex[0]) < 0) {
		/* It died before it had a table of its own. */
		slots_put_back(be, nfds);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		errno = ECHILD;
		goto fail;
	}
	slots_put_back(be, nfds);
	errno = e;
	if (pid < 0)
		goto fail;
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
	leave_dir(be, dir);
	for (int i = 0; i < 2; i++) {
		if (go[i] >= 0)
			close(go[i]);
		if (ex[i] >= 0)
			close(ex[i]);
	}
	errno = e;
	return -1;
}
