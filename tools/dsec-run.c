/* dsec-run - run one command in a dsec sandbox, as if it ran here.
 *
 * The command's stdout goes to our stdout, its stderr to our stderr, and we
 * exit with its status (128+signal when a signal killed it, 124 when its
 * timeout expired, as timeout(1) does).  Our own failures, a dsec error
 * included, exit 125 so that a script can tell them from the command's.
 *
 * Three ways to reach a sandbox:
 *   default   one-shot dsec_call: a fresh sandbox runs the command and is gone;
 *   --keep    dsec_create, print the id on stderr, dsec_exec, leave it alive;
 *   --id ID   dsec_exec in an existing sandbox.
 * With --snapshot TAG the kept sandbox is then saved as image TAG
 * (dsec_snapshot) and the new image's digest is printed on stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "dsec.h"
#include "run-batch.h"
#include "util.h"

/* Exit statuses of our own, after env(1) and timeout(1). */
#define EXIT_TIMEOUT 124	/* the command's timeout expired */
#define EXIT_FAILED 125		/* dsec-run itself failed (usage, dsec error) */

/* Everything the command line says. */
struct run_opts {
	const char *url;		/* -H; NULL = $DSEC_HOST, then the default */
	struct dsec_create_opts create;	/* backend, image, runtime for new sandboxes */
	const char **env;		/* --env K=V strings, NULL-terminated */
	size_t nenv;			/* entries in env */
	const char **allow;		/* --allow entries, NULL-terminated */
	size_t nallow;			/* entries in allow */
	const char **deny;		/* --deny-syscall names, NULL-terminated */
	size_t ndeny;			/* entries in deny */
	const char **layers;		/* --layer refs, NULL-terminated */
	size_t nlayers;			/* entries in layers */
	const char *cwd;		/* --cwd */
	const char *stdin_path;		/* --stdin FILE or "-", NULL = empty stdin */
	double timeout;			/* --timeout seconds, 0 = daemon default */
	uint64_t output_cap;		/* --output-cap bytes, 0 = daemon default */
	double client_timeout;		/* --client-timeout seconds, 0 = libdsec's */
	bool keep;			/* --keep: create, exec, leave it alive */
	const char *id_file;		/* --id-file: where --keep writes the id, or NULL */
	const char *id;			/* --id: run in this existing sandbox */
	const char *code;		/* -c: a snippet for the runtime */
	char **argv;			/* the command, NULL-terminated, or NULL */
	const char *snapshot;		/* --snapshot: tag to save the sandbox as, or NULL */
	bool stream;			/* --stream: output as it comes, signals forwarded */
	bool tty;			/* -t: on a terminal of the sandbox (implies --stream) */
	const char *batch;		/* --batch FILE: many jobs (run-batch.c), or NULL */
	unsigned jobs;			/* -j: batch jobs at once */
	unsigned retries;		/* --retries */
	bool keep_going;		/* --keep-going */
};

enum {
	OPT_BACKEND = 256,
	OPT_IMAGE,
	OPT_RUNTIME,
	OPT_TIMEOUT,
	OPT_ENV,
	OPT_CWD,
	OPT_STDIN,
	OPT_OUTPUT_CAP,
	OPT_KEEP,
	OPT_ID,
	OPT_CLIENT_TIMEOUT,
	OPT_NETWORK,
	OPT_ALLOW,
	OPT_DNS,
	OPT_DENY,
	OPT_HELP,
	OPT_VERSION,
	OPT_SNAPSHOT,
	OPT_STREAM,
	OPT_LAYER,
	OPT_ID_FILE,
	OPT_MEMORY,
	OPT_CPUS,
	OPT_PIDS,
	OPT_DISK,
	OPT_TTL,
	OPT_IDLE_TTL,
	OPT_BATCH,
	OPT_RETRIES,
	OPT_KEEP_GOING,
};

