/* store.c - content-addressed, zstd-compressed, verified objects in tiers. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <zstd.h>

#include "log.h"
#include "store.h"

/* zstd level for stored objects: fast to write, about as small as gzip -6. */
#define FS3_ZSTD_LEVEL 3

static const char *const kind_dir[FS3_KIND__COUNT] = {
	[FS3_CHUNK] = "chunks",
	[FS3_INDEX] = "indexes",
	[FS3_MANIFEST] = "manifests",
};

static const char *const kind_name[FS3_KIND__COUNT] = {
	[FS3_CHUNK] = "chunk",
	[FS3_INDEX] = "index",
	[FS3_MANIFEST] = "manifest",
};

const char *fs3_kind_name(enum fs3_kind kind)
{
	return kind_name[kind];
}

int fs3_kind_parse(const char *name)
{
	for (int k = 0; k < FS3_KIND__COUNT; k++)
		if (!strcmp(kind_name[k], name))
			return k;
	return -EINVAL;
}

void fs3_sha256(const void *p, size_t n, struct fs3_digest *out)
{
	unsigned int len = 0;

	if (!EVP_Digest(p, n, out->b, &len, EVP_sha256(), NULL) || len != FS3_DIGEST_LEN)
		DSEC_BUG("EVP_Digest(sha256) failed");
}

int fs3_sha256_file(const char *path, struct fs3_digest *out)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	_cleanup_free_ char *buf = xmalloc(1 << 20);
	EVP_MD_CTX *md;
	size_t got;
	int r = 0;

	if (fd < 0)
		return -errno;
	md = EVP_MD_CTX_new();
	if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
		DSEC_BUG("cannot set up sha256");
	do {
		if ((r = fs3_read_full(fd, buf, 1 << 20, &got)) < 0)
			break;
		EVP_DigestUpdate(md, buf, got);
	} while (got == 1 << 20);
	EVP_DigestFinal_ex(md, out->b, NULL);
	EVP_MD_CTX_free(md);
	return r;
}

void fs3_digest_hex(const struct fs3_digest *d, char hex[FS3_HEX_LEN + 1])
{
	static const char x[] = "0123456789abcdef";

	for (int i = 0; i < FS3_DIGEST_LEN; i++) {
		hex[2 * i] = x[d->b[i] >> 4];
		hex[2 * i + 1] = x[d->b[i] & 15];
	}
	hex[FS3_HEX_LEN] = '\0';
}

void fs3_digest_ref(const struct fs3_digest *d, char ref[FS3_REF_LEN])
{
	memcpy(ref, "sha256:", 7);
	fs3_digest_hex(d, ref + 7);
}

