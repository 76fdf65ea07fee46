/* be_netpol.c - allowlisted networking: bridge, NAT, veth, nftables filter.
 * See be_netpol.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/if_link.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/rtnetlink.h>
#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/bridge.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>
#include <nftables/libnftables.h>

#include "be_netpol.h"
#include "log.h"
#include "util.h"

/* ---- allowlist ------------------------------------------------------------ */

static int bad_entry(struct dsec_err *err, const char *s, const char *why)
{
	return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "allowlist entry '%.80s': %s", s, why);
}

static int parse_port(const char *s, uint16_t *out)
{
	char *end;
	unsigned long v;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v == 0 || v > 65535)
		return -EINVAL;
	*out = (uint16_t)v;
	return 0;
}

static int parse_proto(const char *s, uint8_t *out)
{
	if (!strcmp(s, "tcp"))
		*out = IPPROTO_TCP;
	else if (!strcmp(s, "udp"))
		*out = IPPROTO_UDP;
	else
		return -EINVAL;
	return 0;
}

static int parse_one(const char *s, struct be_net_rule *r, struct dsec_err *err)
{
	char buf[96], *ports, *proto, *bits, *dash;
	struct in_addr a;

	memset(r, 0, sizeof(*r));
	if (strlen(s) >= sizeof(buf))
		return bad_entry(err, s, "too long");
	strcpy(buf, s);
	r->bits = 32;
	if ((ports = strchr(buf, ':')))
		*ports++ = '\0';
	if ((bits = strchr(buf, '/'))) {
		char *end;
		unsigned long b;

		*bits++ = '\0';
		errno = 0;
		b = strtoul(bits, &end, 10);
		if (errno || !*bits || *end || b > 32)
			return bad_entry(err, s, "the prefix length must be 0 to 32");
		r->bits = (uint8_t)b;
	}
	if (inet_pton(AF_INET, buf, &a) != 1)
		return bad_entry(err, s, "not an IPv4 address or network (names are not resolved)");
	r->addr = ntohl(a.s_addr);
	if (r->bits < 32)
		r->addr &= r->bits ? ~((1u << (32 - r->bits)) - 1) : 0;
	if (!ports)
		return 0;
	if ((proto = strchr(ports, '/'))) {
		*proto++ = '\0';
		if (parse_proto(proto, &r->proto) < 0)
			return bad_entry(err, s, "the protocol must be tcp or udp");
	}
	if (!strcmp(ports, "*")) {
		if (!r->proto)
			return bad_entry(err, s, "'*' ports need a protocol (or leave out ':*')");
		return 0;
	}
	if ((dash = strchr(ports, '-')))
		*dash++ = '\0';
	if (parse_port(ports, &r->port_lo) < 0 || (dash && parse_port(dash, &r->port_hi) < 0))
		return bad_entry(err, s, "ports must be 1 to 65535, one or a range N-M");
	if (!dash)
		r->port_hi = r->port_lo;
	if (r->port_hi < r->port_lo)
		return bad_entry(err, s, "the port range is reversed");
	return 0;
}

int be_net_rules_parse(const char *const *allow, struct be_net_rule **out, size_t *n,
		       struct dsec_err *err)
{
	size_t cnt = allow ? dsec_strv_len(allow) : 0;
	struct be_net_rule *r;
	int rc;

	*out = NULL;
	*n = 0;
	if (cnt > 1024)
		return dsec_err_setc(err, DSEC_E_INVALID, E2BIG,
				     "the allowlist has %zu entries, more than 1024", cnt);
	r = xcalloc(cnt ? cnt : 1, sizeof(*r));
	for (size_t i = 0; i < cnt; i++)
		if ((rc = parse_one(allow[i], &r[i], err)) < 0) {
			free(r);
			return rc;
		}
	*out = r;
	*n = cnt;
	return 0;
}

/* ---- helpers -------------------------------------------------------------- */

static const char *ip4(uint32_t a, char buf[INET_ADDRSTRLEN])
{
	struct in_addr x = { .s_addr = htonl(a) };

	return inet_ntop(AF_INET, &x, buf, INET_ADDRSTRLEN);
}

/* The nft match of port (0 = none) of proto (0 = tcp and udp); "" for
 * no port but a protocol: its l4proto. */
static const char *port_match(uint16_t port, uint8_t proto, char *buf, size_t len)
{
	const char *p = proto == IPPROTO_TCP ? "tcp" : proto == IPPROTO_UDP ? "udp" : NULL;

	if (port)
		snprintf(buf, len, " %s dport %u", p ? p : "meta l4proto { tcp, udp } th", port);
	else if (p)
		snprintf(buf, len, " meta l4proto %s", p);
	else
		buf[0] = '\0';
	return buf;
}

