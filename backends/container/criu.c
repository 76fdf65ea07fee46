/* criu.c - the container backend: a sandbox's shell sessions checkpointed
 * and restored into a fork of it (fork with processes, DESIGN.md).
 *
 * What of a sandbox outlives a command is its shell sessions (a plain
 * command's leftovers are killed when it completes), so they are what a
 * fork carries.  checkpoint runs container-criu (criu inside the
 * session's mount namespace: it dumps no mounts) on the pool for each idle
 * session: `criu dump --leave-stopped` of the shell's tree into DIR/NAME
 * (continued once the snapshot that follows has taken the files, so that
 * they are of the moment of its memory),
 * the network namespace (the pool's, the host's) external, and the inodes
 * of the shell's stdin, stdout, stderr and marker pipe into DIR/NAME/pipes
 * (dsecd's ends show the same).  restore opens each session again under
 * its name through be_session, whose spawn (sessions.c) then starts
 * `container-criu --restore-session` instead of a shell: it restores the
 * tree in a copy of the fork's mount namespace (its root, its files), with
 * the fork's uid range and network namespace, in the new session's
 * cgroup, the new session's pipes given for the old ones, and reports the
 * shell's pid and end on the status pipe as container-init does; the
 * session then starts as a new one would (its first record).
 */
#include <dirent.h>
#include <spawn.h>

#include "ct.h"


/* criu probes the kernel at each start (about 20 ms here) unless it finds
 * its cache, /run/criu.kdat, on a tmpfs: container-criu binds this one as
 * criu's /run (DSEC_CRIU_RUN), so that only the first run probes. */
void ct_criu_up(struct ct_be *be)
{
	_cleanup_free_ char *dir = xasprintf("%s/criu-run", be->host->state_dir);

	if (!be->conf.criu || !*be->conf.criu)
		return;
	while (umount2(dir, MNT_DETACH) == 0)
		;	/* a killed daemon's */
	if ((mkdir(dir, 0700) < 0 && errno != EEXIST) ||
	    mount("dsec-criu", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "size=1m,mode=0700") < 0) {
		LOG(be, DSEC_LOG_WARN, "container: cannot mount criu's cache at '%s' (%s); criu "
		    "probes the kernel at each run", dir, strerror(errno));
		return;
	}
	be->criu_run = xstrdup(dir);
}

void ct_criu_down(struct ct_be *be)
{
	if (!be->criu_run)
		return;
	while (umount2(be->criu_run, MNT_DETACH) == 0)
		;
	rmdir(be->criu_run);
	free(be->criu_run);
	be->criu_run = NULL;
}

/* The environment of container-criu: where criu's /run is. */
static char **criu_env(const struct ct_be *be, char *buf, size_t len, char **env)
{
	env[0] = NULL;
	if (be->criu_run) {
		snprintf(buf, len, "DSEC_CRIU_RUN=%s", be->criu_run);
		env[0] = buf;
	}
	env[1] = NULL;
	return env;
}

/* One session to carry. */
struct ct_carry {
	char *name;			/* session name */
	pid_t shell;			/* its shell on the host */
	unsigned long ino[4];		/* its pipes: stdin, stdout, stderr, marker */
};

/* A checkpoint or restore of one sandbox. */
struct ct_ckpt {
	struct ct_sb *sb;		/* the sandbox (busy meanwhile) */
	char *dir;			/* the checkpoint's directory */
	struct ct_carry *c;		/* the sessions */
	unsigned n, next;		/* their number, the next to restore */
	unsigned *carried;		/* checkpoint: where the count goes */
	dsec_be_done_fn done;		/* the caller's */
	void *arg;			/* its argument */
	int rc;				/* 0 or -errno */
	struct dsec_err err;		/* why */
	char *work;			/* restore: this one's work directory in a session's */
	char *name_out;			/* restore: be_sess_open's name */
	int *stopped;			/* checkpoint: pidfds of the trees criu left stopped */
	unsigned nstopped;		/* their number */
};

static void continue_fds(int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		syscall(SYS_pidfd_send_signal, fds[i], SIGCONT, NULL, 0);
		close(fds[i]);
	}
	free(fds);
}

void ct_continue(struct ct_sb *sb)
{
	if (!sb->stopped)
		return;
	ev_timer_stop(sb->be->host->loop, &sb->cont_w);
	continue_fds(sb->stopped, sb->nstopped);
	sb->stopped = NULL;
	sb->nstopped = 0;
}

