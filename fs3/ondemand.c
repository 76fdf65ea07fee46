/* ondemand.c - on-demand layer files over libfuse3's low-level API.
 *
 * Inodes: 1 is the root directory, 2 + k the k-th layer added (layers stay
 * for the life of the handle, so that a lazily detached EROFS mount can keep
 * reading its file; a layer's entry is small: its index and one byte per
 * chunk).  Chunk states move ABSENT -> FETCHING -> PRESENT, or FAILED when a
 * fetch gave up; one thread fetches a chunk, the others that need it wait on
 * the handle's condition variable.  A FAILED chunk is fetched again by the
 * next read that needs it.
 */
#define FUSE_USE_VERSION 314

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <fuse_lowlevel.h>
#include <openssl/evp.h>

#include "layer.h"
#include "ondemand.h"
#include "log.h"

/* EROFS on-disk superblock: at byte 1024 (see fs3_erofs_root). */
#define EROFS_SB_OFF 1024
/* Gap a read may leave after the previous one and still count as sequential. */
#define SEQ_SLACK (256u << 10)
/* Read-ahead jobs queued at most (a fill may queue more). */
#define RA_QUEUE_MAX 4096

enum chunk_state { C_ABSENT, C_FETCHING, C_PRESENT, C_FAILED };

/* One layer served by the FUSE file system. */
struct odl {
	struct fs3_layer_ref ref;	/* the layer */
	char hex[FS3_HEX_LEN + 1];	/* its digest in hex: file names */
	struct fs3_index ix;		/* its chunks */
	uint64_t *off;			/* ix.n + 1 chunk offsets */
	uint8_t *state;			/* enum chunk_state per chunk */
	size_t present;			/* chunks in C_PRESENT */
	int fd;				/* STORE/layers/<hex>.partial, read-write */
	char *partial, *local;		/* its path, and the local image's */
	uint64_t last_end;		/* end of the last read (sequential detection) */
	unsigned ra_win;		/* read-ahead window now: grows 1, 2, 4.. up to readahead */
	size_t ra_next;			/* first chunk not yet queued for read-ahead */
	bool finishing;			/* the completion job is queued or done */
};

/* A job of the background thread. */
struct job {
	struct odl *l;		/* layer */
	size_t i;		/* chunk, or SIZE_MAX: check and rename the complete layer */
	bool ra;		/* queued by read-ahead (counted as such) */
};

struct fs3_fuse {
	struct fs3_store *st;		/* the tiers (not owned) */
	char *mnt;			/* STORE/fuse */
	char *layers_dir;		/* STORE/layers */
	unsigned readahead;		/* chunks ahead of a sequential reader */
	struct fuse_session *se;	/* the libfuse session */
	pthread_t loop;			/* runs fuse_session_loop_mt */
	unsigned conn;			/* the kernel's connection number (fusectl), 0 = unknown */
	bool loop_done;			/* the loop returned (under mu) */
	pthread_t bg;			/* runs the jobs */
	pthread_mutex_t mu;		/* guards everything below */
	pthread_cond_t cv;		/* a chunk changed state, a job came, loop_done */
	struct odl **l;			/* layers, inode 2 + k */
	size_t nl, capl;		/* used, allocated */
	struct job *q;			/* job FIFO: q[qh..qt) */
	size_t qh, qt, qcap;		/* head, tail, allocated */
	bool stopping;			/* fs3_fuse_stop began */
	struct fs3_fuse_stats stats;	/* counters */
};

/* ---- chunks --------------------------------------------------------------- */