/* libnl's error codes to errno, for callers that branch on them. */
static int nl_errno(int e)
{
	switch (e < 0 ? -e : e) {
	case NLE_EXIST: return EEXIST;
	case NLE_NOMEM: return ENOMEM;
	case NLE_PERM: return EPERM;
	case NLE_NODEV: return ENODEV;
	case NLE_OBJ_NOTFOUND: return ENOENT;
	case NLE_INVAL: return EINVAL;
	case NLE_BUSY: return EBUSY;
	default: return EIO;
	}
}

static int nl_fail(struct dsec_err *err, int e, const char *what, const char *obj)
{
	return dsec_err_setc(err, DSEC_E_BACKEND, nl_errno(e), "cannot %s '%s': %s", what, obj,
			     nl_geterror(e));
}

static int nl_open(struct nl_sock **out, struct dsec_err *err)
{
	struct nl_sock *sk = nl_socket_alloc();
	int e;

	if (!sk)
		return dsec_err_set(err, ENOMEM, "cannot allocate a netlink socket");
	if ((e = nl_connect(sk, NETLINK_ROUTE)) < 0) {
		nl_socket_free(sk);
		return nl_fail(err, e, "connect", "rtnetlink");
	}
	*out = sk;
	return 0;
}

/* Runs nft commands (one transaction) in the caller's network namespace. */
static int nft_run(const char *cmds, const char *what, struct dsec_err *err)
{
	struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
	int rc = 0;

	if (!ctx)
		return dsec_err_set(err, ENOMEM, "cannot start nftables");
	nft_ctx_buffer_output(ctx);
	nft_ctx_buffer_error(ctx);
	if (nft_run_cmd_from_buffer(ctx, cmds) != 0) {
		const char *m = nft_ctx_get_error_buffer(ctx);

		rc = dsec_err_setc(err, DSEC_E_BACKEND, EINVAL, "cannot set %s: %.*s", what,
				   m ? (int)strcspn(m, "\n") : 0, m ? m : "");
	}
	nft_ctx_free(ctx);
	return rc;
}

struct ns_job {
	int nsfd;					/* network namespace */
	int (*fn)(void *arg, struct dsec_err *err);	/* what to run inside */
	void *arg;					/* its argument */
	struct dsec_err *err;				/* why it failed */
	int rc;						/* its result */
};

static void *ns_thread(void *p)
{
	struct ns_job *j = p;

	if (setns(j->nsfd, CLONE_NEWNET) < 0)
		j->rc = dsec_err_set(j->err, errno,
				     "cannot enter the sandbox's network namespace: %s",
				     strerror(errno));
	else
		j->rc = j->fn(j->arg, j->err);
	return NULL;
}

/* Runs fn in the network namespace nsfd on a thread of its own: a worker
 * thread that entered a sandbox's namespace and failed to come back would
 * run later work in the wrong one.  The thread dies with the namespace it
 * holds. */
static int in_netns(int nsfd, int (*fn)(void *, struct dsec_err *), void *arg,
		    struct dsec_err *err)
{
	struct ns_job j = { .nsfd = nsfd, .fn = fn, .arg = arg, .err = err };
	pthread_t t;
	int e;

	if ((e = pthread_create(&t, NULL, ns_thread, &j)) != 0)
		return dsec_err_set(err, e, "cannot start a thread: %s", strerror(e));
	pthread_join(t, NULL);
	return j.rc;
}

static int link_up(struct nl_sock *sk, struct rtnl_link *l, const char *name,
		   struct dsec_err *err)
{
	struct rtnl_link *chg = rtnl_link_alloc();
	int e;

	rtnl_link_set_flags(chg, IFF_UP);
	e = rtnl_link_change(sk, l, chg, 0);
	rtnl_link_put(chg);
	return e < 0 ? nl_fail(err, e, "bring up", name) : 0;
}

static int addr_add(struct nl_sock *sk, int ifindex, uint32_t ip, uint8_t bits,
		    const char *ifname, struct dsec_err *err)
{
	char s[INET_ADDRSTRLEN + 4], a[INET_ADDRSTRLEN];
	struct rtnl_addr *ra = rtnl_addr_alloc();
	struct nl_addr *local = NULL;
	int e;

	snprintf(s, sizeof(s), "%s/%u", ip4(ip, a), bits);
	if ((e = nl_addr_parse(s, AF_INET, &local)) == 0) {
		rtnl_addr_set_ifindex(ra, ifindex);
		rtnl_addr_set_local(ra, local);
		e = rtnl_addr_add(sk, ra, 0);
		nl_addr_put(local);
	}
	rtnl_addr_put(ra);
	if (e < 0 && nl_errno(e) != EEXIST)
		return nl_fail(err, e, "add an address to", ifname);
	return 0;
}

/* ---- bridge --------------------------------------------------------------- */

