/* place.c - the placement policy (see place.h for the rules and the API).
 *
 * Why these rules:
 *  - Power of k choices: with one random choice the fullest of n nodes
 *    holds about ln n / ln ln n more than the mean; with the least loaded
 *    of two random ones, ln ln n / ln 2 (Azar et al.).  And unlike "the
 *    least loaded of all", it stays good when the loads it reads are old:
 *    every sender reading the same stale view sends to the same apparently
 *    emptiest node until the next gossip, while two random samples spread
 *    the senders over the cluster (Mitzenmacher, "How useful is old
 *    information?").  k = 2 gets most of the gain; a larger k gets closer
 *    to the full scan, herding included.
 *  - In-flight counting: between two gossips of a node, this node's own
 *    creates to it are the one change it knows of for certain; adding
 *    them keeps a burst from one sender from landing on one target.  They
 *    stay counted after the reply until the view shows the node's version
 *    that includes them, or a burst would herd again in that window.
 *  - Hard capacity before score: a target without a slot, the memory or
 *    the disk would only refuse; filtering saves a round trip.  CPU is not
 *    a filter: most sandboxes use a small part of what they ask, so CPU is
 *    oversubscribed, and the node's admission has the last word on it.
 *  - Health: a suspect node may be dead (its creates would time out), a
 *    draining one is emptying on purpose; both keep their sandboxes and
 *    take no new ones.
 *  - Locality: a node with the image's chunks starts the sandbox without
 *    fetching them, but the first nodes to have an image are few, and a
 *    job creates thousands of sandboxes of one image: always sending them
 *    there would fill those first.  Comparing the best local candidate
 *    with the best of all and allowing a bounded slack keeps the gain and
 *    bounds the imbalance it may cause; the other nodes fetch the image
 *    and become local in turn.
 *  - Score: the dominant share (the larger of slots and memory in use)
 *    because whichever runs out first stops the node; queue and CPU load
 *    only break ties, since the queue drains in milliseconds and CPU is
 *    oversubscribed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "place.h"
#include "util.h"

/* Creates of one backend in flight to a node. */
struct flight_be {
	char name[PLACE_NAME_MAX];	/* backend name; "" = unused */
	uint32_t pending;		/* forwarded, no reply yet */
};

/* Versions whose recent creates are counted apart; past it the newest
 * bucket takes the next ones (counted a little longer, never less). */
#define RECENT_MAX 8

/* Creates made whose replies named one capacity version of the node: the
 * view counts them once it shows that version, so until then they are
 * added.  Each version has its own bucket: under a steady stream of
 * creates the replies name ever newer versions, and one bucket for all
 * would wait for the newest, counting again what the view already has. */
struct recent {
	uint64_t version;		/* the node's version that counts them */
	uint32_t slots[PLACE_BACKENDS_MAX]; /* per backend, as f->be[] */
	uint64_t mem;			/* memory they asked, bytes */
	uint64_t disk;			/* their disk, bytes */
};

/* This node's placements to one node not yet in the view.  Slots are per
 * backend (a container in flight takes no fncall slot); memory and disk
 * are the node's, whatever the backend. */
struct flight {
	char name[PLACE_NAME_MAX];	/* node name; "" = empty slot of the table */
	struct flight_be be[PLACE_BACKENDS_MAX]; /* per backend, as the creates name them */
	uint64_t pending_mem;		/* memory asked by the pending creates, bytes */
	uint64_t pending_disk;		/* their disk, bytes */
	struct recent rec[RECENT_MAX];	/* created, not yet in the view: by version, oldest first */
	unsigned nrec;			/* buckets in use */
	uint64_t seen_version;		/* the newest version of the node place_choose() saw */
};

/* A node that passed the filter, with what ranking needs. */
struct cand {
	size_t i;			/* index into the view */
	uint64_t score;			/* place_score(), ppm */
	uint32_t queue;			/* its creation queue */
	uint32_t load;			/* its CPU load, per mille */
};

struct place {
	struct place_conf conf;		/* settings, copied */
	uint64_t rng;			/* generator state, never 0 */
	struct flight *tab;		/* in-flight table, open addressing, cap entries */
	size_t cap;			/* its size, a power of 2 */
	size_t used;			/* entries holding a name (never removed: one per node) */
	struct cand *all;		/* scratch: the eligible nodes */
	struct cand *local;		/* scratch: those with the image */
	size_t nscratch;		/* room of each scratch array */
};

