/* swim-sim - the real libswim code, N nodes under simulated time and a
 * simulated network: detection time of killed nodes next to the SWIM
 * bound, false "dead" verdicts on healthy nodes, bytes per node per
 * second; with Lifeguard on, off, or both side by side (--compare).
 *
 *   swim-sim [-n nodes] [-l loss] [-L latency_ms] [-J jitter_ms]
 *            [-d seconds] [-k kills] [-s seed] [--slow fraction]
 *            [--slow-delay ms] [--slow-loss p] [--no-awareness]
 *            [--no-suspicion-scaling] [--no-nack] [--no-lifeguard]
 *            [--compare]
 *
 * Phases: the nodes join one by one (each through a random earlier one)
 * and the run waits for every node to see every other alive; then
 * `seconds` of steady state in which any "dead" verdict is a false one
 * (the false-positive figure, and the bytes); then `kills` nodes are
 * killed 5 s apart and each survivor's time to declare each dead is
 * recorded.  Slow nodes (--slow) handle each datagram they receive
 * between half of --slow-delay and --slow-delay later and lose --slow-loss of them (a starved or
 * overloaded host, the case Lifeguard is for); they are "unhealthy"
 * themselves, and a verdict they make on a healthy node counts too.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "swim.h"
#include "swim_sim.h"
#include "util.h"

#define SEC 1000000ull

/* What one run was asked. */
struct opts {
	unsigned n;		/* nodes */
	double loss;		/* datagram loss */
	double latency_ms;	/* one-way base latency */
	double jitter_ms;	/* mean exponential jitter */
	unsigned seconds;	/* steady state for false positives */
	unsigned kills;		/* nodes killed for detection times */
	uint64_t seed;		/* of everything random */
	double slow;		/* fraction of slow nodes */
	double slow_delay_ms;	/* their receive delay, max */
	double slow_loss;	/* their receive loss */
	unsigned flags;		/* SWIM_NO_* */
};

/* What one run measured. */
struct result {
	double join_s;			/* until converged */
	bool converged;			/* it did */
	uint64_t false_dead;		/* dead verdicts on live nodes, steady state */
	uint64_t false_dead_healthy;	/* of those, on a healthy (not slow) node */
	uint64_t suspects;		/* suspect events in steady state */
	double bytes_per_node_s;	/* datagrams + streams, steady state */
	double pkts_per_node_s;		/* datagrams, steady state */
	double *detect;			/* each (kill, observer) time, s */
	size_t ndetect;			/* how many */
	double *detect_all;		/* each kill: until the last observer, s */
	size_t nall;			/* how many */
	uint64_t undetected;		/* (kill, observer) pairs never declared */
};

/* The run in progress (the event hook's state). */
static struct {
	struct swim_sim *sim;	/* the simulation */
	bool *up;		/* node i is running */
	bool *slow;		/* node i is slow */
	bool steady;		/* counting false positives */
	bool detecting;		/* recording detections */
	uint64_t *killed_at;	/* node i killed at (0: not) */
	double **seen_at;	/* [victim slot][observer] detection time, s */
	unsigned *victims;	/* killed nodes */
	unsigned nvictims;	/* how many */
	struct result *r;	/* where figures go */
} run;

static int node_of(const char *name)
{
	unsigned i;

	return sscanf(name, "n%u", &i) == 1 ? (int)i : -1;
}

static void on_event(void *arg, unsigned node, enum swim_event ev, const struct swim_member *m)
{
	int subj = node_of(m->name);

	if (subj < 0)
		return;
	if (ev == SWIM_EV_SUSPECT && run.steady)
		run.r->suspects++;
	if (ev != SWIM_EV_DEAD)
		return;
	if (run.up[subj]) {
		if (run.steady) {
			run.r->false_dead++;
			run.r->false_dead_healthy += !run.slow[subj];
		}
		return;
	}
	if (!run.detecting || !run.killed_at[subj])
		return;
	for (unsigned v = 0; v < run.nvictims; v++)
		if (run.victims[v] == (unsigned)subj && run.seen_at[v][node] < 0)
			run.seen_at[v][node] =
				(double)(swim_sim_now(run.sim) - run.killed_at[subj]) / 1e6;
}

