#!/bin/bash
# Tokens and leases across nodes: a create with a token sent to each node
# makes one sandbox (the token's home serves it), a create in a lease sent
# to another node is made on the lease's.
# Replicas of the trajectory log (rlcoord/replica.c): in a gossiping
# cluster every entry is on two peers' disks before its reply, so a kill
# -9 of the sandbox's owner loses no acknowledged step: each peer reads
# the whole log back (trajectory with replica: true).  A peer refuses
# entries of its own sandboxes or that are no log's.  Nodes on loopback
# with the test backend.
. "$(dirname "$0")/lib.sh"

need_cmd helper-req
[ -e "$TOP/t/test.so" ] || skip_all "needs t/test.so (make tests)"
/usr/bin/python3 -c 'import msgpack' 2>/dev/null || skip_all "needs python3-msgpack"
plan 29

P=$(( 21000 + ($$ + 5555) % 20000 ))
head -c 32 /dev/urandom > "$T/key"
gnode() { # NAME PORT
	start_node "$1" --backend-dir "$TOP/t" --set backends=test --set default_backend=test \
		--set gossip_probe_interval=250ms --set gossip_reconnect_interval=2s --set gossip_listen="127.0.0.1:$2" --set gossip_seeds="127.0.0.1:$P" \
		--set cluster_key_file="$T/key" --set api_url="ipc://$T/$1.sock"
}
gnode a "$P"
gnode b $((P + 1))
gnode c $((P + 2))
alive() { echo "\"name\":\"$1\",[^}]*\"state\":\"alive\""; }
wait_info a "$(alive b)" && wait_info a "$(alive c)" && wait_info b "$(alive a)" &&
	wait_info b "$(alive c)" && wait_info c "$(alive a)" && wait_info c "$(alive b)"
ok $? "three nodes know each other alive"

