/* 2012-fs3-sparse - holes all the way: fs3_diff_copy keeps a sparse file's
 * holes and counts only its data, within a limit (data over it, or sizes
 * over FS3_DIFF_SIZE_RATIO times it, fail with capacity); an import of the
 * copy builds a small layer (chunked), which mounts with the same size,
 * data and zeros; a layer of written zeros is stored once and assembled
 * sparse (STORE/layers).  Needs root (mount). */
#include <dirent.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs3-test.h"
#include "fs3.h"

#define MIB (1ull << 20)
#define BIG (512 * MIB)	/* the sparse file's size */
#define MID (BIG / 2)		/* where its first data is */

/* Writes s at off of path. */
static void put_at(const char *path, const char *s, off_t off)
{
	int fd = open(path, O_WRONLY | O_CREAT, 0644);

	if (fd < 0 || pwrite(fd, s, strlen(s), off) != (ssize_t)strlen(s))
		printf("# cannot write '%s': %s\n", path, strerror(errno));
	if (fd >= 0)
		close(fd);
}

/* Do the n bytes at off of path read as s? */
static bool reads_at(const char *path, const char *s, off_t off)
{
	char buf[64] = { 0 };
	int fd = open(path, O_RDONLY);
	bool same = fd >= 0 && pread(fd, buf, strlen(s), off) == (ssize_t)strlen(s) &&
		    !memcmp(buf, s, strlen(s));

	if (fd >= 0)
		close(fd);
	return same;
}

static uint64_t blocks(const char *path)
{
	struct stat st;

	return stat(path, &st) < 0 ? UINT64_MAX : (uint64_t)st.st_blocks * 512;
}

static off_t size_of(const char *path)
{
	struct stat st;

	return stat(path, &st) < 0 ? -1 : st.st_size;
}

static bool empty_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	if (d)
		closedir(d);
	return d && n == 0;
}

/* ref acquired (its layers mounted from STORE/layers), or NULL. */
static struct fs3_acquired *acquire(struct fs3 *fs, const char *ref)
{
	struct fs3_acquired *a = NULL;
	struct dsec_err err;

	if (fs3_image_acquire(fs, ref, &a, &err) < 0)
		printf("# %s\n", err.msg);
	return a;
}

