#!/bin/bash
# dsecd killed with SIGKILL (a crash, an OOM kill of the daemon, a node
# agent's hard restart) in the middle of concurrent image-backed creates,
# and started again on the same state directory, round after round: nothing
# it ran may survive it (no init, no helper, no pre-exec clone blocked with
# the state lock), and the new daemon starts and removes everything the
# dead one left: cgroups (also those below the dead daemon's own cgroup,
# which is not the new one's), layer mounts (FUSE and EROFS), sandbox
# directories, veths, its bridge and NAT table; then serves.  (Sandboxes
# are not re-adopted: see dsec-container(7), "Destroy".)
#
# DSEC_8001_ROUNDS (5) and DSEC_8001_CLIENTS (16) set the load.
. "$(dirname "$0")/lib.sh"

need_container_images
need_cmd flock

ROUNDS=${DSEC_8001_ROUNDS:-5}
CLIENTS=${DSEC_8001_CLIENTS:-16}
plan $((ROUNDS * 9 + 6))

mk_small_root "$T/root" sh cat true sleep
echo "from the image" > "$T/root/hello.txt"
export DSEC_FS3_STORE="$T/state/fs3"
mkdir -p "$T/state"
run dsecctl image import --tag kill:1 "$T/root"
[ "$RC" = 0 ] || bail "cannot import the image: $OUT"

# A bridge and subnet of this test's own (see t/3120).
BR=dsk$(printf %04x $(($$ & 0xffff)))
NET=$((200 + $$ % 50))
FLAGS=(--set backends=fncall,container --set "container.bridge=$BR"
	--set "container.subnet=10.$NET.0.0/16" --set image_on_demand=true)
MADE=()		# cgroup directories the test made

# subcg NAME: a new cgroup NAME below our own in every hierarchy dsecd
# uses; prints the directories.
subcg() {
	local id ctl path mnt
	while IFS=: read -r id ctl path; do
		case $ctl in
		"") mnt=/sys/fs/cgroup/unified
		    [ -e /sys/fs/cgroup/cgroup.controllers ] && mnt=/sys/fs/cgroup ;;
		memory|pids|freezer|cpu,cpuacct) mnt=/sys/fs/cgroup/$ctl ;;
		*) continue ;;
		esac
		[ -d "$mnt$path" ] || continue
		mkdir "$mnt${path%/}/$NAME" 2>/dev/null && echo "$mnt${path%/}/$NAME"
	done < /proc/self/cgroup
}

# start_in NAME: start_dsecd, the daemon in a cgroup NAME of its own (so
# that the groups it makes below its own cgroup are not siblings of the
# next daemon's).
start_in() {
	local dirs d i
	NAME=$1
	dirs=$(subcg)
	MADE+=($dirs)
	DSEC_HOST="ipc://$T/dsecd.sock"
	export DSEC_HOST
	sh -c 'for d in $0; do echo $$ > "$d/cgroup.procs" 2>/dev/null; done; shift; exec "$@"' \
		"$dirs" x "$TOP/dsecd/dsecd" --foreground --state-dir "$T/state" \
		--listen "$DSEC_HOST" --backend-dir "$TOP/backends" --helper-dir "$TOP/build/libexec" \
		--log-level info "${FLAGS[@]}" 2>>"$T/dsecd.log" &
	DSECD_PID=$!
	for i in $(seq 300); do
		helper-req -q "$DSEC_HOST" ping >/dev/null 2>&1 && return 0
		kill -0 "$DSECD_PID" 2>/dev/null || break
		sleep 0.1
	done
	diag "dsecd did not start:"; tail -20 "$T/dsecd.log" | sed 's/^/# /' >&2
	return 1
}

# client N: creates image-backed sandboxes (every fourth one allowlisted,
# so it has a veth) until the daemon is gone or $T/stop exists.
client() {
	local n=$1 net=()
	[ $((n % 4)) = 0 ] && net=(--allow "10.$NET.255.254:9")
	while [ ! -e "$T/stop" ]; do
		dsec-run --client-timeout 10 --backend container --image kill:1 "${net[@]}" \
			--keep -c 'sleep 7345 & cat /hello.txt' >/dev/null 2>&1 || break
	done
}

count() { helper-req "$DSEC_HOST" list 2>/dev/null | grep -o '"id":' | wc -l; }
# left OLD: what of dead daemon OLD still runs: its processes (their
# command lines name the state directory: the daemon, a pre-exec clone of
# it, a helper) and those in its cgroups.
left() {
	local p
	pgrep -a -f "$T/state" | grep -v -e pgrep -e helper-req
	for d in $(find /sys/fs/cgroup -maxdepth 8 -type d -name "dsec-*.$1" 2>/dev/null); do
		# Each one with its state, parent, age and command, so that a
		# failure says what survived.
		for p in $(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null); do
			echo "$p $(ps -o stat=,ppid=,etimes=,args= -p "$p" 2>/dev/null) ($d)"
		done
	done
}
# dead_mounts: layer mounts under the state directory (EROFS), and FUSE
# mounts there that do not answer (a dead daemon's).
dead_mounts() {
	local m
	grep " erofs " /proc/self/mountinfo | grep -c "$T/state/"
	for m in $(awk '/fuse/ { print $5 }' /proc/self/mountinfo | grep "^$T/state/"); do
		stat "$m" >/dev/null 2>&1 || echo "dead fuse $m"
	done
}