void place_conf_default(struct place_conf *c)
{
	*c = (struct place_conf){
		.policy = PLACE_POWER_K,
		.k = 2,
		.max_attempts = 3,
		.count_inflight = true,
		.locality = true,
		.locality_slack = PLACE_PPM / 10,
	};
}

static const char *const policy_names[] = {
	[PLACE_POWER_K] = "power_k",
	[PLACE_RANDOM] = "random",
	[PLACE_LEAST_LOADED] = "least_loaded",
};

const char *place_policy_name(enum place_policy policy)
{
	return (size_t)policy < DSEC_ARRAY_LEN(policy_names) ? policy_names[policy] : "?";
}

int place_policy_parse(const char *s, enum place_policy *out)
{
	for (size_t i = 0; i < DSEC_ARRAY_LEN(policy_names); i++)
		if (!strcmp(s, policy_names[i])) {
			*out = (enum place_policy)i;
			return 0;
		}
	return -EINVAL;
}

uint64_t place_rand(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545f4914f6cdd1dULL;
}

uint32_t place_rand_below(uint64_t *state, uint32_t n)
{
	return (uint32_t)(((place_rand(state) >> 32) * n) >> 32);
}

int place_new(struct place **out, const struct place_conf *conf, uint64_t seed)
{
	struct place *p;

	if (conf->k == 0 || conf->max_attempts == 0 || conf->max_attempts > PLACE_TRIES_MAX ||
	    (size_t)conf->policy >= DSEC_ARRAY_LEN(policy_names))
		return -EINVAL;
	p = xcalloc(1, sizeof(*p));
	p->conf = *conf;
	/* splitmix64 of the seed: nearby seeds give unrelated streams, never 0. */
	seed += 0x9e3779b97f4a7c15ULL;
	seed = (seed ^ (seed >> 30)) * 0xbf58476d1ce4e5b9ULL;
	seed = (seed ^ (seed >> 27)) * 0x94d049bb133111ebULL;
	p->rng = (seed ^ (seed >> 31)) | 1;
	p->cap = 64;
	p->tab = xcalloc(p->cap, sizeof(*p->tab));
	*out = p;
	return 0;
}

void place_free(struct place *p)
{
	if (!p)
		return;
	free(p->tab);
	free(p->all);
	free(p->local);
	free(p);
}

/* ---- the in-flight table ---- */

static size_t name_hash(const char *s)
{
	return (size_t)dsec_fnv1a(DSEC_FNV1A_INIT, s, strlen(s));
}

static bool name_ok(const char *name)
{
	return name && name[0] && strlen(name) < PLACE_NAME_MAX;
}

/* The slot of name: its entry, or the empty slot where it would go. */
static struct flight *flight_slot(struct flight *tab, size_t cap, const char *name)
{
	size_t i = name_hash(name) & (cap - 1);

	while (tab[i].name[0] && strcmp(tab[i].name, name))
		i = (i + 1) & (cap - 1);
	return &tab[i];
}

static struct flight *flight_find(const struct place *p, const char *name)
{
	struct flight *f;

	if (!name_ok(name))
		return NULL;
	f = flight_slot(p->tab, p->cap, name);
	return f->name[0] ? f : NULL;
}

/* name's entry, made if new; the table stays at most half full. */
static struct flight *flight_get(struct place *p, const char *name)
{
	struct flight *f = flight_find(p, name);

	if (f)
		return f;
	if (2 * (p->used + 1) > p->cap) {
		size_t cap = 2 * p->cap;
		struct flight *tab = xcalloc(cap, sizeof(*tab));

		for (size_t i = 0; i < p->cap; i++)
			if (p->tab[i].name[0])
				*flight_slot(tab, cap, p->tab[i].name) = p->tab[i];
		free(p->tab);
		p->tab = tab;
		p->cap = cap;
	}
	f = flight_slot(p->tab, p->cap, name);
	strcpy(f->name, name);
	p->used++;
	return f;
}

/* The entry of backend in f, made if new; NULL when f has no room left
 * (a node offers at most PLACE_BACKENDS_MAX: the slots of a create to a
 * further backend are not counted). */
static struct flight_be *flight_be(struct flight *f, const char *backend)
{
	for (unsigned i = 0; i < PLACE_BACKENDS_MAX; i++) {
		if (!strcmp(f->be[i].name, backend))
			return &f->be[i];
		if (!f->be[i].name[0] && strlen(backend) < PLACE_NAME_MAX) {
			strcpy(f->be[i].name, backend);
			return &f->be[i];
		}
	}
	return NULL;
}

