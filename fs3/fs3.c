/* fs3.c - the fs3 handle: open, close, the store lock, import, stats; its
 * other pieces are named in fs3_int.h.
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
#include "image.h"
#include "import.h"
#include "layer.h"
#include "log.h"
#include "ondemand.h"
#include "peer.h"
#include "store.h"

#define FS3_CACHE_DEFAULT (10ull << 30)
#define FS3_CHUNK_DEFAULT (1u << 20)
#define FS3_CHUNK_MIN (64u << 10)
#define FS3_CHUNK_MAX (4u << 20)
#define FS3_READAHEAD_DEFAULT 4

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
		if ((r = fs3_peer_new(&p, conf->peers[i], conf->fetch_timeout, conf->tls, err)) < 0)
			goto fail;
		fs->peers[fs->npeers++] = p;
		r = fs3_store_add_source(&fs->st, fs3_peer_name(p), fs3_peer_get, p);
		DSEC_ASSERT(r == 0);
	}
	if (conf->dynamic_peers) {
		fs3_peerset_new(&fs->dyn, fs->st.origin_timeout, conf->tls);
		if (fs3_store_add_source(&fs->st, "peers", fs3_peerset_get, fs->dyn) < 0) {
			r = dsec_err_setc(err, DSEC_E_INVALID, E2BIG, "cannot open store '%s': %d "
					  "static peers leave no room for the cluster's", fs->dir,
					  fs->npeers);
			goto fail;
		}
	}
	*out = fs;
	return 0;
fail:
	fs3_close(fs);
	return r;
}

void fs3_close(struct fs3 *fs)
{
	if (!fs)
		return;
	for (size_t i = 0; i < fs->nml; i++) {
		if (fs->ml[i]->state == ML_READY)
			fs3_unmount_layer(fs->ml[i]->mnt);
		free(fs->ml[i]->mnt);
		free(fs->ml[i]->file);
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
	fs3_peerset_free(fs->dyn);
	pthread_cond_destroy(&fs->cv);
	pthread_mutex_destroy(&fs->mu);
	free(fs->dir);
	free(fs);
}

int fs3_set_peers(struct fs3 *fs, const char *const *urls, size_t n, struct dsec_err *err)
{
	if (!fs->dyn)
		return -EINVAL;
	return fs3_peerset_set(fs->dyn, urls, n, err);
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

/* ---- import -------------------------------------------------------------- */

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

/* Stores an EROFS image file as a layer, as it is: its bytes are what the
 * kernel will mount, so fsck.erofs reads all of it first. */
static int import_erofs(struct fs3 *fs, const char *img, uint64_t max, struct fs3_layer_ref *out,
			struct fs3_layer_stats *stats, struct dsec_err *err)
{
	struct stat sb;
	int r;

	if (stat(img, &sb) < 0)
		return dsec_err_set(err, errno, "cannot import '%s': %s", img, strerror(errno));
	if (max && (uint64_t)sb.st_size > max)
		return dsec_err_setc(err, DSEC_E_CAPACITY, EFBIG, "cannot import '%s': its %llu "
				     "bytes are more than %llu", img, (unsigned long long)sb.st_size,
				     (unsigned long long)max);
	if ((r = fs3_erofs_check(img, err)) < 0)
		return r;
	return fs3_layer_put(&fs->st, img, fs->chunk_size, out, stats, err);
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
	if ((r = fs3_import_open(src, tmpl, opts->kind, &is, err)) < 0)
		goto out;
	m.n = is.dir || is.erofs ? 1 : dsec_strv_len((const char *const *)is.tars);
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
		if (is.erofs) {
			r = import_erofs(fs, is.erofs, opts->max_size, &m.layers[i], &stats, err);
			continue;
		}
		/* One layer tree on disk at a time. */
		_cleanup_free_ char *root = xasprintf("%s/l%zu", tmpl, i);
		if ((r = fs3_extract_layer(is.tars[i], root, opts->max_size, err)) == 0)
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
