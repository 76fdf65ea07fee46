/* placing.c - where a create or a call runs: placement over the capacity
 * gossip carries, forwarding to the node chosen, placing again when it
 * refuses.
 *
 * Each node's capacity travels as its gossip metadata: gossip.c packs this
 * node's (dsecd_cap_self, dsecd_cap_pack) when it changed, at most once a
 * second, and every member's is parsed here (dsecd_cap_parse) as it comes.
 * route() (ops.c) hands a create or a call to dsecd_place.  With members
 * whose capacity gossip told and placement not "local", the view is this
 * node's own figures, fresh, and each member's last gossiped ones;
 * place_choose (place.c: filter by health, drain, backend and room, then
 * the least loaded of k sampled, counting this node's placements still in
 * flight) names a node.  This node serves it as usual; another gets the
 * frame with "fwd" added, so that it serves it and never places it again,
 * through cluster.c's forwarding, and its reply goes to the client as it
 * came.
 *
 * A target that refuses (capacity: full or draining; shutting_down;
 * no_backend) made nothing: the request is placed again with that node
 * excluded, up to max_attempts targets (3), then answered "capacity" with
 * the cluster's free capacity, in the message and as "cluster" in the
 * error map, so that the client backs off (the design's no_capacity is
 * this code: one code for "no room", whoever ran out).  A target that does
 * not answer in time is not tried again: it may have made the sandbox, and
 * a second one would leak; the client gets unavailable.  A create's reply
 * names "capacity_version", the first version of the target's gossiped
 * capacity that counts it, so the create stays counted in flight until
 * this node's view shows that version.
 *
 * The metadata is a msgpack map (at most SWIM_META_MAX bytes; unknown
 * keys are ignored, so a newer node may add some):
 *   v          1
 *   api        the API address others reach the node at
 *   cv         the capacity version
 *   draining   bool
 *   sandboxes, max, calls, creating, creates   counts (struct dsecd_cap)
 *   mem_total, mem_free, disk_free             bytes
 *   load, ncpu  1-minute load per core per mille; cores
 *   backends   {NAME: [sandboxes, room]}
 *   images     [REF...]: images local there (its sandboxes', then those
 *              it had in the last half hour), each cut to 48 bytes; a
 *              create naming one prefers the nodes that have it
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "daemon.h"
#include "dsec.h"
#include "log.h"
#include "ops.h"
#include "place.h"
#include "proto.h"
#include "swim.h"

#define META_V 1
/* Images tracked for locality, and how long one no sandbox uses is still
 * named (its chunks are likely cached yet). */
#define IMG_TRACK 32
#define IMG_LINGER 1800.0

struct dsecd_img_use {
	char ref[DSECD_CAP_IMAGE];	/* as creates name it, cut */
	uint32_t n;			/* sandboxes of it now */
	double last;			/* loop time it was last in use */
};

/* A request placement took: what it asked and where it was tried. */
struct dsecd_placing {
	struct place_req req;		/* backend, image, memory, disk */
	char backend[DSECD_CAP_NAME];	/* req.backend's bytes */
	char image[DSECD_CAP_IMAGE];	/* req.image's (cut as capacities name images) */
	struct place_try t;		/* targets tried */
	char target[PLACE_NAME_MAX];	/* the one it is forwarded to now */
	double started;			/* loop time placement took it */
};

_Static_assert(DSECD_CAP_BACKENDS == PLACE_BACKENDS_MAX, "one bound");

int dsecd_place_open(struct dsecd *d, struct dsec_err *err)
{
	struct place_conf c;
	int rc;

	dsecd_sys_sample(d);
	if (!d->conf.gossip_listen || !d->conf.placement || !strcmp(d->conf.placement, "local"))
		return 0;
	place_conf_default(&c);
	if (place_policy_parse(d->conf.placement, &c.policy) < 0)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "placement '%s' is unknown",
				     d->conf.placement);
	c.k = d->conf.placement_k ? (unsigned)d->conf.placement_k : 2;
	if (d->conf.placement_k > 64)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "placement_k %llu is over 64",
				     (unsigned long long)d->conf.placement_k);
	uint64_t seed = dsec_fnv1a(dsec_now_ns() ^ ((uint64_t)getpid() << 32), d->conf.node,
				   strlen(d->conf.node));
	if ((rc = place_new(&d->placer, &c, seed | 1)) < 0)
		return dsec_err_setc(err, DSEC_E_INVALID, -rc, "placement settings refused");
	return 0;
}

