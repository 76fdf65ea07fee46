/* proto.c - strict frame parsing, typed field access, packing. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

static const char *const file_types[] = {
	[DSEC_FT_FILE] = "file", [DSEC_FT_DIR] = "dir", [DSEC_FT_SYMLINK] = "symlink",
	[DSEC_FT_FIFO] = "fifo", [DSEC_FT_SOCKET] = "socket", [DSEC_FT_CHAR] = "char",
	[DSEC_FT_BLOCK] = "block",
};

static const char *const file_formats[] = {
	[DSEC_FMT_TAR] = "tar", [DSEC_FMT_TAR_ZST] = "tar.zst",
};

const char *dsec_file_type_name(enum dsec_file_type t)
{
	return (unsigned)t < DSEC_ARRAY_LEN(file_types) ? file_types[t] : "unknown";
}

int dsec_file_format_lookup(const char *name)
{
	for (size_t i = 0; i < DSEC_ARRAY_LEN(file_formats); i++)
		if (!strcmp(file_formats[i], name))
			return (int)i;
	return -1;
}

/* Containers msgpack-c keeps open at once (MSGPACK_EMBED_STACK_SIZE in
 * its unpack_define.h); one more fails there with a memory error. */
#define MSG_DEPTH_MAX 32

/* Big-endian integer of n bytes at p. */
static uint64_t be_uint(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | *p++;
	return v;
}

/* Why a walk over the bytes before msgpack-c sees them: msgpack-c
 * allocates a container's elements when it reads its header, so a 5-byte
 * map32 header reserves gigabytes, and every 1-byte nil becomes a 24-byte
 * object, so a frame of nils decodes to 24 times its size.  Here each
 * header is only read: a container must fit its elements in the bytes
 * left (every element takes one byte at least, so the elements still to
 * come, all levels together, may not outnumber the bytes), the objects the
 * frame holds (each element one, a map entry two) must stay within
 * max_objects, and containers nest at most as deep as msgpack-c takes
 * (MSG_DEPTH_MAX).  *used gets the length of the first object.
 * The cost is one look at each header, nothing per byte of a str or bin. */
static int msgpack_walk(const uint8_t *p, size_t len, size_t max_objects, size_t *used,
			struct dsec_err *err)
{
	uint64_t left[MSG_DEPTH_MAX];	/* elements still to come per open container */
	uint64_t pending = 0;		/* their sum */
	size_t off = 0, objects = 0, top = 0;
	bool root = true;

