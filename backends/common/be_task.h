/* be_task.h - a backend's blocking work on dsecd's worker pool, counted.
 *
 * Each submitted job runs work(arg) on a pool thread, then done(arg) on the
 * loop.  The counts let fini wait for work still running on pool threads
 * (be_tasks_drain) and let the backend outlive the done callbacks dsecd's
 * pool may still run after fini: once fini has begun (*stopping) and the
 * last done has run, release(owner) frees the backend.
 */
#ifndef DSEC_BE_TASK_H
#define DSEC_BE_TASK_H

#include <stdbool.h>

#include "backend.h"

struct be_tasks {
	const struct dsec_be_host *host;	/* whose pool */
	const bool *stopping;			/* the backend's "fini began" flag */
	bool skip_done_when_stopping;		/* after fini began, do not call done */
	void (*release)(void *owner);		/* frees the backend, see above */
	void *owner;				/* its argument */
	unsigned nwork;				/* submitted, done not run yet (loop) */
	int busy;				/* of those, work still running (atomic) */
};

void be_tasks_init(struct be_tasks *t, const struct dsec_be_host *host, const bool *stopping,
		   bool skip_done_when_stopping, void (*release)(void *owner), void *owner);
/* Queues work and done; -errno when the pool refuses (nothing is queued). */
int be_task_submit(struct be_tasks *t, void (*work)(void *), void (*done)(void *), void *arg);
/* Waits (blocking, at most about 30 s) until no work runs on a pool thread. */
void be_tasks_drain(struct be_tasks *t);
/* True when no done callback is still to come: fini may free at once. */
bool be_tasks_idle(const struct be_tasks *t);

#endif
