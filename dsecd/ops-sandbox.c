/* ops-sandbox.c - a sandbox's lifecycle: create, pause and resume, net_allow, destroy. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "daemon.h"
#include "dsec.h"
#include "fs3.h"
#include "log.h"
#include "ops.h"
#include "proto.h"
#include "rlc.h"

/* Fails the request if the node cannot take another sandbox. */
int check_capacity(struct dsecd *d, struct dsec_err *err)
{
	if (d->draining) {
		d->refused_draining++;
		return dsec_err_setc(err, DSEC_E_CAPACITY, EAGAIN, "node '%s' is draining: it "
				     "takes no new sandboxes", d->conf.node);
	}
	/* Sandboxes being created are in the table already; one-shot calls
	 * hold a sandbox for their duration too. */
	if (d->nsandboxes + d->calls >= d->conf.max_sandboxes && ++d->refused_full)
		return dsec_err_setc(err, DSEC_E_CAPACITY, EAGAIN,
				     "node '%s' is at its limit of %llu sandboxes", d->conf.node,
				     (unsigned long long)d->conf.max_sandboxes);
	return 0;
}

/* Reads backend, image, runtime, env, cwd and limits (create and call). */
int parse_spec(struct dsecd_req *r, struct dsec_err *err)
{
	struct dsecd *d = r->d;
	const msgpack_object *m = r->msg.root, *lim;
	_cleanup_free_ char *backend = NULL;
	int rc;

	if ((rc = dsec_get_str_opt(m, "backend", &backend, err)) < 0)
		return rc;
	r->be = dsecd_backend_find(d, backend ? backend : d->conf.default_backend);
	if (!r->be)
		return dsec_err_setc(err, DSEC_E_NO_BACKEND, ENOENT,
				     "backend '%s' is not loaded on node '%s'",
				     backend ? backend : d->conf.default_backend, d->conf.node);
	if ((rc = dsec_get_str_opt(m, "image", &r->image, err)) < 0 ||
	    (rc = dsec_get_str_opt(m, "runtime", &r->runtime, err)) < 0 ||
	    (rc = dsec_get_env_opt(m, "env", &r->cenv, err)) < 0)
		return rc;
	if (r->op == DSEC_OP_CREATE &&
	    (rc = dsec_get_str_opt(m, "cwd", &r->ccwd, err)) < 0)
		return rc;
	if ((rc = dsec_get_strv_opt(m, "layers", &r->layers, err)) < 0)
		return rc;
	if (r->layers && !r->layers[0]) {
		dsec_strv_free(r->layers);	/* [] = none */
		r->layers = NULL;
	}
	if (r->layers) {
		if (!r->image || !*r->image)
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "field 'layers' needs an image to stack them on");
		if (!(r->be->ops->caps & DSEC_BE_CAP_LAYERS))
			return dsec_err_setc(err, DSEC_E_UNSUPPORTED, ENOTSUP,
					     "backend '%s' does not run images from layers",
					     r->be->name);
		/* Each image has a layer at least (fs3 counts them exactly). */
		if (dsec_strv_len((const char *const *)r->layers) >= FS3_STACK_MAX)
			return dsec_err_setc(err, DSEC_E_INVALID, E2BIG,
					     "field 'layers' has %zu images: a stack takes at most %d "
					     "layers", dsec_strv_len((const char *const *)r->layers),
					     FS3_STACK_MAX);
	}
	if ((rc = dsec_get_str_opt(m, "network", &r->network, err)) < 0 ||
	    (rc = dsec_get_strv_opt(m, "allow", &r->allow, err)) < 0 ||
	    (rc = dsec_get_str_opt(m, "dns", &r->dns, err)) < 0 ||
	    (rc = dsec_get_strv_opt(m, "seccomp_deny", &r->deny, err)) < 0)
		return rc;
	if (r->deny && dsec_strv_len((const char *const *)r->deny) > DSECD_MAX_DENY)
		return dsec_err_setc(err, DSEC_E_INVALID, E2BIG,
				     "seccomp_deny lists more than %d system calls", DSECD_MAX_DENY);
	lim = dsec_map_get(m, "limits");
	if (lim && lim->type != MSGPACK_OBJECT_NIL) {
		uint64_t v;
		if (lim->type != MSGPACK_OBJECT_MAP)
			return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EINVAL,
					     "field 'limits' must be a map");
		struct dsec_be_limits *l = &r->spec.limits;
		if ((rc = dsec_get_double_opt(lim, "cpus", &l->cpus, err)) < 0)
			return rc;
		if (l->cpus < 0 || l->cpus > 4096)
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "limits.cpus must be between 0 and 4096");
		if ((rc = dsec_get_u64_opt(lim, "memory", &l->memory, err)) < 0)
			return rc;
		if ((rc = dsec_get_u64_opt(lim, "disk", &l->disk, err)) < 0)
			return rc;
		v = 0;
		if ((rc = dsec_get_u64_opt(lim, "pids", &v, err)) < 0)
			return rc;
		if (v > UINT32_MAX)
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "limits.pids is too large");
		l->pids = (uint32_t)v;
		v = 0;
		if ((rc = dsec_get_u64_opt(lim, "nofile", &v, err)) < 0)
			return rc;
		if (v > UINT32_MAX)
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "limits.nofile is too large");
		l->nofile = (uint32_t)v;
		v = 0;
		if ((rc = dsec_get_u64_opt(lim, "cpu_weight", &v, err)) < 0)
			return rc;
		if (v > 10000)
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "limits.cpu_weight must be between 1 and 10000");
		r->spec.cpu_weight = (uint32_t)v;
	}
	r->spec.image = r->image;
	r->spec.runtime = r->runtime;
	r->spec.env = (const char *const *)r->cenv;
	r->spec.cwd = r->ccwd;
	r->spec.network = r->network;
	r->spec.allow = (const char *const *)r->allow;
	r->spec.dns = r->dns;
	r->spec.seccomp_deny = (const char *const *)r->deny;
	return 0;
}

