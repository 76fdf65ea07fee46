/* be_fs.c - see be_fs.h. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "be_fs.h"
#include "be_io.h"
#include "util.h"

#define FS_MAX_DEPTH 256		/* directory levels a walk goes down */
#define FS_ENTRY_COST 96		/* bytes a list entry takes besides its strings */
#define FS_CHUNK (64 * 1024)		/* copy buffer */

/* ---- errors --------------------------------------------------------------- */

/* strerror() with a lowercase first letter, as our messages are. */
static const char *why(int e, char *buf, size_t len)
{
	snprintf(buf, len, "%s", strerror(e));
	if (buf[0] >= 'A' && buf[0] <= 'Z')
		buf[0] = (char)(buf[0] - 'A' + 'a');
	return buf;
}

/* "cannot WHAT 'PATH': cause"; e is an errno (either sign).  Escapes read
 * as permission, a non-empty or wrong-type target as invalid. */
static int fs_err(struct dsec_err *err, int e, const char *what, const char *path)
{
	enum dsec_code code;
	char b[128];

	e = e < 0 ? -e : e;
	switch (e) {
	case EXDEV:
		return dsec_err_setc(err, DSEC_E_PERMISSION, e,
				     "cannot %s '%s': path leaves the sandbox or crosses a mount",
				     what, path);
	case ELOOP:
		return dsec_err_setc(err, DSEC_E_PERMISSION, e,
				     "cannot %s '%s': path escapes the sandbox or goes through a symlink",
				     what, path);
	case ENOTEMPTY: case ENOTDIR: case EISDIR:
		code = DSEC_E_INVALID;
		break;
	case EROFS:
		code = DSEC_E_PERMISSION;
		break;
	default:
		code = dsec_code_from_errno(e);
		break;
	}
	return dsec_err_setc(err, code, e, "cannot %s '%s': %s", what, path, why(e, b, sizeof(b)));
}

/* ---- resolving -------------------------------------------------------------- */

/* Opens rel (clean, relative, "." for the root) from the root: symlinks on
 * the way resolve inside the sandbox. */
static int root_open(const struct be_fs_root *r, const char *rel, int flags)
{
	uint64_t res = r->in_root ? RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS
				  : RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;

	return be_openat2(r->fd, rel, flags, 0, res);
}

/* Opens one name (or a clean relative path) below dir: never through a
 * symlink, never into another mount (-EXDEV), never out of dir. */
static int below_open(int dir, const char *name, int flags, mode_t mode)
{
	return be_openat2(dir, name, flags, mode, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
			  RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
}

/* True when name in dir is a mount point (or on another mount). */
static bool is_mount(int dir, const char *name)
{
	int fd = below_open(dir, name, O_PATH | O_NOFOLLOW, 0);

	if (fd >= 0)
		close(fd);
	return fd == -EXDEV;
}

/* Cleans path lexically into *rel (be_clean_rel): above the top it stays
 * at the root (in_root) or is an escape.  With a prefix, absolute paths
 * must start with it. */
static int clean_path(const struct be_fs_root *r, const char *path, char **rel,
		      struct dsec_err *err)
{
	const char *s = path;

	if (!*path)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "empty path");
	if (path[0] == '/' && r->prefix) {
		size_t n = strlen(r->prefix);

		if (strncmp(path, r->prefix, n) || (path[n] && path[n] != '/'))
			return dsec_err_setc(err, DSEC_E_PERMISSION, EPERM,
					     "path '%s' is outside the sandbox's files (%s)", path,
					     r->prefix);
		s = path + n;
	}
	if (be_clean_rel(s, r->in_root, rel) < 0)
		return dsec_err_setc(err, DSEC_E_PERMISSION, EPERM,
				     "path '%s' escapes the sandbox", path);
	return 0;
}

/* Splits a clean rel into its parent (returned, "." at the top; caller
 * frees) and *name (points into rel; NULL when rel is the root). */
static char *split(char *rel, const char **name)
{
	char *slash = strrchr(rel, '/');

	if (!strcmp(rel, ".")) {
		*name = NULL;
		return xstrdup(".");
	}
	if (!slash) {
		*name = rel;
		return xstrdup(".");
	}
	*name = slash + 1;
	return xstrndup(rel, (size_t)(slash - rel));
}

/* Inside id -> host id. */
static uint32_t host_id(const struct be_fs_root *r, uint32_t id)
{
	return r->id_base ? r->id_base + id : id;
}

/* Host id -> inside id; ids outside the range show as 65534 (nobody). */
static uint32_t inside_id(const struct be_fs_root *r, uint32_t id)
{
	if (!r->id_base)
		return id;
	return id >= r->id_base && id - r->id_base < 65536 ? id - r->id_base : 65534;
}

static uid_t owner_uid(const struct be_fs_root *r, const struct dsec_file_req *q)
{
	return host_id(r, q->uid == DSEC_OWNER_DEFAULT ? r->uid : q->uid);
}

static gid_t owner_gid(const struct be_fs_root *r, const struct dsec_file_req *q)
{
	return host_id(r, q->gid == DSEC_OWNER_DEFAULT ? r->gid : q->gid);
}

/* Gives the directory name in dir (just made) its owner and mode,
 * through an fd so that a swapped-in symlink is never followed. */
static int dir_setup(int dir, const char *name, mode_t mode, uid_t uid, gid_t gid)
{
	_cleanup_close_ int fd = below_open(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);

	if (fd < 0)
		return fd;
	if (fchown(fd, uid, gid) < 0 || fchmod(fd, mode) < 0)
		return -errno;
	return 0;
}

/* Makes directory name in dir with its owner and mode; one that cannot
 * get them (an owner the caller may not give) is removed again, so a
 * refused request leaves nothing behind.  0 or -errno (-EEXIST: there). */
static int mkdir_owned(int dir, const char *name, mode_t mode, uid_t uid, gid_t gid)
{
	int rc;

	if (mkdirat(dir, name, 0700) < 0)
		return -errno;
	if ((rc = dir_setup(dir, name, mode, uid, gid)) < 0)
		unlinkat(dir, name, AT_REMOVEDIR);
	return rc;
}

/* Opens directory rel (from the root, symlinks resolving inside it) as
 * O_PATH, making the missing components with mode and owner. */
static int mkdir_p(const struct be_fs_root *r, const char *rel, mode_t mode, uid_t uid,
		   gid_t gid)
{
	_cleanup_free_ char *p = xstrdup(rel);
	int cur = root_open(r, ".", O_PATH | O_DIRECTORY);

	if (!strcmp(p, "."))
		return cur;
	for (char *s = p; cur >= 0; s++) {
		bool end = !*s;
		int next;

		if (*s != '/' && !end)
			continue;
		*s = '\0';
		next = root_open(r, p, O_PATH | O_DIRECTORY);
		if (next == -ENOENT) {
			const char *last = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;

			next = mkdir_owned(cur, last, mode, uid, gid);
			if (next == 0 || next == -EEXIST)
				next = root_open(r, p, O_PATH | O_DIRECTORY);
		}
		close(cur);
		cur = next;
		if (end)
			break;
		*s = '/';
	}
	return cur;
}

