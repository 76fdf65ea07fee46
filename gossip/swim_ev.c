/* swim_ev.c - libswim on a libev loop: UDP datagrams, push-pull over TCP
 * (see the binding's part of swim.h).
 *
 * A stream carries one message each way: the client writes length +
 * request, the server answers length + reply and closes.  Each connection
 * is a struct conn with one ev_io and one ev_timer bounding the whole
 * exchange; reads never exceed the announced length, which is checked
 * against SWIM_STREAM_MAX before anything is allocated.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <ev.h>

#include "swim.h"
#include "util.h"

/* Datagrams read per wake-up at most, so one busy socket cannot starve
 * the loop. */
#define RECV_BATCH 64
/* Streams open at once; more are refused (closed at accept), so that
 * strangers cannot hold much memory: a message's buffer also grows only
 * as its bytes arrive. */
#define CONNS_MAX 64

struct swim_ev;

/* One push-pull stream, either side. */
struct conn {
	struct swim_ev *e;	/* owner */
	ev_io io;		/* the socket's readiness */
	ev_timer timeout;	/* bounds the exchange */
	bool client;		/* we asked (then id names the request) */
	uint64_t id;		/* the swim stream id */
	uint8_t *out;		/* length + message to write */
	size_t out_len, out_off;	/* its size and how much is written */
	uint8_t hdr[4];		/* the length being read */
	size_t hdr_off;		/* bytes of it read */
	uint8_t *in;		/* the message being read */
	size_t in_len, in_off;	/* its size and how much is read */
	size_t in_cap;		/* bytes allocated for it */
	bool reading;		/* writing done, now reading (client) */
	struct conn *next;	/* list of connections */
};

struct swim_ev {
	struct ev_loop *loop;		/* the loop */
	struct swim *s;			/* the protocol */
	int udp, tcp;			/* sockets */
	ev_io udp_io, tcp_io;		/* their watchers */
	ev_timer timer;			/* swim's wake-up */
	char addr[SWIM_ADDR_MAX + 1];	/* advertised */
	uint64_t rng;			/* splitmix64 state */
	double stream_timeout;		/* seconds */
	struct conn *conns;		/* streams in progress */
	unsigned nconns;		/* how many */
	void (*event)(void *arg, enum swim_event ev, const struct swim_member *m); /* hook */
	void *arg;			/* its argument */
};

/* "1.2.3.4:port" or "[v6]:port" into a sockaddr; -EINVAL if it is not. */
static int parse_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[SWIM_ADDR_MAX + 1];
	const char *colon = strrchr(s, ':');
	char *end;
	unsigned long port;

	if (!colon || (size_t)(colon - s) > SWIM_ADDR_MAX || !colon[1])
		return -EINVAL;
	port = strtoul(colon + 1, &end, 10);
	if (*end || port > 65535)
		return -EINVAL;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = 0;
	memset(ss, 0, sizeof(*ss));
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

		host[strlen(host) - 1] = 0;
		if (inet_pton(AF_INET6, host + 1, &a->sin6_addr) != 1)
			return -EINVAL;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		*len = sizeof(*a);
		return 0;
	}
	struct sockaddr_in *a = (struct sockaddr_in *)ss;

	if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
		return -EINVAL;
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)port);
	*len = sizeof(*a);
	return 0;
}

/* ---- env --------------------------------------------------------------- */

static uint64_t env_now(void *ctx)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void env_set_timer(void *ctx, uint64_t at)
{
	struct swim_ev *e = ctx;
	uint64_t t = env_now(ctx);

	ev_timer_stop(e->loop, &e->timer);
	ev_timer_set(&e->timer, at > t ? (double)(at - t) / 1e6 : 0, 0);
	ev_timer_start(e->loop, &e->timer);
}

static void env_send(void *ctx, const char *addr, const void *buf, size_t len)
{
	struct swim_ev *e = ctx;
	struct sockaddr_storage ss;
	socklen_t sl;

	/* Best effort: a full socket buffer or an unreachable host is loss. */
	if (parse_addr(addr, &ss, &sl) == 0)
		(void)sendto(e->udp, buf, len, MSG_DONTWAIT, (struct sockaddr *)&ss, sl);
}

