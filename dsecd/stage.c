/* stage.c - what a client moves in parts, kept by the daemon between its
 * requests.
 *
 * A staged write (file_write with 'parts', then 'stage'): its parts go into
 * a hidden file beside the path, ".dsec-part-ID", and the last renames it
 * into place, so a reader sees the old file or the whole new one, never a
 * part.  A staged download (file_download with 'archive' and 'stage'): the
 * archive the client then reads in parts and removes.  Either one no
 * request touched for stage_grace belongs to a client that is gone: its
 * file is removed, and the stage forgotten.  Destroy forgets them all (the
 * files go with the sandbox).  A snapshot (and so a fork) leaves them out
 * of its copy (ops-image.c), the stages begun while it copies too.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "daemon.h"
#include "log.h"
#include "ops.h"

/* Stages one sandbox may have at once. */
#define STAGES_MAX 64

/* A removal of a stage's file that no request waits for. */
struct stage_rm {
	struct dsecd_sb *sb;		/* held */
	char *tmp;			/* the path removed */
	struct dsec_file_req q;
	struct dsec_file_res res;
};

static void rm_done(void *arg, int rc, const struct dsec_err *err)
{
	struct stage_rm *m = arg;
	struct dsecd *d = m->sb->d;

	d->ops_inflight--;
	if (rc < 0 && err->code != DSEC_E_NOT_FOUND)
		log_warn("sandbox %s: cannot remove '%s' its client left: %s", m->sb->id, m->tmp,
			 err->msg);
	dsec_file_res_free(&m->res);
	dsecd_sb_unref(d, m->sb);
	free(m->tmp);
	free(m);
}

/* Removes the file tmp of sb, answering no one. */
static void stage_rm(struct dsecd_sb *sb, const char *tmp)
{
	struct stage_rm *m = xcalloc(1, sizeof(*m));
	struct dsec_err err;

	if (sb->state != SB_READY || !sb->be->ops->file) {
		free(m);
		return;
	}
	m->sb = sb;
	m->tmp = xstrdup(tmp);
	m->q = (struct dsec_file_req){ .op = DSEC_FILE_REMOVE, .path = m->tmp,
				       .uid = DSEC_OWNER_DEFAULT, .gid = DSEC_OWNER_DEFAULT };
	dsecd_sb_ref(sb);
	dsec_err_clear(&err);
	if (sb->be->ops->file(sb->handle, &m->q, &m->res, rm_done, m, &err) < 0) {
		log_warn("sandbox %s: cannot remove '%s' its client left: %s", sb->id, tmp,
			 err.msg);
		dsecd_sb_unref(sb->d, sb);
		free(m->tmp);
		free(m);
		return;
	}
	sb->d->ops_inflight++;
}

static void stage_unlink(struct dsecd_stage *st)
{
	for (struct dsecd_stage **p = &st->sb->stages; *p; p = &(*p)->next)
		if (*p == st) {
			*p = st->next;
			return;
		}
}

static void stage_free(struct dsecd_stage *st)
{
	free(st->path);
	free(st->tmp);
	free(st);
}

static void grace_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct dsecd_stage *st = (struct dsecd_stage *)((char *)w - offsetof(struct dsecd_stage,
									    timer));

	(void)revents;
	/* A paused sandbox's files wait for its resume (and its client). */
	if (st->busy || st->sb->paused) {
		ev_timer_again(loop, w);
		return;
	}
	log_info("sandbox %s: removing '%s', staged for '%s' by a client silent for %.0f s",
		 st->sb->id, st->tmp, st->path, w->repeat);
	dsecd_stage_end(st, true);
}

struct dsecd_stage *dsecd_stage_new(struct dsecd_sb *sb, const char *path, bool download,
				    struct dsec_err *err)
{
	struct dsecd *d = sb->d;
	struct dsecd_stage *st;
	const char *slash;
	unsigned n = 0;
	uint64_t x;

	for (st = sb->stages; st; st = st->next)
		n++;
	if (n >= STAGES_MAX) {
		dsec_err_setc(err, DSEC_E_CAPACITY, EMFILE,
			      "sandbox %s has %u staged writes and downloads, the most it may: "
			      "commit or abort one first", sb->id, n);
		return NULL;
	}
	if (getrandom(&x, sizeof(x), 0) != (ssize_t)sizeof(x))
		x = dsec_now_ns() ^ (sb->serial << 40) ^ (uint64_t)(uintptr_t)sb;
	st = xcalloc(1, sizeof(*st));
	st->sb = sb;
	snprintf(st->id, sizeof(st->id), "%016" PRIx64, x);
	st->path = xstrdup(path);
	st->download = download;
	if (download) {
		st->tmp = xstrdup(path);
	} else {
		slash = strrchr(path, '/');
		st->tmp = xasprintf("%.*s.dsec-part-%s", slash ? (int)(slash - path + 1) : 0, path,
				    st->id);
	}
	if (sb->snap)
		dsecd_snap_skip(sb->snap, st->tmp);
	ev_init(&st->timer, grace_cb);
	st->timer.repeat = d->conf.stage_grace > 0 ? d->conf.stage_grace : 1;
	ev_timer_again(d->loop, &st->timer);
	st->next = sb->stages;
	sb->stages = st;
	return st;
}

struct dsecd_stage *dsecd_stage_find(struct dsecd_sb *sb, const char *id, const char *path,
				     struct dsec_err *err)
{
	struct dsecd_stage *st;

	for (st = sb->stages; st; st = st->next)
		if (!st->download && !strcmp(st->id, id))
			break;
	if (!st) {
		dsec_err_setc(err, DSEC_E_NOT_FOUND, ENOENT,
			      "sandbox %s has no staged write '%.64s': it was committed, aborted, "
			      "or left untouched for stage_grace (%.0f s)", sb->id, id,
			      sb->d->conf.stage_grace);
		return NULL;
	}
	if (path && strcmp(st->path, path)) {
		dsec_err_setc(err, DSEC_E_INVALID, EINVAL,
			      "staged write '%s' is of '%s', not of '%s'", id, st->path, path);
		return NULL;
	}
	if (st->busy) {
		dsec_err_setc(err, DSEC_E_BUSY, EBUSY,
			      "staged write '%s' has a part in flight: send the next after it", id);
		return NULL;
	}
	return st;
}

struct dsecd_stage *dsecd_stage_of_file(struct dsecd_sb *sb, const char *path)
{
	for (struct dsecd_stage *st = sb->stages; st; st = st->next)
		if (st->download && !strcmp(st->tmp, path))
			return st;
	return NULL;
}

void dsecd_stage_touch(struct dsecd_stage *st)
{
	ev_timer_again(st->sb->d->loop, &st->timer);
}

void dsecd_stage_end(struct dsecd_stage *st, bool remove)
{
	struct dsecd_sb *sb = st->sb;

	ev_timer_stop(sb->d->loop, &st->timer);
	if (!st->dropped)
		stage_unlink(st);
	if (remove && !st->dropped)
		stage_rm(sb, st->tmp);
	stage_free(st);
}

void dsecd_stages_drop(struct dsecd_sb *sb)
{
	struct dsecd_stage *st = sb->stages, *next;

	sb->stages = NULL;
	for (; st; st = next) {
		next = st->next;
		ev_timer_stop(sb->d->loop, &st->timer);
		/* The request working on it ends it. */
		if (st->busy)
			st->dropped = true;
		else
			stage_free(st);
	}
}

unsigned dsecd_stages_count(const struct dsecd_sb *sb)
{
	unsigned n = 0;

	for (const struct dsecd_stage *st = sb->stages; st; st = st->next)
		n++;
	return n;
}