/* ---- stat and list ------------------------------------------------------------ */

static enum dsec_file_type ftype(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFDIR: return DSEC_FT_DIR;
	case S_IFLNK: return DSEC_FT_SYMLINK;
	case S_IFIFO: return DSEC_FT_FIFO;
	case S_IFSOCK: return DSEC_FT_SOCKET;
	case S_IFCHR: return DSEC_FT_CHAR;
	case S_IFBLK: return DSEC_FT_BLOCK;
	default: return DSEC_FT_FILE;
	}
}

/* Reads the target of symlink name in dir (caller frees), NULL on error. */
static char *read_link(int dir, const char *name, size_t size)
{
	size_t cap = size ? size + 1 : 256;

	for (;;) {
		char *t = xmalloc(cap);
		ssize_t n = readlinkat(dir, name, t, cap);

		if (n >= 0 && (size_t)n < cap) {
			t[n] = '\0';
			return t;
		}
		free(t);
		if (n < 0 || cap > 65536)
			return NULL;
		cap *= 2;
	}
}

static void info_fill(const struct be_fs_root *r, struct dsec_file_info *i, int dir,
		      const char *name, const struct stat *st)
{
	i->name = xstrdup(name);
	i->type = ftype(st->st_mode);
	i->mode = st->st_mode & 07777;
	i->size = (uint64_t)st->st_size;
	i->uid = inside_id(r, st->st_uid);
	i->gid = inside_id(r, st->st_gid);
	i->mtime = (double)st->st_mtim.tv_sec + st->st_mtim.tv_nsec / 1e9;
	if (S_ISLNK(st->st_mode))
		i->target = read_link(dir, name, (size_t)st->st_size);
}

static int do_stat(const struct be_fs_root *r, const struct dsec_file_req *q, char *rel,
		   struct dsec_file_res *res, struct dsec_err *err)
{
	const char *name;
	_cleanup_free_ char *parent = split(rel, &name);
	_cleanup_close_ int pfd = root_open(r, name ? parent : ".", O_PATH | O_DIRECTORY);
	struct stat st;

	if (pfd < 0)
		return fs_err(err, pfd, "stat", q->path);
	if (fstatat(pfd, name ? name : "", &st, name ? AT_SYMLINK_NOFOLLOW : AT_EMPTY_PATH) < 0)
		return fs_err(err, errno, "stat", q->path);
	info_fill(r, &res->info, pfd, name ? name : "/", &st);
	return 0;
}

static int info_cmp(const void *a, const void *b)
{
	return strcmp(((const struct dsec_file_info *)a)->name,
		      ((const struct dsec_file_info *)b)->name);
}

static int do_list(const struct be_fs_root *r, const struct dsec_file_req *q, char *rel,
		   struct dsec_file_res *res, struct dsec_err *err)
{
	int fd = root_open(r, rel, O_RDONLY | O_DIRECTORY | O_NONBLOCK);
	size_t cap = 0, bytes = 0;
	struct dirent *de;
	DIR *d;

	if (fd < 0)
		return fs_err(err, fd, "list", q->path);
	if (!(d = fdopendir(fd))) {
		int e = errno;

		close(fd);
		return fs_err(err, e, "list", q->path);
	}
	while ((de = readdir(d))) {
		struct dsec_file_info *i;
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;	/* gone meanwhile */
		if (res->nentries >= q->max_entries ||
		    bytes + strlen(de->d_name) + FS_ENTRY_COST > q->max_bytes) {
			res->truncated = true;
			break;
		}
		if (res->nentries == cap) {
			cap = cap ? cap * 2 : 64;
			res->entries = xrealloc(res->entries, cap * sizeof(*res->entries));
		}
		i = &res->entries[res->nentries++];
		memset(i, 0, sizeof(*i));
		info_fill(r, i, dirfd(d), de->d_name, &st);
		bytes += strlen(de->d_name) + FS_ENTRY_COST + (i->target ? strlen(i->target) : 0);
	}
	closedir(d);
	if (res->nentries)
		qsort(res->entries, res->nentries, sizeof(*res->entries), info_cmp);
	return 0;
}

/* ---- mkdir, write, remove ------------------------------------------------------ */

static int do_mkdir(const struct be_fs_root *r, const struct dsec_file_req *q, char *rel,
		    struct dsec_file_res *res, struct dsec_err *err)
{
	mode_t mode = (q->mode ? q->mode : 0755) & r->mode_mask;
	const char *name;
	_cleanup_free_ char *parent = split(rel, &name);
	_cleanup_close_ int pfd = -1;
	int rc;

	if (q->parents) {
		_cleanup_close_ int fd = mkdir_p(r, rel, mode, owner_uid(r, q), owner_gid(r, q));

		return fd < 0 ? fs_err(err, fd, "create directory", q->path) : 0;
	}
	if (!name)
		return fs_err(err, EEXIST, "create directory", q->path);
	if ((pfd = root_open(r, parent, O_PATH | O_DIRECTORY)) < 0)
		return fs_err(err, pfd, "create directory", q->path);
	if ((rc = mkdir_owned(pfd, name, mode, owner_uid(r, q), owner_gid(r, q))) < 0)
		return fs_err(err, rc, "create directory", q->path);
	return 0;
}

/* Opens a new file in dir under a temporary name, written into tmp (64
 * bytes), for tmp_commit to put in place.  The fd, or -errno. */