/* ---- pause and resume ------------------------------------------------------
 *
 * One backend pause or resume at a time per sandbox.  While one is in
 * flight, every request that depends on the outcome (pause, resume, exec,
 * file_read, file_write) waits in sb->gate; when the backend answers they
 * all run again from the start, in order, so each sees the new state.
 * The request that started the switch gets the backend's error if it
 * failed (the others run again and may try for themselves).  exec and the
 * file operations on a paused sandbox start a resume first and wait for
 * it: paused sandboxes resume on the next request, transparently.
 */

void gate_add(struct dsecd_sb *sb, struct dsecd_req *r)
{
	if (!sb->gate)
		sb->gate_tail = &sb->gate;
	r->gnext = NULL;
	*sb->gate_tail = r;
	sb->gate_tail = &r->gnext;
}

static void switch_done(void *arg, int rc, const struct dsec_err *err)
{
	struct dsecd_sb *sb = arg;
	struct dsecd *d = sb->d;
	struct dsecd_req *q = sb->gate, *first = sb->switcher;

	d->ops_inflight--;
	sb->switching = false;
	sb->switcher = NULL;
	sb->gate = NULL;
	if (rc == 0) {
		sb->paused = !sb->paused;
		dsecd_sb_paused(d, sb);
		log_debug("sandbox %s %s", sb->id, sb->paused ? "paused" : "resumed");
		if (sb->state == SB_READY)
			dsecd_sb_touch(d, sb);
	}
	while (q) {
		struct dsecd_req *r = q;

		q = q->gnext;
		r->gnext = NULL;
		if (r == first && rc < 0)
			reply_err(r, err);
		else
			rerun(r);
	}
	dsecd_sb_unref(d, sb);
}

