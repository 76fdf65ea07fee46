#!/bin/bash
# container streaming exec through dsecd (exec_start, exec_read, exec_write,
# exec_signal, exec_resize) and dsec-run --stream / -t: output arrives
# before the command ends, stdin, signals, timeouts kill the tree, exit
# status, a slow reader loses nothing while dsecd's memory stays bounded,
# many streams at once, unknown ids, destroy and vanished clients leave
# nothing behind; on a pty: a terminal of the sandbox's own, its size,
# resizes.
. "$(dirname "$0")/lib.sh"

need_container

plan 57

if ! start_dsecd --set backends=fncall,container --set stream_grace=2; then
	echo "Bail out! dsecd did not start"
	exit 1
fi
export HELPER_REQ_TIMEOUT=60
req() { helper-req "$DSEC_HOST" "$@"; }
pipes() { ls -l /proc/$DSECD_PID/fd | grep -c -e pipe -e ptmx; }
rss() { awk '/^VmRSS/ { print $2 }' /proc/$DSECD_PID/status; }
now() { date +%s.%N; }
# start ARGS...: exec_start in sandbox $id; $x names it.
start() { run req exec_start id="$id" "$@"; x=$(get exec); }
# drain: exec_read $x until done; $ALL = its stdout, $ALLERR its stderr
# (each comes in whichever replies it was ready for: collect both from
# every one), $OUT the last reply.
drain() {
	local i
	ALL=
	ALLERR=
	for i in $(seq 200); do
		run req exec_read id="$id" exec="$x" wait%=10
		[ "$RC" = 0 ] || return 1
		ALL+=$(get stdout; echo .)
		ALL=${ALL%.}
		ALLERR+=$(get stderr; echo .)
		ALLERR=${ALLERR%.}
		if [ "$(get done)" = true ]; then
			ALL=${ALL%$'\n'}
			ALLERR=${ALLERR%$'\n'}
			return 0
		fi
	done
	return 1
}

run req create backend=container
id=$(get id)
fd0=$(pipes)

# Output as it comes.
start code='echo a; sleep 2; echo b'
like "$x" '^x[0-9]+$' "exec_start names the command ($x)"
t0=$(now)
run req exec_read id="$id" exec="$x" wait%=10
t1=$(now)
is "$(get stdout):$(get done)" "a:false" "the first read returns the first line, not done"
ok $(awk "BEGIN { exit !($t1 - $t0 < 1.5) }"; echo $?) "it comes well before the command ends"
drain
is "$ALL" "b" "the rest comes later"
is "$(get done):$(get exit_code):$(get timed_out)" "true:0:false" "the last read says done, exit 0"
ok $(awk "BEGIN { exit !($(get duration) >= 2) }"; echo $?) "duration is the command's ($(get duration) s)"
run req exec_read id="$id" exec="$x"
is "$(get error code)" "not_found" "a command read to its end is gone"
run req exec_read id="$id" exec=x999999
like "$(get error code):$(get error message)" "not_found:no exec 'x999999'" "an unknown exec id is not_found, named"
run req exec_read id="$id"
is "$(get error code)" "bad_request" "exec_read without 'exec' is a bad request"

# A held read does not hold up anyone else.
start code='sleep 30'
req exec_read id="$id" exec="$x" wait%=2 > "$T/held.out" &
held=$!
sleep 0.3
t0=$(now)
run req ping
t1=$(now)
ok $(awk "BEGIN { exit !($RC == 0 && $t1 - $t0 < 1) }"; echo $?) "a ping is answered while an exec_read waits"
wait $held
like "$(cat "$T/held.out")" '"stdout":"","stderr":"","done":false' "the wait runs out with empty output"
req exec_signal id="$id" exec="$x" signal=KILL >/dev/null
drain

# stdin
start argv[]=cat stdin_open?=true
run req exec_write id="$id" exec="$x" data=hello
is "$RC" 0 "exec_write queues stdin"
run req exec_read id="$id" exec="$x" wait%=5
is "$(get stdout)" "hello" "the command gets it while it runs"
run req exec_write id="$id" exec="$x" data=world eof?=true
drain
is "$ALL:$(get exit_code)" "world:0" "eof closes its stdin: cat ends"
start argv[]=cat stdin=abc
drain
is "$ALL" "abc" "stdin given to exec_start, then EOF"
start argv[]=true stdin_open?=true
sleep 0.5
run req exec_write id="$id" exec="$x" data=late
is "$(get error code)" "invalid" "exec_write after the command exited is refused"
drain

