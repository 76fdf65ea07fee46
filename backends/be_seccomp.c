/* be_seccomp.c - see be_seccomp.h. */
#include <errno.h>
#include <sys/ioctl.h>

#include "be_seccomp.h"

#define XFS_IOC_SWAPEXT_NR 0xc0c0586dUL	/* _IOWR('X', 109, struct xfs_swapext) */
#define AF_VSOCK_NR 40

int be_seccomp_rules(scmp_filter_ctx ctx, const char *const *deny, size_t ndeny,
		     const unsigned long *ns_flags, size_t nns)
{
	int rc = 0;

	for (size_t i = 0; i < ndeny; i++) {
		int nr = seccomp_syscall_resolve_name(deny[i]);

		if (nr != __NR_SCMP_ERROR)
			rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
	}
	for (size_t i = 0; i < nns; i++)
		rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
				       SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	/* libseccomp cannot also except the 0xffffffff query: it fails too. */
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
			       SCMP_A0(SCMP_CMP_GT, 0x20008));
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
			       SCMP_A1(SCMP_CMP_EQ, TIOCSTI));
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
			       SCMP_A1(SCMP_CMP_EQ, TIOCLINUX));
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
			       SCMP_A1(SCMP_CMP_EQ, XFS_IOC_SWAPEXT_NR));
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
			       SCMP_A0(SCMP_CMP_EQ, AF_VSOCK_NR));
	return rc < 0 ? rc : 0;
}
