/* watch.c - rlcoord: hashes of a create's declared files, before and after.
 *
 * A create may name `watch`: files of the sandbox (tests, graders' inputs,
 * answers, configuration) whose SHA-256 is taken when the sandbox is made,
 * before its create's reply (so before any command of the agent), and again
 * when asked (the `watched` op) and when it is graded.  Each hash is read
 * through the daemon's own file_read requests (dsecd_request), a part at a
 * time, so the backend's file API resolves the path inside the sandbox as
 * for a client: a symlink planted by the agent is followed inside it and
 * cannot reach the host.  Each path is first described (file_stat, which
 * does not follow a final symlink): a regular file of at most
 * WATCH_MAX_BYTES is read and hashed, "sha256:HEX"; a symlink is
 * "symlink:TARGET" (a file replaced by a link to a copy of itself is
 * changed); nil for a file that is not there; "error:CODE" for the rest (a
 * directory, a file too large, or past WATCH_TOTAL bytes of one hashing).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "daemon.h"
#include "dsec.h"
#include "log.h"
#include "ops.h"
#include "proto.h"
#include "rlc.h"
#include "rlc-int.h"

#define WATCH_MAX 64			/* paths in a create's watch */
#define WATCH_PATH_MAX 4096		/* bytes of one */
#define WATCH_PART (1u << 20)		/* bytes of one file_read */
#define WATCH_MAX_BYTES (256ull << 20)	/* a file longer than this is not hashed */
#define WATCH_TOTAL (1ull << 30)		/* nor past this many bytes of one hashing */

int rlc_watch_parse(const msgpack_object *m, char ***out, struct dsec_err *err)
{
	char **v = NULL;
	size_t n;
	int rc;

	*out = NULL;
	if ((rc = dsec_get_strv_opt(m, "watch", &v, err)) < 0 || !v)
		return rc;
	n = dsec_strv_len((const char *const *)v);
	for (size_t i = 0; i < n; i++)
		if (v[i][0] != '/' || strlen(v[i]) > WATCH_PATH_MAX) {
			rc = dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "watch path '%.64s' is not "
					   "absolute or is longer than %d bytes", v[i],
					   WATCH_PATH_MAX);
			break;
		}
	if (rc == 0 && n > WATCH_MAX)
		rc = dsec_err_setc(err, DSEC_E_INVALID, E2BIG, "watch names %zu files: at most %d",
				   n, WATCH_MAX);
	if (rc < 0 || !n) {
		dsec_strv_free(v);
		return rc;
	}
	*out = v;
	return 0;
}

struct hashing {
	struct dsecd *d;
	struct dsecd_sb *sb;		/* referenced until the end */
	size_t i, n;			/* the path being hashed, how many */
	uint64_t off;			/* where its next part starts */
	size_t part;			/* bytes of a part: what a reply carries, at most
					 * WATCH_PART */
	uint64_t total;			/* bytes read so far */
	EVP_MD_CTX *md;
	char **out;			/* n hashes, NULL = absent */
	rlc_hashed_fn fn;
	void *arg;
};

static void read_part(struct hashing *h);
static void describe(struct hashing *h);

static char *hex_digest(EVP_MD_CTX *md)
{
	uint8_t b[EVP_MAX_MD_SIZE];
	char hx[RLC_HASH_HEX];
	unsigned len = 0;

	EVP_DigestFinal_ex(md, b, &len);
	rlc_hash_hex(b, hx);	/* SHA-256: RLC_HASH bytes */
	return xstrdup(hx);
}

static void next_path(struct hashing *h, char *hash)
{
	h->out[h->i++] = hash;
	h->off = 0;
	if (h->i < h->n)
		return describe(h);
	EVP_MD_CTX_free(h->md);
	h->fn(h->arg, h->out, h->n);	/* takes out */
	dsecd_sb_unref(h->d, h->sb);
	free(h);
}

static void part_read(void *arg, const void *reply, size_t len, enum dsec_code code)
{
	struct hashing *h = arg;
	struct dsec_msg m = { 0 };
	const msgpack_object *res, *data;

	if (code != DSEC_E_OK || !(res = rlc_reply_result(&m, reply, len)) ||
	    !(data = dsec_map_get(res, "data")) || data->type != MSGPACK_OBJECT_BIN) {
		dsec_msg_free(&m);
		if (code == DSEC_E_NOT_FOUND)
			return next_path(h, NULL);
		return next_path(h, xasprintf("error:%s", dsec_code_name(code ? code
									: DSEC_E_INTERNAL)));
	}
	EVP_DigestUpdate(h->md, data->via.bin.ptr, data->via.bin.size);
	h->off += data->via.bin.size;
	h->total += data->via.bin.size;
	bool end = data->via.bin.size < h->part;
	dsec_msg_free(&m);
	if (end)
		return next_path(h, hex_digest(h->md));
	if (h->off >= WATCH_MAX_BYTES || h->total >= WATCH_TOTAL)
		return next_path(h, xasprintf("error:%s", dsec_code_name(DSEC_E_TOO_LARGE)));
	read_part(h);
}

