#!/bin/bash
# container backend through dsecd and dsec-run: isolation, state, files,
# limits, timeouts and cleanup seen end to end.
. "$(dirname "$0")/lib.sh"

need_container

plan 50

if ! start_dsecd --set backends=fncall,container --set container.memory=128M --set container.pids=64; then
	echo "Bail out! dsecd did not start"
	exit 1
fi
cgroot() { container_cgroups; }
cr() { dsec-run --backend container "$@"; }

run cr -c 'echo hi; exit 3'
is "$RC:$OUT" "3:hi" "sh code: output and exit status"
# The shell counts /proc's pids itself (a glob): with `ls /proc | grep`,
# ls could read /proc before the shell had forked grep (3, not 4).
run cr -c 'cat /proc/1/comm; set -- /proc/[0-9]*; echo $#'
is "$(echo $OUT)" "dsec-init 2" "pid 1 is the sandbox's init; only sandbox pids are visible (init, the shell)"
run cr -c 'tr "\\0" " " < /proc/1/cmdline'
ok "$(echo "$OUT" | grep -q -e "$T" -e dsec-container -e /work; echo $((1 - $?)))" "pid 1's command line shows no host path"
run cr -- hostname
is "$OUT" "sandbox" "hostname is sandbox"
run cr -c 'grep -c : /proc/net/dev'
is "$OUT" "1" "only the loopback interface"
run cr -c 'grep CapEff /proc/self/status; grep NoNewPrivs /proc/self/status'
is "$(echo $OUT)" "CapEff: 00000000000004fb NoNewPrivs: 1" \
	"root keeps only chown, dac_override, fowner, fsetid, kill, setgid, setuid, net_bind_service; no_new_privs"
run cr -c 'unshare -U true 2>/dev/null || echo denied; mount -t tmpfs x /tmp 2>/dev/null || echo denied'
is "$(echo $OUT)" "denied denied" "new user namespaces and mount are denied"
run cr -c 'cat /proc/kcore /proc/sysrq-trigger 2>/dev/null | wc -c; (echo 1 > /proc/sys/kernel/domainname) 2>/dev/null || echo ro'
is "$(echo $OUT)" "0 ro" "sensitive /proc entries are masked, /proc/sys is read-only"
run cr -c 'for d in /proc/acpi /sys/firmware /etc/ssl/private; do
	[ -d $d ] && [ -z "$(ls -A $d)" ] && ! touch $d/x 2>/dev/null && ! mkdir $d/y 2>/dev/null &&
	echo masked; done | wc -l'
is "$OUT" 3 "masked directories (binds of one empty read-only directory) are empty and read-only"
# Each file system a sandbox mounts costs the whole node (a shrinker and
# lists in every memory cgroup): its disk, root, devpts and proc; its /sys
# is the node's one, bound.
mid=$(new_container)
minit=$(for d in $(cgroot); do cat "$d"/sb.*/cgroup.procs; done 2>/dev/null | head -1)
host_devs=$(awk '{ print $3 }' /proc/self/mountinfo | sort -u)
own=$(awk '{ print $3 }' "/proc/${minit:-0}/mountinfo" 2>/dev/null | sort -u |
	grep -cvxF "$host_devs")
is "$own" 4 "a sandbox mounts four file systems of its own: disk, root, devpts, proc"
helper-req -q "$DSEC_HOST" destroy id="$mid" >/dev/null
run cr -c '(echo x > /usr/dsec-test-x) 2>/dev/null || echo ro; echo y > /etc/dsec-test-y && cat /etc/dsec-test-y'
is "$(echo $OUT)" "ro y" "host /usr is read-only inside, the root is writable (overlay)"
ok $([ ! -e /usr/dsec-test-x ] && [ ! -e /etc/dsec-test-y ]; echo $?) "the host's /usr and /etc are unchanged"
run cr -c 'test -e /etc/shadow && echo leak; echo ok'
is "$OUT" "ok" "the host's /etc/shadow is not in the default root"

