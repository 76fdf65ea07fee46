/* ct_init.h - what the parts of container-init share: not an interface
 * of container.so's, only of the one static program made of
 * container-init-helper.c (its modes, the root, exec, the init serving
 * commands), init-count.c (counting the calls the commands' seccomp filter
 * refuses) and init-tpl.c (the warm shell).  Everything else of each part
 * is static.
 */
#ifndef CT_INIT_H
#define CT_INIT_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "be_cred.h"
#include "buf.h"

struct be_cg;
struct ct_xmsg;

/* The status pipe (fd 3 of both modes): "ok ...", "st ...", "err ...". */
#define FD_STATUS 3

/* What root keeps in a sandbox with a user namespace (be_cred.h); without
 * one root inside is the host's root: it keeps nothing. */
#define SMALL_CAPS BE_CRED_SMALL_CAPS

/* run_command's mark for the warm shell's template (see ct_exec.h). */
#define CT_MARK_TEMPLATE (-2)

/* ---- container-init-helper.c ---- */

/* Writes "err E message" (E: e, EIO when 0) on FD_STATUS and exits 126. */
_Noreturn void fail(int e, const char *fmt, ...) DSEC_PRINTF(2, 3);

/* Milliseconds on the monotonic clock. */
int64_t mono_ms(void);

/* The commands' filter, compiled by libseccomp in this process and loaded
 * on the calling thread: 0 or -errno. */
int load_seccomp(void);

/* The BPF program every command gets (empty when it could not be had):
 * read from dsecd's --filter, else compiled once (compile_filter). */
extern struct sock_fprog exec_filter;

/* The command's process: joins the exec's cgroup cg (NULL: none) and,
 * with cgns >= 0, the sandbox's cgroup namespace, drops to uid/gid with
 * the capabilities keep, loads the filter (command_filter) and execs cmd
 * with envp; mark: a session's marker pipe, -1, or CT_MARK_TEMPLATE.
 * Failures before the exec go to FD_STATUS as "err ..." lines. */
_Noreturn void run_command(struct be_cg *cg, int cgns, uid_t uid, gid_t gid, const char *cwd,
			   rlim_t nofile, uint64_t keep, int mark, bool tty, char **cmd,
			   char **envp);

/* The stack of the init's CLONE_VM|CLONE_VFORK children: a request's
 * (xchild) and the warm shell's template (tpl_child), never both at once. */
extern char xstack[64 << 10];

/* ---- init-count.c ---- */

extern struct sock_fprog notify_filter;	/* exec_filter, counting */
extern bool filter_inherited;		/* the init loaded notify_filter */
extern pid_t setup_tid;			/* the init's child before its command */
extern uint64_t denied;			/* refused calls of the sandbox so far */
extern int listen_sock;			/* exec helper's child: the listener goes there */

/* In the init, on fd ctl (the command socket): starts the watcher thread
 * and loads the counting filter on the init's thread.  When either fails
 * nothing is counted and each command loads exec_filter itself. */
void count_start(int ctl);

/* In the command's process, where its filter is loaded (run_command):
 * 0 or -errno. */
int command_filter(void);

/* The exec helper once its command pid runs: answers and counts what its
 * filter refuses (listener, -1: none), reports the status on FD_STATUS
 * ("sc" lines too for a session), then answers on while what the command
 * left lives, at most CT_LINGER_MS.  Returns 0. */
int exec_watch(pid_t pid, int listener, bool session);

/* ---- init-tpl.c ---- */

/* A child of the init was reaped: the template's or one of its children? */
void tpl_reaped(pid_t pid, int st);

/* A command started the usual way (h, cmd, envp): its shell may become
 * the template once the sandbox is quiet. */
void tpl_note(const struct ct_xmsg *h, char **cmd, char **envp);

/* Hands the request (buf, len, fds, nfd as received) to a waiting child
 * of the template when it may run it: that child's pid, else 0. */
pid_t tpl_dispatch(const struct ct_xmsg *h, char **cmd, char **envp, const void *buf,
		   size_t len, const int *fds, int nfd);

/* The warm shell's turn in serve's loop, after its reaping: running
 * commands run now, changed whether that number changed since the last
 * turn, ctl_open whether dsecd still holds the command socket.  Starts or
 * stops the template; returns the ms until its next turn, -1: none. */
int tpl_tick(size_t running, bool changed, bool ctl_open);

/* The template's socket (for serve's poll), -1: none. */
int tpl_sock(void);

/* The template's socket is readable: a child of it is ready (or it goes). */
void tpl_read(void);

#endif
