/* 3000-fncall.c - the fncall backend through its ABI: dlopen
 * backends/fncall.so, give it a host (libev default loop, a thread for
 * submit, config from a table) and check calls, isolation, limits,
 * sandboxes, file escapes and that fini leaves nothing behind. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "tap.h"
#include "util.h"
#include "be-host.h"

static char top[PATH_MAX], state[PATH_MAX], helpers[HOST_PATH_MAX];

/* ---- the host (be-host.h) and its config ---- */

static const char *fc_conf[][2] = {
	{ "fncall.pool_size", "2" },
	{ "fncall.memory", "128M" },
	{ "fncall.pids", "32" },
	{ "fncall.uid_base", "3000000" },
	{ "fncall.uids", "64" },
	{ "container.whatever", "ignored" },
	{ NULL, NULL },
};

static const struct dsec_be_ops *ops;
static void *be;

/* One call: code (sh or python3) with stdin, returns rc and fills res. */
static int call_rt(const char *rt, const char *code, const char *const *argv, const char *in,
		   const char *const *env, double timeout, size_t cap, struct dsec_exec_res *res,
		   struct dsec_err *errout)
{
	struct dsec_be_spec spec = { .id = "x", .runtime = rt };
	struct dsec_exec_req req = {
		.argv = argv, .code = argv ? NULL : code, .env = env, .stdin_data = in,
		.stdin_len = in ? strlen(in) : 0, .timeout = timeout ? timeout : 20,
		.output_cap = cap ? cap : 65536,
	};
	struct wait w = { 0 };
	struct dsec_err err;
	int rc;

	w.in_op = 1;
	rc = ops->call(be, &spec, &req, res, done_cb, &w, &err);
	w.in_op = 0;
	if (rc < 0) {
		if (errout)
			*errout = err;
		return rc;
	}
	run_until(&w, 60);
	if (!w.fired || w.bad)
		return -999;
	if (errout)
		*errout = w.err;
	return w.rc;
}

static int sh(const char *code, struct dsec_exec_res *res)
{
	return call_rt("sh", code, NULL, NULL, NULL, 0, 0, res, NULL);
}

