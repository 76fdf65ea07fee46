#!/bin/bash
# A container sandbox whose init died is lost, and says so: every later op
# on it fails with sandbox_lost (an infrastructure failure, not the
# command's: a trainer masks the rollout), info and list show it "failed",
# a command running when it died gets sandbox_lost too, destroy frees it at
# once, and otherwise it is freed after lost_grace.  From inside it cannot
# get there: files written count against the sandbox's memory (the
# writable layer is a tmpfs), so its disk is what the memory holds, and
# the OOM killer takes commands before the init.
. "$(dirname "$0")/lib.sh"

need_container

plan 21

start_dsecd --set backends=container --set lost_grace=8 || bail "dsecd did not start"
export HELPER_REQ_TIMEOUT=60
req() { helper-req "$DSEC_HOST" "$@"; }
inits() { pgrep -P "$DSECD_PID" -x dsec-init | sort; }
# new: a sandbox; $id names it, $init is its pid 1 on the host.
new() {
	local before
	before=$(inits)
	run req create backend=container "$@"
	id=$(get id)
	init=$(comm -13 <(echo "$before") <(inits))
}
# info_until FIELD VALUE: info on $id until FIELD (state, code) is VALUE (20 s).
info_until() {
	local i
	for i in $(seq 200); do
		run req info id="$id"
		[ "$(get "$1")" = "$2" ] && return
		sleep 0.1
	done
}

new
run dsec-run --id "$id" -- echo up
is "$OUT" "up" "a sandbox runs"
req exec id="$id" code='sleep 30' >"$T/running" 2>&1 &
running=$!
sleep 0.5
kill -KILL "$init"
wait "$running"
OUT=$(cat "$T/running")
is "$(get code)" "sandbox_lost" "a command running when its init is killed gets sandbox_lost"
run req exec id="$id" code=true
is "$(get code)" "sandbox_lost" "a later exec gets sandbox_lost"
like "$(get message)" "is lost: its init was killed by SIGKILL" "... which says why"
bad=
for op in "file_read path=/etc/hostname" "file_list path=/" "session_open session=s" \
	"exec_start code=true" "pause" "snapshot tag=x:1" "net_allow allow[]=1.2.3.4"; do
	run req $op id="$id"
	[ "$(get code)" = sandbox_lost ] || bad="$bad ${op%% *}:$(get code)"
done
is "$bad" "" "so do file ops, sessions, streams, pause, snapshot and net_allow"
run req info id="$id"
is "$(get state)" "failed" "info shows it failed"
run req list
like "$OUT" "\"id\":\"$id\",[^}]*\"state\":\"failed\"" "list shows it failed"
like "$(dsecd_log)" "sandbox $id is lost: its init was killed by SIGKILL" "the daemon logs why"
info_until code not_found
is "$(get code)" "not_found" "it is freed after lost_grace"
# Its backend's teardown ends after the table lets it go (on the pool).
left() {
	[ "$(container_cgroups_left)" = "0:ok" ] || echo busy
	ls -d "$T"/state/backends/container/sb.* 2>/dev/null
}
for i in $(seq 100); do [ -z "$(left)" ] && break; sleep 0.1; done
is "$(container_cgroups_left)" "0:ok" \
	"... its cgroups too (no process in them; an emptied one is kept for a new sandbox)"
is "$(ls -d "$T"/state/backends/container/sb.* 2>/dev/null | wc -l)" "0" "... and its directory"

new
kill -KILL "$init"
info_until state failed
is "$(get state)" "failed" "another one killed from outside is failed"
run req destroy id="$id"
is "$RC" 0 "destroy of a lost sandbox succeeds"
run req info id="$id"
is "$(get code)" "not_found" "... and frees it at once"

# Every way a command starts gives it oom_score_adj 1000: the OOM killer
# takes commands before the init (and the warm shell's template).
new
adj=
BIG=$(head -c 70000 /dev/zero | tr '\0' x)
run req exec id="$id" code='cat /proc/self/oom_score_adj'; adj="$adj $(get stdout)"
sleep 0.5	# the warm shell's template starts once the sandbox is quiet
run req exec id="$id" code='cat /proc/self/oom_score_adj'; adj="$adj $(get stdout)"
run req exec id="$id" code='cat /proc/self/oom_score_adj' "env.BIG=$BIG"; adj="$adj $(get stdout)"
run req session_open id="$id" session=s
run req session_exec id="$id" session=s cmd='cat /proc/self/oom_score_adj'; adj="$adj $(get stdout)"
run req exec_start id="$id" code='cat /proc/self/oom_score_adj'
x=$(get exec)
for i in $(seq 50); do
	run req exec_read id="$id" exec="$x" wait%=5
	adj="$adj $(get stdout)"
	[ "$(get done)" = true ] && break
done
is "$(echo $adj)" "1000 1000 1000 1000 1000" \
	"commands (init, warm shell, exec helper, session, stream) have oom_score_adj 1000"
run req destroy id="$id"

# From inside: a sandbox of 128 MiB (the default disk of 256 MiB shrinks
# to what that holds) fills its disk, then runs out of memory.
run req create backend=container 'limits.memory#=134217728' 'limits.disk#=268435456'
is "$(get code)" "invalid" "a disk its memory cannot hold is refused"
new 'limits.memory#=134217728'
run req exec id="$id" code='dd if=/dev/zero of=/root/fill bs=1M count=300 2>/dev/null; df /root | tail -1'
like "$(get stdout)" " 100% /\$" "the sandbox fills its disk"
run req exec id="$id" code='head -c 300000000 /dev/zero | tail -c 200000000 >/dev/null'
is "$(get oom_killed)" "true" "then a command runs out of memory and is OOM-killed"
run req exec id="$id" code='rm /root/fill; echo alive'
is "$(get stdout)" "alive" "the sandbox lives on: the OOM killer took the command, not the init"
run req info id="$id"
is "$(get state)" "running" "... and is still running"
stop_dsecd
is "$?" 0 "dsecd shuts down cleanly"