/* What is in flight to nd that nd's view entry does not count yet. */
struct extra {
	uint32_t slots;			/* creates of the backend asked about */
	uint64_t mem;			/* memory of all creates, bytes */
	uint64_t disk;			/* their disk, bytes */
};

/* What f (may be NULL) adds to nd for backend: the pending creates, and
 * the recent ones of versions newer than nd's. */
static struct extra extra_of(const struct flight *f, const struct place_node *nd,
			     const char *backend)
{
	struct extra x = { 0, 0, 0 };
	int bi = -1;

	if (!f)
		return x;
	x.mem = f->pending_mem;
	x.disk = f->pending_disk;
	for (unsigned i = 0; i < PLACE_BACKENDS_MAX && f->be[i].name[0]; i++)
		if (!strcmp(f->be[i].name, backend)) {
			x.slots = f->be[i].pending;
			bi = (int)i;
		}
	for (unsigned r = 0; r < f->nrec; r++) {
		if (f->rec[r].version <= nd->version)
			continue;
		x.mem += f->rec[r].mem;
		x.disk += f->rec[r].disk;
		if (bi >= 0)
			x.slots += f->rec[r].slots[bi];
	}
	return x;
}

static struct extra flight_extra(const struct place *p, const struct place_node *nd,
				 const char *backend)
{
	if (!p || !p->conf.count_inflight)
		return extra_of(NULL, nd, backend);
	return extra_of(flight_find(p, nd->name), nd, backend);
}

/* Drops the buckets of versions the view has shown. */
static void flight_catch_up(struct flight *f)
{
	unsigned n = 0;

	while (n < f->nrec && f->rec[n].version <= f->seen_version)
		n++;
	if (!n)
		return;
	memmove(f->rec, f->rec + n, (f->nrec - n) * sizeof(f->rec[0]));
	f->nrec -= n;
	memset(f->rec + f->nrec, 0, n * sizeof(f->rec[0]));
}

/* The bucket of version in f (kept in order), made if new; when all are
 * in use, the newest one, its version raised to version if lower. */
static struct recent *flight_recent(struct flight *f, uint64_t version)
{
	unsigned i = 0;

	while (i < f->nrec && f->rec[i].version < version)
		i++;
	if (i < f->nrec && f->rec[i].version == version)
		return &f->rec[i];
	if (f->nrec == RECENT_MAX) {
		struct recent *last = &f->rec[RECENT_MAX - 1];
		if (last->version < version)
			last->version = version;
		return i < RECENT_MAX ? &f->rec[i] : last;
	}
	memmove(f->rec + i + 1, f->rec + i, (f->nrec - i) * sizeof(f->rec[0]));
	f->nrec++;
	memset(&f->rec[i], 0, sizeof(f->rec[i]));
	f->rec[i].version = version;
	return &f->rec[i];
}

void place_inflight_add(struct place *p, const char *node, const struct place_req *req)
{
	struct flight_be *b;
	struct flight *f;

	if (!name_ok(node) || !req->backend)
		return;
	f = flight_get(p, node);
	if ((b = flight_be(f, req->backend)))
		b->pending++;
	f->pending_mem += req->mem;
	f->pending_disk += req->disk;
}

