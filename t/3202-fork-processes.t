#!/bin/bash
# fork with processes (rlcoord/reset.c, the container backend's criu.c):
# a sandbox whose shell session set a variable and a directory and left a
# counter running in the background is forked n ways with processes:
# true; each fork has the session under its name, its shell with its
# variable and directory, and its own counter going on in its own files
# from the value it had; the original goes on.  Without container.criu
# the fork with processes is unsupported, and one of a session running a
# command is busy.  A paused sandbox runs for the checkpoint and is paused
# again.  Skips without criu (make criu).
. "$(dirname "$0")/lib.sh"

need_container
need_cmd dsecctl
CRIU=${DSEC_CRIU:-$TOP/build/criu/sbin/criu}
[ -x "$CRIU" ] || skip_all "needs criu (make criu builds build/criu/sbin/criu)"
[ -x "$TOP/build/libexec/container-criu" ] || skip_all "needs build/libexec/container-criu (make)"
"$CRIU" check >"$T/check.log" 2>&1 || skip_all "criu check fails here: $(tail -1 "$T/check.log")"
plan 17

mk_small_root "$T/base" sh cat ls sleep grep wc
export DSEC_FS3_STORE="$T/state/fs3"
mkdir -p "$T/state"
dsecctl image import --tag task:1 "$T/base" >/dev/null || bail "cannot import the image"
start_dsecd --set backends=container --set "container.criu=$CRIU" || bail "dsecd did not start"
H=$DSEC_HOST

# count ID: the counter's last value in sandbox ID.  The loop rewrites
# /tmp/count (truncate, then write), so a read can find it empty: read
# again then.
count() {
	local v= k
	for k in 1 2 3 4 5; do
		OUT=$(helper-req "$H" exec id="$1" 'argv[]=cat' 'argv[]=/tmp/count')
		v=$(get stdout | tr -dc 0-9)
		[ -n "$v" ] && break
		sleep 0.05
	done
	printf '%s' "$v"
}
in_session() { OUT=$(helper-req "$H" session_exec id="$1" session=s1 "cmd=$2"); get stdout; }

OUT=$(helper-req "$H" create backend=container image=task:1)
A=$(get id)
OUT=$(helper-req "$H" session_open id="$A" name=s1)
in_session "$A" 'X=42; cd /tmp; (i=0; while :; do i=$((i+1)); echo $i > /tmp/count; echo $i >> /tmp/log; sleep 0.01; done) >/dev/null 2>&1 & echo started' >/dev/null
for i in $(seq 50); do [ "$(count "$A")" -ge 5 ] 2>/dev/null && break; sleep 0.1; done

run helper-req "$H" fork id="$A" 'n#=3' 'processes?=true'
is "$(get sessions) $(printf '%s' "$OUT" | grep -o '"ids":\[[^]]*\]' | grep -o 'vm\|[a-z0-9-]*:[0-9a-f]\{16\}' | wc -l)" \
	"1 3" "fork of 3 with processes: one session carried into each ($OUT)"
ids=$(printf '%s' "$OUT" | grep -o '"ids":\[[^]]*\]' | grep -o '"[^"]*:[0-9a-f]\{16\}"' | tr -d '"')
diag "fork of 3 with processes: $(get duration) s"
shells="" moving=0 own=0 seen=""
for F in $ids; do
	shells+="$(in_session "$F" 'echo "$X $PWD"' | tr -d '\n');"
	c1=$(count "$F"); sleep 0.3; c2=$(count "$F")
	seen+=" $c1->$c2"
	[ "${c2:-0}" -gt "${c1:-0}" ] && moving=$((moving + 1))
	OUT=$(helper-req "$H" session_exec id="$F" session=s1 'cmd=echo mine > /tmp/only-here')
done
is "$shells" "42 /tmp;42 /tmp;42 /tmp;" "each fork's session: the shell kept its variable and directory"
F1=$(printf "%s\n" $ids | head -1)
is "$(in_session "$F1" 'cat /proc/1/comm; cat /proc/[0-9]*/comm | grep -c dsec-init; cat /proc/keys | wc -c' | tr '\n' ' ')" \
	"sh 0 0 " "... its /proc its own pid namespace's (its shell is 1, no init of the fork's), masked"
is "$moving" 3 "each fork's background counter goes on ($seen)"
seq_ok=0
for F in $ids; do
	OUT=$(helper-req "$H" exec id="$F" 'argv[]=ls' 'argv[]=/tmp')
	[ "$(get stdout | tr '\n' ' ')" = "count log only-here " ] && own=$((own + 1))
	# Its log: 1, 2, ... n, no number missing or twice: the files the
	# fork got are those of the moment of the memory it got.
	OUT=$(helper-req "$H" exec id="$F" 'argv[]=cat' 'argv[]=/tmp/log')
	n=$(get stdout | awk '$0 != NR { bad = 1 } END { print bad ? "bad at " NR : NR }')
	case $n in ''|bad*) diag "fork $F's log: $n" ;; *) seq_ok=$((seq_ok + 1)) ;; esac
