/* control.c - the container backend: pause and resume, snapshot, usage
 * and destroy of a sandbox.
 */
#include "ct.h"

/* ---- pause and resume --------------------------------------------------------- */

/* Pause freezes the sandbox's cgroup, which holds pid 1 and every exec
 * (their groups are its children), so nothing of it runs; then it asks
 * the kernel to reclaim the group's memory.  Execs in flight are frozen
 * with the rest: their timers stop and their duration leaves the paused
 * time out, so a pause never makes a command time out.  The loop side
 * marks the sandbox paused when the freeze starts, so no timer fires and
 * no cleanup starts on a group that is being frozen. */

/* Cleanups of execs that ended while paused: dropped, the teardown does it. */
void drop_held(struct ct_sb *sb)
{
	while (sb->held) {
		struct ct_xclean *c = sb->held;

		sb->held = c->next;
		if (c->keep)
			sb->keeping = false;
		cgref_put(c->cg);
		sb->busy--;
		free(c);
	}
}

static void stop_exec_timers(struct ct_sb *sb)
{
	struct ev_loop *loop = sb->be->host->loop;

	sb->paused = true;
	sb->paused_at = dsec_now_ns();
	for (struct ct_exec *x = sb->execs; x; x = x->next) {
		x->left = -1;
		if (ev_is_active(&x->timer)) {
			x->left = ev_timer_remaining(loop, &x->timer);
			ev_timer_stop(loop, &x->timer);
		}
	}
}

/* Running again: timers go on where they stopped, held cleanups start. */
static void restart_exec_timers(struct ct_sb *sb)
{
	struct ev_loop *loop = sb->be->host->loop;
	uint64_t was = dsec_now_ns() - sb->paused_at;

	sb->paused = false;
	for (struct ct_exec *x = sb->execs; x; x = x->next) {
		x->t0 += was;
		if (x->left >= 0) {
			ev_timer_set(&x->timer, x->left, 0);
			ev_timer_start(loop, &x->timer);
		}
		x->left = -1;
	}
	while (sb->held) {
		struct ct_xclean *c = sb->held;

		sb->held = c->next;
		ct_submit(sb->be, xclean_work, xclean_done, c);
	}
}

static int switch_err(struct ct_pwork *w, const char *what, int rc)
{
	if (rc == -EOPNOTSUPP)
		return dsec_err_setc(&w->err, DSEC_E_UNSUPPORTED, EOPNOTSUPP,
				     "cannot %s sandbox '%s': this host has no cgroup freezer",
				     what, w->sb->id);
	if (rc == -ETIMEDOUT)
		return dsec_err_setc(&w->err, DSEC_E_TIMEOUT, ETIMEDOUT,
				     "cannot %s sandbox '%s': not frozen after %d ms "
				     "(a process stuck in the kernel?); it keeps running",
				     what, w->sb->id, CT_FREEZE_TIMEOUT_MS);
	return dsec_err_setc(&w->err, DSEC_E_BACKEND, -rc, "cannot %s sandbox '%s': %s", what,
			     w->sb->id, strerror(-rc));
}

void pause_work(void *arg)
{
	struct ct_pwork *w = arg;
	int rc;

	if ((rc = be_cg_freeze(w->sb->cg, CT_FREEZE_TIMEOUT_MS)) < 0) {
		w->rc = switch_err(w, "pause", rc);
		return;
	}
	/* Best effort: the sandbox is paused whatever the kernel gives back. */
	be_cg_reclaim(w->sb->cg, &w->before, &w->after);
	/* An idle sandbox does not keep an empty exec group (a memory cgroup
	 * costs the kernel some 150 KiB here): the next command makes one. */
	if (w->spare)
		be_cg_remove(w->spare->cg);
}

static void resume_work(void *arg)
{
	struct ct_pwork *w = arg;
	int rc;

	if ((rc = be_cg_thaw(w->sb->cg)) < 0)
		w->rc = switch_err(w, "resume", rc);
}

