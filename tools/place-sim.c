/* place-sim - the placement policy (dsecd/place.c) on a simulated cluster.
 *
 * N nodes of S slots each; creates arrive at random nodes (Poisson, RATE a
 * second; or at one of the first SENDERS nodes only, as when clients
 * connect to a few entry nodes); each arriving node places with place_choose() over its own
 * view, which gossip refreshes late; the target admits the create if it
 * has a free slot by its true state and refuses it otherwise, and the
 * sender places again (at most the attempts of place_conf), as dsecd will.
 * Sandboxes live a lognormal time (DSec: median 17 min, p99 > 3 h).
 *
 * Gossip, as modelled: every node publishes its state (a new version)
 * every PUBLISH seconds (memberlist's gossip interval, 200 ms); every
 * node refreshes its view as often, taking of each other node the newest
 * version published at least LAG seconds ago, LAG drawn uniformly in
 * [LAG_MIN, LAG_MAX] for each node pair and refresh (default 0.2-1 s: an
 * update piggybacked on gossip to 3 nodes every 200 ms reaches the last of
 * 160 nodes in a few rounds); a view never goes back to an older version.
 * A node's entry of itself is always fresh.  A create forwarded reaches
 * its target after RTT/2, which admits or refuses it at once; the reply
 * comes back CREATE seconds after admission (a refusal after RTT) and
 * carries the first version of the target that counts it.
 *
 * Scenarios:
 *   fill    an empty cluster takes creates at RATE until FILL of its slots
 *           are asked for (the peak of a burst): imbalance as it fills,
 *           refusals, failed creates, and how full it was at the first
 *           create that failed (a perfect balancer fails none before 100 %).
 *   steady  the cluster starts at UTIL of its slots, evenly (residual
 *           lifetimes of the equilibrium); creates arrive at RATE with
 *           lifetimes whose median keeps the population at UTIL (unless
 *           --life-median is given); after WARMUP seconds the imbalance
 *           is sampled every second for DURATION seconds.
 * The policy is run alone (--policy) or all of them (--policy all), each
 * from the same seed.  No images (no locality) and no memory limits: the
 * slots are the load.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "place.h"
#include "util.h"

#define US 1000000.0			/* microseconds a second */

struct opts {
	unsigned nodes;			/* cluster size */
	unsigned slots;			/* container slots of each node */
	double rate;			/* creates a second, cluster-wide */
	unsigned senders;		/* creates arrive at nodes 0..senders-1 (0: any node) */
	const char *scenario;		/* "fill" or "steady" */
	double fill;			/* fill: creates asked, as a share of all slots */
	double util;			/* steady: population kept, as a share of all slots */
	double warmup;			/* steady: seconds before sampling */
	double duration;		/* steady: seconds sampled */
	double life_median;		/* lifetime median, seconds (0: from util and rate) */
	double life_sigma;		/* lognormal sigma of lifetimes */
	double publish;			/* gossip: seconds between a node's versions and refreshes */
	double lag_min, lag_max;	/* gossip: a version's delay to an observer, seconds */
	bool fresh;			/* every view exact at each placement (an oracle) */
	double rtt;			/* round trip between nodes, seconds */
	double create;			/* admission to reply, seconds */
	unsigned attempts;		/* targets tried for one create */
	const char *policy;		/* a policy name or "all" */
	unsigned k;			/* power_k's k (with --policy power_k) */
	int inflight;			/* -1: the policy's default, else 0/1 */
	uint64_t seed;			/* generator seed */
};

/* One policy to run. */
struct variant {
	const char *label;		/* row label */
	enum place_policy policy;	/* policy */
	unsigned k;			/* samples */
	bool inflight;			/* count in-flight placements */
};

static const struct variant all_variants[] = {
	{ "power_k k=2", PLACE_POWER_K, 2, true },
	{ "power_k k=3", PLACE_POWER_K, 3, true },
	{ "random", PLACE_RANDOM, 1, true },
	{ "least_loaded (gossip alone)", PLACE_LEAST_LOADED, 1, false },
	{ "least_loaded + in-flight", PLACE_LEAST_LOADED, 1, true },
	{ "power_k k=2, no in-flight", PLACE_POWER_K, 2, false },
};

