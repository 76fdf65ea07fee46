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

/* A set of peers that changes while fetches run: the cluster's members,
 * as gossip tells them.  One source of the store (fs3_peerset_get, ctx
 * the set) asks, for each object, the FS3_PEERSET_TRIES of them that rank
 * first for it (rendezvous hashing of the digest and the address), so a
 * node with many peers does not ask them all before the origin.  Set from
 * one thread (fs3_set_peers); fetches from any.  A peer left out is freed
 * when the last fetch using it ends. */
#define FS3_PEERSET_TRIES 3
struct fs3_peerset;
void fs3_peerset_new(struct fs3_peerset **out, double timeout, const struct dsec_tls *tls);
void fs3_peerset_free(struct fs3_peerset *ps);
/* The set becomes urls[0..n-1] (at most FS3_PEERS_MAX; the same address
 * keeps its peer and connections).  0, or -errno with err for an address
 * nng cannot use (the ones before it are set). */
int fs3_peerset_set(struct fs3_peerset *ps, const char *const *urls, size_t n,
		    struct dsec_err *err);
size_t fs3_peerset_count(struct fs3_peerset *ps);
int fs3_peerset_get(void *ctx, enum fs3_kind kind, const struct fs3_digest *d, struct dsec_buf *out);

#endif
