#!/bin/bash
# NAME
#     serf-bench.sh - membership figures of a gossip implementation on N
#     nodes in network namespaces: failure detection, false positives, bytes
#
# SYNOPSIS
#     tools/serf-bench.sh [--impl serf|dsecd] [-n NODES] [-k KILLS]
#                         [-d SECONDS] [-l "PCT..."] [-i SECONDS]
#                         [-p detect,false,bytes]
#
# DESCRIPTION
#     Makes NODES (default 5) node namespaces with tools/dsec-netns (set
#     "sb$$", removed at the end), starts one agent of the implementation in
#     each, joined, with its defaults (serf: the LAN profile), and measures
#     three things, each a phase of -p (default all three):
#
#     detect  KILLS times (default 20) an agent is killed with SIGKILL (node
#             1, 2, .. in turn); the time from the kill until each other
#             node's agent declares it failed.  Per kill, "all" is when the
#             last of them did and "first" when the first did; the figures
#             are the median and the maximum over the kills.  The killed
#             agent is restarted (same name and address) and the next kill
#             waits until every node sees it alive again.
#     false   for each loss PCT of -l (default "5 10"), PCT per cent of the
#             frames between nodes dropped (dsec-netns loss, each frame
#             once) for -d SECONDS (default 1800); every "failed" verdict
#             in that time is false (no agent is killed): the number of
#             verdicts (one per observer and victim) and of episodes (a
#             victim declared failed by anyone, counted once until it is
#             alive again).
#     bytes   -i SECONDS (default 120) with no loss and no change; the bytes
#             each node's eth0 sent and received (/proc/net/dev in its
#             namespace) per second, mean over the nodes and the highest.
#
#     How verdicts are observed (the same for every implementation): each
#     agent's log goes through a reader that stamps every line with the
#     time it arrived (ms); an implementation names the line that says
#     "node X failed" and "node X alive".  No polling: serf logs
#     "serf: EventMemberFailed: NAME ADDR" at the moment its memberlist
#     delegate gets the event, unbuffered, so the stamp is the verdict's
#     time within the reader's scheduling delay (well under 1 ms idle).
#
#     The implementation is a set of functions impl_IMPL_start I [SEED],
#     impl_IMPL_failed_re NAME, impl_IMPL_alive_re NAME; an agent is the
#     process of that name in node I's namespace.  dsecd's agents are
#     dsecds of the test backend gossiping with their defaults.
#
# OUTPUT
#     key=value lines on stdout (impl=, nodes=, detect_all_ms_median= ...);
#     progress on stderr.  Needs root, ip, nft, perl and the implementation
#     (serf: Debian's serf package).  Scratch under $TMPDIR (removed).
set -eu
TOP=$(cd "$(dirname "$0")/.." && pwd)
IMPL=serf N=5 KILLS=20 DUR=1800 LOSSES="5 10" IDLE=120 PHASES=detect,false,bytes

usage() { sed -n '/^# SYNOPSIS/,/^# DESCRIPTION/s/^#     //p' "$0" | sed '$d;1s/^/usage: /' >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--impl) IMPL=$2; shift 2 ;;
	-n) N=$2; shift 2 ;;
	-k) KILLS=$2; shift 2 ;;
	-d) DUR=$2; shift 2 ;;
	-l) LOSSES=$2; shift 2 ;;
	-i) IDLE=$2; shift 2 ;;
	-p) PHASES=$2; shift 2 ;;
	*) usage ;;
	esac
