/* fs3.h - layered read-only images for dsec sandboxes: the whole interface.
 *
 * An image is a manifest: an ordered list of EROFS layers plus a config
 * (env, cwd, user, entrypoint), addressed by the "sha256:" digest of its
 * msgpack encoding and named by tags ("name:tag").  A layer is an EROFS image
 * cut into content-defined chunks; chunks, chunk indexes and manifests are
 * content-addressed, zstd-compressed and verified on every fetch, from the
 * node's cache first, then its peers (other dsecds, fs3_conf.peers), then
 * the origin (a directory; in production a mount of a distributed file
 * system).  See dsec-fs3(7) for the layout on disk.
 *
 * Blocking: every function here may block (disk, fsync, mkfs.erofs, mount);
 * dsecd calls them from its worker pool, never from the loop.
 *
 * Threads: one struct fs3 may be used from several threads at once.  A
 * mutex inside guards its tables but is not held while a layer is assembled
 * and mounted: acquires of images already mounted, or of other layers, go on
 * meanwhile; acquires of a layer being mounted wait for it (and share its
 * failure).  fs3_gc runs alone.  Processes: writers that share a store
 * directory (dsecd, dsecctl) take an flock on STORE/lock, shared for adding
 * (import, acquire, tag) and exclusive for removing (gc).
 *
 * Errors: functions return 0 or -errno and fill err with a message such as
 * "cannot fetch chunk 'sha256:..' of layer 'sha256:..': no good copy (...)".
 *
 * Use from dsecd: open once at start with FS3_MOUNTER (this also unmounts
 * what a killed predecessor left), then per sandbox, on a pool thread:
 *
 *     struct fs3_acquired *img;
 *     if (fs3_image_acquire(fs, req->image, &img, &err) < 0)
 *             ... reply err (err.code: not_found, invalid, ...) ...
 *     mount("overlay", root, "overlay", 0, "lowerdir=<img->lowerdir>,upperdir=..,workdir=..");
 *     ... img->config: env, cwd, user, entrypoint defaults of the sandbox ...
 *     ... when the sandbox is gone (its overlay unmounted): ...
 *     fs3_image_release(fs, img);
 *
 * and fs3_close at shutdown, with no call in flight.
 */
#ifndef FS3_FS3_H
#define FS3_FS3_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "util.h"

struct fs3;
struct dsec_tls;

/* Room for a digest as text: "sha256:" + 64 hex digits + NUL. */
#define FS3_REF_LEN 72
/* Peers a store fetches from, at most. */
#define FS3_PEERS_MAX 16
/* Seconds a fetch from one peer or the origin may take when fs3_conf says 0. */
#define FS3_FETCH_TIMEOUT_DEFAULT 5.0

/* This process mounts layers (dsecd, tests): at open it takes STORE/mnt.lock
 * (at most one mounter per store; -EBUSY if another runs) and unmounts what a
 * killed predecessor left under STORE/mnt. */
#define FS3_MOUNTER 0x1u

/* Where the store is and how it behaves.  Zero fields take defaults. */
struct fs3_conf {
	const char *store;	/* local store directory (cache, layers, mounts, lock) */
	const char *origin;	/* origin directory, NULL = STORE/origin */
	uint64_t cache_max;	/* cache cap in stored bytes, 0 = 10 GiB */
	uint32_t chunk_size;	/* average chunk size (power of two, 64 KiB..4 MiB), 0 = 1 MiB */
	unsigned flags;		/* FS3_MOUNTER */
	bool full_fetch;	/* acquire assembles whole layers before mounting them,
				 * false = on demand through FUSE (see below) */
	int readahead;		/* chunks read ahead of a sequential on-demand reader,
				 * 0 = 4, < 0 = none */
	const char *const *peers; /* other dsecds' addresses (nng URLs), NULL-terminated,
				 * at most FS3_PEERS_MAX: asked in order after the cache
				 * and before the origin; NULL = none */
	double fetch_timeout;	/* seconds one fetch from a peer or one read of the
				 * origin may take, 0 = FS3_FETCH_TIMEOUT_DEFAULT */
	const struct dsec_tls *tls; /* for tls+tcp:// peers: the node's certificate and
				 * the cluster's CA (copied); NULL = from the
				 * environment (see dsec_connect_tls) */
	bool dynamic_peers;	/* a set of peers fs3_set_peers changes (the cluster's
				 * members), asked after the static ones, before the
				 * origin */
	double linger;		/* seconds a local layer stays mounted once no acquire
				 * holds it, so that a sandbox made again soon of the
				 * same image shares the mount (and its page cache);
				 * 0 = unmounted at its last release */
};

