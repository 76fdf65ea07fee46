/* netpool.c - the container backend: network namespaces kept and reused.
 *
 * Every sandbox needs a network namespace of its own (loopback only, or
 * its allowlist's veth).  Making one is cheap, but the kernel's teardown of
 * one (cleanup_net, on a kworker) walks every network namespace still alive
 * to drop the ids they gave it: about 1 us for each, so on a node of 10,000
 * sandboxes every destroy cost 12 ms of a core more than on an empty one,
 * more than a whole create, and that is what bounded creations/s on a full
 * node.
 *
 * So the backend makes namespaces ahead on the pool's threads, owned by the
 * host's user namespace (not by the sandbox's: a sandbox's root, even with
 * CAP_SYS_ADMIN in its own user namespace, has no capability over them and
 * cannot change their interfaces, addresses, routes, rules or sysctls),
 * with loopback up and ip_unprivileged_port_start 0 (the low ports a root
 * inside could bind in a namespace of its own user namespace's).  The loop
 * thread enters one for the clone of an init (which then makes none), and a
 * destroy gives the sandbox's back once its processes are gone, kept for
 * the next create when nothing of the last sandbox is left in it: no
 * socket of any kind (an fd passed in a unix socket's queue keeps a socket
 * alive after its process), no TCP connection closing or in TIME_WAIT, and
 * never an allowlist (the veth and the filter are dsecd's changes to it).
 * What a sandbox can see of its predecessor there are the namespace's
 * packet counters (/proc/net/snmp, netstat, dev); container.net_reuse =
 * false gives each sandbox a new one.  At most CT_NET_KEEP are kept (one
 * descriptor each).
 *
 * The others are dropped, and not one by one: the teardown's walk skips
 * the namespaces dying with it (the kernel takes every one queued since its
 * last run in one go), so 10,000 dropped one at a time while the others
 * live cost 10,000 walks of thousands (a SIGTERM of 10,000 sandboxes took
 * 70 s), and dropped together almost nothing.  So a namespace to drop is
 * held until destroys stop coming for CT_NET_BURY_QUIET (a single destroy's
 * goes then), CT_NET_BURY_MAX are held, or the backend stops: a trainer's
 * mass destroy or a daemon's shutdown drops them together.  Holding one
 * costs no descriptor more than its sandbox held (its control socket).
 */
#include <sched.h>
#include <sys/mount.h>

#include "ct.h"
#include "be_net.h"

/* Reads /proc/thread-self/net/NAME into buf (NUL-terminated); 0 or -errno. */
static int read_net(const char *name, char *buf, size_t size)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/thread-self/net/%s", name);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

/* True when the namespace this thread is in holds no socket: sockstat's
 * "used" (every socket with a file), each protocol's "inuse" (orphaned TCP
 * connections too, which have none) and TCP's "tw" all 0 (FRAG's queues
 * expire on their own and belong to no one). */
static bool net_empty(void)
{
	char buf[1024], *save = NULL;

	for (int v6 = 0; v6 < 2; v6++) {
		if (read_net(v6 ? "sockstat6" : "sockstat", buf, sizeof(buf)) < 0)
			return false;
		for (char *line = strtok_r(buf, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save)) {
			if (!strncmp(line, "FRAG", 4))
				continue;
			for (char *p = line; (p = strchr(p, ' ')); p++) {
				bool counted = !strncmp(p + 1, "used ", 5) ||
					       !strncmp(p + 1, "inuse ", 6) || !strncmp(p + 1, "tw ", 3);

				if (counted && strtoull(strchr(p + 1, ' ') + 1, NULL, 10) != 0)
					return false;
			}
		}
	}
	return true;
}

/* Back into the daemon's network namespace; a thread left in another
 * would make its sockets there: abort. */
void ct_net_leave(struct ct_be *be)
{
	if (setns(be->host_net, CLONE_NEWNET) < 0)
		DSEC_BUG("cannot go back to the daemon's network namespace: %s", strerror(errno));
}

int ct_net_enter(struct ct_be *be, int fd)
{
	return setns(fd, CLONE_NEWNET);
}

