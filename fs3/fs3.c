/* fs3.c - the fs3 handle: import, tags, shared layer mounts, gc.
 *
 * The local store directory STORE holds:
 *   lock              flock: shared to add, exclusive for gc
 *   mnt.lock          flock held by the one mounter (dsecd) while it runs
 *   cache/            the cache tier (see store.h)
 *   origin/           the origin when no other is configured
 *   layers/HEX.erofs  layer images assembled from verified chunks
 *   layers/HEX.partial  a layer being fetched on demand (sparse; see ondemand.h)
 *   fuse/             the mounter's FUSE mount: HEX.erofs per on-demand layer
 *   mnt/HEX/          where each layer is mounted, once per node
 *   acquired/HEX      one file per image acquired by the mounter: gc roots,
 *                     and what pins chunks in the cache
 *   tmp/              staging of imports
 * Tags live in ORIGIN/tags/NAME:TAG ('/' in NAME as '+'), so that every node
 * sharing the origin sees them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "fs3_int.h"
#include "ondemand.h"
#include "image.h"
#include "import.h"
#include "layer.h"
#include "log.h"
#include "peer.h"
#include "store.h"

#define FS3_CACHE_DEFAULT (10ull << 30)
#define FS3_CHUNK_DEFAULT (1u << 20)
#define FS3_CHUNK_MIN (64u << 10)
#define FS3_CHUNK_MAX (4u << 20)
#define FS3_READAHEAD_DEFAULT 4

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

/* ---- locking ------------------------------------------------------------- */

static int do_flock(struct fs3 *fs, int op, struct dsec_err *err)
{
	while (flock(fs->lockfd, op) < 0)
		if (errno != EINTR)
			return dsec_err_set(err, errno, "cannot lock store '%s': %s", fs->dir,
					    strerror(errno));
	return 0;
}

/* The flock is one per process (one open file): the first shared user
 * takes it, the last lets it go. */
int fs3_lock_shared(struct fs3 *fs, struct dsec_err *err)
{
	int r = 0;

	pthread_mutex_lock(&fs->mu);
	if (fs->nshared == 0)
		r = do_flock(fs, LOCK_SH, err);
	if (r == 0)
		fs->nshared++;
	pthread_mutex_unlock(&fs->mu);
	return r;
}

void fs3_unlock_shared(struct fs3 *fs)
{
	pthread_mutex_lock(&fs->mu);
	DSEC_ASSERT(fs->nshared > 0);
	if (--fs->nshared == 0) {
		flock(fs->lockfd, LOCK_UN);
		pthread_cond_broadcast(&fs->cv);
	}
	pthread_mutex_unlock(&fs->mu);
}

/* Returns with mu held and the flock exclusive, once no call of ours
 * holds it shared. */
int fs3_lock_excl(struct fs3 *fs, struct dsec_err *err)
{
	int r;

	pthread_mutex_lock(&fs->mu);
	while (fs->nshared > 0)
		pthread_cond_wait(&fs->cv, &fs->mu);
	if ((r = do_flock(fs, LOCK_EX, err)) < 0)
		pthread_mutex_unlock(&fs->mu);
	return r;
}

void fs3_unlock_excl(struct fs3 *fs)
{
	flock(fs->lockfd, LOCK_UN);
	pthread_mutex_unlock(&fs->mu);
}

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

/* ---- open, close --------------------------------------------------------- */