/* Objects fetched from one source. */
struct fs3_source_stats {
	char name[128];		/* "origin", "peer URL" */
	uint64_t objects;	/* objects fetched from it */
	uint64_t bytes;		/* their stored (compressed) bytes */
};

/* An image's run configuration. */
struct fs3_image_config {
	char **env;		/* "K=V" strings, NULL-terminated, never NULL */
	char *cwd;		/* working directory, "" = unset */
	char *user;		/* "uid[:gid]" or a name, "" = unset */
	char **entrypoint;	/* argv, NULL-terminated, never NULL (may be empty) */
};

/* An acquired image: its layers are mounted and stay so until release. */
struct fs3_acquired {
	char digest[FS3_REF_LEN];	/* "sha256:<hex>" of the manifest */
	size_t nlayers;			/* entries in layers */
	char **layers;			/* mounted layer directories, top layer first */
	char *lowerdir;			/* the same joined by ':' for overlayfs lowerdir= */
	struct fs3_image_config config;	/* the image's config */
	char **extras;			/* "sha256:" digests of the images stacked over
					 * it (fs3_image_acquire_stack), bottom first,
					 * NULL-terminated, never NULL */
	char **files;			/* the layers' EROFS image files, as layers (top
					 * first, NULL-terminated): what each is mounted
					 * from, STORE/layers/<hex>.erofs when local, else
					 * its FUSE file STORE/fuse/<hex>.erofs (reads
					 * fetch chunks); read-only, there until release:
					 * for a backend that hands each layer to a VM as
					 * a disk rather than a directory */
	char **devs;			/* after fs3_acquired_devs: the read-only loop
					 * device of each layer file, as files
					 * ("/dev/loopN"; one per layer, shared by its
					 * acquires), else NULL */
};

/* The most layers one acquire stacks: the container backend passes each
 * layer to the sandbox's init as a mount fd and lays them in one overlay
 * mount, whose options must fit a page (overlayfs itself takes at most 500
 * lower layers, OVL_MAX_STACK). */
#define FS3_STACK_MAX 64

/* What an import's src is when its caller knows (fs3_import_opts.kind):
 * then src is taken as that one layer and nothing else, whatever it holds
 * (a sandbox's files may look like an OCI layout, or an EROFS image). */
enum fs3_src_kind {
	FS3_SRC_ANY = 0,	/* what fs3_import finds (see there) */
	FS3_SRC_TREE,		/* a directory, a layer tree */
	FS3_SRC_LAYER_TAR,	/* a tar file, a layer in OCI form */
	FS3_SRC_EROFS,		/* an EROFS image file */
};

/* Options of an import. */
struct fs3_import_opts {
	const char *tag;		/* "name[:tag]" to point at the image, NULL = none */
	struct fs3_image_config config;	/* config of the image; NULL vectors/strings = unset */
	/* An image ref whose layers go below the imported ones and whose
	 * config is laid under config: a snapshot imports its diff tree (see
	 * fs3_diff_copy) over the image its sandbox runs.  NULL = none. */
	const char *base;
	/* Bytes src may take once extracted (a tar's entries, each counted
	 * at least 512) or as it is (an EROFS image file); beyond, capacity.
	 * A snapshot sets its sandbox's disk.  0 = no limit. */
	uint64_t max_size;
	/* What src is; FS3_SRC_ANY = look. */
	enum fs3_src_kind kind;
};

/* What an import did. */
struct fs3_import_res {
	char digest[FS3_REF_LEN];	/* "sha256:<hex>" of the new manifest */
	char format[32];	/* what src was: "directory", "tar", "oci", "docker archive", ... */
	size_t nlayers;		/* layers in the image */
	uint64_t logical;	/* bytes of the layers' EROFS images */
	uint64_t stored;	/* compressed bytes newly written to the origin */
	uint64_t chunks;	/* chunks in the layers */
	uint64_t new_chunks;	/* of which were not in the origin before */
	double seconds;		/* wall time of the import */
};

