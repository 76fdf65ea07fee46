#!/bin/bash
# Faults around a container sandbox's file server (container-files) and
# the session namespaces: a server killed from outside between operations
# is started again for the next one; many operations at once on one
# sandbox all complete (they go to its server one at a time); destroy ends
# the server; and a SIGKILL of dsecd leaves neither file servers nor
# session shells (pid 1 of namespaces outside the sandbox's) behind.
. "$(dirname "$0")/lib.sh"

need_container

plan 8

start_dsecd --set backends=container || bail "dsecd did not start"
req() { helper-req "$DSEC_HOST" "$@"; }
mk() { req create backend=container | sed -n 's/.*"id":"\([^"]*\)".*/\1/p'; }
servers() { pgrep -P "$DSECD_PID" -x container-files | sort; }
id=$(mk)
[ -n "$id" ] || bail "cannot create a sandbox"

run req file_write id="$id" path=/root/a data=one
s1=$(servers)
ok $([ -n "$s1" ] && [ "$(echo "$s1" | wc -l)" = 1 ]; echo $?) "the first file operation starts one file server"
kill -9 $s1
for i in $(seq 50); do kill -0 $s1 2>/dev/null || break; sleep 0.1; done
run req file_read id="$id" path=/root/a
like "$OUT" '"data":"one"' "after the server was killed the next operation is done by a new one"
s2=$(servers)
ok $([ -n "$s2" ] && [ "$s2" != "$s1" ]; echo $?) "... which is running"

pids=
for i in $(seq 24); do
	req file_write id="$id" path=/root/p/f$i data=d$i >"$T/w$i" 2>&1 &
	pids="$pids $!"
done
wait $pids
run req file_list id="$id" path=/root/p
is "$(grep -l '"ok":true' "$T"/w* | wc -l):$(printf '%s' "$OUT" | grep -o '"name":"f[0-9]*"' | wc -l)" \
	"24:24" "24 writes at once to one sandbox all complete"

req destroy id="$id" >/dev/null
for i in $(seq 50); do [ -z "$(servers)" ] && break; sleep 0.1; done
is "$(servers)" "" "destroy ends the sandbox's file server"

# SIGKILL of the daemon with a file server and a session's background process.
id=$(mk)
req file_write id="$id" path=/root/a data=x >/dev/null
req session_open id="$id" session=s >/dev/null
req session_exec id="$id" session=s cmd='sleep 8201 &' >/dev/null
# One busy in the foreground: its shell reads no end of input.
req session_open id="$id" session=f >/dev/null
req session_exec id="$id" session=f cmd='sleep 8202' timeout%=60 >/dev/null 2>&1 &
for i in $(seq 50); do pgrep -f '^sleep 8202$' >/dev/null && break; sleep 0.1; done
s3=$(servers)
kill -9 "$DSECD_PID"
wait "$DSECD_PID" 2>/dev/null
DSECD_PID=
for i in $(seq 100); do
	kill -0 $s3 2>/dev/null || pgrep -f '^sleep 820[12]$' >/dev/null || break
	sleep 0.1
done
ok $(! kill -0 $s3 2>/dev/null; echo $?) "a SIGKILL of dsecd ends its file servers"
run pgrep -f '^sleep 8201$'
is "$OUT" "" "... and what its sessions left in the background"
run pgrep -f '^sleep 8202$'
is "$OUT" "" "... and what a session was running (its shell ends with the daemon)"