bool fs3_is_mount_root(const char *path)
{
	struct statx stx;

	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &stx) < 0)
		return false;
	return (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
	       (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

/* Unmounts path (lazily when busy) and removes the mount point. */
void fs3_unmount_layer(const char *path)
{
	while (fs3_is_mount_root(path)) {
		if (umount2(path, UMOUNT_NOFOLLOW) == 0)
			continue;
		if (errno == EBUSY)
			log_warn("layer mount '%s' is busy; detaching it", path);
		else
			log_warn("cannot unmount '%s': %s; detaching it", path, strerror(errno));
		if (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0) {
			log_error("cannot detach '%s': %s", path, strerror(errno));
			return;
		}
	}
	rmdir(path);
}

/* Calls fn(path) for each entry of STORE/sub. */
void fs3_each_entry(struct fs3 *fs, const char *sub, void (*fn)(const char *path))
{
	_cleanup_free_ char *dir = xasprintf("%s/%s", fs->dir, sub);
	DIR *dh = opendir(dir);
	struct dirent *e;

	if (!dh)
		return;
	while ((e = readdir(dh))) {
		if (e->d_name[0] == '.')
			continue;
		_cleanup_free_ char *p = xasprintf("%s/%s", dir, e->d_name);
		fn(p);
	}
	closedir(dh);
}

static void unlink_path(const char *path)
{
	unlink(path);
}

void fs3_rm_path(const char *path)
{
	dsec_rm_rf(path);
}

/* Our predecessor was killed: its mounts and acquire records are stale. */
static void clean_stale(struct fs3 *fs)
{
	fs3_each_entry(fs, "mnt", fs3_unmount_layer);
	fs3_each_entry(fs, "acquired", unlink_path);
}

int fs3_open(struct fs3 **out, const struct fs3_conf *conf, struct dsec_err *err)
{
	char real[PATH_MAX];
	struct fs3 *fs;
	uint32_t cs = conf->chunk_size ? conf->chunk_size : FS3_CHUNK_DEFAULT;
	/* Declared here: a goto fail must not pass a cleanup's declaration. */
	_cleanup_free_ char *cache = NULL, *origin = NULL, *tags = NULL, *lk = NULL;
	int r;

	if (!conf->store || !*conf->store)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "cannot open fs3: no store directory");
	if (cs < FS3_CHUNK_MIN || cs > FS3_CHUNK_MAX || (cs & (cs - 1)))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "cannot open store '%s': chunk size %u is not a power of two "
				     "from 64 KiB to 4 MiB", conf->store, cs);
	if ((r = dsec_mkdir_p(conf->store, 0755)) < 0 || !realpath(conf->store, real))
		return dsec_err_set(err, r < 0 ? -r : errno, "cannot create store '%s': %s",
				    conf->store, strerror(r < 0 ? -r : errno));
	fs = xcalloc(1, sizeof(*fs));
	pthread_mutex_init(&fs->mu, NULL);
	pthread_cond_init(&fs->cv, NULL);
	fs->dir = xstrdup(real);
	fs->chunk_size = cs;
	fs->flags = conf->flags;
	fs->lockfd = fs->mntlockfd = -1;
	static const char *const subdirs[] = { "layers", "mnt", "acquired", "tmp" };
	for (size_t i = 0; i < DSEC_ARRAY_LEN(subdirs); i++) {
		_cleanup_free_ char *p = xasprintf("%s/%s", fs->dir, subdirs[i]);
		if ((r = dsec_mkdir_p(p, 0755)) < 0) {
			r = dsec_err_set(err, -r, "cannot create '%s': %s", p, strerror(-r));
			goto fail;
		}
	}
	cache = xasprintf("%s/cache", fs->dir);
	origin = conf->origin && *conf->origin ? xstrdup(conf->origin)
					       : xasprintf("%s/origin", fs->dir);
	if ((r = fs3_store_init(&fs->st, cache, origin,
				conf->cache_max ? conf->cache_max : FS3_CACHE_DEFAULT)) < 0) {
		r = dsec_err_set(err, -r, "cannot open store '%s' with origin '%s': %s", fs->dir,
				 origin, strerror(-r));
		goto fail;
	}
	tags = fs3_tags_dir(fs);
	lk = xasprintf("%s/lock", fs->dir);
	if ((r = dsec_mkdir_p(tags, 0755)) < 0 ||
	    (fs->lockfd = open(lk, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0) {
		r = dsec_err_set(err, r < 0 ? -r : errno, "cannot open store '%s': %s", fs->dir,
				 strerror(r < 0 ? -r : errno));
		goto fail;
	}
	/* Staging a killed import or squash left behind: removed when no
	 * other process adds to the store (they hold the lock shared), and
	 * never waited for. */
	if (flock(fs->lockfd, LOCK_EX | LOCK_NB) == 0) {
		fs3_each_entry(fs, "tmp", fs3_rm_path);
		flock(fs->lockfd, LOCK_UN);
	}
	if (fs->flags & FS3_MOUNTER) {
		_cleanup_free_ char *ml = xasprintf("%s/mnt.lock", fs->dir);
		fs->mntlockfd = open(ml, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (fs->mntlockfd < 0 || flock(fs->mntlockfd, LOCK_EX | LOCK_NB) < 0) {
			int e = errno;
			r = dsec_err_set(err, e == EWOULDBLOCK ? EBUSY : e,
					 "cannot mount layers of store '%s': %s", fs->dir,
					 e == EWOULDBLOCK ? "another process mounts them" : strerror(e));
			goto fail;
		}
		clean_stale(fs);
		_cleanup_free_ char *fm = xasprintf("%s/fuse", fs->dir);
		fs3_fuse_clean_stale(fm);
		fs->od_state = !conf->full_fetch;
		fs->linger = conf->linger > 0 ? conf->linger : 0;
		fs->readahead = conf->readahead < 0 ? 0 : conf->readahead ? (unsigned)conf->readahead
									  : FS3_READAHEAD_DEFAULT;
	}
	fs->st.origin_timeout = conf->fetch_timeout > 0 ? conf->fetch_timeout
						       : FS3_FETCH_TIMEOUT_DEFAULT;
	for (size_t i = 0; conf->peers && conf->peers[i]; i++) {
		struct fs3_peer *p;
		if (fs->npeers == FS3_PEERS_MAX) {
			r = dsec_err_setc(err, DSEC_E_INVALID, E2BIG, "cannot open store '%s': more "
					  "than %d peers", fs->dir, FS3_PEERS_MAX);
			goto fail;
		}
		if ((r = fs3_peer_new(&p, conf->peers[i], conf->fetch_timeout, err)) < 0)
			goto fail;
		fs->peers[fs->npeers++] = p;
		r = fs3_store_add_source(&fs->st, fs3_peer_name(p), fs3_peer_get, p);
		DSEC_ASSERT(r == 0);
	}
	*out = fs;
	return 0;
fail:
	fs3_close(fs);
	return r;
}

/* The table's layer d that is mounted or being mounted, NULL if none. */
static struct mlayer *find_layer(struct fs3 *fs, const struct fs3_digest *d)
{
	for (size_t i = 0; i < fs->nml; i++)
		if (fs->ml[i]->state != ML_FAILED && !memcmp(fs->ml[i]->d.b, d->b, FS3_DIGEST_LEN))
			return fs->ml[i];
	return NULL;
}

/* Unmounts l and drops it from the table (mu held). */
static void drop_layer(struct fs3 *fs, struct mlayer *l)
{
	if (l->state == ML_READY)
		fs3_unmount_layer(l->mnt);
	for (size_t i = 0; i < fs->nml; i++)
		if (fs->ml[i] == l)
			fs->ml[i] = fs->ml[--fs->nml];
	free(l->mnt);
	free(l);
}

/* Drops a reference to l (mu held); the last one unmounts it, unless it
 * is local and lingers (see fs3_conf.linger). */
static void put_layer(struct fs3 *fs, struct mlayer *l)
{
	DSEC_ASSERT(l->refs > 0);
	if (--l->refs > 0)
		return;
	DSEC_ASSERT(l->state != ML_MOUNTING);
	if (l->state == ML_READY && l->local && fs->linger > 0) {
		l->idle = dsec_now();
		return;
	}
	drop_layer(fs, l);
}

/* Unmounts the lingering layers idle for conf.linger, or all (mu held). */
void fs3_reap_layers(struct fs3 *fs, bool all)
{
	double now = dsec_now();

	for (size_t i = fs->nml; i-- > 0;) {
		struct mlayer *l = fs->ml[i];
		if (!l->refs && l->state == ML_READY && (all || now - l->idle >= fs->linger))
			drop_layer(fs, l);
	}
}

char *fs3_acquired_path(struct fs3 *fs, const struct fs3_digest *d)
{
	char hex[FS3_HEX_LEN + 1];

	fs3_digest_hex(d, hex);
	return xasprintf("%s/acquired/%s", fs->dir, hex);
}

void fs3_close(struct fs3 *fs)
{
	if (!fs)
		return;
	for (size_t i = 0; i < fs->nml; i++) {
		if (fs->ml[i]->state == ML_READY)
			fs3_unmount_layer(fs->ml[i]->mnt);
		free(fs->ml[i]->mnt);
		free(fs->ml[i]);
	}
	fs3_fuse_stop(fs->fuse);	/* after the EROFS mounts on its files */
	for (size_t i = 0; i < fs->nhi; i++) {
		_cleanup_free_ char *p = fs3_acquired_path(fs, &fs->hi[i]->d);
		unlink(p);
		free(fs->hi[i]->layers);
		free(fs->hi[i]);
	}
	free(fs->ml);
	free(fs->hi);
	if (fs->lockfd >= 0)
		close(fs->lockfd);
	if (fs->mntlockfd >= 0)
		close(fs->mntlockfd);
	fs3_store_fini(&fs->st);
	for (int i = 0; i < fs->npeers; i++)
		fs3_peer_free(fs->peers[i]);
	pthread_cond_destroy(&fs->cv);
	pthread_mutex_destroy(&fs->mu);
	free(fs->dir);
	free(fs);
}

/* ---- import -------------------------------------------------------------- */

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

/* Turns one layer tree into an EROFS image and stores it. */
int fs3_import_layer(struct fs3 *fs, const char *staging, const char *root, size_t i,
		     struct fs3_layer_ref *out, struct fs3_layer_stats *stats, struct dsec_err *err)
{
	_cleanup_free_ char *img = xasprintf("%s/layer%zu.erofs", staging, i);
	int r;

	if ((r = fs3_mkfs_erofs(root, img, err)) == 0)
		r = fs3_layer_put(&fs->st, img, fs->chunk_size, out, stats, err);
	unlink(img);
	return r;
}

static int import_locked(struct fs3 *fs, const char *src, const struct fs3_import_opts *opts,
			 struct fs3_import_res *res, struct dsec_err *err)
{
	_cleanup_free_ char *tmpl = xasprintf("%s/tmp/import-XXXXXX", fs->dir);
	struct fs3_layer_stats stats = { 0 };
	struct fs3_manifest m = { 0 };
	struct fs3_import_src is;
	struct fs3_digest md;
	struct dsec_buf enc;
	uint64_t stored = 0;
	int r;

	if (!mkdtemp(tmpl))
		return dsec_err_set(err, errno, "cannot create a staging directory in '%s/tmp': %s",
				    fs->dir, strerror(errno));
	if ((r = fs3_import_open(src, tmpl, &is, err)) < 0)
		goto out;
	m.n = is.dir ? 1 : dsec_strv_len((const char *const *)is.tars);
	if (m.n == 0) {
		r = dsec_err_set(err, EINVAL, "cannot import '%s': the image has no layers", src);
		goto out;
	}
	m.layers = xcalloc(m.n, sizeof(*m.layers));
	for (size_t i = 0; i < m.n && r == 0; i++) {
		if (is.dir) {
			r = fs3_import_layer(fs, tmpl, is.dir, i, &m.layers[i], &stats, err);
			continue;
		}
		/* One layer tree on disk at a time. */
		_cleanup_free_ char *root = xasprintf("%s/l%zu", tmpl, i);
		if ((r = fs3_extract_layer(is.tars[i], root, err)) == 0)
			r = fs3_import_layer(fs, tmpl, root, i, &m.layers[i], &stats, err);
		dsec_rm_rf(root);
	}
	if (r < 0)
		goto out;
	if (opts->base) {
		/* The base's layers below, its config under ours. */
		struct fs3_manifest bm;
		struct fs3_image_config cfg = { 0 };
		struct fs3_digest bd;

		if ((r = fs3_resolve_digest(fs, opts->base, &bd, err)) < 0 ||
		    (r = fs3_load_manifest(fs, &bd, &bm, err)) < 0)
			goto out;
		bm.layers = xrealloc(bm.layers, (bm.n + m.n) * sizeof(*bm.layers));
		memcpy(bm.layers + bm.n, m.layers, m.n * sizeof(*m.layers));
		free(m.layers);
		m.layers = bm.layers;
		m.n += bm.n;
		bm.layers = NULL;
		bm.n = 0;
		fs3_config_merge(&cfg, &bm.config, &is.config);
		fs3_manifest_free(&bm);
		fs3_config_merge(&m.config, &cfg, &opts->config);
		fs3_image_config_free(&cfg);
	} else {
		fs3_config_merge(&m.config, &is.config, &opts->config);
	}
	dsec_buf_init(&enc);
	fs3_manifest_encode(&m, &enc);
	r = fs3_store_put(&fs->st, FS3_MANIFEST, enc.data, enc.len, &md, &stored);
	dsec_buf_free(&enc);
	if (r < 0) {
		r = dsec_err_set(err, -r, "cannot store the manifest of '%s' in '%s': %s", src,
				 fs->st.origin, strerror(-r));
		goto out;
	}
	stats.stored += stored;
	if (opts->tag && (r = fs3_write_tag(fs, opts->tag, &md, err)) < 0)
		goto out;
	fs3_digest_ref(&md, res->digest);
	snprintf(res->format, sizeof(res->format), "%s", is.format);
	res->nlayers = m.n;
	res->logical = stats.logical;
	res->stored = stats.stored;
	res->chunks = stats.chunks;
	res->new_chunks = stats.new_chunks;
out:
	fs3_import_src_free(&is);
	fs3_manifest_free(&m);
	dsec_rm_rf(tmpl);
	return r;
}

/* Ends an addition (import, squash) begun with fs3_lock_shared: a success
 * trims the cache. */
void fs3_end_add(struct fs3 *fs, int r)
{
	pthread_mutex_lock(&fs->mu);
	if (r == 0)
		fs3_evict(fs);
	pthread_mutex_unlock(&fs->mu);
	fs3_unlock_shared(fs);
}

int fs3_import(struct fs3 *fs, const char *src, const struct fs3_import_opts *opts,
	       struct fs3_import_res *res, struct dsec_err *err)
{
	static const struct fs3_import_opts none;
	struct fs3_import_res mine;
	double t0 = dsec_now();
	int r;

	if (!res)
		res = &mine;
	memset(res, 0, sizeof(*res));
	if (!opts)
		opts = &none;
	_cleanup_free_ char *tagfile = opts->tag ? fs3_tag_file(opts->tag) : NULL;
	if (opts->tag && !tagfile)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "cannot tag '%s': not a valid "
				     "name[:tag]", opts->tag);
	if ((r = fs3_lock_shared(fs, err)) < 0)
		return r;
	r = import_locked(fs, src, opts, res, err);
	fs3_end_add(fs, r);
	res->seconds = dsec_now() - t0;
	return r;
}

/* ---- squash -------------------------------------------------------------- */

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
	if (stat(img, &sb) < 0 || (uint64_t)sb.st_size != l->size) {
		if ((r = fs3_layer_materialize(&fs->st, l, mine, err)) < 0)
			return r;
		free(img);
		img = xstrdup(mine);
	}
	if (mkdir(mnt, 0700) < 0 && errno != EEXIST)
		r = dsec_err_set(err, errno, "cannot create '%s': %s", mnt, strerror(errno));
	else if (mount(img, mnt, "erofs", FS3_MOUNT_FLAGS, NULL) < 0)
		r = dsec_err_set(err, errno, "cannot mount layer 'sha256:%s' on '%s': %s", hex, mnt,
				 strerror(errno));
	else {
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

char *fs3_mnt_path(struct fs3 *fs, const struct fs3_digest *d)
{
	char hex[FS3_HEX_LEN + 1];

	fs3_digest_hex(d, hex);
	return xasprintf("%s/mnt/%s", fs->dir, hex);
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

/* ---- acquire, release ----------------------------------------------------- */

/* The FUSE server of on-demand layers, started at the first need (so that
 * a mounter that never mounts a layer has no FUSE mount); NULL when layers
 * are fetched whole. */
static struct fs3_fuse *od_fuse(struct fs3 *fs)
{
	struct fs3_fuse *fu;

	pthread_mutex_lock(&fs->mu);
	if (!fs->fuse && fs->od_state == 1) {
		_cleanup_free_ char *fm = xasprintf("%s/fuse", fs->dir);
		_cleanup_free_ char *ld = xasprintf("%s/layers", fs->dir);
		struct dsec_err e;
		/* Mounting FUSE sends it no request before it returns: safe under mu. */
		if (fs3_fuse_start(&fs->fuse, fm, ld, &fs->st, fs->readahead, &e) < 0) {
			log_warn("layers of '%s' are fetched whole before mounting: %s", fs->dir,
				 e.msg);
			fs->od_state = 0;
		}
	}
	fu = fs->fuse;
	pthread_mutex_unlock(&fs->mu);
	return fu;
}

/* Mounts layer l at mnt: from its local file if there, else from its FUSE
 * file (on demand), else after assembling it into STORE/layers.  Runs
 * without mu (the mount reads through FUSE, whose threads never take it):
 * one thread per layer (the one that made its entry). */
static int mount_layer(struct fs3 *fs, const struct fs3_layer_ref *l, const char *mnt,
		       bool *local, struct dsec_err *err)
{
	char hex[FS3_HEX_LEN + 1], ref[FS3_REF_LEN];
	struct stat sb;
	int r;

	fs3_digest_hex(&l->digest, hex);
	fs3_digest_ref(&l->digest, ref);
	_cleanup_free_ char *img = xasprintf("%s/layers/%s.erofs", fs->dir, hex);
	*local = true;
	/* An image file is only ever renamed into place once verified. */
	if (stat(img, &sb) < 0 || (uint64_t)sb.st_size != l->size) {
		struct fs3_fuse *fu = od_fuse(fs);
		if (fu) {
			*local = false;
			free(img);
			if ((r = fs3_fuse_add(fu, l, &img, err)) < 0) {
				img = NULL;
				return r;
			}
		} else if ((r = fs3_layer_materialize(&fs->st, l, img, err)) < 0)
			return r;
	}
	fs3_unmount_layer(mnt);	/* a mount there is not ours: stale */
	if (mkdir(mnt, 0755) < 0 && errno != EEXIST)
		return dsec_err_set(err, errno, "cannot create '%s': %s", mnt, strerror(errno));
	if (mount(img, mnt, "erofs", FS3_MOUNT_FLAGS, NULL) < 0) {
		r = dsec_err_set(err, errno, "cannot mount layer '%s' on '%s': %s", ref, mnt,
				 strerror(errno));
		rmdir(mnt);
		return r;
	}
	return 0;
}

static struct held *find_held(struct fs3 *fs, const struct fs3_digest *d)
{
	for (size_t i = 0; i < fs->nhi; i++)
		if (!memcmp(fs->hi[i]->d.b, d->b, FS3_DIGEST_LEN))
			return fs->hi[i];
	return NULL;
}

/* Drops an acquire of image d (mu held): its layers, and its record with
 * the last one. */
static void put_held(struct fs3 *fs, const struct fs3_digest *d, struct mlayer **layers)
{
	struct held *h = find_held(fs, d);

	DSEC_ASSERT(h && h->refs > 0);
	for (size_t i = 0; i < h->n; i++)
		put_layer(fs, layers ? layers[i] : find_layer(fs, &h->layers[i]));
	if (--h->refs > 0)
		return;
	_cleanup_free_ char *rec = fs3_acquired_path(fs, d);
	unlink(rec);
	for (size_t i = 0; i < fs->nhi; i++)
		if (fs->hi[i] == h)
			fs->hi[i] = fs->hi[--fs->nhi];
	free(h->layers);
	free(h);
}

/* Takes image d (manifest m) and each of its layers for one more acquire.
 * A layer no one has yet is entered as ML_MOUNTING and mounted by this
 * thread with mu released; one that another thread is mounting is waited
 * for.  On failure everything taken is given back. */
static int hold_image(struct fs3 *fs, const struct fs3_digest *d, const struct fs3_manifest *m,
		      struct dsec_err *err)
{
	_cleanup_free_ struct mlayer **mine = xcalloc(m->n + 1, sizeof(*mine));
	_cleanup_free_ bool *todo = xcalloc(m->n + 1, sizeof(*todo));
	struct held *h;
	int r = 0;

	pthread_mutex_lock(&fs->mu);
	if (!(h = find_held(fs, d))) {
		/* The record first: from here gc and eviction keep the image. */
		_cleanup_free_ char *rec = fs3_acquired_path(fs, d);
		if ((r = fs3_write_atomic(rec, "", 0, false)) < 0) {
			pthread_mutex_unlock(&fs->mu);
			return dsec_err_set(err, -r, "cannot record the acquire in '%s': %s", rec,
					    strerror(-r));
		}
		if (fs->nhi == fs->caphi) {
			fs->caphi = fs->caphi ? 2 * fs->caphi : 16;
			fs->hi = xrealloc(fs->hi, fs->caphi * sizeof(*fs->hi));
		}
		h = fs->hi[fs->nhi++] = xcalloc(1, sizeof(*h));
		*h = (struct held){ .d = *d, .n = m->n,
				    .layers = xcalloc(m->n + 1, sizeof(*h->layers)) };
		for (size_t i = 0; i < m->n; i++)
			h->layers[i] = m->layers[i].digest;
	}
	h->refs++;
	for (size_t i = 0; i < m->n; i++) {
		if (!(mine[i] = find_layer(fs, &m->layers[i].digest))) {
			if (fs->nml == fs->capml) {
				fs->capml = fs->capml ? 2 * fs->capml : 16;
				fs->ml = xrealloc(fs->ml, fs->capml * sizeof(*fs->ml));
			}
			mine[i] = fs->ml[fs->nml++] = xcalloc(1, sizeof(**mine));
			mine[i]->d = m->layers[i].digest;
			mine[i]->state = ML_MOUNTING;
			mine[i]->mnt = fs3_mnt_path(fs, &m->layers[i].digest);
			todo[i] = true;
		}
		mine[i]->refs++;
	}
	pthread_mutex_unlock(&fs->mu);

	for (size_t i = 0; i < m->n; i++) {
		if (!todo[i])
			continue;
		struct dsec_err e;
		dsec_err_clear(&e);
		bool local = false;
		int lr = mount_layer(fs, &m->layers[i], mine[i]->mnt, &local, &e);
		pthread_mutex_lock(&fs->mu);
		mine[i]->state = lr < 0 ? ML_FAILED : ML_READY;
		mine[i]->local = local;
		mine[i]->err = e;
		pthread_cond_broadcast(&fs->cv);
		pthread_mutex_unlock(&fs->mu);
	}

	pthread_mutex_lock(&fs->mu);
	for (size_t i = 0; i < m->n; i++) {
		while (mine[i]->state == ML_MOUNTING)
			pthread_cond_wait(&fs->cv, &fs->mu);
		if (mine[i]->state == ML_FAILED && r == 0) {
			r = mine[i]->err.errnum ? -mine[i]->err.errnum : -EIO;
			if (err)
				*err = mine[i]->err;
		}
	}
	if (r < 0)
		put_held(fs, d, mine);
	pthread_mutex_unlock(&fs->mu);
	return r;
}

/* The stack's layers, top first: the last image's top layer first, each
 * layer once, where it is highest.  Caller frees *out (not its digests). */
static size_t stack_layers(const struct fs3_manifest *m, size_t nimg,
			   const struct fs3_digest ***out)
{
	size_t total = 0, n = 0;

	for (size_t i = 0; i < nimg; i++)
		total += m[i].n;
	const struct fs3_digest **v = xcalloc(total + 1, sizeof(*v));
	for (size_t i = nimg; i-- > 0;)
		for (size_t j = m[i].n; j-- > 0;) {
			const struct fs3_digest *l = &m[i].layers[j].digest;
			size_t k;
			for (k = 0; k < n && memcmp(v[k]->b, l->b, FS3_DIGEST_LEN); k++)
				;
			if (k == n)
				v[n++] = l;
		}
	*out = v;
	return n;
}

int fs3_image_acquire_stack(struct fs3 *fs, const char *ref, const char *const *extras,
			    struct fs3_acquired **out, struct dsec_err *err)
{
	size_t nimg = 1 + (extras ? dsec_strv_len(extras) : 0), loaded = 0, held = 0, nl;
	_cleanup_free_ struct fs3_manifest *m = xcalloc(nimg, sizeof(*m));
	_cleanup_free_ struct fs3_digest *d = xcalloc(nimg, sizeof(*d));
	_cleanup_free_ const struct fs3_digest **stack = NULL;
	struct fs3_acquired *a;
	struct dsec_buf low;
	int r;

	*out = NULL;
	if (!(fs->flags & FS3_MOUNTER))
		return dsec_err_set(err, EPERM, "cannot acquire image '%s': store '%s' was not opened "
				    "to mount layers", ref, fs->dir);
	if ((r = fs3_lock_shared(fs, err)) < 0)
		return r;
	/* Every ref resolved and every manifest read before anything is held. */
	for (; loaded < nimg; loaded++) {
		const char *name = loaded ? extras[loaded - 1] : ref;
		if ((r = fs3_resolve_digest(fs, name, &d[loaded], err)) < 0 ||
		    (r = fs3_load_manifest(fs, &d[loaded], &m[loaded], err)) < 0)
			goto out;
	}
	nl = stack_layers(m, nimg, &stack);
	if (nl > FS3_STACK_MAX) {
		r = dsec_err_setc(err, DSEC_E_INVALID, E2BIG,
				  "cannot stack image '%s' with %zu more: %zu layers, more than the "
				  "%d one overlay mount takes", ref, nimg - 1, nl, FS3_STACK_MAX);
		goto out;
	}
	for (; held < nimg; held++)
		if ((r = hold_image(fs, &d[held], &m[held], err)) < 0)
			goto out;
	a = xcalloc(1, sizeof(*a));
	fs3_digest_ref(&d[0], a->digest);
	a->nlayers = nl;
	a->layers = xcalloc(nl + 1, sizeof(*a->layers));
	dsec_buf_init(&low);
	for (size_t i = 0; i < nl; i++) {
		a->layers[i] = fs3_mnt_path(fs, stack[i]);
		dsec_buf_addf(&low, "%s%s", i ? ":" : "", a->layers[i]);
	}
	a->lowerdir = dsec_buf_detach(&low, NULL);
	a->extras = xcalloc(nimg, sizeof(*a->extras));
	for (size_t i = 1; i < nimg; i++) {
		a->extras[i - 1] = xmalloc(FS3_REF_LEN);
		fs3_digest_ref(&d[i], a->extras[i - 1]);
	}
	a->config = m[0].config;
	memset(&m[0].config, 0, sizeof(m[0].config));
	*out = a;
	pthread_mutex_lock(&fs->mu);
	fs3_reap_layers(fs, false);
	fs3_evict(fs);
	pthread_mutex_unlock(&fs->mu);
out:
	if (r < 0 && held) {
		pthread_mutex_lock(&fs->mu);
		while (held-- > 0)
			put_held(fs, &d[held], NULL);
		pthread_mutex_unlock(&fs->mu);
	}
	for (size_t i = 0; i < loaded; i++)
		fs3_manifest_free(&m[i]);
	fs3_unlock_shared(fs);
	return r;
}

int fs3_image_acquire(struct fs3 *fs, const char *ref, struct fs3_acquired **out,
		      struct dsec_err *err)
{
	return fs3_image_acquire_stack(fs, ref, NULL, out, err);
}

void fs3_image_release(struct fs3 *fs, struct fs3_acquired *a)
{
	struct fs3_digest d;

	if (!a)
		return;
	pthread_mutex_lock(&fs->mu);
	DSEC_ASSERT(fs3_digest_parse(a->digest, &d) == 0);
	put_held(fs, &d, NULL);
	for (size_t i = 0; a->extras && a->extras[i]; i++) {
		DSEC_ASSERT(fs3_digest_parse(a->extras[i], &d) == 0);
		put_held(fs, &d, NULL);
	}
	fs3_reap_layers(fs, false);
	pthread_mutex_unlock(&fs->mu);
	fs3_acquired_free(a);
}

void fs3_acquired_free(struct fs3_acquired *a)
{
	if (!a)
		return;
	dsec_strv_free(a->layers);
	dsec_strv_free(a->extras);
	free(a->lowerdir);
	fs3_image_config_free(&a->config);
	free(a);
}

void fs3_get_stats(struct fs3 *fs, struct fs3_stats *out)
{
	struct fs3_fuse_stats f = { 0 };
	struct fs3_fuse *fu;

	pthread_mutex_lock(&fs->mu);
	fu = fs->fuse;
	pthread_mutex_unlock(&fs->mu);
	if (fu)
		fs3_fuse_get_stats(fu, &f);
	*out = (struct fs3_stats){
		.src_objects = __atomic_load_n(&fs->st.src_objects, __ATOMIC_RELAXED),
		.src_bytes = __atomic_load_n(&fs->st.src_bytes, __ATOMIC_RELAXED),
		.on_demand = fu != NULL,
		.od_layers = f.layers,
		.od_reads = f.reads,
		.od_read_bytes = f.read_bytes,
		.od_chunks = f.chunks,
		.od_chunk_bytes = f.chunk_bytes,
		.od_readahead = f.readahead,
		.od_errors = f.errors,
		.od_completed = f.completed,
		.nsrc = (size_t)fs->st.nsrc,
		.served_objects = __atomic_load_n(&fs->served_objects, __ATOMIC_RELAXED),
		.served_bytes = __atomic_load_n(&fs->served_bytes, __ATOMIC_RELAXED),
	};
	for (int i = 0; i < fs->st.nsrc; i++) {
		snprintf(out->src[i].name, sizeof(out->src[i].name), "%s", fs->st.src[i].name);
		out->src[i].objects = __atomic_load_n(&fs->st.src[i].objects, __ATOMIC_RELAXED);
		out->src[i].bytes = __atomic_load_n(&fs->st.src[i].bytes, __ATOMIC_RELAXED);
	}
}

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
