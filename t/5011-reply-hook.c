/* 5011-reply-hook - dsecd's one completion path and its reply hook.
 *
 * Links dsecd's own objects (but main.c and server.c: this file is the
 * server, replies land in dsecd_server_reply below) with a backend that
 * completes every operation from a zero timer, as a real backend completes
 * from the loop.  A reply hook that holds replies until the loop's next
 * ev_prepare, as the trajectory log will (batch per loop iteration, then
 * release), must hold every reply it is given, let none out before it
 * releases them, and release them in order; without a hook replies leave
 * at once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "daemon.h"
#include "log.h"
#include "ops.h"
#include "proto.h"

struct dsecd *dsecd_global;		/* main.c's, which is not linked */
static struct dsecd node;		/* the daemon */

/* ---- the server: replies are kept, in order ---- */

#define MAX_REPLIES 16

static struct {
	struct dsecd_conn *conn;	/* whose */
	void *data;			/* the reply */
	size_t len;			/* its bytes */
} replies[MAX_REPLIES];
static unsigned nreplies;		/* replies sent */

void dsecd_server_reply(struct dsecd_server *s, struct dsecd_conn *conn, void *data, size_t len)
{
	if (nreplies == MAX_REPLIES)
		DSEC_BUG("too many replies");
	replies[nreplies].conn = conn;
	replies[nreplies].data = data;
	replies[nreplies].len = len;
	nreplies++;
}

unsigned dsecd_server_inflight(const struct dsecd_server *s)
{
	return 0;
}

/* Reply i's result map field key as a string (or "" when it has none),
 * and whether it is ok. */
static bool reply_ok(unsigned i, const char *key, char *out, size_t outlen)
{
	struct dsec_msg m;
	struct dsec_err err;
	bool ok = false;
	const msgpack_object *v;

	out[0] = '\0';
	if (i >= nreplies || dsec_msg_parse_n(&m, replies[i].data, replies[i].len, SIZE_MAX,
					      DSEC_OBJ_MAX, &err) < 0)
		return false;
	dsec_get_bool(m.root, "ok", &ok, NULL);
	v = dsec_map_get(dsec_map_get(m.root, ok ? "result" : "error"), key);
	if (v && v->type == MSGPACK_OBJECT_STR)
		snprintf(out, outlen, "%.*s", (int)v->via.str.size, v->via.str.ptr);
	else if (v && v->type == MSGPACK_OBJECT_BIN)
		snprintf(out, outlen, "%.*s", (int)v->via.bin.size, v->via.bin.ptr);
	dsec_msg_free(&m);
	return ok;
}

/* ---- the backend: completions from a zero timer ---- */

struct job {
	dsec_be_done_fn done;		/* its completion */
	void *arg;			/* its argument */
	struct job *next;		/* queue link */
};

static struct job *jobs, **jobs_tail = &jobs;
static ev_timer jobs_timer;		/* runs them on the loop */

static void jobs_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct job *q = jobs;

	jobs = NULL;
	jobs_tail = &jobs;
	while (q) {
		struct job *j = q;

		q = j->next;
		j->done(j->arg, 0, NULL);
		free(j);
	}
}

static void later(dsec_be_done_fn done, void *arg)
{
	struct job *j = xcalloc(1, sizeof(*j));

	j->done = done;
	j->arg = arg;
	*jobs_tail = j;
	jobs_tail = &j->next;
	if (!ev_is_active(&jobs_timer)) {
		ev_timer_set(&jobs_timer, 0, 0);
		ev_timer_start(node.loop, &jobs_timer);
	}
}

static int f_create(void *be, const struct dsec_be_spec *spec, void **sb, dsec_be_done_fn done,
		    void *arg, struct dsec_err *err)
{
	*sb = xstrdup("fake sandbox");
	later(done, arg);
	return 0;
}

/* Its output is its stdin. */
static int f_exec(void *sb, const struct dsec_exec_req *req, struct dsec_exec_res *res,
		  dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	dsec_buf_add(&res->out, req->stdin_data, req->stdin_len);
	later(done, arg);
	return 0;
}

static int f_destroy(void *sb, dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	free(sb);
	later(done, arg);
	return 0;
}

static void f_stats(void *be, struct dsec_be_stats *out)
{
	memset(out, 0, sizeof(*out));
}

static const struct dsec_be_ops fake_ops = {
	.abi_version = DSEC_BE_ABI,
	.struct_size = sizeof(struct dsec_be_ops),
	.name = "fake",
	.description = "completes everything from a zero timer",
	.create = f_create,
	.exec = f_exec,
	.destroy = f_destroy,
	.stats = f_stats,
	.spec_size = sizeof(struct dsec_be_spec),
};

static struct dsecd_backend fake_backend = { .name = "fake", .ops = &fake_ops };

/* ---- the hook: holds replies until the next ev_prepare ---- */

static bool hold_all;			/* every reply, or only those of sandbox ops */
static struct dsecd_req *held[MAX_REPLIES];	/* held, in order */
static unsigned nheld;			/* how many now */
static unsigned holds;			/* replies held since start */
static unsigned sent_while_held;	/* replies sent while some were held */
static unsigned sent_at_hold;		/* nreplies when the first of a batch was held */
static ev_prepare flush;		/* releases the batch */

static void flush_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	/* Where the trajectory log fsyncs its batch (on the pool) and
	 * releases the replies once that is done. */
	if (nreplies != sent_at_hold)
		sent_while_held++;
	for (unsigned i = 0; i < nheld; i++)
		dsecd_req_release(held[i]);
	nheld = 0;
	ev_prepare_stop(loop, w);
}

