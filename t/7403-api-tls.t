#!/bin/bash
# The cluster credential: on a tls+tcp:// address the API speaks TLS with
# the node's certificate (tls_cert) and serves only clients whose
# certificate the cluster's CA (tls_ca) signed, from any address; a client
# without one, with one of another CA, or not trusting the node's, is
# refused before any request.  Clients name their files in DSEC_TLS_CA and
# DSEC_TLS_CERT.  The remote client lives in a network namespace of this
# test, joined to the host by a veth pair.
. "$(dirname "$0")/lib.sh"

need_root
for c in helper-req openssl ip dsecctl mkfs.erofs; do need_cmd "$c"; done

NS="dsectls$$"
NET="10.$(( 200 + $$ % 50 )).$(( ($$ + 7) % 250 ))"
PORT=$(( 30000 + ($$ + 11) % 20000 ))
mk_netns "$NS" "dst$(( $$ % 100000 ))" "$NET" ||
	{ _netns_cleanup; skip_all "cannot make a network namespace and a veth pair"; }

plan 14

# A CA, this node's certificate (for 127.0.0.1 and the veth address), a
# client's, and another CA with a client of its own.
cd "$T" || bail "no $T"
ca() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj "/CN=$1" -keyout "$1.key" -out "$1.pem" 2>/dev/null
}
cert() { # NAME CA SAN
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
		-keyout "$1.key" -out "$1.csr" 2>/dev/null &&
	openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -days 2 \
		-extfile <(printf 'subjectAltName=%s\n' "$3") -out "$1.crt" 2>/dev/null &&
	cat "$1.crt" "$1.key" > "$1.pem"
}
ca cluster && ca rogue && cert node cluster "IP:127.0.0.1,IP:$NET.1" &&
	cert client cluster "DNS:client" && cert intruder rogue "DNS:intruder" ||
	bail "openssl cannot make the test certificates"

start_dsecd --set backends=fncall --listen "tls+tcp://0.0.0.0:$PORT" --set image_origin="$T/origin" \
	--set tls_cert="$T/node.pem" --set tls_ca="$T/cluster.pem" || bail "dsecd did not start"
like "$(dsecd_log)" "listening on tls\+tcp://0.0.0.0:$PORT \(TLS, client certificates required\)" \
	"dsecd listens with TLS, client certificates required"

export HELPER_REQ_TIMEOUT=3
URL="tls+tcp://127.0.0.1:$PORT"
tls() { # CA CERT CMD...: with those files
	local ca=$1 cert=$2
	shift 2
	DSEC_TLS_CA=${ca:+$T/$ca.pem} DSEC_TLS_CERT=${cert:+$T/$cert.pem} "$@"
}
run tls cluster client helper-req "$URL" ping
like "$OUT" '"ok":true' "a client with a certificate of the cluster's CA is served"
run tls cluster client dsec-run -H "$URL" -- echo over tls
is "$OUT" "over tls" "... and runs commands (dsec-run, DSEC_TLS_CA and DSEC_TLS_CERT)"
run tls cluster client ip netns exec "$NS" "$TOP/t/helper-req" "tls+tcp://$NET.1:$PORT" ping
like "$OUT" '"ok":true' "... also from another address (verified, so not only loopback)"
run tls cluster "" dsec-run -H "$URL" -- true
diag "without a certificate: $OUT"
like "$RC $OUT" '^[1-9].*cannot connect' "a client without a certificate is refused"
run tls cluster intruder dsec-run -H "$URL" -- true
diag "another CA's: $OUT"
like "$RC $OUT" '^[1-9].*cannot connect' "a client with a certificate of another CA is refused"
run tls rogue client dsec-run -H "$URL" -- true
like "$OUT" 'permission|not the cluster' "a client that does not trust the node's certificate stops, saying why"
run tls "" client dsec-run -H "$URL" -- true
like "$OUT" 'needs the cluster.s CA \(DSEC_TLS_CA\)' "a TLS address without a CA is a clear error"
run helper-req "tcp://127.0.0.1:$PORT" ping
ok $([ "$RC" != 0 ]; echo $?) "plain TCP to the TLS port gets no reply"
ip netns exec "$NS" /usr/bin/python3 -c "
import socket
for i in range(20):
    s = socket.create_connection(('$NET.1', $PORT), timeout=5)
    s.sendall(b'\x16\x03\x01\x00\x05hello' * 3 + b'\0' * 100)
    s.close()" 2>/dev/null
run tls cluster client helper-req "$URL" ping
like "$OUT" '"ok":true' "junk on the TLS port from another address leaves the node serving"

# fs3's peer tier over TLS: another store fetches the node's chunks from it.
mk_small_root "$T/root" sh
run dsecctl --store "$T/state/fs3" --origin "$T/origin" image import --tag tlspeer:1 "$T/root"
mv "$T/origin/chunks" "$T/origin-chunks" && mkdir "$T/origin/chunks"
run tls cluster client dsecctl --store "$T/b" --origin "$T/origin" --peer "$URL" image pull tlspeer:1
like "$RC $(echo $OUT)" "^0 .*from peer ${URL//+/\\+} chunks [1-9][0-9]* .*from origin chunks 0" \
	"a store fetches the chunks its origin lacks from a peer over TLS"
run tls cluster intruder dsecctl --store "$T/c" --origin "$T/origin" --peer "$URL" image pull tlspeer:1
ok $([ "$RC" != 0 ]; echo $?) "... which refuses a store without the cluster's certificate"
stop_dsecd

# A TLS address without the node's credential does not start.
run "$TOP/dsecd/dsecd" --foreground --state-dir "$T/s2" --listen "tls+tcp://127.0.0.1:$PORT" \
	--backend-dir "$TOP/backends" --helper-dir "$TOP/build/libexec" --set backends=fncall
like "$RC $(echo $OUT)" '^1 .*without tls_cert and tls_ca' "tls+tcp:// without tls_cert and tls_ca stops the daemon, saying why"
run "$TOP/dsecd/dsecd" --foreground --state-dir "$T/s2" --listen "tls+tcp://127.0.0.1:$PORT" \
	--backend-dir "$TOP/backends" --helper-dir "$TOP/build/libexec" --set backends=fncall \
	--set tls_cert="$T/nothing.pem" --set tls_ca="$T/cluster.pem"
like "$RC $(echo $OUT)" "^1 .*cannot use '$T/nothing.pem' for TLS" "... as does a certificate file it cannot read"
