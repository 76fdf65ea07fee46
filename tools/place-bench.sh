#!/bin/bash
# NAME
#     place-bench.sh - placement on real nodes: how evenly creates spread,
#     and what a forwarded create costs over a local one
#
# SYNOPSIS
#     tools/place-bench.sh [-n NODES] [-k CREATES] [-c CONC] [-R RATE]
#                          [-r ROUNDS] [-f REQUESTS] [-p spread,forward]
#
# DESCRIPTION
#     Makes NODES (default 5) node namespaces with tools/dsec-netns (set
#     "pb$$", removed at the end) and runs a dsecd of the fncall backend in
#     each, gossiping with one cluster key (the README's setup), then, for
#     each phase of -p (default both), on a fresh cluster each time:
#
#     spread   for each policy (power_k, random) and each arrival (all:
#              CREATES (default 500) creates sent to every node at once,
#              RATE a second (default 50: DSec's 5,000/s over 160 nodes is
#              31), by one dsec-bench --mode create --keep -c CONC --rate
#              RATE per node; one: all NODES x CREATES sent to node 1 at
#              NODES x RATE), the sandboxes each node holds after, and
#              max/mean - 1 over the nodes.  RATE 0: as fast as they go
#              (the views are then a few gossip periods behind the whole
#              run).
#     forward  every node but 1 and 2 draining, and node 1 too: a create
#              sent to node 2 runs there (local), one sent to node 1 is
#              placed on node 2 (forwarded over TCP between namespaces).
#              ROUNDS (default 3) rounds of dsec-bench --mode create --keep
#              -c 1 -n REQUESTS (default 500) at node 2 then at node 1, in
#              turn; p50 and p99 of each, and the p50 difference.  The
#              sandboxes are kept: node 1 counts a create in flight until
#              node 2's gossip shows it, so a stream of creates destroyed
#              at once faster than fncall's room (256) a gossip period
#              would look full to it.
#
# OUTPUT
#     key=value lines on stdout; progress on stderr.  Needs root, ip, nft,
#     nsenter and the built tree (make).  Scratch under $TMPDIR (removed).
set -eu
TOP=$(cd "$(dirname "$0")/.." && pwd)
N=5 K=500 C=2 RATE=50 ROUNDS=3 FREQ=500 PHASES=spread,forward

usage() { sed -n '/^# SYNOPSIS/,/^# DESCRIPTION/s/^#     //p' "$0" | sed '$d;1s/^/usage: /' >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	-n) N=$2; shift 2 ;;
	-k) K=$2; shift 2 ;;
	-c) C=$2; shift 2 ;;
	-R) RATE=$2; shift 2 ;;
	-r) ROUNDS=$2; shift 2 ;;
	-f) FREQ=$2; shift 2 ;;
	-p) PHASES=$2; shift 2 ;;
	*) usage ;;
	esac
