#!/bin/bash
# bench-rl.sh - `make bench-rl`: the rollout figures of issue 13 (rlcoord),
# each beside its baseline from the same run.  Nothing here asserts a
# time: read the figures side by side.
#   1. durable logging: dsec-bench --mode exec with and without
#      --trajectory, alternating, RL_ROUNDS rounds, at c=1 and c=16;
#   2. fast-forward: dsec-bench --mode replay (100 logged steps sent again)
#      beside --mode ping, the round trip's floor;
#   3. fork 16 of a prepared container sandbox and reset to its creation
#      state, through the Python SDK (container backend, root); with criu
#      (make criu, or DSEC_CRIU), fork 16 with its shell session's
#      processes too (the daemon's log splits each into checkpoint,
#      snapshot, and creates with restores).
#   RL_N       requests per latency run (default 1000)
#   RL_ROUNDS  rounds of the with/without pair (default 3)
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
N=${RL_N:-1000}
ROUNDS=${RL_ROUNDS:-3}
backends=fncall
[ "$(id -u)" = 0 ] && backends=fncall,container
CRIU=${DSEC_CRIU:-$TOP/build/criu/sbin/criu}
criu_set=()
[ -x "$CRIU" ] && criu_set=(--set "container.criu=$CRIU")
. "$TOP/tools/bench-lib.sh"
bench_dsecd dsec-bench-rl --set "backends=$backends" "${criu_set[@]}"
bench() {
	printf '$ dsec-bench %s\n' "$*"
	"$TOP/tools/dsec-bench" "$@" | tail -1
}
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), kernel $(uname -r)"
echo "trajectory dir: $S/state (on $(findmnt -no FSTYPE -T "$S"))"
echo "columns: mode backend runtime concurrency requests errors mismatches seconds rate/s" \
	"p50_ms p90_ms p99_ms max_ms"
echo
echo "1. durable logging: exec without and with a trajectory log"
for c in 1 16; do
	for r in $(seq "$ROUNDS"); do
		bench --mode exec --backend fncall -c "$c" -n "$((N * (c > 1 ? 2 : 1)))" --warmup 50
		bench --mode exec --backend fncall -c "$c" -n "$((N * (c > 1 ? 2 : 1)))" --warmup 50 \
			--trajectory
	done
done
echo
echo "2. fast-forward: a logged step sent again, beside a ping"
bench --mode replay --backend fncall -c 1 -n "$((2 * N))"
bench --mode ping -c 1 -n "$((2 * N))"
echo
echo "3. fork 16 and reset (container)"
if [ "$backends" = fncall ]; then
	echo "skipped: the container backend needs root"
	exit 0
fi
R="$S/root"
mkdir -p "$R/bin" "$R/data" "$R/etc" "$R/tmp" "$R/work"
for b in sh cat seq wc mkdir ls echo sleep; do
	cp -L "$(type -P "$b")" "$R/bin/$b"
	for l in $(ldd "$(type -P "$b")" | grep -o '/[^ ]*'); do
		mkdir -p "$R$(dirname "$l")"
		cp -Ln "$l" "$R$l" 2>/dev/null
	done
done
DSEC_FS3_STORE="$S/state/fs3" "$TOP/tools/dsecctl" image import --tag bench-rl:1 "$R" >/dev/null ||
	{ echo "cannot import the image"; exit 1; }
"$TOP/t/helper-py" - "$DSEC_HOST" "$([ -x "$CRIU" ] && echo criu || echo none)" <<'PY'
import asyncio, statistics, sys, time, dsec
async def main():
    async with dsec.AsyncClient(sys.argv[1]) as c:
        sb = await c.create(backend="container", image="bench-rl:1")
        await sb.exec(["sh", "-c", "seq 1 1000 > /work/prepared"])
        forks = []
        for _ in range(3):
            t0 = time.perf_counter()
            kids = await sb.fork(16)
            forks.append((time.perf_counter() - t0) * 1e3)
            got = (await kids[-1].exec(["sh", "-c", "wc -l < /work/prepared"])).stdout.strip()
            for k in kids:
                await k.destroy()
        print("fork 16: %s ms, median %.1f (the last fork has %s lines of the prepared file)"
              % (" ".join("%.1f" % f for f in forks), statistics.median(forks), got))
        if sys.argv[2] == "criu":
            # A shell session with a variable, a directory and an idle
            # background process, carried into each fork.
            s = await sb.session("s1")
            await s.run("X=42; cd /tmp; sleep 100000 >/dev/null 2>&1 & echo started")
            forks = []
            for _ in range(5):
                t0 = time.perf_counter()
                kids = await sb.fork(16, processes=True)
                forks.append((time.perf_counter() - t0) * 1e3)
                for k in kids:
                    await k.destroy()
            await s.close()
            print("fork 16 with processes: %s ms, median %.1f"
                  % (" ".join("%.1f" % f for f in forks), statistics.median(forks)))
        else:
            print("fork 16 with processes: skipped (no criu: make criu)")
        resets = []
        for _ in range(7):
            await sb.exec(["sh", "-c", "echo x > /work/dirty"])
            t0 = time.perf_counter()
            await sb.reset()
            resets.append((time.perf_counter() - t0) * 1e3)
        left = (await sb.exec(["sh", "-c", "ls /work | wc -l"])).stdout.strip()
        print("reset: %s ms, median %.1f (files left in /work: %s)"
              % (" ".join("%.1f" % f for f in resets), statistics.median(resets), left))
        await sb.destroy()
asyncio.run(main())
PY
