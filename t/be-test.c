/* be-test.c - the "test" backend: a scripted backend for daemon tests.
 *
 * It runs nothing real, so the daemon's own behaviour (routing, TTLs,
 * concurrency, shutdown, errors) can be tested exactly.  Commands (argv):
 *   echo WORDS...   stdout is the words joined by spaces plus "\n"
 *   cat             stdout is stdin
 *   sleep SECONDS   completes after SECONDS on a timer (never blocks)
 *   exit N          exit code N
 *   env NAME        stdout is the value of NAME from the request env
 *   fail            the backend reports backend_error
 *   clock           stdout is the monotonic clock in ns: never the same twice
 * Code: 'echo "$NAME"' prints NAME from the env (dsec-bench's check);
 * any other code is echoed back as stdout.
 * Files live in memory per sandbox.  A create with image "fail" fails.
 * With the key test.admit = N, a create beyond N sandboxes is refused
 * (capacity) while stats keep reporting room: a node whose admission is
 * stricter than what it gossips, for placement's tests.
 * pause and resume complete at once, after 1 s with image "slow-pause";
 * with image "fail-pause" (or "fail-resume") that op fails.  exec and the
 * file ops on a paused sandbox are refused, so a daemon that forgets to
 * resume first shows.  Built as "layers" (be-layers.c) it also takes
 * images as layers and snapshots (see tb_snapshot).
 */
#include <errno.h>
#include <ev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "util.h"

struct tb;

struct tfile {
	char *path;		/* name */
	struct dsec_buf data;	/* contents */
	struct tfile *next;	/* list link */
};

struct tsb {
	struct tb *tb;		/* backend */
	uint64_t disk;		/* limits.disk of its create */
	struct tfile *files;	/* in-memory files */
	struct tjob *jobs;	/* pending jobs on this sandbox */
	bool paused;		/* a pause completed, no resume since */
	const char *quirk;	/* "slow-pause", "fail-pause", "fail-resume" or "" */
};

/* One pending completion. */
struct tjob {
	ev_timer timer;			/* fires the completion */
	struct tsb *sb;			/* sandbox, NULL for create */
	dsec_be_done_fn done;		/* callback */
	void *arg;			/* its argument */
	int rc;				/* result */
	struct dsec_err err;		/* error when rc < 0 */
	struct dsec_exec_res *res;	/* exec result to fill, or NULL */
	double start;			/* when it began */
	bool free_sb;			/* destroy: free sb after done */
	bool call;			/* one-shot: free sb after done */
	char switch_to;			/* 'p' pause, 'r' resume on success, else 0 */
	struct tjob *next;		/* sb->jobs link */
};

struct tb {
	const struct dsec_be_host *host;	/* daemon services */
	uint32_t sandboxes;			/* alive */
	long admit;				/* test.admit: most sandboxes created, -1: any */
	uint32_t running;			/* jobs pending */
	uint64_t calls;				/* execs done */
};

static void unlink_job(struct tjob *j)
{
	if (!j->sb)
		return;
	for (struct tjob **p = &j->sb->jobs; *p; p = &(*p)->next)
		if (*p == j) {
			*p = j->next;
			return;
		}
}

static void free_sb(struct tsb *sb)
{
	while (sb->files) {
		struct tfile *f = sb->files;
		sb->files = f->next;
		free(f->path);
		dsec_buf_free(&f->data);
		free(f);
	}
	sb->tb->sandboxes--;
	free(sb);
}

static void fire(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct tjob *j = (struct tjob *)w;
	struct tb *tb = j->sb ? j->sb->tb : NULL;

	ev_timer_stop(loop, w);
	unlink_job(j);
	if (j->res) {
		j->res->duration = ev_now(loop) - j->start;
		if (tb) {
			tb->running--;
			tb->calls++;
		}
	}
	struct tsb *sb = j->sb;
	bool drop = j->free_sb || j->call;
	if (sb && j->switch_to && j->rc == 0)
		sb->paused = j->switch_to == 'p';
	j->done(j->arg, j->rc, j->rc < 0 ? &j->err : NULL);
	if (drop && sb)
		free_sb(sb);
	free(j);
}

static struct tjob *job(struct tb *tb, struct tsb *sb, double after, dsec_be_done_fn done,
			void *arg)
{
	struct tjob *j = xcalloc(1, sizeof(*j));

	j->sb = sb;
	j->done = done;
	j->arg = arg;
	j->start = ev_now(tb->host->loop);
	ev_timer_init(&j->timer, fire, after, 0);
	ev_timer_start(tb->host->loop, &j->timer);
	if (sb) {
		j->next = sb->jobs;
		sb->jobs = j;
	}
	return j;
}

