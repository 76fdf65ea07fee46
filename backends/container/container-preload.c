/* container-preload.so - a container sandbox's warm shell.
 *
 * Executing the shell is most of what a command costs in a container on
 * machines where building an address space is slow (the dynamic linker,
 * libc's start-up, hundreds of page faults: about 3 ms of a 4 ms exec
 * here).  So once a sandbox has run a shell command and gone quiet, its
 * init (container-init) executes that shell once more as a template:
 *
 *     execve(SHELL, [SHELL -c "exit 120"], [LD_PRELOAD=/proc/self/fd/4,
 *            LD_BIND_NOW=1, DSEC_CT_TEMPLATE=1, PATH=..., pad...])
 *
 * with the command's credentials already taken (uid, capabilities,
 * no_new_privs, the seccomp filter: what every command of the sandbox
 * gets), fd 3 its socket to the init and fd 4 this object.  Our
 * constructor never returns in the template.  It forks children with
 * CLONE_PARENT (so each is the init's, which reaps it and reports its
 * status as for any command), gives the init a socket that reaches only
 * that child, and forks another each time one has taken a command, two
 * waiting at a time.  A child blocks on its socket; the init forwards it a
 * command (the ct_exec.h datagram and descriptors) whose program is the
 * very file the template executes.  The child places the descriptors,
 * joins the exec's cgroup, starts a session, sets its limit, changes
 * directory, lays the command's argv and environment out over the
 * template's (be_relayout.h) and returns from the constructor: the
 * shell's main runs the command as if executed with it.  A command that
 * does not fit the room is executed from the child instead.
 *
 * Nothing of one command reaches the next: each is a fresh child of a
 * template that never runs one.  The template is not dumpable; the init
 * stops it (closes its socket) when it has been idle a while, when the
 * sandbox is paused, and when the program's file changed.  If this
 * object cannot load (a static shell, another libc), the shell runs
 * "exit 120" and the init stops trying for that program.
 *
 * No stdio here: the shell owns it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "be_cgroup.h"
#include "be_io.h"
#include "be_path.h"
#include "be_relayout.h"
#include "ct_exec.h"

#ifndef PR_GET_TID_ADDRESS
#define PR_GET_TID_ADDRESS 40
#endif

/* Exit status of a template that cannot serve (the init stops trying). */
#define TPL_BROKEN 121

/* Children kept waiting at once: a command sent right after another finds
 * one even while the template is still forking the next. */
#define TPL_DEPTH 2

/* Children we watch at once, waiting or running; while that many run,
 * none waits and commands are executed the usual way. */
#define TPL_KIDS 64

/* Most argv and environment entries taken without malloc (the template
 * never allocated: a child's first malloc costs page faults). */
#define TPL_MAXV 1024

static struct be_area area;

/* Writes "err ERRNO message" on the status pipe (fd 3 in the child, as the
 * init's children do) and ends the child before the command started. */
static _Noreturn void child_fail(int e, const char *what)
{
	char buf[512];
	int n = snprintf(buf, sizeof(buf), "err %d %s: %s\n", e, what, strerror(e));

	if (n > 0)
		(void)!write(CT_TPL_FD, buf, (size_t)(n < (int)sizeof(buf) ? n : (int)sizeof(buf)));
	_exit(126);
}

/* Next NUL-terminated string at *p before end, or NULL. */
static char *next_str(char **p, char *end)
{
	char *s = *p, *z = memchr(s, 0, (size_t)(end - s));

	if (!z)
		return NULL;
	*p = z + 1;
	return s;
}

/* The child: wait on sock for the command and become it.  Returns (to the
 * shell's main) only when the command runs in this process image. */
