/* store.h - fs3's content-addressed object store and its tiers.
 *
 * Every object (a layer's chunk, a layer's chunk index, an image manifest)
 * is named by the SHA-256 of its content and kept zstd-compressed in a file
 * KIND/ab/<hex> below a tier's directory.  A fetch reads the node's cache
 * first, then each source in order (the peers, then the origin, which is
 * always last), decompresses and verifies the digest; a corrupt, missing or
 * late copy is skipped, a good copy from a source is written back to the
 * cache.  Puts go to the origin (fsync'd: it is the copy that must not be
 * lost) and through to the cache.
 *
 * One fetch per object per node: a miss takes an flock on the object's
 * cache path + ".lock" before it asks the sources and looks in the cache
 * again once it has it, so that threads and processes (dsecd, dsecctl)
 * asking for the same cold object at once fetch it once; the others wait
 * for the first and read its copy.
 *
 * The cache has a size cap.  Chunks are its LRU entries: a hit touches the
 * file's mtime; fs3_store_evict() removes the oldest chunks that are not in
 * the pinned set until the cache is under its cap.  Nothing here locks: the
 * caller (the handle, fs3_int.h) serialises threads and processes.
 */
#ifndef FS3_STORE_H
#define FS3_STORE_H

#include <stdint.h>
#include <stdbool.h>

#include "err.h"
#include "fs3.h"
#include "util.h"

#define FS3_DIGEST_LEN 32
#define FS3_HEX_LEN 64
/* Largest object fs3 stores or accepts from a tier: chunks are at most
 * 4 x the chunk size, whose cap is 4 MiB, so 16 MiB. */
#define FS3_OBJECT_MAX (16u << 20)

/* A SHA-256 digest. */
struct fs3_digest {
	uint8_t b[FS3_DIGEST_LEN];	/* raw bytes */
};

/* The object kinds; each is a directory in every tier. */
enum fs3_kind {
	FS3_CHUNK,		/* "chunks": a piece of a layer's EROFS image */
	FS3_INDEX,		/* "indexes": a layer's chunk list */
	FS3_MANIFEST,		/* "manifests": an image */
	FS3_KIND__COUNT
};

/* One tier after the cache.  get() fills *out with the object's stored
 * (compressed) bytes: 0, -ENOENT when it does not have it, -ETIMEDOUT when
 * it did not answer in time, other -errno when it cannot say; the store
 * verifies what it returns.  May block, but returns within its timeout. */
struct fs3_source {
	const char *name;	/* "origin", "peer tcp://..": used in messages */
	int (*get)(void *ctx, enum fs3_kind kind, const struct fs3_digest *d,
		   struct dsec_buf *out);
	void *ctx;		/* passed to get() */
	uint64_t objects;	/* good objects fetched from it (atomic) */
	uint64_t bytes;		/* their stored bytes (atomic) */
};

/* The peers and the origin. */
#define FS3_SOURCES_MAX (FS3_PEERS_MAX + 1)
/* fs3_store_fetch's *from for an object the cache had. */
#define FS3_FROM_CACHE (-1)

struct fs3_store {
	char *cache;		/* cache tier directory (STORE/cache) */
	char *origin;		/* origin directory, puts go here */
	uint64_t cache_max;	/* cap of the cache in stored bytes, 0 = none */
	uint64_t cache_bytes;	/* stored bytes in the cache, as far as we know */
	struct fs3_source src[FS3_SOURCES_MAX];	/* fetch order after the cache */
	int nsrc;		/* sources in src */
	uint64_t src_objects;	/* objects fetched from a source (atomic) */
	uint64_t src_bytes;	/* their stored bytes (atomic) */
	double origin_timeout;	/* seconds a read of the origin may take, 0 = no limit */
};

/* Kinds by name ("chunk", "index", "manifest"): the name, or the kind
 * (-EINVAL for another name). */
const char *fs3_kind_name(enum fs3_kind kind);
int fs3_kind_parse(const char *name);

