/* 2002-fs3-mount - acquire/release: layers mounted read-only and shared,
 * tar round trips, whiteouts under overlayfs, eviction and gc around what is
 * in use, concurrent acquires, stale mounts of a killed mounter.  Needs root
 * (mount, mknod, trusted.* xattrs). */
#include <dirent.h>
#include <pthread.h>
#include <sys/mount.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#include "fs3-test.h"
#include "fs3.h"
#include "image.h"
#include "layer.h"
#include "store.h"

#define CHUNK (64u << 10)
#define NTESTS 41
#define NTHREADS 8

static struct fs3 *open_store(const char *name, uint64_t cache_max, unsigned flags, int *rc)
{
	char *store = tpath("%s", name), *origin = tpath("%s-origin", name);
	struct fs3_conf c = { .store = store, .origin = origin, .chunk_size = CHUNK,
			      .cache_max = cache_max, .flags = flags,
			      .full_fetch = true };	/* on demand: t/2006 */
	struct dsec_err err;
	struct fs3 *fs = NULL;

	*rc = fs3_open(&fs, &c, &err);
	if (*rc < 0)
		printf("# %s\n", err.msg);
	free(store);
	free(origin);
	return fs;
}

/* How many mounts /proc/self/mountinfo has at path. */
static int mounts_at(const char *path)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[4096], mp[4096];
	int n = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) == 1 && !strcmp(mp, path))
			n++;
	if (f)
		fclose(f);
	return n;
}

static int import(struct fs3 *fs, const char *src, const char *tag, char digest[FS3_REF_LEN])
{
	struct fs3_import_opts o = { .tag = tag };
	struct fs3_import_res r;
	struct dsec_err err;

	if (fs3_import(fs, src, &o, &r, &err) < 0) {
		printf("# %s\n", err.msg);
		return -1;
	}
	if (digest)
		memcpy(digest, r.digest, FS3_REF_LEN);
	return 0;
}

static struct fs3_acquired *acquire(struct fs3 *fs, const char *ref)
{
	struct fs3_acquired *a;
	struct dsec_err err;

	if (fs3_image_acquire(fs, ref, &a, &err) < 0) {
		printf("# %s\n", err.msg);
		return NULL;
	}
	return a;
}

/* Does the tree at mnt hold what make_tree put into src? */
static bool tree_matches(const char *mnt, const char *src)
{
	char *a = xasprintf("%s/big1", mnt), *b = xasprintf("%s/big1", src);
	char *c = xasprintf("%s/sub/big2", mnt), *d = xasprintf("%s/sub/big2", src);
	char *e = xasprintf("%s/hello.txt", mnt), *s = NULL;
	struct stat sb;
	size_t n;
	bool good = same_file(a, b) && same_file(c, d) && dsec_read_file(e, &s, &n) == 0 &&
		    !strcmp(s, "hello fs3\n") && stat(c, &sb) == 0 && sb.st_uid == 1234 &&
		    (sb.st_mode & 07777) == 0640;

	free(a), free(b), free(c), free(d), free(e), free(s);
	return good;
}

static void make_tree(const char *dir)
{
	char *p;

	p = xasprintf("%s/hello.txt", dir), put_text(p, "hello fs3\n"), free(p);
	p = xasprintf("%s/big1", dir), put_random(p, 500 << 10, 1), free(p);
	p = xasprintf("%s/sub/big2", dir), put_random(p, 300 << 10, 2);
	if (chown(p, 1234, 1234) < 0 || chmod(p, 0640) < 0)
		printf("# cannot chown '%s'\n", p);
	free(p);
}

/* One thread of the concurrent acquire. */
struct racer {
	struct fs3 *fs;			/* shared handle */
	const char *ref;		/* image */
	struct fs3_acquired *a;		/* what it got */
};

static void *race(void *arg)
{
	struct racer *r = arg;

	r->a = acquire(r->fs, r->ref);
	return NULL;
}

