/* journal.c - the node's write-ahead journal of trajectory entries: one sync a batch.
 *
 * A batch's entries may concern many sandboxes; syncing each one's file
 * would cost a sync per sandbox (64 rollouts stepping at once: 64 syncs
 * before any reply).  So each batch is written to one journal file and
 * synced once: that is what makes its entries durable.  The sandboxes'
 * files are written after it without a sync; a checkpoint (when the
 * journal is full, and at a clean stop) syncs every file written since
 * the last one and starts the journal again.  After a crash, rlc_open
 * replays the journal: each entry is written again where its file has it
 * (the same bytes at the same offset), then a checkpoint.
 *
 * TRAJECTORY_DIR/journal: a 4 KiB header (magic "DSECJRN1", u32 gen),
 * then records: u32 length, u32 check (FNV-1a of the payload, folded),
 * payload: u32 gen, u16 name length, u64 offset, the file's name in the
 * directory, the entry's record as its file has it.  Records of another
 * generation than the header's are from before a checkpoint: reading
 * stops at the first one, at a zero length (the file is zero-filled
 * ahead of its end, so that a sync flushes data and not the journal of
 * the file system) and at a record that fails its check (torn).
 * Everything here runs on the log's writer thread, or before it starts.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dsec.h"
#include "log.h"
#include "rlc-int.h"
#include "util.h"

#define J_MAGIC "DSECJRN1"
#define J_HEAD 4096			/* the header block */
#define J_REC_HEAD 8			/* length + check */
#define J_FIXED 14			/* gen + name length + offset */
#define J_MAX (16u << 20)		/* a checkpoint when it holds more */
#define J_GROW (1u << 20)		/* zeros written ahead at a time */
#define J_NAME_MAX 255

struct rlc_journal {
	char *dir;
	int fd;
	int dfd;			/* the directory (checkpoints sync it) */
	uint32_t gen;			/* the header's generation */
	uint64_t size;			/* the end of the last record */
	uint64_t alloc;			/* zeros written up to here */
	struct dsec_buf buf;		/* the batch's records */
	char **dirty;			/* files written since the checkpoint */
	size_t ndirty, capdirty;
	uint64_t checkpoints;
};

uint32_t rlc_check(const void *p, size_t n)
{
	uint64_t h = dsec_fnv1a(DSEC_FNV1A_INIT, p, n);
	return (uint32_t)(h ^ (h >> 32));
}

