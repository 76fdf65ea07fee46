/* helper-fakedsecd - a daemon that answers every request with one reply,
 * for tests of what clients do with replies a real dsecd never sends.
 *
 *   helper-fakedsecd URL FILE      (reply with FILE's bytes; - = stdin)
 *
 * Listens on URL (nng REP), prints "ready" once it does, and serves until
 * it is killed.  Exit 2 on bad usage or when it cannot listen.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "util.h"

int main(int argc, char **argv)
{
	struct dsec_buf b;
	nng_socket s;
	char chunk[65536];
	size_t n;
	FILE *f;
	int rc;

	if (argc != 3) {
		fputs("usage: helper-fakedsecd URL FILE\n", stderr);
		return 2;
	}
	f = strcmp(argv[2], "-") ? fopen(argv[2], "rb") : stdin;
	if (!f) {
		perror(argv[2]);
		return 2;
	}
	dsec_buf_init(&b);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		dsec_buf_add(&b, chunk, n);
	if ((rc = nng_rep0_open(&s)) != 0 || (rc = nng_listen(s, argv[1], NULL, 0)) != 0) {
		fprintf(stderr, "helper-fakedsecd: cannot listen on '%s': %s\n", argv[1],
			nng_strerror(rc));
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		nng_msg *m;

		if (nng_recvmsg(s, &m, 0) != 0)
			continue;
		nng_msg_clear(m);	/* keeps the REP header */
		if (nng_msg_append(m, b.data, b.len) != 0 || nng_sendmsg(s, m, 0) != 0)
			nng_msg_free(m);
	}
}