/* Does every node up see every other node up as alive?  (The sim's own
 * check, without the dead: a killed node is not waited for.) */
static bool converged(struct swim_sim *sim, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct swim *s = swim_sim_node(sim, i);

		if (s && swim_alive_count(s) != n)
			return false;
	}
	return swim_sim_converged(sim);
}

static void totals(struct swim_sim *sim, unsigned n, uint64_t *bytes, uint64_t *pkts)
{
	*bytes = *pkts = 0;
	for (unsigned i = 0; i < n; i++) {
		struct swim_stats st;

		if (!swim_sim_node(sim, i))
			continue;
		swim_stats(swim_sim_node(sim, i), &st);
		*bytes += st.bytes_sent + st.stream_bytes / 2;	/* each stream byte counted twice */
		*pkts += st.pkts_sent;
	}
}

static void simulate(const struct opts *o, struct result *r)
{
	struct swim_sim_conf net = {
		.seed = o->seed, .loss = o->loss,
		.latency_us = (uint64_t)(o->latency_ms * 1000), .jitter_us = (uint64_t)(o->jitter_ms * 1000),
	};
	struct swim_conf c = { .flags = o->flags };
	struct swim_sim *sim = swim_sim_new(&net);
	unsigned n = o->n;

	memset(r, 0, sizeof(*r));
	memset(&run, 0, sizeof(run));
	run.sim = sim;
	run.r = r;
	run.up = xcalloc(n, sizeof(*run.up));
	run.slow = xcalloc(n, sizeof(*run.slow));
	run.killed_at = xcalloc(n, sizeof(*run.killed_at));
	swim_sim_set_event(sim, on_event, NULL);

	/* Join: one every 20 ms, each through a random earlier node. */
	uint64_t rng = o->seed * 2654435761u + 1;
	for (unsigned i = 0; i < n; i++) {
		swim_sim_add(sim, &c);
		run.up[i] = true;
		if (i) {
			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			swim_sim_join(sim, i, (unsigned)((rng >> 33) % i));
		}
		swim_sim_advance(sim, 20000);
	}
	unsigned t;
	for (t = 0; t < 600 && !converged(sim, n); t += 5)
		swim_sim_advance(sim, 5 * SEC);
	r->converged = converged(sim, n);
	r->join_s = (double)swim_sim_now(sim) / 1e6;

	/* Slow nodes, chosen at random, from now on. */
	unsigned nslow = (unsigned)(o->slow * n + 0.5);
	for (unsigned k = 0; k < nslow; k++) {
		unsigned i;
		do {
			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			i = (unsigned)((rng >> 33) % n);
		} while (run.slow[i]);
		run.slow[i] = true;
		swim_sim_set_slow(sim, i, (uint64_t)(o->slow_delay_ms * 1000), o->slow_loss);
	}

	/* Steady state. */
	uint64_t b0, p0, b1, p1;
	totals(sim, n, &b0, &p0);
	run.steady = true;
	swim_sim_advance(sim, (uint64_t)o->seconds * SEC);
	run.steady = false;
	totals(sim, n, &b1, &p1);
	r->bytes_per_node_s = (double)(b1 - b0) / n / o->seconds;
	r->pkts_per_node_s = (double)(p1 - p0) / n / o->seconds;

	/* Kills, 5 s apart, of healthy nodes. */
	run.victims = xcalloc(o->kills + 1, sizeof(*run.victims));
	run.seen_at = xcalloc(o->kills + 1, sizeof(*run.seen_at));
	run.detecting = true;
	for (unsigned k = 0; k < o->kills && k < n / 2; k++) {
		unsigned i;
		do {
			rng = rng * 6364136223846793005ull + 1442695040888963407ull;
			i = (unsigned)((rng >> 33) % n);
		} while (!run.up[i] || run.slow[i]);
		run.seen_at[k] = xmalloc(n * sizeof(double));
		for (unsigned j = 0; j < n; j++)
			run.seen_at[k][j] = -1;
		run.victims[run.nvictims++] = i;
		run.up[i] = false;
		run.killed_at[i] = swim_sim_now(sim);
		swim_sim_kill(sim, i);
		swim_sim_advance(sim, 5 * SEC);
	}
	swim_sim_advance(sim, 180 * SEC);
	r->detect = xmalloc((size_t)run.nvictims * n * sizeof(double));
	r->detect_all = xmalloc((run.nvictims + 1) * sizeof(double));
	for (unsigned v = 0; v < run.nvictims; v++) {
		double last = 0;
		bool all = true;

		for (unsigned j = 0; j < n; j++) {
			if (!run.up[j])
				continue;
			double at = run.seen_at[v][j];
			if (at < 0) {
				r->undetected++;
				all = false;
				continue;
			}
			r->detect[r->ndetect++] = at;
			last = at > last ? at : last;
		}
		if (all)
			r->detect_all[r->nall++] = last;
		free(run.seen_at[v]);
	}
	free(run.seen_at);
	free(run.victims);
	free(run.up);
	free(run.slow);
	free(run.killed_at);
	swim_sim_free(sim);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p)
{
	if (!n)
		return NAN;
	qsort(v, n, sizeof(*v), cmp_double);
	size_t i = (size_t)ceil(p * (double)n) - 1;
	return v[i < n ? i : n - 1];
}

