/* be_scnotify.h - counting the system calls a seccomp filter refuses.
 *
 * A filter that answers ERRNO refuses a call in the kernel and tells nobody.
 * To count the refusals of one sandbox without changing what its programs
 * see, the filter is loaded with every ERRNO return turned into
 * SECCOMP_RET_USER_NOTIF and a listener (SECCOMP_FILTER_FLAG_NEW_LISTENER):
 * the kernel stops the caller and queues the call on the listener, whose
 * holder (the supervisor) runs the original ERRNO program over the call's
 * seccomp_data and answers with the errno it returns, so the call fails
 * exactly as it did, and counts it.  Calls the filter lets through never
 * reach the supervisor and cost what they cost before.
 *
 * The listener is inherited by no one (close-on-exec, and the processes
 * that hold one close it before anything of the sandbox runs); a filter
 * with a listener is inherited by every descendant of the process that
 * loaded it.  Once its last user is gone the listener polls POLLHUP; if the
 * listener closes first, a refused call fails ENOSYS instead.
 */
#ifndef BE_SCNOTIFY_H
#define BE_SCNOTIFY_H

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* prog, a filter whose refusals are ERRNO returns (be_seccomp_container_export's),
 * with each of those returns made SECCOMP_RET_USER_NOTIF, in *out (its
 * filter is malloc'ed: the caller frees it). */
void be_scnotify_prog(const struct sock_fprog *prog, struct sock_fprog *out);

/* Loads nprog (be_scnotify_prog's) on the calling thread only, with a new
 * listener, and where the kernel has it SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
 * (once the supervisor has a call, only a fatal signal stops its caller, so
 * every call counted got its errno).  The listener's fd (close-on-exec), or
 * -errno: -EBUSY when a filter the thread has already has a listener. */
int be_scnotify_listen(const struct sock_fprog *nprog);

/* What classic BPF program prog returns for d, run as the kernel runs a
 * seccomp filter (SECCOMP_RET_KILL_PROCESS for what it would not load). */
uint32_t be_scnotify_run(const struct sock_fprog *prog, const struct seccomp_data *d);

/* What a supervisor does with a call besides answering it; any may be NULL. */
struct be_scnotify_ops {
	/* The call goes on (is not refused, nor counted): its caller's tid is
	 * tid (in the supervisor's pid namespace). */
	bool (*pass)(pid_t tid, void *arg);
	/* The count is n now, the caller not yet woken. */
	void (*counted)(uint64_t n, void *arg);
	/* Where the refused call of tid is counted instead of *count (NULL:
	 * there): a supervisor of many sandboxes counts each apart. */
	uint64_t *(*count_of)(pid_t tid, void *arg);
	void *arg;			/* theirs */
};

/* Takes the next call from listener and answers it: the call goes on when
 * ops->pass says so, else it fails with the errno prog returns for it
 * (EPERM if prog would not refuse it) and *count (or ops->count_of's)
 * grows by one (atomically, before the caller is woken: whoever sees the
 * caller go on sees the count), then ops->counted runs.  Blocks until a call is there (poll
 * listener first to not block).  1: a call was refused; 0: one was let
 * through, or its caller went away before the answer (interrupted by a
 * signal, killed: not counted); -errno. */
int be_scnotify_answer(int listener, const struct sock_fprog *prog,
		       const struct be_scnotify_ops *ops, uint64_t *count);

#endif
