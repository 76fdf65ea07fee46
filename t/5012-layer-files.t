#!/bin/bash
# An image's layers reach a backend as mounted directories and as the
# EROFS image file of each (dsec_be_spec.layer_files, ABI 2), and to one
# that asks (DSEC_BE_CAP_LAYER_DEVS) as read-only block devices too
# (layer_devs): what a VM backend attaches as disks.  The "layers" and
# "layerdevs" test backends record what their create got in the sandbox's
# file /layers.
. "$(dirname "$0")/lib.sh"

need_root
for c in dsecctl helper-req mkfs.erofs; do need_cmd "$c"; done
grep -qw erofs /proc/filesystems || modprobe erofs 2>/dev/null
grep -qw erofs /proc/filesystems || skip_all "needs EROFS"
[ -e "$TOP/t/layers.so" ] || skip_all "needs t/layers.so (make tests)"

plan 17

mkdir -p "$T/base/etc" "$T/top"
echo base > "$T/base/etc/one"
echo top > "$T/top/two"
export DSEC_FS3_STORE="$T/state/fs3"
mkdir -p "$T/state"
run dsecctl image import --tag lf:base "$T/base"
run dsecctl image import --tag lf:top "$T/top"
is "$RC" 0 "two one-layer images imported"

start_dsecd --backend-dir "$TOP/t" --set backends=layers,layerdevs || bail "dsecd did not start"
req() { helper-req "$DSEC_HOST" "$@"; }
id=$(req create backend=layers image=lf:base 'layers[]=lf:top' | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
run helper-req -o "$T/layers" "$DSEC_HOST" file_read id="$id" path=/layers
n=$(wc -l < "$T/layers")
is "$n" 2 "the backend gets both layers, each with a file"
bad=
while read -r dir file; do
	# The directory is an EROFS mount; the file an EROFS image.
	awk -v d="$dir" '$5 == d { for (i = 6; i <= NF; i++) if ($i == "-") { print $(i + 1); exit } }' \
		/proc/self/mountinfo | grep -qx erofs || bad="$bad $dir:not-mounted"
	[ -f "$file" ] || { bad="$bad $file:no-file"; continue; }
	magic=$(od -An -tx4 -j1024 -N4 "$file" | tr -d ' ')
	[ "$magic" = e0f5e1e2 ] || bad="$bad $file:magic=$magic"
done < "$T/layers"
is "$bad" "" "each directory is an EROFS mount and each file an EROFS image"
top_dir=$(sed -n 1p "$T/layers" | cut -d' ' -f1)
base_dir=$(sed -n 2p "$T/layers" | cut -d' ' -f1)
ok $([ -e "$top_dir/two" ] && [ -e "$base_dir/etc/one" ]; echo $?) "in layers' order, the highest (the image stacked over) first"
ok $(! grep -q ' -$' "$T/layers"; echo $?) "no layer without its file"
run req destroy id="$id"
is "$RC" 0 "destroy"

# ---- block devices
# backing DEV: the file a loop device is attached to, "-" when detached.
backing() { cat "/sys/block/${1#/dev/}/loop/backing_file" 2>/dev/null || echo -; }
devs_of() {
	helper-req -o "$T/$1.layers" "$DSEC_HOST" file_read id="$1" path=/layers >/dev/null
	cat "$T/$1.layers"
}
if [ ! -e /dev/loop-control ]; then
	for i in $(seq 11); do skip "needs loop devices (/dev/loop-control)"; done
	exit 0
fi
a=$(req create backend=layerdevs image=lf:base 'layers[]=lf:top' | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
like "$a" ':' "a sandbox of a backend that takes layers as devices"
devs_of "$a" > "$T/a"
bad=
while read -r dir file dev; do
	[ -b "$dev" ] || { bad="$bad $dev:not-a-block-device"; continue; }
	[ "$(blockdev --getro "$dev")" = 1 ] || bad="$bad $dev:writable"
	[ "$(backing "$dev")" = "$file" ] || bad="$bad $dev:backing=$(backing "$dev")"
	cmp -s "$dev" "$file" || bad="$bad $dev:differs"
done < "$T/a"
is "$(wc -l < "$T/a") $bad" "2 " "each layer is a read-only block device of its file, byte for byte"
run dd if="$(sed -n 1p "$T/a" | cut -d' ' -f3)" of=/dev/null bs=4096 count=1
is "$RC" 0 "... that reads"
ok $(! dd if=/dev/zero of="$(sed -n 1p "$T/a" | cut -d' ' -f3)" bs=512 count=1 \
	conv=notrunc 2>/dev/null; echo $?) "... and refuses a write"
b=$(req create backend=layerdevs image=lf:top | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
devs_of "$b" > "$T/b"
top_a=$(sed -n 1p "$T/a" | cut -d' ' -f3)
is "$(cut -d' ' -f3 "$T/b")" "$top_a" "a sandbox of another image with that layer shares its device"
run req create backend=layers image=lf:base
id3=$(printf '%s' "$OUT" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
ok $(! devs_of "$id3" | grep -q loop; echo $?) "a backend that does not ask gets no devices"
req destroy id="$a" >/dev/null
is "$(backing "$top_a")" "$(sed -n 1p "$T/a" | cut -d' ' -f2)" "... and it stays while one holds it"
req destroy id="$b" >/dev/null
gone() {
	for i in $(seq 100); do
		left=
		for d in "$@"; do [ "$(backing "$d")" = - ] || left="$left $d"; done
		[ -z "$left" ] && break
		sleep 0.1
	done
	echo "${left:-none}"
}
is "$(gone $(cut -d' ' -f3 "$T/a"))" none "the devices are detached when the last sandbox holding them is gone"
# A daemon killed holding devices leaves none attached.
c=$(req create backend=layerdevs image=lf:base | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
devs_of "$c" > "$T/c"
ok $([ -b "$(sed -n 1p "$T/c" | cut -d' ' -f3)" ]; echo $?) "a third sandbox gets devices again"
kill -9 "$DSECD_PID"
wait "$DSECD_PID" 2>/dev/null
DSECD_PID=
is "$(gone $(cut -d' ' -f3 "$T/c"))" none "a daemon killed with -9 leaves no loop device attached"
# The next daemon on the state directory unmounts what the killed one left.
start_dsecd --backend-dir "$TOP/t" --set backends=layers,layerdevs || bail "dsecd did not restart"
ok $(! grep -q " $T/state/fs3/" /proc/self/mountinfo; echo $?) \
	"a daemon started after it unmounts the layers the killed one left"
