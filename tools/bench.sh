#!/bin/bash
# bench.sh - `make bench`: the standard measurements of a fresh dsecd.
#
# Starts a private dsecd (state in a temporary folder, fncall backend),
# runs dsec-bench for the figures the foundation issue names and prints
# each command with its table.  Nothing here asserts a time: these
# machines are shared and noisy; read the figures, compare them side by
# side with a baseline run on the same machine.
#
#   BENCH_N      requests per latency run        (default 1000)
#   BENCH_LOAD   requests per client in the 64-client run (default 200)
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
N=${BENCH_N:-1000}
LOAD=${BENCH_LOAD:-200}
. "$TOP/tools/bench-lib.sh"
bench_dsecd dsec-bench
bench() {
	printf '\n$ dsec-bench %s\n' "$*"
	"$TOP/tools/dsec-bench" "$@"
}
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), kernel $(uname -r)"
bench -c 1 -n "$N" --warmup 50 --backend fncall --runtime sh
bench -c 4 -n "$N" --warmup 50 --backend fncall --runtime sh
bench -c 1 -n "$((N / 4))" --warmup 20 --backend fncall --runtime python3
bench -c 4 -n "$N" --mode exec --backend fncall --runtime sh
bench -c 4 -n "$N" --mode create --backend fncall
bench -c 64 -n "$((64 * LOAD))" --backend fncall --runtime sh --pid "$PID"
# The baselines, in turn on the same machine: the daemon's own floor, and
# the same commands spawned here without dsec (no isolation, no daemon).
bench -c 1 -n "$N" --mode ping
bench -c 1 -n "$N" --warmup 50 --mode local
bench -c 4 -n "$N" --warmup 50 --mode local
bench -c 1 -n "$((N / 4))" --warmup 5 --mode local --runtime python3
