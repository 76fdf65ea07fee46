/* 1010-swim-auth - datagrams without the cluster key's HMAC, truncated,
 * malformed or of another protocol version are dropped and counted; none
 * changes state or crashes. */
#include "swim-test.h"

static void inject_body(unsigned to, const char *body, size_t len, const struct swim_key *key)
{
	unsigned char *p = malloc(len + SWIM_TAG_LEN);
	unsigned tl = SWIM_TAG_LEN;

	memcpy(p, body, len);
	HMAC(EVP_sha256(), key->key, (int)key->len, p, len, p + len, &tl);
	swim_sim_inject(tsim, to, p, len + SWIM_TAG_LEN);
	free(p);
}

int main(void)
{
	struct swim_sim_conf net = { .seed = 10, .latency_us = 300 };
	struct swim_key wrong = { "not-the-cluster-key-at-all-00000", 32 };

	plan(10);
	ok(cluster(&net, 4, NULL, 60), "4 nodes converge");
	struct swim_stats st0 = stats_of(1);

	/* A well-formed suspect of n2 under the wrong key. */
	msgpack_sbuffer sb;
	msgpack_packer pk;
	pkt_begin(&sb, &pk, "n3", 1);
	msgpack_pack_array(&pk, 4);
	msgpack_pack_uint8(&pk, 7);
	pk_str(&pk, "n2");
	msgpack_pack_uint64(&pk, member_of(1, 2).incarnation + 5);
	pk_str(&pk, "n3");
	size_t body_len = sb.size;
	char body[512];
	memcpy(body, sb.data, body_len);
	pkt_seal(&sb, &wrong);
	swim_sim_inject(tsim, 1, sb.data, sb.size);
	is_int(stats_of(1).dropped_auth - st0.dropped_auth, 1, "wrong key: dropped, counted");
	ok(member_of(1, 2).state == SWIM_ALIVE, "and n2 stays alive");
	/* Flipped bit in the tag, a truncated packet, an empty one. */
	sb.data[sb.size - 1] ^= 1;
	swim_sim_inject(tsim, 1, sb.data, sb.size);
	swim_sim_inject(tsim, 1, sb.data, 10);
	swim_sim_inject(tsim, 1, "", 0);
	is_int(stats_of(1).dropped_auth - st0.dropped_auth, 4, "bad tag, truncated, empty: dropped");
	msgpack_sbuffer_destroy(&sb);

	/* Authentic but malformed: not msgpack, wrong version, wrong shape. */
	inject_body(1, "\xc1\xc1\xc1", 3, &swim_sim_key);
	char v2[512];
	memcpy(v2, body, body_len);
	v2[1] = 2;	/* [0x94, version, ...] */
	inject_body(1, v2, body_len, &swim_sim_key);
	inject_body(1, "\x93\x01\x01\x01", 4, &swim_sim_key);
	inject_body(1, "\xdd\xff\xff\xff\xff", 5, &swim_sim_key);	/* array of 4G */
	is_int(stats_of(1).dropped_malformed - st0.dropped_malformed, 4,
	       "garbage, version 2, a short array, a huge claimed array: dropped as malformed");
	ok(member_of(1, 2).state == SWIM_ALIVE, "no state changed");
	/* The same body under the right key is taken. */
	inject_body(1, body, body_len, &swim_sim_key);
	ok(member_of(1, 2).state == SWIM_DEAD, "the same message with the key is believed");

	/* Random bytes, sealed and not: never a crash. */
	uint64_t x = 42;
	for (int i = 0; i < 20000; i++) {
		char junk[600];
		size_t n = (x = x * 6364136223846793005ull + 1) >> 55;
		for (size_t k = 0; k < n; k++)
			junk[k] = (char)((x = x * 6364136223846793005ull + 1) >> 56);
		if (n > 3) {
			junk[0] = (char)0x94;
			junk[1] = 1;
		}
		if (i & 1)
			inject_body(0, junk, n, &swim_sim_key);
		else
			swim_sim_inject(tsim, 0, junk, n);
	}
	ok(stats_of(0).dropped_auth >= 10000, "20000 random packets: the unsealed ones dropped (%llu)",
	   (unsigned long long)stats_of(0).dropped_auth);
	ok(stats_of(0).dropped_malformed > 0, "sealed garbage counted malformed (%llu)",
	   (unsigned long long)stats_of(0).dropped_malformed);
	swim_sim_advance(tsim, 30 * SEC);
	ok(all_see(0, SWIM_ALIVE), "node 0 still works");
	swim_sim_free(tsim);
	return done_testing();
}
