/* fs3-bench - cold start of a large image, on demand vs fetched whole first.
 *
 * Builds a tree of compressible files (SIZE MiB in all), imports it into a
 * temporary origin, picks a workload (every Nth file, about FRACTION of the
 * bytes), then, side by side in one run and each from a fresh empty store
 * (cache, layers) and an origin dropped from the page cache:
 *   on demand   acquire (FUSE + EROFS, metadata first) + workload
 *   full fetch  acquire with conf.full_fetch (whole layer assembled) + workload
 * and prints bytes moved from the origin (compressed chunk bytes), bytes the
 * workload read, the time to the first file read and the total.  Figures,
 * not pass/fail: never run by `make check`.  Needs root and /dev/fuse.
 *
 *   fs3-bench [-s SIZE_MIB] [-c CHUNK_KIB] [-r READAHEAD] [-f FRACTION] [-d DIR]
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs3.h"
#include "log.h"
#include "util.h"

/* One file of the tree. */
struct bfile {
	char *rel;		/* path below the tree */
	uint64_t size;		/* bytes */
};

/* The run's settings. */
struct bconf {
	uint64_t size;		/* bytes of the tree */
	uint32_t chunk;		/* chunk size of the import */
	int readahead;		/* on-demand read-ahead, chunks (-1 = none) */
	double fraction;	/* of the bytes the workload reads */
	const char *dir;	/* scratch directory */
};

/* One mode's figures. */
struct bres {
	double acquire, first, total;	/* seconds from start */
	uint64_t moved;			/* compressed bytes from the origin */
	uint64_t read;			/* bytes the workload read */
	struct fs3_stats st;		/* the handle's counters */
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Text-like bytes: 16 symbols, so zstd halves them about. */
static void fill(char *p, size_t n)
{
	for (size_t i = 0; i < n; i += 16) {
		uint64_t x = next();
		for (size_t j = 0; j < 16 && i + j < n; j++, x >>= 4)
			p[i + j] = "etaoinshrdlucmw "[x & 15];
	}
}

static struct bfile *make_tree(const char *tree, uint64_t total, size_t *nout)
{
	struct bfile *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t sum = 0;
	char *buf = xmalloc(4u << 20);

	while (sum < total) {
		uint64_t sz = (64u << 10) + next() % ((4u << 20) - (64u << 10));
		if (n == cap) {
			cap = cap ? 2 * cap : 256;
			v = xrealloc(v, cap * sizeof(*v));
		}
		v[n].rel = xasprintf("d%02zu/f%05zu", n % 32, n);
		v[n].size = sz;
		_cleanup_free_ char *d = xasprintf("%s/d%02zu", tree, n % 32);
		_cleanup_free_ char *p = xasprintf("%s/%s", tree, v[n].rel);
		dsec_mkdir_p(d, 0755);
		fill(buf, sz);
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || dsec_write_all(fd, buf, sz) < 0) {
			fprintf(stderr, "fs3-bench: cannot write '%s'\n", p);
			exit(1);
		}
		close(fd);
		sum += sz;
		n++;
	}
	free(buf);
	*nout = n;
	return v;
}

static int drop_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	int fd = type == FTW_F ? open(path, O_RDONLY) : -1;

	if (fd >= 0) {
		fdatasync(fd);
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
	}
	return 0;
}

/* Drops every file below dir from the page cache: a cold origin. */
static void drop_cache(const char *dir)
{
	nftw(dir, drop_one, 16, FTW_PHYS);
}

static uint64_t read_file(const char *path)
{
	static char buf[1u << 20];
	uint64_t got = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY);

	if (fd < 0) {
		fprintf(stderr, "fs3-bench: cannot open '%s': %s\n", path, strerror(errno));
		exit(1);
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		got += (uint64_t)n;
	if (n < 0) {
		fprintf(stderr, "fs3-bench: cannot read '%s': %s\n", path, strerror(errno));
		exit(1);
	}
	close(fd);
	return got;
}

static void run(const struct bconf *bc, bool full, const char *origin, struct bfile *work,
		size_t nwork, struct bres *res)
{
	_cleanup_free_ char *store = xasprintf("%s/node-%s", bc->dir, full ? "full" : "ondemand");
	struct fs3_conf c = { .store = store, .origin = origin, .chunk_size = bc->chunk,
			      .flags = FS3_MOUNTER, .full_fetch = full, .readahead = bc->readahead,
			      .cache_max = 64ull << 30 };
	struct fs3_acquired *a;
	struct dsec_err err;
	struct fs3 *fs;
	double t0;

	dsec_rm_rf(store);
	drop_cache(origin);
	if (fs3_open(&fs, &c, &err) < 0) {
		fprintf(stderr, "fs3-bench: %s\n", err.msg);
		exit(1);
	}
	memset(res, 0, sizeof(*res));
	t0 = now();
	if (fs3_image_acquire(fs, "bench", &a, &err) < 0) {
		fprintf(stderr, "fs3-bench: %s\n", err.msg);
		exit(1);
	}
	res->acquire = now() - t0;
	for (size_t i = 0; i < nwork; i++) {
		_cleanup_free_ char *p = xasprintf("%s/%s", a->layers[0], work[i].rel);
		res->read += read_file(p);
		if (i == 0)
			res->first = now() - t0;
	}
	res->total = now() - t0;
	fs3_get_stats(fs, &res->st);
	res->moved = res->st.src_bytes;
	fs3_image_release(fs, a);
	fs3_close(fs);
	dsec_rm_rf(store);
}

