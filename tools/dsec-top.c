/* dsec-top - the nodes of a dsec cluster, live (see dsec-top(1)).
 *
 * Asks one node (-H, else $DSEC_HOST) for its info, whose "cluster" entry
 * names the other nodes and their addresses, then asks every other node
 * at once (libdsec's asynchronous calls on one completion queue, its
 * descriptor polled with a deadline, so a node that does not answer costs
 * one timeout, not one per node) and draws one line per node: its state,
 * sandboxes, creates per second and their latency, load, memory.  On a
 * terminal it redraws in place with ncurses (only what changed is
 * written: no flicker) and takes keys like top; -b prints plain tables for
 * scripts.
 */
#include <curses.h>
#include <errno.h>
#include <getopt.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dsec.h"
#include "proto.h"
#include "util.h"

#define NODES_MAX 1024
#define BACKENDS_MAX 8
/* The bound on the objects of one info reply (its lists are short). */
#define INFO_OBJECTS 65536

static const char usage_text[] =
	"usage: dsec-top [-H URL] [-d SECONDS] [-b] [-n COUNT]\n"
	"  -H, --host URL       the node to ask first (default $DSEC_HOST, then the local one)\n"
	"  -d, --delay SECONDS  between refreshes (default 2)\n"
	"  -b, --batch          plain tables on stdout, no terminal handling\n"
	"  -n, --iterations N   refreshes before exiting (default: for ever; -b: 1)\n"
	"keys: q quit, j/k or arrows select, Enter details, s sort, d drain or undrain\n"
	"      the selected node, space refresh, + and - the delay, h help\n";

struct backend {
	char name[32];			/* backend name */
	uint64_t sandboxes, paused;	/* its sandboxes, of which paused */
	uint64_t capacity, running;	/* room left it reports, commands running */
	uint64_t pool_ready, pool_target; /* warm units */
};

struct node {
	char *name;			/* node name */
	char *url;			/* its address */
	char view[16];			/* its state as the first node sees it */
	struct dsec_client *c;		/* connection, NULL until used */
	bool up;			/* answered this round */
	char why[DSEC_ERR_MSG_MAX];	/* else why not */
	char version[24];		/* dsecd version */
	uint64_t sandboxes, max_sandboxes, paused, inflight;
	uint64_t creates_ok, creates_failed;	/* since its start */
	double p50, p99;		/* ms, its latest creates */
	double load1, uptime;		/* load average, seconds up */
	uint64_t mem_total, mem_avail;	/* bytes */
	bool draining;			/* takes no new sandboxes */
	struct backend be[BACKENDS_MAX];	/* its backends */
	int nbe;			/* entries in be */
	double rate;			/* creates per second, last interval */
	uint64_t prev_ok;		/* creates_ok at the previous answer */
	double prev_t;			/* and when */
	bool have_prev;			/* prev_* are set */
};

static struct node nodes[NODES_MAX];
static size_t nnodes;
static double delay = 2;
static volatile sig_atomic_t resized;

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static struct node *node_named(const char *name, const char *url)
{
	for (size_t i = 0; i < nnodes; i++)
		if (!strcmp(nodes[i].name, name))
			return &nodes[i];
	if (nnodes == NODES_MAX)
		return NULL;
	struct node *n = &nodes[nnodes++];
	n->name = xstrdup(name);
	n->url = xstrdup(url);
	return n;
}

static uint64_t u64(const msgpack_object *m, const char *k)
{
	uint64_t v = 0;

	dsec_get_u64(m, k, &v, NULL);
	return v;
}

static double dbl(const msgpack_object *m, const char *k)
{
	double v = 0;

	dsec_get_double(m, k, &v, NULL);
	return v;
}

