#!/bin/bash
# SIGTERM while commands run: every one ends at once with a clear
# shutting_down error, whichever backend runs it (a one-shot fncall call,
# an exec in an fncall sandbox, a container command), and the daemon
# exits without waiting out its shutdown grace or resetting clients.
. "$(dirname "$0")/lib.sh"

need_fncall

container=1
[ -e "$TOP/backends/container.so" ] && [ -x "$TOP/build/libexec/container-init" ] || container=
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null
grep -qw overlay /proc/filesystems || container=
backends=fncall${container:+,container}

plan 8

# A grace far longer than the bounded waits below: a daemon that waits it
# out, or a command that runs to its end, fails the test.
start_dsecd --set backends=$backends --set shutdown_grace=60 || bail "dsecd did not start"
id=$(dsec-run --backend fncall --keep -c 'true' 2>&1 >/dev/null | head -1)
id=${id##* }
dsec-run --backend fncall --timeout 120 -- sleep 8102 >"$T/call.out" 2>&1 &
p1=$!
dsec-run --backend fncall --runtime python3 --timeout 120 -c 'import time; time.sleep(8103)' >"$T/py.out" 2>&1 &
p2=$!
dsec-run --id "$id" --timeout 120 -- sleep 8104 >"$T/exec.out" 2>&1 &
p3=$!
pids="$p1 $p2 $p3"
if [ -n "$container" ]; then
	dsec-run --backend container --timeout 120 -- sleep 8105 >"$T/ct.out" 2>&1 &
	pids="$pids $!"
fi
# The sleeps (not the python one, which has no command line of its own).
n=$(( $(echo $pids | wc -w) - 1 ))
for i in $(seq 100); do
	[ "$(pgrep -c -f '^sleep 810[2-5]')" -ge "$n" ] && break
	sleep 0.1
done
is "$(pgrep -c -f '^sleep 810[2-5]')" "$n" "$n sleep commands are running"

kill -TERM "$DSECD_PID"
# Bounded waits, far below the 60 s grace and the 120 s timeouts.
for i in $(seq 100); do kill -0 "$DSECD_PID" 2>/dev/null || break; sleep 0.1; done
ok $(! kill -0 "$DSECD_PID" 2>/dev/null; echo $?) "dsecd exits at once, without waiting out its grace"
wait "$DSECD_PID" 2>/dev/null
is "$?" 0 "... cleanly"
DSECD_PID=
for i in $(seq 50); do
	left=0
	for p in $pids; do kill -0 "$p" 2>/dev/null && left=$((left + 1)); done
	[ "$left" = 0 ] && break
	sleep 0.1
done
is "$left" 0 "every client got its answer"
want="node '[^']*' is shutting down: the command was cut off \(shutting_down\)"
like "$(cat "$T/call.out")" "$want" "a one-shot fncall call: shutting_down"
like "$(cat "$T/py.out")" "$want" "a one-shot python3 call: shutting_down"
like "$(cat "$T/exec.out")" "$want" "an exec in an fncall sandbox: shutting_down"
if [ -n "$container" ]; then
	like "$(cat "$T/ct.out")" "$want" "a container command: shutting_down, the same way"
else
	skip "needs the container backend and overlayfs"
fi
wait $pids 2>/dev/null || true
