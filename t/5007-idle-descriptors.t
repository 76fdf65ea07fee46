#!/bin/bash
# An idle container sandbox holds one of dsecd's descriptors (its control
# socket): its init's pidfd, cgroup directories, root and network namespace
# are opened when an operation needs them.  So a daemon whose limit is 500
# descriptors holds 300 sandboxes, more than 500 / 2, and every one of them
# still works; destroying them gives the descriptors back.  A descriptor
# dsecd inherits high up does not put the sandboxes' sockets below the
# entries every spawn copies (spawn.c's slots).
. "$(dirname "$0")/lib.sh"

need_container
need_cmd prlimit
N=300
LIMIT=500
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] || [ "$hard" -ge "$LIMIT" ] ||
	skip_all "needs a hard descriptor limit of $LIMIT (it is $hard)"

plan 11

fds() { ls "/proc/$DSECD_PID/fd" | wc -l; }
exec 400</dev/null	# inherited by dsecd, as from a careless parent
start_dsecd --set backends=container --set default_backend=container \
	--set max_sandboxes=$((N + 10)) --set container.max_sandboxes=$((N + 10)) \
	--set container.memory=64M
# Its limit, soft and hard, is LIMIT from now on: it cannot raise it.
prlimit --pid "$DSECD_PID" --nofile="$LIMIT:$LIMIT" || bail "cannot lower dsecd's limit"
is "$(awk '/^Max open files/ { print $4 }' "/proc/$DSECD_PID/limits")" "$LIMIT" \
	"dsecd runs with a limit of $LIMIT descriptors"

# One sandbox with an exec behind it (its spare exec group) and a file
# read through the file server, then the rest.
first=$(new_container)
dsec-run --id "$first" -c 'echo x > /tmp/f' >/dev/null 2>&1
helper-req -q "$DSEC_HOST" file_read id="$first" path=/tmp/f >/dev/null
base=$(fds)
made=1 failed=0
for i in $(seq 2 $N); do
	id=$(new_container)
	if [[ $id =~ ^[^\ ]+:[0-9a-f]{16}$ ]]; then
		made=$((made + 1)) last=$id
	else
		failed=$((failed + 1))
	fi
done
is "$made:$failed" "$N:0" \
	"$N sandboxes made under a limit of $LIMIT descriptors ($((LIMIT / 2)) at 2 each)"
now=$(fds)
per=$(( (now - base) * 100 / (N - 1) ))
# The spawn slots: the lowest run of /dev/null entries from 32 on; what is
# below them is copied into each child dsecd starts.
below=$(for f in /proc/$DSECD_PID/fd/*; do
	printf '%s %s\n' "${f##*/}" "$(readlink "$f")"; done | sort -n | awk '
	$1 >= 32 && $2 == "/dev/null" { run = $1 == prev + 1 ? run + 1 : 1; prev = $1
		if (run == 20) { slot0 = $1 - 19; exit } }
	END { print slot0 + 0 }')
socks=$(for f in /proc/$DSECD_PID/fd/*; do
	n=${f##*/}; [ "$n" -lt "${below:-0}" ] && readlink "$f"; done | grep -c '^socket:')
ok "$([ "$below" -ge 32 ] && [ "$below" -le 64 ] && [ "$socks" -le 10 ]; echo $?)" \
	"spawns copy few descriptors: slots at $below (fd 400 inherited), $socks sockets below them"
diag "dsecd descriptors: $base with one sandbox, $now with $N: $per/100 per sandbox"
ok "$([ "$per" -le 100 ]; echo $?)" "an idle sandbox holds one descriptor ($per/100)"

run dsec-run --id "$first" -c 'cat /tmp/f; echo y >> /tmp/f; wc -l < /tmp/f'
is "$(echo $OUT)" "x 2" "the first sandbox still runs commands and keeps its files"
run helper-req "$DSEC_HOST" usage id="$last"
like "$OUT" '"memory":[1-9]' "usage of the last reads its cgroup"
run helper-req "$DSEC_HOST" pause id="$last"
like "$OUT" '"ok":true' "pause (freeze through a cgroup opened for it)"
run helper-req "$DSEC_HOST" resume id="$last"
run dsec-run --id "$last" -- echo after
is "$RC:$OUT" "0:after" "resume, then an exec"

helper-req "$DSEC_HOST" list > "$T/list"
ids=$(grep -o '"id":"[^"]*:[0-9a-f]\{16\}"' "$T/list" | cut -d'"' -f4)
gone=0
for id in $ids; do
	helper-req -q "$DSEC_HOST" destroy id="$id" >/dev/null && gone=$((gone + 1))
done
is "$gone" "$N" "list names all $N and each is destroyed"
# Up to 64 of their network namespaces are kept for new sandboxes; the
# others are dropped together once destroys stop coming (0.2 s).
for i in $(seq 50); do
	nets=$(for f in /proc/$DSECD_PID/fd/*; do readlink "$f"; done 2>/dev/null | grep -c '^net:')
	[ "$nets" -le 65 ] && break
	sleep 0.1
done
end=$(fds)
ok "$([ "$nets" -le 65 ] && [ "$((end - nets))" -lt "$base" ]; echo $?)" \
	"destroying them gives the descriptors back ($now -> $end, $nets network namespaces kept)"
stop_dsecd
is "$?" 0 "dsecd stops on SIGTERM"
