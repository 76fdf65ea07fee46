#!/bin/bash
# A container sandbox's shell session carried into a fork by criu (the
# design of fork with processes: DESIGN.md): a session whose shell set a
# variable and a directory and left a counter running in the background
# is checkpointed (criu dump --leave-running, run by container-criu in the
# session's mount namespace), the sandbox is forked (its files), and the
# session is restored beside the fork: in a copy of the fork's mount
# namespace (its root, its files), the fork's uid range, its network
# namespace and its cgroup, its stdio pipes new ones.  The counter goes on
# in the fork's files from its value in memory, the shell keeps its
# variable, directory, seccomp filter and no_new_privs, the original goes
# on, and destroying the fork ends the restored session.
. "$(dirname "$0")/lib.sh"

need_container
need_cmd dsecctl
CRIU=${DSEC_CRIU:-$TOP/build/criu/sbin/criu}
[ -x "$CRIU" ] || skip_all "needs criu (make criu builds build/criu/sbin/criu)"
CCRIU=$TOP/build/libexec/container-criu
[ -x "$CCRIU" ] || skip_all "needs build/libexec/container-criu (make)"
"$CRIU" check >"$T/check.log" 2>&1 || skip_all "criu check fails here: $(tail -1 "$T/check.log")"
plan 11

mk_small_root "$T/base" sh cat ls sleep
export DSEC_FS3_STORE="$T/state/fs3"
mkdir -p "$T/state"
dsecctl image import --tag task:1 "$T/base" >/dev/null || bail "cannot import the image"
start_dsecd --set backends=container || bail "dsecd did not start"
H=$DSEC_HOST

# count ID: the fork's or the original's counter, read by a command.
count() { OUT=$(helper-req "$H" exec id="$1" 'argv[]=cat' 'argv[]=/tmp/count'); get stdout | tr -dc 0-9; }
# inits: dsecd's children that are sandboxes' inits, oldest first.
inits() { ps -o pid= -o comm= --ppid "$DSECD_PID" | awk '$2 == "dsec-init" { print $1 }' | sort -n; }

OUT=$(helper-req "$H" create backend=container image=task:1)
A=$(get id)
OUT=$(helper-req "$H" session_open id="$A" name=s1)
OUT=$(helper-req "$H" session_exec id="$A" session=s1 \
	'cmd=X=42; cd /tmp; (i=0; while :; do i=$((i+1)); echo $i > /tmp/count; sleep 0.1; done) >/dev/null 2>&1 & echo started')
for i in $(seq 50); do [ "$(count "$A")" -ge 5 ] 2>/dev/null && break; sleep 0.1; done
HELPER=$(ps -o pid= -o args= --ppid "$DSECD_PID" | awk '$2 ~ /container-init$/ && $3 == "exec" { print $1 }')
S=$(ps -o pid= --ppid "${HELPER:-0}" | head -1 | tr -d ' ')
[ -n "$S" ] || bail "cannot find the session's shell"

mkdir -p "$T/img"
NET=$(stat -L -c %i "/proc/$S/ns/net")
declare -A ino
for f in 0 1 2 3; do ino[$f]=$(readlink "/proc/$S/fd/$f" | tr -dc 0-9); done
run "$CCRIU" "$S" -- "$CRIU" dump -t "$S" -D /proc/self/fd/7 --leave-running \
	--network-lock skip --external "net[$NET]:sbnet" -v4 -o dump.log 7<"$T/img"
ok "$RC" "criu dump --leave-running of the session, in its mount namespace ($OUT)"
[ "$RC" = 0 ] || grep -E 'Error' "$T/img/dump.log" | head -5 | sed 's/^/# /' >&2
at_dump=$(count "$A")

before=$(inits | tr '\n' ' ')
OUT=$(helper-req "$H" fork id="$A" 'n#=1')
F=$(printf '%s' "$OUT" | grep -o '"ids":\["[^"]*"' | sed 's/.*\["//; s/"$//')
B=$(inits | while read -r p; do case " $before " in *" $p "*) ;; *) echo "$p" ;; esac; done | head -1)
[ -n "$F" ] && [ -n "$B" ] || bail "cannot fork the sandbox: $OUT"
at_fork=$(count "$F")

