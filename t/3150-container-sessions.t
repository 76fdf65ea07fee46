#!/bin/bash
# container shell sessions through dsecd: shared state between commands,
# delimiting whatever a command prints, syntax errors, exit, timeouts,
# busy, close, and that destroy and shutdown leave nothing behind.
. "$(dirname "$0")/lib.sh"

need_container

plan 58

if ! start_dsecd --set backends=fncall,container --set container.max_sessions=4; then
	echo "Bail out! dsecd did not start"
	exit 1
fi
export HELPER_REQ_TIMEOUT=60
req() { helper-req "$DSEC_HOST" "$@"; }
# sx SESSION CMD [ARGS...]: session_exec in sandbox $id.
sx() { local s=$1 c=$2; shift 2; run req session_exec id="$id" session="$s" cmd="$c" "$@"; }
pipes() { ls -l /proc/$DSECD_PID/fd | grep -c pipe; }

run req create backend=container
id=$(get id)
fd0=$(pipes)

run req session_open id="$id" session=a
is "$(get session)" "a" "session_open gives the name asked for"
run req session_open id="$id" session=a
is "$(get error code)" "exists" "a name already open is refused with 'exists'"
run req session_open id="$id" session='no/slash'
is "$(get error code)" "invalid" "a bad session name is refused"

sx a 'mkdir -p /repo && cd /repo && export X=1; Y=2'
is "$(get exit_code):$(get cwd)" "0:/repo" "cd and export: status 0, cwd reported"
sx a 'pwd; echo $X $Y'
is "$(get stdout)" "$(printf '/repo\n1 2\n')" "the next command sees the directory, exported and plain variables"

run req session_open id="$id"
b=$(get session)
ok $([ -n "$b" ] && [ "$b" != a ]; echo $?) "session_open without a name picks one ($b)"
sx "$b" 'pwd; echo "[$X]"'
is "$(get stdout)" "$(printf '/\n[]\n')" "a second session has its own directory and variables"
sx a 'pwd'
is "$(get stdout)" "/repo" "the first one is unchanged"

sx a 'printf abc'
is "$(get stdout):$(get stdout_truncated)" "abc:false" "output without a trailing newline"
sx a 'printf "\000\001\377x"; printf "e\000" >&2'
like "$OUT" '"stdout":"\\u0000\\u0001\\u00ffx"' "binary output on stdout, NUL bytes kept"
like "$OUT" '"stderr":"e\\u0000"' "binary output on stderr"
sx a 'echo "0123456789abcdef0123456789abcdef 0 /x 0123456789abcdef0123456789abcdef"; echo "__dsec_s=7 fi; }"; echo ok'
is "$(get exit_code):$(get stdout | tail -1)" "0:ok" "output that looks like a record does not end the command"
sx a 'echo forged >&3; echo "fd3:$?"'
like "$(get stdout)" "fd3:[1-9]" "commands do not get the marker fd"
sx a 'head -c 5000 /dev/zero | tr "\\0" y; echo tail >&2' output_cap#=100
is "$(get stdout | wc -c):$(get stdout_truncated):$(get stderr)" "100:true:tail" "output_cap truncates and says so"

sx a 'if then'
is "$(get exit_code):$(get ended)" "2:false" "a syntax error: status 2, the session lives"
like "$(get stderr)" "[Ss]yntax error" "the shell's message is on stderr"
sx a 'echo $X; pwd'
is "$(get stdout)" "$(printf '1\n/repo\n')" "after a syntax error the state is intact"
sx a 'f() { return 4; }; f'
is "$(get exit_code)" "4" "status of a function"
sx a 'return 5'
is "$(get exit_code):$(get ended)" "5:false" "return ends the command, not the shell"
sx a 'read line; echo "[$line]"'
is "$(get stdout)" "[]" "commands read /dev/null, not the session's input"
q=$(cat <<'EOF'
printf '%s|' 'it'\''s' 'back\slash' "$HOME" `echo bq` $(echo dollar) '$(no)'
cat <<END
here $HOME
END
EOF
)
sx a "$q"
is "$(get exit_code):$(get stdout)" "0:it's|back\\slash|/root|bq|dollar|\$(no)|here /root" \
	"quotes, backslashes, substitutions and a here-document reach the shell intact"

