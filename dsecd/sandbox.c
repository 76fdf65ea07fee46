/* sandbox.c - the sandbox table: ids that name the node, TTLs, lifetime.
 *
 * Ids are "NODE:SERIAL" with SERIAL 16 hex digits.  Serials start at the
 * daemon's start time in microseconds and count up, so an id is not reused
 * by a restarted daemon and any node can tell the owner from the id alone.
 * Lifetime: the table holds one ref; each request working on a sandbox holds
 * one more.  Destroy takes it out of the table at once (new requests get
 * not_found), then the backend destroys it; the struct is freed from an
 * ev_prepare hook once the last ref is gone, never inside a callback chain.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "daemon.h"
#include "log.h"
#include "rlc.h"

static size_t bucket_of(const struct dsecd *d, uint64_t serial)
{
	serial ^= serial >> 29;
	serial *= 0xbf58476d1ce4e5b9ull;
	serial ^= serial >> 32;
	return (size_t)serial & (d->nbuckets - 1);
}

static void sb_free(struct dsecd *d, struct dsecd_sb *sb)
{
	if (sb->aprev)
		sb->aprev->anext = sb->anext;
	else
		d->all = sb->anext;
	if (sb->anext)
		sb->anext->aprev = sb->aprev;
	free(sb->id);
	free(sb->runtime);
	free(sb->image);
	dsec_strv_free(sb->env);
	if (sb->labels)
		dsec_strv_free(sb->labels);
	free(sb->cwd);
	free(sb->lost);
	rlc_log_drop(d, sb);
	free(sb->token);
	dsec_strv_free(sb->grade_layers);
	rlc_watch_free(sb->watch_before, dsec_strv_len((const char *const *)sb->watch));
	dsec_strv_free(sb->watch);
	free(sb->spec_frame);
	free(sb->be_id);
	dsecd_stages_drop(sb);
	free(sb);
}

static void reap_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct dsecd *d = dsec_container_of(w, struct dsecd, reaper);

	while (d->dead) {
		struct dsecd_sb *sb = d->dead;
		d->dead = sb->hnext;
		sb_free(d, sb);
	}
}

void dsecd_sb_table_free(struct dsecd *d)
{
	ev_invoke(d->loop, &d->reaper, EV_PREPARE);
	while (d->all) {
		struct dsecd_sb *sb = d->all;

		ev_timer_stop(d->loop, &sb->ttl_timer);
		ev_timer_stop(d->loop, &sb->idle_timer);
		dsecd_image_release(d, sb->img);
		dsecd_image_release(d, sb->grade_img);
		sb_free(d, sb);
	}
	free(d->buckets);
	d->buckets = NULL;
	d->nsandboxes = 0;
}

void dsecd_sb_table_init(struct dsecd *d)
{
	struct timeval tv;

	d->nbuckets = 1024;
	d->buckets = xcalloc(d->nbuckets, sizeof(*d->buckets));
	gettimeofday(&tv, NULL);
	d->next_serial = (uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec;
	ev_prepare_init(&d->reaper, reap_cb);
	ev_prepare_start(d->loop, &d->reaper);
	ev_unref(d->loop);
}

static void table_grow(struct dsecd *d)
{
	struct dsecd_sb **old = d->buckets;
	size_t n = d->nbuckets;

	d->nbuckets *= 2;
	d->buckets = xcalloc(d->nbuckets, sizeof(*d->buckets));
	for (size_t i = 0; i < n; i++) {
		while (old[i]) {
			struct dsecd_sb *sb = old[i];
			old[i] = sb->hnext;
			size_t b = bucket_of(d, sb->serial);
			sb->hnext = d->buckets[b];
			d->buckets[b] = sb;
		}
	}
	free(old);
}

static void table_remove(struct dsecd *d, struct dsecd_sb *sb)
{
	for (struct dsecd_sb **p = &d->buckets[bucket_of(d, sb->serial)]; *p; p = &(*p)->hnext) {
		if (*p == sb) {
			*p = sb->hnext;
			sb->hnext = NULL;
			d->nsandboxes--;
			sb->be->sandboxes--;
			d->mem_committed -= sb->mem;
			dsecd_image_use(d, sb->image, -1);
			return;
		}
	}
	DSEC_BUG("sandbox %s not in the table", sb->id);
}

static void ttl_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct dsecd_sb *sb = dsec_container_of(w, struct dsecd_sb, ttl_timer);

	dsecd_sb_destroy(sb->d, sb, "ttl expired", NULL);
}

static void idle_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct dsecd_sb *sb = dsec_container_of(w, struct dsecd_sb, idle_timer);

	if (sb->running || sb->paused || sb->switching) {
		/* A long command is not idleness, nor is a pause (the trainer
		 * that paused it comes back for it): look again later. */
		ev_timer_again(loop, w);
		return;
	}
	dsecd_sb_destroy(sb->d, sb, "idle ttl expired", NULL);
}

