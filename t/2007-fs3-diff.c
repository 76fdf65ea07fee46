/* 2007-fs3-diff - fs3_diff_copy on an upper dir made by hand (as a user
 * namespace's overlay leaves it: ids shifted, user.overlay.opaque), then
 * imported over a base image: ids shifted back, whiteouts, both opaque
 * marks, hard links, symlinks, file capabilities; overlayfs' bookkeeping
 * dropped; out-of-range ids become nobody; base layers below the diff. */
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fs3.h"
#include "fs3-test.h"

#define BASE 1000000000u

static uid_t owner(const char *p)
{
	struct stat st;

	return lstat(p, &st) < 0 ? (uid_t)-1 : st.st_uid;
}

static bool has_xattr(const char *p, const char *name, const char *want)
{
	char v[64];
	ssize_t n = lgetxattr(p, name, v, sizeof(v) - 1);

	if (n < 0)
		return false;
	v[n] = '\0';
	return !want || !strcmp(v, want);
}

int main(void)
{
	struct fs3_diff_stats st;
	struct dsec_err err;
	struct stat sa, sb;
	char lnk[64];
	ssize_t n;

	if (getuid() != 0) {
		printf("1..0 # SKIP needs root\n");
		return 0;
	}
	plan(19);
	t_setup();
	dsec_log_set_level(DSEC_LOG_WARN);
	_cleanup_free_ char *up = tpath("upper"), *dst = tpath("tree");
	sh("mkdir -p %s/dir/sub %s/opq && echo hi > %s/dir/f && ln %s/dir/f %s/dir/g && "
	   "ln -s ../dir/f %s/dir/l && mknod %s/dir/gone c 0 0 && echo x > %s/opq/new && "
	   "echo u > %s/dir/user && echo o > %s/dir/odd && chown -hR %u:%u %s && "
	   "chown %u:%u %s/dir/user && chown 4242:4242 %s/dir/odd",
	   up, up, up, up, up, up, up, up, up, up, BASE, BASE, up, BASE + 1000, BASE + 1000, up, up);
	_cleanup_free_ char *opq = tpath("upper/opq"), *dir = tpath("upper/dir");
	ok(lsetxattr(opq, "user.overlay.opaque", "y", 1, 0) == 0 &&
	   lsetxattr(dir, "user.overlay.impure", "y", 1, 0) == 0 &&
	   lsetxattr(dir, "trusted.overlay.opaque", "y", 1, 0) == 0 &&
	   lsetxattr(dir, "user.note", "kept", 4, 0) == 0, "an upper dir is made by hand");
	/* A v3 file capability whose root is the sandbox's (cap_net_raw=ep). */
	{
		uint32_t cap[6] = { 0x03000001u, 1u << 13, 0, 0, 0, BASE };
		_cleanup_free_ char *f = tpath("upper/dir/f");
		if (lsetxattr(f, "security.capability", cap, sizeof(cap), 0) < 0)
			printf("# cannot set a v3 capability: %s\n", strerror(errno));
	}

	dsec_err_clear(&err);
	int r = fs3_diff_copy(up, dst, BASE, 65536, FS3_DIFF_USERXATTR, 0, &st, &err);
	is_int(r, 0, "the upper dir is copied (%s)", err.msg);
	_cleanup_free_ char *f = tpath("tree/dir/f"), *g = tpath("tree/dir/g");
	_cleanup_free_ char *l = tpath("tree/dir/l"), *gone = tpath("tree/dir/gone");
	_cleanup_free_ char *user = tpath("tree/dir/user"), *odd = tpath("tree/dir/odd");
	_cleanup_free_ char *topq = tpath("tree/opq"), *tdir = tpath("tree/dir");
	is_int(owner(f), 0, "the sandbox's root owns its files as root");
	is_int(owner(user), 1000, "a file of uid 1000 inside is 1000's");
	is_int(owner(odd), 65534, "an id outside the range becomes nobody");
	is_int(owner(dst), 0, "the top is root's too");
	ok(lstat(f, &sa) == 0 && lstat(g, &sb) == 0 && sa.st_ino == sb.st_ino &&
	   sa.st_nlink == 2, "hard links stay links");
	n = readlink(l, lnk, sizeof(lnk) - 1);
	lnk[n > 0 ? n : 0] = '\0';
	is_str(lnk, "../dir/f", "symlinks are copied, not followed");
	is_int(owner(l), 0, "... with their owner shifted");
	ok(lstat(gone, &sa) == 0 && S_ISCHR(sa.st_mode) && sa.st_rdev == makedev(0, 0),
	   "a whiteout stays a 0/0 character device");
	ok(has_xattr(topq, "trusted.overlay.opaque", "y") &&
	   has_xattr(topq, "user.overlay.opaque", "y"),
	   "an opaque dir (userxattr) gets both opaque marks");
	ok(!has_xattr(tdir, "trusted.overlay.opaque", NULL) &&
	   !has_xattr(tdir, "user.overlay.impure", NULL),
	   "overlayfs' other xattrs, and the mark of the prefix not in use, are dropped");
	ok(has_xattr(tdir, "user.note", "kept"), "other user xattrs are kept");
	{
		uint32_t cap[6] = { 0 };
		ssize_t cn = lgetxattr(f, "security.capability", cap, sizeof(cap));
		ok(cn == 20 && (cap[0] & 0xff000000u) == 0x02000000u && cap[1] == 1u << 13,
		   "a v3 capability of the sandbox's root becomes v2 (got %zd bytes)", cn);
	}
	is_int(st.whiteouts, 1, "the stats count the whiteout");
	is_int(st.opaque, 1, "... and the opaque dir");

	/* Over a base image: its layers below, its config kept. */
	struct fs3_conf conf = { .store = tpath("store") };
	struct fs3 *fs;
	_cleanup_free_ char *base = tpath("base");
	sh("mkdir -p %s/etc && echo base > %s/etc/b", base, base);
	if (fs3_open(&fs, &conf, &err) < 0) {
		printf("Bail out! %s\n", err.msg);
		return 1;
	}
	struct fs3_import_opts bo = { .tag = "base:1", .config = { .cwd = (char *)"/etc" } };
	struct fs3_import_opts so = { .tag = "snap:1", .base = "base:1" };
	struct fs3_import_res res;
	struct fs3_image_info info;
	ok(fs3_import(fs, base, &bo, NULL, &err) == 0 && fs3_import(fs, dst, &so, &res, &err) == 0,
	   "the copy imports over the base image (%s)", err.msg);
	is_int(res.nlayers, 2, "the new image has the base's layer and the diff");
	ok(fs3_image_inspect(fs, "snap:1", &info, &err) == 0 && info.nlayers == 2 &&
	   !strcmp(info.config.cwd, "/etc"), "it keeps the base's config");
	fs3_image_info_clear(&info);
	fs3_close(fs);
	free((char *)conf.store);
	return done_testing();
}
