/* run-batch.c - dsec-run --batch: many jobs, one process.
 *
 * A job is one line of JSON (jansson reads it):
 *   {"name": "t1", "backend": "container", "image": "py:3",
 *    "files": {"/work/a.py": "print(1)\n"},        (or [{"path", "content"|"from"}])
 *    "commands": ["python3 /work/a.py", ["ls", "-l"]],
 *    "timeout": 30, "env": {"K": "V"}, "cwd": "/work"}
 * Each runs in a fresh sandbox: create, write the files, run the commands
 * in order (a string is sh -c, an array an argv), destroy.  -j N jobs run
 * at once, each on a thread of its own with its own connection (dsec-run
 * is C: a blocking call a thread is the plain way; the SDK is the one
 * without a thread per call).  Every job gives one JSON line on stdout,
 * in the order they end: its line number and name, ok, the sandbox, per
 * command exit, signal, timed_out, stdout, stderr (text, invalid UTF-8
 * replaced) and ms, timings per phase, attempts, and the error when one
 * ended it.  A job fails when a dsec operation failed or a command did
 * not exit 0; an infrastructure failure (unavailable, sandbox_lost,
 * node_lost, backend_error, shutting_down, capacity) is retried with a
 * fresh sandbox, --retries times (2), after a short backoff; the command's
 * own failures are not.  Without --keep-going no job starts after the
 * first that failed.  On a terminal, stderr shows a progress line (done,
 * failed, running, rate, ETA), none when it is not one.  Exit status: 0
 * when every job ran and succeeded, 1 when one failed or did not run, 125
 * for our own failures (the file, the connection).
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dsec.h"
#include "run-batch.h"
#include "util.h"

/* One job as its line gave it. */
struct job {
	size_t line;			/* its line number in the file */
	json_t *spec;			/* the line, parsed */
};

static struct {
	const struct batch_opts *o;
	struct job *jobs;
	size_t njobs;
	pthread_mutex_t mu;		/* guards what follows and stdout */
	size_t next;			/* next job to start */
	size_t done, failed, running;
	bool stop;			/* a job failed, no --keep-going: start no more */
	double t0;			/* start */
} B = { .mu = PTHREAD_MUTEX_INITIALIZER };

static char *slurp(FILE *f, size_t *len)
{
	struct dsec_buf b;
	char tmp[65536];
	size_t n;

	dsec_buf_init(&b);
	while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0)
		dsec_buf_add(&b, tmp, n);
	*len = b.len;
	dsec_buf_add(&b, "", 1);
	return b.data;
}

/* Reads the jobs: one JSON object a line, blank lines skipped.  0, or -1
 * with a message. */
static int load_jobs(const char *path)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "re") : stdin;
	size_t len, line = 0;
	char *data, *p, *nl;

	if (!f) {
		fprintf(stderr, "dsec-run: cannot read '%s': %s\n", path, strerror(errno));
		return -1;
	}
	data = slurp(f, &len);
	if (f != stdin)
		fclose(f);
	for (p = data; p < data + len; p = nl + 1) {
		json_error_t je;
		json_t *j;

		line++;
		if (!(nl = memchr(p, '\n', (size_t)(data + len - p))))
			nl = data + len;
		size_t l = (size_t)(nl - p);
		while (l && (p[l - 1] == '\r' || p[l - 1] == ' ' || p[l - 1] == '\t'))
			l--;
		if (!l)
			continue;
		if (!(j = json_loadb(p, l, 0, &je)) || !json_is_object(j)) {
			fprintf(stderr, "dsec-run: %s:%zu: %s\n", path, line,
				j ? "a job is a JSON object" : je.text);
			json_decref(j);
			free(data);
			return -1;
		}
		B.jobs = xrealloc(B.jobs, (B.njobs + 1) * sizeof(*B.jobs));
		B.jobs[B.njobs++] = (struct job){ line, j };
	}
	free(data);
	return 0;
}

