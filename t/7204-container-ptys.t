#!/bin/bash
# A sandbox cannot take the node's terminals: each has a devpts instance of
# its own holding at most container.ptys of them, so one that opens all it
# can leaves every other sandbox its own (the kernel's kernel.pty.max stays
# shared: the cap keeps one sandbox from taking it all).
. "$(dirname "$0")/lib.sh"

need_container
need_cmd python3

plan 4

start_dsecd --set backends=container --set container.ptys=6 || bail "dsecd did not start"
req() { helper-req "$DSEC_HOST" "$@"; }
mk() { req create backend=container | sed -n 's/.*"id":"\([^"]*\)".*/\1/p'; }
# Opens terminals until it cannot (40 at most), says how many and why it
# stopped, then holds them for HOLD seconds.
GRAB='import os, sys, time, errno
fds, why = [], "-"
for i in range(40):
    try:
        fds.append(os.openpty())
    except OSError as e:
        why = errno.errorcode.get(e.errno, str(e.errno)); break
print(len(fds), why, flush=True)
time.sleep(float(sys.argv[1]))'

a=$(mk)
b=$(mk)
[ -n "$a" ] && [ -n "$b" ] || bail "cannot create sandboxes"
run dsec-run --id "$a" -- python3 -c "$GRAB" 0
is "$OUT" "6 ENOSPC" "a sandbox opens container.ptys (6) terminals, then ENOSPC"

# a holds all of its own while b opens its.
req session_open id="$a" session=hold >/dev/null
run req session_exec id="$a" session=hold cmd="python3 -c '$GRAB' 30 > /tmp/grab & sleep 1; cat /tmp/grab"
is "$(get stdout)" "6 ENOSPC" "... and holds them in the background"
run dsec-run --id "$b" -- python3 -c "$GRAB" 0
is "$OUT" "6 ENOSPC" "another sandbox still gets its own 6"
run dsec-run --id "$b" -- sh -c 'grep -o "max=[0-9]*" /proc/self/mountinfo | sort -u'
is "$OUT" "max=6" "its devpts is an instance of its own with max=6"
