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

plan 7

export HELPER_REQ_TIMEOUT=2
remote() { ip netns exec "$NS" "$TOP/t/helper-req" "tcp://$NET.1:$PORT" ping; }

start_dsecd --set backends=fncall --listen "tcp://0.0.0.0:$PORT" || bail "dsecd did not start"
run remote
like "$OUT" "no reply" "a client from another address gets no reply"
like "$(dsecd_log)" "refused API client $NET.2:[0-9]+: not on loopback" "... and the refusal is logged with its address"
run helper-req "tcp://127.0.0.1:$PORT" ping
like "$OUT" '"ok":true' "a loopback client of the tcp listener is served"
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
