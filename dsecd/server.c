/* server.c - nng REP with one context per in-flight request.
 *
 * Why contexts and not a raw socket: each context is an independent REP
 * state machine, so replies may go out in any order.  nng runs aio
 * callbacks on its own threads; they only move the connection to the loop's
 * queue or restart a receive, never touch loop state.
 *
 * Why more contexts than max_inflight: a context is held from its request
 * to its reply, so with max_inflight of them busy with long commands a
 * ping would wait in nng until one ended.  The loop instead looks at each
 * frame's op as it comes (dsecd_frame_op): a quick one (DSECD_OP_QUICK in
 * its row: ping, info, list, exec_write, exec_signal, exec_resize,
 * answered at once) is served
 * whatever is in flight; any other is served when fewer than max_inflight
 * of those are, and waits in a queue (holding its context) otherwise.
 * Contexts are opened as needed so that CONN_SPARE always wait for the
 * next frame; a request that would make the queue longer than PARK_MAX
 * requests or PARK_BYTES of frames is refused with "capacity".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>
#include <nng/protocol/reqrep0/rep.h>

#include "server.h"
#include "log.h"
#include "ops.h"
#include "proto.h"

/* Contexts kept receiving beyond those holding requests. */
#define CONN_SPARE 8
/* Requests that may wait for a slot, and the bytes of their frames
 * (at least this many; 4 frames of the largest size when that is more). */
#define PARK_MAX 4096
#define PARK_BYTES (256u << 20)

enum conn_state { C_RECV, C_WORK, C_SEND };

struct dsecd_conn {
	struct dsecd_server *srv;	/* owner */
	nng_ctx ctx;			/* REP context */
	nng_aio *aio;			/* its aio, used for recv then send */
	enum conn_state state;		/* where it is in recv -> work -> send */
	nng_msg *msg;			/* request while in C_WORK */
	bool quick;			/* its op is quick: not counted in busy */
	struct dsecd_conn *next;	/* ready or waiting queue link */
	struct dsecd_conn *all;		/* every context of the server */
};

struct dsecd_server {
	struct ev_loop *loop;		/* owner loop */
	ev_async wake;			/* nng threads -> loop: frames ready */
	nng_socket sock;		/* the REP socket */
	unsigned nconns;		/* contexts open (loop only) */
	unsigned max_conns;		/* at most */
	struct dsecd_conn *conns;	/* all contexts, linked by ->all */
	pthread_mutex_t lock;		/* guards ready, nrecv and closing */
	struct dsecd_conn *ready, **ready_tail;	/* received, not yet handed over */
	unsigned nrecv;			/* contexts waiting for a frame */
	bool closing;			/* no new receives */
	unsigned max_inflight;		/* requests that are not quick served at once */
	unsigned busy;			/* of those, handed to the handler (loop only) */
	struct dsecd_conn *parked, **parked_tail;	/* waiting for busy < max_inflight */
	unsigned nparked;		/* how many */
	size_t parked_bytes;		/* their frames' bytes */
	size_t park_bytes_max;		/* at most */
	unsigned inflight;		/* handed to the handler, not replied (loop only) */
	dsecd_request_fn fn;		/* the handler */
	void *arg;			/* its argument */
	bool remote;			/* network peers off loopback are served */
	pthread_mutex_t refuse_lock;	/* guards the three below (nng threads) */
	double refuse_tokens;		/* refusals that may still be logged (bucket) */
	double refuse_at;		/* when the bucket was last filled */
	unsigned refuse_quiet;		/* refusals not logged since the last logged one */
};

/* Refusals logged at once at most; then one a second. */
#define REFUSE_BURST 10

/* A peer on loopback (127.0.0.0/8, ::1, or 127.x mapped into IPv6) or
 * not on a network at all (ipc). */
static bool peer_local(const nng_sockaddr *sa)
{
	static const uint8_t v6_lo[16] = { [15] = 1 };
	static const uint8_t v4_mapped[12] = { [10] = 0xff, [11] = 0xff };

	switch (sa->s_family) {
	case NNG_AF_INET:
		return (ntohl(sa->s_in.sa_addr) >> 24) == 127;
	case NNG_AF_INET6:
		return !memcmp(sa->s_in6.sa_addr, v6_lo, 16) ||
		       (!memcmp(sa->s_in6.sa_addr, v4_mapped, 12) && sa->s_in6.sa_addr[12] == 127);
	case NNG_AF_IPC:
	case NNG_AF_INPROC:
	case NNG_AF_ABSTRACT:
		return true;
	default:
		return false;
	}
}

