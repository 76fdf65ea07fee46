/* import.c - staging rootfs trees from directories and tars; mkfs.erofs. */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <pthread.h>

#include <archive.h>
#include <archive_entry.h>

#include "import.h"
#include "oci.h"
#include "log.h"
#include "util.h"

#define WH_PREFIX ".wh."
#define WH_OPAQUE ".wh..wh..opq"

/* ---- mkfs.erofs ------------------------------------------------------- */

#define SPAWN_STACK (64u << 10)
/* Bytes of holes in a tree past which its layer is built chunked. */
#define CHUNKED_HOLES (64ull << 20)
/* Most bytes of holes mkfs.erofs is let read through (it reads and hashes
 * every byte of a file, holes included, at some 200 MB/s). */
#define HOLES_MAX (64ull << 30)
/* Bytes an entry of a tar counts toward a limit whatever its size. */
#define TAR_ENTRY_MIN 512

/* Free bytes under which a failed build is taken for a full disk. */
#define FULL_SLACK (1u << 20)

/* What the children running mkfs.erofs need. */
struct spawn_args {
	char *const *argv;	/* the command, argv[0] looked up in PATH */
	int logfd;		/* its stdout and stderr */
	/* With tmp, it runs in a mount namespace of its own where src is
	 * bound on srcmnt (a directory in tmp) and tmp on /tmp, and then
	 * runs argv_ns (paths under /tmp); where that cannot be, argv. */
	const char *tmp;	/* the directory for /tmp, or NULL */
	const char *src;	/* bound on srcmnt */
	const char *srcmnt;	/* a directory in tmp */
	char *const *argv_ns;	/* the command in that namespace */
	char *stack;		/* the grandchild's stack */
};

/* The grandchild: shares our memory until it execs; async-signal-safe only. */
static int exec_child(void *arg)
{
	const struct spawn_args *a = arg;
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	char *const *argv = a->argv;
	sigset_t none;
	int null = open("/dev/null", O_RDONLY);

	for (int s = 1; s < NSIG; s++)
		sigaction(s, &dfl, NULL);
	if (null < 0 || dup2(null, 0) < 0 || dup2(a->logfd, 1) < 0 || dup2(a->logfd, 2) < 0)
		_exit(127);
	/* Where it keeps temporary files: tmpfile(3) takes /tmp whatever
	 * TMPDIR says. */
	if (a->tmp && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
	    mount(a->src, a->srcmnt, NULL, MS_BIND | MS_REC, NULL) == 0 &&
	    mount(a->tmp, "/tmp", NULL, MS_BIND | MS_REC, NULL) == 0)
		argv = a->argv_ns;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execvp(argv[0], argv);
	_exit(127);
}

/* The child: starts the grandchild, waits for it and exits with its status
 * (128 + signal if a signal killed it). */
