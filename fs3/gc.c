/* gc.c - what stays: marking from tags and acquires, gc's sweep of the
 * origin, the cache and the layer files, and the cache's eviction, which
 * spares what acquired images need. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs3_int.h"
#include "image.h"
#include "layer.h"
#include "log.h"
#include "store.h"

/* ---- digest sets ------------------------------------------------------- */

/* A set of digests: add, then dset_seal (sort, dedupe), then dset_has. */
struct dset {
	struct fs3_digest *v;	/* members */
	size_t n, cap;		/* used, allocated */
};

static void dset_add(struct dset *s, const struct fs3_digest *d)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 256;
		s->v = xrealloc(s->v, s->cap * sizeof(*s->v));
	}
	s->v[s->n++] = *d;
}

static void dset_seal(struct dset *s)
{
	size_t w = 0;

	if (!s->n)
		return;
	qsort(s->v, s->n, sizeof(*s->v), fs3_digest_cmp);
	for (size_t i = 1; i < s->n; i++)
		if (fs3_digest_cmp(&s->v[w], &s->v[i]))
			s->v[++w] = s->v[i];
	s->n = w + 1;
}

static bool dset_has(const struct dset *s, const struct fs3_digest *d)
{
	return s->n && bsearch(d, s->v, s->n, sizeof(*s->v), fs3_digest_cmp);
}

/* ---- marking, eviction --------------------------------------------------- */

/* Adds the image d, its layers, their indexes and (with chunks) their chunks
 * to s: everything that must stay for the image to be usable. */
static int mark_image(struct fs3 *fs, const struct fs3_digest *d, struct dset *s, bool chunks,
		      struct dsec_err *err)
{
	struct fs3_manifest m;
	struct fs3_index ix;
	int r;

	if ((r = fs3_load_manifest(fs, d, &m, err)) < 0)
		return r;
	dset_add(s, d);
	for (size_t i = 0; i < m.n && r == 0; i++) {
		dset_add(s, &m.layers[i].digest);
		dset_add(s, &m.layers[i].index);
		if (!chunks || (r = fs3_layer_index(&fs->st, &m.layers[i], &ix, err)) < 0)
			continue;
		for (size_t j = 0; j < ix.n; j++)
			dset_add(s, &ix.chunks[j].d);
		fs3_index_free(&ix);
	}
	fs3_manifest_free(&m);
	return r;
}

/* Marks every image acquired by the mounter of this store (STORE/acquired). */
static int mark_acquired(struct fs3 *fs, struct dset *s, struct dsec_err *err)
{
	_cleanup_free_ char *dir = xasprintf("%s/acquired", fs->dir);
	DIR *dh = opendir(dir);
	struct dirent *e;
	int r = 0;

	if (!dh)
		return errno == ENOENT ? 0 : dsec_err_set(err, errno, "cannot read '%s': %s", dir,
							  strerror(errno));
	while (r == 0 && (e = readdir(dh))) {
		struct fs3_digest d;
		if (fs3_digest_parse(e->d_name, &d) == 0)
			r = mark_image(fs, &d, s, true, err);
	}
	closedir(dh);
	return r;
}

/* Keeps the cache under its cap without touching chunks of acquired images. */
void fs3_evict(struct fs3 *fs)
{
	struct dset pins = { 0 };
	struct dsec_err err;

	if (!fs->st.cache_max || fs->st.cache_bytes <= fs->st.cache_max)
		return;
	if (mark_acquired(fs, &pins, &err) < 0)
		log_warn("cache '%s' not trimmed: cannot list what is in use: %s", fs->st.cache, err.msg);
	else {
		dset_seal(&pins);
		int n = fs3_store_evict(&fs->st, pins.v, pins.n);
		if (n > 0)
			log_debug("evicted %d chunks from '%s'", n, fs->st.cache);
	}
	free(pins.v);
}

/* ---- gc ------------------------------------------------------------------ */

