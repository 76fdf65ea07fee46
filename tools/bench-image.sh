#!/bin/bash
# bench-image.sh - `make bench-image`: what an fs3 image costs a container
# sandbox's create when all its chunks are local, beside a plain directory
# layer of the same content (container.rootfs).
#
# One private dsecd (state in a temporary folder, layers fetched whole)
# with container.rootfs = a small root, and that root imported as image
# bench:1.  dsec-bench -c 1 times --mode create (create -> reply) and
# --mode first (create -> first exec reply) three ways:
#   dir      no image: the overlay's lower layer is the directory
#   image    --image bench:1, no other sandbox holds it: each create
#            mounts the layer's local EROFS file, each destroy unmounts it
#   shared   --image bench:1 while one kept sandbox holds it: the layer
#            stays mounted and each create shares the mount
# in short batches taken in turn (dir, image, shared, dir, ...), so that
# the load of a shared machine falls on the three alike; the latencies of
# all batches are pooled (dsec-bench --latencies) and p50 and p99 printed
# with the difference to dir.  Asserts nothing: read the figures on a
# quiet machine (the load is printed before and after).  Needs root.
#
#   BENCH_N       requests per way and mode        (default 400)
#   BENCH_BATCH   requests per batch               (default 20)
#   BENCH_LINGER  dsecd's image_linger             (default 0: with more,
#                 "image" keeps the layer mounted between creates too)
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
N=${BENCH_N:-400}
BATCH=${BENCH_BATCH:-20}
LINGER=${BENCH_LINGER:-0}
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
	--backend-dir "$TOP/backends" --helper-dir "$TOP/build/libexec" --log-level warn \
	--set backends=container --set "container.rootfs=$ROOT" --set image_on_demand=false \
	--set "image_linger=$LINGER" \
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

# batch FILE MODE [dsec-bench options]: one batch, its latencies to FILE.
batch() {
	local file=$1 mode=$2
	shift 2
	"$TOP/tools/dsec-bench" -c 1 -n "$BATCH" --warmup 2 --backend container --mode "$mode" \
		--latencies "$file" "$@" >/dev/null || { echo "dsec-bench $mode failed" >&2; exit 1; }
}
# pct FILE P: the P-th percentile of the latencies in FILE (nearest rank).
pct() { sort -n "$1" | awk -v p="$2" '{ v[NR] = $1 } END {
	i = int(NR * p / 100 + 0.999999); if (i < 1) i = 1; printf "%.3f", v[i] }'; }

echo "machine: $(nproc) cores, kernel $(uname -r); root $(du -sh "$ROOT" | cut -f1) in" \
	"$(find "$ROOT" -type f | wc -l) files"
echo "$N creates a way and mode, -c 1, in batches of $BATCH taken in turn; image_linger $LINGER"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for mode in create first; do
	extra=()
	[ "$mode" = first ] && extra=(--cmd 'echo $X')
	for _ in $(seq $((N / BATCH))); do
		batch "$S/$mode.dir" "$mode" "${extra[@]}"
		batch "$S/$mode.image" "$mode" --image bench:1 "${extra[@]}"
		hold=$("$TOP/tools/dsec-run" --backend container --image bench:1 --keep -- true 2>&1 \
			>/dev/null | head -1)
		hold=${hold##* }
		batch "$S/$mode.shared" "$mode" --image bench:1 "${extra[@]}"
		"$TOP/t/helper-req" -q "$DSEC_HOST" destroy id="$hold" >/dev/null
	done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '\n%-7s %-7s %6s %8s %8s %9s %9s\n' mode layer n "p50 ms" "p99 ms" "+p50 ms" "+p99 ms"
for mode in create first; do
	d50=$(pct "$S/$mode.dir" 50) d99=$(pct "$S/$mode.dir" 99)
	for way in dir image shared; do
		f="$S/$mode.$way"
		awk -v m="$mode" -v w="$way" -v n="$(wc -l < "$f")" -v a="$(pct "$f" 50)" \
		    -v b="$(pct "$f" 99)" -v c="$d50" -v d="$d99" 'BEGIN {
			if (w == "dir") printf "%-7s %-7s %6d %8.3f %8.3f %9s %9s\n", m, w, n, a, b, "-", "-"
			else printf "%-7s %-7s %6d %8.3f %8.3f %+9.3f %+9.3f\n", m, w, n, a, b, a - c, b - d }'
	done
done
