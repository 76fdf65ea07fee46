/* reset.c - reset a sandbox to its creation state or a checkpoint; fork N from one.
 *
 * A sandbox keeps its create's request (rlc_keep_spec).  `reset` makes a
 * new backend sandbox of that request (the image a checkpoint names, when
 * given: an image of `snapshot`) on this node, then swaps it in under the
 * same id: the new one's handle and image become the sandbox's, the old
 * ones go with a throwaway entry that is destroyed.  Everything of the
 * sandbox as the daemon knows it stays (id, TTLs, labels, lease, its
 * trajectory log, which gets a reset entry); its processes, sessions and
 * files are the new ones'.  The backend sandbox has then another id than
 * the sandbox (sb->be_id), which the backend's lost reports are mapped by.
 *
 * `fork` snapshots the sandbox as it is and makes n sandboxes of the
 * snapshot with the rest of its create's request (GRPO: prepare once,
 * roll out n), in one reply; all or none: when one fails, those made are
 * destroyed.  With processes, what of its processes the backend can carry
 * (the container backend: its shell sessions, with criu) is checkpointed
 * first (into a directory of the backend's state, removed at the end),
 * and restored into each fork once it is made, before the reply.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon.h"
#include "dsec.h"
#include "fs3.h"
#include "log.h"
#include "ops.h"
#include "proto.h"
#include "rlc.h"
#include "rlc-int.h"

#define FORK_MAX 256

void rlc_keep_spec(struct dsecd_sb *sb, const void *frame, size_t len)
{
	if (sb->spec_frame || !frame)
		return;
	sb->spec_frame = xmalloc(len ? len : 1);
	memcpy(sb->spec_frame, frame, len);
	sb->spec_len = len;
}

/* sb's create request made again: without what is its own (token, lease,
 * trajectory, fwd; grade_layers but for a reset, label NULL, whose new
 * backend sandbox gets the stand-ins of them again), the image replaced
 * by image (unless NULL: the create's, whatever checkpoint the sandbox was
 * reset to since), its labels and a dsec.fork_of label when label is
 * given, and pinned to this node (fwd). */
static void *remake(struct dsecd *d, const struct dsecd_sb *sb, const char *image,
		    const char *label, size_t *len)
{
	static const char *const drop[] = { "v", "op", "token", "lease", "trajectory",
					    "grade_layers", "fwd", "image", "labels",
					    "creation_image", "snapshot_steps", NULL };
	struct dsec_msg m = { 0 };
	const msgpack_object *ci = NULL;
	struct dsec_pk p;

	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "create");
	/* A sandbox recover made of a snapshot was created at the image
	 * creation_image names: its creation state is that one's. */
	if (dsec_msg_parse(&m, sb->spec_frame, sb->spec_len, SIZE_MAX, NULL) == 0 &&
	    (ci = dsec_map_get(m.root, "creation_image")) && ci->type != MSGPACK_OBJECT_STR)
		ci = NULL;
	if (m.root)
		for (uint32_t i = 0; i < m.root->via.map.size; i++) {
			const msgpack_object *k = &m.root->via.map.ptr[i].key;
			bool skip = k->type != MSGPACK_OBJECT_STR;
			for (size_t j = 0; drop[j] && !skip; j++)
				skip = k->via.str.size == strlen(drop[j]) &&
				       !memcmp(k->via.str.ptr, drop[j], k->via.str.size) &&
				       (image || ci || strcmp(drop[j], "image")) &&
				       (label || strcmp(drop[j], "grade_layers"));
			if (!skip) {
				dsec_pk_object(&p, k);
				dsec_pk_object(&p, &m.root->via.map.ptr[i].val);
			}
		}
	if (image)	/* else the create's own, as it came */
		dsec_pk_kv_str(&p, "image", image);
	else if (ci) {
		dsec_pk_str(&p, "image");
		dsec_pk_strn(&p, ci->via.str.ptr, ci->via.str.size);
	}
	dsec_msg_free(&m);
	dsec_pk_str(&p, "labels");
	dsec_pk_map_begin(&p);
	for (char **l = sb->labels; l && *l; l++) {
		const char *eq = strchr(*l, '=');
		if (!eq)
			continue;
		dsec_pk_strn(&p, *l, (size_t)(eq - *l));
		dsec_pk_str(&p, eq + 1);
	}
	if (label)
		dsec_pk_kv_str(&p, "dsec.fork_of", label);
	dsec_pk_end(&p);
	dsec_pk_kv_str(&p, "fwd", d->conf.node);
	dsec_pk_end(&p);
	return dsec_pk_detach(&p, len);
}

