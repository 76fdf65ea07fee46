/* fncall.c - the FnCall backend: stateless calls into a pre-warmed pool.
 *
 * One zygote per runtime (fncall-zygote in helper_dir, started here with fork +
 * exec and nothing else in between, since the daemon has threads) keeps
 * pool_size units ready, each already inside its own pid, mount, network
 * and IPC namespaces (uts is the zygote's), under the zygote's seccomp
 * filter, and in its per-call cgroup (see fncall-zygote-helper.c).  Every
 * sandbox and every one-shot call runs as a uid of its own (see uid_take).
 * A call on the loop is: make the stdout/stderr pipes (and a sealed memfd
 * for stdin), send the job and the descriptors over the runtime's
 * SOCK_SEQPACKET socket, watch the pipes with ev_io and a timeout with
 * ev_timer, and complete when the zygote reports the wait status and both
 * pipes are at EOF.  Nothing here blocks the loop; the zygote refills its
 * pool by itself.
 *
 * A sandbox (create) is a runtime plus a scratch tmpfs mounted on the host
 * under state_dir; each exec attaches an open_tree() clone of it at /work
 * inside the call, so files persist between the calls of a sandbox and
 * processes never do.  `call` skips the scratch: its working directory is
 * the unit's private /tmp.  File operations run on host->submit threads
 * and resolve paths with openat2(RESOLVE_BENEATH) inside the scratch.
 */
#include <dirent.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "be_conf.h"
#include "be_io.h"
#include "be_cgroup.h"
#include "be_task.h"
#include "be_fncall.h"
#include "be_fs.h"
#include "log.h"
#include "proto.h"
#include "util.h"

#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif

#define FC_DEFAULT_CAP (1u << 20)	/* output_cap 0 */
#define FC_GRACE 1.0			/* s to wait for pipe EOF after the exit */
#define FC_KILL_GRACE 5.0		/* s to wait for the zygote after a kill */

/* ---- configuration ------------------------------------------------------ */

/* Zygotes per runtime when fncall.zygotes is 0 (auto). */
#define FC_AUTO_ZYGOTES 8
/* Largest fncall.uids (the zygotes' /etc/passwd lists every one), and the
 * seconds a uid rests after a call that was cut off (see uid_take). */
#define FC_UIDS_MAX 65536
#define FC_UID_COOL 10.0

struct fc_conf {
	char *runtimes;		/* "sh,python3" */
	uint64_t pool_size;	/* warm units per runtime */
	uint64_t memory;	/* bytes per call */
	double cpus;		/* cores per call */
	uint64_t pids;		/* tasks per call */
	uint64_t nofile;	/* RLIMIT_NOFILE per call */
	uint64_t scratch;	/* bytes of /tmp per call and of a sandbox scratch */
	uint64_t uid_base;	/* first uid (and gid) of the tenants' range */
	uint64_t uids;		/* how many: one per sandbox and per one-shot call */
	uint64_t max_running;	/* calls in flight before "capacity" */
	double timeout;		/* seconds when a request gives none */
	uint64_t zygotes;	/* zygotes per runtime, each pinned to a CPU; 0 = auto */
};

/* Every key the backend knows; adding one is adding a row. */
static const struct be_conf_key conf_table[] = {
#define F(f) offsetof(struct fc_conf, f)
	{ "runtimes", BE_K_STR, F(runtimes), "sh,python3" },
	{ "pool_size", BE_K_COUNT, F(pool_size), "4" },
	{ "memory", BE_K_SIZE, F(memory), "256M" },
	{ "cpus", BE_K_CPUS, F(cpus), "1" },
	{ "pids", BE_K_COUNT, F(pids), "64" },
	{ "nofile", BE_K_COUNT, F(nofile), "256" },
	{ "scratch", BE_K_SIZE, F(scratch), "64M" },
	{ "uid_base", BE_K_COUNT, F(uid_base), "2000000000" },
	{ "uids", BE_K_COUNT, F(uids), "8192" },
	{ "max_running", BE_K_COUNT, F(max_running), "256" },
	{ "timeout", BE_K_SECS, F(timeout), "300" },
	{ "zygotes", BE_K_COUNT, F(zygotes), "0" },
#undef F
};

/* Runtimes this backend can run; a row per runtime. */
static const struct fc_rtdesc {
	const char *name;	/* runtime name in requests */
	const char *kind;	/* "c": exec per call; "py": python template */
	const char *exe;	/* interpreter */
} rt_table[] = {
	{ .name = "sh", .kind = "c", .exe = "/bin/sh" },
	{ .name = "bash", .kind = "c", .exe = "/bin/bash" },
	{ .name = "python3", .kind = "py", .exe = "/usr/bin/python3" },
};

/* ---- state -------------------------------------------------------------- */

struct fc_be;
struct fc_sb;

/* A datagram waiting for room in the zygote socket. */
struct fc_out {
	void *data;		/* bytes (owned) */
	size_t len;		/* length */
	int fds[FC_MAX_FDS];	/* descriptors to pass (owned) */
	int nfds;		/* how many */
	uint64_t job;		/* id of the job it carries, 0 for other messages */
	struct fc_out *next;	/* FIFO */
};

/* One runtime and its zygote. */
struct fc_rt {
	struct fc_be *be;		/* backend */
	const struct fc_rtdesc *desc;	/* table row */
	struct be_cg *cg;		/* its cgroup (zygote + u<N> below) */
	pid_t pid;			/* zygote, 0 when down */
	int sock;			/* socket to it, -1 when down */
	ev_io rw;			/* readable */
	ev_io ww;			/* writable, while out is not empty */
	ev_child cw;			/* zygote exit */
	ev_timer respawn;		/* backoff before restarting it */
	double backoff;			/* current backoff */
	bool up;			/* its "ready" came since it was started */
	bool failing;			/* it died (or could not start) before saying
					 * ready: calls fail at once until one does */
	struct fc_out *out, **out_tail;	/* queued datagrams */
	uint32_t ready;			/* warm units, as last reported */
	uint32_t inflight;		/* calls running on this zygote */
	int cpu;			/* CPU it and its units are pinned to, -1 = none */
	struct fc_rt *next;		/* be->rts */
};

/* One command in flight. */
struct fc_call {
	struct fc_be *be;		/* backend */
	struct fc_rt *rt;		/* runtime it runs on */
	struct fc_sb *sb;		/* sandbox, NULL for call() */
	uint64_t id;			/* job id */
	uint32_t uid;			/* uid and gid it runs as */
	struct dsec_exec_res *res;	/* caller's result */
	dsec_be_done_fn done;		/* caller's callback */
	void *arg;			/* its argument */
	size_t cap;			/* output cap per stream */
	int out_fd, err_fd;		/* pipe read ends, -1 at EOF */
	ev_io out_w, err_w;		/* their watchers */
	ev_timer timer;			/* timeout, then kill/EOF grace */
	uint64_t t0;			/* start, ns */
	bool sent;			/* its job is in the zygote's socket (not queued) */
	bool exited;			/* zygote reported the status */
	bool ended;			/* zygote reported the end (status or error):
					 * no process of the call is left */
	bool killed;			/* kill sent (timeout or cancel) */
	bool finished;			/* result decided, waiting to be reaped */
	int rc;				/* result for done */
	struct dsec_err err;		/* why, when rc < 0 */
	struct fc_call *next, *prev;	/* be->calls (in flight) or be->reap */
	struct fc_call *sb_next;	/* sb->calls */
};

/* A sandbox: a runtime plus a scratch tmpfs on the host. */
struct fc_sb {
	struct fc_be *be;		/* backend */
	struct fc_rt *rt;		/* runtime */
	char *id;			/* sandbox id */
	char *dir;			/* host path of the scratch mount */
	int dirfd;			/* O_PATH fd of its root, -1 until made */
	char **env;			/* "K=V" from create */
	char *cwd;			/* default cwd inside, NULL = /work */
	struct dsec_be_limits lim;	/* limits from create */
	uint32_t uid;			/* uid and gid of its calls and files (a tenant's own) */
	double uid_cool;		/* dsec_now() before which its uid may not be reused */
	struct fc_call *calls;		/* execs in flight */
	unsigned nops;			/* file operations in flight */
	bool destroying;		/* destroy() called */
	ev_timer dtimer;		/* defers destroy's done without a pool */
	dsec_be_done_fn ddone;		/* destroy's callback */
	void *darg;			/* and argument */
	struct fc_sb *next;		/* be->sbs */
};