enum ev_type {
	EV_ARRIVE,			/* a create arrives at node a */
	EV_AT_TARGET,			/* create c reaches its target */
	EV_REPLY,			/* create c's reply reaches its sender */
	EV_END,				/* a sandbox on node a ends */
	EV_TICK,			/* gossip: publish and refresh */
	EV_SAMPLE,			/* steady: sample the imbalance */
};

struct event {
	int64_t t;			/* when, microseconds */
	uint32_t type;			/* enum ev_type */
	uint32_t a;			/* node, or create record */
	uint64_t version;		/* EV_REPLY: the version that counts it, 0 = refused */
};

/* A min-heap of events by time. */
struct heap {
	struct event *ev;		/* the events, heap-ordered */
	size_t n, cap;			/* count and room */
};

/* A create between its arrival and its end (placed or failed). */
struct create {
	struct place_try t;		/* the targets tried */
	uint32_t sender;		/* node it arrived at */
	uint32_t target;		/* node it was forwarded to */
	uint32_t next_free;		/* free list link */
};

/* One published state of a node. */
struct snap {
	int64_t t;			/* when published, microseconds */
	uint64_t version;		/* its version */
	uint32_t used;			/* sandboxes, those being created included */
	uint32_t queue;			/* being created */
};

struct node {
	char name[16];			/* "n000" */
	uint32_t used;			/* true state: sandboxes, being created included */
	uint32_t queue;			/* true state: admitted, reply not yet sent */
	uint64_t version;		/* last version published */
	struct snap *ring;		/* the last published states, ring of nring */
	struct place *place;		/* its placer */
	struct place_node *view;	/* its view of every node */
	int64_t *view_t;		/* when each view entry was published */
};

/* Everything one run counts. */
struct stats {
	uint64_t arrived;		/* creates arrived */
	uint64_t placed;		/* admitted somewhere */
	uint64_t chooses;		/* place_choose() calls */
	uint64_t refused;		/* admissions refused */
	uint64_t failed;		/* creates given up (no_capacity) */
	uint64_t failed_busy;		/* of them after max attempts */
	uint64_t local;			/* placed on the node it arrived at */
	double first_fail_fill;		/* cluster occupancy at the first failure (-1: none) */
	double stale_sum;		/* staleness of the chosen target's view entry, seconds, summed */
	uint64_t stale_n;		/* placements summed there */
	double imb_sum;			/* steady: max/mean - 1 summed over samples */
	double imb_max;			/* steady: the largest sample */
	uint64_t imb_n;			/* samples */
	double *imb_sorted;		/* steady: every sample, for the p99 */
	double fill_imb[5];		/* fill: max/mean - 1 at 10, 25, 50, 75, 90 % */
	double peak_imb;		/* fill: at the end (the peak) */
	double peak_fill;		/* fill: occupancy then */
};

struct sim {
	const struct opts *o;		/* options */
	const struct variant *v;	/* policy */
	struct node *nodes;		/* the cluster */
	unsigned nring;			/* snapshots kept per node */
	struct heap h;			/* events */
	struct create *cr;		/* create records */
	uint32_t ncr, crfree;		/* records made, free list head (UINT32_MAX: none) */
	uint32_t live;			/* records in use: creates not yet placed or failed */
	uint64_t rng;			/* the simulation's generator (not the placers') */
	uint64_t total_used;		/* sandboxes in the cluster */
	uint64_t to_arrive;		/* fill: creates still to come */
	double mu;			/* lifetime lognormal mu */
	int64_t now;			/* current time, microseconds */
	int64_t measure_from;		/* steady: sampling starts */
	int64_t end;			/* steady: the run ends */
	unsigned fill_next;		/* fill: next milestone of fill_imb */
	struct stats s;			/* counters */
	size_t imb_cap;			/* room of s.imb_sorted */
};

static const struct place_req req = { .backend = "container" };

/* ---- events ---- */

static void heap_push(struct heap *h, struct event e)
{
	size_t i;

	if (h->n == h->cap) {
		h->cap = h->cap ? 2 * h->cap : 1024;
		h->ev = xrealloc(h->ev, h->cap * sizeof(*h->ev));
	}
	for (i = h->n++; i > 0 && h->ev[(i - 1) / 2].t > e.t; i = (i - 1) / 2)
		h->ev[i] = h->ev[(i - 1) / 2];
	h->ev[i] = e;
}

