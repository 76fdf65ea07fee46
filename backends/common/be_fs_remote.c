/* be_fs_remote.c - be_fs's operations done by a server process: the
 * server's loop and the client's side of one operation (see be_fs.h).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "be_fs.h"
#include "util.h"

/* ---- the same operations done by a server process (be_fs.h) ------------------ */

#define FSW_MAGIC_REQ 0x64735132u	/* "dsQ2" (2: archive, size) */
#define FSW_MAGIC_RES 0x64735232u	/* "dsR2" */
#define FSW_READ 0x100u			/* op of the ABI 1 file_read */
#define FSW_PARENTS 1u			/* MKDIR: parents */
#define FSW_RECURSIVE 2u		/* REMOVE: recursive */
#define FSW_REMOVE_ARCHIVE 4u		/* UNPACK: remove_archive */
#define FSW_COMMIT 8u			/* PART: commit */
#define FSW_PATH_MAX 4096		/* bytes of a request's path */
#define FSW_DATA_MAX (1ull << 32)	/* bytes of a request's data */
#define FSW_NAME_MAX 4096		/* bytes of an entry's name */
#define FSW_LINK_MAX 65536		/* bytes of a symlink's target (read_link's cap) */
#define FSW_NO_TARGET UINT32_MAX	/* fsw_info.target_len: not a symlink */

/* A request: this, path_len bytes of path, archive_len bytes of the
 * archive's path, data_len bytes of data. */
struct fsw_req {
	uint32_t magic;			/* FSW_MAGIC_REQ */
	uint32_t op;			/* enum dsec_file_op, or FSW_READ */
	int64_t uid, gid;		/* owner, DSEC_OWNER_DEFAULT */
	uint64_t offset, rlen;		/* FSW_READ: where and how much (0: to the end);
					 * PART: offset is staged */
	uint64_t max_entries;		/* LIST */
	uint64_t max_bytes;		/* LIST, DOWNLOAD */
	uint32_t mode;			/* WRITE, MKDIR */
	uint32_t format;		/* enum dsec_file_format */
	uint32_t flags;			/* FSW_PARENTS, FSW_RECURSIVE, FSW_REMOVE_ARCHIVE,
					 * FSW_COMMIT */
	uint32_t path_len;		/* bytes of path that follow */
	uint32_t archive_len;		/* UNPACK, PACK: bytes of the archive's path after it */
	uint64_t data_len;		/* bytes of data after them */
};

/* A reply: this, msg_len bytes of error message, info_len bytes of ninfo
 * file infos (struct fsw_info, name, target each), data_len bytes of data. */
struct fsw_res {
	uint32_t magic;			/* FSW_MAGIC_RES */
	int32_t rc;			/* 0 or -errno */
	uint32_t code;			/* enum dsec_code, when rc < 0 */
	int32_t errnum;			/* its errno */
	uint32_t msg_len;		/* bytes of the message */
	uint32_t ninfo;			/* infos: the one of STAT, the entries of LIST */
	uint64_t info_len;		/* their bytes */
	uint64_t count;			/* REMOVE, UPLOAD, DOWNLOAD */
	uint32_t truncated;		/* LIST */
	uint32_t pad;			/* zero */
	uint64_t data_len;		/* bytes of data: READ, DOWNLOAD */
	uint64_t size;			/* PACK: bytes of the archive written */
};

/* One struct dsec_file_info: this, name_len bytes of name, target_len of
 * target. */
struct fsw_info {
	uint32_t type;			/* enum dsec_file_type */
	uint32_t mode;			/* permission bits */
	uint32_t uid, gid;		/* owner */
	uint64_t size;			/* bytes */
	double mtime;			/* unix seconds */
	uint32_t name_len;		/* bytes of the name */
	uint32_t target_len;		/* bytes of the target, FSW_NO_TARGET */
};

