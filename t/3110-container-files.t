#!/bin/bash
# container: the file API end to end: every op, owner and mode, tar upload
# and download, escapes, and mount points.
. "$(dirname "$0")/lib.sh"

need_root
need_cmd helper-req
need_cmd helper-files
need_cmd dsec-run
need_cmd python3
need_cmd zstd
[ -e "$TOP/backends/container.so" ] || skip_all "needs backends/container.so (make)"
[ -x "$TOP/build/libexec/container-init" ] || skip_all "needs build/libexec/container-init (make)"
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null
grep -qw overlay /proc/filesystems || skip_all "needs overlayfs"
[ -d /sys/fs/cgroup/memory ] || [ -e /sys/fs/cgroup/cgroup.controllers ] || skip_all "needs a memory cgroup"

. "$TOP/t/files-common.sh"
plan $((FILES_TESTS + 12))

# A small max_frame, so that the parts show (t/files-common.sh).
start_dsecd --set backends=container --set max_frame=256K --set output_cap=64K --set stage_grace=3s
BE=container
# Inside the container's root an escape is contained: ".." stops at its
# root and absolute symlinks resolve in it; only magic links are refused.
ESC='"ok":(true|false,"error":\{"code":"(permission|not_found)")'
files_tests

run hr create backend=container
id=$(printf '%s' "$OUT" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
run hr file_write id="$id" path=/../../..$T/host data=inside
run dsec-run --id "$id" -c "cat $T/host"
is "$OUT" "inside" "container: a write through '..' lands inside the sandbox's root"
run hr file_remove id="$id" path=/proc recursive?=true
like "$OUT" "\"code\":\"permission\",\"message\":\"cannot remove '/proc': it is a mount point\"" \
	"container: file_remove does not cross into a mount"
run hr file_remove id="$id" path=/ recursive?=true
like "$OUT" '"code":"invalid"' "container: the root cannot be removed"
run dsec-run --id "$id" -c 'test -d /proc/1 && echo alive'
is "$OUT" "alive" "container: the sandbox's /proc is still mounted"
run hr file_remove id="$id" path=/dev/null
like "$OUT" "\"code\":\"permission\",\"message\":\"cannot remove '/dev/null': it is a mount point\"" \
	"container: a bind-mounted file is not removed (it would unmount it)"
run hr file_write id="$id" path=/usr/dsec-x data=x
like "$OUT" '"code":"permission","message":"cannot write ./usr/dsec-x.: read-only file system"' \
	"container: a read-only mount stays read-only"
run hr file_read id="$id" path=/proc/self/root/etc/passwd
like "$OUT" '"ok":false' "container: /proc/self/root is refused (magic link)"
run hr file_read id="$id" path=/proc/1/root$T/host
like "$OUT" '"code":"permission"' "container: a /proc/PID/root magic link is refused"
run dsec-run --id "$id" -c 'ln -s /proc/1/root /work/pr1'
run hr file_write id="$id" path=/work/pr1/x data=x
like "$OUT" '"code":"permission"' "container: a symlink to a magic link is refused"
run hr file_download id="$id" path=/proc/1
like "$OUT" '"code":"invalid","message":"cannot download ./proc/1.: it is in a kernel file system' \
	"container: /proc is no tree to download"
run hr file_list id="$id" path=/
like "$OUT" '"name":"proc","type":"dir"' "container: file_list of the root"
run hr ping
like "$OUT" '"pong":true' "container: the daemon keeps serving"
