/* be_cred.c - see be_cred.h. */
#include <errno.h>
#include <linux/seccomp.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "be_cred.h"

int be_cred_bound(uint64_t keep, int *cap)
{
	for (int c = 0; c <= 63; c++) {
		if (keep & (1ull << c))
			continue;
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0) {
			if (errno == EINVAL)
				break;	/* past the kernel's last capability */
			*cap = c;
			return -errno;
		}
	}
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	return 0;
}

int be_cred_become(uid_t uid, gid_t gid, uint64_t keep)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = { { 0 } };

	/* Raw system calls: glibc's would also act on the threads it thinks
	 * we share memory with (the init, when it started us with CLONE_VM). */
	if (syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setresgid, gid, gid, gid) < 0 ||
	    syscall(SYS_setresuid, uid, uid, uid) < 0)
		return -errno;
	if (uid == 0) {
		d[0].effective = d[0].permitted = (uint32_t)keep;
		d[1].effective = d[1].permitted = (uint32_t)(keep >> 32);
	}
	return syscall(SYS_capset, &h, d) < 0 ? -errno : 0;
}

int be_cred_read_filter(int fd, struct sock_fprog *prog)
{
	struct stat st;
	void *p = NULL;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) ||
	    st.st_size / sizeof(struct sock_filter) > 0xffff)
		return -EINVAL;
	if (!(p = malloc((size_t)st.st_size)))
		return -ENOMEM;
	if (pread(fd, p, (size_t)st.st_size, 0) != st.st_size) {
		free(p);
		return -EIO;
	}
	prog->filter = p;
	prog->len = (unsigned short)(st.st_size / sizeof(struct sock_filter));
	return 0;
}

int be_cred_seccomp(const struct sock_fprog *prog)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog) < 0)
		return -errno;
	return 0;
}