# Signals and status.
start code='trap "echo got; exit 3" TERM; echo ready; while :; do sleep 0.1; done'
run req exec_read id="$id" exec="$x" wait%=5
run req exec_signal id="$id" exec="$x" signal=TERM
is "$RC" 0 "exec_signal by name"
drain
is "$ALL:$(get exit_code)" "got:3" "the command's trap ran: exit 3"
start code='echo started; sleep 100'
run req exec_read id="$id" exec="$x" wait%=5
run req exec_signal id="$id" exec="$x" signal#=9
drain
is "$(get exit_code):$(get signal)" "-1:9" "exec_signal by number: killed by signal 9"
# A signal sent as soon as the command is started, before its group
# exists, waits for it and is delivered: none is lost, none is refused.
lost=
for i in $(seq 20); do
	start argv[]=sleep argv[]=100
	run req exec_signal id="$id" exec="$x" signal=TERM
	[ "$RC" = 0 ] || lost="$lost $i:$(get error code)"
	run req exec_read id="$id" exec="$x" wait%=5
	[ "$(get signal)" = 15 ] || { lost="$lost $i"; req exec_signal id="$id" exec="$x" signal=KILL >/dev/null; drain; }
done
is "$lost" "" "a signal sent at once is accepted and ends every command"
start code='sleep 100'
run req exec_signal id="$id" exec="$x" signal=NOPE
is "$(get error code)" "invalid" "an unknown signal name is invalid"
req exec_signal id="$id" exec="$x" signal=KILL >/dev/null
drain
start code='echo out; echo err >&2; exit 7'
drain
is "$ALL:$ALLERR:$(get exit_code)" "out:err:7" "stderr apart, exit status 7"

# The timeout kills the whole tree.
start code='sleep 100 & echo $! > /tmp/bg; sleep 100' timeout%=1
drain
is "$(get timed_out):$(get signal)" "true:9" "the timeout ends the command"
run req exec id="$id" code='kill -0 $(cat /tmp/bg)'
ok $([ "$(get exit_code)" != 0 ]; echo $?) "and its background child"

# A slow reader loses nothing, and dsecd does not buffer without bound.
seq 1 200000 > "$T/seq.want"
dsec-run --id "$id" --stream --output-cap 64k -c 'seq 1 200000' | { sleep 2; cat; } > "$T/seq.got"
ok $(cmp -s "$T/seq.want" "$T/seq.got"; echo $?) "a reader slower than the command gets every byte"
r0=$(rss)
# (a, not NUL: the replies are read as JSON here, where NUL takes 6 bytes)
start code="head -c 300000000 /dev/zero | tr '\\0' a; echo end" output_cap#=1048576 timeout%=30
sleep 3
r1=$(rss)
ok $([ $((r1 - r0)) -lt 20000 ]; echo $?) "an unread 300 MB of output grows dsecd by $((r1 - r0)) kB only"
run req exec_read id="$id" exec="$x" wait%=5
is "$(printf '%s' "$OUT" | grep -o '"stdout":"a*"' | wc -c):$(get done)" "$((1048576 + 12)):false" \
	"a read takes one buffer's worth; the command waits"
req exec_signal id="$id" exec="$x" signal=KILL >/dev/null
# To its end (get's regular expression, and bash's own matching, take
# seconds over a megabyte: grep -F does not).
done_in() { printf '%s' "$OUT" | grep -qF '"done":true'; }
for i in $(seq 50); do
	run req exec_read id="$id" exec="$x" wait%=10
	done_in && break
done
ok $(done_in; echo $?) "... until it is killed: then it ends"

# Many streams at once.
pids=
for i in $(seq 24); do
	dsec-run --id "$id" --stream -c "for j in 1 2 3; do echo $i.\$j; sleep 0.2; done" \
		> "$T/many.$i" 2>&1 &
	pids="$pids $!"
done
wait $pids
bad=0
for i in $(seq 24); do
	[ "$(cat "$T/many.$i")" = "$(printf '%s.1\n%s.2\n%s.3' $i $i $i)" ] || bad=$((bad + 1))
done
is "$bad" 0 "24 streams at once each get their own output"

# dsec-run --stream: status and signals.
dsec-run --id "$id" --stream -c 'echo x; exit 4' > /dev/null
is "$?" 4 "dsec-run --stream exits with the command's status"
dsec-run --id "$id" --stream --timeout 1 -c 'sleep 10' 2>/dev/null
is "$?" 124 "and 124 on timeout"
dsec-run --id "$id" --stream -c 'trap "echo int; exit 5" INT; echo up; sleep 10 & wait' \
	> "$T/int.out" &
pr=$!
sleep 1.5
kill -INT $pr
wait $pr
rc=$?
is "$rc:$(cat "$T/int.out")" "5:$(printf 'up\nint')" "dsec-run forwards SIGINT to the command"
echo piped | dsec-run --id "$id" --stream --stdin - -- cat > "$T/cat.out"
is "$(cat "$T/cat.out")" "piped" "dsec-run --stream --stdin - forwards our stdin"

# A client that vanishes mid-stream leaks nothing.
dsec-run --id "$id" --stream --timeout 2 -c 'while :; do echo y; sleep 0.01; done' > /dev/null &
pr=$!
sleep 0.7
{ kill -KILL $pr; wait $pr; } 2>/dev/null
for i in $(seq 50); do	# its timeout (2 s) and stream_grace (2 s), polled up to 10 s
	sleep 0.2
	run req info id="$id"
	[ "$(get streams):$(get running)" = "0:0" ] && break
