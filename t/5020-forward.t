#!/bin/bash
# Every op on a sandbox goes to its owner, the node its id names, from any
# node: forwarded as it came, answered verbatim (errors too, streams
# in t/5021), with the cluster's members in cluster_nodes.  A node that is
# not a member is not_found; a member that does not answer gives
# unavailable in bounded time; the node asked keeps serving.  A frame that
# was forwarded once is never sent on again (two nodes that disagree about
# a third answer instead of passing it between them).
. "$(dirname "$0")/lib.sh"

need_cmd helper-req
[ -e "$TOP/t/test.so" ] || skip_all "needs t/test.so (make tests)"

plan 20

test_cluster "a b c"

idb=$(at b create | idof)
like "$idb" '^b:' "a sandbox made on node b is named after it"
run at a exec id="$idb" 'argv[]=echo' 'argv[]=via' 'argv[]=a'
like "$OUT" '"stdout":"via a\\n"' "node a runs a command in it on b"
run at c exec id="$idb" 'argv[]=echo' 'argv[]=via' 'argv[]=c'
like "$OUT" '"stdout":"via c\\n"' "... and so does node c"
run at a file_write id="$idb" path=/f data=hello
run at c file_read id="$idb" path=/f
like "$OUT" '"data":"hello"' "a file written through a is read through c"
run at a info id="$idb"
like "$OUT" "\"id\":\"$idb\"" "info on the sandbox through a is b's"
run at a exec id="$idb" 'argv[]=exit' 'argv[]=3'
like "$OUT" '"exit_code":3' "a command's exit status comes back as it was"
run at a exec id="$idb" 'argv[]=fail'
like "$RC $OUT" '^1 .*"code":"backend_error".*command .fail. failed' "... and an error reply, code and message"
run at a exec id="${idb%%:*}:00000000deadbeef" 'argv[]=true'
like "$OUT" '"code":"not_found".*no sandbox' "an unknown sandbox of b is b's not_found"

run at a pause id="$idb"
run at c info id="$idb"
like "$OUT" '"state":"paused"' "pause through a shows through c"
run at c resume id="$idb"
run at a destroy id="$idb"
is "$RC" 0 "destroy through a"
run at b info id="$idb"
like "$OUT" '"code":"not_found"' "... and b has it no more"

run at a info
like "$OUT" '"cluster":\{"membership":"static \(cluster_nodes\)","members":\[\{"name":"b"' \
	"node info shows the cluster's members"
like "$OUT" '"name":"b","url":"ipc://[^"]*/b.sock","state":"alive","forwarded":[1-9]' \
	"... with what went to each"

run at a exec id="zz:0000000000000001" 'argv[]=true'
like "$OUT" '"code":"not_found".*node .zz., which is not in this node.s cluster' \
	"a sandbox of a node outside the cluster is not_found, saying so"

# The owner stops: bounded unavailable, the asker serves on.
idc=$(at c create | idof)
eval "kill -STOP \$NODE_PID_c"
t0=$(date +%s)
HELPER_REQ_TIMEOUT=40 run at a exec id="$idc" 'argv[]=echo' 'argv[]=x' 'timeout%=1'
t1=$(date +%s)
eval "kill -CONT \$NODE_PID_c"
like "$OUT" '"code":"unavailable".*node .c. .* did not answer' "an owner that does not answer gives unavailable"
ok $([ $((t1 - t0)) -le 45 ]; echo $?) "... within the request's time and the forwarding slack ($((t1 - t0)) s)"
run at a ping
is "$RC" 0 "... and the node asked serves on"
run at a exec id="$idc" 'argv[]=echo' 'argv[]=back'
like "$OUT" '"stdout":"back\\n"' "once the owner answers again, so do requests through a"

# A batch on one node whose requests name sandboxes of others: each goes
# to its owner, the replies come back in order.
if /usr/bin/python3 -c 'import msgpack' 2>/dev/null; then
	ida=$(at a create | idof) idc2=$(at c create | idof)
	run helper-py -c '
import asyncio, sys, dsec
async def main():
    async with dsec.AsyncClient(sys.argv[1]) as c:
        rs = await c.exec_many(sys.argv[2:], ["echo", "batched"])
        print(" ".join(r.stdout.strip() if isinstance(r, dsec.ExecResult) else r.code for r in rs))
asyncio.run(main())' "ipc://$T/b.sock" "$ida" "$idc2" "zz:0000000000000001"
	is "$OUT" "batched batched not_found" "a batch through b runs on a and c, each reply in its place"
else
	skip "needs python3-msgpack"
fi

# A frame forwarded once is answered where it lands: node d names b as
# itself (its table says b is at a's address): a answers, not passes on.
start_node d --backend-dir "$TOP/t" --set backends=test --set default_backend=test \
	--set cluster_nodes="b=ipc://$T/a.sock"
run at d exec id="$(at b create | idof)" 'argv[]=true'
like "$OUT" '"code":"not_found".*belongs to node .b., not to .a.' \
	"a forwarded frame is never forwarded again (a misconfigured table answers)"
