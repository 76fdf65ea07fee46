#!/bin/bash
# bench-sdk.sh - `make bench-sdk`: the Python SDK (tools/sdk-bench.py, one
# asyncio connection) beside the C client (dsec-bench --mode exec, a
# thread and a connection per 256th of the sandboxes), same daemon, same
# shape (--sandboxes), same command
# (/bin/sh -c 'echo "$X"', every result checked), container backend, the
# backend's default root.  Nothing here asserts a time.
#   1. one command at a time: exec p50 of each, alternating, SDK_ROUNDS;
#   2. 256 in flight over 256 sandboxes (the same shape for both): rates;
#   3. a trainer: 1,000 sandboxes, 10 commands in each, 256 in flight;
#      the SDK's threads before and at the peak, and its memory.
# Each line also gives the client's own CPU per command (user + system)
# while the commands ran: what the client adds on the machine it runs on.
# No warmup: each sandbox's first command is in the figures of both.
#   SDK_N       commands per one-at-a-time run (default 1000)
#   SDK_ROUNDS  rounds of each pair (default 3)
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
N=${SDK_N:-1000}
ROUNDS=${SDK_ROUNDS:-3}
if [ "$(id -u)" != 0 ]; then
	echo "bench-sdk: skipped: the container backend needs root"
	exit 0
fi
. "$TOP/tools/bench-lib.sh"
bench_dsecd dsec-bench-sdk --set backends=container --set default_backend=container \
	--set max_sandboxes=2000 || { echo "bench-sdk: the daemon did not start"; exit 1; }

# run NAME ARGS...: one client run; prints NAME, its rate, p50, p99 and
# its own CPU per command while the commands ran; sets RATE.
run() {
	local name=$1 out cpu p50 p99
	shift
	out=$("$@" 2>&1) || { echo "$name failed:"; echo "$out"; exit 1; }
	if [[ $1 == */dsec-bench ]]; then
		read -r RATE p50 p99 cpu < <(awk '$1 == "exec" {print $9, $10, $12, $14}' <<<"$out")
	else
		grep -q 'wrong results 0$' <<<"$out" || { echo "$name: wrong results:"; echo "$out"; exit 1; }
		read -r p50 p99 RATE < <(awk '/^exec p50/ {print $3, $6, $8}' <<<"$out")
		cpu=$(awk '/^client CPU/ {print $3}' <<<"$out")
	fi
	printf '  %-4s %8.1f execs/s  p50 %8.2f ms  p99 %8.2f ms  client CPU %4d us/command\n' \
		"$name" "$RATE" "$p50" "$p99" "$cpu"
	grep -E '^(threads|max RSS)' <<<"$out" | sed 's/^/       /'
}

# pair S K C: SANDBOXES S, K commands in each, C in flight; the C client
# and the SDK, ROUNDS times each, alternating; then the SDK's rate over C's.
pair() {
	local s=$1 k=$2 c=$3 sum=0 rc
	for _ in $(seq "$ROUNDS"); do
		run C "$TOP/tools/dsec-bench" --mode exec --backend container -c "$c" \
			--sandboxes "$s" -n "$((s * k))"
		rc=$RATE
		run SDK /usr/bin/python3 "$TOP/tools/sdk-bench.py" --backend container \
			-s "$s" -k "$k" -c "$c"
		sum=$(awk -v s="$sum" -v a="$RATE" -v b="$rc" 'BEGIN {print s + a / b}')
	done
	awk -v s="$sum" -v n="$ROUNDS" 'BEGIN {printf "  SDK rate / C rate: %.3f (mean of %d)\n", s / n, n}'
}

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), kernel $(uname -r)"
echo
echo "1. one command at a time: 1 sandbox, $N commands"
pair 1 "$N" 1
echo
echo "2. 256 in flight: 256 sandboxes, 40 commands in each"
pair 256 40 256
echo
echo "3. a trainer: 1,000 sandboxes, 10 commands in each, 256 in flight"
pair 1000 10 256
