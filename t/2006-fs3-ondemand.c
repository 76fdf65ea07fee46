/* 2006-fs3-ondemand - layers mounted before they are local: EROFS on a file
 * of the store's FUSE mount, chunks fetched as reads need them (and read
 * ahead), a corrupt chunk fails only its reads with EIO, the layer becomes
 * local and is then mounted from its file, close and a killed mounter leave
 * no mount.  Needs root (mount) and /dev/fuse. */
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>

#include "fs3-test.h"
#include "fs3.h"
#include "image.h"
#include "layer.h"
#include "store.h"

#define CHUNK (64u << 10)
#define NFILES 10
#define FILE_SIZE (1u << 20)
#define RA 4
#define NTESTS 23

static char *store, *origin, *src;

static struct fs3 *open_node(unsigned flags, int ra)
{
	struct fs3_conf c = { .store = store, .origin = origin, .chunk_size = CHUNK,
			      .flags = flags, .readahead = ra };
	struct dsec_err err;
	struct fs3 *fs = NULL;

	if (fs3_open(&fs, &c, &err) < 0)
		printf("# %s\n", err.msg);
	return fs;
}

/* Mounts whose mount point is below dir. */
static int mounts_below(const char *dir)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[4096], mp[4096];
	size_t n = strlen(dir);
	int c = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) == 1 && !strncmp(mp, dir, n) &&
		    mp[n] == '/')
			c++;
	if (f)
		fclose(f);
	return c;
}

/* Reads path whole: 0, or -errno of the failing read. */
static int read_whole(const char *path)
{
	char buf[65536];
	int fd = open(path, O_RDONLY), r = 0;
	ssize_t n;

	if (fd < 0)
		return -errno;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		;
	if (n < 0)
		r = -errno;
	close(fd);
	return r;
}

static int layer_state(struct fs3 *fs, const char *layer, size_t *present, size_t *total)
{
	return fs3_layer_local(fs, layer, present, total);
}

/* Index of the chunk of layer l (in the import store) holding the first
 * bytes of file path. */
static long chunk_of_file(struct fs3_store *st, const struct fs3_layer_ref *l, const char *path,
			  struct fs3_index *ix)
{
	char head[64];
	struct dsec_buf b;
	struct dsec_err err;
	long found = -1;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || read(fd, head, sizeof(head)) != sizeof(head)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	if (fs3_layer_index(st, l, ix, &err) < 0)
		return -1;
	dsec_buf_init(&b);
	for (size_t i = 0; i < ix->n && found < 0; i++)
		if (fs3_store_get(st, FS3_CHUNK, &ix->chunks[i].d, &b, "chunk", &err) == 0 &&
		    memmem(b.data, b.len, head, sizeof(head)))
			found = (long)i;
	dsec_buf_free(&b);
	return found;
}

