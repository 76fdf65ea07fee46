/* helper-rlc URL - drives libdsec's rollout calls against a live dsecd with
 * the container backend and the images task:1 and grader:1 (t/4011), and
 * prints one "KEY VALUE" line for each thing the test checks. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsec.h"

static struct dsec_client *c;

static void say(const char *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const char *k, const char *fmt, ...)
{
	va_list ap;

	printf("%s ", k);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static void die(const char *what, const struct dsec_err *e)
{
	say("fatal", "%s: %s: %s", what, dsec_code_name(e->code), e->msg);
	exit(1);
}

/* The stdout of cmd in sandbox id (trailing newline cut), or "rc=N". */
static char *run(const char *id, const char *cmd, size_t cap)
{
	const char *argv[] = { "sh", "-c", cmd, NULL };
	struct dsec_cmd q = { .argv = argv, .timeout = 30, .output_cap = cap };
	struct dsec_cmd_res res;
	struct dsec_err e;
	char *s;

	if (dsec_exec(c, id, &q, &res, &e) < 0)
		die("exec", &e);
	if (res.exit_code) {
		if (asprintf(&s, "rc=%d", res.exit_code) < 0)
			abort();
	} else {
		s = strndup(res.out.data ? res.out.data : "", res.out.len);
		if (s[0] && s[strlen(s) - 1] == '\n')
			s[strlen(s) - 1] = '\0';
	}
	dsec_cmd_res_free(&res);
	return s;
}

