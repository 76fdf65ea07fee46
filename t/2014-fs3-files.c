/* 2014-fs3-files - fs3_acquired.files: with each layer's mount point the
 * EROFS image file it is mounted from, in the same order (a stack too),
 * there until release (gc keeps it, tag or not): the local
 * STORE/layers/<hex>.erofs of the layer's size when layers are fetched
 * whole, its FUSE file STORE/fuse/<hex>.erofs (same bytes, read through
 * FUSE) on demand.  What a backend that gives a
 * VM each layer as a disk would take.  Needs root (mount); the on-demand
 * part /dev/fuse. */
#include <inttypes.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs3-test.h"
#include "fs3.h"

#define NTESTS 10

/* Does a have one file per layer, each dir/<hex>.erofs (or dir2/<hex>.erofs
 * if dir2) for the layer mounted at .../<hex>, each what that mount is made
 * from? */
static bool files_match(const struct fs3_acquired *a, const char *dir, const char *dir2)
{
	size_t n = 0;

	while (a->files && a->files[n])
		n++;
	if (n != a->nlayers) {
		printf("# %zu files for %zu layers\n", n, a->nlayers);
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		const char *hex = strrchr(a->layers[i], '/') + 1;
		char *want = xasprintf("%s/%s.erofs", dir, hex);
		char *want2 = dir2 ? xasprintf("%s/%s.erofs", dir2, hex) : NULL;
		char *src = mount_source(a->layers[i], NULL);
		bool where = !strcmp(a->files[i], want) || (want2 && !strcmp(a->files[i], want2));
		bool good = where && src && !strcmp(src, a->files[i]);
		if (!good)
			printf("# layer %zu at '%s': file '%s', mounted from '%s', want '%s'\n", i,
			       a->layers[i], a->files[i], src ? src : "nothing", want);
		free(want);
		free(want2);
		free(src);
		if (!good)
			return false;
	}
	return true;
}

/* Is each file a regular file of its layer's size (from inspect, by
 * digest) with the EROFS magic at byte 1024? */
