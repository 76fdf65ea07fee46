#!/bin/bash
# An allowlist that covers the node cannot reach it: whatever a sandbox
# allows (here everything, 0.0.0.0/0), it reaches no address of the node --
# the bridge's gateway, an address on another interface, one added after
# the sandbox started, broadcast, multicast, IPv6 -- no other sandbox, and
# no link-local address (where clouds serve the node's credentials).
# dsecd's own TCP API on the gateway included (open to remote peers here,
# so only the network stands in the way).  The node-side filter holds even
# with the sandbox's own filter removed (from outside, as root).  The one
# opt-in, container.host_port, opens that port of the gateway and nothing
# else, to sandboxes that allow it.  The outside world is a network
# namespace of this test, routed from the host.
. "$(dirname "$0")/lib.sh"

need_container_net
need_cmd nsenter

BR="dsi$(( $$ % 100000 ))"
NET="10.$(( 100 + $$ % 100 ))"
GW="$NET.0.1"
XNET="172.$(( 16 + $$ % 16 )).$(( $$ % 250 ))"
XHOST="dsy$(( $$ % 100000 ))"
EXT="$XNET.2"
HOSTIP="$XNET.1"
NEWIP="$XNET.7"
XNS="dsecy$$"
P=$(( 20000 + $$ % 10000 ))
PU=$(( P + 1 ))
PAPI=$(( P + 2 ))
PO=$(( P + 3 ))
PB=$(( P + 5 ))
mk_netns "$XNS" "$XHOST" "$XNET" ||
	{ _netns_cleanup; skip_all "cannot make a network namespace and a veth pair"; }
# A link-local server outside (as a cloud's metadata service is).
LLNET="169.254.$(( $$ % 250 ))"
LL="$LLNET.2"
ip -n "$XNS" addr add "$LL/24" dev eth0 && ip route add "$LLNET.0/24" via "$EXT" dev "$XHOST" ||
	bail "cannot route to $LL"

plan 29

