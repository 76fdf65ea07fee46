#!/bin/bash
# The usage op: what a sandbox uses now, as its backend measures it.  A
# container sandbox reports CPU time, memory and its peak, tasks and its
# writable layer, and each follows what runs in it; a paused one is
# measured without being resumed; fncall reports its scratch disk only;
# bad ids get the codes every sandbox op gives.
. "$(dirname "$0")/lib.sh"

need_container
need_fncall

plan 11

start_dsecd --set backends=fncall,container || bail "dsecd did not start"
req() { helper-req "$DSEC_HOST" "$@"; }
get() { printf '%s\n' "$OUT" | sed -n "s/.*\"$1\":\\([0-9]*\\).*/\\1/p"; }
code() { printf '%s\n' "$OUT" | sed -n 's/.*"code":"\([^"]*\)".*/\1/p'; }

id=$(req create backend=container | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
run req usage id="$id"
like "$OUT" '"ok":true.*"cpu_ns":[0-9]+,"memory":[0-9]+,"memory_peak":[0-9]+,"pids":[0-9]+,"disk":[0-9]+' \
	"a container sandbox reports CPU, memory, its peak, tasks and disk"
cpu0=$(get cpu_ns) disk0=$(get disk) pids0=$(get pids)
ok $([ "$pids0" -ge 1 ]; echo $?) "... its init among its tasks ($pids0)"

# Work, files and a process left running: each shows.
dsec-run --id "$id" -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done;
	head -c 8000000 /dev/zero > /tmp/big; (setsid sleep 300 &)' >/dev/null
run req usage id="$id"
ok $([ "$(get cpu_ns)" -gt "$cpu0" ]; echo $?) "CPU time grows with a command's work ($cpu0 -> $(get cpu_ns) ns)"
ok $([ "$(get disk)" -ge $((disk0 + 8000000)) ]; echo $?) \
	"disk grows by the 8 MB file written ($disk0 -> $(get disk))"
ok $([ "$(get memory_peak)" -ge "$(get memory)" ]; echo $?) "the memory peak is at least the memory now"
ok $([ "$(get pids)" -gt "$pids0" ]; echo $?) "the process left running is counted ($(get pids) tasks)"

# Paused: measured, still paused.
req pause id="$id" >/dev/null
run req usage id="$id"
like "$OUT" '"ok":true.*"cpu_ns":' "a paused sandbox is measured"
like "$(req info id="$id")" '"state":"paused"' "... and stays paused"

fid=$(req create backend=fncall | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
run req usage id="$fid"
like "$OUT" '"ok":true,"result":\{"id":"[^"]*","disk":[0-9]+,"misbehaviour":\{[^}]*\}\}' \
	"an fncall sandbox reports its scratch disk only (its calls share the zygote's cgroups)"

# Bad ids: the codes every sandbox op gives (pause's here).
bad=
for arg in "" id=nosuch:1 id=node:00000000deadbeef; do
	run req usage $arg; u=$(code)
	run req pause $arg; p=$(code)
	[ -n "$u" ] && [ "$u" = "$p" ] || bad="$bad [$arg] usage:$u pause:$p"
done
is "$bad" "" "no id, a malformed and an unknown one get what pause gets (bad_request, invalid, not_found)"
run req destroy id="$id"
run req usage id="$id"
is "$(code)" "not_found" "a destroyed sandbox is not_found"
