#!/bin/bash
# The kernel's per-user limits (inotify instances, watches, processes, pipe
# buffers, message queue bytes) count per uid: every fncall sandbox and
# every one-shot call runs as a uid of its own, so one tenant that takes
# its whole inotify allowance leaves every other tenant theirs.  A
# sandbox's uid stays the same across its execs, which keep owning its
# files.
. "$(dirname "$0")/lib.sh"

need_fncall
max=$(cat /proc/sys/fs/inotify/max_user_instances 2>/dev/null)
[ -n "$max" ] || skip_all "no fs.inotify.max_user_instances"

plan 9

start_dsecd --set backends=fncall || bail "dsecd did not start"

# HOLD=N: open N inotify instances, say how many in /work/ready (a
# sandbox) and hold them until /work/stop or 25 s.  Else open WANT and
# print how many opened and why the first failed.
PY='
import ctypes, errno, os, time
libc = ctypes.CDLL(None, use_errno=True)
n = int(os.environ.get("HOLD") or os.environ["WANT"])
fds, why = [], "-"
for i in range(n):
    fd = libc.inotify_init()
    if fd < 0:
        why = errno.errorcode.get(ctypes.get_errno(), "?")
        break
    fds.append(fd)
if os.environ.get("HOLD"):
    open("ready", "w").write(str(len(fds)))
    end = time.time() + 25
    while time.time() < end and not os.path.exists("stop"):
        time.sleep(0.05)
print(len(fds), why)
'
# Take all but 8 of the allowance (the nofile limit, 256, bounds what
# one call can hold).
hold=$((max - 8))
if [ "$hold" -gt 240 ] || [ "$hold" -lt 20 ]; then
	skip_all "fs.inotify.max_user_instances is $max: this test holds max - 8 in one call (20..240)"
fi
mk() {
	local id
	id=$(dsec-run --keep --runtime python3 -c 'pass' 2>&1 >/dev/null | head -1)
	echo "${id##* }"
}
a=$(mk); b=$(mk)
[ -n "$a" ] && [ -n "$b" ] || bail "cannot create the sandboxes"
dsec-run --id "$a" --timeout 40 --env HOLD=$hold -c "$PY" >"$T/hold.out" 2>&1 &
holder=$!
for i in $(seq 150); do
	got=$(dsec-run --id "$a" -c 'import os; print(open("ready").read() if os.path.exists("ready") else "")' 2>/dev/null)
	[ -n "$got" ] && break
	sleep 0.1
done
is "$got" "$hold" "sandbox A holds $hold inotify instances (the limit is $max per uid)"
run dsec-run --id "$b" --timeout 20 --env WANT=20 -c "$PY"
is "$OUT" "20 -" "meanwhile sandbox B still opens 20"
run dsec-run --runtime python3 --timeout 20 --env WANT=20 -c "$PY"
is "$OUT" "20 -" "... and so does a one-shot call"
run dsec-run --id "$a" --timeout 20 --env WANT=20 -c "$PY"
is "$OUT" "8 EMFILE" "A's own concurrent exec shares A's allowance (same tenant, same uid)"
dsec-run --id "$a" -c 'open("stop", "w").close()' >/dev/null 2>&1
wait "$holder"
is "$(cat "$T/hold.out")" "$hold -" "A's holder kept them to the end"

# Uids: one per tenant, stable across a sandbox's execs, which own its files.
ua=$(dsec-run --id "$a" -c 'import os; open("mine", "w"); print(os.getuid())' 2>&1)
run dsec-run --id "$a" -c 'import os; st = os.stat("mine"); print(st.st_uid, st.st_gid, os.getuid(), os.getgid())'
is "$OUT" "$ua $ua $ua $ua" "a sandbox's execs run as its uid, which owns its files"
ub=$(dsec-run --id "$b" -c 'import os; print(os.getuid())' 2>&1)
ok $([ -n "$ua" ] && [ -n "$ub" ] && [ "$ua" != "$ub" ]; echo $?) "two sandboxes have two uids ($ua, $ub)"
# Concurrent one-shot calls: each its own.
pids=
for i in $(seq 4); do
	dsec-run --runtime python3 -c 'import os, time; time.sleep(0.5); print(os.getuid())' >"$T/u.$i" 2>&1 &
	pids="$pids $!"
done
wait $pids
is "$(cat "$T"/u.* | sort -u | grep -v -e "^$ua\$" -e "^$ub\$" | wc -l)" 4 \
	"4 concurrent one-shot calls run as 4 uids, none a sandbox's"
run dsec-run -c 'id -un; touch /tmp/x; stat -c %U /tmp/x'
is "$(echo $OUT)" "sandbox sandbox" "a call's uid has a name (/etc/passwd lists the range)"
