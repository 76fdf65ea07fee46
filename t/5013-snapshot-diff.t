#!/bin/bash
# A backend hands a snapshot its sandbox's changes as an upper dir, a layer
# tar in OCI form or an EROFS image (dsec_be_diff, ABI 2): what a VM
# backend gets out of its guest.  The "layers" test backend hands over the
# file its sandbox's /.diff names ("KIND PATH"); the new image's top layer
# must hold the changes in overlayfs form (whiteouts, opaque dirs).  A tar
# is only ever parsed, never taken for an EROFS image or an OCI layout; an
# EROFS image is checked before the kernel may mount it; the sandbox's disk
# bounds both.
. "$(dirname "$0")/lib.sh"

need_root
for c in dsecctl helper-req mkfs.erofs fsck.erofs tar; do need_cmd "$c"; done
grep -qw erofs /proc/filesystems || modprobe erofs 2>/dev/null
grep -qw erofs /proc/filesystems || skip_all "needs EROFS"
[ -e "$TOP/t/layers.so" ] || skip_all "needs t/layers.so (make tests)"

plan 23

PY=/usr/bin/python3
xattr() { $PY -c 'import os,sys
try: print(os.getxattr(sys.argv[1], sys.argv[2]).decode())
except OSError: print("-")' "$1" "$2"; }
# What a changed tree looks like in overlayfs form, under $1.
whiteout_tree() {
	mkdir -p "$1/data/old"
	echo new > "$1/data/new.txt"
	echo fresh > "$1/data/old/c.txt"
	chown 1000:1000 "$1/data/new.txt"
	mknod "$1/data/gone.txt" c 0 0
	$PY -c 'import os,sys
for ns in ("trusted", "user"): os.setxattr(sys.argv[1], ns + ".overlay.opaque", b"y")' "$1/data/old"
}

mkdir -p "$T/base/data/old" "$T/state"
echo base > "$T/base/data/gone.txt"
echo "old content" > "$T/base/data/old/a.txt"
export DSEC_FS3_STORE="$T/state/fs3"
run dsecctl image import --tag sd:base "$T/base"
is "$RC" 0 "the base image is imported"

start_dsecd --backend-dir "$TOP/t" --set backends=layers || bail "dsecd did not start"
req() { helper-req "$DSEC_HOST" "$@"; }
sandbox() {
	req create backend=layers image=sd:base "$@" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p'
}
# snap KIND PATH TAG [create args]: a sandbox that hands over PATH; OUT, RC.
snap() {
	local kind=$1 path=$2 tag=$3 id
	shift 3
	id=$(sandbox "$@")
	printf '%s %s\n' "$kind" "$path" > "$T/diff-spec"
	req file_write id="$id" path=/.diff data@="$T/diff-spec" >/dev/null
	run req snapshot id="$id" tag="$tag"
	req destroy id="$id" >/dev/null
}
# The top layer directory of a sandbox made of image $1 (and its file).
top_layer() {
	local id
	id=$(req create backend=layers image="$1" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
	helper-req -o "$T/layers" "$DSEC_HOST" file_read id="$id" path=/layers >/dev/null
	sed -n 1p "$T/layers"
}
# The changes in overlayfs form under layer directory $1, one line.
changes() {
	local d=$1
	echo $(cat "$d/data/new.txt" "$d/data/old/c.txt") \
		$(stat -c '%u %F %t:%T' "$d/data/new.txt" "$d/data/gone.txt") \
		"$(xattr "$d/data/old" trusted.overlay.opaque)" \
		"$(xattr "$d/data/old" user.overlay.opaque)"
}
want="new fresh 1000 regular file 0:0 0 character special file 0:0 y y"
left() { ls -A "$T/state/snapshots" 2>/dev/null | wc -l; }

# ---- a layer tar in OCI form (.wh. names), with an OCI layout's files in it
mkdir -p "$T/tt/data/old"
echo new > "$T/tt/data/new.txt"
echo fresh > "$T/tt/data/old/c.txt"
: > "$T/tt/data/.wh.gone.txt"
: > "$T/tt/data/old/.wh..wh..opq"
echo '{"imageLayoutVersion": "1.0.0"}' > "$T/tt/oci-layout"
echo '{"schemaVersion": 2, "manifests": []}' > "$T/tt/index.json"
tar -C "$T/tt" --numeric-owner --owner=0 --group=0 -cf "$T/diff.tar" .
tar -C "$T/tt" --numeric-owner --owner=1000 --group=1000 -rf "$T/diff.tar" ./data/new.txt
snap 1 "$T/diff.tar" sd:tar
is "$RC" 0 "a snapshot from a layer tar"
like "$OUT" '"layers":2,' "... makes an image of the base and one layer"
top=$(top_layer sd:tar)
is "$(changes "${top% *}")" "$want" \
	"... whose layer has the files, a whiteout for the deleted one and the replaced dir opaque"
ok $([ -f "${top% *}/oci-layout" ] && [ -f "${top% *}/index.json" ]; echo $?) \
	"... and an OCI layout's files in the tar are files, not an image to import"

# ---- an EROFS image the backend built
whiteout_tree "$T/et"
mkfs.erofs --quiet "$T/diff.erofs" "$T/et" >/dev/null
snap 2 "$T/diff.erofs" sd:erofs
is "$RC" 0 "a snapshot from an EROFS image"
top=$(top_layer sd:erofs)
is "$(changes "${top% *}")" "$want" "... whose layer shows the changes"
ok $(cmp -s "${top#* }" "$T/diff.erofs"; echo $?) "... and is the image as it was handed over"

# ---- the forms are never mistaken for each other
# A tar whose first file puts EROFS's magic where a superblock's would be.
mkdir -p "$T/mt"
$PY -c 'import sys; sys.stdout.buffer.write(b"\0" * 512 + bytes.fromhex("e2e1f5e0") + b"\0" * 60)' \
	> "$T/mt/a"
tar -C "$T/mt" -cf "$T/magic.tar" a
magic=$(od -An -tx4 -j1024 -N4 "$T/magic.tar" | tr -d ' ')
is "$magic" e0f5e1e2 "a tar with EROFS's magic at byte 1024"
snap 1 "$T/magic.tar" sd:magic
is "$RC" 0 "... handed over as a tar is taken as a tar"
top=$(top_layer sd:magic)
ok $(cmp -s "${top% *}/a" "$T/mt/a"; echo $?) "... its file in the layer as it was"
snap 2 "$T/diff.tar" sd:nottar
like "$OUT" '"code":"invalid".*not an erofs image' "a tar handed over as an EROFS image is refused"

# ---- a damaged EROFS image does not reach the kernel
cp "$T/diff.erofs" "$T/bad.erofs"
printf '\377\377\377\377\377\377\377\377' | dd of="$T/bad.erofs" bs=1 seek=1090 conv=notrunc 2>/dev/null
snap 2 "$T/bad.erofs" sd:bad
like "$OUT" '"code":"invalid".*fsck.erofs' "a damaged EROFS image is refused, fsck.erofs saying why"
run dsecctl image inspect sd:bad
ok $([ "$RC" != 0 ]; echo $?) "... and no image is tagged"

run dsecctl image import --tag sd:file "$T/diff.erofs"
like "$OUT" 'erofs' "dsecctl imports an EROFS image file as an image of one layer"
run dsecctl image import --tag sd:badfile "$T/bad.erofs"
like "$RC $OUT" '^[1-9].*fsck.erofs' "... and refuses a damaged one"

# ---- the sandbox's disk bounds what its changes may take
head -c 1048576 /dev/urandom > "$T/tt/data/big"
tar -C "$T/tt" -cf "$T/big.tar" .
snap 1 "$T/big.tar" sd:big 'limits.disk#=262144'
like "$OUT" '"code":"capacity"' "a tar larger than the sandbox's disk gives capacity"
tar -C "$T/tt" -czf "$T/big.tgz" data/big
snap 1 "$T/big.tgz" sd:bigz 'limits.disk#=1000000'
like "$OUT" '"code":"capacity"' "... so does one that only grows that large when it is unpacked"
snap 2 "$T/diff.erofs" sd:small 'limits.disk#=1024'
like "$OUT" '"code":"capacity"' "... and an EROFS image larger than it"

# ---- nonsense from a backend
snap 7 "$T/diff.tar" sd:kind
like "$OUT" '"code":"backend_error".*kind 7' "a form the daemon does not know is the backend's error"
snap 1 "$T/no-such.tar" sd:none
like "$OUT" '"ok":false' "a file that is not there is an error"
is "$(left)" 0 "no snapshot leaves its staging files behind"
run req ping
is "$RC" 0 "the daemon serves on"