int be_bridge_conf(struct be_bridge *br, const char *name, const char *subnet,
		   const char *host_port, struct dsec_err *err)
{
	const char *const v[] = { subnet, NULL };
	struct be_net_rule *r;
	size_t n;
	int rc;
	char buf[16], *proto;

	memset(br, 0, sizeof(*br));
	pthread_mutex_init(&br->lock, NULL);
	br->events_fd = br->stop_fd = -1;
	if (!*name || strlen(name) >= sizeof(br->name) || strpbrk(name, "/ :\"\\"))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "bridge name '%s' is not a valid interface name", name);
	snprintf(br->name, sizeof(br->name), "%s", name);
	if ((rc = be_net_rules_parse(v, &r, &n, err)) < 0)
		return rc;
	br->net = r->addr;
	br->bits = r->bits;
	free(r);
	if (br->bits < 16 || br->bits > 30 || strchr(subnet, ':') || br->net >> 24 == 0 ||
	    br->net >> 24 == 127 || br->net >> 29 == 7)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "subnet '%s' must be a unicast IPv4 network from /16 to /30",
				     subnet);
	br->gw = br->net + 1;
	if (host_port && *host_port) {
		snprintf(buf, sizeof(buf), "%s", host_port);
		if ((proto = strchr(buf, '/')))
			*proto++ = '\0';
		if (strlen(host_port) >= sizeof(buf) || parse_port(buf, &br->host_port) < 0 ||
		    (proto && parse_proto(proto, &br->host_proto) < 0))
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "host port '%s' is not PORT, PORT/tcp or PORT/udp "
					     "with PORT 1 to 65535", host_port);
	}
	/* host numbers 0 (network), 1 (gateway) and the broadcast are taken */
	br->used[0] |= 3;
	{
		uint32_t last = (1u << (32 - br->bits)) - 1;

		br->used[last / 8] |= (uint8_t)(1u << (last % 8));
	}
	return 0;
}

static int table_name(const struct be_bridge *br, char *buf, size_t len)
{
	char name[24];

	/* nft identifiers: letters, digits and '_' only */
	snprintf(name, sizeof(name), "dsec_%s", br->name);
	for (char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9')))
			*p = '_';
	return snprintf(buf, len, "%s", name);
}

/* The host's side of the sandboxes' network (see be_netpol.h): NAT out,
 * nothing from the bridge to the node but replies and br->host_port of the
 * gateway, no new connection forwarded into the bridge, and nothing to
 * link-local addresses (a cloud's metadata service, 169.254.169.254, hands
 * out the node's credentials to whoever asks from its address).  The input
 * rules name the bridge, not addresses: they cover every address the node
 * has or will have.  Replaces the table of a killed daemon (and the "ip"
 * NAT table of older ones) in the same transaction. */
static int host_table(const struct be_bridge *br, struct dsec_err *err)
{
	char cmds[1536], tbl[24], net[INET_ADDRSTRLEN], gw[INET_ADDRSTRLEN], port[64],
		open_port[160] = "";

	table_name(br, tbl, sizeof(tbl));
	if (br->host_port)
		snprintf(open_port, sizeof(open_port), "    iifname \"%s\" ip daddr %s%s accept\n",
			 br->name, ip4(br->gw, gw),
			 port_match(br->host_port, br->host_proto, port, sizeof(port)));
	snprintf(cmds, sizeof(cmds),
		 "table ip %s\n"
		 "delete table ip %s\n"
		 "table inet %s\n"
		 "delete table inet %s\n"
		 "table inet %s {\n"
		 "  chain postrouting {\n"
		 "    type nat hook postrouting priority srcnat; policy accept;\n"
		 "    ip saddr %s/%u oifname != \"%s\" masquerade\n"
		 "  }\n"
		 "  chain input {\n"
		 "    type filter hook input priority filter; policy accept;\n"
		 "    iifname \"%s\" ct state established,related accept\n"
		 "%s"
		 "    iifname \"%s\" meta pkttype host meta l4proto tcp reject with tcp reset\n"
		 "    iifname \"%s\" meta pkttype host reject with icmpx type admin-prohibited\n"
		 "    iifname \"%s\" drop\n"
		 "    iifname \"" BE_VETH_PREFIX "*\" drop\n"
		 "  }\n"
		 "  chain forward {\n"
		 "    type filter hook forward priority filter; policy accept;\n"
		 "    oifname \"%s\" ct state established,related accept\n"
		 "    oifname \"%s\" drop\n"
		 "    iifname \"%s\" ip daddr 169.254.0.0/16 reject with icmpx type admin-prohibited\n"
		 "  }\n"
		 "}\n", tbl, tbl, tbl, tbl, tbl, ip4(br->net, net), br->bits, br->name, br->name,
		 open_port, br->name, br->name, br->name, br->name, br->name, br->name);
	return nft_run(cmds, "the sandboxes' table on the node", err);
}

/* Best effort: a kernel without IPv6 has no such file. */
static void no_ipv6(const char *ifname)
{
	char path[96];
	int fd;

	snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/disable_ipv6", ifname);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) >= 0) {
		if (write(fd, "1\n", 2) != 2) {
			/* the input rules drop IPv6 from the bridge anyway */
		}
		close(fd);
	}
}

/* ---- keeping the node's table ------------------------------------------- */

