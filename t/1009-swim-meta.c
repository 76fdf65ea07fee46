/* 1009-swim-meta - each member's metadata blob has its own version: a
 * newer one replaces an older one (reported as an update), never the
 * reverse; it travels by piggyback and by push-pull to a new member. */
#include "swim-test.h"

static bool meta_is(unsigned node, unsigned subject, const char *want)
{
	struct swim_member m = member_of(node, subject);
	return m.meta_len == strlen(want) && !memcmp(m.meta, want, m.meta_len);
}

static bool everyone_has(void *want)
{
	for (unsigned i = 0; i < swim_sim_count(tsim); i++)
		if (!meta_is(i, 0, want))
			return false;
	return true;
}

int main(void)
{
	struct swim_sim_conf net = { .seed = 9, .latency_us = 300 };
	struct swim_conf c = { .meta = "cpu=8", .meta_len = 5 };

	plan(8);
	ok(cluster(&net, 6, &c, 60), "6 nodes with metadata converge");
	ok(meta_is(3, 0, "cpu=8"), "n3 has n0's first metadata");
	swim_set_meta(swim_sim_node(tsim, 0), "cpu=4", 5);
	uint64_t ver = member_of(0, 0).meta_version;
	ok(run_until(everyone_has, "cpu=4", 10), "an update reaches everyone");
	ok(tev_count(SWIM_EV_UPDATE, "n0", -1) >= 5, "reported as an update (%zu)",
	   tev_count(SWIM_EV_UPDATE, "n0", -1));
	/* An older version (replayed gossip) is ignored. */
	uint64_t inc = member_of(2, 0).incarnation;
	inject_alive(2, "n0", swim_sim_addr(tsim, 0), inc, ver - 1, "cpu=1");
	ok(meta_is(2, 0, "cpu=4"), "an older version does not replace a newer one");
	inject_alive(2, "n0", swim_sim_addr(tsim, 0), inc, ver, "cpu=1");
	ok(meta_is(2, 0, "cpu=4"), "nor does the same version");
	/* A newer one does, even without a new incarnation. */
	inject_alive(2, "n0", swim_sim_addr(tsim, 0), inc, ver + 1, "cpu=2");
	ok(meta_is(2, 0, "cpu=2"), "a newer version replaces it");
	/* A late joiner learns it by push-pull. */
	unsigned j = swim_sim_add(tsim, &c);
	swim_sim_join(tsim, j, 1);
	swim_sim_advance(tsim, SEC);
	ok(meta_is(j, 0, "cpu=2"), "a new member has it right after its join's push-pull");
	swim_sim_free(tsim);
	return done_testing();
}