/* Reads an info result into n; the first node's also names the others. */
static void take_info(struct node *n, const msgpack_object *res, bool first, double t)
{
	const msgpack_object *o;
	char *s = NULL;

	n->up = true;
	n->why[0] = '\0';
	if (first && dsec_get_str(res, "node", &s, NULL) == 0) {
		free(n->name);
		n->name = s;
		s = NULL;
	}
	if (dsec_get_str(res, "version", &s, NULL) == 0)
		snprintf(n->version, sizeof(n->version), "%s", s);
	free(s);
	n->sandboxes = u64(res, "sandboxes");
	n->max_sandboxes = u64(res, "max_sandboxes");
	n->paused = u64(res, "paused");
	n->inflight = u64(res, "inflight");
	n->uptime = dbl(res, "uptime");
	n->draining = false;
	dsec_get_bool(res, "draining", &n->draining, NULL);
	if ((o = dsec_map_get(res, "creates")) && o->type == MSGPACK_OBJECT_MAP) {
		n->creates_ok = u64(o, "ok");
		n->creates_failed = u64(o, "failed");
		n->p50 = dbl(o, "p50_ms");
		n->p99 = dbl(o, "p99_ms");
	}
	if ((o = dsec_map_get(res, "load")) && o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size &&
	    o->via.array.ptr[0].type == MSGPACK_OBJECT_FLOAT64)
		n->load1 = o->via.array.ptr[0].via.f64;
	if ((o = dsec_map_get(res, "memory")) && o->type == MSGPACK_OBJECT_MAP) {
		n->mem_total = u64(o, "total");
		n->mem_avail = u64(o, "available");
	}
	n->nbe = 0;
	if ((o = dsec_map_get(res, "backends")) && o->type == MSGPACK_OBJECT_ARRAY)
		for (uint32_t i = 0; i < o->via.array.size && n->nbe < BACKENDS_MAX; i++) {
			const msgpack_object *b = &o->via.array.ptr[i];
			struct backend *e = &n->be[n->nbe++];
			char *name = NULL;
			dsec_get_str(b, "name", &name, NULL);
			snprintf(e->name, sizeof(e->name), "%s", name ? name : "?");
			free(name);
			e->sandboxes = u64(b, "sandboxes");
			e->paused = u64(b, "paused");
			e->capacity = u64(b, "capacity");
			e->running = u64(b, "running");
			e->pool_ready = u64(b, "pool_ready");
			e->pool_target = u64(b, "pool_target");
		}
	if (n->have_prev && t > n->prev_t && n->creates_ok >= n->prev_ok)
		n->rate = (double)(n->creates_ok - n->prev_ok) / (t - n->prev_t);
	n->prev_ok = n->creates_ok;
	n->prev_t = t;
	n->have_prev = true;
	if (!first || !(o = dsec_map_get(res, "cluster")) || o->type != MSGPACK_OBJECT_MAP ||
	    !(o = dsec_map_get(o, "members")) || o->type != MSGPACK_OBJECT_ARRAY)
		return;
	for (uint32_t i = 0; i < o->via.array.size; i++) {
		const msgpack_object *m = &o->via.array.ptr[i];
		_cleanup_free_ char *name = NULL, *url = NULL, *state = NULL;
		struct node *x;
		if (dsec_get_str(m, "name", &name, NULL) < 0 || dsec_get_str(m, "url", &url, NULL) < 0 ||
		    !(x = node_named(name, url)))
			continue;
		dsec_get_str(m, "state", &state, NULL);
		snprintf(x->view, sizeof(x->view), "%s", state ? state : "?");
		if (strcmp(x->url, url)) {
			free(x->url);
			x->url = xstrdup(url);
			dsec_close(x->c);
			x->c = NULL;
		}
	}
}

/* Reads the reply frame of n's info, or says why there is none. */
static void take_reply(struct node *n, struct dsec_client *c, const void *reply, size_t len,
		       bool first, double t)
{
	struct dsec_msg msg;
	struct dsec_err err;

	dsec_err_clear(&err);
	if (dsec_reply_check(c, reply, len, &err) < 0 ||
	    dsec_msg_parse_n(&msg, reply, len, len + 1, INFO_OBJECTS, &err) < 0) {
		n->up = false;
		snprintf(n->why, sizeof(n->why), "%s", err.msg);
		return;
	}
	take_info(n, dsec_map_get(msg.root, "result"), first, t);
	dsec_msg_free(&msg);
}

static struct dsec_client *client_of(struct node *n, struct dsec_err *err)
{
	static const struct dsec_connect_opts lazy = { .lazy = true };

	if (!n->c && dsec_connect_tls(&n->c, n->url, &lazy, NULL, err) < 0)
		return NULL;
	dsec_set_timeout(n->c, 1);
	return n->c;
}

