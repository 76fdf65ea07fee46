#!/bin/bash
# dsecd raises its soft limit of descriptors to the hard one at start (a
# node full of sandboxes runs out of descriptors first), says so in its
# log, and info reports its process limits.
. "$(dirname "$0")/lib.sh"

need_cmd helper-req
[ -e "$TOP/t/test.so" ] || skip_all "needs t/test.so (make tests)"
hard=$(ulimit -Hn)
[ "$hard" != unlimited ] && [ "$hard" -gt 600 ] || skip_all "needs a hard descriptor limit over 600 (it is $hard)"

plan 3

ulimit -Sn 512
start_dsecd --backend-dir "$TOP/t" --set backends=test --set default_backend=test
run helper-req "$DSEC_HOST" info
like "$OUT" "\"limits\":\\{\"nofile\":$hard,\"nofile_hard\":$hard,\"nproc\":[0-9]+\\}" \
	"info: the soft descriptor limit is the hard one ($hard), not the 512 it was started with"
like "$(cat "$T/dsecd.log")" "soft limit raised from 512 to $hard" "... and the log says so"
is "$(awk '/^Max open files/ { print $4 }' "/proc/$DSECD_PID/limits")" "$hard" "... as the kernel has it"
