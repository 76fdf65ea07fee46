/* zygote.c - the fncall backend: the connection to a runtime's zygotes,
 * starting them, their death and restart, and picking one for a call.
 */
#include "fc.h"

/* ---- the zygote connection ---------------------------------------------- */

static void rt_down(struct fc_rt *rt, const char *why);

static int send_dgram(int sock, const void *data, size_t len, const int *fds, int nfds)
{
	_Static_assert(FC_MAX_FDS <= BE_IO_MAXFDS, "more fds than be_send_fds carries");
	return be_send_fds(sock, data, len, fds, nfds, MSG_DONTWAIT);
}

void out_free(struct fc_out *o)
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
bool rt_send(struct fc_rt *rt, struct dsec_pk *p, int *fds, int nfds, uint64_t job)
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
void rt_drop_out(struct fc_rt *rt)
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
/* What the zygote's "ready" says besides that it is: whether it counts
 * the calls its filter refuses (a kernel without USER_NOTIF: no). */
static void rt_ready_msg(struct fc_rt *rt, const msgpack_object *root)
{
	const msgpack_object *o = dsec_map_get(root, "sc");

	rt->sc = o && o->type == MSGPACK_OBJECT_BOOLEAN && o->via.boolean;
}

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
			rt_ready_msg(rt, m.root);
			rt->backoff = 0;
			rt->up = true;
			rt->failing = false;
		}
		dsec_msg_free(&m);
		if (rt->sock < 0)
			return;	/* a report took the runtime down */
	}
}

static void rt_child_cb(struct ev_loop *loop, struct be_child *c)
{
	struct fc_rt *rt = dsec_container_of(c, struct fc_rt, cw);

	(void)loop;
	if (rt->pid == c->pid) {
		char why[64];

		snprintf(why, sizeof(why), "exited with status %d", c->status);
		rt->pid = 0;
		rt_down(rt, why);
	}
}

/* Fork + exec the zygote.  After fork only async-signal-safe calls. */
/* Warm units each zygote keeps: pool_size is per runtime, shared out. */
uint64_t rt_pool(const struct fc_be *be)
{
	uint64_t n = be->nshards ? be->nshards : 1;

	return (be->conf.pool_size + n - 1) / n;
}

int rt_spawn(struct fc_rt *rt, struct dsec_err *err)
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
	be_child_start(be->host->loop, &rt->cw, pid, rt_child_cb);
	return 0;
}

/* Kill the zygote (its units die with it) and forget everything it had;
 * what was queued for it (rt->out) stays for the next one. */
void rt_kill(struct fc_rt *rt)
{
	struct ev_loop *loop = rt->be->host->loop;

	ev_io_stop(loop, &rt->rw);
	ev_io_stop(loop, &rt->ww);
	if (rt->sock >= 0)
		close(rt->sock);
	rt->sock = -1;
	if (rt->pid > 0)
		kill(rt->pid, SIGKILL);
	be_child_hand_over(loop, &rt->cw, &rt->be->reap);
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

void respawn_cb(struct ev_loop *loop, ev_timer *w, int revents)
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
int rt_wait_ready(struct fc_rt *rt, struct dsec_err *err)
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
		if (t && !strcmp(t, "ready"))
			rt_ready_msg(rt, m.root);
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
struct fc_rt *rt_find(struct fc_be *be, const char *name)
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