static struct event heap_pop(struct heap *h)
{
	struct event top = h->ev[0], last = h->ev[--h->n];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->ev[c + 1].t < h->ev[c].t)
			c++;
		if (h->ev[c].t >= last.t)
			break;
		h->ev[i] = h->ev[c];
		i = c;
	}
	if (h->n)
		h->ev[i] = last;
	return top;
}

static void at(struct sim *m, double delay, uint32_t type, uint32_t a, uint64_t version)
{
	heap_push(&m->h, (struct event){ m->now + (int64_t)(delay * US), type, a, version });
}

/* ---- randomness ---- */

static double uniform(struct sim *m)
{
	return ((place_rand(&m->rng) >> 11) + 0.5) / 9007199254740992.0;
}

static double exponential(struct sim *m, double rate)
{
	return -log(uniform(m)) / rate;
}

static double normal(struct sim *m)
{
	return sqrt(-2 * log(uniform(m))) * cos(2 * M_PI * uniform(m));
}

static double lifetime(struct sim *m, double mu)
{
	return exp(mu + m->o->life_sigma * normal(m));
}

/* ---- the cluster ---- */

static struct create *create_new(struct sim *m, uint32_t sender, uint32_t *id)
{
	struct create *c;

	if (m->crfree != UINT32_MAX) {
		*id = m->crfree;
		m->crfree = m->cr[*id].next_free;
	} else {
		if ((m->ncr & (m->ncr - 1)) == 0)
			m->cr = xrealloc(m->cr, (m->ncr ? 2 * m->ncr : 1) * sizeof(*m->cr));
		*id = m->ncr++;
	}
	c = &m->cr[*id];
	m->live++;
	place_try_init(&c->t);
	c->sender = sender;
	return c;
}

static void create_free(struct sim *m, uint32_t id)
{
	m->cr[id].next_free = m->crfree;
	m->crfree = id;
	m->live--;
}

static double occupancy(const struct sim *m)
{
	return (double)m->total_used / ((double)m->o->nodes * m->o->slots);
}

static double imbalance(const struct sim *m)
{
	uint32_t max = 0;

	if (!m->total_used)
		return 0;
	for (unsigned i = 0; i < m->o->nodes; i++)
		if (m->nodes[i].used > max)
			max = m->nodes[i].used;
	return max / ((double)m->total_used / m->o->nodes) - 1;
}

static void view_set(struct node *obs, unsigned i, const struct snap *sn)
{
	obs->view[i].be[0].used = sn->used;
	obs->view[i].queue = sn->queue;
	obs->view[i].version = sn->version;
	obs->view_t[i] = sn->t;
}

static struct snap truth(const struct sim *m, unsigned i)
{
	const struct node *nd = &m->nodes[i];

	return (struct snap){ m->now, nd->version, nd->used, nd->queue };
}

/* Every node publishes a version; every node refreshes its view. */
static void tick(struct sim *m)
{
	unsigned n = m->o->nodes;

	for (unsigned i = 0; i < n; i++) {
		struct node *nd = &m->nodes[i];

		nd->version++;
		nd->ring[nd->version % m->nring] = truth(m, i);
	}
	for (unsigned j = 0; j < n; j++) {
		struct node *obs = &m->nodes[j];

		for (unsigned i = 0; i < n; i++) {
			const struct node *src = &m->nodes[i];
			double lag = m->o->lag_min + (m->o->lag_max - m->o->lag_min) * uniform(m);
			int64_t by = m->now - (int64_t)(lag * US);

			/* The newest version published by then, if newer than the view's. */
			for (uint64_t v = src->version; v > obs->view[i].version && v + m->nring > src->version;
			     v--) {
				const struct snap *sn = &src->ring[v % m->nring];

				if (sn->version == v && sn->t <= by) {
					view_set(obs, i, sn);
					break;
				}
			}
		}
	}
	at(m, m->o->publish, EV_TICK, 0, 0);
}

static void admit(struct sim *m, unsigned i)
{
	m->nodes[i].used++;
	m->total_used++;
	m->s.placed++;
	at(m, lifetime(m, m->mu), EV_END, i, 0);
}

