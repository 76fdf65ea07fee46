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

/* The daemon's max_frame as the file calls keep it (client-files.c): 0
 * until they ask, DCL_NO_PARTS for a daemon that moves no parts.  Sync
 * calls only, as every use of a client is from one thread at a time. */
#define DCL_NO_PARTS UINT64_MAX
uint64_t *dcl_max_frame(struct dsec_client *c);

#endif