/* Processes on the host whose command line contains needle. */
static int host_procs(const char *needle)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d))) {
		char path[300], buf[512];
		ssize_t len;
		int fd;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		if ((fd = open(path, O_RDONLY)) < 0)
			continue;
		len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (len <= 0)
			continue;
		for (ssize_t i = 0; i < len; i++)
			if (!buf[i])
				buf[i] = ' ';
		buf[len] = '\0';
		if (strstr(buf, needle))
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

static bool wait_no_procs(const char *needle, double secs)
{
	double end = dsec_now() + secs;

	while (host_procs(needle) > 0) {
		if (dsec_now() > end)
			return false;
		usleep(20000);
	}
	return true;
}

static void res_free(struct dsec_exec_res *r)
{
	dsec_buf_free(&r->out);
	dsec_buf_free(&r->err);
	memset(r, 0, sizeof(*r));
}

static const char *out(const struct dsec_exec_res *r)
{
	return r->out.data ? r->out.data : "";
}

/* ---- sandboxes ---- */

static void *sb_create(const char *rt)
{
	struct dsec_be_spec spec = { .id = "sb-test-1", .runtime = rt };
	struct wait w = { .in_op = 1 };
	struct dsec_err err;
	void *sb = NULL;

	if (ops->create(be, &spec, &sb, done_cb, &w, &err) < 0)
		return NULL;
	w.in_op = 0;
	run_until(&w, 30);
	return w.fired && w.rc == 0 && !w.bad ? sb : NULL;
}

static int sb_exec(void *sb, const char *code, struct dsec_exec_res *res)
{
	struct dsec_exec_req req = { .code = code, .timeout = 20, .output_cap = 65536 };
	struct wait w = { .in_op = 1 };
	struct dsec_err err;

	if (ops->exec(sb, &req, res, done_cb, &w, &err) < 0)
		return -1000;
	w.in_op = 0;
	run_until(&w, 30);
	if (w.rc < 0)
		printf("# exec: %s\n", w.err.msg);
	return w.fired && !w.bad ? w.rc : -999;
}

static int sb_write(void *sb, const char *path, const char *data, struct dsec_err *e)
{
	struct wait w = { .in_op = 1 };
	struct dsec_err err;
	int rc = ops->file_write(sb, path, data, strlen(data), 0644, done_cb, &w, &err);

	if (rc < 0) {
		*e = err;
		return rc;
	}
	w.in_op = 0;
	run_until(&w, 30);
	*e = w.err;
	return w.fired && !w.bad ? w.rc : -999;
}

static int sb_read(void *sb, const char *path, struct dsec_buf *b, struct dsec_err *e)
{
	struct wait w = { .in_op = 1 };
	struct dsec_err err;
	int rc;

	dsec_buf_init(b);
	if ((rc = ops->file_read(sb, path, 0, 0, b, done_cb, &w, &err)) < 0) {
		*e = err;
		return rc;
	}
	w.in_op = 0;
	run_until(&w, 30);
	*e = w.err;
	return w.fired && !w.bad ? w.rc : -999;
}

/* ---- concurrency ---- */

struct many {
	struct wait w;			/* completion */
	struct dsec_exec_res res;	/* result */
	char code[64];			/* what it ran */
};

static int concurrent(int n, const char *rt)
{
	struct many *m = xcalloc((size_t)n, sizeof(*m));
	struct dsec_be_spec spec = { .id = "c", .runtime = rt };
	int good = 0, started = 0;
	double end;

	for (int i = 0; i < n; i++) {
		struct dsec_exec_req req = { .timeout = 60, .output_cap = 4096 };
		struct dsec_err err;

		snprintf(m[i].code, sizeof(m[i].code),
			 !strcmp(rt, "sh") ? "echo call-%d" : "print('call-%d')", i);
		req.code = m[i].code;
		if (ops->call(be, &spec, &req, &m[i].res, done_cb, &m[i].w, &err) == 0)
			started++;
		else
			m[i].w.fired = true, m[i].w.rc = -1;
	}
	end = dsec_now() + 120;
	for (;;) {
		int fired = 0;

		for (int i = 0; i < n; i++)
			fired += m[i].w.fired;
		if (fired == n || dsec_now() > end)
			break;
		ev_run(loop, EVRUN_ONCE);
	}
	for (int i = 0; i < n; i++) {
		char want[64];

		snprintf(want, sizeof(want), "call-%d\n", i);
		if (m[i].w.fired && m[i].w.rc == 0 && m[i].res.exit_code == 0 &&
		    !strcmp(out(&m[i].res), want))
			good++;
		else if (good + 3 > i)
			printf("# call %d: rc %d exit %d out '%s' err '%s'\n", i, m[i].w.rc,
			       m[i].res.exit_code, out(&m[i].res),
			       m[i].res.err.data ? m[i].res.err.data : "");
		res_free(&m[i].res);
	}
	free(m);
	return good;
}

static int listen_tcp(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, 8) < 0 ||
	    getsockname(s, (struct sockaddr *)&a, &len) < 0)
		return -1;
	*port = ntohs(a.sin_port);
	return s;
}

/* No entry but the backend's record of its cgroups (be_cg_take_over),
 * which is there while it runs and goes at fini. */
static bool dir_empty(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	bool empty = true;

	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    strcmp(de->d_name, "cgroups"))
			empty = false;
	if (d)
		closedir(d);
	return empty;
}

static bool mounted_under(const char *prefix)
{
	_cleanup_free_ char *mi = NULL;
	size_t len;

	if (dsec_read_file("/proc/self/mountinfo", &mi, &len) < 0)
		return false;
	return strstr(mi, prefix) != NULL;
}

static bool cgroup_left(void)
{
	char name[64];
	const char *roots[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids",
				"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/freezer" };

	snprintf(name, sizeof(name), "dsec-fncall.%d", (int)getpid());
	for (size_t i = 0; i < DSEC_ARRAY_LEN(roots); i++) {
		char cmd[512];
		/* Our own group may be nested; look one level and at the root. */
		snprintf(cmd, sizeof(cmd), "find %s -maxdepth 3 -name '%s' 2>/dev/null | grep -q .",
			 roots[i], name);
		if (system(cmd) == 0)
			return true;
	}
	return false;
}

