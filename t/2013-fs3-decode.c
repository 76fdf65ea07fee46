/* 2013-fs3-decode - fs3's decoders of what the origin, a peer or the cache
 * hands over, given hostile bytes: a manifest or an index whose array or
 * map header declares billions of elements is refused before msgpack-c
 * reserves room for them (it reserved 128 GiB for 5 bytes); real objects
 * still decode; an EROFS superblock with an absurd block size or a root
 * outside its image is refused before anything is shifted by it. */
#include <stdint.h>

#include "fs3-test.h"
#include "image.h"
#include "layer.h"

/* The largest allocation asked for while watching (malloc interposed;
 * not under AddressSanitizer, which owns malloc: make check-asan skips
 * this file). */
static size_t largest;
static bool watching;
#ifndef __SANITIZE_ADDRESS__

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t m);
void *__libc_realloc(void *p, size_t n);
void __libc_free(void *p);

static void note(size_t n)
{
	if (watching && n > largest)
		largest = n;
}

void *malloc(size_t n)
{
	note(n);
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
	note(m && n > SIZE_MAX / m ? SIZE_MAX : n * m);
	return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
	note(n);
	return __libc_realloc(p, n);
}

void free(void *p)
{
	__libc_free(p);
}
#endif

/* Decodes n bytes at p as a manifest (or an index): the result, and in
 * *big the largest allocation it asked for. */
static int decode(const void *p, size_t n, bool index, size_t *big)
{
	struct fs3_manifest m;
	struct fs3_index ix;
	int r;

	largest = 0;
	watching = true;
	r = index ? fs3_index_decode(p, n, &ix) : fs3_manifest_decode(p, n, &m);
	watching = false;
	*big = largest;
	if (r == 0 && index)
		fs3_index_free(&ix);
	else if (r == 0)
		fs3_manifest_free(&m);
	return r;
}

/* Two tests: the bytes are refused, and nothing big was reserved for them. */
static void refused(const void *p, size_t n, bool index, const char *what)
{
	size_t big;

	is_int(decode(p, n, index, &big), -EBADMSG, "%s is refused", what);
	ok(big < (1u << 20), "... without reserving room for them (largest allocation %zu bytes)",
	   big);
}

int main(void)
{
	struct fs3_manifest m = { 0 };
	struct fs3_index ix = { 0 };
	struct fs3_layer_ref l = { .size = 4096 };
	struct fs3_chunk_ref c = { .len = 4096 };
	struct dsec_buf b;
	size_t big;

#ifdef __SANITIZE_ADDRESS__
	printf("1..0 # SKIP interposes malloc, which AddressSanitizer owns\n");
	return 0;
#endif
	plan(10);
	dsec_buf_init(&b);

	/* {"v": 1, "layers": map32 of 2^32-1 entries, ... } cut short. */
	static const uint8_t man[] = { 0x83, 0xa1, 'v', 0x01, 0xa6, 'l', 'a', 'y', 'e', 'r', 's',
				       0xdf, 0xff, 0xff, 0xff, 0xff, 0xa0 };
	refused(man, sizeof(man), false, "a manifest declaring 2^32 layers in 17 bytes");
	/* {"v": 1, "layer": bin, "size": 0, "chunks": array32 of 2^32-1}. */
	static const uint8_t idx[] = { 0x84, 0xa1, 'v', 0x01, 0xa6, 'c', 'h', 'u', 'n', 'k', 's',
				       0xdd, 0xff, 0xff, 0xff, 0xff, 0x90 };
	refused(idx, sizeof(idx), true, "an index declaring 2^32 chunks");
	/* Deeply nested arrays: each declares one more than there is room for. */
	uint8_t nest[4096];
	for (size_t i = 0; i < sizeof(nest); i++)
		nest[i] = 0x9f;
	is_int(decode(nest, sizeof(nest), false, &big), -EBADMSG, "nested arrays longer than "
	       "their bytes are refused");

	/* What fs3 writes decodes. */
	m.layers = &l;
	m.n = 1;
	fs3_manifest_encode(&m, &b);
	is_int(decode(b.data, b.len, false, &big), 0, "a real manifest decodes");
	ix.chunks = &c;
	ix.n = 1;
	ix.size = 4096;
	fs3_index_encode(&ix, &b);
	is_int(decode(b.data, b.len, true, &big), 0, "a real index decodes");

	/* The EROFS superblock an on-demand mount reads first. */
	unsigned char sb[128] = { 0xe2, 0xe1, 0xf5, 0xe0 };
	uint64_t root = 0;
	sb[12] = 200;	/* blkszbits: 2^200-byte blocks */
	is_int(fs3_erofs_root(sb, sizeof(sb), 1 << 20, &root), -EBADMSG,
	       "a superblock with 2^200-byte blocks is refused");
	sb[12] = 12;
	sb[41] = 1;	/* meta_blkaddr 256: at the end of a 1 MiB image */
	is_int(fs3_erofs_root(sb, sizeof(sb), 1 << 20, &root), -EBADMSG,
	       "a root inode outside the image is refused");
	sb[41] = 0;
	sb[40] = 1;
	sb[14] = 2;	/* root_nid 2 */
	int r = fs3_erofs_root(sb, sizeof(sb), 1 << 20, &root);
	ok(r == 0 && root == 4096 + 64, "a good superblock gives its root inode's offset (%llu)",
	   (unsigned long long)root);
	dsec_buf_free(&b);
	return done_testing();
}