/* Asks the backend to pause (or resume) r->sb; r waits for the answer in
 * the gate.  Returns 0, or -errno with *err when it could not start. */
static int start_switch(struct dsecd_req *r, bool pause, struct dsec_err *err)
{
	struct dsecd_sb *sb = r->sb;
	const struct dsec_be_ops *ops = sb->be->ops;
	int (*fn)(void *, dsec_be_done_fn, void *, struct dsec_err *) =
		pause ? ops->pause : ops->resume;
	int rc;

	if (!fn)
		return dsec_err_setc(err, DSEC_E_UNSUPPORTED, ENOTSUP,
				     "backend '%s' cannot pause or resume sandboxes", sb->be->name);
	if ((rc = fn(sb->handle, switch_done, sb, err)) < 0)
		return rc;
	r->d->ops_inflight++;
	dsecd_sb_ref(sb);
	sb->switching = true;
	sb->switcher = r;
	gate_add(sb, r);
	return 0;
}

/* For the ops that need a running sandbox, after get_sandbox: true when r can go
 * on now; false when it waits for a pause or resume (started here for a
 * paused sandbox) and will run again, or has been answered. */
bool need_running(struct dsecd_req *r)
{
	struct dsecd_sb *sb = r->sb;
	struct dsec_err err;

	if (sb->switching) {
		gate_add(sb, r);
		return false;
	}
	if (!sb->paused)
		return true;
	log_debug("sandbox %s: resuming for %s", sb->id, dsecd_ops[r->op].name);
	dsec_err_clear(&err);
	if (start_switch(r, false, &err) < 0)
		reply_err(r, &err);
	return false;
}

void op_switch(struct dsecd_req *r)
{
	bool pause = r->op == DSEC_OP_PAUSE;
	struct dsec_err err;
	struct dsec_pk p;

	dsec_err_clear(&err);
	if (r->sb->switching)
		return gate_add(r->sb, r);
	if (r->sb->paused != pause) {
		if (start_switch(r, pause, &err) < 0)
			return reply_err(r, &err);
		return;
	}
	/* There already (also the second time round, after the switch). */
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	dsec_pk_kv_str(&p, "id", r->sb->id);
	dsec_pk_kv_str(&p, "state", pause ? "paused" : "running");
	dsec_pk_end(&p);
	req_complete(r, &p);
}

/* ---- usage ----------------------------------------------------------------
 * What a sandbox uses now, as its backend measured it (ABI 2's usage op):
 * only the fields the backend filled are in the reply.  A paused sandbox
 * is measured as it is, not resumed. */

static void usage_done(void *arg, int rc, const struct dsec_err *err)
{
	static const struct {
		uint32_t bit;		/* DSEC_USAGE_* */
		const char *key;	/* its reply field */
		size_t at;		/* its offset in struct dsec_be_usage */
	} fields[] = {
		{ DSEC_USAGE_CPU, "cpu_ns", offsetof(struct dsec_be_usage, cpu_ns) },
		{ DSEC_USAGE_MEMORY, "memory", offsetof(struct dsec_be_usage, memory) },
		{ DSEC_USAGE_MEMORY_PEAK, "memory_peak",
		  offsetof(struct dsec_be_usage, memory_peak) },
		{ DSEC_USAGE_PIDS, "pids", offsetof(struct dsec_be_usage, pids) },
		{ DSEC_USAGE_DISK, "disk", offsetof(struct dsec_be_usage, disk) },
	};
	struct dsecd_req *r = arg;
	const struct dsec_be_usage *u = &r->usage;
	struct dsec_pk p;

	r->d->ops_inflight--;
	if (rc < 0)
		return reply_err(r, err);
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	dsec_pk_kv_str(&p, "id", r->sb->id);
	for (size_t i = 0; i < DSEC_ARRAY_LEN(fields); i++)
		if (r->usage.have & fields[i].bit)
			dsec_pk_kv_u64(&p, fields[i].key,
				       *(const uint64_t *)((const char *)&r->usage + fields[i].at));
	dsecd_sb_pack_marks(r->sb, &p, u);
	dsec_pk_end(&p);
	req_complete(r, &p);
}