struct fc_be {
	const struct dsec_be_host *host;	/* daemon services */
	struct fc_conf conf;		/* parsed config */
	struct be_cg *cg;		/* "dsec-fncall.<pid>" */
	struct fc_rt *rts;		/* working runtimes, first = default */
	struct fc_sb *sbs;		/* live sandboxes */
	struct fc_call *calls;		/* in flight */
	struct fc_call *reap;		/* finished, done not yet called */
	ev_idle idle;			/* runs the reaper without sleeping */
	ev_check check;			/* the reaper */
	uint64_t next_id;		/* job ids */
	uint64_t next_sb;		/* scratch dir names */
	unsigned nshards;		/* zygotes per runtime */
	unsigned rr;			/* rt_find's turn among equally busy zygotes */
	uint32_t running;		/* calls in flight */
	uint32_t nsbs;			/* sandboxes */
	uint64_t ncalls;		/* completed */
	struct be_tasks tasks;		/* work on dsecd's pool */
	double *uid_free;		/* per uid of the range: 0 free, INFINITY taken,
					 * else free from that dsec_now() on */
	uint32_t uid_lo;		/* no uid below this one is free */
	bool shutting;			/* the daemon is stopping (shutdown op) */
	bool stopping;			/* fini started */
};

static void fc_free(struct fc_be *be);

/* Pool work through be_task: fini waits for it, and the backend outlives
 * done callbacks dsecd's pool may still run after fini (they still run). */
static void fc_release(void *be)
{
	fc_free(be);
}

static int fc_submit(struct fc_be *be, void (*work)(void *), void (*done)(void *), void *arg)
{
	return be_task_submit(&be->tasks, work, done, arg);
}

#define LOG(be, lvl, ...) ((be)->host->log((lvl), __VA_ARGS__))

/* ---- config --------------------------------------------------------------- */

static int conf_load(struct fc_be *be, struct dsec_err *err)
{
	int rc;

	if ((rc = be_conf_load(be->host, "fncall", conf_table, DSEC_ARRAY_LEN(conf_table),
				&be->conf, err)) < 0)
		return rc;
	if (be->conf.pool_size > 1024 || be->conf.max_running == 0 || be->conf.pids < 2 ||
	    be->conf.nofile < 16 || be->conf.memory < (4u << 20) || be->conf.scratch < 4096)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "fncall limits out of range (pool_size <= 1024, max_running >= 1, "
				     "pids >= 2, nofile >= 16, memory >= 4M, scratch >= 4k)");
	if (be->conf.uid_base < 100000 || be->conf.uids < 1 || be->conf.uids > FC_UIDS_MAX ||
	    be->conf.uid_base + be->conf.uids > UINT32_MAX - 1)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "fncall.uid_base %" PRIu64 " must be at least 100000 and "
				     "fncall.uids %" PRIu64 " 1 to %u, within 32-bit ids",
				     be->conf.uid_base, be->conf.uids, FC_UIDS_MAX);
	return 0;
}

/* ---- the tenants' uids ---------------------------------------------------- */

/* Every sandbox and every one-shot call runs as a uid (and gid) of its own
 * from uid_base on, so that the kernel's per-user limits (inotify
 * instances and watches, RLIMIT_NPROC, pipe buffers, message queue bytes)
 * are per tenant.  The lowest free one is taken: the zygotes' /etc/passwd
 * lists the range in order, and a lookup reads it up to the entry.  A uid
 * whose processes may still be dying (a call that was cut off before its
 * unit reported its end) is not reused for FC_UID_COOL seconds. */
static int uid_take(struct fc_be *be, uint32_t *uid, struct dsec_err *err)
{
	double now = 0;

	for (uint32_t i = be->uid_lo; i < be->conf.uids; i++) {
		if (be->uid_free[i] == INFINITY)
			continue;
		if (be->uid_free[i] > 0 && be->uid_free[i] > (now ? now : (now = dsec_now())))
			continue;
		be->uid_free[i] = INFINITY;
		while (be->uid_lo < be->conf.uids && be->uid_free[be->uid_lo] == INFINITY)
			be->uid_lo++;
		*uid = (uint32_t)(be->conf.uid_base + i);
		return 0;
	}
	return dsec_err_setc(err, DSEC_E_CAPACITY, EBUSY,
			     "fncall has no free uid: %" PRIu64 " sandboxes and calls (fncall.uids)",
			     be->conf.uids);
}

/* Gives uid back, reusable from dsec_now() + cool on. */
static void uid_put(struct fc_be *be, uint32_t uid, double cool)
{
	uint32_t i = uid - (uint32_t)be->conf.uid_base;

	if (!be->uid_free || i >= be->conf.uids || be->uid_free[i] != INFINITY)
		return;
	be->uid_free[i] = cool > 0 ? dsec_now() + cool : 0;
	if (i < be->uid_lo)
		be->uid_lo = i;
}

/* ---- the reaper: done callbacks run here, never inside an operation ---- */

static void list_del(struct fc_call **head, struct fc_call *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else if (*head == c)
		*head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->next = c->prev = NULL;
}

static void list_add(struct fc_call **head, struct fc_call *c)
{
	c->prev = NULL;
	c->next = *head;
	if (*head)
		(*head)->prev = c;
	*head = c;
}

static void reap_cb(struct ev_loop *loop, ev_check *w, int revents)
{
	struct fc_be *be = dsec_container_of(w, struct fc_be, check);

	while (be->reap) {
		struct fc_call *c = be->reap;

		list_del(&be->reap, c);
		if (!be->stopping)
			c->done(c->arg, c->rc, c->rc < 0 ? &c->err : NULL);
		free(c);
	}
	ev_idle_stop(loop, &be->idle);
}

static void idle_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
	/* Only here so the loop does not sleep while be->reap is not empty. */
}

/* ---- calls ---------------------------------------------------------------- */

static void call_close(struct fc_call *c)
{
	struct ev_loop *loop = c->be->host->loop;

	ev_io_stop(loop, &c->out_w);
	ev_io_stop(loop, &c->err_w);
	ev_timer_stop(loop, &c->timer);
	if (c->out_fd >= 0)
		close(c->out_fd);
	if (c->err_fd >= 0)
		close(c->err_fd);
	c->out_fd = c->err_fd = -1;
}

static void out_free(struct fc_out *o);

/* Drops the job id still queued for rt's zygote. */
static void rt_unqueue(struct fc_rt *rt, uint64_t id)
{
	for (struct fc_out **pp = &rt->out; *pp; pp = &(*pp)->next) {
		struct fc_out *o = *pp;

		if (o->job != id)
			continue;
		if (!(*pp = o->next))
			rt->out_tail = pp;
		out_free(o);
		return;
	}
}

/* Decide the result; done is called from the reaper. */
static void call_finish(struct fc_call *c, int rc)
{
	struct fc_be *be = c->be;

	if (c->finished)
		return;
	c->finished = true;
	call_close(c);
	c->rc = rc;
	c->res->duration = (double)(dsec_now_ns() - c->t0) / 1e9;
	if (rc < 0) {
		/* A failed result has no output (backend.h). */
		dsec_buf_free(&c->res->out);
		dsec_buf_free(&c->res->err);
	}
	list_del(&be->calls, c);
	if (c->sb) {
		for (struct fc_call **pp = &c->sb->calls; *pp; pp = &(*pp)->sb_next)
			if (*pp == c) {
				*pp = c->sb_next;
				break;
			}
	}
	be->running--;
	c->rt->inflight--;
	be->ncalls++;
	/* A uid rests when processes of the call may still be dying. */
	if (!c->sent)
		rt_unqueue(c->rt, c->id);	/* nothing of it ever ran */
	if (!c->sb)
		uid_put(be, c->uid, c->ended || !c->sent ? 0 : FC_UID_COOL);
	else if (c->sent && !c->ended)
		c->sb->uid_cool = dsec_now() + FC_UID_COOL;
	list_add(&be->reap, c);
	ev_idle_start(be->host->loop, &be->idle);
}

/* Read what is there; keep up to cap, count the rest as truncated.
 * Returns true at EOF. */

static void call_maybe_done(struct fc_call *c)
{
	if (c->exited && c->out_fd < 0 && c->err_fd < 0)
		call_finish(c, 0);
}

/* Reads what a pipe has; at EOF stops watching it and closes it. */
static void pipe_step(struct ev_loop *loop, struct fc_call *c, ev_io *w, int *fd,
		      struct dsec_buf *b, bool *trunc)
{
	if (be_drain(*fd, c->cap, b, trunc)) {
		ev_io_stop(loop, w);
		close(*fd);
		*fd = -1;
		call_maybe_done(c);
	}
}

static void out_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct fc_call *c = dsec_container_of(w, struct fc_call, out_w);

	pipe_step(loop, c, w, &c->out_fd, &c->res->out, &c->res->out_truncated);
}

static void err_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct fc_call *c = dsec_container_of(w, struct fc_call, err_w);

	pipe_step(loop, c, w, &c->err_fd, &c->res->err, &c->res->err_truncated);
}

static bool rt_send(struct fc_rt *rt, struct dsec_pk *p, int *fds, int nfds, uint64_t job);

/* Kills c's unit.  A job still queued for a zygote is not sent at all
 * (call_finish drops it). */