	for (;;) {
		uint64_t n = 0;		/* elements of a container, bytes of a str/bin/ext */
		size_t hdr = 0;		/* bytes after the type byte that are its header */
		int kind = 0;		/* 0 scalar, 1 array, 2 map, 3 str/bin/ext */

		while (top > 0 && left[top - 1] == 0)
			top--;
		if (top == 0 && !root)
			break;
		if (top == 0) {
			root = false;
		} else {
			left[top - 1]--;
			pending--;
		}
		if (off >= len)
			goto truncated;
		uint8_t b = p[off++];
		if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
			kind = 0;	/* fixint, nil, bool */
		} else if (b <= 0x8f) {
			kind = 2, n = b & 0x0f;
		} else if (b <= 0x9f) {
			kind = 1, n = b & 0x0f;
		} else if (b <= 0xbf) {
			kind = 3, n = b & 0x1f;
		} else {
			switch (b) {
			case 0xc4: case 0xd9: kind = 3, hdr = 1; break;	/* bin8, str8 */
			case 0xc5: case 0xda: kind = 3, hdr = 2; break;	/* bin16, str16 */
			case 0xc6: case 0xdb: kind = 3, hdr = 4; break;	/* bin32, str32 */
			case 0xc7: kind = 3, hdr = 1; break;		/* ext8 (+ type) */
			case 0xc8: kind = 3, hdr = 2; break;		/* ext16 */
			case 0xc9: kind = 3, hdr = 4; break;		/* ext32 */
			case 0xca: case 0xce: case 0xd2: n = 4; break;	/* 32-bit numbers */
			case 0xcb: case 0xcf: case 0xd3: n = 8; break;	/* 64-bit numbers */
			case 0xcc: case 0xd0: n = 1; break;
			case 0xcd: case 0xd1: n = 2; break;
			case 0xd4: n = 2; break;			/* fixext 1, 2, 4, 8, 16 */
			case 0xd5: n = 3; break;
			case 0xd6: n = 5; break;
			case 0xd7: n = 9; break;
			case 0xd8: n = 17; break;
			case 0xdc: kind = 1, hdr = 2; break;		/* array16, array32 */
			case 0xdd: kind = 1, hdr = 4; break;
			case 0xde: kind = 2, hdr = 2; break;		/* map16, map32 */
			case 0xdf: kind = 2, hdr = 4; break;
			default:
				return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EBADMSG,
						     "malformed msgpack frame (byte 0x%02x at %zu)", b,
						     off - 1);
			}
			if (kind == 0) {	/* a fixed-size scalar: n bytes follow */
				if (len - off < n)
					goto truncated;
				off += n;
				n = 0;
			}
		}
		if (hdr) {
			if (len - off < hdr)
				goto truncated;
			n = be_uint(p + off, hdr);
			off += hdr;
			if (b >= 0xc7 && b <= 0xc9)
				n++;	/* the ext's type byte */
		}
		objects++;
		if (kind == 3) {
			if (len - off < n)
				goto truncated;
			off += n;
		} else if (kind) {
			if (top >= MSG_DEPTH_MAX)
				return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EBADMSG,
						     "msgpack frame nests deeper than %d containers",
						     MSG_DEPTH_MAX);
			if (kind == 2)
				n *= 2;
			/* pending can be over the bytes left already: a header
			 * of several bytes takes more than the one counted. */
			if (pending > len - off || n > len - off - pending)
				return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EBADMSG,
						     "truncated msgpack frame (%zu bytes): a container "
						     "claims %llu elements", len,
						     (unsigned long long)(kind == 2 ? n / 2 : n));
			if (objects + pending + n > max_objects)
				return dsec_err_setc(err, DSEC_E_TOO_LARGE, E2BIG,
						     "msgpack frame holds more than %zu objects",
						     max_objects);
			pending += n;
			if (n)
				left[top++] = n;
		}
	}
	*used = off;
	return 0;
truncated:
	return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EBADMSG, "truncated msgpack frame (%zu bytes)",
			     len);
}

/* The str at p (len bytes there): its bytes and length; false when the
 * object there is not a whole str. */
static bool str_at(const uint8_t *p, size_t len, const char **s, size_t *n)
{
	size_t h;

	if (len == 0)
		return false;
	if (p[0] >= 0xa0 && p[0] <= 0xbf)
		h = 0, *n = p[0] & 0x1f;
	else if (p[0] == 0xd9)
		h = 1;
	else if (p[0] == 0xda)
		h = 2;
	else if (p[0] == 0xdb)
		h = 4;
	else
		return false;
	if (len - 1 < h)
		return false;
	if (h)
		*n = (size_t)be_uint(p + 1, h);
	if (len - 1 - h < *n)
		return false;
	*s = (const char *)p + 1 + h;
	return true;
}

