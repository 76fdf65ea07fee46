/* ops-image.c - images: snapshot, and chunk_get for fs3's peers. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "be_io.h"
#include "daemon.h"
#include "dsec.h"
#include "fs3.h"
#include "log.h"
#include "ops.h"
#include "proto.h"

/* ---- snapshot ----------------------------------------------------------------
 *
 * The backend holds the sandbox's changes still and lets us read them on a
 * pool thread (snap_read), in one of the forms of dsec_be_diff: an overlay
 * upper dir is copied to STATE_DIR/snapshots/snap-XXXXXX/tree with ids
 * shifted back (fs3_diff_copy), a tar or EROFS file to .../diff
 * (fs3_file_copy); the sandbox then runs on while another pool job imports
 * the copy over the sandbox's image (fs3_import with base: a tree or a tar
 * through mkfs.erofs, an EROFS file checked and taken as it is; chunks,
 * manifest, tag) and removes it.
 *
 * The files of the sandbox's stages (stage.c: a write's parts, a download's
 * archive) are its client's transfers in flight, not its state: they are
 * removed from the copy of an upper dir before the import, so no fork,
 * reset or recover made of the snapshot holds a file that no stage of its
 * own will ever remove.  Those of the stages the sandbox has when the
 * snapshot starts, and of any begun until the backend lets go of the copy
 * (dsecd_snap_skip).  A tar or EROFS diff is imported as it is. */

struct dsecd_snap {
	struct dsecd *d;		/* the daemon */
	char *tag;			/* tag of the new image */
	char parent[FS3_REF_LEN];	/* digest of the image the sandbox runs */
	char *dir;			/* staging directory, NULL until made */
	char *src;			/* what to import (DIR/tree or DIR/diff), NULL until copied */
	uint64_t max;			/* bytes the import may take, 0 = no limit */
	enum fs3_src_kind kind;		/* what src is */
	int rc;				/* 0 or -errno */
	struct dsec_err err;		/* why */
	struct fs3_diff_stats st;	/* what the copy of an upper dir found */
	struct fs3_import_res res;	/* what the import made */
	double copy_s;			/* seconds of the copy (the sandbox held still) */
	struct dsecd_sb *sb;		/* whose, while sb->snap is this (loop thread) */
	char **skip;			/* stage files to leave out (sandbox paths) */
	size_t nskip;
	uint64_t skipped;		/* of them, those removed from the copy */
};

/* Stage files one snapshot leaves out at most: a sandbox has 64 stages at
 * once, and a client that makes and aborts them while a long copy runs
 * must not grow the list without bound (past it they are copied). */
#define SNAP_SKIP_MAX 1024

void dsecd_snap_skip(struct dsecd_snap *s, const char *path)
{
	if (s->nskip >= SNAP_SKIP_MAX)
		return;
	s->skip = xrealloc(s->skip, (s->nskip + 1) * sizeof(*s->skip));
	s->skip[s->nskip++] = xstrdup(path);
}

/* The backend let go of the copy: stages begun from now on are not in it. */
static void snap_detach(struct dsecd_snap *s)
{
	if (s->sb && s->sb->snap == s)
		s->sb->snap = NULL;
	s->sb = NULL;
}

void req_snap_free(struct dsecd_req *r)
{
	struct dsecd_snap *s = r->snap;

	if (!s)
		return;
	snap_detach(s);
	for (size_t i = 0; i < s->nskip; i++)
		free(s->skip[i]);
	free(s->skip);
	free(s->tag);
	free(s->dir);
	free(s->src);
	free(s);
}

/* On a pool thread, the sandbox's changes held still. */
static int snap_read(void *arg, const struct dsec_be_diff *df, struct dsec_err *err)
{
	struct dsecd_snap *s = arg;
	_cleanup_free_ char *top = xasprintf("%s/snapshots", s->d->conf.state_dir);
	double t0 = dsec_now();
	int r;

	if (df->kind > DSEC_BE_DIFF_EROFS)
		return dsec_err_setc(err, DSEC_E_BACKEND, EINVAL, "the backend handed over "
				     "changes in a form this daemon does not know (kind %u)",
				     df->kind);
	if ((r = dsec_mkdir_p(top, 0700)) < 0)
		return dsec_err_set(err, -r, "cannot create '%s': %s", top, strerror(-r));
	s->dir = xasprintf("%s/snap-XXXXXX", top);
	if (!mkdtemp(s->dir)) {
		r = dsec_err_set(err, errno, "cannot create a directory in '%s': %s", top,
				 strerror(errno));
		free(s->dir);
		s->dir = NULL;
		return r;
	}
	if (df->kind == DSEC_BE_DIFF_UPPER) {
		/* The upper dir's file system is the sandbox's disk (a tmpfs
		 * of its size): the copy takes no more than it can hold. */
		struct statfs sf;
		uint64_t limit = statfs(df->path, &sf) == 0 ? (uint64_t)sf.f_blocks * sf.f_bsize : 0;
		s->src = xasprintf("%s/tree", s->dir);
		s->kind = FS3_SRC_TREE;
		r = fs3_diff_copy(df->path, s->src, df->id_base, df->id_count,
				  df->userxattr ? FS3_DIFF_USERXATTR : 0, limit, &s->st, err);
	} else {
		s->src = xasprintf("%s/diff", s->dir);
		s->kind = df->kind == DSEC_BE_DIFF_TAR ? FS3_SRC_LAYER_TAR : FS3_SRC_EROFS;
		s->max = df->limit;
		r = fs3_file_copy(df->path, s->src, df->limit, err);
	}
	s->copy_s = dsec_now() - t0;
	return r;
}

