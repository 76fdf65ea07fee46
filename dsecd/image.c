/* image.c - images for sandboxes: fs3 on the worker pool.
 *
 * dsecd owns the node's fs3 store as its one mounter.  A create naming an
 * image, for a backend that takes layers (DSEC_BE_CAP_LAYERS), first
 * acquires the image on a pool thread (fetching and verifying chunks,
 * assembling and mounting layers: all of it may block), then hands the
 * mounted layer directories to the backend (with DSEC_BE_CAP_LAYER_DEVS,
 * also a loop device per layer).  The sandbox holds the acquire
 * until the backend has destroyed it; the release runs on the pool too.
 * A create with grade_layers, for a backend that stands in for them
 * (DSEC_BE_CAP_PROTECT), acquires those images too, in the same work, for
 * the names at their top (dsec_be_spec.protect), and holds them as long.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon.h"
#include "dsec.h"
#include "fs3.h"
#include "log.h"

/* image_peers without this node's own addresses (one config file may serve
 * every node): asking ourselves would only look again in the cache that
 * has just been found to lack the object. */
static const char **other_peers(struct dsecd *d)
{
	size_t n = 0;
	const char **v = xcalloc(dsec_strv_len((const char *const *)d->conf.image_peers) + 1,
				 sizeof(*v));

	for (char **p = d->conf.image_peers; p && *p; p++) {
		bool self = false;
		for (char **l = d->conf.listen; l && *l; l++)
			self |= !strcmp(*l, *p);
		if (self)
			log_info("images: peer %s is this node; not asked", *p);
		else
			v[n++] = *p;
	}
	return v;
}

int dsecd_images_open(struct dsecd *d, struct dsec_err *err)
{
	_cleanup_free_ const char **peers = other_peers(d);
	/* Peers check our certificate as we check theirs. */
	const struct dsec_tls tls = { .ca = d->conf.tls_ca, .cert = d->conf.tls_cert };
	_cleanup_free_ char *store = d->conf.image_store ? xstrdup(d->conf.image_store)
							 : xasprintf("%s/fs3", d->conf.state_dir);
	struct fs3_conf c = {
		.store = store,
		.origin = d->conf.image_origin,
		.cache_max = d->conf.image_cache_max,
		.flags = FS3_MOUNTER,
		.full_fetch = !d->conf.image_on_demand,
		.linger = d->conf.image_linger,
		.readahead = d->conf.image_readahead ? (int)(d->conf.image_readahead > 1024 ? 1024 : d->conf.image_readahead) : -1,
		.peers = peers,
		.fetch_timeout = d->conf.image_fetch_timeout,
		.tls = &tls,
		/* With gossip the members are peers too (dsecd_images_peers). */
		.dynamic_peers = d->conf.gossip_listen != NULL,
	};
	int rc;

	if ((rc = fs3_open(&d->images, &c, err)) < 0) {
		dsec_err_prefix(err, "cannot open the image store");
		return rc;
	}
	/* Snapshot copies a killed predecessor left (see op_snapshot). */
	_cleanup_free_ char *snaps = xasprintf("%s/snapshots", d->conf.state_dir);
	dsec_rm_rf(snaps);
	log_info("images: store %s, origin %s, %s, %zu peers (fetch timeout %.3g s)", store,
		 d->conf.image_origin ? d->conf.image_origin : "STORE/origin",
		 d->conf.image_on_demand ? "layers on demand" : "layers fetched whole",
		 dsec_strv_len(peers), d->conf.image_fetch_timeout);
	return 0;
}

/* A member's rank for this node's peer list: FNV-1a of both names (with
 * their NULs, so "ab"+"c" is not "a"+"bc"). */
static uint64_t peer_rank(const char *a, const char *b)
{
	return dsec_mix64(dsec_fnv1a(dsec_fnv1a(DSEC_FNV1A_INIT, a, strlen(a) + 1), b,
					   strlen(b) + 1));
}

