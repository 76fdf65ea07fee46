/* 0007-client-async - libdsec's asynchronous calls and completion queue:
 * several requests in flight on one client end in the order their replies
 * come, the queue's descriptor is readable exactly while completions wait,
 * a call that times out, one cancelled and every call of a client closed
 * under them each end once with "unavailable", and nothing is left open.
 * A raw REP socket in this process holds the requests and answers them
 * when and in the order the test says.  Then connecting: at once
 * "unavailable" with nobody listening, waiting when asked, lazily. */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "tap.h"
#include "dsec.h"
#include "proto.h"

#define URL "inproc://t0007"
#define HELD_MAX 16

static nng_socket rep;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static nng_msg *held[HELD_MAX];	/* requests not answered yet, in arrival order */
static int nheld;
static bool autoreply;		/* answer at once instead of holding */

/* {ok: true, result: {echo: <the request's bytes>}} in place of m's body. */
static void echo(nng_msg *m)
{
	struct dsec_pk p;
	size_t len;
	void *req = xmemdup(nng_msg_body(m), nng_msg_len(m)), *body;

	dsec_pk_init(&p);
	dsec_pk_reply_ok(&p, 1);
	dsec_pk_kv_bin(&p, "echo", req, nng_msg_len(m));
	body = dsec_pk_detach(&p, &len);
	nng_msg_clear(m);	/* the header routes it back */
	nng_msg_append(m, body, len);
	free(body);
	free(req);
	if (nng_sendmsg(rep, m, 0) != 0)
		nng_msg_free(m);
}

static void *serve(void *arg)
{
	for (;;) {
		nng_msg *m;

		if (nng_recvmsg(rep, &m, 0) != 0)
			return NULL;
		pthread_mutex_lock(&mu);
		if (autoreply || nheld == HELD_MAX) {
			pthread_mutex_unlock(&mu);
			echo(m);
			continue;
		}
		held[nheld++] = m;
		pthread_cond_broadcast(&cv);
		pthread_mutex_unlock(&mu);
	}
}

/* Waits (10 s at most) until n requests are held. */
static bool wait_held(int n)
{
	struct timespec until;
	bool got;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&mu);
	while (nheld < n && pthread_cond_timedwait(&cv, &mu, &until) == 0)
		;
	got = nheld >= n;
	pthread_mutex_unlock(&mu);
	return got;
}

/* Takes held request i out (the others move down). */
static nng_msg *take(int i)
{
	nng_msg *m;

	pthread_mutex_lock(&mu);
	m = held[i];
	memmove(&held[i], &held[i + 1], (size_t)(nheld - i - 1) * sizeof(*held));
	nheld--;
	pthread_mutex_unlock(&mu);
	return m;
}

static void drop_held(void)
{
	while (nheld)
		nng_msg_free(take(0));
}

static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* A ping request whose "n" tells it apart. */
static void *ping_frame(unsigned n, size_t *len)
{
	struct dsec_pk p;

	dsec_pk_init(&p);
	dsec_pk_request(&p, "ping", 1);
	dsec_pk_kv_u64(&p, "n", n);
	return dsec_pk_detach(&p, len);
}

