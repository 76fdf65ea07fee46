/* be_cgroup.c - the cgroup driver (see be_cgroup.h).
 *
 * Why directory descriptors everywhere: the fncall zygote pivots into a
 * minimal root where /sys does not exist, yet must still create and fill
 * per-call groups; *at() calls on descriptors opened before the pivot keep
 * working.  The same code serves the daemon side (the backend .so) and the
 * helper (which compiles this file in, see fncall-zygote-helper.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "be_cgroup.h"
#include "util.h"

#define CG_ROOT "/sys/fs/cgroup"
#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif
#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

/* v1 hierarchies the driver uses, in this order, when they are mounted. */
static const char *const v1_names[] = { "memory", "cpu", "pids", "freezer" };
/* v2 controllers a group delegates to its children. */
static const char *const v2_ctls[] = { "memory", "pids", "cpu" };

static void nap_us(long us)
{
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000L };

	nanosleep(&ts, NULL);
}

static void nap_ms(int ms)
{
	nap_us((long)ms * 1000);
}

static int write_at(int dirfd, const char *file, const char *val)
{
	int fd = openat(dirfd, file, O_WRONLY | O_CLOEXEC);
	ssize_t n;
	int rc = 0;

	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	if (n < 0)
		rc = -errno;
	else if ((size_t)n != strlen(val))
		rc = -EIO;
	close(fd);
	return rc;
}

