#!/bin/bash
# dsec-bench: a short run of each mode, the table, --json, checked replies.
. "$(dirname "$0")/lib.sh"

need_cmd dsec-bench
need_cmd dsecd
need_cmd helper-req
[ -x /usr/bin/python3 ] || skip_all "needs /usr/bin/python3 to parse --json"
[ -e "$TOP/backends/fncall.so" ] || skip_all "needs backends/fncall.so (make)"

plan 36

COLS='mode +backend +runtime +concurrency +requests +errors +mismatches +seconds +rate/s'
COLS="$COLS"' +p50 ms +p90 ms +p99 ms +max ms +cpu us'

# field N of the result line of the table in $OUT (the line after the
# header; stderr lines may come before it)
field() { printf '%s\n' "$OUT" | awk -v n="$1" 'h { print $n; exit } /^mode +backend/ { h = 1 }'; }

run dsec-bench --help
like "$RC:$OUT" "^0:usage: dsec-bench" "--help exits 0 with the usage"
run dsec-bench -n 5 -d 1
like "$RC:$OUT" "^2:dsec-bench: -n and -d are exclusive" "-n with -d is a usage error (2)"
run dsec-bench --mode sideways
like "$RC:$OUT" "^2:dsec-bench: unknown mode 'sideways'" "an unknown mode is a usage error"
run dsec-bench --mode pause --cmd true
like "$RC:$OUT" "^2:dsec-bench: --cmd and --code do not apply to --mode pause" \
	"pause mode runs no command: --cmd is a usage error"

if ! start_dsecd; then
	echo "Bail out! dsecd did not start"
	exit 1
fi

run dsec-bench -c 2 -n 20 --backend fncall
is "$RC" 0 "call mode: exits 0"
printf '%s\n' "$OUT" | grep -Eq "^$COLS\$"
ok $? "call mode: the header has every column"
is "$(field 1):$(field 2):$(field 4):$(field 5)" "call:fncall:2:20" \
	"call mode: mode, backend, concurrency and requests are reported"
is "$(field 6):$(field 7)" "0:0" "call mode: no errors, no mismatches"
like "$(field 9):$(field 10):$(field 13)" '^[0-9.]+:[0-9.]+:[0-9.]+$' \
	"call mode: rate and latencies are numbers"

run dsec-bench -c 2 -n 20 --mode exec --warmup 4
is "$RC:$(field 1):$(field 5):$(field 6):$(field 7)" "0:exec:20:0:0" \
	"exec mode: 20 checked requests, no errors or mismatches"

run dsec-bench -c 2 -n 10 --mode create
is "$RC:$(field 1):$(field 5):$(field 6)" "0:create:10:0" "create mode: 10 creations, no errors"

run dsec-bench -c 2 -n 10 --runtime python3
is "$RC:$(field 3):$(field 6):$(field 7)" "0:python3:0:0" "python3 runtime: replies checked and right"
run dsec-bench -c 2 -n 10 --mode exec --runtime python3
is "$RC:$(field 6):$(field 7)" "0:0:0" "python3 runtime in exec mode: right"

# --sandboxes: the threads share N sandboxes, each taken in turn.
run dsec-bench -c 2 --sandboxes 1 --mode exec
like "$RC:$OUT" "^2:dsec-bench: --sandboxes 1 is fewer than the 2 threads" \
	"--sandboxes below -c is a usage error"
run dsec-bench --sandboxes 4 --mode call
like "$RC:$OUT" "^2:dsec-bench: --sandboxes is for --mode exec" \
	"--sandboxes outside exec mode: usage"
run helper-req "$DSEC_HOST" info
made=$(printf '%s' "$OUT" | grep -o '"creates":{"ok":[0-9]*' | grep -o '[0-9]*$')
run dsec-bench -c 2 --sandboxes 5 -n 20 --mode exec
is "$RC:$(field 1):$(field 5):$(field 6):$(field 7)" "0:exec:20:0:0" \
	"--sandboxes 5 -c 2: 20 checked commands, no errors or mismatches"
