/* 0004-client-replies - libdsec against a hostile daemon: an nng REP socket
 * in this process answers each request with a crafted reply.  Replies that
 * would decode to many times their size are refused without the memory
 * (this process's own peak RSS and address space are measured), an error
 * reply whose code is not an error is a protocol error, and arguments the
 * daemon would refuse are refused before anything is sent. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "dsec.h"
#include "fake-rep.h"

#define URL "inproc://t0004"
#define FRAME (16u << 20)

/* VmHWM or VmPeak of this process in bytes. */
static long long status_kb(const char *key)
{
	char line[256];
	long long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key)))
			v = atoll(line + strlen(key) + 1) << 10;
	if (f)
		fclose(f);
	return v;
}

/* Resets the peak RSS to the current one where the kernel lets us
 * (clear_refs 5), so a measure counts only what comes after. */
static void hwm_reset(void)
{
	FILE *f = fopen("/proc/self/clear_refs", "w");

	if (f) {
		fputs("5", f);
		fclose(f);
	}
}

/* {"ok": true, "result": {KEY: [n nils]}, "pad": bin of pad bytes} */
static void nils_reply(const char *key, size_t n, size_t pad)
{
	struct dsec_pk p;
	char *zero = xcalloc(1, pad ? pad : 1);

	dsec_pk_init(&p);
	msgpack_pack_map(&p.pk, 3);
	dsec_pk_kv_bool(&p, "ok", true);
	dsec_pk_str(&p, "result");
	msgpack_pack_map(&p.pk, 1);
	dsec_pk_str(&p, key);
	msgpack_pack_array(&p.pk, n);
	for (size_t i = 0; i < n; i++)
		msgpack_pack_nil(&p.pk);
	dsec_pk_kv_bin(&p, "pad", zero, pad);
	free(zero);
	answer(&p);
}

static void error_reply(const char *code, const char *msg)
{
	struct dsec_pk p;

	dsec_pk_init(&p);
	msgpack_pack_map(&p.pk, 2);
	dsec_pk_kv_bool(&p, "ok", false);
	dsec_pk_str(&p, "error");
	msgpack_pack_map(&p.pk, (code != NULL) + 1);
	if (code)
		dsec_pk_kv_str(&p, "code", code);
	dsec_pk_kv_str(&p, "message", msg);
	answer(&p);
}

static void raw_reply(const void *d, size_t n)
{
	pthread_mutex_lock(&mu);
	free(reply);
	reply = xmemdup(d, n);
	reply_len = n;
	pthread_mutex_unlock(&mu);
}

/* Valid UTF-8 (a checker of its own, not the library's). */
static bool utf8_ok(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;

	while (*s) {
		int k = *s < 0x80 ? 0 : *s >= 0xc2 && *s <= 0xdf ? 1 : *s >= 0xe0 && *s <= 0xef ? 2
			: *s >= 0xf0 && *s <= 0xf4 ? 3 : -1;
		if (k < 0)
			return false;
		for (int i = 1; i <= k; i++)
			if ((s[i] & 0xc0) != 0x80)
				return false;
		s += k + 1;
	}
	return true;
}

