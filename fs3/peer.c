/* peer.c - fetch fs3 objects from other dsecds (chunk_get). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "dsec.h"
#include "log.h"
#include "peer.h"

/* Idle connections kept per peer; more threads at once open more. */
#define PEER_IDLE_MAX 8
/* Seconds a peer that did not answer (or could not be reached) is skipped,
 * so that a dead peer costs one timeout, not one per object. */
#define PEER_BACKOFF 10.0

struct fs3_peer {
	unsigned refs;				/* holders (atomic): its set, fetches */
	char *url;				/* the peer's address */
	char *name;				/* "peer URL" */
	struct dsec_tls tls;			/* TLS files for a tls+tcp:// url (copies) */
	double timeout;				/* seconds a request may take */
	pthread_mutex_t mu;			/* guards idle, nidle */
	struct dsec_client *idle[PEER_IDLE_MAX];	/* connections not in use */
	int nidle;				/* entries in idle */
	double down_until;			/* dsec_now() before which it is
						 * skipped (mu) */
};

static char *dup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

int fs3_peer_new(struct fs3_peer **out, const char *url, double timeout,
		 const struct dsec_tls *tls, struct dsec_err *err)
{
	static const struct dsec_connect_opts lazy = { .lazy = true };
	static const struct dsec_tls none;
	struct dsec_client *c;
	struct fs3_peer *p;
	int r;

	if (!tls)
		tls = &none;
	/* Connecting does not wait for the peer; it checks the address. */
	if ((r = dsec_connect_tls(&c, url, &lazy, tls, err)) < 0) {
		dsec_err_prefix(err, "cannot use peer '%s'", url);
		return r;
	}
	p = xcalloc(1, sizeof(*p));
	p->tls = (struct dsec_tls){ .ca = dup_or_null(tls->ca), .cert = dup_or_null(tls->cert),
				    .server_name = dup_or_null(tls->server_name) };
	p->url = xstrdup(url);
	p->name = xasprintf("peer %s", url);
	p->timeout = timeout > 0 ? timeout : FS3_FETCH_TIMEOUT_DEFAULT;
	pthread_mutex_init(&p->mu, NULL);
	p->idle[p->nidle++] = c;
	p->refs = 1;
	*out = p;
	return 0;
}

/* Drops a holder's reference; the last one frees it. */
static void peer_unref(struct fs3_peer *p)
{
	if (p && __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) == 0)
		fs3_peer_free(p);
}

void fs3_peer_free(struct fs3_peer *p)
{
	if (!p)
		return;
	for (int i = 0; i < p->nidle; i++)
		dsec_close(p->idle[i]);
	pthread_mutex_destroy(&p->mu);
	free((char *)p->tls.ca);
	free((char *)p->tls.cert);
	free((char *)p->tls.server_name);
	free(p->url);
	free(p->name);
	free(p);
}

const char *fs3_peer_name(const struct fs3_peer *p)
{
	return p->name;
}

static struct dsec_client *take(struct fs3_peer *p)
{
	struct dsec_client *c = NULL;
	struct dsec_err err;

	pthread_mutex_lock(&p->mu);
	if (p->nidle)
		c = p->idle[--p->nidle];
	pthread_mutex_unlock(&p->mu);
	if (!c && dsec_connect_tls(&c, p->url, NULL, &p->tls, &err) < 0) {
		log_warn("cannot connect to %s: %s", p->name, err.msg);
		return NULL;
	}
	dsec_set_timeout(c, p->timeout);
	return c;
}

/* A connection whose last request was answered goes back for reuse; one
 * that timed out or failed is closed (its late reply must not be read as
 * the next one's). */
