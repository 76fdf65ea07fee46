/* stream.c - streaming exec: exec_start, exec_read, exec_write, exec_signal, exec_resize. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "daemon.h"
#include "dsec.h"
#include "fs3.h"
#include "log.h"
#include "ops.h"
#include "proto.h"
#include "rlc.h"

/* ---- streaming exec -----------------------------------------------------------
 *
 * exec_start asks the backend for a command whose stdin and output ends
 * come to us (struct dsec_exec_stream): a stream, named "x<serial>" within
 * its sandbox.  Each output is read into a buffer of output_cap bytes; when
 * it is full we stop reading that pipe and the command blocks on its next
 * write until exec_read takes the bytes (backpressure: nothing is dropped,
 * nothing grows).  exec_read is held until there is output or the end, or
 * its wait runs out; a newer exec_read answers the held one at once (empty).
 * exec_write queues stdin, one buffer's worth at a time ("busy" beyond),
 * written as the pipe takes it.  The stream has ended once the backend gave
 * the status and both outputs are at EOF: the exec_read that returns its
 * last bytes says done and frees it.  An exited stream nobody reads is freed
 * stream_grace after the last request for it; destroy frees them all.
 *
 * In a sandbox with a trajectory a stream also keeps what it wrote (up to
 * XS_LOG_CAP bytes of each output, or output_cap when lower), and its end
 * is logged (rlc_stream_end): one entry with the status and that output,
 * before the reply of the exec_read that took its last bytes, or when it
 * is dropped unread.  An exec_read of a stream begun by a step that has
 * gone is then answered from the log: a trainer that re-sent exec_start's
 * step and got its logged reply reads the stream it names, whole.  Names
 * begin at a random serial, so a name the log has is not a live stream's
 * after a restart or a recover on another node.  All the node's logged
 * streams keep stream_log_max bytes at most together: past it a stream
 * keeps no more and its end says it was truncated.
 */

#define XS_MAX 256		/* streams open in one sandbox */
#define XS_LOG_CAP (256u << 10)	/* bytes of an output a logged stream keeps */
#define XS_WAIT_DEFAULT 10.0	/* s an exec_read waits for output */
#define XS_WAIT_MAX 60.0	/* s it may ask */

static uint64_t xs_serial;	/* names of streams: unique on this node while it runs */
static size_t xs_log_bytes;	/* output all logged streams keep (<= stream_log_max) */

struct dsecd_xs {
	struct dsecd *d;		/* the daemon */
	struct dsecd_sb *sb;		/* its sandbox (holds a ref) */
	struct dsecd_xs *next;		/* sb->streams */
	char id[24];			/* "x<serial>": the wire's 'exec' */
	void *handle;			/* the backend's, until its done */
	struct dsec_exec_res res;	/* the status, filled at done */
	int rc;				/* done's rc */
	struct dsec_err err;		/* why, when rc < 0 */
	bool exited;			/* done came */
	bool pty;			/* runs on a terminal */
	int fds[3];			/* stdin, stdout, stderr; -1 once closed */
	ev_io w[3];			/* on them (data = this stream) */
	struct dsec_buf buf[3];		/* stdin to write; output not yet read */
	size_t in_off;			/* bytes of buf[0] written */
	bool in_eof;			/* close stdin once buf[0] is written */
	size_t cap;			/* bytes buffered per output at most */
	struct dsecd_req *reader;	/* the exec_read held, or NULL */
	ev_timer wait;			/* its wait */
	ev_timer grace;			/* after the exit: freed unless asked for */
	/* its sandbox keeps a trajectory: */
	bool logged;			/* so the stream's end is logged */
	bool end_logged;		/* it is (or on its way) */
	bool has_step;			/* exec_start had a step */
	uint64_t step;
	double t0;			/* unix time it began */
	uint64_t t0_ns;			/* dsec_now_ns then */
	size_t log_cap;			/* bytes of an output it keeps */
	struct dsec_buf out[2];		/* stdout and stderr, up to log_cap each */
	bool out_cut[2];		/* there was more */
	bool node_cut;			/* the node's stream_log_max cut it (said once) */
};