static void switch_done(struct ct_pwork *w, bool pause)
{
	struct ct_sb *sb = w->sb;
	struct ct_be *be = sb->be;

	sb->busy--;
	sb->switching = false;
	if (w->spare)
		cgref_put(w->spare);
	if (!sb->destroying && (pause ? w->rc < 0 : w->rc == 0))
		restart_exec_timers(sb);
	if (pause && w->rc == 0)
		LOG(be, DSEC_LOG_DEBUG, "container: paused '%s' in %.3f ms, memory %" PRIu64
		    " -> %" PRIu64 " KiB", sb->id, (double)(dsec_now_ns() - w->t0) / 1e6,
		    w->before >> 10, w->after >> 10);
	defer(be, w->done, w->arg, w->rc, &w->err);
	free(w);
	sb_maybe_destroy(sb);
}

void pause_done(void *arg)
{
	switch_done(arg, true);
}

static void resume_done(void *arg)
{
	switch_done(arg, false);
}

static int start_switch(struct ct_sb *sb, bool pause, dsec_be_done_fn done, void *arg,
			struct dsec_err *err)
{
	struct ct_pwork *w;

	if (sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT, "sandbox '%s' is being destroyed",
				     sb->id);
	if (sb->switching || sb->snapping)
		return dsec_err_setc(err, DSEC_E_INVALID, EBUSY,
				     "a %s of sandbox '%s' is in progress",
				     sb->snapping ? "snapshot" : "pause or resume", sb->id);
	if (sb->paused == pause) {
		defer(sb->be, done, arg, 0, NULL);	/* already there */
		return 0;
	}
	w = xcalloc(1, sizeof(*w));
	w->sb = sb;
	w->done = done;
	w->arg = arg;
	w->t0 = dsec_now_ns();
	if (pause) {
		stop_exec_timers(sb);
		w->spare = sb->spare;
		sb->spare = NULL;
	}
	sb->switching = true;
	sb->busy++;
	if (pause && (sb->fbusy || sb->fwait)) {
		/* The file server is in the sandbox's cgroup: frozen in the
		 * middle of an operation, it would hold a pool thread until the
		 * resume.  The pause goes once the operations queued before it
		 * have ended (dsecd sends no more until it completes). */
		sb->pause_wait = w;
		return 0;
	}
	ct_submit(sb->be, pause ? pause_work : resume_work, pause ? pause_done : resume_done, w);
	return 0;
}

int ct_pause(void *vsb, dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	return start_switch(vsb, true, done, arg, err);
}

int ct_resume(void *vsb, dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	return start_switch(vsb, false, done, arg, err);
}
/* ---- snapshot ------------------------------------------------------------- */

struct ct_swork {
	struct ct_sb *sb;		/* sandbox */
	dsec_be_read_diff_fn read;	/* the daemon's reader */
	void *read_arg;			/* its argument */
	dsec_be_done_fn done;		/* caller's */
	void *arg;			/* its argument */
	int rc;				/* 0 or -errno */
	struct dsec_err err;		/* why */
	double frozen;			/* seconds the sandbox was frozen */
	bool paused;			/* it was paused: leave the freezer alone */
};

/* On a pool thread: freeze the sandbox's cgroup (every process, execs
 * included; a paused sandbox is frozen already and stays so), reach the upper dir through the fd its init keeps
 * (/proc/INIT/fd/3, a tmpfs of the sandbox's mount namespace that the
 * host's tree does not show), check through the pidfd that the pid was
 * still the init's when we opened it, let the daemon read it, thaw. */
static void snap_work(void *arg)
{
	struct ct_swork *w = arg;
	struct ct_sb *sb = w->sb;
	struct dsec_be_diff up = { .kind = DSEC_BE_DIFF_UPPER };
	char path[64], self[64];
	double t0 = dsec_now();
	int fd, rc;

	if (!w->paused && (rc = be_cg_freeze(sb->cg, CT_FREEZE_TIMEOUT_MS)) < 0) {
		w->rc = dsec_err_setc(&w->err, rc == -EOPNOTSUPP ? DSEC_E_UNSUPPORTED
				      : rc == -ETIMEDOUT ? DSEC_E_TIMEOUT : DSEC_E_BACKEND,
				      -rc, "cannot freeze sandbox '%s': %s", sb->id,
				      rc == -EOPNOTSUPP ? "no cgroup freezer on this host"
				      : strerror(-rc));
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)sb->init, CT_FD_UPPER);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || ct_init_check(sb) < 0) {
		w->rc = dsec_err_setc(&w->err, DSEC_E_BACKEND, fd < 0 ? errno : ESRCH,
				      "cannot reach the upper dir of sandbox '%s': %s", sb->id,
				      fd < 0 ? strerror(errno) : "its init is gone");
	} else {
		snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
		up.path = self;
		up.id_base = sb->ubase;
		up.id_count = sb->ubase ? CT_URANGE : 0;
		up.userxattr = sb->ubase != 0;	/* container-init mounts so in a user namespace */
		w->rc = w->read(w->read_arg, &up, &w->err);
	}
	if (fd >= 0)
		close(fd);
	if (!w->paused && (rc = be_cg_thaw(sb->cg)) < 0)
		LOG(sb->be, DSEC_LOG_ERROR, "container: cannot thaw sandbox '%s': %s", sb->id,
		    strerror(-rc));
	w->frozen = dsec_now() - t0;
}

