#!/bin/bash
# container: the file API on sandboxes made from an fs3 image: what it
# makes belongs to the image's user, and removing or overwriting the
# image's files changes the sandbox's upper layer only, never the shared
# read-only layers another sandbox of the image sees.  The API acts as
# that user does: where it may not write (a directory of root's), or give
# an owner (another uid), or read (a file of root's, 0600), neither may a
# request.
. "$(dirname "$0")/lib.sh"

need_container_images

plan 14

mkdir -p "$T/root/data/tree/sub" "$T/root/etc"
echo image-file > "$T/root/data/tree/sub/f"
echo keep > "$T/root/data/keep"
echo secret > "$T/root/etc/secret"
chmod 600 "$T/root/etc/secret"
# /data is the image user's (the user writes there), /etc root's.
chown -R 1000:1001 "$T/root/data"
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

run hr file_write id="$a" path=/etc/new data=x
like "$OUT" '"code":"permission"' "file_write into a directory of root's: permission, as for the image's user"
run hr file_read id="$a" path=/etc/secret
like "$OUT" '"code":"permission"' "file_read of root's 0600 file: permission"
run hr file_mkdir id="$a" path=/data/other uid#=4242
run2=$OUT
run hr file_stat id="$a" path=/data/other
like "$run2 $OUT" '"code":"permission".*"code":"not_found"' \
	"file_mkdir giving another uid: permission, and no directory is left"
run hr file_write id="$a" path=/data/mine data=x uid#=1000 gid#=1001
like "$OUT" '"ok":true' "file_write giving the user's own ids"
run hr file_write id="$a" path=/data/new data=x
run hr file_stat id="$a" path=/data/new
like "$OUT" '"uid":1000,"gid":1001' "file_write makes files owned by the image's user"
run hr file_mkdir id="$a" path=/data/d/e parents?=true
run hr file_stat id="$a" path=/data/d
like "$OUT" '"type":"dir",.*"uid":1000,"gid":1001' "file_mkdir makes directories owned by the image's user"
# Whether this kernel's tmpfs keeps user.* xattrs, asked here, and what
# the daemon said of it.
mkdir -p "$T/xp" && mount -t tmpfs -o size=4k xp "$T/xp" &&
	/usr/bin/python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.t", b"y")' "$T/xp" 2>/dev/null
xattr_rc=$?
umount "$T/xp" 2>/dev/null
no_upper_xattr
is "$?" "$([ $xattr_rc = 0 ] && echo 1 || echo 0)" \
	"dsecd warns at start if and only if tmpfs keeps no user.* xattrs here (here: $([ $xattr_rc = 0 ] && echo keeps || echo "keeps none"))"
run hr file_remove id="$a" path=/data/tree recursive?=true
if no_upper_xattr; then
	skip "file_remove of an image directory holding another: $NO_UPPER_XATTR"
else
	like "$OUT" '"removed":3' "file_remove removes an image directory from the sandbox"
fi
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
