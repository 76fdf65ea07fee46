/* run-traj.c - dsec-run trajectory and dsec-run replay: provenance and replay of a rollout.
 *
 * `dsec-run trajectory SANDBOX` prints the sandbox's trajectory log
 * (dsec-protocol(7), ROLLOUTS) as JSON lines, one an entry, in order: seq,
 * step, op, hash, t, dur_us, code, the request and the reply as JSON (a
 * bin that is UTF-8 text becomes a string, another {"hex": ...}), and
 * "msgpack": the request's exact bytes in hex, which replay sends again.
 *
 * `dsec-run replay FILE` reads such lines (- = stdin), makes a fresh
 * sandbox with the first entry's create, sends every later request to it
 * in order, its id put in and its step left out, and compares each reply
 * with the one logged: a command's exit status, signal, timeout, stdout
 * and stderr, a read's data, and for any other op whether it succeeded
 * and its error code.  It reports the first entry whose result differs
 * and exits 1, or 0 when every one is the same; 125 when it could not
 * replay.  A stream (exec_start) is started again where it was, and read
 * to its end where the log has its end (an exec_read entry): its outputs
 * and status compared so; its input (exec_write), signals and terminal
 * size, logged in between, are sent to the new one.  Snapshots are not
 * sent again.
 *
 * `dsec-run recover SANDBOX` asks the node (one of the log's two peers)
 * to make a dead node's sandbox again from its copy of the log (the
 * protocol's recover) and prints its report as a JSON line: the new id,
 * the entries read and sent again, those skipped and those whose result
 * differs; exit 0 when all was recovered, 1 when something was not.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "dsec.h"
#include "proto.h"
#include "run-batch.h"
#include "util.h"

#define EXIT_INFRA 125

static json_t *to_json(const msgpack_object *o);

static json_t *bytes_json(const char *p, size_t n)
{
	json_t *s = json_stringn(p, n);	/* NULL when not UTF-8 */
	if (s)
		return s;
	char *hx = xmalloc(2 * n + 1);
	for (size_t i = 0; i < n; i++)
		snprintf(hx + 2 * i, 3, "%02x", (unsigned char)p[i]);
	json_t *j = json_pack("{s:s}", "hex", hx);
	free(hx);
	return j;
}

static json_t *to_json(const msgpack_object *o)
{
	switch (o->type) {
	case MSGPACK_OBJECT_NIL:
		return json_null();
	case MSGPACK_OBJECT_BOOLEAN:
		return json_boolean(o->via.boolean);
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		return json_integer(o->via.u64 > INT64_MAX ? INT64_MAX : (json_int_t)o->via.u64);
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		return json_integer(o->via.i64);
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64:
		return json_real(o->via.f64);
	case MSGPACK_OBJECT_STR:
		return bytes_json(o->via.str.ptr, o->via.str.size);
	case MSGPACK_OBJECT_BIN:
		return bytes_json(o->via.bin.ptr, o->via.bin.size);
	case MSGPACK_OBJECT_ARRAY: {
		json_t *a = json_array();
		for (uint32_t i = 0; i < o->via.array.size; i++)
			json_array_append_new(a, to_json(&o->via.array.ptr[i]));
		return a;
	}
	case MSGPACK_OBJECT_MAP: {
		json_t *m = json_object();
		for (uint32_t i = 0; i < o->via.map.size; i++) {
			const msgpack_object *k = &o->via.map.ptr[i].key;
			char key[256];
			if (k->type != MSGPACK_OBJECT_STR)
				continue;
			snprintf(key, sizeof(key), "%.*s", (int)k->via.str.size, k->via.str.ptr);
			json_object_set_new(m, key, to_json(&o->via.map.ptr[i].val));
		}
		return m;
	}
	default:
		return json_null();
	}
}

static char *hex_of(const char *p, size_t n)
{
	char *hx = xmalloc(2 * n + 1);
	for (size_t i = 0; i < n; i++)
		snprintf(hx + 2 * i, 3, "%02x", (unsigned char)p[i]);
	hx[2 * n] = '\0';
	return hx;
}

/* One request, its reply parsed into m (the caller frees both); -1 with
 * a message on stderr. */
