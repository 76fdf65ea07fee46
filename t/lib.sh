# t/lib.sh - TAP helpers for shell tests.  Source it first thing:
#
#     . "$(dirname "$0")/lib.sh"
#     plan 3
#     start_dsecd                 # a private dsecd; DSEC_HOST points at it
#     is "$(dsec-run -- echo hi)" "hi" "dsec-run echoes"
#
# Every test gets a private scratch directory $T, removed at exit, and the
# daemon it started is stopped (SIGTERM, then SIGKILL after 10 s) at exit.
# Tests never send to anything but loopback, ipc sockets under $T, or the
# addresses of network namespaces they made themselves.

set -u
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PATH="$TOP/tools:$TOP/dsecd:$TOP/t:$PATH"
T=$(mktemp -d "${TMPDIR:-/tmp}/dsec-test.XXXXXX")
# A program a test builds against libdsec gets the sanitizers libdsec was
# built with (make asan: SAN=1), or it could neither link nor load it.
SAN_CFLAGS=
if nm -D "$TOP/lib/libdsec.so" 2>/dev/null | grep -q ' U __asan_init'; then
	SAN_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer"
fi
# san_quiet: drops from OUT what the linker always says of libasan (its
# tmpnam and friends), so "compiles cleanly" means the same with SAN_CFLAGS.
san_quiet() {
	[ -z "$SAN_CFLAGS" ] || OUT=$(printf '%s\n' "$OUT" | grep -v 'libasan\.so[.0-9]*: warning: the use of')
}
_tap_n=0
_tap_fail=0
_tap_planned=
DSECD_PID=

_tap_cleanup() {
	local m
	stop_dsecd
	stop_nodes
	_netns_cleanup
	# A daemon killed with -9 leaves the container backend's /sys mounted
	# in its state directory (the next one at the same place unmounts it).
	for m in $(awk -v t="$T/" 'index($5, t) == 1 { print $5 }' /proc/self/mountinfo |
		sort -r); do
		umount -l "$m" 2>/dev/null
	done
	rm -rf "$T"
	if [ -n "$_tap_planned" ] && [ "$_tap_planned" != "$_tap_n" ]; then
		echo "# planned $_tap_planned tests but ran $_tap_n"
	fi
}
trap _tap_cleanup EXIT

plan() { _tap_planned=$1; echo "1..$1"; }
skip_all() { echo "1..0 # SKIP $*"; _tap_planned=; trap - EXIT; rm -rf "$T"; exit 0; }
diag() { printf '# %s\n' "$@" >&2; }

# ok STATUS DESCRIPTION: STATUS is a command's exit status (0 = pass).
ok() {
	_tap_n=$((_tap_n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $_tap_n - $2"
	else echo "not ok $_tap_n - $2"; _tap_fail=$((_tap_fail + 1)); fi
}
# is GOT EXPECTED DESCRIPTION
is() {
	_tap_n=$((_tap_n + 1))
	if [ "$1" = "$2" ]; then echo "ok $_tap_n - $3"
	else
		echo "not ok $_tap_n - $3"; _tap_fail=$((_tap_fail + 1))
		printf '#   got:      %s\n#   expected: %s\n' "$1" "$2" >&2	# prove shows stderr
	fi
}
# like GOT REGEX DESCRIPTION (extended regex, grep -E: matches if any line
# of GOT does).  A REGEX with a newline in it is matched against GOT as one
# string instead (^ and $ at its ends, . across lines): grep would take each
# of its lines as a pattern of its own and pass if any one matched.
like() {
	_tap_n=$((_tap_n + 1))
	local _m=1
	case $2 in
	*$'\n'*) [[ $1 =~ $2 ]] && _m=0 ;;
	*) printf '%s' "$1" | grep -Eq -- "$2" && _m=0 ;;
	esac
	if [ $_m = 0 ]; then echo "ok $_tap_n - $3"
	else
		echo "not ok $_tap_n - $3"; _tap_fail=$((_tap_fail + 1))
		printf '#   got:      %s\n#   expected to match: %s\n' "$1" "$2" >&2
	fi
}
skip() { _tap_n=$((_tap_n + 1)); echo "ok $_tap_n # SKIP $*"; }
# run CMD...: runs a command, keeping its output in $OUT and status in $RC.
run() { OUT=$("$@" 2>&1); RC=$?; }

