/* server.h - the API endpoint: nng REP contexts feeding the loop.
 *
 * The server listens on every URL with one REP socket and keeps up to
 * max_inflight requests in flight, each in its own nng context, so a slow
 * request never holds up another.  Received frames are handed to the loop
 * thread (ev_async + locked queue); the handler answers with
 * dsecd_server_reply(), possibly much later, from the loop thread.
 */
#ifndef DSECD_SERVER_H
#define DSECD_SERVER_H

#include <ev.h>
#include "util.h"
#include "err.h"

struct dsecd_server;
/* One request being served.  Opaque; valid until it is replied to. */
struct dsecd_conn;

/* Called on the loop for each received frame.  The frame bytes are valid
 * until the reply. */
typedef void (*dsecd_request_fn)(void *arg, struct dsecd_conn *conn, const void *frame,
				 size_t len);

/* How the API listens. */
struct dsecd_server_opts {
	char *const *urls;		/* nng URLs, NULL-terminated */
	unsigned mode;			/* permissions of ipc:// sockets */
	int gid;			/* group of ipc:// sockets, -1 = ours */
	/* Serve peers off loopback on plain tcp:// too.  Else a connection
	 * from a network peer off loopback (127.0.0.0/8, ::1) that TLS did
	 * not verify is closed before it can send anything, and logged. */
	bool remote;
	unsigned max_inflight;		/* requests that are not quick served at once */
	/* nng's own frame limit: a frame over it closes the connection (nng
	 * gives us no frame to answer); keep it above the protocol's
	 * max_frame so frames a little too large still get a "too_large"
	 * reply. */
	size_t recv_max;
	/* For tls+tcp:// URLs: PEM files of this node's certificate with its
	 * key, and of the CA(s) a client's certificate must be signed by
	 * (mutual TLS: a client without one is refused in the handshake).
	 * NULL with a tls+tcp:// URL: the server is not made (invalid). */
	const char *tls_cert;
	const char *tls_ca;
};

int dsecd_server_new(struct dsecd_server **out, struct ev_loop *loop,
		     const struct dsecd_server_opts *o, dsecd_request_fn fn, void *arg,
		     struct dsec_err *err);
/* Sends the reply (takes ownership of data, allocated with malloc) and
 * recycles the connection's context. */
void dsecd_server_reply(struct dsecd_server *s, struct dsecd_conn *conn, void *data, size_t len);
/* Requests received and not yet replied to. */
unsigned dsecd_server_inflight(const struct dsecd_server *s);
/* Stops receiving, closes the socket, frees everything.  Requests not yet
 * replied to are dropped (their clients see the connection close). */
void dsecd_server_free(struct dsecd_server *s);

#endif