/* Removes the regular file path (a sandbox path: relative to its root,
 * "." and ".." taken lexically as the backend's file ops take them) from
 * the copied tree at top, never through a symlink the sandbox made.
 * Returns true when one was removed. */
static bool snap_unlink(const char *top, const char *path)
{
	_cleanup_free_ char *rel = NULL;
	struct stat st;
	bool done = false;
	char *name;
	int fd, dir;

	if (be_clean_rel(path, true, &rel) < 0 || !strcmp(rel, "."))
		return false;
	if ((name = strrchr(rel, '/')))
		*name++ = '\0';
	if ((fd = open(top, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return false;
	dir = !name ? fd : be_openat2(fd, rel, O_PATH | O_DIRECTORY, 0,
				      RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
				      RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
	if (!name)
		name = rel;
	if (dir >= 0 && fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
		done = unlinkat(dir, name, 0) == 0;
	if (dir >= 0 && dir != fd)
		close(dir);
	close(fd);
	return done;
}

static void snap_commit_work(void *arg)
{
	struct dsecd_req *r = arg;
	struct dsecd_snap *s = r->snap;

	if (s->rc == 0 && s->kind == FS3_SRC_TREE)
		for (size_t i = 0; i < s->nskip; i++)
			s->skipped += snap_unlink(s->src, s->skip[i]);
	if (s->rc == 0) {
		struct fs3_import_opts o = { .tag = s->tag, .base = s->parent, .max_size = s->max,
					      .kind = s->kind };

		s->rc = fs3_import(s->d->images, s->src, &o, &s->res, &s->err);
	}
	if (s->dir)
		dsec_rm_rf(s->dir);
}

static void snap_commit_done(void *arg)
{
	struct dsecd_req *r = arg;
	struct dsecd_snap *s = r->snap;
	struct dsec_pk p;

	r->d->ops_inflight--;
	if (s->rc < 0) {
		dsec_err_prefix(&s->err, "cannot snapshot sandbox '%s'", r->sb->id);
		return reply_err(r, &s->err);
	}
	log_info("sandbox %s snapshotted as %s (%s): %llu files, %llu whiteouts, %llu bytes of "
		 "data in %llu of sizes, %llu staged files left out, copied in %.3f s, image in "
		 "%.3f s", r->sb->id, s->res.digest, s->tag, (unsigned long long)s->st.files,
		 (unsigned long long)s->st.whiteouts, (unsigned long long)s->st.bytes,
		 (unsigned long long)s->st.size, (unsigned long long)s->skipped, s->copy_s,
		 s->res.seconds);
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	dsec_pk_kv_str(&p, "image", s->res.digest);
	dsec_pk_kv_str(&p, "tag", s->tag);
	dsec_pk_kv_str(&p, "parent", s->parent);
	dsec_pk_kv_u64(&p, "layers", s->res.nlayers);
	dsec_pk_kv_u64(&p, "size", s->res.logical);
	dsec_pk_kv_u64(&p, "files", s->st.files);
	dsec_pk_kv_u64(&p, "whiteouts", s->st.whiteouts);
	dsec_pk_kv_double(&p, "frozen", s->copy_s);
	dsec_pk_kv_double(&p, "duration", (double)(dsec_now_ns() - r->t0) / 1e9);
	dsec_pk_end(&p);
	req_complete(r, &p);
}

/* The backend let the sandbox go: import the copy (or remove what is left). */
static void snap_copied(void *arg, int rc, const struct dsec_err *err)
{
	struct dsecd_req *r = arg;
	struct dsecd_snap *s = r->snap;

	snap_detach(s);
	if (rc < 0) {
		s->rc = rc;
		s->err = *err;
	}
	if (dsecd_pool_submit(r->d->pool, snap_commit_work, snap_commit_done, r) < 0) {
		snap_commit_work(r);	/* no pool left (teardown): do it here */
		snap_commit_done(r);
	}
}

void op_snapshot(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	const struct dsec_be_ops *ops;
	struct dsecd_snap *s;
	struct dsec_err err;
	char *tag = NULL;
	int rc;

	dsec_err_clear(&err);
	/* After a pause or resume in flight; a paused sandbox stays paused. */
	if (r->sb->switching)
		return gate_add(r->sb, r);
	if ((rc = dsec_get_str(r->msg.root, "tag", &tag, &err)) < 0) {
		if (rc == -ENOENT)
			dsec_err_setc(&err, DSEC_E_BAD_REQUEST, EINVAL, "snapshot needs field 'tag'");
		return reply_err(r, &err);
	}
	s = r->snap = xcalloc(1, sizeof(*s));
	s->d = d;
	s->tag = tag;
	ops = r->sb->be->ops;
	if (!fs3_tag_valid(tag)) {
		dsec_err_setc(&err, DSEC_E_INVALID, EINVAL, "tag '%s' is not a valid name[:tag]",
			      tag);
		return reply_err(r, &err);
	}
	if (!ops->snapshot || !d->images) {
		dsec_err_setc(&err, DSEC_E_UNSUPPORTED, ENOTSUP, "backend '%s' cannot snapshot "
			      "sandboxes%s", r->sb->be->name, d->images ? "" : " (no image store)");
		return reply_err(r, &err);
	}
	if (!r->sb->img) {
		dsec_err_setc(&err, DSEC_E_UNSUPPORTED, ENOTSUP, "sandbox '%s' was not made from "
			      "an image: only those can be snapshotted", r->sb->id);
		return reply_err(r, &err);
	}
	/* Its diff would be imported over the base image alone, without the
	 * extras its files were made over. */
	if (r->sb->img->extras[0]) {
		dsec_err_setc(&err, DSEC_E_UNSUPPORTED, ENOTSUP, "sandbox '%s' runs extra layers "
			      "over its image: only a sandbox of one image can be snapshotted",
			      r->sb->id);
		return reply_err(r, &err);
	}
	snprintf(s->parent, sizeof(s->parent), "%s", r->sb->img->digest);
	if (r->sb->snap) {
		dsec_err_setc(&err, DSEC_E_INVALID, EBUSY, "sandbox '%s' is being snapshotted: "
			      "one snapshot or fork at a time", r->sb->id);
		return reply_err(r, &err);
	}
	for (struct dsecd_stage *st = r->sb->stages; st; st = st->next)
		dsecd_snap_skip(s, st->tmp);
	s->sb = r->sb;
	r->sb->snap = s;
	if (ops->snapshot(r->sb->handle, snap_read, s, snap_copied, r, &err) < 0) {
		snap_detach(s);
		return reply_err(r, &err);
	}
	d->ops_inflight++;
}

/* ---- chunk_get: the peer tier of fs3 ----------------------------------------
 *
 * Another node asks for an object of our cache: it is read and verified on
 * a thread of the serve pool (fs3_serve never asks a source, so nodes asking
 * each other cannot loop, and the serve pool is not the one whose threads
 * may be waiting for that node) and its stored bytes go back as they are. */

void req_chunk_free(struct dsecd_req *r)
{
	free(r->okind);
	free(r->odigest);
	dsec_buf_free(&r->data);
}

static void chunk_get_work(void *arg)
{
	struct dsecd_req *r = arg;

	r->orc = fs3_serve(r->d->images, r->okind, r->odigest, &r->data, &r->oerr);
}

static void chunk_get_done(void *arg)
{
	struct dsecd_req *r = arg;
	struct dsec_pk p;

	r->d->ops_inflight--;
	if (r->orc < 0) {
		log_debug("chunk_get %s %s: %s", r->okind, r->odigest, r->oerr.msg);
		return reply_err(r, &r->oerr);
	}
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	dsec_pk_kv_bin(&p, "data", r->data.data, r->data.len);
	dsec_pk_end(&p);
	req_complete(r, &p);
}

void op_chunk_get(struct dsecd_req *r)
{
	struct dsec_err err;
	int rc;

	dsec_err_clear(&err);
	dsec_err_clear(&r->oerr);
	if (!r->d->images) {
		dsec_err_setc(&err, DSEC_E_UNSUPPORTED, ENOTSUP, "node '%s' has no image store",
			      r->d->conf.node);
		return reply_err(r, &err);
	}
	if ((rc = dsec_get_str(r->msg.root, "kind", &r->okind, &err)) < 0 ||
	    (rc = dsec_get_str(r->msg.root, "digest", &r->odigest, &err)) < 0) {
		if (rc == -ENOENT)
			dsec_err_setc(&err, DSEC_E_BAD_REQUEST, EINVAL,
				      "chunk_get needs fields 'kind' and 'digest'");
		return reply_err(r, &err);
	}
	if ((rc = dsecd_pool_submit(r->d->serve_pool, chunk_get_work, chunk_get_done, r)) < 0) {
		dsec_err_set(&err, -rc, "cannot queue chunk_get: %s", strerror(-rc));
		return reply_err(r, &err);
	}
	r->d->ops_inflight++;
}
