/* 2001-fs3-store - fs3 without mounts: formats, import, dedup, tags,
 * verified fetches from the tiers, gc of what nothing reaches. */
#include "fs3-test.h"
#include "fs3.h"
#include "image.h"
#include "layer.h"
#include "store.h"

#define CHUNK (64u << 10)

static struct fs3 *open_store(void)
{
	char *store = tpath("store"), *origin = tpath("origin");
	struct fs3_conf c = { .store = store, .origin = origin, .chunk_size = CHUNK };
	struct dsec_err err;
	struct fs3 *fs = NULL;

	if (fs3_open(&fs, &c, &err) < 0)
		printf("# %s\n", err.msg);
	free(store);
	free(origin);
	return fs;
}

/* The tree A: text, two random files, a subdirectory. */
static void make_tree(const char *dir, bool extra)
{
	char *p;

	p = xasprintf("%s/hello.txt", dir), put_text(p, "hello fs3\n"), free(p);
	p = xasprintf("%s/big1", dir), put_random(p, 700 << 10, 1), free(p);
	p = xasprintf("%s/sub/big2", dir), put_random(p, 600 << 10, 2), free(p);
	if (extra) {	/* sorted first: shifts everything behind it */
		p = xasprintf("%s/aaa", dir), put_random(p, 150 << 10, 3), free(p);
		p = xasprintf("%s/sub/new.txt", dir), put_text(p, "new\n"), free(p);
	}
}

static void test_formats(void)
{
	char *env[] = { "A=1", "B=x=y", NULL }, *ep[] = { "/bin/sh", "-c", "echo hi", NULL };
	struct fs3_layer_ref layers[2] = { { .size = 10 }, { .size = 20 } };
	struct fs3_manifest m = { .layers = layers, .n = 2,
				  .config = { .env = env, .cwd = "/w", .user = "1000:1000",
					      .entrypoint = ep } }, m2;
	struct dsec_buf a, b;
	struct fs3_digest d;
	char ref[FS3_REF_LEN];

	memset(layers[0].digest.b, 1, FS3_DIGEST_LEN);
	memset(layers[1].index.b, 2, FS3_DIGEST_LEN);
	dsec_buf_init(&a);
	dsec_buf_init(&b);
	fs3_manifest_encode(&m, &a);
	ok(fs3_manifest_decode(a.data, a.len, &m2) == 0 && m2.n == 2 && m2.layers[1].size == 20 &&
	   !strcmp(m2.config.env[1], "B=x=y") && !strcmp(m2.config.user, "1000:1000") &&
	   !strcmp(m2.config.entrypoint[2], "echo hi"), "a manifest round-trips");
	fs3_manifest_encode(&m2, &b);
	ok(a.len == b.len && !memcmp(a.data, b.data, a.len), "... and encodes to the same bytes");
	fs3_manifest_free(&m2);
	a.data[a.len - 1] ^= 0x40;
	is_int(fs3_manifest_decode(a.data, a.len - 3, &m2), -EBADMSG, "a truncated manifest is refused");
	dsec_buf_free(&a);
	dsec_buf_free(&b);

	fs3_sha256("abc", 3, &d);
	fs3_digest_ref(&d, ref);
	is_str(ref, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	       "sha256 of 'abc' is the FIPS 180-2 vector");
	char *f = fs3_tag_file("library/debian");
	is_str(f, "library+debian:latest", "name without tag means :latest, '/' kept as '+'");
	free(f);
	ok(!fs3_tag_file("Bad:1") && !fs3_tag_file("a/../b:1") && !fs3_tag_file("a:b:c/d") &&
	   !fs3_tag_file("sha256:1234"), "bad names and a sha256: prefix are no tags");
}

