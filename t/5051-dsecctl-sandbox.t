#!/bin/bash
# dsecctl sandbox ls [--label] | inspect | destroy | pause | resume | exec | cp:
# a node's sandboxes from the shell (those of dsec-run --keep included).
. "$(dirname "$0")/lib.sh"

need_cmd dsecctl
need_cmd helper-req
[ -e "$TOP/t/test.so" ] || skip_all "needs t/test.so (make tests)"

plan 14

start_dsecd --backend-dir "$TOP/t" --set backends=test --set default_backend=test ||
	bail "dsecd did not start"
mk() { helper-req "$DSEC_HOST" create "$@" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p'; }
a=$(mk labels.job=a labels.step=1)
b=$(mk labels.job=b)
run dsecctl sandbox ls
like "$(echo $OUT)" "^ID BACKEND STATE AGE IDLE LABELS .*$a test running .*job=a,step=1" "sandbox ls lists them with their labels"
run dsecctl sandbox ls --label job=a
is "$(printf '%s\n' "$OUT" | tail -n +2 | cut -d' ' -f1)" "$a" "--label job=a: only that one"
run dsecctl sandbox inspect "$a"
like "$OUT" $'\nstate: running\n' "sandbox inspect: every field, one a line"
run dsecctl sandbox exec "$a" -- echo hi there
is "$RC $OUT" "0 hi there" "sandbox exec runs a command, its output here"
run dsecctl sandbox exec "$a" exit 7
is "$RC" 7 "... and its exit status is ours"
printf 'bin\0ary\n' > "$T/in"
run dsecctl sandbox cp "$T/in" "$a:/data/f"
run dsecctl sandbox cp "$a:/data/f" "$T/out"
ok $(cmp -s "$T/in" "$T/out"; echo $?) "sandbox cp in and out, byte for byte"
run dsecctl sandbox cp "$T/in" "$T/out2"
like "$RC $OUT" "^1 .*one side of each" "cp between two local files is refused"
run dsecctl sandbox pause "$a"
like "$(dsecctl sandbox ls --label job=a)" "$a +test +paused" "sandbox pause"
run dsecctl sandbox resume "$a"
like "$(dsecctl sandbox ls --label job=a)" "$a +test +running" "sandbox resume"
run dsecctl sandbox ttl "$a" 120
is "$RC $OUT" "0 $a: 120 s left" "sandbox ttl: more time"
run dsecctl sandbox ttl "$a" soon
like "$RC $OUT" "^2 .*seconds more than 0" "... seconds that are not: usage"
run dsecctl sandbox destroy "$a" "$b" "${a%%:*}:00000000deadbeef"
like "$RC $(echo $OUT)" "^1 .*00000000deadbeef: no sandbox" "sandbox destroy: each, the unknown one named"
is "$(dsecctl sandbox ls | wc -l)" 1 "... and the others are gone"
run dsecctl sandbox frob
like "$RC $OUT" "^2 .*expected 'sandbox ls'" "an unknown sandbox command is a usage error"