/* ---- set_ttl ----------------------------------------------------------------
 * More time for a live sandbox (a long test suite, a rollout that runs on):
 * ttl seconds from now, its lifetime from creation staying within max_ttl;
 * a new idle TTL.  A paused sandbox's wall TTL stays stopped, with the new
 * time left. */

void op_set_ttl(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	struct dsecd_sb *sb = r->sb;
	const msgpack_object *m = r->msg.root;
	double ttl = 0, idle = 0, now = ev_now(d->loop) - d->started + d->started_wall;
	double age = now > sb->created ? now - sb->created : 0;
	struct dsec_err err;
	struct dsec_pk p;
	int rc;

	dsec_err_clear(&err);
	if ((rc = dsec_get_seconds_opt(m, "ttl", &ttl, &err)) < 0 ||
	    (rc = dsec_get_seconds_opt(m, "idle_ttl", &idle, &err)) < 0)
		return reply_err(r, &err);
	if (ttl <= 0 && idle <= 0) {
		dsec_err_setc(&err, DSEC_E_BAD_REQUEST, EINVAL, "set_ttl needs 'ttl' or 'idle_ttl' "
			      "(seconds, more than 0)");
		return reply_err(r, &err);
	}
	if (sb->state != SB_READY) {
		dsec_err_setc(&err, DSEC_E_INVALID, EINVAL, "sandbox '%s' is not ready", sb->id);
		return reply_err(r, &err);
	}
	if (ttl > 0 && d->conf.max_ttl > 0 && age + ttl > d->conf.max_ttl) {
		dsec_err_setc(&err, DSEC_E_INVALID, EINVAL, "sandbox '%s' is %.0f s old: %.0f s more "
			      "is over max_ttl of %.0f s (at most %.0f s more)", sb->id, age, ttl,
			      d->conf.max_ttl, d->conf.max_ttl > age ? d->conf.max_ttl - age : 0);
		return reply_err(r, &err);
	}
	if (ttl > 0) {
		sb->ttl = age + ttl;
		ev_timer_stop(d->loop, &sb->ttl_timer);
		if (sb->paused) {
			sb->ttl_left = ttl;	/* runs again on resume */
		} else {
			ev_timer_set(&sb->ttl_timer, ttl, 0);
			ev_timer_start(d->loop, &sb->ttl_timer);
		}
	}
	if (idle > 0) {
		sb->idle_ttl = idle;
		sb->idle_timer.repeat = idle;
		ev_timer_again(d->loop, &sb->idle_timer);
	}
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	dsec_pk_kv_str(&p, "id", sb->id);
	dsec_pk_kv_double(&p, "ttl", sb->ttl);
	dsec_pk_kv_double(&p, "left", ev_is_active(&sb->ttl_timer)
			  ? ev_timer_remaining(d->loop, &sb->ttl_timer) : sb->ttl_left);
	dsec_pk_kv_double(&p, "idle_ttl", sb->idle_ttl);
	dsec_pk_end(&p);
	req_complete(r, &p);
}

void op_usage(struct dsecd_req *r)
{
	struct dsecd_sb *sb = r->sb;
	struct dsec_err err;

	dsec_err_clear(&err);
	memset(&r->usage, 0, sizeof(r->usage));
	r->usage.struct_size = sizeof(r->usage);
	if (!sb->be->ops->usage) {
		dsec_err_setc(&err, DSEC_E_UNSUPPORTED, ENOTSUP,
			      "backend '%s' does not measure its sandboxes' usage", sb->be->name);
		return reply_err(r, &err);
	}
	if (sb->be->ops->usage(sb->handle, &r->usage, usage_done, r, &err) < 0)
		return reply_err(r, &err);
	r->d->ops_inflight++;
}

