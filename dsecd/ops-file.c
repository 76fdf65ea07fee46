/* ops-file.c - the file API: file_read, file_write and the backend's file entry. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "daemon.h"
#include "dsec.h"
#include "fs3.h"
#include "log.h"
#include "ops.h"
#include "proto.h"

/* The request on r->stage completed (rc): what that does to the stage. */
static void stage_settle(struct dsecd_req *r, int rc)
{
	struct dsecd_stage *st = r->stage;
	const struct dsec_file_req *q = &r->freq;

	if (!st)
		return;
	r->stage = NULL;
	st->busy = false;
	if (st->dropped)
		return dsecd_stage_end(st, false);
	switch (q->op) {
	case DSEC_FILE_WRITE:		/* the first part */
	case DSEC_FILE_PACK:		/* the download */
		if (rc < 0)
			return dsecd_stage_end(st, false);
		st->size = q->len;
		break;
	case DSEC_FILE_PART:
		if (rc == 0 && q->commit)
			return dsecd_stage_end(st, false);
		if (rc == 0)
			st->size += q->len;
		break;
	case DSEC_FILE_UNPACK:		/* the upload of it: removed when open */
		return dsecd_stage_end(st, rc < 0);
	default:			/* abort; the download's removal */
		return dsecd_stage_end(st, false);
	}
	dsecd_stage_touch(st);
}

/* r works on st (busy until stage_settle); its id goes in the reply when
 * reply_id. */
static void stage_take(struct dsecd_req *r, struct dsecd_stage *st, bool reply_id)
{
	st->busy = true;
	r->stage = st;
	if (reply_id)
		memcpy(r->stage_id, st->id, sizeof(r->stage_id));
}

void req_file_free(struct dsecd_req *r)
{
	stage_settle(r, -ECANCELED);
	free(r->path);
	free(r->archive);
	dsec_buf_free(&r->data);
	dsec_file_res_free(&r->fres);
}

static void file_done(void *arg, int rc, const struct dsec_err *err)
{
	struct dsecd_req *r = arg;
	struct dsec_pk p;

	r->d->ops_inflight--;
	if (rc < 0)
		return reply_err(r, err);
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	if (r->op == DSEC_OP_FILE_READ) {
		/* One byte more than asked for was read: there when the file
		 * goes on past what the reply carries. */
		bool eof = r->data.len <= r->want;

		if (!eof)
			r->data.len = (size_t)r->want;
		dsec_pk_kv_bin(&p, "data", r->data.data, r->data.len);
		dsec_pk_kv_u64(&p, "size", r->data.len);
		dsec_pk_kv_bool(&p, "eof", eof);
	}
	dsec_pk_end(&p);
	req_complete(r, &p);
}

/* 'path', which every file op needs. */
static int get_file_target(struct dsecd_req *r, struct dsec_err *err)
{
	int rc;

	if ((rc = dsec_get_str(r->msg.root, "path", &r->path, err)) == -ENOENT)
		return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EINVAL, "%s needs field 'path'",
				     dsecd_ops[r->op].name);
	return rc;
}

/* Optional 'mode' (permission bits, at most 07777); 0 when absent. */
static int get_mode(const msgpack_object *m, uint32_t *out, struct dsec_err *err)
{
	uint64_t mode = 0;
	int rc;

	if ((rc = dsec_get_u64_opt(m, "mode", &mode, err)) < 0)
		return rc;
	if (mode > 07777)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "mode %llo is not a file mode",
				     (unsigned long long)mode);
	*out = (uint32_t)mode;
	return 0;
}

/* Optional 'uid' and 'gid'; DSEC_OWNER_DEFAULT when absent. */
static int get_owner(const msgpack_object *m, struct dsec_file_req *q, struct dsec_err *err)
{
	static const char *const keys[] = { "uid", "gid" };
	int64_t *outs[] = { &q->uid, &q->gid };

	for (size_t i = 0; i < 2; i++) {
		uint64_t v;
		int rc = dsec_get_u64(m, keys[i], &v, err);

		*outs[i] = DSEC_OWNER_DEFAULT;
		if (rc == -ENOENT)
			continue;
		if (rc < 0)
			return rc;
		if (v >= UINT32_MAX)
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "%s %llu is out of range",
					     keys[i], (unsigned long long)v);
		*outs[i] = (int64_t)v;
	}
	return 0;
}

