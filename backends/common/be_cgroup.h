/* be_cgroup.h - one small cgroup driver for v1, v2 and hybrid hosts.
 *
 * A struct be_cg is one group, present in every hierarchy the driver uses:
 * on a pure v2 host the unified hierarchy (/sys/fs/cgroup, cgroup2); on a
 * v1 or hybrid host the v1 hierarchies memory, cpu, pids and freezer that
 * are mounted under /sys/fs/cgroup/NAME.  Every operation works on
 * directory file descriptors, so a group keeps working after the process
 * pivots into another root, and a helper program can be handed the
 * descriptors of a group (be_cg_export / be_cg_import).
 *
 * Nothing here touches an event loop or allocates per call beyond the
 * struct itself; all functions may block (they write cgroupfs files) and
 * return 0 or -errno.
 */
#ifndef DSEC_BE_CGROUP_H
#define DSEC_BE_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "backend.h"
#include "err.h"

enum be_cg_mode {
	BE_CG_NONE = 0,		/* no usable cgroupfs: limits are not enforced */
	BE_CG_V1,		/* v1 hierarchies (also the hybrid layout) */
	BE_CG_V2,		/* the unified hierarchy */
};

/* Limits of one group; 0 leaves a limit unset ("max"). */
struct be_cg_limits {
	uint64_t memory;	/* bytes, hard limit (swap too where it can be set) */
	double cpus;		/* CPU quota in cores */
	uint32_t pids;		/* tasks */
	uint32_t weight;	/* CPU weight against other groups, 1-10000 (v2's
				 * cpu.weight; v1 cpu.shares = weight * 1024 / 100);
				 * 0 = the default, 100 */
};

#define BE_CG_MAXH 5		/* hierarchies a group can span */

struct be_cg {
	enum be_cg_mode mode;		/* which layout */
	int n;				/* hierarchies used (0 for BE_CG_NONE) */
	char hname[BE_CG_MAXH][12];	/* "memory", "cpu", "pids", "freezer"; "unified" on v2
					 * and, with be_cg_add_unified, last on v1 */
	int dirfd[BE_CG_MAXH];		/* O_DIRECTORY fd of the group in each hierarchy */
	char *path;			/* path below the hierarchy root, for messages */
	bool has_kill;			/* cgroup.kill exists (v2, or v1's "unified") */
	bool closed;			/* be_cg_close'd: dirfd[] -1, calls open their own */
	bool pinned;			/* a call's copy of a closed group (be_cgroup.c) */
	const struct be_cg *root;	/* a child's be_cg_open_root group, NULL for that one */
	char *rel;			/* a child's path below root ("sb.1/x.2") */
	bool light;			/* made by be_cg_child_light */
	unsigned borrowed;		/* bit i: hierarchy i is the parent's directory */
	char *brel;			/* a light group's parent below root ("." = root) */
};

/* Detect the host's layout and create the group `name` (one path
 * component, e.g. "dsec-fncall.1234") with every controller delegated to
 * its children.  On v2 the group is made below dsecd's own cgroup when that
 * one delegates memory, pids and cpu, else below the root.  A host without
 * any usable cgroupfs gives a BE_CG_NONE group (check be_cg_mode) rather
 * than an error, so callers can run without limits and say so. */
int be_cg_open_root(struct be_cg **out, const char *name, struct dsec_err *err);

/* On a hybrid host (v1 controllers, and a v2 tree without controllers at
 * /sys/fs/cgroup/unified), also make root group cg there and use it to
 * freeze, thaw and kill: v2 freezing costs tens of microseconds, while
 * every v1 freezer state change that starts or ends the host's only
 * frozen group flips a kernel static key (5-30 ms on a VM), and
 * cgroup.kill needs no freeze-collect-kill loop.  Children made after this
 * are made there too.  Returns 0, also when there is no such tree (then
 * nothing changes), or -errno when the group cannot be made there. */
int be_cg_add_unified(struct be_cg *cg);

/* The child group `name` of parent, created if `create` (an existing one is
 * reused).  `delegate` enables the controllers for the child's own children
 * (v2 subtree_control), which is needed for a group that will hold groups
 * rather than processes. */
int be_cg_child(struct be_cg *parent, const char *name, bool create, bool delegate,
		struct be_cg **out, struct dsec_err *err);

