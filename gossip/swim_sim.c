/* swim_sim.c - the simulated network and clock (see swim_sim.h).
 *
 * One event heap ordered by (time, sequence), so a run is deterministic:
 * datagram deliveries, stream requests and replies, and each node's
 * wake-up.  A node's wake-ups and stream replies carry its generation, so
 * that those of a killed instance are ignored by a restarted one.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "swim_sim.h"
#include "util.h"

const struct swim_key swim_sim_key = { "swim-sim-cluster-key-0123456789", 32 };

enum sev_type { SEV_WAKE, SEV_DGRAM, SEV_STREAM_REQ, SEV_STREAM_REPLY };

/* A scheduled event. */
struct sev {
	uint64_t at;		/* when */
	uint64_t seq;		/* tie-break: order of scheduling */
	enum sev_type type;	/* what */
	unsigned node;		/* the node it happens at */
	unsigned from;		/* the sender (stream requests: who waits) */
	uint64_t gen;		/* node generation it is for (wake, reply) */
	uint64_t id;		/* stream id */
	int rc;			/* stream reply result */
	void *buf;		/* bytes (owned) */
	size_t len;		/* their length */
};

struct simnode;

struct swim_sim {
	struct swim_sim_conf conf;	/* the network */
	uint64_t rng;			/* splitmix64 state */
	uint64_t now;			/* simulated time */
	uint64_t seq;			/* event sequence */
	struct sev **heap;		/* events, min-heap */
	size_t nheap, heap_cap;		/* used and allocated */
	struct simnode **nodes;		/* every node ever added */
	unsigned nnodes;		/* how many */
	swim_sim_filter_fn *filter;	/* datagram filter, or NULL */
	void *filter_arg;		/* its argument */
	swim_sim_event_fn *event;	/* event hook, or NULL */
	void *event_arg;		/* its argument */
	uint64_t delivered, lost;	/* datagram counts */
};

/* One node. */
struct simnode {
	struct swim_sim *sim;	/* back pointer */
	unsigned idx;		/* its index */
	struct swim *s;		/* the protocol, NULL while down */
	uint64_t gen;		/* incremented at each (re)start */
	uint64_t wake;		/* the wake-up asked for (0: none) */
	char name[32];		/* "n<i>" unless conf says */
	char addr[40];		/* "sim-<i>:7946" */
	struct swim_conf conf;	/* as added (name/addr point here) */
	uint64_t slow_us;	/* extra receive delay, max */
	double slow_loss;	/* extra receive loss */
	unsigned group;		/* partition group */
};