static void send_kill(struct fc_call *c)
{
	struct dsec_pk p;

	if (c->killed || c->rt->sock < 0 || !c->sent)
		return;
	c->killed = true;
	dsec_pk_init(&p);
	msgpack_pack_map(&p.pk, 2);
	dsec_pk_kv_str(&p, "t", "kill");
	dsec_pk_kv_u64(&p, "id", c->id);
	rt_send(c->rt, &p, NULL, 0, 0);
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct fc_call *c = dsec_container_of(w, struct fc_call, timer);

	if (c->exited) {
		/* Exited but something outside still holds a pipe: take what is
		 * there and finish. */
		if (c->out_fd >= 0)
			be_drain(c->out_fd, c->cap, &c->res->out, &c->res->out_truncated);
		if (c->err_fd >= 0)
			be_drain(c->err_fd, c->cap, &c->res->err, &c->res->err_truncated);
		call_finish(c, 0);
		return;
	}
	if (!c->sent) {
		/* Its zygote never got it (down, or its socket full): it timed
		 * out before it started, as a job waiting in the zygote does. */
		c->res->timed_out = true;
		c->res->exit_code = -1;
		c->res->signal = SIGKILL;
		call_finish(c, 0);
		return;
	}
	if (!c->killed) {
		c->res->timed_out = true;
		send_kill(c);
		ev_timer_set(w, FC_KILL_GRACE, 0);
		ev_timer_start(loop, w);
		return;
	}
	dsec_err_setc(&c->err, DSEC_E_BACKEND, EIO, "fncall runtime '%s' did not stop a call",
		      c->rt->desc->name);
	call_finish(c, -EIO);
}

/* The zygote reported on job id. */
static void call_report(struct fc_be *be, const msgpack_object *m)
{
	uint64_t id = 0, st = 0;
	const msgpack_object *o;
	struct fc_call *c;

	dsec_get_u64(m, "id", &id, NULL);
	for (c = be->calls; c && c->id != id; c = c->next)
		;
	if (!c)
		return;
	c->ended = true;
	if ((o = dsec_map_get(m, "errno"))) {
		_cleanup_free_ char *msg = NULL;
		int e = o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (int)o->via.u64 : EIO;

		dsec_get_str(m, "msg", &msg, NULL);
		dsec_err_set(&c->err, e ? e : EIO, "cannot start command: %s",
			     msg ? msg : "unknown error");
		call_finish(c, -(e ? e : EIO));
		return;
	}
	if ((o = dsec_map_get(m, "status")) && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
		st = o->via.u64;
	c->exited = true;
	c->res->oom_killed = (o = dsec_map_get(m, "oom")) && o->type == MSGPACK_OBJECT_BOOLEAN &&
			     o->via.boolean;
	if (WIFSIGNALED((int)st)) {
		c->res->exit_code = -1;
		c->res->signal = WTERMSIG((int)st);
	} else {
		c->res->exit_code = WEXITSTATUS((int)st);
		c->res->signal = 0;
	}
	/* Whatever is in the pipes now is all there is, unless a writer
	 * escaped; give stragglers FC_GRACE. */
	if (c->out_fd >= 0 && be_drain(c->out_fd, c->cap, &c->res->out, &c->res->out_truncated)) {
		ev_io_stop(be->host->loop, &c->out_w);
		close(c->out_fd);
		c->out_fd = -1;
	}
	if (c->err_fd >= 0 && be_drain(c->err_fd, c->cap, &c->res->err, &c->res->err_truncated)) {
		ev_io_stop(be->host->loop, &c->err_w);
		close(c->err_fd);
		c->err_fd = -1;
	}
	if (c->out_fd < 0 && c->err_fd < 0) {
		call_finish(c, 0);
		return;
	}
	ev_timer_stop(be->host->loop, &c->timer);
	ev_timer_set(&c->timer, FC_GRACE, 0);
	ev_timer_start(be->host->loop, &c->timer);
}

/* ---- the zygote connection ---------------------------------------------- */

static void rt_down(struct fc_rt *rt, const char *why);

static int send_dgram(int sock, const void *data, size_t len, const int *fds, int nfds)
{
	_Static_assert(FC_MAX_FDS <= BE_IO_MAXFDS, "more fds than be_send_fds carries");
	return be_send_fds(sock, data, len, fds, nfds, MSG_DONTWAIT);
}

static void out_free(struct fc_out *o)
{
	for (int i = 0; i < o->nfds; i++)
		close(o->fds[i]);
	free(o->data);
	free(o);
}

/* Send a datagram, or queue it when the socket is full or the zygote is
 * down (the next one gets it).  Takes ownership of p's bytes and of fds
 * (closed once sent).  job: the id of the job it carries, or 0.  True when
 * it went into the socket. */
static bool rt_send(struct fc_rt *rt, struct dsec_pk *p, int *fds, int nfds, uint64_t job)
{
	struct fc_out *o;
	int rc = -EAGAIN;

	if (!rt->out && rt->sock >= 0)
		rc = send_dgram(rt->sock, p->sb.data, p->sb.size, fds, nfds);
	if (rc == 0) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		dsec_pk_free(p);
		return true;
	}
	/* Full, or the zygote is gone (the read side notices and restarts
	 * it): what it never got waits for the next one. */
	o = xcalloc(1, sizeof(*o));
	o->data = dsec_pk_detach(p, &o->len);
	memcpy(o->fds, fds, sizeof(int) * (size_t)nfds);
	o->nfds = nfds;
	o->job = job;
	*rt->out_tail = o;
	rt->out_tail = &o->next;
	if (rt->sock >= 0 && (rc == -EAGAIN || rc == -ENOBUFS))
		ev_io_start(rt->be->host->loop, &rt->ww);
	return false;
}

static void rt_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct fc_rt *rt = dsec_container_of(w, struct fc_rt, ww);

	while (rt->out) {
		struct fc_out *o = rt->out;
		int rc = send_dgram(rt->sock, o->data, o->len, o->fds, o->nfds);

		if (rc == -EAGAIN || rc == -ENOBUFS)
			return;
		if (rc < 0)
			break;	/* gone: kept for the next zygote */
		for (struct fc_call *c = rt->be->calls; o->job && c; c = c->next)
			if (c->id == o->job) {
				c->sent = true;
				break;
			}
		if (!(rt->out = o->next))
			rt->out_tail = &rt->out;
		out_free(o);
	}
	ev_io_stop(loop, w);
}

/* Drops every datagram queued for rt. */
static void rt_drop_out(struct fc_rt *rt)
{
	while (rt->out) {
		struct fc_out *o = rt->out;

		rt->out = o->next;
		out_free(o);
	}
	rt->out_tail = &rt->out;
}

/* Reports the zygote sent, as many as are queued (up to FC_RECV_BATCH)
 * in one recvmmsg: one syscall for the usual single report, none that
 * only says EAGAIN, and one per batch when many calls end at once.  The
 * watcher is level-triggered, so anything beyond the batch comes next. */
#define FC_RECV_BATCH 16
#define FC_REPORT_MAX 4096
static void rt_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct fc_rt *rt = dsec_container_of(w, struct fc_rt, rw);
	static char bufs[FC_RECV_BATCH][FC_REPORT_MAX];	/* the loop's thread only */
	struct iovec iov[FC_RECV_BATCH];
	struct mmsghdr mm[FC_RECV_BATCH];
	int n;

	memset(mm, 0, sizeof(mm));
	for (int i = 0; i < FC_RECV_BATCH; i++) {
		iov[i].iov_base = bufs[i];
		iov[i].iov_len = sizeof(bufs[i]);
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	n = recvmmsg(rt->sock, mm, FC_RECV_BATCH, MSG_DONTWAIT, NULL);
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			rt_down(rt, strerror(errno));
		return;
	}
	for (int i = 0; i < n; i++) {
		_cleanup_free_ char *t = NULL;
		struct dsec_msg m;
		uint64_t ready;

		if (mm[i].msg_len == 0) {
			/* End of stream: the zygote closed its end. */
			rt_down(rt, "exited");
			return;
		}
		if (dsec_msg_parse(&m, bufs[i], mm[i].msg_len, FC_REPORT_MAX, NULL) < 0) {
			LOG(rt->be, DSEC_LOG_WARN, "fncall: bad message from the '%s' zygote",
			    rt->desc->name);
			continue;
		}
		dsec_get_str(m.root, "t", &t, NULL);
		if (dsec_get_u64(m.root, "ready", &ready, NULL) == 0)
			rt->ready = (uint32_t)ready;
		if (t && !strcmp(t, "done"))
			call_report(rt->be, m.root);
		else if (t && !strcmp(t, "ready")) {
			rt->backoff = 0;
			rt->up = true;
			rt->failing = false;
		}
		dsec_msg_free(&m);
		if (rt->sock < 0)
			return;	/* a report took the runtime down */
	}
}

static void rt_child_cb(struct ev_loop *loop, ev_child *w, int revents)
{
	struct fc_rt *rt = dsec_container_of(w, struct fc_rt, cw);

	ev_child_stop(loop, w);
	if (rt->pid == w->rpid) {
		char why[64];

		snprintf(why, sizeof(why), "exited with status %d", w->rstatus);
		rt->pid = 0;
		rt_down(rt, why);
	}
}