static void give_back(struct fs3_peer *p, struct dsec_client *c, bool good)
{
	pthread_mutex_lock(&p->mu);
	if (good && p->nidle < PEER_IDLE_MAX) {
		p->idle[p->nidle++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&p->mu);
	dsec_close(c);
}

int fs3_peer_get(void *ctx, enum fs3_kind kind, const struct fs3_digest *d, struct dsec_buf *out)
{
	struct fs3_peer *p = ctx;
	char ref[FS3_REF_LEN];
	struct dsec_client *c;
	struct dsec_err err;
	int r;

	pthread_mutex_lock(&p->mu);
	bool down = dsec_now() < p->down_until;
	pthread_mutex_unlock(&p->mu);
	if (down)
		return -EHOSTDOWN;
	if (!(c = take(p)))
		return -ECONNREFUSED;
	fs3_digest_ref(d, ref);
	dsec_err_clear(&err);
	r = dsec_chunk_get(c, fs3_kind_name(kind), ref, out, &err);
	if (r == 0 && out->len > ZSTD_COMPRESSBOUND(FS3_OBJECT_MAX))
		r = -EFBIG;
	give_back(p, c, r == 0 || err.code == DSEC_E_NOT_FOUND);
	if (r == 0)
		return 0;
	if (err.code == DSEC_E_NOT_FOUND)
		return -ENOENT;
	if (r == -EFBIG) {
		log_warn("cannot fetch %s '%s' from %s: too large", fs3_kind_name(kind), ref,
			 p->name);
		return r;
	}
	if (err.code != DSEC_E_UNAVAILABLE) {
		log_warn("cannot fetch %s '%s' from %s: %s", fs3_kind_name(kind), ref, p->name,
			 err.msg);
		return -EIO;
	}
	/* It did not answer: skip it for a while. */
	pthread_mutex_lock(&p->mu);
	p->down_until = dsec_now() + PEER_BACKOFF;
	pthread_mutex_unlock(&p->mu);
	log_warn("cannot fetch %s '%s' from %s: %s; skipping it for %.0f s", fs3_kind_name(kind),
		 ref, p->name, err.msg, PEER_BACKOFF);
	return err.errnum == ETIMEDOUT ? -ETIMEDOUT : -ECONNREFUSED;
}

/* ---- a set of peers that changes (the cluster's members) ---------------- */

struct fs3_peerset {
	pthread_mutex_t mu;			/* guards peers, n */
	struct fs3_peer *peers[FS3_PEERS_MAX];	/* a reference each */
	size_t n;				/* entries in peers */
	double timeout;				/* for new peers */
	struct dsec_tls tls;			/* for new peers (copies) */
};

void fs3_peerset_new(struct fs3_peerset **out, double timeout, const struct dsec_tls *tls)
{
	struct fs3_peerset *ps = xcalloc(1, sizeof(*ps));

	pthread_mutex_init(&ps->mu, NULL);
	ps->timeout = timeout;
	if (tls)
		ps->tls = (struct dsec_tls){ .ca = dup_or_null(tls->ca), .cert = dup_or_null(tls->cert),
					     .server_name = dup_or_null(tls->server_name) };
	*out = ps;
}

void fs3_peerset_free(struct fs3_peerset *ps)
{
	if (!ps)
		return;
	for (size_t i = 0; i < ps->n; i++)
		peer_unref(ps->peers[i]);
	pthread_mutex_destroy(&ps->mu);
	free((char *)ps->tls.ca);
	free((char *)ps->tls.cert);
	free((char *)ps->tls.server_name);
	free(ps);
}

int fs3_peerset_set(struct fs3_peerset *ps, const char *const *urls, size_t n,
		    struct dsec_err *err)
{
	struct fs3_peer *next[FS3_PEERS_MAX], *old[FS3_PEERS_MAX];
	size_t nn = 0, no;
	int r = 0;

	if (n > FS3_PEERS_MAX)
		n = FS3_PEERS_MAX;
	pthread_mutex_lock(&ps->mu);
	no = ps->n;
	memcpy(old, ps->peers, no * sizeof(old[0]));
	pthread_mutex_unlock(&ps->mu);
	/* Only this caller changes the set (one thread: dsecd's loop), so
	 * what it read stays the set's until it swaps. */
	for (size_t i = 0; i < n; i++) {
		struct fs3_peer *p = NULL;
		for (size_t j = 0; j < no; j++)
			if (old[j] && !strcmp(old[j]->url, urls[i])) {
				p = old[j];	/* kept: its reference moves over */
				old[j] = NULL;
				break;
			}
		if (!p && (r = fs3_peer_new(&p, urls[i], ps->timeout, &ps->tls, err)) < 0)
			break;
		next[nn++] = p;
	}
	pthread_mutex_lock(&ps->mu);
	memcpy(ps->peers, next, nn * sizeof(next[0]));
	ps->n = nn;
	pthread_mutex_unlock(&ps->mu);
	for (size_t j = 0; j < no; j++)
		peer_unref(old[j]);	/* a fetch still using one frees it after */
	return r;
}

size_t fs3_peerset_count(struct fs3_peerset *ps)
{
	pthread_mutex_lock(&ps->mu);
	size_t n = ps->n;
	pthread_mutex_unlock(&ps->mu);
	return n;
}

/* The rank of a peer for an object: rendezvous hashing (FNV-1a over the
 * digest and the address, mixed: FNV-1a's high bits alone follow the
 * address's last bytes), so every node asks the same peers first for
 * one object and the asks for many objects spread over all of them. */
static uint64_t rank(const struct fs3_digest *d, const char *url)
{
	uint64_t h = dsec_fnv1a(dsec_fnv1a(DSEC_FNV1A_INIT, d->b, FS3_DIGEST_LEN), url, strlen(url));

	return dsec_mix64(h);
}

int fs3_peerset_get(void *ctx, enum fs3_kind kind, const struct fs3_digest *d, struct dsec_buf *out)
{
	struct fs3_peerset *ps = ctx;
	struct fs3_peer *use[FS3_PEERS_MAX];
	uint64_t rk[FS3_PEERS_MAX];
	size_t n;
	int r = -ENOENT;

	pthread_mutex_lock(&ps->mu);
	n = ps->n;
	for (size_t i = 0; i < n; i++) {
		use[i] = ps->peers[i];
		__atomic_add_fetch(&use[i]->refs, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&ps->mu);
	for (size_t i = 0; i < n; i++)
		rk[i] = rank(d, use[i]->url);
	/* The best FS3_PEERSET_TRIES by rank, in order (a selection: n <= 16). */
	for (size_t t = 0; t < n && t < FS3_PEERSET_TRIES; t++) {
		size_t best = t;
		for (size_t i = t + 1; i < n; i++)
			if (rk[i] > rk[best])
				best = i;
		struct fs3_peer *p = use[best];
		uint64_t k = rk[best];
		use[best] = use[t], rk[best] = rk[t];
		use[t] = p, rk[t] = k;
		dsec_buf_reset(out);
		if ((r = fs3_peer_get(p, kind, d, out)) == 0)
			break;
	}
	for (size_t i = 0; i < n; i++)
		peer_unref(use[i]);
	return r;
}