static bool xs_ended(const struct dsecd_xs *x)
{
	return x->exited && x->fds[1] < 0 && x->fds[2] < 0;
}

static void xs_close(struct dsecd_xs *x, int i)
{
	ev_io_stop(x->d->loop, &x->w[i]);
	if (x->fds[i] >= 0)
		close(x->fds[i]);
	x->fds[i] = -1;
}

static struct dsecd_xs *xs_dead;	/* freed streams, reclaimed at the next prepare */
static ev_prepare xs_reaper;		/* does it */

static void xs_reap_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	while (xs_dead) {
		struct dsecd_xs *x = xs_dead;

		xs_dead = x->next;
		free(x);
	}
	ev_prepare_stop(loop, w);
}

/* The status of x, ended: exec_read's fields of a done stream. */
static void xs_pack_status(struct dsec_pk *p, const struct dsecd_xs *x)
{
	dsec_pk_kv_bool(p, "done", true);
	dsec_pk_kv_i64(p, "exit_code", x->res.exit_code);
	dsec_pk_kv_u64(p, "signal", (uint64_t)(x->res.signal > 0 ? x->res.signal : 0));
	dsec_pk_kv_bool(p, "timed_out", x->res.timed_out);
	dsec_pk_kv_bool(p, "oom_killed", x->res.oom_killed);
	dsec_pk_kv_bool(p, "pids_limited", x->res.pids_limited);
	dsec_pk_kv_u64(p, "seccomp_denied", x->res.seccomp_denied);
	dsec_pk_kv_double(p, "duration", x->res.duration);
	dsec_pk_kv_bool(p, "exited", true);
}

/* x has ended with a status: its end goes to its sandbox's log, as an
 * exec_read's reply of all it wrote (r: the exec_read taking its last
 * bytes, whose reply then waits for the entry; NULL: none). */
static void xs_log_end(struct dsecd_xs *x, struct dsecd_req *r)
{
	struct rlc_stream_end se = { .exec = x->id, .has_step = x->has_step, .step = x->step,
				     .t = x->t0, .dur_us = (dsec_now_ns() - x->t0_ns) / 1000 };
	struct dsec_pk p;

	x->end_logged = true;
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	dsec_pk_kv_str(&p, "id", x->sb->id);
	dsec_pk_kv_str(&p, "exec", x->id);
	dsec_pk_kv_bin(&p, "stdout", x->out[0].data, x->out[0].len);
	dsec_pk_kv_bin(&p, "stderr", x->out[1].data, x->out[1].len);
	dsec_pk_kv_bool(&p, "stdout_truncated", x->out_cut[0]);
	dsec_pk_kv_bool(&p, "stderr_truncated", x->out_cut[1]);
	xs_pack_status(&p, x);
	dsec_pk_end(&p);
	se.reply = dsec_pk_detach(&p, &se.reply_len);
	rlc_stream_end(x->d, x->sb, r, &se);
}

/* Only once the backend is done with it (x->exited).  Everything goes now
 * but the struct, which may be in its own callback: the reaper frees it. */
static void xs_free(struct dsecd_xs *x)
{
	struct dsecd_sb *sb = x->sb;

	DSEC_ASSERT(x->exited && !x->reader);
	if (x->logged && !x->end_logged && x->rc == 0)
		xs_log_end(x, NULL);
	for (int i = 0; i < 2; i++) {
		DSEC_ASSERT(xs_log_bytes >= x->out[i].len);
		xs_log_bytes -= x->out[i].len;
		dsec_buf_free(&x->out[i]);
	}
	for (int i = 0; i < 3; i++) {
		xs_close(x, i);
		dsec_buf_free(&x->buf[i]);
	}
	ev_timer_stop(x->d->loop, &x->wait);
	ev_timer_stop(x->d->loop, &x->grace);
	for (struct dsecd_xs **pp = &sb->streams; *pp; pp = &(*pp)->next)
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	sb->nstreams--;
	dsec_exec_res_free(&x->res);
	dsecd_sb_unref(x->d, sb);
	x->next = xs_dead;
	xs_dead = x;
	if (!ev_is_active(&xs_reaper)) {
		ev_prepare_init(&xs_reaper, xs_reap_cb);
		ev_prepare_start(x->d->loop, &xs_reaper);
	}
}

