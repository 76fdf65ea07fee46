#!/bin/bash
# dsecd reaps each child through its pidfd (backends/common/be_child.c), never
# with waitpid(-1), which walks every sandbox's init.  What every kind of
# child leaves when it ends: no zombie of dsecd's after commands, timeouts,
# shell sessions (closed, exited, killed with their sandbox), file servers,
# terminals, an init killed from outside, fncall calls and destroys; and no
# child left over once the sandboxes are gone.
. "$(dirname "$0")/lib.sh"

need_container
need_cmd helper-req

plan 9

start_dsecd --set backends=fncall,container --set default_backend=container
req() { helper-req "$DSEC_HOST" "$@"; }
# children STATE-REGEX: the pids of dsecd's children whose state matches.
children() {
	local f rest st pp
	for f in /proc/[0-9]*/stat; do
		rest=$(cat "$f" 2>/dev/null) || continue
		rest=${rest##*) }
		st=${rest%% *}; rest=${rest#* }; pp=${rest%% *}
		[ "$pp" = "$DSECD_PID" ] && [[ $st =~ $1 ]] && { f=${f#/proc/}; echo "${f%/stat}"; }
	done
}
# no_zombies DESC: within 5 s, dsecd has no zombie child.
no_zombies() {
	local z
	for i in $(seq 50); do
		z=$(children '^Z$')
		[ -z "$z" ] && break
		sleep 0.1
	done
	is "$(echo $z)" "" "$1"
}

run req create backend=container
id=$(get id)
for i in 1 2 3; do req exec id="$id" cmd="echo $i" > /dev/null; done
req exec id="$id" cmd='sleep 30' timeout=0.3 > /dev/null
req exec id="$id" cmd='sleep 30 & echo bg' > /dev/null
no_zombies "commands, a timed-out one and one that left a process behind: no zombie"

req session_open id="$id" session=a > /dev/null
req session_exec id="$id" session=a cmd='cd /tmp' > /dev/null
req session_close id="$id" session=a > /dev/null
req session_open id="$id" session=b > /dev/null
req session_exec id="$id" session=b cmd='exit 3' > /dev/null
req session_open id="$id" session=c > /dev/null
no_zombies "shell sessions closed and exited: no zombie"

req file_write id="$id" path=/tmp/x data=hello > /dev/null
run req file_read id="$id" path=/tmp/x
like "$OUT" 'hello' "a file written and read back (the file server ran)"
printf 'echo $((6*7))\nexit 3\n' | dsec-run --id "$id" -t -- /bin/sh > /dev/null 2>&1
req destroy id="$id" > /dev/null
no_zombies "a terminal, then destroy with a session and the file server open: no zombie"

run req create backend=container
id=$(get id)
req exec id="$id" cmd=true > /dev/null
init=$(for d in $(container_cgroups); do cat "$d"/sb.*/cgroup.procs; done 2>/dev/null | head -1)
kill -KILL "$init"
for i in $(seq 50); do
	run req exec id="$id" cmd=true
	[ "$(get error code)" = sandbox_lost ] && break
	sleep 0.1
done
is "$(get error code)" "sandbox_lost" "an init killed from outside: the sandbox is lost"
no_zombies "the killed init is reaped"
req destroy id="$id" > /dev/null

for i in 1 2 3 4; do dsec-run --backend container -- true; done
for i in 1 2; do dsec-run --backend fncall -- true; done
no_zombies "sandboxes made and destroyed by dsec-run, both backends: no zombie"
sleep 0.5
is "$(for p in $(children .); do cat /proc/$p/comm; done 2>/dev/null | grep -c container)" 0 \
	"no container process is left a child of dsecd once its sandboxes are gone"

stop_dsecd
is "$?" 0 "dsecd stops cleanly"