/* Is the nftables event h about our table? */
static bool event_ours(const struct be_bridge *br, struct nlmsghdr *h)
{
	struct nlattr *tb[NFTA_TABLE_MAX + 1];
	const struct nfgenmsg *g = nlmsg_data(h);
	char tbl[24];

	if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*g)) || g->nfgen_family != NFPROTO_INET ||
	    nlmsg_parse(h, sizeof(*g), tb, NFTA_TABLE_MAX, NULL) < 0 || !tb[NFTA_TABLE_NAME])
		return false;
	table_name(br, tbl, sizeof(tbl));
	return nla_strcmp(tb[NFTA_TABLE_NAME], tbl) == 0;
}

static void table_restore(struct be_bridge *br, const char *why)
{
	struct dsec_err err;
	char tbl[24];

	table_name(br, tbl, sizeof(tbl));
	if (host_table(br, &err) < 0) {
		if (br->log)
			br->log(DSEC_LOG_ERROR, "container: the node's table 'inet %s' %s and cannot "
				"be put back: %s", tbl, why, err.msg);
	} else if (br->log) {
		br->log(DSEC_LOG_WARN, "container: the node's table 'inet %s' %s: put back", tbl,
			why);
	}
}

/* Why: the sandboxes' node-side filter (and their NAT) is a table of the
 * host's ruleset, which a firewall reload flushes whole (`nft flush
 * ruleset`, as Debian's nftables.service does when it starts or reloads).
 * This thread follows nftables' change events and puts the table back at
 * the end of the transaction that removed it, so the node stays out of the
 * sandboxes' reach but for that moment (their own filters still refuse the
 * bridge's subnet meanwhile).  If the kernel dropped events (ENOBUFS), it
 * cannot tell, and puts the table back anyway (the same transaction as at
 * bring-up, harmless when the table is there). */
static void *keeper_thread(void *arg)
{
	struct be_bridge *br = arg;
	struct pollfd pf[2] = { { .fd = br->events_fd, .events = POLLIN },
				{ .fd = br->stop_fd, .events = POLLIN } };
	const size_t cap = 65536;
	char *buf = xmalloc(cap);
	bool gone = false;

	for (;;) {
		if (poll(pf, 2, -1) < 0 && errno != EINTR)
			break;
		if (pf[1].revents)
			break;
		if (!(pf[0].revents & (POLLIN | POLLERR)))
			continue;
		ssize_t n = recv(br->events_fd, buf, cap, MSG_DONTWAIT);

		if (n < 0) {
			if (errno == ENOBUFS)
				table_restore(br, "may have been removed (nftables events were lost)");
			else if (errno != EAGAIN && errno != EINTR)
				break;
			continue;
		}
		int len = (int)n;

		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; nlmsg_ok(h, len);
		     h = nlmsg_next(h, &len)) {
			if (NFNL_SUBSYS_ID(h->nlmsg_type) != NFNL_SUBSYS_NFTABLES)
				continue;
			switch (NFNL_MSG_TYPE(h->nlmsg_type)) {
			case NFT_MSG_NEWTABLE:
			case NFT_MSG_DELTABLE:
				if (event_ours(br, h))
					gone = NFNL_MSG_TYPE(h->nlmsg_type) == NFT_MSG_DELTABLE;
				break;
			case NFT_MSG_NEWGEN:	/* the end of a transaction */
				if (gone)
					table_restore(br, "was removed (a firewall reload?)");
				gone = false;
				break;
			}
		}
	}
	free(buf);
	return NULL;
}

/* Subscribes to nftables' events (before the table goes in, so no removal
 * is missed) and starts the keeper. */