static void peer_text(const nng_sockaddr *sa, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";

	if (sa->s_family == NNG_AF_INET6) {
		inet_ntop(AF_INET6, sa->s_in6.sa_addr, a, sizeof(a));
		snprintf(buf, len, "[%s]:%u", a, (unsigned)ntohs(sa->s_in6.sa_port));
		return;
	}
	if (sa->s_family == NNG_AF_INET)
		inet_ntop(AF_INET, &sa->s_in.sa_addr, a, sizeof(a));
	snprintf(buf, len, "%s:%u", a, (unsigned)ntohs(sa->s_in.sa_port));
}

/* nng thread, before a new connection joins the socket.  Anyone who
 * reaches a plain tcp:// port could drive every sandbox of the node, so
 * off loopback only a peer whose certificate TLS verified (tls+tcp://,
 * mutual TLS against tls_ca) is served, unless listen_remote says
 * otherwise.  The connection is closed before it can send a request.  Refusals are logged
 * from a bucket of 10 that fills by one a second, so a flood of them cannot
 * fill the log; those left out are counted in the next line. */
static void pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	struct dsecd_server *s = arg;
	nng_sockaddr sa;
	char who[INET6_ADDRSTRLEN + 16];
	unsigned quiet = 0;
	bool say = false;
	double now;

	bool verified = false;

	if (s->remote || ev != NNG_PIPE_EV_ADD_PRE)
		return;
	if (nng_pipe_get_addr(p, NNG_OPT_REMADDR, &sa) != 0)
		sa.s_family = NNG_AF_UNSPEC;
	if (peer_local(&sa))
		return;
	/* Only a TLS pipe has the option; listeners require a certificate,
	 * so one that is there was checked in the handshake. */
	if (nng_pipe_get_bool(p, NNG_OPT_TLS_VERIFIED, &verified) == 0 && verified)
		return;
	nng_pipe_close(p);
	now = dsec_now();
	pthread_mutex_lock(&s->refuse_lock);
	s->refuse_tokens += now - s->refuse_at;
	if (s->refuse_tokens > REFUSE_BURST)
		s->refuse_tokens = REFUSE_BURST;
	s->refuse_at = now;
	if (s->refuse_tokens >= 1) {
		s->refuse_tokens -= 1;
		say = true;
		quiet = s->refuse_quiet;
		s->refuse_quiet = 0;
	} else {
		s->refuse_quiet++;
	}
	pthread_mutex_unlock(&s->refuse_lock);
	if (!say)
		return;
	peer_text(&sa, who, sizeof(who));
	if (quiet)
		log_warn("refused API client %s: not on loopback nor verified by TLS "
			 "(listen_remote is false); %u more refused and not logged before it",
			 who, quiet);
	else
		log_warn("refused API client %s: not on loopback nor verified by TLS "
			 "(listen_remote is false)", who);
}

static void start_recv(struct dsecd_conn *c)
{
	struct dsecd_server *s = c->srv;

	c->state = C_RECV;
	pthread_mutex_lock(&s->lock);
	s->nrecv++;
	pthread_mutex_unlock(&s->lock);
	nng_ctx_recv(c->ctx, c->aio);
}

/* nng thread. */
static void aio_cb(void *arg)
{
	struct dsecd_conn *c = arg;
	struct dsecd_server *s = c->srv;
	int rc = nng_aio_result(c->aio);

	if (c->state == C_SEND) {
		if (rc != 0) {
			/* The client went away: drop the reply. */
			nng_msg_free(nng_aio_get_msg(c->aio));
		}
		pthread_mutex_lock(&s->lock);
		bool closing = s->closing;
		pthread_mutex_unlock(&s->lock);
		if (!closing)
			start_recv(c);
		return;
	}
	if (rc == NNG_ECLOSED || rc == NNG_ECANCELED)
		return;
	if (rc != 0) {
		/* e.g. a frame over recv_max: the pipe is dropped; keep going. */
		nng_ctx_recv(c->ctx, c->aio);
		return;
	}
	c->msg = nng_aio_get_msg(c->aio);
	c->state = C_WORK;
	pthread_mutex_lock(&s->lock);
	s->nrecv--;
	c->next = NULL;
	*s->ready_tail = c;
	s->ready_tail = &c->next;
	pthread_mutex_unlock(&s->lock);
	ev_async_send(s->loop, &s->wake);
}

/* Opens one more context and lets it receive. */
static void conn_open(struct dsecd_server *s)
{
	struct dsecd_conn *c = xcalloc(1, sizeof(*c));
	int rc;

	c->srv = s;
	if ((rc = nng_ctx_open(&c->ctx, s->sock)) != 0 ||
	    (rc = nng_aio_alloc(&c->aio, aio_cb, c)) != 0)
		DSEC_BUG("cannot set up nng context: %s", nng_strerror(rc));
	c->all = s->conns;
	s->conns = c;
	s->nconns++;
	start_recv(c);
}