static void fs_done(void *arg, int rc, const struct dsec_err *err);

/* file_write's data, mode, owner and append into r->freq. */
static int get_write(struct dsecd_req *r, bool *append, struct dsec_err *err)
{
	const msgpack_object *m = r->msg.root;
	struct dsec_file_req *q = &r->freq;
	int rc;

	if ((rc = dsec_get_bin(m, "data", r->d->conf.max_frame, &q->data, &q->len, err)) < 0) {
		if (rc == -ENOENT)
			dsec_err_setc(err, DSEC_E_BAD_REQUEST, EINVAL,
				      "file_write needs field 'data'");
		return rc;
	}
	if ((rc = get_mode(m, &q->mode, err)) < 0 || (rc = get_owner(m, q, err)) < 0 ||
	    (rc = dsec_get_bool_opt(m, "append", append, err)) < 0)
		return rc;
	q->op = *append ? DSEC_FILE_APPEND : DSEC_FILE_WRITE;
	q->path = r->path;
	return 0;
}

/* file_write's fields of a staged write. */
struct stage_fields {
	bool parts;			/* the first part */
	const char *id;			/* 'stage': a later part's, or NULL */
	bool commit, abort;		/* the last part; the end without one */
};

/* Into sf, with the id's string in *id (caller frees). */
static int get_stage_fields(struct dsecd_req *r, struct stage_fields *sf, char **id,
			    struct dsec_err *err)
{
	const msgpack_object *m = r->msg.root;
	int rc;

	memset(sf, 0, sizeof(*sf));
	if ((rc = dsec_get_bool_opt(m, "parts", &sf->parts, err)) < 0 ||
	    (rc = dsec_get_str_opt(m, "stage", id, err)) < 0 ||
	    (rc = dsec_get_bool_opt(m, "commit", &sf->commit, err)) < 0 ||
	    (rc = dsec_get_bool_opt(m, "abort", &sf->abort, err)) < 0)
		return rc;
	sf->id = *id;
	if (sf->parts && sf->id)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "file_write takes 'parts' (a first part) or 'stage' (a later "
				     "one), not both");
	if ((sf->commit || sf->abort) && !sf->id)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "file_write's 'commit' and 'abort' go with 'stage'");
	if (sf->commit && sf->abort)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "file_write takes 'commit' or 'abort', not both");
	if ((sf->parts || sf->id) && !r->sb->be->ops->file)
		return unsupported(r, err);
	return 0;
}

/* True when path names no file: it is empty, ends in a slash, or its last
 * component is "." or "..". */
static bool names_dir(const char *path)
{
	const char *slash = strrchr(path, '/'), *last = slash ? slash + 1 : path;

	return !*last || !strcmp(last, ".") || !strcmp(last, "..");
}

/* file_write with 'parts' or 'stage': r->freq becomes the first part's
 * WRITE of the staged file, or a later part's PART. */
static int stage_write(struct dsecd_req *r, const struct stage_fields *sf, bool append,
		       struct dsec_err *err)
{
	struct dsec_file_req *q = &r->freq;
	struct dsecd_stage *st;

	if (append)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "a staged write replaces the file: it takes no 'append'");
	if (sf->parts && names_dir(r->path))
		return dsec_err_setc(err, DSEC_E_INVALID, EISDIR,
				     "cannot write '%s': is a directory", r->path);
	st = sf->parts ? dsecd_stage_new(r->sb, r->path, false, err)
		       : dsecd_stage_find(r->sb, sf->id, r->path, err);
	if (!st)
		return -1;
	stage_take(r, st, sf->parts);
	if (sf->parts) {
		q->path = st->tmp;
		return 0;
	}
	q->op = DSEC_FILE_PART;
	q->archive = st->tmp;
	q->staged = st->size;
	q->commit = sf->commit;
	return 0;
}

