#!/bin/bash
# Idempotent creates across nodes whose views of the cluster differ
# (rlcoord/token.c): node a does not know node b (as a node that takes b
# for dead does not send to it), b and c know all three.  First creates
# of one token sent at the same moment through a and b (and c) make one
# sandbox, whichever nodes each thinks the token's home; token_find with
# 'from' records the asker's claim.  Static cluster_nodes, the test
# backend.
. "$(dirname "$0")/lib.sh"

need_cmd helper-req
[ -e "$TOP/t/test.so" ] || skip_all "needs t/test.so (make tests)"
plan 10

all="a=ipc://$T/a.sock,b=ipc://$T/b.sock,c=ipc://$T/c.sock"
node() { start_node "$1" --backend-dir "$TOP/t" --set backends=test --set default_backend=test \
	--set cluster_nodes="$2"; }
node a "a=ipc://$T/a.sock,c=ipc://$T/c.sock"
node b "$all"
node c "$all"

# race NAME N NODES...: N tokens NAME-K, each sent at once through every
# node of NODES; prints the tokens that made more than one sandbox.
race() {
	local name=$1 n=$2 k x pids
	shift 2
	for k in $(seq "$n"); do
		pids=
		for x in "$@"; do
			at "$x" create backend=test "token=$name-$k" > "$T/r.$x" & pids="$pids $!"
		done
		wait $pids
		[ "$(cat "${@/#/$T/r.}" | idof | sort -u | wc -l)" = 1 ] ||
			echo "$name-$k: $(cat "${@/#/$T/r.}" | tr '\n' ' ')"
	done
}
run race ab 60 a b
is "$OUT" "" "60 tokens, each sent at once through a (which does not know b) and b: one sandbox each"
run race abc 40 a b c
is "$OUT" "" "40 tokens, each sent at once through a, b and c: one sandbox each"
n=0
for x in a b c; do n=$((n + $(at "$x" list | grep -o '"id":"[^"]*"' | wc -l))); done
is "$n" 100 "... 100 sandboxes in all on the three nodes"

# The claim itself.
run at c token_find token=t-claim from=b
like "$OUT" '"found":false,"pending":false,"claimer":"b"' \
	"token_find with from, of a token the node does not hold: the asker is its maker"
run at c token_find token=t-claim from=a
like "$OUT" '"claimer":"b"' "... the first claim holds against a later asker"
run at a token_find token=t-claim2 from=b
like "$OUT" '"claimer":"a"' "a node that cannot send creates to the asker names itself"
run at c token_find token=t-claim3 from=zz
like "$OUT" '"claimer":"c"' "... as does one asked by a node it does not know"
run at c token_find token=t-claim4
like "$OUT" '"found":false,"pending":false}' "without from, token_find records nothing"
run at c token_find token=t-claim4 from=a
like "$OUT" '"claimer":"a"' "... so the token is still free for an asker"
run at c info
like "$OUT" '"tokens":\{"held":[0-9]+,"claims":[1-9][0-9]*,' "info counts the claims held"
