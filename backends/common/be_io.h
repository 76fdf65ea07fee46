/* be_io.h - I/O pieces every backend needs: capped pipe draining, reading
 * a file into a buffer, the error a path escape gets, and receiving a
 * datagram with descriptors.
 */
#ifndef BE_IO_H
#define BE_IO_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
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

/* Attempts be_openat2 makes in all when openat2() keeps saying EAGAIN or
 * EINTR. */
#define BE_OPENAT2_TRIES 128

/* openat2(dir, path) with flags | O_CLOEXEC, mode (only with O_CREAT) and
 * the RESOLVE_* flags resolve: the one way a backend or its helpers open a
 * path that must stay inside a root or below a directory.  The retry rule,
 * the same everywhere: EAGAIN (a rename or mount anywhere on the machine
 * raced a ".." step and the kernel could not prove the walk stayed inside;
 * openat2(2) says to retry, and a busy node sees it often) and EINTR are
 * retried, up to BE_OPENAT2_TRIES attempts in all; any other error is
 * returned at once.  Returns the descriptor or -errno. */
int be_openat2(int dir, const char *path, int flags, mode_t mode, uint64_t resolve);

/* path cleaned lexically into *rel (malloc'ed), relative to a root ("."
 * for the root itself): "." and empty components go, ".." takes one back.
 * Above the top it stays at the root with in_root, else -EPERM (an
 * escape).  0 or -EPERM. */
int be_clean_rel(const char *path, bool in_root, char **rel);

/* be_openat2 inside the root rootfd (RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS): ".." stops at the root, absolute symlinks are
 * relative to it, /proc magic links are refused; "" is the root itself. */
int be_open_in_root(int rootfd, const char *path, int flags, mode_t mode);

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