/* ---- the sysctl of a new namespace -------------------------------------------
 *
 * /proc/sys/net of every network namespace is a directory of its own with
 * the same name under one /proc/sys dentry, all in one chain of the dentry
 * hash: a lookup of /proc/sys/net compares every namespace's that was ever
 * looked up through that proc (proc_sys_compare), 20% of all CPU while a
 * node of 8,000 sandboxes made more.  So the writes go through a proc of
 * the backend's own (STATE/netproc), mounted again after CT_NETPROC_USES
 * of them: its dentries go with it, and a lookup compares at most that
 * many.  Without it, through /proc. */

static void netproc_down(const char *dir)
{
	while (umount2(dir, MNT_DETACH) == 0)
		;	/* a killed daemon's too */
}

/* "DIR/sys/net/ipv4/ip_unprivileged_port_start" of a proc with room for
 * one more, into path; netproc_lock held. */
static void netproc_path(struct ct_be *be, char *path, size_t size)
{
	if (be->netproc && be->netproc_uses >= CT_NETPROC_USES) {
		netproc_down(be->netproc);
		if (mount("proc", be->netproc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 ||
		    mount(NULL, be->netproc, NULL, MS_PRIVATE, NULL) < 0) {
			free(be->netproc);	/* through /proc from now on */
			be->netproc = NULL;
		}
		be->netproc_uses = 0;
	}
	be->netproc_uses++;
	snprintf(path, size, "%s/sys/net/ipv4/ip_unprivileged_port_start",
		 be->netproc ? be->netproc : "/proc");
}

/* A new namespace, made ready (see above), on this thread; its fd or -errno. */
static int net_make(struct ct_be *be)
{
	char path[PATH_MAX];
	int fd, rc, e;

	if (unshare(CLONE_NEWNET) < 0)
		return -errno;
	fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	e = errno;
	if (fd >= 0) {
		be_lo_up();
		pthread_mutex_lock(&be->netproc_lock);
		netproc_path(be, path, sizeof(path));
		rc = dsec_write_file(path, "0");
		pthread_mutex_unlock(&be->netproc_lock);
		if (rc < 0 && !be->net_port_warned)
			LOG(be, DSEC_LOG_WARN, "container: cannot let sandboxes bind ports below "
			    "1024 (ip_unprivileged_port_start: %s)", strerror(-rc));
		be->net_port_warned |= rc < 0;
	}
	ct_net_leave(be);
	return fd < 0 ? -e : fd;
}

void ct_net_bury(struct ct_be *be, int fd)
{
	pthread_mutex_lock(&be->net_lock);
	if (be->nburied == be->capburied) {
		be->capburied = be->capburied ? 2 * be->capburied : 64;
		be->buried = xrealloc(be->buried, be->capburied * sizeof(*be->buried));
	}
	be->buried[be->nburied++] = fd;
	pthread_mutex_unlock(&be->net_lock);
}

void ct_net_drop(struct ct_be *be)
{
	pthread_mutex_lock(&be->net_lock);
	while (be->nburied)
		close(be->buried[--be->nburied]);
	pthread_mutex_unlock(&be->net_lock);
}

static void bury_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct ct_be *be = dsec_container_of(w, struct ct_be, bury_w);

	(void)revents;
	ev_timer_stop(loop, w);
	ct_net_drop(be);
}

void ct_net_destroyed(struct ct_be *be)
{
	unsigned n;

	pthread_mutex_lock(&be->net_lock);
	n = be->nburied;
	pthread_mutex_unlock(&be->net_lock);
	if (n >= CT_NET_BURY_MAX) {
		ev_timer_stop(be->host->loop, &be->bury_w);
		ct_net_drop(be);
	} else if (n && !be->stopping) {
		be->bury_w.repeat = CT_NET_BURY_QUIET;
		ev_timer_again(be->host->loop, &be->bury_w);
	}
}

/* Whether the kept namespace fd holds nothing of its last sandbox now. */
static bool net_clean(struct ct_be *be, int fd)
{
	bool empty;

	if (ct_net_enter(be, fd) < 0)
		return false;
	empty = net_empty();
	ct_net_leave(be);
	return empty;
}

