#!/bin/bash
# fncall: the file API of sandboxes (their files under /work) end to end:
# every op, owner and mode, tar upload and download, and escapes.
. "$(dirname "$0")/lib.sh"

need_root
need_cmd helper-req
need_cmd helper-files
need_cmd python3
need_cmd zstd
[ -e "$TOP/backends/fncall.so" ] || skip_all "needs backends/fncall.so (make)"

. "$TOP/t/files-common.sh"
plan $((FILES_TESTS + 8))

# A small max_frame, so that the reply caps and the parts show; room in
# the scratch for 40 MiB four times (t/files-common.sh).
start_dsecd --set backends=fncall --set max_frame=256K --set output_cap=64K --set stage_grace=3s \
	--set fncall.scratch=256M
BE=fncall
ESC='"code":"permission"'
files_tests

# Outside /work is outside the sandbox's files.
run hr create backend=fncall
id=$(printf '%s' "$OUT" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
run hr file_stat id="$id" path=/etc/passwd
like "$OUT" "\"code\":\"permission\",\"message\":\"path '/etc/passwd' is outside the sandbox's files \\(/work\\)\"" \
	"fncall: a path outside /work is refused"
run hr file_remove id="$id" path=/work recursive?=true
like "$OUT" '"code":"invalid","message":"cannot remove ./work.: it is the top of the sandbox' \
	"fncall: the top of the files cannot be removed"

# Results over the reply cap fail whole, never a truncated tar.
head -c 120000 /dev/urandom > "$T/r1"
run hr file_write id="$id" path=big/r1 data@="$T/r1"
run hr file_write id="$id" path=big/r2 data@="$T/r1"
run hr file_download id="$id" path=/work/big
like "$OUT" '"code":"too_large","message":"cannot download ./work/big.: the archive is over the [0-9]+ bytes a reply can carry"' \
	"fncall: a download over the reply cap is too_large"
run hr file_download id="$id" path=/work/big/r1
like "$OUT" '"ok":true' "fncall: a download under the cap works"
run hr file_write id="$id" path=/work/z data~=300000
like "$OUT" '"code":"too_large"' "fncall: an upload or write over max_frame is too_large"
run hr ping
like "$OUT" '"pong":true' "fncall: the daemon keeps serving"

# A part the daemon still refuses as too_large goes again halved: n1
# (max_frame 1M: parts of 960K) sends the requests on to the owner, n2
# (512K), which takes in frames up to twice that and refuses them.
members="n1=ipc://$T/n1.sock,n2=ipc://$T/n2.sock"
for n in n1:1M n2:512K; do
	start_node "${n%%:*}" --set backends=fncall --set max_frame="${n#*:}" --set output_cap=64K \
		--set cluster_nodes="$members"
done
id2=$(at n2 create backend=fncall | idof)
head -c $((6 << 20)) /dev/urandom > "$T/mid"
run helper-files --big "$T/mid" "ipc://$T/n1.sock" "$id2" /work/h
is "$RC:$(printf '%s' "$OUT" | grep -vc '^ok ')" "0:0" \
	"fncall: through a node of a larger max_frame, parts the owner refuses go again halved"
[ "$RC" = 0 ] || diag "$OUT"
run at n2 file_write id="$id2" path=/work/x data~=$((960 << 10))
like "$OUT" '"code":"too_large"' "... (n2 refuses a part of n1's size)"