/* Fork + exec the zygote.  After fork only async-signal-safe calls. */
/* Warm units each zygote keeps: pool_size is per runtime, shared out. */
static uint64_t rt_pool(const struct fc_be *be)
{
	uint64_t n = be->nshards ? be->nshards : 1;

	return (be->conf.pool_size + n - 1) / n;
}

static int rt_spawn(struct fc_rt *rt, struct dsec_err *err)
{
	struct fc_be *be = rt->be;
	const struct fc_conf *c = &be->conf;
	char desc[256], a_pool[24], a_max[24], a_uid[24], a_uids[24], a_scr[32], a_nof[24],
	     a_mem[32], a_cpus[32], a_pids[24];
	_cleanup_free_ char *helper = xasprintf("%s/" FC_HELPER, be->host->helper_dir);
	_cleanup_free_ char *py = xasprintf("%s/" FC_PY_ZYGOTE, be->host->helper_dir);
	_cleanup_free_ char *pl = xasprintf("%s/" FC_PRELOAD, be->host->helper_dir);
	int cgfds[BE_CG_MAXH], ncg = 0, sv[2];
	pid_t pid;

	if (access(helper, X_OK) < 0)
		return dsec_err_set(err, errno, "cannot run '%s': %s", helper, strerror(errno));
	ncg = rt->cg ? be_cg_export(rt->cg, desc, sizeof(desc), cgfds) : 0;
	if (!rt->cg)
		snprintf(desc, sizeof(desc), "none");
	snprintf(a_pool, sizeof(a_pool), "%" PRIu64, rt_pool(be));
	snprintf(a_max, sizeof(a_max), "%" PRIu64, c->pool_size + c->max_running + 4);
	snprintf(a_uid, sizeof(a_uid), "%" PRIu64, c->uid_base);
	snprintf(a_uids, sizeof(a_uids), "%" PRIu64, c->uids);
	snprintf(a_scr, sizeof(a_scr), "%" PRIu64, c->scratch);
	snprintf(a_nof, sizeof(a_nof), "%" PRIu64, c->nofile);
	snprintf(a_mem, sizeof(a_mem), "%" PRIu64, c->memory);
	snprintf(a_cpus, sizeof(a_cpus), "%g", c->cpus);
	snprintf(a_pids, sizeof(a_pids), "%" PRIu64, c->pids);
	char *const argv[] = {
		helper, (char *)"--runtime", (char *)rt->desc->name, (char *)"--kind",
		(char *)rt->desc->kind, (char *)"--exe", (char *)rt->desc->exe, (char *)"--py", py,
		(char *)"--preload", pl,
		(char *)"--cg", desc, (char *)"--pool", a_pool, (char *)"--max-units", a_max,
		(char *)"--uid-base", a_uid, (char *)"--uids", a_uids, (char *)"--scratch", a_scr,
		(char *)"--nofile", a_nof, (char *)"--memory", a_mem, (char *)"--cpus", a_cpus,
		(char *)"--pids", a_pids, NULL,
	};
	char *const envp[] = { (char *)"PATH=/usr/local/bin:/usr/bin:/bin",
			       (char *)"LANG=C.UTF-8", NULL };

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return dsec_err_set(err, errno, "cannot make a socket: %s", strerror(errno));
	pid = fork();
	if (pid < 0) {
		int e = errno;

		close(sv[0]);
		close(sv[1]);
		return dsec_err_set(err, e, "cannot fork the '%s' zygote: %s", rt->desc->name,
				    strerror(e));
	}
	if (pid == 0) {
		struct sigaction sa = { .sa_handler = SIG_DFL };
		sigset_t none;
		int high[1 + BE_CG_MAXH], nul;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		for (int s = 1; s < NSIG; s++)
			sigaction(s, &sa, NULL);
		setsid();
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (rt->cpu >= 0) {
			cpu_set_t one;

			CPU_ZERO(&one);
			CPU_SET(rt->cpu, &one);
			sched_setaffinity(0, sizeof(one), &one);
		}
		/* Park everything above the target numbers, then place it. */
		high[0] = fcntl(sv[1], F_DUPFD, 64);
		for (int i = 0; i < ncg; i++)
			high[1 + i] = fcntl(cgfds[i], F_DUPFD, 64);
		if (dup2(high[0], FC_FD_SOCK) < 0)
			_exit(127);
		for (int i = 0; i < ncg; i++)
			if (dup2(high[1 + i], FC_FD_CG + i) < 0)
				_exit(127);
		if ((nul = open("/dev/null", O_RDONLY)) >= 0 && nul != 0) {
			dup2(nul, 0);
			close(nul);
		}
		syscall(SYS_close_range, FC_FD_CG + ncg, ~0U, 0);
		execve(helper, argv, envp);
		_exit(127);
	}
	close(sv[1]);
	rt->pid = pid;
	rt->sock = sv[0];
	rt->up = false;
	dsec_set_nonblock(rt->sock, true);
	ev_io_init(&rt->rw, rt_read_cb, rt->sock, EV_READ);
	ev_io_init(&rt->ww, rt_write_cb, rt->sock, EV_WRITE);
	ev_io_start(be->host->loop, &rt->rw);
	/* Jobs that came while it was down go now; it reads them once it
	 * has set up. */
	if (rt->out)
		ev_io_start(be->host->loop, &rt->ww);
	if (ev_is_default_loop(be->host->loop)) {
		ev_child_init(&rt->cw, rt_child_cb, pid, 0);
		ev_child_start(be->host->loop, &rt->cw);
	}
	return 0;
}

/* Kill the zygote (its units die with it) and forget everything it had;
 * what was queued for it (rt->out) stays for the next one. */
static void rt_kill(struct fc_rt *rt)
{
	struct ev_loop *loop = rt->be->host->loop;

	ev_io_stop(loop, &rt->rw);
	ev_io_stop(loop, &rt->ww);
	if (rt->sock >= 0)
		close(rt->sock);
	rt->sock = -1;
	if (ev_is_active(&rt->cw))
		ev_child_stop(loop, &rt->cw);
	if (rt->pid > 0) {
		kill(rt->pid, SIGKILL);
		/* On the default loop libev reaps every child; elsewhere we do. */
		if (!ev_is_default_loop(loop))
			waitpid(rt->pid, NULL, 0);
	}
	rt->pid = 0;
	if (rt->cg) {
		if (be_cg_kill(rt->cg) < 0)
			LOG(rt->be, DSEC_LOG_WARN, "fncall: processes left in cgroup '%s'",
			    rt->cg->path);
		be_cg_remove_children(rt->cg);
	}
	rt->ready = 0;
}

/* Fails the calls on rt whose job the zygote got (all: also those queued
 * for it) with backend_error. */
static void rt_fail_calls(struct fc_rt *rt, bool all, const char *why)
{
	for (struct fc_call *c = rt->be->calls, *next; c; c = next) {
		next = c->next;
		if (c->rt != rt || (!all && !c->sent))
			continue;
		dsec_err_setc(&c->err, DSEC_E_BACKEND, EIO, "fncall runtime '%s' failed: zygote %s",
			      rt->desc->name, why);
		call_finish(c, -EIO);
	}
}

/* Starts the respawn timer with the next, doubled, backoff. */
static void rt_backoff(struct fc_rt *rt)
{
	rt->backoff = rt->backoff ? rt->backoff * 2 : 0.1;
	if (rt->backoff > 30)
		rt->backoff = 30;
	ev_timer_set(&rt->respawn, rt->backoff, 0);
	ev_timer_start(rt->be->host->loop, &rt->respawn);
}

static void respawn_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct fc_rt *rt = dsec_container_of(w, struct fc_rt, respawn);
	struct dsec_err err;

	if (rt_spawn(rt, &err) < 0) {
		LOG(rt->be, DSEC_LOG_ERROR, "fncall: %s", err.msg);
		rt->failing = true;
		rt_fail_calls(rt, true, "cannot be restarted");
		rt_drop_out(rt);
		rt_backoff(rt);
	}
}

/* The zygote is gone: fail its calls, restart it after a backoff.  Calls
 * that come meanwhile wait for the new one (see call_start), unless this
 * one died before it was ready: then they fail until one is. */
static void rt_down(struct fc_rt *rt, const char *why)
{
	struct fc_be *be = rt->be;

	if (rt->sock < 0 && !rt->pid)
		return;
	LOG(be, DSEC_LOG_ERROR, "fncall: the '%s' zygote %s; restarting it", rt->desc->name, why);
	rt_kill(rt);
	rt->failing = !rt->up;
	/* One that never came up fails what waits for it too. */
	rt_fail_calls(rt, rt->failing, why);
	if (rt->failing)
		rt_drop_out(rt);
	if (!be->stopping)
		rt_backoff(rt);
}