/* One layer as inspect shows it. */
struct fs3_layer_info {
	char digest[FS3_REF_LEN];	/* "sha256:" of the EROFS image */
	char index[FS3_REF_LEN];	/* "sha256:" of its chunk index */
	uint64_t size;		/* bytes of the EROFS image */
	uint64_t chunks;	/* chunks in it */
	bool mounted;		/* mounted on this node now */
};

/* An image as ls and inspect show it. */
struct fs3_image_info {
	char digest[FS3_REF_LEN];	/* "sha256:<hex>" of the manifest */
	char **tags;			/* "name:tag" strings, NULL-terminated */
	size_t nlayers;			/* entries in layers */
	struct fs3_layer_info *layers;	/* bottom layer first, as stored */
	uint64_t size;			/* sum of the layers' sizes */
	struct fs3_image_config config;	/* the image's config */
};

/* What a gc did. */
struct fs3_gc_res {
	uint64_t kept;		/* objects kept (origin and cache) */
	uint64_t removed;	/* objects removed */
	uint64_t freed;		/* stored bytes removed */
	uint64_t layers_removed; /* unused materialized layer files removed */
};

/* Opens (creating if needed) the store; caller closes it with fs3_close. */
int fs3_open(struct fs3 **out, const struct fs3_conf *conf, struct dsec_err *err);
/* Unmounts every layer this handle mounted, whatever is still acquired
 * (lazily where busy), and frees fs; outstanding fs3_acquired are then only
 * memory, freed with fs3_acquired_free.  NULL is a no-op. */
void fs3_close(struct fs3 *fs);

/* Imports src as an image: a rootfs directory or rootfs tar (plain, gzip,
 * zstd, xz, bzip2) as one layer; an EROFS image file as one layer as it is
 * (checked with fsck.erofs first; import only one mkfs.erofs made on this
 * host, see dsec_be_diff in backend.h); an OCI image layout (directory or
 * tar) or a `docker save` tar with all its layers, in order, and its
 * config, on which opts->config is laid (see fs3_config_merge in image.h).
 * OCI/docker
 * whiteouts in layer tars become their overlayfs form.  Writes to the origin
 * (fsync'd) and through to the cache; tags it if opts->tag.  Needs root for
 * tars with whiteouts, owners or device nodes.  With opts->base the image
 * is that image's layers, then src's; res->nlayers counts them all, the
 * other counts only src's.  res may be NULL. */
int fs3_import(struct fs3 *fs, const char *src, const struct fs3_import_opts *opts,
	       struct fs3_import_res *res, struct dsec_err *err);

/* What a squash did. */
struct fs3_squash_res {
	char digest[FS3_REF_LEN];	/* "sha256:<hex>" of the new image (or of ref's,
					 * when nothing was merged) */
	size_t before;			/* layers of ref's image */
	size_t after;			/* layers of the new one */
	size_t runs;			/* runs of small layers merged, one layer each */
	uint64_t logical;		/* bytes of the merged layers' EROFS images */
	uint64_t stored;		/* compressed bytes newly written to the origin */
	double seconds;			/* wall time */
};

/* Makes a new image of ref's with each run of two or more adjacent layers
 * smaller than max_size bytes merged into one layer, as overlayfs shows
 * them: an upper entry replaces a lower one, whiteouts and opaque dirs of
 * upper layers are applied; a whiteout or opaque mark that still has
 * layers below the run to hide is kept, other whiteouts go.  The other
 * layers and the config stay as they are; so does the tree a sandbox
 * sees.  Tags the new image if tag.  Mounts each layer of a run (so needs
 * root, as import of whiteouts does), in a staging directory.  res may be
 * NULL. */
int fs3_squash(struct fs3 *fs, const char *ref, uint64_t max_size, const char *tag,
	       struct fs3_squash_res *res, struct dsec_err *err);

