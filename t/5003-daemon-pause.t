#!/bin/bash
# dsecd's pause and resume with the scripted "test" backend: requests that
# arrive while a pause or resume is in flight wait for it and then run in
# order, exec and files resume a paused sandbox first, failures reach the
# request that caused them, destroy does not wait.
. "$(dirname "$0")/lib.sh"
plan 24

start_dsecd --backend-dir "$TOP/t" --set backends=test --set default_backend=test --node n1
ok $? "dsecd starts with the test backend"
req() { helper-req "$DSEC_HOST" "$@"; }
field() { sed -n "s/.*\"$1\":\"\\([^\"]*\\)\".*/\\1/p"; }
state() { req info id="$1" | field state; }

# A pause that takes 1 s; an exec, a second pause and a resume sent
# meanwhile wait for it and run in the order they came.
ID=$(req create image=slow-pause | field id)
req pause id="$ID" >"$T/p1" &
p1=$!
sleep 0.1
is "$(state "$ID")" "running" "while a pause is in flight the state is still running"
req exec id="$ID" argv[]=echo argv[]=after >"$T/x1" &
x1=$!
sleep 0.05
req pause id="$ID" >"$T/p2" &
p2=$!
sleep 0.05
req file_read id="$ID" path=/none >"$T/r1" &
r1=$!
wait $p1 $x1 $p2 $r1
like "$(cat "$T/p1")" '"ok":true.*"state":"paused"' "the slow pause completes"
like "$(cat "$T/x1")" '"exit_code":0.*"stdout":"after\\n"' "an exec sent during the pause ran after it, resuming the sandbox"
like "$(cat "$T/p2")" '"ok":true.*"state":"paused"' "a second pause sent meanwhile paused it again after the exec"
like "$(cat "$T/r1")" '"code":"not_found"' "a file_read sent last resumed it again (the backend refuses file ops while paused)"
is "$(state "$ID")" "running" "so the sandbox ends running"

like "$(req pause id="$ID")" '"state":"paused"' "pause"
like "$(req info)" '"sandboxes":1,"paused":1,.*"name":"test",[^}]*"sandboxes":1,"paused":1,' \
	"info counts the paused sandbox, on the node and for its backend"
like "$(req pause id="$ID")" '"ok":true.*"state":"paused"' "pause of a paused sandbox: ok"
like "$(req file_write id="$ID" path=/f data=x)" '"ok":true' "file_write on a paused sandbox resumes it"
is "$(state "$ID")" "running" "running after file_write"
like "$(req resume id="$ID")" '"ok":true.*"state":"running"' "resume of a running sandbox: ok"
like "$(req info)" '"sandboxes":1,"paused":0,' "and no longer once it runs"

# destroy does not wait for a pause in flight; the pause then finds no sandbox.
req pause id="$ID" >"$T/p3" &
p3=$!
sleep 0.1
like "$(req destroy id="$ID")" '"ok":true' "destroy during a pause in flight"
wait $p3
like "$(cat "$T/p3")" '"code":"not_found"' "the pause then answers not_found"

# Failures go to the request that started the switch.
F=$(req create image=fail-pause | field id)
like "$(req pause id="$F")" '"code":"backend_error".*cannot pause' "a failed pause reports the backend's error"
is "$(state "$F")" "running" "and the sandbox stays running"
like "$(req exec id="$F" argv[]=echo argv[]=ok)" '"stdout":"ok\\n"' "exec still runs"
R=$(req create image=fail-resume | field id)
req pause id="$R" >/dev/null
like "$(req exec id="$R" argv[]=echo argv[]=x)" '"code":"backend_error".*cannot resume' \
	"exec on a paused sandbox that cannot resume reports why"
is "$(state "$R")" "paused" "the sandbox stays paused"
like "$(req resume id="$R")" '"code":"backend_error"' "resume reports the failure too"
like "$(req destroy id="$R")" '"ok":true' "a paused sandbox is destroyed"

stop_dsecd
is "$?" "0" "dsecd stops cleanly"