static const struct option long_opts[] = {
	{ .name = "host",	.has_arg = required_argument,	.val = 'H' },
	{ .name = "backend",	.has_arg = required_argument,	.val = OPT_BACKEND },
	{ .name = "image",	.has_arg = required_argument,	.val = OPT_IMAGE },
	{ .name = "layer",	.has_arg = required_argument,	.val = OPT_LAYER },
	{ .name = "runtime",	.has_arg = required_argument,	.val = OPT_RUNTIME },
	{ .name = "timeout",	.has_arg = required_argument,	.val = OPT_TIMEOUT },
	{ .name = "env",	.has_arg = required_argument,	.val = OPT_ENV },
	{ .name = "cwd",	.has_arg = required_argument,	.val = OPT_CWD },
	{ .name = "stdin",	.has_arg = required_argument,	.val = OPT_STDIN },
	{ .name = "output-cap",	.has_arg = required_argument,	.val = OPT_OUTPUT_CAP },
	{ .name = "keep",	.has_arg = no_argument,		.val = OPT_KEEP },
	{ .name = "id",		.has_arg = required_argument,	.val = OPT_ID },
	{ .name = "client-timeout", .has_arg = required_argument, .val = OPT_CLIENT_TIMEOUT },
	{ .name = "network",	.has_arg = required_argument,	.val = OPT_NETWORK },
	{ .name = "allow",	.has_arg = required_argument,	.val = OPT_ALLOW },
	{ .name = "dns",	.has_arg = required_argument,	.val = OPT_DNS },
	{ .name = "deny-syscall", .has_arg = required_argument,	.val = OPT_DENY },
	{ .name = "code",	.has_arg = required_argument,	.val = 'c' },
	{ .name = "help",	.has_arg = no_argument,		.val = OPT_HELP },
	{ .name = "version",	.has_arg = no_argument,		.val = OPT_VERSION },
	{ .name = "snapshot",	.has_arg = required_argument,	.val = OPT_SNAPSHOT },
	{ .name = "stream",	.has_arg = no_argument,		.val = OPT_STREAM },
	{ .name = "id-file",	.has_arg = required_argument,	.val = OPT_ID_FILE },
	{ .name = "memory",	.has_arg = required_argument,	.val = OPT_MEMORY },
	{ .name = "cpus",	.has_arg = required_argument,	.val = OPT_CPUS },
	{ .name = "pids",	.has_arg = required_argument,	.val = OPT_PIDS },
	{ .name = "disk",	.has_arg = required_argument,	.val = OPT_DISK },
	{ .name = "ttl",	.has_arg = required_argument,	.val = OPT_TTL },
	{ .name = "idle-ttl",	.has_arg = required_argument,	.val = OPT_IDLE_TTL },
	{ .name = "tty",	.has_arg = no_argument,		.val = 't' },
	{ .name = "batch",	.has_arg = required_argument,	.val = OPT_BATCH },
	{ .name = "jobs",	.has_arg = required_argument,	.val = 'j' },
	{ .name = "retries",	.has_arg = required_argument,	.val = OPT_RETRIES },
	{ .name = "keep-going",	.has_arg = no_argument,		.val = OPT_KEEP_GOING },
	{ 0 }
};

