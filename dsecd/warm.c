/* warm.c - warm pools: sandboxes created ahead, handed over on create.
 *
 * The config key "pool" lists BACKEND[@IMAGE]=N entries.  For each, the
 * daemon keeps N sandboxes of that backend and image created in advance,
 * two creations at a time, refilled once takes pause.  A create request
 * for that backend and image that asks for nothing a pooled sandbox cannot
 * have (limits, a network mode) takes one: its reply comes without
 * waiting for the backend.  Its env and working directory then apply to
 * every exec (the daemon adds them, since the sandbox was made before they
 * were known).  Pooled sandboxes are in the sandbox table (they count
 * against max_sandboxes and die with the daemon) but no request can name
 * them and list does not show them.  A pool whose creations fail waits
 * WARM_RETRY seconds before it tries again.
 *
 * Refills wait until no sandbox has been taken for WARM_QUIET seconds, or
 * until the pool is down to a quarter: a burst of creates is handed its
 * sandboxes without creations of the pool competing with its first
 * commands for the CPUs and the kernel's locks (which doubled a hand-over's
 * create -> first exec on a 2-core machine), and the pool fills up again
 * in the gap after it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "fs3.h"
#include "log.h"
#include "proto.h"

#define WARM_PARALLEL 2		/* creations in flight per pool */
#define WARM_RETRY 5.0		/* seconds before refilling after a failure */
#define WARM_MAX 1024		/* sandboxes one pool may hold */
#define WARM_QUIET 0.1		/* seconds without a take before refilling */

struct dsecd_warm {
	struct dsecd_warm *next;	/* d->warm list */
	struct dsecd *d;		/* the daemon */
	struct dsecd_backend *be;	/* backend */
	char *image;			/* image, NULL = none */
	unsigned target;		/* sandboxes to keep ready */
	unsigned nready;		/* in ready[] */
	unsigned creating;		/* creations in flight */
	struct dsecd_sb **ready;	/* ready pooled sandboxes, target slots */
	ev_timer retry;			/* back-off after a failed creation */
	ev_timer quiet;			/* refill once takes pause */
	ev_tstamp last_take;		/* when the last sandbox was taken */
	uint64_t taken;			/* hand-overs since start */
};

/* One creation for a pool. */
struct wcreate {
	struct dsecd_warm *w;		/* its pool */
	struct dsecd_sb *sb;		/* the sandbox */
	struct dsec_be_spec spec;	/* what the backend gets */
	char **ienv;			/* the image's env, or NULL */
	struct dsec_exec_req xreq;	/* the warm-up command */
	struct dsec_exec_res xres;	/* its result (ignored) */
};

/* Run once in each new pooled sandbox before it counts as ready: the
 * first command of a sandbox pays for what later ones find made (the
 * container backend's exec cgroup and seccomp filter, the new mounts'
 * dentries, its warm shell), and a pool is there to keep that off a
 * create's path.  Its failure (an image without sh) changes nothing. */
static const char *const warmup_argv[] = { "sh", "-c", "true", NULL };

static void warm_fill(struct dsecd_warm *w);

static void retry_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	warm_fill(dsec_container_of(t, struct dsecd_warm, retry));
}

static void quiet_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	warm_fill(dsec_container_of(t, struct dsecd_warm, quiet));
}

/* The creation is over (rc < 0: failed): the sandbox joins the pool. */
static void wc_ready(struct wcreate *c, int rc, const struct dsec_err *err)
{
	struct dsecd_warm *w = c->w;
	struct dsecd *d = w->d;
	struct dsecd_sb *sb = c->sb;

	w->creating--;
	dsec_strv_free(c->ienv);
	dsec_buf_free(&c->xres.out);
	dsec_buf_free(&c->xres.err);
	free(c);
	if (rc < 0 || d->shutting_down) {
		if (rc < 0) {
			log_warn("pool %s%s%s: cannot create a sandbox: %s", w->be->name,
				 w->image ? "@" : "", w->image ? w->image : "",
				 err ? err->msg : "failed");
			sb->handle = NULL;
			ev_timer_set(&w->retry, WARM_RETRY, 0);
			ev_timer_start(d->loop, &w->retry);
		}
		dsecd_sb_destroy(d, sb, rc < 0 ? "pool create failed" : "daemon shutting down",
				 NULL);
		dsecd_sb_unref(d, sb);
		return;
	}
	dsecd_sb_unref(d, sb);
	sb->state = SB_READY;	/* still pooled: no request can name it */
	w->ready[w->nready++] = sb;
	warm_fill(w);
}