bool dsec_frame_op(const void *data, size_t len, const char **name, size_t *nlen)
{
	const uint8_t *p = data;
	size_t off, used, klen;
	uint64_t n;
	const char *k;

	if (len == 0)
		return false;
	if (p[0] >= 0x80 && p[0] <= 0x8f)
		n = p[0] & 0x0f, off = 1;
	else if (p[0] == 0xde && len >= 3)
		n = be_uint(p + 1, 2), off = 3;
	else if (p[0] == 0xdf && len >= 5)
		n = be_uint(p + 1, 4), off = 5;
	else
		return false;
	for (; n > 0; n--) {
		bool is_op = str_at(p + off, len - off, &k, &klen) && klen == 2 && !memcmp(k, "op", 2);

		if (msgpack_walk(p + off, len - off, SIZE_MAX, &used, NULL) < 0)
			return false;
		off += used;
		if (is_op)
			return str_at(p + off, len - off, name, nlen);
		if (msgpack_walk(p + off, len - off, SIZE_MAX, &used, NULL) < 0)
			return false;
		off += used;
	}
	return false;
}

bool dsec_msgpack_bounded(const void *p, size_t len)
{
	size_t used;

	return msgpack_walk(p, len, SIZE_MAX, &used, NULL) == 0 && used == len;
}

int dsec_msg_parse(struct dsec_msg *m, const void *data, size_t len, size_t max,
		   struct dsec_err *err)
{
	return dsec_msg_parse_n(m, data, len, max, DSEC_OBJ_MAX, err);
}

int dsec_msg_parse_n(struct dsec_msg *m, const void *data, size_t len, size_t max,
		     size_t max_objects, struct dsec_err *err)
{
	size_t off = 0, used;
	int rc;

	msgpack_unpacked_init(&m->up);
	m->root = NULL;
	if (len > max)
		return dsec_err_setc(err, DSEC_E_TOO_LARGE, EMSGSIZE,
				     "frame of %zu bytes is over the limit of %zu", len, max);
	if (len == 0)
		return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EBADMSG, "empty frame");
	if ((rc = msgpack_walk(data, len, max_objects, &used, err)) < 0)
		return rc;
	if (used != len)
		return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EBADMSG,
				     "%zu trailing bytes after the msgpack object", len - used);
	msgpack_unpack_return r = msgpack_unpack_next(&m->up, data, len, &off);
	if (r == MSGPACK_UNPACK_CONTINUE)
		return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EBADMSG,
				     "truncated msgpack frame (%zu bytes)", len);
	if (r == MSGPACK_UNPACK_NOMEM_ERROR)
		return dsec_err_setc(err, DSEC_E_TOO_LARGE, ENOMEM,
				     "msgpack frame needs too much memory to decode");
	if (r != MSGPACK_UNPACK_SUCCESS)
		return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EBADMSG, "malformed msgpack frame");
	if (off != len)
		return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EBADMSG,
				     "%zu trailing bytes after the msgpack object", len - off);
	if (m->up.data.type != MSGPACK_OBJECT_MAP)
		return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EBADMSG,
				     "frame is not a msgpack map");
	m->root = &m->up.data;
	return 0;
}

void dsec_msg_free(struct dsec_msg *m)
{
	msgpack_unpacked_destroy(&m->up);
	m->root = NULL;
}

const msgpack_object *dsec_map_get(const msgpack_object *map, const char *key)
{
	size_t klen = strlen(key);

	if (!map || map->type != MSGPACK_OBJECT_MAP)
		return NULL;
	for (uint32_t i = 0; i < map->via.map.size; i++) {
		const msgpack_object *k = &map->via.map.ptr[i].key;
		if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == klen &&
		    !memcmp(k->via.str.ptr, key, klen))
			return &map->via.map.ptr[i].val;
	}
	return NULL;
}

static int bad_type(struct dsec_err *err, const char *key, const char *want)
{
	return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EINVAL, "field '%s' must be %s", key, want);
}

/* Present and not nil: nil counts as absent so clients may send defaults. */
static const msgpack_object *field(const msgpack_object *map, const char *key)
{
	const msgpack_object *o = dsec_map_get(map, key);

	return o && o->type != MSGPACK_OBJECT_NIL ? o : NULL;
}

bool dsec_has(const msgpack_object *map, const char *key)
{
	return field(map, key) != NULL;
}

