/* swim-test.h - shared pieces of the t/1xxx libswim tests: a simulated
 * cluster formed by joins, an event log, packets decoded and crafted
 * (sealed with the simulator's key) as the tests need them.
 */
#ifndef DSEC_SWIM_TEST_H
#define DSEC_SWIM_TEST_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <msgpack.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "tap.h"
#include "swim.h"
#include "swim_sim.h"

#define SEC 1000000ull
/* Helpers a test may not use. */
#define TFN static __attribute__((unused))

/* One logged event. */
struct tev {
	uint64_t at;		/* simulated time */
	unsigned node;		/* observer */
	enum swim_event ev;	/* what */
	char name[32];		/* about whom */
	uint64_t inc;		/* the subject's incarnation then */
	uint64_t meta_ver;	/* and its metadata version */
};

static struct tev tevs[100000];
static size_t ntevs;
static struct swim_sim *tsim;

TFN void tev_log(void *arg, unsigned node, enum swim_event ev, const struct swim_member *m)
{
	if (ntevs == sizeof(tevs) / sizeof(tevs[0]))
		return;
	struct tev *e = &tevs[ntevs++];

	e->at = swim_sim_now(tsim);
	e->node = node;
	e->ev = ev;
	snprintf(e->name, sizeof(e->name), "%s", m->name);
	e->inc = m->incarnation;
	e->meta_ver = m->meta_version;
}

/* Events of type ev about `name` (any observer when node < 0). */
TFN size_t tev_count(enum swim_event ev, const char *name, int node)
{
	size_t n = 0;

	for (size_t i = 0; i < ntevs; i++)
		n += tevs[i].ev == ev && (!name || !strcmp(tevs[i].name, name)) &&
		     (node < 0 || tevs[i].node == (unsigned)node);
	return n;
}

/* The first such event, or NULL. */
TFN const struct tev *tev_first(enum swim_event ev, const char *name, int node)
{
	for (size_t i = 0; i < ntevs; i++)
		if (tevs[i].ev == ev && (!name || !strcmp(tevs[i].name, name)) &&
		    (node < 0 || tevs[i].node == (unsigned)node))
			return &tevs[i];
	return NULL;
}

/* A cluster of n nodes (conf for each, may be NULL): node i joins node 0
 * at i*10 ms; runs until every node sees every other alive (at most
 * limit_s simulated seconds).  True if it converged. */
TFN bool cluster(const struct swim_sim_conf *net, unsigned n, const struct swim_conf *conf,
		    unsigned limit_s)
{
	tsim = swim_sim_new(net);
	swim_sim_set_event(tsim, tev_log, NULL);
	for (unsigned i = 0; i < n; i++) {
		swim_sim_add(tsim, conf);
		if (i)
			swim_sim_join(tsim, i, 0);
		swim_sim_advance(tsim, 10000);
	}
	for (unsigned s = 0; s < limit_s; s++) {
		if (swim_sim_converged(tsim))
			return true;
		swim_sim_advance(tsim, SEC);
	}
	return swim_sim_converged(tsim);
}

/* The messages of a packet: true with *up holding its body's array
 * [version, from, addr, [msgs]] (the caller destroys it). */
TFN bool pkt_open(const void *buf, size_t len, msgpack_unpacked *up)
{
	size_t off = 0;

	if (len <= SWIM_TAG_LEN)
		return false;
	msgpack_unpacked_init(up);
	if (msgpack_unpack_next(up, buf, len - SWIM_TAG_LEN, &off) != MSGPACK_UNPACK_SUCCESS ||
	    up->data.type != MSGPACK_OBJECT_ARRAY || up->data.via.array.size != 4) {
		msgpack_unpacked_destroy(up);
		return false;
	}
	return true;
}

/* Calls fn for each message of a packet (an array [type, ...]). */
TFN void pkt_each(const void *buf, size_t len,
		     void (*fn)(void *arg, const msgpack_object *a, uint32_t n), void *arg)
{
	msgpack_unpacked up;

	if (!pkt_open(buf, len, &up))
		return;
	const msgpack_object *l = &up.data.via.array.ptr[3];

	for (uint32_t i = 0; i < l->via.array.size; i++) {
		const msgpack_object *m = &l->via.array.ptr[i];

		fn(arg, m->via.array.ptr, m->via.array.size);
	}
	msgpack_unpacked_destroy(&up);
}

