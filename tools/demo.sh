#!/bin/bash
# demo.sh - `make run`: start one dsecd, show what it does, serve until ^C.
#
#     tools/demo.sh [--state DIR] [--tcp URL | --no-tcp] [--serve]
#
# State lives in run-state/ at the top of the tree (--state DIR); the daemon
# listens on ipc://STATE/dsecd.sock and tcp://127.0.0.1:7411 (--tcp URL,
# --no-tcp for none) and logs to STATE/dsecd.log.  Another terminal uses it
# with DSEC_HOST=ipc://STATE/dsecd.sock and, for dsecctl, DSEC_STATE_DIR=STATE
# (the daemon's images are in STATE/fs3).  Every backend built in backends/
# is asked for; the demo runs on those that loaded on this machine (--serve:
# no demo, only serve).  ^C (or SIGTERM) stops the daemon with SIGTERM and
# waits for it.

set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
STATE=$TOP/run-state
TCP=tcp://127.0.0.1:7411
DEMO=1
while [ $# -gt 0 ]; do
	case $1 in
	--state) [ $# -ge 2 ] || { echo "demo: --state needs a directory" >&2; exit 2; }
		STATE=$(mkdir -p "$2" && cd "$2" && pwd) || exit 2; shift ;;
	--tcp) [ $# -ge 2 ] || { echo "demo: --tcp needs a URL" >&2; exit 2; }
		TCP=$2; shift ;;
	--no-tcp) TCP= ;;
	--serve) DEMO= ;;
	*) echo "usage: tools/demo.sh [--state DIR] [--tcp URL | --no-tcp] [--serve]" >&2; exit 2 ;;
	esac
	shift
done
SOCK=ipc://$STATE/dsecd.sock
LOG=$STATE/dsecd.log
DSECD=$TOP/dsecd/dsecd
RUN=$TOP/tools/dsec-run
DSECD_PID=
TAIL_PID=

if [ -t 1 ]; then BOLD=$(printf '\033[1m'); PLAIN=$(printf '\033[0m'); else BOLD=; PLAIN=; fi
say() { printf '\n%s== %s%s\n' "$BOLD" "$*" "$PLAIN"; }
die() { echo "demo: $*" >&2; exit 1; }

stop() {
	trap - INT TERM EXIT
	[ -n "$TAIL_PID" ] && kill "$TAIL_PID" 2>/dev/null
	if [ -n "$DSECD_PID" ] && kill -0 "$DSECD_PID" 2>/dev/null; then
		echo
		echo "demo: stopping dsecd (pid $DSECD_PID)"
		kill -TERM "$DSECD_PID"
		wait "$DSECD_PID"
		echo "demo: dsecd exited with status $?"
	fi
	exit 0
}

# show ARGS...: print a dsec-run command line, run it, print its status.
show() {
	local rc
	local a q="'\\''"
	printf '\n$ dsec-run'
	for a in "$@"; do
		case "$a" in
		*[!A-Za-z0-9_./=:,+-]*|'') printf " '%s'" "${a//\'/$q}" ;;
		*) printf ' %s' "$a" ;;
		esac
	done
	printf '\n'
	"$RUN" "$@"
	rc=$?
	printf '[exit status %d]\n' "$rc"
	return 0
}

[ -x "$DSECD" ] || die "cannot find '$DSECD': run make first"
[ -x "$RUN" ] || die "cannot find '$RUN': run make first"

