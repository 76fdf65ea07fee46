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

/* nng's own limit is recv_max: a frame over it closes the connection (nng
 * gives us no frame to answer); keep it above the protocol's max_frame so
 * frames a little too large still get a "too_large" reply. */
/* ipc:// sockets get mode and, unless gid is -1, group gid.  Unless remote
 * is true, a connection from a network peer off loopback (127.0.0.0/8,
 * ::1) is closed before it can send anything, and logged. */
int dsecd_server_new(struct dsecd_server **out, struct ev_loop *loop, char *const *urls,
		     unsigned mode, int gid, bool remote, unsigned max_inflight, size_t recv_max,
		     dsecd_request_fn fn, void *arg, struct dsec_err *err);
/* Sends the reply (takes ownership of data, allocated with malloc) and
 * recycles the connection's context. */
void dsecd_server_reply(struct dsecd_server *s, struct dsecd_conn *conn, void *data, size_t len);
/* Requests received and not yet replied to. */
unsigned dsecd_server_inflight(const struct dsecd_server *s);
/* Stops receiving, closes the socket, frees everything.  Requests not yet
 * replied to are dropped (their clients see the connection close). */
void dsecd_server_free(struct dsecd_server *s);

#endif