/* Collects chunk digests of a tier. */
static int collect(void *ctx, const struct fs3_digest *d, const char *path, uint64_t size)
{
	struct dsec_buf *b = ctx;

	dsec_buf_add(b, d, sizeof(*d));
	return 0;
}

static int sum_size(void *ctx, const struct fs3_digest *d, const char *path, uint64_t size)
{
	*(uint64_t *)ctx += size;
	return 0;
}

static bool all_present(const char *tier, const struct dsec_buf *set)
{
	for (size_t i = 0; i < set->len / sizeof(struct fs3_digest); i++) {
		char *p = fs3_store_path(tier, FS3_CHUNK, (const struct fs3_digest *)set->data + i);
		bool there = access(p, F_OK) == 0;
		free(p);
		if (!there)
			return false;
	}
	return true;
}

static void test_whiteouts(struct fs3 *fs)
{
	char *low = tpath("wl"), *top = tpath("wt"), *tar = tpath("wt.tar"), *p;
	char *gone, *opq, *merged = tpath("merged");
	struct fs3_acquired *a, *b;
	struct stat sb;
	char x[8] = "";

	p = xasprintf("%s/gone.txt", low), put_text(p, "gone\n"), free(p);
	p = xasprintf("%s/opq/old.txt", low), put_text(p, "old\n"), free(p);
	p = xasprintf("%s/keep/k.txt", low), put_text(p, "k\n"), free(p);
	p = xasprintf("%s/.wh.gone.txt", top), put_text(p, ""), free(p);
	p = xasprintf("%s/opq/.wh..wh..opq", top), put_text(p, ""), free(p);
	p = xasprintf("%s/opq/new.txt", top), put_text(p, "new\n"), free(p);
	sh("tar --numeric-owner -C '%s' -cf '%s' .", top, tar);
	if (import(fs, low, "wh/low", NULL) < 0 || import(fs, tar, "wh/top", NULL) < 0 ||
	    !(a = acquire(fs, "wh/low")) || !(b = acquire(fs, "wh/top"))) {
		ok(0, "whiteout images import and acquire");
		return;
	}
	gone = xasprintf("%s/gone.txt", b->layers[0]);
	opq = xasprintf("%s/opq", b->layers[0]);
	ok(lstat(gone, &sb) == 0 && S_ISCHR(sb.st_mode) && sb.st_rdev == makedev(0, 0),
	   ".wh.NAME became a 0/0 character device");
	ok(getxattr(opq, "trusted.overlay.opaque", x, sizeof(x)) == 1 && x[0] == 'y',
	   ".wh..wh..opq became trusted.overlay.opaque=y");
	p = xasprintf("%s/.wh.gone.txt", b->layers[0]);
	ok(access(p, F_OK) < 0, "no .wh. file is left in the layer");
	free(p);
	dsec_mkdir_p(merged, 0755);
	char *opts = xasprintf("lowerdir=%s:%s", b->layers[0], a->layers[0]);
	if (mount("overlay", merged, "overlay", MS_RDONLY, opts) < 0) {
		printf("# cannot mount overlay: %s\n", strerror(errno));
		ok(0, "the two layers compose under overlayfs");
	} else {
		char *g = xasprintf("%s/gone.txt", merged), *o = xasprintf("%s/opq/old.txt", merged);
		char *n = xasprintf("%s/opq/new.txt", merged), *k = xasprintf("%s/keep/k.txt", merged);
		ok(access(g, F_OK) < 0 && access(o, F_OK) < 0 && access(n, F_OK) == 0 &&
		   access(k, F_OK) == 0, "under overlayfs the whiteout hides, the opaque dir hides "
		   "the lower, the rest shows");
		umount(merged);
		free(g), free(o), free(n), free(k);
	}
	free(opts);
	fs3_image_release(fs, a);
	fs3_image_release(fs, b);
	free(gone), free(opq), free(low), free(top), free(tar), free(merged);
}

