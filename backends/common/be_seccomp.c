/* be_seccomp.c - see be_seccomp.h. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "be_seccomp.h"
#include "util.h"

/* _IOWR('X', 109, struct xfs_swapext): the struct is 192 bytes on 64-bit
 * architectures (xfs/xfs_fs.h of xfslibs-dev: sizeof 192, 0xc0c0586d).
 * The same request with a 96-byte size (0xc060586d, the number the harden
 * issue gave) is refused too: the kernel's XFS matches the request by its
 * full value, but an older or patched kernel's struct size must not open a
 * way around the rule, and nothing else uses 'X' 109. */
#define XFS_IOC_SWAPEXT_NR 0xc0c0586dUL
#define XFS_IOC_SWAPEXT_96_NR 0xc060586dUL
#define AF_VSOCK_NR 40
/* The kernel reads an int or unsigned int argument from the low 32 bits of
 * its register; the filter sees all 64. */
#define LOW32 0xffffffffUL

/* ioctl(fd, request) with request's low 32 bits equal to nr: EPERM. */
static int deny_ioctl(scmp_filter_ctx ctx, unsigned long nr)
{
	return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
				SCMP_A1(SCMP_CMP_MASKED_EQ, LOW32, nr));
}

int be_seccomp_deny_flags(scmp_filter_ctx ctx, int nr, const unsigned long *flags, size_t n)
{
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1,
				       SCMP_A0(SCMP_CMP_MASKED_EQ, flags[i] & LOW32, flags[i] & LOW32));
	return rc < 0 ? rc : 0;
}

/* Every rule that tests an argument the kernel reads as a 32-bit int
 * (socket's and socketpair's family, ioctl's request) compares only its
 * low 32 bits: a 64-bit comparison is passed by setting the upper ones.
 * clone's flags (the kernel takes their low 32 bits) are tested with masks
 * inside the low 32 bits, and personality's GT on all 64 can only refuse
 * more than the kernel would accept. */
int be_seccomp_rules(scmp_filter_ctx ctx, const char *const *deny, size_t ndeny,
		     const unsigned long *ns_flags, size_t nns)
{
	int rc = 0;

	for (size_t i = 0; i < ndeny; i++) {
		int nr = seccomp_syscall_resolve_name(deny[i]);

		if (nr != __NR_SCMP_ERROR)
			rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
	}
	rc |= be_seccomp_deny_flags(ctx, SCMP_SYS(clone), ns_flags, nns);
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	/* libseccomp cannot also except the 0xffffffff query: it fails too. */
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
			       SCMP_A0(SCMP_CMP_GT, 0x20008, 0));
	rc |= deny_ioctl(ctx, TIOCSTI);
	rc |= deny_ioctl(ctx, TIOCLINUX);
	rc |= deny_ioctl(ctx, XFS_IOC_SWAPEXT_NR);
	rc |= deny_ioctl(ctx, XFS_IOC_SWAPEXT_96_NR);
	/* vsock is not namespaced; socketpair() is refused as well, so that
	 * no path that makes a socket takes the family (io_uring, which can
	 * make sockets too, is denied whole by every backend). */
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
			       SCMP_A0(SCMP_CMP_MASKED_EQ, LOW32, AF_VSOCK_NR));
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socketpair), 1,
			       SCMP_A0(SCMP_CMP_MASKED_EQ, LOW32, AF_VSOCK_NR));
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

/* What a container's command may not call (see be_seccomp.h for the namespace flags). */
static const char *const container_deny[] = {
	"mount", "umount", "umount2", "pivot_root", "chroot", "kexec_load",
	"kexec_file_load", "bpf", "perf_event_open", "keyctl", "add_key", "request_key",
	"ptrace", "process_vm_readv", "process_vm_writev", "userfaultfd",
	"open_by_handle_at", "name_to_handle_at", "init_module", "finit_module",
	"delete_module", "reboot", "swapon", "swapoff", "setns", "unshare", "acct",
	"quotactl", "quotactl_fd", "sethostname", "setdomainname", "settimeofday",
	"clock_settime", "clock_adjtime", "adjtimex", "iopl", "ioperm", "syslog",
	"vhangup", "lookup_dcookie", "fanotify_init", "fsopen", "fsconfig", "fsmount",
	"fspick", "move_mount", "open_tree", "mount_setattr", "io_uring_setup",
	"io_uring_enter", "io_uring_register", "kcmp", "pidfd_getfd", "nfsservctl",
	"uselib", "ustat", "sysfs", "_sysctl", "create_module", "get_kernel_syms",
	"query_module",
};
static const unsigned long container_ns_flags[] = {
	CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID,
	CLONE_NEWNET, CLONE_NEWCGROUP, 0x00000080 /* CLONE_NEWTIME */,
};

scmp_filter_ctx be_seccomp_container_ctx(const char *extra_deny)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);

	if (ctx && (be_seccomp_rules(ctx, container_deny, DSEC_ARRAY_LEN(container_deny),
				     container_ns_flags, DSEC_ARRAY_LEN(container_ns_flags)) < 0 ||
		    be_seccomp_deny_add(ctx, extra_deny) < 0)) {
		seccomp_release(ctx);
		ctx = NULL;
	}
	return ctx;
}

int be_seccomp_container_export(const char *extra_deny, int *fd)
{
	scmp_filter_ctx ctx = be_seccomp_container_ctx(extra_deny);
	int rc;

	*fd = -1;
	if (!ctx)
		return -EINVAL;
	if ((*fd = memfd_create("dsec-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING)) < 0)
		rc = -errno;
	else if ((rc = seccomp_export_bpf(ctx, *fd)) == 0 &&
		 fcntl(*fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		rc = -errno;	/* read-only from here: every sandbox's init reads it */
	seccomp_release(ctx);
	if (rc < 0 && *fd >= 0) {
		close(*fd);
		*fd = -1;
	}
	return rc < 0 ? rc : 0;
}
