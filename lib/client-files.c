/* client-files.c - libdsec: the file calls (dsec-protocol(7) file_*). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "client.h"
#include "client-int.h"
#include "dsec.h"
#include "proto.h"
#include "util.h"

static void pk_file(struct dsec_pk *p, const char *op, const char *id, const char *path)
{
	dcl_pk_id_key(p, op, id, "path", path);
}

/* Packs uid and gid that are not DSEC_OWNER_DEFAULT. */
static void pk_owner(struct dsec_pk *p, int64_t uid, int64_t gid)
{
	if (uid != DSEC_OWNER_DEFAULT)
		dsec_pk_kv_u64(p, "uid", (uint64_t)uid);
	if (gid != DSEC_OWNER_DEFAULT)
		dsec_pk_kv_u64(p, "gid", (uint64_t)gid);
}

/* Sends p and drops the result: for requests that return nothing needed. */
static int file_call(struct dsec_client *c, struct dsec_pk *p, struct dsec_err *err)
{
	struct reply r;
	int rc = dcl_roundtrip(c, p, 0, &r, err);

	dcl_reply_free(&r);
	return rc;
}

/* ---- parts ----------------------------------------------------------------
 *
 * A request or a reply carries at most the daemon's max_frame less 64 KiB
 * of a file (dsec-protocol(7)), and a frame over twice that is dropped
 * with its connection, unanswered: so the part size comes from the
 * daemon's ping (asked once per client, only for what is over the
 * smallest max_frame), capped at PART_MAX.  A part the daemon still
 * refuses as too_large (a node with a smaller max_frame the request was
 * sent on to) is sent again halved, down to PART_MIN.
 */
#define PART_MAX (8u << 20)		/* the largest part */
#define PART_MIN (16u << 10)		/* halving stops there */
#define FRAME_SLACK (64u << 10)		/* what a frame takes besides the data */
#define FRAME_MIN (256u << 10)		/* the smallest max_frame a daemon has */
#define PART_SMALL (FRAME_MIN - FRAME_SLACK)	/* fits any daemon: no ping */

/* The part size for c's daemon into *part, 0 for a daemon that moves no
 * parts (no max_frame in its ping). */
static int part_size(struct dsec_client *c, size_t *part, struct dsec_err *err)
{
	uint64_t *mf = dcl_max_frame(c);
	struct dsec_pk p;
	struct reply r;
	int rc;

	if (!*mf) {
		dsec_pk_init(&p);
		dsec_pk_request_begin(&p, "ping");
		if ((rc = dcl_roundtrip(c, &p, 0, &r, err)) == 0) {
			*mf = dcl_get_u64_or(&r, r.result, "max_frame", DCL_NO_PARTS);
			if (*mf <= FRAME_SLACK)
				*mf = DCL_NO_PARTS;
		}
		dcl_reply_free(&r);
		if (rc < 0)
			return rc;
	}
	*part = *mf == DCL_NO_PARTS ? 0 : *mf - FRAME_SLACK < PART_MAX ? *mf - FRAME_SLACK
								       : PART_MAX;
	return 0;
}

/* True when a part refused as too_large may go again halved, into *part. */
static bool halve(const struct dsec_err *err, size_t n, size_t *part)
{
	if (err->code != DSEC_E_TOO_LARGE || n / 2 < PART_MIN)
		return false;
	*part = n / 2;
	return true;
}

/* One file_write request.  stage NULL: a write, or with append an
 * append.  Else a part of a staged write: "" for its first, whose id the
 * daemon sends goes into *first (NULL from a daemon without staged writes:
 * it wrote path); the id for the others, the last with commit. */
