#!/bin/bash
# dsec-run --batch: jobs from a JSON-lines file, each in a fresh sandbox
# (fncall), a JSON line of result each: commands' exits and output,
# timeouts, files written first, env and cwd, errors with their phase and
# code; -j jobs at once; without --keep-going nothing starts after the
# first failure; an infrastructure failure (capacity here) is retried in a
# fresh sandbox and a command's own failure is not; no progress line when
# stderr is not a terminal; a bad line is an error naming it; every
# sandbox is gone after.
. "$(dirname "$0")/lib.sh"

need_cmd dsec-run
need_cmd helper-req
[ -e "$TOP/backends/fncall.so" ] || skip_all "needs backends/fncall.so (make)"
/usr/bin/python3 -c 'import json' 2>/dev/null || skip_all "needs /usr/bin/python3"

plan 17

start_dsecd --set backends=fncall || bail "dsecd did not start"
# field FILE NAME EXPR: EXPR (Python, r the job's result) for the job named NAME.
field() {
	/usr/bin/python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("name") == sys.argv[2]:
        print(eval(sys.argv[3]))' "$@"
}
cat > "$T/jobs" <<'EOF'
{"name": "hello", "commands": ["echo hello", ["sh", "-c", "echo to-err >&2"]]}

{"name": "files", "files": {"/work/a.txt": "from a file\n"}, "commands": ["cat /work/a.txt"]}
{"name": "env", "commands": ["echo $K; pwd"], "env": {"K": "kv"}, "cwd": "/work"}
{"name": "slow", "commands": ["sleep 5"], "timeout": 0.5}
{"name": "exit3", "commands": ["exit 3", "echo after"]}
{"name": "denied", "files": {"/etc/x": "no"}, "commands": ["true"]}
EOF
run dsec-run --batch "$T/jobs" -j 3 --keep-going
is "$RC" 1 "a batch with failing jobs exits 1 (--keep-going)"
echo "$OUT" > "$T/out"
is "$(wc -l < "$T/out")" 6 "... one JSON line per job, the blank line skipped"
is "$(field "$T/out" hello '[r["ok"], r["commands"][0]["stdout"], r["commands"][1]["stderr"], r["line"]]')" \
	"[True, 'hello\\n', 'to-err\\n', 1]" "a job's commands: stdout, stderr, its line in the file"
is "$(field "$T/out" files 'r["commands"][0]["stdout"]')" "from a file" "files are written before the commands run"
is "$(field "$T/out" env 'r["commands"][0]["stdout"]')" "kv
/work" "env and cwd"
is "$(field "$T/out" slow '[r["ok"], r["commands"][0]["timed_out"]]')" "[False, True]" \
	"a command past its timeout: timed out, the job not ok"
is "$(field "$T/out" exit3 '[r["ok"], [c["exit"] for c in r["commands"]], r["attempts"]]')" "[False, [3, 0], 1]" \
	"a command's non-zero exit: the job not ok, the next command still runs, no retry"
is "$(field "$T/out" denied '[r["ok"], r["error"]["phase"], r["error"]["code"]]')" "[False, 'upload', 'permission']" \
	"a file outside the sandbox: the error, its phase and code"
ok $(field "$T/out" hello 'all(k in r["ms"] for k in ("create", "upload", "exec", "destroy", "total"))' | grep -qx True; echo $?) \
	"... timings per phase"
ok $(! grep -q 'dsec-run: [0-9]*/' <<<"$OUT"; echo $?) "no progress line when stderr is not a terminal"
is "$(helper-req "$DSEC_HOST" list | grep -o '"id"' | wc -l)" 0 "every job's sandbox is destroyed"

# Without --keep-going: nothing starts after the first failure.
printf '{"name": "f", "commands": ["exit 1"]}\n{"name": "g"}\n{"name": "h"}\n' > "$T/jobs2"
run dsec-run --batch "$T/jobs2" -j 1
like "$RC:$(echo $OUT)" '^1:.*"name":"f","ok":false.*1 of 3 jobs failed; 2 not run' \
	"without --keep-going no job starts after the first that failed"

# An infrastructure failure (capacity: one sandbox at most) is retried.
stop_dsecd
start_dsecd --set backends=fncall --set max_sandboxes=1 || bail "dsecd did not start"
printf '{"name": "one", "commands": ["sleep 0.3"]}\n{"name": "two", "commands": ["sleep 0.3"]}\n' > "$T/jobs3"
run dsec-run --batch "$T/jobs3" -j 2 --retries 5	# backoffs 0.2 .. 3.2 s: 6.2 s in all
is "$RC" 0 "two jobs at once on a node of one sandbox: both ok"
echo "$OUT" > "$T/out3"
att=$( (field "$T/out3" one 'r["attempts"]'; field "$T/out3" two 'r["attempts"]') | sort -n | tr '\n' ' ')
like "$att" '^1 [2-6] $' "... the one refused (capacity) retried until the other was done (attempts: $att)"
run dsec-run --batch "$T/jobs3" -j 2 --retries 0 --keep-going
like "$RC:$(echo $OUT)" '^1:.*"code":"capacity"' "with --retries 0 the refusal is the job's error"

printf '{"name": "ok"}\nnot json\n' > "$T/bad"
run dsec-run --batch "$T/bad"
like "$RC:$(echo $OUT)" "^125:dsec-run: $T/bad:2: " "a line that is not JSON: 125, naming the line"
run dsec-run --batch "$T/jobs" -- true
like "$RC:$(echo $OUT)" "^125:.*--batch takes its commands from the jobs file" "--batch with a command: usage error"