static void wc_warmed(void *arg, int rc, const struct dsec_err *err)
{
	struct wcreate *c = arg;

	c->w->d->ops_inflight--;
	if (rc < 0)
		log_debug("pool %s: warm-up command: %s", c->w->be->name, err ? err->msg : "failed");
	wc_ready(c, 0, NULL);
}

static void wc_done(void *arg, int rc, const struct dsec_err *err)
{
	struct wcreate *c = arg;
	struct dsecd *d = c->w->d;
	const struct dsec_be_ops *ops = c->w->be->ops;
	struct dsec_err e;

	d->ops_inflight--;
	if (rc < 0 || d->shutting_down || !ops->exec)
		return wc_ready(c, rc, err);
	c->xreq.argv = warmup_argv;
	c->xreq.timeout = 10;
	dsec_buf_init(&c->xres.out);
	dsec_buf_init(&c->xres.err);
	dsec_err_clear(&e);
	if (ops->exec(c->sb->handle, &c->xreq, &c->xres, wc_warmed, c, &e) < 0)
		return wc_ready(c, 0, NULL);
	d->ops_inflight++;
}

static void wc_create(struct wcreate *c)
{
	struct dsecd_warm *w = c->w;
	struct dsec_err err;

	dsec_err_clear(&err);
	if (dsecd_backend_spec_check(w->be, &c->spec, &err) < 0 ||
	    w->be->ops->create(w->be->be, &c->spec, &c->sb->handle, wc_done, c, &err) < 0) {
		c->sb->handle = NULL;
		w->d->ops_inflight++;
		wc_done(c, err.errnum ? -err.errnum : -EIO, &err);
		return;
	}
	w->d->ops_inflight++;
}

static void wc_acquired(void *arg, struct fs3_acquired *a, int rc, const struct dsec_err *err)
{
	struct wcreate *c = arg;

	if (rc < 0) {
		c->w->d->ops_inflight++;
		wc_done(c, rc, err);
		return;
	}
	c->sb->img = a;
	c->ienv = dsecd_image_spec(&c->spec, a, NULL);
	wc_create(c);
}

static void warm_fill(struct dsecd_warm *w)
{
	struct dsecd *d = w->d;
	ev_tstamp wait = w->last_take + WARM_QUIET - ev_now(d->loop);

	if (wait > 0 && w->nready > w->target / 4 && !d->shutting_down) {
		/* Takes are coming: fill in the gap after them. */
		ev_timer_stop(d->loop, &w->quiet);
		ev_timer_set(&w->quiet, wait, 0);
		ev_timer_start(d->loop, &w->quiet);
		return;
	}
	while (!d->shutting_down && !ev_is_active(&w->retry) &&
	       w->nready + w->creating < w->target && w->creating < WARM_PARALLEL &&
	       d->nsandboxes + d->calls < d->conf.max_sandboxes) {
		struct wcreate *c = xcalloc(1, sizeof(*c));
		struct dsec_err err;

		c->w = w;
		c->sb = dsecd_sb_new(d, w->be);
		c->sb->pooled = true;
		c->sb->image = w->image ? xstrdup(w->image) : NULL;
		dsecd_image_use(d, c->sb->image, 1);
		dsecd_sb_ref(c->sb);
		c->spec.id = c->sb->id;
		c->spec.image = w->image;
		w->creating++;
		if (w->image && (w->be->ops->caps & DSEC_BE_CAP_LAYERS)) {
			dsec_err_clear(&err);
			if (dsecd_image_acquire(d, w->image, NULL,
						w->be->ops->caps & DSEC_BE_CAP_LAYER_DEVS, NULL, NULL,
						wc_acquired, c, &err) < 0) {
				d->ops_inflight++;
				wc_done(c, err.errnum ? -err.errnum : -EIO, &err);
			}
		} else {
			wc_create(c);
		}
	}
}

