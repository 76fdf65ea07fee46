/* proto.h - the wire protocol: op table, frame limits, msgpack helpers.
 *
 * A frame is one msgpack map.  Requests: {v: 1, op: "name", ...args}.
 * Replies: {ok: true, result: {...}} or
 *          {ok: false, error: {code: "stable_name", message: "text"}}.
 * The ops, their fields and the error codes are documented in
 * dsec-protocol(7); the op table is dsecd's (dsecd/ops.h).
 */
#ifndef DSEC_PROTO_H
#define DSEC_PROTO_H

#include <errno.h>
#include <msgpack.h>
#include "util.h"
#include "err.h"
#include "backend.h"

/* Frames larger than this are refused with "too_large" (configurable in
 * dsecd with max_frame). */
#define DSEC_FRAME_MAX_DEFAULT (16u << 20)
/* Strings (ids, paths, names) longer than this are refused. */
#define DSEC_STR_MAX 4096
/* Elements in argv/env arrays. */
#define DSEC_ARGV_MAX 4096
/* Bytes in one argv or env element (Linux's MAX_ARG_STRLEN). */
#define DSEC_ARG_MAX (128u << 10)
/* Objects a frame may decode to (each scalar and container one, a map
 * entry two), checked before msgpack-c allocates any: the largest request
 * (argv, env, allow, layers and seccomp_deny at DSEC_ARGV_MAX elements
 * each) fits with room.  At 24 bytes each, 1.5 MiB whatever the frame. */
#define DSEC_OBJ_MAX 65536
/* Entries file_list returns when the request names no limit, and at most. */
#define DSEC_LIST_DEFAULT 10000
#define DSEC_LIST_MAX 100000

/* Wire names of file types (enum dsec_file_type) and archive formats
 * (enum dsec_file_format); the format lookup returns -1 for a name it
 * does not know. */
const char *dsec_file_type_name(enum dsec_file_type t);
int dsec_file_format_lookup(const char *name);

/* The op a frame names, found without decoding it: the value of the first
 * str key "op" of the top-level map, as dsec_map_get would find it.  True
 * with (*name)[0..*nlen) pointing into data when that value is a str; false
 * when the frame is not a map, has no such key or its value is not a str.
 * Costs a look at the headers of the entries before "op".  (The ops
 * themselves are dsecd's table, dsecd/ops.h.) */
bool dsec_frame_op(const void *data, size_t len, const char **name, size_t *nlen);

/* A parsed frame.  The root object points into zone memory owned by msg. */
struct dsec_msg {
	msgpack_unpacked up;		/* owns the zone */
	const msgpack_object *root;	/* the top-level map */
};

/* Strictly parse one frame: exactly one msgpack object, a map, no trailing
 * bytes, at most max bytes, decoding to at most DSEC_OBJ_MAX objects.
 * A container claiming more elements than the bytes left could hold is
 * refused before anything is allocated.  On failure err has bad_request
 * or too_large; m is freeable either way. */
int dsec_msg_parse(struct dsec_msg *m, const void *data, size_t len, size_t max,
		   struct dsec_err *err);
/* The same with another bound on the objects (replies that carry lists). */
int dsec_msg_parse_n(struct dsec_msg *m, const void *data, size_t len, size_t max,
		     size_t max_objects, struct dsec_err *err);
void dsec_msg_free(struct dsec_msg *m);
/* Is p[0..len) exactly one msgpack object whose containers claim no more
 * elements than the bytes left could hold, nested at most 32 deep?  The
 * check dsec_msg_parse makes before msgpack-c allocates anything, for
 * decoders of other msgpack data (fs3's indexes and manifests). */
bool dsec_msgpack_bounded(const void *p, size_t len);

/* Field access on a map object.  Getters return 0 when the key is present
 * and well typed, -ENOENT when absent (out untouched), and -EINVAL with a
 * bad_request err naming the field when it has the wrong type or is too long.
 * Strings are copied (caller frees). */