static int wait_child(void *arg)
{
	struct spawn_args *a = arg;
	int flags = CLONE_VM | CLONE_VFORK | SIGCHLD;
	pid_t pid = clone(exec_child, a->stack + SPAWN_STACK, flags | (a->tmp ? CLONE_NEWNS : 0), a);
	int st;

	if (pid < 0 && a->tmp) {	/* no mount namespace for us: the host's /tmp */
		a->tmp = NULL;
		pid = clone(exec_child, a->stack + SPAWN_STACK, flags, a);
	}
	if (pid < 0)
		_exit(126);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			_exit(126);
	_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

/* Runs a (argv and the rest; not stack) to completion; *status gets its
 * exit status.
 *
 * A program on libev's default loop reaps every child with waitpid(-1) on
 * SIGCHLD (dsecd's loop is not that one, but fs3 runs in other programs
 * too), which would steal our status.  So the direct child is cloned with no exit signal
 * and never execs (exec would make SIGCHLD its exit signal again): such a
 * "clone child" is invisible to waitpid(-1) and seen only by __WCLONE here.
 * It runs the real command as its own child.  Both use CLONE_VM|CLONE_VFORK
 * like posix_spawn: nothing of the daemon's memory is copied. */
static int run_wait(struct spawn_args *a, int *status)
{
	char *stacks = xmalloc(2 * SPAWN_STACK);
	sigset_t all, old;
	pid_t pid;
	int r = 0, st;

	a->stack = stacks + SPAWN_STACK;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid = clone(wait_child, stacks + SPAWN_STACK, CLONE_VM | CLONE_VFORK, a);
	if (pid < 0)
		r = -errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	while (r == 0 && waitpid(pid, &st, __WCLONE) < 0)
		if (errno != EINTR)
			r = -errno;
	free(stacks);
	if (r < 0)
		return r;
	if (!WIFEXITED(st) || WEXITSTATUS(st) == 126)
		return -ECHILD;
	*status = WEXITSTATUS(st);
	return 0;
}

/* The EROFS superblock: where it is and the fields we look at or clear. */
#define EROFS_SB_OFFSET 1024
#define EROFS_MAGIC 0xe0f5e1e2u
#define EROFS_FEATURE_SB_CHKSUM 0x1u
#define EROFS_SB_BUILD_TIME 24	/* u64 seconds, then u32 nanoseconds */

/* Clears the build time mkfs.erofs stamps into the superblock.  With every
 * inode extended (each keeps its own mtime) and no superblock checksum, it
 * is the only thing that differs between two builds of the same tree: one
 * tree, one layer digest, one mount and one page cache on a node. */
static int clear_build_time(const char *img)
{
	_cleanup_close_ int fd = open(img, O_RDWR | O_CLOEXEC);
	static const uint8_t zero[12];
	uint32_t hdr[3];

	if (fd < 0)
		return -errno;
	if (pread(fd, hdr, sizeof(hdr), EROFS_SB_OFFSET) != sizeof(hdr))
		return -EIO;
	if (le32toh(hdr[0]) != EROFS_MAGIC || (le32toh(hdr[2]) & EROFS_FEATURE_SB_CHKSUM))
		return -EBADMSG;
	if (pwrite(fd, zero, sizeof(zero), EROFS_SB_OFFSET + EROFS_SB_BUILD_TIME) != sizeof(zero))
		return -errno;
	return 0;
}

/* Directory depth tree_usage follows. */
#define USAGE_DEPTH_MAX 4096

/* A file with more than one link, counted once. */
struct ulink {
	dev_t dev;		/* its file system */
	ino_t ino;		/* its inode */
	uint64_t size;		/* its size */
	uint64_t holes;		/* bytes of it in holes */
};

/* What a tree holds, as mkfs.erofs will read it. */
struct usage {
	uint64_t apparent;	/* bytes of regular files (their sizes) */
	uint64_t holes;		/* of which are in holes (size over allocated blocks) */
	uint64_t entries;	/* entries of every kind */
	struct ulink *links;	/* files with several links, added at the end */
	size_t nlinks, caplinks; /* used, allocated */
};

static int link_cmp(const void *a, const void *b)
{
	const struct ulink *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* Adds what the directory dfd (closed here) holds to u; depth bounds it. */
static int usage_dir(int dfd, struct usage *u, int depth)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	int r = 0;

	if (!d) {
		close(dfd);
		return -errno;
	}
	while (r == 0 && (de = readdir(d))) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = -errno;
			break;
		}
		u->entries++;
		if (S_ISDIR(st.st_mode)) {
			int sub;

			if (depth >= USAGE_DEPTH_MAX)
				r = -ELOOP;
			else if ((sub = openat(dirfd(d), de->d_name,
					       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
				r = -errno;
			else
				r = usage_dir(sub, u, depth + 1);
			continue;
		}
		if (!S_ISREG(st.st_mode))
			continue;
		uint64_t size = (uint64_t)st.st_size, alloc = (uint64_t)st.st_blocks * 512;
		uint64_t holes = size > alloc ? size - alloc : 0;
		if (st.st_nlink > 1) {
			if (u->nlinks == u->caplinks) {
				u->caplinks = u->caplinks ? 2 * u->caplinks : 64;
				u->links = xrealloc(u->links, u->caplinks * sizeof(*u->links));
			}
			u->links[u->nlinks++] = (struct ulink){ st.st_dev, st.st_ino, size, holes };
			continue;
		}
		u->apparent += size;
		u->holes += holes;
	}
	closedir(d);
	return r;
}

/* Sizes and holes of the files under root, hard links counted once. */
static int tree_usage(const char *root, struct usage *u)
{
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), r;

	memset(u, 0, sizeof(*u));
	if (fd < 0)
		return -errno;
	r = usage_dir(fd, u, 0);
	if (u->nlinks)
		qsort(u->links, u->nlinks, sizeof(*u->links), link_cmp);
	for (size_t i = 0; i < u->nlinks; i++) {
		if (i && !link_cmp(&u->links[i - 1], &u->links[i]))
			continue;
		u->apparent += u->links[i].size;
		u->holes += u->links[i].holes;
	}
	free(u->links);
	u->links = NULL;
	return r;
}

/* Free bytes of the file system that holds dir, UINT64_MAX if unknown. */
static uint64_t free_bytes(const char *dir)
{
	struct statvfs sv;

	return statvfs(dir, &sv) < 0 ? UINT64_MAX : (uint64_t)sv.f_bavail * sv.f_frsize;
}

/* Why mkfs.erofs failed, from what it said: the errno of its last
 * "[Error N]", or ENOSPC when dir (where it writes) is full, else EIO. */
static int mkfs_cause(const char *msg, const char *dir)
{
	const char *p = msg, *q;
	int e = 0;

	while ((q = strstr(p, "[Error "))) {
		e = atoi(q + 7);
		p = q + 7;
	}
	if ((e == 0 || e == EIO) && free_bytes(dir) < FULL_SLACK)
		e = ENOSPC;
	return e > 0 && e < 4096 ? e : EIO;
}

int fs3_mkfs_erofs(const char *root, const char *out, struct dsec_err *err)
{
	_cleanup_free_ char *dir = xstrdup(out);
	_cleanup_free_ char *srcmnt = NULL, *nsout = NULL;
	_cleanup_close_ int logfd = memfd_create("mkfs.erofs", MFD_CLOEXEC);
	const char *base = strrchr(out, '/') ? strrchr(out, '/') + 1 : out;
	struct usage u;
	int st, r;

	if (strrchr(dir, '/'))
		*strrchr(dir, '/') = '\0';
	else
		strcpy(dir, ".");
	if (logfd < 0)
		return dsec_err_set(err, errno, "cannot run mkfs.erofs: %s", strerror(errno));
	if ((r = tree_usage(root, &u)) < 0)
		return dsec_err_set(err, -r, "cannot read the tree '%s': %s", root, strerror(-r));
	/* Holes: mkfs.erofs 1.5 writes them out as zeros, but with chunks
	 * (--chunksize) it stores each distinct 4 KiB block once, so a hole
	 * costs 4 bytes of chunk index per block.  It still reads them. */
	bool chunked = u.holes >= CHUNKED_HOLES;
	if (u.holes > HOLES_MAX)
		return dsec_err_setc(err, DSEC_E_CAPACITY, EFBIG, "cannot build an erofs image of "
				     "'%s': its files have %llu MiB of holes, more than %llu MiB",
				     root, (unsigned long long)(u.holes >> 20),
				     (unsigned long long)(HOLES_MAX >> 20));
	/* Plain, every byte is written: refuse what cannot fit at once. */
	uint64_t need = chunked ? 0 : u.apparent > u.entries * 4096 ? u.apparent - u.entries * 4096 : 0;
	uint64_t avail = free_bytes(dir);
	if (need > avail)
		return dsec_err_setc(err, DSEC_E_CAPACITY, ENOSPC, "cannot build an erofs image of "
				     "'%s' in '%s': %s (%llu MiB needed, %llu MiB free)", root, dir,
				     strerror(ENOSPC), (unsigned long long)(need >> 20),
				     (unsigned long long)(avail >> 20));
	/* Fixed UUID, no superblock checksum, own mtimes: see clear_build_time. */
	char *argv[10] = { "mkfs.erofs", "--quiet", "-U", "6473656d-6673-3300-0000-000000000000",
			   "-Enosbcrc,force-inode-extended", "--preserve-mtime" }, *argv_ns[10];
	int argc = 6;
	if (chunked)
		argv[argc++] = "--chunksize=4096";
	memcpy(argv_ns, argv, sizeof(argv));
	argv[argc] = (char *)out;
	argv[argc + 1] = (char *)root;
	struct spawn_args a = { .argv = argv, .logfd = logfd };
	if (chunked) {
		/* Its chunks gather in a tmpfile(3) first: in dir, not the
		 * host's /tmp, which the tree itself may be under. */
		srcmnt = xasprintf("%s/mkfs-src", dir);
		nsout = xasprintf("/tmp/%s", base);
		argv_ns[argc] = nsout;
		argv_ns[argc + 1] = "/tmp/mkfs-src";
		if (mkdir(srcmnt, 0700) == 0 || errno == EEXIST) {
			a.tmp = dir;
			a.src = root;
			a.srcmnt = srcmnt;
			a.argv_ns = argv_ns;
		}
	}
	r = run_wait(&a, &st);
	if (srcmnt)
		rmdir(srcmnt);
	if (r < 0)
		return dsec_err_set(err, -r, "cannot run mkfs.erofs: %s", strerror(-r));
	if (st == 0 && (r = clear_build_time(out)) < 0)
		return dsec_err_set(err, -r, "cannot use the erofs image '%s' mkfs.erofs built: %s",
				    out, r == -EBADMSG ? "unexpected superblock" : strerror(-r));
	if (st == 0)
		return 0;
	char msg[4096];
	ssize_t n = pread(logfd, msg, sizeof(msg) - 1, 0);
	n = n < 0 ? 0 : n;
	msg[n] = '\0';
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		msg[--n] = '\0';
	char *last = strrchr(msg, '\n');
	last = last ? last + 1 : msg;
	for (char *c = last; *c; c++)
		*c = *c == '\t' ? ' ' : *c;
	if (st == 127 && !n)
		return dsec_err_set(err, ENOENT, "cannot run mkfs.erofs: not found (install erofs-utils)");
	int e = mkfs_cause(msg, dir);
	return dsec_err_set(err, e, "cannot build an erofs image of '%s' in '%s': %s (mkfs.erofs "
			    "%s %d%s%s)", root, dir, strerror(e), st > 128 ? "killed by signal" :
			    "exited", st > 128 ? st - 128 : st, n ? ": " : "", last);
}

/* ---- tar ---------------------------------------------------------------- */

/* Normalises an entry path in place: no leading "/" or "./", no "." parts.
 * Returns "" for the tree's root ("./", "/", "" ...), NULL for a path with
 * a ".." part (or none at all). */
static char *clean_path(char *p)
{
	char *out = p, *w = p;

	if (!p)
		return NULL;
	while (*p) {
		while (*p == '/')
			p++;
		char *e = strchrnul(p, '/');
		size_t n = (size_t)(e - p);
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return NULL;
		if (n && !(n == 1 && p[0] == '.')) {
			if (w != out)
				*w++ = '/';
			memmove(w, p, n);
			w += n;
		}
		p = e;
	}
	*w = '\0';
	return out;
}

/* root/rel as a directory of the tree: missing parts are created, and a
 * part that is a symlink (which could point out of the tree) or no
 * directory is refused.  Nothing else writes to the staging tree while we
 * look, so what we checked stays true.  Caller frees. */
static char *tree_dir(const char *root, const char *rel, struct dsec_err *err)
{
	struct dsec_buf b;
	const char *p = rel;
	struct stat sb;

	dsec_buf_init(&b);
	dsec_buf_addf(&b, "%s", root);
	while (*p) {
		size_t n = strcspn(p, "/");
		dsec_buf_addf(&b, "/%.*s", (int)n, p);
		p += n + (p[n] == '/');
		if (lstat(b.data, &sb) < 0 && (errno != ENOENT || mkdir(b.data, 0755) < 0)) {
			dsec_err_set(err, errno, "cannot create '%s': %s", b.data, strerror(errno));
			goto fail;
		}
		if (lstat(b.data, &sb) < 0 || !S_ISDIR(sb.st_mode)) {
			dsec_err_set(err, ENOTDIR, "cannot apply a whiteout under '%s': not a directory "
				     "of the tree", b.data);
			goto fail;
		}
	}
	return dsec_buf_detach(&b, NULL);
fail:
	dsec_buf_free(&b);
	return NULL;
}

/* Applies a whiteout entry e (dir/base) to the tree at root.  The device
 * gets the entry's owner and mtime, so that one tar always gives one tree. */
static int whiteout(const char *root, const char *dir, const char *base, struct archive_entry *e,
		    struct dsec_err *err)
{
	const char *name = base + strlen(WH_PREFIX);
	_cleanup_free_ char *d = NULL;

	if (!*name || !strcmp(name, ".") || !strcmp(name, ".."))
		return dsec_err_set(err, EINVAL, "cannot apply whiteout '%s/%s': no name", dir, base);
	if (!(d = tree_dir(root, dir, err)))
		return -ENOTDIR;
	if (!strcmp(base, WH_OPAQUE)) {
		/* Both forms: "trusted." for overlays mounted by the host's root,
		 * "user." for overlays mounted in a user namespace (userxattr). */
		if (lsetxattr(d, "trusted.overlay.opaque", "y", 1, 0) < 0 ||
		    lsetxattr(d, "user.overlay.opaque", "y", 1, 0) < 0)
			return dsec_err_set(err, errno, "cannot mark '%s' opaque: %s", d,
					    strerror(errno));
		return 0;
	}
	_cleanup_free_ char *t = xasprintf("%s/%s", d, name);
	struct stat sb;
	if (lstat(t, &sb) == 0)
		S_ISDIR(sb.st_mode) ? dsec_rm_rf(t) : unlink(t);
	struct timespec ts[2] = { { .tv_sec = archive_entry_mtime(e),
				    .tv_nsec = archive_entry_mtime_nsec(e) } };
	ts[1] = ts[0];
	if (mknod(t, S_IFCHR | 0000, makedev(0, 0)) < 0 ||
	    lchown(t, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e)) < 0 ||
	    utimensat(AT_FDCWD, t, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return dsec_err_set(err, errno, "cannot map whiteout '%s': %s", t, strerror(errno));
	return 0;
}

/* Copies an entry's data: 0, 1 when reading the tar failed, -1 when
 * writing did (libarchive says ARCHIVE_WARN for a failed write, a full
 * disk included, and for a short one). */
static int copy_data(struct archive *in, struct archive *out)
{
	const void *p;
	size_t n;
	la_int64_t off;
	int r;

	while ((r = archive_read_data_block(in, &p, &n, &off)) == ARCHIVE_OK)
		if (archive_write_data_block(out, p, n, off) != ARCHIVE_OK)
			return -1;
	return r == ARCHIVE_EOF ? 0 : 1;
}

/* Why writing an entry failed: the errno (EIO if none) and its text. */
static int extract_err(struct archive *out, const char *p, const char *src, const char *full,
		       struct dsec_err *err)
{
	int e = archive_errno(out) > 0 ? archive_errno(out) : EIO;

	return dsec_err_set(err, e, "cannot extract '%s' from '%s' to '%s': %s (%s)", p, src, full,
			    strerror(e), archive_error_string(out));
}

static int tar_err(struct archive *in, const char *src, struct dsec_err *err)
{
	return dsec_err_set(err, archive_errno(in) > 0 ? archive_errno(in) : EINVAL,
			    "cannot read tar '%s': %s", src, archive_error_string(in));
}

/* A reader of the tar at src, any compression; NULL with err set. */
static struct archive *open_tar(const char *src, struct dsec_err *err)
{
	struct archive *in = archive_read_new();

	archive_read_support_filter_all(in);
	archive_read_support_format_tar(in);
	if (archive_read_open_filename(in, src, 1 << 16) == ARCHIVE_OK)
		return in;
	tar_err(in, src, err);
	archive_read_free(in);
	return NULL;
}

/* Extracts the tar at src into root (a path that does not exist yet in a
 * symlink-free directory), mapping whiteouts if asked.  root is made by the
 * tar's "./" entry, with its mode, owner and time (libarchive leaves existing
 * directories alone); without one it gets the newest mtime in the tar, so
 * that one tar always gives one tree. */
static int extract_tar(const char *src, const char *root, bool whiteouts, uint64_t max,
		       struct dsec_err *err)
{
	uint64_t used = 0;
	struct archive *in = open_tar(src, err), *out;
	struct archive_entry *e;
	struct timespec newest[2] = { { 0 } };
	bool have_root = false;
	int r = 0, ar;

	if (!in)
		return -EINVAL;
	out = archive_write_disk_new();
	/* Numeric owners (no lookup set), nothing through symlinks, no "..".
	 * No file flags: an immutable or append-only file (pax SCHILY.fflags)
	 * would make the staging tree undeletable, and EROFS keeps none. */
	archive_write_disk_set_options(out, ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_PERM |
				       ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_XATTR |
				       ARCHIVE_EXTRACT_ACL | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
				       ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_UNLINK);
	while ((ar = archive_read_next_header(in, &e)) == ARCHIVE_OK || ar == ARCHIVE_WARN) {
		const char *pn = archive_entry_pathname(e);
		_cleanup_free_ char *name = pn ? xstrdup(pn) : NULL;
		char *p = clean_path(name);
		if (archive_entry_mtime(e) > newest[0].tv_sec)
			newest[0].tv_sec = archive_entry_mtime(e);
		if (!p) {
			r = dsec_err_set(err, EINVAL, "cannot import '%s': entry '%s' leaves the tree",
					 src, pn ? pn : "");
			goto out;
		}
		/* A limit counts what the tree will take: each entry's data,
		 * and at least a block for the entry itself (a tar of empty
		 * files is no cheaper to extract). */
		int64_t esz = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
		used += TAR_ENTRY_MIN + (esz > 0 ? (uint64_t)esz : 0);
		if (max && used > max) {
			r = dsec_err_setc(err, DSEC_E_CAPACITY, EFBIG, "cannot import '%s': its "
					  "entries take more than %llu bytes", src,
					  (unsigned long long)max);
			goto out;
		}
		if (!*p) {
			/* "./": the root's owner, mode and times (a later one
			 * wins, as for any entry); only a plain directory. */
			if (archive_entry_filetype(e) != AE_IFDIR || archive_entry_hardlink(e) ||
			    archive_entry_symlink(e)) {
				r = dsec_err_set(err, EINVAL, "cannot import '%s': entry '%s' would "
						 "replace the tree's root", src, pn);
				goto out;
			}
			archive_entry_set_pathname(e, root);
			if (archive_write_header(out, e) < ARCHIVE_WARN ||
			    archive_write_finish_entry(out) < ARCHIVE_WARN)
				log_warn("cannot set the root of '%s' up: %s", src,
					 archive_error_string(out));
			have_root = true;
			continue;
		}
		char *slash = strrchr(p, '/');
		const char *base = slash ? slash + 1 : p;
		if (whiteouts && !strncmp(base, WH_PREFIX, strlen(WH_PREFIX))) {
			if (slash)
				*slash = '\0';
			if ((r = whiteout(root, slash ? p : "", base, e, err)) < 0)
				goto out;
			continue;
		}
		_cleanup_free_ char *full = xasprintf("%s/%s", root, p);
		archive_entry_set_pathname(e, full);
		const char *hl = archive_entry_hardlink(e);
		_cleanup_free_ char *hlfull = NULL;
		if (hl) {
			_cleanup_free_ char *h = xstrdup(hl);
			char *hp = clean_path(h);
			if (!hp || !*hp) {
				r = dsec_err_set(err, EINVAL, "cannot import '%s': link '%s' leaves the tree",
						 src, hl);
				goto out;
			}
			hlfull = xasprintf("%s/%s", root, hp);
			archive_entry_set_hardlink(e, hlfull);
		}
		int cr = 0;
		if (archive_write_header(out, e) < ARCHIVE_WARN ||
		    (archive_entry_size(e) > 0 && (cr = copy_data(in, out)) < 0) ||
		    (cr == 0 && archive_write_finish_entry(out) < ARCHIVE_WARN)) {
			r = extract_err(out, p, src, full, err);
			goto out;
		}
		if (cr > 0) {
			r = tar_err(in, src, err);
			goto out;
		}
	}
	if (ar != ARCHIVE_EOF)
		r = tar_err(in, src, err);
out:
	archive_read_free(in);
	archive_write_free(out);	/* sets the directories' times */
	if (r == 0 && mkdir(root, 0755) < 0 && errno != EEXIST)
		r = dsec_err_set(err, errno, "cannot create '%s': %s", root, strerror(errno));
	newest[1] = newest[0];
	if (r == 0 && !have_root)
		utimensat(AT_FDCWD, root, newest, 0);
	return r;
}

/* Does the tar at src hold an image (OCI layout, docker save) rather than
 * a root file system?  Reads its names only. */
static int tar_is_image(const char *src, bool *image, struct dsec_err *err)
{
	struct archive *in = open_tar(src, err);
	struct archive_entry *e;
	bool oci = false, manifest = false, layers = false;
	int ar, r = 0;

	if (!in)
		return -EINVAL;
	while ((ar = archive_read_next_header(in, &e)) == ARCHIVE_OK || ar == ARCHIVE_WARN) {
		const char *pn = archive_entry_pathname(e);
		_cleanup_free_ char *name = pn ? xstrdup(pn) : NULL;
		const char *p = clean_path(name);
		size_t n = p ? strlen(p) : 0;
		if (!p)
			continue;
		oci |= !strcmp(p, "oci-layout");
		manifest |= !strcmp(p, "manifest.json");
		layers |= !strncmp(p, "blobs/sha256/", 13) ||
			  (n > 10 && !strcmp(p + n - 10, "/layer.tar"));
		archive_read_data_skip(in);
	}
	if (ar != ARCHIVE_EOF)
		r = tar_err(in, src, err);
	*image = oci || (manifest && layers);
	archive_read_free(in);
	return r;
}

/* mkdir -p dir, then its path with symlinks resolved (caller frees), so that
 * SECURE_SYMLINKS only ever sees the tar's own. */
static char *real_dir(const char *dir, struct dsec_err *err)
{
	char real[PATH_MAX];
	int r;

	if ((r = dsec_mkdir_p(dir, 0755)) < 0)
		return dsec_err_set(err, -r, "cannot create '%s': %s", dir, strerror(-r)), NULL;
	if (!realpath(dir, real))
		return dsec_err_set(err, errno, "cannot resolve '%s': %s", dir, strerror(errno)), NULL;
	return xstrdup(real);
}

/* Resolves the parent of path (created) and returns it + the last name. */
static char *real_path_in(const char *path, struct dsec_err *err)
{
	_cleanup_free_ char *parent = xstrdup(path);
	char *slash = strrchr(parent, '/');

	DSEC_ASSERT(slash && slash[1]);
	*slash = '\0';
	_cleanup_free_ char *real = real_dir(parent, err);
	return real ? xasprintf("%s/%s", real, slash + 1) : NULL;
}

static int extract_into(const char *tar, const char *root, bool whiteouts, uint64_t max,
			struct dsec_err *err)
{
	_cleanup_free_ char *real = real_path_in(root, err);

	return real ? extract_tar(tar, real, whiteouts, max, err) : -EIO;
}

/* Is the file at path an EROFS image (its superblock's magic where it
 * belongs)?  *erofs false for anything shorter or else. */
static int file_is_erofs(const char *path, bool *erofs, struct dsec_err *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	unsigned char m[4];

	*erofs = false;
	if (fd < 0)
		return dsec_err_set(err, errno, "cannot import '%s': %s", path, strerror(errno));
	ssize_t n = pread(fd, m, sizeof(m), EROFS_SB_OFFSET);
	if (n < 0)
		return dsec_err_set(err, errno, "cannot read '%s': %s", path, strerror(errno));
	*erofs = n == sizeof(m) && (m[0] | m[1] << 8 | m[2] << 16 | (uint32_t)m[3] << 24) ==
		 EROFS_MAGIC;
	return 0;
}

/* What a kind names, for messages. */
static const char *kind_name(enum fs3_src_kind kind)
{
	return kind == FS3_SRC_TREE ? "a directory" : kind == FS3_SRC_LAYER_TAR ? "a tar file"
	       : "an erofs image file";
}

int fs3_import_open(const char *src, const char *staging, enum fs3_src_kind kind,
		    struct fs3_import_src *out, struct dsec_err *err)
{
	struct stat sb;
	bool image = false, erofs = false;
	int r;

	memset(out, 0, sizeof(*out));
	if (stat(src, &sb) < 0)
		return dsec_err_set(err, errno, "cannot import '%s': %s", src, strerror(errno));
	if (kind != FS3_SRC_ANY && (kind == FS3_SRC_TREE) != !!S_ISDIR(sb.st_mode))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "cannot import '%s': not %s",
				     src, kind_name(kind));
	if (S_ISDIR(sb.st_mode)) {
		if (kind == FS3_SRC_ANY && fs3_oci_is_layout(src))
			return fs3_oci_read(src, &out->tars, &out->config, &out->format, err);
		out->dir = xstrdup(src);
		out->format = "directory";
		return 0;
	}
	if (!S_ISREG(sb.st_mode))
		return dsec_err_set(err, EINVAL, "cannot import '%s': not a directory or a tar file",
				    src);
	if (kind != FS3_SRC_LAYER_TAR && (r = file_is_erofs(src, &erofs, err)) < 0)
		return r;
	if (kind == FS3_SRC_EROFS && !erofs)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "cannot import '%s': not %s",
				     src, kind_name(kind));
	if (kind != FS3_SRC_LAYER_TAR && erofs) {
		out->erofs = xstrdup(src);
		out->format = "erofs";
		return 0;
	}
	if (kind == FS3_SRC_ANY && (r = tar_is_image(src, &image, err)) < 0)
		return r;
	if (kind == FS3_SRC_LAYER_TAR || !image) {
		out->tars = xcalloc(2, sizeof(char *));
		out->tars[0] = xstrdup(src);
		out->format = "tar";
		return 0;
	}
	_cleanup_free_ char *dir = xasprintf("%s/image", staging);
	if ((r = extract_into(src, dir, false, 0, err)) < 0)
		return r;
	r = fs3_oci_read(dir, &out->tars, &out->config, &out->format, err);
	out->format = !strcmp(out->format, "oci") ? "oci archive" : "docker archive";
	return r;
}