/* Output buffers have room: read the pipes again. */
static void xs_resume_reads(struct dsecd_xs *x)
{
	for (int i = 1; i < 3; i++)
		if (x->fds[i] >= 0 && x->buf[i].len < x->cap)
			ev_io_start(x->d->loop, &x->w[i]);
}

/* Answers the held exec_read with everything buffered; frees the stream
 * when that was its end. */
static void xs_answer(struct dsecd_xs *x)
{
	struct dsecd_req *r = x->reader;
	bool done = xs_ended(x);
	struct dsec_pk p;

	x->reader = NULL;
	ev_timer_stop(x->d->loop, &x->wait);
	if (reply_if_lost(r)) {
		if (done)
			xs_free(x);
		return;
	}
	/* The reply may come back at once (the daemon's own request, whose
	 * callback may read again): x is done with before it goes out. */
	if (done && x->rc < 0) {
		struct dsec_err err = x->err;

		xs_free(x);
		return reply_err(r, &err);
	}
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	dsec_pk_kv_bin(&p, "stdout", x->buf[1].data, x->buf[1].len);
	dsec_pk_kv_bin(&p, "stderr", x->buf[2].data, x->buf[2].len);
	if (done) {
		xs_pack_status(&p, x);
	} else {
		dsec_pk_kv_bool(&p, "done", false);
		dsec_pk_kv_i64(&p, "exit_code", -1);
		dsec_pk_kv_u64(&p, "signal", 0);
		dsec_pk_kv_bool(&p, "timed_out", false);
		dsec_pk_kv_bool(&p, "oom_killed", false);
		dsec_pk_kv_bool(&p, "pids_limited", false);
		dsec_pk_kv_u64(&p, "seccomp_denied", 0);
		dsec_pk_kv_double(&p, "duration", 0);
		dsec_pk_kv_bool(&p, "exited", x->exited);
	}
	dsec_pk_end(&p);
	dsec_buf_free(&x->buf[1]);
	dsec_buf_free(&x->buf[2]);
	if (done) {
		if (x->logged && !x->end_logged)
			xs_log_end(x, r);
		xs_free(x);
	} else {
		xs_resume_reads(x);
	}
	req_complete(r, &p);
}

/* Something changed: answer a held exec_read if it has something to get. */
static void xs_pump(struct dsecd_xs *x)
{
	if (x->reader && (x->buf[1].len || x->buf[2].len || xs_ended(x)))
		xs_answer(x);
}

static void xs_out_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct dsecd_xs *x = w->data;
	int i = (int)(w - x->w);
	struct dsec_buf *b = &x->buf[i];
	size_t want = x->cap - b->len;
	ssize_t n;

	if (want > 65536)
		want = 65536;
	dsec_buf_grow(b, want);
	n = read(x->fds[i], b->data + b->len, want);
	if (n > 0) {
		if (x->logged) {
			struct dsec_buf *o = &x->out[i - 1];
			size_t keep = x->log_cap - o->len < (size_t)n ? x->log_cap - o->len : (size_t)n;
			size_t room = x->d->conf.stream_log_max > xs_log_bytes
					      ? x->d->conf.stream_log_max - xs_log_bytes : 0;

			if (keep > room) {
				keep = room;
				if (!x->node_cut)
					log_warn("sandbox %s: exec %s keeps no more of its output for "
						 "the trajectory: the node's streams keep %zu bytes, "
						 "stream_log_max", x->sb->id, x->id, xs_log_bytes);
				x->node_cut = true;
			}
			dsec_buf_add(o, b->data + b->len, keep);
			xs_log_bytes += keep;
			x->out_cut[i - 1] |= keep < (size_t)n;
		}
		b->len += (size_t)n;
		b->data[b->len] = '\0';
		if (b->len >= x->cap)
			ev_io_stop(loop, w);	/* backpressure until a read */
	} else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		return;
	} else {
		xs_close(x, i);	/* EOF; a pty's master says EIO once the terminal is gone */
	}
	xs_pump(x);
}