static void snap_done(void *arg)
{
	struct ct_swork *w = arg;
	struct ct_sb *sb = w->sb;

	sb->snapping = false;
	sb->busy--;
	LOG(sb->be, DSEC_LOG_INFO, "container: sandbox '%s' was frozen %.3f s for a snapshot",
	    sb->id, w->frozen);
	file_next(sb);
	ct_continue(sb);	/* a checkpoint's processes: its files are taken */
	defer(sb->be, w->done, w->arg, w->rc, &w->err);
	free(w);
	sb_maybe_destroy(sb);
}

int ct_snapshot(void *vsb, dsec_be_read_diff_fn read, void *read_arg,
		dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct ct_sb *sb = vsb;
	struct ct_swork *w;

	if (sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT, "sandbox '%s' is being destroyed",
				     sb->id);
	if (!sb->lower || sb->skel)
		return dsec_err_setc(err, DSEC_E_UNSUPPORTED, ENOTSUP,
				     "sandbox '%s' was not made from an image: only those can be "
				     "snapshotted", sb->id);
	if (sb->snapping || sb->switching)
		return dsec_err_setc(err, DSEC_E_INVALID, EBUSY,
				     "a %s of sandbox '%s' is in progress",
				     sb->snapping ? "snapshot" : "pause or resume", sb->id);
	w = xcalloc(1, sizeof(*w));
	w->sb = sb;
	w->read = read;
	w->read_arg = read_arg;
	w->done = done;
	w->arg = arg;
	w->paused = sb->paused;
	sb->snapping = true;
	sb->busy++;
	ct_submit(sb->be, snap_work, snap_done, w);
	return 0;
}

/* ---- usage ------------------------------------------------------------------ */

struct ct_uwork {
	struct ct_sb *sb;		/* sandbox */
	struct dsec_be_usage *out;	/* caller's */
	struct dsec_be_usage u;		/* what the pool thread read */
	dsec_be_done_fn done;		/* caller's */
	void *arg;			/* its argument */
};

/* The sandbox's group, and its writable layer's tmpfs through the init's
 * descriptor of the upper dir (as snapshot reaches it). */
static void usage_work(void *arg)
{
	struct ct_uwork *w = arg;
	struct ct_sb *sb = w->sb;
	struct statfs st;
	char path[64];
	int fd;

	be_cg_usage(sb->cg, &w->u);
	if (sb->cg_kept) {	/* the group was another sandbox's (cg_take) */
		w->u.cpu_ns = w->u.cpu_ns > sb->cg_cpu0 ? w->u.cpu_ns - sb->cg_cpu0 : 0;
		if (!sb->cg_peak)
			w->u.have &= ~(uint32_t)DSEC_USAGE_MEMORY_PEAK;
	}
	if (sb->net_ready && (fd = ct_init_open(sb, "ns/net", O_RDONLY)) >= 0) {
		struct dsec_err e;

		if (be_netns_denied(fd, &w->u.egress_denied, &e) == 0)
			w->u.have |= DSEC_USAGE_EGRESS_DENIED;
		close(fd);
	}
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)sb->init, CT_FD_UPPER);
	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		if (fstatfs(fd, &st) == 0) {
			w->u.disk = (uint64_t)(st.f_blocks - st.f_bfree) * (uint64_t)st.f_bsize;
			w->u.have |= DSEC_USAGE_DISK;
		}
		close(fd);
	}
}

