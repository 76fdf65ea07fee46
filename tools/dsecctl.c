/* dsecctl - administer a dsec node: its fs3 image store, and the node.
 *
 * "image" works on the store directory directly, no daemon needed: fs3
 * takes the store's flock, so dsecctl and a running dsecd can both write
 * to it.  "node" asks a running dsecd (--host, else $DSEC_HOST).
 * Exit status: 0 done, 1 failed, 2 usage.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "dsec.h"
#include "fs3.h"
#include "log.h"
#include "proto.h"
#include "util.h"

/* dsecd's default state_dir: its image_store defaults to STATE_DIR/fs3. */
#define DEFAULT_STATE_DIR "/var/lib/dsec"
#define DEFAULT_SQUASH_MAX (4ull << 20)	/* squash: layers below 4 MiB are small */

/* Everything the command line says. */
struct ctl_opts {
	struct fs3_conf conf;		/* store, origin, cache cap */
	const char *state_dir;		/* --state-dir: the store is STATE_DIR/fs3 */
	const char *tag;		/* import, squash --tag */
	uint64_t max_size;		/* squash --max-size, 0 = DEFAULT_SQUASH_MAX */
	struct fs3_image_config config;	/* import --config */
	size_t nenv, nentry;		/* entries in config.env, config.entrypoint */
	char **peers;			/* --peer, or $DSEC_FS3_PEERS split */
	size_t npeers;			/* entries in peers */
	const char *host;		/* --host: the daemon of "node" and "sandbox" commands */
	char **labels;			/* sandbox ls --label K=V */
	size_t nlabels;			/* entries in labels */
	char **args;			/* after "image CMD" */
	int nargs;			/* entries in args */
};

/* One "image" subcommand. */
struct ctl_cmd {
	const char *name;	/* "import" */
	int min_args, max_args;	/* positional arguments it takes */
	const char *usage;	/* its arguments, for messages */
	int (*run)(struct fs3 *fs, struct ctl_opts *o, struct dsec_err *err);
};

static const char usage_text[] =
	"usage: dsecctl [--state-dir DIR | --store DIR] [--origin DIR] [--cache-max SIZE]\n"
	"               [--peer URL]... [--fetch-timeout SECONDS] image COMMAND\n"
	"  image import [--tag NAME[:TAG]] [--config KEY=VALUE]... SRC\n"
	"               SRC: a rootfs directory or a tar (plain, .gz, .zst, .xz, .bz2)\n"
	"               KEY: env (K=V, repeatable), cwd, user, entrypoint (one argument,\n"
	"               repeatable)\n"
	"  image ls\n"
	"  image inspect NAME[:TAG]|DIGEST\n"
	"  image tag NAME[:TAG]|DIGEST NEW[:TAG]\n"
	"  image rm NAME[:TAG]|DIGEST\n"
	"  image gc\n"
	"  image pull NAME[:TAG]|DIGEST\n"
	"  image squash [--max-size BYTES] [--tag NAME[:TAG]] IMAGE\n"
	"               merge each run of adjacent layers smaller than BYTES (default\n"
	"               4M) into one layer: a new image with the same tree\n"
	"       dsecctl [--host URL] sandbox COMMAND\n"
	"  sandbox ls [--label K=V]...   the node's sandboxes (with all those labels)\n"
	"  sandbox inspect ID            everything the node knows of one\n"
	"  sandbox destroy | pause | resume ID...\n"
	"  sandbox exec ID [--] CMD [ARG]...   its output here, its exit status ours\n"
	"  sandbox cp SRC DST            a file or a tree in or out: ID:PATH on one side\n"
	"  sandbox ttl ID SECONDS        more time: it lives SECONDS from now\n"
	"       dsecctl [--host URL] node COMMAND\n"
	"  node ls      the node asked and the other nodes of its cluster\n"
	"  node drain   the node takes no new sandboxes (its own go on)\n"
	"  node undrain it takes them again\n"
	"  node leave   it drains and leaves the cluster's gossip (then stop it)\n"
	"The store is --store, else STATE_DIR/fs3 with --state-dir, else $DSEC_FS3_STORE,\n"
	"else $DSEC_STATE_DIR/fs3, else " DEFAULT_STATE_DIR "/fs3 (dsecd's image store for\n"
	"that state directory); the origin defaults to $DSEC_FS3_ORIGIN, then\n"
	"STORE/origin; the peers to $DSEC_FS3_PEERS, then none.  The daemon is --host,\n"
	"else $DSEC_HOST, else the local one.\n"
	"See dsecctl(8) and dsec-fs3(7).\n";

static void size_str(uint64_t n, char *buf, size_t len)
{
	static const char units[] = "BKMGT";
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f%c" : "%.0f%c", v, units[u]);
}

static int cmd_import(struct fs3 *fs, struct ctl_opts *o, struct dsec_err *err)
{
	struct fs3_import_opts io = { .tag = o->tag, .config = o->config };
	struct fs3_import_res res;
	int r;

	if ((r = fs3_import(fs, o->args[0], &io, &res, err)) < 0)
		return r;
	printf("%s\n", res.digest);
	printf("layers %zu  logical %llu  chunks %llu  new %llu  stored %llu  dedup %.2f  "
	       "seconds %.2f  format %s\n", res.nlayers, (unsigned long long)res.logical,
	       (unsigned long long)res.chunks, (unsigned long long)res.new_chunks,
	       (unsigned long long)res.stored,
	       res.stored ? (double)res.logical / (double)res.stored : INFINITY, res.seconds, res.format);
	return 0;
}