static const char usage_text[] =
	"usage: dsec-run [-H ADDR] [--backend B] [--image I] [--runtime R] [--timeout S]\n"
	"                [--layer REF]... [--env K=V]... [--cwd DIR] [--stdin FILE|-]\n"
	"                [--output-cap BYTES] [--network none|allowlist] [--dns IP]\n"
	"                [--allow ADDR[:PORTS[/PROTO]]]... [--deny-syscall NAME]...\n"
	"                [--memory SIZE] [--cpus N] [--pids N] [--disk SIZE] [--ttl S]\n"
	"                [--idle-ttl S] [--keep [--id-file FILE] | --id ID] [--snapshot TAG]\n"
	"                [--client-timeout S]\n"
	"                [--stream | -t]\n"
	"                (-c CODE | [--] CMD [ARG]...)\n"
	"       dsec-run [-H ADDR] --batch JOBS.jsonl [-j N] [--keep-going] [--retries N]\n"
	"       dsec-run [-H ADDR] trajectory SANDBOX\n"
	"       dsec-run [-H ADDR] replay FILE\n"
	"       dsec-run [-H ADDR] recover SANDBOX\n"
	"\n"
	"Run a command in a fresh dsec sandbox; its stdout and stderr come out here and\n"
	"its exit status is ours.\n"
	"\n"
	"  -H, --host ADDR          daemon address (default $DSEC_HOST,\n"
	"                           then " DSEC_DEFAULT_URL ")\n"
	"      --backend B          backend of the new sandbox (fncall, container, ...)\n"
	"      --image I            image of the new sandbox\n"
	"      --layer REF          stack image REF's layers over I's (repeatable: each\n"
	"                           over the one before); env, cwd, user stay I's\n"
	"      --runtime R          fncall runtime (sh, python3)\n"
	"      --timeout S          kill the command after S (30, 1.5, 250ms, 2m); exit 124\n"
	"      --env K=V            set a variable for the command (repeatable)\n"
	"      --cwd DIR            working directory inside the sandbox\n"
	"      --stdin FILE|-       feed FILE (- = our stdin) to the command; default: empty\n"
	"      --output-cap N       keep at most N bytes (64k, 1M) of stdout and of stderr\n"
	"      --network MODE       none (loopback only) or allowlist (container)\n"
	"      --allow ENTRY        let the sandbox reach ENTRY, e.g. 10.0.0.0/8:443/tcp\n"
	"                           (repeatable; implies --network allowlist)\n"
	"      --dns IP             the resolver the sandbox may use (allowlist)\n"
	"      --deny-syscall NAME  commands may not make system call NAME (EPERM),\n"
	"                           on top of the backend's filter (repeatable; container)\n"
	"      --memory SIZE        the new sandbox's memory limit (512M, 2G)\n"
	"      --cpus N             its CPU quota in cores (0.5, 2)\n"
	"      --pids N             its limit of processes and threads\n"
	"      --disk SIZE          its writable disk (container, fncall scratch)\n"
	"      --ttl S              destroyed after S at most (1h, 30m); default the daemon's\n"
	"      --idle-ttl S         destroyed after S without requests\n"
	"      --keep               keep the sandbox; its id is printed on stderr first\n"
	"      --id-file FILE       with --keep: also write the id to FILE (made whole\n"
	"                           before the command runs), for scripts\n"
	"      --id ID              run in the existing sandbox ID\n"
	"      --snapshot TAG       then save the sandbox (--keep, --id) as image TAG;\n"
	"                           the image's digest is printed on stderr\n"
	"      --client-timeout S   wait at most S for the daemon to take the request,\n"
	"                           and as long beyond the command's timeout (default 30)\n"
	"  -c, --code CODE          run a snippet (sh: sh -c CODE; python3: source)\n"
	"      --stream             print output as it comes, forward --stdin as it comes\n"
	"                           and SIGINT, SIGTERM, SIGHUP, SIGQUIT (container)\n"
	"  -t, --tty                run on a terminal in the sandbox, ours in raw mode\n"
	"                           (implies --stream; stdin is forwarded)\n"
	"      --batch FILE         run the jobs of FILE (- = stdin), a JSON object a line,\n"
	"                           each in a fresh sandbox; a JSON line of result each\n"
	"  -j, --jobs N             with --batch: N jobs at once (default 1)\n"
	"      --keep-going         with --batch: go on after a job failed\n"
	"      --retries N          with --batch: attempts more after an infrastructure\n"
	"                           failure (default 2)\n"
	"      --help               show this help\n"
	"      --version            show the version\n"
	"\n"
	"Exit status: the command's; 128+N if signal N killed it; 124 on timeout;\n"
	"125 if dsec-run failed.  See dsec-run(1).\n";

static _Noreturn DSEC_PRINTF(1, 2) void die(const char *fmt, ...)
{
	va_list ap;

	fputs("dsec-run: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(EXIT_FAILED);
}

static _Noreturn DSEC_PRINTF(1, 2) void usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("dsec-run: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'dsec-run --help' for more information.\n", stderr);
	exit(EXIT_FAILED);
}

/* Read everything from fd into b.  0 or -errno. */
static int read_all(int fd, struct dsec_buf *b)
{
	for (;;) {
		ssize_t n;

		dsec_buf_grow(b, 65536);
		n = read(fd, b->data + b->len, b->cap - b->len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		b->len += (size_t)n;
		b->data[b->len] = '\0';
	}
	return 0;
}

static void load_stdin(const char *path, struct dsec_buf *b)
{
	int fd = 0, rc;

	if (strcmp(path, "-") != 0) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			die("cannot open stdin file '%s': %s", path, strerror(errno));
	}
	rc = read_all(fd, b);
	if (fd != 0)
		close(fd);
	if (rc < 0)
		die("cannot read stdin file '%s': %s", path, strerror(-rc));
}