static void xs_in_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct dsecd_xs *x = w->data;
	struct dsec_buf *b = &x->buf[0];
	ssize_t n = 0;

	if (b->len > x->in_off) {
		n = write(x->fds[0], b->data + x->in_off, b->len - x->in_off);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n < 0) {
			/* The command closed its stdin: what is left cannot go anywhere. */
			dsec_buf_free(b);
			x->in_off = 0;
			return xs_close(x, 0);
		}
		x->in_off += (size_t)n;
	}
	if (x->in_off < b->len)
		return;
	dsec_buf_free(b);
	x->in_off = 0;
	ev_io_stop(loop, w);
	if (x->in_eof)
		xs_close(x, 0);
}

/* Queue stdin bytes (and EOF) and start writing. */
static void xs_write(struct dsecd_xs *x, const void *data, size_t len, bool eof)
{
	dsec_buf_add(&x->buf[0], data, len);
	if (eof && x->pty)
		dsec_buf_add(&x->buf[0], "\x04", 1);	/* the terminal's EOF: ^D */
	else if (eof)
		x->in_eof = true;
	if (x->buf[0].len > x->in_off || x->in_eof)
		ev_io_start(x->d->loop, &x->w[0]);
}

static void xs_wait_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct dsecd_xs *x = dsec_container_of(w, struct dsecd_xs, wait);

	if (x->reader)
		xs_answer(x);
}

static void xs_grace_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct dsecd_xs *x = dsec_container_of(w, struct dsecd_xs, grace);

	if (x->reader)
		return ev_timer_again(loop, w);
	log_debug("sandbox %s: exec %s was not read to its end: dropped", x->sb->id, x->id);
	xs_free(x);
}

/* The backend has the status. */
static void xs_done(void *arg, int rc, const struct dsec_err *err)
{
	struct dsecd_xs *x = arg;
	struct dsecd_sb *sb = x->sb;

	x->d->ops_inflight--;
	sb->running--;
	x->exited = true;
	x->handle = NULL;
	x->rc = rc;
	if (rc < 0) {
		struct dsec_err e;

		x->err = *cut_err(x->d, rc, err, &e);
	} else {
		dsecd_sb_mark(sb, &x->res);
	}
	if (sb->state == SB_DESTROYING) {
		/* Its sandbox is gone: so is whatever it did not read. */
		for (int i = 1; i < 3; i++)
			xs_close(x, i);
		if (x->reader)
			xs_answer(x);	/* frees x */
		else
			xs_free(x);
		return;
	}
	dsecd_sb_touch(x->d, sb);
	ev_timer_again(x->d->loop, &x->grace);
	xs_pump(x);
}

/* The sandbox is being destroyed: free its streams that have exited (the
 * backend completes the others, with -ECANCELED, and xs_done frees them). */
void dsecd_streams_drop(struct dsecd *d, struct dsecd_sb *sb)
{
	struct dsecd_xs *x = sb->streams, *next;

	for (; x; x = next) {
		next = x->next;
		if (!x->exited)
			continue;
		for (int i = 1; i < 3; i++)
			xs_close(x, i);
		if (x->reader)
			xs_answer(x);
		else
			xs_free(x);
	}
}

void dsecd_stream_rewind(struct dsecd_sb *sb, const char *name, size_t n)
{
	struct dsecd_xs *x;

	for (x = sb->streams; x; x = x->next)
		if (strlen(x->id) == n && !memcmp(x->id, name, n))
			break;
	/* What it kept is all it printed, read or not: unless it printed
	 * more, that is the output again from its start. */
	if (!x || !x->logged || x->out_cut[0] || x->out_cut[1])
		return;
	for (int i = 1; i < 3; i++) {
		DSEC_ASSERT(x->buf[i].len <= x->out[i - 1].len);
		dsec_buf_reset(&x->buf[i]);
		dsec_buf_add(&x->buf[i], x->out[i - 1].data, x->out[i - 1].len);
		if (x->buf[i].len >= x->cap)
			ev_io_stop(x->d->loop, &x->w[i]);
	}
	log_debug("sandbox %s: exec %s is read from its start again (its step was sent again)",
		  sb->id, x->id);
	xs_pump(x);
}

