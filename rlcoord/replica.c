/* replica.c - copies of trajectory entries on 2 peers before the reply.
 *
 * With gossip, each sandbox's log has two replicas: the alive members
 * that rank first for its id (rendezvous hashing of the member's name and
 * the id, so every node picks the same two and a member's death moves
 * only its own share).  The loop picks them when a batch starts
 * (rlc_replica_pick); the writer thread sends each peer its entries of
 * the batch in one tlog_append request, asynchronously, syncs its own
 * journal meanwhile, then waits for the peers (at most REPLICA_WAIT s).
 * A peer that does not acknowledge is counted (info's under_replicated)
 * and the reply goes out on this node's disk alone: an entry is never
 * held back for long by a sick peer.  A peer keeps the entries in its own
 * journal and as TRAJECTORY_DIR/ID.log, as the owner does (the id names
 * the owner: no log of the peer's own is touched); `trajectory` with
 * replica: true reads that copy where it is asked, so the log of a dead
 * node's sandbox is read from a peer.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "dsec.h"
#include "log.h"
#include "ops.h"
#include "proto.h"
#include "rlc.h"
#include "rlc-int.h"

#define REPLICA_WAIT 2.0		/* seconds a batch waits for its peers */
#define APPEND_MAX 4096			/* records in one tlog_append */

static uint64_t rank_of(const char *member, const char *id)
{
	uint64_t h = dsec_fnv1a(DSEC_FNV1A_INIT, member, strlen(member) + 1);
	return dsec_mix64(dsec_fnv1a(h, id, strlen(id) + 1));
}

void rlc_replica_pick(struct dsecd *d, const char *id, char *urls[RLC_REPLICAS])
{
	uint64_t best[RLC_REPLICAS] = { 0 };
	const struct dsecd_member *pick[RLC_REPLICAS] = { NULL };

	for (size_t i = 0; i < RLC_REPLICAS; i++)
		urls[i] = NULL;
	if (!d->gossip)
		return;
	for (size_t i = 0; i < d->nmembers; i++) {
		const struct dsecd_member *m = &d->members[i];
		if (m->state != DSECD_MEMBER_ALIVE || !m->url)
			continue;
		uint64_t r = rank_of(m->name, id);
		for (size_t k = 0; k < RLC_REPLICAS; k++)
			if (!pick[k] || r > best[k]) {
				for (size_t j = RLC_REPLICAS - 1; j > k; j--) {
					best[j] = best[j - 1];
					pick[j] = pick[j - 1];
				}
				best[k] = r;
				pick[k] = m;
				break;
			}
	}
	for (size_t k = 0; k < RLC_REPLICAS; k++)
		if (pick[k])
			urls[k] = xstrdup(pick[k]->url);
}

/* The writer's client of url (connected on first use, kept). */
static struct dsec_client *client_of(struct rlc *rl, const char *url)
{
	struct dsec_err err;

	for (size_t i = 0; i < rl->npeers; i++)
		if (!strcmp(rl->peers[i].url, url))
			return rl->peers[i].c;
	if (rl->npeers == RLC_PEER_CLIENTS) {	/* the oldest goes */
		dsec_close(rl->peers[0].c);
		free(rl->peers[0].url);
		memmove(&rl->peers[0], &rl->peers[1], (rl->npeers - 1) * sizeof(rl->peers[0]));
		rl->npeers--;
	}
	static const struct dsec_connect_opts lazy = { .lazy = true };
	struct dsec_tls tls = { .ca = rl->tls_ca, .cert = rl->tls_cert };
	struct dsec_client *c = NULL;
	dsec_err_clear(&err);
	if (dsec_connect_tls(&c, url, &lazy, &tls, &err) < 0)
		return NULL;
	rl->peers[rl->npeers].url = xstrdup(url);
	rl->peers[rl->npeers].c = c;
	rl->npeers++;
	return c;
}

/* Sends each peer of the batch its entries; the number of calls in *n
 * (their completions come to rl->cq). */