/* Writes all of iov[0..n) to sock, never raising SIGPIPE.  0 or -errno. */
static int send_all(int sock, struct iovec *iov, int n)
{
	while (n > 0) {
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)n };
		ssize_t w = sendmsg(sock, &m, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

/* Reads exactly len bytes.  0, -EPIPE at an end before them, or -errno. */
static int recv_all(int sock, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(sock, (char *)buf + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EPIPE;
		got += (size_t)n;
	}
	return 0;
}

static void info_put(struct dsec_buf *b, const struct dsec_file_info *i)
{
	struct fsw_info w = { .type = i->type, .mode = i->mode, .uid = i->uid, .gid = i->gid,
			      .size = i->size, .mtime = i->mtime,
			      .name_len = (uint32_t)strlen(i->name),
			      .target_len = i->target ? (uint32_t)strlen(i->target) : FSW_NO_TARGET };

	dsec_buf_add(b, &w, sizeof(w));
	dsec_buf_add(b, i->name, w.name_len);
	if (i->target)
		dsec_buf_add(b, i->target, w.target_len);
}

/* dsec_file_res_free without libdsec's client (and nng with it) in every
 * backend and helper that links us. */
static void res_free(struct dsec_file_res *res)
{
	free(res->info.name);
	free(res->info.target);
	for (size_t i = 0; i < res->nentries; i++) {
		free(res->entries[i].name);
		free(res->entries[i].target);
	}
	free(res->entries);
	dsec_buf_free(&res->data);
	memset(res, 0, sizeof(*res));
}

/* Sends the reply to q: rc and err, what res holds, data. */
static int reply(int sock, const struct fsw_req *q, int rc, const struct dsec_err *err,
		 const struct dsec_file_res *res, const struct dsec_buf *data)
{
	struct fsw_res h = { .magic = FSW_MAGIC_RES, .rc = rc };
	struct dsec_buf info;
	struct iovec iov[4];
	int n;

	dsec_buf_init(&info);
	if (rc < 0) {
		h.code = (uint32_t)err->code;
		h.errnum = err->errnum;
		h.msg_len = (uint32_t)strnlen(err->msg, sizeof(err->msg) - 1);
	} else if (res) {
		if (q->op == DSEC_FILE_STAT && res->info.name) {
			info_put(&info, &res->info);
			h.ninfo = 1;
		}
		for (size_t i = 0; q->op == DSEC_FILE_LIST && i < res->nentries; i++)
			info_put(&info, &res->entries[i]);
		if (q->op == DSEC_FILE_LIST)
			h.ninfo = (uint32_t)res->nentries;
		h.count = res->count;
		h.truncated = res->truncated;
		h.size = res->size;
	}
	h.info_len = info.len;
	h.data_len = rc == 0 && data ? data->len : 0;
	iov[0] = (struct iovec){ &h, sizeof(h) };
	iov[1] = (struct iovec){ (void *)(rc < 0 ? err->msg : ""), h.msg_len };
	iov[2] = (struct iovec){ info.data, info.len };
	iov[3] = (struct iovec){ h.data_len ? data->data : NULL, h.data_len };
	n = send_all(sock, iov, 4);
	dsec_buf_free(&info);
	return n;
}

/* Reads the rest of request q, does it, replies.  0 or -errno (the
 * socket failed: stop). */
static int serve_one(int sock, const struct be_fs_root *root, const struct fsw_req *q)
{
	_cleanup_free_ char *path = NULL, *archive = NULL;
	_cleanup_free_ void *data = NULL;
	struct dsec_file_res res;
	struct dsec_buf out;
	struct dsec_err err;
	int rc;

	if (q->magic != FSW_MAGIC_REQ || q->path_len > FSW_PATH_MAX ||
	    q->archive_len > FSW_PATH_MAX || q->data_len > FSW_DATA_MAX)
		return -EPROTO;
	path = xmalloc(q->path_len + 1);
	archive = xmalloc(q->archive_len + 1);
	data = q->data_len ? malloc(q->data_len) : NULL;
	if (q->data_len && !data)
		return -ENOMEM;
	if ((rc = recv_all(sock, path, q->path_len)) < 0 ||
	    (rc = recv_all(sock, archive, q->archive_len)) < 0 ||
	    (rc = recv_all(sock, data, q->data_len)) < 0)
		return rc;
	path[q->path_len] = '\0';
	archive[q->archive_len] = '\0';
	memset(&res, 0, sizeof(res));
	dsec_buf_init(&out);
	dsec_err_clear(&err);
	if (q->op == FSW_READ) {
		rc = be_fs_read(root, path, q->offset, q->rlen, &out, &err);
		rc = reply(sock, q, rc, &err, NULL, &out);
	} else {
		struct dsec_file_req r = {
			.op = (enum dsec_file_op)q->op, .path = path, .data = data, .len = q->data_len,
			.mode = q->mode, .uid = q->uid, .gid = q->gid,
			.parents = q->flags & FSW_PARENTS, .recursive = q->flags & FSW_RECURSIVE,
			.format = (enum dsec_file_format)q->format, .max_entries = q->max_entries,
			.max_bytes = q->max_bytes, .archive = q->archive_len ? archive : NULL,
			.remove_archive = q->flags & FSW_REMOVE_ARCHIVE,
			.staged = q->offset, .commit = q->flags & FSW_COMMIT,
		};

		rc = be_fs_run(root, &r, &res, &err);
		rc = reply(sock, q, rc, &err, &res, &res.data);
		res_free(&res);
	}
	dsec_buf_free(&out);
	return rc;
}

int be_fs_serve(int sock, const struct be_fs_root *root)
{
	for (;;) {
		struct fsw_req q;
		int rc = recv_all(sock, &q, sizeof(q));

		if (rc == -EPIPE)
			return 0;	/* the other end closed */
		if (rc == 0)
			rc = serve_one(sock, root, &q);
		if (rc < 0)
			return rc;
	}
}

void be_fs_serve_fail(int sock, const struct dsec_err *err)
{
	struct fsw_req q = { .magic = FSW_MAGIC_REQ };

	(void)reply(sock, &q, -(err->errnum ? err->errnum : EIO), err, NULL, NULL);
}

/* Turns ninfo infos of the reply (len bytes at p) into infos[] (caller's,
 * zeroed).  False when they are not well formed. */
static bool infos_get(const char *p, size_t len, struct dsec_file_info *infos, size_t ninfo)
{
	const char *end = p + len;

	for (size_t i = 0; i < ninfo; i++) {
		struct fsw_info w;
		size_t tl;

		if ((size_t)(end - p) < sizeof(w))
			return false;
		memcpy(&w, p, sizeof(w));
		p += sizeof(w);
		tl = w.target_len == FSW_NO_TARGET ? 0 : w.target_len;
		if (w.name_len > FSW_NAME_MAX || tl > FSW_LINK_MAX || w.type > DSEC_FT_BLOCK ||
		    (size_t)(end - p) < w.name_len + tl)
			return false;
		infos[i] = (struct dsec_file_info){
			.name = xstrndup(p, w.name_len), .type = (enum dsec_file_type)w.type,
			.mode = w.mode & 07777, .size = w.size, .uid = w.uid, .gid = w.gid,
			.mtime = w.mtime,
			.target = w.target_len == FSW_NO_TARGET ? NULL : xstrndup(p + w.name_len, tl),
		};
		p += w.name_len + tl;
	}
	return p == end;
}

/* Sends request q (path, archive, data) to the server at sock and reads its reply
 * into *h, its infos into *info (caller frees), its data appended to out;
 * the reply may carry up to data_max bytes of data and info_max of infos.
 * 0 when a reply came (its rc is h->rc), or -errno as be_fs_call says. */
static int exchange(int sock, struct fsw_req *q, const char *path, const char *archive,
		    const void *data,
		    struct fsw_res *h, char **info, struct dsec_buf *out, uint64_t data_max,
		    uint64_t info_max, struct dsec_err *err)
{
	struct pollfd pf = { .fd = sock, .events = POLLIN | POLLRDHUP };
	char msg[DSEC_ERR_MSG_MAX];
	struct iovec iov[4];
	bool sent = false;
	int rc;

	q->magic = FSW_MAGIC_REQ;
	q->path_len = (uint32_t)strlen(path);
	q->archive_len = archive ? (uint32_t)strlen(archive) : 0;
	iov[0] = (struct iovec){ q, sizeof(*q) };
	iov[1] = (struct iovec){ (void *)path, q->path_len };
	iov[2] = (struct iovec){ (void *)archive, q->archive_len };
	iov[3] = (struct iovec){ (void *)data, q->data_len };
	/* Idle since the last reply, the socket has something to read only
	 * when the server could not start (it says why) or is gone. */
	if (poll(&pf, 1, 0) == 0) {
		if ((rc = send_all(sock, iov, 4)) < 0)
			return dsec_err_setc(err, DSEC_E_BACKEND, ENOTCONN,
					     "cannot reach the sandbox's file server: %s",
					     strerror(-rc));
		sent = true;
	}
	if ((rc = recv_all(sock, h, sizeof(*h))) < 0 && !sent)
		return dsec_err_setc(err, DSEC_E_BACKEND, ENOTCONN,
				     "cannot reach the sandbox's file server: it has ended");
	if (rc < 0)
		return dsec_err_setc(err, DSEC_E_BACKEND, EPIPE,
				     "the sandbox's file server ended during the operation");
	if (h->magic != FSW_MAGIC_RES || h->msg_len >= sizeof(msg) || h->info_len > info_max ||
	    h->data_len > data_max || h->code >= DSEC_E__COUNT || h->rc > 0 || h->rc < -4095 ||
	    (h->rc < 0 && (h->info_len || h->data_len)) || (!sent && h->rc == 0))
		return dsec_err_setc(err, DSEC_E_BACKEND, EPROTO,
				     "the sandbox's file server sent a malformed reply");
	*info = xmalloc((size_t)h->info_len + 1);
	if (h->data_len)
		dsec_buf_grow(out, (size_t)h->data_len);
	if ((rc = recv_all(sock, msg, h->msg_len)) < 0 ||
	    (rc = recv_all(sock, *info, (size_t)h->info_len)) < 0 ||
	    (h->data_len && (rc = recv_all(sock, out->data + out->len, (size_t)h->data_len)) < 0))
		return dsec_err_setc(err, DSEC_E_BACKEND, EPIPE,
				     "the sandbox's file server ended during the operation");
	if (h->data_len) {
		out->len += (size_t)h->data_len;
		out->data[out->len] = '\0';
	}
	if (h->rc < 0)
		dsec_err_setc(err, (enum dsec_code)h->code, h->errnum, "%.*s", (int)h->msg_len,
			      msg);
	return 0;
}

int be_fs_call(int sock, const struct dsec_file_req *req, struct dsec_file_res *res,
	       struct dsec_err *err)
{
	struct fsw_req q = { .op = (uint32_t)req->op, .uid = req->uid, .gid = req->gid,
			     .max_entries = req->max_entries, .max_bytes = req->max_bytes,
			     .mode = req->mode, .format = (uint32_t)req->format,
			     .flags = (req->parents ? FSW_PARENTS : 0) |
				      (req->recursive ? FSW_RECURSIVE : 0) |
				      (req->remove_archive ? FSW_REMOVE_ARCHIVE : 0) |
				      (req->commit ? FSW_COMMIT : 0),
			     .offset = req->staged, .data_len = req->data ? req->len : 0 };
	uint64_t info_max = 2 * (sizeof(struct fsw_info) + FSW_NAME_MAX + FSW_LINK_MAX);
	_cleanup_free_ char *info = NULL;
	struct fsw_res h;
	int rc;

	if (strlen(req->path) > FSW_PATH_MAX || (req->archive && strlen(req->archive) > FSW_PATH_MAX))
		return dsec_err_setc(err, DSEC_E_TOO_LARGE, ENAMETOOLONG, "path too long");
	if (req->op == DSEC_FILE_LIST)
		info_max += req->max_bytes + req->max_entries * sizeof(struct fsw_info);
	rc = exchange(sock, &q, req->path, req->archive, req->data, &h, &info, &res->data,
		      req->op == DSEC_FILE_DOWNLOAD ? req->max_bytes : 0, info_max, err);
	if (rc < 0 || h.rc < 0) {
		dsec_buf_free(&res->data);
		return rc < 0 ? rc : h.rc;
	}
	if ((req->op == DSEC_FILE_STAT && h.ninfo != 1) ||
	    (req->op == DSEC_FILE_LIST && h.ninfo > req->max_entries) ||
	    (req->op != DSEC_FILE_STAT && req->op != DSEC_FILE_LIST && h.ninfo))
		goto bad;
	if (req->op == DSEC_FILE_STAT && !infos_get(info, (size_t)h.info_len, &res->info, 1))
		goto bad;
	if (req->op == DSEC_FILE_LIST && h.ninfo) {
		res->entries = xcalloc(h.ninfo, sizeof(*res->entries));
		res->nentries = h.ninfo;
		if (!infos_get(info, (size_t)h.info_len, res->entries, h.ninfo))
			goto bad;
	}
	res->count = h.count;
	res->truncated = h.truncated != 0;
	res->size = h.size;
	return 0;
bad:
	res_free(res);
	return dsec_err_setc(err, DSEC_E_BACKEND, EPROTO,
			     "the sandbox's file server sent a malformed reply");
}

int be_fs_call_read(int sock, const char *path, uint64_t offset, uint64_t len,
		    struct dsec_buf *out, struct dsec_err *err)
{
	struct fsw_req q = { .op = FSW_READ, .offset = offset, .rlen = len };
	_cleanup_free_ char *info = NULL;
	size_t len0 = out->len;
	struct fsw_res h;
	int rc;

	if (strlen(path) > FSW_PATH_MAX)
		return dsec_err_setc(err, DSEC_E_TOO_LARGE, ENAMETOOLONG, "path too long");
	/* The daemon always bounds a read (its frame size). */
	rc = exchange(sock, &q, path, NULL, NULL, &h, &info, out, len ? len : FSW_DATA_MAX, 0, err);
	if (rc == 0 && h.rc == 0 && (h.ninfo || h.info_len))
		rc = dsec_err_setc(err, DSEC_E_BACKEND, EPROTO,
				   "the sandbox's file server sent a malformed reply");
	if (rc < 0 || h.rc < 0) {
		out->len = len0;
		if (out->data)
			out->data[len0] = '\0';
	}
	return rc < 0 ? rc : h.rc;
}
