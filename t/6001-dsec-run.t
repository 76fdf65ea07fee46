#!/bin/bash
# dsec-run: output, status and input pass through as if the command ran here.
. "$(dirname "$0")/lib.sh"

need_cmd dsec-run
need_cmd dsecd
need_cmd helper-req
[ -e "$TOP/backends/fncall.so" ] || skip_all "needs backends/fncall.so (make)"

plan 32

# Before any daemon: options alone.
run dsec-run --help
is "$RC" 0 "--help exits 0"
like "$OUT" '^usage: dsec-run .*--timeout' "--help prints the usage"
run dsec-run --version
like "$OUT" '^dsec-run [0-9]+\.[0-9]+' "--version prints the version"
run dsec-run
is "$RC" 125 "no command is a usage error (125)"
like "$OUT" "^dsec-run: no command given" "no command: says so"
run dsec-run --timeout soon -- true
like "$RC:$OUT" "^125:dsec-run: invalid timeout 'soon'" "a bad --timeout is refused"

# Nobody listening: a clear error, 125, quickly with --client-timeout.
t0=$(date +%s)
run dsec-run -H "ipc://$T/nobody.sock" --client-timeout 1 -- true
is "$RC" 125 "unreachable daemon exits 125"
like "$OUT" "^dsec-run: .*'ipc://$T/nobody.sock'.*\(unavailable\)$" \
	"unreachable daemon: message names the address and the code"
ok $(( $(date +%s) - t0 < 10 ? 0 : 1 )) "unreachable daemon: gives up after --client-timeout"
run dsec-run -H "nosuch://x" -- true
like "$RC:$OUT" "^125:dsec-run: .*'nosuch://x'.*\(invalid\)$" "an unusable address is refused"

if ! start_dsecd; then
	echo "Bail out! dsecd did not start"
	exit 1
fi

run dsec-run -- true
is "$RC:$OUT" "0:" "true exits 0 and prints nothing"
run dsec-run -- sh -c 'exit 7'
is "$RC" 7 "exit status passes through"
run dsec-run -- sh -c 'kill -TERM $$'
is "$RC" 143 "killed by SIGTERM: 128+15"

dsec-run -- sh -c 'echo out; echo err >&2; echo out2' >"$T/o" 2>"$T/e"
RC=$?
is "$RC" 0 "stdout/stderr command exits 0"
is "$(cat "$T/o")" "$(printf 'out\nout2')" "stdout goes to stdout only"
is "$(cat "$T/e")" "err" "stderr goes to stderr only"

dsec-run -- printf 'a\000b\377\n' >"$T/bin"
is "$(od -An -tx1 "$T/bin" | tr -d ' \n')" "610062ff0a" "stdout is binary-safe"
printf 'hello\nworld\n' >"$T/in"
run dsec-run --stdin "$T/in" -- cat
is "$OUT" "$(printf 'hello\nworld')" "--stdin FILE feeds the command"
OUT=$(printf 'from a pipe\n' | dsec-run --stdin - -- cat)
is "$OUT" "from a pipe" "--stdin - feeds our stdin"
OUT=$(printf 'not for it\n' | dsec-run -- cat)
is "$OUT" "" "without --stdin the command's stdin is empty"

run dsec-run --env FOO=bar --env X=1=2 -- sh -c 'echo "$FOO $X"'
is "$OUT" "bar 1=2" "--env sets variables (value may hold '=')"
run dsec-run -c 'echo $((6 * 7))'
is "$RC:$OUT" "0:42" "-c runs a shell snippet"
run dsec-run --runtime python3 -c 'import sys; print(6 * 7); sys.exit(3)'
is "$RC:$OUT" "3:42" "-c with --runtime python3 runs Python"
run dsec-run --cwd /tmp -- pwd
is "$OUT" "/tmp" "--cwd sets the working directory"

t0=$(date +%s)
run dsec-run --timeout 1 -- sleep 30
is "$RC" 124 "a timed-out command exits 124"
ok $(( $(date +%s) - t0 < 10 ? 0 : 1 )) "the timeout kills the command promptly"

dsec-run --output-cap 10 -c 'head -c 100 /dev/zero | tr "\0" a' >"$T/o" 2>"$T/e"
is "$(wc -c <"$T/o" | tr -d ' ')" 10 "--output-cap keeps that many bytes"
like "$(cat "$T/e")" "warning: stdout truncated to 10 bytes" "truncation is warned about"

run dsec-run --backend no-such-backend -- true
like "$RC:$OUT" "^125:dsec-run: .*\(no_backend\)$" "an unknown backend: 125 and no_backend"

id=$(dsec-run --keep 2>&1 >/dev/null)
RC=$?
like "$RC:$id" "^0:[^ ]+$" "--keep without a command prints a sandbox id"
run dsec-run --id "$id" -c 'echo in $((1 + 1))'
is "$RC:$OUT" "0:in 2" "--id runs in the kept sandbox"
run dsec-run --id "${id%:*}:ffffffffffffffff" -- true
like "$RC:$OUT" "^125:dsec-run: .*\(not_found\)$" "--id of no sandbox: 125 and not_found"
