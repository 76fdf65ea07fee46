/* init-count.c - container-init's counting of the calls the commands'
 * seccomp filter refuses (be_scnotify.h): the init's watcher thread
 * (count_start), the filter a command's process loads (command_filter) and
 * the exec helper's watch of its command (exec_watch).  A part of
 * container-init (container-init-helper.c); what the parts share is in
 * ct_init.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "be_io.h"
#include "be_scnotify.h"
#include "ct_exec.h"
#include "ct_init.h"
#include "util.h"

/* ---- counting the calls the filter refuses (be_scnotify.h) ----------------
 *
 * The init loads the filter once, on its own thread, in its counting form
 * (notify_filter: exec_filter's refusals made USER_NOTIF), and every child
 * it starts (commands, the warm shell's template and so its children)
 * inherits it: a command no longer loads a filter of its own (the kernel
 * compiles each one loaded, ~0.1 ms per command on this kind of VM).  A
 * second thread of the init, the watcher, started before that load and so
 * without the filter, holds the listener: it answers each refused call
 * with the errno exec_filter gives it, counts it in `denied` and tells
 * dsecd the count on the command socket (a struct ct_count, ct_exec.h), at
 * most every CT_COUNT_EVERY ms; each command's status line carries the
 * count too.  The init's own calls (tid 1) and those of a child of its
 * that still runs the init's code (setup_tid, until the point where the
 * command used to load its filter) go on, as they did before: a sandbox's
 * seccomp_deny may name calls the init makes, and the init must not stop
 * on its own filter.  Nothing of the sandbox can reach the watcher or the
 * count: the init is not dumpable and no process of the sandbox has the
 * listener or the socket.
 *
 * The exec helper (sessions, streams, large requests) cannot inherit the
 * init's filter: its command's process loads the counting filter itself
 * and hands the listener to the helper (listen_sock), which answers and
 * counts until the command ends and reports the count in its status
 * line (and a session's shell's, as it goes, in "sc N" lines). */

struct sock_fprog notify_filter;	/* exec_filter, counting */
bool filter_inherited;			/* the init loaded notify_filter */
pid_t setup_tid;			/* the init's child before its command */
uint64_t denied;			/* refused calls of the sandbox so far */
int listen_sock = -1;			/* exec helper's child: the listener goes there */

#define CT_COUNT_EVERY 100		/* ms between two counts sent to dsecd */

/* The watcher's part of the init. */
struct watch {
	int listener;			/* the filter's, -1: the init could not load it */
	int ctl;			/* its own descriptor of the command socket */
	sem_t go;			/* posted once listener is set */
};

/* Calls that go on: the init's own, and its child's before the command. */
static bool init_pass(pid_t tid, void *arg)
{
	pid_t setup = __atomic_load_n(&setup_tid, __ATOMIC_SEQ_CST);

	(void)arg;
	return tid == 1 || (setup > 0 && tid == setup);
}

static const struct be_scnotify_ops init_ops = { .pass = init_pass };

/* Tells dsecd the count (cumulative: one lost is made up by the next).
 * 1: sent; 0: the socket is full, try later; -1: dsecd is gone. */
