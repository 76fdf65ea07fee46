#!/bin/bash
# max_inflight long commands do not hold up the quick ops: ping, info and
# list are answered while every slot is busy, and the requests beyond
# max_inflight still wait and are served once a slot frees.
. "$(dirname "$0")/lib.sh"
plan 9

start_dsecd --backend-dir "$TOP/t" --set backends=test --set default_backend=test \
	--set max_inflight=4
ok $? "dsecd starts with max_inflight 4"
req() { helper-req "$DSEC_HOST" "$@"; }

# Fill every slot with a command that sleeps 5 s (the test backend's
# timer: no process, no CPU), and queue one more behind them.
pids=
for i in 1 2 3 4; do
	HELPER_REQ_TIMEOUT=120 req call argv[]=sleep argv[]=5 > "$T/sleep.$i" 2>&1 &
	pids="$pids $!"
done
sleep 1
HELPER_REQ_TIMEOUT=120 req call argv[]=echo argv[]=queued > "$T/queued" 2>&1 &
queued=$!
sleep 0.5

alive() { local p; for p in $pids; do kill -0 "$p" 2>/dev/null || return 1; done; }
HELPER_REQ_TIMEOUT=20 run req ping
like "$OUT" '"pong":true' "ping is answered while max_inflight commands run"
alive
ok $? "... before any of them has ended"
HELPER_REQ_TIMEOUT=20 run req info
is "$(get inflight)" 5 "info is answered too: 4 in flight and itself"
HELPER_REQ_TIMEOUT=20 run req list
like "$OUT" '"ok":true' "and list"
alive
ok $? "all of it before the commands end"
ok "$(kill -0 "$queued" 2>/dev/null; echo $?)" "the request beyond max_inflight waits"

# Calls cannot be cut short: wait for them (their 5 s).
wait $pids
wait $queued
like "$(cat "$T/queued")" '"stdout":"queued\\n"' "the waiting request is served once a slot frees"
like "$(cat "$T/sleep.1")" '"ok":true' "and the long commands ended normally"