/* Wait (blocking, init only) for the zygote's "ready". */
static int rt_wait_ready(struct fc_rt *rt, struct dsec_err *err)
{
	double deadline = dsec_now() + 30;
	char buf[512];

	while (dsec_now() < deadline) {
		struct pollfd pfd = { .fd = rt->sock, .events = POLLIN };
		struct dsec_msg m;
		_cleanup_free_ char *t = NULL;
		ssize_t n;

		if (poll(&pfd, 1, 100) <= 0)
			continue;
		n = recv(rt->sock, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0)
			return dsec_err_setc(err, DSEC_E_BACKEND, EIO,
					     "the '%s' zygote exited at start (see the log)",
					     rt->desc->name);
		if (n < 0)
			continue;
		if (dsec_msg_parse(&m, buf, (size_t)n, sizeof(buf), NULL) < 0)
			continue;
		dsec_get_str(m.root, "t", &t, NULL);
		dsec_msg_free(&m);
		if (t && !strcmp(t, "ready"))
			return 0;
	}
	return dsec_err_setc(err, DSEC_E_BACKEND, ETIMEDOUT,
			     "the '%s' zygote did not start within 30 s", rt->desc->name);
}

/* The zygote of runtime name (NULL: the default runtime) with the fewest
 * calls in flight, preferring ones that are up, taking turns among equals: one
 * client calling in a loop then uses every zygote, so a unit renews itself
 * on one CPU while the next call runs on another.  NULL if the runtime is
 * unknown. */
static struct fc_rt *rt_find(struct fc_be *be, const char *name)
{
	struct fc_rt *best = NULL;
	unsigned k = 0, start = be->rr++ % (be->nshards ? be->nshards : 1);

	if (!name || !*name)
		name = be->rts->desc->name;
	for (int pass = 0; pass < 2; pass++) {
		for (struct fc_rt *rt = be->rts; rt; rt = rt->next) {
			if (strcmp(rt->desc->name, name))
				continue;
			/* Pass 0 looks at the zygotes from the turn's on,
			 * pass 1 at those before it. */
			if ((pass == 0) != (k++ % (be->nshards ? be->nshards : 1) >= start))
				continue;
			if (!best || (!best->up && rt->up) ||
			    (best->up == rt->up && rt->inflight < best->inflight))
				best = rt;
		}
		k = 0;
	}
	return best;
}

/* ---- starting a command ------------------------------------------------ */

static const char *env_key_end(const char *kv)
{
	const char *eq = strchr(kv, '=');

	return eq ? eq : kv + strlen(kv);
}

/* Append env vars, later ones replacing earlier ones of the same name. */
static void env_merge(const char ***v, size_t *n, const char *const *add)
{
	for (size_t i = 0; add && add[i]; i++) {
		size_t kl = (size_t)(env_key_end(add[i]) - add[i]);
		size_t k;

		if (!strchr(add[i], '='))
			continue;
		for (k = 0; k < *n; k++)
			if (!strncmp((*v)[k], add[i], kl + 1))
				break;
		if (k == *n) {
			*v = xrealloc(*v, sizeof(**v) * (*n + 2));
			(*n)++;
		}
		(*v)[k] = add[i];
		(*v)[*n] = NULL;
	}
}

static int make_memfd(const char *name, const void *data, size_t len)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return -errno;
	if (dsec_write_all(fd, data, len) < 0 || lseek(fd, 0, SEEK_SET) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL);
	return fd;
}

static void pack_body(struct dsec_pk *p, const struct dsec_exec_req *req,
		      const char *const *env, const char *cwd)
{
	if (req->argv)
		dsec_pk_kv_strv(p, "argv", req->argv);
	else
		dsec_pk_kv_str(p, "code", req->code);
	dsec_pk_kv_strv(p, "env", env);
	dsec_pk_kv_str(p, "cwd", cwd);
}

/* Start req on rt, inside sb's scratch when sb is not NULL. */
static int call_start(struct fc_be *be, struct fc_rt *rt, struct fc_sb *sb,
		      const struct dsec_be_spec *spec, const struct dsec_exec_req *req,
		      struct dsec_exec_res *res, dsec_be_done_fn done, void *arg,
		      struct dsec_err *err)
{
	const struct dsec_be_limits *lim = sb ? &sb->lim : &spec->limits;
	const char *const *spec_env = sb ? (const char *const *)sb->env : spec->env;
	const char *spec_cwd = sb ? sb->cwd : spec->cwd;
	const char *home = sb ? "/work" : "/tmp";
	const char *defenv[] = { "PATH=/usr/local/bin:/usr/bin:/bin", NULL, "LANG=C.UTF-8",
				 NULL };
	_cleanup_free_ char *homev = xasprintf("HOME=%s", home);
	_cleanup_free_ const char **env = NULL;
	_cleanup_free_ char *cwd = NULL;
	int opipe[2] = { -1, -1 }, epipe[2] = { -1, -1 }, fds[FC_MAX_FDS], nfds = 0, rc;
	const char *names[FC_MAX_FDS];
	struct dsec_pk p, body;
	struct fc_call *c;
	size_t nenv = 0;
	double timeout;
	uint32_t uid;

	if (be->stopping || be->shutting)
		return dsec_err_setc(err, DSEC_E_SHUTTING_DOWN, ESHUTDOWN, "fncall is stopping");
	if (!req->argv == !req->code || (req->argv && !req->argv[0]))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "give either argv or code (not both, not neither)");
	if (be->running >= be->conf.max_running)
		return dsec_err_setc(err, DSEC_E_CAPACITY, EBUSY,
				     "fncall has %u calls running (max_running)", be->running);
	/* A zygote being restarted gets the job once it is up (rt_send
	 * queues it); one that keeps failing to start refuses it. */
	if (rt->failing)
		return dsec_err_setc(err, DSEC_E_BACKEND, EIO,
				     "fncall runtime '%s' is down: its zygote fails to start (see the log)",
				     rt->desc->name);
	if (sb)
		uid = sb->uid;
	else if ((rc = uid_take(be, &uid, err)) < 0)
		return rc;
	if (!(timeout = req->timeout) || !(timeout > 0))
		timeout = be->conf.timeout;

	defenv[1] = homev;
	env_merge(&env, &nenv, defenv);
	env_merge(&env, &nenv, spec_env);
	env_merge(&env, &nenv, req->env);
	if (!env)
		env = xcalloc(1, sizeof(*env));
	if (req->cwd && req->cwd[0] == '/')
		cwd = xstrdup(req->cwd);
	else if (req->cwd && *req->cwd)
		cwd = xasprintf("%s/%s", spec_cwd ? spec_cwd : home, req->cwd);
	else
		cwd = xstrdup(spec_cwd ? spec_cwd : home);

	if (pipe2(opipe, O_CLOEXEC) < 0 || pipe2(epipe, O_CLOEXEC) < 0) {
		rc = dsec_err_set(err, errno, "cannot make pipes: %s", strerror(errno));
		goto fail;
	}
	/* Fresh read ends have no status flags but O_RDONLY: set, not read. */
	fcntl(opipe[0], F_SETFL, O_NONBLOCK);
	fcntl(epipe[0], F_SETFL, O_NONBLOCK);
	if (req->stdin_len) {
		if ((rc = make_memfd("stdin", req->stdin_data, req->stdin_len)) < 0) {
			dsec_err_set(err, -rc, "cannot buffer stdin: %s", strerror(-rc));
			goto fail;
		}
		names[nfds] = "in";
		fds[nfds++] = rc;
	}
	names[nfds] = "out";
	fds[nfds++] = opipe[1];
	opipe[1] = -1;
	names[nfds] = "err";
	fds[nfds++] = epipe[1];
	epipe[1] = -1;
	if (sb) {
		rc = (int)syscall(SYS_open_tree, sb->dirfd, "",
				  OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
		if (rc < 0) {
			rc = dsec_err_set(err, errno, "cannot clone the scratch of sandbox '%s': %s",
					  sb->id, strerror(errno));
			goto fail;
		}
		names[nfds] = "tree";
		fds[nfds++] = rc;
	}

	c = xcalloc(1, sizeof(*c));
	c->be = be;
	c->rt = rt;
	c->sb = sb;
	c->id = ++be->next_id;
	c->uid = uid;

	dsec_pk_init(&body);
	msgpack_pack_map(&body.pk, 3);
	pack_body(&body, req, env, cwd);
	bool inline_body = body.sb.size <= FC_INLINE_MAX;

	if (!inline_body) {
		if ((rc = make_memfd("job", body.sb.data, body.sb.size)) < 0) {
			dsec_pk_free(&body);
			free(c);
			dsec_err_set(err, -rc, "cannot buffer the job: %s", strerror(-rc));
			goto fail;
		}
		names[nfds] = "body";
		fds[nfds++] = rc;
	}
	dsec_pk_free(&body);
	dsec_pk_init(&p);
	msgpack_pack_map(&p.pk, 9 + (inline_body ? 3 : 0));
	dsec_pk_kv_str(&p, "t", "job");
	dsec_pk_kv_u64(&p, "id", c->id);
	dsec_pk_kv_u64(&p, "uid", uid);
	dsec_pk_str(&p, "fds");
	msgpack_pack_array(&p.pk, (size_t)nfds);
	for (int i = 0; i < nfds; i++)
		dsec_pk_str(&p, names[i]);
	dsec_pk_kv_u64(&p, "memory", lim->memory);
	dsec_pk_kv_u64(&p, "cpus", (uint64_t)(lim->cpus * 1000.0 + 0.5));
	dsec_pk_kv_u64(&p, "pids", lim->pids);
	dsec_pk_kv_u64(&p, "nofile", lim->nofile);
	dsec_pk_kv_u64(&p, "disk", sb ? 0 : lim->disk);
	if (inline_body)
		pack_body(&p, req, env, cwd);

	memset(res, 0, sizeof(*res));
	dsec_buf_init(&res->out);
	dsec_buf_init(&res->err);
	c->res = res;
	c->done = done;
	c->arg = arg;
	c->cap = req->output_cap ? req->output_cap : FC_DEFAULT_CAP;
	c->out_fd = opipe[0];
	c->err_fd = epipe[0];
	c->t0 = dsec_now_ns();
	ev_io_init(&c->out_w, out_cb, c->out_fd, EV_READ);
	ev_io_init(&c->err_w, err_cb, c->err_fd, EV_READ);
	ev_timer_init(&c->timer, timer_cb, timeout, 0);
	ev_io_start(be->host->loop, &c->out_w);
	ev_io_start(be->host->loop, &c->err_w);
	ev_timer_start(be->host->loop, &c->timer);
	list_add(&be->calls, c);
	if (sb) {
		c->sb_next = sb->calls;
		sb->calls = c;
	}
	be->running++;
	rt->inflight++;
	c->sent = rt_send(rt, &p, fds, nfds, c->id);	/* takes the child ends */
	return 0;

fail:
	if (!sb)
		uid_put(be, uid, 0);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	for (int i = 0; i < 2; i++) {
		if (opipe[i] >= 0)
			close(opipe[i]);
		if (epipe[i] >= 0)
			close(epipe[i]);
	}
	return rc;
}

