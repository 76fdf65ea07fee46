/* client-rl.c - libdsec: the typed calls of rollouts (rlcoord, dsec-protocol(7)
 * ROLLOUTS) beyond create, exec steps and leases: lease pause and resume,
 * grade and the misbehaviour counters, reset, fork, watched, recover.  Each
 * reply is checked field by field before anything is handed out, as in
 * client-ops.c. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "client-int.h"
#include "dsec.h"
#include "proto.h"

#define FORK_MAX 256			/* the daemon's bound of one fork */

/* Sends op on sandbox (or lease) id, with key: val when key is not NULL,
 * and decodes its reply into r (free it with dcl_reply_free). */
static int id_call(struct dsec_client *c, const char *op, const char *id, const char *key,
		   const char *val, double extra, struct reply *r, struct dsec_err *err)
{
	struct dsec_pk p;

	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, op);
	dsec_pk_kv_str(&p, "id", id);
	if (key && val)
		dsec_pk_kv_str(&p, key, val);
	return dcl_roundtrip(c, &p, extra, r, err);
}

static int lease_each(struct dsec_client *c, const char *op, const char *id, uint64_t *done,
		      uint64_t *failed, struct dsec_err *err)
{
	struct reply r;
	int rc = id_call(c, op, id, NULL, NULL, 600, &r, err);

	if (rc == 0) {
		uint64_t d = dcl_get_u64_or(&r, r.result, "done", 0);
		uint64_t f = dcl_get_u64_or(&r, r.result, "failed", 0);

		rc = dcl_reply_done(&r, op, 0, err);
		if (rc == 0 && done)
			*done = d;
		if (rc == 0 && failed)
			*failed = f;
	}
	dcl_reply_free(&r);
	return rc;
}

int dsec_lease_pause(struct dsec_client *c, const char *id, uint64_t *done, uint64_t *failed,
		     struct dsec_err *err)
{
	return lease_each(c, "lease_pause", id, done, failed, err);
}

int dsec_lease_resume(struct dsec_client *c, const char *id, uint64_t *done, uint64_t *failed,
		      struct dsec_err *err)
{
	return lease_each(c, "lease_resume", id, done, failed, err);
}

/* dsec_sandbox_info embeds it: a larger one would move that struct's
 * fields (a new soname). */
_Static_assert(sizeof(struct dsec_marks) == offsetof(struct dsec_marks, has_egress) + 8,
	       "struct dsec_marks grew");

/* The misbehaviour map of result m into out (only the fields out's
 * struct_size holds; none is required: an absent count is 0). */
int dcl_unpack_marks(struct reply *r, const char *op, const msgpack_object *m,
		     struct dsec_marks *out, struct dsec_err *err)
{
	const msgpack_object *mk = dsec_map_get(m, "misbehaviour");
	struct dsec_marks v = { .struct_size = sizeof(v) };
	size_t size = out->struct_size;
	uint64_t sd, probes;

	if (size < sizeof(size_t))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "dsec_marks.struct_size is not "
				     "set");
	if (!mk || mk->type != MSGPACK_OBJECT_MAP)
		return dcl_no_field(r, op, "misbehaviour", err);
	v.oom_kills = dcl_get_u64_or(r, mk, "oom_kills", 0);
	v.pids_limited = dcl_get_u64_or(r, mk, "pids_limited", 0);
	v.output_floods = dcl_get_u64_or(r, mk, "output_floods", 0);
	v.timeouts = dcl_get_u64_or(r, mk, "timeouts", 0);
	v.has_egress = dsec_has(mk, "egress_denied");
	v.egress_denied = dcl_get_u64_or(r, mk, "egress_denied", 0);
	v.has_seccomp = dsec_has(mk, "seccomp_denied");
	sd = dcl_get_u64_or(r, mk, "seccomp_denied", 0);
	v.seccomp_denied = sd < UINT32_MAX ? (uint32_t)sd : UINT32_MAX;
	probes = dcl_get_u64_or(r, mk, "protected_probes", 0);
	v.protected_probes = probes < UINT16_MAX ? (uint16_t)probes : UINT16_MAX;
	if (dcl_reply_done(r, op, 0, err) < 0)
		return -EPROTO;
	memcpy(out, &v, size < sizeof(v) ? size : sizeof(v));
	out->struct_size = size;
	return 0;
}