static int tmp_open(int dir, char *tmp)
{
	int fd;

	snprintf(tmp, 64, ".dsec-write.%d", (int)gettid());
	fd = below_open(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
	if (fd == -EEXIST && unlinkat(dir, tmp, 0) == 0)	/* left by a failed write */
		fd = below_open(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
	return fd;
}

/* Gives tmp (open as fd) in dir its owner and mode and renames it to name
 * (replacing a file or a symlink, never following one); removes it when
 * that fails.  0 or -errno. */
static int tmp_commit(int dir, const char *tmp, int fd, const char *name, mode_t mode, uid_t uid,
		      gid_t gid)
{
	int rc = 0;

	if (fchown(fd, uid, gid) < 0 || fchmod(fd, mode) < 0 || renameat(dir, tmp, dir, name) < 0)
		rc = -errno;
	if (rc < 0)
		unlinkat(dir, tmp, 0);
	return rc;
}

/* Writes len bytes of data as a new file name in dir through a temporary
 * name, then renames it into place. */
static int write_into(int dir, const char *name, const void *data, size_t len, mode_t mode,
		      uid_t uid, gid_t gid)
{
	char tmp[64];
	_cleanup_close_ int fd = tmp_open(dir, tmp);
	int rc;

	if (fd < 0)
		return fd;
	if ((rc = dsec_write_all(fd, data, len)) < 0) {
		unlinkat(dir, tmp, 0);
		return rc;
	}
	return tmp_commit(dir, tmp, fd, name, mode, uid, gid);
}

/* The directory a write or append of q puts its file in (made with its
 * parents when missing), and in *name the file's name in it; -errno (with
 * *err) when there is none or it is a mount point. */
static int file_parent(const struct be_fs_root *r, const struct dsec_file_req *q, char *rel,
		       const char *what, const char **name, struct dsec_err *err)
{
	_cleanup_free_ char *parent = split(rel, name);
	int pfd;

	if (!*name || q->path[strlen(q->path) - 1] == '/')
		return fs_err(err, EISDIR, what, q->path);
	if ((pfd = mkdir_p(r, parent, 0755, host_id(r, r->uid), host_id(r, r->gid))) < 0)
		return fs_err(err, pfd, what, q->path);
	if (is_mount(pfd, *name)) {
		close(pfd);
		return dsec_err_setc(err, DSEC_E_PERMISSION, EBUSY,
				     "cannot %s '%s': it is a mount point", what, q->path);
	}
	return pfd;
}

static int do_write(const struct be_fs_root *r, const struct dsec_file_req *q, char *rel,
		    struct dsec_file_res *res, struct dsec_err *err)
{
	const char *name;
	_cleanup_close_ int pfd = file_parent(r, q, rel, "write", &name, err);
	int rc;

	(void)res;
	if (pfd < 0)
		return pfd;
	rc = write_into(pfd, name, q->data, q->len, (q->mode ? q->mode : 0644) & r->mode_mask,
			owner_uid(r, q), owner_gid(r, q));
	return rc < 0 ? fs_err(err, rc, "write", q->path) : 0;
}

/* Adds q->data at the end of a regular file; a missing one is made as
 * do_write makes it.  A symlink is not followed (it is no regular file).
 * Data that cannot go in whole is taken out again: the file is cut back
 * to the length it had. */
static int do_append(const struct be_fs_root *r, const struct dsec_file_req *q, char *rel,
		     struct dsec_file_res *res, struct dsec_err *err)
{
	const char *name;
	_cleanup_close_ int pfd = file_parent(r, q, rel, "append to", &name, err), fd = -1;
	struct stat st;
	int rc;

	(void)res;
	if (pfd < 0)
		return pfd;
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT)
			return fs_err(err, errno, "append to", q->path);
		rc = write_into(pfd, name, q->data, q->len,
				(q->mode ? q->mode : 0644) & r->mode_mask, owner_uid(r, q),
				owner_gid(r, q));
		return rc < 0 ? fs_err(err, rc, "append to", q->path) : 0;
	}
	/* Checked before it is opened (a fifo or a device is not), and after. */
	if (S_ISDIR(st.st_mode))
		return fs_err(err, EISDIR, "append to", q->path);
	if (S_ISREG(st.st_mode))
		fd = below_open(pfd, name, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY,
				0);
	if (fd >= 0 && fstat(fd, &st) < 0)
		return fs_err(err, errno, "append to", q->path);
	if (!S_ISREG(st.st_mode) || fd == -ELOOP)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "cannot append to '%s': not a regular file", q->path);
	if (fd < 0)
		return fs_err(err, fd, "append to", q->path);
	if ((rc = dsec_write_all(fd, q->data, q->len)) < 0 && ftruncate(fd, st.st_size) < 0) {
		char b1[128], b2[128];
		int e = errno;

		return dsec_err_setc(err, dsec_code_from_errno(-rc), -rc,
				     "cannot append to '%s': %s; it keeps part of the data (%s)",
				     q->path, why(-rc, b1, sizeof(b1)), why(e, b2, sizeof(b2)));
	}
	return rc < 0 ? fs_err(err, rc, "append to", q->path) : 0;
}

/* PART: adds q->data to the staged file q->archive (beside q->path, made
 * by a WRITE), which must still be the regular file of q->staged bytes
 * the parts before left; with q->commit, renames it to q->path.  What a
 * command in the sandbox did to the staged file fails the part: the
 * target is never replaced by what the client did not send. */
static int do_part(const struct be_fs_root *r, const struct dsec_file_req *q, char *rel,
		   struct dsec_file_res *res, struct dsec_err *err)
{
	_cleanup_free_ char *arel = NULL, *parent = NULL, *aparent = NULL;
	_cleanup_close_ int pfd = -1, fd = -1;
	const char *name, *tmp;
	struct stat st;
	int rc;

	(void)res;
	if (!q->archive)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "cannot write '%s': no staged file given", q->path);
	if ((rc = clean_path(r, q->archive, &arel, err)) < 0)
		return rc;
	parent = split(rel, &name);
	aparent = split(arel, &tmp);
	if (!name || !tmp || strcmp(parent, aparent) || !strcmp(name, tmp))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "cannot write '%s': the staged file '%s' is not beside it",
				     q->path, q->archive);
	if ((pfd = root_open(r, parent, O_PATH | O_DIRECTORY)) < 0)
		return fs_err(err, pfd, "write", q->path);
	if ((fd = below_open(pfd, tmp, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0)) < 0 &&
	    fd != -ELOOP && fd != -EISDIR)
		return fd == -ENOENT ? dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT,
						     "cannot write '%s': its staged file is gone",
						     q->path)
				     : fs_err(err, fd, "write", q->path);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size != q->staged)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "cannot write '%s': its staged file was changed in the sandbox "
				     "(%lld bytes where the parts sent %llu)", q->path,
				     fd < 0 ? -1LL : (long long)st.st_size,
				     (unsigned long long)q->staged);
	if (q->len) {
		rc = lseek(fd, (off_t)q->staged, SEEK_SET) < 0 ? -errno
							      : dsec_write_all(fd, q->data, q->len);
		if (rc < 0) {
			/* Cut back to what the parts before sent; should that
			 * fail too, the next part finds the size changed. */
			if (ftruncate(fd, (off_t)q->staged) < 0)
				errno = 0;
			return fs_err(err, rc, "write", q->path);
		}
	}
	if (!q->commit)
		return 0;
	if (is_mount(pfd, name))
		return dsec_err_setc(err, DSEC_E_PERMISSION, EBUSY,
				     "cannot write '%s': it is a mount point", q->path);
	if (renameat(pfd, tmp, pfd, name) < 0)
		return fs_err(err, errno, "write", q->path);
	return 0;
}

