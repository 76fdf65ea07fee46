/* export.c - rlcoord: a trajectory log read back (the trajectory op, page
 * by page, on the log's writer thread so a page sees every batch before
 * it), and the logs of sandboxes long gone removed (trajectory_keep).
 * The log's format is tlog.c's. */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "dsec.h"
#include "log.h"
#include "ops.h"
#include "proto.h"
#include "rlc.h"
#include "rlc-int.h"

#define PAGE_ENTRIES 1000		/* trajectory: entries per reply, by default and at most */

/* ---- the trajectory op ---------------------------------------------------- */

static bool id_ok(const char *id)
{
	const char *colon = strchr(id, ':');
	char node[256];

	if (!colon || (size_t)(colon - id) >= sizeof(node) || !colon[1])
		return false;
	memcpy(node, id, (size_t)(colon - id));
	node[colon - id] = '\0';
	if (!dsecd_node_name_ok(node))
		return false;
	return strspn(colon + 1, "0123456789abcdef") == strlen(colon + 1);
}

bool rlc_log_name_ok(struct dsecd *d, const char *name)
{
	size_t n = strlen(name), node = strlen(d->conf.node);
	char id[DSEC_STR_MAX];

	if (n <= 4 || n - 4 >= sizeof(id) || strcmp(name + n - 4, ".log"))
		return false;
	memcpy(id, name, n - 4);
	id[n - 4] = '\0';
	return id_ok(id) && !(strncmp(id, d->conf.node, node) == 0 && id[node] == ':');
}

static void page_work(void *arg)
{
	struct rlc_read *rd = arg;
	struct dsec_buf b = { 0 };
	struct dsec_pk p;
	uint64_t off = 0;
	struct stat st;
	int fd = open(rd->path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		rd->rc = dsec_err_setc(&rd->err, errno == ENOENT ? DSEC_E_NOT_FOUND : DSEC_E_INTERNAL,
				       errno, "no trajectory of that sandbox on this node%s%s",
				       errno == ENOENT ? "" : ": ", errno == ENOENT ? "" :
				       strerror(errno));
		return;
	}
	fstat(fd, &st);
	dsec_pk_init(&p);
	dsec_pk_array_begin(&p);
	rd->end = true;
	rd->next = rd->from;
	while (off + REC_HEAD <= (uint64_t)st.st_size) {
		uint32_t head[2];
		struct dsec_msg m = { 0 };
		struct dsec_err err;
		uint64_t seq = 0;

		if (pread(fd, head, sizeof(head), (off_t)off) != sizeof(head))
			break;
		uint32_t n = le32toh(head[0]);
		if (n == 0 || n > REC_MAX || off + REC_HEAD + n > (uint64_t)st.st_size)
			break;	/* the zeros past the end, or a torn entry */
		dsec_err_clear(&err);
		if (rlc_rec_read(fd, off, n + REC_HEAD, &b, &m, &err) < 0 ||
		    dsec_get_u64(m.root, "seq", &seq, &err) < 0) {
			dsec_msg_free(&m);
			break;	/* a torn tail: the log ends before it */
		}
		off += REC_HEAD + n;
		if (seq < rd->from) {
			dsec_msg_free(&m);
			continue;
		}
		if (rd->n >= rd->limit || p.sb.size >= rd->max_bytes) {
			dsec_msg_free(&m);
			rd->end = false;
			break;
		}
		void *req = NULL, *rep = NULL;
		size_t req_len = 0, rep_len = 0;
		if (rlc_unzip(m.root, "req", "req_len", &req, &req_len, &err) < 0 ||
		    rlc_unzip(m.root, "reply", "reply_len", &rep, &rep_len, &err) < 0 ||
		    !dsec_msgpack_bounded(req, req_len) || !dsec_msgpack_bounded(rep, rep_len)) {
			free(req);
			free(rep);
			dsec_msg_free(&m);
			break;
		}
		dsec_pk_map_begin(&p);
		for (uint32_t i = 0; i < m.root->via.map.size; i++) {
			const msgpack_object_kv *kv = &m.root->via.map.ptr[i];
			const char *k = kv->key.via.str.ptr;
			size_t kn = kv->key.type == MSGPACK_OBJECT_STR ? kv->key.via.str.size : 0;
#define IS(s) (kn == sizeof(s) - 1 && !memcmp(k, s, kn))
			if (IS("req") || IS("reply") || IS("req_len") || IS("reply_len") ||
			    IS("hash"))
				continue;
#undef IS
			dsec_pk_object(&p, &kv->key);
			dsec_pk_object(&p, &kv->val);
		}
		const void *h;
		size_t hn;
		if (dsec_get_bin(m.root, "hash", RLC_HASH, &h, &hn, &err) == 0 && hn == RLC_HASH) {
			char hx[RLC_HASH_HEX];
			rlc_hash_hex(h, hx);
			dsec_pk_kv_str(&p, "hash", hx);
		}
		dsec_pk_str(&p, "request");
		dsec_pk_raw(&p, req, req_len);
		dsec_pk_str(&p, "reply");
		dsec_pk_raw(&p, rep, rep_len);
		dsec_pk_end(&p);
		free(req);
		free(rep);
		dsec_msg_free(&m);
		rd->n++;
		rd->next = seq + 1;
	}
	dsec_pk_end(&p);
	rd->out = dsec_pk_detach(&p, &rd->out_len);
	dsec_buf_free(&b);
	close(fd);
}

