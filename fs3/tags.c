/* tags.c - tags and manifests: resolving a ref, tag files, tag, untag, ls,
 * inspect. */
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

/* ---- tags, manifests ----------------------------------------------------- */

char *fs3_tags_dir(struct fs3 *fs)
{
	return xasprintf("%s/tags", fs->st.origin);
}

static int read_tag(const char *path, struct fs3_digest *d)
{
	struct dsec_buf b;
	int r;

	dsec_buf_init(&b);
	if ((r = fs3_read_all(path, 256, &b)) == 0) {
		while (b.len && (b.data[b.len - 1] == '\n' || b.data[b.len - 1] == ' '))
			b.data[--b.len] = '\0';
		r = fs3_digest_parse(b.data, d) < 0 ? -EBADMSG : 0;
	}
	dsec_buf_free(&b);
	return r;
}

/* Calls fn(ctx, "name:tag", digest) for every tag.  A broken tag file is
 * skipped with a warning, or with strict is -EBADMSG (gc must not guess). */
int fs3_walk_tags(struct fs3 *fs, bool strict,
		  int (*fn)(void *ctx, const char *tag, const struct fs3_digest *d), void *ctx)
{
	_cleanup_free_ char *dir = fs3_tags_dir(fs);
	DIR *dh = opendir(dir);
	struct dirent *e;
	int r = 0;

	if (!dh)
		return errno == ENOENT ? 0 : -errno;
	while (r == 0 && (e = readdir(dh))) {
		_cleanup_free_ char *tag = fs3_tag_from_file(e->d_name);
		_cleanup_free_ char *p = xasprintf("%s/%s", dir, e->d_name);
		struct fs3_digest d;
		if (!tag)
			continue;
		if (read_tag(p, &d) < 0) {
			log_warn("tag file '%s' is unreadable or broken%s", p, strict ? "" : "; ignored");
			if (strict) {
				r = -EBADMSG;
				break;
			}
			continue;
		}
		r = fn(ctx, tag, &d);
	}
	closedir(dh);
	return r;
}

/* State of a prefix search over the manifests. */
struct prefix_find {
	const char *hex;	/* the prefix */
	size_t len;		/* its length */
	struct fs3_digest d;	/* the last match */
	int matches;		/* how many */
};

static int prefix_match(void *ctx, const struct fs3_digest *d, const char *path, uint64_t size)
{
	struct prefix_find *f = ctx;
	char hex[FS3_HEX_LEN + 1];

	fs3_digest_hex(d, hex);
	if (!strncmp(hex, f->hex, f->len)) {
		f->d = *d;
		f->matches++;
	}
	return 0;
}

int fs3_resolve_digest(struct fs3 *fs, const char *ref, struct fs3_digest *d,
		       struct dsec_err *err)
{
	if (!strncmp(ref, "sha256:", 7)) {
		struct prefix_find f = { .hex = ref + 7, .len = strlen(ref + 7) };
		if (fs3_digest_parse(ref, d) == 0)
			return 0;
		if (f.len < 8 || f.len > FS3_HEX_LEN || strspn(f.hex, "0123456789abcdef") != f.len)
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "cannot resolve '%s': not a digest or a prefix of at least "
					     "8 hex digits", ref);
		fs3_store_walk(fs->st.origin, FS3_MANIFEST, prefix_match, &f);
		if (f.matches == 1) {
			*d = f.d;
			return 0;
		}
		return dsec_err_setc(err, f.matches ? DSEC_E_INVALID : DSEC_E_NOT_FOUND,
				     f.matches ? EINVAL : ENOENT, "cannot resolve '%s': %s", ref,
				     f.matches ? "ambiguous prefix" : "no such image");
	}
	_cleanup_free_ char *file = fs3_tag_file(ref);
	if (!file)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "cannot resolve '%s': not a valid name[:tag] or sha256: digest", ref);
	_cleanup_free_ char *dir = fs3_tags_dir(fs);
	_cleanup_free_ char *p = xasprintf("%s/%s", dir, file);
	int r = read_tag(p, d);
	if (r == -ENOENT)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT, "cannot resolve '%s': no such image",
				     ref);
	if (r < 0)
		return dsec_err_set(err, -r, "cannot read tag '%s': %s", p,
				    r == -EBADMSG ? "not a digest" : strerror(-r));
	return 0;
}

int fs3_load_manifest(struct fs3 *fs, const struct fs3_digest *d, struct fs3_manifest *m,
		      struct dsec_err *err)
{
	char ref[FS3_REF_LEN];
	struct dsec_buf b;
	int r;

