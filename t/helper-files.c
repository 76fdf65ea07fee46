/* helper-files - the libdsec file calls against a running daemon, for
 * tests: one line per step on stdout, "ok STEP" or "fail STEP: message
 * (code)".  Exit 0 when every step passed.
 *
 *   helper-files URL ID DIR      (DIR: an absent directory in sandbox ID)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsec.h"
#include "util.h"

static int fails;

static void step(const char *what, int rc, bool good, const struct dsec_err *err)
{
	if (rc == 0 && good) {
		printf("ok %s\n", what);
		return;
	}
	fails++;
	printf("fail %s: %s (%s)\n", what, rc ? err->msg : "unexpected result",
	       rc ? dsec_code_name(err->code) : "-");
}

int main(int argc, char **argv)
{
	struct dsec_client *c;
	struct dsec_err err;
	struct dsec_file_desc info, *ents = NULL;
	struct dsec_buf tar, data;
	size_t n = 0;
	bool trunc = false;
	uint64_t removed = 0;
	int rc;

	if (argc != 4) {
		fputs("usage: helper-files URL ID DIR\n", stderr);
		return 2;
	}
	const char *id = argv[2], *dir = argv[3];
	char *f = xasprintf("%s/sub/f", dir), *sub = xasprintf("%s/sub", dir);
	char *copy = xasprintf("%s-copy", dir), *cf = xasprintf("%s-copy/sub/f", dir);

	dsec_err_clear(&err);
	if (dsec_connect(&c, argv[1], &err) < 0) {
		fprintf(stderr, "helper-files: %s\n", err.msg);
		return 2;
	}
	dsec_buf_init(&tar);
	dsec_buf_init(&data);

	rc = dsec_file_mkdir(c, id, sub, 0750, true, 1001, 1002, &err);
	step("mkdir", rc, true, &err);
	rc = dsec_file_write_as(c, id, f, "abc", 3, 0600, 1001, 1002, &err);
	step("write_as", rc, true, &err);
	rc = dsec_file_stat(c, id, f, &info, &err);
	step("stat", rc, rc == 0 && info.type == DSEC_KIND_FILE && info.size == 3 &&
	     info.mode == 0600 && info.uid == 1001 && info.gid == 1002 && !info.target &&
	     !strcmp(info.name, "f") && info.mtime > 1e9, &err);
	dsec_file_desc_free(&info);
	rc = dsec_file_stat(c, id, sub, &info, &err);
	step("stat dir", rc, rc == 0 && info.type == DSEC_KIND_DIR && info.mode == 0750, &err);
	dsec_file_desc_free(&info);
	rc = dsec_file_list(c, id, dir, 0, &ents, &n, &trunc, &err);
	step("list", rc, rc == 0 && n == 1 && !trunc && !strcmp(ents[0].name, "sub") &&
	     ents[0].type == DSEC_KIND_DIR && ents[0].uid == 1001, &err);
	dsec_file_list_free(ents, n);
	rc = dsec_file_download(c, id, dir, "tar.zst", &tar, &err);
	step("download", rc, rc == 0 && tar.len > 0, &err);
	rc = dsec_file_upload(c, id, copy, tar.data, tar.len, "tar.zst", DSEC_OWNER_DEFAULT,
			      DSEC_OWNER_DEFAULT, &err);
	step("upload", rc, true, &err);
	rc = dsec_file_read(c, id, cf, 0, 0, &data, &err);
	step("round trip", rc, rc == 0 && data.len == 3 && !memcmp(data.data, "abc", 3), &err);
	rc = dsec_file_remove(c, id, sub, false, NULL, &err);
	step("remove non-empty", rc == 0, err.code == DSEC_E_INVALID, &err);
	rc = dsec_file_remove(c, id, dir, true, &removed, &err);
	step("remove recursive", rc, removed == 3, &err);
	rc = dsec_file_stat(c, id, f, &info, &err);
	step("stat removed", rc == 0, err.code == DSEC_E_NOT_FOUND, &err);
	dsec_file_desc_free(&info);
	rc = dsec_file_upload(c, id, copy, "junk", 4, "zip", DSEC_OWNER_DEFAULT,
			      DSEC_OWNER_DEFAULT, &err);
	step("bad format", rc == 0, err.code == DSEC_E_INVALID, &err);

	dsec_buf_free(&tar);
	dsec_buf_free(&data);
	free(f);
	free(sub);
	free(copy);
	free(cf);
	dsec_close(c);
	return fails ? 1 : 0;
}
