#!/bin/bash
# dsecd end to end with the scripted "test" backend: ops, errors, TTLs,
# concurrency, and a clean SIGTERM.
. "$(dirname "$0")/lib.sh"
plan 34

start_dsecd --backend-dir "$TOP/t" --set backends=test --set default_backend=test --node n1
ok $? "dsecd starts with the test backend"
req() { helper-req "$DSEC_HOST" "$@"; }
field() { sed -n "s/.*\"$1\":\"\\([^\"]*\\)\".*/\\1/p"; }

like "$(req ping)" '"pong":true.*"node":"n1"' "ping answers with the node name"
like "$(req info)" '"backends":\[\{"name":"test"' "info lists the loaded backend"

ID=$(req create | field id)
like "$ID" '^n1:[0-9a-f]{16}$' "create returns an id that names the node"
like "$(req exec id="$ID" argv[]=echo argv[]=hello argv[]=world)" '"exit_code":0.*"stdout":"hello world\\n"' "exec runs and returns stdout"
like "$(req exec id="$ID" argv[]=cat stdin=abc)" '"stdout":"abc"' "exec feeds stdin"
like "$(req exec id="$ID" argv[]=exit argv[]=3)" '"exit_code":3' "exec reports the exit code"
like "$(req exec id="$ID" argv[]=env argv[]=X env.X=42)" '"stdout":"42\\n"' "exec passes env"
like "$(req exec id="$ID" code=hi argv[]=x)" '"code":"bad_request".*exactly one of' "argv and code together are refused"
like "$(req exec id="$ID")" '"code":"bad_request"' "exec without argv or code is refused"
like "$(req exec id="$ID" argv[]=fail)" '"code":"backend_error"' "a backend failure is reported with its code"
like "$(req file_write id="$ID" path=/w/a.txt data=xyz mode#=420)" '"ok":true' "file_write"
like "$(req file_read id="$ID" path=/w/a.txt)" '"data":"xyz","size":3' "file_read returns what was written"
like "$(req file_read id="$ID" path=/nope)" '"code":"not_found"' "file_read of a missing file is not_found"
like "$(req file_read id="$ID" path=/a/../../etc/passwd)" '"code":"permission"' "an escaping path is refused as permission"
like "$(req list)" "\"id\":\"$ID\".*\"execs\":[1-9]" "list shows the sandbox and its exec count"
like "$(req info id="$ID")" '"state":"running"' "info on a sandbox shows its state"
like "$(req destroy id="$ID")" '"ok":true' "destroy"
like "$(req destroy id="$ID")" '"code":"not_found"' "a second destroy is not_found"
like "$(req exec id="$ID" argv[]=echo)" '"code":"not_found"' "exec after destroy is not_found"
like "$(req exec id=other:0000000000000001 argv[]=echo)" '"code":"not_found".*belongs to node' "an id of another node is not_found and says whose"
like "$(req create backend=nope)" '"code":"no_backend"' "an unknown backend is no_backend"
like "$(req create image=fail)" '"code":"backend_error".*cannot create test sandbox' "a failed create is reported"
like "$(req create image=refuse)" '"code":"invalid"' "a create refused at once is reported"
is "$(req list)" '{"ok":true,"result":{"sandboxes":[],"total":0}}' \
	"failed creates leave nothing in the table"

# TTLs
A=$(req create idle_ttl%=0.3 | field id)
B=$(req create ttl%=0.3 idle_ttl%=100 | field id)
C=$(req create idle_ttl%=0.3 | field id)
like "$(HELPER_REQ_TIMEOUT=10 req exec id="$C" argv[]=sleep argv[]=1)" '"ok":true' "a running command is not idleness"
sleep 0.5
like "$(req info id="$A")" '"code":"not_found"' "idle ttl destroys an idle sandbox"
like "$(req info id="$B")" '"code":"not_found"' "wall ttl destroys a sandbox however busy"

# A long command never delays another client.
S=$(req create | field id)
(HELPER_REQ_TIMEOUT=30 req exec id="$S" argv[]=sleep argv[]=5 > "$T/slow" 2>&1 &)
sleep 0.2
like "$(req call argv[]=echo argv[]=fast)" '"stdout":"fast\\n"' "a call completes while another client's command runs"
is "$(cat "$T/slow")" "" "... and the long command is indeed still running"

# Many concurrent clients, each reply its own.
pids=
for i in $(seq 48); do req call argv[]=echo argv[]="m$i" > "$T/c$i" 2>&1 & pids="$pids $!"; done
wait $pids
bad=0
for i in $(seq 48); do grep -q "\"stdout\":\"m$i\\\\n\"" "$T/c$i" || bad=$((bad + 1)); done
is "$bad" 0 "48 concurrent clients each get their own correct reply"

# SIGTERM: running command fails cleanly, daemon exits 0, leaves no socket.
S2=$(req create | field id)
(HELPER_REQ_TIMEOUT=30 req exec id="$S2" argv[]=sleep argv[]=20 > "$T/cut" 2>&1 &)
# The command runs before the daemon is told to stop (a loaded machine
# may take longer than any fixed wait to get there).
for i in $(seq 100); do req info id="$S2" | grep -q '"running":1' && break; sleep 0.1; done
stop_dsecd
is "$?" 0 "SIGTERM stops dsecd with status 0"
ok "$([ ! -e "$T/dsecd.sock" ] && [ ! -e "$T/state/dsecd.pid" ]; echo $?)" "socket and pid file are removed"
for i in $(seq 100); do [ -s "$T/cut" ] && break; sleep 0.1; done
like "$(cat "$T/cut")" '"ok":false' "a command cut by shutdown gets an error reply"