static void cont_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct ct_sb *sb = dsec_container_of(w, struct ct_sb, cont_w);

	LOG(sb->be, DSEC_LOG_WARN, "container: sandbox '%s': no snapshot followed its "
	    "checkpoint within %.0f s: its sessions go on", sb->id, CT_CKPT_STOP_MAX);
	ct_continue(sb);
}

/* Pidfds of pid and every descendant (a tree criu left stopped: it
 * cannot fork meanwhile), appended to k->stopped. */
static void stopped_tree(struct ct_ckpt *k, pid_t pid)
{
	char path[64], buf[4096], *p, *end;
	ssize_t n;
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (fd < 0)
		return;
	k->stopped = xrealloc(k->stopped, (k->nstopped + 1) * sizeof(*k->stopped));
	k->stopped[k->nstopped++] = fd;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	for (p = buf; *p; p = end) {
		pid_t c = (pid_t)strtol(p, &end, 10);

		if (end == p)
			break;
		stopped_tree(k, c);
	}
}

static void ckpt_free(struct ct_ckpt *k)
{
	for (unsigned i = 0; i < k->n; i++)
		free(k->c[i].name);
	free(k->c);
	free(k->dir);
	free(k->work);
	free(k->name_out);
	if (k->stopped)
		continue_fds(k->stopped, k->nstopped);
	free(k);
}

/* Runs argv (container-criu) with fd 7 the directory dirfd, and waits:
 * its status, or -errno.  On a pool thread: dsecd reaps no child it does
 * not watch, so the wait is ours. */
static int run_helper(char *const *argv, char *const *envp, int dirfd)
{
	posix_spawn_file_actions_t fa;
	int st, rc;
	pid_t pid;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, dirfd, 7);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	if (rc)
		return -rc;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The first error line of criu's log in dir, for a message. */
static void criu_log_error(const char *dir, const char *log, char *out, size_t len)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", dir, log);
	char line[512];
	FILE *f = fopen(path, "re");

	snprintf(out, len, "see %s", path);
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "Error (") && !strstr(line, "RLIMIT_NOFILE for self")) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(out, len, "%.*s", (int)(len - 1), line);
			break;
		}
	if (f)
		fclose(f);
}

static void ckpt_work(void *arg)
{
	struct ct_ckpt *k = arg;
	struct ct_be *be = k->sb->be;
	_cleanup_free_ char *helper = xasprintf("%s/container-criu", be->host->helper_dir);

	for (unsigned i = 0; i < k->n && !k->rc; i++) {
		struct ct_carry *c = &k->c[i];
		_cleanup_free_ char *d = xasprintf("%s/%s", k->dir, c->name);
		_cleanup_free_ char *pipes = xasprintf("%s/pipes", d);
		_cleanup_free_ char *netns = xasprintf("/proc/%d/ns/net", (int)c->shell);
		char a_pid[16], ext[64], why[256];
		struct stat st;
		FILE *f;
		int fd, rc;

		/* Searchable by the restored tree's root (a fork's uid range, no
		 * capability on the host), which criu lets open its images
		 * through a descriptor of this directory; the directory above
		 * is root's alone. */
		if (mkdir(d, 0755) < 0 || stat(netns, &st) < 0 || !(f = fopen(pipes, "we"))) {
			k->rc = dsec_err_set(&k->err, errno, "cannot checkpoint session '%s' of "
					     "sandbox '%s': %s", c->name, k->sb->id, strerror(errno));
			break;
		}
		fprintf(f, "%lu %lu %lu %lu\n", c->ino[0], c->ino[1], c->ino[2], c->ino[3]);
		fclose(f);
		snprintf(a_pid, sizeof(a_pid), "%d", (int)c->shell);
		snprintf(ext, sizeof(ext), "net[%lu]:sbnet", (unsigned long)st.st_ino);
		char *const argv[] = { helper, a_pid, (char *)"--", be->conf.criu, (char *)"dump",
				       (char *)"-t", a_pid, (char *)"-D", (char *)"/proc/self/fd/7",
				       (char *)"--leave-stopped", (char *)"--network-lock",
				       (char *)"skip", (char *)"--external", ext, (char *)"-o",
				       (char *)"dump.log", (char *)"-v4", NULL };
		char ebuf[PATH_MAX + 32], *env[2];

		fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		rc = fd < 0 ? -errno : run_helper(argv, criu_env(be, ebuf, sizeof(ebuf), env), fd);
		if (fd >= 0)
			close(fd);
		if (rc == 0)
			stopped_tree(k, c->shell);
		if (rc != 0) {
			criu_log_error(d, "dump.log", why, sizeof(why));
			k->rc = dsec_err_setc(&k->err, DSEC_E_BACKEND, EIO,
					      "cannot checkpoint session '%s' of sandbox '%s': "
					      "criu dump: %s", c->name, k->sb->id,
					      rc < 0 ? strerror(-rc) : why);
		}
	}
}