/* The id a create's reply names (malloc'd), or NULL. */
static char *made_id(const void *reply, size_t len)
{
	struct dsec_msg m = { 0 };
	const msgpack_object *res = rlc_reply_result(&m, reply, len);
	char *id = NULL;

	if (res)
		dsec_get_str(res, "id", &id, NULL);
	dsec_msg_free(&m);
	return id;
}

/* ---- reset ------------------------------------------------------------------ */

struct reset {
	struct dsecd_req *r;
	uint64_t t0;
};

static void reset_made(void *arg, const void *reply, size_t len, enum dsec_code code)
{
	struct reset *rs = arg;
	struct dsecd_req *r = rs->r;
	struct dsecd *d = r->d;
	struct dsecd_sb *sb = r->sb, *fresh;
	_cleanup_free_ char *id = made_id(reply, len);
	struct dsec_err err;
	struct dsec_pk p;

	d->ops_inflight--;
	if (!id || !(fresh = dsecd_sb_lookup(d, id)) || fresh->state != SB_READY) {
		rlc_reply_error(reply, len, "cannot make the sandbox again", &err);
		free(rs);
		return reply_err(r, &err);
	}
	if (sb->state != SB_READY || sb->switching || sb->running) {
		dsecd_sb_destroy(d, fresh, "the sandbox to reset changed meanwhile", NULL);
		dsec_err_setc(&err, DSEC_E_BUSY, EBUSY, "sandbox '%s' changed while it was reset",
			      sb->id);
		free(rs);
		return reply_err(r, &err);
	}
	/* The swap: sb gets the fresh backend sandbox, fresh the old one. */
	void *h = sb->handle;
	struct fs3_acquired *img = sb->img;
	char *image = sb->image, *be_id = sb->be_id;
	bool paused = sb->paused;
	sb->handle = fresh->handle;
	sb->img = fresh->img;
	sb->image = fresh->image;
	sb->be_id = fresh->be_id ? fresh->be_id : xstrdup(fresh->id);
	sb->paused = fresh->paused;
	fresh->handle = h;
	fresh->img = img;
	fresh->image = image;
	fresh->be_id = be_id ? be_id : xstrdup(sb->id);
	fresh->paused = paused;
	dsecd_sb_paused(d, sb);
	dsecd_streams_drop(d, sb);
	dsecd_sb_destroy(d, fresh, "the sandbox it was swapped with was reset", NULL);
	dsecd_sb_touch(d, sb);
	double ms = (double)(dsec_now_ns() - rs->t0) / 1e6;
	log_info("sandbox %s reset to %s in %.1f ms", sb->id, sb->image ? sb->image : "its spec",
		 ms);
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	dsec_pk_kv_str(&p, "id", sb->id);
	dsec_pk_kv_str(&p, "image", sb->image);
	dsec_pk_kv_double(&p, "duration", ms / 1e3);
	dsec_pk_end(&p);
	free(rs);
	req_complete(r, &p);
}

