/* fs3-object - libFuzzer target: a stored object as a tier hands it over
 * (zstd-compressed bytes from the origin, a peer or the cache), read from
 * the cache tier (fs3_store_local: size caps, decompression, digest check,
 * removal of a bad copy), then decoded as its kind: an index, a manifest,
 * or a layer's first chunk (the EROFS superblock on-demand mounts read).
 *
 * Input: one byte (kind = b % 3; b & 0x80: file it under a wrong digest),
 * then the stored bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zstd.h>

#include "image.h"
#include "layer.h"
#include "log.h"
#include "store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fs3_store st;
static char *dir;

static void cleanup(void)
{
	dsec_rm_rf(dir);
}

static void setup(void)
{
	char tmpl[] = "/dev/shm/fs3-object.XXXXXX", tmpl2[] = "/tmp/fs3-object.XXXXXX";

	dir = mkdtemp(tmpl) ? xstrdup(tmpl) : mkdtemp(tmpl2) ? xstrdup(tmpl2) : NULL;
	if (!dir)
		abort();
	atexit(cleanup);
	dsec_log_set_level(DSEC_LOG_ERROR);	/* a corrupt copy is warned about */
	_cleanup_free_ char *c = xasprintf("%s/cache", dir), *o = xasprintf("%s/origin", dir);
	if (fs3_store_init(&st, c, o, 0) < 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fs3_digest d;
	struct dsec_buf z, plain;

	if (!dir)
		setup();
	if (size < 1)
		return 0;
	enum fs3_kind kind = (enum fs3_kind)(data[0] % 3);
	/* The digest the content has, if it decompresses, so that the good
	 * path is reached too. */
	unsigned long long n = ZSTD_getFrameContentSize(data + 1, size - 1);
	dsec_buf_init(&plain);
	fs3_sha256(data + 1, size - 1, &d);
	if (!(data[0] & 0x80) && n != ZSTD_CONTENTSIZE_ERROR && n != ZSTD_CONTENTSIZE_UNKNOWN &&
	    n <= FS3_OBJECT_MAX) {
		dsec_buf_grow(&plain, (size_t)n);
		size_t r = ZSTD_decompress(plain.data, (size_t)n, data + 1, size - 1);
		if (!ZSTD_isError(r))
			fs3_sha256(plain.data, r, &d);
	}
	_cleanup_free_ char *p = fs3_store_path(st.cache, kind, &d);
	if (fs3_write_atomic(p, data + 1, size - 1, false) < 0)
		abort();
	dsec_buf_init(&z);
	if (fs3_store_local(&st, kind, &d, &z) == 0) {
		/* Good: what the tier gave decodes (or not) as its kind. */
		size_t len = ZSTD_getFrameContentSize(z.data, z.len);
		dsec_buf_grow(&plain, len);
		len = ZSTD_decompress(plain.data, len, z.data, z.len);
		if (ZSTD_isError(len))
			abort();	/* it was verified */
		if (kind == FS3_INDEX) {
			struct fs3_index ix;
			if (fs3_index_decode(plain.data, len, &ix) == 0)
				fs3_index_free(&ix);
		} else if (kind == FS3_MANIFEST) {
			struct fs3_manifest m;
			if (fs3_manifest_decode(plain.data, len, &m) == 0)
				fs3_manifest_free(&m);
		} else if (len >= 1024 + 128) {
			uint64_t root;
			fs3_erofs_root((const unsigned char *)plain.data + 1024, 128, len, &root);
		}
	}
	unlink(p);
	dsec_buf_free(&z);
	dsec_buf_free(&plain);
	return 0;
}