int dsec_grade(struct dsec_client *c, const char *id, const struct dsec_cmd *req,
	       struct dsec_cmd_res *res, struct dsec_marks *marks, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	if ((rc = dcl_check_timeout(req->timeout, err)) < 0)
		return rc;
	if (marks && marks->struct_size < sizeof(size_t))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "dsec_marks.struct_size is not "
				     "set");
	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "grade");
	dsec_pk_kv_str(&p, "id", id);
	dcl_pack_exec(&p, req);
	/* A snapshot, a create and the grader's command. */
	rc = dcl_roundtrip(c, &p, 900 + (req->timeout > 0 ? req->timeout : 3600), &r, err);
	if (rc == 0 && marks)
		rc = dcl_unpack_marks(&r, "grade", r.result, marks, err);
	if (rc == 0)
		rc = dcl_unpack_exec(&r, "grade", res, err);
	dcl_reply_free(&r);
	return rc;
}

int dsec_marks(struct dsec_client *c, const char *id, struct dsec_marks *out,
	       struct dsec_err *err)
{
	struct reply r;
	int rc;

	if (out->struct_size < sizeof(size_t))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "dsec_marks.struct_size is not "
				     "set");
	rc = id_call(c, "usage", id, NULL, NULL, 0, &r, err);
	if (rc == 0)
		rc = dcl_unpack_marks(&r, "usage", r.result, out, err);
	dcl_reply_free(&r);
	return rc;
}

int dsec_set_ttl(struct dsec_client *c, const char *id, double ttl, double idle_ttl,
		 double *left, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	if (!(ttl >= 0) || !(idle_ttl >= 0) || (ttl == 0 && idle_ttl == 0))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "dsec_set_ttl needs a ttl or an "
				     "idle_ttl of more than 0 seconds");
	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "set_ttl");
	dsec_pk_kv_str(&p, "id", id);
	if (ttl > 0)
		dsec_pk_kv_double(&p, "ttl", ttl);
	if (idle_ttl > 0)
		dsec_pk_kv_double(&p, "idle_ttl", idle_ttl);
	rc = dcl_roundtrip(c, &p, 0, &r, err);
	if (rc == 0 && left) {
		double v = dcl_get_double_or(&r, r.result, "left", 0);

		if ((rc = dcl_reply_done(&r, "set_ttl", 0, err)) == 0)
			*left = v;
	}
	dcl_reply_free(&r);
	return rc;
}

int dsec_reset(struct dsec_client *c, const char *id, const char *image, struct dsec_err *err)
{
	struct reply r;
	int rc = id_call(c, "reset", id, "image", image, 300, &r, err);

	dcl_reply_free(&r);
	return rc;
}

void dsec_ids_free(char **ids)
{
	for (char **s = ids; s && *s; s++)
		free(*s);
	free(ids);
}

int dsec_fork(struct dsec_client *c, const char *id, unsigned n, char ***ids,
	      struct dsec_err *err)
{
	return dsec_fork_flags(c, id, n, 0, ids, err);
}

int dsec_fork_flags(struct dsec_client *c, const char *id, unsigned n, unsigned flags,
		    char ***ids, struct dsec_err *err)
{
	const msgpack_object *a;
	struct dsec_pk p;
	struct reply r;
	char **v = NULL;
	int rc;

	*ids = NULL;
	if (n < 1 || n > FORK_MAX)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "a fork makes 1 to %d sandboxes, "
				     "not %u", FORK_MAX, n);
	if (flags & ~DSEC_FORK_PROCESSES)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "fork flags %#x are not known",
				     flags & ~DSEC_FORK_PROCESSES);
	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "fork");
	dsec_pk_kv_str(&p, "id", id);
	dsec_pk_kv_u64(&p, "n", n);
	if (flags & DSEC_FORK_PROCESSES)
		dsec_pk_kv_bool(&p, "processes", true);
	rc = dcl_roundtrip(c, &p, 300 + 10.0 * n, &r, err);
	if (rc == 0) {
		a = dsec_map_get(r.result, "ids");
		if (!a || a->type != MSGPACK_OBJECT_ARRAY || a->via.array.size > FORK_MAX)
			rc = dcl_no_field(&r, "fork", "ids", err);
	}
	if (rc == 0) {
		v = calloc(a->via.array.size + 1, sizeof(*v));
		if (!v)
			rc = dsec_err_setc(err, DSEC_E_INTERNAL, ENOMEM, "out of memory");
		for (uint32_t i = 0; rc == 0 && i < a->via.array.size; i++) {
			const msgpack_object *s = &a->via.array.ptr[i];

			if (s->type != MSGPACK_OBJECT_STR || !s->via.str.size ||
			    memchr(s->via.str.ptr, 0, s->via.str.size))
				rc = dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO, "bad reply from "
						   "'%s': entry %u of 'ids' of the fork reply is "
						   "not an id", r.url, i);
			else if (!(v[i] = strndup(s->via.str.ptr, s->via.str.size)))
				rc = dsec_err_setc(err, DSEC_E_INTERNAL, ENOMEM, "out of memory");
		}
	}
	dcl_reply_free(&r);
	if (rc < 0) {
		dsec_ids_free(v);
		return rc;
	}
	*ids = v;
	return 0;
}

