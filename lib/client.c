/* client.c - libdsec: the C client over nng REQ/REP.
 *
 * Every request is a call (struct dsec_call): a REQ context of its own and
 * an aio whose callback sends the request, then receives its reply.  An
 * asynchronous call posts itself to a completion queue when it ends; the
 * synchronous API runs the same steps on a call the client keeps, waiting
 * on its aio, then decodes the reply on the caller's thread. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>
#include <nng/protocol/reqrep0/req.h>

#include "client.h"
#include "dsec.h"
#include "proto.h"

/* Pause between two dials while dsec_connect_wait waits for a daemon. */
#define CONNECT_RETRY_NS (20 * 1000 * 1000)
/* Seconds one dial may take: a host that drops packets would hold a
 * synchronous nng_dial for the system's connect timeout (minutes). */
#define DIAL_TIMEOUT 10.0

/* nng's message with a lowercase first letter, as our messages are. */
static const char *nng_why(int rc, char *buf, size_t len)
{
	snprintf(buf, len, "%s", nng_strerror(rc));
	if (buf[0] >= 'A' && buf[0] <= 'Z')
		buf[0] = (char)(buf[0] - 'A' + 'a');
	return buf;
}

/* One request on the wire and, once it ended, its outcome. */
struct dsec_call {
	char *url;			/* the client's address, for messages (not owned) */
	nng_ctx ctx;			/* REQ context: this call's request and reply */
	nng_aio *aio;			/* drives the send, then the receive */
	pthread_mutex_t mu;		/* orders a cancel against the callback's
					 * move from send to receive */
	bool receiving;			/* the aio is on the receive (mu) */
	bool cancelled;			/* dsec_call_cancel was called (mu) */
	nng_duration recv_ms;		/* how long the reply may take */
	nng_msg *reply;			/* the reply once received, or NULL */
	int rc;				/* 0 or -errno once ended */
	struct dsec_err err;		/* why, when rc < 0 */
	/* Asynchronous calls only (NULL q for the synchronous slot): */
	struct dsec_client *c;		/* its client until it ends (c->mu) */
	struct dsec_cq *q;		/* where it goes when it ends */
	void *tag;			/* the caller's */
	struct dsec_call *next;		/* q's list, once ended */
};

/* Completions ready to be taken; fd is readable while there are any. */
struct dsec_cq {
	pthread_mutex_t mu;		/* guards everything below */
	int fd;				/* eventfd: nonzero iff head != NULL */
	struct dsec_call *head, *tail;	/* ended calls, oldest first */
	size_t pending;			/* calls sent to it not ended yet */
};

struct dsec_client {
	nng_socket sock;		/* REQ socket, dialed to url */
	char *url;			/* address in nng form */
	double timeout;			/* seconds added to a request's own timeout */
	struct dsec_call sync;		/* the synchronous calls' slot */
	pthread_mutex_t mu;		/* guards ncalls, closing */
	pthread_cond_t cv;		/* ncalls reached 0 (dsec_close) */
	size_t ncalls;			/* asynchronous calls in flight */
	bool closing;			/* dsec_close has begun */
	nng_tls_config *tls;		/* a tls+tcp:// url's, else NULL */
	bool tls_cert;			/* with tls: we have a certificate to show */
	uint64_t max_frame;		/* the daemon's, from its ping: 0 = not asked
					 * yet, DCL_NO_PARTS = it moves no parts */
};

static void call_cb(void *arg);

/* A call on c; cb drives its aio (NULL: the caller waits on it). */
static int call_init(struct dsec_call *k, struct dsec_client *c, void (*cb)(void *),
		     struct dsec_err *err)
{
	char why[128];
	int rc;

	memset(k, 0, sizeof(*k));
	k->url = c->url;
	if ((rc = nng_ctx_open(&k->ctx, c->sock)) != 0 ||
	    (rc = nng_aio_alloc(&k->aio, cb, k)) != 0) {
		if (k->ctx.id)
			nng_ctx_close(k->ctx);
		return dsec_err_setc(err, DSEC_E_INTERNAL, ENOMEM, "cannot open a request to '%s': %s",
				     c->url, nng_why(rc, why, sizeof(why)));
	}
	pthread_mutex_init(&k->mu, NULL);
	return 0;
}