static void lost_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct dsecd_sb *sb = dsec_container_of(w, struct dsecd_sb, ttl_timer);

	dsecd_sb_destroy(sb->d, sb, sb->pooled ? "lost in its warm pool" :
			 "lost, its grace is over", NULL);
}

void dsecd_sb_lost(struct dsecd *d, struct dsecd_sb *sb, const char *why)
{
	if (sb->state != SB_READY)
		return;	/* a create fails by itself; a sandbox being destroyed is going */
	sb->state = SB_FAILED;
	sb->lost = xstrdup(why);
	log_warn("sandbox %s is lost: %s; destroyed in %.0f s unless a client does it first",
		 sb->id, why, sb->pooled ? 0 : d->conf.lost_grace);
	/* The TTL timer becomes the grace's: destroy stops it as ever.  A
	 * pooled sandbox no request can name goes at once, but not from in
	 * here (the backend's callback chain). */
	ev_timer_stop(d->loop, &sb->ttl_timer);
	ev_timer_stop(d->loop, &sb->idle_timer);
	if (sb->pooled)
		dsecd_warm_forget(d, sb);	/* no create may take it meanwhile */
	ev_set_cb(&sb->ttl_timer, lost_cb);
	ev_timer_set(&sb->ttl_timer, sb->pooled ? 0 : d->conf.lost_grace, 0);
	ev_timer_start(d->loop, &sb->ttl_timer);
}

int dsecd_sb_lost_err(const struct dsecd_sb *sb, struct dsec_err *err)
{
	return dsec_err_setc(err, DSEC_E_SANDBOX_LOST, EOWNERDEAD,
			     "sandbox '%s' is lost: %s", sb->id, sb->lost ? sb->lost : "its init died");
}

struct dsecd_sb *dsecd_sb_new(struct dsecd *d, struct dsecd_backend *be)
{
	struct dsecd_sb *sb = xcalloc(1, sizeof(*sb));

	sb->d = d;
	sb->serial = d->next_serial++;
	sb->id = xasprintf("%s:%016" PRIx64, d->conf.node, sb->serial);
	sb->be = be;
	sb->state = SB_CREATING;
	sb->refs = 1;
	sb->created = ev_now(d->loop) - d->started + d->started_wall;
	sb->last_used = ev_now(d->loop);
	ev_init(&sb->ttl_timer, ttl_cb);
	ev_init(&sb->idle_timer, idle_cb);
	sb->anext = d->all;
	if (d->all)
		d->all->aprev = sb;
	d->all = sb;
	if (d->nsandboxes >= d->nbuckets)
		table_grow(d);
	size_t b = bucket_of(d, sb->serial);
	sb->hnext = d->buckets[b];
	d->buckets[b] = sb;
	d->nsandboxes++;
	be->sandboxes++;
	return sb;
}

struct dsecd_sb *dsecd_sb_find(struct dsecd *d, const char *id, struct dsec_err *err)
{
	const char *colon = strrchr(id, ':');
	size_t nlen = strlen(d->conf.node);
	char *end;

	if (!colon || strlen(colon + 1) != 16 ||
	    strspn(colon + 1, "0123456789abcdef") != 16) {
		dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
			      "invalid sandbox id '%.64s': expected NODE:SERIAL", id);
		return NULL;
	}
	if ((size_t)(colon - id) != nlen || memcmp(id, d->conf.node, nlen)) {
		dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT,
			      "sandbox '%.128s' belongs to node '%.*s', not to '%s'", id,
			      (int)(colon - id) > 64 ? 64 : (int)(colon - id), id, d->conf.node);
		return NULL;
	}
	errno = 0;
	uint64_t serial = strtoull(colon + 1, &end, 16);
	if (errno || *end) {
		dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "invalid sandbox id '%.128s'", id);
		return NULL;
	}
	for (struct dsecd_sb *sb = d->buckets[bucket_of(d, serial)]; sb; sb = sb->hnext)
		if (sb->serial == serial && !sb->pooled)
			return sb;
	dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT, "no sandbox '%.128s'", id);
	return NULL;
}

struct dsecd_sb *dsecd_sb_lookup(struct dsecd *d, const char *id)
{
	const char *colon = strrchr(id, ':');
	uint64_t serial;

	if (!colon)
		return NULL;
	serial = strtoull(colon + 1, NULL, 16);
	for (struct dsecd_sb *sb = d->buckets[bucket_of(d, serial)]; sb; sb = sb->hnext)
		if (sb->serial == serial && !strcmp(sb->id, id))
			return sb;
	return NULL;
}