static void read_part(struct hashing *h)
{
	struct dsec_pk p;

	if (h->off == 0)
		EVP_DigestInit_ex(h->md, EVP_sha256(), NULL);
	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "file_read");
	dsec_pk_kv_str(&p, "id", h->sb->id);
	dsec_pk_kv_str(&p, "path", h->sb->watch[h->i]);
	dsec_pk_kv_u64(&p, "offset", h->off);
	dsec_pk_kv_u64(&p, "length", h->part);
	dsec_pk_end(&p);
	rlc_send(h->d, &p, part_read, h, true);
}

static void described(void *arg, const void *reply, size_t len, enum dsec_code code)
{
	struct hashing *h = arg;
	struct dsec_msg m = { 0 };
	const msgpack_object *res = rlc_reply_result(&m, reply, len);
	_cleanup_free_ char *type = NULL, *target = NULL;
	uint64_t size = 0;
	char *hash = NULL;

	if (code == DSEC_E_NOT_FOUND) {
		dsec_msg_free(&m);
		return next_path(h, NULL);
	}
	if (!res || dsec_get_str(res, "type", &type, NULL) < 0)
		hash = xasprintf("error:%s", dsec_code_name(code ? code : DSEC_E_INTERNAL));
	else if (!strcmp(type, "symlink") && dsec_get_str(res, "target", &target, NULL) == 0) {
		/* A target is any bytes the agent chose: valid UTF-8 in the reply. */
		char clean[1100];
		dsec_utf8_clean(clean, sizeof(clean), target, strnlen(target, 1024));
		hash = xasprintf("symlink:%s", clean);
	}
	else if (strcmp(type, "file"))
		hash = xasprintf("error:%s", dsec_code_name(DSEC_E_INVALID));
	else if (dsec_get_u64(res, "size", &size, NULL) < 0 || size > WATCH_MAX_BYTES ||
		 h->total + size > WATCH_TOTAL)
		hash = xasprintf("error:%s", dsec_code_name(DSEC_E_TOO_LARGE));
	dsec_msg_free(&m);
	if (hash)
		return next_path(h, hash);
	read_part(h);
}

/* What sb->watch[h->i] is, before any of it is read. */
static void describe(struct hashing *h)
{
	struct dsec_pk p;

	dsec_pk_init(&p);
	dsec_pk_request_begin(&p, "file_stat");
	dsec_pk_kv_str(&p, "id", h->sb->id);
	dsec_pk_kv_str(&p, "path", h->sb->watch[h->i]);
	dsec_pk_end(&p);
	rlc_send(h->d, &p, described, h, true);
}

void rlc_watch_hash(struct dsecd *d, struct dsecd_sb *sb, rlc_hashed_fn fn, void *arg)
{
	struct hashing *h = xcalloc(1, sizeof(*h));

	h->d = d;
	h->sb = sb;
	dsecd_sb_ref(sb);
	h->n = dsec_strv_len((const char *const *)sb->watch);
	h->out = xcalloc(h->n ? h->n : 1, sizeof(*h->out));
	h->part = d->conf.max_frame > WATCH_PART + 65536 ? WATCH_PART : d->conf.max_frame - 65536;
	h->md = EVP_MD_CTX_new();
	DSEC_ASSERT(h->md);
	h->fn = fn;
	h->arg = arg;
	if (!h->n) {
		EVP_MD_CTX_free(h->md);
		fn(arg, h->out, 0);
		dsecd_sb_unref(d, sb);
		free(h);
		return;
	}
	describe(h);
}

void rlc_watch_free(char **hashes, size_t n)
{
	for (size_t i = 0; hashes && i < n; i++)
		free(hashes[i]);
	free(hashes);
}

void rlc_pack_watched(const struct dsecd_sb *sb, char **after, struct dsec_pk *p)
{
	size_t n = dsec_strv_len((const char *const *)sb->watch);

	dsec_pk_str(p, "watched");
	dsec_pk_array_begin(p);
	for (size_t i = 0; i < n; i++) {
		const char *b = sb->watch_before ? sb->watch_before[i] : NULL, *a = after[i];

		dsec_pk_map_begin(p);
		dsec_pk_kv_str(p, "path", sb->watch[i]);
		dsec_pk_kv_str(p, "before", b);
		dsec_pk_kv_str(p, "after", a);
		dsec_pk_kv_bool(p, "changed", !b != !a || (a && b && strcmp(a, b)));
		dsec_pk_end(p);
	}
	dsec_pk_end(p);
}

/* ---- the watched op ---------------------------------------------------------- */

static void watched_done(void *arg, char **after, size_t n)
{
	struct dsecd_req *r = arg;
	struct dsec_pk p;

	r->d->ops_inflight--;
	dsec_pk_init(&p);
	dsec_pk_reply_begin(&p);
	rlc_pack_watched(r->sb, after, &p);
	dsec_pk_end(&p);
	rlc_watch_free(after, n);
	req_complete(r, &p);
}

void op_watched(struct dsecd_req *r)
{
	r->d->ops_inflight++;
	rlc_watch_hash(r->d, r->sb, watched_done, r);
}