/* Frees what call_init made; after the call has ended (or never ran).
 * nng_aio_free waits for a callback still returning. */
static void call_fini(struct dsec_call *k)
{
	nng_aio_free(k->aio);
	nng_ctx_close(k->ctx);		/* ECLOSED once its socket is closed: nothing left */
	if (k->reply)
		nng_msg_free(k->reply);
	pthread_mutex_destroy(&k->mu);
}

/* Starts the call on req (len bytes, copied): the send may wait send_s
 * seconds for the daemon to take it, the reply recv_s more. */
static int call_start(struct dsec_call *k, const void *req, size_t len, double send_s,
		      double recv_s, struct dsec_err *err)
{
	nng_msg *msg = NULL;
	char why[128];
	int rc;

	if ((rc = nng_msg_alloc(&msg, 0)) != 0 || (rc = nng_msg_append(msg, req, len)) != 0) {
		if (rc && msg)
			nng_msg_free(msg);
		return dsec_err_setc(err, DSEC_E_INTERNAL, ENOMEM, "cannot build request: %s",
				     nng_why(rc, why, sizeof(why)));
	}
	if (k->reply)
		nng_msg_free(k->reply);
	k->reply = NULL;
	k->rc = 0;
	k->receiving = k->cancelled = false;
	k->recv_ms = recv_s > 2e6 ? NNG_DURATION_INFINITE : (nng_duration)(recv_s * 1000);
	nng_aio_set_msg(k->aio, msg);
	nng_aio_set_timeout(k->aio, send_s > 2e6 ? NNG_DURATION_INFINITE
						 : (nng_duration)(send_s * 1000));
	nng_ctx_send(k->ctx, k->aio);
	return 0;
}

/* An asynchronous call ended: onto its queue.  The client's lock is held
 * while posting, so dsec_close returns only once no callback can touch the
 * client or the queue any more. */
static void call_post(struct dsec_call *k)
{
	struct dsec_client *c = k->c;
	struct dsec_cq *q = k->q;
	uint64_t one = 1;

	pthread_mutex_lock(&c->mu);
	k->c = NULL;
	pthread_mutex_lock(&q->mu);
	if (!q->head && write(q->fd, &one, sizeof(one)) != sizeof(one))
		DSEC_BUG("cannot signal a completion queue: %s", strerror(errno));
	if (q->tail)
		q->tail->next = k;
	else
		q->head = k;
	q->tail = k;
	q->pending--;
	pthread_mutex_unlock(&q->mu);
	if (--c->ncalls == 0)
		pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

/* Why a call failed, in the words of the synchronous API.  Closing the
 * client ends its calls with ECLOSED, or ECONNRESET when their pipe goes
 * first. */
static void call_fail(struct dsec_call *k, int rc)
{
	bool closing = rc == NNG_ECLOSED;
	char why[128];

	if (k->c) {
		pthread_mutex_lock(&k->c->mu);
		closing |= k->c->closing;
		pthread_mutex_unlock(&k->c->mu);
	}
	if (rc == NNG_ECANCELED && k->cancelled)
		dsec_err_setc(&k->err, DSEC_E_UNAVAILABLE, ECANCELED,
			      "request to '%s' cancelled", k->url);
	else if (closing)
		dsec_err_setc(&k->err, DSEC_E_UNAVAILABLE, ECONNABORTED,
			      "request to '%s' abandoned: the client was closed", k->url);
	else if (!k->receiving)
		dsec_err_setc(&k->err, DSEC_E_UNAVAILABLE, ECONNREFUSED,
			      "cannot send request to '%s': %s", k->url, nng_why(rc, why, sizeof(why)));
	else
		dsec_err_setc(&k->err, DSEC_E_UNAVAILABLE,
			      rc == NNG_ETIMEDOUT ? ETIMEDOUT : ECONNREFUSED,
			      "no reply from '%s': %s", k->url, nng_why(rc, why, sizeof(why)));
	k->rc = -k->err.errnum;
}

/* The aio's operation ended: the request was sent (start the receive:
 * returns true), or the reply came, or either failed (the call ended:
 * false).  Run by the callback of an asynchronous call, on an nng thread,
 * and by the thread waiting on a synchronous one. */
static bool call_step(struct dsec_call *k)
{
	int rc = nng_aio_result(k->aio);

	pthread_mutex_lock(&k->mu);
	if (!k->receiving) {
		if (rc != 0) {
			nng_msg_free(nng_aio_get_msg(k->aio));	/* not sent: still ours */
			nng_aio_set_msg(k->aio, NULL);
		} else if (k->cancelled) {
			rc = NNG_ECANCELED;
		} else {
			k->receiving = true;
			nng_aio_set_timeout(k->aio, k->recv_ms);
			nng_ctx_recv(k->ctx, k->aio);
			pthread_mutex_unlock(&k->mu);
			return true;
		}
	}
	if (rc != 0)
		call_fail(k, rc);
	else
		k->reply = nng_aio_get_msg(k->aio);
	pthread_mutex_unlock(&k->mu);
	return false;
}

static void call_cb(void *arg)
{
	struct dsec_call *k = arg;

	if (!call_step(k))
		call_post(k);
}

/* Starts a dialer of c's url on its socket, with its TLS configuration;
 * flags as nng_dialer_start's.  A dialer that did not start is closed. */
static int dial_once(struct dsec_client *c, int flags)
{
	nng_dialer d;
	int rc = nng_dialer_create(&d, c->sock, c->url);

	if (rc != 0)
		return rc;
	if (c->tls)
		rc = nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, c->tls);
	if (rc == 0)
		rc = nng_dialer_start(d, flags);
	if (rc != 0)
		nng_dialer_close(d);
	return rc;
}