void dsecd_sb_ready(struct dsecd *d, struct dsecd_sb *sb)
{
	sb->state = SB_READY;
	if (sb->ttl > 0) {
		ev_timer_set(&sb->ttl_timer, sb->ttl, 0);
		ev_timer_start(d->loop, &sb->ttl_timer);
	}
	if (sb->idle_ttl > 0) {
		sb->idle_timer.repeat = sb->idle_ttl;
		ev_timer_again(d->loop, &sb->idle_timer);
	}
}

void dsecd_sb_paused(struct dsecd *d, struct dsecd_sb *sb)
{
	if (sb->state != SB_READY)
		return;		/* a lost one's timer is its lost_grace */
	if (sb->paused && ev_is_active(&sb->ttl_timer)) {
		sb->ttl_left = ev_timer_remaining(d->loop, &sb->ttl_timer);
		if (sb->ttl_left <= 0)
			sb->ttl_left = 0.001;
		ev_timer_stop(d->loop, &sb->ttl_timer);
	} else if (!sb->paused && sb->ttl_left > 0) {
		ev_timer_set(&sb->ttl_timer, sb->ttl_left, 0);
		ev_timer_start(d->loop, &sb->ttl_timer);
		sb->ttl_left = 0;
	}
}

void dsecd_sb_touch(struct dsecd *d, struct dsecd_sb *sb)
{
	sb->last_used = ev_now(d->loop);
	if (sb->idle_ttl > 0 && sb->state == SB_READY)
		ev_timer_again(d->loop, &sb->idle_timer);
}

void dsecd_sb_mark(struct dsecd_sb *sb, const struct dsec_exec_res *res)
{
	sb->marks.oom_kills += res->oom_killed;
	sb->marks.pids_limited += res->pids_limited;
	sb->marks.output_floods += res->out_truncated || res->err_truncated;
	sb->marks.timeouts += res->timed_out;
}

void dsecd_sb_ref(struct dsecd_sb *sb)
{
	sb->refs++;
}

void dsecd_sb_unref(struct dsecd *d, struct dsecd_sb *sb)
{
	DSEC_ASSERT(sb->refs > 0);
	if (--sb->refs)
		return;
	sb->hnext = d->dead;
	d->dead = sb;
}

static void destroyed(void *arg, int rc, const struct dsec_err *err)
{
	struct dsecd_sb *sb = arg;
	struct dsecd *d = sb->d;

	d->ops_inflight--;
	if (rc < 0)
		log_warn("destroying sandbox %s: %s", sb->id, err ? err->msg : "failed");
	else
		log_debug("sandbox %s destroyed", sb->id);
	sb->handle = NULL;
	dsecd_image_release(d, sb->img);
	sb->img = NULL;
	dsecd_image_release(d, sb->grade_img);
	sb->grade_img = NULL;
	if (sb->waiters) {
		struct dsecd_req *r = sb->waiters;
		sb->waiters = NULL;
		dsecd_req_destroyed(d, r);
	}
	dsecd_sb_unref(d, sb);
}

void dsecd_sb_destroy(struct dsecd *d, struct dsecd_sb *sb, const char *reason,
		      struct dsecd_req *waiter)
{
	struct dsec_err err;

	DSEC_ASSERT(sb->state != SB_DESTROYING);
	DSEC_ASSERT(!sb->waiters);
	log_info("destroying sandbox %s: %s", sb->id, reason);
	if (sb->pooled)
		dsecd_warm_forget(d, sb);
	sb->state = SB_DESTROYING;
	sb->waiters = waiter;
	table_remove(d, sb);
	rlc_sb_gone(d, sb);
	ev_timer_stop(d->loop, &sb->ttl_timer);
	ev_timer_stop(d->loop, &sb->idle_timer);
	dsecd_streams_drop(d, sb);
	dsecd_stages_drop(sb);
	dsec_err_clear(&err);
	if (sb->handle && sb->be->ops->destroy(sb->handle, destroyed, sb, &err) == 0) {
		d->ops_inflight++;
		return;
	}
	if (sb->handle)
		log_error("cannot destroy sandbox %s: %s", sb->id, err.msg);
	d->ops_inflight++;
	destroyed(sb, 0, NULL);
}

void dsecd_sb_foreach(struct dsecd *d, void (*fn)(struct dsecd *, struct dsecd_sb *, void *),
		      void *arg)
{
	size_t n = d->nsandboxes, i = 0;
	struct dsecd_sb **all = xcalloc(n ? n : 1, sizeof(*all));

	for (size_t b = 0; b < d->nbuckets; b++)
		for (struct dsecd_sb *sb = d->buckets[b]; sb; sb = sb->hnext)
			all[i++] = sb;
	for (i = 0; i < n; i++)
		dsecd_sb_ref(all[i]);
	for (i = 0; i < n; i++)
		fn(d, all[i], arg);
	for (i = 0; i < n; i++)
		dsecd_sb_unref(d, all[i]);
	free(all);
}