static void report(const char *label, const struct opts *o, struct result *r)
{
	printf("%s:\n", label);
	printf("  join: %s after %.0f s simulated\n", r->converged ? "converged" : "NOT converged",
	       r->join_s);
	printf("  steady state %u s: %llu false dead verdicts (%llu on healthy nodes), %llu suspicions\n",
	       o->seconds, (unsigned long long)r->false_dead, (unsigned long long)r->false_dead_healthy,
	       (unsigned long long)r->suspects);
	printf("  traffic: %.0f bytes/s and %.1f datagrams/s sent per node\n", r->bytes_per_node_s,
	       r->pkts_per_node_s);
	printf("  detection, each survivor of %u kills (%zu): median %.2f s, p99 %.2f s, max %.2f s"
	       ", %llu never\n", o->kills, r->ndetect, pct(r->detect, r->ndetect, 0.5),
	       pct(r->detect, r->ndetect, 0.99), pct(r->detect, r->ndetect, 1.0),
	       (unsigned long long)r->undetected);
	printf("  detection by all survivors, per kill (%zu): median %.2f s, max %.2f s\n", r->nall,
	       pct(r->detect_all, r->nall, 0.5), pct(r->detect_all, r->nall, 1.0));
	free(r->detect);
	free(r->detect_all);
}

/* What SWIM promises for these parameters (defaults): the first probe of
 * a failed member comes after e/(e-1) periods on average with random
 * targets and within one round (n-1 periods) with round-robin; then the
 * suspicion timeout (min when k confirmations came, max without any);
 * then dissemination in O(log n) gossip periods. */
static void bound(const struct opts *o)
{
	double T = 1.0, e = exp(1.0);
	double min = (double)swim_suspicion_min(4, o->n, SEC) / 1e6, max = min * 6;
	unsigned lim = swim_retransmit_limit(4, o->n);

	printf("SWIM bound at n=%u (defaults): first probe of the dead member %.2f s expected "
	       "(T*e/(e-1)), %u s at worst (a round-robin round); suspicion %.0f s with %u "
	       "confirmations .. %.0f s with none; dissemination ~%.1f s (log2 n gossip rounds "
	       "of 200 ms); expected total %.1f .. %.1f s\n",
	       o->n, T * e / (e - 1), o->n - 1, min, 2u, max, log2(o->n) * 0.2, T * e / (e - 1) + min +
	       log2(o->n) * 0.2, T * e / (e - 1) + max + log2(o->n) * 0.2);
	printf("  (each broadcast sent %u times per node)\n", lim);
}

