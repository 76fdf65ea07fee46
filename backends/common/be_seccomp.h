/* be_seccomp.h - the seccomp rules every backend's filter starts from. */
#ifndef BE_SECCOMP_H
#define BE_SECCOMP_H

#include <stddef.h>
#include <seccomp.h>

#include "err.h"

/* Adds to ctx (default action ALLOW): EPERM for each syscall named in deny
 * (names unknown to this libseccomp are skipped) and for clone() with any
 * of ns_flags; ENOSYS for clone3 (its flags hide in memory, so libc falls
 * back to clone); EPERM for personality() other than PER_LINUX with
 * UNAME26/ADDR_NO_RANDOMIZE, for the TIOCSTI and TIOCLINUX ioctls (typing
 * into a terminal) and for XFS_IOC_SWAPEXT (swapping file extents, seen to
 * corrupt XFS in production); EAFNOSUPPORT for AF_VSOCK socket() and
 * socketpair() (vsock is not namespaced: it reaches the hypervisor's
 * host).  Arguments the kernel reads as 32-bit ints (family, request) are
 * compared on their low 32 bits only, so setting the upper ones passes
 * nothing.  0 or -errno. */
int be_seccomp_rules(scmp_filter_ctx ctx, const char *const *deny, size_t ndeny,
		     const unsigned long *ns_flags, size_t nns);

/* Adds EPERM for system call nr (clone, unshare: flags in its first
 * argument, of which the kernel reads the low 32 bits) when its first
 * argument has every bit of any one of flags[0..n-1].  0 or -errno. */
int be_seccomp_deny_flags(scmp_filter_ctx ctx, int nr, const unsigned long *flags, size_t n);

/* A create's seccomp_deny: checks that each name is a system call this
 * libseccomp knows on this machine's architecture and joins them with ','
 * into *out (caller frees; NULL for none).  0, or -EINVAL with *err
 * naming the first unknown one. */
int be_seccomp_deny_join(const char *const *names, char **out, struct dsec_err *err);

/* The filter of every command of a container sandbox: default action
 * ALLOW, be_seccomp_rules with the container backend's list (mount,
 * namespaces, kexec, bpf, keyctl, ptrace, ...), then extra_deny (NULL or
 * "": none).  NULL on failure. */
scmp_filter_ctx be_seccomp_container_ctx(const char *extra_deny);

/* That filter compiled to BPF in a new memfd (close-on-exec), *fd; 0 or
 * -errno.  dsecd compiles it once for every sandbox without extra_deny. */
int be_seccomp_container_export(const char *extra_deny, int *fd);

/* Adds EPERM for each system call in list, names joined by ',' as
 * be_seccomp_deny_join made it (NULL or "": none).  0 or -errno. */
int be_seccomp_deny_add(scmp_filter_ctx ctx, const char *list);

#endif