static void hand_over(struct dsecd_server *s, struct dsecd_conn *c)
{
	s->inflight++;
	s->fn(s->arg, c, nng_msg_body(c->msg), nng_msg_len(c->msg));
}

/* A request the queue has no room for: "capacity" at once. */
static void refuse(struct dsecd_server *s, struct dsecd_conn *c)
{
	struct dsec_err err;
	struct dsec_pk p;
	size_t len;
	void *data;

	dsec_err_setc(&err, DSEC_E_CAPACITY, EAGAIN,
		      "%u requests are in flight and %u wait: retry later", s->busy, s->nparked);
	dsec_pk_init(&p);
	dsec_pk_reply_err(&p, &err);
	data = dsec_pk_detach(&p, &len);
	c->quick = true;	/* not counted in busy */
	s->inflight++;
	dsecd_server_reply(s, c, data, len);
}

static void wake_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct dsecd_server *s = dsec_container_of(w, struct dsecd_server, wake);
	unsigned want;

	pthread_mutex_lock(&s->lock);
	struct dsecd_conn *list = s->ready;
	s->ready = NULL;
	s->ready_tail = &s->ready;
	pthread_mutex_unlock(&s->lock);
	while (list) {
		struct dsecd_conn *c = list;
		size_t len = nng_msg_len(c->msg);
		const struct dsecd_op *op = dsecd_frame_op(nng_msg_body(c->msg), len);

		list = c->next;
		/* No op known: the handler refuses the frame at once. */
		c->quick = !op || (op->flags & DSECD_OP_QUICK);
		if (c->quick) {
			hand_over(s, c);
		} else if (s->nparked >= PARK_MAX || s->parked_bytes + len > s->park_bytes_max) {
			refuse(s, c);
		} else {
			c->next = NULL;
			*s->parked_tail = c;
			s->parked_tail = &c->next;
			s->nparked++;
			s->parked_bytes += len;
		}
	}
	/* In the order they came; a handler that replies at once frees its
	 * slot for the next one in this same loop. */
	while (s->parked && s->busy < s->max_inflight) {
		struct dsecd_conn *c = s->parked;

		if (!(s->parked = c->next))
			s->parked_tail = &s->parked;
		s->nparked--;
		s->parked_bytes -= nng_msg_len(c->msg);
		s->busy++;
		hand_over(s, c);
	}
	pthread_mutex_lock(&s->lock);
	want = s->closing || s->nrecv >= CONN_SPARE ? 0 : CONN_SPARE - s->nrecv;
	pthread_mutex_unlock(&s->lock);
	while (want-- > 0 && s->nconns < s->max_conns)
		conn_open(s);
}

/* The TLS configuration of tls+tcp:// listeners: this node's certificate
 * and key, and a client's certificate required, checked against the CA. */
static int tls_server_config(const struct dsecd_server_opts *o, nng_tls_config **out,
			     struct dsec_err *err)
{
	nng_tls_config *c;
	const char *what;
	int rc;

	if (!o->tls_cert || !o->tls_ca)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "cannot listen on tls+tcp:// "
				     "without tls_cert and tls_ca");
	if ((rc = nng_tls_config_alloc(&c, NNG_TLS_MODE_SERVER)) != 0)
		return dsec_err_setc(err, DSEC_E_INTERNAL, ENOMEM, "cannot set TLS up: %s",
				     nng_strerror(rc));
	if ((rc = nng_tls_config_cert_key_file(c, o->tls_cert, NULL)) != 0)
		what = o->tls_cert;
	else if ((rc = nng_tls_config_ca_file(c, o->tls_ca)) != 0)
		what = o->tls_ca;
	else if ((rc = nng_tls_config_auth_mode(c, NNG_TLS_AUTH_MODE_REQUIRED)) != 0)
		what = "client authentication";
	if (rc != 0) {
		nng_tls_config_free(c);
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "cannot use '%s' for TLS: %s",
				     what, nng_strerror(rc));
	}
	*out = c;
	return 0;
}

