/* 1013-swim-leave - a graceful leave is seen as left, not dead; the
 * leave's dissemination ends in a bounded time. */
#include "swim-test.h"

static bool all_left(void *arg)
{
	return all_see(*(unsigned *)arg, SWIM_LEFT);
}

int main(void)
{
	struct swim_sim_conf net = { .seed = 13, .loss = 0.01, .latency_us = 300 };
	unsigned who = 4;

	plan(7);
	ok(cluster(&net, 8, NULL, 60), "8 nodes converge");
	ntevs = 0;
	struct swim *s = swim_sim_node(tsim, who);
	swim_leave(s);
	ok(swim_leave_pending(s), "the leave is being disseminated");
	unsigned t;
	for (t = 0; t < 100 && swim_leave_pending(s); t++)
		swim_sim_advance(tsim, SEC / 10);
	ok(!swim_leave_pending(s), "done within %.1f s", t / 10.0);
	swim_sim_kill(tsim, who);	/* the process exits */
	ok(run_until(all_left, &who, 30), "every other member sees n4 left");
	is_int(tev_count(SWIM_EV_DEAD, "n4", -1), 0, "nobody reports it dead");
	swim_sim_free(tsim);

	/* A node with nobody to tell (alone, or cut off from the others by
	 * another cluster key) does not hold its daemon's shutdown. */
	ok(cluster(&net, 1, NULL, 5), "a cluster of one");
	s = swim_sim_node(tsim, 0);
	swim_leave(s);
	ok(!swim_leave_pending(s), "alone, its leave is not pending: nobody to tell");
	swim_sim_free(tsim);
	return done_testing();
}
