/* 1001-swim-formulas - the numbers of the protocol: suspicion timeouts
 * (memberlist's suspicion.go), the retransmit limit, the defaults. */
#include "swim-test.h"

static void nop_timer(void *c, uint64_t at) { }
static void nop_send(void *c, const char *a, const void *b, size_t l) { }
static int nop_stream(void *c, const char *a, const void *b, size_t l, uint64_t id) { return -ENOSYS; }
static uint64_t zero(void *c) { return 0; }

int main(void)
{
	plan(19);
	/* min = mult * log10(max(1, n)) * interval, at least mult * interval. */
	is_int(swim_suspicion_min(4, 1, SEC), 4 * SEC, "n=1: min is mult * interval");
	is_int(swim_suspicion_min(4, 10, SEC), 4 * SEC, "n=10: min is 4 s");
	is_int(swim_suspicion_min(4, 100, SEC), 8 * SEC, "n=100: min is 8 s");
	is_int(swim_suspicion_min(4, 1000, SEC), 12 * SEC, "n=1000: min is 12 s");
	/* Confirmations decay it from max to min, logarithmically. */
	uint64_t min = 12 * SEC, max = 72 * SEC;
	is_int(swim_suspicion_timeout(min, max, 2, 0), max, "no confirmation: max");
	is_int(swim_suspicion_timeout(min, max, 2, 2), min, "k confirmations: min");
	/* 72 - log(2)/log(3) * 60 = 34.145... s, floored to ms */
	is_int(swim_suspicion_timeout(min, max, 2, 1), 34144 * 1000ull, "one of two: 34.144 s");
	is_int(swim_suspicion_timeout(min, max, 0, 0), min, "none expected: min");
	ok(swim_suspicion_timeout(min, max, 3, 1) > swim_suspicion_timeout(min, max, 3, 2),
	   "each confirmation shortens it");
	/* limit = mult * ceil(log10(n + 1)) */
	is_int(swim_retransmit_limit(4, 1), 4, "n=1: 4 sends");
	is_int(swim_retransmit_limit(4, 9), 4, "n=9: 4 sends");
	is_int(swim_retransmit_limit(4, 10), 8, "n=10: 8 sends");
	is_int(swim_retransmit_limit(4, 1000), 16, "n=1000: 16 sends");

	struct swim_env env = { .now = zero, .set_timer = nop_timer, .send = nop_send,
				.stream = nop_stream, .rand = zero };
	struct swim_conf c = { .name = "a", .addr = "127.0.0.1:1", .keys = &swim_sim_key, .nkeys = 1 };
	struct swim *s;
	ok(swim_new(&s, &c, &env) == 0, "a node with defaults");
	struct swim_conf got;
	swim_get_conf(s, &got);
	ok(got.probe_interval_ms == 1000 && got.probe_timeout_ms == 500 && got.indirect_checks == 3 &&
	   got.suspicion_mult == 4 && got.suspicion_max_mult == 6 && got.retransmit_mult == 4 &&
	   got.awareness_max == 8 && got.gossip_interval_ms == 200 && got.gossip_nodes == 3 &&
	   got.pushpull_interval_ms == 30000, "defaults are memberlist's LAN profile");
	struct swim_member m;
	ok(swim_member_find(s, "a", &m) == 0 && m.self && m.state == SWIM_ALIVE && m.incarnation > 0,
	   "it knows itself, alive, incarnation from the wall clock");
	swim_free(s);

	struct swim_conf bad = c;
	bad.nkeys = 0;
	ok(swim_new(&s, &bad, &env) == -EINVAL, "no key: refused");
	struct swim_key shortkey = { "short", 5 };
	bad.keys = &shortkey;
	bad.nkeys = 1;
	ok(swim_new(&s, &bad, &env) == -EINVAL, "a key under 16 bytes: refused");
	bad = c;
	bad.meta_len = SWIM_META_MAX + 1;
	bad.meta = "x";
	ok(swim_new(&s, &bad, &env) == -EINVAL, "metadata over the limit: refused");
	return done_testing();
}
