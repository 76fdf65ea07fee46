#!/bin/bash
# A fncall zygote that dies (killed, crashed) is restarted, and calls keep
# working: those that come while it restarts wait for it, a sandbox's
# execs go on in another zygote of its runtime; only the calls it was
# running fail, with a server-side code (backend_error), never the
# client-side "unavailable".
. "$(dirname "$0")/lib.sh"

need_fncall

plan 12

# zygotes RUNTIME: this daemon's zygotes of RUNTIME (its children).
zygotes() { pgrep -P "$DSECD_PID" -f "fncall-zygote --runtime $1 " | sort; }
# wait_new RUNTIME OLD...: until RUNTIME has as many zygotes as before, none of OLD (30 s).
wait_new() {
	local rt=$1 i now pat=
	shift
	for i in "$@"; do pat="$pat -e $i"; done
	for i in $(seq 300); do
		now=$(zygotes "$rt")
		[ "$(echo "$now" | grep -c .)" = "$#" ] && ! echo "$now" | grep -qx -F $pat && return 0
		sleep 0.1
	done
	return 1
}
# gone PID...: until each PID has exited (a zombie counts: its sockets are
# closed), 5 s.  A call sent while a killed zygote still dies may be lost
# with it (backend_error); one sent after it is gone must wait for the next.
gone() {
	local p i
	for p in "$@"; do
		for i in $(seq 50); do
			[ -e "/proc/$p" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$p/stat" 2>/dev/null || break
			sleep 0.1
		done
	done
}
# dr ARGS...: dsec-run ARGS into $OUT and $RC, its output kept in $T/all.out too.
dr() { run dsec-run "$@"; printf '%s\n' "$OUT" >>"$T/all.out"; }

# One zygote per runtime: a call that comes at once must wait for the new one.
start_dsecd --set backends=fncall --set fncall.zygotes=1 || bail "dsecd did not start"
old=$(zygotes sh)
is "$(echo "$old" | grep -c .)" 1 "one sh zygote, found by its command line"
dsec-run --timeout 30 -c 'sleep 8101' >"$T/cut.out" 2>&1 &
cut=$!
# (the sandbox's sleep, not dsec-run's command line)
for i in $(seq 100); do pgrep -f '^sleep 8101' >/dev/null && break; sleep 0.1; done
kill -KILL $old
gone $old
dr -c 'echo after'
is "$RC:$OUT" "0:after" "the next call, right after the zygote is gone, waits for the new one and runs"
wait "$cut"
cat "$T/cut.out" >>"$T/all.out"
like "$(cat "$T/cut.out")" "\(backend_error\)" "the call it was running fails with backend_error"
ok $(wait_new sh $old; echo $?) "a new sh zygote replaced it"
bad=0
for i in $(seq 10); do dr -c 'echo ok'; [ "$OUT" = ok ] || bad=$((bad + 1)); done
is "$bad" 0 "10 later calls work"
run helper-req "$DSEC_HOST" info
like "$OUT" '"pool_ready":[1-9]' "info shows the restarted pool ready"

# The python3 runtime: its template is the zygote's child; killing the
# template takes the zygote down too, and both come back.
id=$(dsec-run --keep --runtime python3 -c 'open("f", "w").write("kept")' 2>&1 >/dev/null | head -1)
id=${id##* }
pyz=$(zygotes python3)
tpl=$(pgrep -P "$pyz" -f fncall_zygote.py | head -1)
[ -n "$tpl" ] && kill -KILL "$tpl"
gone $pyz
dr --id "$id" -c 'print(open("f").read())'
is "$RC:$OUT" "0:kept" "after the python template is killed the sandbox's next exec runs, files intact"
ok $(wait_new python3 $pyz; echo $?) "a new python3 zygote replaced the old one"
stop_dsecd

# Several zygotes per runtime: a sandbox whose zygote dies goes on in another.
start_dsecd --set backends=fncall --set fncall.zygotes=2 || bail "dsecd did not start"
id=$(dsec-run --keep -c 'echo kept > f' 2>&1 >/dev/null | head -1)
id=${id##* }
old=$(zygotes sh)
is "$(echo "$old" | grep -c .)" 2 "two sh zygotes"
kill -KILL $old
gone $old
bad=0; codes=
for i in $(seq 5); do
	dr --id "$id" -c 'cat f'
	[ "$OUT" = kept ] || { bad=$((bad + 1)); codes="$codes $OUT"; }
	dr -c 'echo one-shot'
	[ "$OUT" = one-shot ] || { bad=$((bad + 1)); codes="$codes $OUT"; }
done
is "$bad" 0 "with both killed, a sandbox's execs and one-shot calls go on${codes:+:$codes}"
ok $(wait_new sh $old; echo $?) "both were restarted"
run grep -c "(unavailable)" "$T/all.out"
is "$OUT" "0" "no call was told 'unavailable'"