/* A row of `image ls`: one tag and the image it names. */
struct ls_row {
	const char *tag;
	const struct fs3_image_info *img;
};

static int ls_row_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ls_row *)a)->tag, ((const struct ls_row *)b)->tag);
}

static int cmd_ls(struct fs3 *fs, struct ctl_opts *o, struct dsec_err *err)
{
	struct fs3_image_info *v;
	struct ls_row *rows;
	size_t n, nrows = 0;
	char sz[32];
	int r;

	if ((r = fs3_image_list(fs, &v, &n, err)) < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		for (char **t = v[i].tags; *t; t++)
			nrows++;
	if (!(rows = calloc(nrows ? nrows : 1, sizeof(*rows)))) {
		fs3_image_list_free(v, n);
		return dsec_err_set(err, ENOMEM, "out of memory listing %zu tags", nrows);
	}
	nrows = 0;
	for (size_t i = 0; i < n; i++)
		for (char **t = v[i].tags; *t; t++)
			rows[nrows++] = (struct ls_row){ .tag = *t, .img = &v[i] };
	qsort(rows, nrows, sizeof(*rows), ls_row_cmp);
	printf("%-32s %-19s %8s %s\n", "TAG", "DIGEST", "SIZE", "LAYERS");
	for (size_t i = 0; i < nrows; i++) {
		size_str(rows[i].img->size, sz, sizeof(sz));
		printf("%-32s %.19s %8s %zu\n", rows[i].tag, rows[i].img->digest, sz,
		       rows[i].img->nlayers);
	}
	free(rows);
	fs3_image_list_free(v, n);
	return 0;
}

static void print_strv(const char *key, char **v, bool one_line)
{
	if (one_line) {
		printf("%-11s", key);
		for (; *v; v++)
			printf(" %s", *v);
		printf("\n");
		return;
	}
	for (; *v; v++)
		printf("%-11s %s\n", key, *v);
}

static int cmd_inspect(struct fs3 *fs, struct ctl_opts *o, struct dsec_err *err)
{
	struct fs3_image_info info;
	int r;

	if ((r = fs3_image_inspect(fs, o->args[0], &info, err)) < 0)
		return r;
	printf("%-11s %s\n", "digest", info.digest);
	print_strv("tags", info.tags, true);
	printf("%-11s %llu\n", "size", (unsigned long long)info.size);
	for (size_t i = 0; i < info.nlayers; i++) {
		const struct fs3_layer_info *l = &info.layers[i];
		printf("%-11s %s size %llu chunks %llu index %s%s\n", "layer", l->digest,
		       (unsigned long long)l->size, (unsigned long long)l->chunks, l->index,
		       l->mounted ? " mounted" : "");
	}
	print_strv("env", info.config.env, false);
	printf("%-11s %s\n", "cwd", info.config.cwd);
	printf("%-11s %s\n", "user", info.config.user);
	print_strv("entrypoint", info.config.entrypoint, true);
	fs3_image_info_clear(&info);
	return 0;
}

static int cmd_tag(struct fs3 *fs, struct ctl_opts *o, struct dsec_err *err)
{
	return fs3_tag(fs, o->args[0], o->args[1], err);
}

static int cmd_rm(struct fs3 *fs, struct ctl_opts *o, struct dsec_err *err)
{
	return fs3_untag(fs, o->args[0], err);
}

static int cmd_gc(struct fs3 *fs, struct ctl_opts *o, struct dsec_err *err)
{
	struct fs3_gc_res res;
	int r;

	if ((r = fs3_gc(fs, &res, err)) < 0)
		return r;
	printf("kept %llu  removed %llu  freed %llu  layer files removed %llu\n",
	       (unsigned long long)res.kept, (unsigned long long)res.removed,
	       (unsigned long long)res.freed, (unsigned long long)res.layers_removed);
	return 0;
}

static int cmd_pull(struct fs3 *fs, struct ctl_opts *o, struct dsec_err *err)
{
	struct fs3_pull_res res;
	int r;

	if ((r = fs3_pull(fs, o->args[0], &res, err)) < 0)
		return r;
	printf("%s\n", res.digest);
	printf("chunks %llu  local %llu  fetched %llu  bytes %llu  seconds %.2f\n",
	       (unsigned long long)res.chunks, (unsigned long long)res.local,
	       (unsigned long long)res.fetched, (unsigned long long)res.bytes, res.seconds);
	for (size_t i = 0; i < res.nsrc; i++)
		printf("from %s  chunks %llu  bytes %llu\n", res.src[i].name,
		       (unsigned long long)res.src[i].objects, (unsigned long long)res.src[i].bytes);
	return 0;
}

static int cmd_squash(struct fs3 *fs, struct ctl_opts *o, struct dsec_err *err)
{
	struct fs3_squash_res res;
	int r;

	if ((r = fs3_squash(fs, o->args[0], o->max_size ? o->max_size : DEFAULT_SQUASH_MAX, o->tag,
			    &res, err)) < 0)
		return r;
	printf("%s\n", res.digest);
	printf("layers %zu -> %zu  runs merged %zu  logical %llu  stored %llu  seconds %.2f\n",
	       res.before, res.after, res.runs, (unsigned long long)res.logical,
	       (unsigned long long)res.stored, res.seconds);
	return 0;
}

static const struct ctl_cmd cmds[] = {
	{ .name = "import", .min_args = 1, .max_args = 1, .usage = "SRC", .run = cmd_import },
	{ .name = "ls", .min_args = 0, .max_args = 0, .usage = "", .run = cmd_ls },
	{ .name = "inspect", .min_args = 1, .max_args = 1, .usage = "IMAGE", .run = cmd_inspect },
	{ .name = "tag", .min_args = 2, .max_args = 2, .usage = "IMAGE NEW", .run = cmd_tag },
	{ .name = "rm", .min_args = 1, .max_args = 1, .usage = "IMAGE", .run = cmd_rm },
	{ .name = "gc", .min_args = 0, .max_args = 0, .usage = "", .run = cmd_gc },
	{ .name = "pull", .min_args = 1, .max_args = 1, .usage = "IMAGE", .run = cmd_pull },
	{ .name = "squash", .min_args = 1, .max_args = 1, .usage = "IMAGE", .run = cmd_squash },
};

enum {
	OPT_STORE = 256,
	OPT_STATE_DIR,
	OPT_ORIGIN,
	OPT_CACHE_MAX,
	OPT_TAG,
	OPT_CONFIG,
	OPT_PEER,
	OPT_FETCH_TIMEOUT,
	OPT_MAX_SIZE,
	OPT_HOST,
	OPT_LABEL,
	OPT_HELP,
};

static const struct option long_opts[] = {
	{ .name = "store",	.has_arg = required_argument,	.val = OPT_STORE },
	{ .name = "state-dir",	.has_arg = required_argument,	.val = OPT_STATE_DIR },
	{ .name = "origin",	.has_arg = required_argument,	.val = OPT_ORIGIN },
	{ .name = "cache-max",	.has_arg = required_argument,	.val = OPT_CACHE_MAX },
	{ .name = "tag",	.has_arg = required_argument,	.val = OPT_TAG },
	{ .name = "config",	.has_arg = required_argument,	.val = OPT_CONFIG },
	{ .name = "peer",	.has_arg = required_argument,	.val = OPT_PEER },
	{ .name = "fetch-timeout", .has_arg = required_argument, .val = OPT_FETCH_TIMEOUT },
	{ .name = "max-size",	.has_arg = required_argument,	.val = OPT_MAX_SIZE },
	{ .name = "host",	.has_arg = required_argument,	.val = OPT_HOST },
	{ .name = "label",	.has_arg = required_argument,	.val = OPT_LABEL },
	{ .name = "help",	.has_arg = no_argument,		.val = OPT_HELP },
	{ 0 }
};

static _Noreturn DSEC_PRINTF(1, 2) void usage_fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "dsecctl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n%s", usage_text);
	exit(2);
}

