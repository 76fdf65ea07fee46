/* be_callns.h - the network and IPC namespaces a fncall unit's calls run in.
 *
 * A unit (pid 1 of its own pid and mount namespaces, see
 * fncall-zygote-helper.c) also gets network and IPC namespaces of its own
 * when it starts, off any call's path; its calls run in them, one after the
 * other.  After each call pid 1 asks be_callns_used() whether the call left
 * anything there that the next call could meet: a socket still open or in
 * TIME_WAIT, IP fragments being reassembled, a System V shared memory
 * segment, message queue or semaphore set, a POSIX message queue.  Only then
 * does it replace that namespace with a fresh one (be_callns_fresh), so no
 * call sees what another left, and the usual call, which leaves none of
 * that, costs a few system calls after it instead of a namespace (a network
 * namespace costs about half a millisecond of CPU to make and more to tear
 * down).
 */
#ifndef BE_CALLNS_H
#define BE_CALLNS_H

/* Probes of the current namespaces; both close-on-exec. */
struct be_callns {
	int sockstat;		/* /proc/self/net/sockstat of the network namespace, -1 */
	int mqueue;		/* root of an mqueue fs of the IPC namespace, -1 */
};

#define BE_CALLNS_INIT { .sockstat = -1, .mqueue = -1 }

/* Moves the caller into fresh namespaces for those of CLONE_NEWNET and
 * CLONE_NEWIPC in flags (root only), brings lo up in a new network
 * namespace and opens the probes of each new one.  The mqueue fs is
 * mounted on the directory dir and detached again at once: only the probe
 * holds it.  0 or -errno. */
int be_callns_fresh(struct be_callns *ns, int flags, const char *dir);

/* Which of CLONE_NEWNET and CLONE_NEWIPC hold something a call left
 * (0: none).  Call it once every process of the call is gone.  A probe
 * that cannot be read counts as used. */
int be_callns_used(const struct be_callns *ns);

#endif
