#!/bin/bash
# With no daemon listening, a client fails at once with "unavailable"
# instead of waiting its timeout (30 s): dsec-run for an ipc socket that
# does not exist, one nobody listens on any more, and a refused TCP port.
# The bound is generous (5 s, against the 30 of before); the figure shows.
. "$(dirname "$0")/lib.sh"
plan 7

# took CMD...: runs it as run does; $TOOK is its wall time in ms.
took() {
	local t0 t1
	t0=$(date +%s%N)
	run "$@"
	t1=$(date +%s%N)
	TOOK=$(( (t1 - t0) / 1000000 ))
}

took env DSEC_HOST="ipc://$T/none.sock" dsec-run -- true
is "$RC" 125 "dsec-run with no daemon fails (125)"
like "$OUT" "cannot connect to 'ipc://$T/none.sock'.*\\(unavailable\\)" "... unavailable: $OUT"
ok $([ "$TOOK" -lt 5000 ]; echo $?) "... at once (${TOOK} ms, today's bound 5 s, was 30 s)"

start_dsecd --backend-dir "$TOP/t" --set backends=test --set default_backend=test
stop_dsecd
took env DSEC_HOST="ipc://$T/dsecd.sock" dsec-run -- true
like "$RC:$OUT" "^125:.*\\(unavailable\\)" "a daemon that has stopped: unavailable ($OUT)"
ok $([ "$TOOK" -lt 5000 ]; echo $?) "... at once (${TOOK} ms)"

took env DSEC_HOST="tcp://127.0.0.1:1" dsec-run -- true
like "$RC:$OUT" "^125:.*\\(unavailable\\)" "a refused TCP port: unavailable ($OUT)"
ok $([ "$TOOK" -lt 5000 ]; echo $?) "... at once (${TOOK} ms)"