static int tb_init(const struct dsec_be_host *host, void **be, struct dsec_err *err)
{
	struct tb *tb = xcalloc(1, sizeof(*tb));

	for (const char *const *k = host->conf_keys(host); *k; k++)
		if (!strncmp(*k, "test.", 5) && strcmp(*k, "test.greeting") && strcmp(*k, "test.admit"))
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "unknown key '%s'", *k);
	const char *admit = host->conf_get(host, "test.admit");
	tb->admit = admit ? strtol(admit, NULL, 10) : -1;
	tb->host = host;
	*be = tb;
	return 0;
}

static void tb_fini(void *be)
{
	free(be);
}

static int tb_create(void *be, const struct dsec_be_spec *spec, void **out, dsec_be_done_fn done,
		     void *arg, struct dsec_err *err)
{
	struct tb *tb = be;

	if (spec->image && !strcmp(spec->image, "refuse"))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "image 'refuse' is refused");
	if (tb->admit >= 0 && tb->sandboxes >= tb->admit)
		return dsec_err_setc(err, DSEC_E_CAPACITY, EAGAIN, "test: admits %ld sandboxes",
				     tb->admit);
	static const char *const quirks[] = { "slow-pause", "fail-pause", "fail-resume" };
	struct tsb *sb = xcalloc(1, sizeof(*sb));
	sb->tb = tb;
	sb->disk = spec->limits.disk;
	sb->quirk = "";
	for (size_t i = 0; spec->image && i < DSEC_ARRAY_LEN(quirks); i++)
		if (!strcmp(spec->image, quirks[i]))
			sb->quirk = quirks[i];
	tb->sandboxes++;
	*out = sb;
#ifdef BE_TEST_CAPS
	/* be-layers.c: what it was given, as file /layers ("DIR FILE" lines). */
	{
		struct tfile *f = xcalloc(1, sizeof(*f));

		f->path = xstrdup("/layers");
		for (size_t i = 0; spec->layers && spec->layers[i]; i++) {
			dsec_buf_addf(&f->data, "%s %s", spec->layers[i],
				      spec->layer_files && spec->layer_files[i] ? spec->layer_files[i]
										: "-");
#if BE_TEST_CAPS & DSEC_BE_CAP_LAYER_DEVS
			/* be-layerdevs.c: and the block device of each. */
			dsec_buf_addf(&f->data, " %s", spec->layer_devs && spec->layer_devs[i]
							       ? spec->layer_devs[i] : "-");
#endif
			dsec_buf_add(&f->data, "\n", 1);
		}
		f->next = sb->files;
		sb->files = f;
	}
#endif
	struct tjob *j = job(tb, NULL, 0, done, arg);
	if (spec->image && !strcmp(spec->image, "fail")) {
		j->rc = dsec_err_setc(&j->err, DSEC_E_BACKEND, EIO, "image 'fail' always fails");
		free_sb(sb);
	}
	return 0;
}

static int refuse_paused(struct dsec_err *err)
{
	return dsec_err_setc(err, DSEC_E_INVALID, EBUSY, "test: the sandbox is paused");
}

static const char *env_get(const char *const *env, const char *name)
{
	size_t n = strlen(name);

	for (; env && *env; env++)
		if (!strncmp(*env, name, n) && (*env)[n] == '=')
			return *env + n + 1;
	return NULL;
}

static void run(struct tjob *j, const struct dsec_exec_req *req, struct dsec_exec_res *res)
{
	const char *const *a = req->argv;
	double after = 0;

	j->res = res;
	res->exit_code = 0;
	if (!a && !strncmp(req->code, "echo \"$", 7) && strlen(req->code) > 8) {
		/* dsec-bench's checked default: echo "$X" */
		_cleanup_free_ char *name = xstrndup(req->code + 7, strlen(req->code) - 8);
		const char *v = env_get(req->env, name);
		dsec_buf_addf(&res->out, "%s\n", v ? v : "");
	} else if (!a) {
		dsec_buf_add(&res->out, req->code, strlen(req->code));
	} else if (!strcmp(a[0], "echo")) {
		for (size_t i = 1; a[i]; i++) {
			if (i > 1)
				dsec_buf_add(&res->out, " ", 1);
			dsec_buf_add(&res->out, a[i], strlen(a[i]));
		}
		dsec_buf_add(&res->out, "\n", 1);
	} else if (!strcmp(a[0], "cat")) {
		dsec_buf_add(&res->out, req->stdin_data, req->stdin_len);
	} else if (!strcmp(a[0], "sleep") && a[1]) {
		after = atof(a[1]);
		if (after > req->timeout) {
			after = req->timeout;
			res->timed_out = true;
			res->exit_code = -1;
			res->signal = 9;
		}
	} else if (!strcmp(a[0], "exit") && a[1]) {
		res->exit_code = atoi(a[1]);
	} else if (!strcmp(a[0], "env") && a[1]) {
		const char *v = env_get(req->env, a[1]);
		if (v) {
			dsec_buf_add(&res->out, v, strlen(v));
			dsec_buf_add(&res->out, "\n", 1);
		}
	} else if (!strcmp(a[0], "clock")) {
		dsec_buf_addf(&res->out, "%llu\n", (unsigned long long)dsec_now_ns());
	} else if (!strcmp(a[0], "fail")) {
		j->rc = dsec_err_setc(&j->err, DSEC_E_BACKEND, EIO, "command 'fail' failed");
	} else {
		res->exit_code = 127;
		dsec_buf_addf(&res->err, "%s: not found\n", a[0]);
	}
	if (res->out.len > req->output_cap) {
		res->out.len = req->output_cap;
		res->out_truncated = true;
	}
	ev_timer_stop(j->sb->tb->host->loop, &j->timer);
	ev_timer_set(&j->timer, after, 0);
	ev_timer_start(j->sb->tb->host->loop, &j->timer);
}

