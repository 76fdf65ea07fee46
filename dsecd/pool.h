/* pool.h - a small pool of threads for blocking work.
 *
 * work(arg) runs on a pool thread; done(arg) then runs on the loop thread,
 * woken through an ev_async.  Jobs run in submission order per thread, in
 * no particular order overall.  Nothing here blocks the loop.
 */
#ifndef DSECD_POOL_H
#define DSECD_POOL_H

#include <ev.h>

struct dsecd_pool;

/* Threads of the daemon's second pool, which serves chunk_get. */
#define DSECD_SERVE_THREADS 2

/* Starts nthreads threads.  Returns 0 or -errno. */
int dsecd_pool_new(struct dsecd_pool **out, struct ev_loop *loop, unsigned nthreads);
int dsecd_pool_submit(struct dsecd_pool *p, void (*work)(void *), void (*done)(void *), void *arg);
/* Jobs queued or running. */
unsigned dsecd_pool_pending(const struct dsecd_pool *p);
/* Waits for queued work to finish, runs the remaining done callbacks, joins
 * the threads and frees the pool.  Call on the loop thread. */
void dsecd_pool_free(struct dsecd_pool *p);

#endif
