/* be_child.c - children watched on their pidfds.  See be_child.h. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "be_child.h"
#include "util.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

#define BE_CHILD_POLL 0.1	/* seconds between waits of a child without a pidfd */

/* The wait status of what waitid said of an ended child. */
static int wait_status(const siginfo_t *si)
{
	switch (si->si_code) {
	case CLD_EXITED:
		return (si->si_status & 0xff) << 8;
	case CLD_DUMPED:
		return (si->si_status & 0x7f) | 0x80;
	default:
		return si->si_status & 0x7f;
	}
}

/* Reaps c's child if it has ended: 1 with *status, 0 if it runs on. */
static int reap(const struct be_child *c, int *status)
{
	siginfo_t si;
	int r;

	memset(&si, 0, sizeof(si));
	do {
		if (ev_is_active(&c->io))
			r = waitid((idtype_t)P_PIDFD, (id_t)c->io.fd, &si, WEXITED | WNOHANG);
		else
			r = waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG);
	} while (r < 0 && errno == EINTR);
	if (r < 0) {
		/* Not ours to wait for after all (reaped elsewhere): it has
		 * ended, how is not known. */
		*status = SIGKILL;
		return 1;
	}
	if (si.si_pid == 0)
		return 0;
	*status = wait_status(&si);
	return 1;
}

static void ended(struct ev_loop *loop, struct be_child *c)
{
	int st;

	if (!reap(c, &st))
		return;
	be_child_stop(loop, c);
	c->status = st;
	c->ended = true;
	c->cb(loop, c);
}

static void io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)revents;
	ended(loop, dsec_container_of(w, struct be_child, io));
}

static void poll_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)revents;
	ended(loop, dsec_container_of(w, struct be_child, poll));
}

void be_child_start(struct ev_loop *loop, struct be_child *c, pid_t pid, be_child_fn cb)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);	/* close-on-exec */

	c->pid = pid;
	c->status = 0;
	c->ended = false;
	c->cb = cb;
	ev_io_init(&c->io, io_cb, fd, EV_READ);
	ev_timer_init(&c->poll, poll_cb, BE_CHILD_POLL, BE_CHILD_POLL);
	if (fd >= 0)
		ev_io_start(loop, &c->io);
	else
		ev_timer_start(loop, &c->poll);
}

void be_child_stop(struct ev_loop *loop, struct be_child *c)
{
	ev_timer_stop(loop, &c->poll);
	if (!ev_is_active(&c->io))
		return;
	ev_io_stop(loop, &c->io);
	close(c->io.fd);
	c->io.fd = -1;
}

/* ---- the reaper ---------------------------------------------------------- */

struct be_reap_one {
	struct be_child c;
	struct be_reap_one *next, **prev;
};

static void reap_one_cb(struct ev_loop *loop, struct be_child *c)
{
	struct be_reap_one *o = dsec_container_of(c, struct be_reap_one, c);

	(void)loop;
	if ((*o->prev = o->next))
		o->next->prev = o->prev;
	free(o);
}

static struct be_reap_one *reap_new(struct be_reaper *r)
{
	struct be_reap_one *o = xcalloc(1, sizeof(*o));

	if ((o->next = r->list))
		r->list->prev = &o->next;
	o->prev = &r->list;
	r->list = o;
	return o;
}

void be_reap(struct be_reaper *r, struct ev_loop *loop, pid_t pid)
{
	if (pid <= 0 || waitpid(pid, NULL, WNOHANG) != 0)
		return;	/* ended already (reaped now), or not a child */
	be_child_start(loop, &reap_new(r)->c, pid, reap_one_cb);
}

void be_child_hand_over(struct ev_loop *loop, struct be_child *c, struct be_reaper *r)
{
	int st;

	if (!be_child_active(c))
		return;
	if (reap(c, &st)) {
		c->status = st;
		c->ended = true;	/* its callback is not called */
	}
	be_child_stop(loop, c);
	if (!c->ended)
		be_reap(r, loop, c->pid);
}

void be_reaper_fini(struct be_reaper *r, struct ev_loop *loop)
{
	while (r->list) {
		struct be_reap_one *o = r->list;

		r->list = o->next;
		be_child_stop(loop, &o->c);
		free(o);
	}
}
