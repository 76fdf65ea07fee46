/* pull.c - fs3 between nodes: an image's chunks pulled in, objects served to
 * peers, and where a layer is (a local file, or served on demand). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs3_int.h"
#include "image.h"
#include "layer.h"
#include "ondemand.h"
#include "store.h"

/* ---- peers: pull, serve ---------------------------------------------------- */

/* A chunk to pull, and the layer that names it (for messages). */
struct pull_item {
	struct fs3_digest c;		/* the chunk */
	struct fs3_digest layer;	/* its (first) layer */
};

static int pull_item_cmp(const void *a, const void *b)
{
	return fs3_digest_cmp(&((const struct pull_item *)a)->c, &((const struct pull_item *)b)->c);
}

/* The image's chunks, each once, into *out (caller frees); fetching the
 * manifest and the indexes makes them local too. */
static int pull_list(struct fs3 *fs, const struct fs3_digest *d, struct pull_item **out,
		     size_t *n, struct dsec_err *err)
{
	struct pull_item *v = NULL;
	struct fs3_manifest m;
	struct fs3_index ix;
	size_t cnt = 0, cap = 0, w = 0;
	int r;

	if ((r = fs3_load_manifest(fs, d, &m, err)) < 0)
		return r;
	for (size_t i = 0; i < m.n && r == 0; i++) {
		if ((r = fs3_layer_index(&fs->st, &m.layers[i], &ix, err)) < 0)
			break;
		for (size_t j = 0; j < ix.n; j++) {
			if (cnt == cap) {
				cap = cap ? 2 * cap : 256;
				v = xrealloc(v, cap * sizeof(*v));
			}
			v[cnt++] = (struct pull_item){ .c = ix.chunks[j].d, .layer = m.layers[i].digest };
		}
		fs3_index_free(&ix);
	}
	fs3_manifest_free(&m);
	if (r < 0) {
		free(v);
		return r;
	}
	if (cnt) {
		/* Stable enough: a chunk in two layers is named with either. */
		qsort(v, cnt, sizeof(*v), pull_item_cmp);
		for (size_t i = 1; i < cnt; i++)
			if (pull_item_cmp(&v[w], &v[i]))
				v[++w] = v[i];
		w++;
	}
	*out = v;
	*n = w;
	return 0;
}

int fs3_pull(struct fs3 *fs, const char *ref, struct fs3_pull_res *res, struct dsec_err *err)
{
	struct fs3_pull_res mine;
	struct pull_item *v = NULL;
	struct fs3_digest d;
	struct dsec_buf b;
	double t0 = dsec_now();
	size_t n = 0;
	int r;

	if (!res)
		res = &mine;
	memset(res, 0, sizeof(*res));
	res->nsrc = (size_t)fs->st.nsrc;
	for (int i = 0; i < fs->st.nsrc; i++)
		snprintf(res->src[i].name, sizeof(res->src[i].name), "%s", fs->st.src[i].name);
	if ((r = fs3_lock_shared(fs, err)) < 0)
		return r;
	if ((r = fs3_resolve_digest(fs, ref, &d, err)) < 0 ||
	    (r = pull_list(fs, &d, &v, &n, err)) < 0)
		goto out;
	fs3_digest_ref(&d, res->digest);
	res->chunks = n;
	dsec_buf_init(&b);
	for (size_t i = 0; i < n && r == 0; i++) {
		char cref[FS3_REF_LEN], lref[FS3_REF_LEN];
		uint64_t stored = 0;
		int from = FS3_FROM_CACHE;

		fs3_digest_ref(&v[i].c, cref);
		fs3_digest_ref(&v[i].layer, lref);
		_cleanup_free_ char *what = xasprintf("chunk '%s' of layer '%s'", cref, lref);
		if ((r = fs3_store_fetch(&fs->st, FS3_CHUNK, &v[i].c, &b, what, &from, &stored,
					 err)) < 0)
			break;
		if (from == FS3_FROM_CACHE) {
			res->local++;
			continue;
		}
		res->fetched++;
		res->bytes += stored;
		res->src[from].objects++;
		res->src[from].bytes += stored;
	}
	dsec_buf_free(&b);
	if (r < 0)
		dsec_err_prefix(err, "cannot pull '%s'", ref);
	pthread_mutex_lock(&fs->mu);
	fs3_evict(fs);	/* the least recently used go first: not these */
	pthread_mutex_unlock(&fs->mu);
out:
	fs3_unlock_shared(fs);
	free(v);
	res->seconds = dsec_now() - t0;
	return r;
}

int fs3_serve(struct fs3 *fs, const char *kind, const char *digest, struct dsec_buf *out,
	      struct dsec_err *err)
{
	struct fs3_digest d;
	int k = fs3_kind_parse(kind), r;

	dsec_buf_reset(out);
	if (k < 0)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "'%s' is not an object kind "
				     "(chunk, index, manifest)", kind);
	if (fs3_digest_parse(digest, &d) < 0 || strncmp(digest, "sha256:", 7))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "'%s' is not a sha256: digest",
				     digest);
	if ((r = fs3_store_local(&fs->st, (enum fs3_kind)k, &d, out)) < 0)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, -r, "this node has no %s%s '%s'",
				     r == -EBADMSG ? "good copy of the " : "", kind, digest);
	__atomic_add_fetch(&fs->served_objects, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&fs->served_bytes, out->len, __ATOMIC_RELAXED);
	return 0;
}

int fs3_layer_local(struct fs3 *fs, const char *layer, size_t *present, size_t *total)
{
	char hex[FS3_HEX_LEN + 1];
	struct fs3_digest d;
	struct stat sb;

	*present = *total = 0;
	if (fs3_digest_parse(layer, &d) < 0)
		return -EINVAL;
	fs3_digest_hex(&d, hex);
	_cleanup_free_ char *img = xasprintf("%s/layers/%s.erofs", fs->dir, hex);
	if (stat(img, &sb) == 0)
		return 1;
	pthread_mutex_lock(&fs->mu);
	struct fs3_fuse *fu = fs->fuse;
	pthread_mutex_unlock(&fs->mu);
	if (fu && fs3_fuse_layer_state(fu, &d, present, total) == 0)
		return 0;
	return -ENOENT;
}

int fs3_layer_fill(struct fs3 *fs, const char *layer)
{
	struct fs3_digest d;

	if (fs3_digest_parse(layer, &d) < 0)
		return -EINVAL;
	pthread_mutex_lock(&fs->mu);
	struct fs3_fuse *fu = fs->fuse;
	pthread_mutex_unlock(&fs->mu);
	return fu ? fs3_fuse_fill(fu, &d) : -ENOENT;
}
