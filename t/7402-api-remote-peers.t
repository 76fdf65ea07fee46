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
HV="dsa$(( $$ % 100000 ))h"
NV="dsa$(( $$ % 100000 ))n"
NET="10.$(( 200 + $$ % 50 )).$(( $$ % 250 ))"
PORT=$(( 30000 + $$ % 20000 ))
cleanup_ns() { ip link del "$HV" 2>/dev/null; ip netns del "$NS" 2>/dev/null; }
trap 'cleanup_ns; _tap_cleanup' EXIT
ip netns add "$NS" 2>/dev/null || skip_all "cannot make a network namespace"
ip link add "$HV" type veth peer name "$NV" netns "$NS" || skip_all "cannot make a veth pair"
ip addr add "$NET.1/30" dev "$HV" && ip link set "$HV" up &&
	ip -n "$NS" addr add "$NET.2/30" dev "$NV" && ip -n "$NS" link set "$NV" up &&
	ip -n "$NS" link set lo up || bail "cannot address the veth pair"

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
