/* 0020-proto-builder - maps and arrays that count their own entries
 * (dsec_pk_map_begin/dsec_pk_end) and the optional-field getters. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "proto.h"

/* The bytes of p, decoded; both must free. */
static bool decode(struct dsec_pk *p, msgpack_unpacked *up, char **bytes, size_t *len)
{
	size_t off = 0;

	*bytes = dsec_pk_detach(p, len);
	msgpack_unpacked_init(up);
	return msgpack_unpack_next(up, *bytes, *len, &off) == MSGPACK_UNPACK_SUCCESS && off == *len;
}

/* Do the two packers hold the same object?  *same_bytes: byte for byte too. */
static bool same(struct dsec_pk *a, struct dsec_pk *b, bool *same_bytes)
{
	msgpack_unpacked ua, ub;
	char *da, *db;
	size_t la, lb;
	bool da_ok = decode(a, &ua, &da, &la);	/* both, whatever the first gives */
	bool db_ok = decode(b, &ub, &db, &lb);
	bool ok = da_ok && db_ok && msgpack_object_equal(ua.data, ub.data);

	*same_bytes = la == lb && !memcmp(da, db, la);
	msgpack_unpacked_destroy(&ua);
	msgpack_unpacked_destroy(&ub);
	free(da);
	free(db);
	return ok;
}

/* An exec result both ways: the builder's bytes are the old ones. */
static void exec_reply(void)
{
	struct dsec_pk a, b;
	bool bytes;

	dsec_pk_init(&a);
	dsec_pk_reply_begin(&a);
	dsec_pk_kv_i64(&a, "exit_code", -1);
	dsec_pk_kv_u64(&a, "signal", 9);
	dsec_pk_kv_bool(&a, "timed_out", true);
	dsec_pk_kv_bin(&a, "stdout", "hi\n", 3);
	dsec_pk_kv_bin(&a, "stderr", "", 0);
	dsec_pk_kv_double(&a, "duration", 0.25);
	dsec_pk_kv_str(&a, "cwd", "/root");
	dsec_pk_end(&a);

	dsec_pk_init(&b);
	dsec_pk_reply_ok(&b, 7);
	dsec_pk_kv_i64(&b, "exit_code", -1);
	dsec_pk_kv_u64(&b, "signal", 9);
	dsec_pk_kv_bool(&b, "timed_out", true);
	dsec_pk_kv_bin(&b, "stdout", "hi\n", 3);
	dsec_pk_kv_bin(&b, "stderr", "", 0);
	dsec_pk_kv_double(&b, "duration", 0.25);
	dsec_pk_kv_str(&b, "cwd", "/root");
	ok(same(&a, &b, &bytes), "a counted reply decodes to the map counted by hand");
	ok(bytes, "a small one is the same bytes");

	dsec_pk_init(&a);
	dsec_pk_reply_begin(&a);
	dsec_pk_end(&a);
	dsec_pk_init(&b);
	dsec_pk_reply_ok(&b, 0);
	ok(same(&a, &b, &bytes) && bytes, "an empty result is {ok: true, result: {}}");
}

/* Maps in arrays in maps, empty ones, env and strv values, nil. */
static void nested(void)
{
	const char *env[] = { "A=1", "B=x=y", NULL };
	const char *argv[] = { "sh", "-c", "true", NULL };
	struct dsec_pk a, b;
	bool bytes;

	dsec_pk_init(&a);
	dsec_pk_reply_begin(&a);
	dsec_pk_kv_str(&a, "id", "n:1");
	dsec_pk_str(&a, "list");
	dsec_pk_array_begin(&a);
	for (int i = 0; i < 3; i++) {
		dsec_pk_map_begin(&a);
		dsec_pk_kv_u64(&a, "i", (uint64_t)i);
		dsec_pk_str(&a, "inner");
		dsec_pk_map_begin(&a);
		if (i == 1)
			dsec_pk_kv_str(&a, "one", "yes");
		dsec_pk_end(&a);
		dsec_pk_end(&a);
	}
	dsec_pk_end(&a);
	dsec_pk_str(&a, "none");
	dsec_pk_array_begin(&a);
	dsec_pk_end(&a);
	dsec_pk_kv_env(&a, "env", env);
	dsec_pk_kv_strv(&a, "argv", argv);
	dsec_pk_str(&a, "nothing");
	dsec_pk_nil(&a);
	dsec_pk_end(&a);

	dsec_pk_init(&b);
	dsec_pk_reply_ok(&b, 6);
	dsec_pk_kv_str(&b, "id", "n:1");
	dsec_pk_str(&b, "list");
	msgpack_pack_array(&b.pk, 3);
	for (int i = 0; i < 3; i++) {
		msgpack_pack_map(&b.pk, 2);
		dsec_pk_kv_u64(&b, "i", (uint64_t)i);
		dsec_pk_str(&b, "inner");
		msgpack_pack_map(&b.pk, i == 1);
		if (i == 1)
			dsec_pk_kv_str(&b, "one", "yes");
	}
	dsec_pk_str(&b, "none");
	msgpack_pack_array(&b.pk, 0);
	dsec_pk_kv_env(&b, "env", env);
	dsec_pk_kv_strv(&b, "argv", argv);
	dsec_pk_str(&b, "nothing");
	msgpack_pack_nil(&b.pk);
	ok(same(&a, &b, &bytes), "nested maps and arrays decode to the same map");
	ok(bytes, "and are the same bytes");

	/* Eight deep, the most there is room for. */
	dsec_pk_init(&a);
	dsec_pk_init(&b);
	for (int i = 0; i < DSEC_PK_DEPTH; i++) {
		dsec_pk_map_begin(&a);
		dsec_pk_str(&a, "d");
		msgpack_pack_map(&b.pk, 1);
		dsec_pk_str(&b, "d");
	}
	dsec_pk_str(&a, "bottom");
	dsec_pk_str(&b, "bottom");
	for (int i = 0; i < DSEC_PK_DEPTH; i++)
		dsec_pk_end(&a);
	ok(same(&a, &b, &bytes) && bytes, "%d maps deep", DSEC_PK_DEPTH);
}

