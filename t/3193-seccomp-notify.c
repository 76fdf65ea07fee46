/* 3193-seccomp-notify.c - be_scnotify: the container filter in its counting
 * form (refusals made USER_NOTIF, answered by a supervisor that runs the
 * ERRNO filter over each call) refuses every call exactly as the ERRNO
 * filter does, with the same errno, counts each once, never sees the calls
 * it lets through, lets a call go on when the supervisor says so, and
 * fails ENOSYS, never hangs, once the listener is gone.  The supervisor is
 * this process; the filtered calls run in children.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "../backends/common/be_cred.h"
#include "../backends/common/be_io.h"
#include "../backends/common/be_scnotify.h"
#include "../backends/common/be_seccomp.h"
#include "tap.h"
#include "util.h"

/* Calls the container filter refuses (none would be harmless if let
 * through: they are refused before the kernel looks at them), and one it
 * lets through.  getppid is refused by the sandbox's own seccomp_deny. */
static const struct probe {
	const char *name;
	long nr;
	long a[4];
	int want;		/* the errno (0: let through) */
} probes[] = {
	{ "mount", SYS_mount, { 0, (long)"/", 0, 0 }, EPERM },
	{ "unshare(CLONE_NEWUSER)", SYS_unshare, { CLONE_NEWUSER }, EPERM },
	{ "keyctl", SYS_keyctl, { 0 }, EPERM },
	{ "ptrace", SYS_ptrace, { 0x4206 /* PTRACE_SEIZE */, 1 }, EPERM },
	{ "setns", SYS_setns, { -1, 0 }, EPERM },
	{ "clone3", SYS_clone3, { 0, 0 }, ENOSYS },
	{ "socket(AF_VSOCK)", SYS_socket, { 40, SOCK_STREAM, 0 }, EAFNOSUPPORT },
	{ "socket(AF_VSOCK | 1 << 32)", SYS_socket, { (long)(40 | (1UL << 32)), SOCK_STREAM, 0 },
	  EAFNOSUPPORT },
	{ "ioctl(TIOCSTI)", SYS_ioctl, { 0, TIOCSTI, 0 }, EPERM },
	{ "personality(READ_IMPLIES_EXEC)", SYS_personality, { 0x0400000 }, EPERM },
	{ "getppid (seccomp_deny)", SYS_getppid, { 0 }, EPERM },
	{ "getpid", SYS_getpid, { 0 }, 0 },
};
#define NPROBES ((int)DSEC_ARRAY_LEN(probes))
#define NREFUSED (NPROBES - 1)

/* The filter of a sandbox created with seccomp_deny ["getppid"]. */
static struct sock_fprog prog, nprog;

/* In a child: every probe, its errno written to fd (0: it succeeded). */
static _Noreturn void run_probes(int fd)
{
	for (int i = 0; i < NPROBES; i++) {
		const struct probe *p = &probes[i];
		long r = syscall(p->nr, p->a[0], p->a[1], p->a[2], p->a[3]);
		int e = r < 0 ? errno : 0;

		(void)!write(fd, &e, sizeof(e));
	}
	_exit(0);
}

/* The errnos the probes got in a child under the plain ERRNO filter. */
static void plain(int *got)
{
	int p[2];
	pid_t pid;

	if (pipe(p) < 0 || (pid = fork()) < 0)
		abort();
	if (pid == 0) {
		close(p[0]);
		if (be_cred_seccomp(&prog) < 0)
			_exit(1);
		run_probes(p[1]);
	}
	close(p[1]);
	for (int i = 0; i < NPROBES; i++)
		if (read(p[0], &got[i], sizeof(got[i])) != sizeof(got[i]))
			got[i] = -1;
	close(p[0]);
	waitpid(pid, NULL, 0);
}

/* The supervisor lets calls of tid go on. */
static bool pass_tid(pid_t tid, void *arg)
{
	return tid == *(pid_t *)arg;
}

/* Forks a child under the counting filter whose listener comes back to us
 * (*listener), running body(fd) with fd the write end of *rd. */
static pid_t counted_child(int *listener, int *rd, void (*body)(int fd))
{
	int sv[2], p[2], n = 0;
	char c;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) < 0 || pipe(p) < 0 || (pid = fork()) < 0)
		abort();
	if (pid == 0) {
		int fd;

		close(sv[0]);
		close(p[0]);
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || (fd = be_scnotify_listen(&nprog)) < 0)
			_exit(1);
		if (be_send_fds(sv[1], "l", 1, &fd, 1, 0) < 0)
			_exit(1);
		close(fd);
		body(p[1]);
		_exit(0);
	}
	close(sv[1]);
	close(p[1]);
	*listener = -1;
	if (be_recv_fds(sv[0], &c, 1, listener, 1, &n, 0) != 1 || n != 1)
		*listener = -1;
	close(sv[0]);
	*rd = p[0];
	return pid;
}