static int unhex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int fs3_digest_parse(const char *s, struct fs3_digest *d)
{
	if (!strncmp(s, "sha256:", 7))
		s += 7;
	if (strlen(s) != FS3_HEX_LEN)
		return -EINVAL;
	for (int i = 0; i < FS3_DIGEST_LEN; i++) {
		int hi = unhex(s[2 * i]), lo = unhex(s[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		d->b[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

int fs3_digest_cmp(const void *a, const void *b)
{
	return memcmp(a, b, FS3_DIGEST_LEN);
}

char *fs3_store_path(const char *tier, enum fs3_kind kind, const struct fs3_digest *d)
{
	char hex[FS3_HEX_LEN + 1];

	fs3_digest_hex(d, hex);
	return xasprintf("%s/%s/%.2s/%s", tier, kind_dir[kind], hex, hex);
}

bool fs3_is_zero(const void *p, size_t n)
{
	const unsigned char *b = p;

	return n == 0 || (b[0] == 0 && !memcmp(b, b + 1, n - 1));
}

int fs3_read_full(int fd, void *p, size_t want, size_t *got)
{
	*got = 0;
	while (*got < want) {
		ssize_t n = read(fd, (char *)p + *got, want - *got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		*got += (size_t)n;
	}
	return 0;
}

int fs3_read_all(const char *path, size_t max, struct dsec_buf *out)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	size_t want, got;
	int r;

	dsec_buf_reset(out);
	if (fd < 0 || fstat(fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size > max)
		return -EFBIG;
	/* One read past the size seen, to notice a file that grew. */
	for (want = (size_t)st.st_size + 1;; want = 65536) {
		dsec_buf_grow(out, want);
		if ((r = fs3_read_full(fd, out->data + out->len, want, &got)) < 0)
			return r;
		out->len += got;
		if (out->len > max)
			return -EFBIG;
		if (got < want)
			break;
	}
	out->data[out->len] = '\0';
	return 0;
}

int fs3_sync_parent(const char *path)
{
	_cleanup_free_ char *dir = xstrdup(path);
	char *slash = strrchr(dir, '/');

	if (slash)
		*slash = '\0';
	_cleanup_close_ int fd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		return -errno;
	return 0;
}

int fs3_write_atomic(const char *path, const void *data, size_t len, bool sync)
{
	static unsigned long seq;
	unsigned long n = __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED);
	_cleanup_free_ char *tmp = xasprintf("%s.tmp.%d.%lu", path, (int)getpid(), n);
	int fd, r = 0;

	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0 && errno == ENOENT) {
		_cleanup_free_ char *dir = xstrdup(path);
		*strrchr(dir, '/') = '\0';
		if ((r = dsec_mkdir_p(dir, 0755)) < 0)
			return r;
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	}
	if (fd < 0)
		return -errno;
	r = dsec_write_all(fd, data, len);
	if (r == 0 && sync && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		unlink(tmp);
		return r;
	}
	return sync ? fs3_sync_parent(path) : 0;
}

/* Decompress one stored object and check that it is what d names. */
static int unpack_verify(const struct dsec_buf *z, const struct fs3_digest *d, struct dsec_buf *out)
{
	unsigned long long n = ZSTD_getFrameContentSize(z->data, z->len);
	struct fs3_digest got;

	dsec_buf_reset(out);
	if (n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN || n > FS3_OBJECT_MAX)
		return -EBADMSG;
	dsec_buf_grow(out, (size_t)n);
	size_t r = ZSTD_decompress(out->data, (size_t)n, z->data, z->len);
	if (ZSTD_isError(r) || r != n)
		return -EBADMSG;
	out->len = (size_t)n;
	out->data[n] = '\0';
	fs3_sha256(out->data, out->len, &got);
	return memcmp(got.b, d->b, FS3_DIGEST_LEN) ? -EBADMSG : 0;
}

/* One read of the origin on a thread of its own, so that the fetcher can
 * give up on a file system that hangs; the last of the two frees it. */
struct origin_read {
	pthread_mutex_t mu;	/* guards done, r, refs */
	pthread_cond_t cv;	/* done became true */
	char *path;		/* the object's file */
	struct dsec_buf out;	/* what was read (the thread's until done) */
	int r;			/* 0 or -errno of the read */
	bool done;		/* the read returned */
	int refs;		/* the thread and the fetcher, until each lets go */
};

static void origin_read_put(struct origin_read *q)
{
	pthread_mutex_lock(&q->mu);
	bool last = --q->refs == 0;
	pthread_mutex_unlock(&q->mu);
	if (!last)
		return;
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
	dsec_buf_free(&q->out);
	free(q->path);
	free(q);
}

static void *origin_read_thread(void *arg)
{
	struct origin_read *q = arg;
	int r = fs3_read_all(q->path, ZSTD_compressBound(FS3_OBJECT_MAX), &q->out);

	pthread_mutex_lock(&q->mu);
	q->r = r;
	q->done = true;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
	origin_read_put(q);
	return NULL;
}

/* The origin as a source: a file read, waited for at most
 * st->origin_timeout seconds (-ETIMEDOUT; the read's thread goes on alone
 * and frees what it read when it returns). */
static int origin_get(void *ctx, enum fs3_kind kind, const struct fs3_digest *d, struct dsec_buf *out)
{
	struct fs3_store *st = ctx;
	struct origin_read *q;
	pthread_condattr_t ca;
	pthread_attr_t ta;
	pthread_t t;
	struct timespec dl;
	int r = 0;

	if (st->origin_timeout <= 0) {
		_cleanup_free_ char *p = fs3_store_path(st->origin, kind, d);
		return fs3_read_all(p, ZSTD_compressBound(FS3_OBJECT_MAX), out);
	}
	q = xcalloc(1, sizeof(*q));
	pthread_mutex_init(&q->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&q->cv, &ca);
	pthread_condattr_destroy(&ca);
	q->path = fs3_store_path(st->origin, kind, d);
	dsec_buf_init(&q->out);
	q->refs = 2;
	pthread_attr_init(&ta);
	pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &ta, origin_read_thread, q) != 0) {
		q->refs = 1;	/* no thread: read here, without a timeout */
		q->r = fs3_read_all(q->path, ZSTD_compressBound(FS3_OBJECT_MAX), &q->out);
		q->done = true;
	}
	pthread_attr_destroy(&ta);
	clock_gettime(CLOCK_MONOTONIC, &dl);
	double end = (double)dl.tv_sec + (double)dl.tv_nsec / 1e9 + st->origin_timeout;
	dl.tv_sec = (time_t)end;
	dl.tv_nsec = (long)((end - (double)dl.tv_sec) * 1e9);
	pthread_mutex_lock(&q->mu);
	while (!q->done && r != ETIMEDOUT)
		r = pthread_cond_timedwait(&q->cv, &q->mu, &dl);
	if (q->done) {
		struct dsec_buf mine = *out;
		*out = q->out;		/* hand the bytes over; q frees the old buffer */
		q->out = mine;
		r = q->r;
	} else {
		r = -ETIMEDOUT;
	}
	pthread_mutex_unlock(&q->mu);
	origin_read_put(q);
	return r;
}

static int count_bytes(void *ctx, const struct fs3_digest *d, const char *path, uint64_t size)
{
	*(uint64_t *)ctx += size;
	return 0;
}

int fs3_store_init(struct fs3_store *st, const char *cache_dir, const char *origin_dir,
		   uint64_t cache_max)
{
	int r;

	memset(st, 0, sizeof(*st));
	for (int k = 0; k < FS3_KIND__COUNT; k++) {
		_cleanup_free_ char *a = xasprintf("%s/%s", cache_dir, kind_dir[k]);
		_cleanup_free_ char *b = xasprintf("%s/%s", origin_dir, kind_dir[k]);
		if ((r = dsec_mkdir_p(a, 0755)) < 0 || (r = dsec_mkdir_p(b, 0755)) < 0)
			return r;
	}
	st->cache = xstrdup(cache_dir);
	st->origin = xstrdup(origin_dir);
	st->cache_max = cache_max;
	st->src[st->nsrc++] = (struct fs3_source){ .name = "origin", .get = origin_get, .ctx = st };
	return fs3_store_walk(st->cache, FS3_CHUNK, count_bytes, &st->cache_bytes);
}

int fs3_store_add_source(struct fs3_store *st, const char *name,
			 int (*get)(void *ctx, enum fs3_kind kind, const struct fs3_digest *d,
				    struct dsec_buf *out),
			 void *ctx)
{
	DSEC_ASSERT(st->nsrc > 0);	/* the origin */
	if (st->nsrc == FS3_SOURCES_MAX)
		return -E2BIG;
	st->src[st->nsrc] = st->src[st->nsrc - 1];
	st->src[st->nsrc - 1] = (struct fs3_source){ .name = name, .get = get, .ctx = ctx };
	st->nsrc++;
	return 0;
}

void fs3_store_fini(struct fs3_store *st)
{
	free(st->cache);
	free(st->origin);
	memset(st, 0, sizeof(*st));
}

bool fs3_store_has(struct fs3_store *st, enum fs3_kind kind, const struct fs3_digest *d)
{
	_cleanup_free_ char *p = fs3_store_path(st->origin, kind, d);

	return access(p, F_OK) == 0;
}

static void cache_add(struct fs3_store *st, enum fs3_kind kind, const struct fs3_digest *d,
		      const void *z, size_t zlen)
{
	_cleanup_free_ char *p = fs3_store_path(st->cache, kind, d);
	int r;

	if (access(p, F_OK) == 0)
		return;
	/* A cache copy can always be fetched again: no fsync. */
	if ((r = fs3_write_atomic(p, z, zlen, false)) < 0) {
		log_warn("cannot cache %s '%s': %s", kind_name[kind], p, strerror(-r));
		return;
	}
	if (kind == FS3_CHUNK)
		__atomic_add_fetch(&st->cache_bytes, zlen, __ATOMIC_RELAXED);
}

int fs3_store_put(struct fs3_store *st, enum fs3_kind kind, const void *data, size_t len,
		  struct fs3_digest *d, uint64_t *stored)
{
	_cleanup_free_ char *p = NULL;
	_cleanup_free_ void *z = NULL;
	struct dsec_buf have, plain;
	size_t zlen;
	int r;

	DSEC_ASSERT(len <= FS3_OBJECT_MAX);
	fs3_sha256(data, len, d);
	*stored = 0;
	p = fs3_store_path(st->origin, kind, d);
	_cleanup_free_ char *c = fs3_store_path(st->cache, kind, d);
	bool cached = access(c, F_OK) == 0;
	/* The origin's copy, if good, is what the cache gets; a bad one is
	 * written again: an import heals the objects it would have stored. */
	dsec_buf_init(&have);
	dsec_buf_init(&plain);
	r = fs3_read_all(p, ZSTD_compressBound(FS3_OBJECT_MAX), &have);
	if (r == 0 && (r = unpack_verify(&have, d, &plain)) == 0) {
		if (!cached)
			cache_add(st, kind, d, have.data, have.len);
	} else if (r == -EBADMSG) {
		log_warn("%s '%s' is corrupt in the origin; writing it again", kind_name[kind], p);
	}
	dsec_buf_free(&have);
	dsec_buf_free(&plain);
	if (r == 0)
		return 0;
	z = xmalloc(ZSTD_compressBound(len));
	zlen = ZSTD_compress(z, ZSTD_compressBound(len), data, len, FS3_ZSTD_LEVEL);
	if (ZSTD_isError(zlen))
		return -ENOMEM;
	if ((r = fs3_write_atomic(p, z, zlen, true)) < 0)
		return r;
	*stored = zlen;
	if (!cached)
		cache_add(st, kind, d, z, zlen);
	return 0;
}

/* What a tier's answer means, for messages. */
static const char *tier_why(int r)
{
	return r == -EBADMSG ? "corrupt" : r == -ENOENT ? "missing" : r == -ETIMEDOUT ? "timed out"
	       : r == -EHOSTDOWN ? "skipped (did not answer lately)" : strerror(-r);
}

/* The cache's copy of d, verified, into out (its stored bytes in z); a
 * corrupt one is removed.  0, -ENOENT or -EBADMSG. */
static int cache_get(struct fs3_store *st, enum fs3_kind kind, const struct fs3_digest *d,
		     const char *what, struct dsec_buf *z, struct dsec_buf *out)
{
	_cleanup_free_ char *cp = fs3_store_path(st->cache, kind, d);
	int r;

	r = fs3_read_all(cp, ZSTD_compressBound(FS3_OBJECT_MAX), z);
	if (r == 0 && (r = unpack_verify(z, d, out)) == 0) {
		if (kind == FS3_CHUNK)
			utimensat(AT_FDCWD, cp, NULL, 0);	/* LRU: touch on hit */
		return 0;
	}
	if (r == -EBADMSG) {
		log_warn("%s is corrupt in the cache; removed", what);
		if (unlink(cp) == 0 && kind == FS3_CHUNK)
			__atomic_sub_fetch(&st->cache_bytes, z->len, __ATOMIC_RELAXED);
	}
	return r;
}

int fs3_store_local(struct fs3_store *st, enum fs3_kind kind, const struct fs3_digest *d,
		    struct dsec_buf *z)
{
	struct dsec_buf plain;
	int r;

	char ref[FS3_REF_LEN];
	fs3_digest_ref(d, ref);
	_cleanup_free_ char *what = xasprintf("%s '%s'", kind_name[kind], ref);
	dsec_buf_init(&plain);
	r = cache_get(st, kind, d, what, z, &plain);
	dsec_buf_free(&plain);
	if (r < 0)
		dsec_buf_reset(z);
	return r == -ENOENT || r == -EBADMSG || r == 0 ? r : -ENOENT;
}

/* Takes the fetch lock of an object (an flock on lp, its cache path +
 * ".lock"): returns its fd, or -errno when it cannot (the caller fetches
 * unlocked).  The last holder unlinks the file; one who locked a file
 * that was unlinked meanwhile takes the new one. */
static int fetch_lock(const char *lp)
{
	struct stat a, b;
	int fd, r;

	for (;;) {
		fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0 && errno == ENOENT) {
			_cleanup_free_ char *dir = xstrdup(lp);
			*strrchr(dir, '/') = '\0';
			if ((r = dsec_mkdir_p(dir, 0755)) < 0)
				return r;
			fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		}
		if (fd < 0)
			return -errno;
		while ((r = flock(fd, LOCK_EX)) < 0 && errno == EINTR)
			;
		if (r < 0) {
			r = -errno;
			close(fd);
			return r;
		}
		if (fstat(fd, &a) == 0 && stat(lp, &b) == 0 && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino)
			return fd;
		close(fd);
	}
}

static void fetch_unlock(const char *lp, int fd)
{
	if (fd < 0)
		return;
	unlink(lp);
	close(fd);
}

int fs3_store_get(struct fs3_store *st, enum fs3_kind kind, const struct fs3_digest *d,
		  struct dsec_buf *out, const char *what, struct dsec_err *err)
{
	return fs3_store_fetch(st, kind, d, out, what, NULL, NULL, err);
}

int fs3_store_fetch(struct fs3_store *st, enum fs3_kind kind, const struct fs3_digest *d,
		    struct dsec_buf *out, const char *what, int *from, uint64_t *stored,
		    struct dsec_err *err)
{
	_cleanup_free_ char *lp = NULL, *cp = NULL;
	struct dsec_buf z, why;
	int r, lfd = -1, src = FS3_FROM_CACHE;

	dsec_buf_init(&z);
	dsec_buf_init(&why);
	if ((r = cache_get(st, kind, d, what, &z, out)) == 0)
		goto out;
	dsec_buf_addf(&why, "cache: %s", tier_why(r));
	/* A miss: one fetcher per object; who waited finds it cached. */
	cp = fs3_store_path(st->cache, kind, d);
	lp = xasprintf("%s.lock", cp);
	if ((lfd = fetch_lock(lp)) < 0)
		log_debug("cannot lock the fetch of %s (%s): fetching unlocked", what,
			  strerror(-lfd));
	if (lfd >= 0 && (r = cache_get(st, kind, d, what, &z, out)) == 0)
		goto out;
	for (int i = 0; i < st->nsrc; i++) {
		r = st->src[i].get(st->src[i].ctx, kind, d, &z);
		if (r == 0 && (r = unpack_verify(&z, d, out)) == 0) {
			__atomic_add_fetch(&st->src_objects, 1, __ATOMIC_RELAXED);
			__atomic_add_fetch(&st->src_bytes, z.len, __ATOMIC_RELAXED);
			__atomic_add_fetch(&st->src[i].objects, 1, __ATOMIC_RELAXED);
			__atomic_add_fetch(&st->src[i].bytes, z.len, __ATOMIC_RELAXED);
			log_debug("fetched %s from %s (%zu bytes)", what, st->src[i].name, z.len);
			cache_add(st, kind, d, z.data, z.len);
			src = i;
			goto out;
		}
		if (r == -EBADMSG)
			log_warn("%s is corrupt in the %s", what, st->src[i].name);
		dsec_buf_addf(&why, ", %s: %s", st->src[i].name, tier_why(r));
	}
	r = dsec_err_setc(err, DSEC_E_NOT_FOUND, r == -EBADMSG ? EBADMSG : ENOENT,
			  "cannot fetch %s: no good copy (%s)", what, why.data);
out:
	if (r == 0 && from)
		*from = src;
	if (r == 0 && stored)
		*stored = z.len;
	if (lp)
		fetch_unlock(lp, lfd);
	dsec_buf_free(&z);
	dsec_buf_free(&why);
	return r;
}

int fs3_store_walk(const char *tier, enum fs3_kind kind,
		   int (*fn)(void *ctx, const struct fs3_digest *d, const char *path, uint64_t size),
		   void *ctx)
{
	_cleanup_free_ char *top = xasprintf("%s/%s", tier, kind_dir[kind]);
	DIR *dt = opendir(top);
	struct dirent *e1, *e2;
	int r = 0;

	if (!dt)
		return errno == ENOENT ? 0 : -errno;
	while (r == 0 && (e1 = readdir(dt))) {
		if (strlen(e1->d_name) != 2)
			continue;
		_cleanup_free_ char *sub = xasprintf("%s/%s", top, e1->d_name);
		DIR *ds = opendir(sub);
		if (!ds)
			continue;
		while (r == 0 && (e2 = readdir(ds))) {
			struct fs3_digest d;
			struct stat sb;
			_cleanup_free_ char *p = xasprintf("%s/%s", sub, e2->d_name);
			if (fs3_digest_parse(e2->d_name, &d) < 0) {
				/* A temporary file left by a killed writer. */
				if (strstr(e2->d_name, ".tmp.") && stat(p, &sb) == 0 &&
				    sb.st_mtime < time(NULL) - 3600)
					unlink(p);
				continue;
			}
			if (stat(p, &sb) == 0)
				r = fn(ctx, &d, p, (uint64_t)sb.st_size);
		}
		closedir(ds);
	}
	closedir(dt);
	return r;
}

/* One cached chunk, a candidate for eviction. */
struct lru_ent {
	struct fs3_digest d;	/* its digest */
	struct timespec used;	/* last use (mtime) */
	uint64_t size;		/* stored bytes */
};

/* The list fs3_store_walk fills for eviction. */
struct lru_list {
	struct lru_ent *v;	/* entries */
	size_t n, cap;		/* used, allocated */
	uint64_t total;		/* sum of sizes */
};

static int lru_collect(void *ctx, const struct fs3_digest *d, const char *path, uint64_t size)
{
	struct lru_list *l = ctx;
	struct stat sb;

	if (stat(path, &sb) < 0)
		return 0;
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 256;
		l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
	}
	l->v[l->n++] = (struct lru_ent){ .d = *d, .used = sb.st_mtim, .size = size };
	l->total += size;
	return 0;
}

