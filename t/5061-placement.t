#!/bin/bash
# Placement (placing.c): a create sent to any node of a gossiping cluster
# goes to the node power-of-two choices picks over the capacity gossip
# carries, counting the creates in flight: creates at one node spread over
# all; a draining node, a dead one and a node without the room asked get
# none; a node that refuses (its admission stricter than what it gossips)
# makes the sender place the create again on another, and the client sees
# only the success; with no room anywhere the answer is capacity with the
# cluster's free capacity.  Nodes on loopback with the test backend.
. "$(dirname "$0")/lib.sh"

need_cmd helper-req
need_cmd dsecctl
[ -e "$TOP/t/test.so" ] || skip_all "needs t/test.so (make tests)"

plan 25

P=$(( 21000 + ($$ + 7777) % 20000 ))
head -c 32 /dev/urandom > "$T/key"
gnode() { # NAME PORT [more dsecd flags]
	local n=$1 port=$2
	shift 2
	start_node "$n" --backend-dir "$TOP/t" --set backends=test --set default_backend=test \
		--set gossip_probe_interval=250ms --set gossip_reconnect_interval=2s --set gossip_listen="127.0.0.1:$port" --set gossip_seeds="127.0.0.1:$P" \
		--set cluster_key_file="$T/key" --set api_url="ipc://$T/$n.sock" "$@"
}
gnode a "$P"
gnode b $((P + 1))
gnode c $((P + 2))
known() { echo "\"name\":\"$1\",[^}]*\"state\":\"alive\"[^}]*\"capacity\":\{\"version\":[1-9]"; }
wait_info a "$(known b).*$(known c)"
ok $? "node a knows b's and c's capacity from the gossip"
wait_info b "$(known a)" && wait_info c "$(known a)"
ok $? "... and they know a's"

# creates N NODE [ARGS]: N creates sent to NODE; each reply's node, one a line.
creates() {
	local n=$1 node=$2 i
	shift 2
	for i in $(seq "$n"); do at "$node" create "$@" | sed -n 's/.*"node":"\([^"]*\)".*/\1/p'; done
}
spread() { sort | uniq -c | awk '{ printf "%s%s=%s", (NR > 1 ? " " : ""), $2, $1 }'; }
creates 60 a > "$T/placed"
is "$(wc -l < "$T/placed")" 60 "60 creates sent to node a are all made"
S=$(spread < "$T/placed")
diag "60 creates at a: $S"
ok $(awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[2] < 10) exit 1 } if (NF != 3) exit 1 }' <<<"$S"; echo $?) \
	"... spread over a, b and c, each with at least 10 ($S)"
run at a create
like "$OUT" '"capacity_version":[1-9]' "a create's reply names the capacity version that counts it"
like "$(at a info)" '"placement":\{"policy":"power_k","k":2,"here":[1-9][0-9]*,"away":[1-9]' \
	"a's info counts its placements here and away"

# Every sandbox answers through any node, wherever it was placed.
ids=$(for i in 1 2 3 4 5 6; do at b create | idof; done)
bad=0
for id in $ids; do at c exec id="$id" 'argv[]=echo' 'argv[]=hi' | grep -q '"stdout":"hi\\n"' || bad=$((bad + 1)); done
is "$bad" 0 "sandboxes placed from b all answer through c"

# One-shot calls are placed too; a batch of creates is placed create by create.
bad=0
for i in $(seq 10); do at a call 'argv[]=echo' 'argv[]=called' | grep -q '"stdout":"called\\n"' || bad=$((bad + 1)); done
is "$bad" 0 "10 calls at a all answer, wherever they ran"
if /usr/bin/python3 -c 'import msgpack' 2>/dev/null; then
	run helper-py -c '
import asyncio, sys, collections, dsec
async def main():
    async with dsec.AsyncClient(sys.argv[1]) as c:
        sbs = await c.create_many(12)
        print(" ".join(sorted(set(s.node for s in sbs))), len(sbs))
