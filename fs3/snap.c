/* snap.c - pack_diff: copying a sandbox's overlay upper dir to a layer tree
 * with its ids shifted back (see fs3_diff_copy in fs3.h).
 *
 * Why a copy and not mkfs.erofs on the upper dir itself: erofs-utils 1.5
 * can only force every id to one value (--force-uid), not shift a range,
 * and a copy from the sandbox's tmpfs to the store's disk is quick, so the
 * backend holds the sandbox frozen only for the copy; mkfs.erofs and the
 * chunking then read the copy while the sandbox runs again.
 *
 * The walk goes by directory fds and *at() calls with AT_SYMLINK_NOFOLLOW /
 * O_NOFOLLOW, so nothing the sandbox made (a symlink anywhere) leads it
 * outside the upper dir; xattrs of entries that cannot be opened (symlinks,
 * devices) are read through /proc/self/fd/DIRFD/NAME, which does not follow
 * NAME.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fs3.h"
#include "image.h"
#include "store.h"
#include "util.h"

#define NOBODY 65534u
#define SNAP_XATTR_MAX 65536	/* bytes of an xattr list or value (the kernel's cap) */

/* A file with more than one link, copied once. */
struct hlink {
	ino_t ino;		/* its inode in the upper dir */
	char *path;		/* where its first copy is, relative to dst */
};

struct copy {
	uint32_t base;		/* id_base */
	uint32_t count;		/* id_count, 0 = no shift */
	bool userxattr;		/* FS3_DIFF_USERXATTR */
	bool merge;		/* FS3_DIFF_MERGE */
	bool below;		/* FS3_DIFF_BELOW */
	int dstroot;		/* fd of dst */
	dev_t dev;		/* the upper dir's file system */
	struct hlink *links;	/* files with several links seen so far */
	size_t nlinks, caplinks; /* used, allocated */
	struct fs3_diff_stats *st; /* counts */
	struct dsec_err *err;	/* why it failed */
	const char *dst;	/* the copy's top, for messages */
	uint64_t limit;		/* bytes of data it may take, 0 = no limit */
	bool plain;		/* copy_file_range cannot: read and write */
	char buf[1 << 16];	/* data when copy_file_range cannot */
	char xlist[SNAP_XATTR_MAX]; /* an entry's xattr names */
	char xval[SNAP_XATTR_MAX]; /* one xattr's value */
};

static uint32_t shift(const struct copy *c, uint32_t id)
{
	if (!c->count)
		return id;
	return id - c->base < c->count ? id - c->base : NOBODY;
}

/* "/proc/self/fd/DFD/NAME": NAME itself is not followed. */
static void fd_path(char *p, size_t len, int dfd, const char *name)
{
	snprintf(p, len, "/proc/self/fd/%d/%s", dfd, name);
}

/* POSIX ACL xattr: 4-byte header, then {u16 tag, u16 perm, u32 id}. */
static void shift_acl(const struct copy *c, char *v, ssize_t n)
{
	for (ssize_t off = 4; off + 8 <= n; off += 8) {
		uint16_t tag;
		uint32_t id;

		memcpy(&tag, v + off, 2);
		if (tag != 0x02 && tag != 0x08)	/* ACL_USER, ACL_GROUP */
			continue;
		memcpy(&id, v + off + 4, 4);
		id = shift(c, id);
		memcpy(v + off + 4, &id, 4);
	}
}

/* A v3 file capability names the root it belongs to: the sandbox's root
 * becomes a plain v2 capability, which any sandbox's root then owns. */
static ssize_t shift_cap(const struct copy *c, char *v, ssize_t n)
{
	uint32_t magic, rootid;

	if (!c->count || n != 24)
		return n;
	memcpy(&magic, v, 4);
	memcpy(&rootid, v + 20, 4);
	if ((magic & 0xff000000u) != 0x03000000u || rootid != c->base)
		return n;
	magic = 0x02000000u | (magic & 0x1u);
	memcpy(v, &magic, 4);
	return 20;
}