static void strv_push(char ***v, size_t *n, const char *s)
{
	*v = xrealloc(*v, (*n + 2) * sizeof(**v));
	(*v)[(*n)++] = xstrdup(s);
	(*v)[*n] = NULL;
}

/* Adds the peers a list names, split by commas or blanks. */
static void add_peers(struct ctl_opts *o, const char *list)
{
	_cleanup_free_ char *copy = xstrdup(list);
	char *save = NULL;

	for (char *w = strtok_r(copy, ", \t", &save); w; w = strtok_r(NULL, ", \t", &save))
		strv_push(&o->peers, &o->npeers, w);
}

static void add_config(struct ctl_opts *o, const char *kv)
{
	struct fs3_image_config *c = &o->config;
	const char *eq = strchr(kv, '=');
	size_t kl = eq ? (size_t)(eq - kv) : 0;

	if (!eq)
		usage_fail("--config '%s': expected KEY=VALUE", kv);
	if (kl == 3 && !strncmp(kv, "env", 3)) {
		if (!strchr(eq + 1, '=') || eq[1] == '=')
			usage_fail("--config '%s': env wants K=V", kv);
		strv_push(&c->env, &o->nenv, eq + 1);
	} else if (kl == 3 && !strncmp(kv, "cwd", 3)) {
		free(c->cwd);
		c->cwd = xstrdup(eq + 1);
	} else if (kl == 4 && !strncmp(kv, "user", 4)) {
		free(c->user);
		c->user = xstrdup(eq + 1);
	} else if (kl == 10 && !strncmp(kv, "entrypoint", 10)) {
		strv_push(&c->entrypoint, &o->nentry, eq + 1);
	} else {
		usage_fail("--config '%s': unknown key (env, cwd, user, entrypoint)", kv);
	}
}

static int ask(struct dsec_client *c, const char *op, const char *id, char *const *labels,
	       struct dsec_msg *m, const msgpack_object **res, void **reply, struct dsec_err *err);

/* ---- node: ask the daemon ---- */

/* node ls: the node asked (its state, sandboxes) and its cluster's
 * members as it sees them. */
