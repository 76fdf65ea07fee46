/* import.h - turning a rootfs directory or a tar into EROFS layer images.
 *
 * A layer tar (any compression libarchive reads) is extracted under a staging
 * directory with numeric owners, modes, times and xattrs kept, and OCI/docker
 * whiteouts turned into their overlayfs form as they come:
 *   DIR/.wh.NAME        -> DIR/NAME, a character device 0/0
 *   DIR/.wh..wh..opq    -> xattr trusted.overlay.opaque="y" on DIR
 * Entries with ".." components are refused, and nothing is written through a
 * symlink.  mkfs.erofs (erofs-utils) then builds the image, uncompressed: the
 * store compresses chunks, and the page cache keeps plain blocks.
 */
#ifndef FS3_IMPORT_H
#define FS3_IMPORT_H

#include "err.h"
#include "fs3.h"

/* What an import reads. */
struct fs3_import_src {
	char *dir;			/* a rootfs directory, used in place, or NULL */
	char **tars;			/* else the layer tars, bottom first, NULL-terminated */
	char *erofs;			/* else an EROFS image file, the one layer as it is */
	struct fs3_image_config config;	/* what an OCI/docker image brings, else empty */
	const char *format;		/* "directory", "tar", "oci", "oci archive", ... */
};

/* Looks at src: a rootfs directory, an OCI image layout directory, an
 * EROFS image file, a rootfs tar, or a tar of an OCI layout or of `docker
 * save` (extracted into STAGING/image); with a kind other than
 * FS3_SRC_ANY, only that, as one layer.  Caller frees out with
 * fs3_import_src_free. */
int fs3_import_open(const char *src, const char *staging, enum fs3_src_kind kind,
		    struct fs3_import_src *out, struct dsec_err *err);
void fs3_import_src_free(struct fs3_import_src *s);

/* Extracts one layer tar into root (created), whiteouts mapped.  With max
 * (0 = none) its entries may take at most that many bytes (each counted at
 * least 512), beyond which it fails with capacity.  Needs root for
 * whiteouts, owners and device nodes. */
int fs3_extract_layer(const char *tar, const char *root, uint64_t max, struct dsec_err *err);

/* Checks the EROFS image img with fsck.erofs (in user space: it reads
 * every inode and every file's data, mounting nothing) before its bytes
 * become a layer the kernel mounts.  A fault is invalid, its message
 * fsck.erofs's. */
int fs3_erofs_check(const char *img, struct dsec_err *err);

/* Builds the EROFS image out from the tree at root with mkfs.erofs, run as
 * a subprocess; what it says is kept for the message of a failure, which
 * names the cause (no space left on device, ...) and where.  A tree whose
 * files have 64 MiB of holes or more is built chunked (--chunksize=4096:
 * each distinct 4 KiB block stored once, a hole or zero block costs 4
 * bytes of chunk index), its chunks gathered under out's directory; more
 * than 64 GiB of holes is refused (capacity), as is a plain build that
 * cannot fit in the free space there. */
int fs3_mkfs_erofs(const char *root, const char *out, struct dsec_err *err);

#endif
