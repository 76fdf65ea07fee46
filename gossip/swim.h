/* swim.h - libswim: cluster membership and failure detection by SWIM
 * gossip with the Lifeguard refinements (the whole public interface).
 *
 * The protocol follows HashiCorp memberlist's behaviour (see
 * dsec-gossip(7)): each probe period one member, taken round-robin from a
 * member list shuffled every round, is pinged; without an ack within the
 * probe timeout, k helpers ping it for us and answer ack or nack; without
 * any ack by the end of the period it is suspected.  A suspicion becomes
 * a death after a timeout that scales with log n and shrinks with each
 * independent confirmation; the suspected member refutes by raising its
 * incarnation.  State changes ride piggybacked on every packet (and on
 * gossip packets to a few random members) a bounded number of times; a
 * periodic push-pull exchanges the full state over a stream.  The local
 * health score (awareness) stretches the probe period when this node
 * itself looks unhealthy.
 *
 * The code does no I/O and keeps no clock: everything goes through a
 * struct swim_env (time, one timer, datagrams, streams, randomness,
 * events), so the same code runs in dsecd on libev (swim_ev.h) and under
 * the simulator (swim_sim.h).  Not thread-safe: one thread calls in.  The
 * env's functions must not call back into the same struct swim, except
 * that the event callback may read it (swim_member_find, swim_stats...).
 *
 * Every datagram and stream message is authenticated with HMAC-SHA256
 * over the cluster key; packets that fail are dropped and counted.
 */
#ifndef DSEC_SWIM_H
#define DSEC_SWIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Wire protocol version, first field of every packet; others are dropped. */
#define SWIM_PROTO_VERSION 1
/* Longest member name and address ("host:port") in bytes. */
#define SWIM_NAME_MAX 128
#define SWIM_ADDR_MAX 64
/* Largest metadata blob a member carries. */
#define SWIM_META_MAX 1024
/* Accepted keys at once (the first signs, all verify), and their length. */
#define SWIM_KEYS_MAX 4
#define SWIM_KEY_MIN 16
#define SWIM_KEY_MAX 64
/* Largest push-pull message (request or reply) a stream carries. */
#define SWIM_STREAM_MAX (8u << 20)
/* Bytes of the HMAC-SHA256 tag that ends every packet. */
#define SWIM_TAG_LEN 32

struct swim;

/* A member's state as this node sees it. */
enum swim_state {
	SWIM_ALIVE,		/* answers probes (or has refuted) */
	SWIM_SUSPECT,		/* missed a probe; dead unless it refutes in time */
	SWIM_DEAD,		/* declared failed */
	SWIM_LEFT,		/* announced its own leave */
};

/* What the event callback reports. */
enum swim_event {
	SWIM_EV_JOIN,		/* a member not known before */
	SWIM_EV_UPDATE,		/* its metadata changed (newer version) */
	SWIM_EV_SUSPECT,	/* it became suspect */
	SWIM_EV_DEAD,		/* it was declared dead */
	SWIM_EV_LEFT,		/* it left gracefully */
	SWIM_EV_ALIVE,		/* suspect, dead or left before, alive again */
};

/* A member as handed out (events, lookups): the pointers are valid until
 * the next call into the struct swim. */
struct swim_member {
	const char *name;	/* unique in the cluster */
	const char *addr;	/* "host:port" of its datagrams and streams */
	uint64_t incarnation;	/* its own counter; higher wins */
	enum swim_state state;	/* as this node sees it */
	uint64_t meta_version;	/* version of meta; newer replaces older */
	const void *meta;	/* opaque blob of meta_len bytes (capacity) */
	size_t meta_len;	/* 0..SWIM_META_MAX */
	bool self;		/* this is the local node */
};

/* A cluster key. */
struct swim_key {
	const void *key;	/* SWIM_KEY_MIN..SWIM_KEY_MAX bytes */
	size_t len;		/* its length */
};

/* The environment: all the I/O and time the protocol uses.  Times are
 * microseconds of a monotonic clock. */
struct swim_env {
	void *ctx;		/* passed to every function below */
	/* The current time. */
	uint64_t (*now)(void *ctx);
	/* Milliseconds of the wall clock; seeds the incarnation and the
	 * metadata version so that a restarted node outranks its old self.
	 * NULL: CLOCK_REALTIME. */
	uint64_t (*wall_ms)(void *ctx);
	/* Call swim_tick() at time `at` or soon after; replaces the time
	 * asked before. */
	void (*set_timer)(void *ctx, uint64_t at);
	/* Send one datagram (best effort: loss is expected). */
	void (*send)(void *ctx, const char *addr, const void *buf, size_t len);
	/* Send one push-pull request over a stream to addr and, later, hand
	 * the reply (or the failure) to swim_stream_done() with this id.
	 * Returns 0, or -errno when it cannot start (then no done call). */
	int (*stream)(void *ctx, const char *addr, const void *buf, size_t len, uint64_t id);
	/* A uniformly random 64-bit number. */
	uint64_t (*rand)(void *ctx);
	/* A membership change (may be NULL). */
	void (*event)(void *ctx, enum swim_event ev, const struct swim_member *m);
};