/* Which xattrs go to the layer.  overlayfs' own (prefix "trusted.overlay."
 * or, mounted with userxattr, "user.overlay.") are dropped but for the
 * opaque mark of the prefix the sandbox's overlay uses (the other one the
 * sandbox could have set itself): *opaque says so. */
static bool keep_xattr(const struct copy *c, const char *name, bool *opaque)
{
	const char *mine = c->userxattr ? "user.overlay." : "trusted.overlay.";

	*opaque = false;
	if (!strncmp(name, "trusted.overlay.", 16) || !strncmp(name, "user.overlay.", 13)) {
		*opaque = !strncmp(name, mine, strlen(mine)) && !strcmp(name + strlen(mine), "opaque");
		return *opaque;
	}
	return !strncmp(name, "user.", 5) || !strncmp(name, "security.", 9) ||
	       !strncmp(name, "system.posix_acl_", 17) || !strncmp(name, "trusted.", 8);
}

static int copy_xattrs(struct copy *c, const char *src, const char *dst, const char *rel)
{
	char *list = c->xlist, *val = c->xval;
	ssize_t n = llistxattr(src, list, SNAP_XATTR_MAX);

	if (n < 0)
		return errno == ENOTSUP ? 0 : dsec_err_set(c->err, errno,
				"cannot list the xattrs of '%s': %s", rel, strerror(errno));
	for (char *k = list; k < list + n; k += strlen(k) + 1) {
		bool opaque = false;
		ssize_t v;

		if (!keep_xattr(c, k, &opaque))
			continue;
		if ((v = lgetxattr(src, k, val, SNAP_XATTR_MAX)) < 0) {
			if (errno == ENODATA)
				continue;
			return dsec_err_set(c->err, errno, "cannot read xattr '%s' of '%s': %s", k,
					    rel, strerror(errno));
		}
		if (opaque) {
			/* Both forms: overlays with and without userxattr read it. */
			if (lsetxattr(dst, "trusted.overlay.opaque", val, (size_t)v, 0) < 0 ||
			    lsetxattr(dst, "user.overlay.opaque", val, (size_t)v, 0) < 0)
				return dsec_err_set(c->err, errno, "cannot mark '%s' opaque: %s", rel,
						    strerror(errno));
			if (v == 1 && val[0] == 'y')
				c->st->opaque++;
			continue;
		}
		if (!strncmp(k, "system.posix_acl_", 17))
			shift_acl(c, val, v);
		else if (!strcmp(k, "security.capability"))
			v = shift_cap(c, val, v);
		if (lsetxattr(dst, k, val, (size_t)v, 0) < 0)
			return dsec_err_set(c->err, errno, "cannot set xattr '%s' on '%s': %s", k, rel,
					    strerror(errno));
	}
	return 0;
}

