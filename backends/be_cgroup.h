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
};

#define BE_CG_MAXH 4		/* hierarchies a group can span */

struct be_cg {
	enum be_cg_mode mode;		/* which layout */
	int n;				/* hierarchies used (0 for BE_CG_NONE) */
	char hname[BE_CG_MAXH][12];	/* "memory", "cpu", "pids", "freezer"; "unified" on v2 */
	int dirfd[BE_CG_MAXH];		/* O_DIRECTORY fd of the group in each hierarchy */
	char *path;			/* path below the hierarchy root, for messages */
	bool has_kill;			/* v2 cgroup.kill exists */
};

/* Detect the host's layout and create the group `name` (one path
 * component, e.g. "dsec-fncall.1234") with every controller delegated to
 * its children.  On v2 the group is made below dsecd's own cgroup when that
 * one delegates memory, pids and cpu, else below the root.  A host without
 * any usable cgroupfs gives a BE_CG_NONE group (check be_cg_mode) rather
 * than an error, so callers can run without limits and say so. */
int be_cg_open_root(struct be_cg **out, const char *name, struct dsec_err *err);

/* The child group `name` of parent, created if `create` (an existing one is
 * reused).  `delegate` enables the controllers for the child's own children
 * (v2 subtree_control), which is needed for a group that will hold groups
 * rather than processes. */
int be_cg_child(struct be_cg *parent, const char *name, bool create, bool delegate,
		struct be_cg **out, struct dsec_err *err);

/* Write the limits (0 = unlimited). */
int be_cg_set_limits(struct be_cg *cg, const struct be_cg_limits *lim);
/* Move pid (0 = the caller) into the group in every hierarchy. */
int be_cg_attach(struct be_cg *cg, pid_t pid);
/* *out = how many processes of the group the kernel's OOM killer killed
 * (memory.events on v2, memory.oom_control on v1).  -ENOENT when the host
 * does not count them. */
int be_cg_oom_kills(struct be_cg *cg, uint64_t *out);
/* Kill every process in the group and its descendants with SIGKILL and wait
 * up to ~2 s for them to be gone: cgroup.kill on v2, freezer + kill on v1.
 * Returns -EBUSY when processes survive. */
int be_cg_kill(struct be_cg *cg);
/* True while any process is in the group or below. */
bool be_cg_populated(struct be_cg *cg);
/* rmdir the group and every group below it, deepest first (after a kill).
 * Retries briefly while exiting tasks still hold it. */
int be_cg_remove(struct be_cg *cg);
/* Remove only the groups below cg. */
int be_cg_remove_children(struct be_cg *cg);
/* Remove the siblings of cg named PREFIX<pid> whose pid is no longer
 * alive (left by a daemon that was killed before it could clean up):
 * kill what is still in them, then rmdir.  Returns how many were removed. */
int be_cg_remove_stale(struct be_cg *cg, const char *prefix);
/* Close the descriptors and free; the groups themselves stay. */
void be_cg_free(struct be_cg *cg);

/* Describe a group for a helper: fills desc ("v1:memory,cpu,pids" style,
 * "v2:unified" or "none") and fds[] with the descriptors to hand over, in
 * order; the helper must receive them as consecutive fds starting at the
 * number it passes to be_cg_import.  Returns the number of fds. */
int be_cg_export(const struct be_cg *cg, char *desc, size_t desclen, int fds[BE_CG_MAXH]);
/* The helper side: rebuild a group from desc and fds first..first+n-1. */
int be_cg_import(struct be_cg **out, const char *desc, int firstfd, struct dsec_err *err);

#endif
