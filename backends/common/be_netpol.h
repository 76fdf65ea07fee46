/* be_netpol.h - allowlisted networking for sandboxes.
 *
 * A node has one bridge (be_bridge) with the gateway address of a private
 * IPv4 subnet and NAT out of it.  A sandbox with network "allowlist" gets a
 * veth pair: the host end on the bridge, the other end "eth0" in the
 * sandbox's network namespace with an address of the subnet and a default
 * route through the bridge.  Inside that namespace an nftables table
 * "inet dsec" drops everything that is not loopback, a reply to the
 * sandbox's own connections, or sent to an address:port/protocol on the
 * allowlist.  The agent cannot change it: its commands have no
 * CAP_NET_ADMIN (nor CAP_NET_RAW, so no packet socket goes around it).  The
 * allowlist can be replaced while the sandbox runs, atomically (one
 * nftables transaction).
 *
 * Whatever the allowlist says, a sandbox reaches neither the node nor
 * another sandbox:
 * - the node: the host's table "inet dsec_BRIDGE" drops every packet that
 *   arrives from the bridge for local delivery (its input hook), so every
 *   address of the node -- on any interface, IPv4 or IPv6, unicast,
 *   broadcast or multicast, those it will get later included -- is out of
 *   reach: the rule names the bridge, not addresses, so no address change
 *   can outrun it.  The bridge has no IPv6.  One port of the gateway may be
 *   opened (be_bridge.host_port, e.g. a package proxy on the node).
 * - other sandboxes: bridge ports are isolated (the kernel forwards no
 *   frame between two of them), and the host's table forwards no new
 *   connection into the bridge.
 * - link-local addresses (169.254.0.0/16: a cloud's metadata service, which
 *   gives the node's credentials to its address) are not forwarded.
 * - and again from inside: each sandbox's own table refuses the bridge's
 *   subnet (the gateway but for that port, the other sandboxes, its
 *   broadcast), link-local addresses, multicast and limited broadcast
 *   before the allowlist, so that part holds even if the host's ruleset is
 *   flushed.
 * This table also masquerades the subnet's traffic out of the node.
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
	uint16_t host_port;		/* port of gw sandboxes may reach, 0 = none */
	uint8_t host_proto;		/* its protocol: IPPROTO_TCP, _UDP, 0 = both */
	int ifindex;			/* of the bridge, 0 = not up */
	void (*log)(int level, const char *fmt, ...);	/* dsec_log levels, NULL = silent */
	bool watching;			/* the table keeper below runs */
	pthread_t keeper;		/* puts the node's table back (be_bridge_up) */
	int events_fd;			/* its nftables event socket */
	int stop_fd;			/* eventfd: stop it */
	pthread_mutex_t lock;		/* guards used */
	uint8_t used[BE_BRIDGE_MAX_HOSTS / 8]; /* host numbers in use */
};

/* Parses subnet "A.B.C.D/BITS" and host_port ("" = none, or
 * "PORT[/tcp|/udp]", both protocols without one) into br (not yet up). */
int be_bridge_conf(struct be_bridge *br, const char *name, const char *subnet,
		   const char *host_port, struct dsec_err *err);
/* Creates the bridge (or takes the one a killed daemon left), gives it the
 * gateway address and no IPv6, brings it up, enables IPv4 forwarding and
 * installs the table "inet dsec_NAME" (NAT out, nothing in to the node or
 * the bridge; see above).  A thread then watches nftables' events and puts
 * the table back whenever something removes it, such as a firewall reload
 * that flushes the whole ruleset.  Idempotent. */
int be_bridge_up(struct be_bridge *br, struct dsec_err *err);
/* Stops that thread, removes the table and the bridge (veths still on it
 * go with their namespaces).  Best effort. */
void be_bridge_down(struct be_bridge *br);
/* At start: removes the node's table, the bridge br names and its ports
 * (the dead daemon's veths) if a daemon that is gone brought them up (the
 * bridge's alias says which) or was killed making it (down, no alias),
 * leaving one of a live daemon's or of someone else alone.  True when it
 * removed them. */
bool be_bridge_remove_stale(const struct be_bridge *br);

/* Takes a free address of the subnet (*ip, host byte order) / gives it back. */
int be_bridge_ip_get(struct be_bridge *br, uint32_t *ip, struct dsec_err *err);
void be_bridge_ip_put(struct be_bridge *br, uint32_t ip);

/* Every sandbox's host end of its veth is named BE_VETH_PREFIX...: the
 * node's table drops what would come in from one that left the bridge. */
#define BE_VETH_PREFIX "dsv"

/* Connects the network namespace netns_fd (e.g. /proc/PID/ns/net) to the
 * bridge: veth host_if <-> eth0, host_if an isolated port of the bridge,
 * address ip inside, default route via the gateway, eth0 up. */
int be_veth_attach(struct be_bridge *br, int netns_fd, const char *host_if, uint32_t ip,
		   struct dsec_err *err);
/* Deletes the host end (and so the pair); a missing one is not an error. */
void be_veth_del(const char *host_if);

/* Replaces the filter of the namespace netns_fd, a sandbox on br, with one
 * that allows only the rules (and DNS to dns, host byte order, 0 = none),
 * less br's subnet but for br->host_port; n = 0 allows nothing but
 * loopback.  Atomic: a failure leaves the old filter. */
int be_netns_filter(const struct be_bridge *br, int netns_fd, const struct be_net_rule *rules,
		    size_t n, uint32_t dns, struct dsec_err *err);
/* *out = the packets the filter of namespace netns_fd has refused since
 * it was first set (its allowlist's changes keep the count). */
int be_netns_denied(int netns_fd, uint64_t *out, struct dsec_err *err);

#endif
