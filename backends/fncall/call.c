/* call.c - the fncall backend: a command in flight (its output, timeout,
 * the zygote's reports and its end) and how one starts.
 */
#include "fc.h"

/* ---- calls ---------------------------------------------------------------- */

void call_close(struct fc_call *c)
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

/* Decide the result; done is called from call_reap. */
void call_finish(struct fc_call *c, int rc)
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
	c->reap.fn = call_reap;
	be->host->defer(be->host, &c->reap);
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

/* Kills c's unit.  A job still queued for a zygote is not sent at all
 * (call_finish drops it). */
void send_kill(struct fc_call *c)
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

/* The calls the filter refused while the call ran, o (NULL when its
 * zygote does not count): in its result and its sandbox's total. */
static void call_count(struct fc_call *c, const msgpack_object *o)
{
	uint64_t n;

	if (!o || o->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
		if (c->sb)
			c->sb->sc_lost = true;
		return;
	}
	n = o->via.u64;
	c->res->seccomp_denied = n < UINT32_MAX ? (uint32_t)n : UINT32_MAX;
	if (c->sb)
		c->sb->sc_denied += n;
}

/* The zygote reported on job id. */
void call_report(struct fc_be *be, const msgpack_object *m)
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
	call_count(c, dsec_map_get(m, "sc"));
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
int call_start(struct fc_be *be, struct fc_rt *rt, struct fc_sb *sb,
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