done
is "$(get streams):$(get running)" "0:0" "after its timeout and the grace its stream is gone"
is "$(pipes)" "$fd0" "dsecd holds no more pipes than before"

# PTY.
start code='tty; test -t 0 && test -t 1 && test -t 2 && echo isatty; echo $TERM; stty size; read l; stty size' \
	pty?=true rows#=30 cols#=100
drain_until() {	# drain_until TEXT: read until the output so far has TEXT
	local i
	ALL=
	for i in $(seq 20); do
		run req exec_read id="$id" exec="$x" wait%=5
		ALL+=$(get stdout; echo .)
		ALL=${ALL%.}
		case $ALL in *"$1"*) return 0 ;; esac
	done
	return 1
}
drain_until '30 100'
tty=$(printf '%s' "$ALL" | head -1 | tr -d '\r')
like "$tty" '^/dev/pts/[0-9]+$' "tty reports a terminal ($tty)"
like "$ALL" 'isatty' "stdin, stdout and stderr are terminals"
like "$ALL" 'xterm' "TERM names a terminal"
like "$ALL" '30 100' "stty size is the size asked for"
run req exec_resize id="$id" exec="$x" rows#=50 cols#=132
is "$RC" 0 "exec_resize"
req exec_write id="$id" exec="$x" data="$(printf 'go\r')" >/dev/null
drain
like "$ALL" '50 132' "stty size follows the resize"
is "$(get exit_code)" 0 "the pty command exits 0"
run req exec id="$id" code="ls /dev/pts; test -e $tty && echo there"
like "$(get stdout)" 'ptmx' "the terminal is of the sandbox's own devpts"
start code='sleep 1'
run req exec_resize id="$id" exec="$x" rows#=10 cols#=10
is "$(get error code)" "invalid" "exec_resize without a pty is invalid"
drain
printf 'echo $((6*7))\nexit 3\n' | dsec-run --id "$id" -t -- /bin/sh > "$T/t.out"
rc=$?
is "$rc" 3 "dsec-run -t: the shell's status"
like "$(cat "$T/t.out")" '42' "dsec-run -t: the shell ran what we typed"
if command -v script >/dev/null 2>&1; then
	script -qec "stty -g > $T/tio.0; dsec-run --id $id -t -c 'stty size' > $T/tio.out; stty -g > $T/tio.1" /dev/null > /dev/null
	ok $([ -s "$T/tio.0" ] && cmp -s "$T/tio.0" "$T/tio.1"; echo $?) "dsec-run -t on a terminal restores its mode at exit"
else
	skip "needs script(1)"
fi

# The same through libdsec.
run helper-stream "$DSEC_HOST" "$id"
is "$RC" 0 "libdsec: exec_start, exec_write, exec_read, exec_resize, exec_signal"
while read -r l; do diag "$l"; done <<< "$OUT"

# Backends without streaming say so.
run req create backend=fncall
fid=$(get id)
run req exec_start id="$fid" argv[]=true
is "$(get error code)" "unsupported" "fncall: exec_start is unsupported"
req destroy id="$fid" >/dev/null

# Destroy with open streams.
start code='sleep 100'
xs=$x
start code='echo unread'
req exec_read id="$id" exec="$xs" wait%=30 > "$T/d.out" &
pd=$!
sleep 0.5
t0=$(now)
run req destroy id="$id"
wait $pd
t1=$(now)
like "$(cat "$T/d.out")" '"code":"not_found".*destroyed' "a held read is told its sandbox was destroyed"
ok $(awk "BEGIN { exit !($t1 - $t0 < 5) }"; echo $?) "at once"
sleep 0.3
is "$(pipes)" "$fd0" "no pipe or terminal is left after destroy"
is "$(container_cgroups_left)" "0:ok" \
	"no process is left in a cgroup after destroy (emptied ones kept for new sandboxes)"

# Pause and resume with a stream open: the output goes on, the pause is
# not counted against the timeout.
run req create backend=container
id=$(get id)
start code='for i in 1 2 3 4; do echo $i; sleep 0.5; done' timeout%=3
run req exec_read id="$id" exec="$x" wait%=5
req pause id="$id" >/dev/null
sleep 2
req resume id="$id" >/dev/null
drain
is "$(get timed_out):$(get exit_code)" "false:0" "a stream outlives a pause; paused time is not its timeout's"
like "$ALL" '4' "and its output goes on after the resume"

# Shutdown with a stream open and a read waiting.
start code='sleep 100'
req exec_read id="$id" exec="$x" wait%=30 > /dev/null 2>&1 &
pd=$!
sleep 0.3
stop_dsecd
ok $? "dsecd stops cleanly with a stream open"
wait $pd
ok $([ -z "$(container_cgroups)" ]; echo $?) "shutdown leaves no cgroup"
