/* helper-stream - drive streaming exec through libdsec, for tests.
 *
 *   helper-stream URL ID
 *
 * In sandbox ID: cat with stdin kept open (write, read back, EOF), a
 * command on a pty that is resized while it runs, and one stopped by a
 * signal; prints one line per step.  Exit 0 when every call behaved as
 * the library documents, 1 otherwise.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsec.h"
#include "util.h"

static int failed;

static void fail(const char *what, const struct dsec_err *err)
{
	printf("%s: error %s: %s\n", what, err ? dsec_code_name(err->code) : "-",
	       err ? err->msg : "unexpected result");
	failed = 1;
}

/* Reads exec until its stdout so far has want (want NULL: until done);
 * *all gets the stdout, *res the last reply.  False on an error. */
static bool read_until(struct dsec_client *c, const char *id, const char *x, const char *want,
		       struct dsec_buf *all, struct dsec_cmd_res *res)
{
	struct dsec_err err;

	for (int i = 0; i < 50; i++) {
		bool done;

		if (dsec_exec_read(c, id, x, 5, res, &done, &err) < 0) {
			fail("exec_read", &err);
			return false;
		}
		dsec_buf_add(all, res->out.data, res->out.len);
		if (done || (want && all->data && strstr(all->data, want)))
			return true;
		dsec_cmd_res_free(res);
	}
	fail("exec_read: no end", NULL);
	return false;
}

int main(int argc, char **argv)
{
	const char *cat[] = { "cat", NULL };
	struct dsec_cmd req = { .argv = cat };
	struct dsec_exec_start_opts o = { .stdin_open = true };
	struct dsec_cmd_res res;
	struct dsec_client *c;
	struct dsec_buf all;
	struct dsec_err err;
	const char *id;
	char *x = NULL;

	if (argc != 3) {
		fputs("usage: helper-stream URL ID\n", stderr);
		return 2;
	}
	id = argv[2];
	dsec_err_clear(&err);
	if (dsec_connect(&c, argv[1], &err) < 0) {
		fail("connect", &err);
		return 1;
	}
	dsec_set_timeout(c, 60);

	/* stdin */
	dsec_buf_init(&all);
	if (dsec_exec_start(c, id, &req, &o, &x, &err) < 0)
		fail("exec_start cat", &err);
	else if (dsec_exec_write(c, id, x, "ping\n", 5, false, &err) < 0)
		fail("exec_write", &err);
	else if (read_until(c, id, x, "ping", &all, &res)) {
		dsec_cmd_res_free(&res);
		if (dsec_exec_write(c, id, x, "pong\n", 5, true, &err) < 0)
			fail("exec_write eof", &err);
		else if (read_until(c, id, x, NULL, &all, &res)) {
			printf("cat: exit=%d bytes=%zu\n", res.exit_code, all.len);
			if (res.exit_code != 0 || strcmp(all.data, "ping\npong\n"))
				fail("cat", NULL);
			dsec_cmd_res_free(&res);
		}
	}
	free(x);

	/* a terminal, resized */
	dsec_buf_free(&all);
	req.argv = NULL;
	req.code = "stty size; read l; stty size";
	o = (struct dsec_exec_start_opts){ .pty = true, .rows = 10, .cols = 40 };
	if (dsec_exec_start(c, id, &req, &o, &x, &err) < 0)
		fail("exec_start pty", &err);
	else if (read_until(c, id, x, "10 40", &all, &res)) {
		dsec_cmd_res_free(&res);
		if (dsec_exec_resize(c, id, x, 20, 60, &err) < 0 ||
		    dsec_exec_write(c, id, x, "\r", 1, false, &err) < 0)
			fail("exec_resize", &err);
		else if (read_until(c, id, x, NULL, &all, &res)) {
			printf("pty: exit=%d resized=%d\n", res.exit_code, !!strstr(all.data, "20 60"));
			if (res.exit_code != 0 || !strstr(all.data, "20 60"))
				fail("pty", NULL);
			dsec_cmd_res_free(&res);
		}
	}
	free(x);

	/* a signal, as soon as the command's output shows it runs (which can
	 * be before the backend knows its pid): several times, for the race */
	for (int round = 0; round < 10 && !failed; round++) {
		dsec_buf_free(&all);
		x = NULL;
		req.code = "echo up; exec sleep 100";
		o = (struct dsec_exec_start_opts){ 0 };
		if (dsec_exec_start(c, id, &req, &o, &x, &err) < 0)
			fail("exec_start sleep", &err);
		else if (read_until(c, id, x, "up", &all, &res)) {
			dsec_cmd_res_free(&res);
			if (dsec_exec_signal(c, id, x, SIGTERM, &err) < 0)
				fail("exec_signal", &err);
			else if (read_until(c, id, x, NULL, &all, &res)) {
				if (round == 0 || res.signal != SIGTERM)
					printf("signal: exit=%d signal=%d\n", res.exit_code, res.signal);
				if (res.signal != SIGTERM)
					fail("signal", NULL);
				dsec_cmd_res_free(&res);
			}
		}
		if (x && dsec_exec_read(c, id, x, 0, &res, &(bool){ false }, &err) == 0)
			fail("exec_read after done", NULL);
		else if (x && err.code != DSEC_E_NOT_FOUND)
			fail("exec_read after done", &err);
		free(x);
	}
	dsec_buf_free(&all);
	dsec_close(c);
	return failed;
}