void dsec_watched_free(struct dsec_watched *arr, size_t n)
{
	for (size_t i = 0; arr && i < n; i++) {
		free(arr[i].path);
		free(arr[i].before);
		free(arr[i].after);
	}
	free(arr);
}

/* A hash field: a string, or nil / absent (NULL). */
static int get_hash(const msgpack_object *e, const char *key, char **out)
{
	const msgpack_object *o = dsec_map_get(e, key);

	*out = NULL;
	if (!o || o->type == MSGPACK_OBJECT_NIL)
		return 0;
	return dsec_get_text(e, key, 512, out, NULL) < 0 ? -EPROTO : 0;
}

int dsec_watched(struct dsec_client *c, const char *id, struct dsec_watched **out, size_t *n,
		 struct dsec_err *err)
{
	const msgpack_object *ents;
	struct dsec_watched *v = NULL;
	struct reply r;
	size_t k = 0;
	int rc;

	*out = NULL;
	*n = 0;
	rc = id_call(c, "watched", id, NULL, NULL, 600, &r, err);
	if (rc == 0)
		rc = dcl_get_list(&r, "watched", r.result, "watched", true, 8, &ents, &k, err);
	if (rc == 0 && k && !(v = calloc(k, sizeof(*v))))
		rc = dsec_err_setc(err, DSEC_E_INTERNAL, ENOMEM, "out of memory");
	for (size_t i = 0; rc == 0 && i < k; i++) {
		const msgpack_object *e = &ents[i];

		if (dsec_get_text(e, "path", CLIENT_RECV_MAX, &v[i].path, NULL) < 0 ||
		    get_hash(e, "before", &v[i].before) < 0 ||
		    get_hash(e, "after", &v[i].after) < 0) {
			rc = dsec_err_setc(err, DSEC_E_INTERNAL, EPROTO, "bad reply from '%s': "
					   "entry %zu of the watched reply lacks its path or has "
					   "a hash that is not a string", r.url, i);
			break;
		}
		dcl_get_bool_or(&r, e, "changed", &v[i].changed);
	}
	rc = dcl_reply_done(&r, "watched", rc, err);
	dcl_reply_free(&r);
	if (rc < 0) {
		dsec_watched_free(v, k);
		return rc;
	}
	*out = v;
	*n = k;
	return 0;
}

int dsec_recover(struct dsec_client *c, const char *id, char **new_id,
		 struct dsec_recovery *rep, struct dsec_err *err)
{
	struct reply r;
	int rc;

	*new_id = NULL;
	/* The create, then every logged step again. */
	rc = id_call(c, "recover", id, NULL, NULL, 3600, &r, err);
	if (rc == 0 && rep) {
		const msgpack_object *s = dsec_map_get(r.result, "skipped");
		const msgpack_object *d = dsec_map_get(r.result, "differs");

		rep->entries = dcl_get_u64_or(&r, r.result, "entries", 0);
		rep->replayed = dcl_get_u64_or(&r, r.result, "replayed", 0);
		rep->skipped = s && s->type == MSGPACK_OBJECT_ARRAY ? s->via.array.size : 0;
		rep->differs = d && d->type == MSGPACK_OBJECT_ARRAY ? d->via.array.size : 0;
		rc = dcl_reply_done(&r, "recover", 0, err);
	}
	if (rc == 0)
		rc = dcl_get_str_need(&r, "recover", "id", new_id, err);
	dcl_reply_free(&r);
	return rc;
}
