/* image.h - fs3's formats: chunk indexes, manifests, tag names.
 *
 * Both are msgpack maps with their keys in a fixed order, so that the same
 * content always encodes to the same bytes and so to the same digest:
 *
 *   index    {"v": 1, "layer": bin32, "size": u64, "chunks": [[bin32, u32], ...]}
 *   manifest {"v": 1, "layers": [{"digest": bin32, "index": bin32, "size": u64}, ...],
 *             "config": {"env": [str...], "cwd": str, "user": str, "entrypoint": [str...]}}
 *
 * Layers in a manifest are bottom first (as OCI lists them).  Decoding is
 * strict: a wrong version, a missing key or a wrong type is -EBADMSG.
 */
#ifndef FS3_IMAGE_H
#define FS3_IMAGE_H

#include "fs3.h"
#include "store.h"

#define FS3_FORMAT_VERSION 1

/* One chunk of a layer, in order. */
struct fs3_chunk_ref {
	struct fs3_digest d;	/* digest of the chunk's bytes */
	uint32_t len;		/* its length */
};

/* A layer's chunk list. */
struct fs3_index {
	struct fs3_digest layer;	/* digest of the whole EROFS image */
	uint64_t size;			/* its length, = sum of the chunk lengths */
	struct fs3_chunk_ref *chunks;	/* in order */
	size_t n;			/* entries in chunks */
};

/* A layer as a manifest lists it. */
struct fs3_layer_ref {
	struct fs3_digest digest;	/* of the EROFS image */
	struct fs3_digest index;	/* of its chunk index object */
	uint64_t size;			/* bytes of the EROFS image */
};

/* An image. */
struct fs3_manifest {
	struct fs3_layer_ref *layers;	/* bottom first */
	size_t n;			/* entries in layers */
	struct fs3_image_config config;	/* run configuration */
};

void fs3_index_encode(const struct fs3_index *ix, struct dsec_buf *out);
int fs3_index_decode(const void *p, size_t n, struct fs3_index *ix);
void fs3_index_free(struct fs3_index *ix);

void fs3_manifest_encode(const struct fs3_manifest *m, struct dsec_buf *out);
int fs3_manifest_decode(const void *p, size_t n, struct fs3_manifest *m);
void fs3_manifest_free(struct fs3_manifest *m);

/* Deep copy of a config; NULL members of src become empty. */
void fs3_config_copy(struct fs3_image_config *dst, const struct fs3_image_config *src);

/* Checks "name[:tag]" and returns the file name it is kept under in
 * ORIGIN/tags ("name" with '/' as '+', ':', tag; tag defaults to "latest"),
 * or NULL if it is not a valid tag.  Caller frees. */
char *fs3_tag_file(const char *ref);
/* The reverse: "name:tag" from a file name (caller frees), NULL if invalid. */
char *fs3_tag_from_file(const char *file);

#endif
