#!/bin/bash
# An image's layers reach a backend as mounted directories and as the
# EROFS image file of each (dsec_be_spec.layer_files, ABI 2): what a VM
# backend attaches as disks.  The "layers" test backend records what its
# create got in the sandbox's file /layers.
. "$(dirname "$0")/lib.sh"

need_root
for c in dsecctl helper-req mkfs.erofs; do need_cmd "$c"; done
grep -qw erofs /proc/filesystems || modprobe erofs 2>/dev/null
grep -qw erofs /proc/filesystems || skip_all "needs EROFS"
[ -e "$TOP/t/layers.so" ] || skip_all "needs t/layers.so (make tests)"

plan 6

mkdir -p "$T/base/etc" "$T/top"
echo base > "$T/base/etc/one"
echo top > "$T/top/two"
export DSEC_FS3_STORE="$T/state/fs3"
mkdir -p "$T/state"
run dsecctl image import --tag lf:base "$T/base"
run dsecctl image import --tag lf:top "$T/top"
is "$RC" 0 "two one-layer images imported"

start_dsecd --backend-dir "$TOP/t" --set backends=layers || bail "dsecd did not start"
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