void op_reset(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	struct dsecd_sb *sb = r->sb;
	_cleanup_free_ char *image = NULL;
	struct dsec_err err;
	size_t len;

	dsec_err_clear(&err);
	if (dsec_get_str_opt(r->msg.root, "image", &image, &err) < 0)
		return reply_err(r, &err);
	if (!sb->spec_frame) {
		dsec_err_setc(&err, DSEC_E_UNSUPPORTED, ENOTSUP, "sandbox '%s' keeps no create "
			      "request to be made again from (a warm pool's?)", sb->id);
		return reply_err(r, &err);
	}
	if (sb->running || sb->switching || sb->nstreams) {
		dsec_err_setc(&err, DSEC_E_BUSY, EBUSY, "sandbox '%s' is running commands: reset "
			      "it after them", sb->id);
		return reply_err(r, &err);
	}
	struct reset *rs = xcalloc(1, sizeof(*rs));
	rs->r = r;
	rs->t0 = dsec_now_ns();
	void *frame = remake(d, sb, image, NULL, &len);
	d->ops_inflight++;
	dsecd_request(d, frame, len, reset_made, rs);
}

/* ---- fork -------------------------------------------------------------------- */

struct fork {
	struct dsecd_req *r;
	uint64_t t0;
	char *tag, *image;
	unsigned n, left, failed, made;
	char **ids;			/* made so far, n slots */
	struct dsec_err err;
	char *ckdir;			/* processes: the checkpoint's directory, or NULL */
	unsigned carried;		/* ... the sessions it holds */
	uint64_t t_ckpt, t_snap;	/* when the checkpoint and the snapshot were done */
	bool repause;			/* paused: resumed for the checkpoint, paused after */
};

static void fork_untag(void *arg)
{
	struct fork *f = arg;
	struct dsec_err err;

	dsec_err_clear(&err);
	if (f->r->d->images && f->tag)
		fs3_untag(f->r->d->images, f->tag, &err);
	if (f->ckdir)
		dsec_rm_rf(f->ckdir);
}

static void fork_end(void *arg);

/* The sandbox paused again (fork_end): the reply then goes out. */
static void fork_repaused(void *arg, const void *reply, size_t len, enum dsec_code code)
{
	struct fork *f = arg;
	struct dsec_msg m = { 0 };
	struct dsec_err err;

	dsec_err_clear(&err);
	if (!rlc_reply_result(&m, reply, len)) {
		rlc_reply_error(reply, len, "cannot pause it again", &err);
		log_warn("fork of %s: resumed for the checkpoint of its processes, %s",
			 f->r->sb->id, err.msg);
	}
	dsec_msg_free(&m);
	fork_end(f);
}

static void fork_end(void *arg)
{
	struct fork *f = arg;
	struct dsecd_req *r = f->r;
	struct dsecd *d = r->d;
	struct dsec_pk p;

	if (f->repause) {
		/* Back as it was asked for: paused (unlogged, as the resume). */
		size_t len;

		f->repause = false;
		dsec_pk_init(&p);
		dsec_pk_request_begin(&p, "pause");
		dsec_pk_kv_str(&p, "id", r->sb->id);
		dsec_pk_end(&p);
		void *frame = dsec_pk_detach(&p, &len);
		return dsecd_request_unlogged(d, frame, len, fork_repaused, f);
	}

	d->ops_inflight--;
	if (f->failed) {
		for (unsigned i = 0; i < f->n; i++) {
			struct dsecd_sb *s = f->ids[i] ? dsecd_sb_lookup(d, f->ids[i]) : NULL;
			if (s && (s->state == SB_READY || s->state == SB_FAILED))
				dsecd_sb_destroy(d, s, "a fork of its group failed", NULL);
		}
		reply_err(r, &f->err);
	} else {
		if (f->ckdir) {
			uint64_t now = dsec_now_ns();

			log_info("fork of %s: %u with processes (%u sessions) in %.1f ms: "
				 "checkpoint %.1f, snapshot %.1f, creates and restores %.1f",
				 r->sb->id, f->n, f->carried, (double)(now - f->t0) / 1e6,
				 (double)(f->t_ckpt - f->t0) / 1e6,
				 (double)(f->t_snap - f->t_ckpt) / 1e6,
				 (double)(now - f->t_snap) / 1e6);
		}
		dsec_pk_init(&p);
		dsec_pk_reply_begin(&p);
		dsec_pk_kv_str(&p, "image", f->image);
		dsec_pk_kv_strv(&p, "ids", (const char *const *)f->ids);
		if (f->ckdir)
			dsec_pk_kv_u64(&p, "sessions", f->carried);
		dsec_pk_kv_double(&p, "duration", (double)(dsec_now_ns() - f->t0) / 1e9);
		dsec_pk_end(&p);
		req_complete(r, &p);
	}
	for (unsigned i = 0; i < f->n; i++)
		free(f->ids[i]);
	free(f->ids);
	free(f->tag);
	free(f->image);
	free(f->ckdir);
	free(f);
}

