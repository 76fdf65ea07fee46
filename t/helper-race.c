/* helper-race - race exec_signal and exec_resize against the end of short
 * streamed commands, for tests.
 *
 *   helper-race URL ID N
 *
 * In sandbox ID: N times, exec_start a command that ends at once (every
 * other one on a pty) and read it to its end, while two more clients send
 * exec_signal (SIGCONT) and exec_resize to the newest command as fast as
 * the daemon answers: most of them arrive while the command is ending.
 * Prints a summary line; exit 0 when every reply was one the protocol
 * allows for a command that may have ended (ok, not_found, invalid, busy)
 * and the daemon answered throughout, 1 otherwise.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsec.h"

static const char *url, *id;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char cur[64];			/* the newest command's exec name, "" = none */
static atomic_bool stop;		/* the main thread is done */
static atomic_ulong sent, bad;		/* control requests sent, unexpected replies */

/* A reply the protocol allows for a command that may have ended. */
static bool expected(int rc, const struct dsec_err *err)
{
	if (rc == 0)
		return true;
	switch (err->code) {
	case DSEC_E_NOT_FOUND:		/* read to its end already */
	case DSEC_E_INVALID:		/* exited, or no terminal */
	case DSEC_E_BUSY:		/* still starting */
		return true;
	default:
		return false;
	}
}

static void *spam(void *arg)
{
	bool resize = arg != NULL;
	struct dsec_client *c;
	struct dsec_err err;

	dsec_err_clear(&err);
	if (dsec_connect(&c, url, &err) < 0) {
		printf("connect: %s\n", err.msg);
		atomic_fetch_add(&bad, 1);
		return NULL;
	}
	dsec_set_timeout(c, 30);
	while (!atomic_load(&stop)) {
		char x[64];
		int rc;

		pthread_mutex_lock(&mu);
		memcpy(x, cur, sizeof(x));
		pthread_mutex_unlock(&mu);
		if (!*x)
			continue;
		rc = resize ? dsec_exec_resize(c, id, x, 30, 100, &err)
			    : dsec_exec_signal(c, id, x, SIGCONT, &err);
		atomic_fetch_add(&sent, 1);
		if (!expected(rc, &err)) {
			if (atomic_fetch_add(&bad, 1) < 5)
				printf("%s %s: %s: %s\n", resize ? "exec_resize" : "exec_signal", x,
				       dsec_code_name(err.code), err.msg);
			if (err.code == DSEC_E_UNAVAILABLE || err.code == DSEC_E_TIMEOUT)
				break;	/* the daemon is gone */
		}
	}
	dsec_close(c);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *argv_true[] = { "true", NULL };
	struct dsec_cmd req = { .argv = argv_true };
	struct dsec_client *c;
	struct dsec_err err;
	pthread_t th[2];
	unsigned long n, done = 0;
	int failed = 0;

	if (argc != 4) {
		fputs("usage: helper-race URL ID N\n", stderr);
		return 2;
	}
	url = argv[1];
	id = argv[2];
	n = strtoul(argv[3], NULL, 10);
	dsec_err_clear(&err);
	if (dsec_connect(&c, url, &err) < 0) {
		printf("connect: %s\n", err.msg);
		return 1;
	}
	dsec_set_timeout(c, 30);
	pthread_create(&th[0], NULL, spam, NULL);
	pthread_create(&th[1], NULL, spam, (void *)1);
	for (unsigned long i = 0; i < n && !failed; i++) {
		struct dsec_exec_start_opts o = { .pty = i % 2 == 1 };
		char *x = NULL;

		if (dsec_exec_start(c, id, &req, &o, &x, &err) < 0) {
			printf("exec_start %lu: %s: %s\n", i, dsec_code_name(err.code), err.msg);
			failed = 1;
			break;
		}
		pthread_mutex_lock(&mu);
		snprintf(cur, sizeof(cur), "%s", x);
		pthread_mutex_unlock(&mu);
		for (int k = 0; k < 100; k++) {
			struct dsec_cmd_res res;
			bool end = false;

			if (dsec_exec_read(c, id, x, 5, &res, &end, &err) < 0) {
				printf("exec_read %lu: %s: %s\n", i, dsec_code_name(err.code), err.msg);
				failed = 1;
				break;
			}
			dsec_cmd_res_free(&res);
			if (end) {
				done++;
				break;
			}
		}
		free(x);
	}
	atomic_store(&stop, true);
	pthread_join(th[0], NULL);
	pthread_join(th[1], NULL);
	if (!failed && dsec_ping(c, &err) < 0) {
		printf("ping: %s\n", err.msg);
		failed = 1;
	}
	printf("streams %lu/%lu ended, %lu signals and resizes, %lu unexpected replies\n", done, n,
	       (unsigned long)atomic_load(&sent), (unsigned long)atomic_load(&bad));
	dsec_close(c);
	return failed || done != n || atomic_load(&bad) ? 1 : 0;
}