int main(void)
{
	struct fs3_diff_stats st;
	struct fs3_import_res res;
	struct dsec_err err;
	struct fs3 *fs = NULL;
	int r;

	if (getuid() != 0) {
		printf("1..0 # SKIP needs root\n");
		return 0;
	}
	plan(17);
	t_setup();
	dsec_log_set_level(DSEC_LOG_WARN);

	/* An upper dir: 512 MiB with 3 bytes in its middle and 3 at its end,
	 * a hard link to it, 4 MiB of data. */
	_cleanup_free_ char *up = tpath("upper"), *sp = tpath("upper/sparse");
	_cleanup_free_ char *hl = tpath("upper/link"), *data = tpath("upper/data");
	dsec_mkdir_p(up, 0755);
	put_at(sp, "mid", MID);
	put_at(sp, "end", BIG - 3);
	put_random(data, 4 * MIB, 1);
	if (link(sp, hl) < 0)
		printf("# cannot link: %s\n", strerror(errno));

	_cleanup_free_ char *dst = tpath("tree"), *dsp = tpath("tree/sparse");
	dsec_err_clear(&err);
	r = fs3_diff_copy(up, dst, 0, 0, 0, 64 * MIB, &st, &err);
	is_int(r, 0, "a 512 MiB sparse file copies within a 64 MiB limit (%s)", err.msg);
	is_int(size_of(dsp), BIG, "... with its size");
	ok(blocks(dsp) < MIB, "... and its holes (%llu bytes allocated)",
	   (unsigned long long)blocks(dsp));
	ok(reads_at(dsp, "mid", MID) && reads_at(dsp, "end", BIG - 3) &&
	   reads_at(dsp, "\0\0\0\0", MID / 2), "... and its data where it was, zeros between");
	ok(st.bytes < 5 * MIB && st.bytes >= 4 * MIB, "the data counted is the data, not the sizes "
	   "(%llu bytes)", (unsigned long long)st.bytes);
	is_int(st.size, BIG + 4 * MIB, "the sizes add up once for the hard-linked file");

	/* 4 MiB of data alone (its size is no more than 16 x 2 MiB). */
	_cleanup_free_ char *up2 = tpath("upper2"), *data2 = tpath("upper2/data");
	_cleanup_free_ char *dst2 = tpath("tree2"), *dst3 = tpath("tree3");
	put_random(data2, 4 * MIB, 2);
	dsec_err_clear(&err);
	r = fs3_diff_copy(up2, dst2, 0, 0, 0, 2 * MIB, &st, &err);
	ok(r < 0 && err.code == DSEC_E_CAPACITY && strstr(err.msg, "over the 2 MiB"),
	   "data over the limit fails with capacity (%s)", err.msg);
	dsec_err_clear(&err);
	r = fs3_diff_copy(up, dst3, 0, 0, 0, 16 * MIB, &st, &err);
	ok(r < 0 && err.code == DSEC_E_CAPACITY && strstr(err.msg, "sizes add up to more than"),
	   "sizes over %d times the limit fail with capacity (%s)", FS3_DIFF_SIZE_RATIO, err.msg);

	/* The copy as a layer. */
	_cleanup_free_ char *store = tpath("store");
	struct fs3_conf c = { .store = store, .flags = FS3_MOUNTER, .full_fetch = true };
	if (fs3_open(&fs, &c, &err) < 0) {
		printf("Bail out! %s\n", err.msg);
		return 1;
	}
	struct fs3_import_opts o = { .tag = "sparse:1" };
	r = fs3_import(fs, dst, &o, &res, &err);
	is_int(r, 0, "the copy imports (%s)", r < 0 ? err.msg : "");
	ok(res.logical < 16 * MIB && res.stored < 8 * MIB, "... as a small layer: %llu bytes, "
	   "%llu stored", (unsigned long long)res.logical, (unsigned long long)res.stored);
	_cleanup_free_ char *stmp = tpath("store/tmp");
	ok(empty_dir(stmp), "... leaving no staging");
	struct fs3_acquired *a = acquire(fs, "sparse:1");
	_cleanup_free_ char *msp = a ? xasprintf("%s/sparse", a->layers[0]) : NULL;
	_cleanup_free_ char *mhl = a ? xasprintf("%s/link", a->layers[0]) : NULL;
	is_int(msp ? size_of(msp) : -1, BIG, "the mounted layer has the file's size");
	ok(msp && reads_at(msp, "mid", MID) && reads_at(msp, "end", BIG - 3) &&
	   reads_at(msp, "\0\0\0\0", MID / 2) && reads_at(mhl, "mid", MID),
	   "... its data where it was, zeros between, through both links");
	fs3_image_release(fs, a);

	/* 100 MiB written as zeros (no holes: a plain layer of zeros). */
	_cleanup_free_ char *zt = tpath("zeros"), *zf = tpath("zeros/z");
	dsec_mkdir_p(zt, 0755);
	{
		_cleanup_free_ char *zero = xcalloc(1, MIB);
		int fd = open(zf, O_WRONLY | O_CREAT, 0644);
		for (int i = 0; i < 100 && fd >= 0; i++)
			dsec_write_all(fd, zero, MIB);
		if (fd >= 0)
			close(fd);
	}
	o.tag = "zeros:1";
	r = fs3_import(fs, zt, &o, &res, &err);
	ok(r == 0 && res.logical >= 100 * MIB && res.stored < MIB, "a layer of 100 MiB of zeros "
	   "is stored in %llu bytes", (unsigned long long)res.stored);
	a = acquire(fs, "zeros:1");
	ok(a != NULL, "... and mounts");
	uint64_t lb = UINT64_MAX;
	if (a) {
		/* STORE/layers/HEX.erofs: the mount's source. */
		_cleanup_free_ char *hex = xstrdup(strrchr(a->layers[0], '/') + 1);
		_cleanup_free_ char *lf = xasprintf("%s/layers/%s.erofs", store, hex);
		lb = blocks(lf);
	}
	ok(lb < 8 * MIB, "... its image assembled with holes for the zeros (%llu bytes allocated)",
	   (unsigned long long)lb);
	_cleanup_free_ char *mz = a ? xasprintf("%s/z", a->layers[0]) : NULL;
	ok(mz && size_of(mz) == (off_t)(100 * MIB) && reads_at(mz, "\0\0\0\0", 50 * MIB),
	   "... and the file reads back as zeros");
	fs3_image_release(fs, a);
	fs3_close(fs);
	return done_testing();
}