# Every backend that was built (not the objects preloaded into sandboxes'
# programs, *-preload.so, which are no backends); the daemon skips (and
# logs) those that cannot start here.
backends=
for so in "$TOP"/backends/*.so; do
	[ -e "$so" ] || continue
	b=$(basename "$so" .so)
	case $b in *-preload) continue ;; esac
	backends=${backends:+$backends,}$b
done
[ -n "$backends" ] || die "no backend built in '$TOP/backends': run make first"

mkdir -p "$STATE" || die "cannot create '$STATE'"
: >"$LOG"
trap stop INT TERM EXIT

say "starting dsecd (backends: $backends; log: $LOG)"
"$DSECD" --foreground --state-dir "$STATE" --listen "$SOCK" ${TCP:+--listen "$TCP"} \
	--backend-dir "$TOP/backends" --helper-dir "$TOP/build/libexec" \
	--set "backends=$backends" 2>>"$LOG" &
DSECD_PID=$!

# What another terminal exports (README): the daemon, and its state
# directory for dsecctl, so that images imported there are the ones this
# daemon sees (STATE/fs3).
export DSEC_HOST=$SOCK
export DSEC_STATE_DIR=$STATE
answered=
for _ in $(seq 60); do
	if ! kill -0 "$DSECD_PID" 2>/dev/null; then
		DSECD_PID=
		echo "demo: dsecd exited at start; its log:" >&2
		sed 's/^/  /' "$LOG" >&2
		exit 1
	fi
	# Any answer, even an error, means it is serving.
	out=$("$RUN" --client-timeout 0.5 -- true 2>&1)
	rc=$?
	case "$out" in
	*"(unavailable)") sleep 0.5 ;;
	*) answered=1; break ;;
	esac
done
[ -n "$answered" ] || die "dsecd did not answer within 30 s (last: $out, status $rc)"
echo "dsecd is serving (pid $DSECD_PID)"

# Which backends run a command here (none asked with --serve).
working=
[ -n "$DEMO" ] && for b in fncall container microvm vm; do
	out=$("$RUN" --backend "$b" -- true 2>&1)
	rc=$?
	if [ "$rc" = 0 ]; then
		working="$working $b"
	elif [ "$rc" = 125 ]; then
		case "$out" in
		*"(no_backend)") echo "backend $b: not loaded here, skipped" ;;
		*) echo "backend $b: does not work here, skipped: $out" ;;
		esac
	else
		echo "backend $b: 'true' exited $rc, skipped: $out"
	fi
done
[ -n "$working" ] || [ -z "$DEMO" ] || echo "demo: no backend works on this machine; see $LOG" >&2

for b in $working; do
	say "backend $b: a shell one-liner; the sandbox has its own view of the system"
	if [ "$b" = fncall ]; then
		show --backend "$b" --runtime sh -c 'uname -a; id; echo "pid $$"; ps ax'
	else
		show --backend "$b" -c 'uname -a; id; echo "pid $$"; ps ax'
	fi

	say "backend $b: a Python snippet with stdin and an environment variable"
	py='import os, sys
words = sys.stdin.read().split()
print(os.environ["GREETING"], len(words), "words, longest:", max(words, key=len))'
	if [ "$b" = fncall ]; then
		printf 'the quick brown fox jumps over the lazy dog\n' |
			show --backend "$b" --runtime python3 --env GREETING=hello --stdin - -c "$py"
	else
		printf 'the quick brown fox jumps over the lazy dog\n' |
			show --backend "$b" --env GREETING=hello --stdin - -- python3 -c "$py"
	fi

	say "backend $b: exit status and stderr pass through"
	show --backend "$b" -c 'echo to stdout; echo to stderr >&2; exit 3'

	say "backend $b: a command that runs too long is killed (status 124, as timeout(1))"
	show --backend "$b" --timeout 1 -- sleep 30
done

case " $working " in
*" container "*)
	# An image from fs3: a small root made of this host's shell and tools,
	# imported into the daemon's store (STATE/fs3: dsecctl finds it
	# through DSEC_STATE_DIR, as from another terminal).
	say "container: an image imported with dsecctl, run as a sandbox"
	root=$STATE/demo-root
	rm -rf "$root"
	mkdir -p "$root/bin" "$root/etc" "$root/work"
	for t in sh cat ls id uname; do
		p=$(type -P "$t") || continue
		cp -L "$p" "$root/bin/$t"
		for lib in $(ldd "$p" | grep -o '/[^ ]*'); do
			mkdir -p "$root$(dirname "$lib")"
			cp -Ln "$lib" "$root$lib" 2>/dev/null
		done
	done
	echo 'PRETTY_NAME="dsec demo image"' > "$root/etc/os-release"
	printf '\n$ dsecctl image import --tag demo:1 --config env=GREETING=hi %s\n' "$root"
	"$TOP/tools/dsecctl" image import --tag demo:1 --config env=GREETING=hi "$root"
	show --backend container --image demo:1 -- /bin/sh -c \
		'cat /etc/os-release; echo "$GREETING from uid $(id -u)"; ls /bin'

	say "container: a shell session keeps its directory and variables"
	id=$("$RUN" --backend container --keep -- true 2>&1 >/dev/null | head -1)
	id=${id##* }
	hr=$TOP/t/helper-req
	if [ -x "$hr" ] && [ -n "$id" ]; then
		"$hr" -q "$SOCK" session_open id="$id" session=term >/dev/null
		printf '\n$ session_exec term: cd /tmp && export X=1\n'
		"$hr" "$SOCK" session_exec id="$id" session=term cmd='cd /tmp && export X=1' >/dev/null
		printf '$ session_exec term: pwd; echo $X\n'
		"$hr" "$SOCK" session_exec id="$id" session=term cmd='pwd; echo $X' |
			sed -n 's/.*"stdout":"\([^"]*\)".*/\1/p' | sed 's/\\n/\n/g'
		printf '$ pause, then an exec resumes it\n'
		"$hr" "$SOCK" pause id="$id" | sed -n 's/.*"state":"\([a-z]*\)".*/state: \1/p'
		show --id "$id" -c 'echo running again'
		"$hr" -q "$SOCK" destroy id="$id" >/dev/null
	fi
	;;
esac

say "dsecd keeps serving; from another terminal:"
echo "  export DSEC_HOST=$SOCK${TCP:+    # or $TCP}"
echo "  export DSEC_STATE_DIR=$STATE    # dsecctl: this daemon's images"
echo "  $RUN -- uname -a"
echo "  $TOP/tools/dsec-bench -c 4 -n 500"
echo "Press Ctrl-C to stop.  The daemon's log follows."
echo
tail -n 0 -f --pid="$DSECD_PID" "$LOG" &
TAIL_PID=$!
while kill -0 "$DSECD_PID" 2>/dev/null; do
	wait "$DSECD_PID"
	rc=$?
	# A trapped signal interrupts wait with status > 128; stop() exits.
	kill -0 "$DSECD_PID" 2>/dev/null || { echo "demo: dsecd exited with status $rc"; DSECD_PID=; }
done
stop
