/* peer.h - the peer tier of fs3: other dsecds that serve their cache.
 *
 * A peer is a dsecd's API address; fs3 asks it for objects with the
 * chunk_get op (dsec-protocol(7)) through libdsec's client, one connection
 * per asking thread at a time (idle ones are kept for the next fetch).
 * Every request waits at most the peer's timeout, so a peer that is down,
 * slow or itself waiting for us costs a fetch that long and no more; what
 * it sends is verified by the store like any source's copy.
 *
 * Threads: fs3_peer_get may be called from any number of threads at once.
 */
#ifndef FS3_PEER_H
#define FS3_PEER_H

#include "store.h"

struct fs3_peer;

/* A peer at url (nng form, checked here) whose requests wait at most
 * timeout seconds.  Caller frees with fs3_peer_free. */
int fs3_peer_new(struct fs3_peer **out, const char *url, double timeout,
		 const struct dsec_tls *tls, struct dsec_err *err);
/* Closes its connections.  NULL is a no-op. */
void fs3_peer_free(struct fs3_peer *p);
/* "peer URL", for messages (owned by p). */
const char *fs3_peer_name(const struct fs3_peer *p);
/* A struct fs3_source get(): ctx is the struct fs3_peer. */
int fs3_peer_get(void *ctx, enum fs3_kind kind, const struct fs3_digest *d, struct dsec_buf *out);

#endif
