/* dsec-bench - load a running dsecd and measure it.
 *
 * N threads, one dsec_client each (clients are not thread-safe), take
 * requests from a shared counter (-n) or until a deadline (-d) and time each
 * one.  Every reply is checked, not just counted: with the default command
 * each request carries a unique X in its environment and stdout must be
 * exactly X and a newline with exit 0, so a daemon that mixes up replies,
 * drops output or answers from the wrong sandbox shows as mismatches.
 *
 * Modes:
 *   call     one-shot dsec_call per request;
 *   exec     one sandbox per thread (--sandboxes: a share of N per thread,
 *            taken in turn), created before the clock starts, then dsec_exec
 *            in it per request;
 *   create   create + destroy pairs; the latency is the create's;
 *   first    create, then one exec in it (checked), then destroy; the latency
 *            is create -> first exec reply, what a rollout waits for;
 *   pause    one sandbox per thread, created before the clock starts, then
 *            per request a pause and a resume of it, each timed: the table
 *            has a row for each (an idle sandbox: what it costs to freeze
 *            and thaw one).
 *
 * The table's last column is this process's CPU per measured request,
 * what the client itself costs.
 *
 * Exit status: 0 when every request succeeded and matched, 1 when any
 * failed or mismatched, 2 on a usage error or when the run could not start.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dsec.h"
#include "util.h"

#define EXIT_BAD 1		/* some request failed or mismatched */
#define EXIT_USAGE 2		/* usage error, or the run could not start */
#define MAX_THREADS 4096
#define MAX_SANDBOXES 100000
#define ERR_SHOWN 5		/* errors printed in full; the rest only counted */

enum mode {
	MODE_CALL, MODE_EXEC, MODE_CREATE, MODE_FIRST, MODE_PAUSE, MODE_PING, MODE_LOCAL,
	MODE_REPLAY,
};

/* --mode replay: steps each thread's sandbox runs before the clock starts,
 * then sends again, round and round. */
#define REPLAY_STEPS 100

static const char *const mode_names[] = {
	[MODE_CALL] = "call",
	[MODE_EXEC] = "exec",
	[MODE_CREATE] = "create",
	[MODE_FIRST] = "first",
	[MODE_PAUSE] = "pause",
	[MODE_PING] = "ping",
	[MODE_LOCAL] = "local",
	[MODE_REPLAY] = "replay",
};

/* Settings from the command line, read-only once threads start. */
struct bench_opts {
	const char *url;		/* -H, NULL = $DSEC_HOST, then default */
	enum mode mode;			/* --mode */
	unsigned threads;		/* -c */
	uint64_t requests;		/* -n, 0 when -d is used */
	double duration;		/* -d seconds, 0 when -n is used */
	uint64_t warmup;		/* --warmup requests before the clock starts */
	const char *backend;		/* --backend or NULL */
	const char *runtime;		/* --runtime or NULL */
	const char *image;		/* --image or NULL */
	const char **layers;		/* --layer refs, NULL-terminated, or NULL */
	size_t nlayers;			/* entries in layers */
	const char *cmd;		/* --cmd: a shell command line */
	const char *code;		/* --code: a snippet for the runtime */
	bool check_output;		/* stdout must be X\n (default command only) */
	bool json;			/* --json */
	const char *lat_file;		/* --latencies: appended to, or NULL */
	int pid;			/* --pid of the daemon for VmRSS, 0 = none */
	double timeout;			/* --timeout per command, 0 = daemon default */
	bool keep;			/* --keep: create and first modes leave their sandboxes */
	double rate;			/* --rate: requests per second in all, 0 = as fast as they go */
	bool trajectory;		/* --trajectory: exec's sandboxes log every step */
	unsigned sandboxes;		/* --sandboxes: exec mode's in all, 0 = one a thread */
};

/* One worker thread. */
struct worker {
	pthread_t thread;		/* the thread */
	unsigned index;			/* 0.. threads-1 */
	struct dsec_client *client;	/* its own connection */
	char *sandbox;			/* exec and pause modes: its sandbox id */
	char **more;			/* --sandboxes: its others, taken in turn */
	unsigned nmore;			/* entries in more */
	unsigned turn;			/* exec: the request's sandbox, 0 = sandbox */
	double *lat;			/* latencies in seconds of measured requests */
	size_t nlat, caplat;		/* used and allocated entries of lat */
	double resume_lat;		/* pause mode: the last request's resume */
	double *lat2;			/* pause mode: resume latencies, as lat */
	size_t nlat2, caplat2;		/* used and allocated entries of lat2 */
	uint64_t requests;		/* measured requests done */
	uint64_t errors;		/* measured requests that failed */
	uint64_t mismatches;		/* measured replies that were wrong */
	uint64_t step;			/* --trajectory, replay: the next step it sends */
	bool priming;			/* replay: running the steps it will send again */
};

static struct bench_opts opt = {
	.mode = MODE_CALL,
	.threads = 4,
};

/* Shared between workers. */
static atomic_uint_fast64_t warmup_left;	/* warmup tokens left */
static atomic_uint_fast64_t measured_left;	/* -n tokens left */
static atomic_uint_fast64_t seq;		/* unique X values */
static atomic_uint_fast64_t errors_shown;	/* errors printed so far */
static pthread_barrier_t barrier;		/* warmup done / clock started */
static double deadline;				/* -d: dsec_now() to stop at */