/* Owner, mode, xattrs, times of dst/NAME (in dfd) from st / src. */
static int copy_meta(struct copy *c, int sfd, int dfd, const char *name, const struct stat *st,
		     const char *rel)
{
	char sp[64 + NAME_MAX], dp[64 + NAME_MAX];
	struct timespec ts[2] = { st->st_atim, st->st_mtim };
	int r;

	fd_path(sp, sizeof(sp), sfd, name);
	fd_path(dp, sizeof(dp), dfd, name);
	if (fchownat(dfd, name, shift(c, st->st_uid), shift(c, st->st_gid),
		     AT_SYMLINK_NOFOLLOW) < 0)
		return dsec_err_set(c->err, errno, "cannot chown '%s': %s", rel, strerror(errno));
	/* After chown, which clears set-id bits. */
	if (!S_ISLNK(st->st_mode) && fchmodat(dfd, name, st->st_mode & 07777, 0) < 0)
		return dsec_err_set(c->err, errno, "cannot chmod '%s': %s", rel, strerror(errno));
	if ((r = copy_xattrs(c, sp, dp, rel)) < 0)
		return r;
	if (utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return dsec_err_set(c->err, errno, "cannot set the times of '%s': %s", rel,
				    strerror(errno));
	return 0;
}

/* Is the directory at path (an fd_path) marked opaque (either form)? */
static bool is_opaque(const char *path)
{
	char v[2];

	return (lgetxattr(path, "trusted.overlay.opaque", v, sizeof(v)) == 1 && v[0] == 'y') ||
	       (lgetxattr(path, "user.overlay.opaque", v, sizeof(v)) == 1 && v[0] == 'y');
}

/* Merge: removes every xattr of dst but its opaque marks, so that upper's
 * replace them as overlayfs shows an upper directory's own. */
static int clear_xattrs(struct copy *c, const char *dst, const char *rel)
{
	char *list = c->xlist;
	ssize_t n = llistxattr(dst, list, SNAP_XATTR_MAX);

	if (n < 0)
		return errno == ENOTSUP ? 0 : dsec_err_set(c->err, errno,
				"cannot list the xattrs of '%s': %s", rel, strerror(errno));
	for (char *k = list; k < list + n; k += strlen(k) + 1)
		if (strcmp(k, "trusted.overlay.opaque") && strcmp(k, "user.overlay.opaque") &&
		    lremovexattr(dst, k) < 0 && errno != ENODATA)
			return dsec_err_set(c->err, errno, "cannot remove xattr '%s' of '%s': %s",
					    k, rel, strerror(errno));
	return 0;
}

/* Merge: what upper's entry does to dst's of the same name.  Returns 1
 * when it is done (a whiteout dropped), 0 to copy it over (*opaque: mark
 * the new directory opaque), *into: merge into dst's directory. */
static int merge_entry(struct copy *c, int sfd, int dfd, const char *name, const struct stat *st,
		       const char *rel, bool *into, bool *opaque)
{
	char sp[64 + NAME_MAX], dp[64 + NAME_MAX];
	struct stat dt;
	int r;

	*into = *opaque = false;
	if (fstatat(dfd, name, &dt, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT)
			return dsec_err_set(c->err, errno, "cannot stat '%s': %s", rel,
					    strerror(errno));
		return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0) && !c->below;
	}
	fd_path(sp, sizeof(sp), sfd, name);
	fd_path(dp, sizeof(dp), dfd, name);
	if (S_ISDIR(st->st_mode) && S_ISDIR(dt.st_mode) && !is_opaque(sp)) {
		*into = true;
		return clear_xattrs(c, dp, rel);
	}
	/* dst's non-directory hid what lies below: so must the new one. */
	*opaque = S_ISDIR(st->st_mode) && !S_ISDIR(dt.st_mode) && c->below;
	if ((r = dsec_rm_rf(dp)) < 0)
		return dsec_err_set(c->err, -r, "cannot remove '%s': %s", rel, strerror(-r));
	return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0) && !c->below;
}

/* Copies [off, end) of in to the same place of out: copy_file_range first
 * (a reflink or an in-kernel copy where the file systems allow), else
 * read and write, where a block of zeros is left a hole. */
static int copy_range(struct copy *c, int in, int out, off_t off, off_t end, const char *rel)
{
	while (off < end) {
		size_t want = (size_t)(end - off);
		ssize_t n;

		if (!c->plain) {
			off_t oi = off, oo = off;
			n = copy_file_range(in, &oi, out, &oo, want > (1u << 30) ? 1u << 30 : want, 0);
			if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL ||
				      errno == EOPNOTSUPP)) {
				c->plain = true;
				continue;
			}
		} else {
			n = pread(in, c->buf, want > sizeof(c->buf) ? sizeof(c->buf) : want, off);
			if (n > 0 && !fs3_is_zero(c->buf, (size_t)n) &&
			    pwrite(out, c->buf, (size_t)n, off) != n)
				n = -1;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return dsec_err_set(c->err, errno, "cannot copy '%s' to '%s': %s", rel, c->dst,
					    strerror(errno));
		if (n == 0)	/* it shrank */
			return 0;
		off += n;
	}
	return 0;
}