int main(void)
{
	struct dsec_client *c;
	struct dsec_err err;
	struct dsec_sandbox_info *list;
	struct dsec_node_info info;
	struct dsec_file_desc *files;
	struct dsec_cmd_res res;
	long long base, grew;
	size_t n;
	bool trunc;
	char *id = NULL;
	int rc;

	plan(27);
	if (!fake_start(URL)) {
		printf("Bail out! cannot listen on " URL "\n");
		return 1;
	}
	dsec_err_clear(&err);
	ok(dsec_connect(&c, URL, &err) == 0, "connect to the fake daemon");

	/* 1. 16 MiB of nils: 24 times that once decoded. */
	nils_reply("x", FRAME - 64, 0);
	hwm_reset();
	base = status_kb("VmHWM");
	rc = dsec_ping(c, &err);
	grew = status_kb("VmHWM") - base;
	ok(rc < 0 && err.code == DSEC_E_INTERNAL, "a ping reply of 16 MiB of nils is refused (%s)",
	   err.msg);
	ok(strstr(err.msg, "objects") != NULL, "... for the objects it holds");
	ok(grew < 3ll * FRAME, "... and peak RSS grew by %lld MiB only (decoded: 384 MiB)", grew >> 20);

	/* 2. The same in a reply that carries a list: a looser bound, still
	 * far from 24 times. */
	hwm_reset();
	base = status_kb("VmHWM");
	rc = dsec_list(c, &list, &n, &err);
	grew = status_kb("VmHWM") - base;
	ok(rc < 0 && err.code == DSEC_E_INTERNAL, "a list reply of 16 MiB of nils is refused (%s)",
	   err.msg);
	ok(grew < 3ll * FRAME, "... peak RSS grew by %lld MiB only", grew >> 20);

	/* 3. Entries that decode small but each become a struct and five
	 * strings: 4M nil entries padded to 16 MiB. */
	nils_reply("sandboxes", 4u << 20, 12u << 20);
	hwm_reset();
	base = status_kb("VmHWM");
	rc = dsec_list(c, &list, &n, &err);
	grew = status_kb("VmHWM") - base;
	ok(rc < 0 && strstr(err.msg, "cannot fit"), "4M empty sandbox entries in 16 MiB are refused (%s)",
	   err.msg);
	ok(grew < 10ll * FRAME, "... peak RSS grew by %lld MiB (unpacked: more than 1 GiB)",
	   grew >> 20);
	nils_reply("entries", 1u << 20, 12u << 20);
	rc = dsec_file_list(c, "n:1", "/", 0, &files, &n, &trunc, &err);
	ok(rc < 0 && strstr(err.msg, "cannot fit"), "and so are 1M empty file entries (%s)", err.msg);
	nils_reply("backends", 1u << 20, 12u << 20);
	ok(dsec_info(c, &info, &err) < 0 && strstr(err.msg, "cannot fit"),
	   "and 1M empty backends in info");
	dsec_node_info_free(&info);

	/* 4. A map32 header claiming 200M entries, in 5 bytes. */
	const char bomb[] = "\x82\xa2ok\xc3\xa6result\xdf\x0c\x00\x00\x00";
	raw_reply(bomb, sizeof(bomb) - 1);
	base = status_kb("VmPeak");
	rc = dsec_ping(c, &err);
	grew = status_kb("VmPeak") - base;
	ok(rc < 0 && err.code == DSEC_E_INTERNAL, "a map32 header claiming 200M entries is refused (%s)",
	   err.msg);
	ok(grew < (1ll << 30), "... without reserving its 9 GiB (address space grew by %lld MiB)",
	   grew >> 20);

	/* 5. Lists of a legitimate size still decode. */
	{
		struct dsec_pk p;

		dsec_pk_init(&p);
		dsec_pk_reply_ok(&p, 1);
		dsec_pk_str(&p, "sandboxes");
		msgpack_pack_array(&p.pk, 3000);
		for (int i = 0; i < 3000; i++) {
			char sid[32];

			snprintf(sid, sizeof(sid), "n:%016x", i);
			msgpack_pack_map(&p.pk, 12);
			dsec_pk_kv_str(&p, "id", sid);
			dsec_pk_kv_str(&p, "backend", "container");
			dsec_pk_kv_str(&p, "runtime", "");
			dsec_pk_kv_str(&p, "image", "");
			dsec_pk_kv_str(&p, "state", "running");
			dsec_pk_kv_double(&p, "created", 1.7e9);
			dsec_pk_kv_double(&p, "ttl", 0);
			dsec_pk_kv_double(&p, "idle_ttl", 0);
			dsec_pk_kv_double(&p, "idle", 1);
			dsec_pk_kv_u64(&p, "execs", 1);
			dsec_pk_kv_u64(&p, "running", 0);
			dsec_pk_kv_u64(&p, "streams", 0);
		}
		answer(&p);
		rc = dsec_list(c, &list, &n, &err);
		ok(rc == 0 && n == 3000 && !strcmp(list[2999].id, "n:0000000000000bb7"),
		   "a list of 3000 sandboxes decodes (%s)", rc ? err.msg : "ok");
		if (rc == 0)
			dsec_sandbox_list_free(list, n);
	}

	/* 6. Error replies whose code is not an error. */
	error_reply("ok", "all is well");
	rc = dsec_ping(c, &err);
	ok(rc < 0 && err.code == DSEC_E_INTERNAL, "an error reply with code 'ok' fails as internal");
	ok(strstr(err.msg, "bad reply") && strstr(err.msg, "'ok'") && strstr(err.msg, "all is well"),
	   "... named a bad reply, with the daemon's message: %s", err.msg);
	error_reply("frobnicated", "something new");
	rc = dsec_ping(c, &err);
	ok(rc < 0 && err.code == DSEC_E_INTERNAL && strstr(err.msg, "unknown error code 'frobnicated'"),
	   "an unknown code is named: %s", err.msg);
	error_reply(NULL, "no code at all");
	rc = dsec_ping(c, &err);
	ok(rc < 0 && err.code == DSEC_E_INTERNAL && strstr(err.msg, "without a code"),
	   "an error without a code: %s", err.msg);
	error_reply("not_found", "no sandbox 'n:1'");
	rc = dsec_ping(c, &err);
	ok(rc < 0 && err.code == DSEC_E_NOT_FOUND && !strcmp(err.msg, "no sandbox 'n:1'"),
	   "a real error keeps its code and message");
	error_reply("invalid", "bad \xff\xfe bytes \xe2\x82");
	rc = dsec_ping(c, &err);
	ok(rc < 0 && err.code == DSEC_E_INVALID && utf8_ok(err.msg) && strstr(err.msg, "\xef\xbf\xbd"),
	   "a message that is not UTF-8 is made valid (bad bytes marked): %s", err.msg);

	/* 7. Arguments the daemon would refuse never become defaults. */
	{
		struct dsec_create_opts o = { .ttl = -5 };
		struct dsec_cmd q = { .code = "true", .timeout = -1 };
		unsigned before = seen();

		rc = dsec_create(c, &o, &id, &err);
		ok(rc < 0 && err.code == DSEC_E_INVALID && strstr(err.msg, "ttl"),
		   "a negative ttl is invalid: %s", err.msg);
		o.ttl = 0;
		o.idle_ttl = -1;
		rc = dsec_create(c, &o, &id, &err);
		ok(rc < 0 && err.code == DSEC_E_INVALID && strstr(err.msg, "idle_ttl"),
		   "a negative idle_ttl is invalid: %s", err.msg);
		o.idle_ttl = 0;
		o.ttl = 0.0 / 0.0;
		rc = dsec_create(c, &o, &id, &err);
		ok(rc < 0 && err.code == DSEC_E_INVALID, "a NaN ttl is invalid");
		o.ttl = 0;
		rc = dsec_call(c, &o, &q, &res, &err);
		ok(rc < 0 && err.code == DSEC_E_INVALID && strstr(err.msg, "timeout"),
		   "a negative command timeout is invalid: %s", err.msg);
		rc = dsec_exec(c, "n:1", &q, &res, &err);
		ok(rc < 0 && err.code == DSEC_E_INVALID, "... in exec too");
		is_int(seen(), before, "none of them was sent");
	}

	/* 8. Results missing what the call returns (found by fuzz/reply:
	 * exec_start dereferenced a NULL default). */
	{
		struct dsec_pk p;
		struct dsec_cmd q = { .code = "true" };
		char *x = NULL;

		dsec_pk_init(&p);
		dsec_pk_reply_ok(&p, 0);
		answer(&p);
		rc = dsec_exec_start(c, "n:1", &q, NULL, &x, &err);
		ok(rc < 0 && err.code == DSEC_E_INTERNAL && !x, "an exec_start reply without 'exec' is "
		   "a protocol error: %s", err.msg);
	}

	/* 9. A good exec reply still reads. */
	{
		struct dsec_pk p;
		struct dsec_cmd q = { .code = "echo hi" };

		dsec_pk_init(&p);
		dsec_pk_reply_ok(&p, 3);
		dsec_pk_kv_i64(&p, "exit_code", 3);
		dsec_pk_kv_bin(&p, "stdout", "hi\n", 3);
		dsec_pk_kv_bin(&p, "stderr", "", 0);
		answer(&p);
		rc = dsec_exec(c, "n:1", &q, &res, &err);
		ok(rc == 0 && res.exit_code == 3 && res.out.len == 3, "a normal exec reply reads");
		if (rc == 0)
			dsec_cmd_res_free(&res);
	}

	dsec_close(c);
	fake_stop();
	free(id);
	return done_testing();
}
