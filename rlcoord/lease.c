/* lease.c - trainer leases: a crashed trainer's sandboxes pause, then go.
 *
 * A trainer opens a lease (lease_open: timeout, grace, labels) and names
 * it in its creates ("lease": ID); those sandboxes belong to it (and keep
 * a trajectory unless the create says trajectory: false).  The trainer
 * renews it (lease_renew) more often than its timeout.  A lease not
 * renewed for its timeout lapses: every sandbox of it is paused (a paused
 * sandbox's TTLs stop) and kept for the grace; a renew within the grace
 * makes it active again, and its sandboxes resume on their first use (or
 * all at once with lease_resume).  When the grace ends its sandboxes are
 * destroyed and the lease is gone: no sandbox outlives a crashed trainer
 * by more than timeout + grace.  lease_pause, lease_resume and lease_close
 * (destroy: true by default) act on all of a lease's sandboxes in one
 * call: "my job was preempted" and Ctrl-C cleanup.  A lease is the node's
 * that opened it (its id is NODE:lHEX), as its sandboxes are.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "daemon.h"
#include "dsec.h"
#include "log.h"
#include "ops.h"
#include "proto.h"
#include "rlc.h"
#include "rlc-int.h"

#define TIMEOUT_DEFAULT 30.0
#define GRACE_DEFAULT 600.0

static const char *const state_names[] = { "active", "lapsed" };

struct rlc_lease *rlc_lease_find(struct rlc *rl, const char *id)
{
	for (struct rlc_lease *L = rl ? rl->leases : NULL; L; L = L->next)
		if (!strcmp(L->id, id))
			return L;
	return NULL;
}

/* An op's lease: found by its 'id', or r answered not_found. */
static struct rlc_lease *get_lease(struct dsecd_req *r)
{
	_cleanup_free_ char *id = NULL;
	struct rlc_lease *L;
	struct dsec_err err;
	int rc;

	dsec_err_clear(&err);
	if ((rc = dsec_get_str(r->msg.root, "id", &id, &err)) < 0) {
		if (rc == -ENOENT)
			dsec_err_setc(&err, DSEC_E_BAD_REQUEST, EINVAL, "%s needs field 'id' (the "
				      "lease's)", dsecd_ops[r->op].name);
		reply_err(r, &err);
		return NULL;
	}
	if (!(L = rlc_lease_find(r->d->rlc, id))) {
		dsec_err_setc(&err, DSEC_E_NOT_FOUND, ENOENT, "no lease '%.200s' on node '%s'", id,
			      r->d->conf.node);
		reply_err(r, &err);
	}
	return L;
}

/* The sandboxes of L now (refs taken; the caller drops them). */
static struct dsecd_sb **members(struct dsecd *d, struct rlc_lease *L, size_t *n)
{
	struct dsecd_sb **v = xcalloc(L->nsb ? L->nsb : 1, sizeof(*v));

	*n = 0;
	for (struct dsecd_sb *sb = d->all; sb && *n < L->nsb; sb = sb->anext)
		if (sb->lease == L && sb->state != SB_DESTROYING) {
			dsecd_sb_ref(sb);
			v[(*n)++] = sb;
		}
	return v;
}

static void members_put(struct dsecd *d, struct dsecd_sb **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dsecd_sb_unref(d, v[i]);
	free(v);
}

/* ---- one op on every sandbox of a lease ---------------------------------------- */

struct fan {
	struct dsecd_req *r;		/* the lease op to answer when all are done, or NULL */
	char *lease;			/* the lease's id, for the log (it may go first) */
	const char *what;		/* "pause", "resume" */
	unsigned left, ok, failed;
};

static void fan_reply(struct fan *f)
{
	struct dsec_pk p;

	if (!f->r && f->failed)
		log_warn("lease %s: %s failed on %u of its %u sandboxes", f->lease, f->what,
			 f->failed, f->ok + f->failed);
	if (f->r) {
		dsec_pk_init(&p);
		dsec_pk_reply_begin(&p);
		dsec_pk_kv_u64(&p, "sandboxes", f->ok + f->failed);
		dsec_pk_kv_u64(&p, "done", f->ok);
		dsec_pk_kv_u64(&p, "failed", f->failed);
		dsec_pk_end(&p);
		req_complete(f->r, &p);
	}
	free(f->lease);
	free(f);
}

static void fan_one(void *arg, const void *reply, size_t len, enum dsec_code code)
{
	struct fan *f = arg;

	if (code == DSEC_E_OK)
		f->ok++;
	else
		f->failed++;
	if (--f->left == 0)
		fan_reply(f);
}

/* Sends op to every sandbox of L as the daemon's own requests (gated and
 * logged as a client's); r (or nobody) is answered when all are done. */