/* Lifeguard parts that can be switched off (for the simulator's
 * comparison with plain SWIM). */
#define SWIM_NO_AWARENESS	0x1	/* no local health: the score stays 0 */
#define SWIM_NO_SUSPICION_SCALING 0x2	/* fixed suspicion timeout (the minimum) */
#define SWIM_NO_NACK		0x4	/* helpers send no nacks */
#define SWIM_NO_LIFEGUARD	0x7	/* all three: plain SWIM with suspicion */

/* Configuration; zero means the default (memberlist's LAN profile). */
struct swim_conf {
	const char *name;		/* this node's unique name (required) */
	const char *addr;		/* its "host:port" as others reach it (required) */
	uint64_t incarnation;		/* first incarnation; 0: wall clock ms */
	uint32_t probe_interval_ms;	/* probe period: 1000 */
	uint32_t probe_timeout_ms;	/* wait for a direct ack: 500 */
	uint32_t indirect_checks;	/* helpers of an indirect probe: 3 */
	uint32_t suspicion_mult;	/* suspicion min = mult*log10(n)*interval: 4 */
	uint32_t suspicion_max_mult;	/* suspicion max = this * min: 6 */
	uint32_t retransmit_mult;	/* sends of a broadcast = mult*ceil(log10(n+1)): 4 */
	uint32_t awareness_max;		/* health score is 0..max-1: 8 */
	uint32_t gossip_interval_ms;	/* gossip period: 200 */
	uint32_t gossip_nodes;		/* members each gossip period: 3 */
	uint32_t gossip_to_dead_ms;	/* gossip to (and keep) the dead this long: 30000 */
	uint32_t pushpull_interval_ms;	/* full state exchange: 30000 (scaled up past 32 members) */
	uint32_t reconnect_interval_ms;	/* push-pull with a forgotten dead member: 30000 */
	uint32_t reconnect_timeout_s;	/* try the forgotten dead this long: 86400 */
	uint32_t mtu;			/* largest datagram: 1400 */
	unsigned flags;			/* SWIM_NO_* */
	const struct swim_key *keys;	/* accepted keys, keys[0] signs (>= 1 required) */
	size_t nkeys;			/* 1..SWIM_KEYS_MAX */
	const void *meta;		/* first metadata (copied), may be NULL */
	size_t meta_len;		/* its length */
};

/* Counters, for metrics and comparisons. */
struct swim_stats {
	uint64_t pkts_sent;		/* datagrams sent */
	uint64_t bytes_sent;		/* their bytes */
	uint64_t pkts_recv;		/* datagrams received (all) */
	uint64_t bytes_recv;		/* their bytes */
	uint64_t streams_sent;		/* push-pull requests started */
	uint64_t stream_bytes;		/* push-pull bytes sent and received */
	uint64_t dropped_auth;		/* datagrams/streams failing the HMAC */
	uint64_t dropped_malformed;	/* authenticated but undecodable, or wrong version */
	uint64_t probes;		/* probes started */
	uint64_t probes_failed;		/* probes without any ack */
	uint64_t indirect_probes;	/* indirect ping requests sent */
	uint64_t nacks_recv;		/* nacks received */
	uint64_t suspicions;		/* members this node marked suspect */
	uint64_t refutations;		/* times this node refuted a suspicion of itself */
	uint64_t deaths;		/* members this node marked dead */
	uint64_t pushpulls;		/* push-pull exchanges merged (either side) */
	uint64_t reconnects;		/* push-pulls tried with forgotten dead members */
	uint64_t broadcasts_queued;	/* state messages queued for dissemination */
	uint32_t awareness;		/* current health score (0 = healthy) */
	uint32_t members;		/* members known, self and the dead included */
};

/* Creates a node: it knows only itself until swim_join().  Copies what
 * conf points to.  -EINVAL for a missing name/addr, no or bad keys, too
 * large metadata. */
int swim_new(struct swim **out, const struct swim_conf *conf, const struct swim_env *env);
/* Frees it at once (no leave: call swim_leave() first and wait). */
void swim_free(struct swim *s);

/* Runs the timers that are due; the embedder calls it when the env's
 * timer fires. */