/* Counts past a fixmap, bodies past the size moved down: map32 headers. */
static void large(void)
{
	static char blob[10000];
	struct dsec_pk a, b;
	msgpack_unpacked up;
	char *bytes_a, key[16];
	size_t len;
	bool bytes;

	dsec_pk_init(&a);
	dsec_pk_init(&b);
	dsec_pk_map_begin(&a);
	msgpack_pack_map(&b.pk, 20);
	for (int i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		dsec_pk_kv_u64(&a, key, (uint64_t)i);
		dsec_pk_kv_u64(&b, key, (uint64_t)i);
	}
	dsec_pk_end(&a);
	ok(same(&a, &b, &bytes), "a map of 20 entries decodes to the same map");

	memset(blob, 'x', sizeof(blob));
	dsec_pk_init(&a);
	dsec_pk_init(&b);
	dsec_pk_reply_begin(&a);
	dsec_pk_kv_bin(&a, "stdout", blob, sizeof(blob));
	dsec_pk_kv_bool(&a, "done", false);
	dsec_pk_end(&a);
	dsec_pk_reply_ok(&b, 2);
	dsec_pk_kv_bin(&b, "stdout", blob, sizeof(blob));
	dsec_pk_kv_bool(&b, "done", false);
	ok(same(&a, &b, &bytes), "a result of 10000 bytes of output decodes to the same map");
	ok(!bytes, "its count is in a map32 header (nothing moved)");

	dsec_pk_init(&a);
	dsec_pk_array_begin(&a);
	for (int i = 0; i < 70000; i++) {
		dsec_pk_map_begin(&a);
		dsec_pk_kv_u64(&a, "i", (uint64_t)i);
		dsec_pk_end(&a);
	}
	dsec_pk_end(&a);
	ok(decode(&a, &up, &bytes_a, &len) && up.data.type == MSGPACK_OBJECT_ARRAY &&
	   up.data.via.array.size == 70000 &&
	   up.data.via.array.ptr[69999].via.map.ptr[0].val.via.u64 == 69999,
	   "an array of 70000 maps counts them all");
	msgpack_unpacked_destroy(&up);
	free(bytes_a);
}

static void request(void)
{
	struct dsec_pk a, b;
	bool bytes;

	dsec_pk_init(&a);
	dsec_pk_request_begin(&a, "exec");
	dsec_pk_kv_str(&a, "id", "n:1");
	dsec_pk_kv_double(&a, "timeout", 2);
	dsec_pk_end(&a);
	dsec_pk_init(&b);
	dsec_pk_request(&b, "exec", 2);
	dsec_pk_kv_str(&b, "id", "n:1");
	dsec_pk_kv_double(&b, "timeout", 2);
	ok(same(&a, &b, &bytes) && bytes, "a counted request is the request counted by hand");
}

static void getters(void)
{
	struct dsec_pk p;
	struct dsec_msg m;
	struct dsec_err err;
	void *frame;
	size_t len;
	char *s = NULL;
	uint64_t u = 7;
	double x = 1.5;
	bool b = false;
	char **v = NULL;

	dsec_pk_init(&p);
	dsec_pk_map_begin(&p);
	dsec_pk_kv_str(&p, "s", "text");
	dsec_pk_kv_u64(&p, "u", 42);
	dsec_pk_kv_bool(&p, "b", true);
	dsec_pk_kv_str(&p, "nil", NULL);
	dsec_pk_end(&p);
	frame = dsec_pk_detach(&p, &len);
	ok(dsec_msg_parse(&m, frame, len, 1 << 20, &err) == 0, "a counted map parses");
	is_int(dsec_get_str_opt(m.root, "s", &s, &err), 0, "present str: 0");
	is_str(s, "text", "and its value");
	is_int(dsec_get_u64_opt(m.root, "absent", &u, &err), 0, "absent u64: 0");
	is_int(u, 7, "and the default stays");
	is_int(dsec_get_seconds_opt(m.root, "nil", &x, &err), 0, "nil counts as absent");
	ok(x == 1.5, "and the default stays");
	is_int(dsec_get_bool_opt(m.root, "b", &b, &err), 0, "present bool: 0");
	ok(b, "and its value");
	is_int(dsec_get_strv_opt(m.root, "s", &v, &err), -EINVAL, "a str where an array goes: -EINVAL");
	is_str(dsec_code_name(err.code), "bad_request", "with bad_request");
	ok(!v, "and nothing out");
	is_int(dsec_get_u64_opt(m.root, "u", &u, &err), 0, "present u64: 0");
	is_int(u, 42, "and its value");
	free(s);
	dsec_msg_free(&m);
	free(frame);
}

int main(void)
{
	plan(25);
	exec_reply();
	nested();
	large();
	request();
	getters();
	return done_testing();
}
