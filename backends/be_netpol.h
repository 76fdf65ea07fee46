/* be_netpol.h - allowlisted networking for sandboxes.
 *
 * A node has one bridge (be_bridge) with the gateway address of a private
 * IPv4 subnet and NAT out of it (an nftables table in the host's network
 * namespace).  A sandbox with network "allowlist" gets a veth pair: the host
 * end on the bridge, the other end "eth0" in the sandbox's network namespace
 * with an address of the subnet and a default route through the bridge.
 * Inside that namespace an nftables table "inet dsec" drops everything that
 * is not loopback, a reply to the sandbox's own connections, or sent to an
 * address:port/protocol on the allowlist.  The agent cannot change it: its
 * commands have no CAP_NET_ADMIN.  The allowlist can be replaced while the
 * sandbox runs, atomically (one nftables transaction).
 *
 * Links and addresses are set up with libnl-3, rules with libnftables.
 * Every function may block (netlink, nftables): call them from a worker
 * thread, never from the event loop.  They return 0 or -errno and fill err.
 */
#ifndef DSEC_BE_NETPOL_H
#define DSEC_BE_NETPOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* One allowlist entry: ADDR[/BITS][:PORTS[/PROTO]]. */
struct be_net_rule {
	uint32_t addr;		/* network address, host byte order */
	uint8_t bits;		/* prefix length, 0..32 */
	uint16_t port_lo;	/* first port, 0 = every port */
	uint16_t port_hi;	/* last port (== port_lo for one) */
	uint8_t proto;		/* IPPROTO_TCP, IPPROTO_UDP, or 0 = both (or any without a port) */
};

/* Parses a NULL-terminated allowlist (NULL = empty).  Entries look like
 * "10.0.0.0/8", "1.2.3.4:443", "1.2.3.4:443/tcp", "1.2.3.4:8000-8100/udp";
 * PORTS "*" is every port of PROTO.  Names are refused: there is no
 * resolver on the host's side.  *out (caller frees) holds *n rules. */
int be_net_rules_parse(const char *const *allow, struct be_net_rule **out, size_t *n,
		       struct dsec_err *err);

#define BE_BRIDGE_MAX_HOSTS 65536

/* The node's bridge and its address pool. */
struct be_bridge {
	char name[16];			/* interface name */
	uint32_t net;			/* subnet, host byte order */
	uint8_t bits;			/* its prefix length (8..30) */
	uint32_t gw;			/* the bridge's own address (net + 1) */
	int ifindex;			/* of the bridge, 0 = not up */
	pthread_mutex_t lock;		/* guards used */
	uint8_t used[BE_BRIDGE_MAX_HOSTS / 8]; /* host numbers in use */
};

/* Parses "A.B.C.D/BITS" into br (not yet up). */
int be_bridge_conf(struct be_bridge *br, const char *name, const char *subnet,
		   struct dsec_err *err);
/* Creates the bridge (or takes the one a killed daemon left), gives it the
 * gateway address, brings it up, enables IPv4 forwarding and installs the
 * NAT table "ip dsec-NAME".  Idempotent. */
int be_bridge_up(struct be_bridge *br, struct dsec_err *err);
/* Removes the NAT table and the bridge (veths still on it go with their
 * namespaces).  Best effort. */
void be_bridge_down(struct be_bridge *br);
/* At start: removes the NAT table and the bridge br names if a daemon that
 * is gone brought them up (the bridge's alias says which), leaving one of
 * a live daemon's or of someone else alone.  True when it removed them. */
bool be_bridge_remove_stale(const struct be_bridge *br);

/* Takes a free address of the subnet (*ip, host byte order) / gives it back. */
int be_bridge_ip_get(struct be_bridge *br, uint32_t *ip, struct dsec_err *err);
void be_bridge_ip_put(struct be_bridge *br, uint32_t ip);

/* Connects the network namespace netns_fd (e.g. /proc/PID/ns/net) to the
 * bridge: veth host_if <-> eth0, address ip inside, default route via the
 * gateway, eth0 up. */
int be_veth_attach(struct be_bridge *br, int netns_fd, const char *host_if, uint32_t ip,
		   struct dsec_err *err);
/* Deletes the host end (and so the pair); a missing one is not an error. */
void be_veth_del(const char *host_if);

/* Replaces the filter of the namespace netns_fd with one that allows only
 * the rules (and DNS to dns, host byte order, 0 = none); n = 0 allows
 * nothing but loopback.  Atomic: a failure leaves the old filter. */
int be_netns_filter(int netns_fd, const struct be_net_rule *rules, size_t n, uint32_t dns,
		    struct dsec_err *err);

#endif
