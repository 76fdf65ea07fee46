#!/bin/bash
# dsecd raises its soft limit of descriptors to the hard one at start (a
# node full of sandboxes runs out of descriptors first), says so in its
# log, and info reports its process limits and the room they and the
# kernel's leave for more sandboxes.
. "$(dirname "$0")/lib.sh"

need_cmd helper-req
[ -e "$TOP/t/test.so" ] || skip_all "needs t/test.so (make tests)"
hard=$(ulimit -Hn)
[ "$hard" != unlimited ] && [ "$hard" -gt 600 ] || skip_all "needs a hard descriptor limit over 600 (it is $hard)"

plan 9

ulimit -Sn 512
start_dsecd --backend-dir "$TOP/t" --set backends=test --set default_backend=test
run helper-req "$DSEC_HOST" info
like "$OUT" "\"limits\":\\{\"nofile\":$hard,\"nofile_hard\":$hard,\"nproc\":[0-9]+," \
	"info: the soft descriptor limit is the hard one ($hard), not the 512 it was started with"
like "$(cat "$T/dsecd.log")" "soft limit raised from 512 to $hard" "... and the log says so"
is "$(awk '/^Max open files/ { print $4 }' "/proc/$DSECD_PID/limits")" "$hard" "... as the kernel has it"

lim() {	# lim FIELD: that field of info's limits
	helper-req "$DSEC_HOST" info | /usr/bin/python3 -c 'import json, sys
print(json.load(sys.stdin)["result"]["limits"][sys.argv[1]])' "$1"
}
is "$(lim pid_max):$(lim threads_max)" \
	"$(cat /proc/sys/kernel/pid_max):$(cat /proc/sys/kernel/threads-max)" \
	"info: the kernel's pid_max and threads-max"
# (Counts the host changes while we look: within what it said before and
# after, with room for what a test left exiting beside us.)
host_tasks() { cut -d/ -f2 /proc/loadavg | cut -d' ' -f1; }
t0=$(host_tasks) tasks=$(lim tasks) t1=$(host_tasks)
(( tasks > 0 && tasks * 2 >= t0 && tasks <= t1 * 2 ))
ok $? "info: the host's tasks ($tasks, loadavg says $t0, then $t1)"
if awk '$1 == "memory" && $4 == 1 { f = 1 } END { exit !f }' /proc/cgroups; then
	memcgs() { awk '$1 == "memory" { print $3 }' /proc/cgroups; }
	k0=$(memcgs) n=$(lim memory_cgroups) k1=$(memcgs)
	(( $(lim memory_cgroups_max) == 65535 && n > 0 && n * 2 >= k0 && n <= k1 * 2 )); ok $? \
		"info: memory cgroups ($n, /proc/cgroups says $k0, then $k1) of the kernel's 65535"
else
	skip "no memory controller"
fi
# With the daemon's soft descriptor limit lowered, descriptors are what runs out
# first, and the room is what is left of them.
prlimit --pid "$DSECD_PID" --nofile=300:$hard
sleep 1.2	# the count of open descriptors is at most a second old
fds=$(lim descriptors) real=$(ls "/proc/$DSECD_PID/fd" | wc -l)
(( fds >= real - 3 && fds <= real + 3 ))
ok $? "info: the daemon's open descriptors ($fds, /proc says $real)"
is "$(lim room_by):$(lim room)" "descriptors:$((300 - fds - 64))" \
	"info: room for 300 - open - 64 spare descriptors' worth of sandboxes"
prlimit --pid "$DSECD_PID" --nofile=$hard:$hard	# the soft one back
sleep 1.2
by=$(lim room_by) room=$(lim room)
(( room > 300 )); ok $? "with the limit back at $hard, the room grows ($room, by $by)"