static void usage(void)
{
	fprintf(stderr, "usage: fs3-bench [-s SIZE_MIB] [-c CHUNK_KIB] [-r READAHEAD] "
			"[-f FRACTION] [-d DIR]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct bconf bc = { .size = 1100ull << 20, .chunk = 1u << 20, .readahead = 4,
			    .fraction = 0.05, .dir = "/tmp/ondemand-bench" };
	struct fs3_import_opts io = { .tag = "bench" };
	struct fs3_import_res ir;
	struct bres od, ff;
	struct dsec_err err;
	struct fs3 *imp;
	int opt;

	while ((opt = getopt(argc, argv, "s:c:r:f:d:")) != -1) {
		switch (opt) {
		case 's': bc.size = strtoull(optarg, NULL, 10) << 20; break;
		case 'c': bc.chunk = (uint32_t)strtoul(optarg, NULL, 10) << 10; break;
		case 'r': bc.readahead = atoi(optarg) ? atoi(optarg) : -1; break;
		case 'f': bc.fraction = atof(optarg); break;
		case 'd': bc.dir = optarg; break;
		default: usage();
		}
	}
	if (optind != argc || bc.fraction <= 0 || bc.fraction > 1)
		usage();
	dsec_log_set_level(DSEC_LOG_WARN);
	dsec_rm_rf(bc.dir);
	_cleanup_free_ char *tree = xasprintf("%s/tree", bc.dir);
	_cleanup_free_ char *origin = xasprintf("%s/origin", bc.dir);
	_cleanup_free_ char *istore = xasprintf("%s/import", bc.dir);
	size_t n, nwork = 0;
	double t = now();
	struct bfile *files = make_tree(tree, bc.size, &n);
	printf("tree: %zu files, %.0f MiB, made in %.1f s\n", n, bc.size / 1048576.0, now() - t);

	struct fs3_conf ic = { .store = istore, .origin = origin, .chunk_size = bc.chunk };
	t = now();
	if (fs3_open(&imp, &ic, &err) < 0 || fs3_import(imp, tree, &io, &ir, &err) < 0) {
		fprintf(stderr, "fs3-bench: %s\n", err.msg);
		return 1;
	}
	fs3_close(imp);
	dsec_rm_rf(istore);
	dsec_rm_rf(tree);	/* the node has only the origin */
	printf("import: layer %.0f MiB, %llu chunks of ~%u KiB, %.0f MiB stored, %.1f s\n",
	       ir.logical / 1048576.0, (unsigned long long)ir.chunks, bc.chunk >> 10,
	       ir.stored / 1048576.0, now() - t);

	/* Every Nth file, starting in the middle of the first stride. */
	size_t stride = (size_t)(1 / bc.fraction + 0.5);
	struct bfile *work = xcalloc(n / stride + 1, sizeof(*work));
	uint64_t wbytes = 0;
	for (size_t i = stride / 2; i < n; i += stride) {
		work[nwork++] = files[i];
		wbytes += files[i].size;
	}
	printf("workload: %zu files, %.1f MiB (%.1f %% of the image), read-ahead %d chunks\n",
	       nwork, wbytes / 1048576.0, 100.0 * wbytes / ir.logical,
	       bc.readahead < 0 ? 0 : bc.readahead);

	run(&bc, false, origin, work, nwork, &od);
	run(&bc, true, origin, work, nwork, &ff);

	printf("\n%-12s %14s %14s %10s %10s %10s\n", "mode", "origin MiB", "workload MiB",
	       "acquire s", "first s", "total s");
	printf("%-12s %14.1f %14.1f %10.3f %10.3f %10.3f\n", "on-demand", od.moved / 1048576.0,
	       od.read / 1048576.0, od.acquire, od.first, od.total);
	printf("%-12s %14.1f %14.1f %10.3f %10.3f %10.3f\n", "full-fetch", ff.moved / 1048576.0,
	       ff.read / 1048576.0, ff.acquire, ff.first, ff.total);
	printf("\non demand: %llu chunks fetched (%.1f MiB uncompressed, %llu by read-ahead), "
	       "%llu FUSE reads\n", (unsigned long long)od.st.od_chunks,
	       od.st.od_chunk_bytes / 1048576.0, (unsigned long long)od.st.od_readahead,
	       (unsigned long long)od.st.od_reads);
	printf("bytes moved / bytes read: on-demand %.2fx (uncompressed %.2fx), full-fetch %.2fx\n",
	       (double)od.moved / od.read, (double)od.st.od_chunk_bytes / od.read,
	       (double)ff.moved / ff.read);
	printf("first read: on-demand %.1fx sooner; total: %.1fx faster\n", ff.first / od.first,
	       ff.total / od.total);

	for (size_t i = 0; i < n; i++)
		free(files[i].rel);
	free(files);
	free(work);
	dsec_rm_rf(bc.dir);
	return 0;
}