/* The first chunk of image ref's bottom layer, and that layer's file. */
static void first_chunk(struct fs3 *fs, const char *ref, struct fs3_digest *chunk, char **layer_file,
			char **mnt)
{
	char *cache = tpath("s/cache"), *origin = tpath("s-origin"), dig[FS3_REF_LEN], hex[FS3_HEX_LEN + 1];
	struct fs3_store st;
	struct fs3_manifest m;
	struct fs3_index ix;
	struct fs3_digest md;
	struct dsec_buf b;
	struct dsec_err err;

	dsec_buf_init(&b);
	fs3_store_init(&st, cache, origin, 0);
	fs3_resolve(fs, ref, dig, &err);
	fs3_digest_parse(dig, &md);
	if (fs3_store_get(&st, FS3_MANIFEST, &md, &b, "manifest", &err) < 0 ||
	    fs3_manifest_decode(b.data, b.len, &m) < 0 || fs3_layer_index(&st, &m.layers[0], &ix, &err) < 0)
		DSEC_BUG("cannot read '%s': %s", ref, err.msg);
	*chunk = ix.chunks[0].d;
	fs3_digest_hex(&m.layers[0].digest, hex);
	*layer_file = tpath("s/layers/%s.erofs", hex);
	*mnt = tpath("s/mnt/%s", hex);
	fs3_index_free(&ix);
	fs3_manifest_free(&m);
	fs3_store_fini(&st);
	dsec_buf_free(&b);
	free(cache);
	free(origin);
}

/* An acquire on a thread of its own, for the tests of waiting. */
struct bg {
	struct fs3 *fs;			/* shared handle */
	const char *ref;		/* image */
	struct fs3_acquired *a;		/* what it got */
	struct dsec_err err;		/* or why not */
	int done;			/* set when it returned */
};

