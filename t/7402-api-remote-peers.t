#!/bin/bash
# The API has no credential yet: a tcp:// listener serves loopback peers
# only, and refuses (and logs) a client from any other address unless
# listen_remote = true.  The remote client lives in a network namespace of
# this test, joined to the host by a veth pair.
. "$(dirname "$0")/lib.sh"

need_root
need_cmd helper-req
need_cmd ip

NS="dsecapi$$"
NET="10.$(( 200 + $$ % 50 )).$(( $$ % 250 ))"
PORT=$(( 30000 + $$ % 20000 ))
mk_netns "$NS" "dsa$(( $$ % 100000 ))" "$NET" ||
	{ _netns_cleanup; skip_all "cannot make a network namespace and a veth pair"; }

plan 11

export HELPER_REQ_TIMEOUT=2
remote() { ip netns exec "$NS" "$TOP/t/helper-req" "tcp://$NET.1:$PORT" ping; }

# IPv6 where the machine has it: loopback, and a ULA on the veth pair.
V6= V6R= ULA="fd00:d5ec:$(printf %x $(( $$ % 65536 )))"
if [ -e /proc/net/if_inet6 ] && ip -6 addr show dev lo | grep -q '::1/128' &&
	ip addr add "$ULA::1/64" dev "dsa$(( $$ % 100000 ))" nodad 2>/dev/null &&
	ip -n "$NS" addr add "$ULA::2/64" dev eth0 nodad 2>/dev/null; then
	V6="tcp://[::1]:$(( PORT + 1 ))"
	V6R="tcp://[$ULA::1]:$(( PORT + 1 ))"
fi
start_dsecd --set backends=fncall --listen "tcp://0.0.0.0:$PORT" \
	${V6:+--listen "tcp://[::]:$(( PORT + 1 ))"} || bail "dsecd did not start"
run remote
like "$OUT" "no reply" "a client from another address gets no reply"
like "$(dsecd_log)" "refused API client $NET.2:[0-9]+: not on loopback" "... and the refusal is logged with its address"
run helper-req "tcp://127.0.0.1:$PORT" ping
like "$OUT" '"ok":true' "a loopback client of the tcp listener is served"
if [ -n "$V6" ]; then
	run helper-req "$V6" ping
	like "$OUT" '"ok":true' "an IPv6 loopback client is served"
	run ip netns exec "$NS" "$TOP/t/helper-req" "$V6R" ping
	like "$OUT" "no reply" "an IPv6 client from another address gets no reply"
	like "$(dsecd_log)" "refused API client \\[$ULA::2\\]:[0-9]+" "... and is logged"
else
	skip "no IPv6 loopback"; skip "no IPv6"; skip "no IPv6"
fi
ip netns exec "$NS" /usr/bin/python3 -c "
import socket
for i in range(100):
    s = socket.create_connection(('$NET.1', $PORT), timeout=5)
    s.sendall(b'\\x00SP\\x00\\x00\\x30\\x00\\x00')
    while s.recv(64):
        pass
    s.close()" 2>/dev/null
n=$(dsecd_log | grep -c 'refused API client')
ok $([ "$n" -ge 2 ] && [ "$n" -lt 100 ]; echo $?) "a flood of refused clients is not logged line by line ($n lines)"
run helper-req "$DSEC_HOST" ping
like "$OUT" '"ok":true' "the ipc listener is served"
stop_dsecd

start_dsecd --set backends=fncall --listen "tcp://0.0.0.0:$PORT" --set listen_remote=true ||
	bail "dsecd did not start with listen_remote"
run remote
like "$OUT" '"ok":true' "with listen_remote = true the remote client is served"
is "$(dsecd_log | grep -c 'refused API client')" "0" "... and nothing is refused"
run helper-req "tcp://127.0.0.1:$PORT" ping
like "$OUT" '"ok":true' "... as is the loopback one"
