#!/bin/bash
# bench-container.sh - `make bench-container`: the container backend's
# figures, beside a bubblewrap baseline when bwrap is installed.
#
# Starts private dsecds (state in a temporary folder) and prints each
# dsec-bench command with its table: create -> first exec cold and from a
# warm pool, creations/s, exec latency (and without the warm shell, and
# the command spawned without dsec), pause and resume, then holds
# BENCH_IDLE idle sandboxes and reports dsecd's memory and the machine's
# per sandbox.  Asserts nothing: read the figures on a quiet machine.
#
#   BENCH_N      requests per latency run          (default 200)
#   BENCH_IDLE   idle sandboxes held at once        (default 1000)
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
N=${BENCH_N:-200}
IDLE=${BENCH_IDLE:-1000}
S=$(mktemp -d "${TMPDIR:-/tmp}/dsec-bench.XXXXXX")
export DSEC_HOST="ipc://$S/dsecd.sock"
PID=
stop() { [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID"; PID=; }
trap 'stop; rm -rf "$S"' EXIT
start() {	# start [--set K=V]...: a fresh dsecd with the container backend
	"$TOP/dsecd/dsecd" --foreground --state-dir "$S/state" --listen "$DSEC_HOST" \
		--backend-dir "$TOP/backends" --helper-dir "$TOP/build/libexec" --log-level warn \
		--set backends=container --set max_sandboxes=$((IDLE + 64)) \
		--set container.max_sandboxes=$((IDLE + 64)) "$@" 2>>"$S/log" &
	PID=$!
	for _ in $(seq 100); do
		"$TOP/tools/dsec-run" --client-timeout 0.5 --backend container -- true \
			>/dev/null 2>&1 && return 0
		sleep 0.2
	done
	echo "dsecd did not start; its log:" >&2
	cat "$S/log" >&2
	exit 1
}
bench() {
	printf '\n$ dsec-bench %s\n' "$*"
	"$TOP/tools/dsec-bench" "$@"
}
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), kernel $(uname -r)"

start
bench -c 1 -n "$N" --warmup 10 --backend container --mode first --cmd 'echo $X'
bench -c 4 -n "$N" --warmup 10 --backend container --mode create
bench -c 1 -n "$N" --warmup 10 --backend container --mode exec --cmd 'echo $X'
bench -c 1 -n "$N" --warmup 10 --backend container --mode call --cmd 'echo $X'
bench -c 1 -n "$N" --warmup 10 --backend container --mode pause
stop

# The same exec without the warm shell (each command executes its shell),
# and the command spawned here without dsec: the baselines of the exec row.
start --set container.warm_shell=false
bench -c 1 -n "$N" --warmup 10 --backend container --mode exec --cmd 'echo $X'
stop
bench -c 1 -n "$N" --warmup 10 --mode local --cmd 'echo $X'

# A warm pool as large as the run: each create is a hand-over.
POOL=$((N < 256 ? N : 256))
start --set "pool=container=$POOL"
for _ in $(seq 600); do
	"$TOP/t/helper-req" "$DSEC_HOST" info 2>/dev/null | grep -q "\"ready\":$POOL," && break
	sleep 0.2
done
bench -c 1 -n "$POOL" --backend container --mode first --cmd 'echo $X'
stop

# Idle sandboxes held at once: the daemon's memory and the machine's.
start
rss0=$(awk '/VmRSS/ {print $2}' /proc/$PID/status)
avail0=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
t0=$(date +%s.%N)
made=0
for _ in $(seq "$IDLE"); do
	"$TOP/t/helper-req" -q "$DSEC_HOST" create backend=container >/dev/null 2>&1 &&
		made=$((made + 1))
done
t1=$(date +%s.%N)
sleep 2
rss1=$(awk '/VmRSS/ {print $2}' /proc/$PID/status)
avail1=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
awk -v n="$made" -v t0="$t0" -v t1="$t1" -v r0="$rss0" -v r1="$rss1" -v a0="$avail0" \
    -v a1="$avail1" 'BEGIN {
	printf "\n%d idle container sandboxes (made one by one in %.1f s):\n", n, t1 - t0
	printf "  dsecd VmRSS %d kB -> %d kB: %.1f KiB per sandbox\n", r0, r1, (r1 - r0) / n
	printf "  machine MemAvailable %d kB -> %d kB: %.0f KiB per sandbox\n", a0, a1, (a0 - a1) / n
}'
stop

if command -v bwrap >/dev/null; then
	printf '\nbaseline on this machine: bwrap --unshare-all, a read-only /usr, /bin/true, sequential:\n'
	/usr/bin/python3 - "$N" <<'PY'
import subprocess, sys, time
n = int(sys.argv[1])
cmd = ["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
       "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
       "--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev",
       "--tmpfs", "/tmp", "/bin/true"]
lat = []
for i in range(n):
    t = time.perf_counter(); subprocess.run(cmd, check=True); lat.append(time.perf_counter() - t)
lat.sort()
print("bwrap x%d: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms" %
      (n, lat[n // 2] * 1e3, lat[n * 9 // 10] * 1e3, lat[min(n - 1, n * 99 // 100)] * 1e3))
PY
else
	printf '\n(bwrap is not installed: no bubblewrap baseline)\n'
fi
