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

void req_file_free(struct dsecd_req *r)
{
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

void op_file(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	const msgpack_object *m = r->msg.root;
	const struct dsec_be_ops *ops;
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
		r->want = len ? len : max;
		rc = ops->file_read(r->sb->handle, r->path, off, r->want + 1, &r->data,
				    file_done, r, &err);
	} else {
		struct dsec_file_req *q = &r->freq;
		bool append = false;
		if ((rc = dsec_get_bin(m, "data", d->conf.max_frame, &q->data, &q->len, &err)) < 0) {
			if (rc == -ENOENT)
				dsec_err_setc(&err, DSEC_E_BAD_REQUEST, EINVAL,
					      "file_write needs field 'data'");
			return reply_err(r, &err);
		}
		if (get_mode(m, &q->mode, &err) < 0 || get_owner(m, q, &err) < 0 ||
		    dsec_get_bool_opt(m, "append", &append, &err) < 0)
			return reply_err(r, &err);
		q->op = append ? DSEC_FILE_APPEND : DSEC_FILE_WRITE;
		q->path = r->path;
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
	if (rc < 0)
		return reply_err(r, err);
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
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

	if ((rc = dsec_get_str_opt(m, "archive", &r->archive, err)) < 0 ||
	    (rc = dsec_get_bool_opt(m, "remove_archive", &q->remove_archive, err)) < 0)
		return rc;
	rc = dsec_get_bin(m, "data", r->d->conf.max_frame, &q->data, &q->len, err);
	if (rc < 0 && rc != -ENOENT)
		return rc;
	if (rc == 0 && r->archive)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "file_upload takes 'data' or 'archive', not both");
	if (rc == -ENOENT && !r->archive)
		return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EINVAL,
				     "file_upload needs field 'data' or 'archive'");
	if (q->remove_archive && !r->archive)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "file_upload's 'remove_archive' goes with 'archive'");
	q->op = r->archive ? DSEC_FILE_UNPACK : DSEC_FILE_UPLOAD;
	q->archive = r->archive;
	if ((rc = get_format(m, &q->format, err)) < 0)
		return rc;
	return get_owner(m, q, err);
}

/* file_stat, file_list, file_mkdir, file_remove, file_upload, file_download. */
void op_fs(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	const msgpack_object *m = r->msg.root;
	struct dsec_file_req *q = &r->freq;
	uint64_t limit = DSEC_LIST_DEFAULT;
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
		break;
	case DSEC_OP_FILE_UPLOAD:
		rc = get_upload(r, &err);
		break;
	case DSEC_OP_FILE_DOWNLOAD:
		if ((rc = dsec_get_str_opt(m, "archive", &r->archive, &err)) == 0)
			rc = get_format(m, &q->format, &err);
		q->op = r->archive ? DSEC_FILE_PACK : DSEC_FILE_DOWNLOAD;
		q->archive = r->archive;
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
