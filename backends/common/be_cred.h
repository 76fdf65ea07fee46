/* be_cred.h - the credentials of a command in a container sandbox, taken
 * by every process that acts for one: the command itself (container-init),
 * the warm shell's template and the file API's server (container-files).
 *
 * A command runs as the sandbox's uid and gid with no supplementary
 * groups; root keeps BE_CRED_SMALL_CAPS in a sandbox with a user
 * namespace (they act on its own uid range only) and nothing without one
 * (root inside is then the host's root).  Everything here is raw system
 * calls: safe in a child that shares its parent's memory (CLONE_VM).
 */
#ifndef BE_CRED_H
#define BE_CRED_H

#include <linux/capability.h>
#include <linux/filter.h>
#include <stdint.h>
#include <sys/types.h>

/* What root keeps in a sandbox with a user namespace, where these act only
 * on the sandbox's own uid range: enough for package managers and the like
 * (chown, file modes, setuid to its users, signals, low ports).  Nothing
 * reaches the host's objects or the kernel (no CAP_SYS_ADMIN, CAP_NET_ADMIN,
 * CAP_NET_RAW, CAP_SYS_CHROOT, CAP_MKNOD). */
#define BE_CRED_SMALL_CAPS ((1ull << CAP_CHOWN) | (1ull << CAP_DAC_OVERRIDE) |               \
			    (1ull << CAP_FOWNER) | (1ull << CAP_FSETID) | (1ull << CAP_KILL) |   \
			    (1ull << CAP_SETGID) | (1ull << CAP_SETUID) |                        \
			    (1ull << CAP_NET_BIND_SERVICE))

/* Drops every capability but keep from the bounding set (needs
 * CAP_SETPCAP, so before the switch to another uid) and clears the ambient
 * set.  0, or -errno with the capability that failed in *cap. */
int be_cred_bound(uint64_t keep, int *cap);

/* Becomes uid/gid with no supplementary groups, then sets the effective
 * and permitted capabilities to keep as far as they are still ours (a uid
 * other than 0 lost them all in setresuid).  0 or -errno. */
int be_cred_become(uid_t uid, gid_t gid, uint64_t keep);

/* Reads the BPF program fd holds (be_seccomp_container_export's) into
 * *prog (its filter is malloc'ed).  0, or -errno and *prog untouched. */
int be_cred_read_filter(int fd, struct sock_fprog *prog);

/* Sets no_new_privs and installs prog.  0 or -errno. */
int be_cred_seccomp(const struct sock_fprog *prog);

#endif
