#!/bin/bash
# libdsec's rollout calls (lib/client-rl.c) against a live daemon: a create
# with a trajectory, grade layers and watch files; a step sent twice runs
# once; watched, the misbehaviour counters, grade with them, fork (the
# forks have the state), reset (the creation state again), a lease paused
# and resumed, recover refused on a node that keeps no copies; bad
# arguments refused before anything is sent.
. "$(dirname "$0")/lib.sh"

need_container
need_cmd dsecctl
[ -x "$TOP/t/helper-rlc" ] || skip_all "needs t/helper-rlc (make tests)"
plan 19

mk_small_root "$T/base" sh cat head
mkdir -p "$T/grader/tests"
mk_small_root "$T/grader" sh cat
echo "expected = 42" > "$T/base/etc/task.conf"
echo 'cat /data/log 2>/dev/null || echo none' > "$T/grader/tests/check.sh"
export DSEC_FS3_STORE="$T/state/fs3"
mkdir -p "$T/state"
dsecctl image import --tag task:1 "$T/base" >/dev/null || bail "cannot import the task image"
dsecctl image import --tag grader:1 "$T/grader" >/dev/null || bail "cannot import the grader"
start_dsecd --set backends=container || bail "dsecd did not start"

run timeout 200 "$TOP/t/helper-rlc" "$DSEC_HOST"
[ "$RC" = 0 ] || printf '%s\n' "$OUT" | sed 's/^/# /' >&2
val() { printf '%s\n' "$OUT" | sed -n "s/^$1 //p"; }
is "$(val step0) | $(val step0_again) | $(val log)" "0 ran | 0 replayed | a" \
	"dsec_exec_step: a step sent twice runs once (the file has one line)"
is "$(val stream) | $(val stream_again) | $(val stream_in)" "ran ran got in | replayed replayed got in | in" \
	"dsec_exec_start_step, dsec_exec_write_step: sent twice, the command and its input run once, read whole both times"
is "$(val watched)" "2 /etc/task.conf 0 (none) 0" "dsec_watched: the watch files, nothing changed"
is "$(val watched_hash)" "sha256:" "... each with its hash"
is "$(val watched_after)" "1 0" "... the file written is changed"
is "$(val marks)" "1 0 0 0 0 2" "dsec_marks: one output flood, no network, two probes of /tests"
is "$(val grade)" "0 a 1 2" "dsec_grade: the grader's result, the agent's counters"
is "$(val fork)" "2 a" "dsec_fork: two sandboxes with the state of the first"
is "$(val fork_zero_code)" "invalid" "... a fork of 0 is refused"
is "$(val fork_processes) $(val fork_flags)" "unsupported invalid" \
	"dsec_fork_flags: with processes on a node without criu, unsupported; an unknown flag, invalid"
is "$(val set_ttl) $(val set_ttl_none)" "120 invalid" "dsec_set_ttl: 120 s left; neither given: invalid, not sent"
is "$(val reset)" "expected = 42" "dsec_reset: the creation state again"
is "$(val lease_pause)" "1 0" "dsec_lease_pause: the lease's sandbox is paused"
is "$(val lease_resume)" "1" "dsec_lease_resume: and resumed"
is "$(val lease_sb)" "up" "... and it runs"
is "$(val recover_live)" "invalid" "dsec_recover of a sandbox that is not lost: invalid"
like "$(val recover)" '^[0-9]+ [0-9]+ [0-9]+ 0$' "... once it is gone, it is made again from its log, no step differing ($(val recover): entries, replayed, skipped, differs)"
is "$(val recovered_step)" "replayed" "... and its step sent again is answered from the log"
run dsec-run ls
run helper-req "$DSEC_HOST" list
is "$(printf '%s' "$OUT" | grep -o '"id":' | wc -l)" 0 "nothing left: the forks, the lease's and the sandbox are gone"
