/* run-batch.h - dsec-run --batch (run-batch.c). */
#ifndef DSEC_RUN_BATCH_H
#define DSEC_RUN_BATCH_H

#include <stdbool.h>

struct batch_opts {
	const char *path;		/* the jobs file, "-" = stdin */
	const char *url;		/* -H, NULL = $DSEC_HOST, then the default */
	unsigned jobs;			/* -j: jobs at once */
	unsigned retries;		/* --retries: more attempts after an infrastructure failure */
	bool keep_going;		/* --keep-going */
	double client_timeout;		/* --client-timeout, 0 = libdsec's */
	bool tty;			/* stderr is a terminal: a progress line */
};

/* Runs the jobs, a JSON line of result each on stdout; the exit status. */
int dsec_run_batch(const struct batch_opts *o);

/* run-traj.c: dsec-run [-H ADDR] trajectory SANDBOX | replay FILE (argv[1]
 * or argv[3] the subcommand); the exit status. */
int dsec_run_traj(int argc, char **argv);

#endif
