/* be_io.h - I/O pieces every backend needs: capped pipe draining, reading
 * a file into a buffer, the error a path escape gets, and receiving a
 * datagram with descriptors.
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

/* Receives one datagram of at most len bytes from sock into buf, and up to
 * maxfds descriptors passed with it (SCM_RIGHTS, received close-on-exec)
 * into fds, their number in *nfds; descriptors beyond maxfds are closed.
 * flags go to recvmsg (e.g. MSG_DONTWAIT); EINTR is retried.  Returns the
 * datagram's length, 0 at end of file, -EMSGSIZE (and no descriptors) when
 * it or its descriptors were truncated, or -errno. */
int be_recv_fds(int sock, void *buf, size_t len, int *fds, int maxfds, int *nfds, int flags);

/* Most descriptors one datagram carries, either way (an image's layers). */
#define BE_IO_MAXFDS 64

/* Sends len bytes of buf as one datagram on sock with nfds descriptors
 * (SCM_RIGHTS; at most BE_IO_MAXFDS).  flags go to sendmsg, with
 * MSG_NOSIGNAL always; EINTR is retried.  0 or -errno (-EMSGSIZE: sent
 * short). */
int be_send_fds(int sock, const void *buf, size_t len, const int *fds, int nfds, int flags);

#endif
