#!/bin/bash
# exec_signal and exec_resize racing the end of short streamed commands:
# the backend's handle of a command must stay valid until its completion
# has reached dsecd (a use-after-free here crashed the daemon), so the
# daemon keeps answering, and every reply is one the protocol allows for a
# command that may just have ended.
. "$(dirname "$0")/lib.sh"

need_container
[ -x "$TOP/t/helper-race" ] || skip_all "needs t/helper-race (make tests)"

plan 4

N=${DSEC_RACE_N:-1000}
start_dsecd --set backends=container --set stream_grace=2 || bail "dsecd did not start"
export HELPER_REQ_TIMEOUT=60
run helper-req "$DSEC_HOST" create backend=container
id=$(get id)
[ -n "$id" ] || bail "create failed: $OUT"
run helper-race "$DSEC_HOST" "$id" "$N"
diag "$OUT"
is "$RC" 0 "$N streamed commands end while exec_signal and exec_resize race them"
ok $(kill -0 "$DSECD_PID" 2>/dev/null; echo $?) "the daemon is alive"
run dsec-run --backend container -- echo still
is "$OUT" "still" "and serves new sandboxes"
run helper-req "$DSEC_HOST" destroy id="$id"
is "$RC" 0 "the sandbox is destroyed"
