/* fs3-oci - libFuzzer target: fs3_oci_read on an image layout an archive
 * brings (OCI: oci-layout, index.json, nested indexes, manifests, configs;
 * or docker save's manifest.json and config), read with jansson: the
 * descriptors, digests, paths and config fields a hostile archive shapes.
 *
 * Input: parts separated by a line "----".  The first byte of part 0 says
 * the layout ('o': OCI, its index.json is part 0's rest; else docker, its
 * manifest.json); every other part i is written both as the blob named
 * by its sha256 and as the file "pI" (docker's relative names). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs3.h"
#include "oci.h"
#include "log.h"
#include "store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *top;

static void cleanup(void)
{
	dsec_rm_rf(top);
}

static void put(const char *dir, const char *name, const void *p, size_t n)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", dir, name);

	if (fs3_write_atomic(path, p, n, false) < 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char sep[] = "\n----\n";
	static unsigned long seq;
	char ref[FS3_REF_LEN];
	struct fs3_image_config cfg;
	struct fs3_digest d;
	struct dsec_err err;
	const char *format;
	char **layers = NULL;

	if (!top) {
		char tmpl[] = "/dev/shm/fs3-oci.XXXXXX", tmpl2[] = "/tmp/fs3-oci.XXXXXX";
		top = mkdtemp(tmpl) ? xstrdup(tmpl) : mkdtemp(tmpl2) ? xstrdup(tmpl2) : NULL;
		if (!top)
			abort();
		atexit(cleanup);
		dsec_log_set_level(DSEC_LOG_ERROR);	/* a corrupt copy is warned about */
	}
	if (size < 1)
		return 0;
	_cleanup_free_ char *dir = xasprintf("%s/%lu", top, seq++);
	_cleanup_free_ char *blobs = xasprintf("%s/blobs/sha256", dir);
	if (dsec_mkdir_p(blobs, 0755) < 0)
		abort();
	bool oci = data[0] == 'o';
	const uint8_t *p = data + 1, *end = data + size;
	for (int i = 0; p <= end && i < 64; i++) {
		const uint8_t *q = memmem(p, (size_t)(end - p), sep, sizeof(sep) - 1);
		size_t n = (size_t)((q ? q : end) - p);
		if (i == 0) {
			put(dir, oci ? "index.json" : "manifest.json", p, n);
		} else {
			_cleanup_free_ char *name = xasprintf("p%d", i);
			fs3_sha256(p, n, &d);
			fs3_digest_ref(&d, ref);
			put(blobs, ref + 7, p, n);
			put(dir, name, p, n);
		}
		if (!q)
			break;
		p = q + sizeof(sep) - 1;
	}
	if (oci)
		put(dir, "oci-layout", "{\"imageLayoutVersion\":\"1.0.0\"}", 30);
	dsec_err_clear(&err);
	if (fs3_oci_is_layout(dir) && fs3_oci_read(dir, &layers, &cfg, &format, &err) == 0) {
		dsec_strv_free(layers);
		fs3_image_config_free(&cfg);
	}
	dsec_rm_rf(dir);
	return 0;
}