static uint64_t env_rand(void *ctx)
{
	struct swim_ev *e = ctx;
	uint64_t z = (e->rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void env_event(void *ctx, enum swim_event ev, const struct swim_member *m)
{
	struct swim_ev *e = ctx;

	if (e->event)
		e->event(e->arg, ev, m);
}

/* ---- streams ----------------------------------------------------------- */

static void conn_free(struct conn *c)
{
	struct swim_ev *e = c->e;
	struct conn **p = &e->conns;

	while (*p != c)
		p = &(*p)->next;
	*p = c->next;
	e->nconns--;
	ev_io_stop(e->loop, &c->io);
	ev_timer_stop(e->loop, &c->timeout);
	close(c->io.fd);
	free(c->out);
	free(c->in);
	free(c);
}

/* Ends a connection; a client's swim request learns the outcome. */
static void conn_end(struct conn *c, int rc)
{
	struct swim_ev *e = c->e;

	if (c->client)
		swim_stream_done(e->s, c->id, rc, rc == 0 ? c->in : NULL, rc == 0 ? c->in_len : 0);
	conn_free(c);
}

static void frame(struct conn *c, const void *buf, size_t len)
{
	c->out = xmalloc(len + 4);
	c->out[0] = (uint8_t)(len >> 24);
	c->out[1] = (uint8_t)(len >> 16);
	c->out[2] = (uint8_t)(len >> 8);
	c->out[3] = (uint8_t)len;
	memcpy(c->out + 4, buf, len);
	c->out_len = len + 4;
	c->out_off = 0;
}

/* Reads what is there of length + message: 1 when complete, 0 for more,
 * -errno on failure or a closed peer. */
static int conn_read(struct conn *c)
{
	for (;;) {
		ssize_t n;

		if (c->hdr_off < 4) {
			n = read(c->io.fd, c->hdr + c->hdr_off, 4 - c->hdr_off);
		} else {
			if (!c->in_len) {
				c->in_len = (size_t)c->hdr[0] << 24 | (size_t)c->hdr[1] << 16 |
					    (size_t)c->hdr[2] << 8 | c->hdr[3];
				if (c->in_len == 0 || c->in_len > SWIM_STREAM_MAX)
					return -EMSGSIZE;
			}
			if (c->in_off == c->in_len)
				return 1;
			if (c->in_off == c->in_cap) {
				size_t cap = c->in_cap ? 2 * c->in_cap : 65536;

				c->in_cap = cap < c->in_len ? cap : c->in_len;
				c->in = xrealloc(c->in, c->in_cap);
			}
			n = read(c->io.fd, c->in + c->in_off, c->in_cap - c->in_off);
		}
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -errno;
		if (n == 0)
			return -ECONNRESET;
		if (c->hdr_off < 4)
			c->hdr_off += (size_t)n;
		else
			c->in_off += (size_t)n;
	}
}

/* Writes what it can: 1 when all is written, 0 for more, -errno. */
static int conn_write(struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->io.fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);

		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -errno;
		c->out_off += (size_t)n;
	}
	return 1;
}

static void conn_set(struct conn *c, int events)
{
	ev_io_stop(c->e->loop, &c->io);
	ev_io_set(&c->io, c->io.fd, events);
	ev_io_start(c->e->loop, &c->io);
}

/* A server connection: read the request, answer, close once written. */
static void server_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn *c = dsec_container_of(w, struct conn, io);
	int rc;

	if (c->out) {
		rc = conn_write(c);
		if (rc != 0)
			conn_end(c, rc < 0 ? rc : 0);
		return;
	}
	rc = conn_read(c);
	if (rc == 0)
		return;
	if (rc < 0) {
		conn_end(c, rc);
		return;
	}
	void *reply;
	size_t rlen;

	if (swim_stream_serve(c->e->s, c->in, c->in_len, &reply, &rlen) < 0) {
		conn_end(c, -EBADMSG);
		return;
	}
	frame(c, reply, rlen);
	free(reply);
	conn_set(c, EV_WRITE);
	server_cb(loop, w, EV_WRITE);
}

/* A client connection: connect, write the request, read the reply. */
static void client_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct conn *c = dsec_container_of(w, struct conn, io);
	int rc;

	if (!c->reading) {
		int err = 0;
		socklen_t l = sizeof(err);

		if (getsockopt(c->io.fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0 || err) {
			conn_end(c, -(err ? err : errno));
			return;
		}
		rc = conn_write(c);
		if (rc < 0) {
			conn_end(c, rc);
			return;
		}
		if (rc == 0)
			return;
		c->reading = true;
		shutdown(c->io.fd, SHUT_WR);
		conn_set(c, EV_READ);
		return;
	}
	rc = conn_read(c);
	if (rc != 0)
		conn_end(c, rc < 0 ? rc : 0);
}

static void conn_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	conn_end(dsec_container_of(w, struct conn, timeout), -ETIMEDOUT);
}

static struct conn *conn_new(struct swim_ev *e, int fd, bool client)
{
	struct conn *c = xcalloc(1, sizeof(*c));

	c->e = e;
	c->client = client;
	ev_io_init(&c->io, client ? client_cb : server_cb, fd, client ? EV_WRITE : EV_READ);
	ev_io_start(e->loop, &c->io);
	ev_timer_init(&c->timeout, conn_timeout_cb, e->stream_timeout, 0);
	ev_timer_start(e->loop, &c->timeout);
	c->next = e->conns;
	e->conns = c;
	e->nconns++;
	return c;
}

static int env_stream(void *ctx, const char *addr, const void *buf, size_t len, uint64_t id)
{
	struct swim_ev *e = ctx;
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd, rc = parse_addr(addr, &ss, &sl);

	if (rc < 0)
		return rc;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS) {
		rc = -errno;
		close(fd);
		return rc;
	}
	struct conn *c = conn_new(e, fd, true);

	c->id = id;
	frame(c, buf, len);
	return 0;
}

/* ---- sockets ----------------------------------------------------------- */

