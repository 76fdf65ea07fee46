/* swim_int.h - libswim's insides shared by its files: the message types,
 * the structs of a node and its members, and the functions swim.c gives
 * swim_recv.c (decoding).  Not installed; swim.h is the interface. */
#ifndef DSEC_SWIM_INT_H
#define DSEC_SWIM_INT_H

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <msgpack.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "swim.h"
#include "util.h"
#include "proto.h"

/* Message types inside a packet. */
enum msg_type {
	MSG_PING = 1,		/* [1, seq, target name] */
	MSG_IPING = 2,		/* [2, seq, target name, target addr, nack] */
	MSG_ACK = 3,		/* [3, seq] */
	MSG_NACK = 4,		/* [4, seq] */
	MSG_ALIVE = 5,		/* [5, name, addr, inc, meta_ver, meta] */
	MSG_SUSPECT = 6,	/* [6, name, inc, from] */
	MSG_DEAD = 7,		/* [7, name, inc, from]; from == name: left */
};

struct swim_timer;
typedef void timer_fn(struct swim *s, struct swim_timer *t);

/* A deadline in the heap. */
struct swim_timer {
	uint64_t at;		/* when it fires */
	size_t hidx;		/* position in the heap, SIZE_MAX when unarmed */
	timer_fn *fn;		/* what runs */
};

struct member;

/* A running suspicion of one member (memberlist's suspicion.go). */
struct suspicion {
	struct swim_timer t;	/* fires at start + timeout(confirmations) */
	struct member *m;	/* whom it is about */
	uint64_t start;		/* when it began */
	uint64_t min, max;	/* the timeout bounds */
	unsigned k;		/* confirmations expected (0: timeout is min) */
	unsigned n;		/* confirmations received */
	char **from;		/* who suspected (first the starter), k+1 slots */
	unsigned nfrom;		/* entries of from */
};

/* A member as this node knows it. */
struct member {
	char *name;		/* unique name */
	char *addr;		/* "host:port" */
	uint64_t inc;		/* incarnation */
	enum swim_state state;	/* alive, suspect, dead, left */
	uint64_t state_change;	/* when state last changed */
	uint64_t meta_ver;	/* version of meta */
	void *meta;		/* metadata blob */
	size_t meta_len;	/* its length */
	size_t idx;		/* position in swim.members */
	struct member *hnext;	/* next in its hash bucket */
	struct suspicion *susp;	/* running suspicion, or NULL */
};

/* A queued state message about one subject member. */
struct bcast {
	char *subject;		/* member it is about (a newer one replaces it) */
	void *buf;		/* the encoded message */
	size_t len;		/* its length */
	unsigned transmits;	/* times sent so far */
	uint64_t id;		/* queue order: higher is newer */
	bool leave;		/* our own leave message */
};

/* A dead member forgotten, still tried now and then (serf's reconnect),
 * so that the two sides of a healed partition find each other again. */
struct failed {
	char *name;		/* its name */
	char *addr;		/* its last address */
	uint64_t since;		/* when it was forgotten */
};

/* Our help with someone else's indirect probe. */
struct relay {
	struct swim_timer t;	/* nack time, then expiry */
	uint32_t seq;		/* seq of our ping to the target */
	uint32_t req_seq;	/* the requester's seq */
	char *req_addr;		/* the requester's address */
	bool nack;		/* send a nack if no ack by nack time */
	bool nacked;		/* nack time passed */
	struct relay *next;	/* list of relays in progress */
};

struct swim {
	struct swim_conf conf;		/* defaults filled; name, addr owned */
	struct swim_env env;		/* the environment */
	uint8_t keys[SWIM_KEYS_MAX][SWIM_KEY_MAX];	/* accepted keys */
	size_t key_len[SWIM_KEYS_MAX];	/* their lengths */
	size_t nkeys;			/* how many */
	struct member **members;	/* in probe order */
	size_t nmembers, cap;		/* used and allocated */
	struct member **hash;		/* buckets */
	size_t nbuckets;		/* power of two */
	struct member *self;		/* our own entry */
	size_t probe_idx;		/* next position to probe */
	struct swim_timer **heap;	/* armed timers, min-heap on at */
	size_t nheap, heap_cap;		/* used and allocated */
	uint64_t timer_asked;		/* time last handed to env.set_timer */
	struct swim_timer t_probe;	/* start of the next probe period */
	struct swim_timer t_ack;	/* direct ack wait of the current probe */
	struct swim_timer t_gossip;	/* gossip period */
	struct swim_timer t_pushpull;	/* push-pull period */
	struct swim_timer t_reconnect;	/* reconnect period */
	struct failed *failed;		/* dead members forgotten */
	size_t nfailed;			/* how many */
	struct member *probing;		/* member of the current probe, or NULL */
	char *probing_name;		/* its name (it may be reaped meanwhile) */
	uint64_t probe_inc;		/* its incarnation when the probe began */
	uint32_t probe_seq;		/* seq of the current probe */
	bool probe_acked;		/* ack seen for it */
	unsigned expected_nacks;	/* helpers asked to nack */
	unsigned nacks;			/* nacks received */
	uint32_t seq;			/* last seq used */
	int awareness;			/* health score 0..awareness_max-1 */
	struct bcast *queue;		/* broadcasts to piggyback */
	size_t nqueue, qcap;		/* used and allocated */
	uint64_t bcast_id;		/* last queue id */
	struct relay *relays;		/* indirect probes we help with */
	char **seeds;			/* join addresses, retried while alone */
	size_t nseeds;			/* how many */
	uint64_t stream_id;		/* last stream id */
	bool leaving;			/* swim_leave() called */
	struct swim_stats st;		/* counters */
};

/* swim.c, for swim_recv.c */
bool sw_authentic(struct swim *s, const void *buf, size_t len, size_t *body_len);
struct member *sw_find(const struct swim *s, const char *name);
void sw_on_ack(struct swim *s, uint32_t seq);
void sw_on_alive(struct swim *s, const char *name, const char *addr, uint64_t inc,
		     uint64_t meta_ver, const void *meta, size_t meta_len);
void sw_on_dead(struct swim *s, const char *name, uint64_t inc, const char *from);
void sw_on_iping(struct swim *s, uint32_t req_seq, const char *target, const char *taddr,
		     const char *from_addr, bool nack);
void sw_on_nack(struct swim *s, uint32_t seq);
void sw_on_suspect(struct swim *s, const char *name, uint64_t inc, const char *from);
void sw_pack_state(struct swim *s, msgpack_sbuffer *sb, bool join);
void sw_rearm(struct swim *s);
void sw_send_seq(struct swim *s, const char *addr, enum msg_type type, uint32_t seq);

#endif