/* A child group for the commands of parent's processes, with no memory
 * or CPU controller of its own: its processes are charged to parent's
 * memory and CPU limits and counted in parent's memory cgroup.  Each
 * memory cgroup costs the host kernel memory that grows with the number
 * of file systems mounted (per-cgroup shrinker state), so a node of
 * thousands of sandboxes keeps one per sandbox.  On v1 the group has its
 * own directory in the other hierarchies (pids, freezer, unified) and
 * borrows parent's in memory and cpu: joining it (be_cg_attach,
 * be_cg_open_procs, be_cg_export) joins parent's there, and nothing
 * removes, kills or writes limits in a borrowed directory.  On v2 it is a
 * plain child of a parent that delegates no controller (be_cg_child with
 * delegate false), so that parent may hold processes too.  Its OOM kill
 * count is parent's (be_cg_oom_kills), and on v2 so is its count of failed
 * forks: a caller takes the difference over the group's use.  Parent must
 * not be a light group itself; where parent has no hierarchy but memory
 * and cpu to lend none, a plain child is made. */
int be_cg_child_light(struct be_cg *parent, const char *name, bool create, struct be_cg **out,
		      struct dsec_err *err);

/* Close a child group's descriptors (a group made by be_cg_child; -EINVAL
 * for a root).  The group keeps working: each call on it opens the
 * directories it needs below its root group, which must stay open, and
 * closes them before it returns.  A node with thousands of idle groups
 * holds no descriptor for them.  Not while another thread uses cg; once
 * closed, calls from several threads at once are safe. */
int be_cg_close(struct be_cg *cg);

/* Write the limits (0 = unlimited). */
int be_cg_set_limits(struct be_cg *cg, const struct be_cg_limits *lim);
/* Move pid (0 = the caller) into the group in every hierarchy. */
int be_cg_attach(struct be_cg *cg, pid_t pid);
/* Opens the group's cgroup.procs in every hierarchy for writing, into fds
 * (close-on-exec).  The kernel checks a move by the opener's credentials
 * and cgroup namespace: a process that gets these descriptors (a
 * sandbox's init, root only of its own user namespace) can move itself in
 * by writing "0" to each.  Returns how many, or -errno (none left open). */
int be_cg_open_procs(const struct be_cg *cg, int fds[BE_CG_MAXH]);
/* *out = how many processes of the group the kernel's OOM killer killed
 * (memory.events on v2, memory.oom_control on v1; a light group's parent's,
 * be_cg_child_light).  -ENOENT when the host does not count them. */
int be_cg_oom_kills(struct be_cg *cg, uint64_t *out);
/* The same in two steps, for a caller that reads it often: the file it
 * reads, opened (close-on-exec; -ENOENT as above, or -errno), and the
 * count in it now. */
int be_cg_oom_open(const struct be_cg *cg);
int be_cg_oom_read(int fd, uint64_t *out);
/* *out = how many forks in the group failed at a pids limit, its own or
 * an ancestor's: a fork bomb's mark.  pids.events.local ("max") on v2
 * where the kernel has it, else pids.events, which v1 counts in the
 * forking task's own group (a light group without a pids controller of
 * its own on v2: its parent's).  -ENOENT when the host does not count
 * them. */
int be_cg_fork_fails(struct be_cg *cg, uint64_t *out);
/* Adds to *u (struct dsec_be_usage, backend.h) what the group uses now,
 * setting the bit in u->have of each field it could read: CPU time
 * (cpu.stat usage_usec of the v2 or hybrid tree, else v1 cpuacct.usage),
 * memory and its peak (memory.current and memory.peak on v2; v1
 * memory.usage_in_bytes and memory.max_usage_in_bytes), tasks
 * (pids.current).  A field the host does not count keeps its bit clear. */
void be_cg_usage(struct be_cg *cg, struct dsec_be_usage *u);

/* Copies u into the caller's out, only the fields that end within
 * out->struct_size, which it keeps (dsec_be_usage's contract). */
void be_cg_usage_put(struct dsec_be_usage *out, const struct dsec_be_usage *u);

/* Kill every process in the group and its descendants with SIGKILL and wait
 * up to ~2 s for them to be gone: cgroup.kill on v2, freezer + kill on v1.
 * Works on frozen groups too (v1: the whole freezer subtree is thawed
 * after the kill so the signals are delivered).  Returns -EBUSY when
 * processes survive. */
int be_cg_kill(struct be_cg *cg);
/* SIGKILL every process in the group itself (not below it) but keep,
 * until no other is left (a process may fork between the read and the
 * kill: it looks again), for up to ~2 s.  -EBUSY when others survive. */