/* An address nng cannot use, or TLS that cannot work: no retry helps. */
static bool dial_final(int rc)
{
	return rc == NNG_EADDRINVAL || rc == NNG_ENOTSUP || rc == NNG_EINVAL ||
	       rc == NNG_EPEERAUTH || rc == NNG_ECRYPTO;
}

/* One synchronous dial, bounded: it runs on a thread of its own, and one
 * that has not ended after DIAL_TIMEOUT is abandoned by closing the socket
 * (which ends it), NNG_ETIMEDOUT.  The socket is then unusable: the
 * caller gives up on the client. */
struct dial_job {
	struct dsec_client *c;		/* whose socket */
	int rc;				/* dial_once's result */
	bool done;			/* it returned */
	pthread_mutex_t mu;		/* guards done */
	pthread_cond_t cv;		/* done became true */
};

static void *dial_main(void *arg)
{
	struct dial_job *j = arg;
	int rc = dial_once(j->c, 0);

	pthread_mutex_lock(&j->mu);
	j->rc = rc;
	j->done = true;
	pthread_cond_signal(&j->cv);
	pthread_mutex_unlock(&j->mu);
	return NULL;
}

static int dial_bounded(struct dsec_client *c, bool *closed)
{
	struct dial_job j = { .c = c };
	struct timespec dl;
	pthread_condattr_t ca;
	pthread_t t;
	int rc;

	/* Unix sockets fail or connect at once: no thread for them. */
	if (!strncmp(c->url, "ipc://", 6) || !strncmp(c->url, "inproc://", 9))
		return dial_once(c, 0);
	pthread_mutex_init(&j.mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&j.cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&t, NULL, dial_main, &j) != 0) {
		rc = dial_once(c, 0);
		goto out;
	}
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += (time_t)DIAL_TIMEOUT;
	pthread_mutex_lock(&j.mu);
	while (!j.done && pthread_cond_timedwait(&j.cv, &j.mu, &dl) == 0)
		;
	bool done = j.done;
	pthread_mutex_unlock(&j.mu);
	if (!done) {
		nng_close(c->sock);	/* ends the dial */
		*closed = true;
	}
	pthread_join(t, NULL);
	rc = done ? j.rc : NNG_ETIMEDOUT;
