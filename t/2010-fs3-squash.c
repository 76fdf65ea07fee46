/* 2010-fs3-squash - fs3_squash: runs of adjacent small layers merged into
 * one EROFS layer; under overlayfs the squashed image's tree is the
 * original's (names, types, modes, owners, sizes, contents, symlinks),
 * whiteouts and opaque dirs applied, those still needed kept.  Needs root. */
#include <sys/mount.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fs3-test.h"
#include "fs3.h"

#define NTESTS 13
#define SMALL (200u << 10)	/* the squash threshold: the big layers are over it */

/* $T/rel as an overlayfs whiteout. */
static void whiteout(const char *rel)
{
	char *p = tpath("%s", rel), *dir = xstrdup(p);

	*strrchr(dir, '/') = '\0';
	dsec_mkdir_p(dir, 0755);
	free(dir);
	if (mknod(p, S_IFCHR | 0600, makedev(0, 0)) < 0)
		printf("# cannot mknod '%s': %s\n", p, strerror(errno));
	free(p);
}

/* $T/rel, a directory, made opaque (both forms, as fs3 writes them). */
static void opaque(const char *rel)
{
	char *p = tpath("%s", rel);

	dsec_mkdir_p(p, 0755);
	if (lsetxattr(p, "trusted.overlay.opaque", "y", 1, 0) < 0 ||
	    lsetxattr(p, "user.overlay.opaque", "y", 1, 0) < 0)
		printf("# cannot mark '%s' opaque: %s\n", p, strerror(errno));
	free(p);
}

static void text(const char *rel, const char *s)
{
	char *p = tpath("%s", rel);

	put_text(p, s);
	free(p);
}

/* Acquires ref and mounts its layers read-only under overlayfs at $T/name
 * (over an empty bottom layer, so that one layer mounts too); writes the
 * tree's listing to $T/name.lst.  Returns the acquire (release it after
 * unmounting), or NULL. */
static struct fs3_acquired *view(struct fs3 *fs, const char *ref, const char *name)
{
	char *mnt = tpath("%s", name), *empty = tpath("empty");
	struct fs3_acquired *a;
	struct dsec_err err;

	if (fs3_image_acquire(fs, ref, &a, &err) < 0) {
		printf("# %s\n", err.msg);
		free(mnt), free(empty);
		return NULL;
	}
	dsec_mkdir_p(mnt, 0755);
	dsec_mkdir_p(empty, 0755);
	char *opts = xasprintf("lowerdir=%s:%s", a->lowerdir, empty);
	if (mount("overlay", mnt, "overlay", MS_RDONLY, opts) < 0) {
		printf("# cannot mount the overlay of '%s': %s\n", ref, strerror(errno));
		fs3_image_release(fs, a);
		a = NULL;
	} else {
		sh("cd '%s' && find . -printf '%%p %%y %%m %%U %%G %%s %%l\\n' | LC_ALL=C sort > '%s.lst'",
		   mnt, mnt);
	}
	free(opts), free(mnt), free(empty);
	return a;
}

static void unview(struct fs3 *fs, struct fs3_acquired *a, const char *name)
{
	char *mnt = tpath("%s", name);

	umount2(mnt, MNT_DETACH);
	fs3_image_release(fs, a);
	free(mnt);
}

/* Squashes ref as tag and compares the two trees under overlayfs. */
static void check(struct fs3 *fs, const char *ref, const char *tag, size_t before, size_t after)
{
	struct fs3_squash_res res;
	struct dsec_err err;
	int r = fs3_squash(fs, ref, SMALL, tag, &res, &err);

	if (r < 0)
		printf("# %s\n", err.msg);
	ok(r == 0 && res.before == before && res.after == after && res.runs == 1,
	   "%s: %zu layers squashed to %zu (%zu -> %zu), one run merged", ref, before, after,
	   res.before, res.after);
	struct fs3_acquired *a = view(fs, ref, "orig"), *b = view(fs, tag, "squashed");
	ok(a && b && b->nlayers == after && strcmp(a->digest, b->digest),
	   "%s: the squashed image is a new image of %zu layers", ref, after);
	char *o = tpath("orig"), *s = tpath("squashed");
	ok(a && b && sh("cmp '%s.lst' '%s.lst'", o, s) == 0,
	   "%s: same names, types, modes, owners, sizes and symlinks", ref);
	ok(a && b && sh("diff -r --no-dereference '%s' '%s'", o, s) == 0, "%s: same contents", ref);
	if (a)
		unview(fs, a, "orig");
	if (b)
		unview(fs, b, "squashed");
	free(o), free(s);
}