done
say() { echo "place-bench: $*" >&2; }
die() { say "$*"; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root"
[ -x "$TOP/dsecd/dsecd" ] && [ -e "$TOP/backends/fncall.so" ] || die "needs the built tree (make)"

SET="pb$$"
S=$(mktemp -d "${TMPDIR:-/tmp}/place-bench.XXXXXX")
netns() { "$TOP/tools/dsec-netns" --name "$SET" "$@"; }
addr() { echo "10.254.0.$1"; }
ipc() { echo "ipc://$S/n$1.sock"; }
declare -a PID=()
cleanup() {
	trap - EXIT INT TERM
	netns down 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$S"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
head -c 32 /dev/urandom > "$S/key"
netns up "$N" >/dev/null

req() { local i=$1; shift; "$TOP/t/helper-req" "$(ipc "$i")" "$@"; }
# start I [flags]: node I's dsecd, fresh state.
start() {
	local i=$1
	shift
	rm -rf "$S/d$i"
	mkdir -p "$S/d$i"
	# dsec-netns execs nsenter, which execs dsecd: $! is dsecd's pid (not
	# through the netns function, whose subshell would be).
	"$TOP/tools/dsec-netns" --name "$SET" exec "$i" "$TOP/dsecd/dsecd" --foreground --node "n$i" --state-dir "$S/d$i" \
		--listen "$(ipc "$i")" --listen "tcp://$(addr "$i"):7411" --set listen_remote=true \
		--backend-dir "$TOP/backends" --helper-dir "$TOP/build/libexec" --set backends=fncall \
		--set gossip_listen="$(addr "$i"):7946" --set gossip_seeds="$(addr 1):7946" \
		--set cluster_key_file="$S/key" --log-level warn "$@" 2>>"$S/n$i.log" &
	PID[$i]=$!
}
# cluster [flags]: every node (re)started with flags; waits until node 1
# knows every other's capacity and each knows node 1's.
cluster() {
	local i t
	for i in "${!PID[@]}"; do kill "${PID[$i]}" 2>/dev/null || true; wait "${PID[$i]}" 2>/dev/null || true; done
	PID=()
	for i in $(seq "$N"); do start "$i" "$@"; done
	for t in $(seq 600); do
		local out ok=1
		out=$(req 1 info 2>/dev/null) || ok=0
		[ "$ok" = 1 ] && [ "$(grep -o '"capacity":{"version":[1-9]' <<<"$out" | wc -l)" -ge $((N - 1)) ] &&
			return 0
		sleep 0.1
	done
	die "the cluster did not form in 60 s (logs in $S)"
}
held() { req "$1" info | sed -n 's/^{"ok":true,"result":{[^{]*"sandboxes":\([0-9]*\),.*/\1/p'; }
# imbalance: max/mean - 1 of the numbers on stdin, in per cent.
imbalance() { awk '{ s += $1; if ($1 > m) m = $1 } END { printf "%.2f", NR && s ? (m * NR / s - 1) * 100 : 0 }'; }
bench() { local i=$1; shift; netns exec "$i" "$TOP/tools/dsec-bench" -H "$(ipc "$i")" --backend fncall "$@"; }

if [[ ,$PHASES, == *,spread,* ]]; then
	rate=; [ "$RATE" = 0 ] || rate=$RATE
	for policy in power_k random; do
		for arrival in all one; do
			cluster --set placement="$policy"
			say "spread: $policy, arrival $arrival: $((N * K)) creates"
			if [ "$arrival" = all ]; then
				bp=()
				for i in $(seq "$N"); do
					bench "$i" --mode create --keep -n "$K" -c "$C" ${rate:+--rate "$RATE"} \
						--json > "$S/b$i.json" &
					bp+=($!)
				done
				wait "${bp[@]}" || say "a dsec-bench failed (see $S/b*.json)"
			else
				bench 1 --mode create --keep -n $((N * K)) -c "$C" \
					${rate:+--rate $((N * RATE))} --json > "$S/b1.json"
			fi
			sleep 2	# the last creates' gossip
			counts=$(for i in $(seq "$N"); do held "$i"; done | tr '\n' ' ')
			total=$(tr ' ' '\n' <<<"$counts" | awk '{ s += $1 } END { print s }')
			echo "spread_${policy}_${arrival}_held=${counts% }"
			echo "spread_${policy}_${arrival}_total=$total"
			echo "spread_${policy}_${arrival}_max_over_mean_pct=$(tr ' ' '\n' <<<"$counts" | grep . | imbalance)"
			# where each node sent what it got: here, then per member
			for i in $(seq "$N"); do
				req "$i" info | /usr/bin/python3 -c '
import json, sys
c = json.load(sys.stdin)["result"]["cluster"]
print("spread_'"${policy}_${arrival}"'_from_n'"$i"'=here:%d %s" % (c["placement"]["here"],
      " ".join("%s:%d" % (m["name"], m["placed"]) for m in sorted(c["members"], key=lambda m: m["name"]))))'
			done
		done
	done
fi

if [[ ,$PHASES, == *,forward,* ]]; then
	cluster
	for i in $(seq "$N"); do [ "$i" = 2 ] || req "$i" drain > /dev/null; done
	# every node's view of the drains (gossip, a second or two)
	for t in $(seq 100); do
		[ "$(req 1 info | grep -o '"draining":true' | wc -l)" -ge $((N - 2)) ] && break
		sleep 0.1
	done
	: > "$S/local" ; : > "$S/fwd"
	for r in $(seq "$ROUNDS"); do
		say "forward: round $r of $ROUNDS"
		bench 2 --mode create --keep -c 1 -n "$FREQ" --warmup 20 --latencies "$S/local" > /dev/null
		bench 1 --mode create --keep -c 1 -n "$FREQ" --warmup 20 --latencies "$S/fwd" > /dev/null
	done
	pct() { sort -n "$1" | awk -v p="$2" '{ v[NR] = $1 } END { printf "%.3f", v[int((NR - 1) * p) + 1] }'; }
	away=$(req 1 info | sed -n 's/.*"placement":{[^}]*"away":\([0-9]*\).*/\1/p')
	echo "forward_requests_each=$((ROUNDS * FREQ))"
	echo "forward_node1_placed_away=$away"
	echo "create_local_p50_ms=$(pct "$S/local" 0.5)"
	echo "create_local_p99_ms=$(pct "$S/local" 0.99)"
	echo "create_forwarded_p50_ms=$(pct "$S/fwd" 0.5)"
	echo "create_forwarded_p99_ms=$(pct "$S/fwd" 0.99)"
	echo "create_forward_cost_p50_ms=$(awk -v a="$(pct "$S/fwd" 0.5)" -v b="$(pct "$S/local" 0.5)" 'BEGIN { printf "%.3f", a - b }')"
fi