static int count_send(int ctl, uint64_t n)
{
	struct ct_count c = { .magic = CT_COUNT_MAGIC, .denied = n };

	if (send(ctl, &c, sizeof(c), MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(c))
		return 1;
	return errno == EAGAIN || errno == ENOBUFS || errno == EINTR ? 0 : -1;
}

static void *watcher(void *arg)
{
	struct watch *w = arg;
	uint64_t told = 0;
	int64_t last = 0;
	bool owed = true;	/* the first count (0) says the sandbox counts */

	while (sem_wait(&w->go) < 0)
		;
	if (w->listener < 0) {
		close(w->ctl);
		return NULL;
	}
	for (;;) {
		uint64_t n = __atomic_load_n(&denied, __ATOMIC_SEQ_CST);
		int64_t now = mono_ms(), wait = -1;
		struct pollfd pf = { w->listener, POLLIN, 0 };

		if ((n != told || owed) && w->ctl >= 0) {
			if (now - last >= CT_COUNT_EVERY) {
				int rc = count_send(w->ctl, n);

				if (rc > 0) {
					told = n;
					owed = false;
				} else if (rc < 0) {
					/* dsecd's end is gone: as for a hang-up below
					 * (it used to go on watching the filter, and
					 * the sandbox's destroy met it there). */
					close(w->listener);
					close(w->ctl);	/* the init's end stays open: its own */
					return NULL;
				}
				last = now;
			}
			wait = w->ctl < 0 ? -1 : CT_COUNT_EVERY - (now - last);
		}
		struct pollfd pfs[2] = { pf, { w->ctl, POLLRDHUP, 0 } };

		if (poll(pfs, w->ctl >= 0 ? 2 : 1, (int)wait) <= 0)
			continue;
		/* dsecd's end closed (a destroy, or dsecd gone): this thread ends
		 * before the init does, so that the init's end is not the
		 * kernel's search of every process on the host for a new owner
		 * of the memory this thread shares (mm_update_next_owner, 0.8 ms
		 * of each destroy at 10,000 sandboxes).  A call refused in the
		 * moment before the sandbox's kill fails ENOSYS, uncounted. */
		if (w->ctl >= 0 && (pfs[1].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
			close(w->listener);
			close(w->ctl);
			return NULL;
		}
		if (pfs[0].revents & POLLIN)
			be_scnotify_answer(w->listener, &exec_filter, &init_ops, &denied);
	}
}

/* Starts the watcher and loads the counting filter on the init's thread
 * (see above).  When either fails the sandbox runs as before: each command
 * loads exec_filter, nothing is counted, dsecd hears nothing. */
void count_start(int ctl)
{
	static struct watch w = { .listener = -1, .ctl = -1 };
	pthread_attr_t a;
	pthread_t t;
	int fd;

	if (!exec_filter.filter || (w.ctl = fcntl(ctl, F_DUPFD_CLOEXEC, 3)) < 0)
		return;
	be_scnotify_prog(&exec_filter, &notify_filter);
	sem_init(&w.go, 0, 0);
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 64 << 10);
	if (pthread_create(&t, &a, watcher, &w) != 0) {
		close(w.ctl);
		return;
	}
	pthread_attr_destroy(&a);
	/* no_new_privs is every command's anyway; with it the load needs no
	 * capability. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
	    (fd = be_scnotify_listen(&notify_filter)) >= 0) {
		w.listener = fd;
		filter_inherited = true;
	}
	sem_post(&w.go);
}

/* Where a command's filter used to be loaded: inherited from the init,
 * from here on the child is the command (its calls are refused); else
 * loaded now, counting when the exec helper takes the listener. */
int command_filter(void)
{
	int fd, rc;

	if (filter_inherited) {
		__atomic_store_n(&setup_tid, 0, __ATOMIC_SEQ_CST);
		return 0;
	}
	if (listen_sock >= 0 && notify_filter.filter) {
		if ((fd = be_scnotify_listen(&notify_filter)) < 0)
			return fd;
		/* Nobody else answers it: if the helper cannot have it, the
		 * command must not run (its refused calls would fail ENOSYS). */
		rc = be_send_fds(listen_sock, "l", 1, &fd, 1, 0);
		close(fd);
		close(listen_sock);
		return rc < 0 ? rc : 0;
	}
	if (exec_filter.filter)
		return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &exec_filter) < 0 ? -errno : 0;
	return load_seccomp();
}

/* How long the exec helper answers the filter's calls once its command
 * ended and it reported (what the command left is killed meanwhile). */
#define CT_LINGER_MS 5000
/* A session's "sc" lines: up to CT_SC_BURST at once, then one every
 * CT_SC_EVERY ms (a count held back goes out with the next). */
#define CT_SC_BURST 10
#define CT_SC_EVERY 10

/* What the exec helper's watch of a session's shell keeps. */
struct sc_lines {
	uint64_t told;			/* the count the last "sc" line said */
	int64_t tat;			/* when the budget is whole again (mono_ms) */
};

/* Says count n in an "sc" line if the budget has room: 0; else how many
 * ms until it has.  The status pipe is nonblocking meanwhile: a refused
 * call must not wait for dsecd to read (a line it misses, the next says). */
static int sc_say(struct sc_lines *l, uint64_t n)
{
	int64_t now = mono_ms(), due = l->tat - CT_SC_BURST * CT_SC_EVERY;
	char line[32];
	int len = snprintf(line, sizeof(line), "sc %" PRIu64 "\n", n);

	if (now < due)
		return (int)(due - now);
	l->tat = (l->tat > now ? l->tat : now) + CT_SC_EVERY;
	/* A line is less than PIPE_BUF: all of it or nothing. */
	if (write(FD_STATUS, line, (size_t)len) != len)
		return CT_SC_EVERY;	/* full: later */
	l->told = n;
	return 0;
}

/* A refused call of the session's shell was counted (its caller not yet
 * woken): say so now, before the shell can report its command done,
 * within the budget (a flood of them must not wake dsecd at each). */
static void sc_counted(uint64_t n, void *arg)
{
	(void)sc_say(arg, n);
}

/* The exec helper once its command runs: answers the calls its filter
 * refuses (listener, -1: none) until it ends, reports its status, and
 * answers on while what it left lives (they are killed by dsecd, and
 * would fail ENOSYS without us).  A session's shell's count also goes
 * out as it grows ("sc" lines, sc_counted). */
int exec_watch(pid_t pid, int listener, bool session)
{
	struct sc_lines l = { 0, 0 };
	struct be_scnotify_ops ops = { .counted = session ? sc_counted : NULL, .arg = &l };
	uint64_t n = 0;
	int64_t end;
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0), st;

	if (session)
		dsec_set_nonblock(FD_STATUS, true);	/* sc_say */
	for (;;) {
		struct pollfd pf[2] = { { listener, POLLIN, 0 }, { pfd, POLLIN, 0 } };
		int wait = pfd < 0 ? 50 : -1;	/* no pidfd: look every 50 ms */

		if (session && n != l.told)
			wait = sc_say(&l, n) ?: wait;	/* what the budget held back */
		if (poll(pf, 2, wait) < 0 && errno != EINTR)
			fail(errno, "cannot poll: %s", strerror(errno));
		if (pf[0].revents & POLLIN)
			be_scnotify_answer(listener, &exec_filter, &ops, &n);
		if (pfd >= 0 ? pf[1].revents != 0 : waitpid(pid, &st, WNOHANG) == pid)
			break;
	}
	if (pfd >= 0) {
		while (waitpid(pid, &st, 0) < 0)
			if (errno != EINTR)
				fail(errno, "cannot wait: %s", strerror(errno));
		close(pfd);
	}
	if (session)
		dsec_set_nonblock(FD_STATUS, false);
	if (listener < 0) {
		dprintf(FD_STATUS, "st %d\n", st);
		return 0;
	}
	dprintf(FD_STATUS, "st %d %" PRIu64 "\n", st, n);
	close(FD_STATUS);	/* dsecd has the result: it need not wait for us */
	ops.counted = NULL;
	for (end = mono_ms() + CT_LINGER_MS; mono_ms() < end;) {
		struct pollfd pf = { listener, POLLIN, 0 };

		if (poll(&pf, 1, (int)(end - mono_ms())) < 0 && errno != EINTR)
			break;
		if (pf.revents & POLLIN)
			be_scnotify_answer(listener, &exec_filter, &ops, &n);
		else if (pf.revents)
			break;	/* POLLHUP: no process has the filter any more */
	}
	return 0;
}