/* A phase of r's create ended: its time into its backend's histogram. */
static void phase_end(struct dsecd_req *r, enum dsecd_phase ph)
{
	dsecd_hist_observe(&r->be->phase[ph], (double)(dsec_now_ns() - r->t_phase) / 1e9);
}

static int be_create(struct dsecd_req *r, struct dsec_err *err)
{
	if (dsecd_backend_spec_check(r->be, &r->spec, err) < 0)
		return -1;
	r->t_phase = dsec_now_ns();
	if (r->be->ops->create(r->be->be, &r->spec, &r->sb->handle, r->create_cb, r, err) < 0) {
		r->sb->handle = NULL;
		return -1;
	}
	r->d->ops_inflight++;
	return 0;
}

/* The image's layers are mounted: the backend gets them, the image's env
 * under the request's, and its cwd and user unless the request says. */
static void image_acquired(void *arg, struct fs3_acquired *a, int rc, const struct dsec_err *err)
{
	struct dsecd_req *r = arg;
	struct dsecd *d = r->d;
	struct dsec_err e;

	dsec_err_clear(&e);
	if (rc < 0) {
		e = *err;
	} else {
		r->sb->img = a;	/* released when the sandbox is gone */
		r->sb->grade_img = r->grade.img;	/* so are the grade layers */
		r->grade.img = NULL;
		r->spec.protect = (const char *const *)r->grade.protect;
		phase_end(r, DSECD_PHASE_IMAGE);
		if (d->shutting_down) {
			rc = dsec_err_setc(&e, DSEC_E_SHUTTING_DOWN, ESHUTDOWN,
					   "node '%s' is shutting down", d->conf.node);
		} else {
			r->ienv = dsecd_image_spec(&r->spec, a, r->cenv);
			if (be_create(r, &e) == 0)
				return;
			rc = e.errnum ? -e.errnum : -EIO;
		}
	}
	/* Fail the way the backend's own failure would: the create callback
	 * destroys the sandbox and replies. */
	d->ops_inflight++;
	r->create_cb(r, rc, &e);
}

/* Starts the backend's create of r->sb, done = create's completion; a
 * backend that runs images from layers gets the image acquired first.
 * Returns 0, or -1 with *err (the caller destroys r->sb and replies). */
int start_create(struct dsecd_req *r, dsec_be_done_fn done, struct dsec_err *err)
{
	r->create_cb = done;
	r->t_phase = dsec_now_ns();
	if (r->image && *r->image && (r->be->ops->caps & DSEC_BE_CAP_LAYERS))
		return dsecd_image_acquire(r->d, r->image, r->layers,
					   r->be->ops->caps & DSEC_BE_CAP_LAYER_DEVS,
					   r->be->ops->caps & DSEC_BE_CAP_PROTECT ? r->sb->grade_layers
										 : NULL,
					   &r->grade, image_acquired, r, err) < 0
			       ? -1 : 0;
	return be_create(r, err);
}

/* A create ended: counted, and its time kept for info's percentiles. */
static void count_create(struct dsecd_req *r, bool ok)
{
	struct dsecd *d = r->d;

	if (!ok) {
		d->creates_failed++;
		return;
	}
	uint64_t us = (dsec_now_ns() - r->t0) / 1000;
	d->creates_ok++;
	d->create_us[d->create_next++ % DSECD_CREATE_RING] = us > UINT32_MAX ? UINT32_MAX
									      : (uint32_t)us;
}