void dsecd_place_close(struct dsecd *d)
{
	place_free(d->placer);
	d->placer = NULL;
	free(d->img_use);
	d->img_use = NULL;
	d->nimg_use = 0;
}

void dsecd_image_use(struct dsecd *d, const char *ref, int delta)
{
	char cut[DSECD_CAP_IMAGE];
	struct dsecd_img_use *u = NULL, *victim = NULL;
	double now = ev_now(d->loop);

	if (!ref || !*ref)
		return;
	snprintf(cut, sizeof(cut), "%s", ref);
	for (size_t i = 0; i < d->nimg_use; i++) {
		if (!strcmp(d->img_use[i].ref, cut)) {
			u = &d->img_use[i];
			break;
		}
		if (!d->img_use[i].n && (!victim || d->img_use[i].last < victim->last))
			victim = &d->img_use[i];
	}
	if (!u && delta < 0)
		return;
	if (!u) {
		if (d->nimg_use < IMG_TRACK) {
			if (!d->img_use)
				d->img_use = xcalloc(IMG_TRACK, sizeof(*d->img_use));
			u = &d->img_use[d->nimg_use++];
		} else if (!(u = victim)) {
			return;	/* IMG_TRACK images all in use: this one is not named */
		}
		memset(u, 0, sizeof(*u));
		strcpy(u->ref, cut);
	}
	if (delta > 0)
		u->n++;
	else if (u->n)
		u->n--;
	u->last = now;
}

/* Whether a should be named before b. */
static bool img_before(const struct dsecd_img_use *a, const struct dsecd_img_use *b)
{
	if ((a->n > 0) != (b->n > 0))
		return a->n > 0;
	return a->n != b->n ? a->n > b->n : a->last > b->last;
}

/* The images c names: in use first (most sandboxes first), then those
 * used in the last IMG_LINGER, the latest first. */
static void cap_images(struct dsecd *d, struct dsecd_cap *c)
{
	const struct dsecd_img_use *pick[DSECD_CAP_IMAGES];
	double now = ev_now(d->loop);
	unsigned n = 0;

	for (size_t i = 0; i < d->nimg_use; i++) {
		const struct dsecd_img_use *u = &d->img_use[i];
		if (!u->n && now - u->last > IMG_LINGER)
			continue;
		unsigned at = n < DSECD_CAP_IMAGES ? n++ : DSECD_CAP_IMAGES;
		while (at > 0 && img_before(u, pick[at - 1])) {
			if (at < DSECD_CAP_IMAGES)
				pick[at] = pick[at - 1];
			at--;
		}
		if (at < DSECD_CAP_IMAGES)
			pick[at] = u;
	}
	for (unsigned i = 0; i < n; i++)
		strcpy(c->images[i], pick[i]->ref);
	c->nimages = n;
}

void dsecd_sys_sample(struct dsecd *d)
{
	struct dsecd_sys *s = &d->sys;
	uint64_t avail;
	double load[3];
	struct statvfs vfs;

	long n = sysconf(_SC_NPROCESSORS_ONLN);
	s->ncpu = n > 0 ? (uint32_t)n : 1;
	dsecd_machine_read(load, &s->mem_total, &avail);
	/* Rounded: an idle node's figures then stay as they are, and its
	 * capacity is not gossiped again for noise. */
	double pm = load[0] / s->ncpu * 1000;
	s->load = pm >= 1000 ? 1000 : (uint32_t)(pm / 50) * 50;	/* 5 % steps */
	s->disk_free = 0;
	if (d->conf.state_dir && statvfs(d->conf.state_dir, &vfs) == 0)
		s->disk_free = (uint64_t)vfs.f_bavail * vfs.f_frsize >> 30 << 30;	/* GiB */
}