enum {
	OPT_MODE = 256,
	OPT_BACKEND,
	OPT_RUNTIME,
	OPT_IMAGE,
	OPT_LAYER,
	OPT_CMD,
	OPT_CODE,
	OPT_WARMUP,
	OPT_JSON,
	OPT_LATENCIES,
	OPT_PID,
	OPT_TIMEOUT,
	OPT_KEEP,
	OPT_RATE,
	OPT_TRAJECTORY,
	OPT_SANDBOXES,
	OPT_HELP,
	OPT_VERSION,
};

static const struct option long_opts[] = {
	{ .name = "host",	.has_arg = required_argument,	.val = 'H' },
	{ .name = "concurrency", .has_arg = required_argument,	.val = 'c' },
	{ .name = "requests",	.has_arg = required_argument,	.val = 'n' },
	{ .name = "duration",	.has_arg = required_argument,	.val = 'd' },
	{ .name = "mode",	.has_arg = required_argument,	.val = OPT_MODE },
	{ .name = "backend",	.has_arg = required_argument,	.val = OPT_BACKEND },
	{ .name = "runtime",	.has_arg = required_argument,	.val = OPT_RUNTIME },
	{ .name = "image",	.has_arg = required_argument,	.val = OPT_IMAGE },
	{ .name = "layer",	.has_arg = required_argument,	.val = OPT_LAYER },
	{ .name = "cmd",	.has_arg = required_argument,	.val = OPT_CMD },
	{ .name = "code",	.has_arg = required_argument,	.val = OPT_CODE },
	{ .name = "warmup",	.has_arg = required_argument,	.val = OPT_WARMUP },
	{ .name = "json",	.has_arg = no_argument,		.val = OPT_JSON },
	{ .name = "latencies",	.has_arg = required_argument,	.val = OPT_LATENCIES },
	{ .name = "pid",	.has_arg = required_argument,	.val = OPT_PID },
	{ .name = "timeout",	.has_arg = required_argument,	.val = OPT_TIMEOUT },
	{ .name = "keep",	.has_arg = no_argument,		.val = OPT_KEEP },
	{ .name = "rate",	.has_arg = required_argument,	.val = OPT_RATE },
	{ .name = "trajectory",	.has_arg = no_argument,		.val = OPT_TRAJECTORY },
	{ .name = "sandboxes",	.has_arg = required_argument,	.val = OPT_SANDBOXES },
	{ .name = "help",	.has_arg = no_argument,		.val = OPT_HELP },
	{ .name = "version",	.has_arg = no_argument,		.val = OPT_VERSION },
	{ 0 }
};

static const char usage_text[] =
	"usage: dsec-bench [-H ADDR] [-c N] [-n N | -d SECONDS]\n"
	"                  [--mode call|exec|create|first|pause|ping|local|replay]\n"
	"                  [--backend B] [--runtime R] [--image I [--layer REF]...]\n"
	"                  [--cmd CMD | --code CODE]\n"
	"                  [--warmup N] [--timeout S] [--pid PID] [--json]\n"
	"                  [--latencies FILE] [--keep] [--rate PER_SECOND] [--trajectory]\n"
	"                  [--sandboxes N]\n"
	"\n"
	"Load a running dsecd and report rate and latency.\n"
	"\n"
	"  -H, --host ADDR        daemon address (default $DSEC_HOST, then " DSEC_DEFAULT_URL ")\n"
	"  -c, --concurrency N    threads, one connection each (default 4)\n"
	"  -n, --requests N       measured requests in all (default 1000)\n"
	"  -d, --duration S       run for S (10, 1.5, 2m) instead of -n\n"
	"      --mode M           call (one-shot, default), exec (one sandbox per\n"
	"                         thread), create (create + destroy pairs), first\n"
	"                         (create -> first exec, destroy untimed), pause\n"
	"                         (pause + resume of one idle sandbox per thread),\n"
	"                         ping (the daemon's floor), local (the baseline:\n"
	"                         the same command spawned here, no daemon), replay\n"
	"                         (100 logged steps sent again, answered from the log)\n"
	"      --backend B        backend to ask for\n"
	"      --runtime R        fncall runtime (sh, python3)\n"
	"      --image I          image of the sandboxes (tag or digest)\n"
	"      --layer REF        an image stacked over I (repeatable, each over the last)\n"
	"      --cmd CMD          shell command to run instead of the checked default\n"
	"      --code CODE        runtime snippet to run instead of the checked default\n"
	"      --warmup N         requests before the clock starts (default 0)\n"
	"      --timeout S        per-command timeout (default: the daemon's)\n"
	"      --pid PID          report VmRSS of the daemon PID before and after\n"
	"      --json             print one JSON object instead of the table\n"
	"      --latencies FILE   append each measured latency (ms) to FILE, one a line\n"
	"      --keep             create and first modes: leave the sandboxes (no destroy)\n"
	"      --rate R           start R requests a second in all, spread over the threads\n"
	"      --trajectory       exec mode: the sandboxes keep a trajectory log and each\n"
	"                         request is a new step (durable before its reply)\n"
	"                         (open loop: a late one starts at once)\n"
	"      --sandboxes N      exec mode: N sandboxes in all (at least -c), each thread\n"
	"                         running its share in turn, one command at a time in each\n"
	"\n"
	"Exit status: 0 if every request succeeded and matched, 1 if not, 2 on error.\n";