static int write_one(struct dsec_client *c, const char *id, const char *path, const void *data,
		     size_t len, uint32_t mode, int64_t uid, int64_t gid, bool append,
		     const char *stage, bool commit, char **first, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	pk_file(&p, "file_write", id, path);
	dsec_pk_kv_bin(&p, "data", data, len);
	if (mode)
		dsec_pk_kv_u64(&p, "mode", mode);
	pk_owner(&p, uid, gid);
	if (append)
		dsec_pk_kv_bool(&p, "append", true);
	if (stage && !*stage)
		dsec_pk_kv_bool(&p, "parts", true);
	else if (stage)
		dsec_pk_kv_str(&p, "stage", stage);
	if (commit)
		dsec_pk_kv_bool(&p, "commit", true);
	rc = dcl_roundtrip(c, &p, 0, &r, err);
	if (rc == 0 && first)
		*first = dcl_get_str_or(&r, r.result, "stage", NULL);
	dcl_reply_free(&r);
	return rc;
}

/* Ends the staged write stage of path without a commit: its file goes.
 * What it cannot remove the daemon removes after its stage_grace. */
static void write_abort(struct dsec_client *c, const char *id, const char *path,
			const char *stage)
{
	struct dsec_pk p;
	struct dsec_err e;

	pk_file(&p, "file_write", id, path);
	dsec_pk_kv_str(&p, "stage", stage);
	dsec_pk_kv_bool(&p, "abort", true);
	(void)file_call(c, &p, &e);
}

/* Where the bytes of a write come from: memory, or a descriptor read to
 * its end. */
struct src {
	const char *data;		/* memory: the bytes, else NULL */
	size_t len;			/* memory: their length */
	size_t off;			/* memory: bytes handed out */
	int fd;				/* else: the descriptor */
	bool ended;			/* no more bytes */
};

