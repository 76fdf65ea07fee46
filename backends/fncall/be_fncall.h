/* be_fncall.h - the protocol between the fncall backend, its zygotes and
 * their units.  Header only: constants shared by fncall.c and
 * fncall-zygote-helper.c (fncall_zygote.py repeats them; keep in step).
 *
 * Transport: AF_UNIX SOCK_SEQPACKET, one msgpack map per datagram, file
 * descriptors as SCM_RIGHTS.  Keys are short strings.
 *
 * backend -> zygote
 *   {t:"job", id, uid, fds:[names], memory, cpus, pids, nofile, disk,
 *    argv:[..] | code:"..", env:["K=V"..], cwd:"/path"}
 *      uid: the uid, also the gid, the job runs as: its tenant's (a
 *      sandbox's or the one-shot call's), from the zygote's --uid-base
 *      range; a unit refuses a job without one.
 *      fds names, in the order of the passed descriptors: "in" (stdin, a
 *      sealed memfd; absent = /dev/null), "out", "err" (pipe write ends),
 *      "tree" (an open_tree() clone of the sandbox scratch, attached at
 *      /work), "body" (a memfd holding argv/code/env/cwd as a msgpack map
 *      when they do not fit in one datagram).  Limits of 0 = the runtime's
 *      defaults; cpus is in thousandths of a core.
 *   {t:"kill", id}              SIGKILL the job's unit (its pid namespace)
 * zygote -> backend
 *   {t:"ready", pool}           set up; sent once
 *   {t:"done", id, status, ready[, oom]}   the job's main process ended:
 *                                   raw wait status; ready = warm units
 *                                   left; oom true when the memory
 *                                   cgroup's OOM killer killed a process
 *                                   of the job
 *   {t:"done", id, errno, msg, ready}  it could not be started
 *   {t:"pool", ready}           the number of warm units changed without a
 *                               call ending (units retired, the pool
 *                               refilled); sent when the zygote is idle
 * zygote -> unit: {t:"go"} once placed in its cgroup, then jobs as sent by
 *   the backend, one at a time: the next only after the unit's "st".
 * unit -> zygote, per job: {t:"err", errno, msg} (its child cannot start
 *   the call), then {t:"st", status} (pid 1, after the child ended and
 *   everything else of the call was killed); the unit then takes the next.
 * python template <-> zygote: {t:"hello"} (template up), {t:"spawn",
 *   meminfo} + the unit's socket (zygote asks; meminfo: the path of the
 *   unit's made-up /proc/meminfo, see FC_PROC_DIR), {t:"pid", pid}
 *   (template answers).
 */
#ifndef DSEC_BE_FNCALL_H
#define DSEC_BE_FNCALL_H

/* Descriptors of a freshly exec'd zygote. */
#define FC_FD_SOCK 3		/* the backend's socket */
#define FC_FD_CG 4		/* first cgroup directory (be_cg_import) */
/* Descriptor of the unit socket in a unit. */
#define FC_UNIT_FD 3

/* Largest datagram; jobs bigger than FC_INLINE_MAX move argv/code/env/cwd
 * into a "body" memfd. */
#define FC_MSG_MAX (64 * 1024)
#define FC_INLINE_MAX (56 * 1024)
/* Descriptors one job may carry. */
#define FC_MAX_FDS 5

/* Name of the helper program, the python zygote and the shell template
 * in helper_dir. */
#define FC_HELPER "fncall-zygote"
#define FC_PY_ZYGOTE "fncall_zygote.py"
#define FC_PRELOAD "fncall-preload.so"

/* In the units' root (read-only there, root's only): what masks their
 * /proc (be_procmask.h): the made-up files (loadavg and stat are bound;
 * meminfo, for the runtime's default limit, is not: each unit binds its
 * slot's "meminfo.N", which says the limit of its call), "empty" (a
 * directory), and FC_PROC_PLAN, the binds the python template makes
 * ("SRC\tDST" lines, be_procmask_plan) besides meminfo's. */
#define FC_PROC_DIR "/.dsec/proc"
#define FC_PROC_PLAN "plan"

#endif