static int call(struct dsec_client *c, struct dsec_pk *p, struct dsec_msg *m, void **reply)
{
	struct dsec_err err;
	size_t len;

	dsec_err_clear(&err);
	if (dsec_raw(c, p->sb.data, p->sb.size, reply, &len, &err) < 0 ||
	    dsec_msg_parse_n(m, *reply, len, SIZE_MAX, SIZE_MAX, &err) < 0) {
		fprintf(stderr, "dsec-run: %s (%s)\n", err.msg, dsec_code_name(err.code));
		return -1;
	}
	return 0;
}

/* Whether reply m is ok; its error's message on stderr when not. */
static bool reply_ok(const struct dsec_msg *m)
{
	const msgpack_object *ok = dsec_map_get(m->root, "ok");
	const msgpack_object *er, *msg;

	if (ok && ok->type == MSGPACK_OBJECT_BOOLEAN && ok->via.boolean)
		return true;
	er = dsec_map_get(m->root, "error");
	msg = er ? dsec_map_get(er, "message") : NULL;
	fprintf(stderr, "dsec-run: %.*s\n", msg && msg->type == MSGPACK_OBJECT_STR
		? (int)msg->via.str.size : 5, msg && msg->type == MSGPACK_OBJECT_STR
		? msg->via.str.ptr : "error");
	return false;
}

static int trajectory(struct dsec_client *c, const char *id)
{
	uint64_t from = 0;

	for (;;) {
		struct dsec_pk p;
		struct dsec_msg m = { 0 };
		void *reply = NULL;
		const msgpack_object *res, *ents, *next, *end, *e;

		dsec_pk_init(&p);
		dsec_pk_request_begin(&p, "trajectory");
		dsec_pk_kv_str(&p, "id", id);
		dsec_pk_kv_u64(&p, "from", from);
		dsec_pk_end(&p);
		int rc = call(c, &p, &m, &reply);
		dsec_pk_free(&p);
		if (rc < 0) {
			free(reply);
			return EXIT_INFRA;
		}
		if (!reply_ok(&m)) {
			dsec_msg_free(&m);
			free(reply);
			return EXIT_INFRA;
		}
		res = dsec_map_get(m.root, "result");
		ents = res ? dsec_map_get(res, "entries") : NULL;
		next = res ? dsec_map_get(res, "next") : NULL;
		end = res ? dsec_map_get(res, "end") : NULL;
		for (uint32_t i = 0; ents && ents->type == MSGPACK_OBJECT_ARRAY &&
		     i < ents->via.array.size; i++) {
			e = &ents->via.array.ptr[i];
			json_t *j = to_json(e);
			const msgpack_object *rq = dsec_map_get(e, "request");
			if (rq) {
				/* The request's own bytes, for replay. */
				msgpack_sbuffer sb;
				msgpack_packer pk;
				msgpack_sbuffer_init(&sb);
				msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
				msgpack_pack_object(&pk, *rq);
				char *hx = hex_of(sb.data, sb.size);
				json_object_set_new(j, "msgpack", json_string(hx));
				free(hx);
				msgpack_sbuffer_destroy(&sb);
			}
			char *line = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
			puts(line ? line : "{}");
			free(line);
			json_decref(j);
		}
		bool done = !end || end->type != MSGPACK_OBJECT_BOOLEAN || end->via.boolean ||
			    !next || next->type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
			    next->via.u64 <= from;
		if (!done)
			from = next->via.u64;
		dsec_msg_free(&m);
		free(reply);
		if (done)
			return fflush(stdout) == 0 ? 0 : EXIT_INFRA;
	}
}

/* ---- recover ------------------------------------------------------------- */

/* recover's report as one JSON line; 0 when nothing was skipped and no
 * step differs, 1 when something could not be recovered. */
static int recover(struct dsec_client *c, const char *id)
{
	struct dsec_pk p;
	struct dsec_msg m = { 0 };
	void *reply = NULL;
	const msgpack_object *res, *s, *d;
	int rc;

	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "recover");
	dsec_pk_kv_str(&p, "id", id);
	dsec_pk_end(&p);
	rc = call(c, &p, &m, &reply);
	dsec_pk_free(&p);
	if (rc < 0 || !reply_ok(&m) || !(res = dsec_map_get(m.root, "result"))) {
		dsec_msg_free(&m);
		free(reply);
		return EXIT_INFRA;
	}
	json_t *j = to_json(res);
	char *line = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
	puts(line ? line : "{}");
	free(line);
	json_decref(j);
	s = dsec_map_get(res, "skipped");
	d = dsec_map_get(res, "differs");
	rc = (s && s->type == MSGPACK_OBJECT_ARRAY && s->via.array.size) ||
	     (d && d->type == MSGPACK_OBJECT_ARRAY && d->via.array.size);
	dsec_msg_free(&m);
	free(reply);
	return fflush(stdout) == 0 ? rc : EXIT_INFRA;
}