void dsecd_images_peers(struct dsecd *d)
{
	const char *urls[FS3_PEERS_MAX];
	uint64_t rank[FS3_PEERS_MAX];
	size_t n = 0;
	struct dsec_err err;

	if (!d->images)
		return;
	/* The alive members, at most FS3_PEERS_MAX: those that rank first for
	 * this node (rendezvous hashing of the two names), so that with more
	 * members each node asks its own few and every member is asked by
	 * some. */
	for (size_t i = 0; i < d->nmembers; i++) {
		const struct dsecd_member *m = &d->members[i];
		if (m->state != DSECD_MEMBER_ALIVE || !m->url)
			continue;
		uint64_t r = peer_rank(d->conf.node, m->name);
		size_t at = n < FS3_PEERS_MAX ? n++ : FS3_PEERS_MAX;
		while (at > 0 && rank[at - 1] < r) {
			if (at < FS3_PEERS_MAX) {
				rank[at] = rank[at - 1];
				urls[at] = urls[at - 1];
			}
			at--;
		}
		if (at < FS3_PEERS_MAX) {
			rank[at] = r;
			urls[at] = m->url;
		}
	}
	dsec_err_clear(&err);
	if (fs3_set_peers(d->images, urls, n, &err) < 0 && err.msg[0])
		log_warn("images: a member's address is not a peer: %s", err.msg);
}

void dsecd_images_close(struct dsecd *d)
{
	fs3_close(d->images);
	d->images = NULL;
}

struct acq {
	struct dsecd *d;		/* the daemon */
	char *ref;			/* image asked for */
	char **extras;			/* images stacked over it, bottom first, or NULL */
	bool devs;			/* with its layers as loop devices too */
	char **grade;			/* grade_layers whose names to list, or NULL */
	struct dsecd_grade *gout;	/* where they go (the caller's) */
	struct fs3_acquired *a;		/* the result */
	int rc;				/* 0 or -errno */
	struct dsec_err err;		/* why */
	dsecd_image_done_fn done;	/* caller's */
	void *arg;			/* its argument */
};

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a + 2, *(char *const *)b + 2);
}

/* The top-level entries of a's layers as dsec_be_spec.protect has them
 * ("d/NAME", "f/NAME"), sorted, each once, whiteouts left out; at most
 * DSECD_PROTECT_MAX (the first by name).  Never NULL. */
static char **top_names(const struct fs3_acquired *a)
{
	size_t n = 0, cap = 16;
	char **v = xcalloc(cap + 1, sizeof(*v));

	for (size_t i = 0; i < a->nlayers; i++) {
		DIR *dir = opendir(a->layers[i]);
		struct dirent *de;
		struct stat st;

		while (dir && (de = readdir(dir))) {
			bool isdir = de->d_type == DT_DIR, seen = false;

			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			if (de->d_type == DT_UNKNOWN || de->d_type == DT_CHR) {
				if (fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
				    (S_ISCHR(st.st_mode) && st.st_rdev == 0))
					continue;	/* an overlay whiteout */
				isdir = S_ISDIR(st.st_mode);
			}
			for (size_t j = 0; j < n && !seen; j++)
				seen = !strcmp(v[j] + 2, de->d_name);
			if (seen)
				continue;
			if (n == cap) {
				v = xrealloc(v, (2 * cap + 1) * sizeof(*v));
				cap *= 2;
			}
			v[n++] = xasprintf("%c/%s", isdir ? 'd' : 'f', de->d_name);
		}
		if (dir)
			closedir(dir);
	}
	qsort(v, n, sizeof(*v), name_cmp);
	while (n > DSECD_PROTECT_MAX)
		free(v[--n]);
	v[n] = NULL;
	return v;
}