done
say() { echo "serf-bench: $*" >&2; }
die() { say "$*"; exit 1; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

SET="sb$$"
S=$(mktemp -d "${TMPDIR:-/tmp}/serf-bench.XXXXXX")
netns() { "$TOP/tools/dsec-netns" --name "$SET" "$@"; }
addr() { echo "10.254.0.$1"; }

# ---- serf ---------------------------------------------------------------
# impl_serf_start I [SEED]: serf agent n<I> on node I's address, joined to
# node SEED's; its stdout and stderr are written to stdout.
impl_serf_start() {
	netns exec "$1" serf agent -node="n$1" -bind="$(addr "$1"):7946" -rpc-addr=127.0.0.1:7373 \
		${2:+-join="$(addr "$2")"} 2>&1
}
impl_serf_check() { command -v serf >/dev/null 2>&1 || die "needs serf (apt-get install serf)"; }
impl_serf_failed_re() { echo "serf: EventMemberFailed: $1 "; }
impl_serf_alive_re() { echo "serf: EventMemberJoin: $1 "; }
impl_serf_proc() { echo serf; }

# ---- dsecd --------------------------------------------------------------
# impl_dsecd_start I [SEED]: a dsecd n<I> (the test backend: only its
# gossip matters) gossiping on node I's address with its defaults, joined
# to node SEED's, one cluster key for all; its log (stderr) to stdout.
impl_dsecd_start() {
	[ -f "$S/key" ] || head -c 32 /dev/urandom > "$S/key"
	mkdir -p "$S/d$1"
	netns exec "$1" "$TOP/dsecd/dsecd" --foreground --node "n$1" --state-dir "$S/d$1" \
		--listen "ipc://$S/d$1/api.sock" --backend-dir "$TOP/t" --set backends=test \
		--set gossip_listen="$(addr "$1"):7946" ${2:+--set gossip_seeds="$(addr "$2"):7946"} \
		--set cluster_key_file="$S/key" --set api_url="ipc://$S/d$1/api.sock" 2>&1
}
impl_dsecd_check() {
	[ -x "$TOP/dsecd/dsecd" ] && [ -e "$TOP/t/test.so" ] || die "needs dsecd/dsecd and t/test.so (make all tests)"
}
impl_dsecd_failed_re() { echo "cluster: node $1 is dead"; }
impl_dsecd_alive_re() { echo "cluster: node $1 is alive"; }
impl_dsecd_proc() { echo dsecd; }

case $IMPL in serf|dsecd) ;; *) usage ;; esac
[ "$(id -u)" = 0 ] || die "needs root"
command -v perl >/dev/null 2>&1 || die "needs perl"
"impl_${IMPL}_check"

# ---- agents, the same for every implementation ---------------------------
cleanup() {
	trap - EXIT INT TERM
	netns down 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$S"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start I [SEED]: agent I, its log stamped line by line into $S/nI.log
# ("MS LINE").
start() {
	"impl_${IMPL}_start" "$@" | perl -MTime::HiRes=time -ne '$|=1; printf "%d %s", time*1000, $_' >>"$S/n$1.log" &
}
# agent_pid I: the agent's pid in node I's namespace, or nothing.
agent_pid() {
	local p
	for p in $(ip netns pids "$SET-$1" 2>/dev/null); do
		[ "$(cat /proc/"$p"/comm 2>/dev/null)" = "$("impl_${IMPL}_proc")" ] && { echo "$p"; return; }
	done
	return 0
}
running() { [ -n "$(agent_pid "$1")" ]; }
# listening I: node I's agent has its gossip port (UDP 7946) bound.  A
# serf agent started with -join exits when its seed does not answer, so
# the others start only once the first one listens.
listening() { [ -n "$(netns exec "$1" ss -Hlun 'sport = :7946' 2>/dev/null)" ]; }
# first_after FILE MS RE: the stamp of FILE's first line after MS matching RE.
first_after() { awk -v t="$2" -v re="$3" '$1 >= t && index($0, re) { print $1; exit }' "$1"; }
# seen_alive I SINCE: every other node logged node I alive after SINCE.
seen_alive() {
	local j re
	re=$("impl_${IMPL}_alive_re" "n$1")
	for j in $(seq "$N"); do
		[ "$j" = "$1" ] && continue
		[ -n "$(first_after "$S/n$j.log" "$2" "$re")" ] || return 1
	done
}
# wait_until SECONDS CMD...: CMD every 0.1 s until it succeeds; 1 on timeout.
wait_until() {
	local end=$(( $(now_ms) + $1 * 1000 ))
	shift
	until "$@"; do [ "$(now_ms)" -lt "$end" ] || return 1; sleep 0.1; done
}
# median, max: of the numbers on stdin.
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2)) }'; }
max() { sort -n | tail -1; }

netns up "$N" >/dev/null
t0=$(now_ms)
start 1
wait_until 10 listening 1 || die "agent 1 did not start (see its log)"
for i in $(seq 2 "$N"); do start "$i" 1; done
for i in $(seq 2 "$N"); do
	wait_until 30 seen_alive "$i" "$t0" || die "agent $i did not join within 30 s"
done
say "$N agents of $IMPL joined"
sleep 5	# let the join settle (push-pull, gossip of the joins)
echo "impl=$IMPL"
echo "nodes=$N"