static void child_main(int sock)
{
	static char buf[CT_XMSG_MAX];
	int fds[4 + BE_CG_MAXH], nfd = 0, n, first, high[4 + BE_CG_MAXH], null_fd;
	char *p, *end, *cwd, **v, *vbuf[TPL_MAXV], name[16] = "";
	const char *base;
	struct ct_xmsg h;
	struct rlimit rl;

	n = be_recv_fds(sock, buf, sizeof(buf), fds, 4 + BE_CG_MAXH, &nfd, 0);
	if (n <= 0)
		_exit(0);	/* the init stopped the template */
	/* The init checked the request before it chose us; a bad one here
	 * means a bug: end without running anything (its pipe closes). */
	if (n < (int)sizeof(h))
		_exit(126);
	memcpy(&h, buf, sizeof(h));
	first = (h.flags & CT_X_STDIN) ? 4 : 3;
	if (h.magic != CT_XMSG_MAGIC || nfd < first || h.argc == 0 || h.argc > CT_XMSG_MAX ||
	    h.envc > CT_XMSG_MAX)
		_exit(126);
	p = buf + sizeof(h);
	end = buf + n;
	v = h.argc + h.envc + 2 <= TPL_MAXV ? vbuf : calloc(h.argc + h.envc + 2, sizeof(*v));
	if (!v || !(cwd = next_str(&p, end)))
		_exit(126);
	v[h.argc] = v[h.argc + h.envc + 1] = NULL;
	for (uint32_t i = 0; i < h.argc + h.envc; i++)
		if (!(v[i < h.argc ? i : i + 1] = next_str(&p, end)))
			_exit(126);
	/* stdout, stderr, status, [stdin], the cgroup's files: to 1, 2, 3, 0
	 * (else /dev/null), and each cgroup joined. */
	for (int i = 0; i < nfd; i++)
		if ((high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 100)) < 0)
			_exit(126);
	if (dup2(high[2], CT_TPL_FD) < 0 || dup2(high[0], 1) < 0 || dup2(high[1], 2) < 0)
		_exit(126);
	if (first == 4) {
		if (dup2(high[3], 0) < 0)
			child_fail(errno, "cannot place stdin");
	} else if ((null_fd = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0 || dup2(null_fd, 0) < 0) {
		child_fail(errno, "cannot open the sandbox's /dev/null");
	}
	for (int i = first; i < nfd; i++)
		if (write(high[i], "0", 1) != 1)
			child_fail(errno, "cannot join the exec's cgroup");
	/* (oom_score_adj: the template's, 1000, ct_template) */
	setsid();
	rl.rlim_cur = rl.rlim_max = (rlim_t)h.nofile;
	setrlimit(RLIMIT_NOFILE, &rl);
	if (chdir(cwd) < 0) {
		int e = errno;
		char msg[PATH_MAX + 32];

		snprintf(msg, sizeof(msg), CT_ERR_CHDIR "%.*s'", PATH_MAX, cwd);
		child_fail(e, msg);
	}
	/* What an exec would have done: every descriptor above stderr closes
	 * (the status pipe, our socket, the template's pipe: the template
	 * then forks the next child), the process is dumpable again and
	 * named after the program. */
	syscall(SYS_close_range, 3, ~0U, 0);
	if (!be_area_relayout(&area, v, v + h.argc + 1)) {
		int e;

		be_path_exec(v, v + h.argc + 1);
		e = errno;
		dprintf(2, "%s: %s\n", v[0], strerror(e));
		_exit(e == ENOENT ? 127 : 126);
	}
	prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	base = strrchr(area.slots[0], '/') ? strrchr(area.slots[0], '/') + 1 : area.slots[0];
	memcpy(name, base, strnlen(base, sizeof(name) - 1));
	prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
	if (v != vbuf)
		free(v);
}

/* Forks a waiting child and tells the init of it.  Returns the read end
 * of a pipe that reaches EOF once the child took a command (or died), and
 * its pid in *pidp; in the child, returns -1 once it is to run one. */
