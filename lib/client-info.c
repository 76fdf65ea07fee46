/* client-info.c - libdsec: info on the node and its sandboxes, and list.
 *
 * Every field of info's reply has its place in struct dsec_node_info (and
 * of a sandbox's in struct dsec_sandbox_info), so that a C program sees what
 * dsec-protocol(7) documents.  Of the result only what identifies it is
 * required; everything else may be absent (a daemon of another version, a
 * node without an fs3 store, gossip or trajectory logs) and reads as 0 or
 * "", and a field of the wrong type fails the call (dcl_reply_done).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "client-int.h"
#include "dsec.h"
#include "proto.h"

/* The map at key of m, or NULL when absent; of another type it marks the
 * reply bad. */
static const msgpack_object *get_map(struct reply *r, const msgpack_object *m, const char *key)
{
	const msgpack_object *o = dsec_map_get(m, key);

	if (!o || o->type == MSGPACK_OBJECT_NIL)
		return NULL;
	if (o->type != MSGPACK_OBJECT_MAP) {
		dcl_mark_bad(r, -EPROTO, key);
		return NULL;
	}
	return o;
}

/* The list of strings at key, NULL-terminated and never NULL. */
static char **get_strv(struct reply *r, const msgpack_object *m, const char *key, size_t *n)
{
	char **v = NULL;
	int rc = dsec_get_strv(m, key, &v, NULL);

	dcl_mark_bad(r, rc, key);
	if (rc < 0)
		v = xcalloc(1, sizeof(*v));
	if (n)
		*n = dsec_strv_len((const char *const *)v);
	return v;
}

/* Counters of one map read into the uint64_t fields of a struct at base:
 * the tables below name each field's key and offset. */
struct u64_field {
	const char *key;
	size_t off;
};

#define U64F(type, field) { #field, offsetof(type, field) }

static void get_u64s(struct reply *r, const msgpack_object *m, void *base,
		     const struct u64_field *f, size_t n)
{
	for (size_t i = 0; i < n; i++)
		*(uint64_t *)((char *)base + f[i].off) = dcl_get_u64_or(r, m, f[i].key, 0);
}

static const struct u64_field limit_fields[] = {
	U64F(struct dsec_node_limits, nofile),
	U64F(struct dsec_node_limits, nofile_hard),
	U64F(struct dsec_node_limits, nproc),
	U64F(struct dsec_node_limits, descriptors),
	U64F(struct dsec_node_limits, pid_max),
	U64F(struct dsec_node_limits, threads_max),
	U64F(struct dsec_node_limits, tasks),
	U64F(struct dsec_node_limits, memory_cgroups),
	U64F(struct dsec_node_limits, memory_cgroups_max),
	U64F(struct dsec_node_limits, room),
};

static const struct u64_field gossip_fields[] = {
	{ "members", offsetof(struct dsec_cluster_info, gossip_members) },
	{ "awareness", offsetof(struct dsec_cluster_info, gossip_awareness) },
	U64F(struct dsec_cluster_info, packets_sent),
	U64F(struct dsec_cluster_info, bytes_sent),
	U64F(struct dsec_cluster_info, packets_received),
	U64F(struct dsec_cluster_info, dropped_unauthenticated),
	U64F(struct dsec_cluster_info, dropped_malformed),
	U64F(struct dsec_cluster_info, suspicions),
	U64F(struct dsec_cluster_info, deaths),
};

static const struct u64_field traj_fields[] = {
	U64F(struct dsec_node_traj, replicated),
	U64F(struct dsec_node_traj, under_replicated),
	U64F(struct dsec_node_traj, replica_entries),
	U64F(struct dsec_node_traj, checkpoints),
	U64F(struct dsec_node_traj, entries),
	U64F(struct dsec_node_traj, bytes),
	U64F(struct dsec_node_traj, batches),
	U64F(struct dsec_node_traj, syncs),
	U64F(struct dsec_node_traj, replayed),
	U64F(struct dsec_node_traj, joined),
	U64F(struct dsec_node_traj, diverged),
	U64F(struct dsec_node_traj, failed),
	U64F(struct dsec_node_traj, removed),
};

