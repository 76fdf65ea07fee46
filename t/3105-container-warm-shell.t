#!/bin/bash
# container sandboxes' warm shell (container-preload.c): after a shell
# command a template of that shell waits in the sandbox, and later shell
# commands become forks of it instead of executions.  What a command sees
# must not change: output, status, environment, directory, stdin, parent,
# timeout, seccomp_deny; a replaced shell binary is executed, a killed
# template only costs speed, and container.warm_shell=false turns it off.
# A command went through the template when its shell has
# container-preload.so mapped.
. "$(dirname "$0")/lib.sh"

need_container

plan 19

start_dsecd --set backends=container || bail "dsecd did not start"

# warm ID: the sandbox's warm shell is there (lib.sh); while the command
# looking runs, the template keeps one child waiting, not two.
warm() { warm_shells "$1"; }
WARM='grep -q container-preload /proc/$$/maps && echo 1 || echo 0'

id=$(dsec-run --backend container --keep -c true 2>&1 >/dev/null | head -1)
id=${id##* }
is "$(warm "$id")" 2 "after a shell command the sandbox gets a template and a waiting child"

run dsec-run --id "$id" --env X=42 --cwd /tmp -c "echo \$X; pwd; $WARM; exit 7"
is "$RC:$(echo $OUT)" "7:42 /tmp 1" "a warm command: its env, its directory, its exit status"
run dsec-run --id "$id" -c "$WARM; tr '\\0' '\\n' < /proc/\$\$/environ | grep -c 'LD_PRELOAD\\|LD_BIND_NOW\\|DSEC_CT' ; tr '\\0' ' ' < /proc/\$\$/cmdline"
like "$(echo $OUT)" "^1 0 (/bin/)?sh -c grep -q container-preload .* < /proc/\\\$\\\$/cmdline$" \
	"its environment has nothing of the template's; /proc/PID/cmdline is the command's"
run sh -c "printf 'abc\\n' | dsec-run --id '$id' --stdin - -c 'cat; $WARM; echo \$PPID; echo oops >&2'"
is "$(echo $OUT)" "abc 1 1 oops" "stdin, stderr, and its parent is pid 1"
run dsec-run --id "$id" -c 'cat /proc/self/status' 
caps=$(echo "$OUT" | grep -E '^(CapEff|NoNewPrivs|Seccomp):' | tr -s '\t ' ' ')
run dsec-run --id "$id" -c "grep -q container-preload /proc/\$\$/maps && grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/\$\$/status"
is "$(echo "$OUT" | tr -s '\t ' ' ')" "$caps" "the shell has the capabilities, no_new_privs and seccomp of any command"

run sh -c "dsec-run --id '$id' --timeout 1 -c '$WARM; sleep 9871 & (setsid sleep 9872 &); sleep 9873' 2>/dev/null"
is "$RC:$OUT" "124:1" "a timeout of a warm command exits 124"
sleep 0.3
run pgrep -f 'sleep 987[123]'
is "$RC" 1 "... and kills its whole tree"

# The same name but another file: executed as usual.
dsec-run --id "$id" -c 'mkdir -p /root/b && cp /bin/sh /root/b/sh' >/dev/null
run dsec-run --id "$id" --env PATH=/root/b:/usr/bin:/bin -- sh -c "$WARM; echo \$0"
is "$(echo $OUT)" "0 sh" "a shell that is not the template's file is executed"
run dsec-run --id "$id" -- /bin/sh -c "$WARM"
is "$OUT" "1" "an absolute path to the template's file is warm"
run dsec-run --id "$id" --env LD_LIBRARY_PATH=/nowhere -c "$WARM"
is "$OUT" "0" "a command with LD_* in its environment is executed (the loader reads them at exec)"

# Killing the template costs nothing but speed.
run dsec-run --id "$id" -c 'for f in /proc/[0-9]*/comm; do p=${f%/comm}; [ "$(cat $f 2>/dev/null)" = dsec-shell ] && kill -9 ${p#/proc/} 2>/dev/null; done; echo done'
run dsec-run --id "$id" -c 'sleep 0.2; cat /proc/[0-9]*/comm | grep -cx dsec-shell'
is "$OUT" "0" "root inside can kill the template and its children"
run dsec-run --id "$id" -c "echo alive"
is "$RC:$OUT" "0:alive" "the next command runs (as usual)"
is "$(warm "$id")" 2 "... and the template comes back once the sandbox is quiet"
helper-req "$DSEC_HOST" destroy id="$id" >/dev/null

# seccomp_deny holds in warm commands too.
id=$(dsec-run --backend container --keep --deny-syscall mkdir --deny-syscall mkdirat -c true 2>&1 >/dev/null | head -1)
id=${id##* }
warm "$id" >/dev/null
run dsec-run --id "$id" -c "$WARM; mkdir /root/d 2>&1; test -d /root/d || echo none"
like "$(echo $OUT)" "^1 .*(not permitted|denied).* none$" "seccomp_deny applies to a warm command"
helper-req "$DSEC_HOST" destroy id="$id" >/dev/null

# A template is only as idle as it may be: a paused and resumed sandbox
# keeps serving.
id=$(dsec-run --backend container --keep -c true 2>&1 >/dev/null | head -1)
id=${id##* }
warm "$id" >/dev/null
helper-req "$DSEC_HOST" pause id="$id" >/dev/null
run dsec-run --id "$id" -c "$WARM; echo resumed"
is "$(echo $OUT)" "1 resumed" "after pause and resume the template still serves"
# Its dsec-shell processes (ours: other daemons on the machine have theirs).
tpls=$(for p in $(pgrep -x dsec-shell); do
	grep -q "dsec-container.$DSECD_PID/" /proc/$p/cgroup 2>/dev/null && echo $p; done)
helper-req "$DSEC_HOST" destroy id="$id" >/dev/null
for i in $(seq 20); do
	alive=0
	for p in $tpls; do kill -0 $p 2>/dev/null && alive=$((alive + 1)); done
	[ $alive = 0 ] && break
	sleep 0.1
done
like "$(echo $tpls | wc -w):$alive" "^[1-9][0-9]*:0$" \
	"destroy leaves none of the sandbox's dsec-shell processes behind"

# A sandbox whose commands run as another uid: warm ones too, each at the
# commands' oom_score_adj (a non-dumpable child of that uid may not open
# its own /proc/self/oom_score_adj: every warm command failed).
stop_dsecd
start_dsecd --set backends=container --set container.uid=1000 --set container.gid=1000 ||
	bail "dsecd did not start"
id=$(dsec-run --backend container --keep -c true 2>&1 >/dev/null | head -1)
id=${id##* }
warm "$id" >/dev/null
out=
for k in 1 2 3 4; do
	out="$out $(dsec-run --id "$id" -c "$WARM; id -u; cat /proc/self/oom_score_adj" 2>&1 | tr '\n' ' ')"
done
is "$(echo $out)" "1 1000 1000 1 1000 1000 1 1000 1000 1 1000 1000" \
	"uid 1000: warm commands, each as 1000 at oom_score_adj 1000"
tpl=$(for p in $(pgrep -x dsec-shell); do
	grep -q "dsec-container.$DSECD_PID/" /proc/$p/cgroup 2>/dev/null && echo $p; done | head -1)
is "$(cat /proc/$tpl/oom_score_adj 2>&1)" 1000 "... as the template is"
helper-req "$DSEC_HOST" destroy id="$id" >/dev/null

stop_dsecd
start_dsecd --set backends=container --set container.warm_shell=false || bail "dsecd did not start"
id=$(dsec-run --backend container --keep -c true 2>&1 >/dev/null | head -1)
id=${id##* }
sleep 1
run dsec-run --id "$id" -c "cat /proc/[0-9]*/comm | grep -cx dsec-shell; $WARM"
is "$(echo $OUT)" "0 0" "container.warm_shell=false: no template"
helper-req "$DSEC_HOST" destroy id="$id" >/dev/null
