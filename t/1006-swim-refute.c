/* 1006-swim-refute - a member that hears itself suspected (or declared
 * dead) refutes with a higher incarnation; the others take it back as
 * alive; its health score rises by one. */
#include "swim-test.h"

int main(void)
{
	struct swim_sim_conf net = { .seed = 6, .latency_us = 300 };

	plan(7);
	ok(cluster(&net, 6, NULL, 60), "6 nodes converge");
	uint64_t inc = member_of(1, 3).incarnation;
	inject_accuse(1, 6, "n3", inc, "n4");	/* n1 hears: n4 suspects n3 */
	ok(member_of(1, 3).state == SWIM_SUSPECT, "n1 takes n3 as suspect");
	swim_sim_advance(tsim, 10 * SEC);
	ok(member_of(3, 3).incarnation > inc, "n3 raised its incarnation (%llu -> %llu)",
	   (unsigned long long)inc, (unsigned long long)member_of(3, 3).incarnation);
	is_int(stats_of(3).refutations, 1, "one refutation counted");
	ok(all_see(3, SWIM_ALIVE), "everyone sees n3 alive again");
	is_int(tev_count(SWIM_EV_DEAD, "n3", -1), 0, "nobody declared it dead");
	/* A stale accusation (the old incarnation) is ignored. */
	inject_accuse(2, 7, "n3", inc, "n4");
	swim_sim_advance(tsim, 5 * SEC);
	ok(all_see(3, SWIM_ALIVE) && tev_count(SWIM_EV_DEAD, "n3", -1) == 0,
	   "a dead message about the old incarnation changes nothing");
	swim_sim_free(tsim);
	return done_testing();
}
