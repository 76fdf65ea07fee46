/* ops-node.c - the ops on the node itself: ping, info, list. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "daemon.h"
#include "dsec.h"
#include "fs3.h"
#include "log.h"
#include "ops.h"
#include "proto.h"
#include "rlc.h"

static void pack_session(void *arg, const struct dsec_session_info *i)
{
	struct dsec_pk *p = arg;

	dsec_pk_map_begin(p);
	dsec_pk_kv_str(p, "name", i->name);
	dsec_pk_kv_str(p, "shell", i->shell);
	dsec_pk_kv_str(p, "cwd", i->cwd);
	dsec_pk_kv_bool(p, "running", i->running);
	dsec_pk_kv_u64(p, "commands", i->commands);
	dsec_pk_end(p);
}

/* A sandbox's entries, into the map open in p; with_sessions adds
 * "sessions" (info on one sandbox). */
static void pack_sandbox(struct dsecd *d, struct dsec_pk *p, const struct dsecd_sb *sb,
			 bool with_sessions)
{
	static const char *const states[] = { "creating", "running", "destroying", "failed" };
	void (*list)(void *, void (*)(void *, const struct dsec_session_info *), void *) =
		sb->handle && sb->state == SB_READY ? sb->be->ops->session_list : NULL;

	if (with_sessions) {
		dsec_pk_str(p, "sessions");
		dsec_pk_array_begin(p);
		if (list)
			list(sb->handle, pack_session, p);
		dsec_pk_end(p);
	}
	dsec_pk_kv_str(p, "id", sb->id);
	dsec_pk_kv_str(p, "backend", sb->be->name);
	dsec_pk_kv_str(p, "runtime", sb->runtime ? sb->runtime : "");
	dsec_pk_kv_str(p, "image", sb->image ? sb->image : "");
	dsec_pk_kv_str(p, "state", sb->state == SB_READY && sb->paused ? "paused" :
		       states[sb->state]);
	dsec_pk_kv_double(p, "created", sb->created);
	dsec_pk_kv_double(p, "ttl", sb->ttl);
	dsec_pk_kv_double(p, "idle_ttl", sb->idle_ttl);
	dsec_pk_kv_env(p, "labels", (const char *const *)sb->labels);
	dsec_pk_kv_double(p, "idle", ev_now(d->loop) - sb->last_used);
	dsec_pk_kv_u64(p, "execs", sb->execs);
	dsec_pk_kv_u64(p, "running", sb->running);
	dsec_pk_kv_u64(p, "streams", sb->nstreams);
	dsecd_sb_pack_marks(sb, p, NULL);
	rlc_pack_sb(d, sb, p);
}

void dsecd_sb_pack_marks(const struct dsecd_sb *sb, struct dsec_pk *p,
			 const struct dsec_be_usage *u)
{
	dsec_pk_str(p, "misbehaviour");
	dsec_pk_map_begin(p);
	dsec_pk_kv_u64(p, "oom_kills", sb->marks.oom_kills);
	dsec_pk_kv_u64(p, "pids_limited", sb->marks.pids_limited);
	dsec_pk_kv_u64(p, "output_floods", sb->marks.output_floods);
	dsec_pk_kv_u64(p, "timeouts", sb->marks.timeouts);
	if (sb->probes_counted)
		dsec_pk_kv_u64(p, "protected_probes", sb->marks.protected_probes);
	if (u && (u->have & DSEC_USAGE_EGRESS_DENIED))
		dsec_pk_kv_u64(p, "egress_denied", u->egress_denied);
	if (u && (u->have & DSEC_USAGE_SECCOMP_DENIED))
		dsec_pk_kv_u64(p, "seccomp_denied", u->seccomp_denied);
	dsec_pk_end(p);
}

void op_ping(struct dsecd_req *r)
{
	struct dsec_pk p;

	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	dsec_pk_kv_bool(&p, "pong", true);
	dsec_pk_kv_str(&p, "node", r->d->conf.node);
	dsec_pk_kv_str(&p, "version", DSEC_VERSION);
	dsec_pk_kv_u64(&p, "proto", DSEC_PROTO_VERSION);
	dsec_pk_kv_u64(&p, "max_frame", r->d->conf.max_frame);
	dsec_pk_end(&p);
	req_complete(r, &p);
}

struct paused_count {
	const struct dsecd_backend *be;	/* count this backend's, NULL = all */
	uint64_t n;			/* paused sandboxes */
};