static void send_all(struct rlc *rl, const char **urls, size_t nurls, size_t *n)
{
	*n = 0;
	for (size_t u = 0; u < nurls; u++) {
		struct dsec_pk p;
		size_t count = 0, len;
		struct dsec_err err;

		dsec_pk_init(&p);
		dsec_pk_request_begin(&p, "tlog_append");
		dsec_pk_str(&p, "records");
		dsec_pk_array_begin(&p);
		for (struct rlc_ent *e = rl->batch; e && count < APPEND_MAX; e = e->next)
			for (size_t k = 0; k < RLC_REPLICAS; k++)
				if (e->peer[k] && !strcmp(e->peer[k], urls[u])) {
					dsec_pk_map_begin(&p);
					dsec_pk_kv_str(&p, "name", e->log->name);
					dsec_pk_kv_u64(&p, "off", e->off);
					dsec_pk_kv_bin(&p, "rec", e->log->wbuf.data + e->boff, e->len);
					dsec_pk_end(&p);
					count++;
				}
		dsec_pk_end(&p);
		dsec_pk_end(&p);
		void *frame = dsec_pk_detach(&p, &len);
		struct dsec_client *c = client_of(rl, urls[u]);
		dsec_err_clear(&err);
		void *tag = (void *)(uintptr_t)((rl->batch_seq << 12) | u);
		if (c && dsec_call_async(c, rl->cq, frame, len, REPLICA_WAIT, tag, NULL, &err) == 0)
			(*n)++;
		else
			snprintf(rl->peer_err, sizeof(rl->peer_err), "%s: %s", urls[u],
				 c ? err.msg : "cannot connect");
		free(frame);
	}
}

void rlc_replicate_start(struct rlc *rl, const char ***urls_out, size_t *nurls, size_t *ncalls)
{
	const char **urls = NULL;
	size_t n = 0;

	*urls_out = NULL;
	*nurls = *ncalls = 0;
	rl->batch_seq++;
	if (!rl->cq)
		return;
	for (struct rlc_ent *e = rl->batch; e; e = e->next)
		for (size_t k = 0; k < RLC_REPLICAS; k++) {
			if (!e->peer[k])
				continue;
			size_t i;
			for (i = 0; i < n && strcmp(urls[i], e->peer[k]); i++)
				;
			if (i == n && n < 4096) {
				urls = xrealloc(urls, (n + 1) * sizeof(*urls));
				urls[n++] = e->peer[k];
			}
		}
	if (!n)
		return;
	rl->peer_failed = xcalloc(n, sizeof(*rl->peer_failed));
	rl->answered = xcalloc(n, sizeof(*rl->answered));
	send_all(rl, urls, n, ncalls);
	*urls_out = urls;
	*nurls = n;
}

void rlc_replicate_wait(struct rlc *rl, const char **urls, size_t nurls, size_t ncalls)
{
	uint64_t deadline = dsec_now_ns() + (uint64_t)((REPLICA_WAIT + 0.5) * 1e9);

	while (ncalls) {
		struct dsec_completion cmp;
		struct dsec_err err;

		if (dsec_cq_next(rl->cq, &cmp) == -EAGAIN) {
			uint64_t now = dsec_now_ns();
			if (now >= deadline)
				break;	/* the calls end on their own wait; their
					 * completions are dropped next time */
			struct pollfd pfd = { .fd = dsec_cq_fd(rl->cq), .events = POLLIN };
			poll(&pfd, 1, (int)((deadline - now) / 1000000) + 1);
			continue;
		}
		uintptr_t tag = (uintptr_t)cmp.tag;
		if ((tag >> 12) != (rl->batch_seq & (UINTPTR_MAX >> 12))) {
			/* a late one of a batch that gave up on it */
			dsec_completion_free(&cmp);
			continue;
		}
		ncalls--;
		size_t u = tag & 0xfff;
		bool ok = cmp.rc == 0 && u < nurls;
		struct dsec_client *c = ok ? client_of(rl, urls[u]) : NULL;
		if (ok) {
			dsec_err_clear(&err);
			ok = c && dsec_reply_check(c, cmp.reply, cmp.reply_len, &err) == 0;
			if (!ok)
				snprintf(rl->peer_err, sizeof(rl->peer_err), "%s: %s", urls[u], err.msg);
		}
		if (u < nurls)
			rl->answered[u] = ok;
		dsec_completion_free(&cmp);
	}
	/* What did not answer in time counts as failed. */
	for (size_t u = 0; u < nurls; u++)
		if (!rl->answered[u])
			rl->peer_failed[u] = true;
	for (struct rlc_ent *e = rl->batch; e; e = e->next) {
		unsigned copies = 0;
		for (size_t k = 0; k < RLC_REPLICAS; k++) {
			if (!e->peer[k])
				continue;
			for (size_t u = 0; u < nurls; u++)
				if (!strcmp(urls[u], e->peer[k]) && !rl->peer_failed[u])
					copies++;
		}
		e->copies = copies;
	}
	free(rl->peer_failed);
	rl->peer_failed = NULL;
	free(rl->answered);
	rl->answered = NULL;
	free(urls);
}

/* ---- the peer's side: tlog_append -------------------------------------------- */