/* Adds bytes of s to b until it holds want bytes or s ends. */
static int src_fill(struct src *s, struct dsec_buf *b, size_t want, struct dsec_err *err)
{
	while (b->len < want && !s->ended) {
		size_t n = want - b->len;
		ssize_t got;

		if (s->data) {
			n = n < s->len - s->off ? n : s->len - s->off;
			dsec_buf_add(b, s->data + s->off, n);
			s->off += n;
			s->ended = s->off == s->len;
			continue;
		}
		n = n < FRAME_MIN ? n : FRAME_MIN;
		dsec_buf_grow(b, n);
		if ((got = read(s->fd, b->data + b->len, n)) < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return dsec_err_set(err, errno, "cannot read what is to be sent: %s",
					    strerror(errno));
		b->len += (size_t)got;
		b->data[b->len] = '\0';
		s->ended = got == 0;
	}
	return 0;
}

/* Writes (append: adds) what pend holds and then s has.  A write that
 * takes more than one request is staged: its parts go into a file beside
 * path that the last renames into place (readers see the old file or the
 * whole new one), and a failure leaves path as it was.  With keep, the
 * staged write is left uncommitted and its id put in *keep, for an upload
 * of it.  A daemon without staged writes gets the first part as a write
 * and the others appended (*keep NULL: path holds it all); one without
 * parts gets one request, and no append (it would replace).  pend is the
 * caller's, left empty. */
static int write_parts(struct dsec_client *c, const char *id, const char *path, struct src *s,
		       struct dsec_buf *pend, uint32_t mode, int64_t uid, int64_t gid, bool append,
		       char **keep, struct dsec_err *err)
{
	size_t part = PART_SMALL, done = 0;
	char *stage = NULL;
	bool legacy = false;	/* the daemon wrote the first part to path */
	int rc;

	if (keep)
		*keep = NULL;
	if ((append || keep || !s->data || s->len > PART_SMALL) &&
	    (rc = part_size(c, &part, err)) < 0)
		return rc;
	if (!part && append)
		return dsec_err_setc(err, DSEC_E_UNSUPPORTED, ENOTSUP,
				     "cannot append to '%s': the daemon at '%s' cannot append", path,
				     dsec_client_url(c));
	if (!part)
		part = SIZE_MAX;
	for (;;) {
		size_t n;
		bool last;

		/* A byte more on the first round: whether it is all. */
		if ((rc = src_fill(s, pend, part + (!done && part < SIZE_MAX), err)) < 0)
			break;
		n = pend->len < part ? pend->len : part;
		last = s->ended && pend->len == n;
		if (append || legacy || (!done && last && !keep) || part == SIZE_MAX)
			rc = write_one(c, id, path, pend->data, n, mode, uid, gid,
				       append || legacy, NULL, false, NULL, err);
		else if (!stage)
			rc = write_one(c, id, path, pend->data, n, mode, uid, gid, false, "", false,
				       &stage, err);
		else
			rc = write_one(c, id, path, pend->data, n, 0, DSEC_OWNER_DEFAULT,
				       DSEC_OWNER_DEFAULT, false, stage, last && !keep, NULL, err);
		if (rc < 0 && halve(err, n, &part))
			continue;
		if (rc < 0) {
			if (stage)
				dsec_err_prefix(err, "'%s' is as it was", path);
			else if (done)
				dsec_err_prefix(err, "'%s' has %zu bytes of what was written", path,
						done);
			break;
		}
		if (!done && !stage && !append && !(last && !keep) && part < SIZE_MAX)
			legacy = true;
		if (n)	/* (an empty file's part: no buffer at all) */
			memmove(pend->data, pend->data + n, pend->len - n);
		pend->len -= n;
		done += n;
		if (last)
			break;
	}
	pend->len = 0;
	if (rc < 0 && stage)
		write_abort(c, id, path, stage);
	if (rc == 0 && keep)
		*keep = stage;
	else
		free(stage);
	return rc;
}

/* write_parts of len bytes of data. */
static int write_mem(struct dsec_client *c, const char *id, const char *path, const void *data,
		     size_t len, uint32_t mode, int64_t uid, int64_t gid, bool append,
		     struct dsec_err *err)
{
	struct src s = { .data = data ? data : "", .len = len, .fd = -1, .ended = !len };
	struct dsec_buf pend;
	int rc;

	dsec_buf_init(&pend);
	rc = write_parts(c, id, path, &s, &pend, mode, uid, gid, append, NULL, err);
	dsec_buf_free(&pend);
	return rc;
}

int dsec_file_write(struct dsec_client *c, const char *id, const char *path, const void *data,
		    size_t len, uint32_t mode, struct dsec_err *err)
{
	return dsec_file_write_as(c, id, path, data, len, mode, DSEC_OWNER_DEFAULT,
				  DSEC_OWNER_DEFAULT, err);
}

int dsec_file_write_as(struct dsec_client *c, const char *id, const char *path,
		       const void *data, size_t len, uint32_t mode, int64_t uid, int64_t gid,
		       struct dsec_err *err)
{
	return write_mem(c, id, path, data, len, mode, uid, gid, false, err);
}

int dsec_file_append(struct dsec_client *c, const char *id, const char *path, const void *data,
		     size_t len, struct dsec_err *err)
{
	return write_mem(c, id, path, data, len, 0, DSEC_OWNER_DEFAULT, DSEC_OWNER_DEFAULT, true,
			 err);
}

/* A file's description (file_stat, each entry of file_list): name and
 * type are always there, and the type is one dsec knows. */
static int unpack_info(struct reply *r, const char *op, const msgpack_object *m,
		       struct dsec_file_desc *i, struct dsec_err *err)
{
	static const char *const types[] = { "file", "dir", "symlink", "fifo", "socket", "char",
					     "block" };
	_cleanup_free_ char *type = NULL;
	size_t t;
	int rc;

	memset(i, 0, sizeof(*i));
	if (dsec_get_text(m, "type", CLIENT_RECV_MAX, &type, NULL) < 0)
		return dcl_no_field(r, op, "type", err);
	for (t = 0; t < DSEC_ARRAY_LEN(types) && strcmp(type, types[t]); t++)
		;
	if (t == DSEC_ARRAY_LEN(types))
		return dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO,
				     "bad reply from '%s': unknown file type '%.64s' in the %s reply",
				     r->url, type, op);
	i->type = (enum dsec_file_kind)t;
	if (dsec_get_text(m, "name", CLIENT_RECV_MAX, &i->name, NULL) < 0)
		return dcl_no_field(r, op, "name", err);
	if ((rc = dsec_get_text(m, "target", CLIENT_RECV_MAX, &i->target, NULL)) < 0)
		i->target = NULL;
	dcl_mark_bad(r, rc, "target");
	i->mode = (uint32_t)dcl_get_u64_or(r, m, "mode", 0);
	i->size = dcl_get_u64_or(r, m, "size", 0);
	i->uid = (uint32_t)dcl_get_u64_or(r, m, "uid", 0);
	i->gid = (uint32_t)dcl_get_u64_or(r, m, "gid", 0);
	i->mtime = dcl_get_double_or(r, m, "mtime", 0);
	return 0;
}