static void ckpt_done(void *arg)
{
	struct ct_ckpt *k = arg;
	struct ct_sb *sb = k->sb;

	if (!k->rc && k->carried)
		*k->carried = k->n;
	/* The trees stay stopped until the snapshot that follows has taken
	 * the files (ct_continue), so that those are of the moment of their
	 * memory; on an error they go on now (ckpt_free). */
	if (!k->rc && k->stopped) {
		ct_continue(sb);
		sb->stopped = k->stopped;
		sb->nstopped = k->nstopped;
		k->stopped = NULL;
		ev_timer_init(&sb->cont_w, cont_cb, CT_CKPT_STOP_MAX, 0);
		ev_timer_start(sb->be->host->loop, &sb->cont_w);
	}
	defer(sb->be, k->done, k->arg, k->rc, k->rc ? &k->err : NULL);
	sb->ckpt = NULL;
	ckpt_free(k);
	sb->busy--;
	sb_maybe_destroy(sb);
}

/* be_sess_each's: the sessions to carry, or k->rc when one is busy. */
static void carry_one(void *arg, const struct be_sess_view *v)
{
	struct ct_ckpt *k = arg;
	struct ct_carry *c;

	if (k->rc)
		return;
	if (!v->idle || v->shell <= 0) {
		k->rc = dsec_err_setc(&k->err, DSEC_E_BUSY, EBUSY, "session '%s' of sandbox '%s' "
				      "is running a command: fork it after it", v->name,
				      k->sb->id);
		return;
	}
	k->c = xrealloc(k->c, (k->n + 1) * sizeof(*k->c));
	c = &k->c[k->n++];
	memset(c, 0, sizeof(*c));
	c->name = xstrdup(v->name);
	c->shell = v->shell;
	for (int i = 0; i < 4; i++) {
		struct stat st;

		c->ino[i] = fstat(v->fds[i], &st) == 0 ? (unsigned long)st.st_ino : 0;
	}
}

/* Whether sb may be checkpointed or restored into (what: "checkpointed",
 * "restored into") now: the node has a criu, the sandbox is ready, not
 * going and no other checkpoint holds it.  0 or -errno. */
static int ckpt_can(const struct ct_sb *sb, const char *what, struct dsec_err *err)
{
	if (!sb->be->conf.criu || !*sb->be->conf.criu)
		return dsec_err_setc(err, DSEC_E_UNSUPPORTED, ENOTSUP, "this node cannot carry "
				     "processes: container.criu names no criu");
	if (!sb->ready || sb->destroying || sb->lost || sb->ckpt)
		return dsec_err_setc(err, DSEC_E_BUSY, EBUSY, "sandbox '%s' cannot be %s now",
				     sb->id, what);
	return 0;
}

int ct_checkpoint(void *vsb, const char *dir, unsigned *carried, dsec_be_done_fn done,
		  void *arg, struct dsec_err *err)
{
	struct ct_sb *sb = vsb;
	struct ct_ckpt *k;
	int rc;

	if ((rc = ckpt_can(sb, "checkpointed", err)) < 0)
		return rc;
	if (sb->paused || sb->switching)
		return dsec_err_setc(err, DSEC_E_UNSUPPORTED, ENOTSUP, "sandbox '%s' is paused: "
				     "its processes are carried from a running sandbox", sb->id);
	/* What the snapshot after it needs (ct_snapshot): its processes wait
	 * stopped for it. */
	if (!sb->lower || sb->skel)
		return dsec_err_setc(err, DSEC_E_UNSUPPORTED, ENOTSUP,
				     "sandbox '%s' was not made from an image: only those can be "
				     "snapshotted", sb->id);
	k = xcalloc(1, sizeof(*k));
	k->sb = sb;
	k->dir = xstrdup(dir);
	k->carried = carried;
	k->done = done;
	k->arg = arg;
	be_sess_each(sb->sess, carry_one, k);
	if (k->rc) {
		rc = k->rc;
		*err = k->err;
		ckpt_free(k);
		return rc;
	}
	sb->ckpt = k;
	sb->busy++;
	ct_submit(sb->be, ckpt_work, ckpt_done, k);
	return 0;
}

