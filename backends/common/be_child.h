/* be_child.h - the end of a child process, seen through its pidfd.
 *
 * dsecd's loop is not libev's default loop: that one reaps on every
 * SIGCHLD with waitpid(-1), and each such call walks every child the
 * daemon has.  A node's children are its sandboxes' inits, thousands of
 * them, so every command that ended cost a walk of the population (18%
 * of the CPU of creates at 5,000 idle sandboxes).  Here each child is
 * watched on its own pidfd and reaped with waitid(P_PIDFD), which looks at
 * that one process; without a descriptor to spare (EMFILE) it is polled
 * with waitpid(pid, WNOHANG) instead, as cheap but up to 0.1 s late.  A
 * child nobody waits for is a zombie until the daemon exits: whatever the
 * backends start is watched (be_child) or handed to a reaper (be_reaper).
 */
#ifndef DSEC_BE_CHILD_H
#define DSEC_BE_CHILD_H

#include <ev.h>
#include <stdbool.h>
#include <sys/types.h>

struct be_child;
/* c has ended and is reaped: c->status is its wait status. */
typedef void (*be_child_fn)(struct ev_loop *loop, struct be_child *c);

struct be_child {
	ev_io io;		/* on the pidfd, while watched */
	ev_timer poll;		/* or, without a pidfd, a wait every 0.1 s */
	pid_t pid;		/* the child */
	int status;		/* its wait status, once ended */
	bool ended;		/* reaped: status is set */
	be_child_fn cb;		/* called once, on the loop */
};

/* Watches pid, a child of this process not waited for by anyone else. */
void be_child_start(struct ev_loop *loop, struct be_child *c, pid_t pid, be_child_fn cb);
/* Stops watching (its pidfd is closed; the child is not reaped).  Safe on
 * a watcher never started or already called back (all-zero too). */
void be_child_stop(struct ev_loop *loop, struct be_child *c);
static inline bool be_child_active(const struct be_child *c)
{
	return ev_is_active(&c->io) || ev_is_active(&c->poll);
}

/* Children whose end nobody waits for (a session's helper, a killed
 * process): each is reaped when it ends.  Embedded in a backend, zeroed. */
struct be_reaper {
	struct be_reap_one *list;	/* being watched */
};

/* Reaps pid, a child of this process, whenever it ends. */
void be_reap(struct be_reaper *r, struct ev_loop *loop, pid_t pid);
/* Stops watching c as be_child_stop does, but a child still running goes
 * to r instead of staying a zombie; one that has ended is reaped here
 * (c->ended, its callback not called). */
void be_child_hand_over(struct ev_loop *loop, struct be_child *c, struct be_reaper *r);
/* Stops: what has not ended stays unreaped (the daemon is exiting). */
void be_reaper_fini(struct be_reaper *r, struct ev_loop *loop);

#endif
