/* helper-peer - a false fs3 peer for tests of the peer tier.
 *
 *   helper-peer URL silent          (takes requests, never answers)
 *   helper-peer URL serve FILE      (answers every chunk_get with FILE's bytes)
 *
 * Listens on URL (nng REP) and prints "request N" per request, flushed, so
 * that a test can tell it was asked.  Runs until killed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "proto.h"

static _Noreturn void die(const char *what, int rc)
{
	fprintf(stderr, "helper-peer: %s: %s\n", what, nng_strerror(rc));
	exit(2);
}

int main(int argc, char **argv)
{
	struct dsec_buf data;
	nng_socket s;
	unsigned long n = 0;
	int rc;

	if (argc < 3 || (strcmp(argv[2], "silent") && (strcmp(argv[2], "serve") || argc != 4))) {
		fprintf(stderr, "usage: helper-peer URL silent | helper-peer URL serve FILE\n");
		return 2;
	}
	dsec_buf_init(&data);
	if (!strcmp(argv[2], "serve")) {
		FILE *f = fopen(argv[3], "rb");
		char buf[65536];
		size_t got;
		if (!f) {
			perror(argv[3]);
			return 2;
		}
		while ((got = fread(buf, 1, sizeof(buf), f)) > 0)
			dsec_buf_add(&data, buf, got);
		fclose(f);
	}
	if ((rc = nng_rep0_open(&s)) != 0)
		die("cannot open a socket", rc);
	if ((rc = nng_listen(s, argv[1], NULL, 0)) != 0)
		die(argv[1], rc);
	for (;;) {
		nng_msg *m;
		struct dsec_pk p;
		size_t len;
		void *out;

		if ((rc = nng_recvmsg(s, &m, 0)) != 0)
			die("cannot receive", rc);
		nng_msg_free(m);
		printf("request %lu\n", ++n);
		fflush(stdout);
		if (!strcmp(argv[2], "silent"))
			continue;	/* the next receive drops this one unanswered */
		dsec_pk_init(&p);
		dsec_pk_reply_ok(&p, 1);
		dsec_pk_kv_bin(&p, "data", data.data, data.len);
		out = dsec_pk_detach(&p, &len);
		if ((rc = nng_msg_alloc(&m, 0)) != 0 || (rc = nng_msg_append(m, out, len)) != 0)
			die("cannot build a reply", rc);
		free(out);
		if ((rc = nng_sendmsg(s, m, 0)) != 0)
			die("cannot send", rc);
	}
}
