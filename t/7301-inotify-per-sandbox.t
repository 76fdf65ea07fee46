#!/bin/bash
# Per-user kernel limits are each sandbox's own: a sandbox's user namespace
# is owned by the sandbox's own host uid (the base of its id range), not by
# root, and the kernel charges what a namespace's users hold (here inotify
# instances, fs.inotify.max_user_instances = 128) to that owner.  One
# sandbox holding 120 used to leave 8 for the host's root and every other
# sandbox.
. "$(dirname "$0")/lib.sh"

need_container
need_cmd python3

plan 6

start_dsecd --set backends=container || bail "dsecd did not start"
export HELPER_REQ_TIMEOUT=60
req() { helper-req "$DSEC_HOST" "$@"; }
# inotify N SECONDS: open up to N inotify instances, print how many, hold them.
HOLD='import ctypes, sys, time
libc = ctypes.CDLL(None)
n = 0
for i in range(int(sys.argv[1])):
    if libc.inotify_init() < 0:
        break
    n += 1
print(n, flush=True)
time.sleep(float(sys.argv[2]))'
max=$(cat /proc/sys/fs/inotify/max_user_instances)
[ "$max" -ge 121 ] || skip_all "fs.inotify.max_user_instances is $max"

run req create backend=container
a=$(get id)
run req create backend=container
b=$(get id)
ainit=$(pgrep -P "$DSECD_PID" -x dsec-init | head -1)
owner=$(python3 -c '
import fcntl, os, struct, sys
fd = os.open("/proc/%s/ns/user" % sys.argv[1], os.O_RDONLY)
buf = bytearray(4)
fcntl.ioctl(fd, 0xb704, buf)	# NS_GET_OWNER_UID
print(struct.unpack("I", buf)[0])' "$ainit" 2>&1)
ok $([ "$owner" -gt 0 ] 2>/dev/null; echo $?) "a sandbox's user namespace is owned by a uid of its own ($owner), not root"

run req exec_start id="$a" argv[]=python3 argv[]=-c "argv[]=$HOLD" argv[]=120 argv[]=60
x=$(get exec)
held=
for i in $(seq 50); do
	run req exec_read id="$a" exec="$x" wait%=5
	held="$held$(get stdout)"
	[ -n "$held" ] && break
done
is "$(echo $held)" "120" "sandbox A opens and holds 120 inotify instances"
run req exec id="$b" argv[]=python3 argv[]=-c "argv[]=$HOLD" argv[]=120 argv[]=0
is "$(echo $(get stdout))" "120" "sandbox B still opens 120 of its own"
run python3 -c "$HOLD" 20 0
is "$OUT" "20" "the host's root still opens its own"
run req exec_signal id="$a" exec="$x" signal=KILL
for i in $(seq 50); do
	run req exec_read id="$a" exec="$x" wait%=5
	[ "$(get done)" = true ] && break
done
is "$(get signal)" "9" "A's holder ends"
for s in "$a" "$b"; do req destroy id="$s" >/dev/null; done
stop_dsecd
is "$?" 0 "dsecd shuts down cleanly"
