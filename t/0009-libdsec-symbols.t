#!/bin/bash
# libdsec stands alone: libdsec.so exports exactly the functions the
# SYNOPSIS of libdsec(3) documents (nm -D; before: 122 symbols, every
# global of lib/).
. "$(dirname "$0")/lib.sh"
need_cmd nm
plan 2

SO="$TOP/lib/libdsec.so"
nm -D --defined-only "$SO" | awk '$2 ~ /^[TDBRVW]$/ { print $3 }' | grep -v '^_' | sort -u \
	> "$T/exported"
sed -n '/^\.Sh SYNOPSIS/,/^\.Sh DESCRIPTION/s/^\.Fn \([a-z_0-9]*\).*/\1/p' \
	"$TOP/man/libdsec.3" | sort -u > "$T/documented"
is "$(diff "$T/documented" "$T/exported" | grep '^[<>]' | tr '\n' ' ')" "" \
	"libdsec.so exports what libdsec(3) documents, and only that ($(wc -l < "$T/exported") functions; < documented only, > exported only)"
grep -q dsec_call_async "$T/exported"
ok $? "... the asynchronous calls among them"
