/* buf.h - the growable byte buffer that libdsec hands out results in.
 *
 * Public, installed with dsec.h: what a caller needs to read and free the
 * buffers of results (struct dsec_buf), and the export mark of libdsec.so.
 * The rest of the helpers on buffers is internal (util.h).
 */
#ifndef DSEC_BUF_H
#define DSEC_BUF_H

#include <stddef.h>

/* What libdsec.so exports: the functions dsec.h and libdsec(3) document.
 * Everything else in lib/ is built with hidden visibility. */
#define DSEC_API __attribute__((visibility("default")))
#define DSEC_PRINTF(f, a) __attribute__((format(printf, f, a)))

/* A growable byte buffer.  data is always NUL-terminated past len so it can
 * be printed as a string; the terminator is not counted in len. */
struct dsec_buf {
	char *data;		/* bytes, NULL while empty and never grown */
	size_t len;		/* bytes used */
	size_t cap;		/* bytes allocated */
};

/* An empty buffer (as a zeroed one is). */
DSEC_API
void dsec_buf_init(struct dsec_buf *b);
/* Frees the bytes; b is empty after and may be used again. */
DSEC_API
void dsec_buf_free(struct dsec_buf *b);

#endif
