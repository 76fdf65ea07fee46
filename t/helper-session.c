/* helper-session - drive a shell session through libdsec, for tests.
 *
 *   helper-session URL ID
 *
 * Opens session "lib" in sandbox ID (env A=1, cwd /tmp), runs a few
 * commands, reads the sandbox's info, times one command out, closes the
 * session and runs one more; prints one line per step.  Exit 0 when
 * every call behaved as the library documents, 1 otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsec.h"

static int failed;

static void step(const char *what, int rc, const struct dsec_err *err)
{
	if (rc < 0) {
		printf("%s: error %s: %s\n", what, dsec_code_name(err->code), err->msg);
		failed = 1;
	}
}

static void show(const char *what, const struct dsec_session_cmd_res *r)
{
	printf("%s: exit=%d timed_out=%d reset=%d ended=%d cwd=%s out=%.*s", what,
	       r->exec.exit_code, r->exec.timed_out, r->reset, r->ended, r->cwd,
	       (int)r->exec.out.len, r->exec.out.data ? r->exec.out.data : "");
	if (!r->exec.out.len || r->exec.out.data[r->exec.out.len - 1] != '\n')
		putchar('\n');
}

int main(int argc, char **argv)
{
	const char *env[] = { "A=1", NULL };
	struct dsec_session_opts o = { .name = "lib", .env = env, .cwd = "/tmp" };
	struct dsec_sandbox_info info;
	struct dsec_session_cmd_res r;
	struct dsec_client *c;
	struct dsec_err err;
	char *name = NULL;
	int rc;

	if (argc != 3) {
		fputs("usage: helper-session URL ID\n", stderr);
		return 2;
	}
	dsec_err_clear(&err);
	if (dsec_connect(&c, argv[1], &err) < 0) {
		fprintf(stderr, "helper-session: %s\n", err.msg);
		return 2;
	}
	step("open", dsec_session_open(c, argv[2], &o, &name, &err), &err);
	printf("open: %s\n", name ? name : "(none)");
	step("exec", dsec_session_exec(c, argv[2], "lib", "cd /root; export B=2", 0, 0, &r, &err),
	     &err);
	dsec_session_cmd_res_free(&r);
	rc = dsec_session_exec(c, argv[2], "lib", "echo $A $B; pwd", 0, 0, &r, &err);
	step("exec", rc, &err);
	show("state", &r);
	dsec_session_cmd_res_free(&r);
	rc = dsec_sandbox_info(c, argv[2], &info, &err);
	step("info", rc, &err);
	printf("info: %zu session(s), first %s in %s\n", info.nsessions,
	       info.nsessions ? info.sessions[0].name : "-",
	       info.nsessions ? info.sessions[0].cwd : "-");
	dsec_sandbox_info_free(&info);
	rc = dsec_session_exec(c, argv[2], "lib", "sleep 50", 1, 0, &r, &err);
	step("timeout", rc, &err);
	show("timeout", &r);
	dsec_session_cmd_res_free(&r);
	step("close", dsec_session_close(c, argv[2], "lib", &err), &err);
	rc = dsec_session_exec(c, argv[2], "lib", "true", 0, 0, &r, &err);
	printf("after close: %s\n", rc < 0 ? dsec_code_name(err.code) : "ran");
	if (rc == 0) {
		failed = 1;
		dsec_session_cmd_res_free(&r);
	}
	free(name);
	dsec_close(c);
	return failed;
}