# State: files persist between execs, the working directory does not.
id=$(cr --keep -c 'echo kept > /root/f; cd /tmp; echo $$ > /tmp/pid' 2>&1 >/dev/null | head -1)
id=${id##* }
run dsec-run --id "$id" -c 'cat /root/f; pwd'
is "$(echo $OUT)" "kept /" "files persist across execs, cd does not"
printf 'from-api' > "$T/data"
run helper-req "$DSEC_HOST" file_write id="$id" path=/work/a/b.txt data@="$T/data"
like "$OUT" '"ok":true' "file_write"
run dsec-run --id "$id" -c 'cat /work/a/b.txt; echo from-sh > /work/c.txt; ln -s / /work/root-link'
is "$OUT" "from-api" "exec sees what file_write wrote"
run helper-req "$DSEC_HOST" file_read id="$id" path=/work/c.txt
like "$OUT" '"data":"from-sh\\n"' "file_read sees what exec wrote"
run helper-req "$DSEC_HOST" file_read id="$id" path=../../../etc/shadow
like "$OUT" '"ok":false' "file_read of ../../../etc/shadow stays inside (no host shadow)"
run helper-req "$DSEC_HOST" file_read id="$id" path=/work/root-link/etc/passwd
like "$OUT" '"data":"root:x:0:0:root:/root:/bin/sh\\nnobody' "a symlink to / resolves to the sandbox's root"
run helper-req "$DSEC_HOST" file_write id="$id" path=/work/root-link/usr/dsec-test-z data@="$T/data"
ok $([ ! -e /usr/dsec-test-z ]; echo $?) "file_write through a symlink to / does not reach the host"

# Commands are started by the sandbox's init (ct_exec.h), which nothing
# inside can reach; a request too large for its socket takes the exec
# helper, with the same result.
run dsec-run --id "$id" -c 'echo $PPID; ls /proc/self/fd | tr "\n" " "; readlink /proc/1/fd/4 2>/dev/null || echo denied'
is "$(echo $OUT)" "1 0 1 2 3 denied" \
	"the init starts commands; they get only stdin, stdout and stderr; its socket is out of reach"
printf 'line1\nline2\n' > "$T/in"
run dsec-run --id "$id" --stdin "$T/in" -- sh -c 'wc -l; echo $PPID'
is "$(echo $OUT)" "2 1" "stdin reaches a command the init starts"
run dsec-run --id "$id" -c 'mkdir -p /root/bin && printf "#!/bin/sh\necho mine\n" > /root/bin/mycmd && chmod +x /root/bin/mycmd'
run dsec-run --id "$id" --env PATH=/root/bin:/usr/bin:/bin -- mycmd
is "$RC:$OUT" "0:mine" "a command is looked up in the PATH of its environment"
run dsec-run --id "$id" -- no-such-command
like "$RC:$OUT" "^127:.*no-such-command: No such file or directory" "a missing command exits 127 and says so"
big=$(head -c 70000 /dev/zero | tr '\0' y)
run helper-req "$DSEC_HOST" exec id="$id" 'argv[]=sh' 'argv[]=-c' 'argv[]=echo $PPID ${#BIG}' "env.BIG=$big"
like "$OUT" '"exit_code":0,.*"stdout":"0 70000\\n"' \
	"a request over 64 KiB runs through the exec helper (not a child of the init)"

# Each command gets its own cgroup; an emptied one is kept for the next
# command, with nothing of the last one left in it.  (Its pids group on v1,
# its only one on v2: a command's group has no memory or cpu controller of
# its own, below.)
own_cg='grep -m1 -E ":pids:|^0::" /proc/self/cgroup'
run dsec-run --id "$id" -c "setsid sleep 9884 & $own_cg"
g1=$OUT
for i in $(seq 50); do
	run dsec-run --id "$id" -c "pgrep -c sleep; $own_cg"
	[ "$(echo $OUT)" = "0 $g1" ] && break
	sleep 0.1
done
is "$(echo $OUT)" "0 $g1" "what a command leaves is killed when it ends; its emptied cgroup serves the next"
like "$g1" "/x\.[0-9]" "a command runs in a group of its own"
# One memory cgroup per sandbox: each costs the host kernel memory that grows
# with the file systems the node mounts.  A command, the exec helper's too (a
# request over 64 KiB), is charged to the sandbox's memory and CPU limits.
if [ -d /sys/fs/cgroup/memory ]; then
	run dsec-run --id "$id" -c 'grep -E ":(memory|cpu,cpuacct|cpu):" /proc/self/cgroup'
	is "$(echo "$OUT" | grep -c /x.):$(echo "$OUT" | grep -c :/)" 0:2 \
		"a command shares the sandbox's memory and cpu cgroups (v1)"
	run helper-req "$DSEC_HOST" exec id="$id" 'argv[]=sh' 'argv[]=-c' \
		'argv[]=grep -E ":memory:" /proc/self/cgroup; echo ${#BIG}' "env.BIG=$big"
	like "$OUT" '"stdout":"[0-9]+:memory:/\\n70000' \
		"so does one the exec helper starts: it joins the sandbox's memory cgroup"
	is "$(for d in $(cgroot); do ls -d "$d"/sb.*/x.*; done 2>/dev/null | grep -c /memory/)" 0 \
		"no command group in the memory hierarchy"
else
	for i in 1 2 3; do skip "no cgroup v1 memory hierarchy on this host"; done
fi
run helper-req "$DSEC_HOST" exec id="$id" 'argv[]=python3' 'argv[]=-c' 'argv[]=b = b"x" * (300 << 20)'
like "$OUT" '"oom_killed":true' "a command killed by the OOM killer says so"
sleep 0.3
run helper-req "$DSEC_HOST" exec id="$id" 'argv[]=true'
like "$OUT" '"exit_code":0,.*"oom_killed":false' "the next command in its recycled cgroup does not"
# (The command groups of the live sandbox: a destroyed one's emptied groups
# are kept for new sandboxes.)
xgroups() {
	for s in $(for d in $(cgroot); do ls -d "$d"/sb.*; done 2>/dev/null); do
		[ -n "$(cat "$s/cgroup.procs")" ] && ls -d "$s"/x.* 2>/dev/null
	done | wc -l
}
sleep 0.3
g0=$(xgroups)
helper-req "$DSEC_HOST" pause id="$id" >/dev/null
is "$g0:$(xgroups)" "$(cgroot | grep -vc -e /memory/ -e /cpu/ -e /cpu,cpuacct/):0" \
	"a paused sandbox keeps no empty exec cgroup"
helper-req "$DSEC_HOST" resume id="$id" >/dev/null

# seccomp_deny tightens the filter of every command of one sandbox: those
# the init starts, those of the exec helper and shell sessions.
did=$(helper-req "$DSEC_HOST" create backend=container 'seccomp_deny[]=mkdir' 'seccomp_deny[]=mkdirat' |
	grep -o '"id":"[^"]*"' | cut -d'"' -f4)
run dsec-run --id "$did" -c 'mkdir /tmp/d 2>&1'
like "$RC:$OUT" "1:.*Operation not permitted" "seccomp_deny: a denied system call fails with EPERM"
run helper-req "$DSEC_HOST" exec id="$did" 'argv[]=sh' 'argv[]=-c' 'argv[]=mkdir /tmp/e 2>&1; echo ${#BIG}' "env.BIG=$big"
like "$OUT" 'Operation not permitted.*70000' "... also for a command the exec helper starts"
helper-req "$DSEC_HOST" session_open id="$did" session=s >/dev/null
run helper-req "$DSEC_HOST" session_exec id="$did" session=s cmd='mkdir /tmp/f 2>&1'
like "$OUT" 'Operation not permitted' "... and in a shell session"
helper-req "$DSEC_HOST" destroy id="$did" >/dev/null
run dsec-run --id "$id" -c 'mkdir /tmp/g && echo made'
is "$OUT" "made" "other sandboxes keep the default filter"
run dsec-run --backend container --deny-syscall no_such_call -- true
like "$RC:$OUT" "125:.*'no_such_call' is not a system call known here \(invalid\)" \
	"an unknown system call in seccomp_deny is refused at create"
run dsec-run --backend fncall --deny-syscall mkdir -- true
like "$RC:$OUT" "125:.*\(unsupported\)" "fncall refuses seccomp_deny rather than ignore it"

# limits.cpu_weight: the sandbox's share of CPU against the others.
weights() { cat $(for d in $(cgroot); do ls "$d"/sb.*/cpu.shares "$d"/sb.*/cpu.weight; done 2>/dev/null); }
w0=$(weights | grep -cx '512\|50')
run helper-req "$DSEC_HOST" create backend=container 'limits.cpu_weight#=50'
wid=$(echo "$OUT" | grep -o '"id":"[^"]*"' | cut -d'"' -f4)
is "$(( $(weights | grep -cx '512\|50') - w0 ))" "1" \
	"limits.cpu_weight 50 sets the sandbox's cpu.weight (v2) or cpu.shares 512 (v1)"
helper-req "$DSEC_HOST" destroy id="$wid" >/dev/null
run helper-req "$DSEC_HOST" create backend=container 'limits.cpu_weight#=20000'
like "$OUT" '"code":"invalid".*cpu_weight must be between 1 and 10000' "a cpu_weight above 10000 is refused"

# Timeout kills the command's tree, not the sandbox.
run dsec-run --id "$id" --timeout 1 -c 'setsid sleep 9881 & (setsid sh -c "sleep 9882 &" &); sleep 9883'
is "$RC" 124 "timeout: dsec-run exits 124"
# The kill is asynchronous to the reply: bounded waits, not a fixed one a
# loaded machine outlasts (the sandbox's init reaps what was killed).
for i in $(seq 100); do pgrep -f 'sleep 988[123]' >/dev/null || break; sleep 0.1; done
run pgrep -f 'sleep 988[123]'
is "$RC" 1 "no process of the timed-out command is left"
for i in $(seq 50); do
	run dsec-run --id "$id" -c 'cat /root/f; cat /proc/[0-9]*/comm | grep -cvx dsec-shell'
	[ "$(echo $OUT)" = "kept 4" ] && break
	sleep 0.1
done
is "$(echo $OUT)" "kept 4" "the sandbox lives on after a timeout (init, sh, cat, grep; no warm shell counted)"

# Limits (container.memory=128M, container.pids=64).
run cr -c 'python3 -c "b = b\"x\" * (300 << 20); print(len(b))"'
is "$RC" 137 "a memory bomb is killed (SIGKILL)"
run cr -c 'for i in $(seq 100); do sleep 3 & done 2>&1 | grep -c -i "fork"'
ok $([ "${OUT:-0}" -ge 1 ]; echo $?) "the pids limit stops a fork bomb"

# Destroy leaves nothing behind.
init=$(for d in $(cgroot); do cat "$d"/sb.*/cgroup.procs; done 2>/dev/null | head -1)
[ -n "$init" ] || init=999999999
run helper-req "$DSEC_HOST" destroy id="$id"
like "$OUT" '"ok":true' "destroy"
sleep 0.3
# (The node's /sys and the proc new network namespaces are set through
# are the backend's, not a sandbox's.)
ok $(grep "$T/state" /proc/self/mountinfo | grep -qv "backends/container/\(sys\|netproc\)[ /]"; [ $? = 1 ] &&
	! kill -0 "$init" 2>/dev/null; echo $?) \
	"no mount and no init left after destroy"
is "$(container_cgroups_left)" "0:ok" \
	"after destroy no process is left in a cgroup (at most 64 emptied ones kept for new sandboxes)"

stop_dsecd
ok $([ -z "$(cgroot)" ] && [ -z "$(ls -A "$T/state/backends/container" 2>/dev/null)" ]; echo $?) \
	"shutdown removes the backend's cgroup and state"
