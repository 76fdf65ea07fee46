/* acquire.c - acquire, release: the table of layer mounts, shared and
 * refcounted by every acquire of any image that has the layer, and the
 * images held for acquires (the gc roots in STORE/acquired). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs3_int.h"
#include "image.h"
#include "layer.h"
#include "log.h"
#include "ondemand.h"
#include "store.h"

/* Free loop devices an attach tries before it gives up (each lost to
 * another attacher between LOOP_CTL_GET_FREE and LOOP_CONFIGURE). */
#define LOOP_TRIES 16

static void put_devs(struct fs3 *fs, struct fs3_acquired *a);

/* ---- the layer table ----------------------------------------------------- */

/* The table's layer d that is mounted or being mounted, NULL if none. */
static struct mlayer *find_layer(struct fs3 *fs, const struct fs3_digest *d)
{
	for (size_t i = 0; i < fs->nml; i++)
		if (fs->ml[i]->state != ML_FAILED && !memcmp(fs->ml[i]->d.b, d->b, FS3_DIGEST_LEN))
			return fs->ml[i];
	return NULL;
}

/* Lets l's loop device go (mu held): closing the last descriptor
 * detaches it, at once or when whoever else has it open closes it. */
static void drop_dev(struct mlayer *l)
{
	if (l->devfd >= 0)
		close(l->devfd);
	l->devfd = -1;
	free(l->dev);
	l->dev = NULL;
	l->devrefs = 0;
}