/* One round: the first node, then all the others at once. */
static void poll_nodes(struct dsec_cq *cq)
{
	struct dsec_pk p;
	struct dsec_err err;
	void *reply = NULL;
	size_t len = 0, frame_len, waiting = 0;
	double t = now(), wait = delay < 2 ? delay : 2;

	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "info");
	dsec_pk_end(&p);
	_cleanup_free_ void *frame = dsec_pk_detach(&p, &frame_len);
	struct dsec_client *c = client_of(&nodes[0], &err);
	if (!c || dsec_raw(c, frame, frame_len, &reply, &len, &err) < 0) {
		nodes[0].up = false;
		snprintf(nodes[0].why, sizeof(nodes[0].why), "%s", err.msg);
	} else {
		take_reply(&nodes[0], c, reply, len, true, t);
	}
	free(reply);
	for (size_t i = 1; i < nnodes; i++) {
		struct node *n = &nodes[i];
		if (!(c = client_of(n, &err)) ||
		    dsec_call_async(c, cq, frame, frame_len, wait, n, NULL, &err) < 0) {
			n->up = false;
			snprintf(n->why, sizeof(n->why), "%s", err.msg);
			continue;
		}
		waiting++;
	}
	/* Each call ends on the queue by its own timeout: the deadline
	 * only bounds the wait for one that does not (a bug), not a rule. */
	double deadline = now() + wait + 3;
	while (waiting && now() < deadline) {
		struct pollfd pf = { .fd = dsec_cq_fd(cq), .events = POLLIN };
		struct dsec_completion cmp;
		poll(&pf, 1, (int)((deadline - now()) * 1000) + 1);
		while (dsec_cq_next(cq, &cmp) == 0) {
			struct node *n = cmp.tag;
			waiting--;
			if (cmp.rc < 0) {
				n->up = false;
				snprintf(n->why, sizeof(n->why), "%s", cmp.err->msg);
			} else {
				take_reply(n, n->c, cmp.reply, cmp.reply_len, false, now());
			}
			dsec_completion_free(&cmp);
		}
	}
}

static const char *state_of(const struct node *n)
{
	if (!n->up)
		return "down";
	if (n->draining)
		return "draining";
	return n->view[0] ? n->view : "alive";
}

/* "fncall:3 container:12" */
static void backends_text(const struct node *n, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (int i = 0; i < n->nbe && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%s:%llu", i ? " " : "", n->be[i].name,
				       (unsigned long long)n->be[i].sandboxes);
}

static const char header[] =
	"NODE             STATE     SANDBOXES  PAUSED  INFL  CREATE/S   P50MS   P99MS  "
	"FAIL  LOAD  MEM%  BACKENDS";

/* One node's line (no newline). */
static void line_of(const struct node *n, char *buf, size_t len)
{
	char be[128], sb[32];

	if (!n->up) {
		snprintf(buf, len, "%-16.16s %-9s %s", n->name, state_of(n), n->why);
		return;
	}
	backends_text(n, be, sizeof(be));
	snprintf(sb, sizeof(sb), "%llu/%llu", (unsigned long long)n->sandboxes,
		 (unsigned long long)n->max_sandboxes);
	snprintf(buf, len, "%-16.16s %-9s %9s %7llu %5llu %9.1f %7.2f %7.2f %5llu %5.2f %5.0f  %s",
		 n->name, state_of(n), sb, (unsigned long long)n->paused,
		 (unsigned long long)n->inflight, n->rate, n->p50, n->p99,
		 (unsigned long long)n->creates_failed, n->load1,
		 n->mem_total ? 100.0 * (double)(n->mem_total - n->mem_avail) / (double)n->mem_total
			      : 0.0, be);
}

/* The cluster's line: nodes up, sandboxes, creates per second. */
static void summary_of(char *buf, size_t len)
{
	size_t up = 0;
	uint64_t sb = 0;
	double rate = 0;

	for (size_t i = 0; i < nnodes; i++)
		if (nodes[i].up) {
			up++;
			sb += nodes[i].sandboxes;
			rate += nodes[i].rate;
		}
	snprintf(buf, len, "dsec-top: %zu nodes, %zu answering, %llu sandboxes, %.1f creates/s "
		 "(via %s)", nnodes, up, (unsigned long long)sb, rate, nodes[0].url);
}

/* ---- sorting ---- */