static int fork_child(int *tid_addr, pid_t *pidp)
{
	int sp[2], pp[2];
	struct ct_tready r = { .magic = CT_TREADY_MAGIC };
	long pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0 ||
	    pipe2(pp, O_CLOEXEC) < 0)
		_exit(TPL_BROKEN);
	/* fork(), but the init's child; libc's thread id of us is kept
	 * right in the child the way fork() keeps it. */
	pid = syscall(SYS_clone, CLONE_PARENT | CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD,
		      0, NULL, tid_addr, 0);
	if (pid == 0) {
		close(sp[0]);
		close(pp[0]);
		child_main(sp[1]);
		return -1;
	}
	close(sp[1]);
	close(pp[1]);
	if (pid < 0)
		_exit(TPL_BROKEN);
	r.pid = (int32_t)pid;
	*pidp = (pid_t)pid;
	/* The init gone or done with us: the child sees its socket close and
	 * ends; so do we. */
	if (be_send_fds(CT_TPL_FD, &r, sizeof(r), &sp[0], 1, 0) < 0)
		_exit(0);
	close(sp[0]);
	return pp[0];
}

/* The template.  At least one child always waits; a second is forked
 * only while none of our children runs a command (watched through a
 * pidfd), so that a fork never competes with a command for the CPU when
 * commands come one after the other.  Returns only in a child that is to
 * run a command. */
static void template_loop(int *tid_addr)
{
	struct pollfd kids[TPL_KIDS];
	pid_t pids[TPL_KIDS];
	bool running[TPL_KIDS];
	int n = 0, waiting = 0;

	for (;;) {
		while (n < TPL_KIDS && (!waiting || (waiting < TPL_DEPTH && n == waiting))) {
			int fd = fork_child(tid_addr, &pids[n]);

			if (fd < 0)
				return;
			running[n] = false;
			kids[n++] = (struct pollfd){ .fd = fd, .events = POLLIN };
			waiting++;
		}
		if (poll(kids, (nfds_t)n, -1) < 0)
			continue;
		for (int i = n - 1; i >= 0; i--) {
			if (!kids[i].revents)
				continue;
			close(kids[i].fd);
			if (!running[i]) {
				/* It took a command (or died): watch it run. */
				int pfd = (int)syscall(SYS_pidfd_open, pids[i], 0);

				waiting--;
				if (pfd >= 0) {
					kids[i] = (struct pollfd){ .fd = pfd, .events = POLLIN };
					running[i] = true;
					continue;
				}
			}
			n--;
			kids[i] = kids[n];
			pids[i] = pids[n];
			running[i] = running[n];
		}
	}
}

__attribute__((constructor)) static void ct_template(int argc, char **argv, char **envp)
{
	int *tid_addr = NULL;

	if (!getenv("DSEC_CT_TEMPLATE"))
		return;
	close(CT_TPL_SO_FD);
	be_area_find(&area, argc, argv, envp);
	/* Without the room, or without the thread id's address, no child
	 * could become a command the way this needs. */
	if (!area.have_map || prctl(PR_GET_TID_ADDRESS, &tid_addr, 0, 0, 0) < 0 || !tid_addr ||
	    fcntl(CT_TPL_FD, F_SETFD, FD_CLOEXEC) < 0)
		_exit(TPL_BROKEN);
	/* The OOM killer takes a command first (as container-init
	 * run_command): the template is at the commands' oom_score_adj, 1000,
	 * and so is each child from its fork.  Set here, while we are
	 * dumpable: once not, our /proc files are root's (of the sandbox's
	 * user namespace, or the host's without one), and a child with
	 * another uid could not open its own. */
	{
		int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);

		if (fd < 0 || write(fd, "1000", 4) != 4)
			_exit(TPL_BROKEN);
		close(fd);
	}
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	be_area_title(&area, "dsec-shell");
	prctl(PR_SET_NAME, (unsigned long)"dsec-shell", 0, 0, 0);
	template_loop(tid_addr);
}