static int node_ls(struct dsec_client *c, struct dsec_err *err)
{
	_cleanup_free_ void *reply = NULL;
	const msgpack_object *res, *cl, *mem;
	struct dsec_msg msg;
	struct dsec_pk p;
	size_t len, rlen;
	int r;

	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "info");
	dsec_pk_end(&p);
	_cleanup_free_ void *req = dsec_pk_detach(&p, &rlen);
	if ((r = dsec_raw(c, req, rlen, &reply, &len, err)) < 0 ||
	    (r = dsec_reply_check(c, reply, len, err)) < 0 ||
	    (r = dsec_msg_parse_n(&msg, reply, len, len + 1, 65536, err)) < 0)
		return r;
	res = dsec_map_get(msg.root, "result");
	_cleanup_free_ char *name = NULL;
	uint64_t n = 0;
	bool draining = false;
	dsec_get_str(res, "node", &name, NULL);
	dsec_get_u64(res, "sandboxes", &n, NULL);
	dsec_get_bool(res, "draining", &draining, NULL);
	printf("%-20s %-9s %-10s %s\n", "NODE", "STATE", "SANDBOXES", "ADDRESS");
	printf("%-20s %-9s %-10llu %s (this node)\n", name ? name : "?",
	       draining ? "draining" : "alive", (unsigned long long)n, dsec_client_url(c));
	cl = dsec_map_get(res, "cluster");
	mem = cl ? dsec_map_get(cl, "members") : NULL;
	for (uint32_t i = 0; mem && mem->type == MSGPACK_OBJECT_ARRAY && i < mem->via.array.size;
	     i++) {
		const msgpack_object *m = &mem->via.array.ptr[i];
		_cleanup_free_ char *mn = NULL, *url = NULL, *state = NULL;
		dsec_get_str(m, "name", &mn, NULL);
		dsec_get_str(m, "url", &url, NULL);
		dsec_get_str(m, "state", &state, NULL);
		printf("%-20s %-9s %-10s %s\n", mn ? mn : "?", state ? state : "?", "-",
		       url ? url : "?");
	}
	dsec_msg_free(&msg);
	return 0;
}

static int run_node(struct ctl_opts *o, const char *what, struct dsec_err *err)
{
	struct dsec_client *c;
	int r;

	if ((r = dsec_connect_tls(&c, o->host, NULL, NULL, err)) < 0)
		return r;
	dsec_set_timeout(c, 10);
	if (!strcmp(what, "ls")) {
		r = node_ls(c, err);
	} else if (!strcmp(what, "leave")) {
		struct dsec_msg m;
		const msgpack_object *res;
		void *reply = NULL;
		if ((r = ask(c, "leave", NULL, NULL, &m, &res, &reply, err)) == 0) {
			printf("left the cluster (draining): stop the daemon once its sandboxes "
			       "are gone\n");
			dsec_msg_free(&m);
		}
		free(reply);
	} else {
		bool drain = !strcmp(what, "drain");
		if ((r = dsec_drain(c, drain, err)) == 0)
			printf("%s\n", drain ? "draining: no new sandboxes" : "taking new sandboxes");
	}
	dsec_close(c);
	return r;
}

/* ---- sandbox: the daemon's sandboxes ---- */

/* A request of op with fields id (NULL = none) and, for list, labels;
 * the parsed reply's result in *res.  msgpack-c's objects point into the
 * frame: free m with dsec_msg_free, then *reply. */
static int ask(struct dsec_client *c, const char *op, const char *id, char *const *labels,
	       struct dsec_msg *m, const msgpack_object **res, void **reply, struct dsec_err *err)
{
	struct dsec_pk p;
	size_t len, rlen;
	int r;

	*reply = NULL;

	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, op);
	if (id)
		dsec_pk_kv_str(&p, "id", id);
	if (labels)
		dsec_pk_kv_env(&p, "labels", (const char *const *)labels);
	dsec_pk_end(&p);
	_cleanup_free_ void *req = dsec_pk_detach(&p, &rlen);
	if ((r = dsec_raw(c, req, rlen, reply, &len, err)) < 0 ||
	    (r = dsec_reply_check(c, *reply, len, err)) < 0 ||
	    (r = dsec_msg_parse_n(m, *reply, len, len + 1, 1u << 22, err)) < 0) {
		free(*reply);
		*reply = NULL;
		return r;
	}
	*res = dsec_map_get(m->root, "result");
	return 0;
}

/* One value as text: strings as they are, maps and arrays as JSON-ish. */
static void print_obj(const msgpack_object *o)
{
	switch (o->type) {
	case MSGPACK_OBJECT_STR:
		printf("%.*s", (int)o->via.str.size, o->via.str.ptr);
		break;
	case MSGPACK_OBJECT_BIN:
		printf("<%u bytes>", o->via.bin.size);
		break;
	case MSGPACK_OBJECT_MAP:
		printf("{");
		for (uint32_t i = 0; i < o->via.map.size; i++) {
			printf(i ? ", " : "");
			print_obj(&o->via.map.ptr[i].key);
			printf(": ");
			print_obj(&o->via.map.ptr[i].val);
		}
		printf("}");
		break;
	case MSGPACK_OBJECT_ARRAY:
		printf("[");
		for (uint32_t i = 0; i < o->via.array.size; i++) {
			printf(i ? ", " : "");
			print_obj(&o->via.array.ptr[i]);
		}
		printf("]");
		break;
	default:
		msgpack_object_print(stdout, *o);
	}
}

