/* fs3_int.h - what the pieces of the fs3 handle share: the handle, its
 * tables, and the helpers one piece calls in another.  Private to fs3/:
 * dsecd, the tools and the tests use fs3.h.
 *
 *   fs3.c      open, close, the store lock, import, stats
 *   tags.c     resolving refs, tag files, manifests, tag, untag, ls, inspect
 *   acquire.c  the shared layer mounts, acquire, release
 *   squash.c   squash
 *   pull.c     pull, serve, layer state (peers)
 *   gc.c       marking what is live, gc, cache eviction
 *
 * Locking is as struct fs3 says; each function below says whether it wants
 * mu held.
 */
#ifndef FS3_FS3_INT_H
#define FS3_FS3_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mount.h>

#include "fs3.h"
#include "image.h"
#include "layer.h"
#include "store.h"

struct fs3_fuse;
struct fs3_peer;

#define FS3_MOUNT_FLAGS (MS_RDONLY | MS_NODEV | MS_NOSUID)

/* Mounts the EROFS image file img on mnt with FS3_MOUNT_FLAGS: the file
 * itself where the kernel can (6.12 on), else a read-only loop device that
 * goes with the mount.  0, or a negative errno with err set (what names the
 * layer in its message). */
int fs3_mount_erofs(const char *img, const char *mnt, const char *what, struct dsec_err *err);

/* Where a layer of the table is. */
enum ml_state {
	ML_MOUNTING,		/* one acquire assembles and mounts it; others wait */
	ML_READY,		/* mounted */
	ML_FAILED,		/* could not be mounted: err says why; goes with its last ref */
};

/* A layer this handle mounts, shared by every acquire that includes it. */
struct mlayer {
	struct fs3_digest d;	/* digest of the layer image */
	unsigned refs;		/* acquires holding it (or waiting for it) */
	enum ml_state state;	/* see above */
	char *mnt;		/* its mount point */
	char *file;		/* with ML_READY: the EROFS image file it is mounted from,
				 * STORE/layers/HEX.erofs or its FUSE file */
	struct dsec_err err;	/* why it failed, for every waiter */
	bool local;		/* mounted from its local file (STORE/layers) */
	double idle;		/* with refs 0 (lingering): when the last went */
	char *dev;		/* the loop device file is attached to, or NULL */
	int devfd;		/* dev open (it detaches when closed: autoclear), or -1 */
	unsigned devrefs;	/* acquires holding dev (fs3_acquired_devs) */
};

/* An image this handle holds for acquires. */
struct held {
	struct fs3_digest d;		/* manifest digest */
	unsigned refs;			/* acquires not yet released */
	struct fs3_digest *layers;	/* its layers, bottom first */
	size_t n;			/* entries in layers */
};

/* Threads: mu guards the tables, nshared and the flock; it is never held
 * across the slow part of an acquire (assembling, mounting), so acquires of
 * other images go on meanwhile.  gc holds it throughout. */
struct fs3 {
	pthread_mutex_t mu;	/* guards everything below that changes */
	pthread_cond_t cv;	/* a layer left ML_MOUNTING, or nshared dropped to 0 */
	char *dir;		/* the store directory, symlinks resolved */
	struct fs3_store st;	/* the tiers */
	uint32_t chunk_size;	/* average chunk size for imports */
	unsigned flags;		/* FS3_MOUNTER */
	int lockfd;		/* STORE/lock */
	unsigned nshared;	/* calls in this process holding STORE/lock shared */
	int mntlockfd;		/* STORE/mnt.lock while we are the mounter, else -1 */
	struct fs3_fuse *fuse;	/* on-demand layers at STORE/fuse once started (mu), or NULL */
	int od_state;		/* on demand: 1 = yes (FUSE started at first need), 0 = off
				 * (full_fetch, or FUSE would not start); under mu */
	unsigned readahead;	/* chunks of on-demand read-ahead */
	double linger;		/* conf.linger */
	struct mlayer **ml;	/* the layer table */
	size_t nml, capml;	/* used, allocated */
	struct held **hi;	/* held images */
	size_t nhi, caphi;	/* used, allocated */
	struct fs3_peer *peers[FS3_PEERS_MAX];	/* sources before the origin */
	int npeers;		/* entries in peers */
	struct fs3_peerset *dyn; /* conf.dynamic_peers: the set fs3_set_peers changes */
	uint64_t served_objects; /* objects fs3_serve gave out (atomic) */
	uint64_t served_bytes;	/* their stored bytes (atomic) */
};

/* fs3.c: the store lock and the files of the store. */
/* STORE/lock shared (mu not held), for a call that adds or reads. */
int fs3_lock_shared(struct fs3 *fs, struct dsec_err *err);
void fs3_unlock_shared(struct fs3 *fs);
/* STORE/lock exclusive, returning with mu held: gc's. */
int fs3_lock_excl(struct fs3 *fs, struct dsec_err *err);
void fs3_unlock_excl(struct fs3 *fs);
/* Is path the root of a mount? */
bool fs3_is_mount_root(const char *path);
/* Unmounts path (lazily when busy) and removes the mount point. */
void fs3_unmount_layer(const char *path);
/* Calls fn(path) for each entry of STORE/sub. */
void fs3_each_entry(struct fs3 *fs, const char *sub, void (*fn)(const char *path));
/* dsec_rm_rf(path), for fs3_each_entry. */
void fs3_rm_path(const char *path);
/* Turns the layer tree at root into an EROFS image and stores it: import's,
 * and squash's for its merged layers. */
int fs3_import_layer(struct fs3 *fs, const char *staging, const char *root, size_t i,
		     struct fs3_layer_ref *out, struct fs3_layer_stats *stats, struct dsec_err *err);
/* Ends an addition begun with fs3_lock_shared (a success trims the cache). */
void fs3_end_add(struct fs3 *fs, int r);

/* tags.c */
/* ORIGIN/tags; caller frees. */
char *fs3_tags_dir(struct fs3 *fs);
/* Calls fn for every tag (see tags.c); strict: a broken tag file fails it. */
int fs3_walk_tags(struct fs3 *fs, bool strict,
		  int (*fn)(void *ctx, const char *tag, const struct fs3_digest *d), void *ctx);
/* fs3_resolve, to a digest. */
int fs3_resolve_digest(struct fs3 *fs, const char *ref, struct fs3_digest *d,
		       struct dsec_err *err);
/* Reads manifest d (cache, peers, origin); caller frees m with fs3_manifest_free. */
int fs3_load_manifest(struct fs3 *fs, const struct fs3_digest *d, struct fs3_manifest *m,
		      struct dsec_err *err);
/* Points tag at image d (written atomically, fsync'd). */
int fs3_write_tag(struct fs3 *fs, const char *tag, const struct fs3_digest *d,
		  struct dsec_err *err);

/* acquire.c */
/* Unmounts the lingering layers idle for conf.linger, or all (mu held). */
void fs3_reap_layers(struct fs3 *fs, bool all);
/* STORE/mnt/HEX, where layer d is mounted; caller frees. */
char *fs3_mnt_path(struct fs3 *fs, const struct fs3_digest *d);
/* STORE/acquired/HEX, the record of an acquire of image d; caller frees. */
char *fs3_acquired_path(struct fs3 *fs, const struct fs3_digest *d);

/* gc.c */
/* Trims the cache to its cap (mu held). */
void fs3_evict(struct fs3 *fs);

#endif