static int tb_exec(void *s, const struct dsec_exec_req *req, struct dsec_exec_res *res,
		   dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct tsb *sb = s;
	struct tjob *j;

	if (sb->paused)
		return refuse_paused(err);
	j = job(sb->tb, sb, 0, done, arg);
	sb->tb->running++;
	run(j, req, res);
	return 0;
}

static int tb_call(void *be, const struct dsec_be_spec *spec, const struct dsec_exec_req *req,
		   struct dsec_exec_res *res, dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct tb *tb = be;
	struct tsb *sb = xcalloc(1, sizeof(*sb));

	sb->tb = tb;
	tb->sandboxes++;
	tb->running++;
	struct tjob *j = job(tb, sb, 0, done, arg);
	j->call = true;
	run(j, req, res);
	return 0;
}

static struct tfile *find(struct tsb *sb, const char *path)
{
	for (struct tfile *f = sb->files; f; f = f->next)
		if (!strcmp(f->path, path))
			return f;
	return NULL;
}

static int tb_read(void *s, const char *path, uint64_t off, uint64_t len, struct dsec_buf *out,
		   dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct tsb *sb = s;
	struct tfile *f = find(sb, path);

	if (sb->paused)
		return refuse_paused(err);
	if (strstr(path, ".."))
		return dsec_err_setc(err, DSEC_E_PERMISSION, EPERM, "path '%s' escapes", path);
	if (!f)
		return dsec_err_set(err, ENOENT, "no file '%s'", path);
	if (off < f->data.len)
		dsec_buf_add(out, f->data.data + off,
			     len && len < f->data.len - off ? len : f->data.len - off);
	job(sb->tb, sb, 0, done, arg);
	return 0;
}

static int tb_write(void *s, const char *path, const void *data, size_t len, uint32_t mode,
		    dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct tsb *sb = s;
	struct tfile *f = find(sb, path);

	if (sb->paused)
		return refuse_paused(err);
	if (strstr(path, ".."))
		return dsec_err_setc(err, DSEC_E_PERMISSION, EPERM, "path '%s' escapes", path);
	if (!f) {
		f = xcalloc(1, sizeof(*f));
		f->path = xstrdup(path);
		f->next = sb->files;
		sb->files = f;
	}
	dsec_buf_reset(&f->data);
	dsec_buf_add(&f->data, data, len);
	job(sb->tb, sb, 0, done, arg);
	return 0;
}

static int tb_destroy(void *s, dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	struct tsb *sb = s;
	struct ev_loop *loop = sb->tb->host->loop;

	/* In-flight work completes first, cancelled. */
	for (struct tjob *j = sb->jobs; j; j = j->next) {
		if (j->res) {
			j->rc = dsec_err_setc(&j->err, DSEC_E_BACKEND, ECANCELED,
					      "sandbox destroyed while the command ran");
		}
		ev_timer_stop(loop, &j->timer);
		ev_timer_set(&j->timer, 0, 0);
		ev_timer_start(loop, &j->timer);
	}
	struct tjob *d = job(sb->tb, NULL, 0.001, done, arg);
	d->sb = sb;
	d->next = sb->jobs;
	sb->jobs = d;
	d->free_sb = true;
	return 0;
}

static int tb_switch(struct tsb *sb, bool pause, dsec_be_done_fn done, void *arg)
{
	struct tjob *j = job(sb->tb, sb, strcmp(sb->quirk, "slow-pause") ? 0 : 1.0, done, arg);

	if (!strcmp(sb->quirk, pause ? "fail-pause" : "fail-resume"))
		j->rc = dsec_err_setc(&j->err, DSEC_E_BACKEND, EIO, "image '%s' cannot %s",
				      sb->quirk, pause ? "pause" : "resume");
	j->switch_to = pause ? 'p' : 'r';
	return 0;
}