/* ---- snapshots: a sandbox's overlay upper dir as a layer tree (snap.c) ----
 *
 * A snapshot copies the upper dir of a running sandbox (held still by its
 * backend meanwhile) to a staging tree with fs3_diff_copy, then imports that
 * tree over the image the sandbox runs with fs3_import and
 * fs3_import_opts.base: the parent's layers plus one new layer, the
 * parent's config, a tag.
 *
 * The copy keeps what overlayfs stores: whiteouts (0/0 character devices),
 * opaque dirs, modes, times, hard links, symlinks, user.* and security.*
 * xattrs and ACLs; it drops overlayfs' private bookkeeping (origin, impure,
 * ...).  An opaque dir is marked in the layer both as
 * trusted.overlay.opaque (read by an overlay of the host's root) and as
 * user.overlay.opaque (read by one mounted in a user namespace, which must
 * use userxattr); fs3's import of OCI/docker opaque whiteouts does the same.  Ids are shifted back to
 * those seen inside: with id_count > 0 a uid or gid in [id_base, id_base +
 * id_count) becomes id - id_base, one outside (the sandbox cannot make such
 * a file) becomes 65534, nobody; ACL entries and a file capability's root id
 * shift alike.  So the layer is right for any sandbox, whatever its range.
 * Needs root (mknod of whiteouts, chown, trusted xattrs).  Blocking.
 */

/* Directory depth fs3_diff_copy follows before it refuses the tree. */
#define FS3_DIFF_DEPTH_MAX 256

/* What a copy found. */
struct fs3_diff_stats {
	uint64_t files;		/* regular files (hard links counted once) */
	uint64_t dirs;		/* directories, the top one included */
	uint64_t whiteouts;	/* deleted paths (0/0 character devices) */
	uint64_t opaque;	/* replaced directories */
	uint64_t other;		/* symlinks, fifos, sockets, other devices */
	uint64_t bytes;		/* bytes of file data (holes not counted) */
	uint64_t size;		/* bytes of the regular files' sizes (holes counted) */
};

/* The sandbox's overlay was mounted with userxattr: its opaque marks are
 * user.overlay.opaque (else trusted.overlay.opaque). */
#define FS3_DIFF_USERXATTR 0x1u

/* Merge (squash): dst exists, a layer tree, and upper, another layer tree
 * (or an upper dir), goes over it as overlayfs would show the two: an entry
 * of upper replaces dst's (a directory of each merges, unless upper's is
 * opaque), a whiteout removes dst's entry, and dst's opaque marks stay.  A
 * directory of upper over a non-directory of dst is marked opaque (dst's
 * entry hid what lies below). */
#define FS3_DIFF_MERGE 0x2u
/* With FS3_DIFF_MERGE: layers lie below dst, so upper's whiteouts are kept
 * (they still hide something there); without it they are dropped. */
#define FS3_DIFF_BELOW 0x4u

/* With a limit, the files' sizes (holes counted) may add up to this many
 * times it: past that mkfs.erofs would spend too long reading holes. */
#define FS3_DIFF_SIZE_RATIO 16

/* Copies the upper dir at upper (a path, symlinks at its end followed) to
 * dst, which must not exist (but see FS3_DIFF_MERGE); see above.  Files
 * keep their holes (SEEK_DATA/SEEK_HOLE; copy_file_range, so a reflink
 * where the file systems allow, else read and write, where a block of
 * zeros also stays a hole).  With limit (the sandbox's disk, in bytes; 0 =
 * none) the files' data may take at most limit bytes and their sizes
 * FS3_DIFF_SIZE_RATIO x limit: beyond, the copy fails with capacity.  st
 * may be NULL.  On failure dst may be left half made: the caller removes
 * it. */
int fs3_diff_copy(const char *upper, const char *dst, uint32_t id_base, uint32_t id_count,
		  unsigned flags, uint64_t limit, struct fs3_diff_stats *st, struct dsec_err *err);

/* Copies the regular file src to dst (made, mode 0600) as fs3_diff_copy
 * copies a file: holes kept, a reflink where it can, at most limit bytes
 * of data (0 = no limit) else capacity.  A backend's diff file
 * (dsec_be_diff) is copied so before the sandbox runs on. */
int fs3_file_copy(const char *src, const char *dst, uint64_t limit, struct dsec_err *err);

/* Resolves ref ("name[:tag]", "sha256:<hex>" or a unique "sha256:" prefix of
 * at least 8 hex digits) to a manifest digest "sha256:<hex>". */
int fs3_resolve(struct fs3 *fs, const char *ref, char digest[FS3_REF_LEN], struct dsec_err *err);

