#!/bin/bash
# The trajectory log (rlcoord/tlog.c): every step of a sandbox created with
# trajectory: true is durable before its reply; a step sent again is
# answered from the log and runs nothing (a command that appends to a file
# shows each line once); another request at a logged step is refused
# diverged; the same step sent while it runs runs once; the log reads back
# in order (also after the sandbox is gone, and after a kill -9 of the
# daemon, from its journal); a torn tail ends it.
. "$(dirname "$0")/lib.sh"

need_fncall
/usr/bin/python3 -c 'import msgpack' 2>/dev/null || skip_all "needs python3-msgpack"
plan 41

start_dsecd --set backends=fncall || bail "dsecd did not start"
rl() { timeout 120 helper-py "$TOP/t/helper-rl.py" "$@"; }

run rl ff "$DSEC_HOST" 100
is "$(get ran)" 100 "100 steps run the first time ($OUT)"
is "$(get replayed)" 100 "... sent again, all 100 are answered from the log (replayed = the step)"
is "$(get same)" true "... with the results they had"
is "$(get lines)" 100 "... and nothing ran twice: the file has 100 lines"
is "$(get steps)" 100 "info's trajectory counts 100 steps"
is "$(get last_step)" 99 "... the last 99"
diag "fast-forward of 100 logged steps, one after another from Python: $(get ff_ms) ms"

run rl diverge "$DSEC_HOST"
is "$(get code)" diverged "another request at a logged step: diverged ($OUT)"
like "$(get message)" "step 1 of sandbox .* is logged with another exec request sha256:[0-9a-f]{64}; this exec request is sha256:[0-9a-f]{64}" "... naming the step and both hashes"
is "$(get code2)" diverged "... for any other request at a logged step"
is "$(get lines)" 3 "... and it ran nothing"
is "$(get diverged)" 2 "info counts them"

run rl join "$DSEC_HOST"
is "$(get lines)" 1 "one step sent twice while it runs: it runs once ($OUT)"
is "$(get a) $(get b)" "1 1" "... both get its result"
is "$(get marked)" 1 "... the second marked replayed"
is "$(get joined)" 1 "... counted joined"

run rl refuse "$DSEC_HOST"
is "$(get nolog)" invalid "a step on a sandbox without a trajectory: invalid ($OUT)"
is "$(get notlogged)" invalid "a step on an op that is not logged: invalid"
is "$(get negative) $(get string)" "bad_request bad_request" "a step that is not an unsigned integer: bad_request"
is "$(get bad)" invalid "a step refused before it ran ..."
is "$(get after_bad)" true "... is not logged: sent right, it runs"

run rl export "$DSEC_HOST" 5
is "$(get n)" 9 "the log holds create, 5 steps, a write, a read and an exec without step ($OUT)"
is "$(get ops)" "create,exec,file_write,file_read,exec" "... in the order they ran"
is "$(get seqs) $(get steps)" "true true" "... numbered 0.. in order, with their steps"
is "$(get argv3)" "echo step 3 >> /work/f; wc -l < /work/f" "an entry has its request as it came"
is "$(get stdout3)" 4 "... and its reply"
is "$(get hash)" "sha256:" "... and its request's hash"
is "$(get page) $(get page_next) $(get page_end)" "2 3 4 5 false" "a page: from 2, 3 entries, the next one to ask for"
is "$(get after)" 9 "the log reads back after the sandbox is destroyed"
sid=$(get id)
logf="$T/state/trajectory/$sid.log"
printf 'torn entry' >> "$logf"
run rl read "$DSEC_HOST" "$sid"
is "$(get n)" 9 "a torn tail ends the log where the good entries end ($OUT)"

# kill -9: what was acknowledged is in the journal; a start writes it
# again into the logs (here the log file is cut to nothing first, as an
# unsynced write may be lost).
run rl steps "$DSEC_HOST" 20 "$T/sid"
sid=$(cat "$T/sid")
kill -KILL "$DSECD_PID"; wait "$DSECD_PID" 2>/dev/null; DSECD_PID=
ok $? "dsecd killed with SIGKILL after 20 acknowledged steps"
: > "$T/state/trajectory/$sid.log"
start_dsecd --set backends=fncall || bail "dsecd did not start again"
like "$(dsecd_log)" "entries of the journal written again" "the next start replays the journal"
run rl read "$DSEC_HOST" "$sid"
is "$(get n)" 21 "every acknowledged entry is back: create and 20 steps ($OUT)"
is "$(get steps)" "$(seq -s ' ' 0 19)" "... in order"
run helper-req "$DSEC_HOST" trajectory "id=$sid/../x"
like "$OUT" '"code":"invalid"' "trajectory of a name that is no sandbox id: invalid"
run helper-req "$DSEC_HOST" trajectory "id=$(sed 's/:.*//' "$T/sid"):00000000"
like "$OUT" '"code":"not_found"' "... of an id with no log: not_found"

# Past the journal's 16 MiB: a checkpoint syncs the logs and starts it
# again; what comes after it is replayed after a kill -9 too.
run rl big "$DSEC_HOST" 24 "$T/sid"
sid=$(cat "$T/sid")
ok $([ "$(get checkpoints)" -ge 2 ] && echo 0 || echo 1) "24 MiB of entries: the journal was checkpointed ($OUT)"
kill -KILL "$DSECD_PID"; wait "$DSECD_PID" 2>/dev/null; DSECD_PID=
: the last 3 MiB of the log, written after the checkpoint, are lost
truncate -s -3M "$T/state/trajectory/$sid.log"
start_dsecd --set backends=fncall || bail "dsecd did not start again"
run rl read "$DSEC_HOST" "$sid"
n=$(get n)
is "$n" 25 "the entries written after the checkpoint come back from the journal"
stop_dsecd
start_dsecd --set backends=fncall || bail "dsecd did not start again"
unlike() { like "$(printf '%s' "$1" | grep -c "$2")" '^0$' "$3"; }
unlike "$(dsecd_log)" "entries of the journal written again" "after a clean stop nothing is replayed"
run rl read "$DSEC_HOST" "$sid"
is "$(get n)" "$n" "... and the log is as it was"

# trajectory_keep: a gone sandbox's log is removed once it is that old; a
# live one's stays however idle.
stop_dsecd
start_dsecd --set backends=fncall --set trajectory_keep=2s || bail "dsecd did not start again"
run rl steps "$DSEC_HOST" 1 "$T/live"
run rl steps "$DSEC_HOST" 1 "$T/gone"
helper-req "$DSEC_HOST" destroy "id=$(cat "$T/gone")" >/dev/null
for i in $(seq 100); do [ -e "$T/state/trajectory/$(cat "$T/gone").log" ] || break; sleep 0.1; done
ok $([ ! -e "$T/state/trajectory/$(cat "$T/gone").log" ] && echo 0 || echo 1) \
	"the log of a destroyed sandbox goes after trajectory_keep"
ok $([ -e "$T/state/trajectory/$(cat "$T/live").log" ] && echo 0 || echo 1) \
	"... a live sandbox's log stays, idle as long"
