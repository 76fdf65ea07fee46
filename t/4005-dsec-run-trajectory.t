#!/bin/bash
# dsec-run trajectory exports a sandbox's log as JSON lines; dsec-run
# replay runs it again in a fresh sandbox and names the first entry whose
# result differs.
. "$(dirname "$0")/lib.sh"

need_fncall
/usr/bin/python3 -c 'import msgpack, json' 2>/dev/null || skip_all "needs python3-msgpack"
plan 12

start_dsecd --set backends=fncall || bail "dsecd did not start"
run timeout 60 helper-py "$TOP/t/helper-rl.py" mk "$DSEC_HOST"
id=$(get id)
run dsec-run trajectory "$id"
is "$RC" 0 "dsec-run trajectory exits 0"
printf '%s\n' "$OUT" > "$T/traj.jsonl"
is "$(wc -l < "$T/traj.jsonl")" 6 "... one JSON line an entry: create and 5 steps"
run /usr/bin/python3 -c '
import json, sys
es = [json.loads(l) for l in open(sys.argv[1])]
print(" ".join(e["op"] for e in es), [e["step"] for e in es][1:], es[2]["reply"]["result"]["stdout"],
      es[4]["reply"]["result"]["data"], all(e["msgpack"] and e["hash"].startswith("sha256:") for e in es))
' "$T/traj.jsonl"
is "$OUT" "create file_write exec exec file_read exec [0, 1, 2, 3, 4] abc
1
 abc
 True" "... with ops, steps, replies (text as strings) and each request's bytes"
run dsec-run -H "$DSEC_HOST" trajectory "$id"
is "$RC" 0 "-H before the subcommand works too"
run dsec-run trajectory "$(echo "$id" | sed 's/:.*//'):0000000000000001"
is "$RC" 125 "the trajectory of an unknown sandbox: exit 125"
like "$OUT" "no trajectory" "... saying so"

run dsec-run replay "$T/traj.jsonl"
is "$RC" 1 "dsec-run replay: a step whose result differs exits 1 ($OUT)"
like "$OUT" "entry 5 \(step 4, exec\) differs" "... naming the first that differs (the clock)"
head -5 "$T/traj.jsonl" > "$T/same.jsonl"
run dsec-run replay "$T/same.jsonl"
is "$RC" 0 "replay of the steps that do not depend on the clock: exit 0 ($OUT)"
like "$OUT" "4 entries replayed, every result the same" "... all the same"
run sh -c "dsec-run replay - < '$T/same.jsonl'"
is "$RC" 0 "replay reads standard input"
printf 'not json\n' > "$T/bad.jsonl"
run dsec-run replay "$T/bad.jsonl"
is "$RC" 125 "a line that is no entry: exit 125"
