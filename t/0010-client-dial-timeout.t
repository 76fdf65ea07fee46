#!/bin/bash
# A TCP address whose host drops every packet (no refusal ever comes): a
# client's connect gives up after its dial timeout (10 s) with
# unavailable, instead of waiting the system's connect timeout (about 2
# minutes before).  The host is a network namespace of this test that
# drops the port with nftables.
. "$(dirname "$0")/lib.sh"

need_root
for c in ip nft dsec-run; do need_cmd "$c"; done

NS="dsecdial$$"
NET="10.$(( 200 + $$ % 50 )).$(( ($$ + 13) % 250 ))"
mk_netns "$NS" "dsd$(( $$ % 100000 ))" "$NET" ||
	{ _netns_cleanup; skip_all "cannot make a network namespace and a veth pair"; }
ip netns exec "$NS" nft -f - <<NFT || skip_all "cannot load an nftables rule in the namespace"
table inet dsecdial {
	chain in { type filter hook input priority 0; tcp dport 7411 drop; }
}
NFT

plan 2

t0=$(date +%s)
run dsec-run -H "tcp://$NET.2:7411" -- true
t1=$(date +%s)
like "$RC $OUT" "^125 .*cannot connect to 'tcp://$NET.2:7411': no answer within 10 s.*unavailable" \
	"a host that drops the packets: unavailable, saying why"
ok $([ $((t1 - t0)) -le 30 ]; echo $?) "... after the dial timeout, not the system's ($((t1 - t0)) s)"