/* One record of a tlog_append: 0, or -errno (err may be NULL). */
static int record(const msgpack_object *m, char **name, uint64_t *off, const void **rec,
		  size_t *len, struct dsec_err *err)
{
	int rc;

	if (m->type != MSGPACK_OBJECT_MAP)
		return -EINVAL;
	if ((rc = dsec_get_str(m, "name", name, err)) < 0 ||
	    (rc = dsec_get_u64(m, "off", off, err)) < 0 ||
	    (rc = dsec_get_bin(m, "rec", 64u << 20, rec, len, err)) < 0)
		return rc;
	return 0;
}

struct append {
	struct dsecd_req *r;
	struct rlc *rl;
	size_t n;
	const msgpack_object *records;
	int rc;
	char err[160];
};

static void append_work(void *arg)
{
	struct append *a = arg;
	struct rlc *rl = a->rl;

	for (uint32_t i = 0; i < a->records->via.array.size; i++) {
		_cleanup_free_ char *name = NULL;
		const void *rec;
		size_t len;
		uint64_t off;
		if (record(&a->records->via.array.ptr[i], &name, &off, &rec, &len, NULL) == 0)
			rlc_journal_add(rl->journal, name, off, rec, len);
	}
	if ((a->rc = rlc_journal_commit(rl->journal)) < 0) {
		snprintf(a->err, sizeof(a->err), "cannot write the journal: %s", strerror(-a->rc));
		return;
	}
	for (uint32_t i = 0; i < a->records->via.array.size; i++) {
		_cleanup_free_ char *name = NULL;
		const void *rec;
		size_t len;
		uint64_t off;
		if (record(&a->records->via.array.ptr[i], &name, &off, &rec, &len, NULL) < 0)
			continue;
		int fd = openat(rlc_journal_dirfd(rl->journal), name, O_WRONLY | O_CREAT | O_CLOEXEC,
				0600);
		if (fd >= 0) {
			(void)!rlc_pwrite_full(fd, rec, len, off);
			close(fd);
		}
		rlc_journal_mark(rl->journal, name);
		a->n++;
	}
}

static void append_done(void *arg)
{
	struct append *a = arg;
	struct dsecd_req *r = a->r;
	struct dsec_err err;
	struct dsec_pk p;

	r->d->ops_inflight--;
	a->rl->replica_entries += a->n;
	if (a->rc < 0) {
		dsec_err_setc(&err, DSEC_E_INTERNAL, -a->rc, "%s", a->err);
		reply_err(r, &err);
	} else {
		dsec_pk_init(&p);
		dsec_pk_reply_begin(&p);
		dsec_pk_kv_u64(&p, "written", a->n);
		dsec_pk_end(&p);
		req_complete(r, &p);
	}
	free(a);
}

void op_tlog_append(struct dsecd_req *r)
{
	struct rlc *rl = r->d->rlc;
	const msgpack_object *recs = dsec_map_get(r->msg.root, "records");
	struct dsec_err err;

	dsec_err_clear(&err);
	if (!rl) {
		dsec_err_setc(&err, DSEC_E_UNSUPPORTED, ENOTSUP, "node '%s' keeps no trajectories",
			      r->d->conf.node);
		return reply_err(r, &err);
	}
	if (!recs || recs->type != MSGPACK_OBJECT_ARRAY || recs->via.array.size > APPEND_MAX) {
		dsec_err_setc(&err, DSEC_E_BAD_REQUEST, EINVAL, "tlog_append needs 'records', an "
			      "array of at most %d maps", APPEND_MAX);
		return reply_err(r, &err);
	}
	for (uint32_t i = 0; i < recs->via.array.size; i++) {
		_cleanup_free_ char *name = NULL;
		const void *rec;
		size_t len;
		uint64_t off;
		if (record(&recs->via.array.ptr[i], &name, &off, &rec, &len, &err) < 0 ||
		    !rlc_log_name_ok(r->d, name) || off > (1ull << 40)) {
			dsec_err_setc(&err, DSEC_E_INVALID, EINVAL, "record %u of tlog_append is not a "
				      "trajectory entry (name ID.log of another node's sandbox, off, "
				      "rec)", i);
			return reply_err(r, &err);
		}
	}
	struct append *a = xcalloc(1, sizeof(*a));
	a->r = r;
	a->rl = rl;
	a->records = recs;
	if (dsecd_pool_submit(rl->writer, append_work, append_done, a) < 0) {
		free(a);
		dsec_err_setc(&err, DSEC_E_INTERNAL, EAGAIN, "cannot queue the entries");
		return reply_err(r, &err);
	}
	r->d->ops_inflight++;
}