static void usage_done(void *arg)
{
	struct ct_uwork *w = arg;
	struct ct_sb *sb = w->sb;

	sb->busy--;
	if (sb->sc_on && w->out->struct_size >= offsetof(struct dsec_be_usage, seccomp_denied) +
						sizeof(w->u.seccomp_denied)) {
		w->u.seccomp_denied = sb->sc_init + sb->sc_helpers;
		w->u.have |= DSEC_USAGE_SECCOMP_DENIED;
	}
	be_cg_usage_put(w->out, &w->u);
	defer(sb->be, w->done, w->arg, 0, NULL);
	free(w);
	sb_maybe_destroy(sb);
}

int ct_usage(void *vsb, struct dsec_be_usage *out, dsec_be_done_fn done, void *arg,
	     struct dsec_err *err)
{
	struct ct_sb *sb = vsb;
	struct ct_uwork *w;

	if (sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT, "sandbox '%s' is being destroyed",
				     sb->id);
	w = xcalloc(1, sizeof(*w));
	w->sb = sb;
	w->out = out;
	w->u.struct_size = sizeof(w->u);
	w->done = done;
	w->arg = arg;
	sb->busy++;
	ct_submit(sb->be, usage_work, usage_done, w);
	return 0;
}

/* ---- refused system calls (ct_exec.h) --------------------------------------
 * The init's counts are cumulative and arrive by two ways (the command
 * socket, status lines) in any order: the largest is the one. */

void ct_count_init(struct ct_sb *sb, uint64_t total)
{
	sb->sc_on = true;
	if (total > sb->sc_init)
		sb->sc_init = total;
}

void ct_count_cmd(struct ct_sb *sb, struct dsec_exec_res *res, uint64_t denied, bool helper)
{
	if (res) {
		uint64_t n = res->seccomp_denied + denied;

		res->seccomp_denied = n < UINT32_MAX ? (uint32_t)n : UINT32_MAX;
	}
	if (helper)
		sb->sc_helpers += denied;
}

/* ---- destroy ---------------------------------------------------------------- */

/* Whether pid runs no thread but its first (or is gone): /proc/PID/task
 * has two links and one per thread. */
static bool init_alone(pid_t pid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	return stat(path, &st) < 0 || st.st_nlink <= 3;
}

/* Waits until the inits of sbs[0..n) run no thread but their own, up to
 * CT_ALONE_WAIT_NS for all of them.  An init's seccomp watcher thread
 * (init-count.c) ends once dsecd's end of the control socket is closed
 * (ct_ctl_close, before this).  An init killed while its thread is still
 * there makes its exit the kernel's search of every process on the host
 * for another owner of the memory they share (mm_update_next_owner): at
 * 2,000 sandboxes (8,000 tasks) 1.25 ms of CPU, in one destroy of eight,
 * the watcher not having run yet.  Called with the init still our child
 * (not reaped: pids[i] is 0 for one that was), so its pid is its own. */
void ct_wait_alone(const pid_t *pids, size_t n)
{
	uint64_t until = dsec_now_ns() + CT_ALONE_WAIT_NS;

	for (size_t i = 0; i < n; i++)
		while (pids[i] > 0 && !init_alone(pids[i]) && dsec_now_ns() < until)
			usleep(100);
}

/* The init ct_wait_alone is to wait for before sb's kill: 0 for one reaped
 * (its pid may be another's) or frozen (its watcher cannot run, and the
 * kill comes with a thaw, its threads dying together). */
pid_t ct_alone_pid(const struct ct_sb *sb)
{
	return sb->helper > 0 && !sb->cw.ended && !sb->paused && !sb->snapping ? sb->helper : 0;
}

static void destroy_work(void *arg)
{
	struct ct_sb *sb = arg;

	ct_wait_alone(&sb->alone_pid, 1);
	cg_keep(sb);
	sb_teardown(sb);
}

static void destroy_done(void *arg)
{
	struct ct_sb *sb = arg;
	struct ct_be *be = sb->be;

	defer(be, sb->ddone, sb->darg, 0, NULL);
	sb_free(sb);
	cg_trim_start(be);
	ct_net_destroyed(be);
}

/* ---- the init, reached by its pid ------------------------------------------
 *
 * An idle sandbox keeps one descriptor of dsecd's, its control socket: not
 * a pidfd of its init, nor its root, cgroups or namespaces (a node of
 * 10,000 sandboxes would run out of descriptors).  What needs them opens
 * them through /proc/PID and checks, after the open, that the pid is still
 * the init's: its start time is the one the init had when it was made.  A
 * pid taken again is another process's, started later. */