asyncio.run(main())' "ipc://$T/a.sock"
	like "$OUT" '^[abc] [abc].* 12$' "a batch of 12 creates at a lands on more than one node ($OUT)"
else
	skip "needs python3-msgpack"
fi

# Image locality: c has sandboxes of image "hot" (made there: fwd pins a
# create to the node it is sent to); creates of it at a go to c.
for i in 1 2; do at c create image=hot fwd=test > /dev/null; done
wait_info a '"name":"c",[^}]*"capacity":\{[^}]*"images":\["hot"'
ok $? "a's view of c names the image as local there"
creates 10 a image=hot > "$T/placed"
ok $([ "$(grep -cx c "$T/placed")" -ge 9 ]; echo $?) \
	"10 creates of an image node c has go there ($(spread < "$T/placed"))"
creates 30 a image=cold > "$T/placed"
ca=$(grep -cx a "$T/placed") cb=$(grep -cx b "$T/placed") cc=$(grep -cx c "$T/placed")
ok $([ "$cc" -le "$ca" ] && [ "$cc" -le "$cb" ]; echo $?) \
	"... those of an image no node has go by load: c, now the fullest, gets the fewest ($(spread < "$T/placed"))"

# A draining node takes no new sandboxes.
dsecctl --host "ipc://$T/b.sock" node drain >/dev/null
wait_info a "\"name\":\"b\",[^}]*\"capacity\":\{[^}]*\"draining\":true"
ok $? "a sees b draining"
creates 20 a > "$T/placed"
ok $(! grep -qx b "$T/placed"; echo $?) "... and places none of 20 creates on it ($(spread < "$T/placed"))"
dsecctl --host "ipc://$T/b.sock" node undrain >/dev/null

# No node has the memory asked: capacity, with the cluster's figures.
run at a create 'limits.memory#=1125899906842624'
like "$OUT" '"code":"capacity","message":"no node of the cluster has room for a test sandbox' \
	"a create no node has room for: capacity, saying so"
like "$OUT" 'memory asked, at most [0-9]+ MiB free on one node.*"cluster":\{"nodes":3,"alive":[23],"offering":[23],.*"mem_free_max":[1-9]' \
	"... with the cluster's free capacity in the message and the error"
if /usr/bin/python3 -c 'import msgpack' 2>/dev/null; then
	run helper-py -c '
import asyncio, sys, dsec
async def main():
    async with dsec.AsyncClient(sys.argv[1]) as c:
        try:
            await c.create(backend="test", limits={"memory": 1 << 50})
        except dsec.NoCapacity as e:
            print(e.code, e.cluster["nodes"], e.cluster["mem_free_max"] > 0)
asyncio.run(main())' "ipc://$T/a.sock"
	is "$OUT" "capacity 3 True" "the Python SDK raises NoCapacity with the cluster's free capacity (.cluster)"
else
	skip "needs python3-msgpack"
fi
run at a create backend=nosuch
like "$OUT" '"code":"no_backend"' "a backend no node offers: no_backend"

# A node whose admission refuses what its gossip offers: the sender
# places again elsewhere; the client sees successes only.
gnode d $((P + 3)) --set test.admit=0
wait_info a "$(known d)"
ok $? "node d (admits nothing, gossips room) joins"
creates 30 a > "$T/placed"
is "$(wc -l < "$T/placed")" 30 "30 creates at a all made"
ok $(! grep -qx d "$T/placed"; echo $?) "... none on d ($(spread < "$T/placed"))"
like "$(at a info)" '"again":[1-9]' "... d's refusals were placed again"
like "$(at a info)" '"name":"d",[^}]*"refused":[1-9]' "... and counted against d"

# A dead node gets no creates.
eval "kill -9 \$NODE_PID_c"
wait_info a '"name":"c",[^}]*"state":"(suspect|dead)"'
ok $? "a sees c killed with -9 (suspect or dead)"
creates 20 a > "$T/placed"
ok $(! grep -qx c "$T/placed"; echo $?) "... and places none of 20 creates on it ($(spread < "$T/placed"))"
