#!/bin/bash
# swim-sim: a tiny run of the simulator (the real libswim under simulated
# time) with Lifeguard on and off; the figures themselves are not checked.
. "$(dirname "$0")/lib.sh"

need_cmd swim-sim

plan 6

run swim-sim --bogus
like "$RC:$(printf '%s' "$OUT" | grep usage)" "^2:usage: swim-sim" "an unknown option is a usage error (2)"
run swim-sim -n 30 -d 20 -k 2 -l 0.05 --compare
is "$RC" 0 "30 nodes, 5 % loss, on and off: exits 0"
like "$OUT" "SWIM bound at n=30" "prints the SWIM bound"
is "$(printf '%s\n' "$OUT" | grep -A1 '^lifeguard on:' | grep -c 'join: converged')" 1 \
	"the cluster formed with lifeguard"
is "$(printf '%s\n' "$OUT" | grep -A1 '^lifeguard off' | grep -c 'join: converged')" 1 "and without"
like "$OUT" "detection, each survivor of 2 kills \(56\): median [0-9.]+ s, p99 [0-9.]+ s, max [0-9.]+ s, 0 never" \
	"every survivor saw both kills dead"