/* file_write with 'abort': r->freq removes the staged file. */
static int stage_abort(struct dsecd_req *r, const struct stage_fields *sf, struct dsec_err *err)
{
	struct dsec_file_req *q = &r->freq;
	struct dsecd_stage *st = dsecd_stage_find(r->sb, sf->id, r->path, err);

	if (!st)
		return -1;
	stage_take(r, st, false);
	*q = (struct dsec_file_req){ .op = DSEC_FILE_REMOVE, .path = st->tmp,
				     .uid = DSEC_OWNER_DEFAULT, .gid = DSEC_OWNER_DEFAULT };
	return 0;
}

void op_file(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	const msgpack_object *m = r->msg.root;
	const struct dsec_be_ops *ops;
	struct dsecd_stage *st;
	struct dsec_err err;
	int rc;

	dsec_err_clear(&err);
	if (get_file_target(r, &err) < 0)
		return reply_err(r, &err);
	ops = r->sb->be->ops;
	if (r->op == DSEC_OP_FILE_READ) {
		uint64_t off = 0, len = 0, max = d->conf.max_frame - REPLY_SLACK;
		if ((rc = dsec_get_u64_opt(m, "offset", &off, &err)) < 0 ||
		    (rc = dsec_get_u64_opt(m, "length", &len, &err)) < 0)
			return reply_err(r, &err);
		if (off > INT64_MAX) {
			dsec_err_setc(&err, DSEC_E_INVALID, EINVAL,
				      "offset %llu is past the largest file offset (%lld)",
				      (unsigned long long)off, (long long)INT64_MAX);
			return reply_err(r, &err);
		}
		if (len > max) {
			dsec_err_setc(&err, DSEC_E_TOO_LARGE, E2BIG,
				      "length %llu is over the %llu bytes a reply can carry: read in parts",
				      (unsigned long long)len, (unsigned long long)max);
			return reply_err(r, &err);
		}
		if (!ops->file_read) {
			unsupported(r, &err);
			return reply_err(r, &err);
		}
		if (r->sb->stages && (st = dsecd_stage_of_file(r->sb, r->path)))
			dsecd_stage_touch(st);
		r->want = len ? len : max;
		rc = ops->file_read(r->sb->handle, r->path, off, r->want + 1, &r->data,
				    file_done, r, &err);
	} else {
		struct dsec_file_req *q = &r->freq;
		struct stage_fields sf;
		_cleanup_free_ char *sid = NULL;
		bool append = false;
		if (get_stage_fields(r, &sf, &sid, &err) < 0)
			return reply_err(r, &err);
		if (sf.abort)
			rc = stage_abort(r, &sf, &err);
		else if ((rc = get_write(r, &append, &err)) == 0 && (sf.parts || sf.id))
			rc = stage_write(r, &sf, append, &err);
		if (rc < 0)
			return reply_err(r, &err);
		/* The file API when the backend has it (owner included). */
		if (ops->file)
			rc = ops->file(r->sb->handle, q, &r->fres, fs_done, r, &err);
		else if (append)
			rc = dsec_err_setc(&err, DSEC_E_UNSUPPORTED, ENOTSUP,
					   "backend '%s' cannot append to a file", r->sb->be->name);
		else if (!ops->file_write || q->uid != DSEC_OWNER_DEFAULT ||
			 q->gid != DSEC_OWNER_DEFAULT)
			rc = unsupported(r, &err);
		else
			rc = ops->file_write(r->sb->handle, r->path, q->data, q->len,
					     q->mode ? q->mode : 0644, file_done, r, &err);
	}
	if (rc < 0)
		return reply_err(r, &err);
	d->ops_inflight++;
}

/* A file's entries, into the map open in p. */
static void pack_info(struct dsec_pk *p, const struct dsec_file_info *i)
{
	dsec_pk_kv_str(p, "name", i->name);
	dsec_pk_kv_str(p, "type", dsec_file_type_name(i->type));
	dsec_pk_kv_u64(p, "mode", i->mode);
	dsec_pk_kv_u64(p, "size", i->size);
	dsec_pk_kv_u64(p, "uid", i->uid);
	dsec_pk_kv_u64(p, "gid", i->gid);
	dsec_pk_kv_double(p, "mtime", i->mtime);
	dsec_pk_kv_str(p, "target", i->target);
}

