/* 2009-fs3-stack - fs3_image_acquire_stack: extra images over a base, the
 * last highest, a layer shared by two of them once where it is highest,
 * the base's config, every image held (gc roots) until release, a bad ref
 * or a stack over FS3_STACK_MAX layers holding nothing; with conf.linger a
 * released local layer stays mounted for a while.  Needs root. */
#include <dirent.h>
#include <unistd.h>

#include "fs3-test.h"
#include "fs3.h"

#define NTESTS 12

/* Files in $T/store/acquired: the images held. */
static int held(void)
{
	char *p = tpath("store/acquired");
	DIR *d = opendir(p);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	free(p);
	return n;
}

/* The mount point of ref's top layer (its last in a one-image acquire). */
static char *top_of(struct fs3 *fs, const char *ref)
{
	struct fs3_acquired *a;
	struct dsec_err err;
	char *s;

	if (fs3_image_acquire(fs, ref, &a, &err) < 0)
		return xstrdup("?");
	s = xstrdup(a->layers[0]);
	fs3_image_release(fs, a);
	return s;
}

int main(void)
{
	struct fs3_acquired *a;
	struct dsec_err err;
	struct fs3 *fs;
	char *p;

	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root (mount)\n");
		return 0;
	}
	plan(NTESTS);
	t_setup();
	dsec_log_set_level(DSEC_LOG_ERROR);
	char *store = tpath("store");
	struct fs3_conf conf = { .store = store, .flags = FS3_MOUNTER };
	if (fs3_open(&fs, &conf, &err) < 0) {
		printf("Bail out! %s\n", err.msg);
		return 1;
	}
	p = tpath("b0/f"), put_text(p, "b0\n"), free(p);
	p = tpath("b1/f"), put_text(p, "b1\n"), free(p);
	p = tpath("w/f"), put_text(p, "w\n"), free(p);
	p = tpath("k/f"), put_text(p, "k\n"), free(p);
	ok(t_import(fs, "b0", NULL, "base:0", "A=base") == 0 &&
	   t_import(fs, "b1", "base:0", "base:1", NULL) == 0 &&
	   t_import(fs, "w", "base:0", "ws:1", "A=ws") == 0 &&
	   t_import(fs, "k", NULL, "tk:1", NULL) == 0,
	   "a base of two layers, a workspace over its first, a toolkit");
	char *b0 = top_of(fs, "base:0"), *b1 = top_of(fs, "base:1"), *w = top_of(fs, "ws:1"),
	     *k = top_of(fs, "tk:1");

	const char *const extras[] = { "ws:1", "tk:1", NULL };
	ok(fs3_image_acquire_stack(fs, "base:1", extras, &a, &err) == 0, "acquire a stack");
	/* b0 b1 | b0 w | k, bottom first: b0 stays where it is highest. */
	char *want = xasprintf("%s:%s:%s:%s", k, w, b0, b1);
	ok(a && a->nlayers == 4 && !strcmp(a->lowerdir, want),
	   "the last extra highest; the base's layer ws:1 shares once, where it is highest");
	if (a && strcmp(a->lowerdir, want))
		printf("# got %s\n# want %s\n", a->lowerdir, want);
	ok(a && dsec_strv_len((const char *const *)a->config.env) == 1 &&
	   !strcmp(a->config.env[0], "A=base") && dsec_strv_len((const char *const *)a->extras) == 2,
	   "the base's config; both extras named");
	ok(held() == 3, "each image held (%d)", held());
	fs3_image_release(fs, a);
	ok(held() == 0, "release gives every one back");

	const char *const bad[] = { "tk:1", "nosuch:1", NULL };
	ok(fs3_image_acquire_stack(fs, "base:1", bad, &a, &err) == -ENOENT &&
	   err.code == DSEC_E_NOT_FOUND && strstr(err.msg, "'nosuch:1'") && held() == 0,
	   "an unknown extra: not_found, nothing held");

	/* many:I has I + 1 layers; with tk:1, many:62 makes FS3_STACK_MAX. */
	int r = 0;
	char tag[32], prev[32] = "";
	for (int i = 0; i < FS3_STACK_MAX && r == 0; i++) {
		p = tpath("many%d/f%d", i, i), put_text(p, "x\n"), free(p);
		p = xasprintf("many%d", i);
		snprintf(tag, sizeof(tag), "many:%d", i);
		r = t_import(fs, p, *prev ? prev : NULL, tag, NULL);
		snprintf(prev, sizeof(prev), "%s", tag);
		free(p);
	}
	const char *const one[] = { "tk:1", NULL };
	snprintf(tag, sizeof(tag), "many:%d", FS3_STACK_MAX - 2);
	ok(r == 0 && fs3_image_acquire_stack(fs, tag, one, &a, &err) == 0 &&
	   a->nlayers == FS3_STACK_MAX, "a stack of %d layers is taken", FS3_STACK_MAX);
	fs3_image_release(fs, a);
	snprintf(tag, sizeof(tag), "many:%d", FS3_STACK_MAX - 1);
	r = fs3_image_acquire_stack(fs, tag, one, &a, &err);
	ok(r == -E2BIG && err.code == DSEC_E_INVALID && held() == 0,
	   "one of %d is refused (%s), nothing held", FS3_STACK_MAX + 1, err.msg);
	fs3_close(fs);

	/* Lingering: layers fetched whole (local), kept 0.3 s after release. */
	conf.linger = 0.3;
	conf.full_fetch = true;
	struct stat st;
	char *kf = xasprintf("%s/f", k), *wf = xasprintf("%s/f", w);
	bool kept = false, reaped = false, gone = false;
	if (fs3_open(&fs, &conf, &err) == 0 && fs3_image_acquire(fs, "tk:1", &a, &err) == 0) {
		fs3_image_release(fs, a);
		kept = stat(kf, &st) == 0;
		usleep(400000);
		if (fs3_image_acquire(fs, "ws:1", &a, &err) == 0) {
			reaped = stat(kf, &st) < 0;
			fs3_image_release(fs, a);
		}
		gone = stat(wf, &st) == 0 && fs3_gc(fs, NULL, &err) == 0 && stat(wf, &st) < 0;
		fs3_close(fs);
	}
	ok(kept, "with linger, a released local layer stays mounted");
	ok(reaped, "... until an acquire finds it idle longer");
	ok(gone, "... or gc runs");
	free(kf), free(wf);
	free(b0), free(b1), free(w), free(k), free(want), free(store);
	return 0;
}