static uint64_t sim_rand(struct swim_sim *sim)
{
	uint64_t z = (sim->rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double sim_unit(struct swim_sim *sim)
{
	return (double)(sim_rand(sim) >> 11) / 9007199254740992.0;
}

static bool sev_less(const struct sev *a, const struct sev *b)
{
	return a->at != b->at ? a->at < b->at : a->seq < b->seq;
}

static void push(struct swim_sim *sim, struct sev *e)
{
	size_t i;

	e->seq = ++sim->seq;
	if (sim->nheap == sim->heap_cap) {
		sim->heap_cap = sim->heap_cap ? 2 * sim->heap_cap : 1024;
		sim->heap = xrealloc(sim->heap, sim->heap_cap * sizeof(*sim->heap));
	}
	i = sim->nheap++;
	sim->heap[i] = e;
	while (i > 0 && sev_less(sim->heap[i], sim->heap[(i - 1) / 2])) {
		struct sev *t = sim->heap[i];

		sim->heap[i] = sim->heap[(i - 1) / 2];
		sim->heap[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
}

static struct sev *pop(struct swim_sim *sim)
{
	struct sev *top = sim->heap[0];
	size_t i = 0;

	sim->heap[0] = sim->heap[--sim->nheap];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < sim->nheap && sev_less(sim->heap[l], sim->heap[m]))
			m = l;
		if (r < sim->nheap && sev_less(sim->heap[r], sim->heap[m]))
			m = r;
		if (m == i)
			break;
		struct sev *t = sim->heap[i];

		sim->heap[i] = sim->heap[m];
		sim->heap[m] = t;
		i = m;
	}
	return top;
}

static struct sev *sev_new(enum sev_type type, uint64_t at, unsigned node)
{
	struct sev *e = xcalloc(1, sizeof(*e));

	e->type = type;
	e->at = at;
	e->node = node;
	return e;
}

static uint64_t latency(struct swim_sim *sim)
{
	double j = sim->conf.jitter_us ? -log(1.0 - sim_unit(sim)) * (double)sim->conf.jitter_us : 0;

	return sim->conf.latency_us + (uint64_t)j;
}

/* The node an address names, or -1. */
static int addr_node(struct swim_sim *sim, const char *addr)
{
	unsigned i;

	if (sscanf(addr, "sim-%u:", &i) != 1 || i >= sim->nnodes)
		return -1;
	return (int)i;
}

/* ---- the env of a node ------------------------------------------------- */

static uint64_t env_now(void *ctx)
{
	return ((struct simnode *)ctx)->sim->now;
}

static uint64_t env_wall(void *ctx)
{
	/* A fixed epoch, so incarnations look like real ones. */
	return 1700000000000ull + ((struct simnode *)ctx)->sim->now / 1000;
}

static void env_set_timer(void *ctx, uint64_t at)
{
	struct simnode *n = ctx;
	struct sev *e;

	if (n->wake == at)
		return;
	n->wake = at;
	e = sev_new(SEV_WAKE, at < n->sim->now ? n->sim->now : at, n->idx);
	e->gen = n->gen;
	push(n->sim, e);
}

static void env_send(void *ctx, const char *addr, const void *buf, size_t len)
{
	struct simnode *n = ctx;
	struct swim_sim *sim = n->sim;
	int to = addr_node(sim, addr);
	struct sev *e;

	if (to < 0 || sim->nodes[to]->group != n->group || sim_unit(sim) < sim->conf.loss ||
	    (sim->filter && sim->filter(sim->filter_arg, n->idx, (unsigned)to, buf, len))) {
		sim->lost++;
		return;
	}
	struct simnode *dst = sim->nodes[to];
	uint64_t delay = latency(sim);

	if (dst->slow_us || dst->slow_loss) {
		if (sim_unit(sim) < dst->slow_loss) {
			sim->lost++;
			return;
		}
		delay += dst->slow_us / 2 + (uint64_t)(sim_unit(sim) * (double)(dst->slow_us / 2));
	}
	e = sev_new(SEV_DGRAM, sim->now + delay, (unsigned)to);
	e->from = n->idx;
	e->buf = xmemdup(buf, len);
	e->len = len;
	push(sim, e);
}

static int env_stream(void *ctx, const char *addr, const void *buf, size_t len, uint64_t id)
{
	struct simnode *n = ctx;
	struct swim_sim *sim = n->sim;
	int to = addr_node(sim, addr);
	struct sev *e;

	if (to < 0)
		return -EHOSTUNREACH;
	e = sev_new(SEV_STREAM_REQ, sim->now + latency(sim), (unsigned)to);
	e->from = n->idx;
	e->gen = n->gen;
	e->id = id;
	e->buf = xmemdup(buf, len);
	e->len = len;
	push(sim, e);
	return 0;
}

static uint64_t env_rand(void *ctx)
{
	return sim_rand(((struct simnode *)ctx)->sim);
}

static void env_event(void *ctx, enum swim_event ev, const struct swim_member *m)
{
	struct simnode *n = ctx;

	if (n->sim->event)
		n->sim->event(n->sim->event_arg, n->idx, ev, m);
}

static int node_start(struct simnode *n)
{
	struct swim_env env = {
		.ctx = n, .now = env_now, .wall_ms = env_wall, .set_timer = env_set_timer,
		.send = env_send, .stream = env_stream, .rand = env_rand, .event = env_event,
	};
	struct swim_conf c = n->conf;

	if (!c.nkeys) {
		c.keys = &swim_sim_key;
		c.nkeys = 1;
	}
	n->gen++;
	n->wake = 0;
	return swim_new(&n->s, &c, &env);
}

/* ---- the simulation ---------------------------------------------------- */

struct swim_sim *swim_sim_new(const struct swim_sim_conf *conf)
{
	struct swim_sim *sim = xcalloc(1, sizeof(*sim));

	sim->conf = *conf;
	sim->rng = conf->seed;
	return sim;
}

void swim_sim_free(struct swim_sim *sim)
{
	if (!sim)
		return;
	for (unsigned i = 0; i < sim->nnodes; i++) {
		swim_free(sim->nodes[i]->s);
		free(sim->nodes[i]);
	}
	for (size_t i = 0; i < sim->nheap; i++) {
		free(sim->heap[i]->buf);
		free(sim->heap[i]);
	}
	free(sim->heap);
	free(sim->nodes);
	free(sim);
}

unsigned swim_sim_add(struct swim_sim *sim, const struct swim_conf *conf)
{
	struct simnode *n = xcalloc(1, sizeof(*n));
	unsigned i = sim->nnodes;

	n->sim = sim;
	n->idx = i;
	if (conf)
		n->conf = *conf;
	snprintf(n->name, sizeof(n->name), "%s", conf && conf->name ? conf->name : "");
	if (!n->name[0])
		snprintf(n->name, sizeof(n->name), "n%u", i);
	snprintf(n->addr, sizeof(n->addr), "sim-%u:7946", i);
	n->conf.name = n->name;
	n->conf.addr = n->addr;
	sim->nodes = xrealloc(sim->nodes, (i + 1) * sizeof(*sim->nodes));
	sim->nodes[i] = n;
	sim->nnodes++;
	if (node_start(n) < 0)
		DSEC_BUG("swim_new failed for simulated node %u", i);
	return i;
}

struct swim *swim_sim_node(struct swim_sim *sim, unsigned i)
{
	return i < sim->nnodes ? sim->nodes[i]->s : NULL;
}

unsigned swim_sim_count(const struct swim_sim *sim)
{
	return sim->nnodes;
}

const char *swim_sim_name(const struct swim_sim *sim, unsigned i)
{
	return sim->nodes[i]->name;
}

const char *swim_sim_addr(const struct swim_sim *sim, unsigned i)
{
	return sim->nodes[i]->addr;
}

void swim_sim_kill(struct swim_sim *sim, unsigned i)
{
	struct simnode *n = sim->nodes[i];

	swim_free(n->s);
	n->s = NULL;
	n->gen++;
}

int swim_sim_restart(struct swim_sim *sim, unsigned i, const struct swim_conf *conf)
{
	struct simnode *n = sim->nodes[i];

	if (n->s)
		swim_sim_kill(sim, i);
	if (conf) {
		n->conf = *conf;
		n->conf.name = n->name;
		n->conf.addr = n->addr;
	}
	n->conf.incarnation = 0;	/* from the (simulated) wall clock */
	return node_start(n);
}

int swim_sim_join(struct swim_sim *sim, unsigned i, unsigned j)
{
	const char *seed = sim->nodes[j]->addr;

	if (!sim->nodes[i]->s)
		return -ESRCH;
	return swim_join(sim->nodes[i]->s, &seed, 1);
}

static void deliver(struct swim_sim *sim, struct sev *e)
{
	struct simnode *n = sim->nodes[e->node];

	switch (e->type) {
	case SEV_WAKE:
		if (n->s && e->gen == n->gen && e->at == n->wake) {
			n->wake = 0;
			swim_tick(n->s);
		}
		break;
	case SEV_DGRAM:
		if (n->s) {
			sim->delivered++;
			swim_recv(n->s, e->buf, e->len);
		} else {
			sim->lost++;
		}
		break;
	case SEV_STREAM_REQ: {
		bool cut = sim->nodes[e->from]->group != n->group;
		/* Across a partition the connection times out (after 10 s). */
		struct sev *r = sev_new(SEV_STREAM_REPLY, sim->now + (cut ? 10 * 1000000 : latency(sim)),
					e->from);
		void *reply = NULL;
		size_t rlen = 0;

		r->gen = e->gen;
		r->id = e->id;
		if (cut)
			r->rc = -ETIMEDOUT;
		else
			r->rc = n->s ? swim_stream_serve(n->s, e->buf, e->len, &reply, &rlen) :
				       -ECONNREFUSED;
		r->buf = reply;
		r->len = rlen;
		push(sim, r);
		break;
	}
	case SEV_STREAM_REPLY:
		if (n->s && e->gen == n->gen)
			swim_stream_done(n->s, e->id, e->rc, e->buf, e->len);
		break;
	}
}

void swim_sim_run(struct swim_sim *sim, uint64_t until)
{
	while (sim->nheap && sim->heap[0]->at <= until) {
		struct sev *e = pop(sim);

		sim->now = e->at;
		deliver(sim, e);
		free(e->buf);
		free(e);
	}
	if (sim->now < until)
		sim->now = until;
}

void swim_sim_advance(struct swim_sim *sim, uint64_t us)
{
	swim_sim_run(sim, sim->now + us);
}

uint64_t swim_sim_now(const struct swim_sim *sim)
{
	return sim->now;
}

void swim_sim_set_filter(struct swim_sim *sim, swim_sim_filter_fn *fn, void *arg)
{
	sim->filter = fn;
	sim->filter_arg = arg;
}

void swim_sim_set_event(struct swim_sim *sim, swim_sim_event_fn *fn, void *arg)
{
	sim->event = fn;
	sim->event_arg = arg;
}

void swim_sim_set_slow(struct swim_sim *sim, unsigned i, uint64_t delay_us, double loss)
{
	sim->nodes[i]->slow_us = delay_us;
	sim->nodes[i]->slow_loss = loss;
}

void swim_sim_partition(struct swim_sim *sim, unsigned i, unsigned g)
{
	sim->nodes[i]->group = g;
}

void swim_sim_inject(struct swim_sim *sim, unsigned i, const void *buf, size_t len)
{
	if (sim->nodes[i]->s)
		swim_recv(sim->nodes[i]->s, buf, len);
}

uint64_t swim_sim_delivered(const struct swim_sim *sim)
{
	return sim->delivered;
}

uint64_t swim_sim_lost(const struct swim_sim *sim)
{
	return sim->lost;
}

int swim_sim_state(struct swim_sim *sim, unsigned i, unsigned j, enum swim_state *st)
{
	struct swim_member m;

	if (!sim->nodes[i]->s || swim_member_find(sim->nodes[i]->s, sim->nodes[j]->name, &m) < 0)
		return -ENOENT;
	*st = m.state;
	return 0;
}

bool swim_sim_converged(struct swim_sim *sim)
{
	for (unsigned i = 0; i < sim->nnodes; i++) {
		if (!sim->nodes[i]->s)
			continue;
		for (unsigned j = 0; j < sim->nnodes; j++) {
			enum swim_state st;

			if (!sim->nodes[j]->s)
				continue;
			if (swim_sim_state(sim, i, j, &st) < 0 || st != SWIM_ALIVE)
				return false;
		}
	}
	return true;
}