static void fork_finish(struct fork *f)
{
	if (--f->left)
		return;
	if (dsecd_pool_submit(f->r->d->pool, fork_untag, fork_end, f) < 0)
		fork_end(f);
}

static void fork_restored(void *arg, int rc, const struct dsec_err *err)
{
	struct fork *f = arg;

	if (rc < 0 && !f->failed++)
		f->err = *err;
	fork_finish(f);
}

static void fork_made(void *arg, const void *reply, size_t len, enum dsec_code code)
{
	struct fork *f = arg;
	char *id = made_id(reply, len);

	if (!id) {
		if (!f->failed)
			rlc_reply_error(reply, len, "cannot make a fork", &f->err);
		f->failed++;
	} else {
		f->ids[f->made++] = id;
		/* Its processes, restored before the reply. */
		struct dsecd_sb *s = f->ckdir && f->carried && !f->failed ?
				     dsecd_sb_lookup(f->r->d, id) : NULL;
		if (s && s->be->ops->restore) {
			struct dsec_err e;

			dsec_err_clear(&e);
			f->left++;
			if (s->be->ops->restore(s->handle, f->ckdir, fork_restored, f, &e) < 0)
				fork_restored(f, -EIO, &e);
		}
	}
	fork_finish(f);
}

static void fork_snapped(void *arg, const void *reply, size_t len, enum dsec_code code)
{
	struct fork *f = arg;
	struct dsecd *d = f->r->d;
	struct dsec_msg m = { 0 };
	const msgpack_object *res = rlc_reply_result(&m, reply, len);

	if (res)
		dsec_get_str(res, "image", &f->image, NULL);
	dsec_msg_free(&m);
	f->t_snap = dsec_now_ns();
	if (!f->image) {
		rlc_reply_error(reply, len, "cannot snapshot the sandbox to fork it", &f->err);
		f->failed = 1;
		free(f->tag);
		f->tag = NULL;
		return fork_end(f);
	}
	/* Fill the slots in the order the forks complete: ids[] stays dense. */
	f->left = f->n;
	for (unsigned i = 0; i < f->n; i++) {
		size_t flen;
		void *frame = remake(d, f->r->sb, f->image, f->r->sb->id, &flen);
		dsecd_request(d, frame, flen, fork_made, f);
	}
}

/* The snapshot of the sandbox, then the forks (fork_snapped). */
static void fork_snap(struct fork *f)
{
	struct dsec_pk p;
	size_t len;

	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "snapshot");
	dsec_pk_kv_str(&p, "id", f->r->sb->id);
	dsec_pk_kv_str(&p, "tag", f->tag);
	dsec_pk_end(&p);
	void *frame = dsec_pk_detach(&p, &len);
	dsecd_request(f->r->d, frame, len, fork_snapped, f);
}

static void fork_checkpointed(void *arg, int rc, const struct dsec_err *err)
{
	struct fork *f = arg;

	f->t_ckpt = dsec_now_ns();
	if (rc < 0) {
		f->err = *err;
		f->failed = 1;
		free(f->tag);
		f->tag = NULL;
		if (dsecd_pool_submit(f->r->d->pool, fork_untag, fork_end, f) < 0)
			fork_end(f);
		return;
	}
	fork_snap(f);
}

static void fork_ckpt(struct fork *f);

