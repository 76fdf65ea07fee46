/* snap.h - pack_diff: a sandbox's overlay upper dir as a layer tree.
 *
 * Part of fs3's interface, kept apart from fs3.h: a snapshot copies the
 * upper dir of a running sandbox (held still by its backend meanwhile) to a
 * staging tree with fs3_diff_copy, then imports that tree over the image the
 * sandbox runs with fs3_import and fs3_import_opts.base: the parent's layers
 * plus one new layer, the parent's config, a tag.
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
#ifndef FS3_SNAP_H
#define FS3_SNAP_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"

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

/* Is tag a valid "name[:tag]" for fs3_tag and fs3_import_opts.tag?  Lets a
 * caller refuse a bad tag before it freezes a sandbox. */
bool fs3_tag_valid(const char *tag);

#endif