static void fail(struct sim *m, int e)
{
	m->s.failed++;
	m->s.failed_busy += e == -EBUSY;
	if (m->s.first_fail_fill < 0)
		m->s.first_fail_fill = occupancy(m);
}

/* Places create id from its sender's view: locally at once, or forwarded. */
static void place_create(struct sim *m, uint32_t id)
{
	struct create *c = &m->cr[id];
	struct node *snd = &m->nodes[c->sender];
	struct snap self = truth(m, c->sender);
	size_t target;
	int e;

	view_set(snd, c->sender, &self);
	if (m->o->fresh)
		for (unsigned i = 0; i < m->o->nodes; i++) {
			struct snap sn = truth(m, i);

			view_set(snd, i, &sn);
		}
	m->s.chooses++;
	e = place_choose(snd->place, snd->view, m->o->nodes, &req, &c->t, &target);
	if (e) {
		fail(m, e);
		create_free(m, id);
		return;
	}
	m->s.stale_sum += (m->now - snd->view_t[target]) / US;
	m->s.stale_n++;
	if (target == c->sender) {
		/* Its own entry is exact: it admits what it chose. */
		if (snd->used < m->o->slots) {
			admit(m, c->sender);
			m->s.local++;
			create_free(m, id);
		} else {
			m->s.refused++;
			place_create(m, id);
		}
		return;
	}
	c->target = (uint32_t)target;
	place_inflight_add(snd->place, m->nodes[target].name, &req);
	at(m, m->o->rtt / 2, EV_AT_TARGET, id, 0);
}

static void at_target(struct sim *m, uint32_t id)
{
	struct create *c = &m->cr[id];
	struct node *tg = &m->nodes[c->target];

	if (tg->used >= m->o->slots) {
		m->s.refused++;
		at(m, m->o->rtt / 2, EV_REPLY, id, 0);
		return;
	}
	admit(m, c->target);
	tg->queue++;
	/* The first version it publishes from now on counts the sandbox. */
	at(m, m->o->create + m->o->rtt / 2, EV_REPLY, id, tg->version + 1);
}

static void reply(struct sim *m, uint32_t id, uint64_t version)
{
	struct create *c = &m->cr[id];

	place_inflight_remove(m->nodes[c->sender].place, m->nodes[c->target].name, &req, version);
	if (version) {
		m->nodes[c->target].queue--;
		create_free(m, id);
	} else {
		place_create(m, id);
	}
}

static void arrive(struct sim *m)
{
	uint32_t id;

	m->s.arrived++;
	create_new(m, place_rand_below(&m->rng, m->o->senders ? m->o->senders : m->o->nodes), &id);
	place_create(m, id);
}

static void sample(struct sim *m)
{
	double imb = imbalance(m);

	if (m->s.imb_n == m->imb_cap) {
		m->imb_cap = m->imb_cap ? 2 * m->imb_cap : 1024;
		m->s.imb_sorted = xrealloc(m->s.imb_sorted, m->imb_cap * sizeof(double));
	}
	m->s.imb_sorted[m->s.imb_n++] = imb;
	m->s.imb_sum += imb;
	if (imb > m->s.imb_max)
		m->s.imb_max = imb;
	at(m, 1.0, EV_SAMPLE, 0, 0);
}

static const double fill_marks[5] = { 0.10, 0.25, 0.50, 0.75, 0.90 };

static void sim_init(struct sim *m, const struct opts *o, const struct variant *v)
{
	struct place_conf pc;

	memset(m, 0, sizeof(*m));
	m->o = o;
	m->v = v;
	m->rng = o->seed * 2 + 1;
	m->crfree = UINT32_MAX;
	m->s.first_fail_fill = -1;
	m->nring = (unsigned)ceil(o->lag_max / o->publish) + 3;
	place_conf_default(&pc);
	pc.policy = v->policy;
	pc.k = v->k;
	pc.count_inflight = v->inflight;
	pc.max_attempts = o->attempts;
	m->nodes = xcalloc(o->nodes, sizeof(*m->nodes));
	for (unsigned j = 0; j < o->nodes; j++) {
		struct node *nd = &m->nodes[j];

		snprintf(nd->name, sizeof(nd->name), "n%03u", j);
		nd->ring = xcalloc(m->nring, sizeof(*nd->ring));
		if (place_new(&nd->place, &pc, o->seed * 1000003 + j))
			DSEC_BUG("bad placement settings");
	}
	for (unsigned j = 0; j < o->nodes; j++) {
		struct node *nd = &m->nodes[j];

		nd->view = xcalloc(o->nodes, sizeof(*nd->view));
		nd->view_t = xcalloc(o->nodes, sizeof(*nd->view_t));
		for (unsigned i = 0; i < o->nodes; i++) {
			struct place_node *pn = &nd->view[i];

			pn->name = m->nodes[i].name;
			pn->health = PLACE_ALIVE;
			pn->nbe = 1;
			pn->be[0] = (struct place_backend){ "container", 0, o->slots };
		}
	}
}