static size_t chunk_at(const struct odl *l, uint64_t pos)
{
	size_t lo = 0, hi = l->ix.n;	/* off[lo] <= pos < off[hi] */

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (l->off[mid] <= pos)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Fetches chunk i of l into its partial file: FS3_FUSE_TRIES attempts. */
static int fetch_chunk(struct fs3_fuse *fu, struct odl *l, size_t i, struct dsec_err *err)
{
	char c[FS3_REF_LEN], lr[FS3_REF_LEN];
	struct dsec_buf b;
	int r = -EIO;

	fs3_digest_ref(&l->ix.chunks[i].d, c);
	fs3_digest_ref(&l->ref.digest, lr);
	_cleanup_free_ char *what = xasprintf("chunk %zu '%s' of layer '%s'", i, c, lr);
	dsec_buf_init(&b);
	for (int t = 0; t < FS3_FUSE_TRIES; t++) {
		if (t)
			nanosleep(&(struct timespec){ .tv_nsec = 50000000L * t }, NULL);
		if ((r = fs3_store_get(fu->st, FS3_CHUNK, &l->ix.chunks[i].d, &b, what, err)) < 0) {
			if (r == -EBADMSG)
				break;	/* every source had a bad copy: asking again won't help */
			continue;
		}
		if (b.len != l->ix.chunks[i].len) {
			r = dsec_err_set(err, EBADMSG, "cannot use %s: %zu bytes, the index says %u",
					 what, b.len, l->ix.chunks[i].len);
			break;
		}
		/* A chunk of zeros stays a hole of the sparse file. */
		if (!fs3_is_zero(b.data, b.len) &&
		    pwrite(l->fd, b.data, b.len, (off_t)l->off[i]) != (ssize_t)b.len) {
			r = dsec_err_set(err, errno ? errno : EIO, "cannot write %s to '%s': %s",
					 what, l->partial, strerror(errno ? errno : EIO));
			break;
		}
		r = 0;
		break;
	}
	dsec_buf_free(&b);
	return r;
}

static void push_job(struct fs3_fuse *fu, struct job j)
{
	if (fu->qt == fu->qcap) {
		if (fu->qh > 0) {
			memmove(fu->q, fu->q + fu->qh, (fu->qt - fu->qh) * sizeof(*fu->q));
			fu->qt -= fu->qh;
			fu->qh = 0;
		}
		if (fu->qt == fu->qcap) {
			fu->qcap = fu->qcap ? 2 * fu->qcap : 64;
			fu->q = xrealloc(fu->q, fu->qcap * sizeof(*fu->q));
		}
	}
	fu->q[fu->qt++] = j;
	pthread_cond_broadcast(&fu->cv);
}

/* Makes chunk i of l present (mu not held): 0, or -EIO after logging. */
static int ensure(struct fs3_fuse *fu, struct odl *l, size_t i, bool ra)
{
	struct dsec_err err;
	int r;

	pthread_mutex_lock(&fu->mu);
	for (;;) {
		if (l->state[i] == C_PRESENT) {
			pthread_mutex_unlock(&fu->mu);
			return 0;
		}
		if (l->state[i] != C_FETCHING)
			break;
		while (l->state[i] == C_FETCHING)
			pthread_cond_wait(&fu->cv, &fu->mu);
		if (l->state[i] == C_FAILED) {	/* the fetch we waited for gave up */
			pthread_mutex_unlock(&fu->mu);
			return -EIO;
		}
	}
	l->state[i] = C_FETCHING;
	pthread_mutex_unlock(&fu->mu);

	dsec_err_clear(&err);
	r = fetch_chunk(fu, l, i, &err);
	if (r < 0)
		log_error("on-demand read of layer '%s' failed: %s", l->hex, err.msg);

	pthread_mutex_lock(&fu->mu);
	l->state[i] = r < 0 ? C_FAILED : C_PRESENT;
	if (r == 0) {
		l->present++;
		fu->stats.chunks++;
		fu->stats.chunk_bytes += l->ix.chunks[i].len;
		fu->stats.readahead += ra;
		if (l->present == l->ix.n && !l->finishing) {
			l->finishing = true;
			push_job(fu, (struct job){ .l = l, .i = SIZE_MAX });
		}
	}
	pthread_cond_broadcast(&fu->cv);
	pthread_mutex_unlock(&fu->mu);
	return r < 0 ? -EIO : 0;
}

/* Every chunk is there: check the image and make it the local copy. */
static void finish_layer(struct odl *l)
{
	unsigned char *buf = xmalloc(1u << 20);
	struct fs3_digest got;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	uint64_t pos = 0;
	int r = 0;

	if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
		DSEC_BUG("cannot set up sha256");
	while (pos < l->ref.size) {
		size_t want = l->ref.size - pos < (1u << 20) ? l->ref.size - pos : (1u << 20);
		ssize_t n = pread(l->fd, buf, want, (off_t)pos);
		if (n <= 0) {
			r = n < 0 ? -errno : -EIO;
			break;
		}
		EVP_DigestUpdate(md, buf, (size_t)n);
		pos += (uint64_t)n;
	}
	EVP_DigestFinal_ex(md, got.b, NULL);
	EVP_MD_CTX_free(md);
	free(buf);
	if (r == 0 && memcmp(got.b, l->ref.digest.b, FS3_DIGEST_LEN))
		r = -EBADMSG;
	if (r == 0 && fsync(l->fd) < 0)
		r = -errno;
	if (r == 0 && rename(l->partial, l->local) < 0)
		r = -errno;
	if (r == 0)
		fs3_sync_parent(l->local);
	if (r < 0)
		log_error("layer '%s' stays on demand: cannot make it local: %s", l->hex,
			  strerror(-r));
	else
		log_debug("layer '%s' is local now", l->hex);
}

static void *bg_main(void *arg)
{
	struct fs3_fuse *fu = arg;

	pthread_mutex_lock(&fu->mu);
	for (;;) {
		while (!fu->stopping && fu->qh == fu->qt)
			pthread_cond_wait(&fu->cv, &fu->mu);
		if (fu->stopping)
			break;
		struct job j = fu->q[fu->qh++];
		pthread_mutex_unlock(&fu->mu);
		if (j.i == SIZE_MAX) {
			finish_layer(j.l);
			pthread_mutex_lock(&fu->mu);
			fu->stats.completed++;
			continue;
		}
		ensure(fu, j.l, j.i, j.ra);
		pthread_mutex_lock(&fu->mu);
	}
	pthread_mutex_unlock(&fu->mu);
	return NULL;
}

/* ---- FUSE operations ------------------------------------------------------ */

static struct odl *layer_of(struct fs3_fuse *fu, fuse_ino_t ino)
{
	struct odl *l = NULL;

	pthread_mutex_lock(&fu->mu);
	if (ino >= 2 && ino - 2 < fu->nl)
		l = fu->l[ino - 2];
	pthread_mutex_unlock(&fu->mu);
	return l;
}

static void fill_attr(struct odl *l, fuse_ino_t ino, struct stat *sb)
{
	memset(sb, 0, sizeof(*sb));
	sb->st_ino = ino;
	if (!l) {
		sb->st_mode = S_IFDIR | 0555;
		sb->st_nlink = 2;
		return;
	}
	sb->st_mode = S_IFREG | 0444;
	sb->st_nlink = 1;
	sb->st_size = (off_t)l->ref.size;
	sb->st_blksize = 4096;
	sb->st_blocks = (blkcnt_t)((l->ref.size + 511) / 512);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs3_fuse *fu = fuse_req_userdata(req);
	struct fuse_entry_param e = { 0 };
	struct odl *l = NULL;
	size_t k;

	if (parent != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	pthread_mutex_lock(&fu->mu);
	for (k = 0; k < fu->nl && !l; k++)
		if (!strncmp(name, fu->l[k]->hex, FS3_HEX_LEN) && !strcmp(name + FS3_HEX_LEN, ".erofs"))
			l = fu->l[k];
	pthread_mutex_unlock(&fu->mu);
	if (!l) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	e.ino = k + 1;	/* k went one past */
	e.attr_timeout = e.entry_timeout = 3600;
	fill_attr(l, e.ino, &e.attr);
	fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs3_fuse *fu = fuse_req_userdata(req);
	struct odl *l = ino == FUSE_ROOT_ID ? NULL : layer_of(fu, ino);
	struct stat sb;

	if (ino != FUSE_ROOT_ID && !l) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_attr(l, ino, &sb);
	fuse_reply_attr(req, &sb, 3600);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct fs3_fuse *fu = fuse_req_userdata(req);
	char *buf = xmalloc(size);
	size_t used = 0;

	if (ino != FUSE_ROOT_ID) {
		free(buf);
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	pthread_mutex_lock(&fu->mu);
	for (size_t k = (size_t)off; k < fu->nl + 2; k++) {
		struct stat sb = { .st_ino = k < 2 ? FUSE_ROOT_ID : k,
				   .st_mode = k < 2 ? S_IFDIR : S_IFREG };
		char name[FS3_HEX_LEN + 8];
		snprintf(name, sizeof(name), "%s", k == 0 ? "." : k == 1 ? ".." : "");
		if (k >= 2)
			snprintf(name, sizeof(name), "%s.erofs", fu->l[k - 2]->hex);
		size_t n = fuse_add_direntry(req, buf + used, size - used, name, &sb, (off_t)k + 1);
		if (n > size - used)
			break;
		used += n;
	}
	pthread_mutex_unlock(&fu->mu);
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs3_fuse *fu = fuse_req_userdata(req);

	if (!layer_of(fu, ino)) {
		fuse_reply_err(req, ino == FUSE_ROOT_ID ? EISDIR : ENOENT);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fi->keep_cache = 1;	/* the content never changes */
	fuse_reply_open(req, fi);
}

/* Why: a read is served only from chunks that are present, fetched here in
 * order; a reader that continues the previous read gets the chunks after its
 * range queued for the background thread, so that a sequential scan finds
 * them local. */
static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fs3_fuse *fu = fuse_req_userdata(req);
	struct odl *l = layer_of(fu, ino);
	uint64_t end;
	size_t first, last;
	bool seq;

	if (!l) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if ((uint64_t)off >= l->ref.size || size == 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	end = (uint64_t)off + size > l->ref.size ? l->ref.size : (uint64_t)off + size;
	first = chunk_at(l, (uint64_t)off);
	last = chunk_at(l, end - 1);
	for (size_t i = first; i <= last; i++) {
		if (ensure(fu, l, i, false) < 0) {
			pthread_mutex_lock(&fu->mu);
			fu->stats.errors++;
			pthread_mutex_unlock(&fu->mu);
			fuse_reply_err(req, EIO);
			return;
		}
	}

	pthread_mutex_lock(&fu->mu);
	seq = (uint64_t)off <= l->last_end + SEQ_SLACK && (uint64_t)off + SEQ_SLACK >= l->last_end;
	l->last_end = end;
	/* The window starts at one chunk and doubles while the reader stays
	 * sequential, so that a short file costs at most a chunk extra. */
	l->ra_win = !seq ? 0 : l->ra_win ? 2 * l->ra_win : 1;
	if (l->ra_win > fu->readahead)
		l->ra_win = fu->readahead;
	if (l->ra_win) {
		size_t from = last + 1 > l->ra_next ? last + 1 : l->ra_next;
		size_t to = last + 1 + l->ra_win;
		if (to > l->ix.n)
			to = l->ix.n;
		for (size_t i = from; i < to && fu->qt - fu->qh < RA_QUEUE_MAX; i++) {
			if (l->state[i] == C_ABSENT || l->state[i] == C_FAILED)
				push_job(fu, (struct job){ .l = l, .i = i, .ra = true });
			l->ra_next = i + 1;
		}
	}
	fu->stats.reads++;
	fu->stats.read_bytes += end - (uint64_t)off;
	pthread_mutex_unlock(&fu->mu);

	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(end - (uint64_t)off);
	bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	bv.buf[0].fd = l->fd;
	bv.buf[0].pos = off;
	fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv = { .f_bsize = 4096, .f_frsize = 4096, .f_namemax = 255 };

	fuse_reply_statfs(req, &sv);
}

static const struct fuse_lowlevel_ops ops = {
	.lookup = op_lookup,
	.getattr = op_getattr,
	.readdir = op_readdir,
	.open = op_open,
	.read = op_read,
	.statfs = op_statfs,
};

/* ---- start, stop, layers -------------------------------------------------- */

static void *loop_main(void *arg)
{
	struct fs3_fuse *fu = arg;
	struct fuse_loop_config *cfg = fuse_loop_cfg_create();

	fuse_loop_cfg_set_max_threads(cfg, 16);
	fuse_loop_cfg_set_idle_threads(cfg, 4);
	fuse_session_loop_mt(fu->se, cfg);
	fuse_loop_cfg_destroy(cfg);
	pthread_mutex_lock(&fu->mu);
	fu->loop_done = true;
	pthread_cond_broadcast(&fu->cv);
	pthread_mutex_unlock(&fu->mu);
	return NULL;
}

/* Detaches what is mounted at mnt; how many mounts went.  A dead FUSE
 * mount fails stat() with ENOTCONN: do not ask, detach until nothing is
 * mounted there (EINVAL). */
static int detach_all(const char *mnt)
{
	int n = 0;

	while (n < 16 && umount2(mnt, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
		n++;
	return n;
}

void fs3_fuse_clean_stale(const char *mnt)
{
	if (detach_all(mnt) > 0)
		log_warn("detached a stale on-demand mount at '%s'", mnt);
}

int fs3_fuse_start(struct fs3_fuse **out, const char *mnt, const char *layers_dir,
		   struct fs3_store *st, unsigned readahead, struct dsec_err *err)
{
	_cleanup_free_ char *opts = xasprintf("ro,fsname=fs3,subtype=fs3%s",
					      geteuid() == 0 ? ",allow_other" : "");
	char *argv[] = { "fs3", "-o", opts, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	struct fs3_fuse *fu;
	int r;

	fs3_fuse_clean_stale(mnt);
	if (mkdir(mnt, 0755) < 0 && errno != EEXIST)
		return dsec_err_set(err, errno, "cannot create '%s': %s", mnt, strerror(errno));
	fu = xcalloc(1, sizeof(*fu));
	fu->st = st;
	fu->mnt = xstrdup(mnt);
	fu->layers_dir = xstrdup(layers_dir);
	fu->readahead = readahead;
	pthread_mutex_init(&fu->mu, NULL);
	pthread_cond_init(&fu->cv, NULL);
	fu->se = fuse_session_new(&args, &ops, sizeof(ops), fu);
	fuse_opt_free_args(&args);
	if (!fu->se) {
		r = dsec_err_set(err, EINVAL, "cannot start the on-demand file system at '%s'", mnt);
		goto fail;
	}
	if (fuse_session_mount(fu->se, mnt) != 0) {
		fuse_session_destroy(fu->se);
		fu->se = NULL;
		r = dsec_err_set(err, ENODEV, "cannot mount the on-demand file system at '%s' "
				 "(is /dev/fuse there?)", mnt);
		goto fail;
	}
	if ((r = -pthread_create(&fu->loop, NULL, loop_main, fu)) < 0 ||
	    (r = -pthread_create(&fu->bg, NULL, bg_main, fu)) < 0)
		DSEC_BUG("cannot start a thread: %s", strerror(-r));
	/* Only now: a stat of the mount waits for the loop to answer INIT. */
	struct stat sb;
	if (stat(mnt, &sb) == 0)	/* the kernel's dev_t: major << 20 | minor */
		fu->conn = major(sb.st_dev) << 20 | minor(sb.st_dev);
	*out = fu;
	return 0;
fail:
	pthread_cond_destroy(&fu->cv);
	pthread_mutex_destroy(&fu->mu);
	free(fu->mnt);
	free(fu->layers_dir);
	free(fu);
	return r;
}

/* Waits up to secs for the loop to return; whether it did. */
static bool wait_loop(struct fs3_fuse *fu, int secs)
{
	struct timespec dl;
	bool done;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += secs;
	pthread_mutex_lock(&fu->mu);
	while (!fu->loop_done && pthread_cond_timedwait(&fu->cv, &fu->mu, &dl) == 0)
		;
	done = fu->loop_done;
	pthread_mutex_unlock(&fu->mu);
	return done;
}

/* Aborts the connection through fusectl (mounted if it is not): its
 * requests fail and the loop's reads return ENODEV. */
static void abort_conn(struct fs3_fuse *fu)
{
	const char *ctl = "/sys/fs/fuse/connections";
	_cleanup_free_ char *p = xasprintf("%s/%u/abort", ctl, fu->conn);
	int fd;

	if (!fu->conn)
		return;
	if (access(p, W_OK) < 0)
		mount("fusectl", ctl, "fusectl", 0, NULL);
	if ((fd = open(p, O_WRONLY | O_CLOEXEC)) >= 0) {
		if (write(fd, "1", 1) != 1)
			log_warn("cannot abort '%s': %s", p, strerror(errno));
		close(fd);
	}
}

void fs3_fuse_stop(struct fs3_fuse *fu)
{
	bool done;

	if (!fu)
		return;
	pthread_mutex_lock(&fu->mu);
	fu->stopping = true;
	pthread_cond_broadcast(&fu->cv);
	pthread_mutex_unlock(&fu->mu);
	pthread_join(fu->bg, NULL);

	/* Detaching the mount ends the connection once nothing uses its files
	 * (the caller unmounted the EROFS mounts): the loop then returns. */
	fuse_session_exit(fu->se);
	detach_all(fu->mnt);
	if (!(done = wait_loop(fu, 2))) {
		/* Something still holds a file of ours (an EROFS mount detached
		 * while busy, or not yet torn down): end the connection. */
		log_warn("on-demand file system '%s' still in use; aborting it", fu->mnt);
		abort_conn(fu);
		done = wait_loop(fu, 5);
	}
	if (!done) {
		/* An EROFS mount detached while busy still holds a file: the
		 * connection lives on; leave the session to it. */
		log_warn("on-demand file system '%s' is still in use; leaving it detached", fu->mnt);
		pthread_detach(fu->loop);
		return;
	}
	pthread_join(fu->loop, NULL);
	fuse_session_unmount(fu->se);
	fuse_session_destroy(fu->se);
	rmdir(fu->mnt);
	for (size_t k = 0; k < fu->nl; k++) {
		struct odl *l = fu->l[k];
		close(l->fd);
		fs3_index_free(&l->ix);
		free(l->off);
		free(l->state);
		free(l->partial);
		free(l->local);
		free(l);
	}
	free(fu->l);
	free(fu->q);
	pthread_cond_destroy(&fu->cv);
	pthread_mutex_destroy(&fu->mu);
	free(fu->mnt);
	free(fu->layers_dir);
	free(fu);
}

static struct odl *find_odl(struct fs3_fuse *fu, const struct fs3_digest *d, size_t *k)
{
	for (size_t i = 0; i < fu->nl; i++)
		if (!memcmp(fu->l[i]->ref.digest.b, d->b, FS3_DIGEST_LEN)) {
			if (k)
				*k = i;
			return fu->l[i];
		}
	return NULL;
}

/* Why: the mount reads the superblock and the root inode before anything
 * else, and so does every path lookup; fetching their chunks up front (the
 * superblock is in the first chunk, the root inode in the metadata area
 * the superblock points at) makes the mount one round of fetches, done
 * here rather than by the kernel one request at a time. */
static int fetch_metadata(struct fs3_fuse *fu, struct odl *l, struct dsec_err *err)
{
	unsigned char sb[128];
	uint64_t root;

	if (l->ix.n == 0)
		return 0;
	if (ensure(fu, l, 0, false) < 0)
		goto fail;
	if (l->ref.size < EROFS_SB_OFF + sizeof(sb) ||
	    pread(l->fd, sb, sizeof(sb), EROFS_SB_OFF) != (ssize_t)sizeof(sb) ||
	    fs3_erofs_root(sb, sizeof(sb), l->ref.size, &root) < 0)
		return 0;	/* not EROFS: the mount will say so */
	if (ensure(fu, l, chunk_at(l, root), false) < 0)
		goto fail;
	return 0;
fail:;
	char lr[FS3_REF_LEN];
	fs3_digest_ref(&l->ref.digest, lr);
	return dsec_err_set(err, EIO, "cannot fetch the metadata of layer '%s' (see the log)", lr);
}

int fs3_fuse_add(struct fs3_fuse *fu, const struct fs3_layer_ref *lr, char **file,
		 struct dsec_err *err)
{
	struct odl *l;
	size_t k;
	int r;

	pthread_mutex_lock(&fu->mu);
	l = find_odl(fu, &lr->digest, &k);
	pthread_mutex_unlock(&fu->mu);
	if (!l) {
		l = xcalloc(1, sizeof(*l));
		l->ref = *lr;
		fs3_digest_hex(&lr->digest, l->hex);
		if ((r = fs3_layer_index(fu->st, lr, &l->ix, err)) < 0) {
			free(l);
			return r;
		}
		l->off = xcalloc(l->ix.n + 1, sizeof(*l->off));
		for (size_t i = 0; i < l->ix.n; i++)
			l->off[i + 1] = l->off[i] + l->ix.chunks[i].len;
		l->state = xcalloc(l->ix.n + 1, 1);
		l->partial = xasprintf("%s/%s.partial", fu->layers_dir, l->hex);
		l->local = xasprintf("%s/%s.erofs", fu->layers_dir, l->hex);
		l->fd = open(l->partial, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (l->fd < 0 || ftruncate(l->fd, (off_t)lr->size) < 0) {
			r = dsec_err_set(err, errno, "cannot create '%s': %s", l->partial,
					 strerror(errno));
			if (l->fd >= 0)
				close(l->fd);
			fs3_index_free(&l->ix);
			free(l->off), free(l->state), free(l->partial), free(l->local), free(l);
			return r;
		}
		/* Only the mounter's thread that owns the layer's entry (acquire.c)
		 * adds it: no other add of d races this one. */
		pthread_mutex_lock(&fu->mu);
		if (fu->nl == fu->capl) {
			fu->capl = fu->capl ? 2 * fu->capl : 16;
			fu->l = xrealloc(fu->l, fu->capl * sizeof(*fu->l));
		}
		k = fu->nl;
		fu->l[fu->nl++] = l;
		fu->stats.layers++;
		pthread_mutex_unlock(&fu->mu);
	}
	if ((r = fetch_metadata(fu, l, err)) < 0)
		return r;
	*file = xasprintf("%s/%s.erofs", fu->mnt, l->hex);
	return 0;
}

int fs3_fuse_layer_state(struct fs3_fuse *fu, const struct fs3_digest *d, size_t *present,
			 size_t *total)
{
	struct odl *l;

	pthread_mutex_lock(&fu->mu);
	if ((l = find_odl(fu, d, NULL))) {
		*present = l->present;
		*total = l->ix.n;
	}
	pthread_mutex_unlock(&fu->mu);
	return l ? 0 : -ENOENT;
}

int fs3_fuse_fill(struct fs3_fuse *fu, const struct fs3_digest *d)
{
	struct odl *l;

	pthread_mutex_lock(&fu->mu);
	if ((l = find_odl(fu, d, NULL)))
		for (size_t i = 0; i < l->ix.n; i++)
			if (l->state[i] == C_ABSENT || l->state[i] == C_FAILED)
				push_job(fu, (struct job){ .l = l, .i = i });
	pthread_mutex_unlock(&fu->mu);
	return l ? 0 : -ENOENT;
}

void fs3_fuse_get_stats(struct fs3_fuse *fu, struct fs3_fuse_stats *out)
{
	pthread_mutex_lock(&fu->mu);
	*out = fu->stats;
	pthread_mutex_unlock(&fu->mu);
}