/* Field 22 of /proc/PID/stat, the start time in clock ticks; 0 = gone. */
uint64_t ct_proc_start(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long long t = 0;
	const char *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	if (!(p = strrchr(buf, ')')))	/* past the command, which may hold anything */
		return 0;
	/* ") S ppid ..." : the start time is the 20th field after the ')' */
	if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
		   "%*d %*d %llu", &t) != 1)
		return 0;
	return t;
}

/* 0 while sb's init is alive under its pid, -ESRCH when it is not. */
int ct_init_check(const struct ct_sb *sb)
{
	if (sb->init <= 0 || !sb->init_start || ct_proc_start(sb->init) != sb->init_start)
		return -ESRCH;
	return 0;
}

/* What a helper entering the sandbox gets (close-on-exec, the caller's):
 * *pidfd of its init and *root, an O_PATH descriptor of its root, both
 * checked once after they are open.  0, or -errno with neither open. */
int ct_init_fds(const struct ct_sb *sb, int *pidfd, int *root)
{
	char path[64];
	int e;

	*pidfd = *root = -1;
	if (sb->init <= 0 || !sb->init_start)
		return -ESRCH;
	snprintf(path, sizeof(path), "/proc/%d/root", (int)sb->init);
	if ((*pidfd = (int)syscall(SYS_pidfd_open, sb->init, 0)) < 0 ||
	    (*root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		e = -errno;
	else if ((e = ct_init_check(sb)) == 0)
		return 0;
	if (*pidfd >= 0)
		close(*pidfd);
	if (*root >= 0)
		close(*root);
	*pidfd = *root = -1;
	return e;
}

/* A new descriptor of /proc/INIT/WHAT ("root", "ns/net"), opened with
 * flags, the caller's; -errno. */
int ct_init_open(const struct ct_sb *sb, const char *what, int flags)
{
	char path[64];
	int fd;

	if (sb->init <= 0 || !sb->init_start)
		return -ESRCH;
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)sb->init, what);
	if ((fd = open(path, flags | O_CLOEXEC)) < 0)
		return -errno;
	if (ct_init_check(sb) < 0) {
		close(fd);
		return -ESRCH;
	}
	return fd;
}

void sb_maybe_destroy(struct ct_sb *sb)
{
	struct ct_be *be = sb->be;

	if (!sb->destroying || sb->busy)
		return;
	if (sb->spare && sb->spare->refs == 1) {	/* kept with the sandbox's group */
		sb->keep_spare = sb->spare->cg;
		free(sb->spare);
		sb->spare = NULL;
	}
	spare_put(sb);
	sb_unlink(sb);
	/* Its network namespace goes back to the pool, or is dropped with
	 * others, once its processes are gone (sb_teardown, netpool.c): open
	 * it while its init is there to lead to it. */
	if (sb->net_pooled && !sb->lost && sb->netns < 0) {
		int fd = ct_init_open(sb, "ns/net", O_RDONLY);

		sb->netns = fd < 0 ? -1 : fd;
	}
	/* Our references keep the mount namespace alive: drop them first. */
	files_stop(sb);
	sb->init_start = 0;	/* nothing reaches the init from now on */
	ct_ctl_close(sb);
	sb->alone_pid = ct_alone_pid(sb);
	ct_submit(be, destroy_work, destroy_done, sb);
}

int ct_destroy(void *vsb, dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct ct_sb *sb = vsb;

	if (sb->destroying)
		return dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT,
				     "sandbox '%s' is already being destroyed", sb->id);
	sb->destroying = true;
	sb->ddone = done;
	sb->darg = arg;
	drop_held(sb);
	while (sb->execs) {
		struct ct_exec *x = sb->execs;
		struct dsec_err e;

		dsec_err_setc(&e, DSEC_E_NOT_FOUND, ECANCELED, "sandbox '%s' was destroyed", sb->id);
		exec_finish(x, -ECANCELED, &e);	/* unlinks x */
	}
	be_sess_set_free(sb->sess);
	sb->sess = NULL;
	sb_maybe_destroy(sb);
	return 0;
}