void swim_tick(struct swim *s);
/* A datagram arrived.  Any bytes are safe: bad ones are counted and dropped. */
void swim_recv(struct swim *s, const void *buf, size_t len);
/* A push-pull request arrived on a stream: merges it and returns the reply
 * to write back (*reply, caller frees).  -EBADMSG (counted, no reply) for a
 * request that fails authentication or decoding. */
int swim_stream_serve(struct swim *s, const void *req, size_t len, void **reply,
		      size_t *reply_len);
/* The reply to the env's stream call `id` (rc 0), or its failure (rc < 0). */
void swim_stream_done(struct swim *s, uint64_t id, int rc, const void *buf, size_t len);

/* Joins through seed addresses: a push-pull with each (join flag set).
 * Seeds are kept and retried at push-pull time while no other member is
 * alive.  Returns how many exchanges started, or -errno if none. */
int swim_join(struct swim *s, const char *const *seeds, size_t n);
/* Leaves gracefully: stops probing, disseminates "left" (which the others
 * report as SWIM_EV_LEFT, not dead).  Wait while swim_leave_pending()
 * (bounded by the caller) before swim_free(). */
void swim_leave(struct swim *s);
/* True while the leave message still has retransmissions to go. */
bool swim_leave_pending(const struct swim *s);

/* Replaces this node's metadata (at most SWIM_META_MAX bytes) under a new,
 * higher version, and disseminates it. */
int swim_set_meta(struct swim *s, const void *meta, size_t len);
/* Replaces the accepted keys (rotation: add the new key second, then make
 * it first, then drop the old one). */
int swim_set_keys(struct swim *s, const struct swim_key *keys, size_t nkeys);

/* Members known (self and the not yet forgotten dead included) and the
 * i-th of them in no particular order (the order changes as the node
 * runs). */
size_t swim_member_count(const struct swim *s);
int swim_member_at(const struct swim *s, size_t i, struct swim_member *out);
/* The member of that name: 0, or -ENOENT. */
int swim_member_find(const struct swim *s, const char *name, struct swim_member *out);
/* Members seen alive or suspect (the count placement cares about). */
size_t swim_alive_count(const struct swim *s);
/* The counters. */
void swim_stats(const struct swim *s, struct swim_stats *out);
/* The configuration in force, defaults filled in. */
void swim_get_conf(const struct swim *s, struct swim_conf *out);

/* The formulas, exposed for the tests and the simulator (all in
 * microseconds): suspicion timeout minimum for n members, the timeout
 * left after `confirmations` of an expected `k`, and the retransmit limit. */
uint64_t swim_suspicion_min(uint32_t mult, size_t n, uint64_t interval);
uint64_t swim_suspicion_timeout(uint64_t min, uint64_t max, unsigned k, unsigned confirmations);
unsigned swim_retransmit_limit(uint32_t mult, size_t n);

const char *swim_state_name(enum swim_state st);
const char *swim_event_name(enum swim_event ev);

/* ---- the libev binding (swim_ev.c) --------------------------------------
 * A struct swim on a libev loop: one non-blocking UDP socket for the
 * datagrams and a TCP listener on the same port for push-pull (each
 * stream: a 4-byte big-endian length, then the message; at most
 * SWIM_STREAM_MAX; bounded by a timeout).  No threads.  Addresses are
 * numeric: "1.2.3.4:7946" or "[::1]:7946". */
struct ev_loop;
struct swim_ev;

/* What swim_ev_new needs. */
struct swim_ev_conf {
	const char *bind;		/* "host:port" for UDP and TCP; port 0 picks one */
	struct swim_conf swim;		/* the protocol's; swim.addr NULL: the bound address */
	uint32_t stream_timeout_ms;	/* a whole push-pull exchange: 10000 */
	/* Membership events (may be NULL), as struct swim_env's event. */
	void (*event)(void *arg, enum swim_event ev, const struct swim_member *m);
	void *arg;			/* passed to event */
};

/* Binds the sockets and starts the node on loop (which must outlive it).
 * -errno: the address does not parse (-EINVAL) or cannot be bound. */
int swim_ev_new(struct swim_ev **out, struct ev_loop *loop, const struct swim_ev_conf *conf);
/* Stops the watchers, closes the sockets and frees the node (streams in
 * progress are dropped).  Not from inside its own event callback. */
void swim_ev_free(struct swim_ev *e);
/* The protocol, for swim_join, swim_leave, swim_set_meta, lookups... */
struct swim *swim_ev_swim(struct swim_ev *e);
/* The address it advertises ("host:port"). */
const char *swim_ev_addr(const struct swim_ev *e);

#endif
