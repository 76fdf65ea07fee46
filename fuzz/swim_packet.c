/* swim_packet.c - libFuzzer target: libswim's handling of a datagram or a
 * push-pull stream message.
 *
 * The first byte of the input picks what the rest is: 0 a raw datagram
 * (mostly stopped by the HMAC), 1 a datagram body sealed here with the
 * node's key (so the decoder and the state rules see it), 2 a sealed
 * push-pull request (swim_stream_serve), 3 a sealed push-pull reply
 * (swim_stream_done).  The node knows three other members beforehand and
 * runs its timers after each input, so the state rules act on what the
 * packet did.  Checked, besides what ASan and UBSan see: a refused stream
 * request gives no reply, an accepted one a reply that ends in a tag;
 * the node stays consistent (its own entry alive, the counts agree).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "swim.h"

static const struct swim_key key = { "fuzz-cluster-key-0123456789abcdef", 32 };
static uint64_t clock_us, rng = 1;

static uint64_t now(void *c) { return clock_us; }
static uint64_t wall(void *c) { return 1700000000000ull; }
static void set_timer(void *c, uint64_t at) { }
static void send_pkt(void *c, const char *a, const void *b, size_t l) { }
static int stream(void *c, const char *a, const void *b, size_t l, uint64_t id) { return 0; }
static uint64_t rnd(void *c) { return rng = rng * 6364136223846793005ull + 1442695040888963407ull; }

/* body || HMAC-SHA256(key, body), caller frees. */
static uint8_t *seal(const uint8_t *body, size_t len, size_t *out_len)
{
	uint8_t *p = malloc(len + 32);
	unsigned tl = 32;

	memcpy(p, body, len);
	HMAC(EVP_sha256(), key.key, (int)key.len, body, len, p + len, &tl);
	*out_len = len + 32;
	return p;
}

/* A sealed alive message [1, from, addr, [[5, name, addr, inc, ver, meta]]]. */
static void know(struct swim *s, const char *name)
{
	uint8_t b[128];
	size_t n = 0, nl = strlen(name), len;

	b[n++] = 0x94; b[n++] = 1;
	b[n++] = 0xa0 | 1; b[n++] = 'z';
	b[n++] = 0xa0 | 5; memcpy(b + n, "z:1:1", 5); n += 5;
	b[n++] = 0x91;
	b[n++] = 0x96; b[n++] = 5;
	b[n++] = (uint8_t)(0xa0 | nl); memcpy(b + n, name, nl); n += nl;
	b[n++] = 0xa9; memcpy(b + n, "10.0.0.1:", 9); n += 9;
	b[n++] = 1; b[n++] = 1;
	b[n++] = 0xc4; b[n++] = 0;
	uint8_t *p = seal(b, n, &len);
	swim_recv(s, p, len);
	free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct swim_env env = { .now = now, .wall_ms = wall, .set_timer = set_timer, .send = send_pkt,
				.stream = stream, .rand = rnd };
	struct swim_conf conf = { .name = "me", .addr = "10.0.0.9:7946", .keys = &key, .nkeys = 1 };
	struct swim *s;
	struct swim_member self;
	uint8_t *p;
	size_t len;

	if (size < 1 || swim_new(&s, &conf, &env) != 0)
		return 0;
	know(s, "m1");
	know(s, "m2");
	know(s, "m3");
	switch (data[0] & 3) {
	case 0:
		swim_recv(s, data + 1, size - 1);
		break;
	case 1:
		p = seal(data + 1, size - 1, &len);
		swim_recv(s, p, len);
		free(p);
		break;
	case 2: {
		void *reply = NULL;
		size_t rlen = 0;

		p = seal(data + 1, size - 1, &len);
		if (swim_stream_serve(s, p, len, &reply, &rlen) == 0) {
			if (!reply || rlen <= 32)
				abort();
		} else if (reply) {
			abort();
		}
		free(reply);
		free(p);
		break;
	}
	case 3:
		p = seal(data + 1, size - 1, &len);
		swim_stream_done(s, 1, 0, p, len);
		free(p);
		break;
	}
	/* Let the timers act on it: a minute of probes and suspicions. */
	for (int i = 0; i < 60; i++) {
		clock_us += 1000000;
		swim_tick(s);
	}
	if (swim_member_find(s, "me", &self) != 0 || !self.self || self.state != SWIM_ALIVE ||
	    swim_alive_count(s) > swim_member_count(s))
		abort();
	swim_free(s);
	return 0;
}