/* Removes directory name of dir and everything below it.  Never follows
 * a symlink (a link is removed, not its target) and never enters another
 * mount: a mount point below fails the removal.  path is for messages. */
static int rm_tree(int dir, const char *name, struct dsec_buf *path, int depth,
		   uint64_t *count, struct dsec_err *err)
{
	size_t plen = path->len;
	int fd, rc = 0;
	DIR *d;

	if (depth > FS_MAX_DEPTH)
		return dsec_err_setc(err, DSEC_E_INVALID, ELOOP,
				     "cannot remove '%s': deeper than %d levels", path->data,
				     FS_MAX_DEPTH);
	fd = below_open(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK, 0);
	if (fd == -ENOTDIR || fd == -ELOOP) {	/* swapped for a file or a link */
		if (unlinkat(dir, name, 0) < 0)
			return fs_err(err, errno, "remove", path->data);
		++*count;
		return 0;
	}
	if (fd == -EXDEV)
		return dsec_err_setc(err, DSEC_E_PERMISSION, EBUSY,
				     "cannot remove '%s': it is a mount point", path->data);
	if (fd < 0)
		return fs_err(err, fd, "remove", path->data);
	if (!(d = fdopendir(fd))) {
		rc = fs_err(err, errno, "remove", path->data);
		close(fd);
		return rc;
	}
	/* Passes until empty: entries may be added meanwhile. */
	for (int pass = 0; pass < 3 && rc == 0; pass++) {
		struct dirent *de;

		rewinddir(d);
		while (rc == 0 && (de = readdir(d))) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			dsec_buf_addf(path, "/%s", de->d_name);
			if (is_mount(dirfd(d), de->d_name))
				rc = dsec_err_setc(err, DSEC_E_PERMISSION, EBUSY,
						   "cannot remove '%s': it is a mount point",
						   path->data);
			else if (de->d_type == DT_DIR || de->d_type == DT_UNKNOWN)
				rc = rm_tree(dirfd(d), de->d_name, path, depth + 1, count, err);
			else if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT)
				rc = fs_err(err, errno, "remove", path->data);
			else
				++*count;
			path->len = plen;
			path->data[plen] = '\0';
		}
		if (rc == 0 && unlinkat(dir, name, AT_REMOVEDIR) == 0) {
			++*count;
			break;
		}
		if (rc == 0 && (errno != ENOTEMPTY || pass == 2))
			rc = fs_err(err, errno, "remove", path->data);
	}
	closedir(d);
	return rc;
}

static int do_remove(const struct be_fs_root *r, const struct dsec_file_req *q, char *rel,
		     struct dsec_file_res *res, struct dsec_err *err)
{
	const char *name;
	_cleanup_free_ char *parent = split(rel, &name);
	_cleanup_close_ int pfd = -1;
	struct stat st;
	int rc;

	if (!name)
		return dsec_err_setc(err, DSEC_E_INVALID, EBUSY,
				     "cannot remove '%s': it is the top of the sandbox's files",
				     q->path);
	if ((pfd = root_open(r, parent, O_PATH | O_DIRECTORY)) < 0)
		return fs_err(err, pfd, "remove", q->path);
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return fs_err(err, errno, "remove", q->path);
	if (is_mount(pfd, name))
		return dsec_err_setc(err, DSEC_E_PERMISSION, EBUSY,
				     "cannot remove '%s': it is a mount point", q->path);
	if (S_ISDIR(st.st_mode) && q->recursive) {
		struct dsec_buf path;

		dsec_buf_init(&path);
		dsec_buf_addf(&path, "%s", q->path);
		rc = rm_tree(pfd, name, &path, 0, &res->count, err);
		dsec_buf_free(&path);
		return rc;
	}
	if (unlinkat(pfd, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
		return fs_err(err, errno, "remove", q->path);
	res->count = 1;
	return 0;
}

/* ---- upload ----------------------------------------------------------------- */

static const char *arch_why(struct archive *a, char *buf, size_t len)
{
	snprintf(buf, len, "%s", archive_error_string(a) ? archive_error_string(a)
							 : "malformed archive");
	if (buf[0] >= 'A' && buf[0] <= 'Z')
		buf[0] = (char)(buf[0] - 'A' + 'a');
	return buf;
}

/* An upload's archive: the request's data, or (UNPACK) the archive file,
 * read with pread from its start by each pass. */
struct arc_in {
	const struct dsec_file_req *q;	/* the request: data, len, format */
	int fd;				/* UNPACK: the archive file, else -1 */
	uint64_t size;			/* its length when it was opened */
	uint64_t off;			/* the next byte of it to read */
	char buf[FS_CHUNK];		/* what was read last */
};

static la_ssize_t in_read(struct archive *a, void *arg, const void **out)
{
	struct arc_in *in = arg;
	ssize_t n;

	do
		n = pread(in->fd, in->buf, sizeof(in->buf), (off_t)in->off);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		archive_set_error(a, errno, "cannot read the archive: %s", strerror(errno));
		return -1;
	}
	in->off += (uint64_t)n;
	*out = in->buf;
	return n;
}

/* Skips what a member's data takes (libarchive reads what is not skipped),
 * never past the length the file had. */
static la_int64_t in_skip(struct archive *a, void *arg, la_int64_t n)
{
	struct arc_in *in = arg;
	uint64_t left = in->off < in->size ? in->size - in->off : 0;

	(void)a;
	if (n < 0)
		return 0;
	if ((uint64_t)n > left)
		n = (la_int64_t)left;
	in->off += (uint64_t)n;
	return n;
}

/* A reader of in's archive from its start, or NULL with *err. */
static struct archive *reader(struct arc_in *in, struct dsec_err *err)
{
	struct archive *a = archive_read_new();
	char b[256];
	int ar;

	DSEC_ASSERT(a);
	archive_read_support_format_tar(a);
	if (in->q->format == DSEC_FMT_TAR_ZST)
		archive_read_support_filter_zstd(a);
	else
		archive_read_support_filter_none(a);
	in->off = 0;
	if (in->fd >= 0)
		ar = archive_read_open2(a, in, NULL, in_read, in_skip, NULL);
	else
		ar = archive_read_open_memory(a, in->q->data, in->q->len);
	if (ar == ARCHIVE_OK)
		return a;
	dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "cannot upload to '%s': %s", in->q->path,
		      arch_why(a, b, sizeof(b)));
	archive_read_free(a);
	return NULL;
}

/* Cleans an archive member name into *out (caller frees): relative, no
 * "..", "." for the top.  NULL when it leaves the target directory. */