/* Copies a file's data keeping its holes (SEEK_DATA/SEEK_HOLE), then sets
 * its size; the data counts against c->limit. */
static int copy_data(struct copy *c, int in, int out, off_t size, const char *rel)
{
	off_t pos = 0;
	int r;

	while (pos < size) {
		off_t d = lseek(in, pos, SEEK_DATA), h;

		if (d < 0 && errno == ENXIO)	/* nothing but a hole up to the end */
			break;
		if (d < 0)
			return dsec_err_set(c->err, errno, "cannot read '%s': %s", rel, strerror(errno));
		if (d >= size)
			break;
		if ((h = lseek(in, d, SEEK_HOLE)) < 0 || h > size)
			h = size;
		c->st->bytes += (uint64_t)(h - d);
		if (c->limit && c->st->bytes > c->limit)
			return dsec_err_setc(c->err, DSEC_E_CAPACITY, EDQUOT, "cannot copy '%s': the "
					     "files' data is over the %llu MiB the sandbox's disk "
					     "holds", rel, (unsigned long long)(c->limit >> 20));
		if ((r = copy_range(c, in, out, d, h, rel)) < 0)
			return r;
		pos = h;
	}
	if (ftruncate(out, size) < 0)
		return dsec_err_set(c->err, errno, "cannot copy '%s' to '%s': %s", rel, c->dst,
				    strerror(errno));
	return 0;
}