static const struct u64_field lease_fields[] = {
	{ "open", offsetof(struct dsec_node_traj, leases_open) },
	{ "lapsed", offsetof(struct dsec_node_traj, leases_lapsed) },
	{ "expired", offsetof(struct dsec_node_traj, leases_expired) },
};

static uint32_t get_u32(struct reply *r, const msgpack_object *m, const char *key)
{
	uint64_t v = dcl_get_u64_or(r, m, key, 0);

	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* A sandbox as info and list describe it: id, backend and state are
 * always there. */
static int unpack_sandbox(struct reply *r, const char *op, const msgpack_object *m,
			  struct dsec_sandbox_info *s, struct dsec_err *err)
{
	const msgpack_object *t;
	int rc;

	if (dsec_get_text(m, "id", CLIENT_RECV_MAX, &s->id, NULL) < 0)
		return dcl_no_field(r, op, "id", err);
	if (dsec_get_text(m, "backend", CLIENT_RECV_MAX, &s->backend, NULL) < 0)
		return dcl_no_field(r, op, "backend", err);
	if (dsec_get_text(m, "state", CLIENT_RECV_MAX, &s->state, NULL) < 0)
		return dcl_no_field(r, op, "state", err);
	s->runtime = dcl_get_str_or(r, m, "runtime", "");
	s->image = dcl_get_str_or(r, m, "image", "");
	s->created = dcl_get_double_or(r, m, "created", 0);
	s->ttl = dcl_get_double_or(r, m, "ttl", 0);
	s->idle_ttl = dcl_get_double_or(r, m, "idle_ttl", 0);
	s->idle = dcl_get_double_or(r, m, "idle", 0);
	s->execs = dcl_get_u64_or(r, m, "execs", 0);
	s->running = get_u32(r, m, "running");
	s->streams = get_u32(r, m, "streams");
	rc = dsec_get_env(m, "labels", &s->labels, NULL);
	dcl_mark_bad(r, rc, "labels");
	if (rc < 0)
		s->labels = xcalloc(1, sizeof(*s->labels));
	s->marks.struct_size = sizeof(s->marks);
	if (dsec_has(m, "misbehaviour") && (rc = dcl_unpack_marks(r, op, m, &s->marks, err)) < 0)
		return rc;
	if ((t = get_map(r, m, "trajectory"))) {
		s->trajectory.present = true;
		s->trajectory.entries = dcl_get_u64_or(r, t, "entries", 0);
		s->trajectory.steps = dcl_get_u64_or(r, t, "steps", 0);
		s->trajectory.last_step = dcl_get_u64_or(r, t, "last_step", 0);
		s->trajectory.bytes = dcl_get_u64_or(r, t, "bytes", 0);
		dcl_get_bool_or(r, t, "writable", &s->trajectory.writable);
	}
	return 0;
}

static int unpack_backends(struct reply *r, const msgpack_object *b, size_t nb,
			   struct dsec_node_info *out, struct dsec_err *err)
{
	if (!nb)
		return 0;
	out->backends = xcalloc(nb, sizeof(*out->backends));
	for (size_t i = 0; i < nb; i++) {
		const msgpack_object *e = &b[i];
		struct dsec_backend_info *bi = &out->backends[i];
		struct dsec_backend_stats *st = &bi->stats;

		if (dsec_get_text(e, "name", CLIENT_RECV_MAX, &bi->name, NULL) < 0)
			return dcl_no_field(r, "info", "name", err);
		out->nbackends = i + 1;
		bi->description = dcl_get_str_or(r, e, "description", "");
		st->sandboxes = get_u32(r, e, "sandboxes");
		st->capacity = get_u32(r, e, "capacity");
		st->running = get_u32(r, e, "running");
		st->pool_ready = get_u32(r, e, "pool_ready");
		st->pool_target = get_u32(r, e, "pool_target");
		st->calls = dcl_get_u64_or(r, e, "calls", 0);
		bi->paused = get_u32(r, e, "paused");
	}
	return 0;
}

static void unpack_machine(struct reply *r, const msgpack_object *m, struct dsec_node_info *out)
{
	const msgpack_object *o = dsec_map_get(m, "load");

	if (o && o->type == MSGPACK_OBJECT_ARRAY) {
		for (uint32_t i = 0; i < o->via.array.size && i < 3; i++) {
			const msgpack_object *v = &o->via.array.ptr[i];
			if (v->type == MSGPACK_OBJECT_FLOAT64 || v->type == MSGPACK_OBJECT_FLOAT32)
				out->load[i] = v->via.f64;
			else if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
				out->load[i] = (double)v->via.u64;
			else
				dcl_mark_bad(r, -EPROTO, "load");
		}
	} else if (o && o->type != MSGPACK_OBJECT_NIL) {
		dcl_mark_bad(r, -EPROTO, "load");
	}
	if ((o = get_map(r, m, "memory"))) {
		out->mem_total = dcl_get_u64_or(r, o, "total", 0);
		out->mem_available = dcl_get_u64_or(r, o, "available", 0);
	}
	if ((o = get_map(r, m, "creates"))) {
		out->creates.ok = dcl_get_u64_or(r, o, "ok", 0);
		out->creates.failed = dcl_get_u64_or(r, o, "failed", 0);
		out->creates.p50_ms = dcl_get_double_or(r, o, "p50_ms", 0);
		out->creates.p99_ms = dcl_get_double_or(r, o, "p99_ms", 0);
	}
	struct dsec_node_limits *l = &out->limits;

	o = get_map(r, m, "limits");
	get_u64s(r, o, l, limit_fields, DSEC_ARRAY_LEN(limit_fields));
	l->room_by = dcl_get_str_or(r, o, "room_by", "");
}

static int unpack_pools(struct reply *r, const msgpack_object *m, struct dsec_node_info *out,
			struct dsec_err *err)
{
	const msgpack_object *a;
	size_t n;
	int rc;

	if ((rc = dcl_get_list(r, "info", m, "pools", false, 16, &a, &n, err)) < 0 || !n)
		return rc;
	out->pools = xcalloc(n, sizeof(*out->pools));
	out->npools = n;
	for (size_t i = 0; i < n; i++) {
		struct dsec_pool_info *w = &out->pools[i];

		w->backend = dcl_get_str_or(r, &a[i], "backend", "");
		w->image = dcl_get_str_or(r, &a[i], "image", "");
		w->target = get_u32(r, &a[i], "target");
		w->ready = get_u32(r, &a[i], "ready");
		w->creating = get_u32(r, &a[i], "creating");
		w->taken = dcl_get_u64_or(r, &a[i], "taken", 0);
	}
	return 0;
}

static int unpack_images(struct reply *r, const msgpack_object *m, struct dsec_image_stats *im,
			 struct dsec_err *err)
{
	const msgpack_object *o = get_map(r, m, "images"), *a;
	size_t n;
	int rc;

	if (!o)
		return 0;
	im->present = true;
	im->fetched_objects = dcl_get_u64_or(r, o, "fetched_objects", 0);
	im->fetched_bytes = dcl_get_u64_or(r, o, "fetched_bytes", 0);
	im->served_objects = dcl_get_u64_or(r, o, "served_objects", 0);
	im->served_bytes = dcl_get_u64_or(r, o, "served_bytes", 0);
	if ((rc = dcl_get_list(r, "info", o, "sources", false, 8, &a, &n, err)) < 0 || !n)
		return rc;
	im->sources = xcalloc(n, sizeof(*im->sources));
	im->nsources = n;
	for (size_t i = 0; i < n; i++) {
		im->sources[i].name = dcl_get_str_or(r, &a[i], "name", "");
		im->sources[i].objects = dcl_get_u64_or(r, &a[i], "objects", 0);
		im->sources[i].bytes = dcl_get_u64_or(r, &a[i], "bytes", 0);
	}
	return 0;
}

static void unpack_member(struct reply *r, const msgpack_object *e, struct dsec_member_info *mi)
{
	const msgpack_object *cap = get_map(r, e, "capacity");

	mi->url = dcl_get_str_or(r, e, "url", "");
	mi->state = dcl_get_str_or(r, e, "state", "");
	mi->forwarded = dcl_get_u64_or(r, e, "forwarded", 0);
	mi->failed = dcl_get_u64_or(r, e, "failed", 0);
	mi->placed = dcl_get_u64_or(r, e, "placed", 0);
	mi->refused = dcl_get_u64_or(r, e, "refused", 0);
	if (!cap) {
		mi->images = xcalloc(1, sizeof(*mi->images));
		return;
	}
	mi->has_capacity = true;
	mi->version = dcl_get_u64_or(r, cap, "version", 0);
	mi->age_s = dcl_get_double_or(r, cap, "age_s", 0);
	dcl_get_bool_or(r, cap, "draining", &mi->draining);
	mi->sandboxes = get_u32(r, cap, "sandboxes");
	mi->max = get_u32(r, cap, "max");
	mi->creating = get_u32(r, cap, "creating");
	mi->mem_free = dcl_get_u64_or(r, cap, "mem_free", 0);
	mi->load_permille = get_u32(r, cap, "load_permille");
	mi->in_flight = get_u32(r, cap, "in_flight");
	mi->images = get_strv(r, cap, "images", &mi->nimages);
}

static int unpack_cluster(struct reply *r, const msgpack_object *m, struct dsec_cluster_info *cl,
			  struct dsec_err *err)
{
	const msgpack_object *o = get_map(r, m, "cluster"), *a, *g;
	size_t n;
	int rc;

	cl->membership = dcl_get_str_or(r, o, "membership", "none");
	if ((g = get_map(r, o, "placement"))) {
		cl->placement = dcl_get_str_or(r, g, "policy", "local");
		cl->placement_k = get_u32(r, g, "k");
		cl->placed_here = dcl_get_u64_or(r, g, "here", 0);
		cl->placed_away = dcl_get_u64_or(r, g, "away", 0);
		cl->placed_again = dcl_get_u64_or(r, g, "again", 0);
		cl->placed_none = dcl_get_u64_or(r, g, "no_room", 0);
	} else {
		cl->placement = xstrdup("local");
	}
	if ((g = get_map(r, o, "gossip"))) {
		cl->has_gossip = true;
		cl->gossip_address = dcl_get_str_or(r, g, "address", "");
		cl->gossip_api = dcl_get_str_or(r, g, "api", "");
		get_u64s(r, g, cl, gossip_fields, DSEC_ARRAY_LEN(gossip_fields));
	} else {
		cl->gossip_address = xstrdup("");
		cl->gossip_api = xstrdup("");
	}
	if ((rc = dcl_get_list(r, "info", o, "members", false, 16, &a, &n, err)) < 0 || !n)
		return rc;
	cl->members = xcalloc(n, sizeof(*cl->members));
	for (size_t i = 0; i < n; i++) {
		if (dsec_get_text(&a[i], "name", CLIENT_RECV_MAX, &cl->members[i].name, NULL) < 0)
			return dcl_no_field(r, "info", "name", err);
		cl->nmembers = i + 1;
		unpack_member(r, &a[i], &cl->members[i]);
	}
	return 0;
}

static void unpack_traj(struct reply *r, const msgpack_object *m, struct dsec_node_traj *t)
{
	const msgpack_object *o = get_map(r, m, "trajectory"), *l = get_map(r, m, "leases");

	t->present = o != NULL;
	t->dir = dcl_get_str_or(r, o, "dir", "");
	t->durability = dcl_get_str_or(r, o, "durability", "");
	t->replicas = get_u32(r, o, "replicas");
	get_u64s(r, o, t, traj_fields, DSEC_ARRAY_LEN(traj_fields));
	t->batch_ms = dcl_get_double_or(r, o, "batch_ms", 0);
	t->sync_ms = dcl_get_double_or(r, o, "sync_ms", 0);
	t->keep = dcl_get_double_or(r, o, "keep", 0);
	get_u64s(r, l, t, lease_fields, DSEC_ARRAY_LEN(lease_fields));
}

int dsec_info(struct dsec_client *c, struct dsec_node_info *out, struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	memset(out, 0, sizeof(*out));
	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "info");
	rc = dcl_roundtrip_list(c, &p, &r, err);
	if (rc == 0) {
		const msgpack_object *m = r.result, *b;
		size_t nb;

		/* The list's bound first: a reply of empty entries costs nothing. */
		if ((rc = dcl_get_list(&r, "info", m, "backends", false, 32, &b, &nb, err)) < 0 ||
		    (rc = dcl_get_str_need(&r, "info", "version", &out->version, err)) < 0 ||
		    (rc = dcl_get_str_need(&r, "info", "node", &out->node, err)) < 0)
			goto done;
		out->proto = get_u32(&r, m, "proto");
		out->pid = (int32_t)get_u32(&r, m, "pid");
		out->uptime = dcl_get_double_or(&r, m, "uptime", 0);
		out->sandboxes = get_u32(&r, m, "sandboxes");
		out->inflight = get_u32(&r, m, "inflight");
		out->paused = get_u32(&r, m, "paused");
		out->max_sandboxes = get_u32(&r, m, "max_sandboxes");
		dcl_get_bool_or(&r, m, "draining", &out->draining);
		unpack_machine(&r, m, out);
		out->listen = get_strv(&r, m, "listen", NULL);
		unpack_traj(&r, m, &out->trajectory);
		if ((rc = unpack_backends(&r, b, nb, out, err)) < 0 ||
		    (rc = unpack_pools(&r, m, out, err)) < 0 ||
		    (rc = unpack_images(&r, m, &out->images, err)) < 0 ||
		    (rc = unpack_cluster(&r, m, &out->cluster, err)) < 0)
			goto done;
done:
		if ((rc = dcl_reply_done(&r, "info", rc, err)) < 0)
			dsec_node_info_free(out);	/* the caller frees only what succeeded */
	}
	dcl_reply_free(&r);
	return rc;
}

