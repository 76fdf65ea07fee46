/* client-files.c - libdsec: the file calls (dsec-protocol(7) file_*). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "client-int.h"
#include "dsec.h"
#include "proto.h"

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
	struct dsec_pk p;

	pk_file(&p, "file_write", id, path);
	dsec_pk_kv_bin(&p, "data", data, len);
	if (mode)
		dsec_pk_kv_u64(&p, "mode", mode);
	pk_owner(&p, uid, gid);
	return file_call(c, &p, err);
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

int dsec_file_upload(struct dsec_client *c, const char *id, const char *path,
		     const void *data, size_t len, const char *format, int64_t uid, int64_t gid,
		     struct dsec_err *err)
{
	struct dsec_pk p;

	pk_file(&p, "file_upload", id, path);
	dsec_pk_kv_bin(&p, "data", data, len);
	if (format)
		dsec_pk_kv_str(&p, "format", format);
	pk_owner(&p, uid, gid);
	return file_call(c, &p, err);
}

int dsec_file_download(struct dsec_client *c, const char *id, const char *path,
		       const char *format, struct dsec_buf *out, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	pk_file(&p, "file_download", id, path);
	if (format)
		dsec_pk_kv_str(&p, "format", format);
	if ((rc = dcl_roundtrip(c, &p, 0, &r, err)) == 0)
		rc = dcl_get_bin_need(&r, "file_download", "data", out, err);
	dcl_reply_free(&r);
	return rc;
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

int dsec_file_read(struct dsec_client *c, const char *id, const char *path, uint64_t offset,
		   uint64_t len, struct dsec_buf *out, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	pk_file(&p, "file_read", id, path);
	if (offset)
		dsec_pk_kv_u64(&p, "offset", offset);
	if (len)
		dsec_pk_kv_u64(&p, "length", len);
	rc = dcl_roundtrip(c, &p, 0, &r, err);
	if (rc == 0)
		rc = dcl_get_bin_need(&r, "file_read", "data", out, err);
	dcl_reply_free(&r);
	return rc;
}
