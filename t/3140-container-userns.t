#!/bin/bash
# container user namespaces: root inside is an unprivileged uid range of its
# own outside, ranges never overlap, image files are root's inside (idmapped
# layers), files the API writes are root's inside, and the old mode (no user
# namespace) can still be chosen.
. "$(dirname "$0")/lib.sh"

need_container_images
[ -e /proc/self/ns/user ] || skip_all "needs user namespaces"

plan 11

start_dsecd --set backends=container --set container.uid_base=2000000000 || bail "dsecd did not start"

a=$(dsec-run --backend container --keep -c true 2>&1 >/dev/null | head -1); a=${a##* }
b=$(dsec-run --backend container --keep -c true 2>&1 >/dev/null | head -1); b=${b##* }
ma=$(dsec-run --id "$a" -c 'cat /proc/self/uid_map' | awk '{print $1, $2, $3}')
mb=$(dsec-run --id "$b" -c 'cat /proc/self/uid_map' | awk '{print $1, $2, $3}')
like "$ma" '^0 20[0-9]{8} 65536$' "root inside maps to a range of 65536 uids from container.uid_base"
ok $([ -n "$mb" ] && [ "$ma" != "$mb" ]; echo $?) "two sandboxes get different ranges ($ma / $mb)"
base=$(echo "$ma" | cut -d' ' -f2)
dsec-run --id "$a" --timeout 20 -c 'sleep 7741' >/dev/null 2>&1 &
runner=$!
for i in $(seq 50); do pid=$(pgrep -f '^sleep 7741' | head -1); [ -n "$pid" ] && break; sleep 0.1; done
is "$(ps -o uid= -p "$pid" | tr -d ' ')" "$base" "a command's root is that unprivileged uid on the host"
kill "$runner" 2>/dev/null; wait "$runner" 2>/dev/null
run dsec-run --id "$a" -c 'id -u; grep CapEff /proc/self/status'
is "$(echo $OUT)" "0 CapEff: 00000000000004fb" "inside it is uid 0 with the small set of capabilities"

printf 'api' > "$T/data"
helper-req -q "$DSEC_HOST" file_write id="$a" path=/work/new/f data@="$T/data" >/dev/null
run dsec-run --id "$a" -c 'ls -ln /work/new/f | awk "{print \$3, \$4}"; stat -c "%u %g" /work/new; cat /work/new/f'
is "$(echo $OUT)" "0 0 0 0 api" "files and directories file_write makes are root's inside"
run dsec-run --id "$a" -c 'touch /root/x && chown 1000:1000 /root/x && stat -c "%u %g" /root/x'
is "$OUT" "1000 1000" "root inside can chown within its range"
run dsec-run --id "$a" -c "chown $base /root/x 2>&1 >/dev/null | grep -c 'Invalid argument'"
is "$OUT" "1" "... and not to a uid outside it"

# An image's root-owned files are root's inside, and editing one copies it up.
mk_small_root "$T/root" sh
ln -s bin/sh "$T/root/sh"
echo original > "$T/root/etc/conf"
DSEC_FS3_STORE="$T/state/fs3" dsecctl image import --tag uns:1 "$T/root" >/dev/null 2>&1 ||
	bail "cannot import the test image"
run dsec-run --backend container --image uns:1 -- /sh -c 'read l < /etc/conf; echo $l; echo edited > /etc/conf; read l < /etc/conf; echo $l'
is "$(echo $OUT)" "original edited" "an image's root-owned file can be edited (idmapped layers, copy-up)"
stop_dsecd

start_dsecd --set backends=container --set container.userns=false || bail "dsecd did not start"
run dsec-run --backend container -c 'cat /proc/self/uid_map'
is "$(echo $OUT)" "0 0 4294967295" "container.userns=false keeps the host's ids"
stop_dsecd
run timeout 60 "$TOP/dsecd/dsecd" --foreground --state-dir "$T/s2" --listen "ipc://$T/s2.sock" \
	--backend-dir "$TOP/backends" --helper-dir "$TOP/build/libexec" --set backends=container \
	--set container.uid_base=10
like "$OUT" "uid_base 10 must be at least 100000" "a uid_base among the host's users is refused"
isnt_zero=$RC
ok $([ "$isnt_zero" != 0 ]; echo $?) "... and dsecd does not start"
