/* main.c - dsecd: start-up, signals and a clean shutdown.
 *
 * Order matters: settings, state directory, daemonize (before any thread
 * exists), the loop, the worker pool, backends, and only then the API
 * endpoint.  SIGTERM stops taking new work, destroys every sandbox, waits up
 * to shutdown_grace for in-flight operations, then tears down in reverse.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "daemon.h"
#include "dsec.h"
#include "log.h"
#include "ops.h"
#include "rlc.h"

struct dsecd *dsecd_global;

static void destroy_one(struct dsecd *d, struct dsecd_sb *sb, void *arg)
{
	if (sb->state == SB_READY || sb->state == SB_FAILED)
		dsecd_sb_destroy(d, sb, "daemon shutting down", NULL);
}

static void shutdown_check(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct dsecd *d = dsec_container_of(w, struct dsecd, shutdown_timer);

	if ((d->ops_inflight == 0 && d->replies_held == 0 && dsecd_pool_pending(d->pool) == 0 &&
	     dsecd_pool_pending(d->serve_pool) == 0 && !dsecd_gossip_leaving(d)) ||
	    ev_now(loop) >= d->shutdown_deadline) {
		if (d->ops_inflight)
			log_warn("shutdown: %u operations still running after %.0f s; stopping anyway",
				 d->ops_inflight, d->conf.shutdown_grace);
		ev_timer_stop(loop, w);
		ev_break(loop, EVBREAK_ALL);
	}
}

static void signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct dsecd *d = w->data;

	if (d->shutting_down) {
		log_warn("second signal %d: stopping now", w->signum);
		ev_break(loop, EVBREAK_ALL);
		return;
	}
	log_info("signal %d: shutting down (%zu sandboxes, %u operations in flight)", w->signum,
		 d->nsandboxes, d->ops_inflight);
	d->shutting_down = true;
	/* The others see this node leave, not die. */
	dsecd_gossip_leave(d);
	/* Commands end at once, whichever backend runs them: those of
	 * sandboxes with their destruction, one-shot calls a backend runs
	 * without a sandbox of ours through its shutdown. */
	for (struct dsecd_backend *b = d->backends; b; b = b->next)
		if (b->ops->shutdown)
			b->ops->shutdown(b->be);
	dsecd_sb_foreach(d, destroy_one, NULL);
	d->shutdown_deadline = ev_now(loop) + d->conf.shutdown_grace;
	ev_timer_init(&d->shutdown_timer, shutdown_check, 0, 0.01);
	ev_timer_start(loop, &d->shutdown_timer);
}

/* SIGHUP: reopen the log file in place, for log rotation. */
static void hup_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct dsecd *d = w->data;
	int fd;

	if (!d->log_path)
		return;
	fd = open(d->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	if (fd < 0) {
		log_error("cannot reopen log file '%s': %s", d->log_path, strerror(errno));
		return;
	}
	dup3(fd, d->log_fd, O_CLOEXEC);
	if (!d->conf.foreground)
		dup2(fd, 2);
	close(fd);
	log_info("log file reopened");
}

/* Makes the parent directory of every ipc:// socket. */
static int prepare_listen(struct dsecd *d, struct dsec_err *err)
{
	for (char **u = d->conf.listen; *u; u++) {
		if (strncmp(*u, "ipc://", 6))
			continue;
		_cleanup_free_ char *dir = xstrdup(*u + 6);
		char *slash = strrchr(dir, '/');
		if (!slash || slash == dir)
			continue;
		*slash = '\0';
		int rc = dsec_mkdir_p(dir, 0755);
		if (rc < 0)
			return dsec_err_set(err, -rc, "cannot create '%s' for '%s': %s", dir, *u,
					    strerror(-rc));
	}
	return 0;
}

static int daemonize(void)
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid > 0)
		_exit(0);
	setsid();
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0)
		_exit(0);
	if (chdir("/") < 0)
		return -errno;
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		if (fd > 1)
			close(fd);
	}
	return 0;
}

/* One daemon per state directory: a second one would clean up the first
 * one's sandboxes as leftovers.  The lock lives as long as the process. */