/* A JSON string of bytes that may be any (invalid UTF-8 replaced). */
static json_t *text(const char *s, size_t n)
{
	char *clean = xmalloc(n * 3 + 1);
	size_t l = dsec_utf8_clean(clean, n * 3 + 1, s, n);
	json_t *j = json_stringn(clean, l);

	free(clean);
	return j ? j : json_string("");
}

static double ms_since(double t)
{
	return round((dsec_now() - t) * 1e6) / 1e3;
}

static bool infrastructure(enum dsec_code c)
{
	return c == DSEC_E_UNAVAILABLE || c == DSEC_E_SANDBOX_LOST || c == DSEC_E_NODE_LOST ||
	       c == DSEC_E_BACKEND || c == DSEC_E_SHUTTING_DOWN || c == DSEC_E_CAPACITY;
}

/* "K": "V" pairs of an object as "K=V" strings (NULL-terminated, caller
 * frees each and the vector), or NULL. */
static char **env_of(json_t *o)
{
	const char *k;
	json_t *v;
	char **env;
	size_t n = 0;

	if (!json_is_object(o) || !json_object_size(o))
		return NULL;
	env = xcalloc(json_object_size(o) + 1, sizeof(*env));
	json_object_foreach(o, k, v)
		if (json_is_string(v))
			env[n++] = xasprintf("%s=%s", k, json_string_value(v));
	return env;
}

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static json_t *error_json(const struct dsec_err *err, const char *phase)
{
	return json_pack("{s:s, s:s, s:o}", "phase", phase, "code", dsec_code_name(err->code),
			 "message", text(err->msg, strlen(err->msg)));
}

/* Writes the job's files into sandbox id.  0, or -1 with err. */
static int put_files(struct dsec_client *c, const char *id, json_t *files, struct dsec_err *err)
{
	const char *k;
	json_t *v;
	size_t i;

	if (json_is_object(files)) {
		json_object_foreach(files, k, v) {
			if (!json_is_string(v))
				return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "file '%s': its content "
						     "must be a string", k);
			if (dsec_file_write(c, id, k, json_string_value(v), json_string_length(v), 0644,
					    err) < 0)
				return -1;
		}
		return 0;
	}
	json_array_foreach(files, i, v) {
		const char *path = json_string_value(json_object_get(v, "path"));
		json_t *content = json_object_get(v, "content");
		const char *from = json_string_value(json_object_get(v, "from"));
		if (!path || (!json_is_string(content) && !from))
			return dsec_err_setc(err, DSEC_E_INVALID, EINVAL, "files[%zu]: needs \"path\" "
					     "and \"content\" or \"from\"", i);
		if (json_is_string(content)) {
			if (dsec_file_write(c, id, path, json_string_value(content),
					    json_string_length(content), 0644, err) < 0)
				return -1;
			continue;
		}
		_cleanup_free_ char *data = NULL;
		size_t n = 0;
		int r = dsec_read_file(from, &data, &n);
		if (r < 0)
			return dsec_err_setc(err, DSEC_E_INVALID, -r, "files[%zu]: cannot read '%s': %s",
					     i, from, strerror(-r));
		if (dsec_file_write(c, id, path, data, n, 0644, err) < 0)
			return -1;
	}
	return 0;
}

/* One attempt at job j: its result object; *infra true when it ended on
 * an infrastructure failure (worth another attempt). */