static _Noreturn DSEC_PRINTF(1, 2) void usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("dsec-bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'dsec-bench --help' for more information.\n", stderr);
	exit(EXIT_USAGE);
}

static uint64_t parse_count(const char *what, const char *s, uint64_t min)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v < min)
		usage_error("invalid %s '%s'", what, s);
	return v;
}

/* Shell command or snippet to run for request X; the checked default needs a
 * snippet per runtime that prints $X and a newline. */
static const char *default_code(const char *runtime)
{
	if (!runtime || strcmp(runtime, "sh") == 0)
		return "echo \"$X\"";
	if (strcmp(runtime, "python3") == 0 || strcmp(runtime, "python") == 0)
		return "import os\nprint(os.environ['X'])";
	return NULL;
}

static void parse_args(int argc, char **argv)
{
	int c;
	size_t i;
	bool have_n = false;

	while ((c = getopt_long(argc, argv, "H:c:n:d:", long_opts, NULL)) != -1) {
		switch (c) {
		case 'H':
			opt.url = optarg;
			break;
		case 'c':
			opt.threads = (unsigned)parse_count("concurrency", optarg, 1);
			if (opt.threads > MAX_THREADS)
				usage_error("concurrency %u is over %d", opt.threads, MAX_THREADS);
			break;
		case 'n':
			opt.requests = parse_count("request count", optarg, 1);
			have_n = true;
			break;
		case 'd':
			if (dsec_parse_duration(optarg, &opt.duration) < 0 || opt.duration <= 0)
				usage_error("invalid duration '%s'", optarg);
			break;
		case OPT_MODE:
			for (i = 0; i < DSEC_ARRAY_LEN(mode_names); i++)
				if (strcmp(optarg, mode_names[i]) == 0)
					break;
			if (i == DSEC_ARRAY_LEN(mode_names))
				usage_error("unknown mode '%s': expected call, exec, create, first, "
					    "pause, ping, local or replay", optarg);
			opt.mode = (enum mode)i;
			break;
		case OPT_BACKEND:
			opt.backend = optarg;
			break;
		case OPT_RUNTIME:
			opt.runtime = optarg;
			break;
		case OPT_IMAGE:
			opt.image = optarg;
			break;
		case OPT_LAYER:
			opt.layers = xrealloc(opt.layers, (opt.nlayers + 2) * sizeof(*opt.layers));
			opt.layers[opt.nlayers++] = optarg;
			opt.layers[opt.nlayers] = NULL;
			break;
		case OPT_CMD:
			opt.cmd = optarg;
			break;
		case OPT_CODE:
			opt.code = optarg;
			break;
		case OPT_WARMUP:
			opt.warmup = parse_count("warmup count", optarg, 0);
			break;
		case OPT_JSON:
			opt.json = true;
			break;
		case OPT_LATENCIES:
			opt.lat_file = optarg;
			break;
		case OPT_KEEP:
			opt.keep = true;
			break;
		case OPT_TRAJECTORY:
			opt.trajectory = true;
			break;
		case OPT_SANDBOXES:
			opt.sandboxes = (unsigned)parse_count("sandbox count", optarg, 1);
			if (opt.sandboxes > MAX_SANDBOXES)
				usage_error("--sandboxes %u is over %d", opt.sandboxes,
					    MAX_SANDBOXES);
			break;
		case OPT_RATE: {
			char *end;
			opt.rate = strtod(optarg, &end);
			if (*end || !(opt.rate > 0) || opt.rate > 1e7)
				usage_error("invalid rate '%s'", optarg);
			break;
		}
		case OPT_PID:
			opt.pid = (int)parse_count("pid", optarg, 1);
			break;
		case OPT_TIMEOUT:
			if (dsec_parse_duration(optarg, &opt.timeout) < 0 || opt.timeout <= 0)
				usage_error("invalid timeout '%s'", optarg);
			break;
		case OPT_HELP:
			fputs(usage_text, stdout);
			exit(fflush(stdout) == 0 ? 0 : EXIT_USAGE);
		case OPT_VERSION:
			printf("dsec-bench %s (protocol %d)\n", DSEC_VERSION, DSEC_PROTO_VERSION);
			exit(fflush(stdout) == 0 ? 0 : EXIT_USAGE);
		default:
			fputs("Try 'dsec-bench --help' for more information.\n", stderr);
			exit(EXIT_USAGE);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (have_n && opt.duration > 0)
		usage_error("-n and -d are exclusive");
	if (!have_n && opt.duration == 0)
		opt.requests = 1000;
	if (opt.cmd && opt.code)
		usage_error("--cmd and --code are exclusive");
	if (opt.layers && !opt.image)
		usage_error("--layer needs --image");
	if (opt.sandboxes && (opt.mode != MODE_EXEC || opt.trajectory))
		usage_error("--sandboxes is for --mode exec without --trajectory");
	if (opt.sandboxes && opt.sandboxes < opt.threads)
		usage_error("--sandboxes %u is fewer than the %u threads", opt.sandboxes,
			    opt.threads);
	if ((opt.mode == MODE_CREATE || opt.mode == MODE_PAUSE || opt.mode == MODE_PING) &&
	    (opt.cmd || opt.code))
		usage_error("--cmd and --code do not apply to --mode %s", mode_names[opt.mode]);
	opt.check_output = !opt.cmd && !opt.code;
	if (opt.mode == MODE_LOCAL && opt.runtime && strcmp(opt.runtime, "sh") &&
	    strcmp(opt.runtime, "python3") && strcmp(opt.runtime, "python"))
		usage_error("--mode local runs sh or python3, not '%s'", opt.runtime);
	if (opt.check_output && opt.mode != MODE_CREATE && opt.mode != MODE_PAUSE &&
	    opt.mode != MODE_PING && !default_code(opt.runtime))
		usage_error("no default snippet for runtime '%s': give --cmd or --code",
			    opt.runtime);
}

/* CPU (user + system) this process has used, in seconds. */
static double cpu_seconds(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) < 0)
		return 0;
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* VmRSS of pid in KiB, or -1 if it cannot be read. */
static long read_rss_kb(int pid)
{
	char path[64], line[256];
	FILE *f;
	long kb = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static void note_error(struct worker *w, const char *fmt, ...) DSEC_PRINTF(2, 3);

/* Print the first few failures in full so a broken run explains itself. */
static void note_error(struct worker *w, const char *fmt, ...)
{
	char msg[DSEC_ERR_MSG_MAX + 256];
	va_list ap;

	if (atomic_fetch_add(&errors_shown, 1) >= ERR_SHOWN)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "dsec-bench: thread %u: %s\n", w->index, msg);
}

static void fill_create_opts(struct dsec_create_opts *co)
{
	memset(co, 0, sizeof(*co));
	co->backend = opt.backend;
	co->runtime = opt.runtime;
	co->image = opt.image;
	co->layers = opt.layers;
}

/* The command of one request: env holds "X=<value>", sh_argv runs --cmd
 * through sh when the runtime is not sh. */
static void fill_req(struct dsec_cmd *req, const char *const env[2],
		     const char *const sh_argv[4])
{
	memset(req, 0, sizeof(*req));
	req->env = env;
	req->timeout = opt.timeout;
	req->output_cap = 4096;
	if (opt.cmd && opt.runtime && strcmp(opt.runtime, "sh") != 0)
		req->argv = sh_argv;	/* --cmd always goes through sh */
	else if (opt.cmd)
		req->code = opt.cmd;
	else if (opt.code)
		req->code = opt.code;
	else
		req->code = default_code(opt.runtime);
}

/* Up to 120 bytes of b for a message: newlines shown as \n, other control
 * bytes as '?'. */
static void excerpt(char *out, size_t size, const struct dsec_buf *b)
{
	size_t i, o = 0;

	DSEC_ASSERT(size >= 8);
	for (i = 0; i < b->len && i < 120 && o + 4 < size; i++) {
		unsigned char ch = (unsigned char)b->data[i];

		if (ch == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
		} else {
			out[o++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
		}
	}
	if (i < b->len && o + 3 < size)
		out[o++] = '.', out[o++] = '.', out[o++] = '.';
	out[o] = '\0';
}

/* Check one reply; returns true when it is right. */
static bool check_reply(struct worker *w, const struct dsec_cmd_res *res, const char *x)
{
	size_t xlen = strlen(x);
	char text[256];

	if (res->timed_out || res->signal || res->exit_code != 0) {
		excerpt(text, sizeof(text), &res->err);
		note_error(w, "mismatch: request %s: exit %d, signal %d%s; stderr: '%s'", x,
			   res->exit_code, res->signal, res->timed_out ? ", timed out" : "", text);
		return false;
	}
	if (!opt.check_output)
		return true;
	if (res->out.len != xlen + 1 || memcmp(res->out.data, x, xlen) != 0 ||
	    res->out.data[xlen] != '\n') {
		excerpt(text, sizeof(text), &res->out);
		note_error(w, "mismatch: request %s: stdout was '%s', expected '%s\\n'", x, text, x);
		return false;
	}
	return true;
}

/* --mode local: what the request runs, spawned here with posix_spawn (the
 * cheapest standard way), its stdout read through a pipe: the baseline a
 * sandbox's call or exec is measured against.  0 and *res, or -1. */
static int run_local(struct worker *w, const struct dsec_cmd *req, const char *envx,
		     struct dsec_cmd_res *res)
{
	/* --cmd always goes through sh (req->argv), a snippet through the
	 * runtime. */
	bool py = req->code && opt.runtime && strcmp(opt.runtime, "sh") != 0;
	const char *code = req->code ? req->code : req->argv[2];
	char *argv[] = { (char *)(py ? "/usr/bin/python3" : "/bin/sh"), (char *)"-c", (char *)code,
			 NULL };
	char *const envp[] = { (char *)envx, (char *)"PATH=/usr/local/bin:/usr/bin:/bin", NULL };
	posix_spawn_file_actions_t fa;
	char buf[4096];
	int pfd[2], st, rc;
	pid_t pid;
	ssize_t n;

	if (pipe2(pfd, O_CLOEXEC) < 0) {
		note_error(w, "pipe: %s", strerror(errno));
		return -1;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	if (rc != 0) {
		close(pfd[0]);
		note_error(w, "cannot spawn %s: %s", argv[0], strerror(rc));
		return -1;
	}
	while ((n = read(pfd[0], buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
		if (n > 0)
			dsec_buf_add(&res->out, buf, (size_t)n);
	close(pfd[0]);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			note_error(w, "waitpid: %s", strerror(errno));
			return -1;
		}
	res->exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	res->signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
	return 0;
}

/* One request of the chosen mode.  Returns 0 ok, 1 mismatch, -1 error; *lat
 * is its latency in seconds. */
static int one_request(struct worker *w, double *lat)
{
	struct dsec_create_opts co;
	struct dsec_cmd req;
	struct dsec_cmd_res res = { 0 };
	struct dsec_err err;
	char x[64], envx[80];
	const char *env[2] = { envx, NULL };
	const char *sh_argv[4] = { "/bin/sh", "-c", opt.cmd, NULL };
	char *id = NULL;
	double t0;
	int rc, ret;

	dsec_err_clear(&err);
	if (opt.mode == MODE_REPLAY)	/* the request step k was, every time */
		snprintf(x, sizeof(x), "r%u-%" PRIu64, w->index, w->step % REPLAY_STEPS);
	else
		snprintf(x, sizeof(x), "b%d-%" PRIuFAST64, (int)getpid(),
			 atomic_fetch_add(&seq, 1));
	snprintf(envx, sizeof(envx), "X=%s", x);
	fill_create_opts(&co);
	fill_req(&req, env, sh_argv);

	t0 = dsec_now();
	switch (opt.mode) {
	case MODE_CALL:
		rc = dsec_call(w->client, &co, &req, &res, &err);
		break;
	case MODE_EXEC:
		if (opt.trajectory)
			rc = dsec_exec_step(w->client, w->sandbox, w->step++, &req, &res, NULL, &err);
		else
			rc = dsec_exec(w->client, w->turn ? w->more[w->turn - 1] : w->sandbox,
				       &req, &res, &err);
		w->turn = (w->turn + 1) % (w->nmore + 1);
		break;
	case MODE_REPLAY: {
		bool replayed = false;
		rc = dsec_exec_step(w->client, w->sandbox, w->step++ % REPLAY_STEPS, &req, &res,
				    &replayed, &err);
		if (rc == 0 && !replayed && !w->priming) {
			*lat = dsec_now() - t0;
			note_error(w, "step %" PRIu64 " ran again: it was not answered from the log",
				   (w->step - 1) % REPLAY_STEPS);
			dsec_cmd_res_free(&res);
			return 1;
		}
		break;
	}
	case MODE_LOCAL:
		if (run_local(w, &req, envx, &res) < 0) {
			dsec_cmd_res_free(&res);
			return -1;
		}
		*lat = dsec_now() - t0;
		ret = check_reply(w, &res, x) ? 0 : 1;
		dsec_cmd_res_free(&res);
		return ret;
	case MODE_PING:
		rc = dsec_ping(w->client, &err);
		*lat = dsec_now() - t0;
		if (rc < 0)
			note_error(w, "ping failed: %s (%s)", err.msg, dsec_code_name(err.code));
		return rc < 0 ? -1 : 0;
	case MODE_CREATE:
		rc = dsec_create(w->client, &co, &id, &err);
		*lat = dsec_now() - t0;
		if (rc < 0) {
			note_error(w, "cannot create sandbox: %s (%s)", err.msg,
				   dsec_code_name(err.code));
			return -1;
		}
		if (opt.keep) {	/* a node filling up (placement's spread) */
			free(id);
			return 0;
		}
		rc = dsec_destroy(w->client, id, &err);
		if (rc < 0)
			note_error(w, "cannot destroy sandbox '%s': %s (%s)", id, err.msg,
				   dsec_code_name(err.code));
		free(id);
		return rc < 0 ? -1 : 0;
	case MODE_FIRST:
		/* create -> first exec, the latency a rollout sees; the destroy
		 * after it is not timed. */
		rc = dsec_create(w->client, &co, &id, &err);
		if (rc == 0) {
			rc = dsec_exec(w->client, id, &req, &res, &err);
			*lat = dsec_now() - t0;
			/* --keep: as a rollout's sandbox between two steps */
			if (!opt.keep && dsec_destroy(w->client, id, &err) < 0 && rc == 0)
				rc = -1;
			free(id);
		}
		if (rc < 0) {
			note_error(w, "request %s failed: %s (%s)", x, err.msg,
				   dsec_code_name(err.code));
			dsec_cmd_res_free(&res);
			return -1;
		}
		ret = check_reply(w, &res, x) ? 0 : 1;
		dsec_cmd_res_free(&res);
		return ret;
	case MODE_PAUSE:
		rc = dsec_pause(w->client, w->sandbox, &err);
		*lat = dsec_now() - t0;
		if (rc == 0) {
			t0 = dsec_now();
			rc = dsec_resume(w->client, w->sandbox, &err);
			w->resume_lat = dsec_now() - t0;
		}
		if (rc < 0)
			note_error(w, "cannot pause or resume sandbox '%s': %s (%s)", w->sandbox,
				   err.msg, dsec_code_name(err.code));
		return rc < 0 ? -1 : 0;
	default:
		DSEC_BUG("mode %d", (int)opt.mode);
	}
	*lat = dsec_now() - t0;
	if (rc < 0) {
		note_error(w, "request %s failed: %s (%s)", x, err.msg, dsec_code_name(err.code));
		return -1;
	}
	ret = check_reply(w, &res, x) ? 0 : 1;
	dsec_cmd_res_free(&res);
	return ret;
}

static bool take_token(atomic_uint_fast64_t *left)
{
	uint_fast64_t n = atomic_load(left);

	while (n > 0)
		if (atomic_compare_exchange_weak(left, &n, n - 1))
			return true;
	return false;
}

static void push_lat(double **v, size_t *n, size_t *cap, double lat)
{
	if (*n == *cap) {
		*cap = *cap ? 2 * *cap : 1024;
		*v = xrealloc(*v, *cap * sizeof(**v));
	}
	(*v)[(*n)++] = lat;
}

static void record(struct worker *w, int r, double lat)
{
	w->requests++;
	if (r < 0) {
		w->errors++;
		return;
	}
	if (r > 0)
		w->mismatches++;
	push_lat(&w->lat, &w->nlat, &w->caplat, lat);
	if (opt.mode == MODE_PAUSE)
		push_lat(&w->lat2, &w->nlat2, &w->caplat2, w->resume_lat);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	double lat = 0;
	int r;

	while (take_token(&warmup_left))
		(void)one_request(w, &lat);
	pthread_barrier_wait(&barrier);	/* warmup done everywhere */
	pthread_barrier_wait(&barrier);	/* main started the clock */

	/* --rate: this thread's requests are due every threads / rate s. */
	double start = dsec_now(), every = opt.rate > 0 ? opt.threads / opt.rate : 0;
	uint64_t done = 0;
	for (;;) {
		if (opt.duration > 0 ? dsec_now() >= deadline : !take_token(&measured_left))
			break;
		if (every > 0) {
			/* the threads staggered over one period */
			double due = start + every * ((double)w->index / opt.threads + (double)done++);
			double wait = due - dsec_now();
			if (wait > 0)
				usleep((useconds_t)(wait * 1e6));
		}
		r = one_request(w, &lat);	/* sets lat: not in record()'s argument list */
		record(w, r, lat);
	}
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v (n > 0), in milliseconds. */
static double pct_ms(const double *v, size_t n, double p)
{
	size_t rank = (size_t)ceil(p / 100.0 * (double)n);

	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return v[rank - 1] * 1000.0;
}

/* Result of the whole run. */
struct summary {
	uint64_t requests;		/* measured requests */
	uint64_t errors;		/* failed */
	uint64_t mismatches;		/* wrong replies */
	double seconds;			/* wall time of the measured phase */
	double rate;			/* requests per second */
	double p50, p90, p99, max;	/* latency in ms, NAN when nothing succeeded */
	double r50, r90, r99, rmax;	/* pause mode: the same for resume */
	long rss_before, rss_after;	/* daemon VmRSS KiB, -1 unknown */
	double cpu_us;			/* this process's CPU (user + system) per measured
					 * request, in microseconds: what the client costs */
};

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

static void json_num(const char *key, double v, bool last)
{
	printf("\"%s\": ", key);
	if (isnan(v))
		fputs("null", stdout);
	else
		printf("%.3f", v);
	fputs(last ? "" : ", ", stdout);
}

/* A VmRSS value, or unknown when it could not be read. */
static void print_kb(long kb, const char *unknown)
{
	if (kb < 0)
		fputs(unknown, stdout);
	else
		printf("%ld", kb);
}

static void print_json(const struct summary *s)
{
	printf("{\"mode\": \"%s\", \"backend\": ", mode_names[opt.mode]);
	if (opt.mode == MODE_LOCAL)
		json_str("none");
	else if (opt.backend)
		json_str(opt.backend);
	else
		fputs("null", stdout);
	fputs(", \"runtime\": ", stdout);
	if (opt.runtime)
		json_str(opt.runtime);
	else
		fputs("null", stdout);
	printf(", \"concurrency\": %u, \"requests\": %" PRIu64 ", \"errors\": %" PRIu64
	       ", \"mismatches\": %" PRIu64 ", ", opt.threads, s->requests, s->errors,
	       s->mismatches);
	json_num("seconds", s->seconds, false);
	json_num("rate", s->rate, false);
	json_num("p50_ms", s->p50, false);
	json_num("p90_ms", s->p90, false);
	json_num("p99_ms", s->p99, false);
	json_num("max_ms", s->max, false);
	json_num("client_cpu_us", s->cpu_us, opt.pid == 0 && opt.mode != MODE_PAUSE);
	if (opt.mode == MODE_PAUSE) {
		json_num("resume_p50_ms", s->r50, false);
		json_num("resume_p90_ms", s->r90, false);
		json_num("resume_p99_ms", s->r99, false);
		json_num("resume_max_ms", s->rmax, opt.pid == 0);
	}
	if (opt.pid) {
		printf("\"pid\": %d, \"rss_before_kb\": ", opt.pid);
		print_kb(s->rss_before, "null");
		fputs(", \"rss_after_kb\": ", stdout);
		print_kb(s->rss_after, "null");
	}
	fputs("}\n", stdout);
}

static void fmt_ms(char *buf, size_t n, double v)
{
	if (isnan(v))
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%.2f", v);
}

/* One row of the table. */
static void print_row(const char *mode, const struct summary *s, double p50v, double p90v,
		      double p99v, double maxv)
{
	char p50[32], p90[32], p99[32], max[32];

	fmt_ms(p50, sizeof(p50), p50v);
	fmt_ms(p90, sizeof(p90), p90v);
	fmt_ms(p99, sizeof(p99), p99v);
	fmt_ms(max, sizeof(max), maxv);
	printf("%-6s  %-9s  %-7s  %11u  %8" PRIu64 "  %6" PRIu64 "  %10" PRIu64
	       "  %7.3f  %8.1f  %7s  %7s  %7s  %7s  %6.0f\n",
	       mode, opt.mode == MODE_LOCAL ? "none" : opt.backend ? opt.backend : "default",
	       opt.runtime ? opt.runtime : "default", opt.threads, s->requests, s->errors,
	       s->mismatches, s->seconds, s->rate, p50, p90, p99, max, s->cpu_us);
}

static void print_table(const struct summary *s)
{
	printf("%-6s  %-9s  %-7s  %11s  %8s  %6s  %10s  %7s  %8s  %7s  %7s  %7s  %7s  %6s\n",
	       "mode", "backend", "runtime", "concurrency", "requests", "errors", "mismatches",
	       "seconds", "rate/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "cpu us");
	print_row(mode_names[opt.mode], s, s->p50, s->p90, s->p99, s->max);
	if (opt.mode == MODE_PAUSE)
		print_row("resume", s, s->r50, s->r90, s->r99, s->rmax);
	if (opt.pid) {
		printf("daemon pid %d VmRSS: ", opt.pid);
		print_kb(s->rss_before, "?");
		fputs(" kB before, ", stdout);
		print_kb(s->rss_after, "?");
		fputs(" kB after", stdout);
		if (s->rss_before >= 0 && s->rss_after >= 0)
			printf(" (%+ld kB)", s->rss_after - s->rss_before);
		putchar('\n');
	}
}

/* p50, p90, p99 and max in ms of every worker's lat (lat2 when second),
 * NAN when there are none. */
static void percentiles(const struct worker *ws, bool second, double *p50, double *p90,
			double *p99, double *max)
{
	size_t n = 0, k;
	double *all;

	for (unsigned i = 0; i < opt.threads; i++)
		n += second ? ws[i].nlat2 : ws[i].nlat;
	*p50 = *p90 = *p99 = *max = NAN;
	if (!n)
		return;
	all = xmalloc(n * sizeof(*all));
	n = 0;
	for (unsigned i = 0; i < opt.threads; i++) {
		k = second ? ws[i].nlat2 : ws[i].nlat;
		memcpy(all + n, second ? ws[i].lat2 : ws[i].lat, k * sizeof(*all));
		n += k;
	}
	qsort(all, n, sizeof(*all), cmp_double);
	*p50 = pct_ms(all, n, 50);
	*p90 = pct_ms(all, n, 90);
	*p99 = pct_ms(all, n, 99);
	*max = all[n - 1] * 1000.0;
	free(all);
}

/* --latencies: appends every worker's latencies (the first kind) in ms,
 * so that runs taken apart (interleaved with others) can be pooled. */
static int write_latencies(const struct worker *ws)
{
	FILE *f = fopen(opt.lat_file, "ae");

	if (!f) {
		fprintf(stderr, "dsec-bench: cannot open '%s': %s\n", opt.lat_file, strerror(errno));
		return -1;
	}
	for (unsigned i = 0; i < opt.threads; i++)
		for (size_t k = 0; k < ws[i].nlat; k++)
			fprintf(f, "%.6f\n", ws[i].lat[k] * 1000.0);
	if (fclose(f) != 0) {
		fprintf(stderr, "dsec-bench: cannot write '%s': %s\n", opt.lat_file, strerror(errno));
		return -1;
	}
	return 0;
}

/* Connect every worker and, in exec mode, give each its sandbox.  Returns
 * 0, or -1 after printing why (the caller cleans up). */
static int setup_workers(struct worker *ws)
{
	struct dsec_create_opts co;
	struct dsec_err err;
	unsigned i;

	fill_create_opts(&co);
	for (i = 0; i < opt.threads; i++) {
		ws[i].index = i;
		dsec_err_clear(&err);
		if (opt.mode == MODE_LOCAL)
			continue;	/* no daemon */
		if (dsec_connect(&ws[i].client, opt.url, &err) < 0) {
			fprintf(stderr, "dsec-bench: %s (%s)\n", err.msg, dsec_code_name(err.code));
			return -1;
		}
		struct dsec_rl_opts rl = { .struct_size = sizeof(rl), .trajectory = 1 };
		bool logged = opt.trajectory || opt.mode == MODE_REPLAY;
		if ((opt.mode == MODE_EXEC || opt.mode == MODE_PAUSE || opt.mode == MODE_REPLAY) &&
		    dsec_create_rl(ws[i].client, &co, logged ? &rl : NULL, &ws[i].sandbox, &err) < 0) {
			fprintf(stderr, "dsec-bench: cannot create the sandbox of thread %u: %s (%s)\n",
				i, err.msg, dsec_code_name(err.code));
			return -1;
		}
		/* --sandboxes: thread i's share past its first. */
		unsigned share = opt.sandboxes ? opt.sandboxes / opt.threads +
						 (i < opt.sandboxes % opt.threads) : 1;
		ws[i].more = share > 1 ? xcalloc(share - 1, sizeof(*ws[i].more)) : NULL;
		for (; ws[i].nmore + 1 < share; ws[i].nmore++)
			if (dsec_create(ws[i].client, &co, &ws[i].more[ws[i].nmore], &err) < 0) {
				fprintf(stderr, "dsec-bench: cannot create sandbox %u of thread "
					"%u: %s (%s)\n", ws[i].nmore + 2, i, err.msg,
					dsec_code_name(err.code));
				return -1;
			}
		/* replay: the steps it sends again, run once. */
		for (uint64_t k = 0; opt.mode == MODE_REPLAY && k < REPLAY_STEPS; k++) {
			double lat;
			ws[i].step = k;
			ws[i].priming = true;
			if (one_request(&ws[i], &lat) != 0) {
				fprintf(stderr, "dsec-bench: cannot run step %" PRIu64 " of thread %u\n",
					k, i);
				return -1;
			}
			ws[i].priming = false;
			ws[i].step = 0;
		}
	}
	return 0;
}

static void teardown_workers(struct worker *ws)
{
	struct dsec_err err;
	unsigned i;

	for (i = 0; i < opt.threads; i++) {
		if (ws[i].sandbox && ws[i].client) {
			dsec_err_clear(&err);
			if (dsec_destroy(ws[i].client, ws[i].sandbox, &err) < 0)
				fprintf(stderr, "dsec-bench: cannot destroy sandbox '%s': %s (%s)\n",
					ws[i].sandbox, err.msg, dsec_code_name(err.code));
		}
		free(ws[i].sandbox);
		for (unsigned k = 0; k < ws[i].nmore; k++) {
			dsec_err_clear(&err);
			if (ws[i].client && dsec_destroy(ws[i].client, ws[i].more[k], &err) < 0)
				fprintf(stderr, "dsec-bench: cannot destroy sandbox '%s': "
					"%s (%s)\n", ws[i].more[k], err.msg,
					dsec_code_name(err.code));
			free(ws[i].more[k]);
		}
		free(ws[i].more);
		free(ws[i].lat);
		free(ws[i].lat2);
		if (ws[i].client)
			dsec_close(ws[i].client);
	}
}

int main(int argc, char **argv)
{
	struct worker *ws;
	struct summary s = { .rss_before = -1, .rss_after = -1 };
	double t0;
	unsigned i, started = 0;
	int rc;

	parse_args(argc, argv);
	ws = xcalloc(opt.threads, sizeof(*ws));
	if (setup_workers(ws) < 0) {
		teardown_workers(ws);
		free(ws);
		return EXIT_USAGE;
	}

	atomic_store(&warmup_left, opt.warmup);
	atomic_store(&measured_left, opt.requests);
	rc = pthread_barrier_init(&barrier, NULL, opt.threads + 1);
	DSEC_ASSERT(rc == 0);
	for (i = 0; i < opt.threads; i++) {
		rc = pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]);
		if (rc != 0) {
			fprintf(stderr, "dsec-bench: cannot start thread %u: %s\n", i, strerror(rc));
			/* The barrier counts on every thread: nothing sane is left to do. */
			exit(EXIT_USAGE);
		}
		started++;
	}

	pthread_barrier_wait(&barrier);		/* warmup over */
	if (opt.pid)
		s.rss_before = read_rss_kb(opt.pid);
	double cpu0 = cpu_seconds();
	t0 = dsec_now();
	deadline = t0 + opt.duration;
	pthread_barrier_wait(&barrier);		/* go */
	for (i = 0; i < started; i++)
		pthread_join(ws[i].thread, NULL);
	s.seconds = dsec_now() - t0;
	pthread_barrier_destroy(&barrier);

	for (i = 0; i < opt.threads; i++) {
		s.requests += ws[i].requests;
		s.errors += ws[i].errors;
		s.mismatches += ws[i].mismatches;
	}
	s.rate = s.seconds > 0 ? (double)s.requests / s.seconds : 0;
	s.cpu_us = s.requests ? (cpu_seconds() - cpu0) * 1e6 / (double)s.requests : NAN;
	percentiles(ws, false, &s.p50, &s.p90, &s.p99, &s.max);
	percentiles(ws, true, &s.r50, &s.r90, &s.r99, &s.rmax);
	if (opt.lat_file && write_latencies(ws) < 0) {
		teardown_workers(ws);
		free(ws);
		return EXIT_USAGE;
	}

	teardown_workers(ws);
	free(ws);
	/* After the exec-mode sandboxes are gone, so a leak would show. */
	if (opt.pid)
		s.rss_after = read_rss_kb(opt.pid);

	if (opt.json)
		print_json(&s);
	else
		print_table(&s);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "dsec-bench: cannot write the report: %s\n", strerror(errno));
		return EXIT_USAGE;
	}
	if (s.errors || s.mismatches) {
		fprintf(stderr, "dsec-bench: %" PRIu64 " errors and %" PRIu64 " mismatches in %"
			PRIu64 " requests\n", s.errors, s.mismatches, s.requests);
		return EXIT_BAD;
	}
	return 0;
}