static int lock_state_dir(const char *dir, struct dsec_err *err)
{
	_cleanup_free_ char *path = xasprintf("%s/dsecd.lock", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

	if (fd < 0)
		return dsec_err_set(err, errno, "cannot open '%s': %s", path, strerror(errno));
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		close(fd);
		if (e == EWOULDBLOCK)
			return dsec_err_setc(err, DSEC_E_EXISTS, EEXIST,
					     "another dsecd is using state directory '%s'", dir);
		return dsec_err_set(err, e, "cannot lock '%s': %s", path, strerror(e));
	}
	return fd;
}

static int write_pid_file(const char *path)
{
	char buf[32];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		return -errno;
	snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	int rc = dsec_write_all(fd, buf, strlen(buf));
	close(fd);
	return rc;
}

int main(int argc, char **argv)
{
	static struct dsecd daemon_state;
	struct dsecd *d = &daemon_state;
	struct dsec_err err;
	struct timeval tv;
	int rc, log_fd = -1;
	bool serving = false;
	char *pid_file;

	dsecd_global = d;
	dsec_err_clear(&err);
	dsec_log_set_ident("dsecd");
	rc = dsecd_conf_load(&d->conf, argc, argv, &err);
	if (rc == 1)
		return 0;
	if (rc < 0) {
		fprintf(stderr, "dsecd: %s\n", err.msg);
		return 2;
	}
	dsec_log_set_level(d->conf.log_level);
	if ((rc = dsec_mkdir_p(d->conf.state_dir, 0700)) < 0) {
		fprintf(stderr, "dsecd: cannot create state directory '%s': %s\n",
			d->conf.state_dir, strerror(-rc));
		return 1;
	}
	if (d->conf.log_file || !d->conf.foreground) {
		_cleanup_free_ char *def = xasprintf("%s/dsecd.log", d->conf.state_dir);
		const char *path = d->conf.log_file ? d->conf.log_file : def;
		log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
		if (log_fd < 0) {
			fprintf(stderr, "dsecd: cannot open log file '%s': %s\n", path,
				strerror(errno));
			return 1;
		}
		d->log_path = xstrdup(path);
	}
	if (lock_state_dir(d->conf.state_dir, &err) < 0) {
		fprintf(stderr, "dsecd: %s\n", err.msg);
		return 1;
	}
	if (prepare_listen(d, &err) < 0) {
		fprintf(stderr, "dsecd: %s\n", err.msg);
		return 1;
	}
	if (!d->conf.foreground && daemonize() < 0) {
		fprintf(stderr, "dsecd: cannot daemonize: %s\n", strerror(errno));
		return 1;
	}
	if (log_fd >= 0) {
		dsec_log_set_fd(log_fd);
		if (!d->conf.foreground)
			dup2(log_fd, 2);
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	/* Children are reaped one by one through their pidfds (be_child.h);
	 * SIG_IGN inherited from a parent would reap them before that. */
	signal(SIGCHLD, SIG_DFL);
	pid_file = d->conf.pid_file ? xstrdup(d->conf.pid_file)
				    : xasprintf("%s/dsecd.pid", d->conf.state_dir);

	/* Not libev's default loop: that one reaps with waitpid(-1) on each
	 * SIGCHLD, a walk of every child (every sandbox's init). */
	d->loop = ev_loop_new(EVFLAG_AUTO);
	if (!d->loop) {
		log_error("cannot make the event loop");
		return 1;
	}
	d->started = ev_now(d->loop);
	gettimeofday(&tv, NULL);
	d->started_wall = (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
	dsecd_sb_table_init(d);
	d->op_stats = xcalloc(DSEC_OP__COUNT, sizeof(*d->op_stats));
	if ((rc = dsecd_pool_new(&d->pool, d->loop, (unsigned)d->conf.workers)) < 0 ||
	    (rc = dsecd_pool_new(&d->serve_pool, d->loop, DSECD_SERVE_THREADS)) < 0) {
		log_error("cannot start worker pool: %s", strerror(-rc));
		return 1;
	}
	/* Descriptors are what a node holding thousands of sandboxes runs
	 * out of first: the soft limit goes up to the hard one (info says
	 * both). */
	struct rlimit nofile;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		rlim_t was = nofile.rlim_cur;
		nofile.rlim_cur = nofile.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &nofile) == 0)
			log_info("descriptors: soft limit raised from %llu to %llu (the hard limit)",
				 (unsigned long long)was, (unsigned long long)nofile.rlim_max);
	}
	if (rlc_open(d, &err) < 0) {
		log_error("%s", err.msg);
		rc = 1;
		goto out_pool;
	}
	if (dsecd_images_open(d, &err) < 0) {
		log_error("%s", err.msg);
		rc = 1;
		goto out_pool;
	}
	if (dsecd_backends_load(d, &err) < 0) {
		log_error("%s", err.msg);
		rc = 1;
		goto out_pool;
	}
	if (dsecd_cluster_open(d, &err) < 0 || dsecd_place_open(d, &err) < 0) {
		log_error("%s", err.msg);
		rc = 1;
		goto out_backends;
	}
	if (dsecd_warm_start(d, &err) < 0) {
		log_error("%s", err.msg);
		rc = 1;
		goto out_backends;
	}
	int gid = -1;
	if (d->conf.socket_group) {
		struct group *g = getgrnam(d->conf.socket_group);
		if (!g) {
			log_error("no group '%s' (socket_group)", d->conf.socket_group);
			rc = 1;
			goto out_backends;
		}
		gid = (int)g->gr_gid;
	}
	struct dsecd_server_opts so = {
		.urls = d->conf.listen,
		.mode = d->conf.socket_mode,
		.gid = gid,
		.remote = d->conf.listen_remote,
		.max_inflight = (unsigned)d->conf.max_inflight,
		.recv_max = d->conf.max_frame * 2 + (64u << 10),
		.tls_cert = d->conf.tls_cert,
		.tls_ca = d->conf.tls_ca,
	};
	if (dsecd_server_new(&d->server, d->loop, &so, dsecd_handle, d, &err) < 0) {
		log_error("%s", err.msg);
		rc = 1;
		goto out_backends;
	}
	/* Only now is the endpoint ours: a second dsecd that failed to listen
	 * must not touch the first one's pid file or socket. */
	serving = true;
	if (dsecd_gossip_open(d, &err) < 0 || dsecd_metrics_open(d, &err) < 0) {
		log_error("%s", err.msg);
		rc = 1;
		dsecd_server_free(d->server);
		d->server = NULL;
		goto out_backends;
	}
	if ((rc = write_pid_file(pid_file)) < 0)
		log_warn("cannot write pid file '%s': %s", pid_file, strerror(-rc));
	ev_signal_init(&d->sigterm, signal_cb, SIGTERM);
	d->sigterm.data = d;
	ev_signal_start(d->loop, &d->sigterm);
	ev_signal_init(&d->sigint, signal_cb, SIGINT);
	d->sigint.data = d;
	ev_signal_start(d->loop, &d->sigint);
	d->log_fd = log_fd;
	ev_signal_init(&d->sighup, hup_cb, SIGHUP);
	d->sighup.data = d;
	ev_signal_start(d->loop, &d->sighup);
	log_info("dsecd %s serving as node '%s' (pid %d, state %s)", DSEC_VERSION, d->conf.node,
		 (int)getpid(), d->conf.state_dir);

	ev_run(d->loop, 0);

	/* Blocking work finishes first, while its replies can still go out and
	 * the backends it calls back into are still loaded. */
	dsecd_pool_free(d->pool);
	d->pool = NULL;
	dsecd_pool_free(d->serve_pool);
	d->serve_pool = NULL;
	rlc_close(d);
	dsecd_gossip_close(d);
	dsecd_cluster_close(d);
	dsecd_place_close(d);
	dsecd_metrics_close(d);
	log_info("stopping: closing the API endpoint");
	dsecd_server_free(d->server);
	d->server = NULL;
	rc = 0;
out_backends:
	dsecd_gossip_close(d);
	dsecd_cluster_close(d);
	dsecd_place_close(d);
	dsecd_warm_free(d);
	dsecd_backends_unload(d);
out_pool:
	rlc_close(d);
	dsecd_pool_free(d->pool);
	dsecd_pool_free(d->serve_pool);
	/* Sandboxes freed during teardown, and those the backends left. */
	dsecd_sb_table_free(d);
	dsecd_images_close(d);
	if (serving) {
		for (char **u = d->conf.listen; u && *u; u++)
			if (!strncmp(*u, "ipc://", 6))
				unlink(*u + 6);
		unlink(pid_file);
	}
	free(pid_file);
	log_info("stopped");
	dsecd_conf_free(&d->conf);
	free(d->op_stats);
	d->op_stats = NULL;
	ev_loop_destroy(d->loop);
	if (log_fd >= 0)
		close(log_fd);
	free(d->log_path);
	return rc;
}
