#!/bin/bash
# container backend: pause and resume through dsecd.  A paused sandbox
# uses no CPU (every process, an exec in flight included), keeps its state,
# resumes on its own for the next exec or file operation, does not expire
# on idle TTL, and is destroyed and shut down cleanly.
. "$(dirname "$0")/lib.sh"

need_container
[ -d /sys/fs/cgroup/freezer ] || [ -e /sys/fs/cgroup/cgroup.controllers ] || skip_all "needs a cgroup freezer"
[ -r /proc/self/schedstat ] || skip_all "needs /proc/PID/schedstat (CONFIG_SCHED_INFO)"

plan 40

if ! start_dsecd --set backends=fncall,container --set container.memory=128M --set container.pids=64; then
	echo "Bail out! dsecd did not start"
	exit 1
fi
cgroot() { container_cgroups; }
req() { helper-req "$DSEC_HOST" "$@"; }
new_sb() {
	local out
	out=$(req create backend=container "$@") || { diag "create: $out"; return 1; }
	printf '%s\n' "$out" | sed 's/.*"id":"\([^"]*\)".*/\1/'
}
state() { req info id="$1" | sed -n 's/.*"state":"\([^"]*\)".*/\1/p'; }
# Every pid in the sandbox's groups (one hierarchy is enough).
sb_pids() {
	local d
	for d in $(cgroot); do
		[ -n "$(find "$d" -mindepth 1 -maxdepth 1 -type d -name 'sb.*' 2>/dev/null)" ] || continue
		find "$d" -mindepth 1 -name cgroup.procs -exec cat {} + 2>/dev/null
		return
	done
}
# CPU time in ns the given pids have used (/proc/PID/schedstat).
cpu_ns() {
	local p s=0 v
	for p in "$@"; do
		v=$(cut -d' ' -f1 "/proc/$p/schedstat" 2>/dev/null) && s=$((s + v))
	done
	echo $s
}

# A busy loop in an exec in flight, with a 4 s timeout.  "Runs" is more
# than 5 ms of CPU in 0.5 s: a frozen one gets none, and a loaded machine
# may give a busy one far less than its share.
id=$(new_sb)
ok $? "create a container sandbox"
dsec-run --id "$id" --timeout 4 -c 'while :; do :; done' >"$T/busy.out" 2>&1 &
busy=$!
t0=$(date +%s%N)
sleep 1
pids=$(sb_pids)
a=$(cpu_ns $pids); sleep 0.5; b=$(cpu_ns $pids)
ok $([ -n "$pids" ] && [ $((b - a)) -gt 5000000 ]; echo $?) \
	"before the pause the busy loop runs ($(( (b - a) / 1000000 )) ms of CPU in 0.5 s)"

run req pause id="$id"
like "$OUT" '"ok":true.*"state":"paused"' "pause replies ok, state paused"
is "$(state "$id")" "paused" "info shows state paused"
run req list
like "$OUT" "\"id\":\"$id\"[^}]*\"state\":\"paused\"" "list shows state paused"
a=$(cpu_ns $pids); sleep 1; b=$(cpu_ns $pids)
is "$((b - a))" "0" "paused: no process of the sandbox uses any CPU (the exec's busy loop included)"
alive() { local p; for p in "$@"; do kill -0 "$p" 2>/dev/null || return 1; done; }
ok $(alive $pids; echo $?) "the frozen processes are still there"

# Paused past the exec's 4 s timeout: paused time does not count.
while [ $(( ($(date +%s%N) - t0) / 1000000 )) -lt 5500 ]; do sleep 0.2; done
ok $(kill -0 $busy 2>/dev/null; echo $?) "an exec in flight does not time out while paused (5.5 s wall, timeout 4 s)"

run req pause id="$id"
like "$OUT" '"ok":true.*"state":"paused"' "pausing a paused sandbox is a success"
run req resume id="$id"
like "$OUT" '"ok":true.*"state":"running"' "resume replies ok, state running"
is "$(state "$id")" "running" "info shows state running"
# Per pid, over the pids alive at both reads: the exec may reach its
# timeout during the window on a slow machine.
cpu_delta() {
	local p v1 v2 s=0 dt=$1; shift
	declare -A first
	for p in "$@"; do first[$p]=$(cut -d' ' -f1 "/proc/$p/schedstat" 2>/dev/null); done
	sleep "$dt"
	for p in "$@"; do
		v2=$(cut -d' ' -f1 "/proc/$p/schedstat" 2>/dev/null) || continue
		v1=${first[$p]}
		[ -n "$v1" ] && [ -n "$v2" ] && s=$((s + v2 - v1))
	done
	echo $s
}
d=$(cpu_delta 0.5 $pids)
ok $([ "$d" -gt 5000000 ]; echo $?) "resumed: the busy loop runs again ($(( d / 1000000 )) ms of CPU in 0.5 s)"
run req resume id="$id"
like "$OUT" '"ok":true.*"state":"running"' "resuming a running sandbox is a success"
wait $busy
is "$?" 124 "the exec then times out after 4 s of unpaused time"