int be_cg_kill_but(struct be_cg *cg, pid_t keep);
/* Freeze every process in the group and below (also ones that join it
 * later) and wait up to timeout_ms for the kernel to report the group
 * frozen: v2 cgroup.freeze / cgroup.events "frozen 1", v1 freezer.state
 * FROZEN (the freezer hierarchy must be one of the group's).  On timeout
 * the group is thawed again and -ETIMEDOUT returned (a task stuck in an
 * uninterruptible sleep can hold a freeze off); -EOPNOTSUPP when the
 * host has no freezer for the group.  Idempotent. */
int be_cg_freeze(struct be_cg *cg, int timeout_ms);
/* Thaw the group (its descendants follow unless frozen themselves).
 * Idempotent; -EOPNOTSUPP as above. */
int be_cg_thaw(struct be_cg *cg);
/* Ask the kernel to reclaim what it can of the group's memory: v2
 * memory.reclaim of memory.current bytes (a partial reclaim is not an
 * error), v1 memory.force_empty (reclaims page cache; anonymous memory
 * only where there is swap).  *before and *after (either may be NULL)
 * get the group's usage in bytes.  -EOPNOTSUPP without such a file. */
int be_cg_reclaim(struct be_cg *cg, uint64_t *before, uint64_t *after);
/* True while any process is in the group or below. */
bool be_cg_populated(struct be_cg *cg);
/* rmdir the group and every group below it, deepest first (after a kill).
 * Retries briefly while exiting tasks still hold it. */
int be_cg_remove(struct be_cg *cg);
/* Remove only the groups below cg. */
int be_cg_remove_children(struct be_cg *cg);
/* Remove the groups below cg but the one named keep (NULL: none kept). */
int be_cg_remove_children_but(struct be_cg *cg, const char *keep);
/* Makes an emptied group (be_cg_kill) fit for a new user: thawed and, on
 * v1, its memory peak and CPU time counters back at 0.  Its memory is not
 * reclaimed (a reclaim walks the host's shrinkers, which costs as much as
 * a removal): the page cache the last user left stays charged to it, and
 * goes first when the group reaches its limit.  Sets *peak_reset when the
 * memory peak was reset (v2's memory.peak cannot be).  0 or -errno. */
int be_cg_reuse(struct be_cg *cg, bool *peak_reset);
/* Remove the siblings of cg named PREFIX<pid> whose pid is no longer
 * alive (left by a daemon that was killed before it could clean up):
 * kill what is still in them, then rmdir.  Returns how many were removed. */
int be_cg_remove_stale(struct be_cg *cg, const char *prefix);
/* Takes over from the last user of file: removes (killing what still runs
 * in them) the group trees it lists, one absolute directory per line, but
 * cg's own, then lists cg's directories there.  A daemon killed with its
 * groups below its own cgroup leaves them where a successor started from
 * elsewhere would not look for siblings (be_cg_remove_stale), nor would it
 * if the pid in their name were taken again.  The caller must be file's
 * only user (dsecd's state directory lock).  Returns how many trees it
 * removed, or -errno when file cannot be written. */
int be_cg_take_over(const struct be_cg *cg, const char *file);
/* The end of be_cg_take_over: removes cg (be_cg_remove) and, when that
 * worked, the record in file.  Returns be_cg_remove's result. */
int be_cg_give_up(struct be_cg *cg, const char *file);
/* Close the descriptors and free; the groups themselves stay. */
void be_cg_free(struct be_cg *cg);

/* Describe a group for a helper: fills desc ("v1:memory,cpu,pids" style,
 * "v2:unified" or "none") and fds[] with the descriptors to hand over, in
 * order; the helper must receive them as consecutive fds starting at the
 * number it passes to be_cg_import.  The descriptors are new ones
 * (close-on-exec) that the caller closes (be_cg_close_fds); with fds NULL
 * only desc is filled.  Returns the number of fds, or -errno (none left
 * open). */
int be_cg_export(const struct be_cg *cg, char *desc, size_t desclen, int fds[BE_CG_MAXH]);
/* Closes the first n of fds (be_cg_export's or be_cg_open_procs'). */
void be_cg_close_fds(int *fds, int n);
/* The helper side: rebuild a group from desc and fds first..first+n-1. */
int be_cg_import(struct be_cg **out, const char *desc, int firstfd, struct dsec_err *err);

#endif
