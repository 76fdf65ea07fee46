/* 1002-swim-probe-order - round-robin probes over a shuffled list: every
 * other member once per round, a new order each round. */
#include "swim-test.h"

static unsigned targets[200];
static size_t ntargets;

static void on_msg(void *arg, const msgpack_object *a, uint32_t n)
{
	unsigned *to = arg;

	if (n == 3 && a[0].via.u64 == 1 && ntargets < 200)	/* a ping */
		targets[ntargets++] = *to;
}

static bool watch(void *arg, unsigned from, unsigned to, const void *buf, size_t len)
{
	if (from == 0)
		pkt_each(buf, len, on_msg, &to);
	return false;
}

int main(void)
{
	struct swim_sim_conf net = { .seed = 2, .latency_us = 200 };
	const unsigned n = 10;

	plan(4);
	ok(cluster(&net, n, NULL, 60), "10 nodes converge");
	/* Let a round boundary pass under the same membership, then watch. */
	swim_sim_advance(tsim, 20 * SEC);
	swim_sim_set_filter(tsim, watch, NULL);
	swim_sim_advance(tsim, 40 * SEC);
	ok(ntargets >= 36, "node 0 probed %zu times in 40 s", ntargets);
	/* Some alignment cuts the sequence into rounds of n-1 distinct targets. */
	int aligned = -1;
	for (unsigned off = 0; off < n - 1 && aligned < 0; off++) {
		bool good = true;
		for (size_t r = off; r + n - 1 <= ntargets && good; r += n - 1) {
			unsigned seen = 0;
			for (size_t i = r; i < r + n - 1; i++)
				seen |= 1u << targets[i];
			good = seen == ((1u << n) - 2);	/* everyone but node 0 */
		}
		if (good)
			aligned = (int)off;
	}
	ok(aligned >= 0, "each round probes every other member once (offset %d)", aligned);
	bool differ = false;
	if (aligned >= 0)
		for (size_t i = (size_t)aligned; i + 2 * (n - 1) <= ntargets && !differ; i += n - 1)
			differ = memcmp(&targets[i], &targets[i + n - 1], (n - 1) * sizeof(*targets)) != 0;
	ok(differ, "the order is reshuffled between rounds");
	swim_sim_free(tsim);
	return done_testing();
}
