#!/bin/bash
# Snapshots keep holes and stay within the sandbox's disk.  A 2 GiB sparse
# file in a sandbox of a 256 MiB disk snapshots with the state dir (a
# 512 MiB tmpfs here: writing the holes out would fill it) growing by a few
# MiB; a sandbox of the snapshot sees the same size, the data where it was
# and zeros in the hole.  Files whose sizes add up to more than 16 times
# the disk fail with capacity and leave nothing behind; the sandbox then
# snapshots again once they are gone.
. "$(dirname "$0")/lib.sh"

need_container_images
need_cmd truncate
need_cmd dd

mkdir -p "$T/state"
mount -t tmpfs -o size=512m dsec-test "$T/state" 2>/dev/null || skip_all "cannot mount a tmpfs"
trap 'stop_dsecd; umount -l "$T/state" 2>/dev/null; _tap_cleanup' EXIT

plan 12

G=$((1 << 30))
mk_small_root "$T/root" sh cat ls stat dd truncate rm od tr
export DSEC_FS3_STORE="$T/state/fs3"
run dsecctl image import --tag sparsebase:1 "$T/root"
is "$RC" 0 "the base image imports"
start_dsecd --set backends=container --set container.disk=256M || bail "dsecd did not start"

used() { df --output=used -B1M "$T/state" | tail -1 | tr -d ' '; }

# 2 GiB: "mid" at 1 GiB, "end" in its last 3 bytes, holes elsewhere.
id=$(dsec-run --backend container --image sparsebase:1 --keep -c "
	truncate -s $((2 * G)) /data/sparse &&
	printf mid | dd of=/data/sparse bs=1 seek=$G conv=notrunc 2>/dev/null &&
	printf end | dd of=/data/sparse bs=1 seek=$((2 * G - 3)) conv=notrunc 2>/dev/null &&
	stat -c %s /data/sparse" 2>&1 >/dev/null | head -1)
id=${id##* }
like "$id" ':' "a sandbox of a 256 MiB disk makes a 2 GiB sparse file"

before=$(used)
HELPER_REQ_TIMEOUT=600 run helper-req "$DSEC_HOST" snapshot id="$id" tag=sparse:1
is "$RC" 0 "it snapshots ($(printf '%s' "$OUT" | grep -o '"code":"[a-z_]*".*' | head -c 300))"
after=$(used)
ok $([ $((after - before)) -lt 32 ]; echo $?) \
	"the state dir grew by $((after - before)) MiB (of a 512 MiB tmpfs), not by the holes"
run dsecctl image inspect sparse:1
top=$(printf '%s\n' "$OUT" | grep '^layer' | tail -1 | sed 's/.* size \([0-9]*\) .*/\1/')
ok $([ -n "$top" ] && [ "$top" -lt $((16 << 20)) ]; echo $?) "the snapshot's layer is $top bytes"

run dsec-run --backend container --image sparse:1 -c "
	stat -c %s /data/sparse
	dd if=/data/sparse bs=1 skip=$G count=3 2>/dev/null; echo
	dd if=/data/sparse bs=1 skip=$((2 * G - 3)) count=3 2>/dev/null; echo
	dd if=/data/sparse bs=1 skip=$((G / 2)) count=8 2>/dev/null | od -An -tx1 | tr -d ' \n'"
is "$(echo $OUT)" "$((2 * G)) mid end 0000000000000000" \
	"a sandbox of the snapshot sees the same size, the data where it was, zeros in the hole"

# 8 GiB of sizes in a 256 MiB disk: over 16 times it.
helper-req -q "$DSEC_HOST" exec id="$id" 'argv[]=truncate' "argv[]=-s" "argv[]=$((8 * G))" \
	'argv[]=/data/huge' >/dev/null
HELPER_REQ_TIMEOUT=600 run helper-req "$DSEC_HOST" snapshot id="$id" tag=sparse:2
like "$OUT" '"code":"capacity".*sizes add up to more than 4096 MiB' \
	"files whose sizes add up past 16 times the disk fail with capacity"
ls -A "$T/state/snapshots" 2>/dev/null | grep -q .
is "$?" 1 "... leaving no copy in the state dir"
ls -A "$T/state/fs3/tmp" 2>/dev/null | grep -q .
is "$?" 1 "... nor any staging in the store"
run dsecctl image inspect sparse:2
like "$RC:$OUT" "^1:.*no such image" "... nor an image"

helper-req -q "$DSEC_HOST" exec id="$id" 'argv[]=rm' 'argv[]=/data/huge' >/dev/null
HELPER_REQ_TIMEOUT=600 run helper-req "$DSEC_HOST" snapshot id="$id" tag=sparse:3
is "$RC" 0 "with the file gone, the sandbox snapshots again"
stop_dsecd
is "$?" 0 "dsecd shuts down cleanly"
