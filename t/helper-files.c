/* helper-files - the libdsec file calls against a running daemon, for
 * tests: one line per step on stdout, "ok STEP" or "fail STEP: message
 * (code)".  Exit 0 when every step passed.
 *
 *   helper-files URL ID DIR      (DIR: an absent directory in sandbox ID)
 *   helper-files --big FILE URL ID DIR
 *        FILE's bytes (more than a frame carries) written to DIR/f and
 *        read back into FILE.back, part of them read and appended, DIR
 *        downloaded as a tar and uploaded again to DIR-copy (the tar kept
 *        in FILE.tar), and as a tar.zst through FILE.tar.zst to
 *        DIR-copy2; every step compares what comes back
 *   helper-files --cat URL ID PATH OUT      (PATH read whole into OUT)
 *   helper-files --upload-stdin URL ID DIR
 *        a tar read from stdin to its end (a pipe: it may stop half way)
 *        uploaded into DIR
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Saves len bytes of data as file path (here). */
static void save(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "we");

	if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
		fprintf(stderr, "helper-files: cannot write '%s': %s\n", path, strerror(errno));
		exit(2);
	}
}

/* --big: what a file and a tree larger than one frame go through. */
static int big(struct dsec_client *c, const char *id, const char *dir, const char *file)
{
	char *data = NULL, *f = xasprintf("%s/f", dir), *g = xasprintf("%s/g", dir);
	char *copy = xasprintf("%s-copy", dir), *cf = xasprintf("%s-copy/f", dir);
	char *back_name = xasprintf("%s.back", file), *tar_name = xasprintf("%s.tar", file);
	char *zst_name = xasprintf("%s.tar.zst", file), *copy2 = xasprintf("%s-copy2", dir);
	char *cf2 = xasprintf("%s-copy2/f", dir);
	struct dsec_buf back, tar;
	struct dsec_err err;
	size_t n = 0;
	bool eof = true;
	int rc, fd;

	dsec_err_clear(&err);
	if ((rc = dsec_read_file(file, &data, &n)) < 0 || n < (4u << 20)) {
		fprintf(stderr, "helper-files: cannot read '%s' (4 MiB at least)\n", file);
		return 2;
	}
	dsec_buf_init(&back);
	dsec_buf_init(&tar);
	rc = dsec_file_write(c, id, f, data, n, 0600, &err);
	step("write in parts", rc, true, &err);
	rc = dsec_file_read(c, id, f, 0, 0, &back, &err);
	step("read in parts", rc, rc == 0 && back.len == n && !memcmp(back.data, data, n), &err);
	save(back_name, back.data, back.len);
	back.len = 0;
	rc = dsec_file_read(c, id, f, n - 3000000, 5000000, &back, &err);
	step("read at an offset to the end", rc, rc == 0 && back.len == 3000000 &&
	     !memcmp(back.data, data + n - 3000000, 3000000), &err);
	back.len = 0;
	rc = dsec_file_read_part(c, id, f, n - 10, 10, &back, &eof, &err);
	step("read_part of the last bytes: eof", rc, rc == 0 && back.len == 10 && eof, &err);
	back.len = 0;
	rc = dsec_file_read_part(c, id, f, n - 11, 10, &back, &eof, &err);
	step("read_part before them: no eof", rc, rc == 0 && back.len == 10 && !eof, &err);
	back.len = 0;
	rc = dsec_file_read_part(c, id, f, 0, 0, &back, &eof, &err);
	step("read_part of what a reply carries", rc, rc == 0 && back.len > 0 && back.len < n &&
	     !eof && !memcmp(back.data, data, back.len), &err);
	back.len = 0;
	rc = dsec_file_read_part(c, id, f, 0, n, &back, &eof, &err);
	step("read_part of more than a reply carries: too_large", rc == 0,
	     err.code == DSEC_E_TOO_LARGE && back.len == 0, &err);
	rc = dsec_file_write(c, id, g, "head", 4, 0, &err);
	if (rc == 0)
		rc = dsec_file_append(c, id, g, data, n, &err);
	if (rc == 0)
		rc = dsec_file_read(c, id, g, 0, 0, &back, &err);
	step("append in parts after a write", rc, rc == 0 && back.len == n + 4 &&
	     !memcmp(back.data, "head", 4) && !memcmp(back.data + 4, data, n), &err);
	back.len = 0;
	rc = dsec_file_remove(c, id, g, false, NULL, &err);
	step("remove", rc, true, &err);
	rc = dsec_file_download(c, id, dir, "tar", &tar, &err);
	step("download of a tree through an archive file", rc, rc == 0 && tar.len > n, &err);
	save(tar_name, tar.data, tar.len);
	rc = dsec_file_upload(c, id, copy, tar.data, tar.len, "tar", DSEC_OWNER_DEFAULT,
			      DSEC_OWNER_DEFAULT, &err);
	step("upload of it through an archive file", rc, true, &err);
	rc = dsec_file_read(c, id, cf, 0, 0, &back, &err);
	step("the tree's round trip", rc, rc == 0 && back.len == n && !memcmp(back.data, data, n),
	     &err);
	back.len = 0;
	if ((fd = open(zst_name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
		fprintf(stderr, "helper-files: cannot open '%s': %s\n", zst_name, strerror(errno));
		return 2;
	}
	rc = dsec_file_download_fd(c, id, dir, "tar.zst", fd, &err);
	step("download_fd of the tree as tar.zst", rc, rc == 0 && lseek(fd, 0, SEEK_CUR) > 0, &err);
	lseek(fd, 0, SEEK_SET);
	rc = dsec_file_upload_fd(c, id, copy2, fd, "tar.zst", DSEC_OWNER_DEFAULT,
				 DSEC_OWNER_DEFAULT, &err);
	if (rc == 0)
		rc = dsec_file_read(c, id, cf2, 0, 0, &back, &err);
	step("upload_fd of it: the round trip", rc, rc == 0 && back.len == n &&
	     !memcmp(back.data, data, n), &err);
	close(fd);
	dsec_buf_free(&back);
	dsec_buf_free(&tar);
	free(data);
	free(f);
	free(g);
	free(copy);
	free(cf);
	free(back_name);
	free(tar_name);
	free(zst_name);
	free(copy2);
	free(cf2);
	return fails ? 1 : 0;
}

/* --cat: reads PATH whole into OUT. */
static int cat(struct dsec_client *c, const char *id, const char *path, const char *out)
{
	struct dsec_buf b;
	struct dsec_err err;
	int rc;

	dsec_buf_init(&b);
	rc = dsec_file_read(c, id, path, 0, 0, &b, &err);
	step("read", rc, true, &err);
	if (rc == 0)
		save(out, b.data, b.len);
	dsec_buf_free(&b);
	return fails ? 1 : 0;
}

/* The steps of the file calls on a small tree in directory dir. */
static int small(struct dsec_client *c, const char *id, const char *dir)
{
	struct dsec_err err;
	struct dsec_file_desc info, *ents = NULL;
	struct dsec_buf tar, data;
	size_t n = 0;
	bool trunc = false;
	uint64_t removed = 0;
	int rc;
	char *f = xasprintf("%s/sub/f", dir), *sub = xasprintf("%s/sub", dir);
	char *copy = xasprintf("%s-copy", dir), *cf = xasprintf("%s-copy/sub/f", dir);

	dsec_err_clear(&err);
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
	return fails ? 1 : 0;
}

/* --upload-stdin */
static int upload_stdin(struct dsec_client *c, const char *id, const char *dir)
{
	struct dsec_err err;
	int rc = dsec_file_upload_fd(c, id, dir, 0, "tar", DSEC_OWNER_DEFAULT, DSEC_OWNER_DEFAULT,
				     &err);

	step("upload from stdin", rc, true, &err);
	return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
	bool bigmode = argc == 6 && !strcmp(argv[1], "--big");
	bool catmode = argc == 6 && !strcmp(argv[1], "--cat");
	bool inmode = argc == 5 && !strcmp(argv[1], "--upload-stdin");
	struct dsec_client *c;
	struct dsec_err err;
	int rc, a = bigmode ? 3 : catmode || inmode ? 2 : 1;

	if (!bigmode && !catmode && !inmode && argc != 4) {
		fputs("usage: helper-files [--big FILE] URL ID DIR | --cat URL ID PATH OUT |\n"
		      "       --upload-stdin URL ID DIR\n", stderr);
		return 2;
	}
	if (dsec_connect(&c, argv[a], &err) < 0) {
		fprintf(stderr, "helper-files: %s\n", err.msg);
		return 2;
	}
	rc = bigmode ? big(c, argv[a + 1], argv[a + 2], argv[2]) :
	     inmode  ? upload_stdin(c, argv[a + 1], argv[a + 2]) :
	     catmode ? cat(c, argv[a + 1], argv[a + 2], argv[a + 3]) :
		       small(c, argv[a + 1], argv[a + 2]);
	dsec_close(c);
	return rc;
}