/* Answers the child's calls until it ends; its probes' errnos into got. */
static uint64_t supervise(pid_t pid, int listener, int rd, int *got, int ngot,
			  const struct be_scnotify_ops *ops)
{
	uint64_t count = 0;
	int k = 0;

	for (;;) {
		struct pollfd pf[2] = { { listener, POLLIN, 0 }, { rd, POLLIN, 0 } };

		if (poll(pf, 2, 10000) <= 0)
			break;
		if (pf[0].revents & POLLIN)
			be_scnotify_answer(listener, &prog, ops, &count);
		if (pf[1].revents) {
			int e;

			if (read(rd, &e, sizeof(e)) != sizeof(e))
				break;
			if (k < ngot)
				got[k++] = e;
		}
	}
	close(rd);
	waitpid(pid, NULL, 0);
	return count;
}

static void continue_body(int fd)
{
	/* unshare(0) does nothing, but the filter refuses every unshare. */
	long r = syscall(SYS_unshare, 0);
	int e = r < 0 ? errno : 0;

	(void)!write(fd, &e, sizeof(e));
	r = syscall(SYS_unshare, CLONE_NEWUSER);
	e = r < 0 ? errno : 0;
	(void)!write(fd, &e, sizeof(e));
}

static void orphan_body(int fd)
{
	long r;
	int e;

	usleep(200000);		/* the supervisor closes the listener meanwhile */
	r = syscall(SYS_keyctl, 0);
	e = r < 0 ? errno : 0;
	(void)!write(fd, &e, sizeof(e));
}

int main(void)
{
	int want[NPROBES], got[NPROBES], listener, rd, fd;
	char names[1024] = "";
	uint64_t n;
	pid_t pid;

	plan(9);
	if (be_seccomp_container_export("getppid", &fd) < 0 || be_cred_read_filter(fd, &prog) < 0)
		abort();
	close(fd);
	be_scnotify_prog(&prog, &nprog);

	/* The plain filter, as a sandbox's commands had it. */
	plain(want);
	for (int i = 0; i < NPROBES; i++)
		if (want[i] != probes[i].want)
			snprintf(names + strlen(names), sizeof(names) - strlen(names), " %s=%d",
				 probes[i].name, want[i]);
	ok(!names[0], "the ERRNO filter refuses each probe with its errno%s", names);

	/* The counting one, answered here. */
	pid = counted_child(&listener, &rd, run_probes);
	ok(listener >= 0, "the child's listener comes to the supervisor");
	memset(got, 0xff, sizeof(got));
	n = supervise(pid, listener, rd, got, NPROBES, NULL);
	names[0] = '\0';
	for (int i = 0; i < NPROBES; i++)
		if (got[i] != want[i])
			snprintf(names + strlen(names), sizeof(names) - strlen(names),
				 " %s: %d, not %d", probes[i].name, got[i], want[i]);
	ok(!names[0], "every probe fails (or not) as under the ERRNO filter%s", names);
	is_int(n, NREFUSED, "each refused call is counted once, the one let through not");
	close(listener);

	/* The interpreter on what it cannot run: refused, never allowed. */
	struct sock_filter bad[] = { BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 2) };
	struct sock_fprog badp = { 1, bad };
	struct seccomp_data d = { .nr = SYS_getpid, .arch = seccomp_arch_native() };
	is_int(be_scnotify_run(&badp, &d), SECCOMP_RET_KILL_PROCESS,
	       "a load the kernel would not take runs as a kill");
	is_int(be_scnotify_run(&prog, &d), SECCOMP_RET_ALLOW, "getpid runs as allowed");

	/* pass: the supervisor lets one call on (not counted). */
	pid = counted_child(&listener, &rd, continue_body);
	{
		int r[2] = { -1, -1 };
		struct be_scnotify_ops ops = { .pass = pass_tid, .arg = &pid };

		n = supervise(pid, listener, rd, r, 2, &ops);
		ok(r[0] == 0 && r[1] == 0 && n == 0,
		   "a call pass allows goes on, uncounted (unshare(0): %d, unshare(NEWUSER): %d, "
		   "count %llu)", r[0], r[1], (unsigned long long)n);
		close(listener);
	}

	/* The supervisor gone: ENOSYS at once, no hang. */
	pid = counted_child(&listener, &rd, orphan_body);
	close(listener);
	{
		struct pollfd pf = { rd, POLLIN, 0 };
		int e = -1, pr = poll(&pf, 1, 5000);
		ssize_t r = pr == 1 ? read(rd, &e, sizeof(e)) : -1;

		waitpid(pid, NULL, 0);
		ok(pr == 1 && r == sizeof(e) && e == ENOSYS,
		   "with the listener closed a refused call fails ENOSYS at once (%d)", e);
		close(rd);
	}
	ok(1, "nothing hung");
	return done_testing();
}
