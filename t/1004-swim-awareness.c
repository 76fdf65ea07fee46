/* 1004-swim-awareness - local health: a failed probe answered by every
 * helper's nack leaves the score alone; missing nacks raise it (up to
 * max-1) and stretch the probe period; successful probes lower it. */
#include "swim-test.h"

static bool deaf0;		/* node 0 receives nothing */
static unsigned pings0;		/* pings node 0 sent */

static void on_msg(void *arg, const msgpack_object *a, uint32_t n)
{
	if (a[0].via.u64 == 1)
		pings0++;
}

static bool filter(void *arg, unsigned from, unsigned to, const void *buf, size_t len)
{
	if (from == 0)
		pkt_each(buf, len, on_msg, NULL);
	return deaf0 && to == 0;
}

int main(void)
{
	struct swim_sim_conf net = { .seed = 4, .latency_us = 300 };

	plan(8);
	ok(cluster(&net, 8, NULL, 60), "8 nodes converge");
	swim_sim_set_filter(tsim, filter, NULL);
	is_int(stats_of(0).awareness, 0, "healthy: score 0");

	/* A dead member: helpers nack, the score stays. */
	swim_sim_kill(tsim, 7);
	swim_sim_advance(tsim, 30 * SEC);
	ok(stats_of(0).nacks_recv > 0, "node 0 got nacks for n7 (%llu)",
	   (unsigned long long)stats_of(0).nacks_recv);
	is_int(stats_of(0).awareness, 0, "failed probes with all nacks: score still 0");

	/* Node 0 hears nothing: no acks, no nacks. */
	deaf0 = true;
	swim_sim_advance(tsim, 30 * SEC);
	is_int(stats_of(0).awareness, 7, "deaf: score at max-1");
	pings0 = 0;
	swim_sim_advance(tsim, 40 * SEC);
	ok(pings0 <= 6, "probe period stretched to 8 s: %u pings in 40 s", pings0);

	/* Healthy again: each acked probe lowers it by one. */
	deaf0 = false;
	unsigned t;
	for (t = 0; t < 120 && stats_of(0).awareness > 0; t++)
		swim_sim_advance(tsim, SEC);
	is_int(stats_of(0).awareness, 0, "acked probes bring it back to 0 (in %u s)", t);
	pings0 = 0;
	swim_sim_advance(tsim, 10 * SEC);
	ok(pings0 >= 9, "probe period back to 1 s: %u pings in 10 s", pings0);
	swim_sim_free(tsim);
	return done_testing();
}