void dsecd_cap_self(struct dsecd *d, struct dsecd_cap *c)
{
	memset(c, 0, sizeof(*c));
	c->known = true;
	c->draining = d->draining;
	c->sandboxes = d->nsandboxes;
	c->max = d->conf.max_sandboxes;
	c->calls = d->calls;
	c->creating = d->creating;
	c->creates = d->creates_ok + d->creates_failed;
	/* Memory is placed by what is committed (the sandboxes' limits), not
	 * by what the machine has free now: that moves with everything else
	 * the machine runs, and sandboxes use less than they may.  The
	 * node's admission has the last word on memory, as on CPU. */
	c->mem_total = d->sys.mem_total;
	c->mem_free = d->sys.mem_total > d->mem_committed ? d->sys.mem_total - d->mem_committed : 0;
	c->disk_free = d->sys.disk_free;
	c->load = d->sys.load;
	c->ncpu = d->sys.ncpu;
	for (struct dsecd_backend *b = d->backends; b && c->nbe < DSECD_CAP_BACKENDS; b = b->next) {
		struct dsec_be_stats st;
		if (strlen(b->name) >= DSECD_CAP_NAME)
			continue;
		memset(&st, 0, sizeof(st));
		b->ops->stats(b->be, &st);
		strcpy(c->be_name[c->nbe], b->name);
		c->be_used[c->nbe] = b->sandboxes;
		c->be_cap[c->nbe] = st.capacity > UINT32_MAX ? UINT32_MAX : (uint32_t)st.capacity;
		c->nbe++;
	}
	cap_images(d, c);
}

bool dsecd_cap_differs(const struct dsecd_cap *a, const struct dsecd_cap *b)
{
	struct dsecd_cap x = *a, y = *b;

	x.version = y.version = 0;
	x.heard = y.heard = 0;
	return memcmp(&x, &y, sizeof(x)) != 0;
}

void dsecd_cap_pack(const struct dsecd_cap *c, const char *api, struct dsec_pk *p)
{
	dsec_pk_map_begin(p);
	dsec_pk_kv_u64(p, "v", META_V);
	dsec_pk_kv_str(p, "api", api);
	dsec_pk_kv_u64(p, "cv", c->version);
	dsec_pk_kv_bool(p, "draining", c->draining);
	dsec_pk_kv_u64(p, "sandboxes", c->sandboxes);
	dsec_pk_kv_u64(p, "max", c->max);
	dsec_pk_kv_u64(p, "calls", c->calls);
	dsec_pk_kv_u64(p, "creating", c->creating);
	dsec_pk_kv_u64(p, "creates", c->creates);
	dsec_pk_kv_u64(p, "mem_total", c->mem_total);
	dsec_pk_kv_u64(p, "mem_free", c->mem_free);
	dsec_pk_kv_u64(p, "disk_free", c->disk_free);
	dsec_pk_kv_u64(p, "load", c->load);
	dsec_pk_kv_u64(p, "ncpu", c->ncpu);
	dsec_pk_str(p, "backends");
	dsec_pk_map_begin(p);
	for (unsigned i = 0; i < c->nbe; i++) {
		dsec_pk_str(p, c->be_name[i]);
		dsec_pk_array_begin(p);
		dsec_pk_u64(p, c->be_used[i]);
		dsec_pk_u64(p, c->be_cap[i]);
		dsec_pk_end(p);
	}
	dsec_pk_end(p);
	dsec_pk_str(p, "images");
	dsec_pk_array_begin(p);
	for (unsigned i = 0; i < c->nimages; i++)
		dsec_pk_str(p, c->images[i]);
	dsec_pk_end(p);
	dsec_pk_end(p);
}

static uint64_t get_u64(const msgpack_object *m, const char *key)
{
	const msgpack_object *v = dsec_map_get(m, key);

	return v && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? v->via.u64 : 0;
}