static int lru_cmp(const void *a, const void *b)
{
	const struct lru_ent *x = a, *y = b;

	if (x->used.tv_sec != y->used.tv_sec)
		return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
	if (x->used.tv_nsec != y->used.tv_nsec)
		return x->used.tv_nsec < y->used.tv_nsec ? -1 : 1;
	return 0;
}

int fs3_store_evict(struct fs3_store *st, const struct fs3_digest *pins, size_t npins)
{
	struct lru_list l = { 0 };
	int evicted = 0, r;

	if (!st->cache_max || st->cache_bytes <= st->cache_max)
		return 0;
	if ((r = fs3_store_walk(st->cache, FS3_CHUNK, lru_collect, &l)) < 0) {
		free(l.v);
		return r;
	}
	qsort(l.v, l.n, sizeof(*l.v), lru_cmp);
	for (size_t i = 0; i < l.n && l.total > st->cache_max; i++) {
		if (npins && bsearch(&l.v[i].d, pins, npins, sizeof(*pins), fs3_digest_cmp))
			continue;
		_cleanup_free_ char *p = fs3_store_path(st->cache, FS3_CHUNK, &l.v[i].d);
		if (unlink(p) == 0) {
			l.total -= l.v[i].size;
			evicted++;
		}
	}
	if (l.total > st->cache_max)
		log_warn("cache '%s' stays over its cap (%llu of %llu bytes): the rest is in use",
			 st->cache, (unsigned long long)l.total, (unsigned long long)st->cache_max);
	st->cache_bytes = l.total;
	free(l.v);
	return evicted;
}