int dsec_file_stat(struct dsec_client *c, const char *id, const char *path,
		   struct dsec_file_desc *out, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	memset(out, 0, sizeof(*out));
	pk_file(&p, "file_stat", id, path);
	if ((rc = dcl_roundtrip(c, &p, 0, &r, err)) == 0 &&
	    (rc = dcl_reply_done(&r, "file_stat", unpack_info(&r, "file_stat", r.result, out, err),
	    err)) < 0)
		dsec_file_desc_free(out);
	dcl_reply_free(&r);
	return rc;
}

int dsec_file_list(struct dsec_client *c, const char *id, const char *path, size_t limit,
		   struct dsec_file_desc **out, size_t *n, bool *truncated, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	*out = NULL;
	*n = 0;
	*truncated = false;
	pk_file(&p, "file_list", id, path);
	if (limit)
		dsec_pk_kv_u64(&p, "limit", limit);
	if ((rc = dcl_roundtrip_list(c, &p, &r, err)) == 0) {
		const msgpack_object *a;

		dcl_get_bool_or(&r, r.result, "truncated", truncated);
		if ((rc = dcl_get_list(&r, "file_list", r.result, "entries", true, 32, &a, n,
				       err)) == 0) {
			*out = xcalloc(*n ? *n : 1, sizeof(**out));
			for (size_t i = 0; i < *n && rc == 0; i++)
				rc = unpack_info(&r, "file_list", &a[i], &(*out)[i], err);
		}
		if ((rc = dcl_reply_done(&r, "file_list", rc, err)) < 0) {
			dsec_file_list_free(*out, *n);	/* the caller frees only what succeeded */
			*out = NULL;
			*n = 0;
			*truncated = false;
		}
	}
	dcl_reply_free(&r);
	return rc;
}

int dsec_file_mkdir(struct dsec_client *c, const char *id, const char *path, uint32_t mode,
		    bool parents, int64_t uid, int64_t gid, struct dsec_err *err)
{
	struct dsec_pk p;

	pk_file(&p, "file_mkdir", id, path);
	if (mode)
		dsec_pk_kv_u64(&p, "mode", mode);
	if (parents)
		dsec_pk_kv_bool(&p, "parents", true);
	pk_owner(&p, uid, gid);
	return file_call(c, &p, err);
}

int dsec_file_remove(struct dsec_client *c, const char *id, const char *path, bool recursive,
		     uint64_t *removed, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	uint64_t n = 0;
	int rc;

	pk_file(&p, "file_remove", id, path);
	if (recursive)
		dsec_pk_kv_bool(&p, "recursive", true);
	rc = dcl_roundtrip(c, &p, 0, &r, err);
	if (rc == 0 && (rc = dsec_get_u64(r.result, "removed", &n, NULL)) < 0)
		rc = dcl_no_field(&r, "file_remove", "removed", err);
	if (rc == 0 && removed)
		*removed = n;
	dcl_reply_free(&r);
	return rc;
}