	fs3_digest_ref(d, ref);
	_cleanup_free_ char *what = xasprintf("manifest '%s'", ref);
	dsec_buf_init(&b);
	r = fs3_store_get(&fs->st, FS3_MANIFEST, d, &b, what, err);
	if (r == 0 && fs3_manifest_decode(b.data, b.len, m) < 0)
		r = dsec_err_set(err, EBADMSG, "cannot read %s: not a valid manifest", what);
	dsec_buf_free(&b);
	return r;
}

int fs3_write_tag(struct fs3 *fs, const char *tag, const struct fs3_digest *d,
		  struct dsec_err *err)
{
	_cleanup_free_ char *file = fs3_tag_file(tag);
	char ref[FS3_REF_LEN];
	int r;

	if (!file)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "cannot tag '%s': not a valid name[:tag]", tag);
	_cleanup_free_ char *dir = fs3_tags_dir(fs);
	_cleanup_free_ char *p = xasprintf("%s/%s", dir, file);
	_cleanup_free_ char *line = (fs3_digest_ref(d, ref), xasprintf("%s\n", ref));
	if ((r = fs3_write_atomic(p, line, strlen(line), true)) < 0)
		return dsec_err_set(err, -r, "cannot write tag '%s': %s", p, strerror(-r));
	return 0;
}

/* ---- tags, listing ------------------------------------------------------- */

int fs3_resolve(struct fs3 *fs, const char *ref, char digest[FS3_REF_LEN], struct dsec_err *err)
{
	struct fs3_digest d;
	int r;

	r = fs3_resolve_digest(fs, ref, &d, err);
	if (r == 0)
		fs3_digest_ref(&d, digest);
	return r;
}

int fs3_tag(struct fs3 *fs, const char *ref, const char *tag, struct dsec_err *err)
{
	struct fs3_manifest m;
	struct fs3_digest d;
	int r;

	if ((r = fs3_lock_shared(fs, err)) < 0)
		return r;
	if ((r = fs3_resolve_digest(fs, ref, &d, err)) == 0 &&
	    (r = fs3_load_manifest(fs, &d, &m, err)) == 0) {
		fs3_manifest_free(&m);
		r = fs3_write_tag(fs, tag, &d, err);
	}
	fs3_unlock_shared(fs);
	return r;
}

/* State of fs3_untag's walk over the tags. */
struct untag {
	struct fs3 *fs;			/* the store */
	const struct fs3_digest *d;	/* the image whose tags go */
	int removed;			/* tags removed */
};

static int untag_one(void *ctx, const char *tag, const struct fs3_digest *d)
{
	struct untag *u = ctx;

	if (memcmp(d->b, u->d->b, FS3_DIGEST_LEN))
		return 0;
	_cleanup_free_ char *file = fs3_tag_file(tag);
	_cleanup_free_ char *dir = fs3_tags_dir(u->fs);
	_cleanup_free_ char *p = xasprintf("%s/%s", dir, file);
	if (unlink(p) < 0)
		return -errno;
	u->removed++;
	return 0;
}

int fs3_untag(struct fs3 *fs, const char *ref, struct dsec_err *err)
{
	struct fs3_digest d;
	int r;

	if ((r = fs3_lock_shared(fs, err)) < 0)
		return r;
	if (!strncmp(ref, "sha256:", 7)) {
		struct untag u = { fs, &d, 0 };
		if ((r = fs3_resolve_digest(fs, ref, &d, err)) == 0 &&
		    (r = fs3_walk_tags(fs, false, untag_one, &u)) < 0)
			r = dsec_err_set(err, -r, "cannot remove the tags of '%s': %s", ref, strerror(-r));
	} else {
		_cleanup_free_ char *file = fs3_tag_file(ref);
		_cleanup_free_ char *dir = fs3_tags_dir(fs);
		_cleanup_free_ char *p = file ? xasprintf("%s/%s", dir, file) : NULL;
		if (!p)
			r = dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					  "cannot remove '%s': not a valid name[:tag] or digest", ref);
		else if (unlink(p) < 0)
			r = errno == ENOENT ? dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT,
							    "cannot remove '%s': no such image", ref)
					    : dsec_err_set(err, errno, "cannot remove tag '%s': %s", p,
							   strerror(errno));
		else
			fs3_sync_parent(p);
	}
	fs3_unlock_shared(fs);
	return r;
}

/* Fills out for the image d (tags: NULL-terminated, taken over). */
static int image_info(struct fs3 *fs, const struct fs3_digest *d, char **tags, bool deep,
		      struct fs3_image_info *out, struct dsec_err *err)
{
	struct fs3_manifest m;
	struct fs3_index ix;
	int r;