/* Appends s to the NULL-terminated *v of *n entries; returns *v. */
static const char *const *push(const char ***v, size_t *n, const char *s)
{
	*v = xrealloc(*v, (*n + 2) * sizeof(**v));
	(*v)[(*n)++] = s;
	(*v)[*n] = NULL;
	return *v;
}

static void parse_args(int argc, char **argv, struct run_opts *o)
{
	int c;

	/* "+": stop at the first non-option so the command's own flags stay its. */
	o->retries = 2;
	while ((c = getopt_long(argc, argv, "+H:c:tj:", long_opts, NULL)) != -1) {
		switch (c) {
		case 'H':
			o->url = optarg;
			break;
		case OPT_BACKEND:
			o->create.backend = optarg;
			break;
		case OPT_IMAGE:
			o->create.image = optarg;
			break;
		case OPT_RUNTIME:
			o->create.runtime = optarg;
			break;
		case OPT_TIMEOUT:
			if (dsec_parse_duration(optarg, &o->timeout) < 0 || o->timeout <= 0)
				usage_error("invalid timeout '%s'", optarg);
			break;
		case OPT_ENV: {
			const char *eq = strchr(optarg, '=');

			if (!eq || eq == optarg)
				usage_error("invalid --env '%s': expected K=V", optarg);
			push(&o->env, &o->nenv, optarg);
			break;
		}
		case OPT_CWD:
			o->cwd = optarg;
			break;
		case OPT_STDIN:
			o->stdin_path = optarg;
			break;
		case OPT_OUTPUT_CAP:
			if (dsec_parse_size(optarg, &o->output_cap) < 0 || o->output_cap == 0 ||
			    o->output_cap > SIZE_MAX)
				usage_error("invalid output cap '%s'", optarg);
			break;
		case OPT_KEEP:
			o->keep = true;
			break;
		case OPT_ID_FILE:
			o->id_file = optarg;
			break;
		case OPT_MEMORY:
			if (dsec_parse_size(optarg, &o->create.limits.memory) < 0 ||
			    !o->create.limits.memory)
				usage_error("invalid --memory '%s': a size such as 512M", optarg);
			break;
		case OPT_DISK:
			if (dsec_parse_size(optarg, &o->create.limits.disk) < 0 ||
			    !o->create.limits.disk)
				usage_error("invalid --disk '%s': a size such as 1G", optarg);
			break;
		case OPT_CPUS: {
			char *end;
			o->create.limits.cpus = strtod(optarg, &end);
			if (*end || !(o->create.limits.cpus > 0 && o->create.limits.cpus <= 4096))
				usage_error("invalid --cpus '%s': cores, such as 0.5 or 2", optarg);
			break;
		}
		case OPT_PIDS: {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || !v || v > UINT32_MAX)
				usage_error("invalid --pids '%s': a count", optarg);
			o->create.limits.pids = (uint32_t)v;
			break;
		}
		case OPT_TTL:
			if (dsec_parse_duration(optarg, &o->create.ttl) < 0 || o->create.ttl <= 0)
				usage_error("invalid --ttl '%s': a duration such as 1h", optarg);
			break;
		case OPT_IDLE_TTL:
			if (dsec_parse_duration(optarg, &o->create.idle_ttl) < 0 ||
			    o->create.idle_ttl <= 0)
				usage_error("invalid --idle-ttl '%s': a duration such as 10m", optarg);
			break;
		case OPT_ID:
			if (!*optarg)
				usage_error("empty sandbox id");
			o->id = optarg;
			break;
		case OPT_SNAPSHOT:
			o->snapshot = optarg;
			break;
		case OPT_CLIENT_TIMEOUT:
			if (dsec_parse_duration(optarg, &o->client_timeout) < 0 ||
			    o->client_timeout <= 0)
				usage_error("invalid client timeout '%s'", optarg);
			break;
		case OPT_NETWORK:
			o->create.network = optarg;
			break;
		case OPT_ALLOW:
			o->create.allow = push(&o->allow, &o->nallow, optarg);
			break;
		case OPT_LAYER:
			o->create.layers = push(&o->layers, &o->nlayers, optarg);
			break;
		case OPT_DNS:
			o->create.dns = optarg;
			break;
		case OPT_DENY:
			o->create.seccomp_deny = push(&o->deny, &o->ndeny, optarg);
			break;
		case 'c':
			o->code = optarg;
			break;
		case OPT_STREAM:
			o->stream = true;
			break;
		case 't':
			o->tty = o->stream = true;
			break;
		case OPT_BATCH:
			o->batch = optarg;
			break;
		case 'j': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || !v || v > 4096)
				usage_error("invalid job count '%s' (1-4096)", optarg);
			o->jobs = (unsigned)v;
			break;
		}
		case OPT_RETRIES: {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || v > 100)
				usage_error("invalid retry count '%s' (0-100)", optarg);
			o->retries = (unsigned)v;
			break;
		}
		case OPT_KEEP_GOING:
			o->keep_going = true;
			break;
		case OPT_HELP:
			fputs(usage_text, stdout);
			exit(fflush(stdout) == 0 ? 0 : EXIT_FAILED);
		case OPT_VERSION:
			printf("dsec-run %s (protocol %d)\n", DSEC_VERSION, DSEC_PROTO_VERSION);
			exit(fflush(stdout) == 0 ? 0 : EXIT_FAILED);
		default:
			fputs("Try 'dsec-run --help' for more information.\n", stderr);
			exit(EXIT_FAILED);
		}
	}
	if (optind < argc)
		o->argv = argv + optind;

	if (o->batch) {
		if (o->argv || o->code || o->keep || o->id || o->snapshot || o->stream)
			usage_error("--batch takes its commands from the jobs file: no command, "
				    "-c, --keep, --id, --snapshot nor --stream");
		return;
	}
	if ((o->jobs || o->keep_going) && !o->batch)
		usage_error("-j and --keep-going go with --batch");
	if (o->code && o->argv)
		usage_error("-c and a command are exclusive: give one");
	if (!o->code && !o->argv && !o->keep && !(o->id && o->snapshot))
		usage_error("no command given");
	if (o->snapshot && !o->keep && !o->id)
		usage_error("--snapshot needs --keep or --id: a one-shot sandbox is gone after its "
			    "command");
	if (o->keep && o->id)
		usage_error("--keep and --id are exclusive");
	if (o->id_file && !o->keep)
		usage_error("--id-file goes with --keep");
	if ((o->create.allow || o->create.dns) && !o->create.network)
		o->create.network = "allowlist";
	if (o->id && (o->create.backend || o->create.image || o->create.runtime ||
		      o->create.network || o->create.layers || o->create.seccomp_deny))
		usage_error("--backend, --image, --layer, --runtime, --deny-syscall and the network "
			    "options apply to new sandboxes, not to --id");
	if (o->create.layers && !o->create.image)
		usage_error("--layer needs --image: the layers go over an image");
}

