/* place.h - where a create goes: the placement policy, pure.
 *
 * Given this node's view of the cluster (what gossip last told it of each
 * node, its own entry fresh) and a request (backend, image, resources),
 * place_choose() names the node to forward the create to.  Nothing here
 * does I/O, reads a clock or keeps a global: the caller owns the view and
 * the transport, and the only state is the struct place (the random
 * generator, seeded by the caller, and the placements this node has in
 * flight).  The same inputs and seed give the same choices, so the
 * simulator (tools/place-sim) and t/1201 drive the code dsecd runs.
 *
 * The rules, in the order they apply (the why of each is in place.c):
 *  1. Filter: the node is alive (not suspect, dead or left) and not
 *     draining, offers the backend, has a free slot of it, and the memory
 *     and disk asked, each net of this node's placements in flight to it;
 *     and it is not excluded (a target that already refused this create).
 *  2. Locality: when the request names an image and some eligible nodes
 *     have it (not all), pick among those and among all of them alike; take
 *     the one with the image unless its load score is more than
 *     locality_slack points over the other's.
 *  3. Policy: power of k choices (sample k eligible nodes at random, take
 *     the least loaded), random (one eligible node uniformly), or least
 *     loaded (every eligible node, the least loaded; ties at random).
 *  4. Load score: the larger of the backend's slot share and the memory
 *     share in use, in parts per million, this node's placements in flight
 *     counted in both; equal scores go to the shorter creation queue, then
 *     to the lower CPU load.
 *  5. Admission: the target may still refuse; the caller places again with
 *     the same struct place_try, which excludes the targets tried, until
 *     max_attempts targets were tried; then no_capacity with place_summary().
 *
 * Typical use by the sender of a create:
 *
 *     struct place_try t;
 *     place_try_init(&t);
 *     while ((r = place_choose(p, view, n, &req, &t, &i)) == 0) {
 *             place_inflight_add(p, view[i].name, &req);
 *             ... forward; on the reply:
 *             place_inflight_remove(p, view[i].name, &req, created ? version : 0);
 *             if (created) break;          (else: refused, place again)
 *     }
 *     if (r < 0) { place_summary(p, view, n, req.backend, &s); answer no_capacity }
 */
#ifndef DSECD_PLACE_H
#define DSECD_PLACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PLACE_BACKENDS_MAX 8	/* backends one node may offer in its view */
#define PLACE_TRIES_MAX 8	/* the most targets one create may be tried on */
#define PLACE_NAME_MAX 64	/* bytes of a node name, its NUL included */
#define PLACE_PPM 1000000u	/* a load score of 100 % */
/* place_inflight_remove()'s version for a create done whose capacity
 * version the reply did not carry. */
#define PLACE_VERSION_NEXT UINT64_MAX

/* What gossip (SWIM) says of a node.  Draining is not one of these: a
 * draining node is alive and still serves its sandboxes, it only takes no
 * new ones, so it is a flag of its capacity (struct place_node.draining). */
enum place_health {
	PLACE_ALIVE,		/* answers probes */
	PLACE_SUSPECT,		/* missed probes, not yet declared dead: may be dying */
	PLACE_DEAD,		/* declared dead by the cluster */
	PLACE_LEFT,		/* left gracefully */
};

/* How a node is picked among the eligible ones. */
enum place_policy {
	PLACE_POWER_K,		/* sample k, take the least loaded (the default) */
	PLACE_RANDOM,		/* uniformly at random */
	PLACE_LEAST_LOADED,	/* scan all, take the least loaded (herds on stale views) */
};

/* One backend as a node offers it. */
struct place_backend {
	const char *name;	/* backend name ("container", "fncall"); NULL ends the list early */
	uint32_t used;		/* its sandboxes on the node, those being created included */
	uint32_t limit;		/* the most it takes (the node's max for the backend) */
};

/* One node as this node last heard of it.  The caller owns the strings and
 * arrays; place only reads them during a call. */
struct place_node {
	const char *name;	/* node name (the prefix of its sandbox ids, 1-63 bytes: a longer
				 * one is never chosen); keys the in-flight table */
	enum place_health health; /* gossip's verdict */
	bool draining;		/* takes no new sandboxes (dsecctl node drain) */
	struct place_backend be[PLACE_BACKENDS_MAX]; /* backends it offers */
	unsigned nbe;		/* entries of be[] in use */
	uint32_t cpu_free;	/* CPU not in use, in millicores (informative: CPU is oversubscribed) */
	uint32_t load;		/* CPU busy, per mille of its cores (0-1000): breaks ties */
	uint64_t mem_total;	/* memory sandboxes may use, bytes (0: unknown, share not scored) */
	uint64_t mem_free;	/* of it, not yet committed to sandboxes, bytes */
	uint64_t disk_free;	/* free bytes where writable layers go */
	uint32_t queue;		/* creates accepted and not yet finished (all backends) */
	const char *const *images; /* digests of the images whose chunks are local */
	unsigned nimages;	/* entries of images[] */
	uint64_t version;	/* the node's capacity version (grows with each change it gossips) */
	uint64_t age_ms;	/* how long ago this entry was heard (informative; the caller
				 * marks a node it has not heard of for long as suspect) */
};

/* What a create asks for. */
struct place_req {
	const char *backend;	/* backend name; required */
	const char *image;	/* image digest, or NULL: no locality preference */
	uint64_t mem;		/* memory asked, bytes (0: none) */
	uint64_t disk;		/* disk asked for the writable layer, bytes (0: none) */
};

