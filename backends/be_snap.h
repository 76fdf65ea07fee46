/* be_snap.h - freezing a sandbox's cgroup while a snapshot reads its files.
 *
 * A minimal freeze/thaw of one be_cg group and everything below it, kept
 * apart from be_cgroup.c (whose pause/resume may grow a richer one): the v1
 * freezer hierarchy (freezer.state) or v2's cgroup.freeze.  Both block
 * until the kernel reports the group frozen, or give up after timeout_ms.
 */
#ifndef DSEC_BE_SNAP_H
#define DSEC_BE_SNAP_H

#include "be_cgroup.h"

/* Freeze cg and wait until it is frozen: 0, -ENOTSUP without a freezer
 * (BE_CG_NONE, or v1 without the freezer hierarchy), -ETIMEDOUT (the group
 * is thawed again), or another -errno. */
int be_cg_snap_freeze(struct be_cg *cg, int timeout_ms);
/* Thaw cg; 0 or -errno. */
int be_cg_snap_thaw(struct be_cg *cg);

#endif