static void *bg_run(void *arg)
{
	struct bg *b = arg;

	fs3_image_acquire(b->fs, b->ref, &b->a, &b->err);
	__atomic_store_n(&b->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static void test_waiting(struct fs3 *fs, const char *src)
{
	char *cache = tpath("s/cache"), *origin = tpath("s-origin"), *layer_file, *mnt;
	struct fs3_digest c;
	struct fs3_acquired *w;
	struct dsec_err err;
	pthread_t th;

	/* Cold: no layer file, no chunk in the cache; the origin's first chunk
	 * a FIFO, so that the fetch blocks until we write the chunk into it. */
	first_chunk(fs, "tar:gzip", &c, &layer_file, &mnt);
	char *oc = fs3_store_path(origin, FS3_CHUNK, &c);
	unlink(layer_file);
	sh("rm -rf '%s/chunks' && mv '%s' '%s.real' && mkfifo '%s'", cache, oc, oc, oc);
	struct bg b = { .fs = fs, .ref = "tar:gzip" };
	pthread_create(&th, NULL, bg_run, &b);
	usleep(200000);
	int got = fs3_image_acquire(fs, "wh/low", &w, &err);
	ok(got == 0 && !__atomic_load_n(&b.done, __ATOMIC_SEQ_CST),
	   "while one acquire waits for a chunk, another image's acquire completes");
	fs3_image_release(fs, got == 0 ? w : NULL);
	sh("cat '%s.real' > '%s'", oc, oc);
	pthread_join(th, NULL);
	ok(b.a && tree_matches(b.a->layers[0], src), "... and the waiting one completes when the chunk comes");
	fs3_image_release(fs, b.a);
	sh("rm -f '%s' && mv '%s.real' '%s'", oc, oc, oc);

	/* Every thread waiting on a layer that cannot be had fails with why. */
	unlink(layer_file);
	sh("rm -rf '%s/chunks' && mv '%s' '%s.away'", cache, oc, oc);
	struct bg bs[4];
	pthread_t ths[4];
	for (int i = 0; i < 4; i++) {
		bs[i] = (struct bg){ .fs = fs, .ref = "tar:gzip" };
		pthread_create(&ths[i], NULL, bg_run, &bs[i]);
	}
	bool all_failed = true, all_said = true;
	for (int i = 0; i < 4; i++) {
		pthread_join(ths[i], NULL);
		all_failed = all_failed && !bs[i].a;
		all_said = all_said && strstr(bs[i].err.msg, "cannot fetch chunk 'sha256:") &&
			   strstr(bs[i].err.msg, "origin: missing");
		fs3_image_release(fs, bs[i].a);
	}
	ok(all_failed && all_said, "4 threads acquire an image with a chunk gone: each fails, naming it");
	ok(mounts_at(mnt) == 0 && access(mnt, F_OK) < 0 && access(layer_file, F_OK) < 0,
	   "... and leaves no mount, no mount point, no layer file");
	sh("mv '%s.away' '%s'", oc, oc);
	w = acquire(fs, "tar:gzip");
	ok(w && tree_matches(w->layers[0], src), "the chunk back, the next acquire works");
	fs3_image_release(fs, w);
	free(oc);
	free(layer_file);
	free(mnt);
	free(cache);
	free(origin);
}

int main(void)
{
	struct dsec_err err;
	struct fs3 *fs, *fs2;
	struct fs3_acquired *a;
	char d1[FS3_REF_LEN], *src;
	int rc;

	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root (mount, mknod, trusted xattrs)\n");
		return 0;
	}
	plan(NTESTS);
	t_setup();
	dsec_log_set_level(DSEC_LOG_ERROR);	/* the warnings here are expected */
	src = tpath("a");
	make_tree(src);

	fs = open_store("s", 0, FS3_MOUNTER, &rc);
	ok(fs != NULL, "the store opens as the mounter");
	if (!fs)
		return 1;
	fs2 = open_store("s", 0, FS3_MOUNTER, &rc);
	is_int(rc, -EBUSY, "a second mounter of the same store is refused");
	fs2 = open_store("s", 0, 0, &rc);
	ok(fs2 && fs3_image_acquire(fs2, "x", &a, &err) == -EPERM,
	   "a handle opened without FS3_MOUNTER cannot acquire");
	fs3_close(fs2);

	/* A directory round trip. */
	ok(import(fs, src, "dir:1", d1) == 0, "import a directory");
	a = acquire(fs, "dir:1");
	ok(a && a->nlayers == 1 && mounts_at(a->layers[0]) == 1 && !strcmp(a->lowerdir, a->layers[0]) &&
	   !strcmp(a->digest, d1), "acquire mounts its one layer");
	ok(a && tree_matches(a->layers[0], src), "files, owner and mode read back through the mount");
	char *probe = a ? xasprintf("%s/new", a->layers[0]) : xstrdup("/");
	ok(a && open(probe, O_WRONLY | O_CREAT, 0644) < 0 && errno == EROFS, "the layer is read-only");
	free(probe);
	char *mnt = a ? xstrdup(a->layers[0]) : xstrdup("");
	fs3_image_release(fs, a);
	ok(mounts_at(mnt) == 0 && access(mnt, F_OK) < 0, "release unmounts the last user's layer");

	/* Tars, plain, gzip and zstd. */
	static const char *const tflags[] = { "-cf", "-czf", "--zstd -cf" };
	static const char *const tname[] = { "plain", "gzip", "zstd" };
	for (int i = 0; i < 3; i++) {
		char *tar = tpath("a-%s.tar", tname[i]), *tag = xasprintf("tar:%s", tname[i]);
		struct fs3_acquired *t = NULL;
		if (sh("tar --numeric-owner -C '%s' %s '%s' .", src, tflags[i], tar) == 0 &&
		    import(fs, tar, tag, NULL) == 0)
			t = acquire(fs, tag);
		ok(t && tree_matches(t->layers[0], src), "a %s tar round-trips", tname[i]);
		fs3_image_release(fs, t);
		free(tar);
		free(tag);
	}

	test_whiteouts(fs);

	/* Several threads acquire one cold image: one mount, shared. */
	char hex[FS3_HEX_LEN + 1];
	struct fs3_image_info info;
	fs3_image_inspect(fs, "dir:1", &info, &err);
	memcpy(hex, info.layers[0].digest + 7, FS3_HEX_LEN + 1);
	fs3_image_info_clear(&info);
	char *layer_file = tpath("s/layers/%s.erofs", hex);
	unlink(layer_file);
	struct racer rs[NTHREADS];
	pthread_t th[NTHREADS];
	for (int i = 0; i < NTHREADS; i++) {
		rs[i] = (struct racer){ fs, i % 2 ? "dir:1" : d1, NULL };
		pthread_create(&th[i], NULL, race, &rs[i]);
	}
	bool all = true, same = true;
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(th[i], NULL);
		all = all && rs[i].a;
		same = same && rs[i].a && rs[0].a && !strcmp(rs[i].a->layers[0], rs[0].a->layers[0]);
	}
	ok(all && same, "%d threads acquire the cold image, by tag and by digest", NTHREADS);
	ok(all && mounts_at(rs[0].a->layers[0]) == 1, "... and its layer is mounted once");
	free(mnt);
	mnt = xstrdup(all ? rs[0].a->layers[0] : "");
	for (int i = 0; i < NTHREADS - 1; i++)
		fs3_image_release(fs, rs[i].a);
	ok(mounts_at(mnt) == 1 && tree_matches(mnt, src), "released by all but one, it stays mounted");
	fs3_image_release(fs, rs[NTHREADS - 1].a);
	ok(mounts_at(mnt) == 0, "released by the last, it is unmounted");
	free(mnt);

	test_waiting(fs, src);

	/* Released while an overlay still stacks on it: detached, not broken. */
	a = acquire(fs, "tar:plain");
	/* Without an upper dir overlayfs wants two lower ones: add an empty one. */
	char *ov = tpath("ov"), *empty = tpath("ov-empty");
	char *ovopts = a ? xasprintf("lowerdir=%s:%s", a->lowerdir, empty) : xstrdup("");
	dsec_mkdir_p(ov, 0755);
	dsec_mkdir_p(empty, 0755);
	mnt = xstrdup(a ? a->layers[0] : "");
	rc = a ? mount("overlay", ov, "overlay", MS_RDONLY, ovopts) : -1;
	fs3_image_release(fs, a);
	ok(rc == 0 && mounts_at(mnt) == 0 && tree_matches(ov, src),
	   "a layer released under a live overlay is detached; the overlay still reads");
	umount(ov);
	free(ov), free(empty), free(ovopts), free(mnt);

	/* A chunk corrupt in the cache while the layer is cold. */
	char *cache = tpath("s/cache");
	struct dsec_buf chunks;
	dsec_buf_init(&chunks);
	fs3_store_walk(cache, FS3_CHUNK, collect, &chunks);
	unlink(layer_file);
	for (size_t i = 0; i < chunks.len / sizeof(struct fs3_digest); i++) {
		char *p = fs3_store_path(cache, FS3_CHUNK, (struct fs3_digest *)chunks.data + i);
		sh("printf XXXX | dd of='%s' bs=1 seek=30 conv=notrunc status=none", p);
		free(p);
	}
	a = acquire(fs, "dir:1");
	ok(a && tree_matches(a->layers[0], src), "with every cached chunk corrupt, acquire refetches "
	   "from the origin and the files read right");
	fs3_image_release(fs, a);
	dsec_buf_free(&chunks);

	/* gc around an acquired image whose tag is gone. */
	struct fs3_gc_res g;
	char dz[FS3_REF_LEN];
	a = acquire(fs, "dir:1");
	ok(a && fs3_untag(fs, "dir:1", &err) == 0 && fs3_gc(fs, &g, &err) == 0,
	   "untag an acquired image and gc");
	ok(a && fs3_image_inspect(fs, d1, &info, &err) == 0 && tree_matches(a->layers[0], src),
	   "... its manifest, index and chunks stay, the mount reads");
	fs3_image_info_clear(&info);
	ok(access(layer_file, F_OK) == 0, "... and its layer file stays");
	memcpy(dz, d1, sizeof(dz));
	fs3_image_release(fs, a);
	rc = fs3_gc(fs, &g, &err);
	ok(rc == 0 && g.removed > 0 && g.layers_removed >= 1,
	   "released, the next gc removes it (%llu objects, %llu layer files)",
	   (unsigned long long)g.removed, (unsigned long long)g.layers_removed);
	ok(fs3_image_inspect(fs, dz, &info, &err) == -ENOENT && access(layer_file, F_OK) < 0,
	   "... manifest and layer file gone");
	ok((a = acquire(fs, "tar:gzip")) != NULL, "the tagged images still acquire after gc");
	fs3_image_release(fs, a);
	fs3_close(fs);

	/* Eviction: a tiny cache; chunks of an acquired image are pinned. */
	char *e1 = tpath("e1"), *e2 = tpath("e2"), *e3 = tpath("e3"), *p;
	p = xasprintf("%s/f", e1), put_random(p, 400 << 10, 11), free(p);
	p = xasprintf("%s/f", e2), put_random(p, 400 << 10, 12), free(p);
	p = xasprintf("%s/f", e3), put_random(p, 400 << 10, 13), free(p);
	fs = open_store("ev", 128 << 10, FS3_MOUNTER, &rc);
	char *evc = tpath("ev/cache");
	struct dsec_buf set1, after;
	dsec_buf_init(&set1);
	dsec_buf_init(&after);
	ok(fs && import(fs, e1, "e:1", NULL) == 0, "import into a store whose cache holds 128 KiB");
	uint64_t bytes = 0;
	fs3_store_walk(evc, FS3_CHUNK, sum_size, &bytes);
	ok(bytes <= (128 << 10), "... the cache was trimmed under its cap at once (%llu bytes)",
	   (unsigned long long)bytes);
	a = acquire(fs, "e:1");
	dsec_buf_reset(&set1);
	fs3_store_walk(evc, FS3_CHUNK, collect, &set1);
	ok(a && set1.len / sizeof(struct fs3_digest) > 4,
	   "acquire refills the cache with the layer's %zu chunks, over the cap",
	   set1.len / sizeof(struct fs3_digest));
	ok(import(fs, e2, "e:2", NULL) == 0 && all_present(evc, &set1),
	   "importing more under pressure evicts none of the acquired image's chunks");
	fs3_store_walk(evc, FS3_CHUNK, collect, &after);
	is_int(after.len, set1.len, "... and keeps none of the new image's");
	fs3_image_release(fs, a);
	ok(import(fs, e3, "e:3", NULL) == 0 && !all_present(evc, &set1),
	   "released, its chunks are evicted by the next import");
	fs3_close(fs);
	dsec_buf_free(&set1);
	dsec_buf_free(&after);
	free(e1), free(e2), free(e3), free(evc);

	/* A mounter killed with layers mounted; the next one cleans up. */
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		struct fs3 *k = open_store("s", 0, FS3_MOUNTER, &rc);
		if (k && acquire(k, "tar:plain"))
			_exit(0);
		_exit(1);
	}
	int st;
	waitpid(pid, &st, 0);
	fs = open_store("s", 0, 0, &rc);
	fs3_image_inspect(fs, "tar:plain", &info, &err);
	char *stale = tpath("s/mnt/%s", info.layers[0].digest + 7);
	fs3_image_info_clear(&info);
	fs3_close(fs);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0 && mounts_at(stale) == 1,
	   "a mounter exits without closing: its mount is left");
	fs = open_store("s", 0, FS3_MOUNTER, &rc);
	p = tpath("s/acquired");
	DIR *dh = opendir(p);
	int left = 0;
	for (struct dirent *e; dh && (e = readdir(dh));)
		left += e->d_name[0] != '.';
	if (dh)
		closedir(dh);
	free(p);
	ok(fs && mounts_at(stale) == 0 && left == 0, "the next mounter unmounts it and forgets its acquires");

	a = acquire(fs, "tar:plain");
	fs3_close(fs);
	ok(a && mounts_at(stale) == 0, "fs3_close unmounts what is still acquired");
	fs3_acquired_free(a);	/* fs3_close gave it back; only its memory is left */
	free(stale);
	free(layer_file);
	free(cache);
	free(src);
	return done_testing();
}