static char *member_clean(const char *name)
{
	struct dsec_buf b;
	_cleanup_free_ char *dup = xstrdup(name);
	char *save = NULL;

	if (name[0] == '/')
		return NULL;
	dsec_buf_init(&b);
	for (char *c = strtok_r(dup, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (!strcmp(c, "."))
			continue;
		if (!strcmp(c, "..")) {
			dsec_buf_free(&b);
			return NULL;
		}
		dsec_buf_addf(&b, "%s%s", b.len ? "/" : "", c);
	}
	if (!b.len)
		dsec_buf_add(&b, ".", 1);
	return dsec_buf_detach(&b, NULL);
}

/* True when a relative symlink target, seen from member (clean), stays in
 * the target directory; absolute targets do not. */
static bool link_inside(const char *member, const char *target)
{
	_cleanup_free_ char *dup = xstrdup(target);
	char *save = NULL;
	long depth = 0;

	if (!*target || target[0] == '/')
		return false;
	for (const char *s = member; *s; s++)
		depth += *s == '/';
	for (char *c = strtok_r(dup, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (!strcmp(c, ".."))
			depth--;
		else if (strcmp(c, "."))
			depth++;
		if (depth < 0)
			return false;
	}
	return true;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A growable array of strings it owns. */
struct names {
	char **v;			/* the strings */
	size_t n, cap;			/* used, allocated */
};

static void names_add(struct names *s, char *x)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 32;
		s->v = xrealloc(s->v, s->cap * sizeof(*s->v));
	}
	s->v[s->n++] = x;
}

static void names_free(struct names *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
}

/* True when clean path p lies below one of the (sorted) symlink members:
 * one lookup per component, so a large archive stays cheap to check. */
static bool under_link(const struct names *links, const char *p)
{
	_cleanup_free_ char *d = xstrdup(p);

	for (char *s = strchr(d, '/'); s; s = strchr(s + 1, '/')) {
		const char *key = d;
		bool hit;

		*s = '\0';
		hit = bsearch(&key, links->v, links->n, sizeof(*links->v), name_cmp) != NULL;
		*s = '/';
		if (hit)
			return true;
	}
	return false;
}

/* Checks the header of member e: its name, cleaned into *p, stays in the
 * target directory, as does a hard link's target (cleaned into *t, else
 * NULL) and a symlink's, and it is a file, directory or link.  Both
 * passes check each member: the archive file of an UNPACK may change
 * between them.  *p and *t are the caller's, also on failure. */
static int member_check(const struct dsec_file_req *q, struct archive *a, int ar,
			struct archive_entry *e, char **p, char **t, struct dsec_err *err)
{
	const char *name = archive_entry_pathname(e), *hl = archive_entry_hardlink(e);
	const char *sl = archive_entry_symlink(e);
	mode_t type = archive_entry_filetype(e);
	char b[256];

	*p = *t = NULL;
	if (ar < ARCHIVE_WARN)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "cannot upload to '%s': %s",
				     q->path, arch_why(a, b, sizeof(b)));
	if (!name || !(*p = member_clean(name)))
		return dsec_err_setc(err, DSEC_E_PERMISSION, EPERM,
				     "cannot upload to '%s': member '%s' leaves the target directory",
				     q->path, name ? name : "");
	if (hl && !(*t = member_clean(hl)))
		return dsec_err_setc(err, DSEC_E_PERMISSION, EPERM,
				     "cannot upload to '%s': hard link '%s' points outside the target directory",
				     q->path, name);
	if (!hl && type == AE_IFLNK && (!sl || !link_inside(*p, sl)))
		return dsec_err_setc(err, DSEC_E_PERMISSION, EPERM,
				     "cannot upload to '%s': symlink '%s' points outside the target directory",
				     q->path, name);
	if (!hl && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "cannot upload to '%s': member '%s' is not a file, directory or link",
				     q->path, name);
	return 0;
}

/* First pass: every header is checked before anything is written, so an
 * archive with one bad member changes nothing.  Whatever the order, no
 * member (nor hard link target) may lie below a symlink member. */
static int upload_check(struct arc_in *in, struct dsec_err *err)
{
	const struct dsec_file_req *q = in->q;
	struct archive *a = reader(in, err);
	struct archive_entry *e;
	struct names links = { 0 }, paths = { 0 };
	int rc = 0, ar;

	if (!a)
		return -EINVAL;
	while (rc == 0 && (ar = archive_read_next_header(a, &e)) != ARCHIVE_EOF) {
		char *p, *t;

		rc = member_check(q, a, ar, e, &p, &t, err);
		if (p && !archive_entry_hardlink(e) && archive_entry_filetype(e) == AE_IFLNK)
			names_add(&links, xstrdup(p));
		if (p)
			names_add(&paths, p);
		if (t)
			names_add(&paths, t);
	}
	if (links.n)
		qsort(links.v, links.n, sizeof(*links.v), name_cmp);
	for (size_t i = 0; rc == 0 && links.n && i < paths.n; i++)
		if (under_link(&links, paths.v[i]))
			rc = dsec_err_setc(err, DSEC_E_PERMISSION, ELOOP,
					   "cannot upload to '%s': member '%s' goes through a symlink",
					   q->path, paths.v[i]);
	names_free(&links);
	names_free(&paths);
	archive_read_free(a);
	return rc;
}

/* Opens (making it, without following symlinks) the parent of member p
 * below dfd; *name points at p's last component. */
static int member_parent(int dfd, char *p, const char **name, mode_t mode, uid_t uid,
			 gid_t gid)
{
	char *slash = strrchr(p, '/');
	int cur;

	*name = slash ? slash + 1 : p;
	cur = below_open(dfd, ".", O_PATH | O_DIRECTORY, 0);
	if (!slash)
		return cur;
	*slash = '\0';
	for (char *c = p, *next; cur >= 0 && c; c = next) {
		int fd;

		if ((next = strchr(c, '/')))
			*next++ = '\0';
		fd = below_open(cur, c, O_PATH | O_DIRECTORY, 0);
		if (fd == -ENOENT) {
			fd = mkdir_owned(cur, c, mode, uid, gid);
			if (fd == 0 || fd == -EEXIST)
				fd = below_open(cur, c, O_PATH | O_DIRECTORY, 0);
		}
		if (next)
			next[-1] = '/';
		close(cur);
		cur = fd;
	}
	*slash = '/';
	return cur;
}

/* Removes what is at name unless it is a directory (a file, a link). */
static int clear_name(int dir, const char *name)
{
	struct stat st;

	if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (is_mount(dir, name))
		return -EXDEV;
	return unlinkat(dir, name, 0) < 0 ? -errno : 0;
}