/* create's reply: {id, node, backend}. */
static void reply_created(struct dsecd_req *r, const struct dsecd_sb *sb)
{
	struct dsec_pk p;

	count_create(r, true);
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	dsec_pk_kv_str(&p, "id", sb->id);
	dsec_pk_kv_str(&p, "node", r->d->conf.node);
	dsec_pk_kv_str(&p, "backend", r->be->name);
	if (r->d->gossip)	/* the first version of its gossiped capacity that counts it */
		dsec_pk_kv_u64(&p, "capacity_version", dsecd_gossip_next_version(r->d));
	dsec_pk_end(&p);
	req_complete(r, &p);
}

/* The hashes of the create's watch files, taken before its reply: before
 * any command of the agent. */
static void watch_taken(void *arg, char **hashes, size_t n)
{
	struct dsecd_req *r = arg;
	struct dsecd_sb *sb = r->sb;
	struct dsec_err e;

	r->d->ops_inflight--;
	sb->watch_before = hashes;
	(void)n;
	if (sb->state != SB_READY) {
		bool down = r->d->shutting_down;

		dsec_err_setc(&e, down ? DSEC_E_SHUTTING_DOWN : DSEC_E_SANDBOX_LOST,
			      down ? ESHUTDOWN : EIO, "cannot create %s sandbox: it %s while its "
			      "watch files were hashed", r->be->name,
			      down ? "went with its node" : "died");
		if (sb->state == SB_FAILED)
			dsecd_sb_destroy(r->d, sb, "lost while made", NULL);
		count_create(r, false);
		return reply_err(r, &e);
	}
	reply_created(r, sb);
}

static void ready_reply(struct dsecd_req *r, struct dsecd_sb *sb)
{
	if (!sb->watch)
		return reply_created(r, sb);
	r->d->ops_inflight++;
	rlc_watch_hash(r->d, sb, watch_taken, r);
}

static void create_done(void *arg, int rc, const struct dsec_err *err)
{
	struct dsecd_req *r = arg;
	struct dsecd *d = r->d;
	struct dsecd_sb *sb = r->sb;
	struct dsec_err e;

	d->ops_inflight--;
	d->creating--;
	if (rc < 0) {
		count_create(r, false);
		e = *err;
		dsec_err_prefix(&e, "cannot create %s sandbox", r->be->name);
		sb->handle = NULL;
		dsecd_sb_destroy(d, sb, "create failed", NULL);
		return reply_err(r, &e);
	}
	if (d->shutting_down) {
		dsecd_sb_destroy(d, sb, "daemon shutting down", NULL);
		dsec_err_setc(&e, DSEC_E_SHUTTING_DOWN, ESHUTDOWN, "node '%s' is shutting down",
			      d->conf.node);
		return reply_err(r, &e);
	}
	phase_end(r, DSECD_PHASE_BACKEND);
	dsecd_sb_ready(d, sb);
	log_debug("sandbox %s ready", sb->id);
	sb->create_t0 = r->t0;
	ready_reply(r, sb);
}

/* Labels a trainer finds its sandboxes by (job, step, rollout group):
 * "K=V" strings, at most LABELS_MAX, keys of 1-63 of [A-Za-z0-9._/-],
 * values of at most LABEL_VALUE_MAX bytes. */
#define LABELS_MAX 32
#define LABEL_VALUE_MAX 256

int dsecd_labels_get(const msgpack_object *m, char ***out, struct dsec_err *err)
{
	char **v = NULL;
	int rc;

	*out = NULL;
	if ((rc = dsec_get_env_opt(m, "labels", &v, err)) < 0 || !v)
		return rc;
	size_t n = dsec_strv_len((const char *const *)v);
	for (size_t i = 0; i < n && rc == 0; i++) {
		size_t k = strcspn(v[i], "=");
		bool ok = k >= 1 && k <= 63 && strlen(v[i] + k + 1) <= LABEL_VALUE_MAX;
		for (size_t j = 0; j < k && ok; j++)
			ok = (v[i][j] | 32) >= 'a' && (v[i][j] | 32) <= 'z' ? true
			     : strchr("0123456789._/-", v[i][j]) != NULL;
		if (!ok)
			rc = dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "label '%.*s' is not KEY=VALUE "
					   "(KEY 1-63 of [A-Za-z0-9._/-], VALUE at most %d bytes)",
					   k > 64 ? 64 : (int)k, v[i], LABEL_VALUE_MAX);
	}
	if (rc == 0 && n > LABELS_MAX)
		rc = dsec_err_setc(err, DSEC_E_INVALID, E2BIG, "%zu labels: at most %d", n,
				   LABELS_MAX);
	if (rc < 0 || !n) {
		dsec_strv_free(v);
		return rc;
	}
	*out = v;
	return 0;
}