/* Seconds an upload or download of an archive file may take beyond the
 * client's timeout: it unpacks or packs what may be large. */
#define ARCHIVE_EXTRA 600

/* The path of a staged archive in directory dir, "DIR/.dsec-KIND-HEX.tar"
 * (caller frees). */
static char *stage_name(const char *dir, const char *kind)
{
	size_t n = strlen(dir);
	uint64_t x;

	if (getrandom(&x, sizeof(x), 0) != (ssize_t)sizeof(x))
		x = dsec_now_ns() ^ ((uint64_t)getpid() << 32);
	return xasprintf("%s%s.dsec-%s-%016llx.tar", dir, n && dir[n - 1] == '/' ? "" : "/", kind,
			 (unsigned long long)x);
}

/* One file_upload: of data, of the file archive (then removed), or of the
 * staged write stage (which it ends). */
static int upload_one(struct dsec_client *c, const char *id, const char *path, const void *data,
		      size_t len, const char *archive, const char *stage, const char *format,
		      int64_t uid, int64_t gid, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	pk_file(&p, "file_upload", id, path);
	if (stage) {
		dsec_pk_kv_str(&p, "stage", stage);
	} else if (archive) {
		dsec_pk_kv_str(&p, "archive", archive);
		dsec_pk_kv_bool(&p, "remove_archive", true);
	} else {
		dsec_pk_kv_bin(&p, "data", data, len);
	}
	if (format)
		dsec_pk_kv_str(&p, "format", format);
	pk_owner(&p, uid, gid);
	rc = dcl_roundtrip(c, &p, archive || stage ? ARCHIVE_EXTRA : 0, &r, err);
	dcl_reply_free(&r);
	return rc;
}

/* Removes a staged archive; what it cannot is left (and said nowhere). */
static void stage_remove(struct dsec_client *c, const char *id, const char *stage)
{
	struct dsec_err e;

	(void)dsec_file_remove(c, id, stage, false, NULL, &e);
}

/* An upload of what s has: in one request when it fits, else written to
 * a file in path first. */
static int upload_src(struct dsec_client *c, const char *id, const char *path, struct src *s,
		      const char *format, int64_t uid, int64_t gid, struct dsec_err *err)
{
	size_t part = PART_SMALL;
	struct dsec_buf pend;
	char *stage = NULL, *staged = NULL;
	int rc;

	dsec_buf_init(&pend);
	if ((rc = src_fill(s, &pend, PART_SMALL + 1, err)) < 0 ||
	    (pend.len > PART_SMALL && (rc = part_size(c, &part, err)) < 0) ||
	    (pend.len > PART_SMALL &&
	     (rc = src_fill(s, &pend, part ? part + 1 : SIZE_MAX, err)) < 0))
		goto out;
	/* A node the request went on to may still find it too large. */
	if (!part || pend.len <= part) {
		rc = upload_one(c, id, path, pend.data, pend.len, NULL, NULL, format, uid, gid,
				err);
		if (rc == 0 || !part || err->code != DSEC_E_TOO_LARGE)
			goto out;
	}
	if ((rc = dsec_file_mkdir(c, id, path, 0, true, uid, gid, err)) < 0)
		goto out;
	/* Staged, the archive is never a file of its own: the upload takes it
	 * from the stage, and when this client dies before, the daemon
	 * removes it after its stage_grace. */
	stage = stage_name(path, "upload");
	if ((rc = write_parts(c, id, stage, s, &pend, 0600, DSEC_OWNER_DEFAULT, DSEC_OWNER_DEFAULT,
			      false, &staged, err)) == 0)
		rc = upload_one(c, id, path, NULL, 0, staged ? NULL : stage, staged, format, uid,
				gid, err);
	if (rc < 0 && !staged)
		stage_remove(c, id, stage);
out:
	free(stage);
	free(staged);
	dsec_buf_free(&pend);
	return rc;
}

