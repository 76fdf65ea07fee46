/* 1007-swim-detect - a killed member is seen dead by every other member
 * within the bound (a probe round, the longest suspicion, dissemination),
 * under 2 % loss, with no false verdict on the living. */
#include "swim-test.h"

static bool all_dead(void *arg)
{
	return all_see(*(unsigned *)arg, SWIM_DEAD);
}

int main(void)
{
	struct swim_sim_conf net = { .seed = 7, .loss = 0.02, .latency_us = 300, .jitter_us = 200 };
	unsigned victim = 13;

	plan(4);
	ok(cluster(&net, 20, NULL, 120), "20 nodes converge under 2 %% loss");
	ntevs = 0;
	uint64_t t0 = swim_sim_now(tsim);
	swim_sim_kill(tsim, victim);
	/* Bound: a round (20 probes of 1 s), max suspicion 4*log10(20)*6 =
	 * 31.2 s, dissemination: 60 s in all, with room. */
	bool dead = run_until(all_dead, &victim, 90);
	ok(dead, "all 19 see n13 dead after %.1f s", (swim_sim_now(tsim) - t0) / 1e6);
	size_t fp = 0;
	for (size_t i = 0; i < ntevs; i++)
		fp += tevs[i].ev == SWIM_EV_DEAD && strcmp(tevs[i].name, "n13");
	is_int(fp, 0, "no living member declared dead");
	is_int(tev_count(SWIM_EV_DEAD, "n13", -1), 19, "each of the 19 reported it once");
	swim_sim_free(tsim);
	return done_testing();
}