# Timeouts: the command dies, the shell stays; a stuck shell is restarted.
sx a 'cd /tmp; Z=9; sleep 9971' timeout%=1
is "$(get timed_out):$(get reset):$(get exit_code):$(get cwd)" "true:false:137:/tmp" \
	"timeout of sleep: timed_out, killed, the shell stays"
pgrep -f '^sleep 9971' >/dev/null
ok $((1 - $?)) "the timed-out command is gone"
sx a 'echo $Z; pwd'
is "$(get stdout)" "$(printf '9\n/tmp\n')" "after a timeout the session keeps its variables and directory"
sx a 'echo before; while :; do :; done' timeout%=1
is "$(get timed_out):$(get reset):$(get ended):$(get stdout)" "true:true:false:before" \
	"a loop in the shell itself: timed_out, the shell is reset"
sx a 'pwd; echo "[$Z]"'
is "$(get stdout)" "$(printf '/tmp\n[]\n')" "the new shell starts in the last directory, variables are gone"
sx a 'exec sleep 9972' timeout%=1
is "$(get timed_out):$(get reset):$(get ended)" "true:true:false" "a shell that exec'd a command that times out is reset"
sx a 'pwd'
is "$(get stdout)" "/tmp" "and the session goes on"
sx a 'mkdir /tmp/gone && cd /tmp/gone'
sx a 'rmdir /tmp/gone && while :; do :; done' timeout%=1
is "$(get reset):$(get ended):$(get cwd)" "true:false:/" "a reset whose directory is gone starts the shell in /"

# One command at a time per session; sessions run side by side.
req session_exec id="$id" session=a cmd='date +%s%N; sleep 2; date +%s%N; echo A' > "$T/a.out" &
pa=$!
req session_exec id="$id" session="$b" cmd='date +%s%N; sleep 2; date +%s%N; echo B' > "$T/b.out" &
pb=$!
sleep 0.5
sx a 'echo too-early'
is "$(get error code)" "busy" "a second command on a running session: busy"
wait $pa $pb
is "$(cat "$T/a.out" "$T/b.out" | grep -o '\\n[AB]\\n"' | sort | tr -d '\n')" '\nA\n"\nB\n"' \
	"both sessions finished their command"
# The start and end times each command printed: the two intervals overlap.
span() { grep -o '"stdout":"[0-9]*\\n[0-9]*' "$1" | sed 's/.*"stdout":"//; s/\\n/ /'; }
read -r a0 a1 <<< "$(span "$T/a.out")"
read -r b0 b1 <<< "$(span "$T/b.out")"
ok $([ -n "$a0" ] && [ -n "$b0" ] && [ "$a0" -lt "$b1" ] && [ "$b0" -lt "$a1" ]; echo $?) \
	"two sessions run their commands at the same time"

sx a 'Q=kept-across-pause'
run req pause id="$id"
like "$OUT" '"ok":true' "pause the sandbox with its sessions open"
sx a 'echo $Q'
is "$(get stdout)" "kept-across-pause" "a session command resumes a paused sandbox; the shell kept its state"

