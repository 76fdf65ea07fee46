#!/bin/bash
# README's `make run` path: the daemon started as `make run` starts it
# (tools/demo.sh, here with --serve, its state under $T and no TCP port),
# then README's steps from "another terminal", taken from README itself: the
# exports, a command, an image import with dsecctl and a container sandbox
# of that image; then a kept sandbox of it and an exec in it.  The image
# imported beside the daemon is the one the daemon sees (dsecctl finds the
# store through DSEC_STATE_DIR); ^C (SIGTERM) stops the demo and its dsecd,
# and the daemon logged no error.
. "$(dirname "$0")/lib.sh"

need_container_images
need_cmd setsid

# README's lines: the indented block after "While `make run` serves".
steps=$(awk '/^While `make run` serves/ { s = 1; next }
	s && /^    / { c = 1; print substr($0, 5); next }
	s && c && !/^$/ { exit }' "$TOP/README")
nsteps=$(printf '%s\n' "$steps" | grep -vc '^export ')

plan $((nsteps + 10))

# "At the top of the tree": README's $PWD/run-state is this test's.
cd "$T" || bail "cannot cd to $T"
setsid "$TOP/tools/demo.sh" --state "$T/run-state" --no-tcp --serve > "$T/demo.out" 2>&1 &
DEMO_PID=$!
stop_demo() {
	[ -n "$DEMO_PID" ] || return 0
	kill -TERM "$DEMO_PID" 2>/dev/null
	for _ in $(seq 150); do kill -0 "$DEMO_PID" 2>/dev/null || break; sleep 0.1; done
	kill -KILL -- "-$DEMO_PID" 2>/dev/null
	wait "$DEMO_PID" 2>/dev/null
	DEMO_PID=
}
trap 'stop_demo; _tap_cleanup' EXIT

for _ in $(seq 300); do
	grep -q '^dsecd is serving' "$T/demo.out" && break
	kill -0 "$DEMO_PID" 2>/dev/null || break
	sleep 0.1
done
like "$(cat "$T/demo.out")" '^dsecd is serving \(pid [0-9]+\)' "demo.sh --serve starts dsecd and says so"
dpid=$(sed -n 's/^dsecd is serving (pid \([0-9]*\)).*/\1/p' "$T/demo.out")
[ -n "$dpid" ] || { diag "$(cat "$T/demo.out")"; bail "the demo's dsecd did not start"; }

# The exports first, as a second terminal would.
eval "$(printf '%s\n' "$steps" | grep '^export ')"
is "$DSEC_HOST" "ipc://$T/run-state/dsecd.sock" "README's DSEC_HOST is the demo's socket"
is "$DSEC_STATE_DIR" "$T/run-state" "README's DSEC_STATE_DIR is the demo's state directory"

# An image of README's command: a small root with /etc/os-release.
mk_small_root "$T/root" sh cat
echo 'PRETTY_NAME="dsec test image"' > "$T/root/etc/os-release"
while IFS= read -r line; do
	case $line in export\ *|'') continue ;; esac
	run eval "${line//\/srv\/rootfs/$T/root}"
	is "$RC" 0 "README: ${line%%  #*}"
	[ "$RC" = 0 ] || diag "$OUT"
done <<< "$steps"
like "$OUT" '^PRETTY_NAME="dsec test image"$' "the container sandbox runs the image dsecctl imported"
run env -u DSEC_STATE_DIR dsecctl --store "$T/run-state/fs3" image ls
like "$OUT" '^base:1 ' "dsecctl imported into the demo's store, run-state/fs3"
like "$(cat "$T/demo.out")" "export DSEC_STATE_DIR=$T/run-state" "the demo prints the DSEC_STATE_DIR to export"

id=$(dsec-run --backend container --image base:1 --keep -- true 2>&1 >/dev/null | head -1)
run dsec-run --id "$id" -- cat /etc/os-release
is "$RC:$OUT" "0:PRETTY_NAME=\"dsec test image\"" "an exec in a kept sandbox of the image"
run helper-req "$DSEC_HOST" destroy id="$id"
like "$OUT" '"ok":true' "... which is destroyed"

stop_demo
ok "$(kill -0 "$dpid" 2>/dev/null; [ $? != 0 ]; echo $?)" "SIGTERM to the demo stops its dsecd"
is "$(grep -E '^[^ ]+ [^ ]+ error:' "$T/run-state/dsecd.log")" "" "the daemon logged no error"