enum sort_key { SORT_NAME, SORT_SANDBOXES, SORT_RATE, SORT_LOAD, SORT__COUNT };
static const char *const sort_names[] = { "name", "sandboxes", "creates/s", "load" };
static enum sort_key sort_key;

static int cmp_nodes(const void *a, const void *b)
{
	const struct node *x = a, *y = b;

	switch (sort_key) {
	case SORT_SANDBOXES:
		return x->sandboxes < y->sandboxes ? 1 : x->sandboxes > y->sandboxes ? -1 : 0;
	case SORT_RATE:
		return x->rate < y->rate ? 1 : x->rate > y->rate ? -1 : 0;
	case SORT_LOAD:
		return x->load1 < y->load1 ? 1 : x->load1 > y->load1 ? -1 : 0;
	default:
		return strcmp(x->name, y->name);
	}
}

/* The nodes but the first (the one asked, which stays on top) in order. */
static void sort_nodes(void)
{
	if (nnodes > 2)
		qsort(nodes + 1, nnodes - 1, sizeof(*nodes), cmp_nodes);
}

/* ---- batch ---- */

static int run_batch(struct dsec_cq *cq, long iterations)
{
	char buf[512];

	for (long i = 0; iterations <= 0 || i < iterations; i++) {
		if (i)
			usleep((useconds_t)(delay * 1e6));
		poll_nodes(cq);
		sort_nodes();
		summary_of(buf, sizeof(buf));
		printf("%s\n%s\n", buf, header);
		for (size_t k = 0; k < nnodes; k++) {
			line_of(&nodes[k], buf, sizeof(buf));
			printf("%s\n", buf);
		}
		printf("\n");
		fflush(stdout);
	}
	return nodes[0].up ? 0 : 1;
}

/* ---- the terminal ---- */

static void on_winch(int sig)
{
	(void)sig;
	resized = 1;
}

static void draw_detail(const struct node *n, int row)
{
	mvprintw(row++, 0, "%s  %s  version %s  up %.0f s  creates %llu ok, %llu failed", n->name,
		 n->url, n->version, n->uptime, (unsigned long long)n->creates_ok,
		 (unsigned long long)n->creates_failed);
	attron(A_BOLD);
	mvprintw(row++, 2, "%-12s %9s %7s %9s %8s %10s", "BACKEND", "SANDBOXES", "PAUSED",
		 "CAPACITY", "RUNNING", "WARM");
	attroff(A_BOLD);
	for (int i = 0; i < n->nbe; i++)
		mvprintw(row++, 2, "%-12s %9llu %7llu %9llu %8llu %5llu/%-4llu", n->be[i].name,
			 (unsigned long long)n->be[i].sandboxes, (unsigned long long)n->be[i].paused,
			 (unsigned long long)n->be[i].capacity, (unsigned long long)n->be[i].running,
			 (unsigned long long)n->be[i].pool_ready,
			 (unsigned long long)n->be[i].pool_target);
}

static void draw(size_t sel, bool detail, bool help, const char *status)
{
	char buf[512];
	int rows, cols;

	getmaxyx(stdscr, rows, cols);
	(void)cols;
	erase();
	summary_of(buf, sizeof(buf));
	mvprintw(0, 0, "%s  sort: %s  every %.1f s", buf, sort_names[sort_key], delay);
	attron(A_REVERSE);
	mvprintw(2, 0, "%-*s", COLS, header);
	attroff(A_REVERSE);
	int row = 3;
	for (size_t i = 0; i < nnodes && row < rows - 2; i++, row++) {
		line_of(&nodes[i], buf, sizeof(buf));
		if (i == sel)
			attron(A_BOLD | A_UNDERLINE);
		if (!nodes[i].up)
			attron(A_DIM);
		mvprintw(row, 0, "%.*s", COLS, buf);
		attroff(A_BOLD | A_UNDERLINE | A_DIM);
	}
	if (detail && sel < nnodes && nodes[sel].up && row + 3 < rows)
		draw_detail(&nodes[sel], row + 1);
	if (help)
		mvprintw(rows - 2, 0, "q quit  j/k select  Enter details  s sort  d drain/undrain  "
			 "space refresh  +/- delay");
	mvprintw(rows - 1, 0, "%.*s", COLS, status);
	refresh();	/* curses writes only what changed since the last frame */
}