static int copy_file(struct copy *c, int sfd, int dfd, const char *name, const struct stat *st,
		     const char *rel)
{
	_cleanup_close_ int in = -1;
	_cleanup_close_ int out = -1;
	int r;

	if (st->st_nlink > 1) {
		for (size_t i = 0; i < c->nlinks; i++)
			if (c->links[i].ino == st->st_ino) {
				if (linkat(c->dstroot, c->links[i].path, dfd, name, 0) < 0)
					return dsec_err_set(c->err, errno, "cannot link '%s': %s", rel,
							    strerror(errno));
				return 0;
			}
	}
	in = openat(sfd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (in < 0)
		return dsec_err_set(c->err, errno, "cannot open '%s': %s", rel, strerror(errno));
	c->st->size += (uint64_t)st->st_size;
	if (c->limit && c->st->size > c->limit * FS3_DIFF_SIZE_RATIO)
		return dsec_err_setc(c->err, DSEC_E_CAPACITY, EFBIG, "cannot copy '%s': the files' "
				     "sizes add up to more than %llu MiB (%d times the sandbox's "
				     "disk)", rel, (unsigned long long)(c->limit * FS3_DIFF_SIZE_RATIO >> 20),
				     FS3_DIFF_SIZE_RATIO);
	out = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return dsec_err_set(c->err, errno, "cannot create '%s': %s", rel, strerror(errno));
	if ((r = copy_data(c, in, out, st->st_size, rel)) < 0)
		return r;
	c->st->files++;
	if (st->st_nlink > 1) {
		if (c->nlinks == c->caplinks) {
			c->caplinks = c->caplinks ? 2 * c->caplinks : 64;
			c->links = xrealloc(c->links, c->caplinks * sizeof(*c->links));
		}
		c->links[c->nlinks].ino = st->st_ino;
		c->links[c->nlinks++].path = xstrdup(rel + 1);	/* without the leading '/' */
	}
	return copy_meta(c, sfd, dfd, name, st, rel);
}

static int copy_dir(struct copy *c, int sfd, int dfd, const char *rel, int depth);

static int copy_entry(struct copy *c, int sfd, int dfd, const char *name, const char *rel,
		      int depth)
{
	bool into = false, opaque = false;
	struct stat st;
	int r;

	if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return dsec_err_set(c->err, errno, "cannot stat '%s': %s", rel, strerror(errno));
	if (c->merge && (r = merge_entry(c, sfd, dfd, name, &st, rel, &into, &opaque)) != 0)
		return r < 0 ? r : 0;
	switch (st.st_mode & S_IFMT) {
	case S_IFDIR: {
		_cleanup_close_ int s = -1;
		_cleanup_close_ int d = -1;

		if (st.st_dev != c->dev)
			return dsec_err_set(c->err, EXDEV, "cannot copy '%s': a mount point", rel);
		if (depth >= FS3_DIFF_DEPTH_MAX)
			return dsec_err_setc(c->err, DSEC_E_INVALID, ELOOP,
					     "cannot copy '%s': more than %d directories deep", rel,
					     FS3_DIFF_DEPTH_MAX);
		if (!into && mkdirat(dfd, name, 0700) < 0)
			return dsec_err_set(c->err, errno, "cannot create '%s': %s", rel,
					    strerror(errno));
		if (opaque) {
			char dp[64 + NAME_MAX];

			fd_path(dp, sizeof(dp), dfd, name);
			if (lsetxattr(dp, "trusted.overlay.opaque", "y", 1, 0) < 0 ||
			    lsetxattr(dp, "user.overlay.opaque", "y", 1, 0) < 0)
				return dsec_err_set(c->err, errno, "cannot mark '%s' opaque: %s",
						    rel, strerror(errno));
		}
		s = openat(sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		d = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (s < 0 || d < 0)
			return dsec_err_set(c->err, errno, "cannot open '%s': %s", rel, strerror(errno));
		if ((r = copy_dir(c, s, d, rel, depth + 1)) < 0)
			return r;
		c->st->dirs++;
		/* Times last: making the children changed them. */
		return copy_meta(c, sfd, dfd, name, &st, rel);
	}
	case S_IFREG:
		return copy_file(c, sfd, dfd, name, &st, rel);
	case S_IFLNK: {
		char target[PATH_MAX + 1];
		ssize_t n = readlinkat(sfd, name, target, sizeof(target) - 1);

		if (n < 0)
			return dsec_err_set(c->err, errno, "cannot read link '%s': %s", rel,
					    strerror(errno));
		target[n] = '\0';
		if (symlinkat(target, dfd, name) < 0)
			return dsec_err_set(c->err, errno, "cannot create '%s': %s", rel,
					    strerror(errno));
		c->st->other++;
		return copy_meta(c, sfd, dfd, name, &st, rel);
	}
	case S_IFCHR:
	case S_IFBLK:
	case S_IFIFO:
	case S_IFSOCK:
		if (mknodat(dfd, name, st.st_mode & (S_IFMT | 07777), st.st_rdev) < 0)
			return dsec_err_set(c->err, errno, "cannot create '%s': %s", rel,
					    strerror(errno));
		if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0))
			c->st->whiteouts++;
		else
			c->st->other++;
		return copy_meta(c, sfd, dfd, name, &st, rel);
	default:
		return dsec_err_set(c->err, EINVAL, "cannot copy '%s': unknown file type 0%o", rel,
				    (unsigned)(st.st_mode & S_IFMT));
	}
}