int rlc_pwrite_full(int fd, const void *p, size_t n, uint64_t off)
{
	while (n) {
		ssize_t w = pwrite(fd, p, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p = (const char *)p + w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

static int write_head(struct rlc_journal *j)
{
	char head[J_HEAD] = { 0 };
	uint32_t g = htole32(j->gen);

	memcpy(head, J_MAGIC, 8);
	memcpy(head + 8, &g, 4);
	int rc = rlc_pwrite_full(j->fd, head, sizeof(head), 0);
	if (rc == 0 && fdatasync(j->fd) < 0)
		rc = -errno;
	return rc;
}

static int zero_ahead(struct rlc_journal *j, size_t need)
{
	static const char zeros[64 << 10];

	if (j->size + need <= j->alloc)
		return 0;
	uint64_t want = j->alloc + J_GROW;
	while (want < j->size + need)
		want += J_GROW;
	for (uint64_t at = j->alloc; at < want;) {
		size_t n = want - at < sizeof(zeros) ? (size_t)(want - at) : sizeof(zeros);
		int rc = rlc_pwrite_full(j->fd, zeros, n, at);
		if (rc < 0)
			return rc;
		at += n;
	}
	j->alloc = want;
	return 0;
}

/* Syncs every file written since the last checkpoint, and the directory,
 * then starts a new generation. */
static int checkpoint(struct rlc_journal *j)
{
	int rc = 0;

	for (size_t i = 0; i < j->ndirty; i++) {
		int fd = openat(j->dfd, j->dirty[i], O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			if (fdatasync(fd) < 0 && !rc)
				rc = -errno;
			close(fd);
		} else if (errno != ENOENT && !rc) {
			rc = -errno;
		}
		free(j->dirty[i]);
	}
	j->ndirty = 0;
	if (fsync(j->dfd) < 0 && !rc)
		rc = -errno;
	if (rc < 0)
		return rc;	/* the journal keeps what the files may lack */
	j->gen++;
	j->size = J_HEAD;
	j->checkpoints++;
	return write_head(j);
}

static void mark_dirty(struct rlc_journal *j, const char *name)
{
	/* The callers mark a file once a generation (rlc_journal_gen); a
	 * look at the last few keeps a replay's list short. */
	for (size_t i = j->ndirty, k = 0; i-- > 0 && k < 8; k++)
		if (!strcmp(j->dirty[i], name))
			return;
	if (j->ndirty == j->capdirty) {
		j->capdirty = j->capdirty ? 2 * j->capdirty : 64;
		j->dirty = xrealloc(j->dirty, j->capdirty * sizeof(*j->dirty));
	}
	j->dirty[j->ndirty++] = xstrdup(name);
}

static bool name_ok(const char *name, size_t n)
{
	return n > 4 && n <= J_NAME_MAX && !memchr(name, '/', n) && !memchr(name, '\0', n) &&
	       name[0] != '.' && !memcmp(name + n - 4, ".log", 4);
}

/* Writes the journal's records again into their files; the number in *n. */
static int replay(struct rlc_journal *j, uint64_t *n)
{
	struct stat st;
	uint64_t off = J_HEAD;
	char *buf = NULL;
	size_t cap = 0;
	int rc = 0;

	*n = 0;
	if (fstat(j->fd, &st) < 0)
		return -errno;
	while (off + J_REC_HEAD + J_FIXED <= (uint64_t)st.st_size) {
		uint32_t head[2], len, gen;
		uint16_t nlen;
		uint64_t at;

		if (pread(j->fd, head, sizeof(head), (off_t)off) != sizeof(head))
			break;
		len = le32toh(head[0]);
		if (len < J_FIXED || off + J_REC_HEAD + len > (uint64_t)st.st_size)
			break;
		if (len > cap) {
			cap = len;
			buf = xrealloc(buf, cap);
		}
		if (pread(j->fd, buf, len, (off_t)(off + J_REC_HEAD)) != (ssize_t)len ||
		    rlc_check(buf, len) != le32toh(head[1]))
			break;
		memcpy(&gen, buf, 4);
		memcpy(&nlen, buf + 4, 2);
		memcpy(&at, buf + 6, 8);
		gen = le32toh(gen);
		nlen = le16toh(nlen);
		at = le64toh(at);
		if (gen != j->gen || J_FIXED + (size_t)nlen >= len)
			break;
		char name[J_NAME_MAX + 1];
		if (!name_ok(buf + J_FIXED, nlen))
			break;
		memcpy(name, buf + J_FIXED, nlen);
		name[nlen] = '\0';
		int fd = openat(j->dfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0) {
			rc = -errno;
			break;
		}
		rc = rlc_pwrite_full(fd, buf + J_FIXED + nlen, len - J_FIXED - nlen, at);
		close(fd);
		if (rc < 0)
			break;
		mark_dirty(j, name);
		(*n)++;
		off += J_REC_HEAD + len;
	}
	free(buf);
	return rc;
}

int rlc_journal_open(const char *dir, struct rlc_journal **out, struct dsec_err *err)
{
	struct rlc_journal *j = xcalloc(1, sizeof(*j));
	char head[12];
	uint64_t n = 0;
	struct stat st;
	int rc;

	j->dir = xstrdup(dir);
	j->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	j->fd = j->dfd < 0 ? -1 : openat(j->dfd, "journal", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (j->fd < 0) {
		rc = dsec_err_setc(err, DSEC_E_INTERNAL, errno, "cannot open the trajectory "
				   "journal in '%s': %s", dir, strerror(errno));
		rlc_journal_close(j);
		return rc;
	}
	if (pread(j->fd, head, sizeof(head), 0) == sizeof(head) && !memcmp(head, J_MAGIC, 8)) {
		uint32_t g;
		memcpy(&g, head + 8, 4);
		j->gen = le32toh(g);
		if ((rc = replay(j, &n)) < 0) {
			rc = dsec_err_setc(err, DSEC_E_INTERNAL, -rc, "cannot replay the trajectory "
					   "journal in '%s': %s", dir, strerror(-rc));
			rlc_journal_close(j);
			return rc;
		}
		if (n)
			log_info("trajectory: %llu entries of the journal written again into their "
				 "logs (the last stop was not clean)", (unsigned long long)n);
	}
	if ((rc = checkpoint(j)) < 0) {
		rc = dsec_err_setc(err, DSEC_E_INTERNAL, -rc, "cannot start the trajectory journal "
				   "in '%s': %s", dir, strerror(-rc));
		rlc_journal_close(j);
		return rc;
	}
	j->alloc = fstat(j->fd, &st) == 0 ? (uint64_t)st.st_size : J_HEAD;
	if (j->alloc < J_HEAD)
		j->alloc = J_HEAD;
	*out = j;
	return 0;
}

void rlc_journal_add(struct rlc_journal *j, const char *name, uint64_t off, const void *rec,
		     size_t len)
{
	size_t nlen = strlen(name);
	uint32_t plen = (uint32_t)(J_FIXED + nlen + len);
	uint32_t head[2];
	uint32_t gen = htole32(j->gen);
	uint16_t n16 = htole16((uint16_t)nlen);
	uint64_t off64 = htole64(off);
	size_t at = j->buf.len;

	DSEC_ASSERT(nlen <= J_NAME_MAX);
	head[0] = htole32(plen);
	head[1] = 0;
	dsec_buf_add(&j->buf, head, sizeof(head));
	dsec_buf_add(&j->buf, &gen, 4);
	dsec_buf_add(&j->buf, &n16, 2);
	dsec_buf_add(&j->buf, &off64, 8);
	dsec_buf_add(&j->buf, name, nlen);
	dsec_buf_add(&j->buf, rec, len);
	head[1] = htole32(rlc_check(j->buf.data + at + J_REC_HEAD, plen));
	memcpy(j->buf.data + at + 4, &head[1], 4);
}

void rlc_journal_mark(struct rlc_journal *j, const char *name)
{
	mark_dirty(j, name);
}

uint32_t rlc_journal_gen(const struct rlc_journal *j)
{
	return j->gen;
}

int rlc_journal_commit(struct rlc_journal *j)
{
	int rc;

	if (!j->buf.len)
		return 0;
	if (j->size + j->buf.len > J_MAX && j->size > J_HEAD) {
		/* The files the journal covers are synced first: then it can
		 * start again, with this batch (whose files are written only
		 * after this returns: the next checkpoint syncs them). */
		if ((rc = checkpoint(j)) < 0)
			return rc;
		/* the batch's records carry the old generation */
		uint32_t gen = htole32(j->gen);
		for (size_t at = 0; at < j->buf.len;) {
			uint32_t len;
			memcpy(&len, j->buf.data + at, 4);
			len = le32toh(len);
			memcpy(j->buf.data + at + J_REC_HEAD, &gen, 4);
			uint32_t c = htole32(rlc_check(j->buf.data + at + J_REC_HEAD, len));
			memcpy(j->buf.data + at + 4, &c, 4);
			/* the files of this batch are dirty again */
			uint16_t nlen;
			memcpy(&nlen, j->buf.data + at + J_REC_HEAD + 4, 2);
			char name[J_NAME_MAX + 1];
			memcpy(name, j->buf.data + at + J_REC_HEAD + J_FIXED, le16toh(nlen));
			name[le16toh(nlen)] = '\0';
			mark_dirty(j, name);
			at += J_REC_HEAD + len;
		}
	}
	if ((rc = zero_ahead(j, j->buf.len + J_REC_HEAD)) < 0 ||
	    (rc = rlc_pwrite_full(j->fd, j->buf.data, j->buf.len, j->size)) < 0 ||
	    (fdatasync(j->fd) < 0 && (rc = -errno))) {
		dsec_buf_reset(&j->buf);
		return rc;
	}
	j->size += j->buf.len;
	dsec_buf_reset(&j->buf);
	return 0;
}

int rlc_journal_dirfd(const struct rlc_journal *j)
{
	return j->dfd;
}

uint64_t rlc_journal_checkpoints(const struct rlc_journal *j)
{
	return j ? j->checkpoints : 0;
}

void rlc_journal_close(struct rlc_journal *j)
{
	if (!j)
		return;
	if (j->fd >= 0 && j->dfd >= 0 && checkpoint(j) < 0)
		log_warn("trajectory: the last checkpoint failed: the journal is replayed at the "
			 "next start");
	for (size_t i = 0; i < j->ndirty; i++)
		free(j->dirty[i]);
	free(j->dirty);
	dsec_buf_free(&j->buf);
	if (j->fd >= 0)
		close(j->fd);
	if (j->dfd >= 0)
		close(j->dfd);
	free(j->dir);
	free(j);
}
