/* layer.c - content-defined chunking of EROFS images, and reassembly. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "layer.h"

/* A block's hash for the cut decision: not cryptographic, only well mixed
 * (the chunks themselves are named by SHA-256). */
static uint64_t block_hash(const unsigned char *p)
{
	uint64_t h = 0xcbf29ce484222325ull, w;

	for (unsigned i = 0; i < FS3_BLOCK; i += 8) {
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

/* Where the chunk that starts at p ends: len bytes are buffered, eof says
 * whether more follow. */
static size_t find_cut(const unsigned char *p, size_t len, bool eof, uint32_t avg)
{
	size_t min = avg / 4, max = (size_t)avg * 4;
	uint64_t mask = avg / FS3_BLOCK - 1;

	for (size_t off = min; off + FS3_BLOCK <= len && off + FS3_BLOCK <= max; off += FS3_BLOCK)
		if ((block_hash(p + off) & mask) == 0)
			return off + FS3_BLOCK;
	if (len >= max)
		return max;
	DSEC_ASSERT(eof);
	return len;
}

#define EROFS_MAGIC 0xE0F5E1E2u
#define EROFS_ISLOT 32

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int fs3_erofs_root(const unsigned char *sb, size_t n, uint64_t size, uint64_t *root)
{
	/* blkszbits at 12, root_nid (le16) at 14, meta_blkaddr (le32) at 40;
	 * the block size checked before it shifts anything. */
	if (n < 64 || le32(sb) != EROFS_MAGIC || sb[12] < 9 || sb[12] > 16)
		return -EBADMSG;
	*root = ((uint64_t)le32(sb + 40) << sb[12]) + (uint64_t)(sb[14] | sb[15] << 8) * EROFS_ISLOT;
	return *root < size ? 0 : -EBADMSG;
}

static char *layer_what(const struct fs3_digest *chunk, const struct fs3_digest *layer)
{
	char c[FS3_REF_LEN], l[FS3_REF_LEN];

	fs3_digest_ref(chunk, c);
	fs3_digest_ref(layer, l);
	return xasprintf("chunk '%s' of layer '%s'", c, l);
}

int fs3_layer_put(struct fs3_store *st, const char *path, uint32_t chunk_size,
		  struct fs3_layer_ref *out, struct fs3_layer_stats *stats, struct dsec_err *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t max = (size_t)chunk_size * 4, len = 0, got;
	unsigned char *buf;
	struct fs3_index ix = { 0 };
	size_t cap = 0;
	struct dsec_buf enc;
	EVP_MD_CTX *md;
	uint64_t stored;
	int r = 0;
	bool eof = false;

	if (fd < 0)
		return dsec_err_set(err, errno, "cannot open layer image '%s': %s", path, strerror(errno));
	buf = xmalloc(max);
	md = EVP_MD_CTX_new();
	if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
		DSEC_BUG("cannot set up sha256");
	for (;;) {
		if (!eof) {
			if ((r = fs3_read_full(fd, buf + len, max - len, &got)) < 0) {
				r = dsec_err_set(err, -r, "cannot read layer image '%s': %s", path,
						 strerror(-r));
				goto out;
			}
			eof = len + got < max;
			len += got;
		}
		if (len == 0)
			break;
		size_t cut = find_cut(buf, len, eof, chunk_size);
		if (ix.n == cap) {
			cap = cap ? 2 * cap : 64;
			ix.chunks = xrealloc(ix.chunks, cap * sizeof(*ix.chunks));
		}
		if ((r = fs3_store_put(st, FS3_CHUNK, buf, cut, &ix.chunks[ix.n].d, &stored)) < 0) {
			r = dsec_err_set(err, -r, "cannot store a chunk of '%s' in '%s': %s", path,
					 st->origin, strerror(-r));
			goto out;
		}
		EVP_DigestUpdate(md, buf, cut);
		ix.chunks[ix.n++].len = (uint32_t)cut;
		ix.size += cut;
		stats->chunks++;
		stats->new_chunks += stored > 0;
		stats->stored += stored;
		memmove(buf, buf + cut, len - cut);
		len -= cut;
	}
	EVP_DigestFinal_ex(md, ix.layer.b, NULL);
	stored = 0;
	dsec_buf_init(&enc);
	fs3_index_encode(&ix, &enc);
	if (enc.len > FS3_OBJECT_MAX)
		r = dsec_err_set(err, EFBIG, "cannot store layer '%s': too many chunks", path);
	else if ((r = fs3_store_put(st, FS3_INDEX, enc.data, enc.len, &out->index, &stored)) < 0)
		r = dsec_err_set(err, -r, "cannot store the index of '%s' in '%s': %s", path,
				 st->origin, strerror(-r));
	stats->stored += stored;
	dsec_buf_free(&enc);
	out->digest = ix.layer;
	out->size = ix.size;
	stats->logical += ix.size;
out:
	EVP_MD_CTX_free(md);
	free(buf);
	free(ix.chunks);
	return r;
}

int fs3_layer_index(struct fs3_store *st, const struct fs3_layer_ref *l, struct fs3_index *ix,
		    struct dsec_err *err)
{
	char lref[FS3_REF_LEN], iref[FS3_REF_LEN];
	struct dsec_buf b;
	int r;

	fs3_digest_ref(&l->digest, lref);
	fs3_digest_ref(&l->index, iref);
	_cleanup_free_ char *what = xasprintf("index '%s' of layer '%s'", iref, lref);
	dsec_buf_init(&b);
	r = fs3_store_get(st, FS3_INDEX, &l->index, &b, what, err);
	if (r == 0 && (fs3_index_decode(b.data, b.len, ix) < 0 ||
		       memcmp(ix->layer.b, l->digest.b, FS3_DIGEST_LEN) || ix->size != l->size)) {
		fs3_index_free(ix);
		r = dsec_err_set(err, EBADMSG, "cannot use %s: it describes another layer", what);
	}
	dsec_buf_free(&b);
	return r;
}

/* pwrite() all of p at off: 0 or -errno. */
static int pwrite_all(int fd, const void *p, size_t n, size_t off)
{
	while (n) {
		ssize_t w = pwrite(fd, p, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p = (const char *)p + w;
		n -= (size_t)w;
		off += (size_t)w;
	}
	return 0;
}

int fs3_layer_materialize(struct fs3_store *st, const struct fs3_layer_ref *l, const char *path,
			  struct dsec_err *err)
{
	_cleanup_free_ char *tmp = xasprintf("%s.tmp.%d", path, (int)getpid());
	char lref[FS3_REF_LEN];
	struct fs3_index ix;
	struct fs3_digest got;
	struct dsec_buf b;
	EVP_MD_CTX *md;
	int fd, r;

	fs3_digest_ref(&l->digest, lref);
	if ((r = fs3_layer_index(st, l, &ix, err)) < 0)
		return r;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		fs3_index_free(&ix);
		return dsec_err_set(err, errno, "cannot create '%s': %s", tmp, strerror(errno));
	}
	md = EVP_MD_CTX_new();
	if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
		DSEC_BUG("cannot set up sha256");
	dsec_buf_init(&b);
	/* Sized first: a chunk of zeros is left a hole. */
	if (ftruncate(fd, (off_t)ix.size) < 0)
		r = dsec_err_set(err, errno, "cannot write '%s': %s", tmp, strerror(errno));
	for (size_t i = 0, off = 0; i < ix.n && r == 0; off += ix.chunks[i++].len) {
		_cleanup_free_ char *what = layer_what(&ix.chunks[i].d, &l->digest);
		if ((r = fs3_store_get(st, FS3_CHUNK, &ix.chunks[i].d, &b, what, err)) < 0)
			break;
		if (b.len != ix.chunks[i].len) {
			r = dsec_err_set(err, EBADMSG, "cannot use %s: %zu bytes, the index says %u",
					 what, b.len, ix.chunks[i].len);
			break;
		}
		EVP_DigestUpdate(md, b.data, b.len);
		if (!fs3_is_zero(b.data, b.len) && (r = pwrite_all(fd, b.data, b.len, off)) < 0)
			r = dsec_err_set(err, -r, "cannot write '%s': %s", tmp, strerror(-r));
	}
	EVP_DigestFinal_ex(md, got.b, NULL);
	if (r == 0 && memcmp(got.b, l->digest.b, FS3_DIGEST_LEN))
		r = dsec_err_set(err, EBADMSG, "cannot assemble layer '%s': the image does not "
				 "match its digest", lref);
	if (r == 0 && fsync(fd) < 0)
		r = dsec_err_set(err, errno, "cannot write '%s': %s", tmp, strerror(errno));
	close(fd);
	if (r == 0 && rename(tmp, path) < 0)
		r = dsec_err_set(err, errno, "cannot rename '%s': %s", tmp, strerror(errno));
	if (r < 0)
		unlink(tmp);
	EVP_MD_CTX_free(md);
	dsec_buf_free(&b);
	fs3_index_free(&ix);
	return r;
}
