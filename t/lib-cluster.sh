# t/lib-cluster.sh - several dsecd nodes on one machine, for the t/5xxx
# cluster tests.  Source it after t/lib.sh:
#
#     . "$(dirname "$0")/lib.sh"
#     . "$(dirname "$0")/lib-cluster.sh"
#     need_cluster                    # skip unless root, ip, nft, nsenter
#     cluster_up 3                    # nodes 1..3, each in a namespace
#     node_start 1 --set backends=fncall
#     node_exec 1 helper-req "$(node_url 3)" ping
#
# cluster_up makes the test's own set of network namespaces with
# tools/dsec-netns (named dc$$, so tests side by side do not meet): node I
# is at $CLUSTER_NET.I, reachable from the other nodes only.  A node's
# dsecd runs in its namespace (nsenter --net: the host's mounts and
# cgroups), listens on tcp://ADDR:$CLUSTER_PORT (listen_remote) and on
# ipc://$T/nI.sock (the test talks to it from the host through that), keeps
# its state in $T/nI and its log in $T/nI.log.  At exit, also on failure,
# INT or TERM, every node is stopped, the functions named in
# $CLUSTER_CLEANUP run (a library that mounts adds its teardown there) and
# the namespaces are deleted, then t/lib.sh's cleanup runs.

CLUSTER="dc$$"
CLUSTER_NET=${CLUSTER_NET:-10.254.0}
CLUSTER_PORT=${CLUSTER_PORT:-7411}
CLUSTER_CLEANUP=
_cluster_n=0
declare -a NODE_PID=()

# dsec_netns ARGS...: tools/dsec-netns on this test's set.
dsec_netns() { "$TOP/tools/dsec-netns" --name "$CLUSTER" "$@"; }

_cluster_cleanup() {
	local i f
	for i in "${!NODE_PID[@]}"; do node_stop "$i"; done
	for f in $CLUSTER_CLEANUP; do "$f"; done
	[ "$_cluster_n" = 0 ] || dsec_netns down
	_cluster_n=0
}
trap '_cluster_cleanup; _tap_cleanup' EXIT
# t/lib.sh's skip_all drops the EXIT trap: one called after cluster_up
# takes the cluster down first.
eval "_lib_skip_all() $(declare -f skip_all | tail -n +2)"
skip_all() { _cluster_cleanup; _lib_skip_all "$@"; }
trap 'exit 130' INT
trap 'exit 143' TERM

# need_cluster: skip the whole file unless namespaces on a bridge can be
# made here and a dsecd run in them.
need_cluster() {
	need_root
	need_cmd ip
	need_cmd nft
	need_cmd nsenter
	need_cmd helper-req
	[ -x "$TOP/dsecd/dsecd" ] || skip_all "needs dsecd/dsecd (make)"
}

# cluster_up N: nodes 1..N; skips the whole file if namespaces cannot be made.
cluster_up() {
	local out
	out=$(dsec_netns up "$1" --net "$CLUSTER_NET" 2>&1) ||
		skip_all "cannot make network namespaces: $out"
	_cluster_n=$1
}

# cluster_down: stops every node and deletes the namespaces now.
cluster_down() { _cluster_cleanup; }

node_addr() { echo "$CLUSTER_NET.$1"; }
node_url() { echo "tcp://$CLUSTER_NET.$1:$CLUSTER_PORT"; }
node_ipc() { echo "ipc://$T/n$1.sock"; }
node_log() { cat "$T/n$1.log" 2>/dev/null; }
# node_exec I CMD...: CMD in node I's network namespace.
node_exec() { local i=$1; shift; dsec_netns exec "$i" "$@"; }
# node_req I OP [ARG...]: helper-req to node I's dsecd (from the host, ipc).
node_req() { local i=$1; shift; "$TOP/t/helper-req" "$(node_ipc "$i")" "$@"; }

# wait_for SECONDS CMD...: runs CMD every 0.1 s until it succeeds (0) or
# SECONDS have passed (1).
wait_for() {
	local end=$(( $(date +%s%N) / 1000000 + $1 * 1000 ))
	shift
	while :; do
		"$@" >/dev/null 2>&1 && return 0
		[ $(( $(date +%s%N) / 1000000 )) -lt "$end" ] || return 1
		sleep 0.1
	done
}

# node_start I [dsecd flags...]: dsecd as node nI in node I's namespace;
# waits (30 s) until it answers.  Its pid is ${NODE_PID[I]}.
node_start() {
	local i=$1 pid
	shift
	mkdir -p "$T/n$i"
	# dsec-netns execs nsenter, which execs dsecd: $! is dsecd's pid.
	"$TOP/tools/dsec-netns" --name "$CLUSTER" exec "$i" "$TOP/dsecd/dsecd" --foreground --node "n$i" --state-dir "$T/n$i" \
		--listen "$(node_ipc "$i")" --listen "$(node_url "$i")" --set listen_remote=true \
		--backend-dir "$TOP/backends" --helper-dir "$TOP/build/libexec" \
		--log-level "${DSEC_TEST_LOG_LEVEL:-info}" "$@" 2>>"$T/n$i.log" &
	pid=$!
	NODE_PID[$i]=$pid
	if ! wait_for 30 "$TOP/t/helper-req" -q "$(node_ipc "$i")" ping; then
		kill -0 "$pid" 2>/dev/null || { diag "node $i exited at start:"; node_log "$i" | sed 's/^/# /' >&2; }
		bail "node $i did not answer within 30 s"
	fi
}

# node_stop I: SIGTERM node I's dsecd, SIGKILL after 10 s.  Returns its status.
node_stop() {
	local pid=${NODE_PID[$1]:-} rc=0
	[ -n "$pid" ] || return 0
	kill -TERM "$pid" 2>/dev/null
	wait_for 10 eval "! kill -0 $pid" || { diag "node $1 ignored SIGTERM for 10 s; killing"; kill -KILL "$pid" 2>/dev/null; }
	wait "$pid" 2>/dev/null || rc=$?
	unset "NODE_PID[$1]"
	return $rc
}

# node_kill I: SIGKILL node I's dsecd (a crash) and reap it.
node_kill() {
	local pid=${NODE_PID[$1]:-}
	[ -n "$pid" ] || return 0
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	unset "NODE_PID[$1]"
	return 0
}
