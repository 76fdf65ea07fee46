#!/bin/bash
# The cluster tests' network (t/lib-cluster.sh, tools/dsec-netns): three
# node namespaces on a bridge in a namespace of its own, a dsecd in each,
# reaching each other over their addresses and nothing on the host; loss
# and partitions by nftables in the bridge's namespace; a killed node and
# its restart; down leaves nothing behind.  dsecd does not gossip yet: the
# nodes are single-node dsecds side by side.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-cluster.sh"

need_cluster
[ -e "$TOP/backends/fncall.so" ] || skip_all "needs backends/fncall.so (make)"

host_links() { ip -o link show | awk -F': ' '{print $2}' | sort; }
HOST_LINKS=$(host_links)
HOST_TABLES=$(nft list tables 2>/dev/null)
cluster_up 3

plan 26

is "$(ip netns list | awk '{print $1}' | grep -c "^$CLUSTER-")" 4 "up 3: three node namespaces and the bridge's"
is "$(host_links)" "$HOST_LINKS" "... and no link on the host"
is "$(node_exec 2 ip -4 -o addr show dev eth0 | awk '{print $4}')" "$(node_addr 2)/24" "node 2 has its address on eth0"
is "$(dsec_netns addr 3)" "$(node_addr 3)" "dsec-netns addr prints it"

for i in 1 2 3; do node_start "$i" --set backends=fncall; done
export HELPER_REQ_TIMEOUT=2
# ping_from I J: helper-req ping from node I's namespace to node J's
# address.  Bounded by timeout(1) too: helper-req's connect to an address
# that drops every packet waits for the kernel's SYN retries (about 130 s),
# which HELPER_REQ_TIMEOUT does not bound.
ping_from() { node_exec "$1" timeout 10 "$TOP/t/helper-req" "$(node_url "$2")" ping 2>&1; }
# lost_from I J: the same, for a ping that must get no answer: given 3 s
# (an answer comes in milliseconds here).
lost_from() { node_exec "$1" timeout 3 "$TOP/t/helper-req" "$(node_url "$2")" ping 2>&1; }
# no_pong: the last ping_from got no answer.
no_pong() { [ "$RC" != 0 ] && ! printf '%s' "$OUT" | grep -q '"pong":true'; echo $?; }
run ping_from 1 3
like "$OUT" '"node":"n3"' "from namespace 1, the dsecd of namespace 3 answers on its address"
run ping_from 3 3
like "$OUT" '"node":"n3"' "... and from its own namespace"

dsec_netns loss 100 3
start=$SECONDS
run lost_from 1 3
ok $(no_pong) "100 % loss on node 3: no answer from it"
ok $([ $((SECONDS - start)) -le 20 ]; echo $?) "... within a bound"
run ping_from 1 2
like "$OUT" '"node":"n2"' "... while node 2 still answers"
dsec_netns loss 0 3
ok $(wait_for 20 ping_from 1 3; echo $?) "loss 0: node 3 answers again"

dsec_netns loss 100
run lost_from 1 2
ok $(no_pong) "100 % loss on every node: node 2 is cut off too"
dsec_netns loss 0
ok $(wait_for 20 ping_from 1 2; echo $?) "... and back with loss 0"

dsec_netns partition 1 2,3
run lost_from 1 2
ok $(no_pong) "partition 1 | 2,3: node 1 does not reach node 2"
run ping_from 2 3
like "$OUT" '"node":"n3"' "... nodes 2 and 3 reach each other"
dsec_netns heal
ok $(wait_for 20 ping_from 1 2; echo $?) "heal: node 1 reaches node 2 again"

node_kill 2
run lost_from 1 2
ok $(no_pong) "node 2 killed (SIGKILL): no answer"
node_start 2 --set backends=fncall
run ping_from 1 2
like "$OUT" '"node":"n2"' "... restarted on the same address and state, it answers"

# The container backend in a node's namespace: its bridge and nftables
# table live there beside eth0, and an allowed sandbox reaches another node.
# (overlay may be a module not loaded yet, as need_container knows)
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null
if [ -e "$TOP/backends/container.so" ] && [ -x "$TOP/build/libexec/container-init" ] &&
	grep -qw overlay /proc/filesystems && [ -x /usr/bin/python3 ]; then
	node_stop 3
	node_start 3 --set backends=fncall,container
	run env DSEC_HOST="$(node_ipc 3)" dsec-run --backend container --allow "$(node_addr 1):$CLUSTER_PORT/tcp" -- \
		python3 -c "import socket; socket.create_connection(('$(node_addr 1)', $CLUSTER_PORT), timeout=5); print('reached')"
	is "$OUT" "reached" "a container sandbox on node 3 reaches node 1's address (allowlist)"
	like "$(node_exec 3 ip -o link show type bridge)" "dsec0" "... through the backend's bridge in node 3's namespace"
	is "$(host_links)" "$HOST_LINKS" "... none of it on the host"
else
	skip "needs the container backend (make) and overlayfs"
	skip "needs the container backend"
	skip "needs the container backend"
fi

# A test killed with SIGTERM still takes its namespaces and nodes down.
cat > "$T/killed.t" <<EOF
. "$TOP/t/lib.sh"
. "$TOP/t/lib-cluster.sh"
cluster_up 2
node_start 1 --set backends=fncall
echo "\$CLUSTER \${NODE_PID[1]}" > "$T/killed.info"
sleep 60 & wait \$!	# (a foreground sleep would hold the trap back)
EOF
bash "$T/killed.t" >/dev/null 2>&1 &
kpid=$!
wait_for 30 test -s "$T/killed.info"
read -r kset knode < "$T/killed.info"
kill -TERM "$kpid"; wait "$kpid"
ok $(! ip netns list | grep -q "^$kset-" && ! kill -0 "$knode" 2>/dev/null; echo $?) \
	"a cluster test killed by SIGTERM leaves no namespace nor node behind"

# What a crashed run leaves (namespaces, a process in one) goes with down.
"$TOP/tools/dsec-netns" --name "c$CLUSTER" up 2
"$TOP/tools/dsec-netns" --name "c$CLUSTER" exec 2 sleep 60 &
cpid=$!
"$TOP/tools/dsec-netns" --name "c$CLUSTER" down
ok $(! ip netns list | grep -q "^c$CLUSTER-" && ! kill -0 "$cpid" 2>/dev/null; echo $?) \
	"down removes a set left behind and kills what runs in it"
wait "$cpid" 2>/dev/null
run "$TOP/tools/dsec-netns" --name "c$CLUSTER" down
is "$RC:$OUT" "0:" "down again: nothing to do, status 0"

PIDS="${NODE_PID[*]}"
cluster_down
is "$(ip netns list | awk '{print $1}' | grep -c "^$CLUSTER-")" 0 "down: no namespace left"
is "$(host_links); $(nft list tables 2>/dev/null)" "$HOST_LINKS; $HOST_TABLES" "... no link nor nftables table on the host"
left=0
for p in $PIDS; do kill -0 "$p" 2>/dev/null && left=$((left + 1)); done
is "$left" 0 "... and no node process"
