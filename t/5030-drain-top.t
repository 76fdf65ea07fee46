#!/bin/bash
# Operators' tools: dsecctl node ls | drain | undrain against a node, and
# dsec-top showing every node of the cluster (-b for scripts; on a
# terminal, keys).  A draining node refuses new sandboxes with capacity and
# serves its own; a node that does not answer shows as down.
. "$(dirname "$0")/lib.sh"

need_cmd helper-req
[ -e "$TOP/t/test.so" ] || skip_all "needs t/test.so (make tests)"

plan 18

test_cluster "a b c" z
for i in 1 2 3; do at b create >/dev/null; done
idc=$(at c create | idof)

run dsecctl --host "ipc://$T/c.sock" node drain
is "$RC $OUT" "0 draining: no new sandboxes" "dsecctl node drain"
run at c create
like "$OUT" '"code":"capacity".*node .c. is draining' "a draining node refuses a create with capacity"
run at c call 'argv[]=echo'
like "$OUT" '"code":"capacity".*draining' "... and a one-shot call"
run at c exec id="$idc" 'argv[]=echo' 'argv[]=still'
like "$OUT" '"stdout":"still\\n"' "... and serves the sandboxes it has"
run at a exec id="$idc" 'argv[]=echo' 'argv[]=via' 'argv[]=a'
like "$OUT" '"stdout":"via a\\n"' "... also through another node"
run at c info
like "$OUT" '"draining":true' "info says it drains"
run dsecctl --host "ipc://$T/c.sock" node ls
like "$(echo $OUT)" "^NODE STATE SANDBOXES ADDRESS c draining 1 ipc://$T/c.sock \\(this node\\) a alive - ipc://$T/a.sock" \
	"dsecctl node ls: the node asked, then its cluster's members"

# dsec-top in batch mode, from a.
run dsec-top -H "ipc://$T/a.sock" -b
is "$RC" 0 "dsec-top -b exits 0"
like "$OUT" "^dsec-top: 4 nodes, 3 answering, 4 sandboxes" "... its summary counts the nodes and sandboxes"
like "$OUT" $'\na +alive +0/4096 ' "... a line for the node asked"
like "$OUT" $'\nb +alive +3/4096 .* test:3' "... one for b with its three sandboxes"
like "$OUT" $'\nc +draining +1/4096 ' "... c draining"
like "$OUT" $'\nz +down +.*z.sock' "... and z, which does not answer, down with why"
run at a info
like "$OUT" '"creates":\{"ok":0,' "info counts creates (none on a)"
run at b info
like "$OUT" '"creates":\{"ok":3,"failed":0,"p50_ms":[0-9.e-]+,"p99_ms":[0-9.e-]+\}' \
	"... with the latency of the latest (b: three)"

run dsecctl --host "ipc://$T/c.sock" node undrain
run at c create
like "$OUT" '"ok":true' "undrain: the node creates again"

run dsec-top -H "ipc://$T/nobody.sock" -b
like "$RC $(echo $OUT)" '^1 .*cannot reach' "dsec-top against no daemon fails, saying why"

# On a terminal: j selects the next node, d drains it, q quits.
if command -v script >/dev/null; then
	(sleep 1; printf 'j'; sleep 0.3; printf 'd'; sleep 1; printf 'q') |
		TERM=xterm timeout 20 script -qc "$TOP/tools/dsec-top -H ipc://$T/a.sock -d 0.3" /dev/null \
		> "$T/top.out" 2>&1
	run at b info
	like "$OUT" '"draining":true' "dsec-top on a terminal: j then d drains the second node (b)"
else
	skip "needs script(1)"
fi
