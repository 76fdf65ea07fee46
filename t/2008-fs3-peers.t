#!/bin/bash
# fs3's peer tier: a node serves its verified cache with chunk_get; another
# fetches from its peers before the origin, verifies what a peer sends,
# skips a peer (or an origin read) that does not answer within the fetch
# timeout, and fetches each cold object once however many ask at once
# (dsecctl image pull); with the origin and the peers gone a create fails
# naming the chunk and its layer while a running container sandbox of the
# image goes on.
. "$(dirname "$0")/lib.sh"

need_cmd dsecctl
need_cmd mkfs.erofs
need_cmd zstd
need_cmd helper-req
need_cmd helper-peer

plan 35

O="$T/origin"
A="ipc://$T/a.sock"
mk_small_root "$T/root" sh cat
echo "hello from a peer" > "$T/root/hello.txt"
python3 -c 'import random, sys; random.seed(11); sys.stdout.buffer.write(random.randbytes(8000000))' \
	> "$T/root/blob"
run dsecctl --store "$T/a/fs3" --origin "$O" image import --tag peers:1 "$T/root"
is "$RC" 0 "an image is imported on node a: into its cache and the shared origin"
LAYER=$(dsecctl --store "$T/a/fs3" --origin "$O" image inspect peers:1 | sed -n 's/^layer *\(sha256:[0-9a-f]*\) .*/\1/p')
CHUNKS=$(ls "$T"/a/fs3/cache/chunks/*/* | wc -l)
C1=$(ls "$T"/a/fs3/cache/chunks/*/* | sort | head -1)
H1=sha256:$(basename "$C1")
run dsecctl --store "$T/x" --origin "$O" --peer bogus://x image ls
is "$RC:$OUT" "1:dsecctl: cannot use peer 'bogus://x': cannot connect to 'bogus://x': not supported" \
	"dsecctl refuses a peer address nng cannot use"
run timeout 60 "$TOP/dsecd/dsecd" --foreground --config /dev/null --state-dir "$T/x" \
	--listen "ipc://$T/x.sock" --backend-dir "$TOP/backends" --set backends=fncall \
	--set image_peers=bogus://x
like "$RC:$(echo $OUT)" "^1:.*cannot open the image store: cannot use peer 'bogus://x'" \
	"... and so does dsecd, at start"
start_node a --set backends=fncall --set image_origin="$O"

# Serving.
run helper-req -o "$T/got" "$A" chunk_get kind=chunk digest="$H1"
ok $([ "$RC" = 0 ] && cmp -s "$T/got" "$C1"; echo $?) "chunk_get returns a cached chunk as stored"
run helper-req "$A" chunk_get kind=chunk digest=sha256:$(printf '0%.0s' $(seq 64))
like "$RC:$OUT" '^1:.*"code":"not_found"' "chunk_get of an object the node lacks: not_found"
run helper-req "$A" chunk_get kind=blob digest="$H1"
like "$RC:$OUT" '^1:.*"code":"invalid"' "chunk_get of another kind: invalid"

# The origin loses the chunks: node a's copies serve.
mv "$O/chunks" "$T/origin-chunks" && mkdir "$O/chunks"
served() { helper-req "$A" info | grep -o '"served_objects":[0-9]*' | cut -d: -f2; }
S0=$(served)
run dsecctl --store "$T/b" --origin "$O" --peer "$A" image pull peers:1
like "$RC: $(echo $OUT)" "^0: sha256:[0-9a-f]{64} chunks $CHUNKS local 0 fetched $CHUNKS bytes [0-9]+ " \
	"pull: every chunk fetched ($CHUNKS)"
like "$(echo $OUT)" "from peer $A chunks $CHUNKS bytes [1-9][0-9]* from origin chunks 0 bytes 0$" \
	"... from the peer, none from the origin, which lacks them"
is "$(( $(served) - S0 ))" "$((CHUNKS + 2))" "node a served each chunk, the index and the manifest once"
run dsecctl --store "$T/b" --origin "$O" --peer "$A" image pull peers:1
like "$RC: $(echo $OUT)" "^0: .*chunks $CHUNKS local $CHUNKS fetched 0 bytes 0 " "a second pull finds everything local"