/* Copies the current member's data into fd. */
static int copy_data(struct archive *a, int fd)
{
	char buf[FS_CHUNK];
	la_ssize_t n;
	int rc;

	while ((n = archive_read_data(a, buf, sizeof(buf))) > 0)
		if ((rc = dsec_write_all(fd, buf, (size_t)n)) < 0)
			return rc;
	return n < 0 ? -EIO : 0;
}

/* Extracts one member (checked by member_check: p its clean name, t its
 * hard link's clean target or NULL) below dfd. */
static int extract_one(const struct be_fs_root *r, const struct dsec_file_req *q,
		       struct archive *a, struct archive_entry *e, int dfd, char *p, char *t)
{
	mode_t type = archive_entry_filetype(e);
	mode_t mode = archive_entry_perm(e) & r->mode_mask;
	const char *hl = archive_entry_hardlink(e), *name;
	uid_t uid = owner_uid(r, q);
	gid_t gid = owner_gid(r, q);
	_cleanup_close_ int pfd = -1, fd = -1;
	int rc;

	if (!strcmp(p, "."))
		return 0;	/* the target directory itself */
	if ((pfd = member_parent(dfd, p, &name, 0755 & r->mode_mask, uid, gid)) < 0)
		return pfd;
	if (hl) {
		const char *tname;
		_cleanup_close_ int tfd = member_parent(dfd, t, &tname, 0755 & r->mode_mask, uid,
							gid);

		if (tfd < 0)
			return tfd;
		if ((rc = clear_name(pfd, name)) < 0)
			return rc;
		return linkat(tfd, tname, pfd, name, 0) < 0 ? -errno : 0;
	}
	if (type == AE_IFDIR) {
		struct stat st;

		if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode) &&
		    (rc = clear_name(pfd, name)) < 0)
			return rc;
		rc = mkdir_owned(pfd, name, mode, uid, gid);
		return rc == -EEXIST ? dir_setup(pfd, name, mode, uid, gid) : rc;
	}
	if ((rc = clear_name(pfd, name)) < 0)
		return rc;
	if (type == AE_IFLNK) {
		if (symlinkat(archive_entry_symlink(e), pfd, name) < 0)
			return -errno;
		return fchownat(pfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
	}
	if ((fd = below_open(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600)) < 0)
		return fd;
	if ((rc = copy_data(a, fd)) < 0)
		return rc;
	if (fchown(fd, uid, gid) < 0 || fchmod(fd, mode) < 0)
		return -errno;
	if (archive_entry_mtime_is_set(e)) {
		struct timespec ts[2] = {
			{ .tv_nsec = UTIME_OMIT },
			{ archive_entry_mtime(e), archive_entry_mtime_nsec(e) },
		};
		futimens(fd, ts);
	}
	return 0;
}

/* Opens the archive file of an UNPACK into in: a regular file, resolved
 * as any path is; with remove_archive its name is removed once it is open
 * (when it names that file, not a link to it). */
static int archive_open(const struct be_fs_root *r, const struct dsec_file_req *q,
			struct arc_in *in, struct dsec_err *err)
{
	_cleanup_free_ char *arel = NULL, *parent = NULL;
	_cleanup_close_ int fd = -1, pfd = -1;
	const char *name;
	struct stat st, st2;
	int rc;

	if (!q->archive)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "cannot upload to '%s': no archive given", q->path);
	if ((rc = clean_path(r, q->archive, &arel, err)) < 0)
		return rc;
	if ((fd = root_open(r, arel, O_RDONLY | O_NOCTTY | O_NONBLOCK)) < 0)
		return fs_err(err, fd, "read archive", q->archive);
	if (fstat(fd, &st) < 0)
		return fs_err(err, errno, "read archive", q->archive);
	if (!S_ISREG(st.st_mode))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "cannot read archive '%s': not a regular file", q->archive);
	parent = split(arel, &name);
	if (q->remove_archive && name &&
	    (pfd = root_open(r, parent, O_PATH | O_DIRECTORY)) >= 0 &&
	    fstatat(pfd, name, &st2, AT_SYMLINK_NOFOLLOW) == 0 && st2.st_dev == st.st_dev &&
	    st2.st_ino == st.st_ino && unlinkat(pfd, name, 0) < 0)
		return fs_err(err, errno, "remove archive", q->archive);
	in->fd = dsec_steal_fd(&fd);
	in->size = (uint64_t)st.st_size;
	return 0;
}

/* UPLOAD (the archive in q->data) and UNPACK (in the file q->archive). */
static int do_upload(const struct be_fs_root *r, const struct dsec_file_req *q, char *rel,
		     struct dsec_file_res *res, struct dsec_err *err)
{
	_cleanup_free_ struct arc_in *in = xcalloc(1, sizeof(*in));
	_cleanup_close_ int dfd = -1;
	struct archive *a;
	struct archive_entry *e;
	int rc, ar;

	in->q = q;
	in->fd = -1;
	if (q->op == DSEC_FILE_UNPACK && (rc = archive_open(r, q, in, err)) < 0)
		return rc;
	if ((rc = upload_check(in, err)) < 0)
		goto out;
	if ((dfd = mkdir_p(r, rel, 0755 & r->mode_mask, owner_uid(r, q), owner_gid(r, q))) < 0) {
		rc = fs_err(err, dfd, "upload to", q->path);
		goto out;
	}
	if (!(a = reader(in, err))) {
		rc = -EINVAL;
		goto out;
	}
	while (rc == 0 && (ar = archive_read_next_header(a, &e)) != ARCHIVE_EOF) {
		_cleanup_free_ char *p = NULL, *t = NULL;

		if ((rc = member_check(q, a, ar, e, &p, &t, err)) < 0)
			break;
		if ((rc = extract_one(r, q, a, e, dfd, p, t)) < 0) {
			_cleanup_free_ char *what = xasprintf("extract '%s' into",
							      archive_entry_pathname(e));
			rc = fs_err(err, rc, what, q->path);
			break;
		}
		res->count++;
	}
	archive_read_free(a);
out:
	if (in->fd >= 0)
		close(in->fd);
	return rc;
}

/* ---- download ----------------------------------------------------------------- */

/* Where the archive goes: a buffer that refuses to grow past max
 * (DOWNLOAD), or the archive file (PACK). */
struct sink {
	struct dsec_buf *out;		/* DOWNLOAD: the bytes, else NULL */
	int fd;				/* PACK: the archive file */
	size_t max;			/* DOWNLOAD: cap */
	uint64_t len;			/* bytes written */
	bool over;			/* the cap was hit */
	int werr;			/* PACK: errno of a write that failed */
};