/* What rlcoord keeps of a create in its sandbox: the trajectory log, the
 * lease, the grade layers and the request itself (reset, fork). */
static void rl_adopt(struct dsecd_req *r, struct dsecd_sb *sb, bool trajectory)
{
	if (trajectory)
		rlc_log_start(r->d, sb);
	rlc_lease_join(r->d, sb, r->lease);
	sb->grade_layers = r->grade_layers;
	r->grade_layers = NULL;
	sb->watch = r->watch;
	r->watch = NULL;
	rlc_keep_spec(sb, r->frame, r->frame_len);
}

void op_create(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	const msgpack_object *m = r->msg.root;
	struct dsec_err err;
	double ttl = d->conf.ttl, idle = d->conf.idle_ttl;
	bool trajectory = false;
	char **grade_layers = NULL;
	int rc;

	dsec_err_clear(&err);
	if (parse_spec(r, &err) < 0 || dsecd_labels_get(m, &r->labels, &err) < 0 ||
	    (rc = dsec_get_bool_opt(m, "trajectory", &trajectory, &err)) < 0 ||
	    rlc_lease_create(r, &trajectory, &err) < 0 ||
	    (rc = dsec_get_seconds_opt(m, "ttl", &ttl, &err)) < 0 ||
	    (rc = dsec_get_seconds_opt(m, "idle_ttl", &idle, &err)) < 0)
		return reply_err(r, &err);
	if ((rc = dsec_get_strv_opt(m, "grade_layers", &grade_layers, &err)) < 0)
		return reply_err(r, &err);
	if (grade_layers && !grade_layers[0]) {
		dsec_strv_free(grade_layers);
		grade_layers = NULL;
	}
	if (grade_layers && (!r->image || !*r->image || r->layers ||
			     !(r->be->ops->caps & DSEC_BE_CAP_LAYERS) ||
			     dsec_strv_len((const char *const *)grade_layers) >= FS3_STACK_MAX - 1)) {
		dsec_strv_free(grade_layers);
		dsec_err_setc(&err, DSEC_E_INVALID, EINVAL, "grade_layers need a backend that runs "
			      "images from layers, an image and no 'layers', and at most %d images",
			      FS3_STACK_MAX - 2);
		return reply_err(r, &err);
	}
	r->grade_layers = grade_layers;
	if (rlc_watch_parse(m, &r->watch, &err) < 0)
		return reply_err(r, &err);
	if (ttl <= 0)
		ttl = d->conf.ttl;
	if (idle <= 0)
		idle = d->conf.idle_ttl;
	if (ttl > d->conf.max_ttl) {
		dsec_err_setc(&err, DSEC_E_INVALID, EINVAL, "ttl %.0f s is over max_ttl of %.0f s",
			      ttl, d->conf.max_ttl);
		return reply_err(r, &err);
	}
	struct dsecd_sb *sb;
	const struct dsec_be_limits *l = &r->spec.limits;

	if (d->draining && check_capacity(d, &err) < 0)
		return reply_err(r, &err);
	if (rlc_token_create(r))
		return;
	/* A warm pool's sandbox, when the request asks for nothing it lacks. */
	if (!(l->cpus > 0 || l->memory || l->pids || l->nofile || l->disk || r->spec.cpu_weight) &&
	    !r->network && !r->allow && !r->dns && !r->deny && !r->layers &&
	    !(r->grade_layers && (r->be->ops->caps & DSEC_BE_CAP_PROTECT)) &&
	    (sb = dsecd_warm_take(d, r->be, r->image))) {
		sb->ttl = ttl;
		sb->idle_ttl = idle;
		sb->runtime = r->runtime ? xstrdup(r->runtime) : NULL;
		sb->env = r->cenv;
		r->cenv = NULL;
		sb->labels = r->labels;
		r->labels = NULL;
		sb->cwd = r->ccwd;
		r->ccwd = NULL;
		sb->created = ev_now(d->loop) - d->started + d->started_wall;
		rl_adopt(r, sb, trajectory);
		dsecd_sb_ready(d, sb);
		dsecd_sb_touch(d, sb);
		log_debug("sandbox %s handed over from a warm pool", sb->id);
		r->t_phase = r->t0;
		phase_end(r, DSECD_PHASE_WARM);
		sb->create_t0 = r->t0;
		/* The create's entry needs r to hold the sandbox, as below. */
		dsecd_sb_ref(sb);
		r->sb = sb;
		return ready_reply(r, sb);
	}
	if (check_capacity(d, &err) < 0)
		return reply_err(r, &err);
	sb = dsecd_sb_new(d, r->be);
	sb->ttl = ttl;
	sb->idle_ttl = idle;
	sb->runtime = r->runtime ? xstrdup(r->runtime) : NULL;
	sb->image = r->image ? xstrdup(r->image) : NULL;
	dsecd_image_use(d, sb->image, 1);
	sb->mem = l->memory;
	d->mem_committed += sb->mem;
	sb->labels = r->labels;
	r->labels = NULL;
	rl_adopt(r, sb, trajectory);
	dsecd_sb_ref(sb);
	r->sb = sb;
	r->spec.id = sb->id;
	d->creating++;
	if (start_create(r, create_done, &err) < 0) {
		d->creating--;
		count_create(r, false);
		dsecd_sb_destroy(d, sb, "create failed", NULL);
		dsec_err_prefix(&err, "cannot create %s sandbox", r->be->name);
		return reply_err(r, &err);
	}
}