int dsec_file_upload(struct dsec_client *c, const char *id, const char *path,
		     const void *data, size_t len, const char *format, int64_t uid, int64_t gid,
		     struct dsec_err *err)
{
	struct src s = { .data = data ? data : "", .len = len, .fd = -1, .ended = !len };

	return upload_src(c, id, path, &s, format, uid, gid, err);
}

int dsec_file_upload_fd(struct dsec_client *c, const char *id, const char *path, int fd,
			const char *format, int64_t uid, int64_t gid, struct dsec_err *err)
{
	struct src s = { .fd = fd };

	return upload_src(c, id, path, &s, format, uid, gid, err);
}

/* One file_download: into out, or into the file archive. */
static int download_one(struct dsec_client *c, const char *id, const char *path,
			const char *format, const char *archive, struct dsec_buf *out,
			struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	pk_file(&p, "file_download", id, path);
	if (format)
		dsec_pk_kv_str(&p, "format", format);
	/* Staged: when this client dies before it has read and removed the
	 * archive, the daemon removes it after its stage_grace. */
	if (archive) {
		dsec_pk_kv_str(&p, "archive", archive);
		dsec_pk_kv_bool(&p, "stage", true);
	}
	rc = dcl_roundtrip(c, &p, archive ? ARCHIVE_EXTRA : 0, &r, err);
	if (rc == 0 && !archive)
		rc = dcl_get_bin_need(&r, "file_download", "data", out, err);
	dcl_reply_free(&r);
	return rc;
}

/* Packs path into a staged archive in the sandbox, *stage (caller frees):
 * in path when it is a directory, else beside it; where that may not be
 * written, in /tmp.  The first place's error when none takes it. */
static int download_stage(struct dsec_client *c, const char *id, const char *path,
			  const char *format, char **stage, struct dsec_err *err)
{
	struct dsec_file_desc d;
	struct dsec_err e2;
	const char *slash = strrchr(path, '/');
	char *dir;
	int rc;

	if (dsec_file_stat(c, id, path, &d, &e2) == 0 && d.type == DSEC_KIND_DIR)
		dir = xstrdup(path);
	else
		dir = !slash ? xstrdup(".") : slash == path ? xstrdup("/")
							  : xstrndup(path, (size_t)(slash - path));
	dsec_file_desc_free(&d);
	*stage = stage_name(dir, "download");
	free(dir);
	if ((rc = download_one(c, id, path, format, *stage, NULL, err)) == 0 ||
	    err->code != DSEC_E_PERMISSION)
		return rc;
	free(*stage);
	*stage = stage_name("/tmp", "download");
	if (download_one(c, id, path, format, *stage, NULL, &e2) == 0)
		return 0;
	return rc;
}

/* Adds the n bytes at d to out, or writes them to fd when out is NULL. */
static int sink_put(struct dsec_buf *out, int fd, const void *d, size_t n, struct dsec_err *err)
{
	int rc;

	if (out) {
		dsec_buf_add(out, d, n);
		return 0;
	}
	if ((rc = dsec_write_all(fd, d, n)) < 0)
		return dsec_err_set(err, -rc, "cannot write what was downloaded: %s", strerror(-rc));
	return 0;
}

/* A download appended to out, or written to fd when out is NULL: in the
 * reply when it fits, else through a file in the sandbox read in parts. */