int main(int argc, char **argv)
{
	struct dsec_exec_res r = { 0 };
	struct dsec_err err;
	char path[HOST_PATH_MAX];
	void *dl, *sb;
	int rc, port = 0, ls;

	if (!host_find("fncall", top, helpers, path))
		return 0;
	snprintf(state, sizeof(state), "/tmp/dsec-3000.XXXXXX");
	if (!mkdtemp(state))
		return 1;
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	plan(77);

	conf = fc_conf;
	host_start(state, helpers);

	dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	ok(dl != NULL, "dlopen fncall.so%s%s", dl ? "" : ": ", dl ? "" : dlerror());
	ops = dl ? dlsym(dl, DSEC_BE_SYMBOL) : NULL;
	ok(ops && ops->abi_version == DSEC_BE_ABI && ops->struct_size >= sizeof(*ops) &&
	   !strcmp(ops->name, "fncall") && ops->call, "ops table: abi, size, name, call");
	if (!ops)
		return 1;

	extra_key = "fncall.bogus";
	rc = ops->init(&host, &be, &err);
	ok(rc < 0 && strstr(err.msg, "fncall.bogus"), "an unknown key is rejected: %s",
	   rc < 0 ? err.msg : "accepted");
	extra_key = NULL;

	rc = ops->init(&host, &be, &err);
	ok(rc == 0, "init%s%s", rc ? ": " : "", rc ? err.msg : "");
	if (rc < 0)
		return 1;

	/* Basics. */
	rc = sh("echo hello", &r);
	ok(rc == 0 && r.exit_code == 0 && r.signal == 0 && !strcmp(out(&r), "hello\n"),
	   "sh echo: rc %d exit %d out '%s'", rc, r.exit_code, out(&r));
	ok(r.duration > 0 && r.duration < 10, "duration %.4f s", r.duration);
	res_free(&r);
	rc = sh("exit 7", &r);
	is_int(r.exit_code, 7, "exit code 7");
	res_free(&r);
	rc = sh("kill -TERM $$", &r);
	ok(rc == 0 && r.signal == SIGTERM && r.exit_code == -1, "signal reported: %d", r.signal);
	res_free(&r);
	rc = sh("echo out; echo err >&2", &r);
	ok(!strcmp(out(&r), "out\n") && r.err.data && !strcmp(r.err.data, "err\n"),
	   "stdout and stderr apart");
	res_free(&r);
	rc = call_rt("sh", "cat; echo", NULL, "stdin-data", NULL, 0, 0, &r, NULL);
	is_str(out(&r), "stdin-data\n", "stdin delivered");
	res_free(&r);
	{
		const char *env[] = { "FOO=bar baz", "HOME=/elsewhere", NULL };

		rc = call_rt("sh", "echo \"$FOO|$HOME|$PATH\"", NULL, NULL, env, 0, 0, &r, NULL);
		is_str(out(&r), "bar baz|/elsewhere|/usr/local/bin:/usr/bin:/bin\n", "env delivered");
		res_free(&r);
	}
	{
		const char *av[] = { "printf", "%s|", "a b", "c", NULL };

		rc = call_rt("sh", NULL, av, NULL, NULL, 0, 0, &r, NULL);
		is_str(out(&r), "a b|c|", "argv mode");
		res_free(&r);
		av[0] = "no-such-command-xyz";
		rc = call_rt("sh", NULL, av, NULL, NULL, 0, 0, &r, &err);
		ok(rc == -ENOENT && err.code == DSEC_E_NOT_FOUND, "missing command: rc %d '%s'", rc,
		   err.msg);
		res_free(&r);
	}
	rc = call_rt("sh", "head -c 100000 /dev/zero; echo e >&2", NULL, NULL, NULL, 0, 1000, &r,
		     NULL);
	ok(rc == 0 && r.out.len == 1000 && r.out_truncated && !r.err_truncated && r.exit_code == 0,
	   "stdout cap: %zu bytes, truncated %d", r.out.len, r.out_truncated);
	res_free(&r);

	/* The shell template: argv, environment and state exactly as an exec
	 * would give them, whether the template runs the call or (too many
	 * arguments, too big an environment) an exec does. */
	{
		const char *code = "printf '%s|' \"$0\" \"$@\"; printf '#'; tr '\\0' '|' < /proc/$$/cmdline;"
				   " printf '#%s#' $$; grep -q fncall-preload /proc/$$/maps && echo T;"
				   " echo /proc/$$/fd/*";
		const char *av[] = { "sh", "-c", code, "zero", "a b", "", "c'd", NULL };
		char want[1024];

		snprintf(want, sizeof(want), "zero|a b||c'd|#sh|-c|%s|zero|a b||c'd|#2#T\n"
			 "/proc/2/fd/0 /proc/2/fd/1 /proc/2/fd/2 /proc/2/fd/3\n", code);
		rc = call_rt("sh", NULL, av, NULL, NULL, 0, 0, &r, NULL);
		is_str(out(&r), want, "template: argv, cmdline, pid 2, no extra descriptor");
		res_free(&r);
	}
	{
		const char *env[] = { "A=1", "B=two words", "EMPTY=", NULL };

		rc = call_rt("sh", "tr '\\0' '\\n' < /proc/$$/environ | sort | tr '\\n' ' ';"
			     " echo \"$A|$B|${EMPTY-unset}|$(pwd)\"", NULL, NULL, env, 0, 0, &r, NULL);
		is_str(out(&r), "A=1 B=two words EMPTY= HOME=/tmp LANG=C.UTF-8 "
		       "PATH=/usr/local/bin:/usr/bin:/bin 1|two words||/tmp\n",
		       "template: the environment is the request's, nothing of the unit's");
		res_free(&r);
	}
	{
		const char *av[304] = { "sh", "-c", ("echo $# $0 $1 $299; grep -q fncall-preload "
					"/proc/$$/maps || echo X; echo /proc/$$/fd/*"), "x" };
		char nums[300][8];

		for (int i = 1; i < 300; i++) {
			snprintf(nums[i], sizeof(nums[i]), "%d", i);
			av[3 + i] = nums[i];
		}
		rc = call_rt("sh", NULL, av, NULL, NULL, 0, 0, &r, NULL);
		is_str(out(&r), "299 x 1 299\nX\n/proc/2/fd/0 /proc/2/fd/1 /proc/2/fd/2 /proc/2/fd/3\n",
		       "300 arguments: executed instead, same result");
		res_free(&r);
	}
	{
		char *big = xmalloc(100010);
		const char *env[] = { big, NULL };

		memcpy(big, "BIG=", 4);
		memset(big + 4, 'b', 100000);
		big[100004] = '\0';
		rc = call_rt("sh", "echo ${#BIG}; grep -q fncall-preload /proc/$$/maps || echo X",
			     NULL, NULL, env, 0, 0, &r, NULL);
		is_str(out(&r), "100000\nX\n", "a 100 kB environment: executed instead, same result");
		res_free(&r);
		free(big);
	}
	{
		/* Every unit serves many calls: run enough to reach each. */
		const char *probe = "echo \"${LEAK-none} ${K-none} $(pwd) $(umask) $$ $(ls -A /tmp | wc -l)"
				    " $(ls -A /work | wc -l) $(ps -e -o pid= | wc -l)\"";
		const char *senv[] = { "K=SECRET_f00d", NULL };
		/* Counts the needle in the memory of the shell that runs it. */
		const char *scan[] = {
			"SCAN=import sys\n"
			"needle = ('SEC' + 'RET_f00d').encode()\n"
			"n = 0\n"
			"for l in open('/proc/%s/maps' % sys.argv[1]):\n"
			" f = l.split()\n"
			" a, b = (int(x, 16) for x in f[0].split('-'))\n"
			" if f[1][0] != 'r' or len(f) > 5 and f[5].startswith('[v'):\n"
			"  continue\n"
			" try:\n"
			"  with open('/proc/%s/mem' % sys.argv[1], 'rb') as m:\n"
			"   m.seek(a)\n"
			"   n += m.read(b - a).count(needle)\n"
			" except OSError:\n"
			"  pass\n"
			"print(n)\n", NULL, NULL };	/* room for the needle */
		char first[256] = "", buf[256];
		int same = 0, clean = 0;

		rc = sh(probe, &r);
		snprintf(first, sizeof(first), "%s", out(&r));
		res_free(&r);
		for (int i = 0; i < 8; i++) {
			rc = call_rt("sh", "export LEAK=1; cd /; umask 077; echo x > /tmp/leak; "
				     "sleep 979 >/dev/null 2>&1 & echo $K", NULL, NULL, senv, 0, 0, &r,
				     NULL);
			res_free(&r);
		}
		for (int i = 0; i < 8; i++) {
			rc = sh(probe, &r);
			snprintf(buf, sizeof(buf), "%s", out(&r));
			same += !strcmp(buf, first);
			res_free(&r);
			rc = call_rt("sh", "python3 -c \"$SCAN\" $$", NULL, NULL, scan, 0, 0, &r, NULL);
			clean += !strcmp(out(&r), "0\n");
			res_free(&r);
		}
		ok(same == 8 && !strncmp(first, "none none /tmp ", 15),
		   "no variable, cwd, umask, file or process passes to later calls (%d/8): %s",
		   same, first);
		scan[1] = senv[0];
		rc = call_rt("sh", "python3 -c \"$SCAN\" $$", NULL, NULL, scan, 0, 0, &r, NULL);
		ok(clean == 8 && atoi(out(&r)) > 0,
		   "a call's data is nowhere in the memory of later calls (%d/8 clean, the scan "
		   "finds it in its own call: %s)", clean, out(&r));
		res_free(&r);
		ok(wait_no_procs("sleep 979", 3), "the background processes are gone");
	}

	/* Isolation. */
	/* Each call has a uid (= gid) of its own from fncall.uid_base on. */
	rc = sh("echo $(( $(id -u) - 3000000 )) $(( $(id -g) - $(id -u) )); id -un; hostname;"
		" cat /proc/self/status | grep -E '^(Seccomp|NoNewPrivs):' | tr -s '\\t ' ' '", &r);
	{
		int slot = -1, diff = -1;

		sscanf(out(&r), "%d %d", &slot, &diff);
		ok(slot >= 0 && slot < 64 && diff == 0 &&
		   strstr(out(&r), "\nsandbox\nsandbox\nNoNewPrivs: 1\nSeccomp: 2\n"),
		   "uid = gid of the range, named sandbox, hostname, no_new_privs, seccomp: %s",
		   out(&r));
	}
	res_free(&r);
	rc = sh("ls /proc | grep -c '^[0-9]'", &r);
	ok(atoi(out(&r)) > 0 && atoi(out(&r)) <= 4, "only the call's own pids: %s", out(&r));
	res_free(&r);
	rc = sh("cat /proc/1/cmdline | tr '\\0' ' '; echo; ls /sys 2>&1 | head -1", &r);
	ok(!strstr(out(&r), "systemd") && !strstr(out(&r), top) && !strstr(out(&r), "class"),
	   "pid 1 is the unit and tells nothing of the host, /sys absent: %s", out(&r));
	res_free(&r);
	rc = sh("grep -o '^ *[a-z0-9]*:' /proc/net/dev | tr -d ' \\n'", &r);
	is_str(out(&r), "lo:", "only lo");
	res_free(&r);
	ls = listen_tcp(&port);
	{
		char code[256];

		snprintf(code, sizeof(code),
			 "import socket\ntry:\n socket.create_connection(('127.0.0.1', %d), 2)\n"
			 " print('connected')\nexcept OSError as e:\n print('refused')\n", port);
		rc = call_rt("python3", code, NULL, NULL, NULL, 0, 0, &r, NULL);
		ok(ls >= 0 && !strcmp(out(&r), "refused\n") && accept(ls, NULL, NULL) < 0,
		   "host 127.0.0.1 unreachable: %s", out(&r));
		res_free(&r);
		close(ls);
	}
	{
		char code[PATH_MAX + 256];

		snprintf(code, sizeof(code),
			 "for f in /etc/x /usr/x /x /bin/x /proc/x '%s/x' /work/x; do "
			 "  if echo hi > \"$f\" 2>/dev/null; then echo \"wrote $f\"; fi; done; "
			 "echo hi > /tmp/ok && echo tmp-ok", state);
		rc = sh(code, &r);
		is_str(out(&r), "tmp-ok\n", "no writes outside /tmp");
		res_free(&r);
		snprintf(path, sizeof(path), "%s/x", state);
		ok(access(path, F_OK) < 0 && access("/x", F_OK) < 0, "nothing landed on the host");
	}
	rc = sh("unshare -m true 2>/dev/null && echo unshare; mount -t tmpfs x /tmp 2>/dev/null && "
		"echo mount; echo done", &r);
	is_str(out(&r), "done\n", "unshare and mount are refused");
	res_free(&r);
	rc = sh("ulimit -n", &r);
	is_str(out(&r), "256\n", "RLIMIT_NOFILE");
	res_free(&r);

	/* Limits. */
	rc = call_rt("python3", "x = bytearray(400 << 20)\nprint('survived')\n", NULL, NULL, NULL,
		     0, 0, &r, NULL);
	ok(rc == 0 && strcmp(out(&r), "survived\n") && (r.signal == SIGKILL || r.exit_code != 0),
	   "memory bomb stopped (signal %d, exit %d)", r.signal, r.exit_code);
	/* Killed by the memory cgroup's OOM killer (without cgroups RLIMIT_AS
	 * makes it a MemoryError instead, and nobody is killed). */
	ok(r.oom_killed == (r.signal == SIGKILL), "... and the result says oom_killed %d",
	   r.oom_killed);
	res_free(&r);
	rc = sh("python3 -c 'bytearray(400 << 20)' 2>/dev/null; echo after=$?", &r);
	ok(rc == 0 && r.exit_code == 0 && (!strcmp(out(&r), "after=137\n") ? r.oom_killed :
					  !r.oom_killed),
	   "a process of the call killed by the OOM killer, the call exits 0: oom_killed %d (%s)",
	   r.oom_killed, out(&r));
	res_free(&r);
	for (int i = 0; i < 6; i++) {
		rc = sh("true", &r);
		if (r.oom_killed)
			break;
		res_free(&r);
	}
	ok(rc == 0 && !r.oom_killed, "later calls in the same units are not oom_killed");
	res_free(&r);
	/* dash gives up at the first failed fork, so the bomb is python. */
	rc = call_rt("python3", "import os, time\nn = 0\nfor i in range(100):\n try:\n"
		     "  if os.fork() == 0:\n   time.sleep(30)\n   os._exit(0)\n  n += 1\n"
		     " except OSError:\n  break\nprint(n)\n", NULL, NULL, NULL, 10, 0, &r, NULL);
	ok(rc == 0 && atoi(out(&r)) > 5 && atoi(out(&r)) < 32 && r.duration < 9,
	   "fork bomb stops at the pids limit (32): %d forks", atoi(out(&r)));
	res_free(&r);

	/* Timeout kills the whole tree. */
	rc = call_rt("sh", "setsid sleep 987 & (setsid sh -c 'sleep 986 & sleep 985' &); sleep 984",
		     NULL, NULL, NULL, 0.5, 0, &r, NULL);
	ok(rc == 0 && r.timed_out && r.signal == SIGKILL && r.duration < 5,
	   "timeout: timed_out %d signal %d after %.2f s", r.timed_out, r.signal, r.duration);
	res_free(&r);
	ok(wait_no_procs("sleep 98", 3), "no process of the call is left on the host");

	/* Fresh state between calls. */
	rc = sh("echo x > /tmp/leftover; sleep 983 > /dev/null 2>&1 & echo started", &r);
	is_str(out(&r), "started\n", "call 1 left a file and a process behind");
	res_free(&r);
	ok(wait_no_procs("sleep 983", 3), "its background process is gone");
	rc = sh("ls -A /tmp; ps -e -o comm= | grep -c sleep", &r);
	is_str(out(&r), "0\n", "call 2 sees neither");
	res_free(&r);

	/* python3. */
	rc = call_rt("python3", "import sys\nprint(sum(range(10)))\nprint('e', file=sys.stderr)",
		     NULL, NULL, NULL, 0, 0, &r, NULL);
	ok(rc == 0 && r.exit_code == 0 && !strcmp(out(&r), "45\n") && r.err.data &&
	   !strcmp(r.err.data, "e\n"), "python3 snippet: '%s'", out(&r));
	res_free(&r);
	rc = call_rt("python3", "1/0", NULL, NULL, NULL, 0, 0, &r, NULL);
	ok(r.exit_code == 1 && r.err.data && strstr(r.err.data, "ZeroDivisionError"),
	   "python3 exception: exit 1 with a traceback");
	res_free(&r);
	rc = call_rt("python3", "raise SystemExit(3)", NULL, NULL, NULL, 0, 0, &r, NULL);
	is_int(r.exit_code, 3, "python3 SystemExit(3)");
	res_free(&r);
	rc = call_rt("python3", "import sys, os\nprint(sys.stdin.read(), os.environ['K'], "
		     "0 <= os.getuid() - 3000000 < 64 and os.getgid() == os.getuid(), os.getcwd())",
		     NULL, "in", (const char *[]){ "K=v", NULL }, 0, 0, &r, NULL);
	is_str(out(&r), "in v True /tmp\n", "python3 stdin, env, uid of the range, cwd");
	res_free(&r);
	rc = call_rt("python3", "import os\nos.kill(os.getpid(), 9)", NULL, NULL, NULL, 0, 0, &r,
		     NULL);
	is_int(r.signal, 9, "python3 killing itself is reported");
	res_free(&r);
	{
		const char *av[] = { "sh", "-c", "echo from-argv", NULL };

		rc = call_rt("python3", NULL, av, NULL, NULL, 0, 0, &r, NULL);
		is_str(out(&r), "from-argv\n", "python3 runtime runs argv too");
		res_free(&r);
	}
	rc = call_rt("python3", "open('/tmp/p', 'w').write('x')\nimport os\n"
		     "print(os.listdir('/tmp'))", NULL, NULL, NULL, 0, 0, &r, NULL);
	res_free(&r);
	rc = call_rt("python3", "import os\nprint(os.listdir('/tmp'))", NULL, NULL, NULL, 0, 0,
		     &r, NULL);
	is_str(out(&r), "[]\n", "python3 /tmp is fresh per call");
	res_free(&r);
	rc = call_rt("python3", "import time\ntime.sleep(100)", NULL, NULL, NULL, 0.5, 0, &r, NULL);
	ok(r.timed_out && r.signal == 9, "python3 timeout");
	res_free(&r);

	/* Volume. */
	{
		int good = 0;
		double t0 = dsec_now();

		for (int i = 0; i < 200; i++) {
			char code[64], want[64];

			snprintf(code, sizeof(code), "echo seq-%d", i);
			snprintf(want, sizeof(want), "seq-%d\n", i);
			if (sh(code, &r) == 0 && !strcmp(out(&r), want))
				good++;
			res_free(&r);
		}
		is_int(good, 200, "200 sequential calls (%.2f ms each)", (dsec_now() - t0) * 5);
	}
	is_int(concurrent(64, "sh"), 64, "64 concurrent sh calls");
	is_int(concurrent(16, "python3"), 16, "16 concurrent python3 calls");

	/* Capacity and bad requests. */
	{
		struct dsec_be_spec spec = { .runtime = "nope" };
		struct dsec_exec_req req = { .code = "true" };
		struct wait w = { 0 };

		rc = ops->call(be, &spec, &req, &r, done_cb, &w, &err);
		ok(rc < 0 && err.code == DSEC_E_INVALID && !w.fired, "unknown runtime: %s", err.msg);
		spec.runtime = "sh";
		req.argv = (const char *[]){ "true", NULL };
		rc = ops->call(be, &spec, &req, &r, done_cb, &w, &err);
		ok(rc < 0 && err.code == DSEC_E_INVALID, "argv and code together: %s", err.msg);
	}
	{
		struct dsec_be_stats st;

		ops->stats(be, &st);
		ok(st.pool_target == 4 && st.running == 0 && st.calls > 250 && st.capacity == 256,
		   "stats: ready %u/%u calls %llu", st.pool_ready, st.pool_target,
		   (unsigned long long)st.calls);
	}

	/* Sandboxes. */
	sb = sb_create("sh");
	ok(sb != NULL, "create a sandbox");
	if (!sb)
		return 1;
	rc = sb_write(sb, "a.txt", "file-a\n", &err);
	ok(rc == 0, "file_write a.txt%s%s", rc ? ": " : "", rc ? err.msg : "");
	rc = sb_write(sb, "/work/d/e/b.txt", "file-b\n", &err);
	ok(rc == 0, "file_write /work/d/e/b.txt (parents made)");
	rc = sb_exec(sb, "pwd; cat a.txt d/e/b.txt; echo made > c.txt; ln -s /etc abs; "
		     "ln -s ../../../../../etc rel; ln -s /proc/self/root magic; "
		     "echo x > /tmp/t; ls -ld . | cut -c1-10", &r);
	is_str(out(&r), "/work\nfile-a\nfile-b\ndrwxr-xr-x\n", "exec sees the files in /work");
	res_free(&r);
	rc = sb_exec(sb, "cat c.txt; ls /tmp | wc -l; echo more >> a.txt", &r);
	is_str(out(&r), "made\n0\n", "files persist between execs, /tmp does not");
	res_free(&r);
	{
		struct dsec_buf b;

		rc = sb_read(sb, "c.txt", &b, &err);
		ok(rc == 0 && b.data && !strcmp(b.data, "made\n"), "file_read c.txt");
		dsec_buf_free(&b);
		rc = sb_read(sb, "/work/a.txt", &b, &err);
		ok(rc == 0 && b.data && !strcmp(b.data, "file-a\nmore\n"), "file_read /work/a.txt");
		dsec_buf_free(&b);
		rc = sb_read(sb, "nope", &b, &err);
		ok(rc < 0 && err.code == DSEC_E_NOT_FOUND, "missing file: not_found");
		dsec_buf_free(&b);
		const char *esc[] = { "../../etc/passwd", "/etc/passwd", "abs/passwd", "rel/passwd",
				      "magic/etc/passwd", "d/../../x" };
		int perm = 0;

		for (size_t i = 0; i < DSEC_ARRAY_LEN(esc); i++) {
			rc = sb_read(sb, esc[i], &b, &err);
			if (rc < 0 && err.code == DSEC_E_PERMISSION)
				perm++;
			else
				printf("# %s: rc %d code %d %s\n", esc[i], rc, err.code, err.msg);
			dsec_buf_free(&b);
		}
		is_int(perm, (int)DSEC_ARRAY_LEN(esc), "escaping reads are refused (permission)");
		rc = sb_write(sb, "abs/evil", "x", &err);
		ok(rc < 0 && err.code == DSEC_E_PERMISSION && access("/etc/evil", F_OK) < 0,
		   "escaping write is refused");
		rc = sb_write(sb, "rel/evil", "x", &err);
		ok(rc < 0 && err.code == DSEC_E_PERMISSION, "escaping write via .. symlink refused");
	}
	{
		/* usage: the scratch's bytes in use and, where the zygote counts
		 * them, the calls its filter refused: nothing it cannot measure. */
		struct dsec_be_usage u = { .struct_size = sizeof(u) };
		struct wait wu = { 0 };
		uint64_t before;

		rc = ops->usage(sb, &u, done_cb, &wu, &err);
		run_until(&wu, 30);
		ok(rc == 0 && wu.fired && wu.rc == 0 &&
		   (u.have & ~DSEC_USAGE_SECCOMP_DENIED) == DSEC_USAGE_DISK && u.disk > 0 &&
		   u.struct_size == sizeof(u), "usage: the scratch's disk and refused calls only "
		   "(%llu bytes, have 0x%x)", (unsigned long long)u.disk, u.have);
		before = u.disk;
		rc = sb_exec(sb, "head -c 2097152 /dev/zero > big", &r);
		res_free(&r);
		memset(&u, 0, sizeof(u));
		u.struct_size = offsetof(struct dsec_be_usage, disk) + sizeof(u.disk);
		wu = (struct wait){ 0 };
		rc = ops->usage(sb, &u, done_cb, &wu, &err);
		run_until(&wu, 30);
		ok(rc == 0 && wu.rc == 0 && u.disk >= before + (2u << 20),
		   "usage: 2 MiB written show (%llu bytes)", (unsigned long long)u.disk);
		memset(&u, 0, sizeof(u));
		u.struct_size = offsetof(struct dsec_be_usage, disk);
		wu = (struct wait){ 0 };
		rc = ops->usage(sb, &u, done_cb, &wu, &err);
		run_until(&wu, 30);
		ok(rc == 0 && wu.rc == 0 && u.disk == 0 &&
		   u.struct_size == offsetof(struct dsec_be_usage, disk),
		   "usage: a shorter struct gets nothing past its end");
	}
	{
		/* destroy: a running exec is cancelled, the scratch goes away. */
		struct dsec_exec_req req = { .code = "sleep 982", .timeout = 60 };
		struct wait we = { 0 }, wd = { 0 };
		int before;

		before = 0;
		{
			DIR *d = opendir(state);
			struct dirent *de;

			while (d && (de = readdir(d)))
				before += !strncmp(de->d_name, "sb.", 3);
			if (d)
				closedir(d);
		}
		rc = ops->exec(sb, &req, &r, done_cb, &we, &err);
		for (int i = 0; i < 50; i++) {
			ev_run(loop, EVRUN_NOWAIT);
			usleep(2000);
		}
		wd.in_op = 1;
		rc = ops->destroy(sb, done_cb, &wd, &err);
		wd.in_op = 0;
		ok(rc == 0 && !wd.fired && !wd.bad, "destroy started, done not called inside");
		run_until(&wd, 30);
		ok(we.fired && we.rc == -ECANCELED, "the running exec was cancelled (rc %d)", we.rc);
		ok(wd.fired && wd.rc == 0, "destroy done");
		res_free(&r);
		ok(before == 1 && dir_empty(state) && !mounted_under(state),
		   "scratch unmounted and removed");
		ok(wait_no_procs("sleep 982", 3), "its process is gone");
	}

	/* python3 sandbox keeps files too. */
	sb = sb_create("python3");
	rc = sb ? sb_exec(sb, "open('f', 'w').write('py')", &r) : -1;
	res_free(&r);
	rc = sb ? sb_exec(sb, "print(open('/work/f').read())", &r) : -1;
	is_str(out(&r), "py\n", "python3 sandbox files persist");
	res_free(&r);
	/* left alive on purpose: fini must clean it up */

	{
		char mine[64];

		host_fini_begin();
		ops->fini(be);
		for (int i = 0; i < 100; i++) {
			ev_run(loop, EVRUN_NOWAIT);
			usleep(10000);
		}
		/* Zygotes and units carry our cgroup name on their command line. */
		snprintf(mine, sizeof(mine), "dsec-fncall.%d/", (int)getpid());
		ok(host_procs(mine) == 0 && host_procs("sleep 98") == 0, "fini: no process left");
		ok(!mounted_under(state) && dir_empty(state), "fini: no mounts, no scratch left");
		ok(!cgroup_left(), "fini: no cgroup left");
	}
	rmdir(state);
	return done_testing();
}