/* Write what the command printed, then map its status to ours. */
static int report(const struct dsec_cmd_res *res)
{
	int rc;

	rc = dsec_write_all(1, res->out.data, res->out.len);
	if (rc < 0 && rc != -EPIPE)
		fprintf(stderr, "dsec-run: cannot write stdout: %s\n", strerror(-rc));
	rc = dsec_write_all(2, res->err.data, res->err.len);
	(void)rc;	/* nowhere left to complain to */

	if (res->out_truncated)
		fprintf(stderr, "dsec-run: warning: stdout truncated to %zu bytes "
			"(raise --output-cap)\n", res->out.len);
	if (res->err_truncated)
		fprintf(stderr, "dsec-run: warning: stderr truncated to %zu bytes "
			"(raise --output-cap)\n", res->err.len);

	if (res->timed_out) {
		fprintf(stderr, "dsec-run: command timed out after %.3g s\n", res->duration);
		return EXIT_TIMEOUT;
	}
	if (res->oom_killed)
		fprintf(stderr, "dsec-run: the sandbox's memory limit was reached: "
			"the kernel's OOM killer killed a process of the command\n");
	if (res->signal > 0)
		return 128 + res->signal;
	if (res->exit_code < 0 || res->exit_code > 255)
		return EXIT_FAILED;
	return res->exit_code;
}