const msgpack_object *dsec_map_get(const msgpack_object *map, const char *key);
int dsec_get_str(const msgpack_object *map, const char *key, char **out, struct dsec_err *err);
/* A string of at most max bytes (dsec_get_str uses DSEC_STR_MAX). */
int dsec_get_text(const msgpack_object *map, const char *key, size_t max, char **out,
		  struct dsec_err *err);
/* True if key is present and not nil. */
bool dsec_has(const msgpack_object *map, const char *key);
/* Accepts bin or str; at most max bytes. */
int dsec_get_bin(const msgpack_object *map, const char *key, size_t max, const void **data,
		 size_t *len, struct dsec_err *err);
int dsec_get_u64(const msgpack_object *map, const char *key, uint64_t *out, struct dsec_err *err);
/* Accepts float or integer; refuses negative values, NaN and infinity. */
int dsec_get_seconds(const msgpack_object *map, const char *key, double *out, struct dsec_err *err);
int dsec_get_double(const msgpack_object *map, const char *key, double *out, struct dsec_err *err);
int dsec_get_bool(const msgpack_object *map, const char *key, bool *out, struct dsec_err *err);
/* Array of strings -> NULL-terminated vector (free with dsec_strv_free). */
int dsec_get_strv(const msgpack_object *map, const char *key, char ***out, struct dsec_err *err);
/* Map of string -> string -> NULL-terminated "K=V" vector. Keys must not
 * be empty or contain '='. */
int dsec_get_env(const msgpack_object *map, const char *key, char ***out, struct dsec_err *err);

/* The same for an optional field: 0 when it is absent too (out untouched),
 * so that reading one is one test, not `rc < 0 && rc != -ENOENT`. */
static inline int dsec_opt_(int rc)
{
	return rc == -ENOENT ? 0 : rc;
}

static inline int dsec_get_str_opt(const msgpack_object *map, const char *key, char **out,
				   struct dsec_err *err)
{
	return dsec_opt_(dsec_get_str(map, key, out, err));
}

static inline int dsec_get_text_opt(const msgpack_object *map, const char *key, size_t max,
				    char **out, struct dsec_err *err)
{
	return dsec_opt_(dsec_get_text(map, key, max, out, err));
}

static inline int dsec_get_bin_opt(const msgpack_object *map, const char *key, size_t max,
				   const void **data, size_t *len, struct dsec_err *err)
{
	return dsec_opt_(dsec_get_bin(map, key, max, data, len, err));
}

static inline int dsec_get_u64_opt(const msgpack_object *map, const char *key, uint64_t *out,
				   struct dsec_err *err)
{
	return dsec_opt_(dsec_get_u64(map, key, out, err));
}

static inline int dsec_get_seconds_opt(const msgpack_object *map, const char *key, double *out,
				       struct dsec_err *err)
{
	return dsec_opt_(dsec_get_seconds(map, key, out, err));
}

static inline int dsec_get_double_opt(const msgpack_object *map, const char *key, double *out,
				      struct dsec_err *err)
{
	return dsec_opt_(dsec_get_double(map, key, out, err));
}

static inline int dsec_get_bool_opt(const msgpack_object *map, const char *key, bool *out,
				    struct dsec_err *err)
{
	return dsec_opt_(dsec_get_bool(map, key, out, err));
}

static inline int dsec_get_strv_opt(const msgpack_object *map, const char *key, char ***out,
				    struct dsec_err *err)
{
	return dsec_opt_(dsec_get_strv(map, key, out, err));
}

static inline int dsec_get_env_opt(const msgpack_object *map, const char *key, char ***out,
				   struct dsec_err *err)
{
	return dsec_opt_(dsec_get_env(map, key, out, err));
}