bg=
# tcp_listen [NETNS] PORT: on every address, answer "hello-PORT" (120 s).
tcp_listen() { hello_server "${@:1:$#-1}" :: "${@: -1}"; bg="$bg $!"; }
# udp_listen [NETNS] PORT FILE: every datagram (IPv4 or IPv6) as a line of FILE.
udp_listen() {
	local ns=
	[ $# = 3 ] && { ns="ip netns exec $1"; shift; }
	: > "$2"
	$ns /usr/bin/python3 - "$1" "$2" <<'EOF' &
import socket, sys, time
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.bind(("::", int(sys.argv[1]))); s.settimeout(1)
end = time.time() + 120
while time.time() < end:
    try:
        d, _ = s.recvfrom(100)
    except OSError:
        continue
    with open(sys.argv[2], "a") as f:
        f.write(d.decode() + "\n")
EOF
	bg="$bg $!"
}

cat > "$T/probe.py" <<'EOF'
import socket, sys
out = []
for a in sys.argv[1:]:
    kind, host, port = a.split(",")
    if kind == "tcp":
        try:
            s = socket.create_connection((host, int(port)), timeout=4)
            out.append(s.recv(20).decode() or "empty")
        except OSError:
            out.append("denied")
        continue
    # udp: fire and forget (the listeners tell what arrived)
    try:
        if ":" in host:
            s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
            s.sendto(kind.encode(), (host, int(port), 0, socket.if_nametoindex("eth0")))
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
            s.sendto(kind.encode(), (host, int(port)))
    except OSError:
        pass
print(" ".join(out))
EOF
probe() { local id=$1; shift; dsec-run --id "$id" --stdin "$T/probe.py" -- python3 - "$@" 2>&1; }
# start_net [dsecd flags...]: a daemon with the container backend on this
# test's bridge and subnet.
start_net() {
	start_dsecd --set backends=container --set "container.bridge=$BR" \
		--set "container.subnet=$NET.0.0/16" "$@"
}
inits() { for d in $(container_cgroups); do cat "$d"/sb.*/cgroup.procs; done 2>/dev/null | sort -u; }
# newinit BEFORE: the init pid that is not in BEFORE.
newinit() { inits | grep -vxF -f <(echo "$1") | head -1; }
# unfilter PID: remove that sandbox's own filter, as root from outside.
unfilter() { nsenter -t "$1" -n nft delete table inet dsec; }
# udp_wait FILE LINE: wait (10 s at most) until LINE arrived in FILE.
udp_wait() { local i; for i in $(seq 100); do grep -qx "$2" "$1" && return 0; sleep 0.1; done; return 1; }

start_net --listen "tcp://0.0.0.0:$PAPI" --set listen_remote=true || bail "dsecd did not start"
tcp_listen "$P"
tcp_listen "$XNS" "$P"
udp_listen "$PU" "$T/udp-node"
udp_listen "$XNS" "$PU" "$T/udp-ext"

i0=$(inits)
a=$(new_container --allow 0.0.0.0/0)
apid=$(newinit "$i0")
i1=$(inits)
b=$(new_container --allow 0.0.0.0/0)
bpid=$(newinit "$i1")
bip=$(dsec-run --id "$b" -c "ip -4 -o addr show eth0 | awk '{print \$4}' | cut -d/ -f1")
dsec-run --id "$b" --timeout 120 --stdin "$(hello_py)" -- python3 - 0.0.0.0 "$PB" >/dev/null 2>&1 &
bsrv=$!
sleep 1
ok $([ -n "$apid" ] && [ -n "$bpid" ] && [ -n "$bip" ] && [ "$apid" != "$bpid" ]; echo $?) \
	"two sandboxes that allow 0.0.0.0/0 (inits $apid and $bpid)"
ok $(helper-req -q "tcp://127.0.0.1:$PAPI" ping >/dev/null; echo $?) "dsecd's TCP API serves on every address"

run probe "$a" "tcp,$EXT,$P"
is "$OUT" "hello-$P" "the sandbox reaches a server outside the node"
run probe "$a" "tcp,$GW,$P" "tcp,$HOSTIP,$P" "tcp,$bip,$PB"
is "$OUT" "denied denied denied" "... not the node's gateway, its address on another interface, nor the other sandbox"
run probe "$a" "tcp,$GW,$PAPI" "tcp,$HOSTIP,$PAPI"
is "$OUT" "denied denied" "... nor dsecd's TCP API on either address"
run timeout 5 bash -c "exec 3<>/dev/tcp/$LL/$P && head -c 20 <&3"
is "$OUT" "hello-$P" "the node reaches the link-local server outside"
run probe "$a" "tcp,$LL,$P"
is "$OUT" "denied" "... the sandbox does not"

probe "$a" "ext,$EXT,$PU" "gw,$GW,$PU" "host,$HOSTIP,$PU" "bcast,$NET.255.255,$PU" \
	"lbcast,255.255.255.255,$PU" "mcast,224.0.0.1,$PU" "mcast6,ff02::1,$PU" >/dev/null
udp_wait "$T/udp-ext" ext
ok $? "a datagram to the outside server arrives"
is "$(cat "$T/udp-node")" "" "none to the node arrives: gateway, other address, subnet and limited broadcast, multicast, IPv6"
is "$(ip -6 -o addr show dev "$BR" 2>/dev/null)" "" "the bridge has no IPv6 address"

# The node's side alone: without the sandbox's own filter.
unfilter "$apid"
ok $? "the sandbox's own filter is removed from outside"
run probe "$a" "tcp,$EXT,$P"
is "$OUT" "hello-$P" "without it the sandbox still reaches the outside server"
run probe "$a" "tcp,$GW,$P" "tcp,$HOSTIP,$P" "tcp,$GW,$PAPI" "tcp,$LL,$P"
is "$OUT" "denied denied denied denied" "... and still not the node (nor link-local): the node's own filter drops it"
ip addr add "$NEWIP/24" dev "$XHOST"
run probe "$a" "tcp,$NEWIP,$P"
is "$OUT" "denied" "... nor an address the node got after the sandbox started"
: > "$T/udp-ext"
probe "$a" "gw,$GW,$PU" "bcast,$NET.255.255,$PU" "lbcast,255.255.255.255,$PU" "mcast,224.0.0.1,$PU" \
	"mcast6,ff02::1,$PU" "new,$NEWIP,$PU" "ext,$EXT,$PU" >/dev/null
udp_wait "$T/udp-ext" ext
ok $? "a datagram to the outside server arrives"
is "$(cat "$T/udp-node")" "" "... none to the node, by any address, broadcast, multicast or IPv6"
run probe "$a" "tcp,$bip,$PB"
is "$OUT" "denied" "the other sandbox stays out of reach"
# A firewall reload that flushes the ruleset takes the node's table (only
# ours is deleted here: other tests may run beside this one).
nft delete table inet "dsec_$BR"
for i in $(seq 100); do nft list table inet "dsec_$BR" >/dev/null 2>&1 && break; sleep 0.1; done
ok $(nft list table inet "dsec_$BR" >/dev/null 2>&1; echo $?) "a deleted node table is put back"
like "$(dsecd_log)" "table 'inet dsec_$BR' was removed .*put back" "... and the daemon says so"
run probe "$a" "tcp,$GW,$P" "tcp,$HOSTIP,$P" "tcp,$EXT,$P"
is "$OUT" "denied denied hello-$P" "... and holds again"
unfilter "$bpid"
run probe "$a" "tcp,$bip,$PB"
is "$OUT" "denied" "... with neither sandbox's own filter: the bridge forwards nothing between them"
kill "$bsrv" 2>/dev/null; wait "$bsrv" 2>/dev/null
stop_dsecd

# The opt-in: one port of the gateway.
tcp_listen "$PO"
tcp_listen "$(( PO + 1 ))"
start_net --set "container.host_port=$PO/tcp" || bail "dsecd did not start with container.host_port"
sleep 0.5
i0=$(inits)
c=$(new_container --allow "$NET.0.0/16" --allow "$HOSTIP")
cpid=$(newinit "$i0")
d=$(new_container --allow "$EXT")
run probe "$c" "tcp,$GW,$PO"
is "$OUT" "hello-$PO" "container.host_port opens that port of the gateway to a sandbox that allows it"
run probe "$c" "tcp,$GW,$(( PO + 1 ))" "tcp,$GW,$P" "tcp,$HOSTIP,$PO"
is "$OUT" "denied denied denied" "... and nothing else: not another port, nor that port on another address"
run probe "$d" "tcp,$GW,$PO"
is "$OUT" "denied" "... not to a sandbox whose allowlist leaves it out"
unfilter "$cpid"
run probe "$c" "tcp,$GW,$PO" "tcp,$GW,$(( PO + 1 ))" "tcp,$HOSTIP,$PO"
is "$OUT" "hello-$PO denied denied" "... the node's filter opens that port and no other"
run helper-req "$DSEC_HOST" create backend=container network=allowlist
like "$OUT" '"ok":true' "a sandbox is created with the port open"
stop_dsecd
run "$TOP/dsecd/dsecd" --foreground --state-dir "$T/state" --listen "ipc://$T/x.sock" \
	--backend-dir "$TOP/backends" --helper-dir "$TOP/build/libexec" --set backends=container \
	--set "container.host_port=80-90"
like "$OUT" "host port '80-90' is not PORT, PORT/tcp or PORT/udp" "a port range is refused at start"
run "$TOP/dsecd/dsecd" --foreground --state-dir "$T/state" --listen "ipc://$T/x.sock" \
	--backend-dir "$TOP/backends" --helper-dir "$TOP/build/libexec" --set backends=container \
	--set "container.host_port=53/icmp"
like "$OUT" "host port '53/icmp' is not" "... and so is a protocol other than tcp or udp"
ok $(! nft list tables | grep -q "dsec_$BR"; echo $?) "shutdown removes the node's table"
kill $bg 2>/dev/null; wait $bg 2>/dev/null
exit 0