/* Completion of every op that goes through the backend's file entry. */
static void fs_done(void *arg, int rc, const struct dsec_err *err)
{
	struct dsecd_req *r = arg;
	const struct dsec_file_res *res = &r->fres;
	struct dsec_pk p;

	r->d->ops_inflight--;
	stage_settle(r, rc);
	if (rc < 0)
		return reply_err(r, err);
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	if (r->stage_id[0])
		dsec_pk_kv_str(&p, "stage", r->stage_id);
	switch (r->freq.op) {
	case DSEC_FILE_STAT:
		pack_info(&p, &res->info);
		break;
	case DSEC_FILE_LIST:
		dsec_pk_str(&p, "entries");
		dsec_pk_array_begin(&p);
		for (size_t i = 0; i < res->nentries; i++) {
			dsec_pk_map_begin(&p);
			pack_info(&p, &res->entries[i]);
			dsec_pk_end(&p);
		}
		dsec_pk_end(&p);
		dsec_pk_kv_bool(&p, "truncated", res->truncated);
		break;
	case DSEC_FILE_REMOVE:
		dsec_pk_kv_u64(&p, "removed", res->count);
		break;
	case DSEC_FILE_UPLOAD:
	case DSEC_FILE_UNPACK:
		dsec_pk_kv_u64(&p, "entries", res->count);
		break;
	case DSEC_FILE_PACK:
		dsec_pk_kv_u64(&p, "size", res->size);
		dsec_pk_kv_u64(&p, "entries", res->count);
		break;
	case DSEC_FILE_DOWNLOAD:
		dsec_pk_kv_bin(&p, "data", res->data.data, res->data.len);
		dsec_pk_kv_u64(&p, "size", res->data.len);
		dsec_pk_kv_u64(&p, "entries", res->count);
		break;
	default:
		break;
	}
	dsec_pk_end(&p);
	req_complete(r, &p);
}

/* Optional 'format' of upload and download: "tar" (default) or "tar.zst". */
static int get_format(const msgpack_object *m, enum dsec_file_format *out, struct dsec_err *err)
{
	_cleanup_free_ char *f = NULL;
	int rc = dsec_get_str(m, "format", &f, err), fmt;

	*out = DSEC_FMT_TAR;
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	if ((fmt = dsec_file_format_lookup(f)) < 0)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "format '%.64s' is not one of 'tar', 'tar.zst'", f);
	*out = (enum dsec_file_format)fmt;
	return 0;
}

/* file_upload's archive: 'data', or the file 'archive' in the sandbox
 * (with 'remove_archive'); its format and owner. */
static int get_upload(struct dsecd_req *r, struct dsec_err *err)
{
	const msgpack_object *m = r->msg.root;
	struct dsec_file_req *q = &r->freq;
	int rc;

	_cleanup_free_ char *sid = NULL;
	struct dsecd_stage *st = NULL;
	int given;

	if ((rc = dsec_get_str_opt(m, "archive", &r->archive, err)) < 0 ||
	    (rc = dsec_get_bool_opt(m, "remove_archive", &q->remove_archive, err)) < 0 ||
	    (rc = dsec_get_str_opt(m, "stage", &sid, err)) < 0)
		return rc;
	rc = dsec_get_bin(m, "data", r->d->conf.max_frame, &q->data, &q->len, err);
	if (rc < 0 && rc != -ENOENT)
		return rc;
	given = (rc == 0) + !!r->archive + !!sid;
	if (given > 1)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "file_upload takes one of 'data', 'archive' and 'stage'");
	if (!given)
		return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EINVAL,
				     "file_upload needs field 'data', 'archive' or 'stage'");
	if (sid && q->remove_archive)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "file_upload's 'remove_archive' goes with 'archive'");
	/* A staged write's file, never committed: it goes as remove_archive. */
	if (sid && !r->sb->be->ops->file)
		return unsupported(r, err);
	if (sid && !(st = dsecd_stage_find(r->sb, sid, NULL, err)))
		return -ENOENT;
	if (st) {
		r->archive = xstrdup(st->tmp);
		q->remove_archive = true;
		stage_take(r, st, false);
	}
	if (q->remove_archive && !r->archive)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "file_upload's 'remove_archive' goes with 'archive'");
	q->op = r->archive ? DSEC_FILE_UNPACK : DSEC_FILE_UPLOAD;
	q->archive = r->archive;
	if ((rc = get_format(m, &q->format, err)) < 0)
		return rc;
	return get_owner(m, q, err);
}