# A peer that sends bad bytes is skipped for the next source.
printf 'not the chunk you asked for' | zstd -q -c > "$T/bad.zst"
helper-peer "ipc://$T/bad.sock" serve "$T/bad.zst" > "$T/bad.out" &
BADPID=$!
run dsecctl --store "$T/c" --origin "$O" --peer "ipc://$T/bad.sock" --peer "$A" image pull peers:1
like "$RC: $(echo $OUT)" "^0: .*from peer ipc://$T/bad.sock chunks 0 bytes 0 from peer $A chunks $CHUNKS " \
	"a peer's corrupt copies are refused and the next peer's used"
like "$OUT" "chunk 'sha256:[0-9a-f]{64}' of layer '$LAYER' is corrupt in the peer ipc://$T/bad.sock" \
	"... each one is logged with its chunk and layer"
ok $([ "$(grep -c request "$T/bad.out")" -ge "$CHUNKS" ]; echo $?) "... and the bad peer was asked"
kill "$BADPID"; wait "$BADPID" 2>/dev/null

# A peer that never answers costs one fetch timeout.
helper-peer "ipc://$T/silent.sock" silent > "$T/silent.out" &
SILENTPID=$!
t0=$(date +%s.%N)
run dsecctl --store "$T/d" --origin "$O" --peer "ipc://$T/silent.sock" --peer "$A" \
	--fetch-timeout 1 image pull peers:1
t1=$(date +%s.%N)
like "$RC: $(echo $OUT)" "^0: .*from peer $A chunks $CHUNKS " "a silent peer: the next peer serves"
like "$OUT" "from peer ipc://$T/silent.sock: no reply .*timed out; skipping it for 10 s" \
	"... after the fetch timed out"
ok $(python3 -c "import sys; sys.exit(not (0.9 <= $t1 - $t0 < 4))"; echo $?) \
	"... within the 1 s timeout, once: $(python3 -c "print(round($t1 - $t0, 2))") s for the pull"
kill "$SILENTPID"; wait "$SILENTPID" 2>/dev/null

# Four pulls of one cold image at once fetch each object once.
S0=$(served)
pids=
for i in 1 2 3 4; do
	dsecctl --store "$T/e" --origin "$O" --peer "$A" image pull peers:1 > "$T/pull$i" 2>&1 &
	pids="$pids $!"
done
wait $pids
sum=0
for i in 1 2 3 4; do
	n=$(sed -n 's/.*  fetched \([0-9]*\)  .*/\1/p' "$T/pull$i")
	sum=$((sum + ${n:-1000}))
done
is "$sum" "$CHUNKS" "four concurrent pulls fetch $CHUNKS chunks between them"
is "$(( $(served) - S0 ))" "$((CHUNKS + 2))" "... and node a served each object once"

# A corrupt cache copy is not served; no source having it, the error names it.
printf corrupt | dd of="$C1" bs=1 seek=20 conv=notrunc status=none
run helper-req "$A" chunk_get kind=chunk digest="$H1"
like "$RC:$OUT" "^1:.*\"code\":\"not_found\".*no good copy of the chunk '$H1'" \
	"a chunk corrupt in node a's cache is not served"
ok $([ ! -e "$C1" ]; echo $?) "... and is removed there"
run dsecctl --store "$T/f" --origin "$O" --peer "$A" image pull peers:1
is "$RC:$(echo "$OUT" | tail -1)" "1:dsecctl: cannot pull 'peers:1': cannot fetch chunk '$H1' of layer '$LAYER': no good copy (cache: missing, peer $A: missing, origin: missing)" \
	"a chunk no source has: the pull fails naming the chunk, its layer and every tier"
mv "$T/origin-chunks/$(basename "$(dirname "$C1")")/$(basename "$C1")" "$O/chunks.one" 2>/dev/null
mkdir -p "$O/chunks/$(basename "$(dirname "$C1")")"
mv "$O/chunks.one" "$O/chunks/$(basename "$(dirname "$C1")")/$(basename "$C1")"
run dsecctl --store "$T/f" --origin "$O" --peer "$A" image pull peers:1
like "$RC: $(echo $OUT)" "^0: .*from peer $A chunks $((CHUNKS - 1)) bytes [0-9]+ from origin chunks 1 " \
	"with the chunk back in the origin: the rest from the peer, that one from the origin"

