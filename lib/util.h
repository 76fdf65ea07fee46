/* util.h - small helpers shared by every part of dsec.
 *
 * Allocation failure aborts (xmalloc and friends), so callers never check
 * for NULL.  Invariants are checked with DSEC_ASSERT, which aborts with the
 * file and line; it is never used for input a user controls.
 */
#ifndef DSEC_UTIL_H
#define DSEC_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdarg.h>
#include <unistd.h>
#include "buf.h"

#define DSEC_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#define dsec_container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

#define DSEC_ASSERT(cond) \
	do { if (!(cond)) dsec_bug(__FILE__, __LINE__, "assertion failed: %s", #cond); } while (0)
#define DSEC_BUG(...) dsec_bug(__FILE__, __LINE__, __VA_ARGS__)

_Noreturn void dsec_bug(const char *file, int line, const char *fmt, ...) DSEC_PRINTF(3, 4);

/* The names the tree uses; the symbols carry libdsec's prefix, so a program
 * with an xmalloc of its own links against libdsec.a (t/0009). */
#define xmalloc dsec_xmalloc
#define xcalloc dsec_xcalloc
#define xrealloc dsec_xrealloc
#define xstrdup dsec_xstrdup
#define xstrndup dsec_xstrndup
#define xmemdup dsec_xmemdup
#define xasprintf dsec_xasprintf
void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t n);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
void *xmemdup(const void *p, size_t n);
char *xasprintf(const char *fmt, ...) DSEC_PRINTF(1, 2);

/* Cleanup attributes (as in bubblewrap/crun): the variable is released when
 * it goes out of scope; hand it out with dsec_steal_pointer/dsec_steal_fd. */
void dsec_freep(void *pp);
void dsec_closep(int *fdp);
#define _cleanup_free_ __attribute__((cleanup(dsec_freep)))
#define _cleanup_close_ __attribute__((cleanup(dsec_closep)))

static inline void *dsec_steal_pointer(void *pp)
{
	void **p = pp, *v = *p;
	*p = NULL;
	return v;
}

static inline int dsec_steal_fd(int *fdp)
{
	int fd = *fdp;
	*fdp = -1;
	return fd;
}

/* More of struct dsec_buf (buf.h). */
void dsec_buf_grow(struct dsec_buf *b, size_t extra);
void dsec_buf_add(struct dsec_buf *b, const void *p, size_t n);
void dsec_buf_addf(struct dsec_buf *b, const char *fmt, ...) DSEC_PRINTF(2, 3);
void dsec_buf_reset(struct dsec_buf *b);
/* Takes the bytes out; the caller frees the result; b is empty after. */
char *dsec_buf_detach(struct dsec_buf *b, size_t *len);

/* NULL-terminated string vectors: free each string and the array; count;
 * a deep copy (of NULL: NULL) the caller frees with dsec_strv_free. */
void dsec_strv_free(char **v);
size_t dsec_strv_len(const char *const *v);
char **dsec_strv_dup(const char *const *v);

/* FNV-1a over n bytes at p, continuing from h (DSEC_FNV1A_INIT to
 * start): a cheap, stable hash for tables.  Its high bits follow its
 * input's last bytes too closely to be compared as they are: a rendezvous
 * rank is dsec_mix64 of it. */
#define DSEC_FNV1A_INIT 14695981039346656037ull
uint64_t dsec_fnv1a(uint64_t h, const void *p, size_t n);
/* splitmix64's finalizer: every bit of x moves every bit of the result. */
uint64_t dsec_mix64(uint64_t x);

/* Monotonic clock in nanoseconds and seconds. */
uint64_t dsec_now_ns(void);
double dsec_now(void);

/* Set or clear O_NONBLOCK / FD_CLOEXEC.  Return 0 or -errno. */
int dsec_set_nonblock(int fd, bool on);
int dsec_set_cloexec(int fd, bool on);

/* Write all of buf, retrying on EINTR.  Returns 0 or -errno. */
int dsec_write_all(int fd, const void *buf, size_t len);
/* Read a whole small file into a NUL-terminated string (caller frees). */
int dsec_read_file(const char *path, char **out, size_t *len);
/* Write a string to a file (cgroup knobs, /proc files).  0 or -errno. */
int dsec_write_file(const char *path, const char *s);
/* mkdir -p; 0 or -errno. */
int dsec_mkdir_p(const char *path, int mode);
/* rm -rf that never follows symlinks and never crosses mount points. */
int dsec_rm_rf(const char *path);

/* Parse "64M", "1G", "512k", "1024" into bytes; -EINVAL if malformed. */
int dsec_parse_size(const char *s, uint64_t *out);
/* Parse "30", "1.5", "250ms", "2m", "1h" into seconds; -EINVAL if malformed. */
int dsec_parse_duration(const char *s, double *out);

#endif