static bool files_are_erofs(const struct fs3_acquired *a, const struct fs3_image_info *info)
{
	static const unsigned char magic[4] = { 0xe2, 0xe1, 0xf5, 0xe0 };	/* 0xe0f5e1e2 LE */

	for (size_t i = 0; i < a->nlayers; i++) {
		const char *hex = strrchr(a->layers[i], '/') + 1;
		uint64_t size = 0;
		unsigned char b[4] = { 0 };
		struct stat sb;
		int fd;

		for (size_t j = 0; j < info->nlayers; j++)
			if (!strcmp(info->layers[j].digest + 7, hex))
				size = info->layers[j].size;
		if ((fd = open(a->files[i], O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &sb) < 0 ||
		    !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != size ||
		    pread(fd, b, sizeof(b), 1024) != (ssize_t)sizeof(b) || memcmp(b, magic, 4)) {
			printf("# '%s': not an EROFS image of %" PRIu64 " bytes\n", a->files[i],
			       size);
			if (fd >= 0)
				close(fd);
			return false;
		}
		close(fd);
	}
	return true;
}

/* The on-demand half (5 tests): a second node on the same origin, its
 * cache cold, layers served through FUSE. */
static void on_demand(const char *origin, const char *layers, const struct fs3_image_info *info)
{
	struct fs3_acquired *a = NULL;
	struct dsec_err err;
	struct fs3 *od = NULL;
	char *p;

	char *store2 = tpath("node"), *fuse = xasprintf("%s/fuse", store2);
	struct fs3_conf c2 = { .store = store2, .origin = origin, .flags = FS3_MOUNTER };
	ok(fs3_open(&od, &c2, &err) == 0 && fs3_image_acquire(od, "base:1", &a, &err) == 0,
	   "the image is acquired on demand on another node");
	if (!a) {
		printf("Bail out! %s\n", err.msg);
		exit(1);
	}
	ok(files_match(a, fuse, NULL), "each layer's file is its FUSE file STORE/fuse/<hex>.erofs");
	ok(files_are_erofs(a, info), "each is an EROFS image of the layer's size");
	p = xasprintf("%s/%s", layers, strrchr(a->files[1], '/') + 1);
	ok(same_file(a->files[1], p), "the FUSE file reads the layer's bytes (as the local one)");
	free(p);
	fs3_image_release(od, a);
	/* Read whole, the layer may have become local meanwhile. */
	p = xasprintf("%s/layers", store2);
	ok(fs3_image_acquire(od, "base:1", &a, &err) == 0 && files_match(a, fuse, p),
	   "acquired again, each file is what its mount is made from");
	free(p);
	fs3_image_release(od, a);
	fs3_close(od);
	free(store2);
	free(fuse);
}

int main(void)
{
	struct fs3_image_info info;
	struct fs3_acquired *a = NULL, *b = NULL;
	struct dsec_err err;
	struct fs3 *fs;
	char *p;

	plan(NTESTS);
	if (geteuid() != 0) {
		for (int i = 0; i < NTESTS; i++)
			skip("needs root (mount)");
		return 0;
	}
	t_setup();
	dsec_log_set_level(DSEC_LOG_ERROR);
	char *store = tpath("store"), *origin = tpath("origin");
	char *layers = xasprintf("%s/layers", store);
	struct fs3_conf conf = { .store = store, .origin = origin, .flags = FS3_MOUNTER,
				 .full_fetch = true };
	if (fs3_open(&fs, &conf, &err) < 0) {
		printf("Bail out! %s\n", err.msg);
		return 1;
	}
	p = tpath("b0/f"), put_random(p, 200000, 1), free(p);
	p = tpath("b1/g"), put_text(p, "b1\n"), free(p);
	p = tpath("k/h"), put_text(p, "k\n"), free(p);
	p = tpath("x/y"), put_text(p, "x\n"), free(p);
	if (t_import(fs, "b0", NULL, "base:0", NULL) < 0 ||
	    t_import(fs, "b1", "base:0", "base:1", NULL) < 0 ||
	    t_import(fs, "k", NULL, "tk:1", NULL) < 0 || t_import(fs, "x", NULL, "x:1", NULL) < 0 ||
	    fs3_image_inspect(fs, "base:1", &info, &err) < 0) {
		printf("Bail out! cannot make the images\n");
		return 1;
	}

	/* Fetched whole: the local files. */
	ok(fs3_image_acquire(fs, "base:1", &a, &err) == 0 && a->nlayers == 2,
	   "an image of two layers is acquired");
	if (!a) {
		printf("Bail out! %s\n", err.msg);
		return 1;
	}
	ok(files_match(a, layers, NULL),
	   "each layer's file is STORE/layers/<hex>.erofs, its mount's source");
	ok(files_are_erofs(a, &info), "each is an EROFS image of the layer's size");
	const char *const extras[] = { "tk:1", NULL };
	ok(fs3_image_acquire_stack(fs, "base:1", extras, &b, &err) == 0 && b->nlayers == 3 &&
	   files_match(b, layers, NULL), "a stack's files follow its layers, top first");
	fs3_image_release(fs, b);
	fs3_image_release(fs, a);
	a = b = NULL;
	/* An image no tag names any more, acquired: gc keeps its file. */
	ok(fs3_image_acquire(fs, "x:1", &b, &err) == 0 && fs3_untag(fs, "x:1", &err) == 0 &&
	   fs3_gc(fs, NULL, &err) == 0 && access(b->files[0], R_OK) == 0 &&
	   files_match(b, layers, NULL), "gc keeps the file of an acquired, untagged image");
	fs3_image_release(fs, b);

	if (access("/dev/fuse", R_OK | W_OK) < 0) {
		for (int i = 0; i < 5; i++)
			skip("needs /dev/fuse");
	} else {
		on_demand(origin, layers, &info);
	}
	fs3_image_info_clear(&info);
	fs3_close(fs);
	free(layers);
	free(store);
	free(origin);
	return 0;
}
