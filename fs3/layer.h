/* layer.h - a layer's EROFS image to chunks and back.
 *
 * Chunks are content-defined on EROFS block boundaries: the image is read in
 * 4 KiB blocks and a chunk ends after a block whose hash has its low bits
 * zero (so about every chunk_size bytes), never before chunk_size/4 and never
 * after 4 x chunk_size.  A file added to a tree shifts the data behind it by
 * whole blocks; the cuts shift with it, so the chunks of two overlapping
 * trees are mostly the same objects, stored once.
 */
#ifndef FS3_LAYER_H
#define FS3_LAYER_H

#include "image.h"
#include "store.h"

#define FS3_BLOCK 4096u

/* Counts of one put. */
struct fs3_layer_stats {
	uint64_t logical;	/* bytes of the image */
	uint64_t stored;	/* compressed bytes newly written to the origin */
	uint64_t chunks;	/* chunks cut */
	uint64_t new_chunks;	/* chunks the origin did not have */
};

/* Cuts the image at path into chunks, stores them and the index; fills
 * out (digest, index, size) and adds to stats. */
int fs3_layer_put(struct fs3_store *st, const char *path, uint32_t chunk_size,
		  struct fs3_layer_ref *out, struct fs3_layer_stats *stats, struct dsec_err *err);

/* Where the root inode of an EROFS image of size bytes is, from the
 * n >= 64 bytes of its superblock (at byte 1024): 0 and *root, or -EBADMSG
 * when sb is no EROFS superblock or points outside the image (the image
 * comes from the origin or a peer: any bytes). */
int fs3_erofs_root(const unsigned char *sb, size_t n, uint64_t size, uint64_t *root);

/* Fetches the layer's index into ix (caller frees with fs3_index_free). */
int fs3_layer_index(struct fs3_store *st, const struct fs3_layer_ref *l, struct fs3_index *ix,
		    struct dsec_err *err);

/* Assembles the layer's image at path (atomically, fsync'd) from verified
 * chunks, and checks the whole image against its digest. */
int fs3_layer_materialize(struct fs3_store *st, const struct fs3_layer_ref *l, const char *path,
			  struct dsec_err *err);

#endif
