/* fs3-index - libFuzzer target: fs3_index_decode, a layer's chunk list as
 * the origin, a peer or the cache hands it over.  Its digest is checked
 * first, but a hostile origin names its own bytes, so any bytes get here.
 * What decodes must encode to bytes that decode to the same index. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fs3_index a, b;
	struct dsec_buf enc;

	if (fs3_index_decode(data, size, &a) < 0)
		return 0;
	dsec_buf_init(&enc);
	fs3_index_encode(&a, &enc);
	if (fs3_index_decode(enc.data, enc.len, &b) < 0 || a.n != b.n || a.size != b.size ||
	    memcmp(a.layer.b, b.layer.b, FS3_DIGEST_LEN) ||
	    (a.n && memcmp(a.chunks, b.chunks, a.n * sizeof(*a.chunks))))
		abort();
	fs3_index_free(&b);
	fs3_index_free(&a);
	dsec_buf_free(&enc);
	return 0;
}
