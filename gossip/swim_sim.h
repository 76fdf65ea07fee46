/* swim_sim.h - a simulated network and clock for libswim: many struct
 * swim in one process under simulated time, deterministic for a seed.
 * Used by the t/1xxx tests and tools/swim-sim.
 *
 * Node i has the name "n<i>" and the address "sim-<i>:7946" unless its
 * conf names others (an address must then still be "sim-<i>:<port>").
 * Datagrams take latency + an exponential jitter and are lost with the
 * configured probability (or by a filter); streams are reliable and
 * refused by a node that is down.  Nothing is sent on any real network.
 */
#ifndef DSEC_SWIM_SIM_H
#define DSEC_SWIM_SIM_H

#include "swim.h"

/* The network. */
struct swim_sim_conf {
	uint64_t seed;		/* of every random choice (0 is a seed too) */
	double loss;		/* probability a datagram is lost */
	uint64_t latency_us;	/* one-way base latency */
	uint64_t jitter_us;	/* mean of an exponential added to it */
};

struct swim_sim;

/* Drops a datagram from node `from` to node `to` when it returns true
 * (partitions, targeted loss). */
typedef bool swim_sim_filter_fn(void *arg, unsigned from, unsigned to, const void *buf, size_t len);
/* A node's membership event. */
typedef void swim_sim_event_fn(void *arg, unsigned node, enum swim_event ev,
			       const struct swim_member *m);

struct swim_sim *swim_sim_new(const struct swim_sim_conf *conf);
void swim_sim_free(struct swim_sim *sim);
/* The test key every node gets unless its conf has keys. */
extern const struct swim_key swim_sim_key;

/* Adds a node (running at once) and returns its index.  conf may be NULL
 * (all defaults); its name and addr may be NULL (the sim's). */
unsigned swim_sim_add(struct swim_sim *sim, const struct swim_conf *conf);
/* The node's struct swim, or NULL while it is down. */
struct swim *swim_sim_node(struct swim_sim *sim, unsigned i);
unsigned swim_sim_count(const struct swim_sim *sim);
const char *swim_sim_name(const struct swim_sim *sim, unsigned i);
const char *swim_sim_addr(const struct swim_sim *sim, unsigned i);
/* Crashes node i (kill -9: no leave, its state is gone). */
void swim_sim_kill(struct swim_sim *sim, unsigned i);
/* Starts node i again (after a kill) with conf (NULL: as first added),
 * with a new incarnation from the simulated wall clock. */
int swim_sim_restart(struct swim_sim *sim, unsigned i, const struct swim_conf *conf);
/* Node i joins through node j. */
int swim_sim_join(struct swim_sim *sim, unsigned i, unsigned j);

/* Runs the simulation up to time `until` (microseconds since its start). */
void swim_sim_run(struct swim_sim *sim, uint64_t until);
/* Runs it for `us` more. */
void swim_sim_advance(struct swim_sim *sim, uint64_t us);
uint64_t swim_sim_now(const struct swim_sim *sim);

void swim_sim_set_filter(struct swim_sim *sim, swim_sim_filter_fn *fn, void *arg);
void swim_sim_set_event(struct swim_sim *sim, swim_sim_event_fn *fn, void *arg);
/* Node i becomes slow (a stalled, overloaded host): every datagram it
 * receives waits between delay_us/2 and delay_us more (uniform) before it
 * is handled, and it loses `loss` of them. */
void swim_sim_set_slow(struct swim_sim *sim, unsigned i, uint64_t delay_us, double loss);
/* Puts node i in partition group g (all start in 0): nothing, datagram
 * or stream, passes between nodes of different groups. */
void swim_sim_partition(struct swim_sim *sim, unsigned i, unsigned g);
/* Hands raw bytes to node i as a datagram, now. */
void swim_sim_inject(struct swim_sim *sim, unsigned i, const void *buf, size_t len);
/* Datagrams delivered and lost so far. */
uint64_t swim_sim_delivered(const struct swim_sim *sim);
uint64_t swim_sim_lost(const struct swim_sim *sim);

/* Every node up sees every other node up as alive (and knows no one else)? */
bool swim_sim_converged(struct swim_sim *sim);
/* The state node i has for node j: 0 and *st, or -ENOENT. */
int swim_sim_state(struct swim_sim *sim, unsigned i, unsigned j, enum swim_state *st);

#endif