/* file_download's archive (with 'stage': a staged download), format. */
static int get_download(struct dsecd_req *r, struct dsec_err *err)
{
	const msgpack_object *m = r->msg.root;
	struct dsec_file_req *q = &r->freq;
	struct dsecd_stage *st;
	bool stage = false;
	int rc;

	if ((rc = dsec_get_str_opt(m, "archive", &r->archive, err)) < 0 ||
	    (rc = dsec_get_bool_opt(m, "stage", &stage, err)) < 0 ||
	    (rc = get_format(m, &q->format, err)) < 0)
		return rc;
	q->op = r->archive ? DSEC_FILE_PACK : DSEC_FILE_DOWNLOAD;
	q->archive = r->archive;
	if (!stage)
		return 0;
	if (!r->archive)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "file_download's 'stage' goes with 'archive'");
	if (!(st = dsecd_stage_new(r->sb, r->archive, true, err)))
		return -EMFILE;
	stage_take(r, st, true);
	return 0;
}

/* file_stat, file_list, file_mkdir, file_remove, file_upload, file_download. */
void op_fs(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	const msgpack_object *m = r->msg.root;
	struct dsec_file_req *q = &r->freq;
	uint64_t limit = DSEC_LIST_DEFAULT;
	struct dsecd_stage *st;
	struct dsec_err err;
	int rc = 0;

	dsec_err_clear(&err);
	if (get_file_target(r, &err) < 0)
		return reply_err(r, &err);
	q->path = r->path;
	q->uid = q->gid = DSEC_OWNER_DEFAULT;
	q->max_bytes = d->conf.max_frame - REPLY_SLACK;
	switch (r->op) {
	case DSEC_OP_FILE_STAT:
		q->op = DSEC_FILE_STAT;
		break;
	case DSEC_OP_FILE_LIST:
		q->op = DSEC_FILE_LIST;
		if ((rc = dsec_get_u64_opt(m, "limit", &limit, &err)) < 0)
			break;
		if (limit > DSEC_LIST_MAX)
			rc = dsec_err_setc(&err, DSEC_E_INVALID, EINVAL,
					   "limit %llu is over %d entries", (unsigned long long)limit,
					   DSEC_LIST_MAX);
		q->max_entries = limit ? limit : DSEC_LIST_DEFAULT;
		break;
	case DSEC_OP_FILE_MKDIR:
		q->op = DSEC_FILE_MKDIR;
		if ((rc = get_mode(m, &q->mode, &err)) == 0 && (rc = get_owner(m, q, &err)) == 0)
			rc = dsec_get_bool_opt(m, "parents", &q->parents, &err);
		break;
	case DSEC_OP_FILE_REMOVE:
		q->op = DSEC_FILE_REMOVE;
		rc = dsec_get_bool_opt(m, "recursive", &q->recursive, &err);
		/* The end of a staged download. */
		if (rc == 0 && r->sb->stages && (st = dsecd_stage_of_file(r->sb, r->path)) &&
		    !st->busy)
			stage_take(r, st, false);
		break;
	case DSEC_OP_FILE_UPLOAD:
		rc = get_upload(r, &err);
		break;
	case DSEC_OP_FILE_DOWNLOAD:
		rc = get_download(r, &err);
		break;
	default:
		DSEC_BUG("op_fs called for op %d", (int)r->op);
	}
	if (rc < 0)
		return reply_err(r, &err);
	if (!r->sb->be->ops->file) {
		unsupported(r, &err);
		return reply_err(r, &err);
	}
	if (r->sb->be->ops->file(r->sb->handle, q, &r->fres, fs_done, r, &err) < 0)
		return reply_err(r, &err);
	d->ops_inflight++;
}