/* Points tag ("name[:tag]") at the image ref names; replaces an old tag. */
int fs3_tag(struct fs3 *fs, const char *ref, const char *tag, struct dsec_err *err);
/* Is tag a valid "name[:tag]" for fs3_tag and fs3_import_opts.tag?  Lets a
 * caller refuse a bad tag before it freezes a sandbox. */
bool fs3_tag_valid(const char *tag);
/* Removes a tag, or with a digest every tag of that image.  The image's data
 * goes at the next fs3_gc unless another tag or an acquire holds it. */
int fs3_untag(struct fs3 *fs, const char *ref, struct dsec_err *err);

/* The tagged images, ordered by their first tag; layer chunk counts and
 * mount states are left 0.  The caller frees *out with fs3_image_list_free. */
int fs3_image_list(struct fs3 *fs, struct fs3_image_info **out, size_t *n, struct dsec_err *err);
void fs3_image_list_free(struct fs3_image_info *v, size_t n);
/* One image, in full; the caller clears *out with fs3_image_info_clear. */
int fs3_image_inspect(struct fs3 *fs, const char *ref, struct fs3_image_info *out,
		      struct dsec_err *err);
void fs3_image_info_clear(struct fs3_image_info *info);

/* Makes the image ref names usable: each layer is mounted read-only at
 * STORE/mnt/<hex> (once per node: a mount is shared and refcounted by every
 * acquire of any image that has the layer).  A layer that is local
 * (STORE/layers/<hex>.erofs) is mounted from that file.  Otherwise, on
 * demand (the default), EROFS is mounted on the layer's file in the store's
 * FUSE mount, STORE/fuse/<hex>.erofs, after the chunks of its superblock and
 * root inode are fetched; the rest comes as it is read (see ondemand.h).  With
 * conf.full_fetch, or when FUSE cannot be mounted, the layer is first
 * assembled from verified chunks into STORE/layers/<hex>.erofs.  Needs
 * FS3_MOUNTER.  *out is the caller's until fs3_image_release. */
int fs3_image_acquire(struct fs3 *fs, const char *ref, struct fs3_acquired **out,
		      struct dsec_err *err);
/* Acquires image ref with the images of extras (refs as above, bottom
 * first, NULL-terminated; NULL or empty = none) stacked over it, as a
 * sandbox that adds a workspace or a toolkit to its base image runs:
 * out->layers are the last extra's layers, top first, then the one's
 * before it, ..., then ref's.  A layer found in more than one of them
 * appears once, where it is highest (the same tree: its lower copy could
 * only be shadowed by itself).  The config is ref's alone: extras add
 * files, never env, cwd, user or entrypoint.  Each image is held as if
 * acquired alone (gc roots, layer mounts shared and refcounted) until
 * fs3_image_release gives them all back.  Every ref is resolved before
 * anything is held: an unknown one fails (not_found) holding nothing, as
 * does a stack of more than FS3_STACK_MAX layers (invalid, E2BIG). */
int fs3_image_acquire_stack(struct fs3 *fs, const char *ref, const char *const *extras,
			    struct fs3_acquired **out, struct dsec_err *err);
/* Gives an acquire back (with its extras) and frees a; a layer is
 * unmounted when its last user goes (lazily if something, e.g. an overlay,
 * still holds it), or with conf.linger, if it is local, at the first
 * acquire or release that finds it idle that long, at gc or at close.
 * NULL is a no-op. */
void fs3_image_release(struct fs3 *fs, struct fs3_acquired *a);
/* Attaches each layer file of a to a read-only loop device (a->devs):
 * block devices for a backend that hands its sandboxes disks (a VM's
 * virtio-blk).  One device per layer, shared by every acquire that asks
 * for it; the release of the last detaches it (autoclear: at once, or once
 * whoever else opened it closes it; a killed process's detach when it
 * dies).  Needs /dev/loop-control (unsupported without).  On failure a
 * holds none. */
int fs3_acquired_devs(struct fs3 *fs, struct fs3_acquired *a, struct dsec_err *err);
/* Frees a without giving it back: only for acquires still outstanding when
 * fs3_close unmounted everything (a daemon shutting down). */
void fs3_acquired_free(struct fs3_acquired *a);

