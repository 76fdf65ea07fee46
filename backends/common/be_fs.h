/* be_fs.h - the file API (struct dsec_file_req) for backends whose sandbox
 * files are a directory tree the daemon reaches through one directory fd:
 * write with an owner, stat, list, mkdir, remove, and tar upload and
 * download through libarchive.
 *
 * Every path resolves with openat2() from that fd: ".." never leaves it,
 * /proc magic links are refused, and what a walk meets below a directory it
 * opens one component at a time without following symlinks or crossing
 * into another mount.  libarchive never touches a path itself: it only
 * parses and produces the archive bytes in memory.
 *
 * Blocking: call be_fs_run() (and be_fs_call() below) on a pool thread.
 * Everything is done with the caller's credentials: a backend whose
 * sandbox has others runs it in a process that has them (be_fs_serve).
 */
#ifndef BE_FS_H
#define BE_FS_H

#include <stdbool.h>
#include <stdint.h>
#include "backend.h"

/* The sandbox's file root as a backend describes it. */
struct be_fs_root {
	int fd;			/* O_PATH fd of the directory paths resolve in */
	/* true: RESOLVE_IN_ROOT ("/" is fd, ".." stops there, absolute
	 * symlinks are relative to it; the container's root).  false:
	 * RESOLVE_BENEATH | RESOLVE_NO_XDEV (anything leaving fd fails; the
	 * fncall scratch). */
	bool in_root;
	const char *prefix;	/* absolute path naming fd inside ("/work"), NULL = "/" */
	uint32_t uid, gid;	/* owner of what is made when a request names none */
	uint32_t mode_mask;	/* permission bits a request may set (0777, 07777) */
	/* Host id of id 0 inside (a user namespace of 65536 ids), 0 = ids are
	 * the host's: owners given and reported are inside ids, shifted. */
	uint32_t id_base;
};

/* Does req on root, filling res (the caller's, zeroed; freed with
 * dsec_file_res_free).  Returns 0 or -errno with *err: permission for an
 * escape, not_found, exists, invalid ("directory not empty", "not a
 * directory"), too_large when a result is over req->max_bytes. */
int be_fs_run(const struct be_fs_root *root, const struct dsec_file_req *req,
	      struct dsec_file_res *res, struct dsec_err *err);

/* The ABI 1 file_write on root: a DSEC_FILE_WRITE with no owner. */
int be_fs_write(const struct be_fs_root *root, const char *path, const void *data, size_t len,
		uint32_t mode, struct dsec_err *err);

/* The ABI 1 file_read on root: up to len bytes (0: to the end) at offset
 * of regular file path, appended to out.  0 or -errno with *err. */
int be_fs_read(const struct be_fs_root *root, const char *path, uint64_t offset, uint64_t len,
	       struct dsec_buf *out, struct dsec_err *err);

/* ---- the same operations done by another process -------------------------
 *
 * A backend whose commands have credentials a pool thread cannot take (a
 * user namespace's capabilities) runs a server process with exactly those
 * credentials and hands it each operation over a SOCK_STREAM socket: a
 * request (header, path, data) and a reply (header, error text, stat or
 * list entries, data).  The server is trusted no more than a command:
 * every length in a reply is checked against what the request allows
 * before anything is allocated.  One operation at a time per socket.
 */

/* The server: answers requests on sock with root until sock reaches its
 * end (0) or fails (-errno). */
int be_fs_serve(int sock, const struct be_fs_root *root);

/* A server that cannot start sends err as the reply to whatever comes. */
void be_fs_serve_fail(int sock, const struct dsec_err *err);

/* be_fs_run and be_fs_read through the server at sock.  Besides the
 * operation's own errors: -ENOTCONN when the server had ended before the
 * request reached it (nothing was done: start another and retry), -EPIPE
 * when it ended during the operation, -EPROTO when its reply was not one
 * (stop it); each with *err. */
int be_fs_call(int sock, const struct dsec_file_req *req, struct dsec_file_res *res,
	       struct dsec_err *err);
int be_fs_call_read(int sock, const char *path, uint64_t offset, uint64_t len,
		    struct dsec_buf *out, struct dsec_err *err);

#endif
