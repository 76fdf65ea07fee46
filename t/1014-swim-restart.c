/* 1014-swim-restart - a node killed and restarted (its state lost) rejoins
 * with a higher incarnation, from the wall clock, and outranks what the
 * others remember of its old self, even while they still hold it dead. */
#include "swim-test.h"

static bool all_alive(void *arg)
{
	return all_see(*(unsigned *)arg, SWIM_ALIVE);
}

static bool all_dead(void *arg)
{
	return all_see(*(unsigned *)arg, SWIM_DEAD);
}

int main(void)
{
	struct swim_sim_conf net = { .seed = 14, .latency_us = 300 };
	unsigned who = 2;

	plan(6);
	ok(cluster(&net, 6, NULL, 60), "6 nodes converge");
	uint64_t old = member_of(0, who).incarnation;
	swim_sim_kill(tsim, who);
	ok(run_until(all_dead, &who, 60), "n2 killed: seen dead");
	ntevs = 0;
	ok(swim_sim_restart(tsim, who, NULL) == 0 && swim_sim_join(tsim, who, 0) == 1,
	   "restarted, joins through n0");
	ok(run_until(all_alive, &who, 30), "everyone sees it alive again");
	ok(member_of(3, who).incarnation > old, "with a higher incarnation (%llu > %llu)",
	   (unsigned long long)member_of(3, who).incarnation, (unsigned long long)old);
	is_int(tev_count(SWIM_EV_ALIVE, "n2", -1), 5, "reported alive again by each of the 5");
	swim_sim_free(tsim);
	return done_testing();
}
