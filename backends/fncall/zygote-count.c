/* zygote-count.c - fncall-zygote: counting the calls its seccomp filter
 * refuses, per unit (see zygote-count.h; be_scnotify.h).
 *
 * The zygote loads the filter in its counting form (sc.prog: the plain one's
 * refusals made USER_NOTIF) with a listener, and every unit inherits it as
 * it inherited the plain one.  A thread of the zygote, started before that
 * load and so without the filter (it can never wait on itself), holds the
 * listener: it answers each refused call with the errno the plain filter
 * gives it, so programs see what they saw before, and counts it for the unit
 * whose process made it.  A unit is a pid namespace of its own, which no
 * process of a call can leave (setns and unshare(CLONE_NEWPID) are refused,
 * and calls hold no capability): the caller's pid namespace, looked up in
 * the zygote's /proc, names the unit.  Cgroups would not do (there may be
 * none), nor would walking up the parents (a read per level, and a tid
 * that dies meanwhile).  Each slot has a count that only grows; a unit's
 * call reports how much it grew while the call had the unit (report, from
 * the count when the job was dispatched), the backend adds those up per
 * sandbox.  What no placed unit made (the python
 * template, a unit warming up) is refused as ever and counted in sc.lost.
 *
 * A kernel without USER_NOTIF (before 5.0) or without a /proc of our pid
 * namespace gets the plain filter and no count: the reports carry no "sc"
 * and the backend says nothing, rather than 0. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <poll.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "be_scnotify.h"
#include "util.h"
#include "zygote-count.h"

/* What the watcher knows of a slot (the loop writes, the watcher reads). */
struct sc_slot {
	uint64_t ns;			/* inode of its unit's pid namespace, 0: none */
	uint64_t denied;		/* refused calls of its units, ever (atomic) */
};

static struct {
	const struct sock_fprog *plain;	/* the filter as built */
	struct sock_fprog prog;		/* plain, counting */
	struct sc_slot *slots;		/* one per slot index below nslots */
	unsigned nslots;		/* cfg.max_units */
	int procfd;			/* /proc of our pid namespace, -1: none */
	int listener;			/* the filter's, -1: not counting */
	uint64_t lost;			/* refused calls of no placed unit (atomic) */
	sem_t go;			/* posted once listener is set */
} sc = { .procfd = -1, .listener = -1 };

/* The inode of pid's pid namespace, 0 if pid is gone. */
static uint64_t sc_pidns(pid_t pid)
{
	char path[32];
	struct stat st;

	snprintf(path, sizeof(path), "%d/ns/pid", (int)pid);
	return fstatat(sc.procfd, path, &st, 0) < 0 ? 0 : (uint64_t)st.st_ino;
}

/* Where the refused call of tid counts (be_scnotify_ops.count_of).  On
 * the watcher: no allocation, nothing that takes a lock the loop's clone
 * of a unit could copy held. */
static uint64_t *sc_count_of(pid_t tid, void *arg)
{
	uint64_t ns = sc_pidns(tid);

	(void)arg;
	if (!ns)
		return NULL;
	for (unsigned i = 0; i < sc.nslots; i++)
		if (__atomic_load_n(&sc.slots[i].ns, __ATOMIC_ACQUIRE) == ns)
			return &sc.slots[i].denied;
	return NULL;
}

static const struct be_scnotify_ops sc_ops = { .count_of = sc_count_of };

/* The watcher's time is the zygote's, not the sandbox's whose calls it
 * answers: at most SC_PER_WINDOW answers a window, then it sleeps out the
 * window.  A loop of refused calls (about 10 us of the watcher each) then
 * costs the node at most about a fifth of a CPU outside the sandbox's
 * limit, not a whole one; its callers wait for their answers meanwhile,
 * as do other sandboxes' refused calls (behind those it has queued). */
#define SC_WINDOW_NS 10000000ull	/* 10 ms */
#define SC_PER_WINDOW 200		/* 20,000 answers a second */

static void *sc_watch(void *arg)
{
	uint64_t t0 = 0;
	unsigned n = 0;

	(void)arg;
	while (sem_wait(&sc.go) < 0)
		;
	if (sc.listener < 0)
		return NULL;
	for (;;) {
		struct pollfd pf = { sc.listener, POLLIN, 0 };
		uint64_t now;

		if (poll(&pf, 1, -1) < 0)
			continue;	/* EINTR */
		if (!(pf.revents & POLLIN)) {
			if (pf.revents)
				return NULL;	/* POLLHUP: no process has the filter any more */
			continue;
		}
		now = dsec_now_ns();
		if (now - t0 >= SC_WINDOW_NS) {
			t0 = now;
			n = 0;
		} else if (n >= SC_PER_WINDOW) {
			struct timespec ts = { 0, (long)(SC_WINDOW_NS - (now - t0)) };

			while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
				;
			t0 = dsec_now_ns();
			n = 0;
		}
		if (be_scnotify_answer(sc.listener, sc.plain, &sc_ops, &sc.lost) > 0)
			n++;
	}
}

void zc_open_proc(void)
{
	sc.procfd = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
}

int zc_load(const struct sock_fprog *plain, unsigned nslots, char *why, size_t whylen)
{
	pthread_attr_t a;
	pthread_t t;
	sigset_t all, old;
	char self[32];
	ssize_t n;
	int fd, rc;

	/* /proc must be of our pid namespace: its "self" is our pid. */
	n = sc.procfd < 0 ? -1 : readlinkat(sc.procfd, "self", self, sizeof(self) - 1);
	if (n <= 0 || (self[n] = '\0', strtol(self, NULL, 10) != getpid())) {
		snprintf(why, whylen, "cannot open /proc of the zygote's pid namespace: %s",
			 sc.procfd < 0 ? "no /proc" : "another pid namespace's");
		return -ENOENT;
	}
	sc.plain = plain;
	sc.nslots = nslots;
	sc.slots = xcalloc(sc.nslots, sizeof(*sc.slots));
	be_scnotify_prog(plain, &sc.prog);
	sem_init(&sc.go, 0, 0);
	/* The watcher takes no signal: SIGCHLD must stay pending for the
	 * loop's signalfd. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 64 << 10);
	if ((rc = pthread_create(&t, &a, sc_watch, NULL)) != 0) {
		snprintf(why, whylen, "cannot start the seccomp watcher: %s", strerror(rc));
		fd = -rc;
	} else {
		if ((fd = be_scnotify_listen(&sc.prog)) < 0)
			snprintf(why, whylen, "cannot load the counting seccomp filter: %s",
				 strerror(-fd));
		sc.listener = fd < 0 ? -1 : fd;
		sem_post(&sc.go);	/* without a listener the watcher ends */
	}
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return fd < 0 ? fd : 0;
}

bool zc_on(void)
{
	return sc.listener >= 0;
}

void zc_unit_on(int i, pid_t pid)
{
	if (sc.listener < 0 || (unsigned)i >= sc.nslots)
		return;
	__atomic_store_n(&sc.slots[i].ns, sc_pidns(pid), __ATOMIC_RELEASE);
}

void zc_unit_off(int i)
{
	if (sc.listener >= 0 && (unsigned)i < sc.nslots)
		__atomic_store_n(&sc.slots[i].ns, 0, __ATOMIC_RELEASE);
}

uint64_t zc_slot_count(int i)
{
	if (sc.listener < 0 || (unsigned)i >= sc.nslots)
		return 0;
	return __atomic_load_n(&sc.slots[i].denied, __ATOMIC_SEQ_CST);
}