int main(void)
{
	struct fs3_import_opts io = { .tag = "od" };
	struct fs3_import_res ires;
	struct fs3_image_info info;
	struct fs3_stats s0, s1;
	struct fs3_acquired *a = NULL, *a2 = NULL;
	struct dsec_err err;
	struct fs3 *imp, *fs;
	char layer[FS3_REF_LEN], type[64];
	size_t present = 0, total = 0;

	plan(NTESTS);
	if (geteuid() != 0 || access("/dev/fuse", R_OK | W_OK) < 0) {
		for (int i = 0; i < NTESTS; i++)
			skip("needs root and /dev/fuse");
		return 0;
	}
	dsec_log_set_level(getenv("T2006_LOG") ? DSEC_LOG_DEBUG : DSEC_LOG_ERROR);	/* EIO logs */
	t_setup();
	store = tpath("node");
	origin = tpath("origin");
	src = tpath("src");
	for (int i = 0; i < NFILES; i++) {
		char *p = tpath("src/f%d", i);
		put_random(p, FILE_SIZE, 100 + i);
		free(p);
	}
	{
		char *p = tpath("src/hello.txt");
		put_text(p, "hello on demand\n");
		free(p);
	}

	/* Import through another store, so that the node's cache is cold. */
	char *istore = tpath("import");
	struct fs3_conf ic = { .store = istore, .origin = origin, .chunk_size = CHUNK };
	if (fs3_open(&imp, &ic, &err) < 0 || fs3_import(imp, src, &io, &ires, &err) < 0 ||
	    fs3_image_inspect(imp, "od", &info, &err) < 0) {
		printf("Bail out! %s\n", err.msg);
		return 1;
	}
	memcpy(layer, info.layers[0].digest, FS3_REF_LEN);
	struct fs3_layer_ref lref = { .size = info.layers[0].size };
	fs3_digest_parse(info.layers[0].digest, &lref.digest);
	fs3_digest_parse(info.layers[0].index, &lref.index);
	fs3_image_info_clear(&info);

	fs = open_node(FS3_MOUNTER, RA);
	ok(fs && fs3_image_acquire(fs, "od", &a, &err) == 0, "a cold image is acquired on demand");
	if (!a) {
		printf("Bail out! %s\n", err.msg);
		return 1;
	}
	char *fusedir = xasprintf("%s/fuse", store);
	char *fsrc = mount_source(fusedir, type);
	ok(fsrc && !strcmp(type, "fuse.fs3"), "the store's FUSE mount is at STORE/fuse (%s)",
	   fsrc ? type : "none");
	char *esrc = mount_source(a->layers[0], type);
	ok(esrc && !strcmp(type, "erofs") && !strncmp(esrc, fusedir, strlen(fusedir)),
	   "the layer is EROFS mounted on its FUSE file (%s)", esrc ? esrc : "none");
	free(fsrc);
	free(esrc);
	int ls = layer_state(fs, layer, &present, &total);
	ok(ls == 0 && present > 0 && present <= 4,
	   "the mount fetched only the metadata chunks (%zu of %zu)", present, total);

	/* One file: its chunks, and read-ahead of the next ones. */
	fs3_get_stats(fs, &s0);
	char *f3 = xasprintf("%s/f3", a->layers[0]), *s3 = tpath("src/f3");
	ok(same_file(f3, s3), "a file reads back through FUSE");
	for (int i = 0; i < 100; i++) {	/* let read-ahead finish */
		fs3_get_stats(fs, &s1);
		if (s1.od_readahead >= RA)
			break;
		usleep(20000);
	}
	fs3_get_stats(fs, &s1);
	uint64_t moved = s1.od_chunk_bytes - s0.od_chunk_bytes;
	ok(moved >= FILE_SIZE && moved <= FILE_SIZE + (2 + RA) * 4 * CHUNK,
	   "reading it fetched about its own chunks (%llu bytes for %u)",
	   (unsigned long long)moved, FILE_SIZE);
	layer_state(fs, layer, &present, &total);
	ok(present < total / 2, "... and not the rest of the layer (%zu of %zu chunks)", present,
	   total);
	ok(s1.od_readahead >= RA, "read-ahead fetched chunks ahead of the reader (%llu)",
	   (unsigned long long)s1.od_readahead);
	ok(s1.src_bytes > s0.src_bytes,
	   "compressed bytes came from the origin (%llu)",
	   (unsigned long long)(s1.src_bytes - s0.src_bytes));

	/* A corrupt chunk in the origin: EIO for its reads, others go on. */
	struct fs3_store ist;
	_cleanup_free_ char *icache = xasprintf("%s/cache", istore);
	struct fs3_index ix = { 0 };
	fs3_store_init(&ist, icache, origin, 0);
	char *s7 = tpath("src/f7"), *f7 = xasprintf("%s/f7", a->layers[0]);
	long ci = chunk_of_file(&ist, &lref, s7, &ix);
	char *ocp = ci >= 0 ? fs3_store_path(origin, FS3_CHUNK, &ix.chunks[ci].d) : NULL;
	ok(ocp && sh("mv '%s' '%s.good' && head -c 70000 /dev/urandom > '%s'", ocp, ocp, ocp) == 0,
	   "a chunk of f7 is corrupted in the origin (chunk %ld)", ci);
	fs3_get_stats(fs, &s0);
	int rr = read_whole(f7);
	fs3_get_stats(fs, &s1);
	ok(rr == -EIO && s1.od_errors > s0.od_errors, "reading f7 fails with EIO (%s)",
	   strerror(-rr));
	char *f5 = xasprintf("%s/f5", a->layers[0]), *s5 = tpath("src/f5");
	char *h = xasprintf("%s/hello.txt", a->layers[0]), *hs = NULL;
	size_t hn;
	ok(same_file(f5, s5) && dsec_read_file(h, &hs, &hn) == 0 && !strcmp(hs, "hello on demand\n"),
	   "other files still read");
	free(hs);
	ok(ocp && sh("mv '%s.good' '%s'", ocp, ocp) == 0 && same_file(f7, s7),
	   "once the origin has a good copy, f7 reads (the chunk is fetched again)");
	free(ocp);
	fs3_index_free(&ix);
	fs3_store_fini(&ist);

	/* Fill: the layer becomes local; existing mounts go on, a new mount
	 * uses the local file. */
	ok(fs3_image_acquire(fs, "od", &a2, &err) == 0, "a second acquire shares the FUSE-backed mount");
	ok(fs3_layer_fill(fs, layer) == 0, "a background fill starts");
	int st = -1;
	for (int i = 0; i < 1000 && (st = layer_state(fs, layer, &present, &total)) != 1; i++)
		usleep(20000);
	char *lfile = xasprintf("%s/layers/%s.erofs", store, layer + 7);
	ok(st == 1 && access(lfile, R_OK) == 0, "the layer became local (%s)", lfile);
	char *f9 = xasprintf("%s/f9", a2->layers[0]), *s9 = tpath("src/f9");
	ok(same_file(f9, s9), "the existing mount still reads");
	fs3_image_release(fs, a);
	fs3_image_release(fs, a2);
	a = a2 = NULL;
	esrc = fs3_image_acquire(fs, "od", &a, &err) == 0 ? mount_source(a->layers[0], type) : NULL;
	ok(esrc && !strcmp(esrc, lfile), "a new acquire mounts the local file (%s)",
	   esrc ? esrc : "none");
	free(esrc);
	fs3_image_release(fs, a);
	a = NULL;
	fs3_close(fs);
	ok(mounts_below(store) == 0, "fs3_close leaves no FUSE or EROFS mount");

	/* A killed mounter leaves a dead FUSE mount; the next open cleans it. */
	unlink(lfile);	/* on demand again */
	int pfd[2];
	if (pipe(pfd) < 0)
		return 1;
	pid_t pid = fork();
	if (pid == 0) {
		struct fs3 *cfs = open_node(FS3_MOUNTER, RA);
		struct fs3_acquired *ca;
		if (cfs && fs3_image_acquire(cfs, "od", &ca, &err) == 0) {
			char *cf = xasprintf("%s/f1", ca->layers[0]);
			if (read_whole(cf) == 0 && write(pfd[1], "x", 1) == 1)
				pause();
		}
		_exit(1);
	}
	char c;
	close(pfd[1]);
	bool child_ok = read(pfd[0], &c, 1) == 1;
	close(pfd[0]);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	ok(child_ok && mounts_below(store) >= 2, "a killed mounter left its mounts (%d)",
	   mounts_below(store));
	fs = open_node(FS3_MOUNTER, RA);
	ok(fs && mounts_below(store) == 0, "the next open cleaned them (FUSE starts at first need)");
	char *f1 = NULL, *s1p = tpath("src/f1");
	fsrc = NULL;
	ok(fs && fs3_image_acquire(fs, "od", &a, &err) == 0 &&
	   (f1 = xasprintf("%s/f1", a->layers[0])) && same_file(f1, s1p) &&
	   (fsrc = mount_source(fusedir, type)) && !strcmp(type, "fuse.fs3"),
	   "and serves the layer on demand again");
	free(fsrc);
	fs3_image_release(fs, a);
	fs3_close(fs);
	ok(mounts_below(store) == 0, "no mount is left");

	fs3_close(imp);
	free(f1), free(s1p), free(f3), free(s3), free(f5), free(s5), free(f7), free(s7);
	free(f9), free(s9), free(h), free(lfile), free(fusedir), free(istore);
	free(store), free(origin), free(src);
	return done_testing();
}