static int tb_pause(void *s, dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	return tb_switch(s, true, done, arg);
}

static int tb_resume(void *s, dsec_be_done_fn done, void *arg, struct dsec_err *err)
{
	return tb_switch(s, false, done, arg);
}

static void tb_stats(void *be, struct dsec_be_stats *out)
{
	struct tb *tb = be;

	out->sandboxes = tb->sandboxes;
	out->capacity = 1000000;
	out->running = tb->running;
	out->calls = tb->calls;
}

#ifdef BE_TEST_CAPS
/* be-layers.c: snapshot hands over the diff its sandbox's file /.diff
 * names, "KIND PATH" (KIND a dsec_be_diff_kind number: 0 upper dir, 1 tar,
 * 2 erofs, or one dsecd does not know), with the create's limits.disk as
 * its limit: what a VM backend does with the diff it got out of its guest
 * (t/5013-snapshot-diff.t). */
struct tsnap {
	dsec_be_read_diff_fn read;	/* the daemon's reader */
	void *read_arg;			/* its argument */
	dsec_be_done_fn done;		/* caller's */
	void *arg;			/* its argument */
	struct dsec_be_diff df;		/* what read gets */
	char *path;			/* df.path */
	int rc;				/* read's result */
	struct dsec_err err;		/* why */
};

static void snap_work(void *arg)
{
	struct tsnap *w = arg;

	w->rc = w->read(w->read_arg, &w->df, &w->err);
}

static void snap_done(void *arg)
{
	struct tsnap *w = arg;

	w->done(w->arg, w->rc, w->rc < 0 ? &w->err : NULL);
	free(w->path);
	free(w);
}

static int tb_snapshot(void *s, dsec_be_read_diff_fn read, void *read_arg, dsec_be_done_fn done,
		       void *arg, struct dsec_err *err)
{
	struct tsb *sb = s;
	struct tfile *f = find(sb, "/.diff");
	const struct dsec_be_host *host = sb->tb->host;
	unsigned kind;
	int n = 0;

	_cleanup_free_ char *spec = f ? xstrndup(f->data.data, f->data.len) : NULL;
	if (!spec || sscanf(spec, "%u %n", &kind, &n) != 1 || !spec[n])
		return dsec_err_setc(err, DSEC_E_UNSUPPORTED, ENOTSUP, "test: no '/.diff' to hand "
				     "over");
	struct tsnap *w = xcalloc(1, sizeof(*w));
	w->read = read;
	w->read_arg = read_arg;
	w->done = done;
	w->arg = arg;
	w->path = xstrdup(spec + n);
	w->path[strcspn(w->path, "\n")] = '\0';
	w->df = (struct dsec_be_diff){ .kind = kind, .path = w->path, .limit = sb->disk };
	if (host->submit(host, snap_work, snap_done, w) < 0) {
		free(w->path);
		free(w);
		return dsec_err_setc(err, DSEC_E_BACKEND, EAGAIN, "test: no pool");
	}
	return 0;
}
#endif

/* be-oldabi.c builds this backend again with the shortest table dsecd
 * takes (the prefix ABI 1 began with) and the first spec. */
#ifndef BE_TEST_NAME
#define BE_TEST_NAME "test"
#define BE_TEST_OPS_SIZE sizeof(struct dsec_be_ops)
#define BE_TEST_SPEC_SIZE sizeof(struct dsec_be_spec)
#endif
/* be-layers.c takes images as layers (and records them). */
#ifndef BE_TEST_CAPS
#define BE_TEST_CAPS_OR 0
#else
#define BE_TEST_CAPS_OR BE_TEST_CAPS
#endif
/* be-abi1.c declares another ABI version. */
#ifndef BE_TEST_ABI
#define BE_TEST_ABI DSEC_BE_ABI
#endif

__attribute__((visibility("default"))) const struct dsec_be_ops dsec_backend = {
	.abi_version = BE_TEST_ABI,
	.struct_size = BE_TEST_OPS_SIZE,
	.spec_size = BE_TEST_SPEC_SIZE,
	.name = BE_TEST_NAME,
	.caps = BE_TEST_CAPS_OR,
	.description = "scripted backend for the daemon's tests",
	.init = tb_init,
	.fini = tb_fini,
	.create = tb_create,
	.exec = tb_exec,
	.file_read = tb_read,
	.file_write = tb_write,
	.pause = tb_pause,
	.resume = tb_resume,
	.destroy = tb_destroy,
	.stats = tb_stats,
	.call = tb_call,
#ifdef BE_TEST_CAPS
	.snapshot = tb_snapshot,
#endif
};