run req info id="$id"
is "$(printf '%s' "$OUT" | grep -o '"name":"[^"]*"' | sort | tr '\n' ' ')" \
	"$(printf '"name":"%s"\n' a "$b" | sort | tr '\n' ' ')" "info lists the sandbox's sessions"

sx a 'exit 3'
is "$(get exit_code):$(get ended)" "3:true" "exit 3: status 3, the session ended"
sx a 'echo x'
is "$(get error code)" "not_found" "a command on an ended session: not_found"
run req session_open id="$id" session=a
is "$(get session)" "a" "the name can be opened again"

run req session_close id="$id" session="$b"
like "$OUT" '"ok":true' "session_close"
sx "$b" 'echo x'
is "$(get error code)" "not_found" "a command on a closed session: not_found"
run req session_close id="$id" session="$b"
is "$(get error code)" "not_found" "closing it again: not_found"
run req session_exec id="$id" cmd=true
is "$(get error code)" "bad_request" "session_exec without a session: bad_request"
run req session_open id="$id" session=c shell=/no/such/shell
is "$(get error code)" "not_found" "a shell that does not exist: not_found"
like "$(get message)" "status 127: .*No such file" "its message carries the shell's error"
run req session_open id="$id" session=bsh shell=bash
sx bsh 'shopt -s extglob; echo "bash ${BASH_VERSION%%.*}"'
like "$(get stdout)" "^bash [0-9]+" "shell=bash runs bash"
run req session_close id="$id" session=bsh
run req session_open id="$id" session=e env.GREETING=hi cwd=/tmp
sx e 'echo "$GREETING $(pwd)"'
is "$(get stdout)" "hi /tmp" "session_open takes env and cwd"
run req session_open id="$id" session=nocwd cwd=/nope
like "$(get error code):$(get error message)" "^not_found:.*cannot chdir to '/nope'" \
	"a shell that cannot enter its cwd: not_found"
for s in f g h; do req session_open id="$id" session=$s >/dev/null; done
run req session_open id="$id" session=i
is "$(get error code)" "capacity" "max_sessions is enforced"

run req create backend=container
cid=$(get id)
run helper-session "$DSEC_HOST" "$cid"
req destroy id="$cid" >/dev/null
is "$RC:$OUT" "0:open: lib
state: exit=0 timed_out=0 reset=0 ended=0 cwd=/root out=1 2
/root
info: 1 session(s), first lib in /root
timeout: exit=137 timed_out=1 reset=0 ended=0 cwd=/root out=
after close: not_found" "the C client: open, exec, info, timeout, close"

run req create backend=fncall
fid=$(get id)
run req session_open id="$fid"
is "$(get error code)" "unsupported" "a backend without sessions: unsupported"
req destroy id="$fid" >/dev/null

# Idle TTL: a long session command is activity.
run req create backend=container idle_ttl%=2
iid=$(get id)
req session_open id="$iid" session=x >/dev/null
run req session_exec id="$iid" session=x cmd='sleep 5; echo alive'
is "$(get stdout)" "alive" "a running session command holds off the idle TTL"
req destroy id="$iid" >/dev/null

# Destroy with sessions open and running leaves nothing.
req session_exec id="$id" session=e cmd='sleep 9981 & setsid sleep 9982 & echo bg' >/dev/null
req session_exec id="$id" session=f cmd='sleep 9983' > "$T/f.out" &
pf=$!
sleep 0.5
run pgrep -f '^sleep 998[123]'
is "$(echo "$OUT" | wc -l)" "3" "background and running session processes exist"
run req destroy id="$id"
wait $pf
like "$(cat "$T/f.out")" '"code":"not_found".*destroyed' "the running command is told its sandbox was destroyed"
sleep 0.3
run pgrep -f '^sleep 998[123]'
is "$RC" 1 "no session process is left after destroy"
is "$(container_cgroups_left)" "0:ok" \
	"no process is left in a cgroup after destroy (emptied ones kept for new sandboxes)"
is "$(pipes)" "$fd0" "dsecd holds no more pipes than before the sessions"

# Shutdown with a session open.
run req create backend=container
id=$(get id)
req session_open id="$id" session=z >/dev/null
req session_exec id="$id" session=z cmd='sleep 9991 & echo' >/dev/null
stop_dsecd
ok $? "dsecd stops cleanly with a session open"
run pgrep -f '^sleep 9991'
ok $([ "$RC" = 1 ] && [ -z "$(container_cgroups)" ]; echo $?) "shutdown leaves no session process and no cgroup"