/* State of a sweep over one tier. */
struct sweep {
	const struct dset *live;	/* what stays */
	struct fs3_gc_res *res;		/* counts */
	uint64_t left;			/* stored bytes kept */
};

static int sweep_one(void *ctx, const struct fs3_digest *d, const char *path, uint64_t size)
{
	struct sweep *s = ctx;

	if (dset_has(s->live, d)) {
		s->res->kept++;
		s->left += size;
	} else if (unlink(path) == 0) {
		s->res->removed++;
		s->res->freed += size;
	}
	return 0;
}

/* What gc's walk over the tags marks into. */
struct mark_ctx {
	struct fs3 *fs;		/* the store */
	struct dset *live;	/* what stays */
	struct dsec_err *err;	/* why marking stopped */
};

static int mark_tagged(void *ctx, const char *tag, const struct fs3_digest *d)
{
	struct mark_ctx *m = ctx;

	return mark_image(m->fs, d, m->live, true, m->err);
}

static int sweep_layers(struct fs3 *fs, const struct dset *live, struct fs3_gc_res *res)
{
	_cleanup_free_ char *dir = xasprintf("%s/layers", fs->dir);
	DIR *dh = opendir(dir);
	struct dirent *e;

	if (!dh)
		return -errno;
	while ((e = readdir(dh))) {
		char hex[FS3_HEX_LEN + 1];
		struct fs3_digest d;
		if (e->d_name[0] == '.' || strlen(e->d_name) < FS3_HEX_LEN)
			continue;
		memcpy(hex, e->d_name, FS3_HEX_LEN);
		hex[FS3_HEX_LEN] = '\0';
		_cleanup_free_ char *p = xasprintf("%s/%s", dir, e->d_name);
		bool tmp = strstr(e->d_name, ".tmp.") != NULL;	/* a killed assembly */
		if (fs3_digest_parse(hex, &d) < 0 || (!tmp && dset_has(live, &d)))
			continue;
		_cleanup_free_ char *mnt = fs3_mnt_path(fs, &d);
		if (!tmp && fs3_is_mount_root(mnt))
			continue;
		if (unlink(p) == 0)
			res->layers_removed++;
	}
	closedir(dh);
	return 0;
}

int fs3_gc(struct fs3 *fs, struct fs3_gc_res *res, struct dsec_err *err)
{
	struct fs3_gc_res mine;
	struct dset live = { 0 };
	struct mark_ctx mc = { fs, &live, err };
	int r;

	if (!res)
		res = &mine;
	memset(res, 0, sizeof(*res));
	if (err)
		dsec_err_clear(err);
	if ((r = fs3_lock_excl(fs, err)) < 0)
		return r;
	fs3_reap_layers(fs, true);	/* lingering layers: their files may go */
	/* Anything unreadable aborts before the first removal. */
	if ((r = fs3_walk_tags(fs, true, mark_tagged, &mc)) < 0 ||
	    (r = mark_acquired(fs, &live, err)) < 0) {
		if (r == -EBADMSG && err && !err->msg[0])
			dsec_err_set(err, EBADMSG, "a tag file in '%s/tags' is broken", fs->st.origin);
		dsec_err_prefix(err, "gc of '%s' stopped, nothing removed", fs->st.origin);
		goto out;
	}
	dset_seal(&live);
	for (int k = 0; k < FS3_KIND__COUNT; k++) {
		struct sweep so = { &live, res, 0 }, sc = { &live, res, 0 };
		fs3_store_walk(fs->st.origin, (enum fs3_kind)k, sweep_one, &so);
		fs3_store_walk(fs->st.cache, (enum fs3_kind)k, sweep_one, &sc);
		if (k == FS3_CHUNK)
			fs->st.cache_bytes = sc.left;
	}
	sweep_layers(fs, &live, res);
	/* No import runs while we hold the lock exclusively: staging is debris. */
	fs3_each_entry(fs, "tmp", fs3_rm_path);
out:
	free(live.v);
	fs3_unlock_excl(fs);
	return r;
}