/* Opens a listener on url; ipc:// sockets get o's mode and group. */
static int listen_on(struct dsecd_server *s, const char *url, const struct dsecd_server_opts *o,
		     nng_tls_config **tls, struct dsec_err *err)
{
	bool ipc = !strncmp(url, "ipc://", 6);
	nng_listener l;
	int rc;

	if (!strncmp(url, "tls+", 4) && !*tls && tls_server_config(o, tls, err) < 0)
		return -EINVAL;
	if ((rc = nng_listener_create(&l, s->sock, url)) == 0) {
		if (ipc)
			nng_listener_set_int(l, NNG_OPT_IPC_PERMISSIONS, (int)o->mode);
		if (!strncmp(url, "tls+", 4))
			rc = nng_listener_set_ptr(l, NNG_OPT_TLS_CONFIG, *tls);
		if (rc == 0)
			rc = nng_listener_start(l, 0);
	}
	if (rc == 0 && ipc && o->gid >= 0 && chown(url + 6, (uid_t)-1, (gid_t)o->gid) < 0)
		return dsec_err_set(err, errno, "cannot give socket '%s' group %d: %s", url + 6,
				    o->gid, strerror(errno));
	if (rc != 0)
		return dsec_err_setc(err, rc == NNG_EADDRINUSE ? DSEC_E_EXISTS : DSEC_E_INVALID,
				     EADDRINUSE, "cannot listen on '%s': %s", url, nng_strerror(rc));
	log_info("listening on %s%s", url, strncmp(url, "tls+", 4) ? "" :
		 " (TLS, client certificates required)");
	return 0;
}

int dsecd_server_new(struct dsecd_server **out, struct ev_loop *loop,
		     const struct dsecd_server_opts *o, dsecd_request_fn fn, void *arg,
		     struct dsec_err *err)
{
	struct dsecd_server *s = xcalloc(1, sizeof(*s));
	nng_tls_config *tls = NULL;
	int rc;

	s->loop = loop;
	s->fn = fn;
	s->arg = arg;
	s->remote = o->remote;
	s->refuse_tokens = REFUSE_BURST;
	s->refuse_at = dsec_now();
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->refuse_lock, NULL);
	s->ready_tail = &s->ready;
	s->parked_tail = &s->parked;
	s->max_inflight = o->max_inflight;
	s->max_conns = o->max_inflight + PARK_MAX + CONN_SPARE;
	s->park_bytes_max = o->recv_max > PARK_BYTES / 4 ? 4 * o->recv_max : PARK_BYTES;
	if ((rc = nng_rep0_open(&s->sock)) != 0) {
		free(s);
		return dsec_err_setc(err, DSEC_E_INTERNAL, ENOMEM, "cannot open nng socket: %s",
				     nng_strerror(rc));
	}
	nng_socket_set_size(s->sock, NNG_OPT_RECVMAXSZ, o->recv_max);
	if ((rc = nng_pipe_notify(s->sock, NNG_PIPE_EV_ADD_PRE, pipe_cb, s)) != 0) {
		nng_close(s->sock);
		free(s);
		return dsec_err_setc(err, DSEC_E_INTERNAL, ENOMEM,
				     "cannot watch the API's connections: %s", nng_strerror(rc));
	}
	for (char *const *u = o->urls; u && *u; u++)
		if ((rc = listen_on(s, *u, o, &tls, err)) < 0)
			break;
	if (tls)
		nng_tls_config_free(tls);	/* the listeners hold it */
	if (rc < 0) {
		nng_close(s->sock);
		free(s);
		return rc;
	}
	ev_async_init(&s->wake, wake_cb);
	ev_async_start(loop, &s->wake);
	ev_unref(loop);
	for (unsigned i = 0; i < o->max_inflight + CONN_SPARE; i++)
		conn_open(s);
	*out = s;
	return 0;
}

void dsecd_server_reply(struct dsecd_server *s, struct dsecd_conn *c, void *data, size_t len)
{
	nng_msg *m = c->msg;

	DSEC_ASSERT(c->state == C_WORK);
	s->inflight--;
	if (!c->quick && s->busy-- == s->max_inflight && s->parked)
		ev_async_send(s->loop, &s->wake);	/* the next one waiting, outside this handler */
	c->msg = NULL;
	/* Reuse the request message (keeps nng's REP header) for the reply. */
	nng_msg_clear(m);
	if (nng_msg_append(m, data, len) != 0)
		DSEC_BUG("out of memory building a reply");
	free(data);
	c->state = C_SEND;
	nng_aio_set_msg(c->aio, m);
	nng_ctx_send(c->ctx, c->aio);
}

unsigned dsecd_server_inflight(const struct dsecd_server *s)
{
	return s->inflight;
}

void dsecd_server_free(struct dsecd_server *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->closing = true;
	pthread_mutex_unlock(&s->lock);
	for (struct dsecd_conn *c = s->conns; c; c = c->all)
		nng_aio_stop(c->aio);
	nng_close(s->sock);
	while (s->conns) {
		struct dsecd_conn *c = s->conns;

		s->conns = c->all;
		if (c->msg)
			nng_msg_free(c->msg);
		nng_aio_free(c->aio);
		free(c);
	}
	ev_ref(s->loop);
	ev_async_stop(s->loop, &s->wake);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->refuse_lock);
	free(s);
}