/* "BACKEND[@IMAGE]=N" */
static int parse_entry(struct dsecd *d, const char *s, struct dsec_err *err)
{
	_cleanup_free_ char *e = xstrdup(s);
	char *eq = strrchr(e, '='), *at, *end;
	struct dsecd_warm *w;
	unsigned long n;

	if (!eq)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "pool entry '%s' is not BACKEND[@IMAGE]=N", s);
	*eq = '\0';
	errno = 0;
	n = strtoul(eq + 1, &end, 10);
	if (errno || end == eq + 1 || *end || n == 0 || n > WARM_MAX)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "pool entry '%s': N must be 1 to %d", s, WARM_MAX);
	if ((at = strchr(e, '@')))
		*at++ = '\0';
	if (at && !*at)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "pool entry '%s': empty image", s);
	w = xcalloc(1, sizeof(*w));
	w->d = d;
	if (!(w->be = dsecd_backend_find(d, e))) {
		free(w);
		return dsec_err_setc(err, DSEC_E_INVALID, ENOENT,
				     "pool entry '%s': backend '%s' is not loaded", s, e);
	}
	w->image = at ? xstrdup(at) : NULL;
	w->target = (unsigned)n;
	w->ready = xcalloc(n, sizeof(*w->ready));
	ev_init(&w->retry, retry_cb);
	ev_init(&w->quiet, quiet_cb);
	w->last_take = -WARM_QUIET;
	w->next = d->warm;
	d->warm = w;
	return 0;
}

int dsecd_warm_start(struct dsecd *d, struct dsec_err *err)
{
	_cleanup_free_ char *list = d->conf.pool ? xstrdup(d->conf.pool) : NULL;
	char *save = NULL;
	int rc;

	for (char *s = list ? strtok_r(list, ", \t", &save) : NULL; s;
	     s = strtok_r(NULL, ", \t", &save))
		if ((rc = parse_entry(d, s, err)) < 0)
			return rc;
	for (struct dsecd_warm *w = d->warm; w; w = w->next) {
		log_info("pool %s%s%s: keeping %u sandboxes ready", w->be->name, w->image ? "@" : "",
			 w->image ? w->image : "", w->target);
		warm_fill(w);
	}
	return 0;
}

static bool same_image(const char *a, const char *b)
{
	return (!a || !*a) ? (!b || !*b) : (b && !strcmp(a, b));
}

struct dsecd_sb *dsecd_warm_take(struct dsecd *d, struct dsecd_backend *be, const char *image)
{
	for (struct dsecd_warm *w = d->warm; w; w = w->next) {
		struct dsecd_sb *sb;

		if (w->be != be || !same_image(w->image, image) || !w->nready)
			continue;
		sb = w->ready[--w->nready];
		sb->pooled = false;
		w->taken++;
		w->last_take = ev_now(d->loop);
		warm_fill(w);
		return sb;
	}
	return NULL;
}

void dsecd_warm_forget(struct dsecd *d, struct dsecd_sb *sb)
{
	for (struct dsecd_warm *w = d->warm; w; w = w->next)
		for (unsigned i = 0; i < w->nready; i++)
			if (w->ready[i] == sb) {
				w->ready[i] = w->ready[--w->nready];
				return;
			}
}

void dsecd_warm_pack(struct dsecd *d, struct dsec_pk *p)
{
	dsec_pk_str(p, "pools");
	dsec_pk_array_begin(p);
	for (struct dsecd_warm *w = d->warm; w; w = w->next) {
		dsec_pk_map_begin(p);
		dsec_pk_kv_str(p, "backend", w->be->name);
		dsec_pk_kv_str(p, "image", w->image ? w->image : "");
		dsec_pk_kv_u64(p, "target", w->target);
		dsec_pk_kv_u64(p, "ready", w->nready);
		dsec_pk_kv_u64(p, "creating", w->creating);
		dsec_pk_kv_u64(p, "taken", w->taken);
		dsec_pk_end(p);
	}
	dsec_pk_end(p);
}

void dsecd_warm_free(struct dsecd *d)
{
	while (d->warm) {
		struct dsecd_warm *w = d->warm;

		d->warm = w->next;
		ev_timer_stop(d->loop, &w->retry);
		ev_timer_stop(d->loop, &w->quiet);
		free(w->image);
		free(w->ready);
		free(w);
	}
}