/* The stream named by the request's 'exec' in its sandbox; NULL with *err. */
static struct dsecd_xs *xs_find(struct dsecd_req *r, struct dsec_err *err)
{
	_cleanup_free_ char *name = NULL;
	int rc;

	if ((rc = dsec_get_str(r->msg.root, "exec", &name, err)) < 0) {
		if (rc == -ENOENT)
			dsec_err_setc(err, DSEC_E_BAD_REQUEST, EINVAL, "%s needs field 'exec'",
				      dsecd_ops[r->op].name);
		return NULL;
	}
	for (struct dsecd_xs *x = r->sb->streams; x; x = x->next)
		if (!strcmp(x->id, name)) {
			if (x->exited)
				ev_timer_again(r->d->loop, &x->grace);
			return x;
		}
	dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT,
		      "no exec '%s' in sandbox '%s' (never started, or read to its end)", name,
		      r->sb->id);
	return NULL;
}

void op_exec_start(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	const msgpack_object *m = r->msg.root;
	struct dsec_exec_stream_opts o = { 0 };
	struct dsec_exec_stream st = { -1, -1, -1, NULL };
	const struct dsec_be_ops *ops;
	bool keep_open = false;
	struct dsecd_xs *x;
	struct dsec_err err;
	struct dsec_pk p;
	uint64_t rows = 0, cols = 0;
	int rc;

	dsec_err_clear(&err);
	if (parse_exec(r, &err) < 0 ||
	    (rc = dsec_get_bool_opt(m, "pty", &o.pty, &err)) < 0 ||
	    (rc = dsec_get_u64_opt(m, "rows", &rows, &err)) < 0 ||
	    (rc = dsec_get_u64_opt(m, "cols", &cols, &err)) < 0 ||
	    (rc = dsec_get_bool_opt(m, "stdin_open", &keep_open, &err)) < 0)
		return reply_err(r, &err);
	if (rows > UINT16_MAX || cols > UINT16_MAX) {
		dsec_err_setc(&err, DSEC_E_INVALID, EINVAL, "rows and cols must be at most %u",
			      UINT16_MAX);
		return reply_err(r, &err);
	}
	o.rows = (uint16_t)rows;
	o.cols = (uint16_t)cols;
	ops = r->sb->be->ops;
	if (!ops->exec_start) {
		unsupported(r, &err);
		return reply_err(r, &err);
	}
	if (r->sb->nstreams >= XS_MAX) {
		dsec_err_setc(&err, DSEC_E_CAPACITY, EAGAIN,
			      "sandbox '%s' has %u started commands open: read them to their end",
			      r->sb->id, XS_MAX);
		return reply_err(r, &err);
	}
	exec_sb_defaults(r);
	x = xcalloc(1, sizeof(*x));
	if (ops->exec_start(r->sb->handle, &r->ereq, &o, &st, &x->res, xs_done, x, &err) < 0) {
		free(x);
		return reply_err(r, &err);
	}
	x->d = d;
	x->sb = r->sb;
	dsecd_sb_ref(x->sb);
	if (!xs_serial) {
		/* 44 random bits: never 0, and far from any other run's. */
		uint64_t seed = 0;

		if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
			seed = dsec_now_ns() << 20;
		xs_serial = (seed >> 20) | 1;
	}
	snprintf(x->id, sizeof(x->id), "x%" PRIu64, ++xs_serial);
	if (r->sb->tlog) {
		x->logged = true;
		x->has_step = r->has_step;
		x->step = r->step;
		x->t0 = ev_now(d->loop) - d->started + d->started_wall;
		x->t0_ns = dsec_now_ns();
		x->log_cap = r->ereq.output_cap < XS_LOG_CAP ? r->ereq.output_cap : XS_LOG_CAP;
		dsec_buf_init(&x->out[0]);
		dsec_buf_init(&x->out[1]);
	}
	x->handle = st.handle;
	x->pty = o.pty;
	x->cap = r->ereq.output_cap;
	x->fds[0] = st.in_fd;
	x->fds[1] = st.out_fd;
	x->fds[2] = st.err_fd;
	for (int i = 0; i < 3; i++) {
		dsec_buf_init(&x->buf[i]);
		if (x->fds[i] >= 0)
			dsec_set_nonblock(x->fds[i], true);
		ev_io_init(&x->w[i], i ? xs_out_cb : xs_in_cb, x->fds[i], i ? EV_READ : EV_WRITE);
		x->w[i].data = x;
	}
	ev_init(&x->wait, xs_wait_cb);
	ev_init(&x->grace, xs_grace_cb);
	x->grace.repeat = d->conf.stream_grace > 0 ? d->conf.stream_grace : 1;
	xs_resume_reads(x);
	if (x->fds[0] >= 0 && (r->ereq.stdin_len || !(keep_open || x->pty)))
		xs_write(x, r->ereq.stdin_data, r->ereq.stdin_len, !(keep_open || x->pty));
	x->next = r->sb->streams;
	r->sb->streams = x;
	r->sb->nstreams++;
	r->sb->running++;
	r->sb->execs++;
	d->ops_inflight++;
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	dsec_pk_kv_str(&p, "id", r->sb->id);
	dsec_pk_kv_str(&p, "exec", x->id);
	dsec_pk_end(&p);
	req_complete(r, &p);
}

