#!/bin/bash
# A destroyed sandbox's cgroup is emptied and kept for the next sandbox
# (removing a memory cgroup costs more the more sandboxes the node holds),
# and the next one sees nothing of the last: no process, its own limits,
# its own CPU time and memory peak, and a first command whose cgroup (the
# last one's kept command group) reports no OOM kill.
. "$(dirname "$0")/lib.sh"

need_container

start_dsecd --set backends=container --set default_backend=container --set container.memory=128M
# The sandboxes' memory groups: v1's memory hierarchy, else cgroup v2's
# where it has the memory controller (a pure v2 host).
mem=$(container_cgroups | grep /memory/)
limit=memory.limit_in_bytes
if [ -z "$mem" ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
	mem=$(container_cgroups | head -1)
	limit=memory.max
fi
[ -n "$mem" ] || skip_all "needs a memory cgroup hierarchy (v1's, or v2 with its controller)"
plan 13
req() { helper-req "$DSEC_HOST" "$@"; }
get() { printf '%s\n' "$OUT" | sed -n "s/.*\"$1\":\\([0-9]*\\).*/\\1/p"; }
# The memory cgroup of the one sandbox with a process in it.
live_group() {
	local d
	for d in "$mem"/sb.*; do
		[ -n "$(cat "$d/cgroup.procs" 2>/dev/null)" ] && echo "$d"
	done
}

a=$(req create backend=container | idof)
dirA=$(live_group)
burn='import time; t = time.process_time(); exec("while time.process_time() - t < 0.6: pass")'
req exec id="$a" 'argv[]=python3' 'argv[]=-c' "argv[]=$burn" >/dev/null
run req exec id="$a" 'argv[]=python3' 'argv[]=-c' 'argv[]=b = b"x" * (300 << 20)'
like "$OUT" '"oom_killed":true' "sandbox A: a command is OOM-killed"
run req usage id="$a"
cpuA=$(get cpu_ns) peakA=$(get memory_peak)
ok "$([ "${cpuA:-0}" -ge 500000000 ]; echo $?)" "A used $cpuA ns of CPU, its memory peak $peakA"
sleep 0.3
req destroy id="$a" >/dev/null
sleep 0.3
ok "$([ -d "$dirA" ] && [ -z "$(cat "$dirA/cgroup.procs")" ]; echo $?)" \
	"A's cgroup is kept, empty, after its destroy"

b=$(req create backend=container limits.memory#=33554432 | idof)
is "$(live_group)" "$dirA" "sandbox B is made in A's cgroup"
is "$(cat "$dirA/$limit")" 33554432 "... with B's memory limit (32 MiB), not A's"
run req exec id="$b" 'argv[]=true'
like "$OUT" '"exit_code":0,.*"oom_killed":false' \
	"B's first command, in A's kept command group, reports no OOM kill"
run req usage id="$b"
cpuB=$(get cpu_ns) peakB=$(get memory_peak)
ok "$([ "${cpuB:-0}" -lt 400000000 ]; echo $?)" "B's CPU time is its own ($cpuB ns)"
ok "$([ -z "$peakB" ] || [ "$peakB" -lt "$peakA" ]; echo $?)" \
	"B's memory peak is its own (${peakB:-not reported} < A's $peakA)"
run req exec id="$b" 'argv[]=python3' 'argv[]=-c' 'argv[]=b = b"x" * (64 << 20)'
like "$OUT" '"oom_killed":true' "B's 32 MiB limit holds: 64 MiB is OOM-killed"

# A mass destroy keeps every group (removing one while the others' file
# systems are mounted costs more the more there are); those beyond the 64
# kept for new sandboxes go after 10 s unused, and all at shutdown.
ids=$b
for i in $(seq 80); do ids="$ids $(req create backend=container | idof)"; done
for id in $ids; do req destroy id="$id" >/dev/null; done
n=$(ls -d "$mem"/sb.* 2>/dev/null | wc -l)
ok "$([ "$n" -gt 64 ]; echo $?)" "81 sandboxes destroyed at once: each group is kept ($n)"
t0=$(date +%s)
for i in $(seq 300); do
	n=$(ls -d "$mem"/sb.* 2>/dev/null | wc -l)
	[ "$n" -le 64 ] && break
	sleep 0.1
done
is "$n" 64 "the groups beyond 64 are removed once unused for a while ($(( $(date +%s) - t0 )) s)"
run req create backend=container
like "$OUT" '"id"' "a create after it takes a kept group"
groups=$(container_cgroups)
stop_dsecd
is "$(for d in $groups; do [ -d "$d" ] && echo "$d"; done)" "" \
	"shutdown removes the backend's groups, the kept ones with them"
