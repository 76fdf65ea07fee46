/* 1012-swim-pushpull - joining through a seed is a push-pull with it; two
 * separate clusters merge by one push-pull; the periodic push-pull
 * repairs what gossip lost. */
#include "swim-test.h"

static bool drop_all;		/* every datagram lost */
static bool hide_n5;		/* datagrams to n2 with news of n5 lost */

static void find_n5(void *arg, const msgpack_object *a, uint32_t n)
{
	if (n == 6 && a[0].via.u64 == 5 && obj_is_str(&a[1], "n5"))
		*(bool *)arg = true;
}

static bool filter(void *arg, unsigned from, unsigned to, const void *buf, size_t len)
{
	bool news = false;

	if (hide_n5 && to == 2)
		pkt_each(buf, len, find_n5, &news);
	return drop_all || news;
}

int main(void)
{
	struct swim_sim_conf net = { .seed = 12, .latency_us = 300 };

	plan(7);
	tsim = swim_sim_new(&net);
	swim_sim_set_event(tsim, tev_log, NULL);
	swim_sim_set_filter(tsim, filter, NULL);
	for (unsigned i = 0; i < 6; i++)
		swim_sim_add(tsim, NULL);
	/* Datagrams all lost: only streams get through. */
	drop_all = true;
	ok(swim_sim_join(tsim, 1, 0) == 1, "n1 starts one exchange with its seed");
	swim_sim_advance(tsim, SEC);
	ok(member_of(1, 0).state == SWIM_ALIVE && member_of(0, 1).state == SWIM_ALIVE,
	   "after the push-pull n0 and n1 know each other");
	is_int(stats_of(0).pushpulls, 1, "n0 served one exchange");
	swim_sim_join(tsim, 2, 1);
	swim_sim_join(tsim, 4, 3);
	swim_sim_join(tsim, 5, 3);
	swim_sim_advance(tsim, SEC);
	ok(member_of(2, 0).state == SWIM_ALIVE, "n2, joined through n1, learnt n0 from it");
	ok(swim_member_count(swim_sim_node(tsim, 0)) == 2 && swim_member_count(swim_sim_node(tsim, 3)) == 3,
	   "two clusters: {n0,n1,n2} (n0 does not know n2 yet) and {n3,n4,n5}");
	/* Gossip is back; one push-pull joins the two clusters. */
	drop_all = false;
	swim_sim_join(tsim, 0, 3);
	uint64_t t0 = swim_sim_now(tsim);
	for (unsigned i = 0; i < 60 && !swim_sim_converged(tsim); i++)
		swim_sim_advance(tsim, SEC);
	ok(swim_sim_converged(tsim), "merged into one cluster of 6 in %.1f s", (swim_sim_now(tsim) - t0) / 1e6);
	/* A member that never gets a datagram with the news still learns it
	 * by the periodic push-pull (30 s at this size). */
	hide_n5 = true;
	swim_set_meta(swim_sim_node(tsim, 5), "late", 4);
	swim_sim_advance(tsim, 65 * SEC);
	struct swim_member m = member_of(2, 5);
	ok(m.meta_len == 4 && !memcmp(m.meta, "late", 4), "n2 got n5's update through push-pull alone");
	swim_sim_free(tsim);
	return done_testing();
}