static int download_to(struct dsec_client *c, const char *id, const char *path,
		       const char *format, struct dsec_buf *out, int fd, struct dsec_err *err)
{
	struct dsec_err first;
	struct dsec_buf b;
	char *stage = NULL;
	uint64_t off = 0;
	bool eof = false;
	size_t part;
	int rc, first_rc;

	dsec_buf_init(&b);
	if ((rc = download_one(c, id, path, format, NULL, &b, err)) == 0) {
		rc = sink_put(out, fd, b.data, b.len, err);
		goto out;
	}
	if (err->code != DSEC_E_TOO_LARGE)
		goto out;
	first = *err;
	first_rc = rc;
	if ((rc = part_size(c, &part, err)) < 0)
		goto out;
	if (!part) {
		*err = first;
		rc = first_rc;
		goto out;
	}
	if ((rc = download_stage(c, id, path, format, &stage, err)) < 0)
		goto out;
	while (rc == 0 && !eof) {
		b.len = 0;
		if ((rc = dsec_file_read_part(c, id, stage, off, 0, &b, &eof, err)) == 0)
			rc = sink_put(out, fd, b.data, b.len, err);
		off += b.len;
		if (!b.len)
			break;
	}
	stage_remove(c, id, stage);
out:
	free(stage);
	dsec_buf_free(&b);
	return rc;
}

int dsec_file_download(struct dsec_client *c, const char *id, const char *path,
		       const char *format, struct dsec_buf *out, struct dsec_err *err)
{
	size_t len0 = out->len;
	int rc = download_to(c, id, path, format, out, -1, err);

	if (rc < 0) {
		out->len = len0;
		if (out->data)
			out->data[len0] = '\0';
	}
	return rc;
}

int dsec_file_download_fd(struct dsec_client *c, const char *id, const char *path,
			  const char *format, int fd, struct dsec_err *err)
{
	return download_to(c, id, path, format, NULL, fd, err);
}

void dsec_file_desc_free(struct dsec_file_desc *info)
{
	free(info->name);
	free(info->target);
	memset(info, 0, sizeof(*info));
}

void dsec_file_list_free(struct dsec_file_desc *arr, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dsec_file_desc_free(&arr[i]);
	free(arr);
}

int dsec_file_read_part(struct dsec_client *c, const char *id, const char *path,
			uint64_t offset, uint64_t len, struct dsec_buf *out, bool *eof,
			struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	size_t len0 = out->len;
	int rc;

	*eof = false;
	pk_file(&p, "file_read", id, path);
	if (offset)
		dsec_pk_kv_u64(&p, "offset", offset);
	if (len)
		dsec_pk_kv_u64(&p, "length", len);
	rc = dcl_roundtrip(c, &p, 0, &r, err);
	if (rc == 0 && (rc = dcl_get_bin_need(&r, "file_read", "data", out, err)) == 0) {
		/* A daemon before eof: the end when it sent less than asked,
		 * and after one "as much as a reply carries". */
		*eof = !len || out->len - len0 < len;
		dcl_get_bool_or(&r, r.result, "eof", eof);
		if (len && out->len - len0 > len)
			rc = dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO,
					   "bad reply from '%s': file_read sent more than asked",
					   dsec_client_url(c));
		rc = dcl_reply_done(&r, "file_read", rc, err);
	}
	if (rc < 0) {
		out->len = len0;
		if (out->data)
			out->data[len0] = '\0';
	}
	dcl_reply_free(&r);
	return rc;
}

int dsec_file_read(struct dsec_client *c, const char *id, const char *path, uint64_t offset,
		   uint64_t len, struct dsec_buf *out, struct dsec_err *err)
{
	size_t part = PART_MAX, len0 = out->len;
	uint64_t got = 0;
	bool eof = false;
	int rc;

	/* Whole (len 0): as much as each reply carries, until the end. */
	while (!eof && (!len || got < len)) {
		uint64_t want = !len ? 0 : len - got < part ? len - got : part;
		size_t before = out->len;

		rc = dsec_file_read_part(c, id, path, offset + got, want, out, &eof, err);
		if (rc < 0 && want && halve(err, (size_t)want, &part))
			continue;
		if (rc < 0) {
			out->len = len0;
			if (out->data)
				out->data[len0] = '\0';
			return rc;
		}
		if (out->len == before)
			break;	/* nothing more, whatever it said */
		got += out->len - before;
	}
	return 0;
}
