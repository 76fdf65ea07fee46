/* be-host.h - a tiny backend host for the C tests that dlopen a backend
 * (t/3000-fncall.c, t/3190-container-usage.c): libev's default loop, a
 * thread for submit, defer as dsecd does it, config from the test's table
 * (conf), and synchronous waits for done callbacks.  Static: include it in
 * one test file.
 */
#ifndef DSEC_BE_HOST_H
#define DSEC_BE_HOST_H

#include <ev.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "util.h"

static struct ev_loop *loop;

/* The config: "NAME.key", value rows, NULL-terminated (the test's). */
static const char *(*conf)[2];
static const char *extra_key;	/* an unknown key, for the rejection test */

static const char *h_conf_get(const struct dsec_be_host *h, const char *key)
{
	for (int i = 0; conf[i][0]; i++)
		if (!strcmp(conf[i][0], key))
			return conf[i][1];
	return NULL;
}

static const char *const *h_conf_keys(const struct dsec_be_host *h)
{
	static const char *keys[16];
	int n = 0;

	for (int i = 0; conf[i][0]; i++)
		keys[n++] = conf[i][0];
	if (extra_key)
		keys[n++] = extra_key;
	keys[n] = NULL;
	return keys;
}

struct job {
	void (*work)(void *), (*done)(void *);
	void *arg;
	struct job *next;
};
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct job *todo, *finished;
static ev_async wake;

static void *worker(void *unused)
{
	for (;;) {
		struct job *j;

		pthread_mutex_lock(&mu);
		while (!todo)
			pthread_cond_wait(&cv, &mu);
		j = todo;
		todo = j->next;
		pthread_mutex_unlock(&mu);
		j->work(j->arg);
		pthread_mutex_lock(&mu);
		j->next = finished;
		finished = j;
		pthread_mutex_unlock(&mu);
		ev_async_send(loop, &wake);
	}
	return NULL;
}

static void wake_cb(struct ev_loop *l, ev_async *w, int revents)
{
	for (;;) {
		struct job *j;

		pthread_mutex_lock(&mu);
		j = finished;
		if (j)
			finished = j->next;
		pthread_mutex_unlock(&mu);
		if (!j)
			return;
		j->done(j->arg);
		free(j);
	}
}

static int h_submit(const struct dsec_be_host *h, void (*work)(void *), void (*done)(void *),
		    void *arg)
{
	struct job *j = xcalloc(1, sizeof(*j)), **pp;

	j->work = work;
	j->done = done;
	j->arg = arg;
	pthread_mutex_lock(&mu);
	for (pp = &todo; *pp; pp = &(*pp)->next)
		;
	*pp = j;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
	return 0;
}

static void h_log(int level, const char *fmt, ...) DSEC_PRINTF(2, 3);
static void h_log(int level, const char *fmt, ...)
{
	va_list ap;

	if (level > 1 && !getenv("TEST_VERBOSE"))
		return;
	fprintf(stdout, "# [%d] ", level);
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fprintf(stdout, "\n");
}

/* host->defer as dsecd does it: a FIFO drained by an ev_check, an ev_idle
 * keeping the loop awake while it is not empty; cancelled before fini. */
static struct dsec_be_defer *dq, **dq_tail = &dq;
static bool dq_fini;
static ev_check dq_check;
static ev_idle dq_idle;

static void h_defer(const struct dsec_be_host *h, struct dsec_be_defer *d)
{
	if (dq_fini) {
		d->fn(d, true);
		return;
	}
	d->next = NULL;
	*dq_tail = d;
	dq_tail = &d->next;
	ev_idle_start(loop, &dq_idle);
}

static void dq_run(bool cancelled)
{
	while (dq) {
		struct dsec_be_defer *d = dq;

		if (!(dq = d->next))
			dq_tail = &dq;
		d->fn(d, cancelled);
	}
}

static void dq_check_cb(struct ev_loop *l, ev_check *w, int revents)
{
	dq_run(false);
	ev_idle_stop(l, &dq_idle);
}

static void dq_idle_cb(struct ev_loop *l, ev_idle *w, int revents)
{
}

static struct dsec_be_host host = {
	.abi_version = DSEC_BE_ABI,
	.struct_size = sizeof(struct dsec_be_host),
	.conf_get = h_conf_get,
	.conf_keys = h_conf_keys,
	.submit = h_submit,
	.log = h_log,
	.defer = h_defer,
};

/* ---- synchronous wrappers ---- */

struct wait {
	bool fired;		/* done was called */
	int rc;			/* its rc */
	struct dsec_err err;	/* its err */
	int in_op;		/* set while inside the op: done must not fire then */
	bool bad;		/* done fired inside the op */
};

static void done_cb(void *arg, int rc, const struct dsec_err *err)
{
	struct wait *w = arg;

	if (w->in_op)
		w->bad = true;
	w->fired = true;
	w->rc = rc;
	if (err)
		w->err = *err;
}

static void run_until(struct wait *w, double limit)
{
	double end = dsec_now() + limit;

	while (!w->fired && dsec_now() < end)
		ev_run(loop, EVRUN_ONCE);
}

/* Bytes of the paths host_find fills but top (PATH_MAX). */
#define HOST_PATH_MAX (PATH_MAX + 32)

/* Finds the tree this test runs from (it is TOP/t/c/NAME.t): top, its
 * helper_dir and backends/NAME.so into top (PATH_MAX bytes), helpers and
 * so (HOST_PATH_MAX bytes each; NAME is 16 bytes at most).  false, with the plan of a skipped file printed,
 * when not root or there is no such .so. */
static bool host_find(const char *name, char *top, char *helpers, char *so)
{
	char self[PATH_MAX];
	ssize_t n;

	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root (namespaces, mounts, cgroups)\n");
		return false;
	}
	if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) < 0) {
		printf("1..0 # SKIP cannot read /proc/self/exe\n");
		return false;
	}
	self[n] = '\0';
	snprintf(top, PATH_MAX, "%s", self);
	for (int i = 0; i < 3; i++)
		*strrchr(top, '/') = '\0';
	snprintf(helpers, HOST_PATH_MAX, "%s/build/libexec", top);
	snprintf(so, HOST_PATH_MAX, "%s/backends/%.16s.so", top, name);
	if (access(so, F_OK) < 0) {
		printf("1..0 # SKIP needs backends/%s.so (make)\n", name);
		return false;
	}
	return true;
}

/* Starts the host: the loop, the submit thread, defer's watchers. */
static void host_start(const char *state_dir, const char *helper_dir)
{
	static pthread_t th;

	loop = ev_loop_new(0);	/* as dsecd: children reaped through pidfds */
	ev_async_init(&wake, wake_cb);
	ev_async_start(loop, &wake);
	ev_idle_init(&dq_idle, dq_idle_cb);
	ev_check_init(&dq_check, dq_check_cb);
	ev_check_start(loop, &dq_check);
	ev_unref(loop);
	pthread_create(&th, NULL, worker, NULL);
	host.loop = loop;
	host.state_dir = state_dir;
	host.helper_dir = helper_dir;
}

/* Before the backend's fini, as dsecd: queued defers are cancelled, and so
 * is every one from now on. */
static void host_fini_begin(void)
{
	dq_run(true);
	dq_fini = true;
}

#endif
