#!/bin/bash
# libdsec stands alone: libdsec.so exports exactly the functions the
# SYNOPSIS of libdsec(3) documents (nm -D; before: 122 symbols, every
# global of lib/), dsec.h compiles with only the headers make install puts
# next to it (before: it needed backend.h and util.h), and a client with an
# xmalloc of its own links against libdsec.a (before: multiple definition).
. "$(dirname "$0")/lib.sh"
need_cmd nm
need_cmd cc
plan 4

SO="$TOP/lib/libdsec.so"
nm -D --defined-only "$SO" | awk '$2 ~ /^[TDBRVW]$/ { print $3 }' | grep -v '^_' | sort -u \
	> "$T/exported"
sed -n '/^\.Sh SYNOPSIS/,/^\.Sh DESCRIPTION/s/^\.Fn \([a-z_0-9]*\).*/\1/p' \
	"$TOP/man/libdsec.3" | sort -u > "$T/documented"
is "$(diff "$T/documented" "$T/exported" | grep '^[<>]' | tr '\n' ' ')" "" \
	"libdsec.so exports what libdsec(3) documents, and only that ($(wc -l < "$T/exported") functions; < documented only, > exported only)"
grep -q dsec_call_async "$T/exported"
ok $? "... the asynchronous calls among them"

# The installed header set: dsec.h and what it includes (make install).
mkdir -p "$T/inc/dsec"
cp "$TOP/lib/dsec.h" "$TOP/lib/err.h" "$TOP/lib/buf.h" "$T/inc/dsec/"
cat > "$T/alone.c" <<'C'
#include <dsec/dsec.h>
int main(void)
{
	struct dsec_client *c;
	struct dsec_err e;
	struct dsec_cmd q = { .code = "true" };
	struct dsec_cmd_res r = { 0 };

	if (dsec_connect(&c, "inproc://x", &e) == 0 && dsec_exec(c, "n:1", &q, &r, &e) == 0)
		dsec_cmd_res_free(&r);
	return 0;
}
C
run cc -std=c99 -Wall -Werror -c -o "$T/alone.o" -I"$T/inc" "$T/alone.c"
is "$RC:$OUT" "0:" "dsec.h compiles with only dsec.h, err.h and buf.h: no util.h, no backend.h"

# A client whose own helpers have the names libdsec's had (xmalloc, ...).
cat > "$T/own.c" <<'C'
#include <stdlib.h>
#include <string.h>
#include <dsec.h>
void *xmalloc(size_t n) { return malloc(n); }
void *xcalloc(size_t a, size_t b) { return calloc(a, b); }
char *xstrdup(const char *s) { return strdup(s); }
int main(void)
{
	struct dsec_client *c;
	struct dsec_err e;
	char *s = xstrdup("x");

	free(s);
	return dsec_connect(&c, "inproc://none", &e) < 0 && e.code == DSEC_E_UNAVAILABLE ? 0 : 1;
}
C
if [ -f "$TOP/build/nng/lib/libnng.a" ]; then
	NNGL="$TOP/build/nng/lib/libnng.a -lmbedtls -lmbedx509 -lmbedcrypto"
else
	NNGL=-lnng
fi
run cc $SAN_CFLAGS -o "$T/own" -I"$TOP/lib" "$T/own.c" "$TOP/lib/libdsec.a" $NNGL -lmsgpackc -lpthread
[ "$RC" = 0 ] && run "$T/own"
is "$RC:$OUT" "0:" "a client with its own xmalloc, xcalloc and xstrdup links against libdsec.a and runs"