static void count_paused(struct dsecd *d, struct dsecd_sb *sb, void *arg)
{
	struct paused_count *c = arg;

	if (!sb->pooled && sb->state == SB_READY && sb->paused && (!c->be || sb->be == c->be))
		c->n++;
}

/* "images": what the node's fs3 store fetched (from where) and served to
 * peers; nil without a store. */
static void pack_images(struct dsecd *d, struct dsec_pk *p)
{
	struct fs3_stats st;

	dsec_pk_str(p, "images");
	if (!d->images) {
		dsec_pk_nil(p);
		return;
	}
	fs3_get_stats(d->images, &st);
	dsec_pk_map_begin(p);
	dsec_pk_kv_u64(p, "fetched_objects", st.src_objects);
	dsec_pk_kv_u64(p, "fetched_bytes", st.src_bytes);
	dsec_pk_kv_u64(p, "served_objects", st.served_objects);
	dsec_pk_kv_u64(p, "served_bytes", st.served_bytes);
	dsec_pk_str(p, "sources");
	dsec_pk_array_begin(p);
	for (size_t i = 0; i < st.nsrc; i++) {
		dsec_pk_map_begin(p);
		dsec_pk_kv_str(p, "name", st.src[i].name);
		dsec_pk_kv_u64(p, "objects", st.src[i].objects);
		dsec_pk_kv_u64(p, "bytes", st.src[i].bytes);
		dsec_pk_end(p);
	}
	dsec_pk_end(p);
	dsec_pk_end(p);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* "creates": counts since start, percentiles of the latest
 * DSECD_CREATE_RING (ms; 0 before any). */
static void pack_creates(struct dsecd *d, struct dsec_pk *p)
{
	size_t n = d->creates_ok < DSECD_CREATE_RING ? (size_t)d->creates_ok : DSECD_CREATE_RING;
	uint32_t v[DSECD_CREATE_RING];

	memcpy(v, d->create_us, n * sizeof(*v));
	qsort(v, n, sizeof(*v), cmp_u32);
	dsec_pk_str(p, "creates");
	dsec_pk_map_begin(p);
	dsec_pk_kv_u64(p, "ok", d->creates_ok);
	dsec_pk_kv_u64(p, "failed", d->creates_failed);
	dsec_pk_kv_double(p, "p50_ms", n ? v[n / 2] / 1e3 : 0);
	dsec_pk_kv_double(p, "p99_ms", n ? v[n * 99 / 100] / 1e3 : 0);
	dsec_pk_end(p);
}

void dsecd_machine_read(double load[3], uint64_t *mem_total, uint64_t *mem_avail)
{
	unsigned long long total = 0, avail = 0;
	char line[256];
	FILE *f;

	load[0] = load[1] = load[2] = 0;
	if ((f = fopen("/proc/loadavg", "re"))) {
		if (fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3)
			load[0] = load[1] = load[2] = 0;
		fclose(f);
	}
	if ((f = fopen("/proc/meminfo", "re"))) {
		while (fgets(line, sizeof(line), f) && (!total || !avail)) {
			sscanf(line, "MemTotal: %llu kB", &total);
			sscanf(line, "MemAvailable: %llu kB", &avail);
		}
		fclose(f);
	}
	*mem_total = total * 1024;
	*mem_avail = avail * 1024;
}

/* What the kernel and the daemon's limits leave for more sandboxes. */
struct node_room {
	uint64_t fds;			/* the daemon's open descriptors */
	uint64_t pid_max, threads_max;	/* kernel.pid_max, kernel.threads-max */
	uint64_t tasks;			/* threads on the host now */
	uint64_t memcgs, memcgs_max;	/* memory cgroups (dying ones too), the kernel's most */
	uint64_t room;			/* idle container sandboxes that still fit */
	const char *by;			/* the limit that sets it */
};

/* The kernel's memory cgroup ids are 16 bits (MEM_CGROUP_ID_MAX). */
#define MEMCG_ID_MAX 65535u
/* What an idle container sandbox takes (dsec-container(7)): one
 * descriptor, one memory cgroup, its init and the init's thread that
 * answers the seccomp filter's refusals and, for a minute after a shell
 * command, its warm shell's template and two waiting children. */
#define ROOM_TASKS_PER_SB 5u
/* Descriptors kept free for requests and helpers. */
#define ROOM_FDS_SPARE 64u

static uint64_t read_u64_file(const char *path)
{
	unsigned long long v = 0;
	FILE *f = fopen(path, "re");

	if (f) {
		if (fscanf(f, "%llu", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

/* Counts the daemon's open descriptors: a walk of /proc/self/fd, which
 * costs in proportion to them, so at most once a second. */
static uint64_t count_fds(void)
{
	static uint64_t last, at;
	uint64_t now = dsec_now_ns(), n = 0;
	struct dirent *de;
	DIR *dir;

	if (at && now - at < 1000000000u)
		return last;
	if (!(dir = opendir("/proc/self/fd")))
		return last;
	while ((de = readdir(dir)))
		n += de->d_name[0] != '.';
	closedir(dir);
	at = now;
	return last = n ? n - 1 : 0;	/* not the walk's own */
}

static void room_set(struct node_room *r, uint64_t fit, const char *by)
{
	if (fit < r->room) {
		r->room = fit;
		r->by = by;
	}
}

static void room_read(struct node_room *r, uint64_t nofile)
{
	unsigned long long running, total;
	char line[256];
	FILE *f;

	memset(r, 0, sizeof(*r));
	r->room = UINT64_MAX;
	r->by = "none";
	r->fds = count_fds();
	r->pid_max = read_u64_file("/proc/sys/kernel/pid_max");
	r->threads_max = read_u64_file("/proc/sys/kernel/threads-max");
	if ((f = fopen("/proc/loadavg", "re"))) {
		if (fscanf(f, "%*f %*f %*f %llu/%llu", &running, &total) == 2)
			r->tasks = total;
		fclose(f);
	}
	if ((f = fopen("/proc/cgroups", "re"))) {
		while (fgets(line, sizeof(line), f)) {
			unsigned long long n;
			int on;

			if (sscanf(line, "memory %*d %llu %d", &n, &on) == 2 && on) {
				r->memcgs = n;
				r->memcgs_max = MEMCG_ID_MAX;
			}
		}
		fclose(f);
	}
	if (nofile != UINT64_MAX)
		room_set(r, nofile > r->fds + ROOM_FDS_SPARE ? nofile - r->fds - ROOM_FDS_SPARE : 0,
			 "descriptors");
	if (r->pid_max && r->tasks) {
		uint64_t most = r->threads_max && r->threads_max < r->pid_max ? r->threads_max
									     : r->pid_max;

		room_set(r, most > r->tasks ? (most - r->tasks) / ROOM_TASKS_PER_SB : 0, "tasks");
	}
	if (r->memcgs_max)
		room_set(r, r->memcgs_max > r->memcgs ? r->memcgs_max - r->memcgs : 0,
			 "memory_cgroups");
	if (r->room == UINT64_MAX)
		r->room = 0;
}

/* "load" (the 1, 5 and 15 minute averages) and "memory" (total and
 * available bytes) of the machine, what an operator compares nodes by. */
static void pack_machine(struct dsec_pk *p)
{
	double l[3];
	uint64_t total, avail;

	dsecd_machine_read(l, &total, &avail);
	dsec_pk_str(p, "load");
	dsec_pk_array_begin(p);
	for (int i = 0; i < 3; i++)
		dsec_pk_double(p, l[i]);
	dsec_pk_end(p);
	dsec_pk_str(p, "memory");
	dsec_pk_map_begin(p);
	dsec_pk_kv_u64(p, "total", total);
	dsec_pk_kv_u64(p, "available", avail);
	dsec_pk_end(p);
	/* The process limits a node full of sandboxes meets. */
	struct rlimit nofile = { 0, 0 }, nproc = { 0, 0 };
	struct node_room room;

	getrlimit(RLIMIT_NOFILE, &nofile);
	getrlimit(RLIMIT_NPROC, &nproc);
	room_read(&room, nofile.rlim_cur == RLIM_INFINITY ? UINT64_MAX : nofile.rlim_cur);
	dsec_pk_str(p, "limits");
	dsec_pk_map_begin(p);
	dsec_pk_kv_u64(p, "nofile", nofile.rlim_cur == RLIM_INFINITY ? 0 : nofile.rlim_cur);
	dsec_pk_kv_u64(p, "nofile_hard", nofile.rlim_max == RLIM_INFINITY ? 0 : nofile.rlim_max);
	dsec_pk_kv_u64(p, "nproc", nproc.rlim_cur == RLIM_INFINITY ? 0 : nproc.rlim_cur);
	dsec_pk_kv_u64(p, "descriptors", room.fds);
	dsec_pk_kv_u64(p, "pid_max", room.pid_max);
	dsec_pk_kv_u64(p, "threads_max", room.threads_max);
	dsec_pk_kv_u64(p, "tasks", room.tasks);
	dsec_pk_kv_u64(p, "memory_cgroups", room.memcgs);
	dsec_pk_kv_u64(p, "memory_cgroups_max", room.memcgs_max);
	dsec_pk_kv_u64(p, "room", room.room);
	dsec_pk_kv_str(p, "room_by", room.by);
	dsec_pk_end(p);
}

void op_drain(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	struct dsec_err err;
	bool drain = true;
	struct dsec_pk p;

	dsec_err_clear(&err);
	if (dsec_get_bool_opt(r->msg.root, "drain", &drain, &err) < 0)
		return reply_err(r, &err);
	if (drain != d->draining)
		log_info("node %s %s", d->conf.node, drain ? "drains: no new sandboxes"
							  : "takes new sandboxes again");
	d->draining = drain;
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	dsec_pk_kv_str(&p, "node", d->conf.node);
	dsec_pk_kv_bool(&p, "draining", d->draining);
	dsec_pk_kv_u64(&p, "sandboxes", d->nsandboxes);
	dsec_pk_end(&p);
	req_complete(r, &p);
}

/* leave: drain, and leave the gossip gracefully (the others see "left"
 * and send no more here); the operator then stops the daemon. */
void op_leave(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	struct dsec_err err;
	struct dsec_pk p;

	dsec_err_clear(&err);
	if (!d->gossip) {
		dsec_err_setc(&err, DSEC_E_UNSUPPORTED, ENOTSUP, "node '%s' does not gossip "
			      "(gossip_listen): there is no cluster to leave", d->conf.node);
		return reply_err(r, &err);
	}
	if (!d->draining)
		log_info("node %s leaves the cluster: drains, and tells the others", d->conf.node);
	d->draining = true;
	dsecd_gossip_leave(d);
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	dsec_pk_kv_str(&p, "node", d->conf.node);
	dsec_pk_kv_bool(&p, "left", true);
	dsec_pk_kv_u64(&p, "sandboxes", d->nsandboxes);
	dsec_pk_end(&p);
	req_complete(r, &p);
}

void op_info(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	struct dsec_err err;
	struct dsec_pk p;

	dsec_err_clear(&err);
	if (dsec_has(r->msg.root, "id")) {
		if (get_sandbox(r, &err) < 0 && err.code != DSEC_E_INVALID &&
		    err.code != DSEC_E_SANDBOX_LOST)
			return reply_err(r, &err);
		if (!r->sb) {
			/* A sandbox being created, or lost, is still worth
			 * describing. */
			_cleanup_free_ char *id = NULL;
			dsec_get_str(r->msg.root, "id", &id, NULL);
			struct dsecd_sb *sb = id ? dsecd_sb_find(d, id, &err) : NULL;
			if (!sb)
				return reply_err(r, &err);
			dsecd_sb_ref(sb);
			r->sb = sb;
		}
		dsec_pk_init(&p);
		dsec_pk_reply_begin(&p);
		pack_sandbox(d, &p, r->sb, true);
		dsec_pk_end(&p);
		return req_complete(r, &p);
	}
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	dsec_pk_kv_str(&p, "version", DSEC_VERSION);
	dsec_pk_kv_str(&p, "node", d->conf.node);
	dsec_pk_kv_u64(&p, "proto", DSEC_PROTO_VERSION);
	dsec_pk_kv_u64(&p, "pid", (uint64_t)getpid());
	dsec_pk_kv_double(&p, "uptime", ev_now(d->loop) - d->started);
	dsec_pk_kv_u64(&p, "sandboxes", d->nsandboxes);
	{
		struct paused_count all = { NULL, 0 };

		dsecd_sb_foreach(d, count_paused, &all);
		dsec_pk_kv_u64(&p, "paused", all.n);
	}
	dsec_pk_kv_u64(&p, "max_sandboxes", d->conf.max_sandboxes);
	dsec_pk_kv_bool(&p, "draining", d->draining);
	dsec_pk_kv_u64(&p, "inflight", dsecd_server_inflight(d->server));
	pack_creates(d, &p);
	pack_machine(&p);
	dsec_pk_kv_strv(&p, "listen", (const char *const *)d->conf.listen);
	dsecd_warm_pack(d, &p);
	pack_images(d, &p);
	dsecd_cluster_pack(d, &p);
	rlc_pack_node(d, &p);
	dsec_pk_str(&p, "backends");
	dsec_pk_array_begin(&p);
	for (struct dsecd_backend *b = d->backends; b; b = b->next) {
		struct paused_count pc = { b, 0 };
		struct dsec_be_stats st;
		memset(&st, 0, sizeof(st));
		b->ops->stats(b->be, &st);
		dsecd_sb_foreach(d, count_paused, &pc);
		dsec_pk_map_begin(&p);
		dsec_pk_kv_str(&p, "name", b->name);
		dsec_pk_kv_str(&p, "description", b->ops->description ? b->ops->description : "");
		dsec_pk_kv_u64(&p, "sandboxes", b->sandboxes);
		dsec_pk_kv_u64(&p, "paused", pc.n);
		dsec_pk_kv_u64(&p, "capacity", st.capacity);
		dsec_pk_kv_u64(&p, "running", st.running);
		dsec_pk_kv_u64(&p, "pool_ready", st.pool_ready);
		dsec_pk_kv_u64(&p, "pool_target", st.pool_target);
		dsec_pk_kv_u64(&p, "calls", st.calls);
		dsec_pk_end(&p);
	}
	dsec_pk_end(&p);
	dsec_pk_end(&p);
	req_complete(r, &p);
}

struct list_arg {
	char **labels;			/* "K=V" a sandbox must all have, or NULL */
	struct dsecd_sb **hits;		/* the sandboxes that match */
	size_t n;			/* how many */
};

static bool has_labels(const struct dsecd_sb *sb, char *const *want)
{
	for (; want && *want; want++) {
		bool found = false;
		for (char **l = sb->labels; l && *l && !found; l++)
			found = !strcmp(*l, *want);
		if (!found)
			return false;
	}
	return true;
}

static void list_one(struct dsecd *d, struct dsecd_sb *sb, void *arg)
{
	struct list_arg *a = arg;

	(void)d;
	if (sb->pooled || !has_labels(sb, a->labels))
		return;
	dsecd_sb_ref(sb);
	a->hits[a->n++] = sb;
}

static int by_id(const void *x, const void *y)
{
	return strcmp((*(struct dsecd_sb *const *)x)->id, (*(struct dsecd_sb *const *)y)->id);
}

/* list: the matching sandboxes in the order of their ids (a node's ids
 * grow with each create), a page of `limit` of them after the id `after`,
 * and `next`, the id to ask after for the next page, while there is one. */
void op_list(struct dsecd_req *r)
{
	struct dsec_pk p;
	struct dsec_err err;
	struct list_arg a = { NULL, NULL, 0 };
	_cleanup_free_ char *after = NULL;
	uint64_t limit = 0;
	size_t first = 0, end;

	dsec_err_clear(&err);
	if (dsecd_labels_get(r->msg.root, &a.labels, &err) < 0 ||
	    dsec_get_u64_opt(r->msg.root, "limit", &limit, &err) < 0 ||
	    dsec_get_str_opt(r->msg.root, "after", &after, &err) < 0) {
		dsec_strv_free(a.labels);
		return reply_err(r, &err);
	}
	a.hits = xcalloc(r->d->nsandboxes + 1, sizeof(*a.hits));
	dsecd_sb_foreach(r->d, list_one, &a);
	dsec_strv_free(a.labels);
	qsort(a.hits, a.n, sizeof(*a.hits), by_id);
	while (after && first < a.n && strcmp(a.hits[first]->id, after) <= 0)
		first++;
	end = limit && limit < a.n - first ? first + limit : a.n;
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	dsec_pk_str(&p, "sandboxes");
	dsec_pk_array_begin(&p);
	for (size_t i = first; i < end; i++) {
		dsec_pk_map_begin(&p);
		pack_sandbox(r->d, &p, a.hits[i], false);
		dsec_pk_end(&p);
	}
	dsec_pk_end(&p);
	dsec_pk_kv_u64(&p, "total", a.n);
	if (end < a.n)
		dsec_pk_kv_str(&p, "next", a.hits[end - 1]->id);
	dsec_pk_end(&p);
	for (size_t i = 0; i < a.n; i++)
		dsecd_sb_unref(r->d, a.hits[i]);
	free(a.hits);
	req_complete(r, &p);
}