static void acq_work(void *p)
{
	struct acq *q = p;
	struct dsec_err err;

	q->rc = fs3_image_acquire_stack(q->d->images, q->ref, (const char *const *)q->extras,
					&q->a, &q->err);
	if (q->rc == 0 && q->devs && (q->rc = fs3_acquired_devs(q->d->images, q->a, &q->err)) < 0) {
		fs3_image_release(q->d->images, q->a);
		q->a = NULL;
	}
	if (q->rc < 0 || !q->grade)
		return;
	/* The grade layers are held as long as the sandbox: their mounts are
	 * shared by every sandbox of the task and its grades. */
	dsec_err_clear(&err);
	if (fs3_image_acquire_stack(q->d->images, q->grade[0], (const char *const *)q->grade + 1,
				    &q->gout->img, &err) < 0) {
		log_warn("images: cannot acquire the grade layers of a create (%s); its probes of "
			 "them are not counted", err.msg);
		q->gout->img = NULL;
		return;
	}
	q->gout->protect = top_names(q->gout->img);
}

static void acq_done(void *p)
{
	struct acq *q = p;

	q->d->ops_inflight--;
	q->done(q->arg, q->a, q->rc, &q->err);
	free(q->ref);
	dsec_strv_free(q->extras);
	dsec_strv_free(q->grade);
	free(q);
}

int dsecd_image_acquire(struct dsecd *d, const char *ref, char *const *extras, bool devs,
			char *const *grade, struct dsecd_grade *gout, dsecd_image_done_fn done,
			void *arg, struct dsec_err *err)
{
	struct acq *q;
	int rc;

	if (!d->images)
		return dsec_err_setc(err, DSEC_E_UNSUPPORTED, ENOTSUP,
				     "this node has no image store");
	q = xcalloc(1, sizeof(*q));
	q->d = d;
	q->ref = xstrdup(ref);
	q->extras = dsec_strv_dup((const char *const *)extras);
	q->devs = devs;
	if (grade && grade[0] && gout) {
		q->grade = dsec_strv_dup((const char *const *)grade);
		q->gout = gout;
		*gout = (struct dsecd_grade){ 0 };
	}
	q->done = done;
	q->arg = arg;
	if ((rc = dsecd_pool_submit(d->pool, acq_work, acq_done, q)) < 0) {
		free(q->ref);
		dsec_strv_free(q->extras);
		dsec_strv_free(q->grade);
		free(q);
		return dsec_err_set(err, -rc, "cannot queue the image's acquire: %s", strerror(-rc));
	}
	d->ops_inflight++;
	return 0;
}

char **dsecd_image_spec(struct dsec_be_spec *spec, struct fs3_acquired *a, char *const *cenv)
{
	const struct fs3_image_config *c = &a->config;
	size_t n = 0;
	char **env = xcalloc(dsec_strv_len((const char *const *)c->env) +
			     (cenv ? dsec_strv_len((const char *const *)cenv) : 0) + 1,
			     sizeof(char *));

	for (size_t i = 0; c->env[i]; i++)
		env[n++] = xstrdup(c->env[i]);
	for (size_t i = 0; cenv && cenv[i]; i++)
		env[n++] = xstrdup(cenv[i]);
	spec->env = (const char *const *)env;
	spec->layers = (const char *const *)a->layers;
	spec->layer_files = (const char *const *)a->files;
	spec->layer_devs = (const char *const *)a->devs;
	if (!spec->cwd && *c->cwd)
		spec->cwd = c->cwd;
	if (*c->user)
		spec->user = c->user;
	return env;
}

struct rel {
	struct dsecd *d;		/* the daemon */
	struct fs3_acquired *a;		/* what to give back */
};

static void rel_work(void *p)
{
	struct rel *q = p;

	fs3_image_release(q->d->images, q->a);
}

static void rel_done(void *p)
{
	struct rel *q = p;

	q->d->ops_inflight--;
	free(q);
}

void dsecd_image_release(struct dsecd *d, struct fs3_acquired *a)
{
	struct rel *q;

	if (!a)
		return;
	q = xcalloc(1, sizeof(*q));
	q->d = d;
	q->a = a;
	if (!d->pool || dsecd_pool_submit(d->pool, rel_work, rel_done, q) < 0) {
		rel_work(q);	/* no pool left (teardown): do it here */
		free(q);
		return;
	}
	d->ops_inflight++;
}