/* A failure never reads as success: an error without a code (a bug on
 * our side) says "internal", not "ok". */
static _Noreturn void die_dsec(const struct dsec_err *err)
{
	die("%s (%s)", err->msg[0] ? err->msg : "unknown error",
	    dsec_code_name(err->code != DSEC_E_OK ? err->code : DSEC_E_INTERNAL));
}

/* ---- --stream and -t -------------------------------------------------------
 *
 * exec_start, then two connections: a reader thread long-polls exec_read
 * and writes what comes to our stdout and stderr as it comes; the main
 * thread forwards our stdin (--stdin, -t) with exec_write, SIGINT, SIGTERM,
 * SIGHUP and SIGQUIT with exec_signal and, with -t, SIGWINCH with
 * exec_resize.  With -t our terminal is in raw mode (restored at exit): ^C
 * and friends go to the sandbox's terminal as bytes.
 */

#define STREAM_WAIT 10.0	/* s one exec_read waits */

/* What the reader thread shares with the main one. */
struct stream {
	const char *url;		/* daemon */
	double client_timeout;		/* --client-timeout, 0 = libdsec's */
	const char *id;			/* sandbox */
	char *exec;			/* the command */
	struct dsec_cmd_res res;	/* its status once done */
	struct dsec_err err;		/* the reader's failure */
	int rc;				/* 0, or -errno with err */
	int done_fd;			/* written to when the reader ends */
};

static int sig_pipe[2] = { -1, -1 };	/* signals, as bytes, for poll */
static struct termios saved_tio;	/* our terminal before raw mode */
static bool tio_saved;			/* restore it at exit */

static void on_signal(int sig)
{
	unsigned char c = (unsigned char)sig;
	int e = errno;

	(void)!write(sig_pipe[1], &c, 1);
	errno = e;
}

static void restore_tty(void)
{
	if (tio_saved)
		tcsetattr(0, TCSAFLUSH, &saved_tio);
}

static void *reader_main(void *arg)
{
	struct stream *s = arg;
	struct dsec_client *c = NULL;
	bool done = false;

	if ((s->rc = dsec_connect(&c, s->url, &s->err)) == 0) {
		if (s->client_timeout > 0)
			dsec_set_timeout(c, s->client_timeout);
		while (!done) {
			struct dsec_cmd_res r;

			if ((s->rc = dsec_exec_read(c, s->id, s->exec, STREAM_WAIT, &r, &done,
						    &s->err)) < 0)
				break;
			if (dsec_write_all(1, r.out.data, r.out.len) < 0 ||
			    dsec_write_all(2, r.err.data, r.err.len) < 0) {
				/* Nobody reads us: stop the command rather than block it. */
				struct dsec_err e;

				dsec_exec_signal(c, s->id, s->exec, SIGPIPE, &e);
			}
			if (done) {
				s->res = r;
				memset(&s->res.out, 0, sizeof(s->res.out));
				memset(&s->res.err, 0, sizeof(s->res.err));
				dsec_buf_free(&r.out);
				dsec_buf_free(&r.err);
			} else {
				dsec_cmd_res_free(&r);
			}
		}
		dsec_close(c);
	}
	(void)!write(s->done_fd, "x", 1);
	return NULL;
}

/* Our stdin to the command's, a chunk at a time; false at EOF. */
static bool forward_stdin(struct dsec_client *c, struct stream *s, int fd)
{
	char buf[65536];
	ssize_t n = read(fd, buf, sizeof(buf));
	struct dsec_err err;

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return true;
	for (;;) {
		dsec_err_clear(&err);
		if (dsec_exec_write(c, s->id, s->exec, buf, n > 0 ? (size_t)n : 0, n <= 0, &err) == 0)
			break;
		if (err.code != DSEC_E_BUSY)
			return false;	/* it closed its stdin or ended: stop forwarding */
		usleep(20000);	/* it has not read the last chunk yet */
	}
	return n > 0;
}