# The fork's cgroups (its init's), for the restored tree to join.
cgs=()
while IFS=: read -r _ ctl path; do
	case $ctl in
	'') d=/sys/fs/cgroup; [ -d /sys/fs/cgroup/unified ] && d=/sys/fs/cgroup/unified ;;
	name=*) continue ;;
	*) d=/sys/fs/cgroup/$ctl ;;
	esac
	[ -e "$d$path/cgroup.procs" ] && [ "$path" != / ] && cgs+=(--cg "$d$path/cgroup.procs")
done < "/proc/$B/cgroup"

# The restored shell's standard input, output, error and marker pipe:
# ours (dsecd's, once this is the backend's), in place of the original's.
mkfifo "$T/in" "$T/outp"
cat "$T/outp" > "$T/out" &
(
	exec 20<>"$T/in" 21>"$T/outp" 22>/dev/null 23>/dev/null
	exec setsid "$CCRIU" --new --stay "${cgs[@]}" "$B" -- "$CRIU" restore \
		-D /proc/self/fd/7 -d --restore-sibling --userns-maps-from "$B" \
		--inherit-fd 'fd[8]:sbnet' --manage-cgroups=ignore --pidfile restored.pid \
		--inherit-fd "fd[20]:pipe:[${ino[0]}]" --inherit-fd "fd[21]:pipe:[${ino[1]}]" \
		--inherit-fd "fd[22]:pipe:[${ino[2]}]" --inherit-fd "fd[23]:pipe:[${ino[3]}]" \
		-v4 -o restore.log 7<"$T/img" 8<"/proc/$B/ns/net"
) > "$T/restore.out" 2>&1 &
disown
for i in $(seq 100); do grep -q '^criu ' "$T/restore.out" && break; sleep 0.1; done
is "$(head -1 "$T/restore.out")" "criu 0" "criu restore of the session beside the fork"
grep -q '^criu 0' "$T/restore.out" || grep -E 'Error' "$T/img/restore.log" | head -5 | sed 's/^/# /' >&2
R=$(cat "$T/img/restored.pid" 2>/dev/null)
[ -n "$R" ] || R=0

sleep 1
c1=$(count "$F"); sleep 0.5; c2=$(count "$F")
diag "counter: at the dump $at_dump, in the fork's snapshot $at_fork, then in the fork $c1, $c2; the original now $(count "$A")"
ok "$([ "${c2:-0}" -gt "${c1:-0}" ]; echo $?)" "the restored counter runs in the fork's files ($c1, then $c2)"
ok "$([ "${c1:-0}" -gt "${at_dump:-0}" ] && [ "${c1:-0}" -lt "$(count "$A")" ]; echo $?)" \
	"... from its value in memory at the dump, behind the original, which goes on"
is "$(awk '{ print $2 }' "/proc/$R/uid_map" 2>/dev/null)" "$(awk '{ print $2 }' "/proc/$B/uid_map")" \
	"the restored session's root is the fork's uid range"
ok "$([ "$(awk '{ print $2 }' "/proc/$R/uid_map" 2>/dev/null)" != "$(awk '{ print $2 }' "/proc/$S/uid_map")" ]; echo $?)" \
	"... not the original's"
is "$(grep -E '^(Seccomp|NoNewPrivs):' "/proc/$R/status" 2>/dev/null | awk '{ print $2 }' | tr '\n' ' ')" \
	"1 2 " "... its seccomp filter and no_new_privs carried"
is "$(grep ':memory:' "/proc/$R/cgroup" 2>/dev/null || grep '^0::' "/proc/$R/cgroup")" \
	"$(grep ':memory:' "/proc/$B/cgroup" || grep '^0::' "/proc/$B/cgroup")" "... in the fork's cgroup"
echo 'echo "$X $PWD"' > "$T/in"
for i in $(seq 30); do [ -s "$T/out" ] && break; sleep 0.1; done
is "$(cat "$T/out")" "42 /tmp" "the restored shell kept its variable and directory"
is "$(helper-req "$H" exec id="$F" 'argv[]=ls' 'argv[]=/tmp' | grep -c count)" 1 \
	"the fork's files are the fork's"
OUT=$(helper-req "$H" destroy id="$F")
for i in $(seq 50); do [ -e "/proc/$R" ] || break; sleep 0.1; done
ok "$([ ! -e "/proc/$R" ]; echo $?)" "destroying the fork ends the restored session"
helper-req "$H" destroy id="$A" >/dev/null