int dsec_sandbox_info(struct dsec_client *c, const char *id, struct dsec_sandbox_info *out,
		      struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	memset(out, 0, sizeof(*out));
	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "info");
	dsec_pk_kv_str(&p, "id", id);
	rc = dcl_roundtrip_list(c, &p, &r, err);
	if (rc == 0) {
		const msgpack_object *a;
		size_t ns;

		if ((rc = unpack_sandbox(&r, "info", r.result, out, err)) == 0 &&
		    (rc = dcl_get_list(&r, "info", r.result, "sessions", false, 16, &a, &ns,
				       err)) == 0 &&
		    ns) {
			out->sessions = xcalloc(ns, sizeof(*out->sessions));
			for (size_t i = 0; i < ns; i++) {
				const msgpack_object *e = &a[i];
				struct dsec_session_desc *si = &out->sessions[i];
				char *name = NULL;

				if (dsec_get_text(e, "name", CLIENT_RECV_MAX, &name, NULL) < 0) {
					rc = dcl_no_field(&r, "info", "name", err);
					break;
				}
				out->nsessions = i + 1;
				si->name = name;
				si->shell = dcl_get_str_or(&r, e, "shell", "");
				si->cwd = dcl_get_str_or(&r, e, "cwd", "");
				dcl_get_bool_or(&r, e, "running", &si->running);
				si->commands = dcl_get_u64_or(&r, e, "commands", 0);
			}
		}
		if ((rc = dcl_reply_done(&r, "info", rc, err)) < 0)
			dsec_sandbox_info_free(out);
	}
	dcl_reply_free(&r);
	return rc;
}