# Exec and files on a paused sandbox resume it transparently.
run dsec-run --id "$id" -c 'echo state > /root/kept'
req pause id="$id" >/dev/null
run dsec-run --id "$id" -c 'cat /root/kept; echo out; echo err >&2; exit 3'
is "$RC:$(echo $OUT)" "3:state out err" "exec on a paused sandbox: right output and status, files kept"
is "$(state "$id")" "running" "the sandbox is running after that exec"
req pause id="$id" >/dev/null
printf 'via-api' >"$T/data"
run req file_write id="$id" path=/root/w data@="$T/data"
like "$OUT" '"ok":true' "file_write on a paused sandbox"
is "$(state "$id")" "running" "file_write resumed it"
req pause id="$id" >/dev/null
run req file_read id="$id" path=/root/w
like "$OUT" '"data":"via-api"' "file_read on a paused sandbox"
is "$(state "$id")" "running" "file_read resumed it"

# Errors.
run req pause id="vm-nope:0000000000000001"
like "$OUT" '"code":"not_found"' "pause of an unknown id: not_found"
run req resume id="$(echo "$id" | sed 's/:.*//'):0000000000000001"
like "$OUT" '"code":"not_found"' "resume of an unknown id: not_found"
run req pause
like "$OUT" '"code":"bad_request"' "pause without id: bad_request"
fid=$(req create backend=fncall | sed 's/.*"id":"\([^"]*\)".*/\1/')
run req pause id="$fid"
like "$OUT" '"code":"unsupported".*fncall' "fncall: pause is unsupported, with the backend named"
req destroy id="$fid" >/dev/null

# Neither TTL ends a paused sandbox: the idle TTL waits, and what is
# left of the wall TTL stops until the resume, then runs out.
idle=$(new_sb idle_ttl%=2)
req pause id="$idle" >/dev/null
wall=$(new_sb ttl%=2)
req pause id="$wall" >/dev/null
ctl=$(new_sb idle_ttl%=2)
sleep 3.5
is "$(state "$idle")" "paused" "a paused sandbox outlives its idle TTL"
run req info id="$ctl"
like "$OUT" '"code":"not_found"' "(an unpaused one with the same idle TTL expired)"
is "$(state "$wall")" "paused" "a paused sandbox outlives its wall TTL: its time stops"
req resume id="$wall" >/dev/null
sleep 2.5
run req info id="$wall"
like "$OUT" '"code":"not_found"' "... and runs out once it is resumed"
req destroy id="$idle" >/dev/null

# dsec-bench --mode pause: a row for pause and one for resume, no errors.
run dsec-bench --mode pause --backend container -c 2 -n 20
is "$RC" 0 "dsec-bench --mode pause: exits 0"
like "$OUT" "$(printf 'pause +container +default +2 +20 +0 +0 .*')" "dsec-bench: a pause row, 20 requests, no errors"
like "$OUT" "$(printf 'resume +container +default +2 +20 +0 +0 .*')" "dsec-bench: a resume row"

# Destroy of a paused sandbox leaves nothing.
init=$(sb_pids | head -1)
req pause id="$id" >/dev/null
run req destroy id="$id"
like "$OUT" '"ok":true' "destroy of a paused sandbox"
sleep 0.3
ok $(! kill -0 "${init:-999999999}" 2>/dev/null; echo $?) "its processes are gone"
is "$(container_cgroups_left)" "0:ok" \
	"destroying a paused sandbox leaves no process in a cgroup (emptied ones kept for the next)"

# Shutdown with paused sandboxes (one with an exec in flight) cleans up.
s1=$(new_sb)
s2=$(new_sb)
dsec-run --id "$s2" -c 'sleep 600' >/dev/null 2>&1 &
sleep 0.5
req pause id="$s1" >/dev/null
req pause id="$s2" >/dev/null
pids=$(sb_pids)
stop_dsecd
is "$?" "0" "SIGTERM with paused sandboxes: dsecd exits cleanly"
ok $([ -z "$(cgroot)" ] && [ -z "$(ls -A "$T/state/backends/container" 2>/dev/null)" ] &&
	! grep -q "$T/state" /proc/self/mountinfo; echo $?) \
	"shutdown leaves no cgroup, state directory or mount"
# A zombie is gone too: it only waits for the host's init to reap it.
none_alive() {
	local p
	for p in "$@"; do
		kill -0 "$p" 2>/dev/null || continue
		grep -q '^State:.*Z' "/proc/$p/status" 2>/dev/null && continue
		diag "left: $(head -3 /proc/$p/status 2>/dev/null | tr "\n" " ")"
		return 1
	done
}
for i in $(seq 20); do none_alive $pids 2>/dev/null && break; sleep 0.1; done
ok $(none_alive $pids; echo $?) "no process of the paused sandboxes is left"

# A daemon killed with SIGKILL leaves a paused sandbox frozen; the next one
# to start kills it and removes its cgroups.
start_dsecd --set backends=container || bail "dsecd did not restart"
k=$(new_sb)
dsec-run --id "$k" -c 'true' >/dev/null 2>&1
req pause id="$k" >/dev/null
pids=$(sb_pids)
is "$(state "$k"):$([ -n "$pids" ] && echo procs)" "paused:procs" "a paused sandbox, then dsecd is killed with SIGKILL"
old=$DSECD_PID
kill -KILL "$DSECD_PID"
wait "$DSECD_PID" 2>/dev/null
DSECD_PID=
start_dsecd --set backends=container || bail "dsecd did not restart"
for i in $(seq 20); do none_alive $pids 2>/dev/null && break; sleep 0.1; done
ok $(none_alive $pids; echo $?) "the next dsecd kills the frozen processes it left"
ok $([ -z "$(DSECD_PID=$old container_cgroups)" ]; echo $?) "and removes the cgroups it left"