/* Counters of this handle since open. */
struct fs3_stats {
	uint64_t src_objects;	/* objects fetched from a source (peer, origin), not the cache */
	uint64_t src_bytes;	/* their stored (compressed) bytes: what moved to this node */
	bool on_demand;		/* layers are served through FUSE (STORE/fuse, mounted at
				 * the first acquire that needs it) */
	uint64_t od_layers;	/* layers served on demand */
	uint64_t od_reads;	/* on-demand read requests */
	uint64_t od_read_bytes;	/* bytes they returned */
	uint64_t od_chunks;	/* chunks fetched on demand (reads, read-ahead, metadata) */
	uint64_t od_chunk_bytes; /* their uncompressed bytes */
	uint64_t od_readahead;	/* of od_chunks, fetched by read-ahead */
	uint64_t od_errors;	/* reads failed with EIO */
	uint64_t od_completed;	/* layers that became local */
	size_t nsrc;		/* entries in src */
	struct fs3_source_stats src[FS3_PEERS_MAX + 1];	/* src_objects by source, in
							 * fetch order (the origin last) */
	uint64_t served_objects; /* objects served to peers (fs3_serve) */
	uint64_t served_bytes;	/* their stored bytes */
};

void fs3_get_stats(struct fs3 *fs, struct fs3_stats *out);

/* What a pull did. */
struct fs3_pull_res {
	char digest[FS3_REF_LEN];	/* "sha256:<hex>" of the manifest */
	uint64_t chunks;	/* distinct chunks of the image's layers */
	uint64_t local;		/* of which the cache had already */
	uint64_t fetched;	/* of which were fetched */
	uint64_t bytes;		/* stored bytes of those */
	size_t nsrc;		/* entries in src */
	struct fs3_source_stats src[FS3_PEERS_MAX + 1];	/* fetched chunks by source */
	double seconds;		/* wall time of the pull */
};

/* Makes every chunk of image ref local (in the cache): the manifest, the
 * layers' indexes and their chunks are fetched (peers, then the origin) and
 * verified where the cache lacks them.  A chunk no source has fails the
 * pull, the message naming the chunk and its layer; what came before stays
 * cached.  res may be NULL.  The cache is then trimmed to its cap as after
 * an import (least recently used chunks first, so an image larger than the
 * cap does not stay whole). */
int fs3_pull(struct fs3 *fs, const char *ref, struct fs3_pull_res *res, struct dsec_err *err);

/* For a peer: the verified cache copy of the object of kind ("chunk",
 * "index", "manifest") named digest ("sha256:<hex>"), as stored (zstd),
 * into out (reset first).  Errors: not_found when the cache has no good
 * copy (a corrupt one is removed), invalid for another kind or digest.
 * Never asks a source, so that peers asking each other cannot loop. */
int fs3_serve(struct fs3 *fs, const char *kind, const char *digest, struct dsec_buf *out,
	      struct dsec_err *err);

/* Where layer ("sha256:<hex>" of its EROFS image) is on this node: 1 when
 * it is a local file (STORE/layers/<hex>.erofs), 0 when it is served on
 * demand and not yet complete (*present of *total chunks are local), or
 * -ENOENT when neither. */
int fs3_layer_local(struct fs3 *fs, const char *layer, size_t *present, size_t *total);

/* Fetches the rest of an on-demand layer in the background, after which it
 * is local.  -ENOENT when it is not served on demand. */
int fs3_layer_fill(struct fs3 *fs, const char *layer);

/* With fs3_conf.dynamic_peers: the set becomes urls[0..n-1] (at most
 * FS3_PEERS_MAX: the rest are left out); fetches running go on with the
 * peers they hold.  From one thread at a time.  0, -EINVAL without
 * dynamic_peers, or -errno with err for an address nng cannot use. */
int fs3_set_peers(struct fs3 *fs, const char *const *urls, size_t n, struct dsec_err *err);

/* Collects what no tag and no acquire (of any process on this node) reaches:
 * manifests, indexes and chunks in the origin and the cache, and unmounted
 * layer files.  res may be NULL. */
int fs3_gc(struct fs3 *fs, struct fs3_gc_res *res, struct dsec_err *err);

/* The image config helpers: free the strings and vectors. */
void fs3_image_config_free(struct fs3_image_config *c);

#endif
