/* be_scnotify.c - see be_scnotify.h. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "be_scnotify.h"
#include "util.h"

#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif
/* Linux 6.6: the caller and the supervisor hand over on one CPU. */
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

void be_scnotify_prog(const struct sock_fprog *prog, struct sock_fprog *out)
{
	out->len = prog->len;
	out->filter = xmalloc((size_t)prog->len * sizeof(*prog->filter));
	memcpy(out->filter, prog->filter, (size_t)prog->len * sizeof(*prog->filter));
	for (unsigned i = 0; i < out->len; i++)
		if (out->filter[i].code == (BPF_RET | BPF_K) &&
		    (out->filter[i].k & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_ERRNO)
			out->filter[i].k = SECCOMP_RET_USER_NOTIF;
}

int be_scnotify_listen(const struct sock_fprog *nprog)
{
	unsigned long fl = SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
	__u64 sync = SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP;
	long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, fl, nprog);

	if (fd < 0 && errno == EINVAL)	/* before Linux 5.19 */
		fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
			     SECCOMP_FILTER_FLAG_NEW_LISTENER, nprog);
	if (fd < 0)
		return -errno;
	(void)!ioctl((int)fd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, sync);	/* a hint */
	return (int)fd;
}

/* The instructions the kernel takes in a seccomp filter (its
 * seccomp_check_filter), run over struct seccomp_data. */
uint32_t be_scnotify_run(const struct sock_fprog *prog, const struct seccomp_data *d)
{
	const uint32_t len = sizeof(*d);
	uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };

	for (unsigned pc = 0; pc < prog->len; pc++) {
		const struct sock_filter *f = &prog->filter[pc];
		uint32_t k = f->k, v = BPF_SRC(f->code) == BPF_X ? x : k;

		switch (f->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			if (k >= len || k % 4)
				return SECCOMP_RET_KILL_PROCESS;
			memcpy(&a, (const char *)d + k, 4);
			break;
		case BPF_LD | BPF_W | BPF_LEN:
			a = len;
			break;
		case BPF_LDX | BPF_W | BPF_LEN:
			x = len;
			break;
		case BPF_LD | BPF_IMM:
			a = k;
			break;
		case BPF_LDX | BPF_IMM:
			x = k;
			break;
		case BPF_LD | BPF_MEM:
		case BPF_LDX | BPF_MEM:
		case BPF_ST:
		case BPF_STX:
			if (k >= BPF_MEMWORDS)
				return SECCOMP_RET_KILL_PROCESS;
			if (f->code == BPF_ST)
				mem[k] = a;
			else if (f->code == BPF_STX)
				mem[k] = x;
			else if (f->code == (BPF_LD | BPF_MEM))
				a = mem[k];
			else
				x = mem[k];
			break;
		case BPF_MISC | BPF_TAX:
			x = a;
			break;
		case BPF_MISC | BPF_TXA:
			a = x;
			break;
		case BPF_ALU | BPF_ADD | BPF_K: case BPF_ALU | BPF_ADD | BPF_X:
			a += v;
			break;
		case BPF_ALU | BPF_SUB | BPF_K: case BPF_ALU | BPF_SUB | BPF_X:
			a -= v;
			break;
		case BPF_ALU | BPF_MUL | BPF_K: case BPF_ALU | BPF_MUL | BPF_X:
			a *= v;
			break;
		case BPF_ALU | BPF_DIV | BPF_K: case BPF_ALU | BPF_DIV | BPF_X:
			if (!v)
				return 0;	/* the kernel's interpreter ends the program with 0 */
			a /= v;
			break;
		case BPF_ALU | BPF_AND | BPF_K: case BPF_ALU | BPF_AND | BPF_X:
			a &= v;
			break;
		case BPF_ALU | BPF_OR | BPF_K: case BPF_ALU | BPF_OR | BPF_X:
			a |= v;
			break;
		case BPF_ALU | BPF_XOR | BPF_K: case BPF_ALU | BPF_XOR | BPF_X:
			a ^= v;
			break;
		case BPF_ALU | BPF_LSH | BPF_K: case BPF_ALU | BPF_LSH | BPF_X:
			a = v < 32 ? a << v : 0;
			break;
		case BPF_ALU | BPF_RSH | BPF_K: case BPF_ALU | BPF_RSH | BPF_X:
			a = v < 32 ? a >> v : 0;
			break;
		case BPF_ALU | BPF_NEG:
			a = -a;
			break;
		case BPF_JMP | BPF_JA:
			pc += k;
			break;
		case BPF_JMP | BPF_JEQ | BPF_K: case BPF_JMP | BPF_JEQ | BPF_X:
			pc += a == v ? f->jt : f->jf;
			break;
		case BPF_JMP | BPF_JGT | BPF_K: case BPF_JMP | BPF_JGT | BPF_X:
			pc += a > v ? f->jt : f->jf;
			break;
		case BPF_JMP | BPF_JGE | BPF_K: case BPF_JMP | BPF_JGE | BPF_X:
			pc += a >= v ? f->jt : f->jf;
			break;
		case BPF_JMP | BPF_JSET | BPF_K: case BPF_JMP | BPF_JSET | BPF_X:
			pc += (a & v) ? f->jt : f->jf;
			break;
		case BPF_RET | BPF_K:
			return k;
		case BPF_RET | BPF_A:
			return a;
		default:
			return SECCOMP_RET_KILL_PROCESS;
		}
	}
	return SECCOMP_RET_KILL_PROCESS;	/* ran off its end: the kernel refuses that */
}

int be_scnotify_answer(int listener, const struct sock_fprog *prog,
		       const struct be_scnotify_ops *ops, uint64_t *count)
{
	struct seccomp_notif req;
	struct seccomp_notif_resp resp;
	uint64_t n, *cnt = count;
	uint32_t ret;
	bool refuse;

	memset(&req, 0, sizeof(req));	/* the kernel wants it zeroed */
	if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0)
		return errno == ENOENT ? 0 : -errno;
	memset(&resp, 0, sizeof(resp));
	resp.id = req.id;
	refuse = !ops || !ops->pass || !ops->pass((pid_t)req.pid, ops->arg);
	if (refuse) {
		/* As the kernel takes an ERRNO return: its data, at most
		 * MAX_ERRNO (4095). */
		ret = be_scnotify_run(prog, &req.data);
		if ((ret & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_ERRNO)
			resp.error = -(int32_t)((ret & SECCOMP_RET_DATA) < 4095 ? ret & SECCOMP_RET_DATA
										: 4095);
		else
			resp.error = -EPERM;	/* not one it refuses: never let through */
		if (ops && ops->count_of && !(cnt = ops->count_of((pid_t)req.pid, ops->arg)))
			cnt = count;
		n = __atomic_add_fetch(cnt, 1, __ATOMIC_SEQ_CST);
		if (ops && ops->counted)
			ops->counted(n, ops->arg);
	} else {
		resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
	}
	if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0) {
		int e = errno;

		if (refuse)
			__atomic_sub_fetch(cnt, 1, __ATOMIC_SEQ_CST);
		return e == ENOENT ? 0 : -e;
	}
	return refuse ? 1 : 0;
}