static json_t *attempt(struct dsec_client *c, const struct job *j, bool *infra, bool *ok)
{
	json_t *s = j->spec, *out = json_object(), *cmds = json_array(), *times = json_object();
	struct dsec_create_opts co = { 0 };
	struct dsec_err err;
	char *id = NULL;
	double t = dsec_now(), t0 = t;
	char **env = env_of(json_object_get(s, "env"));
	const char *cwd = json_string_value(json_object_get(s, "cwd"));
	json_t *commands = json_object_get(s, "commands");
	double timeout = json_number_value(json_object_get(s, "timeout"));
	size_t i;
	json_t *cmd;

	*infra = false;
	*ok = false;
	dsec_err_clear(&err);
	co.backend = json_string_value(json_object_get(s, "backend"));
	co.image = json_string_value(json_object_get(s, "image"));
	co.runtime = json_string_value(json_object_get(s, "runtime"));
	co.cwd = cwd;
	if (commands && !json_is_array(commands)) {
		json_object_set_new(out, "error", json_pack("{s:s, s:s, s:s}", "phase", "job", "code",
							      "invalid", "message", "\"commands\" must be an array"));
		goto done;
	}
	if (dsec_create(c, &co, &id, &err) < 0) {
		json_object_set_new(out, "error", error_json(&err, "create"));
		*infra = infrastructure(err.code);
		goto done;
	}
	json_object_set_new(out, "sandbox", json_string(id));
	json_object_set_new(times, "create", json_real(ms_since(t)));
	t = dsec_now();
	json_t *files = json_object_get(s, "files");
	if (files && put_files(c, id, files, &err) < 0) {
		json_object_set_new(out, "error", error_json(&err, "upload"));
		*infra = infrastructure(err.code);
		goto destroy;
	}
	json_object_set_new(times, "upload", json_real(ms_since(t)));
	t = dsec_now();
	bool all_zero = true;
	json_array_foreach(commands, i, cmd) {
		struct dsec_cmd req = { .env = (const char *const *)env, .cwd = cwd, .timeout = timeout };
		struct dsec_cmd_res res = { 0 };
		const char *shv[] = { "sh", "-c", json_string_value(cmd), NULL };
		const char **argv = NULL;
		double tc = dsec_now();
		if (json_is_string(cmd)) {
			req.argv = shv;
		} else if (json_is_array(cmd) && json_array_size(cmd)) {
			argv = xcalloc(json_array_size(cmd) + 1, sizeof(*argv));
			for (size_t k = 0; k < json_array_size(cmd); k++)
				if (!(argv[k] = json_string_value(json_array_get(cmd, k))))
					argv[k] = "";
		} else {
			dsec_err_setc(&err, DSEC_E_INVALID, EINVAL, "commands[%zu] is not a string nor "
				      "a non-empty array of strings", i);
			json_object_set_new(out, "error", error_json(&err, "exec"));
			goto destroy;
		}
		if (argv)
			req.argv = argv;
		int r = dsec_exec(c, id, &req, &res, &err);
		free(argv);
		if (r < 0) {
			json_object_set_new(out, "error", error_json(&err, "exec"));
			*infra = infrastructure(err.code);
			goto destroy;
		}
		json_array_append_new(cmds, json_pack("{s:i, s:i, s:b, s:o, s:o, s:b, s:f}",
			"exit", res.exit_code, "signal", res.signal, "timed_out", res.timed_out,
			"stdout", text(res.out.data ? res.out.data : "", res.out.len),
			"stderr", text(res.err.data ? res.err.data : "", res.err.len),
			"truncated", res.out_truncated || res.err_truncated, "ms", ms_since(tc)));
		all_zero = all_zero && res.exit_code == 0 && !res.timed_out;
		dsec_cmd_res_free(&res);
	}
	json_object_set_new(times, "exec", json_real(ms_since(t)));
	*ok = all_zero;
destroy:
	t = dsec_now();
	if (dsec_destroy(c, id, &err) < 0 && err.code != DSEC_E_NOT_FOUND && err.code != DSEC_E_NODE_LOST &&
	    !json_object_get(out, "error")) {
		json_object_set_new(out, "error", error_json(&err, "destroy"));
		*ok = false;
	}
	json_object_set_new(times, "destroy", json_real(ms_since(t)));
done:
	json_object_set_new(times, "total", json_real(ms_since(t0)));
	json_object_set_new(out, "commands", cmds);
	json_object_set_new(out, "ms", times);
	free(id);
	strv_free(env);
	return out;
}

