/* ondemand.h - layers served on demand through one FUSE mount per store.
 *
 * The mounter (dsecd) runs one FUSE file system at STORE/fuse, read-only,
 * served by threads of its own (libfuse3's low-level API, multi-threaded
 * loop).  Its root directory holds one regular file per layer added to it,
 * "<hex>.erofs", of the layer's size; EROFS is mounted file-backed on that
 * file before the layer is local.  A read fetches the chunks that cover its
 * range (cache, then sources; verified by the store), writes them into a
 * sparse STORE/layers/<hex>.partial and serves them from there.  A read that
 * continues the previous one queues the next `readahead` chunks for a
 * background thread.  When every chunk is there the background thread
 * checks the whole image against its digest and renames the partial file to
 * STORE/layers/<hex>.erofs: mounts made from then on use the local file,
 * mounts made before keep reading through FUSE (from the same, now complete,
 * file).
 *
 * Failures: a chunk that cannot be fetched (after FS3_FUSE_TRIES attempts)
 * fails that read with EIO and is logged with its layer; the next read of it
 * tries again.  Nothing waits without bound: each source answers within
 * the store's fetch timeout (see store.h).
 *
 * Threads: all functions may be called from any thread; FUSE requests are
 * served meanwhile.  Never call them with a lock held that a FUSE request or
 * a mount (which reads through FUSE) may need.
 */
#ifndef FS3_ONDEMAND_H
#define FS3_ONDEMAND_H

#include <stdint.h>

#include "image.h"
#include "store.h"

/* Attempts to fetch a chunk for one read before it fails with EIO. */
#define FS3_FUSE_TRIES 3

struct fs3_fuse;

/* Counters since start (each a running total). */
struct fs3_fuse_stats {
	uint64_t layers;	/* layers added */
	uint64_t reads;		/* read requests served */
	uint64_t read_bytes;	/* bytes they returned */
	uint64_t chunks;	/* chunks fetched (for reads, read-ahead, metadata) */
	uint64_t chunk_bytes;	/* their uncompressed bytes */
	uint64_t readahead;	/* of chunks, fetched by read-ahead */
	uint64_t errors;	/* reads failed with EIO */
	uint64_t completed;	/* layers that became local */
};

/* Mounts the FUSE file system at mnt (created if missing) for the layers of
 * store st (not owned, must outlive fu); layers_dir is STORE/layers.
 * readahead: chunks to read ahead of a sequential reader (0 = none).
 * Caller stops it with fs3_fuse_stop. */
int fs3_fuse_start(struct fs3_fuse **out, const char *mnt, const char *layers_dir,
		   struct fs3_store *st, unsigned readahead, struct dsec_err *err);
/* Unmounts (lazily: EROFS mounts still on its files are the caller's to
 * unmount first), stops the threads and frees fu.  NULL is a no-op. */
void fs3_fuse_stop(struct fs3_fuse *fu);
/* Detaches whatever is mounted at mnt (a FUSE mount a killed mounter left:
 * its connection is gone and every access fails with ENOTCONN). */
void fs3_fuse_clean_stale(const char *mnt);

/* Serves layer l (once: a layer added before is found again) and fetches
 * the chunks that hold the EROFS superblock and root inode, so that a mount
 * needs nothing else.  *file gets the path of its FUSE file (caller frees). */
int fs3_fuse_add(struct fs3_fuse *fu, const struct fs3_layer_ref *l, char **file,
		 struct dsec_err *err);

/* Chunks of layer d that are local, and its chunk count; -ENOENT if d was
 * never added. */
int fs3_fuse_layer_state(struct fs3_fuse *fu, const struct fs3_digest *d, size_t *present,
			 size_t *total);

/* Queues every missing chunk of layer d for the background thread (a fill
 * that makes the layer local); -ENOENT if d was never added. */
int fs3_fuse_fill(struct fs3_fuse *fu, const struct fs3_digest *d);

void fs3_fuse_get_stats(struct fs3_fuse *fu, struct fs3_fuse_stats *out);

#endif
