/* util.c - allocation, buffers, small file and fd helpers. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <linux/fs.h>
#include <math.h>

#include "util.h"

void dsec_bug(const char *file, int line, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "BUG at %s:%d: %s\n", file, line, msg);
	abort();
}

static void *check(void *p)
{
	if (!p) {
		static const char m[] = "fatal: out of memory\n";
		(void)!write(2, m, sizeof(m) - 1);
		abort();
	}
	return p;
}

void *xmalloc(size_t n) { return check(malloc(n ? n : 1)); }
void *xcalloc(size_t nmemb, size_t n) { return check(calloc(nmemb ? nmemb : 1, n ? n : 1)); }
void *xrealloc(void *p, size_t n) { return check(realloc(p, n ? n : 1)); }
char *xstrdup(const char *s) { return check(strdup(s)); }
char *xstrndup(const char *s, size_t n) { return check(strndup(s, n)); }

void *xmemdup(const void *p, size_t n)
{
	void *q = xmalloc(n);

	if (n)
		memcpy(q, p, n);
	return q;
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return check(s);
}

void dsec_freep(void *pp)
{
	free(*(void **)pp);
}

void dsec_closep(int *fdp)
{
	if (*fdp >= 0) {
		int saved = errno;
		close(*fdp);
		errno = saved;
	}
}

void dsec_buf_init(struct dsec_buf *b)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

void dsec_buf_grow(struct dsec_buf *b, size_t extra)
{
	size_t need = b->len + extra + 1;

	if (need <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap *= 2;
	b->data = xrealloc(b->data, cap);
	b->cap = cap;
}

void dsec_buf_add(struct dsec_buf *b, const void *p, size_t n)
{
	dsec_buf_grow(b, n);
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void dsec_buf_addf(struct dsec_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	DSEC_ASSERT(n >= 0);
	dsec_buf_grow(b, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void dsec_buf_reset(struct dsec_buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

void dsec_buf_free(struct dsec_buf *b)
{
	free(b->data);
	dsec_buf_init(b);
}

char *dsec_buf_detach(struct dsec_buf *b, size_t *len)
{
	char *d = b->data ? b->data : xstrdup("");

	if (len)
		*len = b->len;
	dsec_buf_init(b);
	return d;
}

uint64_t dsec_fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

uint64_t dsec_mix64(uint64_t x)
{
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

uint64_t dsec_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double dsec_now(void)
{
	return (double)dsec_now_ns() / 1e9;
}

int dsec_set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -errno;
	fl = on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
	return fcntl(fd, F_SETFL, fl) < 0 ? -errno : 0;
}

int dsec_set_cloexec(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFD);

	if (fl < 0)
		return -errno;
	fl = on ? fl | FD_CLOEXEC : fl & ~FD_CLOEXEC;
	return fcntl(fd, F_SETFD, fl) < 0 ? -errno : 0;
}

int dsec_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int dsec_read_file(const char *path, char **out, size_t *len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct dsec_buf b;
	char chunk[4096];

	if (fd < 0)
		return -errno;
	dsec_buf_init(&b);
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			dsec_buf_free(&b);
			return -e;
		}
		if (n == 0)
			break;
		dsec_buf_add(&b, chunk, (size_t)n);
	}
	*out = dsec_buf_detach(&b, len);
	return 0;
}

int dsec_write_file(const char *path, const char *s)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC | O_TRUNC);

	if (fd < 0)
		return -errno;
	return dsec_write_all(fd, s, strlen(s));
}

int dsec_mkdir_p(const char *path, int mode)
{
	_cleanup_free_ char *p = xstrdup(path);

	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, (mode_t)mode) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(p, (mode_t)mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Clears the immutable and append-only flags of fd (chattr +i / +a, which
 * a tar's file flags or a sandbox's root may have set): they stop the
 * removal of the file, or of what a directory holds, even for root.
 * Returns whether there was something to clear. */