done
is "$own" 3 "... each in its own files"
is "$seq_ok" 3 "... whose log goes on from the moment of the checkpoint: no number lost or written twice"
OUT=$(helper-req "$H" exec id="$A" 'argv[]=ls' 'argv[]=/tmp')
is "$(get stdout | tr '\n' ' ')" "count log " "the original's files are its own"
c1=$(count "$A"); sleep 0.3
ok "$([ "$(count "$A")" -gt "$c1" ]; echo $?)" "the original's counter goes on"
is "$(in_session "$A" 'echo "$X $PWD"')" "42 /tmp" "... and its shell is as it was"

# The same through the Python SDK (fork(n, processes=True)).
sdk=$(helper-py - "$H" "$A" <<'PY'
import asyncio, sys, dsec
async def main():
    async with dsec.AsyncClient(sys.argv[1]) as c:
        kids = await c.sandbox(sys.argv[2]).fork(2, processes=True)
        print(" ".join(k.id for k in kids))
asyncio.run(main())
PY
)
shells=""
for F in $sdk; do shells+="$(in_session "$F" 'echo "$X $PWD"' | tr -d '\n');"; done
is "$shells" "42 /tmp;42 /tmp;" "the SDK's fork(2, processes=True): each fork's shell as it was"
ids="$ids $sdk"

# The fork's reply comes once each restored session is whole: criu and
# its helper done, not only the shell running (before, the checkpoint
# went while a helper still read its work directory, and about one fork
# in twenty came without its session).
missing=0
for r in $(seq 8); do
	OUT=$(helper-req "$H" fork id="$A" 'n#=2' 'processes?=true')
	for F in $(printf '%s' "$OUT" | grep -o '"ids":\[[^]]*\]' | grep -o '"[^"]*:[0-9a-f]\{16\}"' | tr -d '"'); do
		[ "$(in_session "$F" 'echo "$X"')" = 42 ] || missing=$((missing + 1))
		helper-req "$H" destroy id="$F" >/dev/null
	done
done
is "$missing" 0 "8 forks of 2 with processes: each fork has its session when the reply comes"

# A session running a command is not carried: busy.
helper-req "$H" session_exec id="$A" session=s1 'cmd=sleep 2' >/dev/null 2>&1 &
busy=$!
sleep 0.5
run helper-req "$H" fork id="$A" 'n#=1' 'processes?=true'
is "$(get error code)" busy "fork with processes while a session runs a command: busy ($OUT)"
wait "$busy"

# A paused sandbox forks with its processes: it runs for the checkpoint,
# and is paused again before the reply; its forks run.
helper-req "$H" pause id="$A" >/dev/null
run helper-req "$H" fork id="$A" 'n#=2' 'processes?=true'
pids=$(printf '%s' "$OUT" | grep -o '"ids":\[[^]]*\]' | grep -o '"[^"]*:[0-9a-f]\{16\}"' | tr -d '"')
is "$(get sessions) $(echo $pids | wc -w)" "1 2" "a paused sandbox forks with processes: its session carried into each"
moving=0
for F in $pids; do
	c1=$(count "$F"); sleep 0.3; c2=$(count "$F")
	[ "${c2:-0}" -gt "${c1:-0}" ] && moving=$((moving + 1))
done
is "$moving" 2 "... each fork's counter goes on"
OUT=$(helper-req "$H" info id="$A")
is "$(get state)" paused "... and the sandbox is paused again"
ids="$ids $pids"
for F in $ids; do helper-req "$H" destroy id="$F" >/dev/null; done
helper-req "$H" destroy id="$A" >/dev/null
for i in $(seq 50); do pgrep -P "$DSECD_PID" -f container-criu >/dev/null || break; sleep 0.1; done
ok "$(pgrep -P "$DSECD_PID" -f container-criu >/dev/null; [ $? = 1 ]; echo $?)" \
	"destroying the forks ends their restored sessions and helpers"

stop_dsecd
start_dsecd --set backends=container || bail "dsecd did not start again"
OUT=$(helper-req "$H" create backend=container image=task:1)
A=$(get id)
run helper-req "$H" fork id="$A" 'n#=1' 'processes?=true'
is "$(get error code)" unsupported "without container.criu: a fork with processes is unsupported"
helper-req "$H" destroy id="$A" >/dev/null
