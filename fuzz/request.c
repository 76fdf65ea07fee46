/* request.c - libFuzzer target: what dsecd does with a request frame.
 *
 * The input is one frame, handed to the daemon's own dsecd_handle() (the
 * real ops.c, sandbox.c, config.c and the rest of dsecd but main.c and
 * server.c) with a backend in this file that accepts every operation and
 * completes it from a queue this file runs, as a real backend completes
 * from the loop.  The node has one sandbox, "fz:0000000000000001", made
 * again whenever a frame destroys it, with one streamed command "x1"
 * whose stdout is /dev/zero.  Checked, besides what ASan and UBSan see:
 *   - every frame gets exactly one reply, a map dsec_msg_parse_n takes,
 *     whose error (if any) has a code that is an error and a message of
 *     valid UTF-8 within 511 bytes;
 *   - dsec_msg_parse agrees with msgpack-c: it takes the frame when
 *     msgpack-c decodes it to a map of at most DSEC_OBJ_MAX objects in
 *     as many bytes, and only then;
 *   - dsec_frame_op names the op dsec_map_get finds (the same bytes).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "log.h"
#include "proto.h"

#define NODE "fz"
#define SERIAL 1

struct dsecd *dsecd_global;		/* main.c's, which is not linked */
static struct dsecd daemon_state;	/* the node */
static unsigned replies;		/* replies to the frame being handled */

/* ---- the server: replies are checked and dropped ---- */

static bool utf8_valid(const char *s, size_t n)
{
	char copy[2 * DSEC_ERR_MSG_MAX];

	if (n >= sizeof(copy) / 2)
		return false;
	return dsec_utf8_clean(copy, sizeof(copy), s, n) == n && !memcmp(copy, s, n);
}

void dsecd_server_reply(struct dsecd_server *s, struct dsecd_conn *conn, void *data, size_t len)
{
	struct dsec_msg m;
	struct dsec_err err;
	bool ok;

	replies++;
	if (dsec_msg_parse_n(&m, data, len, SIZE_MAX, DSEC_OBJ_MAX + len / 3, &err) < 0)
		DSEC_BUG("dsecd sent a reply libdsec cannot read: %s", err.msg);
	if (dsec_get_bool(m.root, "ok", &ok, NULL) < 0)
		DSEC_BUG("reply without ok");
	if (!ok) {
		const msgpack_object *e = dsec_map_get(m.root, "error");
		const msgpack_object *code = dsec_map_get(e, "code");
		const msgpack_object *msg = dsec_map_get(e, "message");

		if (!code || code->type != MSGPACK_OBJECT_STR || !msg ||
		    msg->type != MSGPACK_OBJECT_STR)
			DSEC_BUG("error reply without a code or a message");
		enum dsec_code c = dsec_code_from_name(code->via.str.ptr, code->via.str.size);
		if (c == DSEC_E_OK || (c == DSEC_E_INTERNAL && code->via.str.size != 8))
			DSEC_BUG("error code '%.*s' is not one", (int)code->via.str.size,
				 code->via.str.ptr);
		if (msg->via.str.size >= DSEC_ERR_MSG_MAX ||
		    !utf8_valid(msg->via.str.ptr, msg->via.str.size))
			DSEC_BUG("error message is not UTF-8 within 511 bytes");
	}
	dsec_msg_free(&m);
	free(data);
}

unsigned dsecd_server_inflight(const struct dsecd_server *s)
{
	return 1;
}

/* ---- the backend: every operation completes from the queue ---- */

struct job {
	dsec_be_done_fn done;		/* its completion */
	void *arg;			/* its argument */
	int rc;				/* its result */
	struct job *next;		/* queue link */
};

struct fsb {
	struct fstream *streams;	/* commands started, done at destroy */
};

struct fstream {
	dsec_be_done_fn done;		/* its completion */
	void *arg;			/* its argument */
	struct fstream *next;		/* fsb->streams link */
};

static struct job *jobs, **jobs_tail = &jobs;

static void later(dsec_be_done_fn done, void *arg, int rc)
{
	struct job *j = xcalloc(1, sizeof(*j));

	j->done = done;
	j->arg = arg;
	j->rc = rc;
	*jobs_tail = j;
	jobs_tail = &j->next;
}

static void run_jobs(void)
{
	struct dsec_err err;

	while (jobs) {
		struct job *j = jobs;

		if (!(jobs = j->next))
			jobs_tail = &jobs;
		dsec_err_setc(&err, DSEC_E_BACKEND, EIO, "fake backend failed");
		j->done(j->arg, j->rc, j->rc < 0 ? &err : NULL);
		free(j);
	}
}

static int f_create(void *be, const struct dsec_be_spec *spec, void **sb, dsec_be_done_fn done,
		    void *arg, struct dsec_err *err)
{
	*sb = xcalloc(1, sizeof(struct fsb));
	later(done, arg, 0);
	return 0;
}

