/* 3190-container-usage.c - the container backend's usage op through its
 * ABI (dlopen backends/container.so with the tiny host of be-host.h): a
 * sandbox's CPU time, memory and its peak, tasks and writable layer as
 * its cgroup and tmpfs count them, also while paused; a caller with a
 * shorter struct dsec_be_usage gets nothing past its end.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <ev.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "tap.h"
#include "util.h"
#include "be-host.h"

static const char *ct_conf[][2] = {
	{ "container.memory", "256M" },
	{ "container.disk", "64M" },
	{ NULL, NULL },
};

static const struct dsec_be_ops *ops;

/* usage of sb into *u (struct_size size); rc of its done, or of the call. */
static int usage(void *sb, struct dsec_be_usage *u, uint32_t size)
{
	struct wait w = { 0 };
	struct dsec_err err;
	int rc;

	memset(u, 0, sizeof(*u));
	u->struct_size = size;
	w.in_op = 1;
	rc = ops->usage(sb, u, done_cb, &w, &err);
	w.in_op = 0;
	if (rc < 0)
		return rc;
	run_until(&w, 30);
	return w.fired && !w.bad ? w.rc : -ETIMEDOUT;
}

static int sh(void *sb, const char *code)
{
	struct dsec_exec_req req = { .code = code, .timeout = 30, .output_cap = 4096 };
	struct dsec_exec_res res = { 0 };
	struct wait w = { 0 };
	struct dsec_err err;
	int rc;

	if ((rc = ops->exec(sb, &req, &res, done_cb, &w, &err)) < 0)
		return rc;
	run_until(&w, 60);
	dsec_buf_free(&res.out);
	dsec_buf_free(&res.err);
	return w.fired ? (w.rc < 0 ? w.rc : res.exit_code) : -ETIMEDOUT;
}

static int simple(int (*op)(void *, dsec_be_done_fn, void *, struct dsec_err *), void *sb)
{
	struct wait w = { 0 };
	struct dsec_err err;
	int rc;

	if ((rc = op(sb, done_cb, &w, &err)) < 0)
		return rc;
	run_until(&w, 30);
	return w.fired ? w.rc : -ETIMEDOUT;
}

int main(int argc, char **argv)
{
	char top[PATH_MAX], path[HOST_PATH_MAX], helpers[HOST_PATH_MAX];
	char state[] = "/tmp/dsec-3190.XXXXXX";
	struct dsec_be_spec spec = { .id = "usage-1" };
	struct dsec_be_usage u;
	struct dsec_err err;
	struct wait w = { 0 };
	void *dl, *be, *sb = NULL;
	int rc;

	if (!host_find("container", top, helpers, path))
		return 0;
	if (!mkdtemp(state))
		return 1;
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	conf = ct_conf;
	host_start(state, helpers);

	dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	ops = dl ? dlsym(dl, DSEC_BE_SYMBOL) : NULL;
	if (!ops) {
		printf("1..0 # SKIP cannot load container.so: %s\n", dl ? "no ops" : dlerror());
		return 0;
	}
	if ((rc = ops->init(&host, &be, &err)) < 0) {
		printf("1..0 # SKIP the container backend cannot start here: %s\n", err.msg);
		return 0;
	}
	plan(13);
	ok(ops->struct_size > offsetof(struct dsec_be_ops, usage) && ops->usage,
	   "the ops table has usage");
	if (!ops->usage)
		return 1;
	w.in_op = 1;
	rc = ops->create(be, &spec, &sb, done_cb, &w, &err);
	w.in_op = 0;
	if (rc == 0)
		run_until(&w, 60);
	ok(rc == 0 && w.fired && !w.bad && w.rc == 0, "create%s%s", rc < 0 ? ": " : "",
	   rc < 0 ? err.msg : w.err.msg);
	if (!(rc == 0 && w.rc == 0))
		return 1;

	/* 8 MiB in the writable layer (a tmpfs charged to the sandbox's memory),
	 * and some CPU time. */
	rc = sh(sb, "dd if=/dev/zero of=/usage bs=1M count=8 2>/dev/null && "
		    "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done");
	is_int(rc, 0, "a command wrote 8 MiB and spun a little");
	rc = usage(sb, &u, sizeof(u));
	is_int(rc, 0, "usage completes");
	ok(u.struct_size == sizeof(u), "it keeps struct_size");
	ok((u.have & DSEC_USAGE_DISK) && u.disk >= (8u << 20) && u.disk < (64u << 20),
	   "disk counts the file: %llu bytes", (unsigned long long)u.disk);
	ok((u.have & DSEC_USAGE_MEMORY) && u.memory >= (8u << 20),
	   "memory counts the in-memory layer: %llu bytes", (unsigned long long)u.memory);
	ok((u.have & DSEC_USAGE_CPU) && u.cpu_ns > 0, "cpu time: %llu ns",
	   (unsigned long long)u.cpu_ns);
	ok((u.have & DSEC_USAGE_PIDS) && u.pids >= 1, "tasks: %llu (its init at least)",
	   (unsigned long long)u.pids);
	ok(!(u.have & DSEC_USAGE_MEMORY_PEAK) || u.memory_peak >= u.memory,
	   "the peak, where the host keeps one, is no less than now");

	rc = usage(sb, &u, offsetof(struct dsec_be_usage, disk));
	ok(rc == 0 && u.disk == 0 && u.memory >= (8u << 20),
	   "a shorter struct gets the fields inside it and nothing past it");

	if (ops->pause && simple(ops->pause, sb) == 0) {
		rc = usage(sb, &u, sizeof(u));
		ok(rc == 0 && (u.have & DSEC_USAGE_DISK) && u.disk >= (8u << 20),
		   "usage works while paused");
		simple(ops->resume, sb);
	} else {
		printf("ok %d # SKIP no freezer here: usage while paused\n", ++tap_n);
	}
	is_int(simple(ops->destroy, sb), 0, "destroy");
	host_fini_begin();
	ops->fini(be);
	dsec_rm_rf(state);
	return done_testing();
}