static void term_size(uint16_t *rows, uint16_t *cols)
{
	struct winsize ws;

	if (ioctl(1, TIOCGWINSZ, &ws) == 0 || ioctl(0, TIOCGWINSZ, &ws) == 0) {
		*rows = ws.ws_row;
		*cols = ws.ws_col;
	}
}

static int run_stream(struct dsec_client *c, const struct run_opts *o, const char *id,
		      const struct dsec_cmd *req)
{
	struct dsec_exec_start_opts so = { .pty = o->tty };
	struct stream s = { .url = dsec_client_url(c), .client_timeout = o->client_timeout,
			    .id = id };
	struct sigaction sa = { .sa_handler = on_signal };
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH };
	int in_fd = -1, done[2], status;
	struct dsec_err err;
	pthread_t reader;

	dsec_err_clear(&err);
	if (o->stdin_path && strcmp(o->stdin_path, "-") &&
	    (in_fd = open(o->stdin_path, O_RDONLY | O_CLOEXEC)) < 0)
		die("cannot open stdin file '%s': %s", o->stdin_path, strerror(errno));
	if (o->tty || (o->stdin_path && !strcmp(o->stdin_path, "-")))
		in_fd = 0;
	so.stdin_open = in_fd >= 0;
	if (o->tty)
		term_size(&so.rows, &so.cols);
	if (dsec_exec_start(c, id, req, &so, &s.exec, &err) < 0) {
		if (!o->keep && !o->id)
			dsec_destroy(c, id, &s.err);	/* ours, made for the command */
		die_dsec(&err);
	}
	if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0 || pipe2(done, O_CLOEXEC) < 0)
		die("cannot make a pipe: %s", strerror(errno));
	for (size_t i = 0; i < DSEC_ARRAY_LEN(sigs); i++)
		sigaction(sigs[i], &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (o->tty && isatty(0) && tcgetattr(0, &saved_tio) == 0) {
		struct termios raw = saved_tio;

		cfmakeraw(&raw);
		tio_saved = true;
		atexit(restore_tty);
		tcsetattr(0, TCSAFLUSH, &raw);
	}
	s.done_fd = done[1];
	if ((errno = pthread_create(&reader, NULL, reader_main, &s)) != 0)
		die("cannot start a thread: %s", strerror(errno));
	for (;;) {
		struct pollfd p[3] = { { done[0], POLLIN, 0 }, { sig_pipe[0], POLLIN, 0 },
				       { in_fd, POLLIN, 0 } };
		unsigned char sig;

		if (poll(p, 3, -1) < 0 && errno != EINTR)
			die("cannot poll: %s", strerror(errno));
		if (p[0].revents)
			break;
		while (read(sig_pipe[0], &sig, 1) == 1) {
			dsec_err_clear(&err);
			if (sig == SIGWINCH && o->tty) {
				uint16_t rows = 0, cols = 0;

				term_size(&rows, &cols);
				if (rows && cols)
					dsec_exec_resize(c, id, s.exec, rows, cols, &err);
			} else if (sig != SIGWINCH) {
				dsec_exec_signal(c, id, s.exec, sig, &err);
			}
		}
		if (p[2].revents && !forward_stdin(c, &s, in_fd)) {
			if (in_fd > 0)
				close(in_fd);
			in_fd = -1;	/* poll skips it */
		}
	}
	pthread_join(reader, NULL);
	restore_tty();
	tio_saved = false;
	if (s.rc < 0)
		die_dsec(&s.err);
	status = report(&s.res);
	free(s.exec);
	return status;
}

/* id and a newline into path, whole or not at all (a temporary file
 * renamed over it): a script reading it never sees half an id. */