static int keeper_start(struct be_bridge *br, struct dsec_err *err)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	int grp = NFNLGRP_NFTABLES, rcv = 1 << 20, e;

	br->events_fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
	br->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (br->events_fd < 0 || br->stop_fd < 0 ||
	    bind(br->events_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    setsockopt(br->events_fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &grp, sizeof(grp)) < 0)
		goto fail;
	setsockopt(br->events_fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	if ((e = pthread_create(&br->keeper, NULL, keeper_thread, br)) != 0) {
		errno = e;
		goto fail;
	}
	br->watching = true;
	return 0;
fail:
	e = errno;
	if (br->events_fd >= 0)
		close(br->events_fd);
	if (br->stop_fd >= 0)
		close(br->stop_fd);
	br->events_fd = br->stop_fd = -1;
	return dsec_err_setc(err, DSEC_E_BACKEND, e, "cannot watch nftables' events: %s",
			     strerror(e));
}

static void keeper_stop(struct be_bridge *br)
{
	uint64_t one = 1;

	if (!br->watching)
		return;
	if (write(br->stop_fd, &one, sizeof(one)) != sizeof(one))
		DSEC_BUG("cannot stop the table keeper: %s", strerror(errno));
	pthread_join(br->keeper, NULL);
	close(br->events_fd);
	close(br->stop_fd);
	br->events_fd = br->stop_fd = -1;
	br->watching = false;
}

/* The alias that names the daemon a bridge is up for ("dsecd:PID"), so
 * that a daemon started after that one was killed knows it for a leftover
 * (be_bridge_remove_stale). */
#define BR_ALIAS "dsecd:"

/* Brings the bridge up, ours. */
static int bridge_claim(struct nl_sock *sk, struct rtnl_link *l, const char *name,
			struct dsec_err *err)
{
	struct rtnl_link *chg = rtnl_link_alloc();
	char alias[32];
	int e;

	snprintf(alias, sizeof(alias), BR_ALIAS "%d", (int)getpid());
	rtnl_link_set_ifalias(chg, alias);
	rtnl_link_set_flags(chg, IFF_UP);
	e = rtnl_link_change(sk, l, chg, 0);
	rtnl_link_put(chg);
	return e < 0 ? nl_fail(err, e, "bring up", name) : 0;
}

int be_bridge_up(struct be_bridge *br, struct dsec_err *err)
{
	struct rtnl_link *l = NULL, *cur = NULL;
	struct nl_sock *sk = NULL;
	const char *type;
	int e, rc, fd;

	if ((rc = nl_open(&sk, err)) < 0)
		return rc;
	l = rtnl_link_bridge_alloc();
	rtnl_link_set_name(l, br->name);
	e = rtnl_link_add(sk, l, NLM_F_CREATE);
	rtnl_link_put(l);
	if (e < 0 && nl_errno(e) != EEXIST) {
		rc = nl_fail(err, e, "create the bridge", br->name);
		goto out;
	}
	if ((e = rtnl_link_get_kernel(sk, 0, br->name, &cur)) < 0) {
		rc = nl_fail(err, e, "find the bridge", br->name);
		goto out;
	}
	type = rtnl_link_get_type(cur);
	if (!type || strcmp(type, "bridge")) {
		rc = dsec_err_setc(err, DSEC_E_BACKEND, EEXIST,
				   "cannot use '%s' as the sandboxes' bridge: it is a %s link",
				   br->name, type ? type : "non-bridge");
		goto out;
	}
	/* The filter first, so the bridge never carries a packet without it. */
	if ((!br->watching && (rc = keeper_start(br, err)) < 0) || (rc = host_table(br, err)) < 0)
		goto out;
	no_ipv6(br->name);
	if ((rc = addr_add(sk, rtnl_link_get_ifindex(cur), br->gw, br->bits, br->name, err)) < 0 ||
	    (rc = bridge_claim(sk, cur, br->name, err)) < 0)
		goto out;
	/* Forwarding is the host's switch for routing sandboxes' packets out. */
	if ((fd = open("/proc/sys/net/ipv4/ip_forward", O_RDWR | O_CLOEXEC)) >= 0) {
		char c = '0';

		if (read(fd, &c, 1) == 1 && c != '1' && pwrite(fd, "1\n", 2, 0) != 2) {
			rc = dsec_err_set(err, errno, "cannot enable IPv4 forwarding: %s",
					  strerror(errno));
			close(fd);
			goto out;
		}
		close(fd);
	}
	br->ifindex = rtnl_link_get_ifindex(cur);
	rc = 0;
out:
	if (cur)
		rtnl_link_put(cur);
	nl_socket_free(sk);
	return rc;
}

/* The node's table (and an older daemon's "ip" NAT table) and the bridge
 * go. */
static void bridge_remove(const struct be_bridge *br)
{
	struct nl_sock *sk = NULL;
	struct rtnl_link *l;
	struct dsec_err err;
	char cmds[160], tbl[24];

	table_name(br, tbl, sizeof(tbl));
	snprintf(cmds, sizeof(cmds),
		 "table ip %s\ndelete table ip %s\ntable inet %s\ndelete table inet %s\n", tbl, tbl,
		 tbl, tbl);
	nft_run(cmds, "the sandboxes' table on the node", &err);
	if (nl_open(&sk, &err) == 0) {
		l = rtnl_link_alloc();
		rtnl_link_set_name(l, br->name);
		rtnl_link_delete(sk, l);
		rtnl_link_put(l);
		nl_socket_free(sk);
	}
}

void be_bridge_down(struct be_bridge *br)
{
	keeper_stop(br);
	if (!br->ifindex)
		return;
	bridge_remove(br);
	br->ifindex = 0;
}

/* Deletes every port of the bridge ifindex names: the host ends of a dead
 * daemon's veths.  The kernel would delete each with its sandbox's network
 * namespace, but from a work queue, seconds later on a busy node, and a
 * port left from the bridge is no longer one the node's table knows. */
static void bridge_ports_delete(struct nl_sock *sk, int ifindex)
{
	struct nl_cache *links = NULL;
	struct nl_object *o;

	if (rtnl_link_alloc_cache(sk, AF_UNSPEC, &links) < 0)
		return;
	for (o = nl_cache_get_first(links); o; o = nl_cache_get_next(o)) {
		struct rtnl_link *l = (struct rtnl_link *)o;

		if (rtnl_link_get_master(l) == ifindex)
			rtnl_link_delete(sk, l);
	}
	nl_cache_free(links);
}

bool be_bridge_remove_stale(const struct be_bridge *br)
{
	struct rtnl_link *cur = NULL;
	struct nl_sock *sk = NULL;
	struct dsec_err err;
	const char *alias, *type;
	bool stale = false;
	char *end;
	long pid;

	if (nl_open(&sk, &err) < 0)
		return false;
	if (rtnl_link_get_kernel(sk, 0, br->name, &cur) == 0) {
		type = rtnl_link_get_type(cur);
		alias = rtnl_link_get_ifalias(cur);
		if (type && !strcmp(type, "bridge") && alias &&
		    !strncmp(alias, BR_ALIAS, strlen(BR_ALIAS))) {
			pid = strtol(alias + strlen(BR_ALIAS), &end, 10);
			stale = !*end && pid > 0 && pid != getpid() && kill((pid_t)pid, 0) < 0 &&
				errno == ESRCH;
		} else if (type && !strcmp(type, "bridge") && (!alias || !*alias)) {
			/* The kernel takes no alias with a new link (be_bridge_up
			 * sets it when it brings the bridge up): down and
			 * unnamed, it is one a daemon was killed making. */
			stale = !(rtnl_link_get_flags(cur) & IFF_UP);
		}
		if (stale)
			bridge_ports_delete(sk, rtnl_link_get_ifindex(cur));
		rtnl_link_put(cur);
	}
	nl_socket_free(sk);
	if (stale)
		bridge_remove(br);
	return stale;
}

int be_bridge_ip_get(struct be_bridge *br, uint32_t *ip, struct dsec_err *err)
{
	uint32_t hosts = 1u << (32 - br->bits);
	int rc = -ENOSPC;

	pthread_mutex_lock(&br->lock);
	for (uint32_t h = 2; h < hosts && h < BE_BRIDGE_MAX_HOSTS; h++)
		if (!(br->used[h / 8] & (1u << (h % 8)))) {
			br->used[h / 8] |= (uint8_t)(1u << (h % 8));
			*ip = br->net + h;
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&br->lock);
	if (rc < 0)
		return dsec_err_setc(err, DSEC_E_CAPACITY, ENOSPC,
				     "no free address left on bridge '%s'", br->name);
	return 0;
}

void be_bridge_ip_put(struct be_bridge *br, uint32_t ip)
{
	uint32_t h = ip - br->net;

	if (!ip || h >= BE_BRIDGE_MAX_HOSTS)
		return;
	pthread_mutex_lock(&br->lock);
	br->used[h / 8] &= (uint8_t)~(1u << (h % 8));
	pthread_mutex_unlock(&br->lock);
}

/* ---- a sandbox's end ------------------------------------------------------ */

struct inside {
	uint32_t ip, gw;	/* the sandbox's address and its gateway */
	uint8_t bits;		/* prefix length */
};

static int configure_inside(void *arg, struct dsec_err *err)
{
	struct inside *in = arg;
	struct rtnl_link *eth = NULL;
	struct rtnl_route *rt = NULL;
	struct nl_addr *gw = NULL, *dst = NULL;
	struct nl_sock *sk;
	char g[INET_ADDRSTRLEN];
	int e, rc;

	if ((rc = nl_open(&sk, err)) < 0)
		return rc;
	if ((e = rtnl_link_get_kernel(sk, 0, "eth0", &eth)) < 0) {
		rc = nl_fail(err, e, "find the sandbox's link", "eth0");
		goto out;
	}
	if ((rc = addr_add(sk, rtnl_link_get_ifindex(eth), in->ip, in->bits, "eth0", err)) < 0 ||
	    (rc = link_up(sk, eth, "eth0", err)) < 0)
		goto out;
	rt = rtnl_route_alloc();
	if ((e = nl_addr_parse("default", AF_INET, &dst)) < 0 ||
	    (e = nl_addr_parse(ip4(in->gw, g), AF_INET, &gw)) < 0) {
		rc = nl_fail(err, e, "parse the route to", g);
		goto out;
	}
	struct rtnl_nexthop *nh = rtnl_route_nh_alloc();

	rtnl_route_nh_set_ifindex(nh, rtnl_link_get_ifindex(eth));
	rtnl_route_nh_set_gateway(nh, gw);
	rtnl_route_set_family(rt, AF_INET);
	rtnl_route_set_dst(rt, dst);
	rtnl_route_add_nexthop(rt, nh);	/* rt owns nh */
	if ((e = rtnl_route_add(sk, rt, NLM_F_CREATE)) < 0 && nl_errno(e) != EEXIST) {
		rc = nl_fail(err, e, "add the default route via", g);
		goto out;
	}
	rc = 0;
out:
	if (gw)
		nl_addr_put(gw);
	if (dst)
		nl_addr_put(dst);
	if (rt)
		rtnl_route_put(rt);
	if (eth)
		rtnl_link_put(eth);
	nl_socket_free(sk);
	return rc;
}

/* Makes ifindex an isolated port of its bridge: the kernel forwards no
 * frame (unicast, broadcast or flooded) between two isolated ports, so
 * sandboxes on the bridge meet only the gateway.  A kernel flag, not a
 * rule: no firewall reload removes it.  libnl 3.7 has no setter for it. */
static int port_isolate(struct nl_sock *sk, int ifindex, const char *name,
			struct dsec_err *err)
{
	struct ifinfomsg ifi = { .ifi_family = AF_BRIDGE, .ifi_index = ifindex };
	struct nl_msg *m = nlmsg_alloc_simple(RTM_SETLINK, NLM_F_REQUEST | NLM_F_ACK);
	struct nlattr *pi;
	int e;

	if (!m)
		return dsec_err_set(err, ENOMEM, "cannot allocate a netlink message");
	if ((e = nlmsg_append(m, &ifi, sizeof(ifi), NLMSG_ALIGNTO)) < 0 ||
	    !(pi = nla_nest_start(m, IFLA_PROTINFO | NLA_F_NESTED)) ||
	    (e = nla_put_u8(m, IFLA_BRPORT_ISOLATED, 1)) < 0 ||
	    (e = nla_nest_end(m, pi)) < 0 || (e = nl_send_auto(sk, m)) < 0 ||
	    (e = nl_wait_for_ack(sk)) < 0) {
		nlmsg_free(m);
		return nl_fail(err, e ? e : -NLE_NOMEM, "isolate the bridge port", name);
	}
	nlmsg_free(m);
	return 0;
}

int be_veth_attach(struct be_bridge *br, int netns_fd, const char *host_if, uint32_t ip,
		   struct dsec_err *err)
{
	struct inside in = { .ip = ip, .gw = br->gw, .bits = br->bits };
	struct rtnl_link *veth, *peer, *cur = NULL;
	struct nl_sock *sk;
	int e, rc;

	if ((rc = nl_open(&sk, err)) < 0)
		return rc;
	veth = rtnl_link_veth_alloc();
	rtnl_link_set_name(veth, host_if);
	rtnl_link_set_master(veth, br->ifindex);
	peer = rtnl_link_veth_get_peer(veth);
	rtnl_link_set_name(peer, "eth0");
	rtnl_link_set_ns_fd(peer, netns_fd);
	rtnl_link_put(peer);
	e = rtnl_link_add(sk, veth, NLM_F_CREATE | NLM_F_EXCL);
	rtnl_link_veth_release(veth);
	if (e < 0) {
		rc = nl_fail(err, e, "create the veth pair", host_if);
		goto out;
	}
	if ((e = rtnl_link_get_kernel(sk, 0, host_if, &cur)) < 0) {
		rc = nl_fail(err, e, "find the veth", host_if);
		goto out;
	}
	if ((rc = port_isolate(sk, rtnl_link_get_ifindex(cur), host_if, err)) < 0 ||
	    (rc = link_up(sk, cur, host_if, err)) < 0 ||
	    (rc = in_netns(netns_fd, configure_inside, &in, err)) < 0)
		goto out;
	rc = 0;
out:
	if (cur)
		rtnl_link_put(cur);
	nl_socket_free(sk);
	if (rc < 0)
		be_veth_del(host_if);
	return rc;
}

void be_veth_del(const char *host_if)
{
	struct nl_sock *sk;
	struct rtnl_link *l;
	struct dsec_err err;

	if (nl_open(&sk, &err) < 0)
		return;
	l = rtnl_link_alloc();
	rtnl_link_set_name(l, host_if);
	rtnl_link_delete(sk, l);
	rtnl_link_put(l);
	nl_socket_free(sk);
}

/* ---- the filter ----------------------------------------------------------- */

static void rule_text(struct dsec_buf *b, const struct be_net_rule *r)
{
	char a[INET_ADDRSTRLEN], line[160], port[64], hi[8] = "";

	if (r->port_hi != r->port_lo)
		snprintf(hi, sizeof(hi), "-%u", r->port_hi);
	snprintf(line, sizeof(line), "    ip daddr %s/%u%s%s accept\n", ip4(r->addr, a), r->bits,
		 port_match(r->port_lo, r->proto, port, sizeof(port)), hi);
	dsec_buf_add(b, line, strlen(line));
}

/* Reads the "denied" counter of the dsec table in the caller's network
 * namespace: the packets and bytes its refuse chain has refused.  0 and
 * 0 when there is no such table yet. */
static int denied_read(uint64_t *pkts, uint64_t *bytes, struct dsec_err *err)
{
	struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
	const char *out, *p;
	int rc = 0;

	*pkts = *bytes = 0;
	if (!ctx)
		return dsec_err_set(err, ENOMEM, "cannot start nftables");
	nft_ctx_buffer_output(ctx);
	nft_ctx_buffer_error(ctx);
	if (nft_run_cmd_from_buffer(ctx, "list counter inet dsec denied") == 0 &&
	    (out = nft_ctx_get_output_buffer(ctx)) && (p = strstr(out, "packets ")) &&
	    sscanf(p, "packets %" SCNu64 " bytes %" SCNu64, pkts, bytes) != 2)
		rc = dsec_err_setc(err, DSEC_E_BACKEND, EINVAL,
				   "cannot read the sandbox's refused packets: '%.40s'", p);
	nft_ctx_free(ctx);
	return rc;
}

static int denied_job(void *arg, struct dsec_err *err)
{
	uint64_t *v = arg;

	return denied_read(&v[0], &v[1], err);
}

int be_netns_denied(int netns_fd, uint64_t *out, struct dsec_err *err)
{
	uint64_t v[2] = { 0, 0 };
	int rc = in_netns(netns_fd, denied_job, v, err);

	*out = v[0];
	return rc;
}

struct filter {
	const char *head;	/* the nft commands up to the table's counter */
	const char *rest;	/* and after it */
};

/* The new table keeps the old one's count of refused packets: a stage's
 * new allowlist does not wipe what the last stage was refused. */
static int apply_filter(void *arg, struct dsec_err *err)
{
	struct filter *f = arg;
	uint64_t pkts, bytes;
	struct dsec_buf b;
	char line[128];
	int rc;

	if (denied_read(&pkts, &bytes, err) < 0)
		pkts = bytes = 0;
	dsec_buf_init(&b);
	dsec_buf_add(&b, f->head, strlen(f->head));
	snprintf(line, sizeof(line), "  counter denied { packets %" PRIu64 " bytes %" PRIu64 " }\n",
		 pkts, bytes);
	dsec_buf_add(&b, line, strlen(line));
	dsec_buf_add(&b, f->rest, strlen(f->rest) + 1);	/* with the NUL */
	rc = nft_run(b.data, "the sandbox's network filter", err);
	dsec_buf_free(&b);
	return rc;
}

/* The output chain: loopback and replies; the host port of the gateway
 * if the allowlist allows it; never the bridge's subnet (the gateway, other
 * sandboxes, its broadcast), link-local addresses, multicast or limited
 * broadcast; then the
 * allowlist.  Everything else is refused rather than dropped: a denied
 * connect fails at once (ECONNREFUSED / EHOSTUNREACH) instead of hanging
 * for a timeout. */
int be_netns_filter(const struct be_bridge *br, int netns_fd, const struct be_net_rule *rules,
		    size_t n, uint32_t dns, struct dsec_err *err)
{
	static const char head[] =
		"table inet dsec\n"
		"delete table inet dsec\n"
		"table inet dsec {\n";
	static const char chains[] =
		"  chain input {\n"
		"    type filter hook input priority filter; policy drop;\n"
		"    iif lo accept\n"
		"    ct state established,related accept\n"
		"  }\n"
		"  chain refuse {\n"
		"    counter name \"denied\"\n"
		"    meta l4proto tcp reject with tcp reset\n"
		"    reject with icmpx type admin-prohibited\n"
		"  }\n"
		"  chain allow {\n";
	static const char mid[] =
		"  }\n"
		"  chain output {\n"
		"    type filter hook output priority filter; policy drop;\n"
		"    oif lo accept\n"
		"    ct state established,related accept\n";
	char line[256], net[INET_ADDRSTRLEN], gw[INET_ADDRSTRLEN], port[64];
	struct dsec_buf b;
	struct filter f;
	int rc;

	dsec_buf_init(&b);
	dsec_buf_add(&b, chains, sizeof(chains) - 1);
	if (dns) {
		struct be_net_rule r = { .addr = dns, .bits = 32, .port_lo = 53, .port_hi = 53 };

		rule_text(&b, &r);
	}
	for (size_t i = 0; i < n; i++)
		rule_text(&b, &rules[i]);
	dsec_buf_add(&b, mid, sizeof(mid) - 1);
	if (br->host_port) {
		snprintf(line, sizeof(line), "    ip daddr %s%s jump allow\n", ip4(br->gw, gw),
			 port_match(br->host_port, br->host_proto, port, sizeof(port)));
		dsec_buf_add(&b, line, strlen(line));
	}
	snprintf(line, sizeof(line),
		 "    ip daddr { %s/%u, 169.254.0.0/16, 224.0.0.0/4, 255.255.255.255 } goto refuse\n"
		 "    jump allow\n"
		 "    goto refuse\n"
		 "  }\n"
		 "}\n", ip4(br->net, net), br->bits);
	dsec_buf_add(&b, line, strlen(line) + 1);	/* with the NUL */
	f.head = head;
	f.rest = b.data;
	rc = in_netns(netns_fd, apply_filter, &f, err);
	dsec_buf_free(&b);
	return rc;
}
