#!/bin/bash
# bench-image.sh - `make bench-image`: what an fs3 image costs a container
# sandbox's create when all its chunks are local, beside a plain directory
# layer of the same content (container.rootfs).
#
# One private dsecd (state in a temporary folder, layers fetched whole)
# with container.rootfs = a small root, and that root imported as image
# bench:1.  Each round runs dsec-bench -c 1 for --mode create (create ->
# reply) and --mode first (create -> first exec reply) three ways:
#   dir      no image: the overlay's lower layer is the directory
#   image    --image bench:1, no other sandbox holds it: each create
#            mounts the layer's local EROFS file, each destroy unmounts it
#   shared   --image bench:1 while one kept sandbox holds it: the layer
#            stays mounted and each create shares the mount
# and prints p50 and p99 with the difference to dir.  Asserts nothing:
# read the figures on a quiet machine (the load is printed each round).
# Needs root (the container backend).
#
#   BENCH_N       requests per run             (default 200)
#   BENCH_ROUNDS  rounds of the six runs       (default 3)
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
N=${BENCH_N:-200}
ROUNDS=${BENCH_ROUNDS:-3}
S=$(mktemp -d "${TMPDIR:-/tmp}/dsec-bench-image.XXXXXX")
export DSEC_HOST="ipc://$S/dsecd.sock"
export DSEC_FS3_STORE="$S/state/fs3"
PID=
stop() { [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID"; PID=; }
trap 'stop; rm -rf "$S"' EXIT

# The root: a shell and a few tools with the libraries they load.
ROOT="$S/root"
mkdir -p "$ROOT/bin" "$ROOT/etc" "$ROOT/tmp" "$ROOT/data"
for bin in sh cat ls env id true; do
	cp -L "$(type -P "$bin")" "$ROOT/bin/$bin" || exit 1
	for lib in $(ldd "$(type -P "$bin")" | grep -o '/[^ ]*'); do
		mkdir -p "$ROOT$(dirname "$lib")" && cp -Ln "$lib" "$ROOT$lib" 2>/dev/null
	done
done
mkdir -p "$S/state"
"$TOP/tools/dsecctl" image import --tag bench:1 "$ROOT" >/dev/null || exit 1

"$TOP/dsecd/dsecd" --foreground --state-dir "$S/state" --listen "$DSEC_HOST" \
	--backend-dir "$TOP/backends" --helper-dir "$TOP/backends" --log-level warn \
	--set backends=container --set "container.rootfs=$ROOT" --set image_on_demand=false \
	2>>"$S/log" &
PID=$!
for _ in $(seq 100); do
	"$TOP/tools/dsec-run" --client-timeout 0.5 --backend container -- true >/dev/null 2>&1 && break
	sleep 0.2
done
"$TOP/tools/dsec-run" --backend container --image bench:1 -- true >/dev/null 2>&1 || {
	echo "dsecd does not run image bench:1; its log:" >&2
	cat "$S/log" >&2
	exit 1
}

# bench LABEL MODE [dsec-bench options]: one run; prints a row, sets P50, P99.
bench() {
	local label=$1 mode=$2 out
	shift 2
	out=$("$TOP/tools/dsec-bench" -c 1 -n "$N" --warmup 10 --backend container \
		--mode "$mode" "$@" --json) || { echo "dsec-bench $mode $label failed" >&2; exit 1; }
	P50=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["p50_ms"])')
	P99=$(printf '%s' "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["p99_ms"])')
}
row() {	# row MODE LABEL P50 P99 [BASE50 BASE99]
	if [ $# -gt 4 ]; then
		awk -v m="$1" -v l="$2" -v a="$3" -v b="$4" -v c="$5" -v d="$6" 'BEGIN {
			printf "%-7s %-7s %8.3f %8.3f %+9.3f %+9.3f\n", m, l, a, b, a - c, b - d }'
	else
		awk -v m="$1" -v l="$2" -v a="$3" -v b="$4" 'BEGIN {
			printf "%-7s %-7s %8.3f %8.3f %9s %9s\n", m, l, a, b, "-", "-" }'
	fi
}

echo "machine: $(nproc) cores, kernel $(uname -r); $N requests a run, -c 1, after 10 untimed"
echo "root: $(du -sh "$ROOT" | cut -f1) in $(find "$ROOT" -type f | wc -l) files"
for r in $(seq "$ROUNDS"); do
	printf '\nround %d, load %s\n' "$r" "$(cut -d' ' -f1-3 /proc/loadavg)"
	printf '%-7s %-7s %8s %8s %9s %9s\n' mode layer "p50 ms" "p99 ms" "+p50 ms" "+p99 ms"
	for mode in create first; do
		extra=()
		[ "$mode" = first ] && extra=(--cmd 'echo $X')
		bench dir "$mode" "${extra[@]}"
		d50=$P50 d99=$P99
		row "$mode" dir "$d50" "$d99"
		bench image "$mode" --image bench:1 "${extra[@]}"
		row "$mode" image "$P50" "$P99" "$d50" "$d99"
		hold=$("$TOP/tools/dsec-run" --backend container --image bench:1 --keep -- true 2>&1 \
			>/dev/null | head -1)
		hold=${hold##* }
		bench shared "$mode" --image bench:1 "${extra[@]}"
		row "$mode" shared "$P50" "$P99" "$d50" "$d99"
		"$TOP/t/helper-req" -q "$DSEC_HOST" destroy id="$hold" >/dev/null
	done
done
