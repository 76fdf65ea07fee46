#!/bin/bash
# fs3 across gossiping nodes: with gossip_listen and no image_peers, a
# node's image store asks the cluster's alive members for what its cache
# lacks, before the origin.  An image imported on node a, the origin then
# losing its chunks: a sandbox of it made on b gets every chunk from a; a
# killed node is asked no more, and a node started after gets the chunks
# from b instead.  The "layers" test backend (the daemon acquires the
# image, whole: image_on_demand=false).
. "$(dirname "$0")/lib.sh"

need_cmd helper-req
need_cmd dsecctl
need_cmd mkfs.erofs
[ -e "$TOP/t/layers.so" ] || skip_all "needs t/layers.so (make tests)"

plan 8

O="$T/origin"
mk_small_root "$T/root" sh
python3 -c 'import random, sys; random.seed(5); sys.stdout.buffer.write(random.randbytes(3000000))' \
	> "$T/root/blob"
dsecctl --store "$T/a/fs3" --origin "$O" image import --tag gp:1 "$T/root" > /dev/null
CHUNKS=$(ls "$T"/a/fs3/cache/chunks/*/* | wc -l)
P=$(( 21000 + ($$ + 3333) % 20000 ))
head -c 32 /dev/urandom > "$T/key"
gnode() { # NAME PORT
	start_node "$1" --backend-dir "$TOP/t" --set backends=layers --set default_backend=layers \
		--set image_origin="$O" --set image_on_demand=false --set placement=local \
		--set gossip_probe_interval=250ms --set gossip_reconnect_interval=2s --set gossip_listen="127.0.0.1:$2" --set gossip_seeds="127.0.0.1:$P,127.0.0.1:$((P + 1))" \
		--set cluster_key_file="$T/key" --set api_url="ipc://$T/$1.sock"
}
gnode a "$P"
gnode b $((P + 1))
wait_info b '"name":"a","url":"[^"]*","state":"alive"'
ok $? "node b knows a from the gossip (no image_peers)"

mv "$O/chunks" "$T/origin-chunks" && mkdir "$O/chunks"
# from NODE SOURCE: the objects NODE's store fetched from SOURCE.
from() { at "$1" info | grep -o "{\"name\":\"$2\",\"objects\":[0-9]*" | grep -o '[0-9]*$'; }
served() { at "$1" info | grep -o '"served_objects":[0-9]*' | cut -d: -f2; }
S0=$(served a)
run at b create image=gp:1
like "$OUT" '"ok":true' "a sandbox of the image on b, the origin lacking its chunks"
is "$(from b peers)" "$((CHUNKS + 2))" "... its $CHUNKS chunks, its index and manifest came from the cluster's members"
is "$(from b origin)" 0 "... none from the origin"
is "$(( $(served a) - S0 ))" "$((CHUNKS + 2))" "... node a served them"

# a killed: no longer a peer; c, started after, gets them from b.
eval "kill -9 \$NODE_PID_a"
wait_info b '"name":"a","url":"[^"]*","state":"dead"'
ok $? "node a killed with -9: b sees it dead"
gnode c $((P + 2))
wait_info c '"name":"b","url":"[^"]*","state":"alive"'
run at c create image=gp:1
like "$OUT" '"ok":true' "a sandbox of the image on c, started after"
is "$(from c peers)" "$((CHUNKS + 2))" "... every object from b (a is dead, the origin lacks the chunks)"
