/* fake-rep.h - a fake daemon inside a C test: an nng REP socket on a
 * thread of the test answers every request with the reply answer() set
 * last, for tests of what libdsec does with replies a real dsecd never
 * sends (0004, 0006). */
#ifndef DSEC_FAKE_REP_H
#define DSEC_FAKE_REP_H
#include <pthread.h>
#include <stdlib.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "proto.h"

static nng_socket rep;
static pthread_t rep_thread;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void *reply;		/* what the next request gets */
static size_t reply_len;
static unsigned requests;	/* requests the fake daemon has seen */

static inline void *serve(void *arg)
{
	for (;;) {
		nng_msg *m;

		if (nng_recvmsg(rep, &m, 0) != 0)
			return NULL;
		pthread_mutex_lock(&mu);
		requests++;
		nng_msg_clear(m);	/* keeps the REP header */
		nng_msg_append(m, reply, reply_len);
		pthread_mutex_unlock(&mu);
		if (nng_sendmsg(rep, m, 0) != 0)
			nng_msg_free(m);
	}
}

/* Listens on url and serves; false if it cannot listen. */
static inline bool fake_start(const char *url)
{
	if (nng_rep0_open(&rep) != 0 || nng_listen(rep, url, NULL, 0) != 0)
		return false;
	nng_socket_set_size(rep, NNG_OPT_RECVMAXSZ, 0);
	return pthread_create(&rep_thread, NULL, serve, NULL) == 0;
}

static inline void fake_stop(void)
{
	nng_close(rep);
	pthread_join(rep_thread, NULL);
	free(reply);
	reply = NULL;
}

/* The next reply: takes ownership of p's bytes. */
static inline void answer(struct dsec_pk *p)
{
	pthread_mutex_lock(&mu);
	free(reply);
	reply = dsec_pk_detach(p, &reply_len);
	pthread_mutex_unlock(&mu);
}

static inline unsigned seen(void)
{
	pthread_mutex_lock(&mu);
	unsigned n = requests;
	pthread_mutex_unlock(&mu);
	return n;
}
#endif
