#!/bin/bash
# container: the file API on sandboxes made from an fs3 image: what it
# makes belongs to the image's user, and removing or overwriting the
# image's files changes the sandbox's upper layer only, never the shared
# read-only layers another sandbox of the image sees.
. "$(dirname "$0")/lib.sh"

need_container_images

plan 9

mkdir -p "$T/root/data/tree/sub" "$T/root/etc"
echo image-file > "$T/root/data/tree/sub/f"
echo keep > "$T/root/data/keep"
export DSEC_FS3_STORE="$T/state/fs3"
mkdir -p "$T/state"
run dsecctl image import --tag files:1 --config user=1000:1001 "$T/root"
is "$RC" 0 "dsecctl imports a small root with a user"

start_dsecd --set backends=container || bail "dsecd did not start"
hr() { helper-req "$DSEC_HOST" "$@"; }
mk() { hr create backend=container image=files:1 | sed -n 's/.*"id":"\([^"]*\)".*/\1/p'; }
a=$(mk)
b=$(mk)
[ -n "$a" ] && [ -n "$b" ] || bail "cannot create sandboxes of the image"

run hr file_write id="$a" path=/data/new data=x
run hr file_stat id="$a" path=/data/new
like "$OUT" '"uid":1000,"gid":1001' "file_write makes files owned by the image's user"
run hr file_mkdir id="$a" path=/data/d/e parents?=true
run hr file_stat id="$a" path=/data/d
like "$OUT" '"type":"dir",.*"uid":1000,"gid":1001' "file_mkdir makes directories owned by the image's user"
run hr file_remove id="$a" path=/data/tree recursive?=true
like "$OUT" '"removed":3' "file_remove removes an image directory from the sandbox"
run hr file_write id="$a" path=/data/keep data=changed
run hr file_read id="$b" path=/data/tree/sub/f
like "$OUT" '"data":"image-file\\n"' "another sandbox of the image still has the removed tree"
run hr file_read id="$b" path=/data/keep
like "$OUT" '"data":"keep\\n"' "... and the file the first one overwrote, unchanged"
run hr file_list id="$a" path=/data
like "$OUT" '"entries":\[\{"name":"d".*\{"name":"keep".*\{"name":"new".*\],"truncated":false' \
	"the first sandbox lists its own view"
ok $(grep -q image-file "$T/root/data/tree/sub/f"; echo $?) "the imported root on the host is untouched"
run hr file_download id="$b" path=/data format=tar.zst
like "$OUT" '"ok":true,.*"entries":4' "file_download packs the image's files (tree, sub, f, keep)"