out:
	pthread_cond_destroy(&j.cv);
	pthread_mutex_destroy(&j.mu);
	return rc;
}

/* Dials url on c's socket; with wait > 0 a daemon not listening yet is
 * dialed again until it is or wait seconds have passed.  *closed is set
 * when a dial that hung made the socket unusable. */
static int dial(struct dsec_client *c, double wait, bool *closed, struct dsec_err *err)
{
	double until = dsec_now() + wait;
	char why[128];
	int rc;

	for (;;) {
		rc = dial_bounded(c, closed);
		if (*closed)
			return dsec_err_setc(err, DSEC_E_UNAVAILABLE, ETIMEDOUT, "cannot connect to "
					     "'%s': no answer within %.0f s", c->url, DIAL_TIMEOUT);
		if (rc == 0)
			return 0;
		if (dial_final(rc) || dsec_now() >= until)
			break;
		nanosleep(&(struct timespec){ 0, CONNECT_RETRY_NS }, NULL);
	}
	if (rc == NNG_EPEERAUTH || rc == NNG_ECRYPTO)
		return dsec_err_setc(err, DSEC_E_PERMISSION, EACCES, "cannot connect to '%s': %s "
				     "(the daemon's certificate, or ours, is not the cluster's: "
				     "see DSEC_TLS_CA and DSEC_TLS_CERT)", c->url,
				     nng_why(rc, why, sizeof(why)));
	return dsec_err_setc(err, dial_final(rc) ? DSEC_E_INVALID : DSEC_E_UNAVAILABLE,
			     rc == NNG_ENOENT ? ENOENT : ECONNREFUSED, "cannot connect to '%s': %s%s",
			     c->url, nng_why(rc, why, sizeof(why)),
			     c->tls && !c->tls_cert && (rc == NNG_ECONNSHUT || rc == NNG_ECLOSED)
				     ? " (a daemon requires a client certificate: DSEC_TLS_CERT)" : "");
}

/* The client TLS configuration of a tls+tcp:// url: the CA the daemon's
 * certificate must be signed by, our certificate (the daemon requires
 * one), the name the daemon's must carry; each from tls, else from the
 * environment. */
static int tls_client_config(struct dsec_client *c, const struct dsec_tls *tls,
			     struct dsec_err *err)
{
	static const struct dsec_tls none;
	char why[128];
	int rc;

	if (!tls)
		tls = &none;
	const char *ca = tls->ca ? tls->ca : getenv("DSEC_TLS_CA");
	const char *cert = tls->cert ? tls->cert : getenv("DSEC_TLS_CERT");
	const char *name = tls->server_name ? tls->server_name : getenv("DSEC_TLS_SERVER_NAME");
	if (!ca || !*ca)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "cannot connect to '%s': a TLS "
				     "address needs the cluster's CA (DSEC_TLS_CA)", c->url);
	if ((rc = nng_tls_config_alloc(&c->tls, NNG_TLS_MODE_CLIENT)) != 0)
		return dsec_err_setc(err, DSEC_E_INTERNAL, ENOMEM, "cannot set TLS up: %s",
				     nng_why(rc, why, sizeof(why)));
	const char *what = ca;
	c->tls_cert = cert && *cert;
	if ((rc = nng_tls_config_ca_file(c->tls, ca)) == 0 && cert && *cert &&
	    (what = cert, rc = nng_tls_config_cert_key_file(c->tls, cert, NULL)) == 0 && name &&
	    *name)
		what = name, rc = nng_tls_config_server_name(c->tls, name);
	if (rc != 0)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "cannot use '%s' for TLS: %s",
				     what, nng_why(rc, why, sizeof(why)));
	return 0;
}

