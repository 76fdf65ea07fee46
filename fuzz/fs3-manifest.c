/* fs3-manifest - libFuzzer target: fs3_manifest_decode, an image manifest
 * as the origin, a peer or the cache hands it over (a hostile origin names
 * its own bytes: any bytes get here), and what an import or a snapshot
 * does with its config (copy, merge over another).  What decodes must
 * encode to bytes that decode to the same manifest. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same_strv(char *const *a, char *const *b)
{
	size_t i;

	for (i = 0; a[i] && b[i]; i++)
		if (strcmp(a[i], b[i]))
			return false;
	return !a[i] && !b[i];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fs3_manifest a, b;
	struct fs3_image_config copy, merged;
	struct dsec_buf enc;

	if (fs3_manifest_decode(data, size, &a) < 0)
		return 0;
	dsec_buf_init(&enc);
	fs3_manifest_encode(&a, &enc);
	if (fs3_manifest_decode(enc.data, enc.len, &b) < 0 || a.n != b.n ||
	    (a.n && memcmp(a.layers, b.layers, a.n * sizeof(*a.layers))) ||
	    strcmp(a.config.cwd, b.config.cwd) || strcmp(a.config.user, b.config.user) ||
	    !same_strv(a.config.env, b.config.env) ||
	    !same_strv(a.config.entrypoint, b.config.entrypoint))
		abort();
	fs3_config_copy(&copy, &a.config);
	fs3_config_merge(&merged, &copy, &b.config);
	if (!same_strv(merged.entrypoint, a.config.entrypoint))
		abort();
	fs3_image_config_free(&merged);
	fs3_image_config_free(&copy);
	fs3_manifest_free(&b);
	fs3_manifest_free(&a);
	dsec_buf_free(&enc);
	return 0;
}