/* Unmounts l and drops it from the table (mu held). */
static void drop_layer(struct fs3 *fs, struct mlayer *l)
{
	drop_dev(l);
	if (l->state == ML_READY)
		fs3_unmount_layer(l->mnt);
	for (size_t i = 0; i < fs->nml; i++)
		if (fs->ml[i] == l)
			fs->ml[i] = fs->ml[--fs->nml];
	free(l->mnt);
	free(l->file);
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

char *fs3_mnt_path(struct fs3 *fs, const struct fs3_digest *d)
{
	char hex[FS3_HEX_LEN + 1];

	fs3_digest_hex(d, hex);
	return xasprintf("%s/mnt/%s", fs->dir, hex);
}

char *fs3_acquired_path(struct fs3 *fs, const struct fs3_digest *d)
{
	char hex[FS3_HEX_LEN + 1];

	fs3_digest_hex(d, hex);
	return xasprintf("%s/acquired/%s", fs->dir, hex);
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
 * file (on demand), else after assembling it into STORE/layers; *file gets
 * the file it mounted (caller frees).  Runs without mu (the mount reads
 * through FUSE, whose threads never take it): one thread per layer (the one
 * that made its entry). */
static int mount_layer(struct fs3 *fs, const struct fs3_layer_ref *l, const char *mnt,
		       bool *local, char **file, struct dsec_err *err)
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
	if ((r = fs3_mount_erofs(img, mnt, ref, err)) < 0) {
		rmdir(mnt);
		return r;
	}
	*file = img;
	img = NULL;	/* the caller's now */
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
			mine[i]->devfd = -1;
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
		char *file = NULL;
		int lr = mount_layer(fs, &m->layers[i], mine[i]->mnt, &local, &file, &e);
		pthread_mutex_lock(&fs->mu);
		mine[i]->state = lr < 0 ? ML_FAILED : ML_READY;
		mine[i]->local = local;
		mine[i]->file = file;
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
	a->files = xcalloc(nl + 1, sizeof(*a->files));
	a->extras = xcalloc(nimg, sizeof(*a->extras));
	for (size_t i = 1; i < nimg; i++) {
		a->extras[i - 1] = xmalloc(FS3_REF_LEN);
		fs3_digest_ref(&d[i], a->extras[i - 1]);
	}
	a->config = m[0].config;
	memset(&m[0].config, 0, sizeof(m[0].config));
	*out = a;
	pthread_mutex_lock(&fs->mu);
	for (size_t i = 0; i < nl; i++) {
		struct mlayer *l = find_layer(fs, stack[i]);	/* held: ML_READY */
		DSEC_ASSERT(l && l->file);
		a->files[i] = xstrdup(l->file);
	}
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

/* The table's ready layer mounted at mnt (mu held), NULL if none. */
static struct mlayer *layer_at(struct fs3 *fs, const char *mnt)
{
	for (size_t i = 0; i < fs->nml; i++)
		if (fs->ml[i]->state == ML_READY && !strcmp(fs->ml[i]->mnt, mnt))
			return fs->ml[i];
	return NULL;
}

/* Attaches file read-only to a free loop device, autoclear (one
 * LOOP_CONFIGURE; a device another attach took meanwhile is EBUSY, then the
 * next free one); *fd keeps it attached, *dev is its path. */
static int loop_attach(const char *file, int *fd, char **dev, struct dsec_err *err)
{
	_cleanup_close_ int ffd = open(file, O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int ctl = -1;
	int r = 0;

	if (ffd < 0)
		return dsec_err_set(err, errno, "cannot open layer file '%s': %s", file,
				    strerror(errno));
	if ((ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC)) < 0 && errno == ENOENT)
		return dsec_err_setc(err, DSEC_E_UNSUPPORTED, ENOENT, "cannot attach layer file "
				     "'%s' to a loop device: this host has no /dev/loop-control",
				     file);
	if (ctl < 0)
		return dsec_err_set(err, errno, "cannot attach layer file '%s' to a loop device: "
				    "/dev/loop-control: %s", file, strerror(errno));
	for (int tries = 0; tries < LOOP_TRIES; tries++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		char path[32];

		if (n < 0) {
			r = -errno;
			break;
		}
		snprintf(path, sizeof(path), "/dev/loop%d", n);
		/* Opened read-only, the device is attached read-only. */
		int lfd = open(path, O_RDONLY | O_CLOEXEC);
		if (lfd < 0) {
			r = -errno;
			break;
		}
		struct loop_config c = { .fd = (uint32_t)ffd,
					 .info.lo_flags = LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR };
		snprintf((char *)c.info.lo_file_name, sizeof(c.info.lo_file_name), "%s", file);
		if (ioctl(lfd, LOOP_CONFIGURE, &c) == 0) {
			*fd = lfd;
			*dev = xstrdup(path);
			return 0;
		}
		r = -errno;
		close(lfd);
		if (r != -EBUSY)
			break;
	}
	return dsec_err_set(err, -r, "cannot attach layer file '%s' to a loop device: %s", file,
			    strerror(-r));
}

int fs3_mount_erofs(const char *img, const char *mnt, const char *what, struct dsec_err *err)
{
	char *dev = NULL;
	int fd = -1, r;

	if (mount(img, mnt, "erofs", FS3_MOUNT_FLAGS, NULL) == 0)
		return 0;
	if (errno != ENOTBLK)
		return dsec_err_set(err, errno, "cannot mount layer '%s' on '%s': %s", what, mnt,
				    strerror(errno));
	/* A kernel before 6.12 mounts EROFS from a block device only. */
	if ((r = loop_attach(img, &fd, &dev, err)) < 0) {
		dsec_err_prefix(err, "cannot mount layer '%s' on '%s' (this kernel mounts EROFS "
				"from a block device only)", what, mnt);
		return r;
	}
	if (mount(dev, mnt, "erofs", FS3_MOUNT_FLAGS, NULL) < 0)
		r = dsec_err_set(err, errno, "cannot mount layer '%s' (on %s) on '%s': %s", what,
				 dev, mnt, strerror(errno));
	close(fd);	/* autoclear: the device goes with the mount */
	free(dev);
	return r;
}

int fs3_acquired_devs(struct fs3 *fs, struct fs3_acquired *a, struct dsec_err *err)
{
	size_t i;
	int r = 0;

	if (a->devs)
		return 0;
	a->devs = xcalloc(a->nlayers + 1, sizeof(*a->devs));
	pthread_mutex_lock(&fs->mu);
	for (i = 0; i < a->nlayers; i++) {
		struct mlayer *l = layer_at(fs, a->layers[i]);	/* held by a */
		DSEC_ASSERT(l);
		if (!l->dev && (r = loop_attach(l->file, &l->devfd, &l->dev, err)) < 0)
			break;
		l->devrefs++;
		a->devs[i] = xstrdup(l->dev);
	}
	if (r < 0)
		put_devs(fs, a);
	pthread_mutex_unlock(&fs->mu);
	return r;
}

/* Drops a's holds on its layers' loop devices (mu held). */
static void put_devs(struct fs3 *fs, struct fs3_acquired *a)
{
	for (size_t i = 0; a->devs && a->devs[i]; i++) {
		struct mlayer *l = layer_at(fs, a->layers[i]);
		DSEC_ASSERT(l && l->devrefs > 0);
		if (--l->devrefs == 0)
			drop_dev(l);
	}
	dsec_strv_free(a->devs);
	a->devs = NULL;
}

void fs3_image_release(struct fs3 *fs, struct fs3_acquired *a)
{
	struct fs3_digest d;

	if (!a)
		return;
	pthread_mutex_lock(&fs->mu);
	put_devs(fs, a);
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
	dsec_strv_free(a->files);
	if (a->devs)
		dsec_strv_free(a->devs);
	dsec_strv_free(a->extras);
	free(a->lowerdir);
	fs3_image_config_free(&a->config);
	free(a);
}