int dsec_list_page(struct dsec_client *c, const struct dsec_list_opts *o,
		   struct dsec_sandbox_info **out, size_t *n, char **next, uint64_t *total,
		   struct dsec_err *err)
{
	struct dsec_pk p;
	struct reply r;
	int rc;

	*out = NULL;
	*n = 0;
	if (next)
		*next = NULL;
	if (total)
		*total = 0;
	if (o && o->struct_size < offsetof(struct dsec_list_opts, after) + sizeof(o->after))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "dsec_list_opts.struct_size is not set");
	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "list");
	if (o && o->labels)
		dsec_pk_kv_env(&p, "labels", o->labels);
	if (o && o->limit)
		dsec_pk_kv_u64(&p, "limit", o->limit);
	if (o && o->after)
		dsec_pk_kv_str(&p, "after", o->after);
	rc = dcl_roundtrip_list(c, &p, &r, err);
	if (rc == 0) {
		const msgpack_object *a;
		size_t na = 0;

		if ((rc = dcl_get_list(&r, "list", r.result, "sandboxes", true, 64, &a, &na,
				       err)) == 0) {
			*out = xcalloc(na ? na : 1, sizeof(**out));
			for (size_t i = 0; i < na && rc == 0; i++) {
				*n = i + 1;
				rc = unpack_sandbox(&r, "list", &a[i], &(*out)[i], err);
			}
		}
		if (rc == 0 && total)
			*total = dcl_get_u64_or(&r, r.result, "total", na);
		if (rc == 0 && next && dsec_has(r.result, "next"))
			*next = dcl_get_str_or(&r, r.result, "next", "");
		if ((rc = dcl_reply_done(&r, "list", rc, err)) < 0) {
			/* the caller frees only what succeeded */
			dsec_sandbox_list_free(*out, *n);
			*out = NULL;
			*n = 0;
			if (next) {
				free(*next);
				*next = NULL;
			}
		}
	}
	dcl_reply_free(&r);
	return rc;
}

