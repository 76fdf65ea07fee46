/* be_io.h - I/O pieces every backend needs: capped pipe draining, reading
 * a file into a buffer, and the error a path escape gets.
 */
#ifndef BE_IO_H
#define BE_IO_H

#include <stdbool.h>
#include <stdint.h>
#include "util.h"
#include "err.h"

/* Reads what non-blocking fd has into b, keeping at most cap bytes in b and
 * setting *trunc when more came.  Returns true at EOF or on an error (stop
 * watching fd), false when it would block. */
bool be_drain(int fd, size_t cap, struct dsec_buf *b, bool *trunc);

/* Reads len bytes at offset (len 0: to the end) of the regular file fd into
 * out.  path is for messages.  0 or -errno with *err. */
int be_read_file(int fd, const char *path, uint64_t offset, uint64_t len, struct dsec_buf *out,
		 struct dsec_err *err);

/* *err for an openat2() failure on path: -EXDEV and -ELOOP (the resolve
 * flags refused a way out) become "permission", the rest says what failed. */
int be_path_err(struct dsec_err *err, int rc, const char *path, const char *what);

#endif