/* Read a small cgroupfs file into buf (NUL-terminated). */
static int read_at(int dirfd, const char *file, char *buf, size_t len)
{
	int fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC);
	size_t got = 0;
	ssize_t n;

	if (fd < 0)
		return -errno;
	while (got + 1 < len && (n = read(fd, buf + got, len - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	close(fd);
	return 0;
}

/* write_at unless the file holds val already: a write of a CPU quota or
 * period walks every task group of the host (the kernel checks the new
 * bandwidth against the whole tree), the same value or not. */
static int write_new_at(int dirfd, const char *file, const char *val)
{
	char now[64];

	if (read_at(dirfd, file, now, sizeof(now)) == 0) {
		now[strcspn(now, "\n")] = '\0';
		if (!strcmp(now, val))
			return 0;
	}
	return write_at(dirfd, file, val);
}

static bool word_in(const char *list, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = list; (p = strstr(p, word)); p += n)
		if ((p == list || p[-1] == ' ' || p[-1] == '+') &&
		    (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
			return true;
	return false;
}

/* "cpu,cpuacct" has "cpu". */
static bool csv_has(const char *csv, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = csv; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, name, n) && (p[n] == ',' || p[n] == '\0'))
			return true;
	return false;
}

static struct be_cg *cg_alloc(enum be_cg_mode mode, const char *path)
{
	struct be_cg *cg = xcalloc(1, sizeof(*cg));

	cg->mode = mode;
	for (int i = 0; i < BE_CG_MAXH; i++)
		cg->dirfd[i] = -1;
	cg->path = xstrdup(path);
	return cg;
}

void be_cg_free(struct be_cg *cg)
{
	if (!cg)
		return;
	for (int i = 0; i < cg->n; i++)
		if (cg->dirfd[i] >= 0)
			close(cg->dirfd[i]);
	free(cg->path);
	free(cg->rel);
	free(cg->brel);
	free(cg);
}

/* Is hierarchy i the group's own directory (not one a light group
 * borrows from its parent)? */
static bool own(const struct be_cg *cg, int i)
{
	return !(cg->borrowed & (1u << i));
}

/* The first hierarchy whose directory is the group's own. */
static int first_own(const struct be_cg *cg)
{
	for (int i = 0; i < cg->n; i++)
		if (own(cg, i))
			return i;
	return 0;
}

/* A group's descriptor in hierarchy i.  A closed group's calls work on a
 * copy of it (CG_USE) that opens each hierarchy's directory the first
 * time the call needs it, below the root group; -1 when that fails. */
static int cgfd(const struct be_cg *cg, int i)
{
	struct be_cg *c = (struct be_cg *)cg;	/* only a call's own copy changes */

	if (c->dirfd[i] < 0 && c->pinned)
		c->dirfd[i] = openat(c->root->dirfd[i], own(c, i) ? c->rel : c->brel,
				     O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return c->dirfd[i];
}

static void cg_unpin(struct be_cg **p)
{
	if (!*p)
		return;
	for (int i = 0; i < (*p)->n; i++)
		if ((*p)->dirfd[i] >= 0)
			close((*p)->dirfd[i]);
}

/* At the top of a call on a group that may be closed: cg becomes the
 * call's own copy, whose descriptors are closed when the call returns. */
#define CG_USE(cg)							\
	struct be_cg cg_pin_;						\
	__attribute__((cleanup(cg_unpin))) struct be_cg *cg_held_ = NULL; \
	if ((cg)->closed) {						\
		cg_pin_ = *(cg);					\
		cg_pin_.closed = false;					\
		cg_pin_.pinned = true;					\
		(cg) = cg_held_ = &cg_pin_;				\
	}

int be_cg_close(struct be_cg *cg)
{
	if (!cg->root)
		return -EINVAL;
	for (int i = 0; i < cg->n; i++) {
		if (cg->dirfd[i] >= 0)
			close(cg->dirfd[i]);
		cg->dirfd[i] = -1;
	}
	cg->closed = true;
	return 0;
}

/* Our own cgroup path in hierarchy `h` ("" for the v2 one) from
 * /proc/self/cgroup; "/" when unknown. */
static char *own_path(const char *h)
{
	_cleanup_free_ char *data = NULL;
	size_t len;

	if (dsec_read_file("/proc/self/cgroup", &data, &len) < 0)
		return xstrdup("/");
	for (char *line = strtok(data, "\n"); line; line = strtok(NULL, "\n")) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;

		if (!c2)
			continue;
		*c2 = '\0';
		if (!*h ? c1[1] == '\0' : csv_has(c1 + 1, h))
			return xstrdup(c2 + 1);
	}
	return xstrdup("/");
}

/* Enable the v2 controllers listed in dirfd's cgroup.controllers for its
 * children.  Returns -errno when a wanted one (memory, pids) cannot be. */
static int v2_delegate(int dirfd)
{
	char have[512], on[512];
	int rc = 0;

	if (read_at(dirfd, "cgroup.controllers", have, sizeof(have)) < 0)
		return -ENOENT;
	read_at(dirfd, "cgroup.subtree_control", on, sizeof(on));
	for (size_t i = 0; i < DSEC_ARRAY_LEN(v2_ctls); i++) {
		char plus[32];
		int r;

		if (word_in(on, v2_ctls[i]))
			continue;
		if (!word_in(have, v2_ctls[i])) {
			if (i < 2)
				rc = -EOPNOTSUPP;
			continue;
		}
		snprintf(plus, sizeof(plus), "+%s", v2_ctls[i]);
		if ((r = write_at(dirfd, "cgroup.subtree_control", plus)) < 0 && i < 2)
			rc = r;
	}
	return rc;
}

static int open_dir(int at, const char *path)
{
	int fd = openat(at, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

/* mkdir (EEXIST is fine) and open. */
static int make_dir(int at, const char *name, bool create)
{
	if (create && mkdirat(at, name, 0755) < 0 && errno != EEXIST)
		return -errno;
	return open_dir(at, name);
}

static int open_root_v2(struct be_cg **out, const char *name, struct dsec_err *err)
{
	_cleanup_free_ char *own = own_path("");
	const char *cands[2] = { own, "/" };
	int last = 0;

	for (int i = 0; i < 2; i++) {
		_cleanup_free_ char *dir = xasprintf(CG_ROOT "%s", cands[i]);
		_cleanup_close_ int base = open_dir(AT_FDCWD, dir);
		struct be_cg *cg;
		int fd, rc;

		if (i == 1 && !strcmp(cands[0], "/"))
			break;
		if (base < 0) {
			last = base;
			continue;
		}
		if ((rc = v2_delegate(base)) < 0) {
			last = rc;
			continue;
		}
		if ((fd = make_dir(base, name, true)) < 0) {
			last = fd;
			continue;
		}
		cg = cg_alloc(BE_CG_V2, "");
		free(cg->path);
		cg->path = xasprintf("%s%s%s", strcmp(cands[i], "/") ? cands[i] : "", "/", name);
		cg->n = 1;
		snprintf(cg->hname[0], sizeof(cg->hname[0]), "unified");
		cg->dirfd[0] = fd;
		cg->has_kill = faccessat(fd, "cgroup.kill", F_OK, 0) == 0;
		v2_delegate(fd);
		*out = cg;
		return 0;
	}
	return dsec_err_set(err, last ? -last : EACCES,
			    "cannot create cgroup '%s' in " CG_ROOT ": %s", name,
			    strerror(last ? -last : EACCES));
}

static int open_root_v1(struct be_cg **out, const char *name, struct dsec_err *err)
{
	struct be_cg *cg = cg_alloc(BE_CG_V1, "");
	char path[512];

	for (size_t i = 0; i < DSEC_ARRAY_LEN(v1_names); i++) {
		struct statfs sf;
		_cleanup_free_ char *own = NULL;
		int fd = -1;

		snprintf(path, sizeof(path), CG_ROOT "/%s", v1_names[i]);
		if (statfs(path, &sf) < 0 || sf.f_type != CGROUP_SUPER_MAGIC)
			continue;
		own = own_path(v1_names[i]);
		/* Below our own group first (respects where the daemon was put),
		 * then below the root of the hierarchy. */
		for (int k = 0; k < 2 && fd < 0; k++) {
			_cleanup_close_ int base = -1;

			snprintf(path, sizeof(path), CG_ROOT "/%s%s", v1_names[i], k ? "" : own);
			if ((base = open_dir(AT_FDCWD, path)) < 0)
				continue;
			fd = make_dir(base, name, true);
			if (fd >= 0 && !cg->path[0]) {
				free(cg->path);
				cg->path = xasprintf("%s/%s", k || !strcmp(own, "/") ? "" : own, name);
			}
		}
		if (fd < 0)
			continue;
		snprintf(cg->hname[cg->n], sizeof(cg->hname[0]), "%s", v1_names[i]);
		cg->dirfd[cg->n++] = fd;
	}
	if (cg->n == 0) {
		be_cg_free(cg);
		return dsec_err_set(err, EACCES, "cannot create cgroup '%s' in any v1 hierarchy",
				    name);
	}
	*out = cg;
	return 0;
}

int be_cg_open_root(struct be_cg **out, const char *name, struct dsec_err *err)
{
	struct statfs sf;
	bool v1 = false;

	if (statfs(CG_ROOT, &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC)
		return open_root_v2(out, name, err);
	for (size_t i = 0; i < DSEC_ARRAY_LEN(v1_names); i++) {
		char path[128];

		snprintf(path, sizeof(path), CG_ROOT "/%s", v1_names[i]);
		if (statfs(path, &sf) == 0 && sf.f_type == CGROUP_SUPER_MAGIC)
			v1 = true;
	}
	if (v1)
		return open_root_v1(out, name, err);
	*out = cg_alloc(BE_CG_NONE, "");
	return 0;
}

/* v1's hierarchies a light group borrows from its parent. */
static bool lent(const struct be_cg *parent, int i)
{
	return parent->mode == BE_CG_V1 &&
	       (!strcmp(parent->hname[i], "memory") || !strcmp(parent->hname[i], "cpu"));
}

static int child(struct be_cg *parent, const char *name, bool create, bool delegate, bool light,
		 struct be_cg **out, struct dsec_err *err)
{
	struct be_cg *cg;

	CG_USE(parent);
	if (light) {
		int owned = 0;

		if (parent->light)
			return dsec_err_set(err, EINVAL, "cgroup '%s' is light: no light child",
					    parent->path);
		for (int i = 0; i < parent->n; i++)
			owned += !lent(parent, i);
		light = owned > 0;
	}
	cg = cg_alloc(parent->mode, "");
	free(cg->path);
	cg->path = xasprintf("%s/%s", parent->path, name);
	cg->has_kill = parent->has_kill;
	cg->root = parent->root ? parent->root : parent;
	cg->rel = parent->root ? xasprintf("%s/%s", parent->rel, name) : xstrdup(name);
	if ((cg->light = light))
		cg->brel = xstrdup(parent->root ? parent->rel : ".");
	for (int i = 0; i < parent->n; i++) {
		bool borrow = light && lent(parent, i);
		int up = cgfd(parent, i);
		int fd = borrow ? open_dir(up, ".") : make_dir(up, name, create);

		if (fd < 0) {
			int rc = dsec_err_set(err, -fd, "cannot %s cgroup '%s' (%s): %s",
					      create ? "create" : "open", cg->path, parent->hname[i],
					      strerror(-fd));
			be_cg_free(cg);
			return rc;
		}
		memcpy(cg->hname[i], parent->hname[i], sizeof(cg->hname[i]));
		cg->dirfd[i] = fd;
		cg->borrowed |= borrow ? 1u << i : 0;
		cg->n = i + 1;
	}
	if (delegate && cg->mode == BE_CG_V2)
		v2_delegate(cg->dirfd[0]);
	*out = cg;
	return 0;
}

int be_cg_child(struct be_cg *parent, const char *name, bool create, bool delegate,
		struct be_cg **out, struct dsec_err *err)
{
	return child(parent, name, create, delegate, false, out, err);
}

int be_cg_child_light(struct be_cg *parent, const char *name, bool create, struct be_cg **out,
		      struct dsec_err *err)
{
	return child(parent, name, create, false, true, out, err);
}

/* The group's own directory in the hierarchy called name, -1 if none;
 * hier_any also gives a borrowed one (to read the parent's counts). */
static int hier_at(const struct be_cg *cg, const char *name, bool borrowed)
{
	for (int i = 0; i < cg->n; i++)
		if (!strcmp(cg->hname[i], name) && (borrowed || own(cg, i)))
			return cgfd(cg, i);
	return -1;
}

static int hier(const struct be_cg *cg, const char *name)
{
	return hier_at(cg, name, false);
}

static int hier_any(const struct be_cg *cg, const char *name)
{
	return hier_at(cg, name, true);
}

/* Opens file of dir for reading, or for a light group that has no such
 * file (no controller of its own on v2) its parent's. */
static int open_count(const struct be_cg *cg, int dir, const char *file)
{
	int fd = openat(dir, file, O_RDONLY | O_CLOEXEC), up;

	if (fd >= 0 || errno != ENOENT || !cg->light)
		return fd;
	if ((up = openat(dir, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	fd = openat(up, file, O_RDONLY | O_CLOEXEC);
	close(up);
	return fd;
}

int be_cg_add_unified(struct be_cg *cg)
{
	const char *base = strrchr(cg->path, '/');
	_cleanup_free_ char *own = NULL, *dir = NULL;
	_cleanup_close_ int up = -1;
	struct statfs sf;
	int fd;

	if (cg->mode != BE_CG_V1 || cg->n >= BE_CG_MAXH || hier(cg, "unified") >= 0)
		return 0;
	if (statfs(CG_ROOT "/unified", &sf) < 0 || sf.f_type != CGROUP2_SUPER_MAGIC)
		return 0;
	base = base ? base + 1 : cg->path;
	own = own_path("");
	dir = xasprintf(CG_ROOT "/unified%s", own);
	if ((up = open_dir(AT_FDCWD, dir)) < 0)
		return 0;
	if ((fd = make_dir(up, base, true)) < 0)
		return fd;
	if (faccessat(fd, "cgroup.freeze", F_OK, 0) < 0) {
		close(fd);
		unlinkat(up, base, AT_REMOVEDIR);
		return 0;
	}
	snprintf(cg->hname[cg->n], sizeof(cg->hname[0]), "unified");
	cg->dirfd[cg->n++] = fd;
	cg->has_kill = faccessat(fd, "cgroup.kill", F_OK, 0) == 0;
	return 0;
}

int be_cg_set_limits(struct be_cg *cg, const struct be_cg_limits *lim)
{
	char v[64];
	int rc = 0, r, fd;

	CG_USE(cg);
	if (cg->mode == BE_CG_V2) {
		fd = cgfd(cg, 0);
		if (lim->memory)
			snprintf(v, sizeof(v), "%" PRIu64, lim->memory);
		else
			snprintf(v, sizeof(v), "max");
		if ((r = write_at(fd, "memory.max", v)) < 0 && r != -ENOENT)
			rc = r;
		write_at(fd, "memory.swap.max", lim->memory ? "0" : "max");
		if (lim->pids)
			snprintf(v, sizeof(v), "%" PRIu32, lim->pids);
		else
			snprintf(v, sizeof(v), "max");
		if ((r = write_at(fd, "pids.max", v)) < 0 && r != -ENOENT)
			rc = r;
		if (lim->cpus > 0)
			snprintf(v, sizeof(v), "%" PRIu64 " 100000",
				 (uint64_t)(lim->cpus * 100000.0 + 0.5));
		else
			snprintf(v, sizeof(v), "max 100000");
		if ((r = write_new_at(fd, "cpu.max", v)) < 0 && r != -ENOENT)
			rc = r;
		snprintf(v, sizeof(v), "%" PRIu32, lim->weight ? lim->weight : 100);
		if ((r = write_at(fd, "cpu.weight", v)) < 0 && r != -ENOENT)
			rc = r;
		return rc;
	}
	if (cg->mode != BE_CG_V1)
		return 0;
	if ((fd = hier(cg, "memory")) >= 0) {
		snprintf(v, sizeof(v), "%" PRId64, lim->memory ? (int64_t)lim->memory : (int64_t)-1);
		/* memsw must stay >= the memory limit: lift it first, then set both. */
		write_at(fd, "memory.memsw.limit_in_bytes", "-1");
		if ((r = write_at(fd, "memory.limit_in_bytes", v)) < 0)
			rc = r;
		if (lim->memory)
			write_at(fd, "memory.memsw.limit_in_bytes", v);
	}
	if ((fd = hier(cg, "pids")) >= 0) {
		if (lim->pids)
			snprintf(v, sizeof(v), "%" PRIu32, lim->pids);
		else
			snprintf(v, sizeof(v), "max");
		if ((r = write_at(fd, "pids.max", v)) < 0)
			rc = r;
	}
	if ((fd = hier(cg, "cpu")) >= 0) {
		write_new_at(fd, "cpu.cfs_period_us", "100000");
		if (lim->cpus > 0)
			snprintf(v, sizeof(v), "%" PRId64, (int64_t)(lim->cpus * 100000.0 + 0.5));
		else
			snprintf(v, sizeof(v), "-1");
		if ((r = write_new_at(fd, "cpu.cfs_quota_us", v)) < 0)
			rc = r;
		snprintf(v, sizeof(v), "%" PRIu64,
			 (uint64_t)(lim->weight ? lim->weight : 100) * 1024 / 100);
		if ((r = write_at(fd, "cpu.shares", v)) < 0)
			rc = r;
	}
	return rc;
}

int be_cg_attach(struct be_cg *cg, pid_t pid)
{
	char v[24];
	int rc = 0, r;

	CG_USE(cg);
	snprintf(v, sizeof(v), "%d", (int)pid);
	for (int i = 0; i < cg->n; i++)
		if ((r = write_at(cgfd(cg, i), "cgroup.procs", v)) < 0)
			rc = r;
	return rc;
}

int be_cg_open_procs(const struct be_cg *cg, int fds[BE_CG_MAXH])
{
	char file[PATH_MAX];

	for (int i = 0; i < cg->n; i++) {
		if (cg->closed)	/* straight from the root: no directory to open */
			snprintf(file, sizeof(file), "%s/cgroup.procs",
				 own(cg, i) ? cg->rel : cg->brel);
		if ((fds[i] = cg->closed ? openat(cg->root->dirfd[i], file, O_WRONLY | O_CLOEXEC) :
			      openat(cg->dirfd[i], "cgroup.procs", O_WRONLY | O_CLOEXEC)) < 0) {
			int e = errno;

			while (i-- > 0)
				close(fds[i]);
			return -e;
		}
	}
	return cg->n;
}

/* Call fn(sub, arg) with a descriptor of each group directly below dirfd's. */
static void each_child(int dirfd, void (*fn)(int sub, void *arg), void *arg)
{
	int dfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	DIR *d;

	if (dfd < 0)
		return;
	if (!(d = fdopendir(dfd))) {
		close(dfd);
		return;
	}
	while ((de = readdir(d))) {
		int sub;

		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		if ((sub = open_dir(dirfd, de->d_name)) < 0)
			continue;
		fn(sub, arg);
		close(sub);
	}
	closedir(d);
}

struct proc_walk {
	void (*fn)(pid_t);		/* called for each process, or NULL */
	int count;			/* processes seen */
};

static void each_proc_in(int dirfd, void *arg);

/* Call fn(pid) for every process in dirfd's group and below; returns how
 * many were seen. */
static int each_proc(int dirfd, void (*fn)(pid_t))
{
	struct proc_walk w = { fn, 0 };

	each_proc_in(dirfd, &w);
	return w.count;
}

static void each_proc_in(int dirfd, void *arg)
{
	struct proc_walk *w = arg;
	char buf[8192];

	if (read_at(dirfd, "cgroup.procs", buf, sizeof(buf)) == 0) {
		for (char *p = buf; *p; ) {
			char *end;
			long pid = strtol(p, &end, 10);

			if (end == p)
				break;
			if (pid > 0) {
				w->count++;
				if (w->fn)
					w->fn((pid_t)pid);
			}
			p = end + (*end != '\0');
		}
	}
	each_child(dirfd, each_proc_in, w);
}

static void kill9(pid_t pid)
{
	kill(pid, SIGKILL);
}

bool be_cg_populated(struct be_cg *cg)
{
	char buf[256];

	CG_USE(cg);
	if (cg->mode == BE_CG_NONE || cg->n == 0)
		return false;
	if (cg->mode == BE_CG_V2 && read_at(cgfd(cg, 0), "cgroup.events", buf, sizeof(buf)) == 0)
		return strstr(buf, "populated 1") != NULL;
	return each_proc(cgfd(cg, first_own(cg)), NULL) > 0;
}

int be_cg_oom_open(const struct be_cg *cg)
{
	CG_USE(cg);
	bool v2 = cg->mode == BE_CG_V2;
	int mem = v2 ? (cg->n ? cgfd(cg, 0) : -1) : hier_any(cg, "memory");
	int fd;

	if (cg->mode == BE_CG_NONE || mem < 0)
		return -ENOENT;
	fd = open_count(cg, mem, v2 ? "memory.events" : "memory.oom_control");
	return fd < 0 ? -errno : fd;
}

int be_cg_oom_read(int fd, uint64_t *out)
{
	char buf[1024];
	const char *p;
	ssize_t n;

	*out = 0;
	if ((n = pread(fd, buf, sizeof(buf) - 1, 0)) < 0)
		return -errno;
	buf[n] = '\0';
	for (p = buf; (p = strstr(p, "oom_kill ")); p++)
		if (p == buf || p[-1] == '\n')
			return sscanf(p, "oom_kill %" SCNu64, out) == 1 ? 0 : -EINVAL;
	return -ENOENT;		/* a kernel older than 4.13 does not count */
}

int be_cg_fork_fails(struct be_cg *cg, uint64_t *out)
{
	CG_USE(cg);
	bool v2 = cg->mode == BE_CG_V2;
	int pids = v2 ? (cg->n ? cgfd(cg, 0) : -1) : hier(cg, "pids");
	char buf[256];
	const char *p;
	ssize_t len = -1;
	int fd = -1;

	*out = 0;
	if (cg->mode == BE_CG_NONE || pids < 0)
		return -ENOENT;
	if (v2)
		fd = open_count(cg, pids, "pids.events.local");
	if (fd < 0)
		fd = open_count(cg, pids, "pids.events");
	if (fd >= 0) {
		len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	if (len < 0)
		return -ENOENT;
	buf[len] = '\0';
	for (p = buf; (p = strstr(p, "max ")); p++)
		if (p == buf || p[-1] == '\n')
			return sscanf(p, "max %" SCNu64, out) == 1 ? 0 : -EINVAL;
	return -ENOENT;
}

int be_cg_oom_kills(struct be_cg *cg, uint64_t *out)
{
	int fd = be_cg_oom_open(cg), rc;

	*out = 0;
	if (fd < 0)
		return fd;
	rc = be_cg_oom_read(fd, out);
	close(fd);
	return rc;
}

static void thaw_tree_in(int dirfd, void *arg)
{
	write_at(dirfd, "freezer.state", "THAWED");
	each_child(dirfd, thaw_tree_in, arg);
}

/* v1: write THAWED to dirfd's group and every group below it. */
static void thaw_tree(int dirfd)
{
	thaw_tree_in(dirfd, NULL);
}

/* The v2 group that freezes and kills: the group itself on v2, its part
 * of the unified tree (be_cg_add_unified) on v1; -1 when there is none. */
static int v2_fd(const struct be_cg *cg)
{
	if (cg->mode == BE_CG_V2 && cg->n > 0)
		return cgfd(cg, 0);
	return cg->mode == BE_CG_V1 ? hier(cg, "unified") : -1;
}

/* The descriptor that freezes the group and whether it speaks v2
 * (cgroup.freeze) or v1 (freezer.state); -1 when there is none. */
static int freezer_fd(const struct be_cg *cg, bool *v2)
{
	int fd = v2_fd(cg);

	*v2 = fd >= 0;
	return fd >= 0 ? fd : cg->mode == BE_CG_V1 ? hier(cg, "freezer") : -1;
}

static bool is_frozen(int fd, bool v2)
{
	char buf[256];

	if (v2)
		return read_at(fd, "cgroup.events", buf, sizeof(buf)) == 0 &&
		       strstr(buf, "frozen 1") != NULL;
	return read_at(fd, "freezer.state", buf, sizeof(buf)) == 0 &&
	       !strncmp(buf, "FROZEN", 6);
}

int be_cg_freeze(struct be_cg *cg, int timeout_ms)
{
	CG_USE(cg);
	bool v2;
	int fd = freezer_fd(cg, &v2), rc;
	const char *file = v2 ? "cgroup.freeze" : "freezer.state", *val = v2 ? "1" : "FROZEN";
	uint64_t t0 = dsec_now_ns();
	long nap = 20;

	if (fd < 0)
		return -EOPNOTSUPP;
	if ((rc = write_at(fd, file, val)) < 0)
		return rc == -ENOENT ? -EOPNOTSUPP : rc;
	/* Sleeping tasks freeze at once, running ones at their next trip
	 * through the kernel: poll, napping a little longer each time. */
	for (int i = 1; ; i++) {
		if (is_frozen(fd, v2))
			return 0;
		if (dsec_now_ns() - t0 >= (uint64_t)timeout_ms * 1000000u)
			break;
		/* v1 tries each task once per write: tasks that were busy
		 * in the kernel are caught by writing again. */
		if (!v2 && i % 8 == 0)
			write_at(fd, file, val);
		nap_us(nap);
		nap = nap >= 1000 ? 2000 : nap * 2;
	}
	be_cg_thaw(cg);
	return -ETIMEDOUT;
}

int be_cg_thaw(struct be_cg *cg)
{
	CG_USE(cg);
	bool v2;
	int fd = freezer_fd(cg, &v2), rc;

	if (fd < 0)
		return -EOPNOTSUPP;
	rc = v2 ? write_at(fd, "cgroup.freeze", "0") : write_at(fd, "freezer.state", "THAWED");
	return rc == -ENOENT ? -EOPNOTSUPP : rc;
}

static int read_u64_at(int dirfd, const char *file, uint64_t *out)
{
	char buf[64];
	int rc;

	if ((rc = read_at(dirfd, file, buf, sizeof(buf))) < 0)
		return rc;
	*out = strtoull(buf, NULL, 10);
	return 0;
}

int be_cg_reclaim(struct be_cg *cg, uint64_t *before, uint64_t *after)
{
	CG_USE(cg);
	const char *usage = cg->mode == BE_CG_V2 ? "memory.current" : "memory.usage_in_bytes";
	int fd = cg->mode == BE_CG_V2 && cg->n > 0 ? cgfd(cg, 0) :
		cg->mode == BE_CG_V1 ? hier(cg, "memory") : -1;
	uint64_t b = 0;
	char v[32];
	int rc;

	if (fd < 0 || read_u64_at(fd, usage, &b) < 0)
		return -EOPNOTSUPP;
	if (before)
		*before = b;
	if (cg->mode == BE_CG_V2) {
		snprintf(v, sizeof(v), "%" PRIu64, b);
		rc = b ? write_at(fd, "memory.reclaim", v) : 0;
		if (rc == -EAGAIN)	/* reclaimed less than asked: that is all there is */
			rc = 0;
	} else {
		rc = write_at(fd, "memory.force_empty", "0");
	}
	if (after && read_u64_at(fd, usage, after) < 0)
		*after = b;
	return rc == -ENOENT ? -EOPNOTSUPP : rc;
}

void be_cg_usage(struct be_cg *cg, struct dsec_be_usage *u)
{
	CG_USE(cg);
	bool v2 = cg->mode == BE_CG_V2;
	int mem = v2 ? (cg->n ? cgfd(cg, 0) : -1) : hier(cg, "memory");
	int pids = v2 ? mem : hier(cg, "pids");
	int uni = v2 ? mem : hier(cg, "unified");
	int cpu = v2 ? -1 : hier(cg, "cpu");
	char buf[512], *p;
	uint64_t v;

	if (cg->mode == BE_CG_NONE)
		return;
	if (uni >= 0 && read_at(uni, "cpu.stat", buf, sizeof(buf)) == 0 &&
	    (p = strstr(buf, "usage_usec "))) {
		u->cpu_ns = strtoull(p + strlen("usage_usec "), NULL, 10) * 1000;
		u->have |= DSEC_USAGE_CPU;
	} else if (cpu >= 0 && read_u64_at(cpu, "cpuacct.usage", &v) == 0) {
		u->cpu_ns = v;
		u->have |= DSEC_USAGE_CPU;
	}
	if (mem >= 0 && read_u64_at(mem, v2 ? "memory.current" : "memory.usage_in_bytes", &v) == 0) {
		u->memory = v;
		u->have |= DSEC_USAGE_MEMORY;
	}
	if (mem >= 0 && read_u64_at(mem, v2 ? "memory.peak" : "memory.max_usage_in_bytes", &v) == 0) {
		u->memory_peak = v;
		u->have |= DSEC_USAGE_MEMORY_PEAK;
	}
	if (pids >= 0 && read_u64_at(pids, "pids.current", &v) == 0) {
		u->pids = v;
		u->have |= DSEC_USAGE_PIDS;
	}
}

void be_cg_usage_put(struct dsec_be_usage *out, const struct dsec_be_usage *u)
{
	uint32_t size = out->struct_size;

	memcpy(out, u, size < sizeof(*u) ? size : sizeof(*u));
	out->struct_size = size;
}

int be_cg_kill(struct be_cg *cg)
{
	CG_USE(cg);
	int frz = hier(cg, "freezer"), kfd = v2_fd(cg);

	if (cg->mode == BE_CG_NONE || cg->n == 0)
		return 0;
	for (int round = 0; round < 400; round++) {
		if (!be_cg_populated(cg))
			return 0;
		if (kfd >= 0 && cg->has_kill) {
			if (round % 20 == 0)
				write_at(kfd, "cgroup.kill", "1");
		} else if (round % 4 == 0) {
			/* Freeze so nothing forks while we collect pids, kill, thaw.
			 * The thaw covers the subtree: a frozen task only dies of
			 * its SIGKILL once thawed, and a paused sandbox below us
			 * is frozen on its own account. */
			if (frz >= 0)
				write_at(frz, "freezer.state", "FROZEN");
			each_proc(frz >= 0 ? frz : cgfd(cg, first_own(cg)), kill9);
			if (frz >= 0)
				thaw_tree(frz);
		}
		nap_ms(5);
	}
	return be_cg_populated(cg) ? -EBUSY : 0;
}

int be_cg_kill_but(struct be_cg *cg, pid_t keep)
{
	CG_USE(cg);
	int dir = cg->n ? cgfd(cg, first_own(cg)) : -1;

	if (cg->mode == BE_CG_NONE || dir < 0)
		return 0;
	for (int round = 0; round < 400; round++) {
		char buf[8192];
		int others = 0;

		if (read_at(dir, "cgroup.procs", buf, sizeof(buf)) < 0)
			return 0;
		for (char *q = buf, *end; *q; q = end) {
			long pid = strtol(q, &end, 10);

			if (end == q)
				break;
			if (pid > 0 && pid != keep) {
				kill((pid_t)pid, SIGKILL);
				others++;
			}
		}
		if (!others)
			return 0;
		nap_ms(5);
	}
	return -EBUSY;
}

/* rmdir every group below dirfd, deepest first, but the one named keep. */
static int rm_children_but(int dirfd, const char *keep);

static int rm_children(int dirfd)
{
	return rm_children_but(dirfd, NULL);
}

static int rm_children_but(int dirfd, const char *keep)
{
	int dfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
	struct dirent *de;
	DIR *d;

	if (dfd < 0)
		return -errno;
	if (!(d = fdopendir(dfd))) {
		close(dfd);
		return -errno;
	}
	while ((de = readdir(d))) {
		int sub;

		if (de->d_type != DT_DIR || de->d_name[0] == '.' ||
		    (keep && !strcmp(de->d_name, keep)))
			continue;
		if ((sub = open_dir(dirfd, de->d_name)) >= 0) {
			int r = rm_children(sub);

			if (r < 0)
				rc = r;
			close(sub);
		}
		for (int i = 0; i < 200; i++) {
			if (unlinkat(dirfd, de->d_name, AT_REMOVEDIR) == 0 || errno == ENOENT)
				break;
			if (errno != EBUSY || i == 199) {
				rc = -errno;
				break;
			}
			nap_ms(10);
		}
	}
	closedir(d);
	return rc;
}

int be_cg_remove_children(struct be_cg *cg)
{
	int rc = 0, r;

	CG_USE(cg);
	for (int i = 0; i < cg->n; i++)
		if (own(cg, i) && (r = rm_children(cgfd(cg, i))) < 0)
			rc = r;
	return rc;
}

int be_cg_remove_children_but(struct be_cg *cg, const char *keep)
{
	int rc = 0, r;

	CG_USE(cg);
	for (int i = 0; i < cg->n; i++)
		if (own(cg, i) && (r = rm_children_but(cgfd(cg, i), keep)) < 0)
			rc = r;
	return rc;
}

int be_cg_reuse(struct be_cg *cg, bool *peak_reset)
{
	CG_USE(cg);
	int mem = cg->mode == BE_CG_V1 ? hier(cg, "memory") : -1;
	int cpu = cg->mode == BE_CG_V1 ? hier(cg, "cpu") : -1;
	int rc;

	*peak_reset = false;
	if (cg->mode == BE_CG_NONE)
		return 0;
	if ((rc = be_cg_thaw(cg)) < 0 && rc != -EOPNOTSUPP)
		return rc;
	if (mem >= 0)
		*peak_reset = write_at(mem, "memory.max_usage_in_bytes", "0") == 0;
	if (cpu >= 0)
		write_at(cpu, "cpuacct.usage", "0");
	return 0;
}

int be_cg_remove(struct be_cg *cg)
{
	CG_USE(cg);
	const char *base = strrchr(cg->path, '/');
	int rc = be_cg_remove_children(cg);

	base = base ? base + 1 : cg->path;
	if (!*base)
		return rc;
	for (int i = 0; i < cg->n; i++) {
		if (!own(cg, i))
			continue;
		_cleanup_close_ int up = open_dir(cgfd(cg, i), "..");

		if (up < 0) {
			rc = up;
			continue;
		}
		for (int k = 0; k < 200; k++) {
			if (unlinkat(up, base, AT_REMOVEDIR) == 0 || errno == ENOENT)
				break;
			if (errno != EBUSY || k == 199) {
				rc = -errno;
				break;
			}
			nap_ms(10);
		}
	}
	return rc;
}

/* Kills what runs in up/name and below (through the freezer or
 * cgroup.kill of a throwaway group object of that one hierarchy), then
 * removes the tree.  True when it is gone. */
static bool kill_remove(int up, const char *name, enum be_cg_mode mode, const char *hname,
			bool has_kill)
{
	int fd = open_dir(up, name);

	if (fd < 0)
		return fd == -ENOENT;
	{
		struct be_cg tmp = { .mode = mode, .n = 1, .dirfd = { fd }, .has_kill = has_kill };

		snprintf(tmp.hname[0], sizeof(tmp.hname[0]), "%s", hname);
		tmp.path = (char *)name;
		be_cg_kill(&tmp);
		rm_children(fd);
	}
	close(fd);
	return unlinkat(up, name, AT_REMOVEDIR) == 0 || errno == ENOENT;
}

int be_cg_remove_stale(struct be_cg *cg, const char *prefix)
{
	size_t plen = strlen(prefix);
	int removed = 0;

	for (int i = 0; i < cg->n; i++) {
		int up = open_dir(cg->dirfd[i], ".."), dfd;
		struct dirent *de;
		DIR *d;

		if (up < 0)
			continue;
		if ((dfd = dup(up)) < 0 || !(d = fdopendir(dfd))) {
			if (dfd >= 0)
				close(dfd);
			close(up);
			continue;
		}
		while ((de = readdir(d))) {
			char *end;
			long pid;

			if (de->d_type != DT_DIR || strncmp(de->d_name, prefix, plen))
				continue;
			pid = strtol(de->d_name + plen, &end, 10);
			if (*end || pid <= 0 || (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
				continue;
			if (kill_remove(up, de->d_name, cg->mode, cg->hname[i], cg->has_kill))
				removed++;
		}
		closedir(d);
		close(up);
	}
	return removed;
}

/* The absolute directory of each of cg's hierarchies into dirs (room for
 * BE_CG_MAXH); how many. */
static int own_dirs(const struct be_cg *cg, char dirs[BE_CG_MAXH][PATH_MAX])
{
	int n = 0;

	for (int i = 0; i < cg->n; i++) {
		char self[64];
		ssize_t len;

		snprintf(self, sizeof(self), "/proc/self/fd/%d", cg->dirfd[i]);
		if ((len = readlink(self, dirs[n], PATH_MAX - 1)) <= 0)
			continue;
		dirs[n++][len] = '\0';
	}
	return n;
}

/* Removes the group tree at the absolute path dir (a leftover), whatever
 * hierarchy it is in. */
static bool remove_dir(const char *dir)
{
	_cleanup_free_ char *parent = xstrdup(dir);
	char *slash = strrchr(parent, '/');
	struct statfs sf;
	bool v2, ok;
	int up;

	if (strncmp(dir, CG_ROOT "/", strlen(CG_ROOT) + 1) || strstr(dir, "/../") || !slash ||
	    !slash[1] || statfs(dir, &sf) < 0 ||
	    (sf.f_type != CGROUP_SUPER_MAGIC && sf.f_type != CGROUP2_SUPER_MAGIC))
		return false;
	*slash = '\0';
	if ((up = open_dir(AT_FDCWD, parent)) < 0)
		return false;
	v2 = sf.f_type == CGROUP2_SUPER_MAGIC;
	{
		_cleanup_free_ char *kill_f = xasprintf("%s/cgroup.kill", dir);
		_cleanup_free_ char *frz_f = xasprintf("%s/freezer.state", dir);

		ok = kill_remove(up, slash + 1, v2 ? BE_CG_V2 : BE_CG_V1,
				 !v2 && access(frz_f, F_OK) == 0 ? "freezer" : "other",
				 access(kill_f, F_OK) == 0);
	}
	close(up);
	return ok;
}

int be_cg_take_over(const struct be_cg *cg, const char *file)
{
	char (*mine)[PATH_MAX] = xcalloc(BE_CG_MAXH, PATH_MAX);
	_cleanup_free_ char *data = NULL, *tmp = NULL;
	struct dsec_buf b;
	int n = own_dirs(cg, mine), removed = 0, rc = 0, fd;
	size_t len;

	if (dsec_read_file(file, &data, &len) == 0) {
		for (char *line = strtok(data, "\n"); line; line = strtok(NULL, "\n")) {
			bool ours = false;

			for (int i = 0; i < n; i++)
				ours |= !strcmp(mine[i], line);
			if (!ours && remove_dir(line))
				removed++;
		}
	}
	dsec_buf_init(&b);
	for (int i = 0; i < n; i++) {
		dsec_buf_add(&b, mine[i], strlen(mine[i]));
		dsec_buf_add(&b, "\n", 1);
	}
	tmp = xasprintf("%s.tmp", file);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0 ||
	    (rc = dsec_write_all(fd, b.data ? b.data : "", b.len)) < 0 || rename(tmp, file) < 0)
		removed = fd < 0 || rc == 0 ? -errno : rc;
	if (fd >= 0)
		close(fd);
	dsec_buf_free(&b);
	free(mine);
	return removed;
}

int be_cg_give_up(struct be_cg *cg, const char *file)
{
	int rc = be_cg_remove(cg);

	if (rc == 0)
		unlink(file);
	return rc;
}

int be_cg_export(const struct be_cg *cg, char *desc, size_t desclen, int fds[BE_CG_MAXH])
{
	size_t off;

	CG_USE(cg);
	if (cg->mode == BE_CG_NONE || cg->n == 0) {
		snprintf(desc, desclen, "none");
		return 0;
	}
	off = (size_t)snprintf(desc, desclen, "%s:", cg->mode == BE_CG_V2 ? "v2" : "v1");
	for (int i = 0; i < cg->n && off < desclen; i++) {
		off += (size_t)snprintf(desc + off, desclen - off, "%s%s", i ? "," : "", cg->hname[i]);
		if (fds && (fds[i] = fcntl(cgfd(cg, i), F_DUPFD_CLOEXEC, 3)) < 0) {
			int e = errno;

			be_cg_close_fds(fds, i);
			return -e;
		}
	}
	if (off < desclen)
		snprintf(desc + off, desclen - off, "@%s%s", cg->path, cg->has_kill ? "@kill" : "");
	return cg->n;
}

void be_cg_close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

int be_cg_import(struct be_cg **out, const char *desc, int firstfd, struct dsec_err *err)
{
	_cleanup_free_ char *d = xstrdup(desc);
	char *names, *path, *save = NULL;
	struct be_cg *cg;

	if (!strcmp(d, "none")) {
		*out = cg_alloc(BE_CG_NONE, "");
		return 0;
	}
	if (strncmp(d, "v1:", 3) && strncmp(d, "v2:", 3))
		return dsec_err_set(err, EINVAL, "bad cgroup description '%s'", desc);
	names = d + 3;
	if (!(path = strchr(names, '@')))
		return dsec_err_set(err, EINVAL, "bad cgroup description '%s'", desc);
	*path++ = '\0';
	cg = cg_alloc(d[1] == '2' ? BE_CG_V2 : BE_CG_V1, path);
	if ((path = strchr(cg->path, '@'))) {
		cg->has_kill = !strcmp(path, "@kill");
		*path = '\0';
	}
	for (char *n = strtok_r(names, ",", &save); n && cg->n < BE_CG_MAXH;
	     n = strtok_r(NULL, ",", &save)) {
		snprintf(cg->hname[cg->n], sizeof(cg->hname[0]), "%s", n);
		cg->dirfd[cg->n] = firstfd + cg->n;
		cg->n++;
	}
	*out = cg;
	return 0;
}