static uint32_t u32(uint64_t v)
{
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

void dsecd_cap_parse(struct dsecd_cap *c, const void *meta, size_t len, char **api)
{
	const msgpack_object *v, *be;
	struct dsec_msg msg;
	struct dsec_err err;

	memset(c, 0, sizeof(*c));
	if (api)
		*api = NULL;
	if (!len || dsec_msg_parse(&msg, meta, len, SWIM_META_MAX, &err) < 0)
		return;
	if (api)
		dsec_get_str(msg.root, "api", api, NULL);
	v = dsec_map_get(msg.root, "v");
	if (!v || v->type != MSGPACK_OBJECT_POSITIVE_INTEGER || v->via.u64 != META_V)
		goto out;
	c->version = get_u64(msg.root, "cv");
	v = dsec_map_get(msg.root, "draining");
	c->draining = v && v->type == MSGPACK_OBJECT_BOOLEAN && v->via.boolean;
	c->sandboxes = get_u64(msg.root, "sandboxes");
	c->max = get_u64(msg.root, "max");
	c->calls = get_u64(msg.root, "calls");
	c->creating = get_u64(msg.root, "creating");
	c->creates = get_u64(msg.root, "creates");
	c->mem_total = get_u64(msg.root, "mem_total");
	c->mem_free = get_u64(msg.root, "mem_free");
	c->disk_free = get_u64(msg.root, "disk_free");
	c->load = u32(get_u64(msg.root, "load"));
	c->ncpu = u32(get_u64(msg.root, "ncpu"));
	be = dsec_map_get(msg.root, "backends");
	if (be && be->type == MSGPACK_OBJECT_MAP) {
		for (uint32_t i = 0; i < be->via.map.size && c->nbe < DSECD_CAP_BACKENDS; i++) {
			const msgpack_object *k = &be->via.map.ptr[i].key, *a = &be->via.map.ptr[i].val;
			if (k->type != MSGPACK_OBJECT_STR || !k->via.str.size ||
			    k->via.str.size >= DSECD_CAP_NAME || memchr(k->via.str.ptr, 0, k->via.str.size) ||
			    a->type != MSGPACK_OBJECT_ARRAY || a->via.array.size < 2 ||
			    a->via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
			    a->via.array.ptr[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
				continue;
			memcpy(c->be_name[c->nbe], k->via.str.ptr, k->via.str.size);
			c->be_used[c->nbe] = u32(a->via.array.ptr[0].via.u64);
			c->be_cap[c->nbe] = u32(a->via.array.ptr[1].via.u64);
			c->nbe++;
		}
	}
	v = dsec_map_get(msg.root, "images");
	for (uint32_t i = 0; v && v->type == MSGPACK_OBJECT_ARRAY && i < v->via.array.size &&
			     c->nimages < DSECD_CAP_IMAGES; i++) {
		const msgpack_object *e = &v->via.array.ptr[i];
		if (e->type != MSGPACK_OBJECT_STR || !e->via.str.size ||
		    e->via.str.size >= DSECD_CAP_IMAGE || memchr(e->via.str.ptr, 0, e->via.str.size))
			continue;
		memcpy(c->images[c->nimages++], e->via.str.ptr, e->via.str.size);
	}
	c->known = true;
out:
	dsec_msg_free(&msg);
}

static enum place_health health_of(enum dsecd_member_state s)
{
	switch (s) {
	case DSECD_MEMBER_ALIVE: return PLACE_ALIVE;
	case DSECD_MEMBER_SUSPECT: return PLACE_SUSPECT;
	case DSECD_MEMBER_DEAD: return PLACE_DEAD;
	case DSECD_MEMBER_LEFT: break;
	}
	return PLACE_LEFT;
}

/* One node of the view from its capacity.  A backend's slots are the
 * node's: its sandboxes and what max_sandboxes leaves (less the node's
 * sandboxes and calls).  The room a backend reports only says whether it
 * takes more now (0: it is full): what it counts is its own (fncall's is
 * commands running, not sandboxes), and taken as slots it would make a
 * stream of short-lived sandboxes, counted in flight until the gossip
 * shows them, look like a full node. */
static void view_node(struct place_node *n, const char *name, enum place_health h,
		      const struct dsecd_cap *c, double now, const char **images)
{
	uint64_t held = c->sandboxes + c->calls;
	uint64_t node_free = c->max > held ? c->max - held : 0;

	memset(n, 0, sizeof(*n));
	n->name = name;
	n->health = h;
	n->draining = c->draining;
	for (unsigned i = 0; i < c->nbe; i++) {
		uint64_t room = c->be_cap[i] ? node_free : 0;
		n->be[i] = (struct place_backend){ c->be_name[i], c->be_used[i],
						   u32(c->be_used[i] + room) };
	}
	n->nbe = c->nbe;
	n->load = c->load;
	n->cpu_free = u32((uint64_t)c->ncpu * (1000 - (c->load > 1000 ? 1000 : c->load)));
	n->mem_total = c->mem_total;
	n->mem_free = c->mem_free;
	n->disk_free = c->disk_free ? c->disk_free : UINT64_MAX;	/* unknown: no filter */
	n->queue = u32(c->creating);
	for (unsigned i = 0; i < c->nimages; i++)
		images[i] = c->images[i];
	n->images = images;
	n->nimages = c->nimages;
	n->version = c->version;
	n->age_ms = c->heard > 0 && now > c->heard ? (uint64_t)((now - c->heard) * 1000) : 0;
}

/* The view: this node first, then every member whose capacity gossip
 * told.  This node's entry is what it last gossiped, as the others see
 * it, its own placements here since counted in flight like those sent
 * away: its figures now would count every other sender's creates to it
 * while its figures of the others miss theirs, so it would look the most
 * loaded in every comparison and place nothing on itself.  *members gets
 * each entry's member (NULL: this node).  Returns the entries; the arrays
 * are the caller's, nmembers + 1 long. */
static size_t build_view(struct dsecd *d, struct place_node *view, struct dsecd_member **members,
			 const char *(*imgs)[DSECD_CAP_IMAGES], struct dsecd_cap *self)
{
	const struct dsecd_cap *last = dsecd_gossip_last(d);
	double now = ev_now(d->loop);
	size_t n = 0;

	if (last) {
		*self = *last;
		self->draining = d->draining;	/* a drain takes effect here at once */
	} else {
		dsecd_cap_self(d, self);
	}
	view_node(&view[n], d->conf.node, PLACE_ALIVE, self, now, imgs[n]);
	members[n++] = NULL;
	for (size_t i = 0; i < d->nmembers; i++) {
		struct dsecd_member *m = &d->members[i];
		if (!m->cap.known)
			continue;
		view_node(&view[n], m->name, health_of(m->state), &m->cap, now, imgs[n]);
		members[n++] = m;
	}
	return n;
}

/* The capacity answer: no node has room for r (or every one tried
 * refused): the code "capacity", the summary in the message and as
 * "cluster" in the error map. */
static void reply_no_room(struct dsecd_req *r, const struct place_node *view, size_t n, int why)
{
	struct dsecd *d = r->d;
	struct dsecd_placing *pl = r->placing;
	struct place_summary s;
	struct dsec_err err;
	struct dsec_pk p;

	place_summary(d->placer, view, n, pl->req.backend, &s);
	d->placed_none++;
	char mem[96] = "";
	if (pl->req.mem > s.mem_free_max)
		snprintf(mem, sizeof(mem), "; %llu MiB of memory asked, at most %llu MiB free on one node",
			 (unsigned long long)(pl->req.mem >> 20), (unsigned long long)(s.mem_free_max >> 20));
	dsec_err_setc(&err, DSEC_E_CAPACITY, EAGAIN, "no node of the cluster has room for a %s "
		      "sandbox%s: %u nodes, %u alive and taking sandboxes, %u offering %s, %u with a "
		      "free slot; %llu of %llu slots free%s", pl->req.backend,
		      why == -EBUSY ? " (every node tried refused)" : "", s.nodes, s.alive, s.offering,
		      pl->req.backend, s.with_room, (unsigned long long)s.slots_free,
		      (unsigned long long)s.slots_limit, mem);
	r->reply_code = DSEC_E_CAPACITY;
	dsec_pk_init(&p);
	dsec_pk_map_begin(&p);
	dsec_pk_kv_bool(&p, "ok", false);
	dsec_pk_str(&p, "error");
	dsec_pk_map_begin(&p);
	dsec_pk_kv_str(&p, "code", dsec_code_name(DSEC_E_CAPACITY));
	dsec_pk_kv_str(&p, "message", err.msg);
	dsec_pk_str(&p, "cluster");
	dsec_pk_map_begin(&p);
	dsec_pk_kv_u64(&p, "nodes", s.nodes);
	dsec_pk_kv_u64(&p, "alive", s.alive);
	dsec_pk_kv_u64(&p, "offering", s.offering);
	dsec_pk_kv_u64(&p, "with_room", s.with_room);
	dsec_pk_kv_u64(&p, "slots_free", s.slots_free);
	dsec_pk_kv_u64(&p, "slots_limit", s.slots_limit);
	dsec_pk_kv_u64(&p, "slots_free_max", s.slots_free_max);
	dsec_pk_kv_u64(&p, "mem_free", s.mem_free);
	dsec_pk_kv_u64(&p, "mem_free_max", s.mem_free_max);
	dsec_pk_kv_u64(&p, "queue", s.queue);
	dsec_pk_end(&p);
	dsec_pk_end(&p);
	dsec_pk_end(&p);
	req_complete(r, &p);
}

/* Places r (again): serves it here (false on its first placement: the
 * caller runs it; on a later one, it runs now), forwards it, or answers
 * capacity.  True when r is taken. */
static bool place_next(struct dsecd_req *r, bool first)
{
	struct dsecd *d = r->d;
	struct dsecd_placing *pl = r->placing;
	size_t cap = d->nmembers + 1, i;
	_cleanup_free_ struct place_node *view = xcalloc(cap, sizeof(*view));
	_cleanup_free_ struct dsecd_member **mem = xcalloc(cap, sizeof(*mem));
	_cleanup_free_ const char *(*imgs)[DSECD_CAP_IMAGES] = xcalloc(cap, sizeof(*imgs));
	struct dsecd_cap self;
	struct dsec_err err;
	int rc;

	for (;;) {
		size_t n = build_view(d, view, mem, imgs, &self);
		rc = place_choose(d->placer, view, n, &pl->req, &pl->t, &i);
		if (rc == -ENODEV && first)
			return false;	/* no node offers it: this one says so (no_backend) */
		if (rc < 0) {
			reply_no_room(r, view, n, rc);
			return true;
		}
		if (!mem[i]) {
			/* Counted as a create here until the gossip of this
			 * node's capacity shows it (see build_view). */
			place_inflight_add(d->placer, d->conf.node, &pl->req);
			place_inflight_remove(d->placer, d->conf.node, &pl->req,
					      r->op == DSEC_OP_CREATE ? dsecd_gossip_next_version(d) : 0);
			d->placed_here++;
			if (first)
				return false;
			rerun(r);
			return true;
		}
		struct dsecd_member *m = mem[i];
		dsec_err_clear(&err);
		if (dsecd_forward_to(r, m, &err) == 0) {
			snprintf(pl->target, sizeof(pl->target), "%s", m->name);
			place_inflight_add(d->placer, m->name, &pl->req);
			m->placed++;
			d->placed_away++;
			return true;
		}
		/* It cannot be sent there (no connection): the next one. */
		log_warn("placement: cannot forward to node %s: %s", m->name, err.msg);
	}
}

bool dsecd_place(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	const msgpack_object *root = r->msg.root, *v, *lim;
	struct dsecd_placing *pl;

	if (!d->placer || !d->nmembers || dsec_map_get(root, "fwd"))
		return false;	/* no cluster to place over, or placed by its sender */
	pl = xcalloc(1, sizeof(*pl));
	v = dsec_map_get(root, "backend");
	if (v && v->type == MSGPACK_OBJECT_STR && v->via.str.size && v->via.str.size < DSECD_CAP_NAME &&
	    !memchr(v->via.str.ptr, 0, v->via.str.size))
		memcpy(pl->backend, v->via.str.ptr, v->via.str.size);
	else if (!v || v->type == MSGPACK_OBJECT_NIL)
		snprintf(pl->backend, sizeof(pl->backend), "%s", d->conf.default_backend);
	if (!pl->backend[0]) {
		free(pl);
		return false;	/* the handler says what is wrong with it */
	}
	v = dsec_map_get(root, "image");
	if (v && v->type == MSGPACK_OBJECT_STR && v->via.str.size &&
	    !memchr(v->via.str.ptr, 0, v->via.str.size)) {
		size_t l = v->via.str.size < DSECD_CAP_IMAGE - 1 ? v->via.str.size : DSECD_CAP_IMAGE - 1;
		memcpy(pl->image, v->via.str.ptr, l);
		pl->req.image = pl->image;
	}
	lim = dsec_map_get(root, "limits");
	if (lim && lim->type == MSGPACK_OBJECT_MAP) {
		pl->req.mem = get_u64(lim, "memory");
		pl->req.disk = get_u64(lim, "disk");
	}
	pl->req.backend = pl->backend;
	place_try_init(&pl->t);
	pl->started = ev_now(d->loop);
	r->placing = pl;
	return place_next(r, true);
}

/* The reply's code and its result's capacity_version (0 when it has
 * none). */
static enum dsec_code reply_code(const void *reply, size_t len, uint64_t *version)
{
	const msgpack_object *ok, *e, *c, *res;
	enum dsec_code code = DSEC_E_INTERNAL;
	struct dsec_msg msg;
	struct dsec_err err;

	*version = 0;
	if (dsec_msg_parse(&msg, reply, len, len + 1, &err) < 0)
		return code;
	ok = dsec_map_get(msg.root, "ok");
	if (ok && ok->type == MSGPACK_OBJECT_BOOLEAN && ok->via.boolean) {
		code = DSEC_E_OK;
		if ((res = dsec_map_get(msg.root, "result")) && res->type == MSGPACK_OBJECT_MAP)
			*version = get_u64(res, "capacity_version");
	} else if ((e = dsec_map_get(msg.root, "error")) && e->type == MSGPACK_OBJECT_MAP &&
		   (c = dsec_map_get(e, "code")) && c->type == MSGPACK_OBJECT_STR) {
		code = dsec_code_from_name(c->via.str.ptr, c->via.str.size);
	}
	dsec_msg_free(&msg);
	return code;
}

bool dsecd_place_reply(struct dsecd_req *r, int rc, const void *reply, size_t len)
{
	struct dsecd *d = r->d;
	struct dsecd_placing *pl = r->placing;
	uint64_t version = 0;
	enum dsec_code code = rc == 0 ? reply_code(reply, len, &version) : DSEC_E_UNAVAILABLE;
	struct dsecd_member *m = dsecd_member_find(d, pl->target, strlen(pl->target));

	if (rc == 0)
		r->reply_code = code;	/* for a batch (cq_cb does not parse it again) */
	/* A create made counts until the view shows it; a call made is over
	 * (its slot is free again); a refusal or failure made nothing. */
	if (code == DSEC_E_OK && r->op == DSEC_OP_CREATE)
		place_inflight_remove(d->placer, pl->target, &pl->req,
				      version ? version : PLACE_VERSION_NEXT);
	else
		place_inflight_remove(d->placer, pl->target, &pl->req, 0);
	if (code != DSEC_E_CAPACITY && code != DSEC_E_SHUTTING_DOWN && code != DSEC_E_NO_BACKEND)
		return false;	/* the client gets it as it came */
	if (m)
		m->refused++;
	d->placed_again++;
	log_debug("placement: node %s refused a %s (%s); placing it again", pl->target,
		  dsecd_req_op(r), dsec_code_name(code));
	r->fwd = NULL;
	place_next(r, false);	/* never false when not the first */
	return true;
}

void dsecd_place_pack(struct dsecd *d, struct dsec_pk *p)
{
	dsec_pk_str(p, "placement");
	dsec_pk_map_begin(p);
	dsec_pk_kv_str(p, "policy", d->placer ? d->conf.placement : "local");
	if (d->placer)
		dsec_pk_kv_u64(p, "k", d->conf.placement_k);
	dsec_pk_kv_u64(p, "here", d->placed_here);
	dsec_pk_kv_u64(p, "away", d->placed_away);
	dsec_pk_kv_u64(p, "again", d->placed_again);
	dsec_pk_kv_u64(p, "no_room", d->placed_none);
	dsec_pk_end(p);
}