static int f_exec(void *sb, const struct dsec_exec_req *req, struct dsec_exec_res *res,
		  dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	if (req->argv && !strcmp(req->argv[0], "fail"))
		return dsec_err_setc(err, DSEC_E_BACKEND, EIO, "cannot run '%s': no", req->argv[0]);
	dsec_buf_add(&res->out, req->stdin_data, req->stdin_len);
	later(done, arg, 0);
	return 0;
}

static int f_file_read(void *sb, const char *path, uint64_t offset, uint64_t len,
		       struct dsec_buf *out, dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	dsec_buf_add(out, path, strlen(path));
	later(done, arg, 0);
	return 0;
}

static int f_switch(void *sb, dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	later(done, arg, 0);
	return 0;
}

static int f_destroy(void *sb, dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct fsb *s = sb;

	while (s->streams) {
		struct fstream *x = s->streams;

		s->streams = x->next;
		later(x->done, x->arg, -ECANCELED);
		free(x);
	}
	free(s);
	later(done, arg, 0);
	return 0;
}

static void f_stats(void *be, struct dsec_be_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->capacity = 100;
}

static int f_net_allow(void *sb, const char *const *allow, dsec_be_done_fn done, void *arg,
		       struct dsec_err *err)
{
	later(done, arg, 0);
	return 0;
}

static int f_file(void *sb, const struct dsec_file_req *req, struct dsec_file_res *res,
		  dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	if (req->op == DSEC_FILE_STAT) {
		res->info.name = xstrdup(req->path);
	} else if (req->op == DSEC_FILE_LIST) {
		res->nentries = 1;
		res->entries = xcalloc(1, sizeof(*res->entries));
		res->entries[0].name = xstrdup(req->path);
	}
	later(done, arg, 0);
	return 0;
}

static int f_session_open(void *sb, const struct dsec_session_spec *spec, char **name,
			  dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	*name = xstrdup(spec->name ? spec->name : "s1");
	later(done, arg, 0);
	return 0;
}

static int f_session_exec(void *sb, const char *name, const struct dsec_exec_req *req,
			  struct dsec_exec_res *xres, struct dsec_be_session_res *res,
			  dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	if (strcmp(name, "s1"))
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT, "no session '%s'", name);
	res->cwd = xstrdup("/");
	later(done, arg, 0);
	return 0;
}

static int f_session_close(void *sb, const char *name, dsec_be_done_fn done, void *arg,
			   struct dsec_err *err)
{
	later(done, arg, 0);
	return 0;
}

static void f_session_list(void *sb, void (*fn)(void *arg, const struct dsec_session_info *info),
			   void *arg)
{
	struct dsec_session_info i = { .name = "s1", .shell = "/bin/sh", .cwd = "/" };

	fn(arg, &i);
}

static int f_exec_start(void *sb, const struct dsec_exec_req *req,
			const struct dsec_exec_stream_opts *opts, struct dsec_exec_stream *st,
			struct dsec_exec_res *res, dsec_be_done_fn done, void *arg,
			struct dsec_err *err)
{
	struct fsb *s = sb;
	struct fstream *x = xcalloc(1, sizeof(*x));

	st->in_fd = -1;
	st->err_fd = -1;
	st->out_fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);	/* output at once, always */
	st->handle = x;
	x->done = done;
	x->arg = arg;
	x->next = s->streams;
	s->streams = x;
	return 0;
}

static int f_exec_signal(void *sb, void *handle, int sig, struct dsec_err *err)
{
	return 0;
}

static int f_exec_resize(void *sb, void *handle, uint16_t rows, uint16_t cols,
			 struct dsec_err *err)
{
	return 0;
}

static const struct dsec_be_ops fake_ops = {
	.abi_version = DSEC_BE_ABI,
	.struct_size = sizeof(struct dsec_be_ops),
	.name = "fake",
	.description = "completes everything from a queue",
	.create = f_create,
	.exec = f_exec,
	.file_read = f_file_read,
	.pause = f_switch,
	.resume = f_switch,
	.destroy = f_destroy,
	.stats = f_stats,
	.net_allow = f_net_allow,
	.file = f_file,
	.session_open = f_session_open,
	.session_exec = f_session_exec,
	.session_close = f_session_close,
	.session_list = f_session_list,
	.exec_start = f_exec_start,
	.exec_signal = f_exec_signal,
	.exec_resize = f_exec_resize,
	.spec_size = sizeof(struct dsec_be_spec),
};

static struct dsecd_backend fake_backend = { .name = "fake", .ops = &fake_ops };

/* ---- the node ---- */