/* Settings; place_conf_default() gives the defaults named below. */
struct place_conf {
	enum place_policy policy; /* PLACE_POWER_K */
	unsigned k;		/* nodes sampled by PLACE_POWER_K: 2 (1 is PLACE_RANDOM
				 * with the filter; more samples herd more on stale views) */
	unsigned max_attempts;	/* targets tried for one create before no_capacity: 3
				 * (1..PLACE_TRIES_MAX) */
	bool count_inflight;	/* add this node's placements in flight to the view: true */
	bool locality;		/* prefer nodes that have the image: true */
	uint32_t locality_slack; /* how much more loaded (ppm of score) a node with the image
				 * may be and still win: 100000 (10 points) */
};

/* The targets one create was tried on (and nodes excluded from the start);
 * place_choose() adds each target it returns.  The names are copied, so
 * the view may change between attempts. */
struct place_try {
	unsigned attempts;	/* targets place_choose() returned */
	unsigned nexcl;		/* names in excl[] */
	char excl[2 * PLACE_TRIES_MAX][PLACE_NAME_MAX]; /* nodes not to choose: the targets
				 * tried, then up to PLACE_TRIES_MAX the caller excluded */
};

/* The eligible part of the cluster for one backend, for a no_capacity
 * answer (so a client can back off) and for `info`. */
struct place_summary {
	unsigned nodes;		/* nodes in the view */
	unsigned alive;		/* of them alive and not draining */
	unsigned offering;	/* of those, offering the backend */
	unsigned with_room;	/* of those, with a free slot (net of in flight) */
	uint64_t slots_free;	/* free slots of the backend over the offering nodes */
	uint64_t slots_limit;	/* their limits summed */
	uint32_t slots_free_max; /* the most free slots on one node */
	uint64_t mem_free;	/* free memory over the offering nodes, bytes */
	uint64_t mem_free_max;	/* the most on one node: a create asking more fits nowhere */
	uint64_t disk_free;	/* free disk over the offering nodes, bytes */
	uint64_t disk_free_max;	/* the most on one node */
	uint64_t queue;		/* their creation queues summed */
};

struct place;

void place_conf_default(struct place_conf *c);
/* "power_k", "random", "least_loaded"; parse returns 0 or -EINVAL. */
const char *place_policy_name(enum place_policy policy);
int place_policy_parse(const char *s, enum place_policy *out);

/* A placer with a copy of conf and its generator seeded with seed.
 * Returns 0, or -EINVAL for k = 0 or max_attempts outside
 * 1..PLACE_TRIES_MAX.  Free with place_free(). */
int place_new(struct place **out, const struct place_conf *conf, uint64_t seed);
void place_free(struct place *p);

void place_try_init(struct place_try *t);
/* Excludes name from the create's choices without counting an attempt
 * (a node the caller knows cannot take it).  0, -EINVAL for a name
 * placement never chooses, or -ENOSPC after PLACE_TRIES_MAX of them. */
int place_try_exclude(struct place_try *t, const char *name);

/* Chooses the target of req among nodes[0..n-1] by the rules above and
 * stores its index in *out, adding it to t.  Returns 0 or:
 *   -ENODEV  no alive, undrained node offers the backend (none at all in
 *            an empty view): the cluster cannot run it (no_backend);
 *   -ENOSPC  some do, but none not excluded has the room (no_capacity);
 *   -EBUSY   t already holds max_attempts targets, each refused it
 *            (no_capacity: the views are behind, the cluster is full);
 *   -EINVAL  req has no backend.
 * It does not count the choice in flight: the caller does, with
 * place_inflight_add() when it forwards (a create it runs itself is in
 * its own fresh entry already). */
int place_choose(struct place *p, const struct place_node *nodes, size_t n,
		 const struct place_req *req, struct place_try *t, size_t *out);

/* A create of req forwarded to node: counted (one slot, req's memory and
 * disk) on top of the view's figures for that node until it is removed. */
void place_inflight_add(struct place *p, const char *node, const struct place_req *req);
/* The create's reply came.  version 0: the node did not create it (refused,
 * failed), forget it now.  Otherwise version is the node's first capacity
 * version that counts it (its reply says so): it stays counted until the
 * view shows that version, so the window between the reply and the next
 * gossip of the node does not herd either.  PLACE_VERSION_NEXT: created,
 * version unknown: counted until the view shows a version newer than the
 * one place_choose() last saw of the node. */
void place_inflight_remove(struct place *p, const char *node, const struct place_req *req,
			   uint64_t version);
/* Creates counted for node now (forwarded and not replied, or replied and
 * not yet in the view as of the last place_choose). */
unsigned place_inflight(const struct place *p, const char *node);

/* Fills s for backend over nodes[0..n-1], net of p's placements in flight
 * (p may be NULL: the view's figures alone). */
void place_summary(const struct place *p, const struct place_node *nodes, size_t n,
		   const char *backend, struct place_summary *s);

/* The load score of node for req as place_choose() ranks it (ppm; may
 * pass PLACE_PPM when the view is behind), for dsec-top and tests. */
uint64_t place_score(const struct place *p, const struct place_node *node,
		     const struct place_req *req);

/* The generator place draws from (xorshift64*, state never 0), for a
 * caller that wants the same family: the next value, and one uniform in
 * 0..n-1 (n > 0). */
uint64_t place_rand(uint64_t *state);
uint32_t place_rand_below(uint64_t *state, uint32_t n);

#endif