/* ---- sandboxes -------------------------------------------------------- */

/* Blocking work for the pool threads; `rc`/`err` carry the result. */
struct fc_work {
	struct fc_be *be;		/* backend */
	struct fc_sb *sb;		/* sandbox */
	dsec_be_done_fn done;		/* caller's callback */
	void *arg;			/* its argument */
	int rc;				/* 0 or -errno */
	struct dsec_err err;		/* why */
	char *path;			/* file ops: path inside */
	uint64_t offset, len;		/* file_read */
	struct dsec_buf *out;		/* file_read output */
	const void *data;		/* file_write data (caller's) */
	size_t dlen;			/* its length */
	uint32_t mode;			/* file_write mode */
	const struct dsec_file_req *req;	/* file: the request (caller's) */
	struct dsec_file_res *res;	/* file: its result (caller's) */
};

static void sb_free(struct fc_sb *sb)
{
	double left = sb->uid_cool - dsec_now();

	uid_put(sb->be, sb->uid, left > 0 ? left : 0);
	if (sb->dirfd >= 0)
		close(sb->dirfd);
	dsec_strv_free(sb->env);
	free(sb->cwd);
	free(sb->dir);
	free(sb->id);
	free(sb);
}

static void create_work(void *arg)
{
	struct fc_work *w = arg;
	struct fc_sb *sb = w->sb;
	const struct fc_conf *c = &w->be->conf;
	char opt[128];
	int rc;

	if (mkdir(sb->dir, 0700) < 0 && errno != EEXIST) {
		w->rc = dsec_err_set(&w->err, errno, "cannot create '%s': %s", sb->dir,
				     strerror(errno));
		return;
	}
	snprintf(opt, sizeof(opt), "size=%" PRIu64 ",mode=0755,uid=%u,gid=%u",
		 sb->lim.disk ? sb->lim.disk : c->scratch, sb->uid, sb->uid);
	if (mount("dsec-fncall", sb->dir, "tmpfs", MS_NOSUID | MS_NODEV, opt) < 0) {
		w->rc = dsec_err_set(&w->err, errno, "cannot mount the scratch of sandbox '%s': %s",
				     sb->id, strerror(errno));
		rmdir(sb->dir);
		return;
	}
	if ((rc = open(sb->dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		w->rc = dsec_err_set(&w->err, errno, "cannot open '%s': %s", sb->dir,
				     strerror(errno));
		umount2(sb->dir, MNT_DETACH);
		rmdir(sb->dir);
		return;
	}
	sb->dirfd = rc;
}

static void create_done(void *arg)
{
	struct fc_work *w = arg;
	struct fc_be *be = w->be;

	if (w->rc == 0 && be->stopping) {
		umount2(w->sb->dir, MNT_DETACH);
		rmdir(w->sb->dir);
		w->rc = dsec_err_setc(&w->err, DSEC_E_SHUTTING_DOWN, ESHUTDOWN, "fncall is stopping");
	}
	if (w->rc < 0) {
		sb_free(w->sb);
		if (!be->stopping)
			w->done(w->arg, w->rc, &w->err);
	} else {
		w->sb->next = be->sbs;
		be->sbs = w->sb;
		be->nsbs++;
		w->done(w->arg, 0, NULL);
	}
	free(w);
}

/* What fncall cannot give a sandbox is refused, not ignored: an image, a
 * network beyond none, extra seccomp denials (its workers' filter is set
 * when the pool starts), a CPU weight. */
static int spec_check(const struct fc_rt *rt, const struct dsec_be_spec *spec,
		      struct dsec_err *err)
{
	if (!rt)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "fncall has no runtime '%s'",
				     spec->runtime);
	if (spec->image && *spec->image)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "fncall sandboxes have no image (got '%s')", spec->image);
	if ((spec->network && strcmp(spec->network, "none")) || (spec->allow && spec->allow[0]) ||
	    spec->dns)
		return dsec_err_setc(err, DSEC_E_UNSUPPORTED, EOPNOTSUPP,
				     "fncall sandboxes have no network (network \"none\" only)");
	if (spec->seccomp_deny && spec->seccomp_deny[0])
		return dsec_err_setc(err, DSEC_E_UNSUPPORTED, EOPNOTSUPP,
				     "fncall cannot add seccomp_deny to its workers' filter");
	if (spec->cpu_weight)
		return dsec_err_setc(err, DSEC_E_UNSUPPORTED, EOPNOTSUPP,
				     "fncall calls share their pool's CPU weight (no limits.cpu_weight)");
	return 0;
}

static int fc_create(void *vbe, const struct dsec_be_spec *spec, void **out,
		     dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct fc_be *be = vbe;
	struct fc_rt *rt = rt_find(be, spec->runtime);
	struct fc_work *w;
	struct fc_sb *sb;
	int rc;

	if (be->stopping || be->shutting)
		return dsec_err_setc(err, DSEC_E_SHUTTING_DOWN, ESHUTDOWN, "fncall is stopping");
	if ((rc = spec_check(rt, spec, err)) < 0)
		return rc;
	sb = xcalloc(1, sizeof(*sb));
	sb->be = be;
	sb->rt = rt;
	sb->id = xstrdup(spec->id ? spec->id : "");
	sb->dir = xasprintf("%s/sb.%" PRIu64, be->host->state_dir, ++be->next_sb);
	sb->dirfd = -1;
	if (spec->env) {
		size_t n = dsec_strv_len(spec->env);

		sb->env = xcalloc(n + 1, sizeof(*sb->env));
		for (size_t i = 0; i < n; i++)
			sb->env[i] = xstrdup(spec->env[i]);
	}
	if (spec->cwd && *spec->cwd)
		sb->cwd = spec->cwd[0] == '/' ? xstrdup(spec->cwd) : xasprintf("/work/%s", spec->cwd);
	sb->lim = spec->limits;
	if ((rc = uid_take(be, &sb->uid, err)) < 0) {
		sb_free(sb);
		return rc;
	}
	w = xcalloc(1, sizeof(*w));
	w->be = be;
	w->sb = sb;
	w->done = done;
	w->arg = arg;
	*out = sb;
	if ((rc = fc_submit(be, create_work, create_done, w)) < 0) {
		free(w);
		sb_free(sb);
		return dsec_err_set(err, -rc, "cannot queue the creation: %s", strerror(-rc));
	}
	return 0;
}

static int fc_exec(void *vsb, const struct dsec_exec_req *req, struct dsec_exec_res *res,
		   dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct fc_sb *sb = vsb;

	if (sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT, "sandbox '%s' is being destroyed",
				     sb->id);
	/* A sandbox is only its scratch: any zygote of its runtime serves it,
	 * and while its own is down another live one does. */
	if (!sb->rt->up) {
		struct fc_rt *rt = rt_find(sb->be, sb->rt->desc->name);

		if (rt && rt->up)
			sb->rt = rt;
	}
	return call_start(sb->be, sb->rt, sb, NULL, req, res, done, arg, err);
}