static int sandbox_ls(struct dsec_client *c, struct ctl_opts *o, struct dsec_err *err)
{
	/* In pages, so that a node of many thousands answers in parts. */
	struct dsec_list_opts lo = { .struct_size = sizeof(lo),
				     .labels = (const char *const *)o->labels, .limit = 500 };
	struct dsec_sandbox_info *list;
	char *next = NULL;
	struct timeval tv;
	size_t n;
	int r;

	printf("%-24s %-10s %-9s %8s %8s  %s\n", "ID", "BACKEND", "STATE", "AGE", "IDLE", "LABELS");
	do {
		free((char *)lo.after);
		lo.after = next;
		if ((r = dsec_list_page(c, &lo, &list, &n, &next, NULL, err)) < 0)
			break;
		gettimeofday(&tv, NULL);
		double now = (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
		for (size_t i = 0; i < n; i++) {
			const struct dsec_sandbox_info *sb = &list[i];

			printf("%-24s %-10s %-9s %7.0fs %7.0fs  ", sb->id, sb->backend, sb->state,
			       sb->created ? now - sb->created : 0, sb->idle);
			for (size_t k = 0; sb->labels[k]; k++)
				printf("%s%s", k ? "," : "", sb->labels[k]);
			printf("\n");
		}
		dsec_sandbox_list_free(list, n);
	} while (next);
	free((char *)lo.after);
	return r;
}

static int sandbox_inspect(struct dsec_client *c, const char *id, struct dsec_err *err)
{
	const msgpack_object *res;
	_cleanup_free_ void *reply = NULL;
	struct dsec_msg m;
	int r;

	if ((r = ask(c, "info", id, NULL, &m, &res, &reply, err)) < 0)
		return r;
	for (uint32_t i = 0; res && res->type == MSGPACK_OBJECT_MAP && i < res->via.map.size; i++) {
		print_obj(&res->via.map.ptr[i].key);
		printf(": ");
		print_obj(&res->via.map.ptr[i].val);
		printf("\n");
	}
	dsec_msg_free(&m);
	return 0;
}

/* cp: "ID:PATH" names a sandbox's file (an id has a colon, so the last
 * one splits id from path); anything else is a local file. */
static bool split_remote(const char *s, char **id, const char **path)
{
	const char *c = strchr(s, ':');

	if (!c || !strchr(c + 1, ':'))
		return false;
	c = strchr(c + 1, ':');
	*id = xstrndup(s, (size_t)(c - s));
	*path = c + 1;
	return **path != '\0';
}

/* The local file or directory name a copy out of the sandbox makes: dst,
 * or dst/NAME when dst is a directory and src a file (NAME: src's last
 * component).  Caller frees. */
static char *local_target(const char *dst, const char *src, bool tree)
{
	const char *slash = strrchr(src, '/');
	struct stat st;

	if (tree || stat(dst, &st) < 0 || !S_ISDIR(st.st_mode))
		return xstrdup(dst);
	return xasprintf("%s/%s", dst, slash ? slash + 1 : src);
}

/* A temporary file, already removed: the archive of a tree on its way. */
static int tmp_fd(struct dsec_err *err)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd < 0)
		return dsec_err_set(err, errno, "cannot make a temporary file in '%s': %s", dir,
				    strerror(errno));
	return fd;
}

/* libarchive's error on a, as our messages are: lowercase first. */
static int arch_err(struct dsec_err *err, struct archive *a, const char *what, const char *path)
{
	char b[256];

	snprintf(b, sizeof(b), "%s", archive_error_string(a) ? archive_error_string(a)
							    : "malformed archive");
	if (b[0] >= 'A' && b[0] <= 'Z')
		b[0] = (char)(b[0] - 'A' + 'a');
	return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "cannot %s '%s': %s", what, path, b);
}

/* Unpacks the tar at fd (from its start) into directory dir (made when
 * missing) the way bsdtar -C does it with its safe defaults: no member
 * with ".." or an absolute name, none through a symlink, permissions and
 * times as archived, owners not (the sandbox's ids mean nothing here). */
static int unpack_local(int fd, const char *dir, struct dsec_err *err)
{
	struct archive *in = archive_read_new(), *out = archive_write_disk_new();
	struct archive_entry *e;
	int here = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC), r = 0, ar;

	DSEC_ASSERT(in && out);
	archive_read_support_format_tar(in);
	archive_write_disk_set_options(out, ARCHIVE_EXTRACT_SECURE_NODOTDOT |
				       ARCHIVE_EXTRACT_SECURE_SYMLINKS |
				       ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS |
				       ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME);
	if (here < 0 || (mkdir(dir, 0755) < 0 && errno != EEXIST) || chdir(dir) < 0) {
		r = dsec_err_set(err, errno, "cannot unpack into '%s': %s", dir, strerror(errno));
		goto out;
	}
	lseek(fd, 0, SEEK_SET);
	if (archive_read_open_fd(in, fd, 65536) != ARCHIVE_OK) {
		r = arch_err(err, in, "unpack into", dir);
		goto out;
	}
	while (r == 0 && (ar = archive_read_next_header(in, &e)) != ARCHIVE_EOF) {
		const void *buf;
		size_t n;
		la_int64_t off;

		if (ar < ARCHIVE_WARN)
			r = arch_err(err, in, "unpack into", dir);
		else if (archive_write_header(out, e) < ARCHIVE_WARN)
			r = arch_err(err, out, "unpack into", dir);
		while (r == 0 && archive_entry_size(e) > 0 &&
		       (ar = archive_read_data_block(in, &buf, &n, &off)) != ARCHIVE_EOF)
			if (ar < ARCHIVE_WARN)
				r = arch_err(err, in, "unpack into", dir);
			else if (archive_write_data_block(out, buf, n, off) < ARCHIVE_WARN)
				r = arch_err(err, out, "unpack into", dir);
		if (r == 0 && archive_write_finish_entry(out) < ARCHIVE_WARN)
			r = arch_err(err, out, "unpack into", dir);
	}