/* ---- restore ------------------------------------------------------------- */

static void restore_next(struct ct_ckpt *k);

static void restore_opened(void *arg, int rc, const struct dsec_err *err)
{
	struct ct_ckpt *k = arg;

	if (rc < 0) {
		k->rc = rc;
		k->err = *err;
	}
	free(k->name_out);
	k->name_out = NULL;
	restore_next(k);
}

/* Opens the next session to restore, or completes. */
static void restore_next(struct ct_ckpt *k)
{
	struct ct_sb *sb = k->sb;

	while (!k->rc && k->next < k->n && !sb->destroying) {
		struct ct_carry *c = &k->c[k->next++];
		_cleanup_free_ char *from = xasprintf("%s/%s", k->dir, c->name);
		struct dsec_session_spec spec = { .name = c->name };
		struct dsec_err e;
		int rc;

		/* This restore's own directory (criu's log, the pid file). */
		free(k->work);
		k->work = xasprintf("%s/r.%s", from, strrchr(sb->dir, '/') + 1);
		if (mkdir(k->work, 0700) < 0 && errno != EEXIST) {
			k->rc = dsec_err_set(&k->err, errno, "cannot restore session '%s': %s",
					     c->name, strerror(errno));
			break;
		}
		sb->restore_from = from;
		dsec_err_clear(&e);
		rc = be_sess_open(ct_sess_set(sb), &spec, sb->cwd, &k->name_out, restore_opened, k,
				  &e);
		sb->restore_from = NULL;
		if (rc == 0)
			return;		/* restore_opened goes on */
		k->rc = rc;
		k->err = e;
	}
	if (!k->rc && sb->destroying)
		k->rc = dsec_err_setc(&k->err, DSEC_E_NOT_FOUND, ENOENT,
				      "sandbox '%s' was destroyed", sb->id);
	defer(sb->be, k->done, k->arg, k->rc, k->rc ? &k->err : NULL);
	sb->ckpt = NULL;
	ckpt_free(k);
	sb->busy--;
	sb_maybe_destroy(sb);
}

pid_t ct_criu_spawn(struct ct_sb *sb, const char *cg, const int *fds, int nfds, int ncg)
{
	struct ct_ckpt *k = sb->ckpt;
	char a_ncg[16];

	if (!k || !k->work) {
		errno = EINVAL;
		return -1;
	}
	snprintf(a_ncg, sizeof(a_ncg), "%d", ncg);
	char *const argv[] = { (char *)"container-criu", (char *)"--restore-session",
			       (char *)sb->restore_from, k->work, (char *)cg, a_ncg,
			       sb->be->conf.criu, NULL };
	char ebuf[PATH_MAX + 32], *env[2];

	return spawn_prog(sb->be, "container-criu", argv,
			  criu_env(sb->be, ebuf, sizeof(ebuf), env), fds, nfds, 0, NULL);
}

int ct_restore(void *vsb, const char *dir, dsec_be_done_fn done, void *arg,
	       struct dsec_err *err)
{
	struct ct_sb *sb = vsb;
	struct ct_ckpt *k;
	struct dirent *de;
	DIR *d;
	int rc;

	if ((rc = ckpt_can(sb, "restored into", err)) < 0)
		return rc;
	/* A few names in a directory of the node's own disk. */
	if (!(d = opendir(dir)))
		return dsec_err_set(err, errno, "cannot open the checkpoint '%s': %s", dir,
				    strerror(errno));
	k = xcalloc(1, sizeof(*k));
	k->sb = sb;
	k->dir = xstrdup(dir);
	k->done = done;
	k->arg = arg;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && de->d_type == DT_DIR) {
			k->c = xrealloc(k->c, (k->n + 1) * sizeof(*k->c));
			memset(&k->c[k->n], 0, sizeof(k->c[k->n]));
			k->c[k->n++].name = xstrdup(de->d_name);
		}
	closedir(d);
	sb->ckpt = k;
	sb->busy++;
	restore_next(k);
	return 0;
}