# get [PARENT] KEY: the first field KEY of a helper-req reply in $OUT, JSON escapes
# decoded (get error code: the error's code).
get() {
	local key=${!#} v
	v=$(printf '%s' "$OUT" | grep -o "\"$key\":\(\"\([^\"\\]\|\\\\.\)*\"\|[^,}]*\)" | head -1)
	v=${v#\"$key\":}
	case $v in
	\"*) v=${v#\"}; printf '%b' "${v%\"}" ;;
	*) printf '%s' "$v" ;;
	esac
}

# start_dsecd [dsecd flags...]: starts a private daemon on ipc://$T/dsecd.sock
# with state in $T/state, exports DSEC_HOST, waits until it answers (30 s).
start_dsecd() {
	mkdir -p "$T/state"
	DSEC_HOST="ipc://$T/dsecd.sock"
	export DSEC_HOST
	"$TOP/dsecd/dsecd" --foreground --state-dir "$T/state" --listen "$DSEC_HOST" \
		--backend-dir "$TOP/backends" --helper-dir "$TOP/build/libexec" \
		--log-level "${DSEC_TEST_LOG_LEVEL:-info}" "$@" 2>"$T/dsecd.log" &
	DSECD_PID=$!
	local i
	for i in $(seq 300); do
		if "$TOP/t/helper-req" -q "$DSEC_HOST" ping >/dev/null 2>&1; then return 0; fi
		if ! kill -0 "$DSECD_PID" 2>/dev/null; then
			diag "dsecd exited at start:"; sed 's/^/# /' "$T/dsecd.log" >&2
			DSECD_PID=; bail "dsecd did not start"
		fi
		sleep 0.1
	done
	bail "dsecd did not answer within 30 s"
}

# bail REASON: stop the whole test file (TAP "Bail out!" stops prove too).
bail() { echo "Bail out! $*"; exit 1; }

# stop_dsecd: SIGTERM, wait up to 10 s, then SIGKILL.  Returns dsecd's status.
stop_dsecd() {
	[ -n "$DSECD_PID" ] || return 0
	local i rc=0
	kill -TERM "$DSECD_PID" 2>/dev/null
	for i in $(seq 100); do kill -0 "$DSECD_PID" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$DSECD_PID" 2>/dev/null; then
		diag "dsecd ignored SIGTERM for 10 s; killing"
		kill -KILL "$DSECD_PID" 2>/dev/null; rc=137
	fi
	wait "$DSECD_PID" 2>/dev/null || rc=$?
	DSECD_PID=
	return $rc
}

# start_node NAME [dsecd flags...]: one more private daemon, for tests of
# several nodes: node NAME on ipc://$T/NAME.sock, state in $T/NAME, log in
# $T/NAME.log; waits until it answers (30 s).  Stopped at exit (stop_nodes).
_node_pids=
start_node() {
	local name=$1 i pid
	shift
	mkdir -p "$T/$name"
	"$TOP/dsecd/dsecd" --foreground --node "$name" --state-dir "$T/$name" \
		--listen "ipc://$T/$name.sock" --backend-dir "$TOP/backends" \
		--helper-dir "$TOP/build/libexec" --log-level "${DSEC_TEST_LOG_LEVEL:-info}" "$@" \
		2>"$T/$name.log" &
	pid=$!
	_node_pids="$_node_pids $pid"
	eval "NODE_PID_$name=$pid"
	for i in $(seq 300); do
		if "$TOP/t/helper-req" -q "ipc://$T/$name.sock" ping >/dev/null 2>&1; then return 0; fi
		if ! kill -0 "$pid" 2>/dev/null; then
			diag "node $name exited at start:"; sed 's/^/# /' "$T/$name.log" >&2
			bail "node $name did not start"
		fi
		sleep 0.1
	done
	bail "node $name did not answer within 30 s"
}

# test_cluster "NAMES" ["ABSENT"]: a start_node daemon of the test backend
# per name in NAMES, each with every name of NAMES and ABSENT (members
# that never run) in its cluster_nodes; at NAME OP ARGS... sends helper-req
# to one, idof reads the id out of a create's reply.
test_cluster() {
	local n members=
	for n in $1 ${2:-}; do members="$members${members:+,}$n=ipc://$T/$n.sock"; done
	for n in $1; do
		start_node "$n" --backend-dir "$TOP/t" --set backends=test \
			--set default_backend=test --set cluster_nodes="$members"
	done
}
at() { local n=$1; shift; "$TOP/t/helper-req" "ipc://$T/$n.sock" "$@"; }
# wait_info NODE PATTERN: until start_node NODE's info matches the bash
# regex PATTERN (30 s at most); 1, and the last info as a diagnostic, if not.
wait_info() {
	local i out
	for i in $(seq 150); do
		out=$(at "$1" info)
		[[ $out =~ $2 ]] && return 0
		sleep 0.2
	done
	diag "$1: $out"
	return 1
}
idof() { sed -n 's/.*"id":"\([^"]*\)".*/\1/p'; }

# stop_nodes: SIGTERM every start_node daemon, SIGKILL after 10 s.
stop_nodes() {
	local pid i
	for pid in $_node_pids; do kill -TERM "$pid" 2>/dev/null; done
	for pid in $_node_pids; do
		for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	_node_pids=
}

# dsecd_log: the private daemon's log so far.
dsecd_log() { cat "$T/dsecd.log" 2>/dev/null; }

# need_root, need_cmd CMD: skip the whole file when the machine lacks it.
need_root() { [ "$(id -u)" = 0 ] || skip_all "needs root"; }
need_cmd() { command -v "$1" >/dev/null 2>&1 || skip_all "needs $1"; }
# need_fncall: skip the whole file unless fncall calls can run through a
# private daemon here (root, the tools, the built backend, python3).
need_fncall() {
	need_root
	need_cmd dsec-run
	need_cmd dsecd
	need_cmd helper-req
	need_cmd python3
	[ -e "$TOP/backends/fncall.so" ] || skip_all "needs backends/fncall.so (make)"
}

# need_container: skip the whole file unless the container backend can run
# here (root, the built backend and helper, overlayfs, namespaces, cgroups).
need_container() {
	need_root
	need_cmd dsec-run
	need_cmd dsecd
	need_cmd helper-req
	[ -e "$TOP/backends/container.so" ] || skip_all "needs backends/container.so (make)"
	[ -x "$TOP/build/libexec/container-init" ] || skip_all "needs build/libexec/container-init (make)"
	grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null
	grep -qw overlay /proc/filesystems || skip_all "needs overlayfs"
	[ -e /proc/self/ns/pid ] && [ -e /proc/self/ns/cgroup ] || skip_all "needs pid and cgroup namespaces"
	[ -d /sys/fs/cgroup/memory ] || [ -e /sys/fs/cgroup/cgroup.controllers ] || skip_all "needs a memory cgroup"
}

# need_container_net: need_container, and what the network tests use (ip,
# nft, python3 on the host and in the sandboxes).
need_container_net() {
	need_container
	need_cmd ip
	need_cmd nft
	[ -x /usr/bin/python3 ] || skip_all "needs /usr/bin/python3"
}

# new_container [dsec-run flags...]: a kept container sandbox; prints its id.
new_container() {
	local o
	o=$(dsec-run --backend container --keep "$@" -c true 2>&1 >/dev/null | head -1)
	echo "${o##* }"
}

# hello_py: the path of a python3 TCP server for network tests: `python3
# HELLO_PY ADDR PORT` answers "hello-PORT" to each connection for 120 s
# (ADDR "::" takes IPv4 and IPv6).  In a sandbox: dsec-run --stdin.
hello_py() {
	[ -e "$T/hello.py" ] || cat > "$T/hello.py" <<'EOF'
import socket, sys, time
addr, port = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
if ":" in addr:
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind((addr, port)); s.listen(16); s.settimeout(1)
end = time.time() + 120
while time.time() < end:
    try:
        c, _ = s.accept()
    except OSError:
        continue
    c.sendall(("hello-%d" % port).encode()); c.close()
EOF
	echo "$T/hello.py"
}

# hello_server [NETNS] ADDR PORT: that server in the background (in network
# namespace NETNS if given); its pid is in $!.
hello_server() {
	local py
	py=$(hello_py)
	if [ $# = 3 ]; then
		ip netns exec "$1" /usr/bin/python3 "$py" "$2" "$3" &
	else
		/usr/bin/python3 "$py" "$1" "$2" &
	fi
}

# container_cgroups: the container backend's cgroup directories (one per
# hierarchy) of the private dsecd; nothing once it has removed them.
container_cgroups() {
	ls -d /sys/fs/cgroup/*/dsec-container.$DSECD_PID /sys/fs/cgroup/*/*/dsec-container.$DSECD_PID \
		/sys/fs/cgroup/*/*/*/dsec-container.$DSECD_PID /sys/fs/cgroup/dsec-container.$DSECD_PID 2>/dev/null
}

# container_cgroups_left: what the destroyed sandboxes left below those
# directories, as "BUSY:KEPT": BUSY the groups with a process in them (0
# once every sandbox is gone), KEPT "ok" when no hierarchy holds more
# sandbox groups than the 64 emptied ones kept for new sandboxes (each with
# at most its one command group; more stay for 10 s after more than 64 are
# destroyed at once, see t/3192), else how many there are.
container_cgroups_left() {
	local busy=0 kept=ok d n
	for d in $(find $(container_cgroups) -mindepth 1 -type d 2>/dev/null); do
		[ -n "$(cat "$d/cgroup.procs" 2>/dev/null)" ] && busy=$((busy + 1))
	done
	for d in $(container_cgroups); do
		n=$(find "$d" -mindepth 1 -maxdepth 1 -type d | wc -l)
		[ "$n" -le 64 ] && [ "$(find "$d" -mindepth 3 -type d | wc -l)" = 0 ] || kept=$n
	done
	echo "$busy:$kept"
}

# container_cgroot: the same (the sessions tests' name).
container_cgroot() { container_cgroups; }
# container_images_missing: why container sandboxes of fs3 images cannot
# run here (root, the tools, container.so, overlayfs, EROFS), or nothing.
container_images_missing() {
	local c
	[ "$(id -u)" = 0 ] || { echo "needs root"; return; }
	for c in dsec-run dsecctl helper-req mkfs.erofs; do
		command -v "$c" >/dev/null 2>&1 || { echo "needs $c"; return; }
	done
	[ -e "$TOP/backends/container.so" ] || { echo "needs backends/container.so (make)"; return; }
	grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null
	grep -qw overlay /proc/filesystems || { echo "needs overlayfs"; return; }
	grep -qw erofs /proc/filesystems || modprobe erofs 2>/dev/null
	grep -qw erofs /proc/filesystems || { echo "needs EROFS"; return; }
}

# need_container_images: skip the whole file unless container sandboxes of
# fs3 images can run here.
need_container_images() {
	local why
	why=$(container_images_missing)
	[ -z "$why" ] || skip_all "$why"
}

# no_upper_xattr: true when the daemon said this kernel's tmpfs keeps no
# user.* xattrs (before Linux 6.6), where a sandbox's overlay in a user
# namespace cannot mark a directory opaque (container.c's
# upper_xattr_check): removing an image directory that holds another, or
# replacing one, fails with EIO there.
no_upper_xattr() { grep -q "keeps no user\.\* extended attributes" "$T/dsecd.log" 2>/dev/null; }
# The reason of the checks that need it.
NO_UPPER_XATTR="this kernel's tmpfs keeps no user.* xattrs (before Linux 6.6; dsecd warned): a user namespace's overlay cannot mark a directory opaque"

# warm_shells ID: waits (bounded, 15 s) until container sandbox ID has its
# warm shell (the template and a waiting child: two dsec-shell processes
# at least); prints how many its last look saw.  A template starts after
# 0.2 s without a command: it looks every 0.5 s.
warm_shells() {
	local i n=0
	for i in $(seq 30); do
		sleep 0.5
		n=$(dsec-run --id "$1" -c 'cat /proc/[0-9]*/comm | grep -cx dsec-shell')
		[ "$n" -ge 2 ] && break
	done
	echo "$n"
}

# mk_small_root ROOT PROGRAM...: a small root at ROOT with the host's
# PROGRAMs in /bin and the libraries they load, plus /data, /etc and /tmp.
mk_small_root() {
	local root=$1 bin lib
	shift
	mkdir -p "$root/bin" "$root/data" "$root/etc" "$root/tmp"
	for bin in "$@"; do
		cp -L "$(type -P "$bin")" "$root/bin/$bin" || continue
		for lib in $(ldd "$(type -P "$bin")" | grep -o '/[^ ]*'); do
			mkdir -p "$root$(dirname "$lib")"
			cp -Ln "$lib" "$root$lib" 2>/dev/null
		done
	done
}

# container_net TAG [SHIFT]: a container network test's own bridge BR and
# sandbox subnet 10.NET.0.0/16 (so parallel runs do not meet), and an
# outside network namespace XNS at XNET.2 (EXT) routed from the host, where
# its servers run (SHIFT moves XNET for a test that runs beside another).
# Skips the test when the namespace cannot be made.  CONTAINER_NET is what
# start_dsecd needs to use them.
container_net() {
	BR="d$1t$(( $$ % 100000 ))"
	NET=$(( 100 + $$ % 100 ))
	XNET="172.$(( 16 + $$ % 16 )).$(( ($$ + ${2:-0}) % 250 ))"
	EXT="$XNET.2"
	XNS="dsec$1$$"
	CONTAINER_NET="--set container.bridge=$BR --set container.subnet=10.$NET.0.0/16"
	mk_netns "$XNS" "d$1x$(( $$ % 100000 ))" "$XNET" ||
		{ _netns_cleanup; skip_all "cannot make a network namespace and a veth pair"; }
}

# mk_netns NAME HOSTIF NET: a network namespace NAME of this test joined to
# the host by a veth pair: HOSTIF in the host with NET.1/24, eth0 in NAME
# with NET.2/24 and a default route via NET.1 (NET is three octets, such as
# 10.250.7).  Run in it with `ip netns exec NAME CMD`.  Removed at exit.
_netns=
mk_netns() {
	ip netns add "$1" || return 1
	_netns="$_netns $1:$2"
	ip link add "$2" type veth peer name eth0 netns "$1" &&
		ip addr add "$3.1/24" dev "$2" && ip link set "$2" up &&
		ip -n "$1" addr add "$3.2/24" dev eth0 && ip -n "$1" link set eth0 up &&
		ip -n "$1" link set lo up && ip -n "$1" route add default via "$3.1"
}
_netns_cleanup() {
	local n
	for n in $_netns; do
		ip link del "${n#*:}" 2>/dev/null
		ip netns del "${n%%:*}" 2>/dev/null
	done
	_netns=
}
