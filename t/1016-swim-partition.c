/* 1016-swim-partition - a partition long enough for each side to declare
 * the other dead and forget it, then its heal: the sides find each other
 * again by push-pull with the forgotten dead (reconnect) and merge. */
#include "swim-test.h"

/* {n0, n1, n2} | {n3, n4} */
static void split(unsigned g)
{
	swim_sim_partition(tsim, 3, g);
	swim_sim_partition(tsim, 4, g);
}

static bool whole(void *arg)
{
	return swim_sim_converged(tsim);
}

int main(void)
{
	struct swim_sim_conf net = { .seed = 16, .latency_us = 300 };

	plan(5);
	ok(cluster(&net, 5, NULL, 60), "5 nodes converge");
	split(1);
	swim_sim_advance(tsim, 20 * SEC);
	ok(member_of(0, 3).state == SWIM_DEAD && member_of(3, 0).state == SWIM_DEAD,
	   "partitioned: each side sees the other dead");
	swim_sim_advance(tsim, 40 * SEC);
	ok(swim_member_count(swim_sim_node(tsim, 0)) == 3 && swim_member_count(swim_sim_node(tsim, 3)) == 2,
	   "after 30 s the dead are forgotten");
	split(0);
	ntevs = 0;
	uint64_t t0 = swim_sim_now(tsim);
	bool healed = run_until(whole, NULL, 120);
	ok(healed, "healed: one cluster again after %.1f s", (swim_sim_now(tsim) - t0) / 1e6);
	ok(stats_of(0).reconnects + stats_of(3).reconnects > 0, "through reconnect push-pulls");
	swim_sim_free(tsim);
	return done_testing();
}
