#!/bin/bash
# tools/place-sim on a tiny cluster (a smoke run, not its figures): each
# scenario prints a row per policy, the same seed gives the same table,
# and a cluster asked for less than it holds fails no create when views
# are exact.
. "$(dirname "$0")/lib.sh"
[ -x "$TOP/tools/place-sim" ] || skip_all "tools/place-sim is not built"
plan 6

small="--nodes 8 --slots 40 --rate 200"
run place-sim $small --scenario fill --fill 1.2
is "$RC" 0 "fill runs"
is "$(printf '%s\n' "$OUT" | grep -c '^| [a-z]')" 7 "fill: a header and six policies"
first=$OUT
run place-sim $small --scenario fill --fill 1.2
is "$OUT" "$first" "the same seed, the same table"

run place-sim $small --scenario steady --util 0.5 --warmup 5 --duration 10
is "$RC" 0 "steady runs"
is "$(printf '%s\n' "$OUT" | grep -c '^| [a-z]')" 7 "steady: a header and six policies"

run place-sim $small --scenario fill --fill 0.5 --fresh --policy power_k
like "$OUT" '\| power_k \|.*\| 0 \| none \|' "exact views, half the slots asked: no create fails"
