#!/bin/bash
# container networks: "none" is loopback only; "allowlist" reaches exactly
# the listed address:port/protocol through the node's bridge, can be changed
# while the sandbox runs, cannot be changed from inside, and leaves no link,
# address or nftables table behind.  The allowed servers run in a network
# namespace of this test routed from the host (the node's own addresses are
# out of every sandbox's reach: t/7401).
. "$(dirname "$0")/lib.sh"

need_container_net

plan 20

container_net s
P1=$(( 20000 + $$ % 10000 ))
P2=$(( P1 + 1 ))
# shellcheck disable=SC2086
start_dsecd --set backends=container $CONTAINER_NET || bail "dsecd did not start"

cat > "$T/probe.py" <<EOF
import socket, sys
for a in sys.argv[1:]:
    host, port = a.rsplit(":", 1) if ":" in a else ("$EXT", a)
    try:
        s = socket.create_connection((host, int(port)), timeout=3)
        print(port, s.recv(20).decode() or "empty")
    except OSError as e:
        print(port, "denied")
EOF
listeners=
listen() { hello_server "$XNS" "$1" "$2"; listeners="$listeners $!"; }
probe() { local id=$1; shift; dsec-run --id "$id" --stdin "$T/probe.py" -- python3 - "$@" 2>&1; }

run dsec-run --backend container -c 'grep -c : /proc/net/dev'
is "$OUT" "1" "network none (the default): loopback only"
ok $(! ip link show "$BR" >/dev/null 2>&1; echo $?) "no bridge until a sandbox needs one"

a=$(new_container --allow "$EXT:$P1/tcp")
ok $(ip link show "$BR" >/dev/null 2>&1; echo $?) "an allowlist sandbox brings the node's bridge up"
listen "$EXT" "$P1"; listen "$EXT" "$P2"; listen "$EXT" 53
sleep 0.5
run dsec-run --id "$a" -c 'grep -c : /proc/net/dev; cat /etc/resolv.conf | wc -c'
is "$(echo $OUT)" "2 0" "an allowlist sandbox has lo and eth0, and no resolver unless given"
run probe "$a" "$P1" "$P2"
is "$(echo $OUT)" "$P1 hello-$P1 $P2 denied" "it reaches the allowed port and nothing else"
run helper-req "$DSEC_HOST" net_allow id="$a" "allow[]=$EXT:$P2"
like "$OUT" '"ok":true' "net_allow replaces the allowlist while the sandbox runs"
run probe "$a" "$P1" "$P2"
is "$(echo $OUT)" "$P1 denied $P2 hello-$P2" "the new allowlist is in force at once"
run helper-req "$DSEC_HOST" net_allow id="$a" "allow[]=$EXT:0"
like "$OUT" '"code":"invalid".*allowlist entry' "a bad entry is refused with a clear error"
run probe "$a" "$P2"
is "$(echo $OUT)" "$P2 hello-$P2" "... and the old allowlist stays in force"
run dsec-run --id "$a" -c 'nft flush ruleset 2>/dev/null || echo refused; ip addr add 10.9.9.9/32 dev eth0 2>/dev/null || echo refused; ip route del default 2>/dev/null || echo refused'
is "$(echo $OUT)" "refused refused refused" "the sandbox cannot change its filter, addresses or routes"
run probe "$a" "$P1"
is "$(echo $OUT)" "$P1 denied" "... and the filter still holds"

# Another sandbox on the bridge is out of reach even when allowed: its own
# filter takes no new connection in.
b=$(new_container --allow "$EXT:$P1")
bip=$(dsec-run --id "$b" -c "ip -4 -o addr show eth0 | awk '{print \$4}' | cut -d/ -f1")
dsec-run --id "$b" --timeout 20 -- python3 -c "
import socket; s = socket.socket(); s.bind(('0.0.0.0', $P1)); s.listen(); s.settimeout(15)
c, _ = s.accept(); c.sendall(b'leak'); c.close()" >/dev/null 2>&1 &
srv=$!
sleep 1
helper-req -q "$DSEC_HOST" net_allow id="$a" "allow[]=$bip:$P1" >/dev/null
run probe "$a" "$bip:$P1"
is "$(echo $OUT)" "$P1 denied" "a sandbox cannot connect to another sandbox, even one it allows"
kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null

c=$(new_container)
run helper-req "$DSEC_HOST" net_allow id="$c" "allow[]=$EXT:$P1"
like "$OUT" '"code":"invalid".*network .none' "net_allow on a network-none sandbox says how to get one"

d=$(new_container --dns "$EXT")
run dsec-run --id "$d" -c 'cat /etc/resolv.conf'
is "$OUT" "nameserver $EXT" "--dns writes the one resolver into /etc/resolv.conf"
run probe "$d" 53 "$P1"
is "$(echo $OUT)" "53 hello-53 $P1 denied" "DNS goes to that resolver, nothing else is open"

run dsec-run --backend container --allow 'example.com:443' -c true
like "$OUT" "not an IPv4 address" "a name in the allowlist is refused (no resolution on the host)"
run dsec-run --backend container --network bogus -c true
like "$OUT" "network 'bogus' is not 'none' or 'allowlist'" "an unknown network mode is refused"
run dsec-run --backend container --network none --allow "$EXT:$P1" -c true
like "$OUT" "needs network 'allowlist'" "an allowlist with network none is refused"

n0=$(ip -o link show master "$BR" 2>/dev/null | wc -l)
for s in "$a" "$b" "$c" "$d"; do helper-req -q "$DSEC_HOST" destroy id="$s" >/dev/null; done
sleep 0.5
is "$n0:$(ip -o link show master "$BR" 2>/dev/null | wc -l)" "3:0" "destroy removes each sandbox's veth"
stop_dsecd
ok $(! ip link show "$BR" >/dev/null 2>&1 && ! nft list tables 2>/dev/null | grep -q "dsec_$BR"; echo $?) \
	"shutdown removes the bridge and the node's table"
kill $listeners 2>/dev/null; wait $listeners 2>/dev/null
exit 0