static void sim_free(struct sim *m)
{
	for (unsigned j = 0; j < m->o->nodes; j++) {
		place_free(m->nodes[j].place);
		free(m->nodes[j].ring);
		free(m->nodes[j].view);
		free(m->nodes[j].view_t);
	}
	free(m->nodes);
	free(m->h.ev);
	free(m->cr);
	free(m->s.imb_sorted);
}

/* steady: UTIL of the slots taken at the start, spread evenly, each with
 * a residual lifetime of the equilibrium (of a lifetime drawn
 * length-biased, which for a lognormal is mu + sigma^2, a uniform part). */
static void prefill(struct sim *m)
{
	const struct opts *o = m->o;
	uint64_t total = (uint64_t)(o->util * o->nodes * o->slots);
	double mu_biased = m->mu + o->life_sigma * o->life_sigma;

	for (uint64_t j = 0; j < total; j++) {
		unsigned i = (unsigned)(j % o->nodes);

		m->nodes[i].used++;
		m->total_used++;
		at(m, uniform(m) * lifetime(m, mu_biased), EV_END, i, 0);
	}
	for (unsigned i = 0; i < o->nodes; i++) {
		m->nodes[i].ring[0] = truth(m, i);
		for (unsigned j = 0; j < o->nodes; j++)
			view_set(&m->nodes[j], i, &m->nodes[i].ring[0]);
	}
}

/* The median lifetime: given; for fill DSec's 17 min; for steady the
 * one that keeps UTIL of the slots taken at RATE (Little's law:
 * population = rate x mean life, mean = median e^(sigma^2/2)). */
static double life_median(const struct opts *o)
{
	if (o->life_median > 0)
		return o->life_median;
	if (!strcmp(o->scenario, "fill"))
		return 17 * 60;
	return o->util * o->nodes * o->slots / o->rate / exp(o->life_sigma * o->life_sigma / 2);
}

