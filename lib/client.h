/* client.h - libdsec's client, inside: what the typed calls
 * (client-ops.c) take from the connection and its calls (client.c). */
#ifndef DSEC_CLIENT_H
#define DSEC_CLIENT_H

#include <nng/nng.h>

#include "dsec.h"

/* Replies may carry a whole file or captured output; allow generously. */
#define CLIENT_RECV_MAX (256u << 20)

/* Sends req on c's own call and waits for the reply message (caller frees
 * it with nng_msg_free): the reply is decoded in place, never copied.
 * extra = seconds the request itself may take beyond the client timeout. */
int dsec_call_sync(struct dsec_client *c, const void *req, size_t len, double extra,
		   nng_msg **reply, struct dsec_err *err);

#endif
