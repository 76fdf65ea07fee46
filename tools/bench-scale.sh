#!/bin/bash
# bench-scale.sh - `make bench-scale`: what a node full of idle container
# sandboxes costs the next create.  One private dsecd; at each population
# (0, then N/10, N/2 and N idle sandboxes: 0, 1,000, 5,000 and 10,000 by
# default) it prints the dsec-bench commands and tables of create -> first
# exec (c=1), creations/s (c=4) and exec in a running sandbox (c=1), then
# dsecd's descriptors and RSS and the machine's memory per idle sandbox, the
# kernel's CPU for one network namespace made and dropped (its teardown walks
# every live one, and each sandbox has one), what the host's pid 1 and
# DAMON threads take of the CPU while the node is idle (on some hosts they
# grow with the sandboxes),
# and at the end one table of every stage with its ratios against the
# empty node, the times of a list, of destroying every sandbox through the
# API and of a SIGTERM of the daemon holding them (filled again).  The idle sandboxes are made with dsec-bench --mode first
# --keep (c=4): each has run one command, as a rollout's sandbox between
# two steps has.  Asserts nothing: read the figures on a quiet machine.
#
#   BENCH_SCALE_N       idle sandboxes at the last stage      (default 10000)
#   BENCH_SCALE_STAGES  the populations, space-separated      (default "0 N/10 N/2 N")
#   BENCH_N             requests per latency run              (default 200)
#   BENCH_SCALE_MEMORY  container.memory of each sandbox      (default 64M)
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
. "$TOP/tools/bench-lib.sh"
N=${BENCH_SCALE_N:-10000}
STAGES=${BENCH_SCALE_STAGES:-"0 $((N / 10)) $((N / 2)) $N"}
REQ=${BENCH_N:-200}
MEM=${BENCH_SCALE_MEMORY:-64M}
last=${STAGES##* }

bench_dsecd dsec-bench-scale --set backends=container --set default_backend=container \
	--set max_sandboxes=$((last + 64)) --set container.max_sandboxes=$((last + 64)) \
	--set container.memory="$MEM" --set idle_ttl=0 --set ttl=0 ||
	{ echo "dsecd did not start; its log:" >&2; cat "$S/log" >&2; exit 1; }
mem=$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)
echo "machine: $(nproc) cores, $mem," \
	"load $(cut -d' ' -f1-3 /proc/loadavg), kernel $(uname -r)"
echo "dsecd: pid $PID, descriptor limit $(awk '/^Max open files/ { print $4 }' /proc/$PID/limits)"