/* ---- replay ------------------------------------------------------------- */

static int unhex(const char *s, struct dsec_buf *out)
{
	size_t n = strlen(s);

	if (n % 2)
		return -1;
	for (size_t i = 0; i < n; i += 2) {
		unsigned v;
		if (sscanf(s + i, "%2x", &v) != 1)
			return -1;
		char ch = (char)v;
		dsec_buf_add(out, &ch, 1);
	}
	return 0;
}

/* The request of msgpack bytes b, "id" set to id (NULL: none) and the
 * fields skip names left out, into p.  A create of a recovered sandbox,
 * made of its snapshot's image (creation_image says the create's), is
 * the create's again: of creation_image, without snapshot_steps. */
static int rebuild(const struct dsec_buf *b, const char *id, const char *const *skip,
		   const char *exec, struct dsec_pk *p)
{
	static const char *const recovered[] = { "image", "creation_image", "snapshot_steps" };
	const msgpack_object *ci;
	struct dsec_msg m = { 0 };
	struct dsec_err err;

	dsec_err_clear(&err);
	if (dsec_msg_parse(&m, b->data, b->len, SIZE_MAX, &err) < 0) {
		dsec_msg_free(&m);
		return -1;
	}
	ci = id ? NULL : dsec_map_get(m.root, "creation_image");
	if (ci && ci->type != MSGPACK_OBJECT_STR)
		ci = NULL;
	dsec_pk_init(p);
	dsec_pk_map_begin(p);
	for (uint32_t i = 0; i < m.root->via.map.size; i++) {
		const msgpack_object *k = &m.root->via.map.ptr[i].key;
		bool drop = k->type == MSGPACK_OBJECT_STR && k->via.str.size == 2 &&
			    !memcmp(k->via.str.ptr, "id", 2);
		drop |= exec && k->type == MSGPACK_OBJECT_STR && k->via.str.size == 4 &&
			!memcmp(k->via.str.ptr, "exec", 4);
		for (size_t s = 0; skip[s] && !drop; s++)
			drop = k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(skip[s]) &&
			       !memcmp(k->via.str.ptr, skip[s], k->via.str.size);
		for (size_t s = 0; ci && s < DSEC_ARRAY_LEN(recovered) && !drop; s++)
			drop = k->type == MSGPACK_OBJECT_STR &&
			       k->via.str.size == strlen(recovered[s]) &&
			       !memcmp(k->via.str.ptr, recovered[s], k->via.str.size);
		if (drop)
			continue;
		dsec_pk_object(p, k);
		dsec_pk_object(p, &m.root->via.map.ptr[i].val);
	}
	if (ci) {
		dsec_pk_str(p, "image");
		dsec_pk_strn(p, ci->via.str.ptr, ci->via.str.size);
	}
	if (id)
		dsec_pk_kv_str(p, "id", id);
	if (exec)
		dsec_pk_kv_str(p, "exec", exec);
	dsec_pk_end(p);
	dsec_msg_free(&m);
	return 0;
}