static void net_allow_done(void *arg, int rc, const struct dsec_err *err)
{
	struct dsecd_req *r = arg;

	r->d->ops_inflight--;
	if (r->sb)
		dsecd_sb_touch(r->d, r->sb);
	if (rc < 0)
		return reply_err(r, err);
	reply_empty(r);
}

/* Replace a running sandbox's network allowlist. */
void op_net_allow(struct dsecd_req *r)
{
	const struct dsec_be_ops *ops;
	struct dsec_err err;
	int rc;

	dsec_err_clear(&err);
	if ((rc = dsec_get_strv(r->msg.root, "allow", &r->allow, &err)) < 0) {
		if (rc == -ENOENT)
			dsec_err_setc(&err, DSEC_E_BAD_REQUEST, EINVAL,
				      "net_allow needs field 'allow' (an array, [] for nothing)");
		return reply_err(r, &err);
	}
	ops = r->sb->be->ops;
	if (!ops->net_allow) {
		dsec_err_setc(&err, DSEC_E_UNSUPPORTED, ENOTSUP,
			      "backend '%s' has no network allowlists", r->sb->be->name);
		return reply_err(r, &err);
	}
	if (ops->net_allow(r->sb->handle, (const char *const *)r->allow, net_allow_done, r,
			   &err) < 0)
		return reply_err(r, &err);
	r->d->ops_inflight++;
}

void dsecd_req_destroyed(struct dsecd *d, struct dsecd_req *r)
{
	reply_empty(r);
}

void op_destroy(struct dsecd_req *r)
{
	dsecd_sb_destroy(r->d, r->sb, "destroy requested", r);
}