/* Resumed for the checkpoint (op_fork). */
static void fork_resumed(void *arg, const void *reply, size_t len, enum dsec_code code)
{
	struct fork *f = arg;
	struct dsec_msg m = { 0 };

	if (!rlc_reply_result(&m, reply, len)) {
		dsec_msg_free(&m);
		rlc_reply_error(reply, len, "cannot resume the paused sandbox to checkpoint its "
				"processes", &f->err);
		f->failed = 1;
		f->repause = false;
		free(f->tag);
		f->tag = NULL;
		return fork_end(f);
	}
	dsec_msg_free(&m);
	fork_ckpt(f);
}

void op_fork(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	struct dsecd_sb *sb = r->sb;
	uint64_t n = 1;
	bool processes = false;
	struct dsec_err err;

	dsec_err_clear(&err);
	if (dsec_get_u64_opt(r->msg.root, "n", &n, &err) < 0 ||
	    dsec_get_bool_opt(r->msg.root, "processes", &processes, &err) < 0)
		return reply_err(r, &err);
	if (n < 1 || n > FORK_MAX) {
		dsec_err_setc(&err, DSEC_E_INVALID, EINVAL, "fork makes 1 to %d sandboxes", FORK_MAX);
		return reply_err(r, &err);
	}
	if (!sb->spec_frame) {
		dsec_err_setc(&err, DSEC_E_UNSUPPORTED, ENOTSUP, "sandbox '%s' keeps no create "
			      "request to fork from", sb->id);
		return reply_err(r, &err);
	}
	struct fork *f = xcalloc(1, sizeof(*f));
	f->r = r;
	f->t0 = dsec_now_ns();
	f->n = (unsigned)n;
	f->ids = xcalloc(n + 1, sizeof(*f->ids));
	f->tag = xasprintf("dsec-fork/%s:%016" PRIx64, d->conf.node, d->next_serial++);
	d->ops_inflight++;
	if (!processes)
		return fork_snap(f);
	if (sb->paused && sb->be->ops->checkpoint && sb->be->ops->restore) {
		/* A paused sandbox's processes cannot be checkpointed (they
		 * are frozen): it runs for the checkpoint, then is paused
		 * again before the reply.  Unlogged: the fork is the entry. */
		struct dsec_pk p;
		size_t len;

		f->repause = true;
		dsec_pk_init(&p);
		dsec_pk_request_begin(&p, "resume");
		dsec_pk_kv_str(&p, "id", sb->id);
		dsec_pk_end(&p);
		void *frame = dsec_pk_detach(&p, &len);
		return dsecd_request_unlogged(d, frame, len, fork_resumed, f);
	}
	fork_ckpt(f);
}

/* Its processes first, into a directory of the backend's state (made
 * here: a mkdir on the node's own disk), while they run on. */
static void fork_ckpt(struct fork *f)
{
	struct dsecd_sb *sb = f->r->sb;
	struct dsecd *d = f->r->d;
	struct dsec_err err;

	dsec_err_clear(&err);
	if (!sb->be->ops->checkpoint || !sb->be->ops->restore) {
		dsec_err_setc(&f->err, DSEC_E_UNSUPPORTED, ENOTSUP, "backend '%s' cannot carry "
			      "processes into a fork", sb->be->name);
		f->failed = 1;
		free(f->tag);
		f->tag = NULL;
		return fork_end(f);
	}
	f->ckdir = xasprintf("%s/fork.%016" PRIx64, sb->be->state_dir, d->next_serial++);
	if (mkdir(f->ckdir, 0700) < 0) {
		dsec_err_set(&f->err, errno, "cannot make '%s': %s", f->ckdir, strerror(errno));
		free(f->ckdir);
		f->ckdir = NULL;
		f->failed = 1;
		free(f->tag);
		f->tag = NULL;
		return fork_end(f);
	}
	if (sb->be->ops->checkpoint(sb->handle, f->ckdir, &f->carried, fork_checkpointed, f,
				    &err) < 0)
		fork_checkpointed(f, -EIO, &err);
}