	memset(out, 0, sizeof(*out));
	out->tags = tags;
	fs3_digest_ref(d, out->digest);
	if ((r = fs3_load_manifest(fs, d, &m, err)) < 0)
		return r;
	out->config = m.config;
	memset(&m.config, 0, sizeof(m.config));
	out->nlayers = m.n;
	out->layers = xcalloc(m.n, sizeof(*out->layers));
	for (size_t i = 0; i < m.n && r == 0; i++) {
		struct fs3_layer_info *l = &out->layers[i];
		fs3_digest_ref(&m.layers[i].digest, l->digest);
		fs3_digest_ref(&m.layers[i].index, l->index);
		l->size = m.layers[i].size;
		out->size += l->size;
		if (!deep)
			continue;
		_cleanup_free_ char *mnt = fs3_mnt_path(fs, &m.layers[i].digest);
		l->mounted = fs3_is_mount_root(mnt);
		if ((r = fs3_layer_index(&fs->st, &m.layers[i], &ix, err)) == 0) {
			l->chunks = ix.n;
			fs3_index_free(&ix);
		}
	}
	fs3_manifest_free(&m);
	return r;
}

/* One tag while listing. */
struct tag_ent {
	char *tag;		/* "name:tag" */
	struct fs3_digest d;	/* the image it names */
};

/* The tags fs3_image_list collects. */
struct tag_list {
	struct tag_ent *v;	/* entries */
	size_t n, cap;		/* used, allocated */
};

static int collect_tag(void *ctx, const char *tag, const struct fs3_digest *d)
{
	struct tag_list *l = ctx;

	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 16;
		l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
	}
	l->v[l->n++] = (struct tag_ent){ xstrdup(tag), *d };
	return 0;
}

static int tag_cmp(const void *a, const void *b)
{
	return strcmp(((const struct tag_ent *)a)->tag, ((const struct tag_ent *)b)->tag);
}

/* The tags of image d, NULL-terminated. */
static char **tags_of(const struct tag_list *l, const struct fs3_digest *d)
{
	char **v = xcalloc(l->n + 1, sizeof(*v));
	size_t k = 0;

	for (size_t i = 0; i < l->n; i++)
		if (!memcmp(l->v[i].d.b, d->b, FS3_DIGEST_LEN))
			v[k++] = xstrdup(l->v[i].tag);
	return v;
}

static void tag_list_free(struct tag_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].tag);
	free(l->v);
}

int fs3_image_list(struct fs3 *fs, struct fs3_image_info **out, size_t *n, struct dsec_err *err)
{
	struct tag_list l = { 0 };
	struct fs3_image_info *v;
	size_t k = 0;
	int r;

	if ((r = fs3_lock_shared(fs, err)) < 0)
		return r;
	if ((r = fs3_walk_tags(fs, false, collect_tag, &l)) < 0) {
		r = dsec_err_set(err, -r, "cannot list the tags of '%s': %s", fs->st.origin,
				 strerror(-r));
		goto out;
	}
	qsort(l.v, l.n, sizeof(*l.v), tag_cmp);
	v = xcalloc(l.n + 1, sizeof(*v));
	for (size_t i = 0; i < l.n && r == 0; i++) {
		bool seen = false;
		for (size_t j = 0; j < i && !seen; j++)
			seen = !memcmp(l.v[j].d.b, l.v[i].d.b, FS3_DIGEST_LEN);
		if (!seen)
			r = image_info(fs, &l.v[i].d, tags_of(&l, &l.v[i].d), false, &v[k++], err);
	}
	if (r < 0) {
		fs3_image_list_free(v, k);
		goto out;
	}
	*out = v;
	*n = k;
out:
	tag_list_free(&l);
	fs3_unlock_shared(fs);
	return r;
}

int fs3_image_inspect(struct fs3 *fs, const char *ref, struct fs3_image_info *out,
		      struct dsec_err *err)
{
	struct tag_list l = { 0 };
	struct fs3_digest d;
	int r;

	memset(out, 0, sizeof(*out));
	if ((r = fs3_lock_shared(fs, err)) < 0)
		return r;
	if ((r = fs3_resolve_digest(fs, ref, &d, err)) == 0 &&
	    (r = fs3_walk_tags(fs, false, collect_tag, &l)) < 0)
		r = dsec_err_set(err, -r, "cannot list the tags of '%s': %s", fs->st.origin,
				 strerror(-r));
	if (r == 0) {
		qsort(l.v, l.n, sizeof(*l.v), tag_cmp);
		if ((r = image_info(fs, &d, tags_of(&l, &d), true, out, err)) < 0)
			fs3_image_info_clear(out);
	}
	tag_list_free(&l);
	fs3_unlock_shared(fs);
	return r;
}

void fs3_image_info_clear(struct fs3_image_info *i)
{
	if (i->tags)
		dsec_strv_free(i->tags);
	free(i->layers);
	fs3_image_config_free(&i->config);
	memset(i, 0, sizeof(*i));
}

void fs3_image_list_free(struct fs3_image_info *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fs3_image_info_clear(&v[i]);
	free(v);
}
