/* be_procmask.c - see be_procmask.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "be_procmask.h"

const char *const be_proc_masked[BE_PROC_NMASKED] = {
	"kcore", "kpagecgroup", "kpageflags", "kpagecount", "sysrq-trigger", "timer_list",
	"sched_debug", "keys", "key-users", "latency_stats", "acpi", "scsi",
	"cmdline", "pressure", "diskstats", "partitions", "vmstat", "schedstat", "interrupts",
	"softirqs", "buddyinfo", "zoneinfo", "pagetypeinfo", "slabinfo", "vmallocinfo", "locks",
	"swaps", "cgroups", "mdstat",
};
const char *const be_proc_virtual[BE_PROC_NVIRT] = {
	[BE_PROC_MEMINFO] = "meminfo", [BE_PROC_LOADAVG] = "loadavg", [BE_PROC_STAT] = "stat",
};
/* Entries made read-only with be_procmask.ro. */
static const char *const proc_ro[] = { "sys", "bus", "fs", "irq" };

void be_proc_host_read(struct be_proc_host *h)
{
	_cleanup_free_ char *host = NULL;
	size_t len;

	memset(h, 0, sizeof(*h));
	if (dsec_read_file("/proc/meminfo", &host, &len) == 0)
		sscanf(host, "MemTotal: %llu kB", &h->mem_kb);
	free(host);
	host = NULL;
	if (dsec_read_file("/proc/stat", &host, &len) == 0) {
		for (char *l = host; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
			if (!strncmp(l, "cpu", 3) && l[3] >= '0' && l[3] <= '9')
				h->ncpu++;
			sscanf(l, "btime %llu", &h->btime);
		}
	}
}

void be_proc_meminfo(struct dsec_buf *b, const struct be_proc_host *h, uint64_t mem)
{
	static const char *const zero[] = { "Buffers", "Cached", "SwapCached", "Active", "Inactive",
					     "SwapTotal", "SwapFree", "Dirty", "Writeback",
					     "AnonPages", "Mapped", "Shmem", "Slab", "SReclaimable",
					     "SUnreclaim" };
	unsigned long long kb = mem / 1024;

	if (!kb || (h->mem_kb && kb > h->mem_kb))
		kb = h->mem_kb;
	dsec_buf_addf(b, "MemTotal:       %8llu kB\nMemFree:        %8llu kB\n"
		      "MemAvailable:   %8llu kB\n", kb, kb, kb);
	for (size_t i = 0; i < DSEC_ARRAY_LEN(zero); i++)
		dsec_buf_addf(b, "%s:%*s%8u kB\n", zero[i], (int)(15 - strlen(zero[i])), "", 0);
	dsec_buf_addf(b, "CommitLimit:    %8llu kB\nCommitted_AS:   %8u kB\n", kb, 0);
}

/* The node's CPUs idle since its boot. */
static void proc_stat(struct dsec_buf *b, const struct be_proc_host *h)
{
	dsec_buf_addf(b, "cpu  0 0 0 0 0 0 0 0 0 0\n");
	for (size_t i = 0; i < (h->ncpu ? h->ncpu : 1); i++)
		dsec_buf_addf(b, "cpu%zu 0 0 0 0 0 0 0 0 0 0\n", i);
	dsec_buf_addf(b, "intr 0\nctxt 0\nbtime %llu\nprocesses 0\nprocs_running 1\n"
		      "procs_blocked 0\nsoftirq 0 0 0 0 0 0 0 0 0 0 0\n", h->btime);
}