static uint64_t sub_sat(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

void place_inflight_remove(struct place *p, const char *node, const struct place_req *req,
			   uint64_t version)
{
	struct flight *f = flight_find(p, node);
	struct flight_be *b;
	struct recent *r;

	DSEC_ASSERT(f && req->backend);
	b = flight_be(f, req->backend);
	DSEC_ASSERT(!b || b->pending > 0);
	if (b)
		b->pending--;
	f->pending_mem = sub_sat(f->pending_mem, req->mem);
	f->pending_disk = sub_sat(f->pending_disk, req->disk);
	if (!version)
		return;
	flight_catch_up(f);
	if (version == PLACE_VERSION_NEXT)
		version = f->seen_version + 1;
	if (version <= f->seen_version)
		return;		/* the view shows it already */
	r = flight_recent(f, version);
	if (b)
		r->slots[b - f->be]++;
	r->mem += req->mem;
	r->disk += req->disk;
}

unsigned place_inflight(const struct place *p, const char *node)
{
	const struct flight *f = flight_find(p, node);
	unsigned n = 0;

	for (unsigned i = 0; f && i < PLACE_BACKENDS_MAX; i++) {
		n += f->be[i].pending;
		for (unsigned r = 0; r < f->nrec; r++)
			if (f->rec[r].version > f->seen_version)
				n += f->rec[r].slots[i];
	}
	return n;
}

/* ---- the filter and the score ---- */

static const struct place_backend *node_backend(const struct place_node *nd, const char *name)
{
	for (unsigned i = 0; i < nd->nbe && i < PLACE_BACKENDS_MAX; i++) {
		if (!nd->be[i].name)
			break;
		if (!strcmp(nd->be[i].name, name))
			return &nd->be[i];
	}
	return NULL;
}

static bool node_takes_new(const struct place_node *nd)
{
	return nd->health == PLACE_ALIVE && !nd->draining && name_ok(nd->name);
}

static uint64_t score_with(const struct place_backend *be, const struct place_node *nd,
			   const struct extra *x)
{
	uint64_t s, m;

	if (!be->limit)
		return UINT64_MAX;
	s = ((uint64_t)be->used + x->slots) * PLACE_PPM / be->limit;
	if (!nd->mem_total)
		return s;
	/* Memory committed: what is not free, plus what is on its way. */
	m = (uint64_t)((unsigned __int128)(sub_sat(nd->mem_total, nd->mem_free) + x->mem) *
		       PLACE_PPM / nd->mem_total);
	return m > s ? m : s;
}

uint64_t place_score(const struct place *p, const struct place_node *node,
		     const struct place_req *req)
{
	const struct place_backend *be = req->backend ? node_backend(node, req->backend) : NULL;
	struct extra x;

	if (!be)
		return UINT64_MAX;
	x = flight_extra(p, node, req->backend);
	return score_with(be, node, &x);
}

/* Free slots of be net of x; the room for req in memory and disk. */
static uint32_t slots_free(const struct place_backend *be, const struct extra *x)
{
	uint64_t taken = (uint64_t)be->used + x->slots;

	return be->limit > taken ? be->limit - (uint32_t)taken : 0;
}

static bool has_room(const struct place_backend *be, const struct place_node *nd,
		     const struct extra *x, const struct place_req *req)
{
	return slots_free(be, x) > 0 &&
	       (!req->mem || sub_sat(nd->mem_free, x->mem) >= req->mem) &&
	       (!req->disk || sub_sat(nd->disk_free, x->disk) >= req->disk);
}

static bool try_excludes(const struct place_try *t, const char *name)
{
	for (unsigned i = 0; i < t->nexcl; i++)
		if (!strcmp(t->excl[i], name))
			return true;
	return false;
}

static bool node_has_image(const struct place_node *nd, const char *image)
{
	for (unsigned i = 0; i < nd->nimages; i++)
		if (nd->images[i] && !strcmp(nd->images[i], image))
			return true;
	return false;
}

/* Updates nd's in-flight entry with the version the view shows (made if
 * new, so a later PLACE_VERSION_NEXT knows it): the recent creates it
 * now counts are dropped.  The entry, or NULL when not counting. */
static const struct flight *flight_saw(struct place *p, const struct place_node *nd)
{
	struct flight *f;

	if (!p->conf.count_inflight)
		return NULL;
	f = flight_get(p, nd->name);
	if (nd->version > f->seen_version)
		f->seen_version = nd->version;
	flight_catch_up(f);
	return f;
}

/* ---- choosing ---- */

static bool better(const struct cand *a, const struct cand *b)
{
	if (a->score != b->score)
		return a->score < b->score;
	if (a->queue != b->queue)
		return a->queue < b->queue;
	return a->load < b->load;
}

static bool same_rank(const struct cand *a, const struct cand *b)
{
	return a->score == b->score && a->queue == b->queue && a->load == b->load;
}

/* The least loaded of c[0..n-1]; among equals one at random (each with
 * the same chance: reservoir sampling), so equal nodes share the work. */
static const struct cand *least(struct place *p, const struct cand *c, size_t n)
{
	const struct cand *best = &c[0];
	uint32_t ties = 1;

	for (size_t i = 1; i < n; i++) {
		if (better(&c[i], best)) {
			best = &c[i];
			ties = 1;
		} else if (same_rank(&c[i], best) && place_rand_below(&p->rng, ++ties) == 0) {
			best = &c[i];
		}
	}
	return best;
}

/* One of c[0..n-1] (n > 0) by the policy; may reorder c. */
static const struct cand *pick(struct place *p, struct cand *c, size_t n)
{
	switch (p->conf.policy) {
	case PLACE_RANDOM:
		return &c[place_rand_below(&p->rng, (uint32_t)n)];
	case PLACE_LEAST_LOADED:
		return least(p, c, n);
	case PLACE_POWER_K:
		if (n <= p->conf.k)
			return least(p, c, n);
		/* k distinct samples: the first k steps of a Fisher-Yates shuffle. */
		for (size_t j = 0; j < p->conf.k; j++) {
			size_t r = j + place_rand_below(&p->rng, (uint32_t)(n - j));
			struct cand tmp = c[j];

			c[j] = c[r];
			c[r] = tmp;
		}
		return least(p, c, p->conf.k);
	}
	DSEC_BUG("placement policy %d", (int)p->conf.policy);
}

void place_try_init(struct place_try *t)
{
	memset(t, 0, sizeof(*t));
}

/* The caller's exclusions take at most PLACE_TRIES_MAX of excl[], so each
 * attempt has its room. */
int place_try_exclude(struct place_try *t, const char *name)
{
	if (!name_ok(name))
		return -EINVAL;
	if (t->nexcl - t->attempts >= PLACE_TRIES_MAX)
		return -ENOSPC;
	strcpy(t->excl[t->nexcl++], name);
	return 0;
}

int place_choose(struct place *p, const struct place_node *nodes, size_t n,
		 const struct place_req *req, struct place_try *t, size_t *out)
{
	size_t nall = 0, nlocal = 0, offering = 0;
	const struct cand *c;

	if (!req->backend)
		return -EINVAL;
	if (t->attempts >= p->conf.max_attempts)
		return -EBUSY;
	if (n > p->nscratch) {
		p->nscratch = n;
		p->all = xrealloc(p->all, n * sizeof(*p->all));
		p->local = xrealloc(p->local, n * sizeof(*p->local));
	}
	for (size_t i = 0; i < n; i++) {
		const struct place_node *nd = &nodes[i];
		const struct place_backend *be;
		struct extra x;
		struct cand cd;

		if (!node_takes_new(nd) || !(be = node_backend(nd, req->backend)) || !be->limit)
			continue;
		offering++;
		x = extra_of(flight_saw(p, nd), nd, req->backend);
		if (!has_room(be, nd, &x, req) || try_excludes(t, nd->name))
			continue;
		cd = (struct cand){ .i = i, .score = score_with(be, nd, &x), .queue = nd->queue,
				    .load = nd->load };
		p->all[nall++] = cd;
		if (p->conf.locality && req->image && node_has_image(nd, req->image))
			p->local[nlocal++] = cd;
	}
	if (!nall)
		return offering ? -ENOSPC : -ENODEV;
	if (nlocal && nlocal < nall) {
		/* Copies: pick() reorders p->all, which c must not point into. */
		struct cand cl = *pick(p, p->local, nlocal), ca = *pick(p, p->all, nall);

		*out = cl.score <= ca.score + p->conf.locality_slack ? cl.i : ca.i;
	} else {
		c = pick(p, p->all, nall);
		*out = c->i;
	}
	DSEC_ASSERT(t->nexcl < DSEC_ARRAY_LEN(t->excl));
	strcpy(t->excl[t->nexcl++], nodes[*out].name);
	t->attempts++;
	return 0;
}

void place_summary(const struct place *p, const struct place_node *nodes, size_t n,
		   const char *backend, struct place_summary *s)
{
	memset(s, 0, sizeof(*s));
	s->nodes = (unsigned)n;
	for (size_t i = 0; i < n; i++) {
		const struct place_node *nd = &nodes[i];
		const struct place_backend *be;
		struct extra x;
		uint32_t free_slots;
		uint64_t mem, disk;

		if (!node_takes_new(nd))
			continue;
		s->alive++;
		if (!backend || !(be = node_backend(nd, backend)) || !be->limit)
			continue;
		s->offering++;
		x = flight_extra(p, nd, backend);
		free_slots = slots_free(be, &x);
		mem = sub_sat(nd->mem_free, x.mem);
		disk = sub_sat(nd->disk_free, x.disk);
		s->with_room += free_slots > 0;
		s->slots_free += free_slots;
		s->slots_limit += be->limit;
		if (free_slots > s->slots_free_max)
			s->slots_free_max = free_slots;
		s->mem_free += mem;
		if (mem > s->mem_free_max)
			s->mem_free_max = mem;
		s->disk_free += disk;
		if (disk > s->disk_free_max)
			s->disk_free_max = disk;
		s->queue += nd->queue;
	}
}