/* A kept namespace is checked when it is taken, not when it is given: a
 * listening TCP socket is freed a grace period after its process (RCU),
 * a connection closed last lingers in TIME_WAIT for a minute, and a
 * socket in a unix socket's queue until the kernel's collector runs.
 * The newest that is clean is taken, looking at CT_NET_LOOK at most; one
 * not clean after CT_NET_STALE is closed. */
int ct_net_take(struct ct_be *be)
{
	uint64_t now = dsec_now_ns();
	int fd = -1, drop[CT_NET_LOOK], ndrop = 0;

	if (be->host_net < 0)
		return -ENOTSUP;
	pthread_mutex_lock(&be->net_lock);
	for (unsigned i = be->nnets, looked = 0; i-- > 0 && looked < CT_NET_LOOK; looked++) {
		struct ct_netkeep k = be->nets[i];
		bool clean = net_clean(be, k.fd);

		if (!clean && now - k.since < (uint64_t)(CT_NET_STALE * 1e9))
			continue;
		memmove(be->nets + i, be->nets + i + 1, (--be->nnets - i) * sizeof(*be->nets));
		if (clean) {
			fd = k.fd;
			break;
		}
		drop[ndrop++] = k.fd;
	}
	pthread_mutex_unlock(&be->net_lock);
	while (ndrop)
		ct_net_bury(be, drop[--ndrop]);
	return fd >= 0 ? fd : net_make(be);
}

void ct_net_give(struct ct_be *be, int fd)
{
	int old = -1;

	if (!be->conf.net_reuse || be->stopping) {
		ct_net_bury(be, fd);
		return;
	}
	pthread_mutex_lock(&be->net_lock);
	if (be->nnets == CT_NET_KEEP) {	/* the oldest goes */
		old = be->nets[0].fd;
		memmove(be->nets, be->nets + 1, --be->nnets * sizeof(*be->nets));
	}
	be->nets[be->nnets++] = (struct ct_netkeep){ .fd = fd, .since = dsec_now_ns() };
	pthread_mutex_unlock(&be->net_lock);
	if (old >= 0)
		ct_net_bury(be, old);
}

void ct_net_init(struct ct_be *be)
{
	be->host_net = -1;
	pthread_mutex_init(&be->net_lock, NULL);
	pthread_mutex_init(&be->netproc_lock, NULL);
	ev_init(&be->bury_w, bury_cb);
	if ((be->host_net = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
		LOG(be, DSEC_LOG_WARN, "container: cannot open our network namespace (%s): each "
		    "init makes its own", strerror(errno));
}

void ct_net_stop(struct ct_be *be)
{
	ev_timer_stop(be->host->loop, &be->bury_w);
	pthread_mutex_lock(&be->net_lock);
	while (be->nnets) {
		struct ct_netkeep k = be->nets[--be->nnets];

		pthread_mutex_unlock(&be->net_lock);
		ct_net_bury(be, k.fd);
		pthread_mutex_lock(&be->net_lock);
	}
	pthread_mutex_unlock(&be->net_lock);
	ct_net_drop(be);
}

void ct_net_up(struct ct_be *be)
{
	char *dir = xasprintf("%s/netproc", be->host->state_dir);

	netproc_down(dir);
	if (mkdir(dir, 0500) < 0 && errno != EEXIST) {
		free(dir);
		return;
	}
	be->netproc = dir;
	be->netproc_uses = CT_NETPROC_USES;	/* mounted at the first use */
}

void ct_net_fini(struct ct_be *be)
{
	ct_net_stop(be);
	if (be->netproc) {
		netproc_down(be->netproc);
		rmdir(be->netproc);
		free(be->netproc);
		be->netproc = NULL;
	}
	pthread_mutex_destroy(&be->netproc_lock);
	free(be->buried);
	if (be->host_net >= 0)
		close(be->host_net);
	be->host_net = -1;
	pthread_mutex_destroy(&be->net_lock);
}