out:
	if (r == 0 && archive_write_close(out) != ARCHIVE_OK)
		r = arch_err(err, out, "unpack into", dir);
	archive_read_free(in);
	archive_write_free(out);
	if (here >= 0 && fchdir(here) < 0 && r == 0)
		r = dsec_err_set(err, errno, "cannot go back to the directory: %s", strerror(errno));
	if (here >= 0)
		close(here);
	return r;
}

/* Packs what is in local directory dir (names relative to it; symlinks as
 * links) as a tar into fd. */
static int pack_local(const char *dir, int fd, struct dsec_err *err)
{
	struct archive *disk = archive_read_disk_new(), *out = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	size_t dlen = strlen(dir);
	int r = 0, ar;

	DSEC_ASSERT(disk && out && e);
	archive_read_disk_set_symlink_physical(disk);
	archive_read_disk_set_standard_lookup(disk);
	archive_write_set_format_pax_restricted(out);
	if (archive_write_open_fd(out, fd) != ARCHIVE_OK)
		r = arch_err(err, out, "pack", dir);
	if (r == 0 && archive_read_disk_open(disk, dir) != ARCHIVE_OK)
		r = arch_err(err, disk, "pack", dir);
	while (r == 0 && (ar = archive_read_next_header2(disk, e)) != ARCHIVE_EOF) {
		const char *name = archive_entry_pathname(e);
		char buf[65536];
		la_ssize_t n;

		if (ar < ARCHIVE_WARN) {
			r = arch_err(err, disk, "pack", dir);
			break;
		}
		archive_read_disk_descend(disk);
		if (strncmp(name, dir, dlen) || (name[dlen] != '/' && name[dlen]))
			continue;	/* not below dir: nothing to pack */
		name += dlen;
		while (*name == '/')
			name++;
		if (!*name)
			continue;	/* dir itself */
		if (archive_entry_filetype(e) != AE_IFREG && archive_entry_filetype(e) != AE_IFDIR &&
		    archive_entry_filetype(e) != AE_IFLNK)
			continue;	/* sockets, fifos, devices: the sandbox takes none */
		archive_entry_copy_pathname(e, name);
		if (archive_write_header(out, e) < ARCHIVE_WARN)
			r = arch_err(err, out, "pack", dir);
		while (r == 0 && (n = archive_read_data(disk, buf, sizeof(buf))) > 0)
			if (archive_write_data(out, buf, (size_t)n) < 0)
				r = arch_err(err, out, "pack", dir);
		if (r == 0 && n < 0)
			r = arch_err(err, disk, "pack", dir);
	}
	if (r == 0 && archive_write_close(out) != ARCHIVE_OK)
		r = arch_err(err, out, "pack", dir);
	archive_entry_free(e);
	archive_read_free(disk);
	archive_write_free(out);
	return r;
}

/* cp out of the sandbox: a tree through a tar unpacked here, a file in
 * parts, each written here as it comes. */
static int cp_out(struct dsec_client *c, const char *id, const char *path, const char *dst,
		  struct dsec_err *err)
{
	struct dsec_file_desc d;
	struct dsec_err e2;
	bool tree = dsec_file_stat(c, id, path, &d, &e2) == 0 && d.type == DSEC_KIND_DIR;
	mode_t mode = d.mode ? d.mode & 0777 : 0644;
	_cleanup_free_ char *target = local_target(dst, path, tree);
	_cleanup_close_ int fd = -1;
	struct dsec_buf b;
	uint64_t off = 0;
	bool eof = false;
	int r;

	dsec_file_desc_free(&d);
	if (tree) {
		if ((fd = tmp_fd(err)) < 0)
			return fd;
		if ((r = dsec_file_download_fd(c, id, path, "tar", fd, err)) < 0)
			return r;
		return unpack_local(fd, target, err);
	}
	/* The local file is made once the first part came. */
	dsec_buf_init(&b);
	for (r = 0; r == 0 && !eof; off += b.len) {
		b.len = 0;
		if ((r = dsec_file_read_part(c, id, path, off, 0, &b, &eof, err)) < 0)
			break;
		if (fd < 0 &&
		    (fd = open(target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)) < 0)
			r = dsec_err_set(err, errno, "cannot write '%s': %s", target,
					 strerror(errno));
		else if ((r = dsec_write_all(fd, b.data, b.len)) < 0)
			r = dsec_err_set(err, -r, "cannot write '%s': %s", target, strerror(-r));
		if (!b.len)
			break;
	}
	dsec_buf_free(&b);
	return r;
}

/* cp into the sandbox: a directory's contents as a tar unpacked there, a
 * file (any size: dsec_file_write goes in parts) with its permissions. */
static int cp_in(struct dsec_client *c, const char *src, const char *id, const char *path,
		 struct dsec_err *err)
{
	_cleanup_close_ int fd = open(src, O_RDONLY | O_CLOEXEC);
	struct stat st;
	void *map = NULL;
	int r;

