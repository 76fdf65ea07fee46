#!/bin/bash
# Membership by SWIM gossip (gossip_listen, gossip_seeds, cluster_key_file):
# three nodes on loopback learn of each other and of each other's API
# address from the gossip alone (no cluster_nodes), so a request on a
# sandbox of any node is served through any other; a node killed with -9
# is declared dead and its sandboxes answer node_lost; a node with another
# key is never a member (its packets are dropped and counted); a node that
# leaves (dsecctl node leave) is seen as left, not dead; a restarted node
# is alive again.
. "$(dirname "$0")/lib.sh"

need_cmd helper-req
need_cmd dsecctl
[ -e "$TOP/t/test.so" ] || skip_all "needs t/test.so (make tests)"

plan 14

P=$(( 21000 + $$ % 20000 ))
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$T/key"
head -c 32 /dev/urandom > "$T/other.key"
gnode() { # NAME PORT [KEY] [more dsecd flags]
	local n=$1 port=$2 key=${3:-$T/key}
	shift 3
	start_node "$n" --backend-dir "$TOP/t" --set backends=test --set default_backend=test \
		--set gossip_probe_interval=250ms --set gossip_reconnect_interval=2s --set gossip_listen="127.0.0.1:$port" --set gossip_seeds="127.0.0.1:$P" \
		--set cluster_key_file="$key" --set api_url="ipc://$T/$n.sock" --set placement=local "$@"
}
gnode a "$P" ""
gnode b $((P + 1)) ""
gnode c $((P + 2)) ""
member() { echo "\"name\":\"$1\",\"url\":\"ipc://$T/$1.sock\",\"state\":\"$2\""; }
wait_info a "$(member b alive).*$(member c alive)|$(member c alive).*$(member b alive)"
ok $? "node a learns of b and c, and their API addresses, from the gossip"
wait_info c "$(member a alive)"
ok $? "... and c of a"
like "$(at a info)" '"membership":"gossip \(SWIM\)"' "info says the membership is gossip's"
idb=$(at b create | idof)
run at c exec id="$idb" 'argv[]=echo' 'argv[]=via' 'argv[]=c'
like "$OUT" '"stdout":"via c\\n"' "a sandbox of b is served through c"

# A stranger with another key: never a member, its packets counted.
gnode x $((P + 3)) "$T/other.key"
sleep 3
ok $(! at a info | grep -q '"name":"x"'; echo $?) "a node with another cluster key does not join"
like "$(at a info)" '"dropped_unauthenticated":[1-9]' "... its packets are dropped and counted"

# kill -9: dead, its sandboxes node_lost.
idc=$(at c create | idof)
eval "kill -9 \$NODE_PID_c"
wait_info a "$(member c dead)"
ok $? "a node killed with -9 is declared dead"
run at a exec id="$idc" 'argv[]=true'
like "$OUT" '"code":"node_lost".*c.*is dead' "... and its sandboxes answer node_lost"

# A graceful leave: left, not dead.
run dsecctl --host "ipc://$T/b.sock" node leave
like "$OUT" "left" "dsecctl node leave"
wait_info a "$(member b left)"
ok $? "... the others see it left"
run at a exec id="$idb" 'argv[]=true'
like "$OUT" '"code":"node_lost".*left the cluster' "... its sandboxes answer node_lost too"

# A node whose seed is not up yet keeps asking: once the seed runs, both
# are in the cluster within seconds (not at the next push-pull, 30 s on).
start_node y --backend-dir "$TOP/t" --set backends=test --set default_backend=test \
	--set gossip_probe_interval=250ms --set gossip_reconnect_interval=2s --set gossip_listen="127.0.0.1:$((P + 5))" --set gossip_seeds="127.0.0.1:$((P + 6))" \
	--set cluster_key_file="$T/key" --set api_url="ipc://$T/y.sock"
sleep 2
start_node z --backend-dir "$TOP/t" --set backends=test --set default_backend=test \
	--set gossip_probe_interval=250ms --set gossip_reconnect_interval=2s --set gossip_listen="127.0.0.1:$((P + 6))" --set gossip_seeds="127.0.0.1:$P" \
	--set cluster_key_file="$T/key" --set api_url="ipc://$T/z.sock"
wait_info y "$(member z alive)"
ok $? "a node started before its seed joins once the seed is up"

# c restarted on its state: alive again.
mkdir -p "$T/c2"
start_node c2 --node c --backend-dir "$TOP/t" --set backends=test \
	--set gossip_probe_interval=250ms --set gossip_reconnect_interval=2s --set gossip_listen="127.0.0.1:$((P + 2))" --set gossip_seeds="127.0.0.1:$P" \
	--set cluster_key_file="$T/key" --set api_url="ipc://$T/c.sock" --listen "ipc://$T/c.sock"
wait_info a "$(member c alive)"
ok $? "a restarted node is alive again"
run dsecctl --host "ipc://$T/a.sock" node ls
like "$(echo $OUT)" "c alive - ipc://$T/c.sock" "dsecctl node ls shows the gossiped cluster"
