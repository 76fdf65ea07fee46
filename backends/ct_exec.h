/* ct_exec.h - how container.so asks a sandbox's init to start a command.
 *
 * Each sandbox's init (container-init create) holds one end of a
 * SOCK_SEQPACKET socket pair as fd CT_FD_CTL; dsecd holds the other.  No
 * process of the sandbox has it: the init closes it in every child before
 * anything runs, it has no name, and the init is not dumpable, so root
 * inside (without CAP_SYS_PTRACE) cannot reach it through /proc/1/fd.
 *
 * One datagram per command: a struct ct_xmsg, then NUL-terminated strings
 * (cwd, argc arguments, envc environment entries), with descriptors:
 * stdout, stderr, the status pipe, stdin when CT_X_STDIN is set, then the
 * exec's cgroup.procs files opened by dsecd (be_cg_open_procs: the kernel
 * checks a move by the opener's credentials, which root inside lacks).
 * The init forks; the child writes "0" to each of those files and becomes
 * the command exactly as the exec helper's child does (container-init
 * exec); the init writes
 * "st WAITSTATUS" (or "err ERRNO message") on the status pipe when it
 * reaps it and closes it.  Nothing is sent back on the socket.
 */
#ifndef CT_EXEC_H
#define CT_EXEC_H

#include <stdint.h>

#define CT_FD_CTL 4			/* the init's end */
#define CT_XMSG_MAGIC 0x64785831u	/* "dxX1" */
#define CT_XMSG_MAX (64u << 10)		/* larger requests use the exec helper */
#define CT_X_STDIN 1u			/* a stdin descriptor comes before the cgroup's */
#define CT_X_USERNS 2u			/* root inside keeps the small capability set */

struct ct_xmsg {
	uint32_t magic;			/* CT_XMSG_MAGIC */
	uint32_t flags;			/* CT_X_* */
	uint32_t uid, gid;		/* the command's ids inside */
	uint64_t nofile;		/* RLIMIT_NOFILE */
	uint32_t argc, envc;		/* strings after cwd */
};

#endif