run helper-req "$DSEC_HOST" info
now=$(printf '%s' "$OUT" | grep -o '"creates":{"ok":[0-9]*' | grep -o '[0-9]*$')
is "$((now - made)):$(get sandboxes)" "5:0" "--sandboxes 5: five sandboxes made, none left after"
run dsec-bench -c 1 -n 10 --mode exec
like "$(field 14)" '^[0-9]+$' "the last column is the client's CPU per request (us)"
ok $(( $(field 14) > 0 ? 0 : 1 )) "the client's CPU per request is counted"

run dsec-bench -c 2 -n 30 --mode ping
is "$RC:$(field 1):$(field 5):$(field 6)" "0:ping:30:0" "ping mode: 30 pings, no errors"
run dsec-bench -c 2 -n 10 --mode ping --cmd true
like "$RC:$OUT" "^2:dsec-bench: --cmd and --code do not apply to --mode ping" \
	"ping mode runs no command: --cmd is a usage error"
run env DSEC_HOST=ipc:///nonexistent/sock dsec-bench -c 2 -n 10 --mode local
is "$RC:$(field 1):$(field 2):$(field 5):$(field 6):$(field 7)" "0:local:none:10:0:0" \
	"local mode: no daemon, 10 commands spawned here, replies checked and right"
run dsec-bench -c 1 -n 5 --mode local --runtime python3
is "$RC:$(field 3):$(field 6):$(field 7)" "0:python3:0:0" "local mode runs the python3 snippet"
run dsec-bench -c 1 -n 5 --mode local --cmd 'exit 3'
is "$RC:$(field 7)" "1:5" "local mode: a --cmd that fails is a mismatch, as in a sandbox"

run dsec-bench -c 2 -d 1
is "$RC:$(field 6):$(field 7)" "0:0:0" "-d 1: runs for a second without errors"
ok $(( $(field 5) > 0 ? 0 : 1 )) "-d 1: some requests were made"
like "$(field 8)" '^(0\.9|1\.|2\.)' "-d 1: about one second measured"

dsec-bench -c 2 -n 12 --json >"$T/json"
RC=$?
is "$RC" 0 "--json: exits 0"
/usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
keys = ["mode", "backend", "runtime", "concurrency", "requests", "errors", "mismatches",
        "seconds", "rate", "p50_ms", "p90_ms", "p99_ms", "max_ms", "client_cpu_us"]
missing = [k for k in keys if k not in d]
assert not missing, "missing keys %s" % missing
assert d["mode"] == "call" and d["concurrency"] == 2 and d["requests"] == 12, d
assert d["errors"] == 0 and d["mismatches"] == 0, d
assert 0 < d["p50_ms"] <= d["p90_ms"] <= d["p99_ms"] <= d["max_ms"], d
' "$T/json" 2>"$T/pyerr"
ok $? "--json: parses, has every key, counts and ordered latencies"
[ -s "$T/pyerr" ] && sed 's/^/# /' "$T/pyerr"

run dsec-bench -c 2 -n 10 --mode exec --pid "$DSECD_PID"
like "$OUT" "daemon pid $DSECD_PID VmRSS: [0-9]+ kB before, [0-9]+ kB after \([-+][0-9]+ kB\)" \
	"--pid reports the daemon's VmRSS before and after"
dsec-bench -c 1 -n 3 --pid "$DSECD_PID" --json >"$T/json"
/usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["pid"] > 0 and d["rss_before_kb"] > 0 and d["rss_after_kb"] > 0, d
' "$T/json"
ok $? "--pid --json: rss_before_kb and rss_after_kb"

# Wrong replies are caught, not counted as successes.
run dsec-bench -c 2 -n 6 --cmd 'echo nope; exit 1'
is "$RC:$(field 7)" "1:6" "a failing --cmd: every request a mismatch, exit 1"
like "$OUT" "mismatch: request .*exit 1" "a failing --cmd: the mismatch is described"
run dsec-bench -c 2 -n 6 --code 'echo "$X"'
is "$RC:$(field 7)" "0:0" "--code: only the exit status is checked"
run dsec-bench -c 1 -n 3 --backend no-such-backend
is "$RC:$(field 6)" "1:3" "an unknown backend: every request an error, exit 1"
like "$OUT" "no_backend" "an unknown backend: the error is described"
