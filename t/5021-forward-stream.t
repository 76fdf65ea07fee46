#!/bin/bash
# A streamed command through another node: exec_start, exec_write,
# exec_read and exec_signal on a sandbox of node b sent to node a are
# forwarded one by one to b (each names the sandbox), and the output,
# stdin and the end come through as on b itself.
. "$(dirname "$0")/lib.sh"

need_container

plan 5

members="a=ipc://$T/a.sock,b=ipc://$T/b.sock"
start_node a --set backends=container --set cluster_nodes="$members" \
	--set container.uid_base=3100000000
start_node b --set backends=container --set cluster_nodes="$members" \
	--set container.uid_base=3200000000
export HELPER_REQ_TIMEOUT=30
at() { local n=$1; shift; run helper-req "ipc://$T/$n.sock" "$@"; }

at b create backend=container
id=$(get id)
like "$id" '^b:' "a container sandbox on node b"
at a exec_start id="$id" 'argv[]=cat' 'stdin_open?=true'
x=$(get exec)
like "$x" '^x[0-9]+$' "exec_start through a names the command"
at a exec_write id="$id" exec="$x" data=through-a 'eof?=true'
is "$RC" 0 "exec_write through a"
out=
for i in $(seq 50); do
	at a exec_read id="$id" exec="$x" wait%=5
	out+=$(get stdout)
	[ "$(get done)" = true ] && break
done
is "$out:$(get exit_code)" "through-a:0" "exec_read through a gets the output and the end"
at a exec_start id="$id" 'argv[]=sleep' 'argv[]=100'
x=$(get exec)
# busy while the command starts (its group is not made yet): again, as
# the protocol says.
for i in $(seq 100); do
	at a exec_signal id="$id" exec="$x" signal=TERM
	[ "$(get code)" = busy ] || break
	sleep 0.02
done
for i in $(seq 50); do
	at a exec_read id="$id" exec="$x" wait%=5
	[ "$(get done)" = true ] && break
done
is "$(get done):$(get signal)" "true:15" "exec_signal through a ends a command on b"
