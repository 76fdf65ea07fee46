/* 0006-client-fields - every typed call of libdsec against replies that
 * lack what its result always has, or carry a field of the wrong type: a
 * clear "internal" error naming the field, nothing handed out, never a
 * crash.  An nng REP socket in this process answers each request with a
 * crafted reply (fake-rep.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "dsec.h"
#include "fake-rep.h"

#define URL "inproc://t0006"

/* {ok: true, result: {}} */
static void empty_result(void)
{
	struct dsec_pk p;

	dsec_pk_init(&p);
	dsec_pk_reply_ok(&p, 0);
	answer(&p);
}

/* {ok: true, result: {key: 7}}: a number where the field is a string,
 * bytes, a list or a map. */
static void number_result(const char *key)
{
	struct dsec_pk p;

	dsec_pk_init(&p);
	dsec_pk_reply_ok(&p, 1);
	dsec_pk_kv_u64(&p, key, 7);
	answer(&p);
}

/* A failure as a bad reply: internal, a message that says so and names
 * what is wrong. */
static bool bad_reply(int rc, const struct dsec_err *err, const char *what)
{
	return rc < 0 && err->code == DSEC_E_INTERNAL && strstr(err->msg, "bad reply from") &&
	       strstr(err->msg, what);
}

int main(void)
{
	static const struct dsec_cmd q = { .code = "true" };
	struct dsec_client *c;
	struct dsec_err err;
	struct dsec_cmd_res res;
	struct dsec_session_cmd_res sres;
	struct dsec_file_desc fi, *files;
	struct dsec_sandbox_info si, *list;
	struct dsec_node_info info;
	struct dsec_buf buf;
	uint64_t removed;
	size_t n;
	bool trunc, done;
	char *s;
	int rc;

	plan(45);
	if (!fake_start(URL)) {
		printf("Bail out! cannot listen on " URL "\n");
		return 1;
	}
	dsec_err_clear(&err);
	if (dsec_connect(&c, URL, &err) < 0) {
		printf("Bail out! cannot connect: %s\n", err.msg);
		return 1;
	}
	dsec_buf_init(&buf);

	/* 1. An empty result: every call whose result has a field fails. */
	empty_result();
	s = (char *)"x";
	rc = dsec_create(c, NULL, &s, &err);
	ok(bad_reply(rc, &err, "'id'") && !s, "create without id: %s", err.msg);
	rc = dsec_exec(c, "n:1", &q, &res, &err);
	ok(bad_reply(rc, &err, "'exit_code'") && !res.out.data, "exec without exit_code: %s",
	   err.msg);
	rc = dsec_call(c, NULL, &q, &res, &err);
	ok(bad_reply(rc, &err, "call reply has no 'exit_code'"), "call without exit_code: %s",
	   err.msg);
	s = (char *)"x";
	rc = dsec_exec_start(c, "n:1", &q, NULL, &s, &err);
	ok(bad_reply(rc, &err, "'exec'") && !s, "exec_start without exec: %s", err.msg);
	rc = dsec_exec_read(c, "n:1", "e1", 0, &res, &done, &err);
	ok(bad_reply(rc, &err, "exec_read reply has no 'exit_code'"), "exec_read without exit_code: %s",
	   err.msg);
	s = (char *)"x";
	rc = dsec_session_open(c, "n:1", NULL, &s, &err);
	ok(bad_reply(rc, &err, "'session'") && !s, "session_open without session: %s", err.msg);
	rc = dsec_session_exec(c, "n:1", "s1", "true", 0, 0, &sres, &err);
	ok(bad_reply(rc, &err, "'exit_code'") && !sres.cwd, "session_exec without exit_code: %s",
	   err.msg);
	rc = dsec_file_read(c, "n:1", "/f", 0, 0, &buf, &err);
	ok(bad_reply(rc, &err, "file_read reply has no 'data'") && buf.len == 0,
	   "file_read without data: %s", err.msg);
	rc = dsec_file_download(c, "n:1", "/", NULL, &buf, &err);
	ok(bad_reply(rc, &err, "file_download reply has no 'data'") && buf.len == 0,
	   "file_download without data: %s", err.msg);
	rc = dsec_chunk_get(c, "chunk", "sha256:00", &buf, &err);
	ok(bad_reply(rc, &err, "chunk_get reply has no 'data'") && buf.len == 0,
	   "chunk_get without data: %s", err.msg);
	rc = dsec_file_remove(c, "n:1", "/f", false, &removed, &err);
	ok(bad_reply(rc, &err, "'removed'"), "file_remove without removed: %s", err.msg);
	rc = dsec_file_stat(c, "n:1", "/f", &fi, &err);
	ok(bad_reply(rc, &err, "'type'") && !fi.name, "file_stat without type: %s", err.msg);
	{
		char **ids = &s;
		struct dsec_watched *wv = (struct dsec_watched *)&s;
		struct dsec_marks mk = { .struct_size = sizeof(mk) };

		rc = dsec_fork(c, "n:1", 2, &ids, &err);
		ok(bad_reply(rc, &err, "'ids'") && !ids, "fork without ids: %s", err.msg);
		rc = dsec_watched(c, "n:1", &wv, &n, &err);
		ok(bad_reply(rc, &err, "'watched'") && !wv && !n, "watched without watched: %s",
		   err.msg);
		s = (char *)"x";
		rc = dsec_recover(c, "n:1", &s, NULL, &err);
		ok(bad_reply(rc, &err, "'id'") && !s, "recover without id: %s", err.msg);
		rc = dsec_marks(c, "n:1", &mk, &err);
		ok(bad_reply(rc, &err, "'misbehaviour'"), "usage without misbehaviour (marks): %s",
		   err.msg);
	}
	rc = dsec_file_list(c, "n:1", "/", 0, &files, &n, &trunc, &err);
	ok(bad_reply(rc, &err, "'entries'") && !files && !n, "file_list without entries: %s",
	   err.msg);
	s = (char *)"x";
	rc = dsec_snapshot(c, "n:1", "t:1", &s, &err);
	ok(bad_reply(rc, &err, "'image'") && !s, "snapshot without image: %s", err.msg);
	rc = dsec_info(c, &info, &err);
	ok(bad_reply(rc, &err, "'version'") && !info.version, "info without version: %s", err.msg);
	rc = dsec_sandbox_info(c, "n:1", &si, &err);
	ok(bad_reply(rc, &err, "'id'") && !si.id, "sandbox info without id: %s", err.msg);
	rc = dsec_list(c, &list, &n, &err);
	ok(bad_reply(rc, &err, "'sandboxes'") && !list && !n, "list without sandboxes: %s", err.msg);

	/* 2. ... and calls whose result has none succeed on it. */
	ok(dsec_ping(c, &err) == 0, "ping needs nothing in its result");
	ok(dsec_destroy(c, "n:1", &err) == 0 && dsec_pause(c, "n:1", &err) == 0 &&
	   dsec_resume(c, "n:1", &err) == 0 && dsec_net_allow(c, "n:1", NULL, &err) == 0,
	   "nor do destroy, pause, resume and net_allow");
	ok(dsec_file_write(c, "n:1", "/f", "x", 1, 0, &err) == 0 &&
	   dsec_file_mkdir(c, "n:1", "/d", 0, false, -1, -1, &err) == 0 &&
	   dsec_file_upload(c, "n:1", "/d", "", 0, NULL, -1, -1, &err) == 0,
	   "nor file_write, file_mkdir and file_upload");
	ok(dsec_session_close(c, "n:1", "s1", &err) == 0 &&
	   dsec_exec_write(c, "n:1", "e1", "x", 1, false, &err) == 0 &&
	   dsec_exec_signal(c, "n:1", "e1", 15, &err) == 0 &&
	   dsec_exec_resize(c, "n:1", "e1", 24, 80, &err) == 0,
	   "nor session_close, exec_write, exec_signal and exec_resize");

	{
		struct dsec_usage u = { .have = 7 };

		ok(dsec_usage(c, "n:1", &u, &err) == 0 && u.have == 0 && u.cpu_ns == 0,
		   "usage with nothing measured: none of its fields is there");
	}

	/* 3. Fields of the wrong type. */
	number_result("id");
	rc = dsec_create(c, NULL, &s, &err);
	ok(bad_reply(rc, &err, "'id'"), "create with a number for id: %s", err.msg);
	number_result("data");
	rc = dsec_file_read(c, "n:1", "/f", 0, 0, &buf, &err);
	ok(bad_reply(rc, &err, "'data'") && buf.len == 0, "file_read with a number for data");
	number_result("entries");
	rc = dsec_file_list(c, "n:1", "/", 0, &files, &n, &trunc, &err);
	ok(bad_reply(rc, &err, "not a list") && !files, "file_list with a number for entries: %s",
	   err.msg);
	{
		struct dsec_pk p;
		struct dsec_usage u;

		dsec_pk_init(&p);
		dsec_pk_reply_ok(&p, 2);
		dsec_pk_kv_u64(&p, "pids", 3);
		dsec_pk_kv_str(&p, "memory", "lots");
		answer(&p);
		rc = dsec_usage(c, "n:1", &u, &err);
		ok(bad_reply(rc, &err, "'memory'") && u.have == 0 && u.pids == 0,
		   "usage with a string for memory: %s", err.msg);
	}
	number_result("sandboxes");
	rc = dsec_list(c, &list, &n, &err);
	ok(bad_reply(rc, &err, "not a list") && !list, "list with a number for sandboxes");
	{
		static const char pad[256];	/* room for the entries' bound */
		struct dsec_pk p;

		dsec_pk_init(&p);
		dsec_pk_reply_ok(&p, 2);
		dsec_pk_kv_str(&p, "exit_code", "0");
		dsec_pk_kv_bin(&p, "stdout", "hi", 2);
		answer(&p);
		rc = dsec_exec(c, "n:1", &q, &res, &err);
		ok(bad_reply(rc, &err, "'exit_code'") && !res.out.data,
		   "exec with a string for exit_code: %s", err.msg);

		dsec_pk_init(&p);
		dsec_pk_reply_ok(&p, 3);
		dsec_pk_kv_i64(&p, "exit_code", 0);
		dsec_pk_kv_bin(&p, "stdout", "hi", 2);
		dsec_pk_kv_str(&p, "duration", "long");
		answer(&p);
		rc = dsec_exec(c, "n:1", &q, &res, &err);
		ok(bad_reply(rc, &err, "field 'duration' of the exec reply has the wrong type") &&
		   !res.out.data, "exec with a string for duration: %s", err.msg);

		dsec_pk_init(&p);
		dsec_pk_reply_ok(&p, 2);
		dsec_pk_kv_i64(&p, "exit_code", 0);
		dsec_pk_kv_u64(&p, "cwd", 1);
		answer(&p);
		rc = dsec_session_exec(c, "n:1", "s1", "true", 0, 0, &sres, &err);
		ok(bad_reply(rc, &err, "'cwd'") && !sres.cwd, "session_exec with a number for cwd: %s",
		   err.msg);

		/* A list whose entries are not maps, or lack what they always have. */
		dsec_pk_init(&p);
		dsec_pk_reply_ok(&p, 2);
		dsec_pk_str(&p, "sandboxes");
		msgpack_pack_array(&p.pk, 2);
		msgpack_pack_map(&p.pk, 3);
		dsec_pk_kv_str(&p, "id", "n:1");
		dsec_pk_kv_str(&p, "backend", "test");
		dsec_pk_kv_str(&p, "state", "running");
		msgpack_pack_nil(&p.pk);
		dsec_pk_kv_bin(&p, "pad", pad, sizeof(pad));
		answer(&p);
		rc = dsec_list(c, &list, &n, &err);
		ok(bad_reply(rc, &err, "entry 1 of 'sandboxes'") && !list && !n,
		   "list with a nil entry: %s", err.msg);

		dsec_pk_init(&p);
		dsec_pk_reply_ok(&p, 2);
		dsec_pk_str(&p, "entries");
		msgpack_pack_array(&p.pk, 1);
		msgpack_pack_map(&p.pk, 1);
		dsec_pk_kv_str(&p, "type", "file");
		dsec_pk_kv_bin(&p, "pad", pad, sizeof(pad));
		answer(&p);
		rc = dsec_file_list(c, "n:1", "/", 0, &files, &n, &trunc, &err);
		ok(bad_reply(rc, &err, "'name'") && !files && !n, "a file entry without a name: %s",
		   err.msg);

		dsec_pk_init(&p);
		msgpack_pack_map(&p.pk, 2);
		dsec_pk_kv_bool(&p, "ok", true);
		dsec_pk_str(&p, "result");
		msgpack_pack_map(&p.pk, 2);
		dsec_pk_kv_str(&p, "name", "f");
		dsec_pk_kv_str(&p, "type", "teleporter");
		answer(&p);
		rc = dsec_file_stat(c, "n:1", "/f", &fi, &err);
		ok(bad_reply(rc, &err, "unknown file type 'teleporter'") && !fi.name,
		   "a file type nobody knows: %s", err.msg);

		dsec_pk_init(&p);
		dsec_pk_reply_ok(&p, 3);
		dsec_pk_kv_str(&p, "version", "0.1.0");
		dsec_pk_kv_str(&p, "node", "n");
		dsec_pk_str(&p, "backends");
		msgpack_pack_array(&p.pk, 1);
		msgpack_pack_map(&p.pk, 1);
		dsec_pk_kv_u64(&p, "capacity", 1);
		answer(&p);
		rc = dsec_info(c, &info, &err);
		ok(bad_reply(rc, &err, "'name'") && !info.backends && !info.version,
		   "info with a backend without a name: %s", err.msg);

		/* The fields past the first ones are checked as well. */
		dsec_pk_init(&p);
		dsec_pk_reply_ok(&p, 3);
		dsec_pk_kv_str(&p, "version", "0.1.0");
		dsec_pk_kv_str(&p, "node", "n");
		dsec_pk_kv_u64(&p, "limits", 7);
		answer(&p);
		rc = dsec_info(c, &info, &err);
		ok(bad_reply(rc, &err, "'limits'") && !info.version && !info.listen,
		   "info with limits that are not a map: %s", err.msg);
		dsec_pk_init(&p);
		dsec_pk_reply_ok(&p, 4);
		dsec_pk_kv_str(&p, "id", "n:1");
		dsec_pk_kv_str(&p, "backend", "test");
		dsec_pk_kv_str(&p, "state", "running");
		dsec_pk_kv_u64(&p, "labels", 7);
		answer(&p);
		rc = dsec_sandbox_info(c, "n:1", &si, &err);
		ok(bad_reply(rc, &err, "'labels'") && !si.id && !si.labels,
		   "sandbox info with labels that are not a map: %s", err.msg);

		/* A result that is complete still reads. */
		dsec_pk_init(&p);
		msgpack_pack_map(&p.pk, 2);
		dsec_pk_kv_bool(&p, "ok", true);
		dsec_pk_str(&p, "result");
		msgpack_pack_map(&p.pk, 3);
		dsec_pk_kv_str(&p, "name", "l");
		dsec_pk_kv_str(&p, "type", "symlink");
		dsec_pk_kv_str(&p, "target", "/etc");
		answer(&p);
		rc = dsec_file_stat(c, "n:1", "/l", &fi, &err);
		ok(rc == 0 && fi.type == DSEC_KIND_SYMLINK && !strcmp(fi.target, "/etc"),
		   "a stat result with name and type reads");
		if (rc == 0)
			dsec_file_desc_free(&fi);
		dsec_pk_init(&p);
		dsec_pk_reply_ok(&p, 1);
		dsec_pk_kv_u64(&p, "removed", 3);
		answer(&p);
		ok(dsec_file_remove(c, "n:1", "/d", true, &removed, &err) == 0 && removed == 3,
		   "a remove result reads");
	}

	/* 4. The reply check the asynchronous API offers says the same. */
	{
		struct dsec_pk p;
		void *frame;
		size_t len;

		dsec_pk_init(&p);
		dsec_pk_reply_ok(&p, 0);
		frame = dsec_pk_detach(&p, &len);
		ok(dsec_reply_check(c, frame, len, &err) == 0, "dsec_reply_check: an ok reply");
		free(frame);
		ok(dsec_reply_check(c, "\x81\xa2ok\xc2", 5, &err) < 0 &&
		   err.code == DSEC_E_INTERNAL && strstr(err.msg, "without a code"),
		   "... an error without a code: %s", err.msg);
		ok(dsec_reply_check(c, "\x91\x01", 2, &err) < 0 && err.code == DSEC_E_INTERNAL,
		   "... not a map: %s", err.msg);
	}

	dsec_buf_free(&buf);
	dsec_close(c);
	fake_stop();
	return done_testing();
}