int dsec_get_str(const msgpack_object *map, const char *key, char **out, struct dsec_err *err)
{
	return dsec_get_text(map, key, DSEC_STR_MAX, out, err);
}

int dsec_get_text(const msgpack_object *map, const char *key, size_t max, char **out,
		  struct dsec_err *err)
{
	const msgpack_object *o = field(map, key);

	if (!o)
		return -ENOENT;
	if (o->type != MSGPACK_OBJECT_STR)
		return bad_type(err, key, "a string");
	if (o->via.str.size > max)
		return dsec_err_setc(err, DSEC_E_TOO_LARGE, E2BIG,
				     "field '%s' is longer than %zu bytes", key, max);
	if (memchr(o->via.str.ptr, '\0', o->via.str.size))
		return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EINVAL,
				     "field '%s' contains a NUL byte", key);
	*out = xstrndup(o->via.str.ptr, o->via.str.size);
	return 0;
}

int dsec_get_bin(const msgpack_object *map, const char *key, size_t max, const void **data,
		 size_t *len, struct dsec_err *err)
{
	const msgpack_object *o = field(map, key);

	if (!o)
		return -ENOENT;
	if (o->type == MSGPACK_OBJECT_BIN) {
		*data = o->via.bin.ptr;
		*len = o->via.bin.size;
	} else if (o->type == MSGPACK_OBJECT_STR) {
		*data = o->via.str.ptr;
		*len = o->via.str.size;
	} else {
		return bad_type(err, key, "bytes (bin or str)");
	}
	if (*len > max)
		return dsec_err_setc(err, DSEC_E_TOO_LARGE, E2BIG,
				     "field '%s' is longer than %zu bytes", key, max);
	return 0;
}

int dsec_get_u64(const msgpack_object *map, const char *key, uint64_t *out, struct dsec_err *err)
{
	const msgpack_object *o = field(map, key);

	if (!o)
		return -ENOENT;
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return bad_type(err, key, "a non-negative integer");
	*out = o->via.u64;
	return 0;
}

int dsec_get_double(const msgpack_object *map, const char *key, double *out, struct dsec_err *err)
{
	const msgpack_object *o = field(map, key);

	if (!o)
		return -ENOENT;
	switch (o->type) {
	case MSGPACK_OBJECT_POSITIVE_INTEGER: *out = (double)o->via.u64; break;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER: *out = (double)o->via.i64; break;
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64: *out = o->via.f64; break;
	default: return bad_type(err, key, "a number");
	}
	if (!isfinite(*out))
		return bad_type(err, key, "a finite number");
	return 0;
}

int dsec_get_seconds(const msgpack_object *map, const char *key, double *out, struct dsec_err *err)
{
	double v;
	int rc = dsec_get_double(map, key, &v, err);

	if (rc < 0)
		return rc;
	if (v < 0 || v > 1e9)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "field '%s' must be seconds between 0 and 1e9", key);
	*out = v;
	return 0;
}

int dsec_get_bool(const msgpack_object *map, const char *key, bool *out, struct dsec_err *err)
{
	const msgpack_object *o = field(map, key);

	if (!o)
		return -ENOENT;
	if (o->type != MSGPACK_OBJECT_BOOLEAN)
		return bad_type(err, key, "a boolean");
	*out = o->via.boolean;
	return 0;
}

/* Checks one element of an argv array or env map. */
static int elem_ok(const msgpack_object *o, const char *key, const char *want,
		   struct dsec_err *err)
{
	if (o->type != MSGPACK_OBJECT_STR || memchr(o->via.str.ptr, '\0', o->via.str.size))
		return bad_type(err, key, want);
	if (o->via.str.size > DSEC_ARG_MAX)
		return dsec_err_setc(err, DSEC_E_TOO_LARGE, E2BIG,
				     "an element of field '%s' is longer than %u bytes", key,
				     DSEC_ARG_MAX);
	return 0;
}