static void progress(bool final)
{
	double el = dsec_now() - B.t0;
	double rate = el > 0 ? B.done / el : 0;
	size_t left = B.njobs - B.done;

	fprintf(stderr, "\r\033[Kdsec-run: %zu/%zu done, %zu failed, %zu running, %.1f/s",
		B.done, B.njobs, B.failed, B.running, rate);
	if (!final && rate > 0 && left)
		fprintf(stderr, ", ETA %.0f s", left / rate);
	if (final)
		fputc('\n', stderr);
}

static void *worker(void *arg)
{
	struct dsec_client *c = arg;

	for (;;) {
		pthread_mutex_lock(&B.mu);
		if (B.stop || B.next == B.njobs) {
			pthread_mutex_unlock(&B.mu);
			return NULL;
		}
		const struct job *j = &B.jobs[B.next++];
		B.running++;
		pthread_mutex_unlock(&B.mu);

		json_t *res = NULL;
		bool infra = false, ok = false;
		unsigned tries = 0;
		do {
			if (tries)	/* back off: 0.2, 0.4, 0.8 .. s, capped at 5 */
				usleep((useconds_t)(fmin(5.0, 0.2 * pow(2, tries - 1)) * 1e6));
			json_decref(res);
			res = attempt(c, j, &infra, &ok);
			tries++;
		} while (!ok && infra && tries <= B.o->retries);
		json_t *name = json_object_get(j->spec, "name"), *top = json_object();
		json_object_set_new(top, "line", json_integer((json_int_t)j->line));
		if (name)
			json_object_set(top, "name", name);
		json_object_set_new(top, "ok", json_boolean(ok));
		json_object_set_new(top, "attempts", json_integer(tries));
		json_object_update(top, res);
		json_decref(res);
		char *line = json_dumps(top, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
		json_decref(top);

		pthread_mutex_lock(&B.mu);
		if (B.o->tty)
			fputs("\r\033[K", stderr);
		if (line)
			puts(line);
		fflush(stdout);
		B.running--;
		B.done++;
		if (!ok) {
			B.failed++;
			if (!B.o->keep_going)
				B.stop = true;
		}
		if (B.o->tty)
			progress(false);
		pthread_mutex_unlock(&B.mu);
		free(line);
	}
}

int dsec_run_batch(const struct batch_opts *o)
{
	struct dsec_err err;
	pthread_t *th;
	struct dsec_client **cs;
	unsigned n;
	int status = 0;

	B.o = o;
	if (load_jobs(o->path) < 0)
		return 125;
	n = o->jobs ? o->jobs : 1;
	if (n > B.njobs)
		n = B.njobs ? (unsigned)B.njobs : 1;
	th = xcalloc(n, sizeof(*th));
	cs = xcalloc(n, sizeof(*cs));
	for (unsigned i = 0; i < n; i++) {
		if (dsec_connect(&cs[i], o->url, &err) < 0) {
			fprintf(stderr, "dsec-run: %s\n", err.msg);
			status = 125;
			n = i;
			goto out;
		}
		if (o->client_timeout > 0)
			dsec_set_timeout(cs[i], o->client_timeout);
	}
	B.t0 = dsec_now();
	for (unsigned i = 0; i < n; i++)
		if (pthread_create(&th[i], NULL, worker, cs[i]) != 0) {
			fprintf(stderr, "dsec-run: cannot start a thread\n");
			abort();
		}
	while (o->tty) {
		pthread_mutex_lock(&B.mu);
		bool over = B.done == B.njobs || (B.stop && !B.running);
		progress(over);
		pthread_mutex_unlock(&B.mu);
		if (over)
			break;
		usleep(500000);
	}
	for (unsigned i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	if (B.failed || B.done < B.njobs) {
		if (B.done < B.njobs)
			fprintf(stderr, "dsec-run: %zu of %zu jobs failed; %zu not run (no --keep-going)\n",
				B.failed, B.njobs, B.njobs - B.done);
		status = 1;
	}
out:
	for (unsigned i = 0; i < n; i++)
		dsec_close(cs[i]);
	free(cs);
	free(th);
	for (size_t i = 0; i < B.njobs; i++)
		json_decref(B.jobs[i].spec);
	free(B.jobs);
	return status;
}