room=$("$TOP/t/helper-req" "$DSEC_HOST" info 2>/dev/null | /usr/bin/python3 -c '
import json, sys
l = json.load(sys.stdin)["result"].get("limits", {})
print(l.get("room", 0), l.get("room_by", "?"))' 2>/dev/null)
if [ -n "$room" ] && [ "${room% *}" -lt "$last" ]; then
	echo "note: the node's limits leave room for ${room% *} more sandboxes (by ${room#* }," \
		"see info's limits in dsec-protocol(7)); $last are asked for" >&2
fi

fds() { ls "/proc/$PID/fd" | wc -l; }
# The kernel's cost of one network namespace made and dropped, teardown
# included (a kworker's, after the process is gone), in ms of the machine's
# CPU: each sandbox has one, and their teardown walks every live one.
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
netns_ms() {
	local b0 b1 hz
	hz=$(getconf CLK_TCK)
	b0=$(busy)
	for _ in $(seq 200); do unshare -n true; done
	sleep 2
	b1=$(busy)
	awk -v a="$b0" -v b="$b1" -v hz="$hz" 'BEGIN { printf "%.2f", (b - a) * 1000 / hz / 200 }'
}
since() { awk -v a="$1" -v b="$2" 'BEGIN { print b - a }'; }	# seconds from $1 to $2
# CPU ticks so far of pid 1 and of the kernel's DAMON threads (kdamond.N).
others() {
	{ cat /proc/1/stat; for p in $(pgrep -x 'kdamond\..*'); do cat "/proc/$p/stat"; done; } \
		2>/dev/null | awk '{ t += $14 + $15 } END { print t + 0 }'
}
rss() { awk '/VmRSS/ {print $2}' "/proc/$PID/status"; }
avail() { awk '/MemAvailable/ {print $2}' /proc/meminfo; }
# one FIELD of dsec-bench --json's output
field() { /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
run_bench() {	# run_bench ARGS...: the table, and its JSON in $S/last.json
	printf '\n$ dsec-bench %s\n' "$*" >&2
	"$TOP/tools/dsec-bench" "$@" --json > "$S/last.json"
	/usr/bin/python3 - "$S/last.json" >&2 <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("  %d requests, %d errors: %.1f/s, p50 %.2f ms, p99 %.2f ms" %
      (r["requests"], r["errors"], r["rate"], r["p50_ms"], r["p99_ms"]))
PY
}

fds0=$(fds) rss0=$(rss) avail0=$(avail)
have=0
: > "$S/rows"
for stage in $STAGES; do
	if [ "$stage" -gt "$have" ]; then
		t0=$(date +%s.%N)
		printf '\n--- filling to %d idle sandboxes\n' "$stage" >&2
		"$TOP/tools/dsec-bench" -c 4 -n $((stage - have)) --backend container \
			--mode first --keep --json > "$S/fill.json" ||
			echo "(some creates failed)" >&2
		have=$stage
		t1=$(date +%s.%N)
		printf '  made in %.1f s\n' "$(since "$t0" "$t1")" >&2
		sleep 2
	fi
	printf '\n=== %d idle sandboxes\n' "$stage" >&2
	# What the machine's other tenants of the CPU take while nothing runs:
	# its pid 1 and the kernel's DAMON threads, which on some hosts work in
	# proportion to the sandboxes' processes, mappings or namespaces.
	o0=$(others) w0=$(date +%s.%N)
	sleep 5
	o1=$(others) w1=$(date +%s.%N)
	idle_cpu=$(awk -v a="$o0" -v b="$o1" -v t="$(since "$w0" "$w1")" -v hz="$(getconf CLK_TCK)" \
		'BEGIN { printf "%.2f", (b - a) / hz / t }')
	printf '  others while idle: pid 1 and kdamond take %s of a CPU\n' "$idle_cpu" >&2
	run_bench -c 1 -n "$REQ" --warmup 10 --backend container --mode first --cmd 'echo $X'
	first50=$(field p50_ms < "$S/last.json") first99=$(field p99_ms < "$S/last.json")
	run_bench -c 4 -n "$REQ" --warmup 10 --backend container --mode create
	rate=$(field rate < "$S/last.json")
	run_bench -c 1 -n "$REQ" --warmup 10 --backend container --mode exec --cmd 'echo $X'
	exec50=$(field p50_ms < "$S/last.json")
	f=$(fds) r=$(rss) a=$(avail) ns=$(netns_ms)
	echo "$stage $first50 $first99 $rate $exec50 $f $r $a $ns $idle_cpu" >> "$S/rows"
	printf '  dsecd: %d descriptors, VmRSS %d kB; machine MemAvailable %d kB\n' \
		"$f" "$r" "$a" >&2
	printf '  kernel: a network namespace made and dropped (unshare -n true): %s ms of CPU\n' \
		"$ns" >&2
done

printf '\nSummary (ratios against the empty node; per sandbox = change since 0 / population):\n'
awk -v f0="$fds0" -v r0="$rss0" -v a0="$avail0" '
NR == 1 { b1 = $2; b2 = $3; b3 = $4; b4 = $5; b9 = $9 }
{
	n = $1
	printf "%6d idle: first p50 %6.2f ms (%.2fx)  p99 %7.2f ms (%.2fx)",
		n, $2, $2 / b1, $3, $3 / b2
	printf "  creates/s %7.1f (%.2fx)  exec p50 %5.2f ms (%.2fx)", $4, $4 / b3, $5, $5 / b4
	printf "  netns %5.2f ms CPU (%.2fx)  others %.2f CPU\n", $9, $9 / (b9 > 0 ? b9 : 1), $10
	if (n > 0)
		printf "%14s per sandbox: %.2f dsecd descriptors, %.1f KiB dsecd RSS,", "",
			($6 - f0) / n, ($7 - r0) / n
	if (n > 0)
		printf " %.0f KiB machine memory\n", (a0 - $8) / n
}' "$S/rows"

t0=$(date +%s.%N)
"$TOP/t/helper-req" "$DSEC_HOST" list > "$S/list"
ids=$(grep -o '"id":"[^"]*"' "$S/list" | cut -d'"' -f4)
t1=$(date +%s.%N)
count=$(echo "$ids" | grep -c .)
printf '\nlist of %d sandboxes: %.2f s\n' "$count" "$(since "$t0" "$t1")"
# A trainer's mass destroy: every sandbox through the API, in batches of
# 1,000 (the SDK's destroy_many), until the last is torn down (its directory
# gone); then the node is filled again for the SIGTERM.
left() { ls -d "$S"/state/backends/container/sb.* 2>/dev/null | wc -l; }
t0=$(date +%s.%N)
PYTHONPATH="$TOP/lib/python" /usr/bin/python3 - "$S/list" <<'PY'
import json, sys
import dsec
ids = [s["id"] for s in json.load(open(sys.argv[1]))["result"]["sandboxes"]]
with dsec.Client() as c:
    for i in range(0, len(ids), 1000):
        c.destroy_many(ids[i:i + 1000])
PY
t1=$(date +%s.%N)
while [ "$(left)" -gt 0 ]; do sleep 0.1; done
t2=$(date +%s.%N)
printf 'destroy of %d sandboxes through the API: replies in %.1f s, all torn down in %.1f s\n' \
	"$count" "$(since "$t0" "$t1")" "$(since "$t0" "$t2")"
t0=$(date +%s.%N)
"$TOP/tools/dsec-bench" -c 4 -n "$have" --backend container --mode first --keep \
	--json > "$S/fill.json" || echo "(some creates failed)" >&2
t1=$(date +%s.%N)
printf 'filled again with %d in %.1f s\n' "$have" "$(since "$t0" "$t1")"
t0=$(date +%s.%N)
kill -TERM "$PID"
wait "$PID"
t1=$(date +%s.%N)
printf 'SIGTERM of dsecd holding %d sandboxes: stopped in %.1f s\n' "$have" \
	"$(since "$t0" "$t1")"
trap 'rm -rf "$S"' EXIT