static int fc_call(void *vbe, const struct dsec_be_spec *spec, const struct dsec_exec_req *req,
		   struct dsec_exec_res *res, dsec_be_done_fn done, void *arg,
		   struct dsec_err *err)
{
	struct fc_be *be = vbe;
	struct fc_rt *rt = rt_find(be, spec->runtime);
	int rc;

	if ((rc = spec_check(rt, spec, err)) < 0)
		return rc;
	return call_start(be, rt, NULL, spec, req, res, done, arg, err);
}

/* ---- files ------------------------------------------------------------- */

/* The scratch as be_fs sees it: "/work/x" and "x" name scratch/x, nothing
 * leaves it; what is made belongs to the sandbox's uid. */
static void fs_root(const struct fc_work *w, struct be_fs_root *root)
{
	*root = (struct be_fs_root){ .fd = w->sb->dirfd, .in_root = false, .prefix = "/work",
				     .uid = w->sb->uid, .gid = w->sb->uid, .mode_mask = 0777 };
}

static void read_work(void *arg)
{
	struct fc_work *w = arg;
	struct be_fs_root root;

	fs_root(w, &root);
	w->rc = be_fs_read(&root, w->path, w->offset, w->len, w->out, &w->err);
}

static void write_work(void *arg)
{
	struct fc_work *w = arg;
	struct be_fs_root root;

	fs_root(w, &root);
	w->rc = be_fs_write(&root, w->path, w->data, w->dlen, w->mode, &w->err);
}

static void fs_work(void *arg)
{
	struct fc_work *w = arg;
	struct be_fs_root root;

	fs_root(w, &root);
	w->rc = be_fs_run(&root, w->req, w->res, &w->err);
}

static void sb_cleanup_submit(struct fc_sb *sb);

static void file_done(void *arg)
{
	struct fc_work *w = arg;
	struct fc_sb *sb = w->sb;

	sb->nops--;
	if (sb->be->stopping) {
		/* fini unmounted it and left it to us. */
		free(w->path);
		free(w);
		if (sb->nops == 0 && !sb->destroying)
			sb_free(sb);
		return;
	}
	w->done(w->arg, w->rc, w->rc < 0 ? &w->err : NULL);
	free(w->path);
	free(w);
	if (sb->destroying && sb->nops == 0 && !sb->calls)
		sb_cleanup_submit(sb);
}

static int file_op(struct fc_sb *sb, void (*work)(void *), struct fc_work *t,
		   struct dsec_err *err)
{
	struct fc_work *w;
	int rc;

	if (sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT, "sandbox '%s' is being destroyed",
				     sb->id);
	if (strlen(t->path) > DSEC_STR_MAX)
		return dsec_err_setc(err, DSEC_E_TOO_LARGE, ENAMETOOLONG, "path too long");
	w = xmemdup(t, sizeof(*t));
	w->path = xstrdup(t->path);
	if ((rc = fc_submit(sb->be, work, file_done, w)) < 0) {
		free(w->path);
		free(w);
		return dsec_err_set(err, -rc, "cannot queue the file operation: %s", strerror(-rc));
	}
	sb->nops++;
	return 0;
}

static int fc_file_read(void *vsb, const char *path, uint64_t offset, uint64_t len,
			struct dsec_buf *out, dsec_be_done_fn done, void *arg,
			struct dsec_err *err)
{
	struct fc_sb *sb = vsb;
	struct fc_work t = { .be = sb->be, .sb = sb, .done = done, .arg = arg,
			     .path = (char *)path, .offset = offset, .len = len, .out = out };

	return file_op(sb, read_work, &t, err);
}

static int fc_file_write(void *vsb, const char *path, const void *data, size_t len,
			 uint32_t mode, dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct fc_sb *sb = vsb;
	struct fc_work t = { .be = sb->be, .sb = sb, .done = done, .arg = arg,
			     .path = (char *)path, .data = data, .dlen = len,
			     .mode = mode ? mode : 0644 };

	return file_op(sb, write_work, &t, err);
}

static int fc_file(void *vsb, const struct dsec_file_req *req, struct dsec_file_res *res,
		   dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct fc_sb *sb = vsb;
	struct fc_work t = { .be = sb->be, .sb = sb, .done = done, .arg = arg,
			     .path = (char *)req->path, .req = req, .res = res };

	return file_op(sb, fs_work, &t, err);
}

/* ---- destroy ----------------------------------------------------------- */

static void sb_unmount(struct fc_be *be, struct fc_sb *sb)
{
	if (sb->dirfd >= 0) {
		close(sb->dirfd);
		sb->dirfd = -1;
	}
	if (umount2(sb->dir, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		LOG(be, DSEC_LOG_WARN, "fncall: cannot unmount '%s': %s", sb->dir, strerror(errno));
	if (rmdir(sb->dir) < 0 && errno != ENOENT)
		LOG(be, DSEC_LOG_WARN, "fncall: cannot remove '%s': %s", sb->dir, strerror(errno));
}

static void destroy_work(void *arg)
{
	struct fc_sb *sb = arg;

	sb_unmount(sb->be, sb);
}

static void destroy_done(void *arg)
{
	struct fc_sb *sb = arg;
	struct fc_be *be = sb->be;

	for (struct fc_sb **pp = &be->sbs; *pp; pp = &(*pp)->next)
		if (*pp == sb) {
			*pp = sb->next;
			be->nsbs--;
			break;
		}
	if (!be->stopping)
		sb->ddone(sb->darg, 0, NULL);
	sb_free(sb);
}

static void dtimer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	destroy_done(dsec_container_of(w, struct fc_sb, dtimer));
}

static void sb_cleanup_submit(struct fc_sb *sb)
{
	if (fc_submit(sb->be, destroy_work, destroy_done, sb) < 0) {
		/* No pool thread: unmount here (it is quick) and still call
		 * done from the loop, never from inside destroy(). */
		destroy_work(sb);
		ev_timer_init(&sb->dtimer, dtimer_cb, 0, 0);
		ev_timer_start(sb->be->host->loop, &sb->dtimer);
	}
}

static int fc_destroy(void *vsb, dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct fc_sb *sb = vsb;

	if (sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT,
				     "sandbox '%s' is already being destroyed", sb->id);
	sb->destroying = true;
	sb->ddone = done;
	sb->darg = arg;
	while (sb->calls) {
		struct fc_call *c = sb->calls;

		send_kill(c);
		dsec_err_setc(&c->err, DSEC_E_NOT_FOUND, ECANCELED, "sandbox '%s' was destroyed",
			      sb->id);
		call_finish(c, -ECANCELED);	/* unlinks c from sb->calls */
	}
	if (sb->nops == 0)
		sb_cleanup_submit(sb);
	return 0;
}

/* ---- init, fini, stats ------------------------------------------------- */

/* The daemon is stopping: every call ends now with shutting_down (its
 * unit is killed; fini kills the zygotes soon after anyway), new ones are
 * refused.  One-shot calls have no sandbox that dsecd's shutdown destroys,
 * so without this they ran on to their timeout while dsecd waited. */
static void fc_shutdown(void *vbe)
{
	struct fc_be *be = vbe;

	be->shutting = true;
	while (be->calls) {
		struct fc_call *c = be->calls;

		send_kill(c);
		dsec_err_setc(&c->err, DSEC_E_SHUTTING_DOWN, ESHUTDOWN,
			      "fncall is shutting down: the call was cut off");
		call_finish(c, -ESHUTDOWN);	/* unlinks c */
	}
}

static void fc_stats(void *vbe, struct dsec_be_stats *out)
{
	struct fc_be *be = vbe;

	memset(out, 0, sizeof(*out));
	out->sandboxes = be->nsbs;
	out->running = be->running;
	out->capacity = be->running < be->conf.max_running ?
			(uint32_t)(be->conf.max_running - be->running) : 0;
	out->calls = be->ncalls;
	for (struct fc_rt *rt = be->rts; rt; rt = rt->next) {
		out->pool_ready += rt->ready;
		out->pool_target += (uint32_t)rt_pool(be);
	}
}

static void rt_free(struct fc_rt *rt)
{
	struct ev_loop *loop = rt->be->host->loop;

	ev_timer_stop(loop, &rt->respawn);
	rt_kill(rt);
	rt_drop_out(rt);
	if (rt->cg) {
		be_cg_remove(rt->cg);
		be_cg_free(rt->cg);
	}
	free(rt);
}

static void fc_free(struct fc_be *be)
{
	free(be->conf.runtimes);
	free(be->uid_free);
	free(be);
}

static void fc_fini(void *vbe)
{
	struct fc_be *be = vbe;
	struct ev_loop *loop = be->host->loop;

	be->stopping = true;
	while (be->rts) {
		struct fc_rt *rt = be->rts;

		be->rts = rt->next;
		rt_free(rt);
	}
	/* Calls: their zygotes are gone; no done after fini starts. */
	while (be->calls) {
		struct fc_call *c = be->calls;

		call_close(c);
		list_del(&be->calls, c);
		free(c);
	}
	while (be->reap) {
		struct fc_call *c = be->reap;

		list_del(&be->reap, c);
		free(c);
	}
	/* Let running file work finish before its sandbox goes away. */
	be_tasks_drain(&be->tasks);
	while (be->sbs) {
		struct fc_sb *sb = be->sbs;

		be->sbs = sb->next;
		sb_unmount(be, sb);
		/* A pending done (file op, destroy) frees it later. */
		if (sb->nops == 0 && !sb->destroying)
			sb_free(sb);
	}
	ev_idle_stop(loop, &be->idle);
	ev_ref(loop);
	ev_check_stop(loop, &be->check);
	if (be->cg) {
		_cleanup_free_ char *rec = xasprintf("%s/cgroups", be->host->state_dir);

		be_cg_kill(be->cg);
		if (be_cg_give_up(be->cg, rec) < 0)
			LOG(be, DSEC_LOG_WARN, "fncall: cannot remove cgroup '%s'", be->cg->path);
		be_cg_free(be->cg);
		be->cg = NULL;
	}
	if (be_tasks_idle(&be->tasks))
		fc_free(be);
}

/* Scratch mounts left in our state dir by a daemon that died without
 * fini: nothing can use them any more. */
static void remove_stale_scratch(struct fc_be *be)
{
	DIR *d = opendir(be->host->state_dir);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		_cleanup_free_ char *p = NULL;

		if (strncmp(de->d_name, "sb.", 3))
			continue;
		p = xasprintf("%s/%s", be->host->state_dir, de->d_name);
		umount2(p, MNT_DETACH);
		if (rmdir(p) < 0)
			LOG(be, DSEC_LOG_WARN, "fncall: cannot remove stale '%s': %s", p,
			    strerror(errno));
		else
			LOG(be, DSEC_LOG_INFO, "fncall: removed stale scratch '%s'", p);
	}
	if (d)
		closedir(d);
}