	if (fd < 0 || fstat(fd, &st) < 0)
		return dsec_err_set(err, errno, "cannot read '%s': %s", src, strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		_cleanup_close_ int tar = tmp_fd(err);

		if (tar < 0 || (r = pack_local(src, tar, err)) < 0)
			return tar < 0 ? tar : r;
		lseek(tar, 0, SEEK_SET);
		return dsec_file_upload_fd(c, id, path, tar, "tar", DSEC_OWNER_DEFAULT,
					   DSEC_OWNER_DEFAULT, err);
	}
	if (!S_ISREG(st.st_mode))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "cannot copy '%s': not a file or directory", src);
	if (st.st_size &&
	    (map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED)
		return dsec_err_set(err, errno, "cannot read '%s': %s", src, strerror(errno));
	r = dsec_file_write(c, id, path, map, (size_t)st.st_size, st.st_mode & 0777, err);
	if (map)
		munmap(map, (size_t)st.st_size);
	return r;
}

static int sandbox_cp(struct dsec_client *c, const char *src, const char *dst,
		      struct dsec_err *err)
{
	_cleanup_free_ char *sid = NULL, *did = NULL;
	const char *spath, *dpath;
	bool in = split_remote(src, &sid, &spath), out = split_remote(dst, &did, &dpath);

	if (in == out)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "cp copies between a sandbox "
				     "(ID:PATH) and a local file: one side of each");
	return in ? cp_out(c, sid, spath, dst, err) : cp_in(c, src, did, dpath, err);
}

static int run_sandbox(struct ctl_opts *o, int argc, char **argv)
{
	const char *what = argc ? argv[0] : "";
	struct dsec_client *c;
	struct dsec_err err;
	int r = 0, status = 0;

	if (!strcmp(what, "ls") ? argc != 1 :
	    !strcmp(what, "inspect") ? argc != 2 :
	    !strcmp(what, "cp") ? argc != 3 :
	    !strcmp(what, "ttl") ? argc != 3 :
	    !strcmp(what, "exec") ? argc < 3 :
	    (!strcmp(what, "destroy") || !strcmp(what, "pause") || !strcmp(what, "resume"))
		    ? argc < 2 : true)
		usage_fail("expected 'sandbox ls', 'sandbox inspect ID', 'sandbox destroy|pause|resume "
			   "ID...', 'sandbox exec ID CMD...', 'sandbox cp SRC DST' or 'sandbox ttl ID "
			   "SECONDS'");
	if (o->labels && strcmp(what, "ls"))
		usage_fail("--label goes with 'sandbox ls' only");
	dsec_err_clear(&err);
	if (dsec_connect_tls(&c, o->host, NULL, NULL, &err) < 0) {
		fprintf(stderr, "dsecctl: %s\n", err.msg);
		return 1;
	}
	if (!strcmp(what, "ls")) {
		r = sandbox_ls(c, o, &err);
	} else if (!strcmp(what, "inspect")) {
		r = sandbox_inspect(c, argv[1], &err);
	} else if (!strcmp(what, "cp")) {
		r = sandbox_cp(c, argv[1], argv[2], &err);
	} else if (!strcmp(what, "ttl")) {
		char *end;
		double s = strtod(argv[2], &end), left = 0;
		if (end == argv[2] || *end || !(s > 0))
			usage_fail("sandbox ttl ID SECONDS: seconds more than 0");
		if ((r = dsec_set_ttl(c, argv[1], s, 0, &left, &err)) == 0)
			printf("%s: %.0f s left\n", argv[1], left);
	} else if (!strcmp(what, "exec")) {
		char **cmd = argv + 2;
		if (!strcmp(cmd[0], "--"))
			cmd++;
		if (!cmd[0])
			usage_fail("sandbox exec ID: no command");
		struct dsec_cmd q = { .argv = (const char *const *)cmd };
		struct dsec_cmd_res res;
		if ((r = dsec_exec(c, argv[1], &q, &res, &err)) == 0) {
			fwrite(res.out.data, 1, res.out.len, stdout);
			fwrite(res.err.data, 1, res.err.len, stderr);
			status = res.timed_out ? 124 : res.signal ? 128 + res.signal : res.exit_code;
			dsec_cmd_res_free(&res);
		}
	} else {
		/* destroy, pause, resume: every id, reporting each failure. */
		int (*fn)(struct dsec_client *, const char *, struct dsec_err *) =
			!strcmp(what, "destroy") ? dsec_destroy :
			!strcmp(what, "pause") ? dsec_pause : dsec_resume;
		for (int i = 1; i < argc; i++)
			if (fn(c, argv[i], &err) < 0) {
				fprintf(stderr, "dsecctl: %s: %s\n", argv[i], err.msg);
				status = 1;
			}
	}
	dsec_close(c);
	if (r < 0) {
		fprintf(stderr, "dsecctl: %s\n", err.msg);
		return 1;
	}
	return status;
}

/* The store when --store does not name it.  A daemon's image store is
 * STATE_DIR/fs3 unless its image_store says otherwise, so naming the
 * daemon's state directory (--state-dir, or $DSEC_STATE_DIR as `make run`
 * prints it) finds the store it reads; $DSEC_FS3_STORE names a store
 * itself and wins over $DSEC_STATE_DIR, not over --state-dir.  Caller frees. */
static char *default_store(const char *state_dir)
{
	const char *env_store = getenv("DSEC_FS3_STORE");

	if (!state_dir && env_store && *env_store)
		return xstrdup(env_store);
	if (!state_dir)
		state_dir = getenv("DSEC_STATE_DIR");
	if (!state_dir || !*state_dir)
		state_dir = DEFAULT_STATE_DIR;
	return xasprintf("%s/fs3", state_dir);
}