if [[ ,$PHASES, == *,detect,* ]]; then
	: >"$S/all" ; : >"$S/first"; missed=0
	for k in $(seq "$KILLS"); do
		v=$(( (k - 1) % N + 1 )); seed=$(( v % N + 1 ))
		re=$("impl_${IMPL}_failed_re" "n$v")
		pid=$(agent_pid "$v")
		[ -n "$pid" ] || die "agent $v is not running"
		tk=$(now_ms)
		kill -KILL "$pid"
		ts=
		for _ in $(seq 600); do	# 60 s bound
			ts=
			for j in $(seq "$N"); do
				[ "$j" = "$v" ] && continue
				t=$(first_after "$S/n$j.log" "$tk" "$re")
				[ -n "$t" ] || { ts=; break; }
				ts="$ts $t"
			done
			[ -z "$ts" ] || break
			sleep 0.1
		done
		if [ -z "$ts" ]; then
			missed=$((missed + 1)); say "kill $k (node $v): not all saw it failed within 60 s"
		else
			a=$(for t in $ts; do echo $((t - tk)); done | max)
			f=$(for t in $ts; do echo $((t - tk)); done | sort -n | head -1)
			echo "$a" >>"$S/all"; echo "$f" >>"$S/first"
			say "kill $k (node $v): first $f ms, all $a ms"
		fi
		wait_until 5 eval "! running $v" || true
		tr=$(now_ms)
		start "$v" "$seed"
		wait_until 60 seen_alive "$v" "$tr" || die "agent $v did not rejoin within 60 s"
		sleep 2	# its rejoin gossiped and refuted everywhere before the next kill
	done
	echo "detect_kills=$KILLS"
	echo "detect_missed=$missed"
	echo "detect_all_ms_median=$(median <"$S/all")"
	echo "detect_all_ms_max=$(max <"$S/all")"
	echo "detect_first_ms_median=$(median <"$S/first")"
	echo "detect_first_ms_max=$(max <"$S/first")"
fi

if [[ ,$PHASES, == *,false,* ]]; then
	for pct in $LOSSES; do
		netns loss "$pct"
		tl=$(now_ms)
		say "loss $pct %: $DUR s"
		sleep "$DUR"
		te=$(now_ms)
		netns loss 0
		# Verdicts: every "failed" line in the window, per observer.
		# Episodes: per victim, a failed verdict by anyone while it was
		# not already counted failed (it is again once some node logs it
		# alive after that).
		verdicts=0
		for j in $(seq "$N"); do
			for v in $(seq "$N"); do
				re=$("impl_${IMPL}_failed_re" "n$v")
				c=$(awk -v a="$tl" -v b="$te" -v re="$re" '$1 >= a && $1 < b && index($0, re) { n++ } END { print n + 0 }' "$S/n$j.log")
				verdicts=$((verdicts + c))
			done
		done
		episodes=0
		for v in $(seq "$N"); do
			fre=$("impl_${IMPL}_failed_re" "n$v"); are=$("impl_${IMPL}_alive_re" "n$v")
			c=$(cat "$S"/n*.log | sort -n | awk -v a="$tl" -v b="$te" -v f="$fre" -v al="$are" '
				$1 >= a && $1 < b && index($0, f) && !down { n++; down = 1 }
				$1 >= a && index($0, al) { down = 0 }
				END { print n + 0 }')
			episodes=$((episodes + c))
		done
		echo "false_loss${pct}_seconds=$(( (te - tl) / 1000 ))"
		echo "false_loss${pct}_verdicts=$verdicts"
		echo "false_loss${pct}_episodes=$episodes"
		say "loss $pct %: $verdicts false verdicts, $episodes episodes"
		# Back to a whole cluster before the next level.
		for v in $(seq "$N"); do
			[ -n "$(agent_pid "$v")" ] || die "agent $v died"
		done
		sleep 35	# a falsely failed member is rejoined (serf: reconnect every 30 s)
	done
fi

if [[ ,$PHASES, == *,bytes,* ]]; then
	# rx and tx bytes of eth0 in node I's namespace.
	# (A big count follows "eth0:" without a space.)
	nbytes() { netns exec "$1" awk '{ sub(":", " ") } $1 == "eth0" { print $2, $10 }' /proc/net/dev; }
	for i in $(seq "$N"); do nbytes "$i" >"$S/b0.$i"; done
	ti=$(now_ms)
	say "idle: $IDLE s"
	sleep "$IDLE"
	tj=$(now_ms)
	for i in $(seq "$N"); do nbytes "$i" >"$S/b1.$i"; done
	for i in $(seq "$N"); do
		read -r r0 s0 <"$S/b0.$i"; read -r r1 s1 <"$S/b1.$i"
		echo "$(( (s1 - s0) * 1000 / (tj - ti) )) $(( (r1 - r0) * 1000 / (tj - ti) ))"
	done >"$S/bytes"
	echo "bytes_seconds=$(( (tj - ti) / 1000 ))"
	echo "bytes_tx_per_s_mean=$(awk '{ s += $1 } END { printf "%d", s / NR }' "$S/bytes")"
	echo "bytes_tx_per_s_max=$(awk '{ print $1 }' "$S/bytes" | max)"
	echo "bytes_rx_per_s_mean=$(awk '{ s += $2 } END { printf "%d", s / NR }' "$S/bytes")"
fi
