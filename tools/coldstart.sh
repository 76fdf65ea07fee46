#!/bin/sh
# coldstart.sh - fs3 cold start, side by side in one run: an image of about
# 1.1 GiB never seen by the node, a workload reading about 5 % of it, on
# demand (FUSE + EROFS) vs fetched whole before mounting.  Needs root and
# /dev/fuse; scratch under /tmp/ondemand-bench (removed at the end).
# Extra arguments go to fs3-bench, e.g. -c 256 for 256 KiB chunks.
set -eu
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "coldstart.sh: needs root (mounts)" >&2; exit 1; }
[ -c /dev/fuse ] || { echo "coldstart.sh: needs /dev/fuse" >&2; exit 1; }
[ -x tools/fs3-bench ] || make tools/fs3-bench
exec tools/fs3-bench -s 1100 -f 0.05 -d /tmp/ondemand-bench "$@"