int dsec_connect_tls(struct dsec_client **out, const char *url, const struct dsec_connect_opts *o,
		     const struct dsec_tls *tls, struct dsec_err *err)
{
	static const struct dsec_connect_opts none;
	struct dsec_client *c;
	bool closed = false;
	char why[128];
	int rc;

	if (!o)
		o = &none;
	if (!(o->wait >= 0 && o->wait <= 1e9))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "connect wait %g must be seconds between 0 and 1e9", o->wait);
	if (!url || !*url)
		url = getenv("DSEC_HOST");
	if (!url || !*url)
		url = DSEC_DEFAULT_URL;
	c = xcalloc(1, sizeof(*c));
	c->url = xstrdup(url);
	c->timeout = 30;
	if ((rc = nng_req0_open(&c->sock)) != 0) {
		dsec_err_setc(err, DSEC_E_INTERNAL, ENOMEM, "cannot open nng socket: %s",
			      nng_why(rc, why, sizeof(why)));
		goto fail;
	}
	nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, CLIENT_RECV_MAX);
	nng_socket_set_ms(c->sock, NNG_OPT_RECONNMINT, 20);
	nng_socket_set_ms(c->sock, NNG_OPT_RECONNMAXT, 500);
	if (!strncmp(url, "tls+", 4) && tls_client_config(c, tls, err) < 0) {
		rc = -EINVAL;
		nng_close(c->sock);
		goto fail;
	}
	if (o->lazy)
		rc = dial_once(c, NNG_FLAG_NONBLOCK);
	if (o->lazy && rc != 0) {
		dsec_err_setc(err, rc == NNG_EADDRINVAL || rc == NNG_ENOTSUP ? DSEC_E_INVALID
									: DSEC_E_UNAVAILABLE,
			      EINVAL, "cannot connect to '%s': %s", url, nng_why(rc, why, sizeof(why)));
		rc = -EINVAL;
	} else if (!o->lazy) {
		rc = dial(c, o->wait, &closed, err);
	}
	if (rc < 0 || call_init(&c->sync, c, NULL, err) < 0) {
		if (!closed)
			nng_close(c->sock);
		goto fail;
	}
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	*out = c;
	return 0;
fail:
	if (c->tls)
		nng_tls_config_free(c->tls);
	free(c->url);
	free(c);
	return -EINVAL;
}

int dsec_connect_opts(struct dsec_client **out, const char *url,
		      const struct dsec_connect_opts *o, struct dsec_err *err)
{
	return dsec_connect_tls(out, url, o, NULL, err);
}

int dsec_connect(struct dsec_client **out, const char *url, struct dsec_err *err)
{
	return dsec_connect_tls(out, url, NULL, NULL, err);
}

/* Closing the socket ends every call in flight (with ECLOSED): the
 * asynchronous ones post themselves, and once none is left nothing
 * refers to c. */
void dsec_close(struct dsec_client *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->closing = true;
	pthread_mutex_unlock(&c->mu);
	nng_close(c->sock);
	pthread_mutex_lock(&c->mu);
	while (c->ncalls)
		pthread_cond_wait(&c->cv, &c->mu);
	pthread_mutex_unlock(&c->mu);
	call_fini(&c->sync);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	if (c->tls)
		nng_tls_config_free(c->tls);
	free(c->url);
	free(c);
}

void dsec_set_timeout(struct dsec_client *c, double seconds)
{
	c->timeout = seconds;
}

const char *dsec_client_url(const struct dsec_client *c)
{
	return c->url;
}

uint64_t *dcl_max_frame(struct dsec_client *c)
{
	return &c->max_frame;
}

/* ---- completion queues and asynchronous calls ---- */

int dsec_cq_new(struct dsec_cq **out, struct dsec_err *err)
{
	struct dsec_cq *q;
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

	if (fd < 0)
		return dsec_err_set(err, errno, "cannot make a completion queue: %s", strerror(errno));
	q = xcalloc(1, sizeof(*q));
	q->fd = fd;
	pthread_mutex_init(&q->mu, NULL);
	*out = q;
	return 0;
}

int dsec_cq_fd(const struct dsec_cq *q)
{
	return q->fd;
}