TFN bool obj_is_str(const msgpack_object *o, const char *s)
{
	return o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(s) &&
	       !memcmp(o->via.str.ptr, s, o->via.str.size);
}

TFN void pk_str(msgpack_packer *pk, const char *s)
{
	msgpack_pack_str(pk, strlen(s));
	msgpack_pack_str_body(pk, s, strlen(s));
}

/* Seals sb with key (HMAC-SHA256 appended). */
TFN void pkt_seal(msgpack_sbuffer *sb, const struct swim_key *key)
{
	unsigned char t[SWIM_TAG_LEN];
	unsigned tl = sizeof(t);

	HMAC(EVP_sha256(), key->key, (int)key->len, (unsigned char *)sb->data, sb->size, t, &tl);
	msgpack_sbuffer_write(sb, (const char *)t, sizeof(t));
}

/* Starts a crafted packet from `from` (header and a message array of n);
 * the caller packs the n messages and seals. */
TFN void pkt_begin(msgpack_sbuffer *sb, msgpack_packer *pk, const char *from, uint32_t n)
{
	msgpack_sbuffer_init(sb);
	msgpack_packer_init(pk, sb, msgpack_sbuffer_write);
	msgpack_pack_array(pk, 4);
	msgpack_pack_uint8(pk, SWIM_PROTO_VERSION);
	pk_str(pk, from);
	pk_str(pk, "sim-999:7946");
	msgpack_pack_array(pk, n);
}

/* Hands node `to` a crafted suspect (type 6) or dead (7) message. */
TFN void inject_accuse(unsigned to, int type, const char *name, uint64_t inc, const char *from)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;

	pkt_begin(&sb, &pk, from, 1);
	msgpack_pack_array(&pk, 4);
	msgpack_pack_uint8(&pk, (uint8_t)type);
	pk_str(&pk, name);
	msgpack_pack_uint64(&pk, inc);
	pk_str(&pk, from);
	pkt_seal(&sb, &swim_sim_key);
	swim_sim_inject(tsim, to, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
}

/* Hands node `to` a crafted alive message (type 5). */
TFN void inject_alive(unsigned to, const char *name, const char *addr, uint64_t inc,
			 uint64_t meta_ver, const char *meta)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;

	pkt_begin(&sb, &pk, "tester", 1);
	msgpack_pack_array(&pk, 6);
	msgpack_pack_uint8(&pk, 5);
	pk_str(&pk, name);
	pk_str(&pk, addr);
	msgpack_pack_uint64(&pk, inc);
	msgpack_pack_uint64(&pk, meta_ver);
	msgpack_pack_bin(&pk, strlen(meta));
	msgpack_pack_bin_body(&pk, meta, strlen(meta));
	pkt_seal(&sb, &swim_sim_key);
	swim_sim_inject(tsim, to, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
}

TFN struct swim_member member_of(unsigned node, unsigned subject)
{
	struct swim_member m = { 0 };

	swim_member_find(swim_sim_node(tsim, node), swim_sim_name(tsim, subject), &m);
	return m;
}

TFN struct swim_stats stats_of(unsigned node)
{
	struct swim_stats st;

	swim_stats(swim_sim_node(tsim, node), &st);
	return st;
}

/* Does every node up see node j in state st? */
TFN bool all_see(unsigned j, enum swim_state st)
{
	for (unsigned i = 0; i < swim_sim_count(tsim); i++) {
		enum swim_state s;

		if (i == j || !swim_sim_node(tsim, i))
			continue;
		if (swim_sim_state(tsim, i, j, &s) < 0 || s != st)
			return false;
	}
	return true;
}

/* Runs until cond() or limit_s simulated seconds; true if cond held. */
TFN bool run_until(bool (*cond)(void *), void *arg, unsigned limit_s)
{
	for (unsigned i = 0; i < limit_s * 10; i++) {
		if (cond(arg))
			return true;
		swim_sim_advance(tsim, SEC / 10);
	}
	return cond(arg);
}

#endif