static la_ssize_t sink_write(struct archive *a, void *arg, const void *buf, size_t n)
{
	struct sink *s = arg;
	int rc;

	if (s->out && s->out->len + n > s->max) {
		s->over = true;
		archive_set_error(a, EFBIG, "archive too large");
		return -1;
	}
	if (s->out) {
		dsec_buf_add(s->out, buf, n);
	} else if ((rc = dsec_write_all(s->fd, buf, n)) < 0) {
		s->werr = -rc;
		archive_set_error(a, -rc, "cannot write the archive");
		return -1;
	}
	s->len += n;
	return (la_ssize_t)n;
}

/* A tree being packed. */
struct pack {
	struct archive *a;		/* the archive written */
	const struct be_fs_root *r;	/* the sandbox's files */
	uint64_t *count;		/* members packed */
	bool skip;			/* PACK: leave out the archive file itself */
	dev_t skip_dev;			/* its device */
	ino_t skip_ino;			/* and inode */
};

/* Writes one header for name (relative member name) described by st. */
static int put_header(struct archive *a, const struct be_fs_root *r, const char *name,
		      const struct stat *st, const char *target)
{
	struct archive_entry *e = archive_entry_new();
	int ar;

	DSEC_ASSERT(e);
	archive_entry_set_pathname(e, name);
	archive_entry_copy_stat(e, st);
	archive_entry_set_uid(e, inside_id(r, st->st_uid));	/* ids as seen inside */
	archive_entry_set_gid(e, inside_id(r, st->st_gid));
	if (!S_ISREG(st->st_mode))
		archive_entry_set_size(e, 0);
	if (target)
		archive_entry_set_symlink(e, target);
	ar = archive_write_header(a, e);
	archive_entry_free(e);
	return ar < ARCHIVE_WARN ? -EIO : 0;
}

/* Writes the data of regular file fd, exactly size bytes (libarchive pads
 * a file that shrank meanwhile). */
static int put_data(struct archive *a, int fd, uint64_t size)
{
	char buf[FS_CHUNK];
	uint64_t done = 0;

	while (done < size) {
		size_t want = size - done < sizeof(buf) ? (size_t)(size - done) : sizeof(buf);
		ssize_t n = read(fd, buf, want);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		if (archive_write_data(a, buf, (size_t)n) < 0)
			return -EIO;
		done += (uint64_t)n;
	}
	return 0;
}

static int put_children(struct pack *k, int fd, struct dsec_buf *m, int depth);

/* Adds name in dir as member m and, for a directory, what is below it. */
static int put_tree(struct pack *k, int dir, const char *name, struct dsec_buf *m, int depth)
{
	struct archive *a = k->a;
	const struct be_fs_root *r = k->r;
	_cleanup_close_ int fd = -1;
	struct stat st;
	int rc;

	if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (k->skip && st.st_dev == k->skip_dev && st.st_ino == k->skip_ino)
		return 0;	/* the archive being written */
	if (S_ISLNK(st.st_mode)) {
		_cleanup_free_ char *t = read_link(dir, name, (size_t)st.st_size);

		++*k->count;
		return t ? put_header(a, r, m->data, &st, t) : 0;
	}
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
		return 0;	/* sockets, fifos and devices are left out */
	fd = below_open(dir, name, (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0) | O_RDONLY |
			O_NOFOLLOW | O_NONBLOCK, 0);
	if (fd == -ENOENT || fd == -ENOTDIR || fd == -ELOOP)
		return 0;	/* changed meanwhile */
	if (fd == -EXDEV && S_ISDIR(st.st_mode)) {
		++*k->count;	/* a mount point: the directory, not what is mounted */
		return put_header(a, r, m->data, &st, NULL);
	}
	if (fd == -EXDEV)
		return 0;
	if (fd < 0)
		return fd;
	mode_t type = st.st_mode & S_IFMT;
	if (fstat(fd, &st) < 0)
		return -errno;
	if ((st.st_mode & S_IFMT) != type)
		return 0;	/* swapped meanwhile */
	++*k->count;
	if ((rc = put_header(a, r, m->data, &st, NULL)) < 0)
		return rc;
	if (S_ISREG(st.st_mode))
		return put_data(a, fd, (uint64_t)st.st_size);
	if (depth >= FS_MAX_DEPTH)
		return -ELOOP;
	return put_children(k, dsec_steal_fd(&fd), m, depth + 1);
}

/* Adds what is in directory fd (taken over) below member prefix m, sorted
 * so that the same tree gives the same archive. */
static int put_children(struct pack *k, int fd, struct dsec_buf *m, int depth)
{
	DIR *d = fdopendir(fd);
	struct names names = { 0 };
	size_t mlen = m->len;
	struct dirent *de;
	int rc = 0;

	if (!d) {
		rc = -errno;
		close(fd);
		return rc;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			names_add(&names, xstrdup(de->d_name));
	if (names.n)
		qsort(names.v, names.n, sizeof(*names.v), name_cmp);
	for (size_t i = 0; rc == 0 && i < names.n; i++) {
		dsec_buf_addf(m, "%s%s", mlen ? "/" : "", names.v[i]);
		rc = put_tree(k, dirfd(d), names.v[i], m, depth);
		m->len = mlen;
		m->data[mlen] = '\0';
	}
	names_free(&names);
	closedir(d);
	return rc;
}

/* The archive file of a PACK: a new file under a temporary name (into
 * tmp, 64 bytes) in the directory q->archive names (made when missing),
 * whose fd *dir gets, *name pointing at the file's name in *arel (the
 * caller frees it).  The new file's fd, or -errno with *err. */
static int pack_open(const struct be_fs_root *r, const struct dsec_file_req *q, char **arel,
		     int *dir, const char **name, char *tmp, struct dsec_err *err)
{
	struct dsec_file_req aq = { .path = q->archive };
	int rc, fd;

	if (!q->archive)
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "cannot download '%s': no archive given", q->path);
	if ((rc = clean_path(r, q->archive, arel, err)) < 0)
		return rc;
	if ((*dir = file_parent(r, &aq, *arel, "write archive", name, err)) < 0)
		return *dir;
	if ((fd = tmp_open(*dir, tmp)) < 0)
		return fs_err(err, fd, "write archive", q->archive);
	return fd;
}

/* DOWNLOAD (the archive into res->data) and PACK (into the file
 * q->archive, which the tree then leaves out). */
static int do_download(const struct be_fs_root *r, const struct dsec_file_req *q, char *rel,
		       struct dsec_file_res *res, struct dsec_err *err)
{
	const char *name, *aname = NULL;
	_cleanup_close_ int fd = root_open(r, rel, O_PATH), apfd = -1, afd = -1;
	_cleanup_free_ char *arel = NULL;
	struct sink s = { .out = &res->data, .fd = -1, .max = q->max_bytes };
	struct pack k = { .r = r, .count = &res->count };
	struct archive *a;
	struct dsec_buf m;
	struct stat st, st2;
	struct statfs sfs;
	char b[256], tmp[64];
	int rc = 0, dfd;