int main(void)
{
	struct fs3_squash_res res;
	struct dsec_err err;
	struct fs3 *fs;

	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root (mount, mknod, trusted xattrs)\n");
		return 0;
	}
	plan(NTESTS);
	t_setup();
	dsec_log_set_level(DSEC_LOG_ERROR);

	/* l0 big | l1 l2 small: merged | l3 big | l4 small, alone. */
	char *p = tpath("l0/big");
	put_random(p, 300000, 1), free(p);
	text("l0/a/keep", "keep0\n");
	text("l0/a/gone", "gone\n");
	text("l0/a/redo/old", "hidden by l1, not back with l2\n");
	text("l0/a/opq/x", "x\n");
	text("l0/a/file2dir", "a file below\n");
	text("l0/d/sub/deep", "deep\n");
	sh("cd '%s' && ln -s a/keep l0/link && chown 1000:1000 l0/a/keep && chmod 640 l0/a/keep", T);

	text("l1/a/keep", "keep1\n");
	whiteout("l1/a/gone");
	whiteout("l1/a/redo");
	opaque("l1/a/opq");
	text("l1/a/opq/z", "z\n");
	text("l1/new1", "n1\n");
	text("l1/tmpdir/f", "t\n");
	sh("cd '%s' && chown 1234:5678 l1/a/keep && chmod 600 l1/a/keep && chmod 700 l1/a && "
	   "ln -s new1 l1/link2 && ln -s /nowhere l1/link", T);

	text("l2/a/new2", "n2\n");
	whiteout("l2/new1");
	whiteout("l2/tmpdir");
	text("l2/a/file2dir/in", "a dir above\n");
	text("l2/a/gone/back", "back as a dir\n");
	text("l2/a/redo/new", "a new dir over a whiteout: opaque\n");
	text("l2/d/sub/deeper", "deeper\n");
	sh("chmod 751 '%s/l2/a'", T);

	p = tpath("l3/big3");
	put_random(p, 300000, 3), free(p);
	p = tpath("l3/a");
	dsec_mkdir_p(p, 0751), free(p);
	whiteout("l3/a/new2");
	text("l4/top", "top\n");

	/* s0 s1: a run at the bottom, whose whiteouts have nothing to hide. */
	text("s0/a", "a\n");
	text("s0/b", "b\n");
	text("s0/dir/x", "x\n");
	whiteout("s1/b");
	opaque("s1/dir");
	text("s1/dir/y", "y\n");

	char *store = tpath("store");
	struct fs3_conf conf = { .store = store, .flags = FS3_MOUNTER };
	if (fs3_open(&fs, &conf, &err) < 0) {
		printf("Bail out! %s\n", err.msg);
		return 1;
	}
	ok(t_import(fs, "l0", NULL, "x:0", NULL) == 0 &&
	   t_import(fs, "l1", "x:0", "x:1", NULL) == 0 &&
	   t_import(fs, "l2", "x:1", "x:2", NULL) == 0 &&
	   t_import(fs, "l3", "x:2", "x:3", NULL) == 0 &&
	   t_import(fs, "l4", "x:3", "x:4", NULL) == 0, "an image of five layers");
	ok(t_import(fs, "s0", NULL, "s:0", NULL) == 0 &&
	   t_import(fs, "s1", "s:0", "s:1", NULL) == 0,
	   "an image of two small layers");

	check(fs, "x:4", "x:squashed", 5, 4);
	check(fs, "s:1", "s:squashed", 2, 1);

	/* The squashed s has no layer below: its whiteout went. */
	struct fs3_acquired *a;
	struct stat st;
	bool gone = false;
	if (fs3_image_acquire(fs, "s:squashed", &a, &err) == 0) {
		char *b = xasprintf("%s/b", a->layers[0]);
		gone = lstat(b, &st) < 0 && errno == ENOENT;
		free(b);
		fs3_image_release(fs, a);
	}
	ok(gone, "a whiteout with nothing below to hide is dropped");

	char d0[FS3_REF_LEN];
	ok(fs3_squash(fs, "x:0", SMALL, NULL, &res, &err) == 0 && res.runs == 0 &&
	   res.after == 1 && fs3_resolve(fs, "x:0", d0, &err) == 0 && !strcmp(res.digest, d0),
	   "nothing to merge: the same image");
	ok(fs3_squash(fs, "nosuch:1", SMALL, NULL, &res, &err) == -ENOENT &&
	   err.code == DSEC_E_NOT_FOUND, "an unknown image: not_found");
	fs3_close(fs);
	free(store);
	return 0;
}