# Killed while a sandbox's init, cloned into its new namespaces, waits
# before its exec for dsecd to write its id maps: strace holds the daemon
# for 3 s after each clone() of its main thread, and the kill comes then.
if command -v strace >/dev/null 2>&1; then
	strace -o /dev/null -e trace=clone -e inject=clone:delay_exit=3000000 \
		"$TOP/dsecd/dsecd" --foreground --state-dir "$T/state" --listen "ipc://$T/dsecd.sock" \
		--backend-dir "$TOP/backends" --helper-dir "$TOP/build/libexec" --log-level info \
		--set backends=container 2>>"$T/dsecd.log" &
	tracer=$!
	for i in $(seq 300); do
		helper-req -q "ipc://$T/dsecd.sock" ping >/dev/null 2>&1 && break
		sleep 0.1
	done
	d=$(pgrep -P "$tracer" -x dsecd)
	helper-req -q "ipc://$T/dsecd.sock" create backend=container >/dev/null 2>&1 &
	req=$!
	sleep 1.5
	kill -KILL "$d"
	wait "$tracer" "$req" 2>/dev/null
	for i in $(seq 50); do [ -z "$(pgrep -f "$T/state")" ] && break; sleep 0.1; done
	is "$(pgrep -a -f "$T/state")" "" "no clone of a killed daemon waits for ever for its go"
	run flock -n "$T/state/dsecd.lock" true
	is "$RC" 0 "... nor holds the state lock"
else
	skip "needs strace"
	skip "needs strace"
fi

# Killed between making its bridge and bringing it up (the kernel takes
# no alias with a new link): a bridge of the configured name, down and
# without the alias that names a daemon, is a leftover too.
ip link add name "$BR" type bridge 2>/dev/null
run ip -o link show "$BR"
like "$OUT" "$BR" "a killed daemon's half-made bridge is there"
start_in "t8001.$$.0" || bail "dsecd did not start"
run sh -c "ip -o link show | grep ' $BR[:@]'"
is "$OUT" "" "... and the next daemon removes it"
for r in $(seq "$ROUNDS"); do
	old=$DSECD_PID
	rm -f "$T/stop"
	pids=
	for c in $(seq "$CLIENTS"); do client "$c" & pids="$pids $!"; done
	dsec-run --client-timeout 10 --backend fncall --timeout 60 -c 'sleep 8124' >/dev/null 2>&1 &
	pids="$pids $!"
	for i in $(seq 300); do [ "$(count)" -ge "$CLIENTS" ] && break; sleep 0.1; done
	n=$(count)
	ok $([ "$n" -ge "$CLIENTS" ]; echo $?) "round $r: $n sandboxes, creates going on"
	sleep 0.$((RANDOM % 5))
	kill -KILL "$old"
	wait "$old" 2>/dev/null
	DSECD_PID=
	touch "$T/stop"
	for p in $pids; do wait "$p" 2>/dev/null; done
	# Up to 30 s: on a loaded machine the kernel's teardown of a few dozen
	# sandboxes (their pid namespaces, overlay and FUSE mounts) is not
	# instant; what is checked is that nothing outlives it.
	for i in $(seq 300); do [ -z "$(left "$old")" ] && break; sleep 0.1; done
	is "$(left "$old")" "" "round $r: nothing of the killed daemon runs on"
	run flock -n "$T/state/dsecd.lock" true
	is "$RC" 0 "round $r: nobody holds its state lock"

	start_in "t8001.$$.$r" || bail "round $r: dsecd did not restart"
	run find /sys/fs/cgroup -maxdepth 8 -type d -name "dsec-*.$old"
	is "$OUT" "" "round $r: the restarted daemon removed the dead one's cgroups"
	is "$(dead_mounts)" "0" "round $r: ... its layer mounts"
	is "$(ls -d "$T"/state/backends/*/sb.* 2>/dev/null | wc -l)" "0" \
		"round $r: ... its sandbox directories"
	run sh -c "ip -o link show | grep -e 'dsv$(printf %05x $((old & 0xfffff)))' -e ' $BR[:@]'; \
		nft list tables 2>/dev/null | grep 'dsec_$BR\$'"
	is "$OUT" "" "round $r: ... its veths, bridge and NAT table"
	is "$(count)" "0" "round $r: ... and lists none of its sandboxes"
	run dsec-run --backend container --image kill:1 -c 'cat /hello.txt'
	is "$OUT" "from the image" "round $r: the restarted daemon serves image-backed sandboxes"
done
stop_dsecd
is "$?" 0 "the restarted daemon shuts down cleanly"
bad=
for d in "${MADE[@]}"; do rmdir "$d" 2>/dev/null || bad="$bad $d"; done
is "$bad" "" "every cgroup the test made is empty again"