static void fan_out(struct dsecd *d, struct rlc_lease *L, const char *op, struct dsecd_req *r)
{
	struct fan *f = xcalloc(1, sizeof(*f));
	size_t n;
	struct dsecd_sb **v = members(d, L, &n);

	f->r = r;
	f->lease = xstrdup(L->id);
	f->what = op;
	f->left = (unsigned)n + 1;	/* one for the loop: no reply before it ends */
	for (size_t i = 0; i < n; i++) {
		struct dsec_pk p;
		size_t len;

		dsec_pk_init(&p);
		dsec_pk_request(&p, op, 1);
		dsec_pk_kv_str(&p, "id", v[i]->id);
		void *frame = dsec_pk_detach(&p, &len);
		dsecd_request(d, frame, len, fan_one, f);
	}
	members_put(d, v, n);
	if (--f->left == 0)
		fan_reply(f);
}

/* ---- the lease's life ------------------------------------------------------ */

static void lease_free(struct rlc *rl, struct rlc_lease *L)
{
	struct dsecd *d = rl->d;

	for (struct rlc_lease **pp = &rl->leases; *pp; pp = &(*pp)->next)
		if (*pp == L) {
			*pp = L->next;
			break;
		}
	ev_timer_stop(d->loop, &L->timer);
	for (struct dsecd_sb *sb = d->all; sb; sb = sb->anext)
		if (sb->lease == L)
			sb->lease = NULL;
	rl->nleases--;
	dsec_strv_free(L->labels);
	free(L->id);
	free(L);
}

/* Destroys L's sandboxes (why is logged) and L. */
static void lease_end(struct rlc *rl, struct rlc_lease *L, const char *why)
{
	struct dsecd *d = rl->d;
	size_t n;
	struct dsecd_sb **v = members(d, L, &n);

	log_info("lease %s: %s: destroying its %zu sandboxes", L->id, why, n);
	for (size_t i = 0; i < n; i++)
		if (v[i]->state == SB_READY || v[i]->state == SB_FAILED)
			dsecd_sb_destroy(d, v[i], why, NULL);
	members_put(d, v, n);
	lease_free(rl, L);
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct rlc_lease *L = dsec_container_of(w, struct rlc_lease, timer);
	struct rlc *rl = L->rl;

	if (L->state == RLC_LEASE_ACTIVE) {
		L->state = RLC_LEASE_LAPSED;
		L->lapses++;
		rl->leases_lapsed++;
		L->lapsed_at = ev_now(loop);
		log_info("lease %s lapsed (not renewed for %.1f s): pausing its %" PRIu64
			 " sandboxes, kept for %.1f s", L->id, L->timeout, L->nsb, L->grace);
		ev_timer_stop(loop, w);
		ev_timer_set(w, L->grace, 0);
		ev_timer_start(loop, w);
		fan_out(rl->d, L, "pause", NULL);
		return;
	}
	rl->leases_expired++;
	lease_end(rl, L, "its lease's grace ended");
}

static void renew(struct dsecd *d, struct rlc_lease *L)
{
	L->renewed = ev_now(d->loop);
	if (L->state == RLC_LEASE_LAPSED) {
		log_info("lease %s renewed after %.1f s lapsed: its sandboxes resume on first use",
			 L->id, ev_now(d->loop) - L->lapsed_at);
		L->state = RLC_LEASE_ACTIVE;
		ev_timer_stop(d->loop, &L->timer);
	}
	L->timer.repeat = L->timeout;
	ev_timer_again(d->loop, &L->timer);
}

static void pack_lease(struct dsecd *d, struct rlc_lease *L, struct dsec_pk *p, bool ids)
{
	dsec_pk_kv_str(p, "id", L->id);
	dsec_pk_kv_str(p, "state", state_names[L->state]);
	dsec_pk_kv_double(p, "timeout", L->timeout);
	dsec_pk_kv_double(p, "grace", L->grace);
	dsec_pk_kv_env(p, "labels", (const char *const *)L->labels);
	dsec_pk_kv_double(p, "opened", L->opened_wall);
	dsec_pk_kv_double(p, "left", ev_timer_remaining(d->loop, &L->timer));
	dsec_pk_kv_u64(p, "lapses", L->lapses);
	dsec_pk_kv_u64(p, "sandboxes", L->nsb);
	if (ids) {
		size_t n, paused = 0;
		struct dsecd_sb **v = members(d, L, &n);
		dsec_pk_str(p, "ids");
		dsec_pk_array_begin(p);
		for (size_t i = 0; i < n; i++) {
			dsec_pk_str(p, v[i]->id);
			paused += v[i]->paused;
		}
		dsec_pk_end(p);
		dsec_pk_kv_u64(p, "paused", paused);
		members_put(d, v, n);
	}
}

/* ---- ops ------------------------------------------------------------------- */