	free(split(rel, &name));	/* only the name, which points into rel */
	if (fd < 0 || fstat(fd, &st) < 0)
		return fs_err(err, fd < 0 ? fd : -errno, "download", q->path);
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "cannot download '%s': not a file or directory", q->path);
	/* The kernel's files are no tree to archive (and some read with effects). */
	if (fstatfs(fd, &sfs) == 0 && (sfs.f_type == PROC_SUPER_MAGIC || sfs.f_type == SYSFS_MAGIC))
		return dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
				     "cannot download '%s': it is in a kernel file system (/proc, /sys)",
				     q->path);
	if (q->op == DSEC_FILE_PACK) {
		struct stat ast;

		if ((afd = pack_open(r, q, &arel, &apfd, &aname, tmp, err)) < 0)
			return afd;
		if (fstat(afd, &ast) < 0) {
			unlinkat(apfd, tmp, 0);
			return fs_err(err, errno, "write archive", q->archive);
		}
		s.out = NULL;
		s.fd = afd;
		k.skip = true;
		k.skip_dev = ast.st_dev;
		k.skip_ino = ast.st_ino;
	}
	/* Now for reading: the same inode, or it changed under us. */
	dfd = root_open(r, rel, O_RDONLY | O_NONBLOCK | (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
	if (dfd < 0 || fstat(dfd, &st2) < 0 || st2.st_ino != st.st_ino || st2.st_dev != st.st_dev) {
		if (dfd >= 0)
			close(dfd);
		rc = fs_err(err, dfd < 0 ? dfd : ESTALE, "download", q->path);
		goto out;
	}
	k.a = a = archive_write_new();
	DSEC_ASSERT(a);
	archive_write_set_format_pax_restricted(a);
	if (q->format == DSEC_FMT_TAR_ZST)
		archive_write_add_filter_zstd(a);
	archive_write_set_bytes_in_last_block(a, 1);
	if (archive_write_open(a, &s, NULL, sink_write, NULL) != ARCHIVE_OK) {
		rc = dsec_err_setc(err, DSEC_E_BACKEND, EIO, "cannot download '%s': %s", q->path,
				   arch_why(a, b, sizeof(b)));
		close(dfd);
		archive_write_free(a);
		goto out;
	}
	/* A directory is archived as its contents, a file by its name. */
	dsec_buf_init(&m);
	if (S_ISDIR(st.st_mode)) {
		dsec_buf_add(&m, "", 0);
		rc = put_children(&k, dfd, &m, 0);
	} else {
		dsec_buf_addf(&m, "%s", name);
		res->count = 1;
		if ((rc = put_header(a, r, m.data, &st2, NULL)) == 0)
			rc = put_data(a, dfd, (uint64_t)st2.st_size);
		close(dfd);
	}
	dsec_buf_free(&m);
	if (rc == 0 && archive_write_close(a) != ARCHIVE_OK)
		rc = -EIO;
	if (s.over)
		rc = dsec_err_setc(err, DSEC_E_TOO_LARGE, EFBIG,
				   "cannot download '%s': the archive is over the %zu bytes a reply can carry",
				   q->path, s.max);
	else if (s.werr)
		rc = fs_err(err, s.werr, "write archive", q->archive);
	else if (rc == -EIO)
		rc = dsec_err_setc(err, DSEC_E_BACKEND, EIO, "cannot download '%s': %s", q->path,
				   arch_why(a, b, sizeof(b)));
	else if (rc < 0)
		rc = fs_err(err, rc, "download", q->path);
	archive_write_free(a);
	if (rc == 0 && afd >= 0) {
		if ((rc = tmp_commit(apfd, tmp, afd, aname, 0600, host_id(r, r->uid),
				     host_id(r, r->gid))) < 0)
			return fs_err(err, rc, "write archive", q->archive);
		res->size = s.len;
		return 0;
	}
out:
	if (rc < 0 && afd >= 0)
		unlinkat(apfd, tmp, 0);
	if (rc < 0)
		dsec_buf_free(&res->data);
	return rc;
}

/* ---- entry ------------------------------------------------------------------ */

typedef int (*fs_fn)(const struct be_fs_root *r, const struct dsec_file_req *q, char *rel,
		     struct dsec_file_res *res, struct dsec_err *err);

static const fs_fn fs_ops[] = {
	[DSEC_FILE_WRITE] = do_write,
	[DSEC_FILE_STAT] = do_stat,
	[DSEC_FILE_LIST] = do_list,
	[DSEC_FILE_MKDIR] = do_mkdir,
	[DSEC_FILE_REMOVE] = do_remove,
	[DSEC_FILE_UPLOAD] = do_upload,
	[DSEC_FILE_DOWNLOAD] = do_download,
	[DSEC_FILE_APPEND] = do_append,
	[DSEC_FILE_UNPACK] = do_upload,
	[DSEC_FILE_PACK] = do_download,
	[DSEC_FILE_PART] = do_part,
};

int be_fs_run(const struct be_fs_root *root, const struct dsec_file_req *req,
	      struct dsec_file_res *res, struct dsec_err *err)
{
	_cleanup_free_ char *rel = NULL;
	int rc;

	if ((unsigned)req->op >= DSEC_ARRAY_LEN(fs_ops) || !fs_ops[req->op])
		return dsec_err_setc(err, DSEC_E_UNSUPPORTED, ENOTSUP,
				     "file request %d is not known to this backend", (int)req->op);
	if ((rc = clean_path(root, req->path, &rel, err)) < 0)
		return rc;
	return fs_ops[req->op](root, req, rel, res, err);
}

int be_fs_read(const struct be_fs_root *root, const char *path, uint64_t offset, uint64_t len,
	       struct dsec_buf *out, struct dsec_err *err)
{
	_cleanup_free_ char *rel = NULL;
	_cleanup_close_ int fd = -1;
	int rc;

	if ((rc = clean_path(root, path, &rel, err)) < 0)
		return rc;
	if ((fd = root_open(root, rel, O_RDONLY | O_NOCTTY | O_NONBLOCK)) < 0)
		return fs_err(err, fd, "read", path);
	return be_read_file(fd, path, offset, len, out, err);
}

int be_fs_write(const struct be_fs_root *root, const char *path, const void *data, size_t len,
		uint32_t mode, struct dsec_err *err)
{
	struct dsec_file_req q = { .op = DSEC_FILE_WRITE, .path = path, .data = data, .len = len,
				   .mode = mode, .uid = DSEC_OWNER_DEFAULT, .gid = DSEC_OWNER_DEFAULT };
	struct dsec_file_res res;

	memset(&res, 0, sizeof(res));	/* a write fills nothing in it */
	return be_fs_run(root, &q, &res, err);
}
