/* 2004-fs3-oci - multi-layer imports: an OCI image layout (directory and
 * tar) and a `docker save` tar, layers in order, whiteouts of the upper layer
 * applied under overlayfs, config taken over.  Needs root. */
#include <sys/mount.h>

#include "fs3-test.h"
#include "fs3.h"
#include "store.h"

#define NTESTS 15

/* Writes s to $T/dir/blobs/sha256/<digest> and returns "sha256:<hex>". */
static char *blob(const char *dir, const char *s, char ref[FS3_REF_LEN])
{
	struct fs3_digest d;
	char *p;

	fs3_sha256(s, strlen(s), &d);
	fs3_digest_ref(&d, ref);
	p = xasprintf("%s/blobs/sha256/%s", dir, ref + 7);
	put_text(p, s);
	free(p);
	return ref;
}

/* Copies a file into the layout as a blob; its "sha256:<hex>" and size. */
static void file_blob(const char *dir, const char *file, char ref[FS3_REF_LEN], long *size)
{
	struct fs3_digest d;
	struct stat sb;

	fs3_sha256_file(file, &d);
	fs3_digest_ref(&d, ref);
	stat(file, &sb);
	*size = (long)sb.st_size;
	sh("mkdir -p '%s/blobs/sha256' && cp '%s' '%s/blobs/sha256/%s'", dir, file, dir, ref + 7);
}

static const char config_json[] =
	"{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Env\":[\"PATH=/usr/bin\",\"A=1\"],"
	"\"WorkingDir\":\"/opt\",\"User\":\"1000\",\"Entrypoint\":[\"/bin/tool\"],\"Cmd\":[\"--x\"]},"
	"\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[]}}";

/* An OCI layout at dir with the two layer tars; the index also lists an
 * arm64 image that is not there (only this platform's is read). */
static void make_oci(const char *dir, const char *l1, const char *l2)
{
	char c[FS3_REF_LEN], b1[FS3_REF_LEN], b2[FS3_REF_LEN], m[FS3_REF_LEN];
	long s1, s2;

	file_blob(dir, l1, b1, &s1);
	file_blob(dir, l2, b2, &s2);
	blob(dir, config_json, c);
	char *man = xasprintf(
		"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		"\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\","
		"\"digest\":\"%s\",\"size\":%zu},\"layers\":["
		"{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\",\"digest\":\"%s\",\"size\":%ld},"
		"{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"%s\",\"size\":%ld}]}",
		c, strlen(config_json), b1, s1, b2, s2);
	blob(dir, man, m);
	char *idx = xasprintf(
		"{\"schemaVersion\":2,\"manifests\":["
		"{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"sha256:%064d\","
		"\"size\":1,\"platform\":{\"architecture\":\"arm64\",\"os\":\"linux\"}},"
		"{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"%s\","
		"\"size\":%zu,\"platform\":{\"architecture\":\"amd64\",\"os\":\"linux\"}}]}",
		0, m, strlen(man));
	char *p = xasprintf("%s/index.json", dir), *q = xasprintf("%s/oci-layout", dir);
	put_text(p, idx);
	put_text(q, "{\"imageLayoutVersion\":\"1.0.0\"}");
	free(man), free(idx), free(p), free(q);
}

/* What `docker save` wrote before Docker 25: manifest.json, a config, and
 * ID/layer.tar per layer. */
static void make_docker(const char *dir, const char *l1, const char *l2)
{
	char *p = xasprintf("%s/manifest.json", dir), *c = xasprintf("%s/0123abcd.json", dir);

	put_text(p, "[{\"Config\":\"0123abcd.json\",\"RepoTags\":[\"x:1\"],"
		    "\"Layers\":[\"aaaa/layer.tar\",\"bbbb/layer.tar\"]}]");
	put_text(c, config_json);
	sh("mkdir -p '%s/aaaa' '%s/bbbb' && cp '%s' '%s/aaaa/layer.tar' && "
	   "gzip -dc '%s' > '%s/bbbb/layer.tar'", dir, dir, l1, dir, l2, dir);
	free(p), free(c);
}

/* Acquires ref, composes its layers under overlayfs at $T/merged and checks
 * the view and the config. */
static void check_image(struct fs3 *fs, const char *ref, const char *want_a)
{
	char *merged = tpath("merged"), *s = NULL;
	struct fs3_acquired *a;
	struct dsec_err err;
	size_t n;

	if (fs3_image_acquire(fs, ref, &a, &err) < 0) {
		printf("# %s\n", err.msg);
		ok(0, "%s: acquire", ref);
		ok(0, "%s: config", ref);
		free(merged);
		return;
	}
	dsec_mkdir_p(merged, 0755);
	char *opts = xasprintf("lowerdir=%s", a->lowerdir);
	bool view = false;
	if (a->nlayers == 2 && mount("overlay", merged, "overlay", MS_RDONLY, opts) == 0) {
		char *tool = xasprintf("%s/bin/tool", merged), *rm = xasprintf("%s/rm-me", merged);
		char *da = xasprintf("%s/opt/dir/a", merged), *dc = xasprintf("%s/opt/dir/c", merged);
		char *os = xasprintf("%s/etc/os-release", merged);
		view = dsec_read_file(tool, &s, &n) == 0 && !strcmp(s, "v2\n") && access(rm, F_OK) < 0 &&
		       access(da, F_OK) < 0 && access(dc, F_OK) == 0 && access(os, F_OK) == 0;
		umount(merged);
		free(tool), free(rm), free(da), free(dc), free(os);
	}
	ok(view, "%s: two layers, top first; upper file, whiteout and opaque dir win", ref);
	const struct fs3_image_config *c = &a->config;
	ok(dsec_strv_len((const char *const *)c->env) == 2 && !strcmp(c->env[0], "PATH=/usr/bin") &&
	   !strcmp(c->env[1], want_a) && !strcmp(c->cwd, "/opt") && !strcmp(c->user, "1000") &&
	   dsec_strv_len((const char *const *)c->entrypoint) == 2 &&
	   !strcmp(c->entrypoint[1], "--x"), "%s: Env, WorkingDir, User, Entrypoint+Cmd kept", ref);
	fs3_image_release(fs, a);
	free(opts);
	free(merged);
	free(s);
}