static int run_curses(struct dsec_cq *cq, long iterations)
{
	size_t sel = 0;
	bool detail = false, help = false;
	char status[DSEC_ERR_MSG_MAX + 128] = "";
	double next = 0;

	signal(SIGWINCH, on_winch);
	initscr();
	cbreak();
	noecho();
	keypad(stdscr, TRUE);
	curs_set(0);
	for (long i = 0; iterations <= 0 || i < iterations;) {
		if (now() >= next) {
			poll_nodes(cq);
			sort_nodes();
			next = now() + delay;
			i++;
		}
		if (resized) {
			resized = 0;
			endwin();
			refresh();
		}
		if (sel >= nnodes)
			sel = nnodes ? nnodes - 1 : 0;
		draw(sel, detail, help, status);
		timeout((int)((next - now()) * 1000) + 1);
		int ch = getch();
		switch (ch) {
		case 'q':
		case 'Q':
			iterations = i;	/* leave */
			break;
		case 'j':
		case KEY_DOWN:
			if (sel + 1 < nnodes)
				sel++;
			break;
		case 'k':
		case KEY_UP:
			if (sel)
				sel--;
			break;
		case '\n':
		case KEY_ENTER:
		case 'l':
			detail = !detail;
			break;
		case 's':
			sort_key = (sort_key + 1) % SORT__COUNT;
			sort_nodes();
			break;
		case '+':
			delay = delay < 60 ? delay * 2 : delay;
			break;
		case '-':
			delay = delay > 0.25 ? delay / 2 : delay;
			break;
		case 'h':
		case '?':
			help = !help;
			break;
		case ' ':
			next = 0;
			break;
		case 'd': {
			struct node *n = &nodes[sel];
			struct dsec_err err;
			if (sel < nnodes && n->c && dsec_drain(n->c, !n->draining, &err) == 0)
				snprintf(status, sizeof(status), "%s: %s", n->name,
					 n->draining ? "takes new sandboxes again" : "draining");
			else
				snprintf(status, sizeof(status), "%s: cannot %s: %s",
					 sel < nnodes ? n->name : "?", n->draining ? "undrain" : "drain",
					 n->c ? err.msg : "not connected");
			next = 0;
			break;
		}
		default:
			break;
		}
		if (iterations > 0 && i >= iterations)
			break;
	}
	endwin();
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "host", required_argument, NULL, 'H' },
		{ "delay", required_argument, NULL, 'd' },
		{ "batch", no_argument, NULL, 'b' },
		{ "iterations", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *host = NULL;
	bool batch = false;
	long iterations = -1;
	struct dsec_cq *cq;
	struct dsec_err err;
	char *end;
	int c;

	setlocale(LC_ALL, "");
	while ((c = getopt_long(argc, argv, "H:d:bn:h", opts, NULL)) != -1) {
		switch (c) {
		case 'H':
			host = optarg;
			break;
		case 'd':
			delay = strtod(optarg, &end);
			if (*end || !(delay >= 0.1 && delay <= 3600)) {
				fprintf(stderr, "dsec-top: -d '%s': seconds between 0.1 and 3600\n",
					optarg);
				return 2;
			}
			break;
		case 'b':
			batch = true;
			break;
		case 'n':
			iterations = strtol(optarg, &end, 10);
			if (*end || iterations < 1) {
				fprintf(stderr, "dsec-top: -n '%s': a count of 1 or more\n", optarg);
				return 2;
			}
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		default:
			fputs(usage_text, stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fputs(usage_text, stderr);
		return 2;
	}
	if (!host || !*host)
		host = getenv("DSEC_HOST");
	if (!host || !*host)
		host = DSEC_DEFAULT_URL;
	if (!batch && !isatty(STDOUT_FILENO))
		batch = true;
	if (batch && iterations < 0)
		iterations = 1;
	if (dsec_cq_new(&cq, &err) < 0) {
		fprintf(stderr, "dsec-top: %s\n", err.msg);
		return 1;
	}
	node_named("?", host);
	int rc = batch ? run_batch(cq, iterations) : run_curses(cq, iterations);
	for (size_t i = 0; i < nnodes; i++)
		dsec_close(nodes[i].c);
	dsec_cq_free(cq);
	if (rc && batch)
		fprintf(stderr, "dsec-top: cannot reach %s: %s\n", nodes[0].url, nodes[0].why);
	return rc;
}
