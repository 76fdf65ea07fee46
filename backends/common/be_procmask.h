/* be_procmask.h - what a sandbox's processes see of /proc instead of the
 * host's, for both backends.
 *
 * The /proc of a new pid namespace still shows what the kernel counts for
 * the whole node: its command line, and the load, memory, pressure, disk
 * and interrupt counters that every other sandbox's activity moves.  Over
 * such a proc both backends put the same masks: the entries of
 * be_proc_masked read as /dev/null (files) or as an empty directory, and
 * those of be_proc_virtual are made up per sandbox (meminfo its memory
 * limit all free, loadavg no load, stat the node's CPUs with no time
 * spent): free(1), uptime(1), ps(1) and programs that size themselves by
 * MemTotal see the sandbox, not the node.  The figures do not move (the
 * cgroup has the live ones).
 *
 * A container's init writes the made-up files once per sandbox
 * (be_procmask_write) and masks its /proc and each shell session's
 * (be_procmask_apply: a size-0 tmpfs per masked directory, the made-up
 * files moved from detached copies, /proc/sys and the like read-only).
 * A fncall zygote prepares everything once in its read-only root: what
 * the host's proc has (be_procmask_probe), the made-up files and an empty
 * directory, so that a unit's pid 1 masks the /proc it mounts with one bind
 * mount per entry and nothing else; its python template gets the same
 * binds as a list (be_procmask_plan).
 */
#ifndef BE_PROCMASK_H
#define BE_PROCMASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "util.h"

/* The masked entries: the kernel's memory and keys, and what tells of the
 * host's and other sandboxes' activity (the kernel's command line,
 * pressure, disks, interrupts, locks, memory zones and slabs, cgroup
 * counts). */
#define BE_PROC_NMASKED 29
extern const char *const be_proc_masked[BE_PROC_NMASKED];

/* The made-up entries, by index. */
enum { BE_PROC_MEMINFO, BE_PROC_LOADAVG, BE_PROC_STAT, BE_PROC_NVIRT };
extern const char *const be_proc_virtual[BE_PROC_NVIRT];

/* What the made-up files take from the node, read from the caller's
 * /proc (the host's) by be_proc_host_read. */
struct be_proc_host {
	unsigned long long mem_kb;	/* MemTotal, 0 if unknown */
	unsigned long long btime;	/* boot time, seconds since the epoch */
	size_t ncpu;			/* CPUs /proc/stat lists, 0 if unknown */
};

void be_proc_host_read(struct be_proc_host *h);

/* The made-up meminfo of a sandbox with mem bytes of memory (the node's
 * memory when that is less, or when mem is 0), appended to b. */
void be_proc_meminfo(struct dsec_buf *b, const struct be_proc_host *h, uint64_t mem);

/* Writes the three made-up files (meminfo for mem bytes) into the
 * existing directory vdir, mode 0644.  0 or -errno. */
int be_procmask_write(const char *vdir, const struct be_proc_host *h, uint64_t mem,
		      struct dsec_err *err);

/* What each masked entry is in a proc; BE_PM_UNKNOWN: not looked at yet. */
enum be_pm_kind { BE_PM_UNKNOWN, BE_PM_NONE, BE_PM_FILE, BE_PM_DIR };

/* How the masks are made over a proc. */
struct be_procmask {
	/* A read-only empty directory bound over each masked directory; NULL:
	 * a size-0 read-only tmpfs of its own each (a new filesystem per
	 * entry: dearer than a bind). */
	const char *empty;
	/* Made-up entry i: virt_fd[i], a detached mount of its file
	 * (open_tree, be_procmask_clone), is moved there and made read-only
	 * (taken over: -1 after); else virt_path[i] is bound there as it is
	 * (a file on a read-only mount gives a read-only bind); with neither
	 * the entry stays the kernel's. */
	int virt_fd[BE_PROC_NVIRT];
	const char *virt_path[BE_PROC_NVIRT];
	/* Also make /proc/sys, bus, fs and irq read-only (the container's root
	 * may hold capabilities; fncall's calls hold none, and a unit's pid 1
	 * writes /proc/sys/kernel/ns_last_pid). */
	bool ro;
	/* The processes that will see this proc are never the host's root
	 * (a call's uid, or root of a user namespace, whose capabilities do
	 * not reach the host's files): leave the entries that only root may
	 * open (kcore, slabinfo, ...) as they are, they fail for them anyway,
	 * and spare a mount each.  Taken into account by be_procmask_probe. */
	bool unpriv;
	unsigned char kind[BE_PROC_NMASKED];	/* enum be_pm_kind of each masked entry */
};

#define BE_PROCMASK_INIT { .virt_fd = { -1, -1, -1 } }

/* Fills m->kind from the proc mounted at proc (any proc of this kernel has
 * the same entries), so that applying needs no lookups. */
void be_procmask_probe(struct be_procmask *m, const char *proc);

/* Detached copies (open_tree) of the files dir/NAME, for each made-up
 * NAME, into m->virt_fd (-1 where there is none).  For a proc that is to
 * be mounted over the one at dir. */
void be_procmask_clone(struct be_procmask *m, const char *dir);

/* Puts the masks over the proc mounted at proc; entries of an unknown kind
 * are looked up first.  0 or -errno (err says which mount failed). */
int be_procmask_apply(struct be_procmask *m, const char *proc, struct dsec_err *err);

/* The mounts be_procmask_apply(m, proc) makes, as lines "SRC\tDST\n", each
 * a plain bind (mount(SRC, DST, NULL, MS_BIND, NULL)), appended to out, for
 * a program that cannot call this module.  -EINVAL (err set) if m needs
 * more than binds: no empty directory, detached mounts, or ro. */
int be_procmask_plan(struct be_procmask *m, const char *proc, struct dsec_buf *out,
		     struct dsec_err *err);

#endif