void op_lease_open(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	struct rlc *rl = d->rlc;
	double timeout = TIMEOUT_DEFAULT, grace = GRACE_DEFAULT;
	char **labels = NULL;
	struct dsec_err err;
	struct dsec_pk p;

	dsec_err_clear(&err);
	if (!rl) {
		dsec_err_setc(&err, DSEC_E_UNSUPPORTED, ENOTSUP, "node '%s' keeps no leases",
			      d->conf.node);
		return reply_err(r, &err);
	}
	if (dsec_get_seconds_opt(r->msg.root, "timeout", &timeout, &err) < 0 ||
	    dsec_get_seconds_opt(r->msg.root, "grace", &grace, &err) < 0 ||
	    dsecd_labels_get(r->msg.root, &labels, &err) < 0)
		return reply_err(r, &err);
	if (timeout < 0.1 || timeout > d->conf.max_ttl || grace > d->conf.max_ttl) {
		dsec_strv_free(labels);
		dsec_err_setc(&err, DSEC_E_INVALID, EINVAL, "a lease's timeout is 0.1 s to max_ttl "
			      "(%.0f s) and its grace at most max_ttl", d->conf.max_ttl);
		return reply_err(r, &err);
	}
	struct rlc_lease *L = xcalloc(1, sizeof(*L));
	L->rl = rl;
	L->id = xasprintf("%s:l%016" PRIx64, d->conf.node, d->next_serial++);
	L->timeout = timeout;
	L->grace = grace;
	L->labels = labels;
	L->opened_wall = ev_now(d->loop) - d->started + d->started_wall;
	ev_init(&L->timer, timer_cb);
	L->next = rl->leases;
	rl->leases = L;
	rl->nleases++;
	renew(d, L);
	log_info("lease %s opened (timeout %.1f s, grace %.1f s)", L->id, timeout, grace);
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	pack_lease(d, L, &p, false);
	dsec_pk_end(&p);
	req_complete(r, &p);
}

void op_lease(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	struct rlc_lease *L = get_lease(r);
	struct dsec_err err;
	struct dsec_pk p;
	bool destroy = true;

	if (!L)
		return;
	dsec_err_clear(&err);
	switch (r->op) {
	case DSEC_OP_LEASE_RENEW:
	case DSEC_OP_LEASE_INFO:
		if (r->op == DSEC_OP_LEASE_RENEW)
			renew(d, L);
		dsec_pk_init(&p);
		dsec_pk_reply_begin(&p);
		pack_lease(d, L, &p, r->op == DSEC_OP_LEASE_INFO);
		dsec_pk_end(&p);
		return req_complete(r, &p);
	case DSEC_OP_LEASE_PAUSE:
		return fan_out(d, L, "pause", r);
	case DSEC_OP_LEASE_RESUME:
		renew(d, L);
		return fan_out(d, L, "resume", r);
	case DSEC_OP_LEASE_CLOSE: {
		if (dsec_get_bool_opt(r->msg.root, "destroy", &destroy, &err) < 0)
			return reply_err(r, &err);
		uint64_t n = L->nsb;
		if (destroy) {
			lease_end(d->rlc, L, "its lease was closed");
		} else {
			log_info("lease %s closed: its %" PRIu64 " sandboxes stay", L->id, n);
			lease_free(d->rlc, L);
		}
		dsec_pk_init(&p);
		dsec_pk_reply_begin(&p);
		dsec_pk_kv_u64(&p, destroy ? "destroyed" : "kept", n);
		dsec_pk_end(&p);
		return req_complete(r, &p);
	}
	default:
		dsec_err_setc(&err, DSEC_E_INTERNAL, EINVAL, "not a lease op");
		return reply_err(r, &err);
	}
}

int rlc_lease_create(struct dsecd_req *r, bool *trajectory, struct dsec_err *err)
{
	struct dsecd *d = r->d;
	_cleanup_free_ char *id = NULL;
	const char *colon;
	int rc;

	if ((rc = dsec_get_str_opt(r->msg.root, "lease", &id, err)) < 0 || !id)
		return rc;
	if (!(r->lease = rlc_lease_find(d->rlc, id))) {
		colon = strchr(id, ':');
		if (colon && ((size_t)(colon - id) != strlen(d->conf.node) ||
			      strncmp(id, d->conf.node, (size_t)(colon - id))))
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "lease '%.200s' is node "
					     "'%.*s''s: send the creates in it there", id,
					     (int)(colon - id) > 64 ? 64 : (int)(colon - id), id);
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT, "no lease '%.200s' on node "
				     "'%s' (closed, or its grace ended)", id, d->conf.node);
	}
	/* A create in it is the trainer, alive. */
	renew(d, r->lease);
	if (!dsec_has(r->msg.root, "trajectory"))
		*trajectory = true;
	return 0;
}

void rlc_lease_join(struct dsecd *d, struct dsecd_sb *sb, struct rlc_lease *L)
{
	if (!L || sb->lease)
		return;
	sb->lease = L;
	L->nsb++;
}

void rlc_sb_gone(struct dsecd *d, struct dsecd_sb *sb)
{
	if (sb->lease) {
		sb->lease->nsb--;
		sb->lease = NULL;
	}
	rlc_token_gone(d, sb);
}

void rlc_leases_free(struct rlc *rl)
{
	while (rl->leases)
		lease_free(rl, rl->leases);
}