int be_procmask_write(const char *vdir, const struct be_proc_host *h, uint64_t mem,
		      struct dsec_err *err)
{
	_cleanup_close_ int dfd = open(vdir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct dsec_buf b;
	int rc = 0;

	if (dfd < 0)
		return dsec_err_set(err, errno, "cannot open '%s': %s", vdir, strerror(errno));
	dsec_buf_init(&b);
	for (int i = 0; i < BE_PROC_NVIRT && !rc; i++) {
		int fd;

		dsec_buf_reset(&b);
		if (i == BE_PROC_MEMINFO)
			be_proc_meminfo(&b, h, mem);
		else if (i == BE_PROC_LOADAVG)
			dsec_buf_addf(&b, "0.00 0.00 0.00 1/1 1\n");
		else
			proc_stat(&b, h);
		fd = openat(dfd, be_proc_virtual[i], O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
			    O_CLOEXEC, 0644);
		if (fd < 0 || dsec_write_all(fd, b.data, b.len) < 0)
			rc = dsec_err_set(err, errno, "cannot write '%s/%s': %s", vdir,
					  be_proc_virtual[i], strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	dsec_buf_free(&b);
	return rc;
}

/* What entry i of be_proc_masked is in the proc at proc. */
static enum be_pm_kind probe_one(const struct be_procmask *m, const char *proc, size_t i)
{
	char p[PATH_MAX];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", proc, be_proc_masked[i]);
	if (lstat(p, &st) < 0 || (m->unpriv && !(st.st_mode & S_IRWXO)))
		return BE_PM_NONE;
	return S_ISDIR(st.st_mode) ? BE_PM_DIR : BE_PM_FILE;
}

void be_procmask_probe(struct be_procmask *m, const char *proc)
{
	for (size_t i = 0; i < BE_PROC_NMASKED; i++)
		m->kind[i] = (unsigned char)probe_one(m, proc, i);
}

void be_procmask_clone(struct be_procmask *m, const char *dir)
{
	char p[PATH_MAX];

	for (size_t i = 0; i < BE_PROC_NVIRT; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, be_proc_virtual[i]);
		m->virt_fd[i] = (int)syscall(SYS_open_tree, AT_FDCWD, p,
					     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	}
}

/* One mount of the masks. */
struct step {
	enum { ST_BIND, ST_TMPFS, ST_MOVE, ST_RO } how;	/* bind src; a size-0 tmpfs;
							 * move *fd; dst read-only */
	const char *src;	/* ST_BIND: what is bound at dst */
	int *fd;		/* ST_MOVE: the detached mount, -1 once taken */
	char dst[PATH_MAX];	/* where */
};

/* Calls fn for each mount the masks of m over proc need, in order. */
static int walk(struct be_procmask *m, const char *proc, int (*fn)(struct step *, void *),
		void *arg)
{
	struct step s;
	struct stat st;
	int rc;

	for (size_t i = 0; i < BE_PROC_NMASKED; i++) {
		if (m->kind[i] == BE_PM_UNKNOWN)
			m->kind[i] = (unsigned char)probe_one(m, proc, i);
		if (m->kind[i] == BE_PM_NONE)
			continue;
		snprintf(s.dst, sizeof(s.dst), "%s/%s", proc, be_proc_masked[i]);
		s.how = m->kind[i] == BE_PM_DIR && !m->empty ? ST_TMPFS : ST_BIND;
		s.src = m->kind[i] == BE_PM_DIR ? m->empty : "/dev/null";
		if ((rc = fn(&s, arg)) < 0)
			return rc;
	}
	for (size_t i = 0; i < BE_PROC_NVIRT; i++) {
		if (m->virt_fd[i] < 0 && !m->virt_path[i])
			continue;
		snprintf(s.dst, sizeof(s.dst), "%s/%s", proc, be_proc_virtual[i]);
		s.how = m->virt_fd[i] >= 0 ? ST_MOVE : ST_BIND;
		s.fd = &m->virt_fd[i];
		s.src = m->virt_path[i];
		if ((rc = fn(&s, arg)) < 0)
			return rc;
	}
	for (size_t i = 0; m->ro && i < DSEC_ARRAY_LEN(proc_ro); i++) {
		snprintf(s.dst, sizeof(s.dst), "%s/%s", proc, proc_ro[i]);
		if (lstat(s.dst, &st) < 0)
			continue;
		s.how = ST_RO;
		if ((rc = fn(&s, arg)) < 0)
			return rc;
	}
	return 0;
}

static int xmount(const char *src, const char *dst, const char *type, unsigned long fl,
		  const char *data, struct dsec_err *err)
{
	if (mount(src, dst, type, fl, data) < 0)
		return dsec_err_set(err, errno, "cannot mount '%s' on '%s': %s",
				    src ? src : type ? type : "(remount)", dst, strerror(errno));
	return 0;
}

#define RO_FLAGS (MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)

static int apply_step(struct step *s, void *arg)
{
	struct dsec_err *err = arg;
	int rc;

	switch (s->how) {
	case ST_BIND:
		return xmount(s->src, s->dst, NULL, MS_BIND, NULL, err);
	case ST_TMPFS:
		return xmount("dsec-mask", s->dst, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV |
			      MS_NOEXEC, "size=0,mode=0500", err);
	case ST_MOVE:
		rc = (int)syscall(SYS_move_mount, *s->fd, "", AT_FDCWD, s->dst,
				  MOVE_MOUNT_F_EMPTY_PATH);
		if (rc < 0)
			rc = dsec_err_set(err, errno, "cannot mount '%s': %s", s->dst,
					  strerror(errno));
		close(*s->fd);
		*s->fd = -1;
		return rc < 0 ? rc : xmount(NULL, s->dst, NULL, RO_FLAGS, NULL, err);
	case ST_RO:
		if ((rc = xmount(s->dst, s->dst, NULL, MS_BIND | MS_REC, NULL, err)) < 0)
			return rc;
		return xmount(NULL, s->dst, NULL, RO_FLAGS, NULL, err);
	}
	return 0;
}

int be_procmask_apply(struct be_procmask *m, const char *proc, struct dsec_err *err)
{
	return walk(m, proc, apply_step, err);
}

static int plan_step(struct step *s, void *arg)
{
	dsec_buf_addf(arg, "%s\t%s\n", s->src, s->dst);
	return 0;
}

int be_procmask_plan(struct be_procmask *m, const char *proc, struct dsec_buf *out,
		     struct dsec_err *err)
{
	bool binds = m->empty && !m->ro;

	for (size_t i = 0; i < BE_PROC_NVIRT; i++)
		binds = binds && m->virt_fd[i] < 0;
	if (!binds)
		return dsec_err_set(err, EINVAL, "cannot list the masks of '%s' as binds", proc);
	return walk(m, proc, plan_step, out);
}