int main(int argc, char **argv)
{
	_cleanup_free_ char *store = NULL;
	struct ctl_opts o = { 0 };
	const struct ctl_cmd *cmd = NULL;
	struct dsec_err err;
	struct fs3 *fs;
	int c, r;

	dsec_log_set_ident("dsecctl");
	dsec_log_set_level(DSEC_LOG_WARN);
	o.conf.origin = getenv("DSEC_FS3_ORIGIN");
	bool env_peers = getenv("DSEC_FS3_PEERS") != NULL;
	if (env_peers)
		add_peers(&o, getenv("DSEC_FS3_PEERS"));
	while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
		switch (c) {
		case OPT_STORE:
			o.conf.store = optarg;
			break;
		case OPT_STATE_DIR:
			o.state_dir = optarg;
			break;
		case OPT_ORIGIN:
			o.conf.origin = optarg;
			break;
		case OPT_CACHE_MAX:
			if (dsec_parse_size(optarg, &o.conf.cache_max) < 0 || !o.conf.cache_max)
				usage_fail("--cache-max '%s': not a size", optarg);
			break;
		case OPT_TAG:
			o.tag = optarg;
			break;
		case OPT_CONFIG:
			add_config(&o, optarg);
			break;
		case OPT_PEER:
			/* The command line replaces the environment's list. */
			if (env_peers) {
				dsec_strv_free(o.peers);
				o.peers = NULL;
				o.npeers = 0;
				env_peers = false;
			}
			add_peers(&o, optarg);
			break;
		case OPT_FETCH_TIMEOUT:
			if (dsec_parse_duration(optarg, &o.conf.fetch_timeout) < 0 ||
			    o.conf.fetch_timeout <= 0)
				usage_fail("--fetch-timeout '%s': not a duration", optarg);
			break;
		case OPT_MAX_SIZE:
			if (dsec_parse_size(optarg, &o.max_size) < 0 || !o.max_size)
				usage_fail("--max-size '%s': not a size", optarg);
			break;
		case OPT_HOST:
			o.host = optarg;
			break;
		case OPT_LABEL:
			if (!strchr(optarg, '=') || optarg[0] == '=')
				usage_fail("--label '%s': expected KEY=VALUE", optarg);
			strv_push(&o.labels, &o.nlabels, optarg);
			break;
		case OPT_HELP:
			fputs(usage_text, stdout);
			return 0;
		default:
			fputs(usage_text, stderr);
			return 2;
		}
	}
	if (argc - optind >= 1 && !strcmp(argv[optind], "node")) {
		const char *what = argc - optind == 2 ? argv[optind + 1] : NULL;
		if (!what || (strcmp(what, "ls") && strcmp(what, "drain") && strcmp(what, "undrain") &&
			      strcmp(what, "leave")))
			usage_fail("expected 'node ls', 'node drain', 'node undrain' or 'node leave'");
		dsec_err_clear(&err);
		if (run_node(&o, what, &err) < 0) {
			fprintf(stderr, "dsecctl: %s\n", err.msg);
			return 1;
		}
		return 0;
	}
	if (argc - optind >= 1 && !strcmp(argv[optind], "sandbox")) {
		int rc = run_sandbox(&o, argc - optind - 1, argv + optind + 1);
		dsec_strv_free(o.labels);
		return rc;
	}
	if (o.labels)
		usage_fail("--label goes with 'sandbox ls' only");
	if (o.host)
		usage_fail("--host goes with 'node' and 'sandbox' commands only");
	if (argc - optind < 2 || strcmp(argv[optind], "image"))
		usage_fail("%s", argc - optind < 1 ? "no command"
						 : "expected 'image COMMAND' or 'node COMMAND'");
	for (size_t i = 0; i < DSEC_ARRAY_LEN(cmds); i++)
		if (!strcmp(cmds[i].name, argv[optind + 1]))
			cmd = &cmds[i];
	if (!cmd)
		usage_fail("unknown command 'image %s'", argv[optind + 1]);
	o.args = argv + optind + 2;
	o.nargs = argc - optind - 2;
	if (o.nargs < cmd->min_args || o.nargs > cmd->max_args)
		usage_fail("usage: dsecctl image %s %s", cmd->name, cmd->usage);
	if (cmd->run != cmd_import && (o.nenv || o.nentry || o.config.cwd || o.config.user))
		usage_fail("--config goes with 'image import' only");
	if (cmd->run != cmd_import && cmd->run != cmd_squash && o.tag)
		usage_fail("--tag goes with 'image import' and 'image squash' only");
	if (cmd->run != cmd_squash && o.max_size)
		usage_fail("--max-size goes with 'image squash' only");
	if (o.conf.store && o.state_dir)
		usage_fail("--store and --state-dir: give one of them");
	if (!o.conf.store)
		o.conf.store = store = default_store(o.state_dir);
	o.conf.peers = (const char *const *)o.peers;
	dsec_err_clear(&err);
	if ((r = fs3_open(&fs, &o.conf, &err)) == 0) {
		r = cmd->run(fs, &o, &err);
		fs3_close(fs);
	}
	fs3_image_config_free(&o.config);
	dsec_strv_free(o.peers);
	if (r < 0) {
		fprintf(stderr, "dsecctl: %s\n", err.msg);
		return 1;
	}
	return 0;
}
