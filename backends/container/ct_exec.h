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
 * reaps it and closes it.  An init that counts the calls the seccomp
 * filter refuses (container-init: be_scnotify.h) writes
 * "st WAITSTATUS DENIED TOTAL" instead: those refused while the command
 * ran (any process of the sandbox's) and the sandbox's so far; and sends
 * back on the socket, as they grow, at most every 100 ms, a struct
 * ct_count with the sandbox's total (the first, 0, once it counts).  The
 * exec helper's status line is "st WAITSTATUS DENIED" (its command's
 * own), and a session's shell's helper also writes "sc DENIED" lines
 * (its count so far) as it grows.
 *
 * The warm shell (container-preload.c): once a sandbox ran a shell command
 * and went quiet, the init executes that shell as a template (the very
 * file it opened when the command started, by execveat on that
 * descriptor, CT_TPL_EXE_FD until the exec), with fd
 * CT_TPL_FD its end of a socket pair and CT_TPL_SO_FD container-preload.so
 * (the init's CT_FD_PRELOAD, from dsecd).  For each child it keeps ready
 * the template sends a struct ct_tready with a socket that reaches only
 * that child; the init forwards it a request (the same datagram and
 * descriptors) whose program is the file the template executes, unchanged
 * since (same inode, size and ctime; else the template is stopped), and
 * the child becomes the command.  The child is the init's (CLONE_PARENT): the
 * init reaps it and reports its status as above.
 */
#ifndef CT_EXEC_H
#define CT_EXEC_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include "err.h"

#define CT_FD_CTL 4			/* the init's end */
#define CT_FD_PRELOAD 5			/* the init's container-preload.so, if any */
#define CT_TPL_FD 3			/* the template's socket to the init */
#define CT_TPL_SO_FD 4			/* container-preload.so, in the template's exec */
#define CT_TPL_EXE_FD 5			/* the template's program, until its exec (cloexec) */
#define CT_TREADY_MAGIC 0x64785231u	/* "dxR1" */
#define CT_XMSG_MAGIC 0x64785831u	/* "dxX1" */
#define CT_COUNT_MAGIC 0x64785331u	/* "dxS1" */
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

/* How the message of an "err ERRNO message" status line starts when the
 * command could not enter its working directory. */
#define CT_ERR_CHDIR "cannot chdir to '"

/* The code of a command that could not start, from its "err" line: its
 * working directory missing (or not a directory) is the client's
 * not_found, the rest the backend's failure. */
static inline enum dsec_code ct_start_code(int e, const char *msg)
{
	return (e == ENOENT || e == ENOTDIR) && !strncmp(msg, CT_ERR_CHDIR, strlen(CT_ERR_CHDIR))
	       ? DSEC_E_NOT_FOUND : DSEC_E_BACKEND;
}

/* Init to dsecd, on the command socket: the calls its filter refused. */
struct ct_count {
	uint32_t magic;			/* CT_COUNT_MAGIC */
	uint32_t pad;			/* 0 */
	uint64_t denied;		/* since the sandbox was made */
};

/* Template to init: a child is ready; its socket comes with it. */
struct ct_tready {
	uint32_t magic;			/* CT_TREADY_MAGIC */
	int32_t pid;			/* the child (in the sandbox's pid namespace) */
};

#endif