int main(int argc, char **argv)
{
	static const char *const grade_layers[] = { "grader:1", NULL };
	static const char *const watch[] = { "/etc/task.conf", "/data/none", NULL };
	const char *append[] = { "sh", "-c", "echo a >> /data/log", NULL };
	struct dsec_create_opts o = { .backend = "container", .image = "task:1" };
	struct dsec_rl_opts rl = { .struct_size = sizeof(rl), .trajectory = 1,
				   .grade_layers = grade_layers, .watch = watch };
	struct dsec_marks m = { .struct_size = sizeof(m) };
	struct dsec_cmd q = { .argv = append, .timeout = 30 };
	struct dsec_cmd_res res;
	struct dsec_watched *w;
	struct dsec_err e;
	char *id, *s, **ids, *lid, *lsb;
	uint64_t done, failed;
	bool replayed;
	size_t n;

	if (argc != 2)
		return 2;
	if (dsec_connect(&c, argv[1], &e) < 0)
		die("connect", &e);
	if (dsec_create_rl(c, &o, &rl, &id, &e) < 0)
		die("create", &e);
	for (int k = 0; k < 2; k++) {
		if (dsec_exec_step(c, id, 0, &q, &res, &replayed, &e) < 0)
			die("exec_step", &e);
		say(k ? "step0_again" : "step0", "%d %s", res.exit_code, replayed ? "replayed" : "ran");
		dsec_cmd_res_free(&res);
	}
	s = run(id, "cat /data/log", 0);
	say("log", "%s", s);
	free(s);

	/* A streamed command and its input as steps, sent twice: the second
	 * time both come from the log and the input is not written again. */
	for (int k = 0; k < 2; k++) {
		const char *rd[] = { "sh", "-c", "read l; echo got $l; echo $l >> /data/in", NULL };
		struct dsec_cmd sq = { .argv = rd, .timeout = 30 };
		struct dsec_exec_start_opts so = { .stdin_open = true };
		char out[256] = "";
		size_t nout = 0;
		bool r1, r2, end = false;
		char *x;

		if (dsec_exec_start_step(c, id, 100, &sq, &so, &x, &r1, &e) < 0)
			die("exec_start_step", &e);
		if (dsec_exec_write_step(c, id, x, 101, "in\n", 3, true, &r2, &e) < 0)
			die("exec_write_step", &e);
		while (!end) {
			if (dsec_exec_read(c, id, x, 5, &res, &end, &e) < 0)
				die("exec_read", &e);
			if (res.out.len < sizeof(out) - nout) {
				memcpy(out + nout, res.out.data, res.out.len);
				nout += res.out.len;
			}
			dsec_cmd_res_free(&res);
		}
		say(k ? "stream_again" : "stream", "%s %s %.*s", r1 ? "replayed" : "ran",
		    r2 ? "replayed" : "ran", (int)(nout ? nout - 1 : 0), out);
		free(x);
	}
	s = run(id, "cat /data/in", 0);
	say("stream_in", "%s", s);
	free(s);

	if (dsec_watched(c, id, &w, &n, &e) < 0)
		die("watched", &e);
	say("watched", "%zu %s %d %s %d", n, w[0].path, w[0].changed, w[1].before ? w[1].before
	    : "(none)", w[1].changed);
	say("watched_hash", "%.7s", w[0].before ? w[0].before : "");
	dsec_watched_free(w, n);
	if (dsec_file_write(c, id, "/etc/task.conf", "changed\n", 8, 0, &e) < 0)
		die("file_write", &e);
	if (dsec_watched(c, id, &w, &n, &e) < 0)
		die("watched", &e);
	say("watched_after", "%d %d", w[0].changed, w[1].changed);
	dsec_watched_free(w, n);

	free(run(id, "head -c 5000 /bin/sh", 16));
	free(run(id, "cat /tests/check.sh /tests", 0));	/* two probes */
	if (dsec_marks(c, id, &m, &e) < 0)
		die("marks", &e);
	say("marks", "%llu %llu %llu %llu %d %u", (unsigned long long)m.output_floods,
	    (unsigned long long)m.oom_kills, (unsigned long long)m.pids_limited,
	    (unsigned long long)m.timeouts, m.has_egress, (unsigned)m.protected_probes);

	const char *grader[] = { "/bin/sh", "/tests/check.sh", NULL };
	struct dsec_cmd g = { .argv = grader, .timeout = 60 };
	struct dsec_marks gm = { .struct_size = sizeof(gm) };
	if (dsec_grade(c, id, &g, &res, &gm, &e) < 0)
		die("grade", &e);
	say("grade", "%d %.*s %llu %u", res.exit_code, (int)strcspn(res.out.data ? res.out.data : "",
	    "\n"), res.out.data ? res.out.data : "", (unsigned long long)gm.output_floods,
	    (unsigned)gm.protected_probes);
	dsec_cmd_res_free(&res);

	if (dsec_fork(c, id, 2, &ids, &e) < 0)
		die("fork", &e);
	n = 0;
	while (ids[n])
		n++;
	s = run(ids[0], "cat /data/log", 0);
	say("fork", "%zu %s", n, s);
	free(s);
	for (size_t i = 0; i < n; i++)
		dsec_destroy(c, ids[i], &e);
	dsec_ids_free(ids);
	say("fork_zero", "%d", dsec_fork(c, id, 0, &ids, &e) < 0 ? (int)e.code : -1);
	say("fork_zero_code", "%s", dsec_code_name(e.code));
	say("fork_processes", "%s", dsec_fork_flags(c, id, 1, DSEC_FORK_PROCESSES, &ids, &e) < 0
	    ? dsec_code_name(e.code) : "made");
	say("fork_flags", "%s", dsec_fork_flags(c, id, 1, 2, &ids, &e) < 0
	    ? dsec_code_name(e.code) : "made");

	double left = 0;
	if (dsec_set_ttl(c, id, 120, 0, &left, &e) < 0)
		die("set_ttl", &e);
	say("set_ttl", "%.0f", left);
	say("set_ttl_none", "%s", dsec_set_ttl(c, id, 0, 0, NULL, &e) < 0 ? dsec_code_name(e.code)
	    : "sent");
	if (dsec_reset(c, id, NULL, &e) < 0)
		die("reset", &e);
	s = run(id, "cat /data/log 2>/dev/null; cat /etc/task.conf", 0);
	say("reset", "%s", s);
	free(s);

	if (dsec_lease_open(c, 30, 60, NULL, &lid, &e) < 0)
		die("lease_open", &e);
	struct dsec_rl_opts lr = { .struct_size = sizeof(lr), .lease = lid, .trajectory = -1 };
	if (dsec_create_rl(c, &o, &lr, &lsb, &e) < 0)
		die("create in lease", &e);
	if (dsec_lease_pause(c, lid, &done, &failed, &e) < 0)
		die("lease_pause", &e);
	say("lease_pause", "%llu %llu", (unsigned long long)done, (unsigned long long)failed);
	if (dsec_lease_resume(c, lid, &done, NULL, &e) < 0)
		die("lease_resume", &e);
	say("lease_resume", "%llu", (unsigned long long)done);
	s = run(lsb, "echo up", 0);
	say("lease_sb", "%s", s);
	free(s);
	if (dsec_lease_close(c, lid, true, &e) < 0)
		die("lease_close", &e);

	char *nid;
	struct dsec_recovery rep;
	say("recover_live", "%s", dsec_recover(c, id, &nid, &rep, &e) < 0 ? dsec_code_name(e.code)
	    : "made");
	if (dsec_destroy(c, id, &e) < 0)
		die("destroy", &e);
	/* Gone (as after a restart of its node): made again from the log. */
	if (dsec_recover(c, id, &nid, &rep, &e) < 0)
		die("recover", &e);
	say("recover", "%llu %llu %llu %llu", (unsigned long long)rep.entries,
	    (unsigned long long)rep.replayed, (unsigned long long)rep.skipped,
	    (unsigned long long)rep.differs);
	if (dsec_exec_step(c, nid, 0, &q, &res, &replayed, &e) < 0)
		die("exec_step", &e);
	say("recovered_step", "%s", replayed ? "replayed" : "ran");
	dsec_cmd_res_free(&res);
	if (dsec_destroy(c, nid, &e) < 0)
		die("destroy", &e);
	free(nid);
	free(id);
	free(lid);
	free(lsb);
	dsec_close(c);
	return 0;
}
