/* fs3-tag - libFuzzer target: what names an image or object in fs3 and
 * comes from outside: tag file names in ORIGIN/tags (a shared origin: any
 * node, or a hostile one, writes them), a tag file's content (a digest
 * line), and the kind and digest strings of a peer's chunk_get.  Tag file
 * names and tags must map back and forth; a parsed digest must print as
 * what parses to it again.
 *
 * Input: one byte (what to do with the rest), then the string. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fs3.h"
#include "image.h"
#include "log.h"
#include "store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fs3 *fs;
static char *tags, *top;

static void cleanup(void)
{
	fs3_close(fs);
	dsec_rm_rf(top);
}

static void setup(void)
{
	char tmpl[] = "/dev/shm/fs3-tag.XXXXXX", tmpl2[] = "/tmp/fs3-tag.XXXXXX";
	char *dir = mkdtemp(tmpl) ? tmpl : mkdtemp(tmpl2);
	struct dsec_err err;

	if (!dir)
		abort();
	top = xstrdup(dir);
	atexit(cleanup);
	dsec_log_set_level(DSEC_LOG_ERROR);	/* a corrupt copy is warned about */
	_cleanup_free_ char *store = xasprintf("%s/store", dir);
	struct fs3_conf c = { .store = store };
	if (fs3_open(&fs, &c, &err) < 0)
		abort();
	tags = xasprintf("%s/origin/tags", store);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char ref[FS3_REF_LEN], ref2[FS3_REF_LEN];
	struct fs3_digest d, d2;
	struct dsec_err err;

	if (!fs)
		setup();
	if (size < 1)
		return 0;
	_cleanup_free_ char *s = xstrndup((const char *)data + 1, size - 1);
	switch (data[0] % 4) {
	case 0: {	/* a tag, and the file it is kept in */
		_cleanup_free_ char *f = fs3_tag_file(s);
		_cleanup_free_ char *t = f ? fs3_tag_from_file(f) : NULL;
		_cleanup_free_ char *f2 = t ? fs3_tag_file(t) : NULL;
		if (f && (!t || !f2 || strcmp(f, f2)))
			abort();
		break;
	}
	case 1: {	/* a file name in ORIGIN/tags (no '/'), and the tag it says */
		_cleanup_free_ char *t = strchr(s, '/') ? NULL : fs3_tag_from_file(s);
		_cleanup_free_ char *f = t ? fs3_tag_file(t) : NULL;
		if (t && (!f || strcmp(f, s)))
			abort();
		break;
	}
	case 2:	/* a digest, and what a peer asks for */
		if (fs3_digest_parse(s, &d) == 0) {
			fs3_digest_ref(&d, ref);
			if (fs3_digest_parse(ref, &d2) < 0 || memcmp(d.b, d2.b, FS3_DIGEST_LEN))
				abort();
		}
		fs3_kind_parse(s);
		break;
	default: {	/* a tag file's content, resolved (and refs of any kind) */
		_cleanup_free_ char *p = xasprintf("%s/fuzz:1", tags);
		if (fs3_write_atomic(p, data + 1, size - 1, false) < 0)
			abort();
		if (fs3_resolve(fs, "fuzz:1", ref, &err) == 0 &&
		    (fs3_digest_parse(ref, &d) < 0 || (fs3_digest_ref(&d, ref2), strcmp(ref, ref2))))
			abort();
		fs3_resolve(fs, s, ref, &err);
		unlink(p);
		break;
	}
	}
	return 0;
}
