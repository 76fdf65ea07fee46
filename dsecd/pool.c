/* pool.c - worker threads that report back to the loop through ev_async. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "pool.h"
#include "util.h"

struct job {
	void (*work)(void *);	/* runs on a pool thread */
	void (*done)(void *);	/* runs on the loop */
	void *arg;		/* for both */
	struct job *next;	/* queue link */
};

struct dsecd_pool {
	struct ev_loop *loop;		/* owner loop */
	ev_async wake;			/* pool -> loop: done jobs waiting */
	pthread_mutex_t lock;		/* guards everything below */
	pthread_cond_t cond;		/* signals new work or stop */
	struct job *todo, **todo_tail;	/* jobs to run (FIFO) */
	struct job *done, **done_tail;	/* jobs finished, done() pending */
	unsigned pending;		/* submitted but done() not yet run */
	bool stop;			/* threads exit when the queue is empty */
	unsigned nthreads;		/* threads started */
	pthread_t *threads;		/* their ids */
};

static void *worker(void *arg)
{
	struct dsecd_pool *p = arg;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->todo && !p->stop)
			pthread_cond_wait(&p->cond, &p->lock);
		if (!p->todo)
			break;
		struct job *j = p->todo;
		p->todo = j->next;
		if (!p->todo)
			p->todo_tail = &p->todo;
		pthread_mutex_unlock(&p->lock);
		j->work(j->arg);
		pthread_mutex_lock(&p->lock);
		j->next = NULL;
		*p->done_tail = j;
		p->done_tail = &j->next;
		ev_async_send(p->loop, &p->wake);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

static void run_done(struct dsecd_pool *p)
{
	pthread_mutex_lock(&p->lock);
	struct job *list = p->done;
	p->done = NULL;
	p->done_tail = &p->done;
	pthread_mutex_unlock(&p->lock);
	while (list) {
		struct job *j = list;
		list = j->next;
		p->pending--;
		if (j->done)
			j->done(j->arg);
		free(j);
	}
}

static void wake_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	run_done(dsec_container_of(w, struct dsecd_pool, wake));
}

int dsecd_pool_new(struct dsecd_pool **out, struct ev_loop *loop, unsigned nthreads)
{
	struct dsecd_pool *p = xcalloc(1, sizeof(*p));

	p->loop = loop;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	p->todo_tail = &p->todo;
	p->done_tail = &p->done;
	ev_async_init(&p->wake, wake_cb);
	ev_async_start(loop, &p->wake);
	ev_unref(loop);	/* the pool alone does not keep the loop alive */
	p->threads = xcalloc(nthreads, sizeof(pthread_t));
	for (unsigned i = 0; i < nthreads; i++) {
		int rc = pthread_create(&p->threads[i], NULL, worker, p);
		if (rc) {
			p->nthreads = i;
			dsecd_pool_free(p);
			return -rc;
		}
	}
	p->nthreads = nthreads;
	*out = p;
	return 0;
}

int dsecd_pool_submit(struct dsecd_pool *p, void (*work)(void *), void (*done)(void *), void *arg)
{
	struct job *j = xcalloc(1, sizeof(*j));

	j->work = work;
	j->done = done;
	j->arg = arg;
	pthread_mutex_lock(&p->lock);
	if (p->stop) {
		pthread_mutex_unlock(&p->lock);
		free(j);
		return -ESHUTDOWN;
	}
	*p->todo_tail = j;
	p->todo_tail = &j->next;
	p->pending++;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
	return 0;
}

unsigned dsecd_pool_pending(const struct dsecd_pool *p)
{
	return p->pending;
}

void dsecd_pool_free(struct dsecd_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	run_done(p);
	ev_ref(p->loop);
	ev_async_stop(p->loop, &p->wake);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	free(p->threads);
	free(p);
}
