/* 1011-swim-keys - key rotation: a list of accepted keys, the first
 * signs.  Add the new key second everywhere, make it first, drop the old
 * one: the cluster stays whole.  A node with only an unlisted key is
 * refused. */
#include "swim-test.h"

static const struct swim_key k1 = { "cluster-key-one-0123456789abcdef", 32 };
static const struct swim_key k2 = { "cluster-key-two-0123456789abcdef", 32 };

static void set_all(const struct swim_key *keys, size_t n)
{
	for (unsigned i = 0; i < swim_sim_count(tsim); i++)
		swim_set_keys(swim_sim_node(tsim, i), keys, n);
}

int main(void)
{
	struct swim_sim_conf net = { .seed = 11, .latency_us = 300 };
	struct swim_conf c = { .keys = &k1, .nkeys = 1 };

	plan(6);
	ok(cluster(&net, 5, &c, 60), "5 nodes on key 1 converge");
	const struct swim_key both[2] = { k1, k2 }, swapped[2] = { k2, k1 };
	set_all(both, 2);
	/* Mid-rotation: node 0 already signs with key 2, the rest with key 1. */
	swim_set_keys(swim_sim_node(tsim, 0), swapped, 2);
	swim_sim_advance(tsim, 30 * SEC);
	ok(swim_sim_converged(tsim) && tev_count(SWIM_EV_DEAD, NULL, -1) == 0,
	   "one node signing with the new key, all accepting both: whole");
	set_all(swapped, 2);
	swim_sim_advance(tsim, 30 * SEC);
	set_all(&k2, 1);
	swim_sim_advance(tsim, 30 * SEC);
	ok(swim_sim_converged(tsim) && tev_count(SWIM_EV_DEAD, NULL, -1) == 0,
	   "rotated to key 2 alone: whole, nobody dead");
	is_int(stats_of(1).dropped_auth, 0, "no packet was refused on the way");
	/* A node left on key 1 is not let in. */
	unsigned j = swim_sim_add(tsim, &c);
	swim_sim_join(tsim, j, 0);
	swim_sim_advance(tsim, 10 * SEC);
	ok(stats_of(0).dropped_auth > 0, "its join is refused (counted)");
	ok(swim_member_find(swim_sim_node(tsim, 0), swim_sim_name(tsim, j), &(struct swim_member){ 0 }) < 0,
	   "and it is not a member");
	swim_sim_free(tsim);
	return done_testing();
}
