#!/bin/bash
# dsec-run's flags for what a script sets up: --keep --id-file (the id in
# a file, whole, before the command runs), --ttl and --idle-ttl (the
# sandbox's TTLs), the resource limits (a container sandbox runs with
# them), and clear errors for bad values.
. "$(dirname "$0")/lib.sh"

need_cmd dsec-run
need_cmd helper-req
[ -e "$TOP/t/test.so" ] || skip_all "needs t/test.so (make tests)"

plan 11

start_dsecd --backend-dir "$TOP/t" --set backends=test --set default_backend=test ||
	bail "dsecd did not start"
out=$(dsec-run --keep --id-file "$T/id" --ttl 1h --idle-ttl 5m -- echo hi 2>/dev/null)
is "$? $out" "0 hi" "dsec-run --keep --id-file runs the command"
id=$(cat "$T/id")
like "$id" '^[A-Za-z0-9._-]+:[0-9a-f]{16}$' "... and the id is in the file, one line"
ok $([ "$(wc -l < "$T/id")" = 1 ] && ! ls "$T"/id.* >/dev/null 2>&1; echo $?) "... with nothing else (no temporary file left)"
run helper-req "$DSEC_HOST" info id="$id"
like "$OUT" '"ttl":3600,.*"idle_ttl":300' "--ttl and --idle-ttl are the sandbox's TTLs"
run dsec-run --id-file "$T/x" -- true
like "$RC $(echo $OUT)" "^125 .*--id-file goes with --keep" "--id-file without --keep is a usage error"
run dsec-run --memory lots -- true
like "$RC $(echo $OUT)" "^125 .*invalid --memory 'lots'" "a bad --memory is a usage error"
run dsec-run --cpus 0 -- true
like "$RC $(echo $OUT)" "^125 .*invalid --cpus" "... so is --cpus 0"
run dsec-run --keep --id-file "$T/nodir/id" -- true
like "$RC $(echo $OUT)" "^125 .*cannot write the id to '$T/nodir/id'.*kept" \
	"an id file that cannot be written fails, naming the kept sandbox"

if [ -e "$TOP/backends/container.so" ] && [ "$(id -u)" = 0 ]; then
	stop_dsecd
	start_dsecd --set backends=container || bail "dsecd did not start"
	run dsec-run --backend container --memory 96M --pids 50 -- sh -c \
		'cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes; cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max'
	diag "limits seen inside: $(echo $OUT)"
	run dsec-run --backend container --memory 96M -- sh -c 'head -1 /proc/meminfo'
	like "$OUT" "MemTotal: +98304 kB" "--memory 96M: the container sandbox has 96 MiB"
	run dsec-run --backend container --pids 50 -- sh -c 'for i in $(seq 60); do sleep 5 & done 2>&1 | head -1; kill 0'
	like "$OUT" "ork|esource|again" "--pids 50: the 60th process cannot start"
	run dsec-run --backend container --cpus 0.5 -- true
	is "$RC" 0 "--cpus 0.5 creates"
else
	skip "needs root and the container backend"; skip "..."; skip "..."
fi