static void run(struct sim *m)
{
	const struct opts *o = m->o;
	bool fill = !strcmp(o->scenario, "fill");

	m->mu = log(life_median(o));
	if (fill) {
		m->to_arrive = (uint64_t)(o->fill * o->nodes * o->slots);
	} else {
		prefill(m);
		m->measure_from = (int64_t)(o->warmup * US);
		m->end = (int64_t)((o->warmup + o->duration) * US);
		heap_push(&m->h, (struct event){ m->measure_from, EV_SAMPLE, 0, 0 });
	}
	at(m, o->publish, EV_TICK, 0, 0);
	at(m, exponential(m, o->rate), EV_ARRIVE, 0, 0);
	while (m->h.n) {
		struct event e = heap_pop(&m->h);

		m->now = e.t;
		if (!fill && m->now >= m->end)
			break;
		switch (e.type) {
		case EV_ARRIVE:
			if (fill && !m->to_arrive)
				break;
			arrive(m);
			if (fill && !--m->to_arrive)
				break;
			at(m, exponential(m, o->rate), EV_ARRIVE, 0, 0);
			break;
		case EV_AT_TARGET:
			at_target(m, e.a);
			break;
		case EV_REPLY:
			reply(m, e.a, e.version);
			break;
		case EV_END:
			m->nodes[e.a].used--;
			m->total_used--;
			break;
		case EV_TICK:
			/* fill: stop once every create is placed or failed. */
			if (fill && !m->to_arrive && !m->live) {
				m->s.peak_imb = imbalance(m);
				m->s.peak_fill = occupancy(m);
				return;
			}
			tick(m);
			break;
		case EV_SAMPLE:
			sample(m);
			break;
		}
		if (fill)
			while (m->fill_next < 5 && occupancy(m) >= fill_marks[m->fill_next])
				m->s.fill_imb[m->fill_next++] = imbalance(m);
	}
	m->s.peak_imb = imbalance(m);
	m->s.peak_fill = occupancy(m);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void report_head(const struct opts *o)
{
	if (!strcmp(o->scenario, "fill"))
		printf("| policy | max/mean-1 at 10 %% | 25 %% | 50 %% | 75 %% | 90 %% | at the end (%% full) | "
		       "refusals / create | retries / create | failed | full at 1st failure | view age s |\n"
		       "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	else
		printf("| policy | max/mean-1 mean | p99 | max | refusals / create | retries / create | "
		       "failed | view age s |\n|---|---|---|---|---|---|---|---|\n");
}

static void report_row(const struct sim *m)
{
	const struct stats *s = &m->s;
	double per = s->arrived ? 1.0 / s->arrived : 0;
	double age = s->stale_n ? s->stale_sum / s->stale_n : 0;

	printf("| %s | ", m->v->label);
	if (!strcmp(m->o->scenario, "fill")) {
		for (unsigned i = 0; i < 5; i++)
			printf(i < m->fill_next ? "%.2f %% | " : "- | ", 100 * s->fill_imb[i]);
		printf("%.2f %% (%.1f) | ", 100 * s->peak_imb, 100 * s->peak_fill);
	} else {
		double p99 = 0;

		if (s->imb_n) {
			qsort(s->imb_sorted, s->imb_n, sizeof(double), cmp_double);
			p99 = s->imb_sorted[(size_t)(0.99 * (s->imb_n - 1))];
		}
		printf("%.2f %% | %.2f %% | %.2f %% | ", s->imb_n ? 100 * s->imb_sum / s->imb_n : 0,
		       100 * p99, 100 * s->imb_max);
	}
	printf("%.4f | %.4f | %llu", s->refused * per, (s->chooses - s->arrived) * per,
	       (unsigned long long)s->failed);
	if (s->failed_busy)
		printf(" (%llu after %u attempts)", (unsigned long long)s->failed_busy, m->o->attempts);
	if (!strcmp(m->o->scenario, "fill")) {
		if (s->first_fail_fill >= 0)
			printf(" | %.2f %%", 100 * s->first_fail_fill);
		else
			printf(" | none");
	}
	printf(" | %.2f |\n", age);
	fflush(stdout);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: place-sim [--scenario fill|steady] [--policy power_k|random|least_loaded|all]\n"
		"                 [--k K] [--inflight 0|1] [--nodes N] [--slots S] [--rate R]\n"
		"                 [--senders N]\n"
		"                 [--fill F] [--util U] [--warmup S] [--duration S]\n"
		"                 [--life-median S] [--life-sigma X] [--publish S]\n"
		"                 [--lag-min S] [--lag-max S] [--fresh] [--rtt S] [--create S]\n"
		"                 [--attempts N] [--seed N]\n"
		"Prints a markdown table: one row per policy (see the source's head).\n");
}

static double num(const char *s, const char *what)
{
	char *end;
	double v = strtod(s, &end);

	if (*s == '\0' || *end != '\0' || v < 0) {
		fprintf(stderr, "place-sim: invalid %s '%s'\n", what, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	struct opts o = {
		.nodes = 160, .slots = 3200, .rate = 5000, .scenario = "fill", .fill = 1.0,
		.util = 0.75, .warmup = 300, .duration = 600, .life_median = 0, .life_sigma = 1.05,
		.publish = 0.2, .lag_min = 0.2, .lag_max = 1.0, .rtt = 0.0005, .create = 0.1,
		.attempts = 3, .policy = "all", .k = 2, .inflight = -1, .seed = 1,
	};
	static const struct option lo[] = {
		{ "scenario", 1, NULL, 'S' }, { "policy", 1, NULL, 'p' }, { "k", 1, NULL, 'k' },
		{ "inflight", 1, NULL, 'i' }, { "nodes", 1, NULL, 'n' }, { "slots", 1, NULL, 's' },
		{ "rate", 1, NULL, 'r' }, { "senders", 1, NULL, 'e' }, { "fill", 1, NULL, 'f' }, { "util", 1, NULL, 'u' },
		{ "warmup", 1, NULL, 'w' }, { "duration", 1, NULL, 'd' },
		{ "life-median", 1, NULL, 'm' }, { "life-sigma", 1, NULL, 'g' },
		{ "publish", 1, NULL, 'P' }, { "lag-min", 1, NULL, 'l' }, { "lag-max", 1, NULL, 'L' },
		{ "fresh", 0, NULL, 'F' }, { "rtt", 1, NULL, 'R' }, { "create", 1, NULL, 'c' },
		{ "attempts", 1, NULL, 'a' }, { "seed", 1, NULL, 'x' }, { "help", 0, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct variant one;
	const struct variant *vs = all_variants;
	size_t nv = DSEC_ARRAY_LEN(all_variants);
	int c;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'S': o.scenario = optarg; break;
		case 'p': o.policy = optarg; break;
		case 'k': o.k = (unsigned)num(optarg, "k"); break;
		case 'i': o.inflight = (int)num(optarg, "inflight") != 0; break;
		case 'n': o.nodes = (unsigned)num(optarg, "nodes"); break;
		case 's': o.slots = (unsigned)num(optarg, "slots"); break;
		case 'r': o.rate = num(optarg, "rate"); break;
		case 'e': o.senders = (unsigned)num(optarg, "senders"); break;
		case 'f': o.fill = num(optarg, "fill"); break;
		case 'u': o.util = num(optarg, "util"); break;
		case 'w': o.warmup = num(optarg, "warmup"); break;
		case 'd': o.duration = num(optarg, "duration"); break;
		case 'm': o.life_median = num(optarg, "life median"); break;
		case 'g': o.life_sigma = num(optarg, "life sigma"); break;
		case 'P': o.publish = num(optarg, "publish"); break;
		case 'l': o.lag_min = num(optarg, "lag min"); break;
		case 'L': o.lag_max = num(optarg, "lag max"); break;
		case 'F': o.fresh = true; break;
		case 'R': o.rtt = num(optarg, "rtt"); break;
		case 'c': o.create = num(optarg, "create"); break;
		case 'a': o.attempts = (unsigned)num(optarg, "attempts"); break;
		case 'x': o.seed = (uint64_t)num(optarg, "seed"); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc || o.nodes < 1 || o.slots < 1 || o.rate <= 0 || o.publish <= 0 ||
	    o.lag_max < o.lag_min || (strcmp(o.scenario, "fill") && strcmp(o.scenario, "steady")) ||
	    o.attempts < 1 || o.attempts > PLACE_TRIES_MAX || o.k < 1 || o.senders > o.nodes) {
		usage(stderr);
		return 2;
	}
	if (strcmp(o.policy, "all")) {
		if (place_policy_parse(o.policy, &one.policy)) {
			fprintf(stderr, "place-sim: unknown policy '%s'\n", o.policy);
			return 2;
		}
		one.k = o.k;
		one.inflight = o.inflight != 0 && (o.inflight == 1 || one.policy != PLACE_LEAST_LOADED);
		one.label = o.policy;
		vs = &one;
		nv = 1;
	}
	printf("%u nodes x %u slots, %.0f creates/s arriving at ", o.nodes, o.slots, o.rate);
	if (o.senders)
		printf("the first %u node(s)", o.senders);
	else
		printf("any node");
	printf(", %s", o.scenario);
	if (!strcmp(o.scenario, "fill"))
		printf(" to %.0f %% of the slots", 100 * o.fill);
	else
		printf(" at %.0f %% for %.0f s after %.0f s", 100 * o.util, o.duration, o.warmup);
	printf("; lifetimes lognormal sigma %.2f, median %.0f s; gossip every %.2f s, lag %.2f-%.2f s%s;"
	       " rtt %.4f s, create %.3f s; %u attempts; seed %llu\n\n", o.life_sigma,
	       life_median(&o),
	       o.publish, o.lag_min, o.lag_max, o.fresh ? " (views exact: --fresh)" : "", o.rtt,
	       o.create, o.attempts, (unsigned long long)o.seed);
	report_head(&o);
	for (size_t i = 0; i < nv; i++) {
		struct sim m;

		sim_init(&m, &o, &vs[i]);
		run(&m);
		report_row(&m);
		sim_free(&m);
	}
	return 0;
}