static int copy_dir(struct copy *c, int sfd, int dfd, const char *rel, int depth)
{
	int fd = dup(sfd), r = 0;
	struct dirent *de;
	DIR *d;

	if (fd < 0 || !(d = fdopendir(fd))) {
		r = dsec_err_set(c->err, errno, "cannot read '%s': %s", *rel ? rel : "/",
				 strerror(errno));
		if (fd >= 0)
			close(fd);
		return r;
	}
	while (r == 0) {
		errno = 0;
		if (!(de = readdir(d))) {
			if (errno)
				r = dsec_err_set(c->err, errno, "cannot read '%s': %s",
						 *rel ? rel : "/", strerror(errno));
			break;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		_cleanup_free_ char *sub = xasprintf("%s/%s", rel, de->d_name);
		r = copy_entry(c, sfd, dfd, de->d_name, sub, depth);
	}
	closedir(d);
	return r;
}

int fs3_diff_copy(const char *upper, const char *dst, uint32_t id_base, uint32_t id_count,
		  unsigned flags, uint64_t limit, struct fs3_diff_stats *stp, struct dsec_err *err)
{
	struct fs3_diff_stats mine;
	struct copy *c = xcalloc(1, sizeof(*c));
	_cleanup_close_ int s = -1;
	_cleanup_close_ int d = -1;
	struct stat st;
	int r;

	if (!stp)
		stp = &mine;
	memset(stp, 0, sizeof(*stp));
	c->base = id_base;
	c->count = id_count;
	c->userxattr = flags & FS3_DIFF_USERXATTR;
	c->merge = flags & FS3_DIFF_MERGE;
	c->below = c->merge && (flags & FS3_DIFF_BELOW);
	c->st = stp;
	c->err = err;
	c->dst = dst;
	c->limit = limit;
	c->dstroot = -1;
	s = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s < 0 || fstat(s, &st) < 0) {
		r = dsec_err_set(err, errno, "cannot open the upper dir '%s': %s", upper,
				 strerror(errno));
		goto out;
	}
	c->dev = st.st_dev;
	if ((!c->merge && mkdir(dst, 0700) < 0) ||
	    (d = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		r = dsec_err_set(err, errno, "cannot create '%s': %s", dst, strerror(errno));
		goto out;
	}
	c->dstroot = d;
	if ((r = copy_dir(c, s, d, "", 0)) < 0)
		goto out;
	stp->dirs++;
	/* The top: its owner, mode, xattrs (an opaque root is kept) and times. */
	{
		char sp[64], dp[64];
		struct timespec ts[2] = { st.st_atim, st.st_mtim };

		snprintf(sp, sizeof(sp), "/proc/self/fd/%d", s);
		snprintf(dp, sizeof(dp), "/proc/self/fd/%d", d);
		if (fchown(d, shift(c, st.st_uid), shift(c, st.st_gid)) < 0 ||
		    fchmod(d, st.st_mode & 07777) < 0) {
			r = dsec_err_set(err, errno, "cannot set the owner of '%s': %s", dst,
					 strerror(errno));
			goto out;
		}
		if ((c->merge && (r = clear_xattrs(c, dp, "/")) < 0) ||
		    (r = copy_xattrs(c, sp, dp, "/")) < 0)
			goto out;
		if (futimens(d, ts) < 0) {
			r = dsec_err_set(err, errno, "cannot set the times of '%s': %s", dst,
					 strerror(errno));
			goto out;
		}
	}
	r = 0;
out:
	for (size_t i = 0; i < c->nlinks; i++)
		free(c->links[i].path);
	free(c->links);
	free(c);
	return r;
}

int fs3_file_copy(const char *src, const char *dst, uint64_t limit, struct dsec_err *err)
{
	struct fs3_diff_stats st = { 0 };
	struct copy *c = xcalloc(1, sizeof(*c));
	_cleanup_close_ int in = open(src, O_RDONLY | O_NOCTTY | O_CLOEXEC);
	_cleanup_close_ int out = -1;
	struct stat sb;
	int r;

	c->st = &st;
	c->err = err;
	c->dst = dst;
	c->limit = limit;
	c->dstroot = -1;
	if (in < 0 || fstat(in, &sb) < 0) {
		r = dsec_err_set(err, errno, "cannot open '%s': %s", src, strerror(errno));
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		r = dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "cannot copy '%s': not a regular "
				  "file", src);
		goto out;
	}
	if ((out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0) {
		r = dsec_err_set(err, errno, "cannot create '%s': %s", dst, strerror(errno));
		goto out;
	}
	r = copy_data(c, in, out, sb.st_size, src);
out:
	free(c);
	return r;
}

bool fs3_tag_valid(const char *tag)
{
	_cleanup_free_ char *f = tag ? fs3_tag_file(tag) : NULL;

	return f != NULL;
}