static bool hook(void *arg, struct dsecd_req *r)
{
	size_t len;

	if (!hold_all && !dsecd_req_sandbox(r))
		return false;
	if (nheld == MAX_REPLIES || !dsecd_req_reply(r, &len) || !len)
		DSEC_BUG("hook: no room or no reply");
	if (!nheld)
		sent_at_hold = nreplies;
	held[nheld++] = r;
	holds++;
	ev_prepare_start(node.loop, &flush);
	return true;
}

/* ---- the node ---- */

static void *frame(const char *op, const char *id, const char *in, size_t *len)
{
	struct dsec_pk p;

	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, op);
	if (id)
		dsec_pk_kv_str(&p, "id", id);
	if (in) {
		const char *argv[] = { "cat", NULL };

		dsec_pk_kv_strv(&p, "argv", argv);
		dsec_pk_kv_bin(&p, "stdin", in, strlen(in));
	}
	dsec_pk_end(&p);
	return dsec_pk_detach(&p, len);
}

static void *frames[MAX_REPLIES];	/* every frame handed over, kept to the end */
static unsigned nframes;		/* how many */

/* Hands a frame to dsecd as connection conn (a token); as for the server,
 * its bytes stay valid until its reply (longer: until the end). */
static void handle(uintptr_t conn, const char *op, const char *id, const char *in)
{
	size_t len;
	void *f = frame(op, id, in, &len);

	if (nframes == MAX_REPLIES)
		DSEC_BUG("too many frames");
	frames[nframes++] = f;
	dsecd_handle(&node, (struct dsecd_conn *)conn, f, len);
}

/* Runs the loop until want replies are out (at most 20 iterations). */
static void run_until(unsigned want)
{
	for (int i = 0; i < 20 && (nreplies < want || nheld || jobs); i++)
		ev_run(node.loop, EVRUN_NOWAIT);
}

static void init(void)
{
	struct dsecd *d = &node;
	struct dsec_err err;
	char *argv[] = { "t5011", "--config", "/dev/null", "--node", "t", "--state-dir",
			 "/nonexistent", NULL };

	dsec_log_set_level(DSEC_LOG_ERROR);
	if (dsecd_conf_load(&d->conf, 7, argv, &err) != 0)
		DSEC_BUG("config: %s", err.msg);
	d->loop = ev_loop_new(0);
	dsecd_global = d;
	dsecd_sb_table_init(d);
	d->backends = &fake_backend;
	free(d->conf.default_backend);
	d->conf.default_backend = xstrdup("fake");
	d->started = ev_now(d->loop);
	ev_init(&jobs_timer, jobs_cb);
	ev_prepare_init(&flush, flush_cb);
}

int main(void)
{
	char id[64], out[64];

	plan(14);
	init();

	/* No hook: a reply leaves at once. */
	handle(1, "ping", NULL, NULL);
	is_int(nreplies, 1, "without a hook, ping is answered inside dsecd_handle");

	/* A hook holding every reply: nothing leaves until the next prepare. */
	hold_all = true;
	dsecd_reply_hook_set(&node, hook, NULL);
	handle(2, "ping", NULL, NULL);
	handle(3, "no_such_op", NULL, NULL);
	ok(nreplies == 1 && nheld == 2 && node.replies_held == 2,
	   "with a hook, a ping and an error reply are held (the daemon counts them)");
	ev_run(node.loop, EVRUN_NOWAIT);
	ok(nreplies == 3 && nheld == 0 && node.replies_held == 0,
	   "one loop iteration later both are out");
	ok(replies[1].conn == (struct dsecd_conn *)2 && replies[2].conn == (struct dsecd_conn *)3,
	   "in the order they were held");
	ok(!reply_ok(2, "code", out, sizeof(out)) && !strcmp(out, "unknown_op"),
	   "the error reply is the error");

	/* Sandbox ops only: a create, then two commands in one iteration. */
	hold_all = false;
	handle(4, "create", NULL, NULL);
	is_int(nreplies, 3, "create is not answered before its backend completes");
	run_until(4);
	ok(reply_ok(3, "id", id, sizeof(id)) && !strncmp(id, "t:", 2), "create's reply comes, held first");
	is_int(holds, 3, "the hook held it");
	handle(5, "exec", id, "first");
	handle(6, "exec", id, "second");
	handle(7, "ping", NULL, NULL);
	is_int(nreplies, 5, "a ping, on no sandbox, is not held");
	run_until(7);
	is_int(holds, 5, "both commands' replies were held");
	is_int(sent_while_held, 0, "no reply left while the hook held it");
	ok(nreplies == 7 && replies[5].conn == (struct dsecd_conn *)5 &&
	   replies[6].conn == (struct dsecd_conn *)6, "then released in order");
	ok(reply_ok(5, "stdout", out, sizeof(out)) && !strcmp(out, "first") &&
	   reply_ok(6, "stdout", out, sizeof(out)) && !strcmp(out, "second"),
	   "each with its own result");

	/* Without the hook again; then clean up. */
	dsecd_reply_hook_set(&node, NULL, NULL);
	handle(8, "destroy", id, NULL);
	run_until(8);
	ok(nreplies == 8 && reply_ok(7, "id", out, sizeof(out)) && node.replies_held == 0,
	   "hook removed: destroy answered, nothing held");
	dsecd_sb_table_free(&node);
	dsecd_conf_free(&node.conf);
	for (unsigned i = 0; i < nreplies; i++)
		free(replies[i].data);
	for (unsigned i = 0; i < nframes; i++)
		free(frames[i]);
	return done_testing();
}