int dsec_get_strv(const msgpack_object *map, const char *key, char ***out, struct dsec_err *err)
{
	const msgpack_object *o = field(map, key);

	if (!o)
		return -ENOENT;
	if (o->type != MSGPACK_OBJECT_ARRAY)
		return bad_type(err, key, "an array of strings");
	if (o->via.array.size > DSEC_ARGV_MAX)
		return dsec_err_setc(err, DSEC_E_TOO_LARGE, E2BIG,
				     "field '%s' has more than %d elements", key, DSEC_ARGV_MAX);
	for (uint32_t i = 0; i < o->via.array.size; i++) {
		int rc = elem_ok(&o->via.array.ptr[i], key, "an array of strings without NUL bytes", err);
		if (rc < 0)
			return rc;
	}
	char **v = xcalloc(o->via.array.size + 1, sizeof(char *));
	for (uint32_t i = 0; i < o->via.array.size; i++)
		v[i] = xstrndup(o->via.array.ptr[i].via.str.ptr, o->via.array.ptr[i].via.str.size);
	*out = v;
	return 0;
}

int dsec_get_env(const msgpack_object *map, const char *key, char ***out, struct dsec_err *err)
{
	const msgpack_object *o = field(map, key);

	if (!o)
		return -ENOENT;
	if (o->type != MSGPACK_OBJECT_MAP)
		return bad_type(err, key, "a map of strings to strings");
	if (o->via.map.size > DSEC_ARGV_MAX)
		return dsec_err_setc(err, DSEC_E_TOO_LARGE, E2BIG,
				     "field '%s' has more than %d entries", key, DSEC_ARGV_MAX);
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		const msgpack_object *k = &o->via.map.ptr[i].key, *v = &o->via.map.ptr[i].val;
		int rc;
		if ((rc = elem_ok(k, key, "a map of strings to strings", err)) < 0 ||
		    (rc = elem_ok(v, key, "a map of strings to strings", err)) < 0)
			return rc;
		if (k->via.str.size == 0 || memchr(k->via.str.ptr, '=', k->via.str.size))
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "field '%s' has a name that is empty or contains '='", key);
	}
	char **v = xcalloc(o->via.map.size + 1, sizeof(char *));
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		const msgpack_object *k = &o->via.map.ptr[i].key, *val = &o->via.map.ptr[i].val;
		v[i] = xasprintf("%.*s=%.*s", (int)k->via.str.size, k->via.str.ptr,
				 (int)val->via.str.size, val->via.str.ptr);
	}
	*out = v;
	return 0;
}

void dsec_pk_init(struct dsec_pk *p)
{
	msgpack_sbuffer_init(&p->sb);
	msgpack_packer_init(&p->pk, &p->sb, msgpack_sbuffer_write);
	p->depth = 0;
}

void dsec_pk_free(struct dsec_pk *p)
{
	msgpack_sbuffer_destroy(&p->sb);
}

void *dsec_pk_detach(struct dsec_pk *p, size_t *len)
{
	DSEC_ASSERT(p->depth == 0);
	*len = p->sb.size;
	void *d = msgpack_sbuffer_release(&p->sb);
	return d ? d : xmalloc(1);
}

/* n objects more in the innermost open counting container, if any. */
static inline void counted(struct dsec_pk *p, uint32_t n)
{
	if (p->depth)
		p->open[p->depth - 1].n += n;
}

/* The writers below without counting: the parts of one counted object. */
static void raw_strn(struct dsec_pk *p, const char *s, size_t n)
{
	msgpack_pack_str(&p->pk, n);
	msgpack_pack_str_body(&p->pk, s, n);
}

static void raw_str(struct dsec_pk *p, const char *s)
{
	if (!s)
		msgpack_pack_nil(&p->pk);
	else
		raw_strn(p, s, strlen(s));
}