static void usage(void)
{
	fprintf(stderr, "usage: swim-sim [-n nodes] [-l loss] [-L latency_ms] [-J jitter_ms] [-d seconds]\n"
		"                [-k kills] [-s seed] [--slow fraction] [--slow-delay ms] [--slow-loss p]\n"
		"                [--no-awareness] [--no-suspicion-scaling] [--no-nack] [--no-lifeguard]\n"
		"                [--compare]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct opts o = {
		.n = 1000, .loss = 0.05, .latency_ms = 0.5, .jitter_ms = 0.5, .seconds = 600,
		.kills = 20, .seed = 1, .slow = 0, .slow_delay_ms = 3000, .slow_loss = 0,
	};
	bool compare = false;
	enum { O_SLOW = 256, O_SLOW_DELAY, O_SLOW_LOSS, O_NO_AW, O_NO_SS, O_NO_NACK, O_NO_LG, O_CMP };
	static const struct option lopts[] = {
		{ "slow", required_argument, NULL, O_SLOW },
		{ "slow-delay", required_argument, NULL, O_SLOW_DELAY },
		{ "slow-loss", required_argument, NULL, O_SLOW_LOSS },
		{ "no-awareness", no_argument, NULL, O_NO_AW },
		{ "no-suspicion-scaling", no_argument, NULL, O_NO_SS },
		{ "no-nack", no_argument, NULL, O_NO_NACK },
		{ "no-lifeguard", no_argument, NULL, O_NO_LG },
		{ "compare", no_argument, NULL, O_CMP },
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	while ((ch = getopt_long(argc, argv, "n:l:L:J:d:k:s:h", lopts, NULL)) != -1) {
		switch (ch) {
		case 'n': o.n = (unsigned)atoi(optarg); break;
		case 'l': o.loss = atof(optarg); break;
		case 'L': o.latency_ms = atof(optarg); break;
		case 'J': o.jitter_ms = atof(optarg); break;
		case 'd': o.seconds = (unsigned)atoi(optarg); break;
		case 'k': o.kills = (unsigned)atoi(optarg); break;
		case 's': o.seed = strtoull(optarg, NULL, 0); break;
		case O_SLOW: o.slow = atof(optarg); break;
		case O_SLOW_DELAY: o.slow_delay_ms = atof(optarg); break;
		case O_SLOW_LOSS: o.slow_loss = atof(optarg); break;
		case O_NO_AW: o.flags |= SWIM_NO_AWARENESS; break;
		case O_NO_SS: o.flags |= SWIM_NO_SUSPICION_SCALING; break;
		case O_NO_NACK: o.flags |= SWIM_NO_NACK; break;
		case O_NO_LG: o.flags |= SWIM_NO_LIFEGUARD; break;
		case O_CMP: compare = true; break;
		default: usage();
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (optind != argc || o.n < 2 || o.seconds < 1 || o.loss < 0 || o.loss >= 1)
		usage();
	printf("swim-sim: %u nodes, loss %.1f %%, latency %.2f ms + exp(%.2f ms), %u s steady, %u kills, "
	       "seed %llu, slow %.1f %% (+%.0f ms, loss %.0f %%)\n", o.n, o.loss * 100, o.latency_ms,
	       o.jitter_ms, o.seconds, o.kills, (unsigned long long)o.seed, o.slow * 100,
	       o.slow_delay_ms, o.slow_loss * 100);
	bound(&o);

	struct result r, base;
	if (!compare) {
		simulate(&o, &r);
		report(o.flags ? "lifeguard parts off as asked" : "lifeguard", &o, &r);
		return 0;
	}
	struct opts off = o;
	off.flags = SWIM_NO_LIFEGUARD;
	simulate(&o, &r);
	uint64_t fp_on = r.false_dead_healthy;
	report("lifeguard on", &o, &r);
	simulate(&off, &base);
	uint64_t fp_off = base.false_dead_healthy;
	report("lifeguard off (no awareness, no suspicion scaling, no nacks)", &off, &base);
	if (fp_on && fp_off >= fp_on)
		printf("false dead verdicts on healthy nodes: %.1fx fewer with lifeguard (%llu vs %llu)\n",
		       (double)fp_off / fp_on, (unsigned long long)fp_on, (unsigned long long)fp_off);
	else
		printf("false dead verdicts on healthy nodes: %llu with lifeguard, %llu without\n",
		       (unsigned long long)fp_on, (unsigned long long)fp_off);
	return 0;
}