/* What of a reply replay compares, as text. */
static char *outcome(json_t *reply, const char *op)
{
	json_t *ok = json_object_get(reply, "ok");
	json_t *res = json_object_get(reply, "result");
	json_t *pick = json_object();

	if (!json_is_true(ok)) {
		json_t *e = json_object_get(reply, "error");
		json_object_set(pick, "code", json_object_get(e, "code"));
	} else if (!strcmp(op, "exec") || !strcmp(op, "session_exec")) {
		static const char *const keys[] = { "exit_code", "signal", "timed_out", "stdout",
						    "stderr" };
		for (size_t i = 0; i < DSEC_ARRAY_LEN(keys); i++)
			if (json_object_get(res, keys[i]))
				json_object_set(pick, keys[i], json_object_get(res, keys[i]));
	} else if (!strcmp(op, "file_read")) {
		json_object_set(pick, "data", json_object_get(res, "data"));
	} else {
		json_object_set_new(pick, "ok", json_true());
	}
	char *s = json_dumps(pick, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(pick);
	return s;
}

/* A logged stream replay started again: its logged name and the new
 * one's (NULL: not sent again, its end and input are not sent either). */
struct rstream {
	char *logged, *now;
};

/* e's reply's result's string key, or NULL. */
static const char *res_str(json_t *e, const char *key)
{
	return json_string_value(json_object_get(json_object_get(json_object_get(e, "reply"),
								  "result"), key));
}

/* Bytes of an output as the trajectory shows it (a string, or {"hex"}). */
static size_t json_bytes(json_t *v)
{
	if (json_is_string(v))
		return json_string_length(v);
	return json_is_object(v) ? json_string_length(json_object_get(v, "hex")) / 2 : 0;
}

/* A stream started again: read to its end on the new sandbox id, as the
 * reply of its logged end (exec_read's fields, outputs cut where the
 * logged ones were when those say truncated); NULL with a message. */
static json_t *stream_end(struct dsec_client *c, const char *id, const char *exec, json_t *logged)
{
	struct dsec_buf out[2] = { { 0 }, { 0 } };
	json_t *res = json_object_get(json_object_get(logged, "reply"), "result"), *got = NULL;
	static const char *const outs[] = { "stdout", "stderr" };

	/* Killed when it runs longer than twice as long as logged, and 10 s:
	 * it does not end as it did. */
	json_int_t us = json_integer_value(json_object_get(logged, "dur_us"));
	uint64_t until = dsec_now_ns() + 2 * (uint64_t)(us > 0 ? us : 0) * 1000 + 10000000000ull;
	bool killed = false;

	for (;;) {
		struct dsec_pk p;
		struct dsec_msg m = { 0 };
		void *reply = NULL;
		const msgpack_object *r, *done;

		if (!killed && dsec_now_ns() > until) {
			struct dsec_err err;

			dsec_err_clear(&err);
			killed = true;
			dsec_exec_signal(c, id, exec, SIGKILL, &err);
		}
		dsec_pk_init(&p);
		dsec_pk_request_begin(&p, "exec_read");
		dsec_pk_kv_str(&p, "id", id);
		dsec_pk_kv_str(&p, "exec", exec);
		dsec_pk_kv_double(&p, "wait", 10);
		dsec_pk_end(&p);
		int rc = call(c, &p, &m, &reply);
		dsec_pk_free(&p);
		if (rc == 0 && !(r = dsec_map_get(m.root, "result"))) {
			/* An error: that is what is compared. */
			got = to_json(m.root);
		} else if (rc == 0) {
			for (int i = 0; i < 2; i++) {
				const msgpack_object *o = dsec_map_get(r, outs[i]);
				if (o && o->type == MSGPACK_OBJECT_BIN)
					dsec_buf_add(&out[i], o->via.bin.ptr, o->via.bin.size);
			}
			done = dsec_map_get(r, "done");
			if (done && done->type == MSGPACK_OBJECT_BOOLEAN && done->via.boolean) {
				got = to_json(m.root);
				json_t *gr = json_object_get(got, "result");
				for (int i = 0; i < 2; i++) {
					size_t n = out[i].len;
					if (json_is_true(json_object_get(res, i ? "stderr_truncated" :
									 "stdout_truncated")) &&
					    json_bytes(json_object_get(res, outs[i])) < n)
						n = json_bytes(json_object_get(res, outs[i]));
					json_object_set_new(gr, outs[i], bytes_json(out[i].data ?
						out[i].data : "", n));
				}
			}
		}
		dsec_msg_free(&m);
		free(reply);
		if (rc < 0 || got)
			break;
	}
	dsec_buf_free(&out[0]);
	dsec_buf_free(&out[1]);
	return got;
}

/* An op on a started stream (its input, a signal, its terminal's size)? */
static bool stream_op(const char *op)
{
	return !strcmp(op, "exec_write") || !strcmp(op, "exec_signal") ||
	       !strcmp(op, "exec_resize");
}

/* The name now of the stream the logged request rq names: NULL when its
 * start was not sent again (*known) or the log has no start of it. */
static const char *stream_now(const struct rstream *st, size_t nst, json_t *rq, bool *known)
{
	const char *x = json_string_value(json_object_get(rq, "exec"));

	*known = false;
	for (size_t k = nst; x && k-- > 0;)
		if (!strcmp(st[k].logged, x)) {
			*known = true;
			return st[k].now;
		}
	return NULL;
}

/* call(), and for an op on a stream again while the daemon says busy (the
 * command has not read the input before: replay writes faster than the
 * trainer did), up to 30 s. */
static int call_again(struct dsec_client *c, struct dsec_pk *p, struct dsec_msg *m, void **reply,
		      bool busy_retry)
{
	for (int ms = 0;; ms += 10) {
		if (call(c, p, m, reply) < 0)
			return -1;
		const msgpack_object *er = dsec_map_get(m->root, "error");
		const msgpack_object *code = er ? dsec_map_get(er, "code") : NULL;
		if (!busy_retry || ms >= 30000 || !code || code->type != MSGPACK_OBJECT_STR ||
		    code->via.str.size != 4 || memcmp(code->via.str.ptr, "busy", 4))
			return 0;
		dsec_msg_free(m);
		free(*reply);
		*reply = NULL;
		nanosleep(&(struct timespec){ .tv_nsec = 10000000 }, NULL);
	}
}

static int replay(struct dsec_client *c, const char *path)
{
	static const char *const create_skip[] = { "token", "lease", "trajectory", "fwd",
						   "step", NULL };
	/* (logged_reply, stream_step: a recover's import, node to node: here
	 * the request runs again) */
	static const char *const op_skip[] = { "step", "fwd", "logged_reply", "stream_step", NULL };
	FILE *f = strcmp(path, "-") ? fopen(path, "re") : stdin;
	char *line = NULL, *id = NULL;
	size_t cap = 0, n = 0, same = 0, skipped = 0, nst = 0;
	struct rstream *st = NULL;
	int status = 0;

	if (!f) {
		fprintf(stderr, "dsec-run: cannot open '%s': %s\n", path, strerror(errno));
		return EXIT_INFRA;
	}
	while (getline(&line, &cap, f) > 0 && status == 0) {
		json_error_t je;
		json_t *e = json_loads(line, 0, &je);
		const char *op = json_string_value(json_object_get(e, "op"));
		const char *hx = json_string_value(json_object_get(e, "msgpack"));
		const char *cmp = op;	/* how its result is compared */
		struct dsec_buf b = { 0 };
		struct dsec_pk p;
		struct dsec_msg m = { 0 };
		void *reply = NULL;
		json_t *got = NULL, *rq = json_object_get(e, "request");
		const char *x = NULL;	/* the stream an op on one names now */
		bool known = false;

		n++;
		if (!e || !op || !hx || unhex(hx, &b) < 0) {
			fprintf(stderr, "dsec-run: line %zu is not an entry of `dsec-run trajectory`\n",
				n);
			status = EXIT_INFRA;
		} else if (!id && strcmp(op, "create")) {
			fprintf(stderr, "dsec-run: the first entry is %s, not the create\n", op);
			status = EXIT_INFRA;
		} else if (!strcmp(op, "create")) {
			if (id) {
				skipped++;
			} else if (rebuild(&b, NULL, create_skip, NULL, &p) < 0 ||
				   call(c, &p, &m, &reply) < 0) {
				status = EXIT_INFRA;
			} else {
				const msgpack_object *res = dsec_map_get(m.root, "result");
				if (!res || dsec_get_str(res, "id", &id, NULL) < 0) {
					fprintf(stderr, "dsec-run: the create failed\n");
					status = EXIT_INFRA;
				} else {
					printf("replaying in a fresh sandbox %s\n", id);
				}
				dsec_pk_free(&p);
			}
		} else if (!strcmp(op, "snapshot")) {
			skipped++;
		} else if (!strcmp(op, "exec_start") && !res_str(e, "exec")) {
			skipped++;
		} else if (!strcmp(op, "exec_read")) {
			/* A stream's end: the stream started again is read to its end. */
			if (!(x = stream_now(st, nst, rq, &known)))
				skipped++;
			else if (!(got = stream_end(c, id, x, e)))
				status = EXIT_INFRA;
			cmp = "exec";
		} else if (stream_op(op) && !(x = stream_now(st, nst, rq, &known)) && known) {
			skipped++;	/* its stream was not started again */
		} else if (rebuild(&b, id, op_skip, x, &p) < 0 ||
			   call_again(c, &p, &m, &reply, stream_op(op)) < 0) {
			status = EXIT_INFRA;
		} else {
			got = to_json(m.root);
			dsec_pk_free(&p);
			const char *now = json_string_value(json_object_get(json_object_get(got,
									"result"), "exec"));
			if (!strcmp(op, "exec_start") && now && res_str(e, "exec")) {
				st = xrealloc(st, (nst + 1) * sizeof(*st));
				st[nst++] = (struct rstream){ xstrdup(res_str(e, "exec")), xstrdup(now) };
			}
		}
		if (got) {
			char *a = outcome(json_object_get(e, "reply"), cmp), *g = outcome(got, cmp);
			json_t *step = json_object_get(e, "step");
			if (a && g && !strcmp(a, g)) {
				same++;
			} else {
				char sn[32] = "none";
				if (json_is_integer(step))
					snprintf(sn, sizeof(sn), "%lld",
						 (long long)json_integer_value(step));
				printf("entry %lld (step %s, %s) differs:\n  logged: %s\n  now:    %s\n",
				       (long long)json_integer_value(json_object_get(e, "seq")), sn, op,
				       a ? a : "?", g ? g : "?");
				status = 1;
			}
			free(a);
			free(g);
			json_decref(got);
		}
		dsec_msg_free(&m);
		free(reply);
		dsec_buf_free(&b);
		json_decref(e);
	}
	if (status == 0 && !id) {
		fprintf(stderr, "dsec-run: %s has no entry of `dsec-run trajectory`: nothing to "
			"replay\n", strcmp(path, "-") ? path : "standard input");
		status = EXIT_INFRA;
	}
	if (status == 0)
		printf("%zu entries replayed, every result the same%s\n", same,
		       skipped ? " (snapshots, and streams that did not start, not sent "
		       "again)" : "");
	if (id) {
		struct dsec_err err;
		dsec_err_clear(&err);
		dsec_destroy(c, id, &err);
	}
	for (size_t k = 0; k < nst; k++) {
		free(st[k].logged);
		free(st[k].now);
	}
	free(st);
	free(id);
	free(line);
	if (f != stdin)
		fclose(f);
	return status;
}

int dsec_run_traj(int argc, char **argv)
{
	const char *url = getenv("DSEC_HOST");
	struct dsec_client *c = NULL;
	struct dsec_err err;
	int ch, rc;
	bool is_replay;
	static const struct option opts[] = {
		{ .name = "host", .has_arg = required_argument, .val = 'H' },
		{ 0 }
	};

	/* dsec-run [-H ADDR] SUB ...: the subcommand first. */
	if (argv[1][0] == '-') {
		url = argv[2];
		argv += 2;
		argc -= 2;
	}
	is_replay = !strcmp(argv[1], "replay");
	bool is_recover = !strcmp(argv[1], "recover");
	optind = 2;
	while ((ch = getopt_long(argc, argv, "+H:", opts, NULL)) != -1) {
		if (ch != 'H') {
			fprintf(stderr, "usage: dsec-run [-H ADDR] trajectory SANDBOX\n"
					"       dsec-run [-H ADDR] replay FILE\n"
					"       dsec-run [-H ADDR] recover SANDBOX\n");
			return 2;
		}
		url = optarg;
	}
	if (optind != argc - 1) {
		fprintf(stderr, "dsec-run: %s takes one %s\n", argv[1],
			is_replay ? "file (- = stdin)" : "sandbox id");
		return 2;
	}
	dsec_err_clear(&err);
	if (dsec_connect(&c, url && *url ? url : DSEC_DEFAULT_URL, &err) < 0) {
		fprintf(stderr, "dsec-run: %s (%s)\n", err.msg, dsec_code_name(err.code));
		return EXIT_INFRA;
	}
	rc = is_replay ? replay(c, argv[optind]) : is_recover ? recover(c, argv[optind])
		: trajectory(c, argv[optind]);
	dsec_close(c);
	return rc;
}
