#!/bin/bash
# A client whose frame the daemon drops for its size (the connection cut
# while the frame is still going out) gets its error and closes: with
# Debian's nng 1.5.2 about 1 close in 60 then waited for ever for the cut
# send (deps/nng/0002-close-mid-transfer.patch).  300 such clients, each
# bounded by timeout(1); none may hang, and the daemon serves after them.
. "$(dirname "$0")/lib.sh"

need_cmd helper-req
need_cmd timeout

plan 3

start_dsecd --backend-dir "$TOP/t" --set backends=test --set default_backend=test \
	--set max_frame=256K --set output_cap=64K || bail "dsecd did not start"
hung=0 other=0
for i in $(seq 300); do
	timeout 20 helper-req -q "$DSEC_HOST" call 'argv[]=cat' 'stdin~=2000000' >/dev/null 2>&1
	case $? in
	124) hung=$((hung + 1)) ;;
	1 | 2) ;;
	*) other=$((other + 1)) ;;
	esac
done
is "$hung" 0 "no client hangs closing after the daemon cut its 2 MB frame (300 tries)"
is "$other" 0 "... each ends with an error of its own"
run dsec-run -- echo alive
is "$OUT" "alive" "the daemon serves after them"