int main(void)
{
	struct fs3_import_opts o = { 0 };
	struct fs3_import_res r;
	struct dsec_err err;
	struct fs3 *fs;

	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root (mount, mknod, trusted xattrs)\n");
		return 0;
	}
	plan(NTESTS);
	t_setup();
	dsec_log_set_level(DSEC_LOG_ERROR);	/* the warnings here are expected */

	char *l1 = tpath("l1"), *l2 = tpath("l2"), *p;
	p = xasprintf("%s/etc/os-release", l1), put_text(p, "base\n"), free(p);
	p = xasprintf("%s/bin/tool", l1), put_text(p, "v1\n"), free(p);
	p = xasprintf("%s/opt/dir/a", l1), put_text(p, "a\n"), free(p);
	p = xasprintf("%s/rm-me", l1), put_text(p, "x\n"), free(p);
	p = xasprintf("%s/bin/tool", l2), put_text(p, "v2\n"), free(p);
	p = xasprintf("%s/.wh.rm-me", l2), put_text(p, ""), free(p);
	p = xasprintf("%s/opt/dir/.wh..wh..opq", l2), put_text(p, ""), free(p);
	p = xasprintf("%s/opt/dir/c", l2), put_text(p, "c\n"), free(p);
	char *t1 = tpath("l1.tar"), *t2 = tpath("l2.tar.gz");
	sh("tar --numeric-owner -C '%s' -cf '%s' . && tar --numeric-owner -C '%s' -czf '%s' .",
	   l1, t1, l2, t2);
	char *oci = tpath("oci"), *ocitar = tpath("oci.tar"), *dk = tpath("docker"), *dktar = tpath("d.tar");
	make_oci(oci, t1, t2);
	make_docker(dk, t1, t2);
	sh("tar -C '%s' -cf '%s' . && tar -C '%s' -cf '%s' .", oci, ocitar, dk, dktar);

	char *store = tpath("store");
	struct fs3_conf conf = { .store = store, .flags = FS3_MOUNTER };
	if (fs3_open(&fs, &conf, &err) < 0) {
		printf("Bail out! %s\n", err.msg);
		return 1;
	}

	o.tag = "oci:dir";
	ok(fs3_import(fs, oci, &o, &r, &err) == 0 && r.nlayers == 2 && !strcmp(r.format, "oci"),
	   "an OCI layout directory imports with its two layers");
	if (err.msg[0] && r.nlayers != 2)
		printf("# %s\n", err.msg);
	check_image(fs, "oci:dir", "A=1");

	o.tag = "oci:tar";
	ok(fs3_import(fs, ocitar, &o, &r, &err) == 0 && r.nlayers == 2 &&
	   !strcmp(r.format, "oci archive"), "an OCI layout in a tar imports");
	ok(r.new_chunks == 0, "... as the same layers: nothing new stored");
	check_image(fs, "oci:tar", "A=1");

	char *env[] = { "A=2", NULL };
	o.tag = "docker:1";
	o.config.env = env;
	dsec_err_clear(&err);
	ok(fs3_import(fs, dktar, &o, &r, &err) == 0 && r.nlayers == 2 &&
	   !strcmp(r.format, "docker archive"), "a docker save tar imports");
	if (err.msg[0])
		printf("# %s\n", err.msg);
	check_image(fs, "docker:1", "A=2");
	o.config.env = NULL;

	/* A rootfs tar that happens to hold a manifest.json is still a rootfs. */
	char *odd = tpath("odd"), *oddtar = tpath("odd.tar");
	p = xasprintf("%s/manifest.json", odd), put_text(p, "{}"), free(p);
	p = xasprintf("%s/etc/x", odd), put_text(p, "x"), free(p);
	sh("tar -C '%s' -cf '%s' .", odd, oddtar);
	o.tag = NULL;
	ok(fs3_import(fs, oddtar, &o, &r, &err) == 0 && r.nlayers == 1 && !strcmp(r.format, "tar"),
	   "a rootfs tar with a manifest.json is a rootfs");

	/* A layer blob that does not match its digest. */
	sh("cd '%s/blobs/sha256' && for f in *; do if tar -tf \"$f\" 2>/dev/null | grep -q tool; then "
	   "printf X >> \"$f\"; break; fi; done", oci);
	is_int(fs3_import(fs, oci, &o, &r, &err), -EBADMSG, "a corrupt blob stops the import");
	ok(strstr(err.msg, "does not match its digest") != NULL, "... saying so: %s", err.msg);

	/* A docker manifest whose layer path leaves the archive. */
	p = xasprintf("%s/manifest.json", dk);
	put_text(p, "[{\"Config\":\"0123abcd.json\",\"Layers\":[\"../../etc/passwd\"]}]");
	free(p);
	is_int(fs3_import(fs, dk, &o, &r, &err), -EINVAL, "a layer path outside the archive is refused");
	ok(strstr(err.msg, "not a file inside it") != NULL, "... saying so: %s", err.msg);

	fs3_close(fs);
	free(l1), free(l2), free(t1), free(t2), free(oci), free(ocitar), free(dk), free(dktar);
	free(store), free(odd), free(oddtar);
	return done_testing();
}