int main(void)
{
	struct fs3_import_res r1, r2, r3;
	struct fs3_image_info info, *list;
	struct dsec_err err;
	struct fs3 *fs;
	char dig[72];
	size_t n;

	plan(31);
	t_setup();
	test_formats();

	fs = open_store();
	ok(fs != NULL, "a new store opens");
	if (!fs)
		return 1;
	char *a = tpath("a"), *b = tpath("b");
	make_tree(a, false);
	make_tree(b, true);

	char *env[] = { "K=V", NULL }, *ep[] = { "/bin/true", NULL };
	struct fs3_import_opts o = { .tag = "test/a:1",
				     .config = { .env = env, .cwd = "/tmp", .entrypoint = ep } };
	dsec_err_clear(&err);
	is_int(fs3_import(fs, a, &o, &r1, &err), 0, "a directory imports");
	if (err.msg[0])
		printf("# %s\n", err.msg);
	ok(r1.chunks > 4 && r1.new_chunks == r1.chunks && r1.logical > (1300u << 10),
	   "... in %llu chunks, all new, %llu bytes", (unsigned long long)r1.chunks,
	   (unsigned long long)r1.logical);

	is_int(fs3_image_inspect(fs, "test/a:1", &info, &err), 0, "inspect by tag");
	ok(info.nlayers == 1 && info.layers[0].chunks == r1.chunks && !strcmp(info.tags[0], "test/a:1") &&
	   !strcmp(info.config.env[0], "K=V") && !strcmp(info.config.cwd, "/tmp") &&
	   !strcmp(info.config.user, "") && !strcmp(info.config.entrypoint[0], "/bin/true") &&
	   !strcmp(info.digest, r1.digest), "... shows layer, chunks, tags and config");
	fs3_image_info_clear(&info);

	o.tag = "test/b:1";
	is_int(fs3_import(fs, b, &o, &r2, &err), 0, "an overlapping tree imports");
	double ratio = (double)(r1.logical + r2.logical) / (double)(r1.stored + r2.stored);
	ok(r2.new_chunks * 2 < r2.chunks && r2.stored * 2 < r2.logical,
	   "... sharing most chunks: %llu of %llu new, %llu of %llu bytes stored, ratio of both %.2f",
	   (unsigned long long)r2.new_chunks, (unsigned long long)r2.chunks,
	   (unsigned long long)r2.stored, (unsigned long long)r2.logical, ratio);

	o.tag = NULL;
	is_int(fs3_import(fs, a, &o, &r3, &err), 0, "the same tree again, untagged");
	ok(r3.new_chunks <= 1, "... stores at most the superblock chunk again (%llu new)",
	   (unsigned long long)r3.new_chunks);

	snprintf(dig, sizeof(dig), "%.17s", r1.digest);
	char full[72];
	ok(fs3_resolve(fs, dig, full, &err) == 0 && !strcmp(full, r1.digest), "a digest prefix resolves");
	is_int(fs3_resolve(fs, "nope:1", full, &err), -ENOENT, "an unknown tag is -ENOENT");
	is_str(dsec_code_name(err.code), "not_found", "... as not_found");
	is_int(fs3_tag(fs, "test/a:1", "other", &err), 0, "tag an image again");
	ok(fs3_image_list(fs, &list, &n, &err) == 0 && n == 2 && !strcmp(list[0].tags[0], "other:latest") &&
	   !strcmp(list[0].tags[1], "test/a:1") && !strcmp(list[1].tags[0], "test/b:1"), "ls: two images, by first tag, with all their tags");
	fs3_image_list_free(list, n);

	/* Tiers: a chunk corrupt in the cache comes from the origin; corrupt in
	 * the cache and missing in the origin, the error names both. */
	struct fs3_store st;
	struct fs3_manifest m;
	struct fs3_index ix;
	struct fs3_digest md;
	char *cache = tpath("store/cache"), *origin = tpath("origin"), *out = tpath("layer.erofs");
	fs3_store_init(&st, cache, origin, 0);
	fs3_digest_parse(r1.digest, &md);
	struct dsec_buf mb;
	dsec_buf_init(&mb);
	ok(fs3_store_get(&st, FS3_MANIFEST, &md, &mb, "manifest", &err) == 0 &&
	   fs3_manifest_decode(mb.data, mb.len, &m) == 0 && fs3_layer_index(&st, &m.layers[0], &ix, &err) == 0,
	   "manifest and index fetched and verified");
	dsec_buf_free(&mb);
	char *cp = fs3_store_path(cache, FS3_CHUNK, &ix.chunks[1].d);
	char *op = fs3_store_path(origin, FS3_CHUNK, &ix.chunks[1].d);
	sh("printf corrupt | dd of='%s' bs=1 seek=20 conv=notrunc status=none", cp);
	is_int(fs3_layer_materialize(&st, &m.layers[0], out, &err), 0,
	       "a chunk corrupt in the cache is fetched from the origin");
	ok(same_file(cp, op), "... and the cache copy is repaired");
	sh("printf corrupt | dd of='%s' bs=1 seek=20 conv=notrunc status=none", cp);
	sh("mv '%s' '%s.away'", op, op);
	char cref[FS3_REF_LEN], lref[FS3_REF_LEN];
	fs3_digest_ref(&ix.chunks[1].d, cref);
	fs3_digest_ref(&m.layers[0].digest, lref);
	char *want = xasprintf("cannot fetch chunk '%s' of layer '%s': no good copy (cache: corrupt, "
			       "origin: missing)", cref, lref);
	unlink(out);
	is_int(fs3_layer_materialize(&st, &m.layers[0], out, &err), -ENOENT,
	       "corrupt in the cache and missing in the origin fails");
	is_str(err.msg, want, "... naming the chunk, the layer and each tier");
	ok(access(out, F_OK) < 0, "... and leaves no layer file");
	sh("mv '%s.away' '%s'", op, op);
	free(want);
	free(cp);
	free(op);
	fs3_index_free(&ix);
	fs3_manifest_free(&m);
	fs3_store_fini(&st);

	/* gc: b's tag goes; a (tagged twice) stays, b's own chunks go. */
	struct fs3_gc_res g;
	is_int(fs3_untag(fs, "test/b:1", &err), 0, "untag b");
	is_int(fs3_gc(fs, &g, &err), 0, "gc runs");
	ok(g.removed > 0 && g.freed > 0, "... removes %llu objects, %llu bytes",
	   (unsigned long long)g.removed, (unsigned long long)g.freed);
	ok(fs3_image_inspect(fs, r1.digest, &info, &err) == 0 && info.layers[0].chunks == r1.chunks,
	   "the tagged image is whole after gc");
	fs3_image_info_clear(&info);
	is_int(fs3_image_inspect(fs, r2.digest, &info, &err), -ENOENT, "the untagged one is gone");
	unlink(out);
	printf("# %s\n", err.msg);

	fs3_close(fs);
	free(a);
	free(b);
	free(cache);
	free(origin);
	free(out);
	return done_testing();
}