/* Writing: an sbuffer with a packer on it.
 *
 * Maps and arrays opened with dsec_pk_map_begin()/dsec_pk_array_begin()
 * count their own entries: their header is written as a map32/array32 with
 * room for the count, every dsec_pk_* call below adds what it writes to the
 * innermost open one (a dsec_pk_kv_* an entry, a value or a container half
 * of one in a map, one element in an array), and dsec_pk_end() writes the
 * count in.  A container whose count and body are small is then moved down
 * to the one-byte header msgpack-c would have written, so small replies are
 * the bytes they always were.  Inside such a container write only through
 * dsec_pk_* (msgpack_pack_* calls are not counted); containers opened with
 * msgpack_pack_map()/dsec_pk_reply_ok() take a count first, as before.
 * No allocation beyond the sbuffer's. */
#define DSEC_PK_DEPTH 8			/* containers open at once, at most */

struct dsec_pk {
	msgpack_sbuffer sb;		/* the bytes */
	msgpack_packer pk;		/* writes into sb */
	unsigned depth;			/* containers open (dsec_pk_*_begin) */
	struct {
		size_t at;		/* offset of its header in sb */
		uint32_t n;		/* objects written in it (a map entry is two) */
	} open[DSEC_PK_DEPTH];		/* the open containers, innermost last */
};

void dsec_pk_init(struct dsec_pk *p);
void dsec_pk_free(struct dsec_pk *p);
/* Hands the bytes out (caller frees with free()); p is empty after. */
void *dsec_pk_detach(struct dsec_pk *p, size_t *len);
void dsec_pk_str(struct dsec_pk *p, const char *s);
void dsec_pk_strn(struct dsec_pk *p, const char *s, size_t n);
void dsec_pk_bin(struct dsec_pk *p, const void *d, size_t n);
/* One object already packed (n bytes of msgpack, copied as they are). */
void dsec_pk_raw(struct dsec_pk *p, const void *obj, size_t n);
/* A parsed object as it is (a key, a value, a whole container). */
void dsec_pk_object(struct dsec_pk *p, const msgpack_object *o);
void dsec_pk_kv_str(struct dsec_pk *p, const char *k, const char *v);	/* NULL v packs nil */
void dsec_pk_kv_bin(struct dsec_pk *p, const char *k, const void *d, size_t n);
void dsec_pk_kv_u64(struct dsec_pk *p, const char *k, uint64_t v);
void dsec_pk_kv_i64(struct dsec_pk *p, const char *k, int64_t v);
void dsec_pk_u64(struct dsec_pk *p, uint64_t v);
void dsec_pk_double(struct dsec_pk *p, double v);
void dsec_pk_kv_double(struct dsec_pk *p, const char *k, double v);
void dsec_pk_kv_bool(struct dsec_pk *p, const char *k, bool v);
/* Packs "K=V" strings as a map {K: V}. */
void dsec_pk_kv_env(struct dsec_pk *p, const char *k, const char *const *env);
void dsec_pk_kv_strv(struct dsec_pk *p, const char *k, const char *const *v);
void dsec_pk_nil(struct dsec_pk *p);
/* Opens a map or an array that counts what goes in (see struct dsec_pk);
 * in a map, a key (dsec_pk_str) goes before it. */
void dsec_pk_map_begin(struct dsec_pk *p);
void dsec_pk_array_begin(struct dsec_pk *p);
/* Closes the innermost open map or array: writes its count. */
void dsec_pk_end(struct dsec_pk *p);

/* Request header: starts the map with n_args + 2 entries and packs v, op. */
void dsec_pk_request(struct dsec_pk *p, const char *op, size_t n_args);
/* The same with a map that counts its entries: close it with dsec_pk_end(). */
void dsec_pk_request_begin(struct dsec_pk *p, const char *op);
/* Reply header for success: {ok: true, result: <map of n entries follows>}. */
void dsec_pk_reply_ok(struct dsec_pk *p, size_t n);
/* The same with a result map that counts its entries: close it with
 * dsec_pk_end(). */
void dsec_pk_reply_begin(struct dsec_pk *p);
/* A whole error reply. */
void dsec_pk_reply_err(struct dsec_pk *p, const struct dsec_err *err);

#endif
