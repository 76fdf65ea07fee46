/* 1005-swim-suspicion - a killed member is suspected, then declared dead
 * after the suspicion timeout: between min and max, shortened by
 * confirmations; exactly min without scaling or in a small cluster. */
#include "swim-test.h"

/* The first suspicion and the first death of n<victim> at any node, and
 * the time between them at the node that declared it first (which ran
 * its own timer: nobody could tell it before). */
static uint64_t timeout_seen(unsigned victim)
{
	char name[16];
	const struct tev *d;

	snprintf(name, sizeof(name), "n%u", victim);
	d = tev_first(SWIM_EV_DEAD, name, -1);
	if (!d)
		return 0;
	const struct tev *s = tev_first(SWIM_EV_SUSPECT, name, (int)d->node);
	return s ? d->at - s->at : 0;
}

static uint64_t run(unsigned n, unsigned flags, unsigned seed)
{
	struct swim_sim_conf net = { .seed = seed, .latency_us = 300 };
	struct swim_conf c = { .flags = flags };

	ntevs = 0;
	if (!cluster(&net, n, &c, 90))
		return 0;
	swim_sim_kill(tsim, n - 1);
	swim_sim_advance(tsim, 120 * SEC);
	uint64_t t = timeout_seen(n - 1);
	swim_sim_free(tsim);
	return t;
}

/* One real node (n0) and fake members f1..f9 at an address nobody
 * answers: n0 alone suspects each fake as it probes it, and the test
 * hands it 0, 1 or 2 independent confirmations. */
static void fakes(void)
{
	struct swim_sim_conf net = { .seed = 8, .latency_us = 300 };
	uint64_t start[10] = { 0 }, dead[10] = { 0 };
	unsigned conf_given[10] = { 0 };

	ntevs = 0;
	tsim = swim_sim_new(&net);
	swim_sim_set_event(tsim, tev_log, NULL);
	swim_sim_add(tsim, NULL);
	for (unsigned i = 1; i <= 9; i++) {
		char name[8];
		snprintf(name, sizeof(name), "f%u", i);
		inject_alive(0, name, "sim-999:7946", 1, 1, "");
	}
	for (unsigned step = 0; step < 100 * 100; step++) {
		swim_sim_advance(tsim, SEC / 100);
		for (unsigned i = 1; i <= 9; i++) {
			char name[8];
			struct swim_member m;
			snprintf(name, sizeof(name), "f%u", i);
			if (swim_member_find(swim_sim_node(tsim, 0), name, &m) < 0)
				continue;
			if (m.state == SWIM_SUSPECT && !start[i]) {
				start[i] = swim_sim_now(tsim);
				/* f1..f3: none, f4..f6: one, f7..f9: two */
				conf_given[i] = (i - 1) / 3;
				for (unsigned c = 0; c < conf_given[i]; c++)
					inject_accuse(0, 6, name, m.incarnation, c ? "f8" : "f9");
			}
			if (m.state == SWIM_DEAD && !dead[i])
				dead[i] = swim_sim_now(tsim);
		}
	}
	/* n = 10: min 4 s, max 24 s, k = 2; one confirmation: 11.381 s. */
	const uint64_t want[3] = { 24 * SEC, swim_suspicion_timeout(4 * SEC, 24 * SEC, 2, 1), 4 * SEC };
	for (unsigned c = 0; c < 3; c++) {
		bool good = true;
		unsigned seen = 0;
		for (unsigned i = 1 + 3 * c; i <= 3 + 3 * c; i++) {
			if (!start[i] || !dead[i])
				continue;
			seen++;
			uint64_t took = dead[i] - start[i];
			good = good && took + SEC / 50 >= want[c] && took <= want[c] + SEC / 50;
		}
		ok(seen > 0 && good, "%u confirmation(s): dead after the formula's %.3f s (%u members)",
		   c, want[c] / 1e6, seen);
	}
	swim_sim_free(tsim);
}

int main(void)
{
	plan(7);
	fakes();
	/* n = 10 (9 after the kill, but the dead count until forgotten):
	 * min = 4 * log10(10) * 1 s = 4 s, max = 24 s, k = 2. */
	uint64_t t = run(10, 0, 5);
	ok(t >= 4 * SEC && t < 24 * SEC, "10 nodes: dead %.3f s after suspect, in [4, 24) s: confirmed",
	   t / 1e6);
	uint64_t none = run(10, SWIM_NO_SUSPICION_SCALING, 5);
	ok(none >= 4 * SEC && none < 4 * SEC + SEC / 2, "no scaling: %.3f s, the minimum", none / 1e6);
	/* 3 nodes: n-2 < k, no confirmations expected: min = 4 s. */
	uint64_t small = run(3, 0, 6);
	ok(small >= 4 * SEC && small < 4 * SEC + SEC / 2, "3 nodes: %.3f s, the minimum", small / 1e6);
	/* 100 nodes: min = 8 s, max = 48 s. */
	uint64_t big = run(100, 0, 7);
	ok(big >= 8 * SEC && big < 48 * SEC, "100 nodes: %.3f s in [8, 48) s", big / 1e6);
	return done_testing();
}
