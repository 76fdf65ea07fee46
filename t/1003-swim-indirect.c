/* 1003-swim-indirect - a member node 0 cannot reach directly is probed
 * through k helpers, whose relayed acks keep it alive. */
#include "swim-test.h"

static bool cut;	/* drop everything between node 0 and node 5 */
static unsigned ipings_from0;

static void on_msg(void *arg, const msgpack_object *a, uint32_t n)
{
	if (a[0].via.u64 == 2)
		ipings_from0++;
}

static bool filter(void *arg, unsigned from, unsigned to, const void *buf, size_t len)
{
	if (from == 0)
		pkt_each(buf, len, on_msg, NULL);
	return cut && ((from == 0 && to == 5) || (from == 5 && to == 0));
}

int main(void)
{
	struct swim_sim_conf net = { .seed = 3, .latency_us = 300 };

	plan(5);
	ok(cluster(&net, 8, NULL, 60), "8 nodes converge");
	swim_sim_set_filter(tsim, filter, NULL);
	cut = true;
	struct swim_stats before = stats_of(0);
	ipings_from0 = 0;
	swim_sim_advance(tsim, 60 * SEC);
	struct swim_stats after = stats_of(0);
	ok(after.indirect_probes > before.indirect_probes, "node 0 asked helpers (%llu indirect pings)",
	   (unsigned long long)(after.indirect_probes - before.indirect_probes));
	ok(ipings_from0 % 3 == 0 && ipings_from0 > 0, "k = 3 helpers each time (%u requests)", ipings_from0);
	is_int(tev_count(SWIM_EV_SUSPECT, "n5", -1), 0, "n5 never suspected: the relayed acks came back");
	ok(all_see(5, SWIM_ALIVE), "everyone sees n5 alive");
	swim_sim_free(tsim);
	return done_testing();
}