static void raw_bin(struct dsec_pk *p, const void *d, size_t n)
{
	msgpack_pack_bin(&p->pk, n);
	msgpack_pack_bin_body(&p->pk, d, n);
}

static void raw_bool(struct dsec_pk *p, bool v)
{
	if (v)
		msgpack_pack_true(&p->pk);
	else
		msgpack_pack_false(&p->pk);
}

void dsec_pk_strn(struct dsec_pk *p, const char *s, size_t n)
{
	raw_strn(p, s, n);
	counted(p, 1);
}

void dsec_pk_str(struct dsec_pk *p, const char *s)
{
	raw_str(p, s);
	counted(p, 1);
}

void dsec_pk_object(struct dsec_pk *p, const msgpack_object *o)
{
	msgpack_pack_object(&p->pk, *o);
	counted(p, 1);
}

void dsec_pk_raw(struct dsec_pk *p, const void *obj, size_t n)
{
	msgpack_sbuffer_write(&p->sb, obj, n);
	counted(p, 1);
}

void dsec_pk_bin(struct dsec_pk *p, const void *d, size_t n)
{
	raw_bin(p, d, n);
	counted(p, 1);
}

void dsec_pk_nil(struct dsec_pk *p)
{
	msgpack_pack_nil(&p->pk);
	counted(p, 1);
}

void dsec_pk_kv_str(struct dsec_pk *p, const char *k, const char *v)
{
	raw_str(p, k);
	raw_str(p, v);
	counted(p, 2);
}

void dsec_pk_kv_bin(struct dsec_pk *p, const char *k, const void *d, size_t n)
{
	raw_str(p, k);
	raw_bin(p, d, n);
	counted(p, 2);
}

void dsec_pk_kv_u64(struct dsec_pk *p, const char *k, uint64_t v)
{
	raw_str(p, k);
	msgpack_pack_uint64(&p->pk, v);
	counted(p, 2);
}

void dsec_pk_kv_i64(struct dsec_pk *p, const char *k, int64_t v)
{
	raw_str(p, k);
	msgpack_pack_int64(&p->pk, v);
	counted(p, 2);
}

void dsec_pk_u64(struct dsec_pk *p, uint64_t v)
{
	msgpack_pack_uint64(&p->pk, v);
	counted(p, 1);
}

void dsec_pk_double(struct dsec_pk *p, double v)
{
	msgpack_pack_double(&p->pk, v);
	counted(p, 1);
}

void dsec_pk_kv_double(struct dsec_pk *p, const char *k, double v)
{
	raw_str(p, k);
	msgpack_pack_double(&p->pk, v);
	counted(p, 2);
}

void dsec_pk_kv_bool(struct dsec_pk *p, const char *k, bool v)
{
	raw_str(p, k);
	raw_bool(p, v);
	counted(p, 2);
}

void dsec_pk_kv_env(struct dsec_pk *p, const char *k, const char *const *env)
{
	size_t n = dsec_strv_len(env);

	raw_str(p, k);
	msgpack_pack_map(&p->pk, n);
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(env[i], '=');
		if (!eq) {
			raw_str(p, env[i]);
			raw_str(p, "");
		} else {
			raw_strn(p, env[i], (size_t)(eq - env[i]));
			raw_str(p, eq + 1);
		}
	}
	counted(p, 2);
}

void dsec_pk_kv_strv(struct dsec_pk *p, const char *k, const char *const *v)
{
	size_t n = dsec_strv_len(v);

	raw_str(p, k);
	msgpack_pack_array(&p->pk, n);
	for (size_t i = 0; i < n; i++)
		raw_str(p, v[i]);
	counted(p, 2);
}

/* Bodies up to this size are moved down to a one-byte header at the end. */
#define PK_SHRINK_MAX 4096