void op_exec_read(struct dsecd_req *r)
{
	double wait = XS_WAIT_DEFAULT;
	struct dsecd_xs *x;
	struct dsec_err err;
	int rc;

	dsec_err_clear(&err);
	if (!(x = xs_find(r, &err))) {
		if (err.code == DSEC_E_NOT_FOUND && rlc_stream_answer(r))
			return;	/* a step's stream, gone: its logged end */
		return reply_err(r, &err);
	}
	if ((rc = dsec_get_seconds_opt(r->msg.root, "wait", &wait, &err)) < 0)
		return reply_err(r, &err);
	if (wait > XS_WAIT_MAX) {
		dsec_err_setc(&err, DSEC_E_INVALID, EINVAL, "wait %.0f s is over %.0f s", wait,
			      XS_WAIT_MAX);
		return reply_err(r, &err);
	}
	if (x->reader) {
		/* The older one goes back empty (a held reader means nothing is
		 * there to give and the stream has not ended: x stays). */
		DSEC_ASSERT(!xs_ended(x));
		xs_answer(x);
	}
	x->reader = r;
	if (x->buf[1].len || x->buf[2].len || xs_ended(x) || wait <= 0)
		return xs_answer(x);
	ev_timer_set(&x->wait, wait, 0);
	ev_timer_start(r->d->loop, &x->wait);
}

void op_exec_write(struct dsecd_req *r)
{
	const msgpack_object *m = r->msg.root;
	const void *data = NULL;
	size_t len = 0, pending;
	bool eof = false;
	struct dsecd_xs *x;
	struct dsec_err err;
	int rc;

	dsec_err_clear(&err);
	if (!(x = xs_find(r, &err)))
		return reply_err(r, &err);
	if ((rc = dsec_get_bin_opt(m, "data", r->d->conf.max_frame, &data, &len, &err)) < 0 ||
	    (rc = dsec_get_bool_opt(m, "eof", &eof, &err)) < 0)
		return reply_err(r, &err);
	if (x->fds[0] < 0 || x->in_eof || x->exited) {
		dsec_err_setc(&err, DSEC_E_INVALID, EPIPE, "the stdin of exec '%s' is closed%s",
			      x->id, x->exited ? ": the command has exited" : "");
		return reply_err(r, &err);
	}
	pending = x->buf[0].len - x->in_off;
	if (pending && pending + len > x->cap) {
		dsec_err_setc(&err, DSEC_E_BUSY, EAGAIN,
			      "exec '%s' has not read the %zu bytes of stdin before: retry later",
			      x->id, pending);
		return reply_err(r, &err);
	}
	xs_write(x, data, len, eof);
	reply_empty(r);
}