int dsec_list(struct dsec_client *c, struct dsec_sandbox_info **out, size_t *n,
	      struct dsec_err *err)
{
	return dsec_list_page(c, NULL, out, n, NULL, NULL, err);
}

void dsec_sandbox_info_free(struct dsec_sandbox_info *s)
{
	free(s->id);
	free(s->backend);
	free(s->runtime);
	free(s->image);
	free(s->state);
	for (size_t i = 0; i < s->nsessions; i++) {
		free((char *)s->sessions[i].name);
		free((char *)s->sessions[i].shell);
		free((char *)s->sessions[i].cwd);
	}
	free(s->sessions);
	dsec_strv_free(s->labels);
	memset(s, 0, sizeof(*s));
}

void dsec_sandbox_list_free(struct dsec_sandbox_info *arr, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dsec_sandbox_info_free(&arr[i]);
	free(arr);
}

void dsec_node_info_free(struct dsec_node_info *info)
{
	struct dsec_cluster_info *cl = &info->cluster;

	free(info->version);
	free(info->node);
	for (size_t i = 0; i < info->nbackends; i++) {
		free(info->backends[i].name);
		free(info->backends[i].description);
	}
	free(info->backends);
	free(info->limits.room_by);
	dsec_strv_free(info->listen);
	for (size_t i = 0; i < info->npools; i++) {
		free(info->pools[i].backend);
		free(info->pools[i].image);
	}
	free(info->pools);
	for (size_t i = 0; i < info->images.nsources; i++)
		free(info->images.sources[i].name);
	free(info->images.sources);
	free(cl->membership);
	for (size_t i = 0; i < cl->nmembers; i++) {
		free(cl->members[i].name);
		free(cl->members[i].url);
		free(cl->members[i].state);
		dsec_strv_free(cl->members[i].images);
	}
	free(cl->members);
	free(cl->placement);
	free(cl->gossip_address);
	free(cl->gossip_api);
	free(info->trajectory.dir);
	free(info->trajectory.durability);
	memset(info, 0, sizeof(*info));
}