static void page_done(void *arg)
{
	struct rlc_read *rd = arg;
	struct dsecd_req *r = rd->r;
	struct dsec_pk p;

	r->d->ops_inflight--;
	if (rd->rc < 0) {
		reply_err(r, &rd->err);
	} else {
		_cleanup_free_ char *id = NULL;
		dsec_get_str(r->msg.root, "id", &id, NULL);
		dsec_pk_init(&p);
		dsec_pk_reply_begin(&p);
		dsec_pk_kv_str(&p, "id", id);
		dsec_pk_str(&p, "entries");
		dsec_pk_raw(&p, rd->out, rd->out_len);
		dsec_pk_kv_u64(&p, "next", rd->next);
		dsec_pk_kv_bool(&p, "end", rd->end);
		dsec_pk_end(&p);
		req_complete(r, &p);
	}
	free(rd->out);
	free(rd->path);
	free(rd);
}

void op_trajectory(struct dsecd_req *r)
{
	struct dsecd *d = r->d;
	_cleanup_free_ char *id = NULL;
	struct dsec_err err;
	uint64_t from = 0, limit = PAGE_ENTRIES;
	int rc;

	dsec_err_clear(&err);
	if ((rc = dsec_get_str(r->msg.root, "id", &id, &err)) < 0) {
		if (rc == -ENOENT)
			dsec_err_setc(&err, DSEC_E_BAD_REQUEST, EINVAL, "trajectory needs field 'id'");
		return reply_err(r, &err);
	}
	if (dsec_get_u64_opt(r->msg.root, "from", &from, &err) < 0 ||
	    dsec_get_u64_opt(r->msg.root, "limit", &limit, &err) < 0)
		return reply_err(r, &err);
	if (!d->rlc) {
		dsec_err_setc(&err, DSEC_E_UNSUPPORTED, ENOTSUP, "node '%s' keeps no trajectories",
			      d->conf.node);
		return reply_err(r, &err);
	}
	if (!id_ok(id)) {
		dsec_err_setc(&err, DSEC_E_INVALID, EINVAL, "'%.64s' is not a sandbox id", id);
		return reply_err(r, &err);
	}
	struct rlc_read *rd = xcalloc(1, sizeof(*rd));
	rd->r = r;
	rd->path = xasprintf("%s/%s.log", d->rlc->dir, id);
	rd->from = from;
	rd->limit = limit == 0 || limit > PAGE_ENTRIES ? PAGE_ENTRIES : limit;
	rd->max_bytes = d->conf.max_frame / 2;
	dsec_err_clear(&rd->err);
	/* The writer's thread: a page read after a batch sees the batch. */
	if (dsecd_pool_submit(d->rlc->writer, page_work, page_done, rd) < 0) {
		free(rd->path);
		free(rd);
		dsec_err_setc(&err, DSEC_E_INTERNAL, EAGAIN, "cannot read the trajectory log");
		return reply_err(r, &err);
	}
	d->ops_inflight++;
}

/* ---- removing old logs ------------------------------------------------------ */

struct sweep {
	struct rlc *rl;
	char **live;			/* the names of the logs of sandboxes in the table, sorted */
	size_t nlive;
	double keep;
	uint64_t removed;
};

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The writer's: removes the logs not written for keep seconds that no
 * sandbox of the table has (a live one is never removed, however idle). */
static void sweep_work(void *arg)
{
	struct sweep *s = arg;
	DIR *dir = opendir(s->rl->dir);
	struct dirent *de;
	struct stat st;
	time_t now = time(NULL);

	if (!dir)
		return;
	while ((de = readdir(dir))) {
		size_t n = strlen(de->d_name);
		const char *name = de->d_name;
		if (n <= 4 || strcmp(name + n - 4, ".log") || name[0] == '.')
			continue;
		if (bsearch(&name, s->live, s->nlive, sizeof(*s->live), name_cmp))
			continue;
		if (fstatat(dirfd(dir), name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
		    difftime(now, st.st_mtime) < s->keep)
			continue;
		if (unlinkat(dirfd(dir), name, 0) == 0)
			s->removed++;
	}
	closedir(dir);
}

static void sweep_done(void *arg)
{
	struct sweep *s = arg;

	s->rl->d->ops_inflight--;
	s->rl->swept += s->removed;
	s->rl->sweeping = false;
	if (s->removed)
		log_info("trajectory: removed %llu logs of sandboxes gone for more than "
			 "trajectory_keep (%.0f s)", (unsigned long long)s->removed, s->keep);
	for (size_t i = 0; i < s->nlive; i++)
		free(s->live[i]);
	free(s->live);
	free(s);
}

void rlc_sweep_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct rlc *rl = dsec_container_of(w, struct rlc, sweep_timer);
	struct dsecd *d = rl->d;
	struct sweep *s;
	size_t cap = 16;

	if (rl->sweeping || d->conf.trajectory_keep <= 0)
		return;
	s = xcalloc(1, sizeof(*s));
	s->rl = rl;
	s->keep = d->conf.trajectory_keep;
	s->live = xmalloc(cap * sizeof(*s->live));
	for (struct dsecd_sb *sb = d->all; sb; sb = sb->anext)
		if (sb->tlog) {
			if (s->nlive == cap)
				s->live = xrealloc(s->live, (cap *= 2) * sizeof(*s->live));
			s->live[s->nlive++] = xstrdup(sb->tlog->name);
		}
	qsort(s->live, s->nlive, sizeof(*s->live), name_cmp);
	rl->sweeping = true;
	if (dsecd_pool_submit(rl->writer, sweep_work, sweep_done, s) < 0) {
		rl->sweeping = false;
		for (size_t i = 0; i < s->nlive; i++)
			free(s->live[i]);
		free(s->live);
		free(s);
		return;
	}
	d->ops_inflight++;
}