static void handle(const void *frame, size_t len)
{
	struct dsecd *d = &daemon_state;

	replies = 0;
	dsecd_handle(d, (struct dsecd_conn *)d, frame, len);
	/* The backend's completions, and the loop for the stream's reads and
	 * the reapers, until the frame is answered (bounded). */
	for (int i = 0; i < 8 && (jobs || !replies); i++) {
		run_jobs();
		ev_run(d->loop, EVRUN_NOWAIT);
	}
	if (replies != 1)
		DSEC_BUG("a frame got %u replies", replies);
}

/* The sandbox every frame may name, and its stream "x1" while it lives. */
static void seed_sandbox(void)
{
	struct dsecd *d = &daemon_state;
	struct dsec_err err;
	static const char start[] = "\x84\xa1v\x01\xa2op\xaa" "exec_start\xa2id\xb3"
				    "fz:0000000000000001\xa4" "code\xa4true";

	if (dsecd_sb_find(d, NODE ":0000000000000001", &err))
		return;
	d->next_serial = SERIAL;
	struct dsecd_sb *sb = dsecd_sb_new(d, &fake_backend);
	sb->handle = xcalloc(1, sizeof(struct fsb));
	dsecd_sb_ready(d, sb);
	d->next_serial = 1000;
	handle(start, sizeof(start) - 1);
}

/* Every sandbox a frame made, destroyed, so the node stays small. */
static void destroy_extra(struct dsecd *d, struct dsecd_sb *sb, void *arg)
{
	if (sb->serial != SERIAL && sb->state == SB_READY)
		dsecd_sb_destroy(d, sb, "fuzz", NULL);
}

static void init(void)
{
	struct dsecd *d = &daemon_state;
	struct dsec_err err;
	char *argv[] = { "fuzz-request", "--config", "/dev/null", "--node", NODE,
			 "--state-dir", "/nonexistent", "--set", "max_frame=1M",
			 "--set", "output_cap=64K", NULL };
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

	dsec_log_set_level(DSEC_LOG_ERROR);
	dsec_log_set_fd(fd);
	if (dsecd_conf_load(&d->conf, 11, argv, &err) != 0)
		DSEC_BUG("config: %s", err.msg);
	d->loop = ev_loop_new(0);
	dsecd_global = d;
	dsecd_sb_table_init(d);
	d->backends = &fake_backend;
	free(d->conf.default_backend);
	d->conf.default_backend = xstrdup("fake");
	d->started = ev_now(d->loop);
	seed_sandbox();
}

/* Objects of a decoded msgpack-c object, itself included. */
static size_t count_objects(const msgpack_object *o)
{
	size_t n = 1;

	if (o->type == MSGPACK_OBJECT_ARRAY)
		for (uint32_t i = 0; i < o->via.array.size; i++)
			n += count_objects(&o->via.array.ptr[i]);
	else if (o->type == MSGPACK_OBJECT_MAP)
		for (uint32_t i = 0; i < o->via.map.size; i++)
			n += count_objects(&o->via.map.ptr[i].key) +
			     count_objects(&o->via.map.ptr[i].val);
	return n;
}

/* dsec_msg_parse against msgpack-c itself. */
static void differential(const uint8_t *data, size_t size)
{
	struct dsec_msg m;
	struct dsec_err err;
	msgpack_unpacked up;
	size_t off = 0;
	bool ours = dsec_msg_parse(&m, data, size, SIZE_MAX, &err) == 0;
	bool theirs = false;

	/* msgpack-c reserves what a container header claims: ask it only
	 * when no header claimed more than the bytes hold (both read the
	 * bytes in the same order, so it meets no header the walk did not). */
	msgpack_unpacked_init(&up);
	if (ours || !strstr(err.msg, "claims")) {
		theirs = msgpack_unpack_next(&up, (const char *)data, size, &off) ==
				 MSGPACK_UNPACK_SUCCESS && off == size &&
			 up.data.type == MSGPACK_OBJECT_MAP && count_objects(&up.data) <= DSEC_OBJ_MAX;
		if (ours != theirs)
			DSEC_BUG("dsec_msg_parse says %s, msgpack-c %s", ours ? "yes" : err.msg,
				 theirs ? "yes" : "no");
	}
	if (ours) {
		const msgpack_object *op = dsec_map_get(m.root, "op");
		bool want = op && op->type == MSGPACK_OBJECT_STR;
		const char *name;
		size_t nlen;

		if (dsec_frame_op(data, size, &name, &nlen) != want ||
		    (want && (nlen != op->via.str.size || memcmp(name, op->via.str.ptr, nlen))))
			DSEC_BUG("dsec_frame_op disagrees with dsec_map_get");
	}
	msgpack_unpacked_destroy(&up);
	dsec_msg_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;

	if (!ready) {
		init();
		ready = true;
	}
	differential(data, size);
	handle(data, size);
	dsecd_sb_foreach(&daemon_state, destroy_extra, NULL);
	for (int i = 0; i < 4 && jobs; i++) {
		run_jobs();
		ev_run(daemon_state.loop, EVRUN_NOWAIT);
	}
	seed_sandbox();
	return 0;
}