/* Signal names exec_signal takes besides numbers. */
static const struct { const char *name; int sig; } signames[] = {
	{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "KILL", SIGKILL },
	{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "PIPE", SIGPIPE }, { "ALRM", SIGALRM },
	{ "TERM", SIGTERM }, { "CONT", SIGCONT }, { "STOP", SIGSTOP }, { "TSTP", SIGTSTP },
	{ "WINCH", SIGWINCH },
};

/* 'signal': a number 1..64 or a name ("TERM" or "SIGTERM"). */
static int get_signal(const msgpack_object *m, int *sig, struct dsec_err *err)
{
	_cleanup_free_ char *name = NULL;
	uint64_t n = 0;
	int rc = dsec_get_u64(m, "signal", &n, err);

	if (rc == 0) {
		if (n < 1 || n > 64)
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "signal %llu is not 1..64",
					     (unsigned long long)n);
		*sig = (int)n;
		return 0;
	}
	if (rc == -ENOENT)
		return dsec_err_setc(err, DSEC_E_BAD_REQUEST, EINVAL, "exec_signal needs field "
				     "'signal'");
	dsec_err_clear(err);
	if ((rc = dsec_get_str(m, "signal", &name, err)) < 0) {
		dsec_err_setc(err, DSEC_E_BAD_REQUEST, EINVAL, "field 'signal' must be a number "
			      "or a name");
		return rc;
	}
	for (size_t i = 0; i < DSEC_ARRAY_LEN(signames); i++)
		if (!strcmp(signames[i].name, name + (strncmp(name, "SIG", 3) ? 0 : 3))) {
			*sig = signames[i].sig;
			return 0;
		}
	return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "unknown signal '%s'", name);
}

/* exec_signal and exec_resize: the backend acts at once, while it runs. */
void op_exec_ctl(struct dsecd_req *r)
{
	const struct dsec_be_ops *ops;
	struct dsecd_xs *x;
	struct dsec_err err;
	uint64_t rows = 0, cols = 0;
	int sig = 0, rc;

	dsec_err_clear(&err);
	if (!(x = xs_find(r, &err)))
		return reply_err(r, &err);
	ops = r->sb->be->ops;
	if (r->op == DSEC_OP_EXEC_SIGNAL) {
		if (get_signal(r->msg.root, &sig, &err) < 0)
			return reply_err(r, &err);
	} else {
		if ((rc = dsec_get_u64(r->msg.root, "rows", &rows, &err)) < 0 ||
		    (rc = dsec_get_u64(r->msg.root, "cols", &cols, &err)) < 0) {
			if (rc == -ENOENT)
				dsec_err_setc(&err, DSEC_E_BAD_REQUEST, EINVAL,
					      "exec_resize needs fields 'rows' and 'cols'");
			return reply_err(r, &err);
		}
		if (!rows || !cols || rows > UINT16_MAX || cols > UINT16_MAX) {
			dsec_err_setc(&err, DSEC_E_INVALID, EINVAL,
				      "rows and cols must be 1..%u", UINT16_MAX);
			return reply_err(r, &err);
		}
		if (!x->pty) {
			dsec_err_setc(&err, DSEC_E_INVALID, ENOTTY,
				      "exec '%s' has no terminal (start it with pty)", x->id);
			return reply_err(r, &err);
		}
	}
	if (x->exited) {
		dsec_err_setc(&err, DSEC_E_INVALID, ESRCH, "exec '%s' has exited", x->id);
		return reply_err(r, &err);
	}
	if (r->op == DSEC_OP_EXEC_SIGNAL)
		rc = ops->exec_signal ? ops->exec_signal(r->sb->handle, x->handle, sig, &err)
				      : unsupported(r, &err);
	else
		rc = ops->exec_resize ? ops->exec_resize(r->sb->handle, x->handle, (uint16_t)rows,
							 (uint16_t)cols, &err)
				      : unsupported(r, &err);
	if (rc < 0)
		return reply_err(r, &err);
	reply_empty(r);
}