static int fc_init(const struct dsec_be_host *host, void **out, struct dsec_err *err)
{
	struct fc_be *be = xcalloc(1, sizeof(*be));
	struct fc_rt **tail = &be->rts;
	_cleanup_free_ char *list = NULL;
	char *save = NULL, name[64];
	struct dsec_err e2;
	int rc;

	be->host = host;
	be_tasks_init(&be->tasks, host, &be->stopping, false, fc_release, be);
	if (host->abi_version != DSEC_BE_ABI || host->struct_size < sizeof(*host)) {
		free(be);
		return dsec_err_setc(err, DSEC_E_INTERNAL, EINVAL, "fncall: host ABI mismatch");
	}
	if ((rc = conf_load(be, err)) < 0)
		goto fail;
	be->uid_free = xcalloc(be->conf.uids, sizeof(*be->uid_free));
	if (be->conf.zygotes > 256) {
		rc = dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				   "fncall.zygotes must be 0 (auto) to 256, not %" PRIu64,
				   be->conf.zygotes);
		goto fail;
	}
	if (geteuid() != 0) {
		rc = dsec_err_setc(err, DSEC_E_UNSUPPORTED, EPERM,
				   "fncall needs root (namespaces, mounts, cgroups)");
		goto fail;
	}
	ev_idle_init(&be->idle, idle_cb);
	ev_check_init(&be->check, reap_cb);
	ev_check_start(host->loop, &be->check);
	/* The check watcher alone must not keep the loop alive. */
	ev_unref(host->loop);

	snprintf(name, sizeof(name), "dsec-fncall.%d", (int)getpid());
	if (be_cg_open_root(&be->cg, name, &e2) < 0) {
		LOG(be, DSEC_LOG_WARN, "fncall: %s; calls run without cgroup limits", e2.msg);
		be->cg = NULL;
	} else if (be->cg->mode == BE_CG_NONE) {
		LOG(be, DSEC_LOG_WARN, "fncall: no usable cgroup hierarchy; calls run without "
		    "memory, cpu and pids limits (rlimits only)");
		be_cg_free(be->cg);
		be->cg = NULL;
	} else {
		_cleanup_free_ char *rec = xasprintf("%s/cgroups", host->state_dir);
		int n = be_cg_remove_stale(be->cg, "dsec-fncall.");

		n += be_cg_take_over(be->cg, rec) > 0;	/* a killed daemon's, wherever */

		LOG(be, DSEC_LOG_INFO, "fncall: cgroup %s '%s'%s",
		    be->cg->mode == BE_CG_V2 ? "v2" : "v1", be->cg->path,
		    n ? " (removed groups of dead daemons)" : "");
	}
	remove_stale_scratch(be);

	/* Zygotes per runtime, each pinned with all its units to one CPU: a
	 * call whose processes stay on the CPU of the zygote that forked them
	 * avoids cross-CPU TLB shootdowns and wake-ups, which on a VM with
	 * shadow paging cost more than the fork itself.  Calls go to the
	 * zygote with the fewest in flight.  Auto: one per usable CPU, at most
	 * FC_AUTO_ZYGOTES (python3 zygotes cost memory). */
	cpu_set_t set;
	int cpus[CPU_SETSIZE], ncpus = 0;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		for (int i = 0; i < CPU_SETSIZE; i++)
			if (CPU_ISSET(i, &set))
				cpus[ncpus++] = i;
	if (ncpus == 0)
		cpus[ncpus++] = 0;
	be->nshards = be->conf.zygotes ? (unsigned)be->conf.zygotes
				       : (unsigned)(ncpus < FC_AUTO_ZYGOTES ? ncpus : FC_AUTO_ZYGOTES);

	list = xstrdup(be->conf.runtimes);
	for (char *r = strtok_r(list, ", ", &save); r; r = strtok_r(NULL, ", ", &save)) {
		const struct fc_rtdesc *d = NULL;
		struct fc_rt *rt;

		for (size_t i = 0; i < DSEC_ARRAY_LEN(rt_table); i++)
			if (!strcmp(rt_table[i].name, r))
				d = &rt_table[i];
		if (!d) {
			rc = dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					   "unknown fncall runtime '%s' in 'fncall.runtimes'", r);
			goto fail;
		}
		bool dup = false;

		for (struct fc_rt *o = be->rts; o; o = o->next)
			dup |= !strcmp(o->desc->name, r);
		if (dup)
			continue;

		if (access(d->exe, X_OK) < 0) {
			LOG(be, DSEC_LOG_WARN, "fncall: runtime '%s' skipped: '%s' is missing", r,
			    d->exe);
			continue;
		}
		for (unsigned k = 0; k < be->nshards; k++) {
			char cgname[80];

			rt = xcalloc(1, sizeof(*rt));
			rt->be = be;
			rt->desc = d;
			rt->sock = -1;
			rt->cpu = be->nshards > 1 ? cpus[k % ncpus] : -1;
			rt->out_tail = &rt->out;
			ev_timer_init(&rt->respawn, respawn_cb, 0, 0);
			if (be->nshards > 1)
				snprintf(cgname, sizeof(cgname), "%s.%u", d->name, k);
			else
				snprintf(cgname, sizeof(cgname), "%s", d->name);
			if (be->cg && be_cg_child(be->cg, cgname, true, true, &rt->cg, &e2) < 0) {
				LOG(be, DSEC_LOG_WARN, "fncall: %s", e2.msg);
				rt->cg = NULL;
			}
			if (rt_spawn(rt, &e2) < 0 || rt_wait_ready(rt, &e2) < 0) {
				LOG(be, DSEC_LOG_WARN, "fncall: runtime '%s' skipped: %s", r, e2.msg);
				rt_free(rt);
				continue;
			}
			rt->up = true;
			*tail = rt;
			tail = &rt->next;
		}
	}
	if (!be->rts) {
		rc = dsec_err_setc(err, DSEC_E_BACKEND, ENOENT,
				   "fncall has no working runtime (tried '%s'; see the log)",
				   be->conf.runtimes);
		goto fail;
	}
	*out = be;
	return 0;

fail:
	be->stopping = true;
	if (ev_is_active(&be->check)) {
		ev_ref(host->loop);
		ev_check_stop(host->loop, &be->check);
	}
	if (be->cg) {
		be_cg_kill(be->cg);
		be_cg_remove(be->cg);
		be_cg_free(be->cg);
	}
	free(be->conf.runtimes);
	free(be->uid_free);
	free(be);
	return rc;
}

__attribute__((visibility("default")))
const struct dsec_be_ops dsec_backend = {
	.abi_version = DSEC_BE_ABI,
	.struct_size = sizeof(struct dsec_be_ops),
	.spec_size = sizeof(struct dsec_be_spec),
	.name = "fncall",
	.description = "stateless calls into a pre-warmed pool of isolated processes",
	.init = fc_init,
	.fini = fc_fini,
	.create = fc_create,
	.exec = fc_exec,
	.file_read = fc_file_read,
	.file_write = fc_file_write,
	.destroy = fc_destroy,
	.stats = fc_stats,
	.call = fc_call,
	.file = fc_file,
	.shutdown = fc_shutdown,
};