static bool clear_fflags(int fd)
{
	int f;

	if (ioctl(fd, FS_IOC_GETFLAGS, &f) < 0 || !(f & (FS_IMMUTABLE_FL | FS_APPEND_FL)))
		return false;
	f &= ~(FS_IMMUTABLE_FL | FS_APPEND_FL);
	return ioctl(fd, FS_IOC_SETFLAGS, &f) == 0;
}

/* unlinkat(dirfd, name, flags) that, refused with EPERM, clears the flags
 * of the directory and of name (a file or directory: nothing else is
 * opened) and tries once more. */
static int unlink_flagged(int dirfd, const char *name, const struct stat *st, int flags)
{
	bool cleared;

	if (unlinkat(dirfd, name, flags) == 0)
		return 0;
	if (errno != EPERM)
		return -errno;
	cleared = clear_fflags(dirfd);
	if (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode)) {
		int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		if (fd >= 0) {
			cleared |= clear_fflags(fd);
			close(fd);
		}
	}
	if (!cleared)
		return -EPERM;
	return unlinkat(dirfd, name, flags) < 0 ? -errno : 0;
}

/* Removes the contents of dirfd (which it closes), staying on device dev. */
static int rm_rf_at(int dirfd, dev_t dev)
{
	DIR *d = fdopendir(dirfd);
	struct dirent *de;
	int rc = 0, r;

	if (!d) {
		close(dirfd);
		return -errno;
	}
	while ((de = readdir(d))) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			if (st.st_dev != dev) {
				rc = -EBUSY;	/* a mount point: never cross it */
				continue;
			}
			int sub = openat(dirfd, de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0 && (r = rm_rf_at(sub, dev)) < 0)
				rc = r;
			if ((r = unlink_flagged(dirfd, de->d_name, &st, AT_REMOVEDIR)) < 0 && !rc)
				rc = r;
		} else if ((r = unlink_flagged(dirfd, de->d_name, &st, 0)) < 0 && !rc) {
			rc = r;
		}
	}
	closedir(d);
	return rc;
}

int dsec_rm_rf(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlink_flagged(AT_FDCWD, path, &st, 0);
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* Its own flags too: an immutable directory cannot be removed. */
	clear_fflags(fd);
	int rc = rm_rf_at(fd, st.st_dev);
	if (rmdir(path) < 0 && !rc)
		rc = -errno;
	return rc;
}

int dsec_parse_size(const char *s, uint64_t *out)
{
	char *end;
	uint64_t mult = 1;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': mult = 1ull << 10; end++; break;
	case 'm': case 'M': mult = 1ull << 20; end++; break;
	case 'g': case 'G': mult = 1ull << 30; end++; break;
	case 't': case 'T': mult = 1ull << 40; end++; break;
	default: return -EINVAL;
	}
	if (*end == 'i' || *end == 'B')
		end += (*end == 'i' && end[1] == 'B') ? 2 : 1;
	if (*end)
		return -EINVAL;
	if (v > UINT64_MAX / mult)
		return -ERANGE;
	*out = v * mult;
	return 0;
}

int dsec_parse_duration(const char *s, double *out)
{
	char *end;
	double mult = 1;

	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v < 0)
		return -EINVAL;
	if (!strcmp(end, "ms"))
		mult = 0.001;
	else if (!strcmp(end, "s") || !*end)
		mult = 1;
	else if (!strcmp(end, "m"))
		mult = 60;
	else if (!strcmp(end, "h"))
		mult = 3600;
	else if (!strcmp(end, "d"))
		mult = 86400;
	else
		return -EINVAL;
	*out = v * mult;
	return 0;
}

void dsec_strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

size_t dsec_strv_len(const char *const *v)
{
	size_t n = 0;

	while (v && v[n])
		n++;
	return n;
}

char **dsec_strv_dup(const char *const *v)
{
	size_t n = dsec_strv_len(v);
	char **c;

	if (!v)
		return NULL;
	c = xcalloc(n + 1, sizeof(*c));
	for (size_t i = 0; i < n; i++)
		c[i] = xstrdup(v[i]);
	return c;
}