/* Digests: raw <-> "sha256:<hex>" (parse also takes bare hex). */
void fs3_sha256(const void *p, size_t n, struct fs3_digest *out);
/* SHA-256 of a whole file; 0 or -errno. */
int fs3_sha256_file(const char *path, struct fs3_digest *out);
void fs3_digest_hex(const struct fs3_digest *d, char hex[FS3_HEX_LEN + 1]);
void fs3_digest_ref(const struct fs3_digest *d, char ref[FS3_REF_LEN]);
int fs3_digest_parse(const char *s, struct fs3_digest *d);
int fs3_digest_cmp(const void *a, const void *b);

/* Set up the tiers below cache_dir and origin_dir (created if missing), the
 * origin being the last source.  Counts the cache's bytes. */
int fs3_store_init(struct fs3_store *st, const char *cache_dir, const char *origin_dir,
		   uint64_t cache_max);
void fs3_store_fini(struct fs3_store *st);
/* Adds a source before the origin (after those added before): name is
 * kept, not copied; ctx stays the caller's.  -E2BIG when full. */
int fs3_store_add_source(struct fs3_store *st, const char *name,
			 int (*get)(void *ctx, enum fs3_kind kind, const struct fs3_digest *d,
				    struct dsec_buf *out),
			 void *ctx);

/* Path of an object in a tier directory (caller frees). */
char *fs3_store_path(const char *tier, enum fs3_kind kind, const struct fs3_digest *d);

/* Store data under its digest (returned in *d).  *stored gets the bytes
 * written to the origin (0 when it already had the object). */
int fs3_store_put(struct fs3_store *st, enum fs3_kind kind, const void *data, size_t len,
		  struct fs3_digest *d, uint64_t *stored);

/* Fetch and verify an object into out (reset first).  what names it for
 * messages, e.g. "chunk 'sha256:..' of layer 'sha256:..'"; on failure err
 * says which tier had what. */
int fs3_store_get(struct fs3_store *st, enum fs3_kind kind, const struct fs3_digest *d,
		  struct dsec_buf *out, const char *what, struct dsec_err *err);
/* The same; *from (unless from is NULL) gets FS3_FROM_CACHE or the index in
 * st->src of the source that had it, and *stored its stored bytes. */
int fs3_store_fetch(struct fs3_store *st, enum fs3_kind kind, const struct fs3_digest *d,
		    struct dsec_buf *out, const char *what, int *from, uint64_t *stored,
		    struct dsec_err *err);

/* The cache's copy of an object, verified, as stored (compressed) into z
 * (reset first): 0, -ENOENT when the cache has none, -EBADMSG when its copy
 * was corrupt (then removed).  Never asks a source: what a node serves its
 * peers. */
int fs3_store_local(struct fs3_store *st, enum fs3_kind kind, const struct fs3_digest *d,
		    struct dsec_buf *z);

/* True when the origin holds the object (not verified). */
bool fs3_store_has(struct fs3_store *st, enum fs3_kind kind, const struct fs3_digest *d);

/* Evict least recently used chunks not in pins (sorted, n) until the cache is
 * under its cap.  Returns the number evicted. */
int fs3_store_evict(struct fs3_store *st, const struct fs3_digest *pins, size_t npins);

/* Call fn for every object of kind in a tier directory; fn returns 0 to go
 * on.  size is the stored file size. */
int fs3_store_walk(const char *tier, enum fs3_kind kind,
		   int (*fn)(void *ctx, const struct fs3_digest *d, const char *path, uint64_t size),
		   void *ctx);

/* Write data to path atomically (temporary file + rename); with sync, fsync
 * the file and its directory.  The parent directory is created if missing. */
int fs3_write_atomic(const char *path, const void *data, size_t len, bool sync);
/* fsync the directory that holds path (after a rename or unlink in it). */
int fs3_sync_parent(const char *path);
/* Are the n bytes at p all zero?  (Such blocks are left holes in the
 * files fs3 writes.) */
bool fs3_is_zero(const void *p, size_t n);
/* read() until want bytes or end of file; *got says how many came. */
int fs3_read_full(int fd, void *p, size_t want, size_t *got);
/* Read a whole file of at most max bytes into out (reset first). */
int fs3_read_all(const char *path, size_t max, struct dsec_buf *out);

#endif
