#!/bin/bash
# fncall through dsecd and dsec-run: isolation and cleanup seen end to end.
. "$(dirname "$0")/lib.sh"

need_root
need_cmd dsec-run
need_cmd dsecd
need_cmd helper-req
[ -e "$TOP/backends/fncall.so" ] || skip_all "needs backends/fncall.so (make)"

plan 18

if ! start_dsecd; then
	echo "Bail out! dsecd did not start"
	exit 1
fi

run dsec-run -c 'echo hi; exit 3'
is "$RC:$OUT" "3:hi" "sh code: output and exit status"
# Each call has a uid of its own, from fncall.uid_base (2000000000) on.
run dsec-run --runtime python3 -c 'import os; print(0 <= os.getuid() - 2000000000 < 8192, len([p for p in os.listdir("/proc") if p.isdigit()]) <= 3)'
is "$RC:$OUT" "0:True True" "python3 code runs unprivileged (a uid of the range) in its own pid namespace"
run dsec-run -c 'ls /proc | grep -c "^[0-9]"'
ok $(( OUT <= 4 ? 0 : 1 )) "only the call's own processes are visible ($OUT)"
run dsec-run -c 'grep -c : /proc/net/dev'
is "$OUT" "1" "only the loopback interface"
run dsec-run -c 'touch /etc/x /usr/x /x 2>/dev/null; echo $?'
is "$OUT" "1" "the root is read-only"
printf 'from-stdin' > "$T/in"
run dsec-run --stdin "$T/in" -- cat
is "$OUT" "from-stdin" "stdin is delivered"
run dsec-run --env FOO=bar -c 'echo $FOO'
is "$OUT" "bar" "env is delivered"

# The whole tree dies at the timeout, setsid and double fork included.
run dsec-run --timeout 1 -c 'setsid sleep 9871 & (setsid sh -c "sleep 9872 &" &); sleep 9873'
is "$RC" 124 "timeout: dsec-run exits 124"
sleep 0.5
run pgrep -f 'sleep 987[123]'
is "$RC" 1 "no process of the timed-out call is left on the host"

# Nothing passes between calls.
dsec-run -c 'echo x > /tmp/left; sleep 9874 >/dev/null 2>&1 &' >/dev/null 2>&1
run dsec-run -c 'ls -A /tmp; pgrep sleep | wc -l'
is "$OUT" "0" "a later call sees no file and no process of an earlier one"

# Units serve many calls; those a burst added end after 10 s idle.
units() { for z in $(pgrep -P "$DSECD_PID"); do pgrep -P "$z"; done | wc -l; }
# (after the earlier tests a unit may still be on its way: wait until the
# count holds for a second)
before=$(units)
for _ in $(seq 10); do sleep 1; now=$(units); [ "$now" = "$before" ] && break; before=$now; done
dsec-bench -c 16 -n 160 --backend fncall --runtime sh >/dev/null 2>&1
burst=$(units)
# (they retire 10 s after their last call: polled, up to 15 s)
for _ in $(seq 75); do after=$(units); [ "$after" -le "$before" ] && break; sleep 0.2; done
ok $(( burst > after && after <= before ? 0 : 1 )) "units added by a burst retire when idle ($before, $burst, $after)"
# ... and info's pool_ready says so (it counted the burst's units for good).
pool() { helper-req "$DSEC_HOST" info | grep -o "\"pool_$1\":[0-9]*" | cut -d: -f2; }
for _ in $(seq 100); do [ "$(pool ready)" = "$(pool target)" ] && break; sleep 0.2; done
is "$(pool ready)" "$(pool target)" "pool_ready returns to pool_target after the burst"

# A sandbox keeps its files, not its processes.
id=$(dsec-run --keep -c 'echo kept > /work/f' 2>&1 >/dev/null | head -1)
id=${id##* }
run dsec-run --id "$id" -c 'cat f'
is "$OUT" "kept" "sandbox files persist between execs"

# Shutdown leaves nothing behind.
stop_dsecd
ok $? "dsecd stops cleanly"
run pgrep -f "fncall-zygote.*$T"
is "$RC" 1 "no zygote or unit left"
left=$(grep -c "$T/state" /proc/self/mountinfo)
is "$left" "0" "no scratch mount left"

# Configuration errors of the backend stop the daemon with a clear message.
run timeout 60 "$TOP/dsecd/dsecd" --foreground --config /dev/null --state-dir "$T/s2" --listen "ipc://$T/s2.sock" \
	--backend-dir "$TOP/backends" --helper-dir "$TOP/build/libexec" --set backends=fncall --set fncall.zygotes=1000
like "$RC:$(echo "$OUT" | tr '\n' ' ')" "^1:.*fncall.zygotes must be 0 \(auto\) to 256" "fncall.zygotes over 256 is refused"
run timeout 60 "$TOP/dsecd/dsecd" --foreground --config /dev/null --state-dir "$T/s3" --listen "ipc://$T/s3.sock" \
	--backend-dir "$TOP/backends" --helper-dir "$TOP/build/libexec" --set backends=fncall --set fncall.nosuch=1
like "$RC:$(echo "$OUT" | tr '\n' ' ')" "^1:.*fncall.nosuch" "an unknown fncall key is refused"