static int write_id_file(const char *path, const char *id)
{
	_cleanup_free_ char *tmp = xasprintf("%s.XXXXXX", path);
	int fd = mkstemp(tmp), e;
	FILE *f;

	if (fd < 0)
		return -1;
	if (!(f = fdopen(fd, "w"))) {
		e = errno;
		close(fd);
		unlink(tmp);
		errno = e;
		return -1;
	}
	bool ok = fchmod(fd, 0644) == 0 && fprintf(f, "%s\n", id) >= 0 && fflush(f) == 0 &&
		  fsync(fd) == 0;
	e = errno;
	if (fclose(f) != 0 && ok) {
		ok = false;
		e = errno;
	}
	if (!ok) {
		unlink(tmp);
		errno = e;
		return -1;
	}
	if (rename(tmp, path) < 0) {
		e = errno;
		unlink(tmp);
		errno = e;
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct run_opts o = { 0 };
	struct dsec_cmd req = { 0 };
	struct dsec_cmd_res res = { 0 };
	struct dsec_err err;
	struct dsec_client *c = NULL;
	struct dsec_buf in;
	char *id = NULL;
	int rc, status;

	dsec_err_clear(&err);
	dsec_buf_init(&in);
	/* dsec-run [-H ADDR] trajectory|replay|recover ... (run-traj.c) */
#define SUB(s) (!strcmp((s), "trajectory") || !strcmp((s), "replay") || !strcmp((s), "recover"))
	if ((argc >= 2 && SUB(argv[1])) ||
	    (argc >= 4 && (!strcmp(argv[1], "-H") || !strcmp(argv[1], "--host")) && SUB(argv[3])))
		return dsec_run_traj(argc, argv);
#undef SUB
	parse_args(argc, argv, &o);
	if (o.batch) {
		struct batch_opts b = {
			.path = o.batch, .url = o.url, .jobs = o.jobs, .retries = o.retries,
			.keep_going = o.keep_going, .client_timeout = o.client_timeout,
			.tty = isatty(STDERR_FILENO),
		};
		return dsec_run_batch(&b);
	}

	if (o.stdin_path && !o.stream)
		load_stdin(o.stdin_path, &in);

	req.argv = (const char *const *)o.argv;
	req.code = o.code;
	req.env = o.env;
	req.cwd = o.cwd;
	req.stdin_data = in.data;
	req.stdin_len = in.len;
	req.timeout = o.timeout;
	req.output_cap = (size_t)o.output_cap;

	if (dsec_connect(&c, o.url, &err) < 0)
		die_dsec(&err);
	if (o.client_timeout > 0)
		dsec_set_timeout(c, o.client_timeout);

	if (o.keep) {
		if (dsec_create(c, &o.create, &id, &err) < 0)
			die_dsec(&err);
		/* First, so that the caller knows what to destroy even if exec fails. */
		fprintf(stderr, "%s\n", id);
		fflush(stderr);
		if (o.id_file && write_id_file(o.id_file, id) < 0) {
			fprintf(stderr, "dsec-run: cannot write the id to '%s': %s (sandbox %s kept)\n",
				o.id_file, strerror(errno), id);
			status = 125;
			goto out;
		}
		if (!o.argv && !o.code) {
			status = 0;
			goto snap;
		}
		if (o.stream) {
			status = run_stream(c, &o, id, &req);
			goto snap;
		}
		rc = dsec_exec(c, id, &req, &res, &err);
	} else if (o.id && !o.argv && !o.code) {
		status = 0;
		goto snap;
	} else if (o.id && o.stream) {
		status = run_stream(c, &o, o.id, &req);
		goto snap;
	} else if (o.id) {
		rc = dsec_exec(c, o.id, &req, &res, &err);
	} else if (o.stream) {
		/* One-shot: a sandbox of our own for the command, gone after. */
		if (dsec_create(c, &o.create, &id, &err) < 0)
			die_dsec(&err);
		status = run_stream(c, &o, id, &req);
		if (dsec_destroy(c, id, &err) < 0)
			fprintf(stderr, "dsec-run: cannot destroy sandbox '%s': %s\n", id, err.msg);
		free(id);
		id = NULL;
		goto snap;
	} else {
		rc = dsec_call(c, &o.create, &req, &res, &err);
	}
	if (rc < 0)
		die_dsec(&err);
	status = report(&res);
	dsec_cmd_res_free(&res);
snap:
	if (o.snapshot) {
		char *image = NULL;

		if (dsec_snapshot(c, id ? id : o.id, o.snapshot, &image, &err) < 0)
			die_dsec(&err);
		fprintf(stderr, "%s\n", image);
		free(image);
	}
out:
	free(id);
	dsec_close(c);
	dsec_buf_free(&in);
	free(o.env);
	free(o.allow);
	free(o.layers);
	free(o.deny);
	return status;
}
