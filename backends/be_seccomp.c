/* be_seccomp.c - see be_seccomp.h. */
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>

#include "be_seccomp.h"
#include "util.h"

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

int be_seccomp_deny_join(const char *const *names, char **out, struct dsec_err *err)
{
	struct dsec_buf b;

	*out = NULL;
	if (!names || !names[0])
		return 0;
	dsec_buf_init(&b);
	for (size_t i = 0; names[i]; i++) {
		if (!*names[i] || strlen(names[i]) > 64 || strchr(names[i], ',') ||
		    seccomp_syscall_resolve_name(names[i]) == __NR_SCMP_ERROR) {
			dsec_buf_free(&b);
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
					     "seccomp_deny: '%.64s' is not a system call known here",
					     names[i]);
		}
		dsec_buf_addf(&b, "%s%s", i ? "," : "", names[i]);
	}
	*out = dsec_buf_detach(&b, NULL);
	return 0;
}

int be_seccomp_deny_add(scmp_filter_ctx ctx, const char *list)
{
	_cleanup_free_ char *copy = list ? xstrdup(list) : NULL;
	char *save = NULL;
	int rc = 0;

	for (char *n = copy ? strtok_r(copy, ",", &save) : NULL; n; n = strtok_r(NULL, ",", &save)) {
		int nr = seccomp_syscall_resolve_name(n);

		if (nr == __NR_SCMP_ERROR)
			return -EINVAL;
		if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0)) < 0)
			return rc;
	}
	return 0;
}