void fs3_import_src_free(struct fs3_import_src *s)
{
	free(s->dir);
	free(s->erofs);
	if (s->tars)
		dsec_strv_free(s->tars);
	fs3_image_config_free(&s->config);
	memset(s, 0, sizeof(*s));
}

int fs3_extract_layer(const char *tar, const char *root, uint64_t max, struct dsec_err *err)
{
	return extract_into(tar, root, true, max, err);
}

int fs3_erofs_check(const char *img, struct dsec_err *err)
{
	_cleanup_close_ int logfd = memfd_create("fsck.erofs", MFD_CLOEXEC);
	char *argv[] = { "fsck.erofs", (char *)img, NULL };
	struct spawn_args a = { .argv = argv, .logfd = logfd };
	char msg[1024];
	int st, r;

	if (logfd < 0)
		return dsec_err_set(err, errno, "cannot run fsck.erofs: %s", strerror(errno));
	if ((r = run_wait(&a, &st)) < 0)
		return dsec_err_set(err, -r, "cannot run fsck.erofs: %s", strerror(-r));
	if (st == 127)
		return dsec_err_set(err, ENOENT, "cannot run fsck.erofs: not found (install "
				    "erofs-utils)");
	ssize_t n = pread(logfd, msg, sizeof(msg) - 1, 0);
	n = n < 0 ? 0 : n;
	msg[n] = '\0';
	/* fsck.erofs 1.5 exits 0 after some faults (a bad superblock
	 * checksum): what it says counts too.  Its first complaint names the
	 * fault ("<E> erofs: ..."). */
	char *why = strstr(msg, "<E> ");
	if (st == 0 && !why)
		return 0;
	why = why ? why + 4 : msg;
	why[strcspn(why, "\n")] = '\0';
	return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "cannot import '%s': not a sound "
			     "erofs image (fsck.erofs: %s)", img, *why ? why : "failed");
}