/* The "n" of the request a reply echoes, or -1. */
static long echoed(const struct dsec_completion *k)
{
	struct dsec_msg m, q;
	const void *d;
	size_t len;
	uint64_t n;
	long v = -1;

	if (k->rc < 0 || dsec_msg_parse(&m, k->reply, k->reply_len, 1u << 20, NULL) < 0)
		return -1;
	if (dsec_get_bin(dsec_map_get(m.root, "result"), "echo", 1u << 20, &d, &len, NULL) == 0 &&
	    dsec_msg_parse(&q, d, len, 1u << 20, NULL) == 0) {
		if (dsec_get_u64(q.root, "n", &n, NULL) == 0)
			v = (long)n;
		dsec_msg_free(&q);
	}
	dsec_msg_free(&m);
	return v;
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

static char listen_url[128];	/* for the late listener */

static void *listen_late(void *arg)
{
	nng_socket *s = arg;

	usleep(300 * 1000);
	if (nng_listen(*s, listen_url, NULL, 0) != 0)
		fprintf(stderr, "cannot listen on %s\n", listen_url);
	return NULL;
}

int main(void)
{
	struct dsec_client *c;
	struct dsec_cq *q;
	struct dsec_err err;
	struct dsec_completion k;
	struct dsec_call *calls[4];
	void *frames[4];
	size_t lens[4];
	long tags[4] = { 0, 1, 2, 3 };
	pthread_t th;
	int fds0, rc, got;
	bool all;

	plan(32);
	if (nng_rep0_open_raw(&rep) != 0 || nng_listen(rep, URL, NULL, 0) != 0) {
		printf("Bail out! cannot listen on " URL "\n");
		return 1;
	}
	pthread_create(&th, NULL, serve, NULL);
	dsec_err_clear(&err);
	fds0 = open_fds();
	if (dsec_connect(&c, URL, &err) < 0 || dsec_cq_new(&q, &err) < 0) {
		printf("Bail out! %s\n", err.msg);
		return 1;
	}
	ok(dsec_cq_fd(q) >= 0 && !readable(dsec_cq_fd(q), 0), "a new queue's fd is not readable");
	ok(dsec_cq_next(q, &k) == -EAGAIN, "... and it has nothing to take");

	/* 1. Four calls in flight on one client, answered last first. */
	all = true;
	for (int i = 0; i < 4; i++) {
		frames[i] = ping_frame((unsigned)i, &lens[i]);
		all &= dsec_call_async(c, q, frames[i], lens[i], 0, &tags[i], &calls[i], &err) == 0;
	}
	ok(all, "four calls sent without waiting");
	ok(wait_held(4), "the daemon has all four at once");
	ok(!readable(dsec_cq_fd(q), 50), "nothing is ready before a reply");
	for (int i = 3; i >= 0; i--) {
		nng_msg *m = take(i);	/* the last that came */
		long want = -2;

		{
			struct dsec_msg pm;
			uint64_t n;

			if (dsec_msg_parse(&pm, nng_msg_body(m), nng_msg_len(m), 1u << 20, NULL) == 0 &&
			    dsec_get_u64(pm.root, "n", &n, NULL) == 0)
				want = (long)n;
			dsec_msg_free(&pm);
		}
		echo(m);
		ok(readable(dsec_cq_fd(q), 10000), "reply %d: the fd becomes readable", 3 - i);
		rc = dsec_cq_next(q, &k);
		ok(rc == 0 && k.rc == 0 && *(long *)k.tag == want && echoed(&k) == want &&
		   dsec_reply_check(c, k.reply, k.reply_len, &err) == 0,
		   "... its completion is that request's (n %ld), with its tag and reply", want);
		dsec_completion_free(&k);
	}
	ok(!readable(dsec_cq_fd(q), 0) && dsec_cq_next(q, &k) == -EAGAIN,
	   "all taken: the fd is not readable any more");
	for (int i = 0; i < 4; i++)
		free(frames[i]);

	/* 2. The typed calls still work beside it. */
	pthread_mutex_lock(&mu);
	autoreply = true;
	pthread_mutex_unlock(&mu);
	ok(dsec_ping(c, &err) == 0, "a synchronous call on the same client");
	pthread_mutex_lock(&mu);
	autoreply = false;
	pthread_mutex_unlock(&mu);

	/* 3. No reply in time. */
	frames[0] = ping_frame(10, &lens[0]);
	dsec_set_timeout(c, 0.3);
	rc = dsec_call_async(c, q, frames[0], lens[0], 0, &tags[0], NULL, &err);
	ok(rc == 0 && readable(dsec_cq_fd(q), 10000), "a call nobody answers ends");
	rc = dsec_cq_next(q, &k);
	ok(rc == 0 && k.rc == -ETIMEDOUT && k.err->code == DSEC_E_UNAVAILABLE &&
	   strstr(k.err->msg, "no reply") && !k.reply, "... unavailable, timed out: %s",
	   rc == 0 ? k.err->msg : "");
	dsec_completion_free(&k);
	dsec_set_timeout(c, 30);
	wait_held(1);
	drop_held();

	/* 4. Cancelled: it ends at once, and its late reply is dropped. */
	rc = dsec_call_async(c, q, frames[0], lens[0], 0, &tags[1], &calls[0], &err);
	ok(rc == 0 && wait_held(1), "a call the daemon holds");
	dsec_call_cancel(calls[0]);
	ok(readable(dsec_cq_fd(q), 10000), "cancelled, it ends");
	rc = dsec_cq_next(q, &k);
	ok(rc == 0 && k.rc == -ECANCELED && k.err->code == DSEC_E_UNAVAILABLE && k.tag == &tags[1] &&
	   strstr(k.err->msg, "cancelled"), "... unavailable, cancelled: %s",
	   rc == 0 ? k.err->msg : "");
	dsec_completion_free(&k);
	echo(take(0));
	ok(!readable(dsec_cq_fd(q), 200), "its late reply makes no completion");

	/* 5. A client closed under three calls: each ends once. */
	for (int i = 0; i < 3; i++)
		dsec_call_async(c, q, frames[0], lens[0], 0, &tags[i], NULL, &err);
	ok(wait_held(3), "three calls the daemon holds");
	dsec_close(c);
	got = 0;
	all = true;
	while (dsec_cq_next(q, &k) == 0) {
		got++;
		all &= k.rc < 0 && k.err->code == DSEC_E_UNAVAILABLE && !k.reply &&
		       strstr(k.err->msg, "closed") != NULL;
		dsec_completion_free(&k);
	}
	is_int(got, 3, "closing the client ends its three calls on the queue at once");
	ok(all, "... each unavailable (the client was closed), without a reply");
	ok(!readable(dsec_cq_fd(q), 0), "... and the fd is quiet after them");
	drop_held();
	free(frames[0]);
	dsec_cq_free(q);
	is_int(open_fds(), fds0, "nothing is left open after the client and the queue");

	/* 6. Connecting with nobody listening, at once or waiting. */
	{
		char dir[] = "/tmp/t0007.XXXXXX";
		struct dsec_connect_opts wait = { .wait = 20 }, lazy = { .lazy = true };
		struct timespec t0, t1;
		nng_socket late;
		pthread_t lt;
		double took;

		if (!mkdtemp(dir)) {
			printf("Bail out! cannot make a directory\n");
			return 1;
		}
		snprintf(listen_url, sizeof(listen_url), "ipc://%s/d.sock", dir);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		rc = dsec_connect(&c, listen_url, &err);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		ok(rc < 0 && err.code == DSEC_E_UNAVAILABLE && strstr(err.msg, "cannot connect"),
		   "no daemon: connecting fails with unavailable: %s", err.msg);
		ok(took < 5, "... at once (%.3f s)", took);
		rc = dsec_connect(&c, "tcp://127.0.0.1:1", &err);
		ok(rc < 0 && err.code == DSEC_E_UNAVAILABLE, "and so for a refused TCP port: %s",
		   err.msg);
		ok(dsec_connect_opts(&c, listen_url, &lazy, &err) == 0, "lazily, it connects later");
		dsec_set_timeout(c, 0.2);
		rc = dsec_ping(c, &err);
		ok(rc < 0 && err.code == DSEC_E_UNAVAILABLE, "... and a request waits its timeout: %s",
		   err.msg);
		dsec_close(c);
		if (nng_rep0_open(&late) != 0) {
			printf("Bail out! cannot open a socket\n");
			return 1;
		}
		pthread_create(&lt, NULL, listen_late, &late);
		rc = dsec_connect_opts(&c, listen_url, &wait, &err);
		ok(rc == 0, "with a wait, a daemon that comes later is connected to (%s)",
		   rc ? err.msg : "ok");
		pthread_join(lt, NULL);
		if (rc == 0)
			dsec_close(c);
		nng_close(late);
		snprintf(listen_url, sizeof(listen_url), "%s/d.sock", dir);
		unlink(listen_url);
		rmdir(dir);
	}

	nng_close(rep);
	pthread_join(th, NULL);
	return done_testing();
}