# An origin that hangs (a FIFO where the chunk should be) costs one timeout.
F1="$O/chunks/$(basename "$(dirname "$C1")")/$(basename "$C1")"
mv "$F1" "$T/c1.saved" && mkfifo "$F1"
t0=$(date +%s.%N)
run dsecctl --store "$T/g" --origin "$O" --fetch-timeout 1 image pull peers:1
t1=$(date +%s.%N)
is "$RC:$(echo "$OUT" | tail -1)" "1:dsecctl: cannot pull 'peers:1': cannot fetch chunk '$H1' of layer '$LAYER': no good copy (cache: missing, origin: timed out)" \
	"a read of the origin that hangs times out, the error naming the chunk and its layer"
ok $(python3 -c "import sys; sys.exit(not (0.9 <= $t1 - $t0 < 4))"; echo $?) \
	"... after the 1 s timeout: $(python3 -c "print(round($t1 - $t0, 2))") s for the pull"
rm -f "$F1" && mv "$T/c1.saved" "$F1"

# dsecd: a node with image_peers; then the origin and the peer go away.
why=$(container_images_missing)
if [ -n "$why" ]; then
	for i in $(seq 11); do skip "$why"; done
	exit 0
fi
B="ipc://$T/b2.sock"
start_node b2 --set backends=container --set image_origin="$O" --set image_peers="$A" \
	--set image_fetch_timeout=1s --set image_on_demand=false
run helper-req "$B" create backend=container image=peers:1
like "$RC:$OUT" '^0:.*"id":"b2:' "node b2 creates a container sandbox of the image its origin lacks"
SB=$(echo "$OUT" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
run helper-req "$B" exec id="$SB" argv[]=cat argv[]=/hello.txt
like "$OUT" '"stdout":"hello from a peer\\n"' "... and it runs"
like "$(helper-req "$B" info)" "\"sources\":\\[\\{\"name\":\"peer $A\",\"objects\":$((CHUNKS + 1)),.*\\{\"name\":\"origin\",\"objects\":1," \
	"info: node b2 fetched the manifest, the index and all chunks but one from the peer, that one (lost by node a) from the origin"
randfile() { python3 -c "import random, sys; random.seed($1); sys.stdout.buffer.write(random.randbytes(4000000))"; }
randfile 12 > "$T/root/another.bin"
run dsecctl --store "$T/a/fs3" --origin "$O" image import --tag peers:2 "$T/root"
is "$RC" 0 "a second image is imported on node a"
randfile 13 > "$T/root/third.bin"
run dsecctl --store "$T/a/fs3" --origin "$O" image import --tag peers:3 "$T/root"
is "$RC" 0 "... and a third"
rm -rf "$O/chunks"

# Three creates of a cold image at once: each object comes once, from the peer.
fetched() { helper-req "$B" info | grep -o '"fetched_objects":[0-9]*' | cut -d: -f2; }
cached() { ls "$T"/b2/fs3/cache/chunks/*/* | grep -vc '\.lock$'; }
F0=$(fetched); S0=$(served); K0=$(cached)
pids=
for i in 1 2 3; do
	helper-req "$B" create backend=container image=peers:2 > "$T/create$i" 2>&1 &
	pids="$pids $!"
done
wait $pids
is "$(cat "$T"/create? | grep -c '"ok":true')" 3 "three concurrent creates of a cold image succeed"
F1=$(fetched); S1=$(served); K1=$(cached)
is "$((F1 - F0)):$((S1 - S0))" "$((K1 - K0 + 2)):$((K1 - K0 + 2))" \
	"... fetching each of its $((K1 - K0)) new chunks, its index and its manifest once, from the peer"
for i in 1 2 3; do
	helper-req -q "$B" destroy id="$(sed -n 's/.*"id":"\([^"]*\)".*/\1/p' "$T/create$i")" >/dev/null
done

kill -TERM "$NODE_PID_a"; wait "$NODE_PID_a" 2>/dev/null
run helper-req "$B" create backend=container image=peers:3
like "$RC:$OUT" "^1:.*cannot fetch chunk 'sha256:[0-9a-f]{64}' of layer 'sha256:[0-9a-f]{64}': no good copy \\(cache: missing, peer $A: [^,]+, origin: missing\\)" \
	"with the origin's chunks and the peer gone, a create fails naming the chunk and the layer"
run helper-req "$B" exec id="$SB" argv[]=cat argv[]=/hello.txt
like "$OUT" '"stdout":"hello from a peer\\n"' "the running sandbox of the first image still runs commands"
run helper-req "$B" destroy id="$SB"
is "$RC" 0 "... and is destroyed"
stop_nodes
is "$?" 0 "the nodes stop"
