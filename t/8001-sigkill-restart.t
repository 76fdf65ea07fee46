#!/bin/bash
# dsecd killed with SIGKILL (a crash, an OOM kill of the daemon, a node
# agent's hard restart) and started again on the same state directory:
# nothing it ran may survive it, and the new daemon removes every cgroup and
# directory the dead one left, then serves.  (Sandboxes are not re-adopted:
# see dsec-container(7), "Destroy".)
. "$(dirname "$0")/lib.sh"

need_root
need_cmd dsec-run
need_cmd helper-req
[ -e "$TOP/backends/container.so" ] || skip_all "needs backends/container.so (make)"
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null
grep -qw overlay /proc/filesystems || skip_all "needs overlayfs"

plan 9

cgdirs() { find /sys/fs/cgroup -maxdepth 4 -type d -name "dsec-*.$1" 2>/dev/null; }
start_dsecd --set backends=fncall,container || bail "dsecd did not start"
old=$DSECD_PID
for i in 1 2 3; do
	dsec-run --backend container --keep -c "echo $i > /root/f" >/dev/null 2>&1 || bail "create $i"
done
dsec-run --backend container --timeout 60 -c 'sleep 8123' >/dev/null 2>&1 &
runner=$!
dsec-run --backend fncall --timeout 60 -c 'sleep 8124' >/dev/null 2>&1 &
runner2=$!
for i in $(seq 100); do
	pgrep -f 'sleep 812[3]' >/dev/null && pgrep -f 'sleep 812[4]' >/dev/null && break
	sleep 0.1
done
ok $(pgrep -f 'sleep 812[34]' >/dev/null; echo $?) "commands are running in both backends"
ok $([ -n "$(cgdirs "$old")" ]; echo $?) "the daemon has cgroups"

kill -KILL "$old"
wait "$old" 2>/dev/null
DSECD_PID=
left() {
	pgrep -a -f 'sleep 812[34]'
	for d in $(cgdirs "$old"); do find "$d" -name cgroup.procs -exec cat {} +; done 2>/dev/null
}
for i in $(seq 50); do [ -z "$(left)" ] && break; sleep 0.1; done
is "$(left)" "" "no sandbox process or zygote outlives the killed daemon (its cgroups are empty)"
run grep -c "$T/state" /proc/self/mountinfo
is "$OUT" "0" "no mount of the dead daemon is left in the host's mount table"
kill "$runner" "$runner2" 2>/dev/null; wait "$runner" "$runner2" 2>/dev/null

start_dsecd --set backends=fncall,container || bail "dsecd did not restart"
run dsec-run --backend container -c 'cat /root/f 2>/dev/null || echo fresh'
is "$OUT" "fresh" "the restarted daemon serves new sandboxes"
is "$(cgdirs "$old")" "" "the restarted daemon removed the dead one's cgroups"
run sh -c "ls -d '$T'/state/backends/*/sb.* 2>/dev/null | wc -l"
is "$OUT" "0" "... and its sandbox directories"
run helper-req "$DSEC_HOST" list
like "$OUT" '"sandboxes":\[\]' "the dead daemon's sandboxes are not listed"
stop_dsecd
is "$?" 0 "the restarted daemon shuts down cleanly"
