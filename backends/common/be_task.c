/* be_task.c - counted pool work for backends.  See be_task.h. */
#include <stdlib.h>
#include <unistd.h>

#include "be_task.h"
#include "util.h"

struct be_task {
	struct be_tasks *tasks;		/* its set */
	void (*work)(void *);		/* on a pool thread */
	void (*done)(void *);		/* on the loop */
	void *arg;			/* theirs */
};

void be_tasks_init(struct be_tasks *t, const struct dsec_be_host *host, const bool *stopping,
		   bool skip_done_when_stopping, void (*release)(void *owner), void *owner)
{
	*t = (struct be_tasks){ .host = host, .stopping = stopping,
				.skip_done_when_stopping = skip_done_when_stopping,
				.release = release, .owner = owner };
}

static void task_work(void *arg)
{
	struct be_task *k = arg;

	k->work(k->arg);
	__atomic_sub_fetch(&k->tasks->busy, 1, __ATOMIC_RELEASE);
}

static void task_done(void *arg)
{
	struct be_task *k = arg;
	struct be_tasks *t = k->tasks;

	if (!(*t->stopping && t->skip_done_when_stopping))
		k->done(k->arg);
	free(k);
	/* Last: release frees the backend, t with it. */
	if (--t->nwork == 0 && *t->stopping)
		t->release(t->owner);
}

int be_task_submit(struct be_tasks *t, void (*work)(void *), void (*done)(void *), void *arg)
{
	struct be_task *k = xcalloc(1, sizeof(*k));
	int rc;

	k->tasks = t;
	k->work = work;
	k->done = done;
	k->arg = arg;
	__atomic_add_fetch(&t->busy, 1, __ATOMIC_ACQUIRE);
	if ((rc = t->host->submit(t->host, task_work, task_done, k)) < 0) {
		__atomic_sub_fetch(&t->busy, 1, __ATOMIC_RELEASE);
		free(k);
		return rc;
	}
	t->nwork++;
	return 0;
}

void be_tasks_drain(struct be_tasks *t)
{
	for (int i = 0; i < 30000 && __atomic_load_n(&t->busy, __ATOMIC_ACQUIRE) > 0; i++)
		usleep(1000);
}

bool be_tasks_idle(const struct be_tasks *t)
{
	return t->nwork == 0;
}
