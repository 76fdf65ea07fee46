/* 1008-swim-piggyback - a state change is sent retransmit_mult *
 * ceil(log10(n+1)) times by each node that queues it, piggybacked on its
 * pings, acks and gossip, several messages to a datagram within the MTU. */
#include "swim-test.h"

static unsigned sent;		/* alive messages about n0 at the new version node 0 sent */
static uint64_t version;	/* that version */
static size_t max_len;		/* largest datagram seen */
static bool multi;		/* a datagram with several messages seen */

static void on_msg(void *arg, const msgpack_object *a, uint32_t n)
{
	if (n == 6 && a[0].via.u64 == 5 && obj_is_str(&a[1], "n0") && a[4].via.u64 == version)
		sent++;
}

static void count_msgs(void *arg, const msgpack_object *a, uint32_t n)
{
	(*(unsigned *)arg)++;
}

static bool filter(void *arg, unsigned from, unsigned to, const void *buf, size_t len)
{
	unsigned n = 0;

	if (len > max_len)
		max_len = len;
	pkt_each(buf, len, count_msgs, &n);
	multi = multi || n > 2;
	if (from == 0)
		pkt_each(buf, len, on_msg, NULL);
	return false;
}

int main(void)
{
	struct swim_sim_conf net = { .seed = 8, .latency_us = 300 };

	plan(6);
	ok(cluster(&net, 10, NULL, 60), "10 nodes converge");
	swim_sim_set_filter(tsim, filter, NULL);
	swim_set_meta(swim_sim_node(tsim, 0), "v2", 2);
	version = member_of(0, 0).meta_version;
	swim_sim_advance(tsim, 30 * SEC);
	/* n = 10: 4 * ceil(log10(11)) = 8 */
	is_int(sent, swim_retransmit_limit(4, 10), "node 0 sent the update 8 times");
	ok(all_see(0, SWIM_ALIVE) && member_of(5, 0).meta_version == version, "everyone has it");
	/* Nine updates at once: they share datagrams. */
	for (unsigned i = 1; i < 10; i++)
		swim_set_meta(swim_sim_node(tsim, i), "v2", 2);
	swim_sim_advance(tsim, 10 * SEC);
	ok(multi, "compound datagrams carry several messages");
	/* Ten updates of 1000 bytes each: one a datagram, none over the MTU. */
	static char big[1000];
	memset(big, 'x', sizeof(big));
	max_len = 0;
	for (unsigned i = 0; i < 10; i++)
		swim_set_meta(swim_sim_node(tsim, i), big, sizeof(big));
	swim_sim_advance(tsim, 30 * SEC);
	ok(max_len > 1000 && max_len <= 1400, "no datagram over the 1400-byte MTU (largest %zu)", max_len);
	bool all = true;
	for (unsigned i = 0; i < 10; i++)
		for (unsigned j = 0; j < 10; j++)
			all = all && member_of(i, j).meta_len == sizeof(big);
	ok(all, "and every node has every big update");
	swim_sim_free(tsim);
	return done_testing();
}