ids=$(for n in a b c a b c; do at "$n" create backend=test token=job7-rollout3 | idof; done | sort -u)
is "$(echo "$ids" | wc -l)" 1 "one token sent to all three nodes, twice: one sandbox ($ids)"
lease=$(at a lease_open timeout%=30 | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
lid=$(at b create backend=test "lease=$lease" | idof)
like "$lid" '^a:' "a create in a's lease sent to b is made on a ($lid)"
out=$(at a create backend=test trajectory?=true)
id=$(printf '%s' "$out" | idof)
owner=${id%%:*}
like "$owner" '^[abc]$' "a sandbox with a trajectory on node $owner"
okc=0
for k in $(seq 0 19); do
	at "$owner" exec "id=$id" "argv[]=echo" "argv[]=step $k" "step#=$k" | grep -q '"exit_code":0' &&
		okc=$((okc + 1))
done
is "$okc" 20 "20 steps acknowledged"
run at "$owner" info
traj=$(printf '%s' "$OUT" | grep -o '"trajectory":{[^}]*}')
rep=$(printf '%s' "$traj" | sed -n 's/.*"replicated":\([0-9]*\).*/\1/p')
ent=$(printf '%s' "$traj" | sed -n 's/.*"entries":\([0-9]*\).*/\1/p')
like "$traj" '"durability":"local_disk\+peers","replicas":2,.*"under_replicated":0' \
	"... each entry on two peers before its reply ($traj)"

ok $([ -n "$rep" ] && [ "$rep" = "$ent" ] && [ "$rep" -ge 21 ] && echo 0 || echo 1) \
	"... all $ent of the node's entries replicated"
# Another on the same node: a file written and read, and a pause between.
id2=$(at "$owner" create backend=test trajectory?=true "fwd=$owner" | idof)
at "$owner" file_write "id=$id2" path=/w data=state-1 "step#=0" >/dev/null
at "$owner" pause "id=$id2" >/dev/null
at "$owner" resume "id=$id2" >/dev/null
at "$owner" file_read "id=$id2" path=/w "step#=1" >/dev/null
at "$owner" exec "id=$id2" "argv[]=clock" "step#=2" >/dev/null
opid=$(eval echo "\$NODE_PID_$owner")
kill -KILL "$opid"; wait "$opid" 2>/dev/null
peers=$(echo a b c | tr ' ' '\n' | grep -v "^$owner$")
for n in $peers; do
	run at "$n" trajectory "id=$id" "replica?=true"
	is "$(printf '%s' "$OUT" | grep -o '"seq":' | wc -l)" 21 \
		"owner killed: node $n reads all 21 acknowledged entries of its log"
	like "$OUT" '"op":"exec","t":[^}]*"request":\{[^}]*"argv":\["echo","step 19"\]' \
		"... the last step's request among them"
done
run helper-py -c '
import asyncio, sys, dsec
async def main():
    async with dsec.AsyncClient(sys.argv[1]) as c:
        own = (await c.info())["node"]
        for name in (own + ":00000000000000aa.log", "../x.log", "b:zz.log"):
            try:
                await c.call("tlog_append", {"records": [{"name": name, "off": 0, "rec": b"x"}]})
                print("taken")
            except dsec.DsecError as e:
                print(e.code)
asyncio.run(main())' "ipc://$T/$(echo "$peers" | head -1).sock"
is "$(echo $OUT)" "invalid invalid invalid" "tlog_append refuses its own sandboxes' logs and names that are no log's"

# recover: the dead owner's sandbox made again on a peer from its copy.
p1=$(echo "$peers" | head -1)
wait_info "$p1" "\"name\":\"$owner\",[^}]*\"state\":\"dead\"" ||
	printf '# %s still sees %s alive\n' "$p1" "$owner" >&2
run at "$p1" recover "id=$id"
like "$OUT" '"ok":true.*"from":"'"$id"'","entries":21,"replayed":20,"skipped":\[\],"differs":\[\]' \
	"recover on node $p1 makes $id again: its create and its 20 steps, none differing"
nid=$(printf '%s' "$OUT" | idof)
[ -n "$nid" ] || printf "# recover: %s\n" "$OUT" >&2
nn=${nid%%:*}
ok $([ -n "$nn" ] && [ "$nn" != "$owner" ] && echo 0 || echo 1) "... as $nid, on a live node"
rep=0
for k in $(seq 0 19); do
	at "$nn" exec "id=$nid" "argv[]=echo" "argv[]=step $k" "step#=$k" |
		grep -q "\"replayed\":$k" && rep=$((rep + 1))
done
is "$rep" 20 "the trainer re-sends its 20 steps to the new id: each is answered from the log"
run at "$nn" exec "id=$nid" "argv[]=echo" "argv[]=step 20" "step#=20"
like "$OUT" '"ok":true,"result":\{"exit_code":0' "... and its next step runs"
is "$(printf '%s' "$OUT" | grep -c '"replayed"')" 0 "... (not from the log)"
p2=$(echo "$peers" | tail -1)
wait_info "$p2" "\"name\":\"$owner\",[^}]*\"state\":\"dead\"" ||
	printf '# %s still sees %s alive\n' "$p2" "$owner" >&2
run at "$p2" recover "id=$id"
like "$OUT" '"ok":true,"result":\{"id":"'"$nid"'".*"replayed":20,"skipped":\[\],"differs":\[\]' \
	"recover sent to the other peer: the same sandbox, its steps answered from its log"
run dsec-run -H "ipc://$T/$p1.sock" recover "$id"
is "$RC $(printf '%s' "$OUT" | grep -o '"id":"[^"]*"')" "0 \"id\":\"$nid\"" \
	"dsec-run recover prints the report (the same sandbox again) and exits 0: all recovered"
run at "$p1" recover "id=$id2"
like "$OUT" '"entries":6,"replayed":3,"skipped":\[\{"seq":2,"op":"pause"\},\{"seq":3,"op":"resume"\}\],"differs":\[\{"seq":5,"step":2,"op":"exec"\}\]' \
	"a pause and a resume cannot be sent again, a command that reads the clock differs: recover names them ($id2 on $owner)"
nid2=$(printf '%s' "$OUT" | idof)
run dsec-run -H "ipc://$T/$p1.sock" recover "$id2"
is "$RC" 1 "... and exits 1 when entries could not be sent again"
run dsec-run -H "ipc://$T/$p1.sock" recover "$owner:00000000000000ff"
is "$RC" 125 "... 125 when the node refuses"
run at "$p1" file_read "id=$nid2" path=/w "step#=1"
like "$OUT" '"data":"state-1".*"replayed":1' "... the file the logged steps wrote is there, its read answered from the log"
run at "$p1" recover "id=$owner:00000000000000ff"
like "$OUT" '"code":"not_found".*keeps no copy' "a dead node's sandbox without a log cannot be recovered: not_found"
run at "$p1" recover "id=$p1:00000000000000ff"
like "$OUT" '"code":"not_found"' "... nor one of the node's own that never had one"

# A member that joins takes over the tokens it ranks first for: creates
# sent again after the join still find the sandboxes their first made.
before=
for k in $(seq 1 24); do
	before="$before $(at "$p1" create backend=test "token=join-$k" | idof)"
done
# Its seed is a live node (a may be the one killed).
port_of() { case $1 in a) echo "$P" ;; b) echo $((P + 1)) ;; c) echo $((P + 2)) ;; esac; }
start_node d --backend-dir "$TOP/t" --set backends=test --set default_backend=test \
	--set gossip_probe_interval=250ms --set gossip_reconnect_interval=2s --set gossip_listen="127.0.0.1:$((P + 3))" --set gossip_seeds="127.0.0.1:$(port_of "$p1")" \
	--set cluster_key_file="$T/key" --set api_url="ipc://$T/d.sock"
wait_info d "$(alive "$p1")" && wait_info d "$(alive "$p2")" && wait_info "$p1" "$(alive d)" &&
	wait_info "$p2" "$(alive d)"
ok $? "node d joins the cluster"
for n in d "$p2"; do
	after=
	for k in $(seq 1 24); do
		after="$after $(at "$n" create backend=test "token=join-$k" | idof)"
	done
	is "$after" "$before" "24 tokens sent again through $n after d joined: the same 24 sandboxes"
done
run at d info
reused=$(printf '%s' "$OUT" | grep -o '"tokens":{[^}]*}' | sed -n 's/.*"reused":\([0-9]*\).*/\1/p')
ok $([ "${reused:-0}" -ge 1 ] && echo 0 || echo 1) \
	"... d, now their home, found $reused of them on the node that was"