int dsec_cq_next(struct dsec_cq *q, struct dsec_completion *out)
{
	struct dsec_call *k;
	uint64_t n;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&q->mu);
	if (!(k = q->head)) {
		pthread_mutex_unlock(&q->mu);
		return -EAGAIN;
	}
	if (!(q->head = k->next))
		q->tail = NULL;
	k->next = NULL;
	if (!q->head && read(q->fd, &n, sizeof(n)) != sizeof(n))
		DSEC_BUG("cannot drain a completion queue: %s", strerror(errno));
	pthread_mutex_unlock(&q->mu);
	out->tag = k->tag;
	out->rc = k->rc;
	out->err = &k->err;
	if (k->reply) {
		out->reply = nng_msg_body(k->reply);
		out->reply_len = nng_msg_len(k->reply);
	}
	out->call = k;
	return 0;
}

void dsec_completion_free(struct dsec_completion *cmp)
{
	if (!cmp->call)
		return;
	call_fini(cmp->call);
	free(cmp->call);
	memset(cmp, 0, sizeof(*cmp));
}

void dsec_cq_free(struct dsec_cq *q)
{
	struct dsec_completion cmp;

	if (!q)
		return;
	pthread_mutex_lock(&q->mu);
	if (q->pending)
		DSEC_BUG("completion queue freed with %zu calls in flight", q->pending);
	pthread_mutex_unlock(&q->mu);
	while (dsec_cq_next(q, &cmp) == 0)
		dsec_completion_free(&cmp);
	close(q->fd);
	pthread_mutex_destroy(&q->mu);
	free(q);
}

int dsec_call_async(struct dsec_client *c, struct dsec_cq *q, const void *req, size_t len,
		    double wait, void *tag, struct dsec_call **call, struct dsec_err *err)
{
	struct dsec_call *k;
	int rc;

	if (call)
		*call = NULL;
	if (!(wait >= 0 && wait <= 1e9))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "wait %g must be seconds between 0 and 1e9", wait);
	k = xmalloc(sizeof(*k));
	if ((rc = call_init(k, c, call_cb, err)) < 0) {
		free(k);
		return rc;
	}
	k->c = c;
	k->q = q;
	k->tag = tag;
	pthread_mutex_lock(&c->mu);
	c->ncalls++;
	pthread_mutex_lock(&q->mu);
	q->pending++;
	pthread_mutex_unlock(&q->mu);
	pthread_mutex_unlock(&c->mu);
	if (call)
		*call = k;
	/* Cannot fail now: a failure to build the message ends the call. */
	if (call_start(k, req, len, c->timeout, c->timeout + wait, &k->err) < 0) {
		k->rc = -k->err.errnum;
		call_post(k);
	}
	return 0;
}

void dsec_call_cancel(struct dsec_call *k)
{
	pthread_mutex_lock(&k->mu);
	k->cancelled = true;
	nng_aio_cancel(k->aio);
	pthread_mutex_unlock(&k->mu);
}

/* ---- the synchronous API: the client's slot, waited for ---- */

/* The client's own call has no callback: this thread drives it through
 * the same steps, as nng_sendmsg and nng_recvmsg would (no hop to an nng
 * thread and back). */
int dsec_call_sync(struct dsec_client *c, const void *req, size_t len, double extra,
		   nng_msg **reply, struct dsec_err *err)
{
	struct dsec_call *k = &c->sync;
	int rc;

	if ((rc = call_start(k, req, len, c->timeout, c->timeout + extra, err)) < 0)
		return rc;
	do
		nng_aio_wait(k->aio);
	while (call_step(k));
	if (k->rc < 0) {
		*err = k->err;
		return k->rc;
	}
	*reply = k->reply;
	k->reply = NULL;
	return 0;
}

int dsec_raw(struct dsec_client *c, const void *req, size_t len, void **reply,
	     size_t *reply_len, struct dsec_err *err)
{
	nng_msg *msg;
	int rc = dsec_call_sync(c, req, len, 0, &msg, err);

	if (rc < 0)
		return rc;
	*reply_len = nng_msg_len(msg);
	*reply = xmemdup(nng_msg_body(msg), *reply_len);
	nng_msg_free(msg);
	return 0;
}