/* A map32 (0xdf) or array32 (0xdd) header with the count left for later. */
static void pk_open(struct dsec_pk *p, uint8_t type)
{
	uint8_t hdr[5] = { type, 0, 0, 0, 0 };

	counted(p, 1);
	DSEC_ASSERT(p->depth < DSEC_PK_DEPTH);
	p->open[p->depth].at = p->sb.size;
	p->open[p->depth].n = 0;
	p->depth++;
	msgpack_sbuffer_write(&p->sb, (const char *)hdr, sizeof(hdr));
}

void dsec_pk_map_begin(struct dsec_pk *p)
{
	pk_open(p, 0xdf);
}

void dsec_pk_array_begin(struct dsec_pk *p)
{
	pk_open(p, 0xdd);
}

/* Why patch and not count first: the count of a reply is what its code
 * writes, and code that writes it twice (once to count) drifts apart.  The
 * header was written with 4 bytes for the count; a small container (at
 * most 15 entries, a body of at most PK_SHRINK_MAX bytes) gets the fixmap
 * or fixarray byte instead and its body moves down 4 bytes, which costs a
 * copy of what is small anyway.  Containers opened after it are closed
 * already, so no open offset points into what moves. */
void dsec_pk_end(struct dsec_pk *p)
{
	DSEC_ASSERT(p->depth > 0);
	size_t at = p->open[--p->depth].at;
	uint32_t n = p->open[p->depth].n;
	uint8_t *h = (uint8_t *)p->sb.data + at;
	size_t body = p->sb.size - at - 5;

	if (h[0] == 0xdf) {
		DSEC_ASSERT(n % 2 == 0);
		n /= 2;
	}
	if (n <= 15 && body <= PK_SHRINK_MAX) {
		h[0] = (uint8_t)((h[0] == 0xdf ? 0x80 : 0x90) | n);
		memmove(h + 1, h + 5, body);
		p->sb.size -= 4;
		return;
	}
	h[1] = (uint8_t)(n >> 24);
	h[2] = (uint8_t)(n >> 16);
	h[3] = (uint8_t)(n >> 8);
	h[4] = (uint8_t)n;
}

void dsec_pk_request(struct dsec_pk *p, const char *op, size_t n_args)
{
	msgpack_pack_map(&p->pk, n_args + 2);
	dsec_pk_kv_u64(p, "v", 1);
	dsec_pk_kv_str(p, "op", op);
}

void dsec_pk_request_begin(struct dsec_pk *p, const char *op)
{
	dsec_pk_map_begin(p);
	dsec_pk_kv_u64(p, "v", 1);
	dsec_pk_kv_str(p, "op", op);
}

void dsec_pk_reply_ok(struct dsec_pk *p, size_t n)
{
	msgpack_pack_map(&p->pk, 2);
	dsec_pk_kv_bool(p, "ok", true);
	dsec_pk_str(p, "result");
	msgpack_pack_map(&p->pk, n);
}

void dsec_pk_reply_begin(struct dsec_pk *p)
{
	msgpack_pack_map(&p->pk, 2);
	dsec_pk_kv_bool(p, "ok", true);
	dsec_pk_str(p, "result");
	dsec_pk_map_begin(p);
}

void dsec_pk_reply_err(struct dsec_pk *p, const struct dsec_err *err)
{
	char msg[DSEC_ERR_MSG_MAX];

	/* Valid UTF-8 whoever wrote it (a client may decode it strictly). */
	dsec_utf8_clean(msg, sizeof(msg), err->msg, strnlen(err->msg, sizeof(err->msg)));
	msgpack_pack_map(&p->pk, 2);
	dsec_pk_kv_bool(p, "ok", false);
	dsec_pk_str(p, "error");
	msgpack_pack_map(&p->pk, 2);
	dsec_pk_kv_str(p, "code", dsec_code_name(err->code ? err->code : DSEC_E_INTERNAL));
	dsec_pk_kv_str(p, "message", msg[0] ? msg : "unknown error");
}
