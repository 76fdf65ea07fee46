/* squash.c - an image with each run of small adjacent layers merged into one
 * (see fs3_squash). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "fs3_int.h"
#include "image.h"
#include "layer.h"
#include "store.h"

/* Lays layer l over the tree at root (made by the run's first layer; with
 * below, layers lie under the run): mounts its EROFS image, read-only, on
 * tmp/mnt and merges it in (fs3_diff_copy, FS3_DIFF_MERGE). */
static int squash_layer(struct fs3 *fs, const char *tmp, const struct fs3_layer_ref *l,
			const char *root, bool first, bool below, struct dsec_err *err)
{
	char hex[FS3_HEX_LEN + 1];
	struct stat sb;
	int r;

	fs3_digest_hex(&l->digest, hex);
	_cleanup_free_ char *img = xasprintf("%s/layers/%s.erofs", fs->dir, hex);
	_cleanup_free_ char *mine = xasprintf("%s/squash.erofs", tmp);
	_cleanup_free_ char *mnt = xasprintf("%s/mnt", tmp);
	_cleanup_free_ char *ref = xasprintf("sha256:%s", hex);
	if (stat(img, &sb) < 0 || (uint64_t)sb.st_size != l->size) {
		if ((r = fs3_layer_materialize(&fs->st, l, mine, err)) < 0)
			return r;
		free(img);
		img = xstrdup(mine);
	}
	if (mkdir(mnt, 0700) < 0 && errno != EEXIST)
		r = dsec_err_set(err, errno, "cannot create '%s': %s", mnt, strerror(errno));
	else if ((r = fs3_mount_erofs(img, mnt, ref, err)) == 0) {
		unsigned flags = first ? 0 : FS3_DIFF_MERGE | (below ? FS3_DIFF_BELOW : 0);

		r = fs3_diff_copy(mnt, root, 0, 0, flags, 0, NULL, err);
		if (umount2(mnt, MNT_DETACH) < 0 && r == 0)
			r = dsec_err_set(err, errno, "cannot unmount '%s': %s", mnt, strerror(errno));
	}
	unlink(mine);
	return r;
}

static int squash_locked(struct fs3 *fs, const char *ref, uint64_t max_size, const char *tag,
			 struct fs3_squash_res *res, struct dsec_err *err)
{
	_cleanup_free_ char *tmpl = xasprintf("%s/tmp/squash-XXXXXX", fs->dir);
	struct fs3_layer_stats stats = { 0 };
	struct fs3_manifest m, out = { 0 };
	struct fs3_digest d, md;
	struct dsec_buf enc;
	uint64_t stored = 0;
	int r;

	if ((r = fs3_resolve_digest(fs, ref, &d, err)) < 0 ||
	    (r = fs3_load_manifest(fs, &d, &m, err)) < 0)
		return r;
	if (!mkdtemp(tmpl)) {
		r = dsec_err_set(err, errno, "cannot create a staging directory in '%s/tmp': %s",
				 fs->dir, strerror(errno));
		goto done;
	}
	res->before = m.n;
	out.layers = xcalloc(m.n + 1, sizeof(*out.layers));
	for (size_t i = 0, j; i < m.n; i = j) {
		for (j = i; j < m.n && m.layers[j].size < max_size; j++)
			;
		if (j - i < 2) {	/* a big layer, or a small one alone: as it is */
			j = i + 1;
			out.layers[out.n++] = m.layers[i];
			continue;
		}
		_cleanup_free_ char *root = xasprintf("%s/tree", tmpl);
		for (size_t k = i; k < j && r == 0; k++)
			r = squash_layer(fs, tmpl, &m.layers[k], root, k == i, i > 0, err);
		if (r == 0)
			r = fs3_import_layer(fs, tmpl, root, i, &out.layers[out.n++], &stats, err);
		dsec_rm_rf(root);
		if (r < 0)
			goto done;
		res->runs++;
	}
	res->after = out.n;
	res->logical = stats.logical;
	if (!res->runs) {
		fs3_digest_ref(&d, res->digest);
		md = d;
	} else {
		fs3_config_copy(&out.config, &m.config);
		dsec_buf_init(&enc);
		fs3_manifest_encode(&out, &enc);
		r = fs3_store_put(&fs->st, FS3_MANIFEST, enc.data, enc.len, &md, &stored);
		dsec_buf_free(&enc);
		if (r < 0) {
			r = dsec_err_set(err, -r, "cannot store the manifest of the squashed '%s' in "
					 "'%s': %s", ref, fs->st.origin, strerror(-r));
			goto done;
		}
		fs3_digest_ref(&md, res->digest);
	}
	res->stored = stats.stored + stored;
	if (tag)
		r = fs3_write_tag(fs, tag, &md, err);
done:
	dsec_rm_rf(tmpl);
	fs3_manifest_free(&out);
	fs3_manifest_free(&m);
	return r;
}

int fs3_squash(struct fs3 *fs, const char *ref, uint64_t max_size, const char *tag,
	       struct fs3_squash_res *res, struct dsec_err *err)
{
	struct fs3_squash_res mine;
	double t0 = dsec_now();
	int r;

	if (!res)
		res = &mine;
	memset(res, 0, sizeof(*res));
	if (tag && !fs3_tag_valid(tag))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "cannot tag '%s': not a valid "
				     "name[:tag]", tag);
	if ((r = fs3_lock_shared(fs, err)) < 0)
		return r;
	r = squash_locked(fs, ref, max_size, tag, res, err);
	fs3_end_add(fs, r);
	res->seconds = dsec_now() - t0;
	return r;
}
