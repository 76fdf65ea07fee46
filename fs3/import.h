/* import.h - turning a rootfs directory or a tar into EROFS layer images.
 *
 * A tar (any compression libarchive reads) is extracted under a staging
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

/* Stages src for import.  A directory is used in place; a tar file is
 * extracted into STAGING/l0.  *roots gets the layer trees, bottom first,
 * NULL-terminated (caller frees with dsec_strv_free).  Needs root for tars
 * with whiteouts, owners or device nodes. */
int fs3_import_stage(const char *src, const char *staging, char ***roots, struct dsec_err *err);

/* Builds the EROFS image out from the tree at root with mkfs.erofs, run as
 * a subprocess (its messages go to the file log). */
int fs3_mkfs_erofs(const char *root, const char *out, const char *log, struct dsec_err *err);

#endif
