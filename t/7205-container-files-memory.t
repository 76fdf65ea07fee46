#!/bin/bash
# What the file API writes to a sandbox's in-memory disk is the sandbox's
# memory, not the node's: the file server is in the sandbox's cgroup, so a
# client cannot fill dsecd's memory through a sandbox's files.  A pause
# waits for the file operations already queued and freezes the server with
# the rest; nothing is lost or stuck.
. "$(dirname "$0")/lib.sh"

need_container

plan 7

start_dsecd --set backends=container || bail "dsecd did not start"
req() { helper-req "$DSEC_HOST" "$@"; }
id=$(req create backend=container limits.memory#=268435456 limits.disk#=67108864 |
	sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
[ -n "$id" ] || bail "cannot create a sandbox"
# The sandbox's memory cgroup: v1 usage_in_bytes or v2 memory.current.
usage() {
	local f
	f=$(find /sys/fs/cgroup/memory /sys/fs/cgroup -maxdepth 8 \
		-path "*/dsec-container.$DSECD_PID/sb.*" \
		\( -name memory.usage_in_bytes -o -name memory.current \) 2>/dev/null |
		grep -v '/x\.' | head -1)
	[ -n "$f" ] && cat "$f"
}
u0=$(usage)
[ -n "$u0" ] || bail "no memory cgroup of the sandbox found"
run req file_write id="$id" path=/root/big data~=12582912
is "$RC" 0 "a 12 MiB file_write succeeds"
u1=$(usage)
ok $([ $((u1 - u0)) -ge $((10 << 20)) ]; echo $?) \
	"its pages are charged to the sandbox's memory ($(((u1 - u0) >> 20)) MiB more)"
run req exec id="$id" argv[]=stat argv[]=-c argv[]=%s argv[]=/root/big
like "$OUT" '"stdout":"12582912' "a command sees the whole file"

# Writes queued when a pause comes: the pause waits for them.
pids=
for i in 1 2 3; do
	req file_write id="$id" path=/root/q$i data~=4194304 >"$T/w$i" 2>&1 &
	pids="$pids $!"
done
run req pause id="$id"
is "$RC" 0 "a pause with file writes in flight completes"
wait $pids
ok $(grep -L '"ok":true' "$T"/w1 "$T"/w2 "$T"/w3 | grep -q .; [ $? = 1 ]; echo $?) \
	"every write queued before it completed"
run req resume id="$id"
run req exec id="$id" argv[]=sh argv[]=-c argv[]='cat /root/q1 /root/q2 /root/q3 | wc -c'
like "$OUT" '"stdout":"12582912' "after the resume the files are whole"
run req file_read id="$id" path=/root/q2
like "$OUT" '"ok":true' "file operations work after the resume"