static void udp_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct swim_ev *e = dsec_container_of(w, struct swim_ev, udp_io);
	static uint8_t buf[65536];

	for (int i = 0; i < RECV_BATCH; i++) {
		ssize_t n = recv(e->udp, buf, sizeof(buf), MSG_DONTWAIT);

		if (n < 0)
			return;
		swim_recv(e->s, buf, (size_t)n);
	}
}

static void accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct swim_ev *e = dsec_container_of(w, struct swim_ev, tcp_io);

	for (int i = 0; i < RECV_BATCH; i++) {
		int fd = accept4(e->tcp, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			return;
		if (e->nconns >= CONNS_MAX) {
			close(fd);
			continue;
		}
		conn_new(e, fd, false);
	}
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct swim_ev *e = dsec_container_of(w, struct swim_ev, timer);

	swim_tick(e->s);
}

static int bound_socket(int type, const struct sockaddr_storage *ss, socklen_t sl)
{
	int fd = socket(ss->ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1, rc;

	if (fd < 0)
		return -errno;
	if (type == SOCK_STREAM)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)ss, sl) < 0 ||
	    (type == SOCK_STREAM && listen(fd, 64) < 0)) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

/* UDP and TCP on the same port; with port 0 the UDP socket picks it and
 * TCP follows (a few tries, should that port be taken for TCP). */
static int bind_both(struct swim_ev *e, const char *bind_addr)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int rc = parse_addr(bind_addr, &ss, &sl);

	if (rc < 0)
		return rc;
	bool any = ((struct sockaddr_in *)&ss)->sin_port == 0;

	for (int tries = 0; tries < (any ? 20 : 1); tries++) {
		struct sockaddr_storage got = ss;
		socklen_t gl = sizeof(got);

		e->udp = bound_socket(SOCK_DGRAM, &ss, sl);
		if (e->udp < 0)
			return e->udp;
		getsockname(e->udp, (struct sockaddr *)&got, &gl);
		e->tcp = bound_socket(SOCK_STREAM, &got, gl);
		if (e->tcp >= 0) {
			char host[INET6_ADDRSTRLEN];
			uint16_t port;

			if (got.ss_family == AF_INET6) {
				struct sockaddr_in6 *a = (struct sockaddr_in6 *)&got;

				inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
				port = ntohs(a->sin6_port);
				snprintf(e->addr, sizeof(e->addr), "[%s]:%u", host, port);
			} else {
				struct sockaddr_in *a = (struct sockaddr_in *)&got;

				inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
				port = ntohs(a->sin_port);
				snprintf(e->addr, sizeof(e->addr), "%s:%u", host, port);
			}
			return 0;
		}
		rc = e->tcp;
		close(e->udp);
		e->udp = -1;
	}
	return rc;
}

int swim_ev_new(struct swim_ev **out, struct ev_loop *loop, const struct swim_ev_conf *conf)
{
	struct swim_ev *e = xcalloc(1, sizeof(*e));
	struct swim_conf sc = conf->swim;
	int rc;

	e->loop = loop;
	e->udp = e->tcp = -1;
	e->event = conf->event;
	e->arg = conf->arg;
	e->stream_timeout = (conf->stream_timeout_ms ? conf->stream_timeout_ms : 10000) / 1000.0;
	if (getrandom(&e->rng, sizeof(e->rng), 0) != sizeof(e->rng))
		e->rng = env_now(NULL) ^ (uint64_t)getpid() << 32;
	rc = conf->bind ? bind_both(e, conf->bind) : -EINVAL;
	if (rc < 0)
		goto fail;
	if (!sc.addr)
		sc.addr = e->addr;
	else
		snprintf(e->addr, sizeof(e->addr), "%s", sc.addr);
	ev_timer_init(&e->timer, timer_cb, 0, 0);

	struct swim_env env = {
		.ctx = e, .now = env_now, .set_timer = env_set_timer, .send = env_send,
		.stream = env_stream, .rand = env_rand, .event = env_event,
	};

	rc = swim_new(&e->s, &sc, &env);
	if (rc < 0)
		goto fail;
	ev_io_init(&e->udp_io, udp_cb, e->udp, EV_READ);
	ev_io_start(loop, &e->udp_io);
	ev_io_init(&e->tcp_io, accept_cb, e->tcp, EV_READ);
	ev_io_start(loop, &e->tcp_io);
	*out = e;
	return 0;
fail:
	ev_timer_stop(loop, &e->timer);
	if (e->udp >= 0)
		close(e->udp);
	if (e->tcp >= 0)
		close(e->tcp);
	free(e);
	return rc;
}

void swim_ev_free(struct swim_ev *e)
{
	if (!e)
		return;
	while (e->conns)
		conn_free(e->conns);
	ev_timer_stop(e->loop, &e->timer);
	ev_io_stop(e->loop, &e->udp_io);
	ev_io_stop(e->loop, &e->tcp_io);
	close(e->udp);
	close(e->tcp);
	swim_free(e->s);
	free(e);
}

struct swim *swim_ev_swim(struct swim_ev *e)
{
	return e->s;
}

const char *swim_ev_addr(const struct swim_ev *e)
{
	return e->addr;
}
