#!/bin/bash
# Error messages are valid UTF-8 whatever a request echoed into them (a
# strict decoder, Python's msgpack as in dsec-protocol(7), reads every
# one), and an error reply whose code is not an error is a protocol error
# for libdsec and dsec-run, never "all is well (ok)".
. "$(dirname "$0")/lib.sh"
# Debian's python3 has python3-msgpack (DEB_PACKAGES); another on PATH may not.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
need_cmd "$PY"
"$PY" -c 'import msgpack' 2>/dev/null || skip_all "needs python3-msgpack"
plan 16

start_dsecd --backend-dir "$TOP/t" --set backends=test --set default_backend=test
ok $? "dsecd starts"

# strict ARGS...: the request's error as Python's msgpack decodes it by
# default (str as UTF-8, strictly): "CODE MESSAGE", or "undecodable".
strict() {
	helper-req --dump "$T/reply" "$DSEC_HOST" "$@" > /dev/null
	"$PY" - "$T/reply" <<'EOF'
import msgpack, sys
try:
    r = msgpack.unpackb(open(sys.argv[1], "rb").read())
except UnicodeDecodeError as e:
    print("undecodable:", e)
    sys.exit(0)
e = r.get("error") or {}
print(e.get("code"), e.get("message"))
EOF
}

e2=$(printf '\xc3\xa9')			# é: two bytes
cut=a$(for i in $(seq 80); do printf '%s' "$e2"; done)	# odd: every cap cuts a character
bad=$(printf 'x\xff\xfey\xe2\x82')	# not UTF-8: two bad bytes, then a cut character

run helper-req "$DSEC_HOST" create
id=$(get id)

out=$(strict "$cut")
like "$out" '^unknown_op ' "an op cut at 64 bytes mid-character: the message decodes ($out)"
like "$out" "'a$e2" "... and keeps the op's text"
out=$(strict "$bad")
like "$out" '^unknown_op ' "an op of bytes that are not UTF-8: the message decodes"
like "$out" "x$(printf '\xef\xbf\xbd\xef\xbf\xbd')y" "... bad bytes become U+FFFD"
out=$(strict exec id="$cut" argv[]=true)
like "$out" '^(not_found|invalid) ' "an id cut mid-character: the message decodes"
out=$(strict exec id="n$bad" argv[]=true)
like "$out" '^(not_found|invalid) ' "an id that is not UTF-8: the message decodes"
out=$(strict file_download id="$id" path=/ format="$cut")
like "$out" '^(invalid|unsupported) ' "a format cut mid-character: the message decodes ($out)"
long=$(for i in $(seq 2000); do printf '%s' "$e2"; done)
out=$(strict exec id="$long" argv[]=true)
like "$out" '^(not_found|invalid|too_large) ' "a 4000-byte id: the message decodes"
# A message at the 511-byte cap: the cap cuts at a character.
out=$(strict exec id="$id" argv[]=true env."$cut$cut$cut$cut"#=1)
like "$out" '^bad_request ' "a message naming a long field: decodes"

# An error reply with code "ok", one with a code nobody knows.
"$PY" -c 'import msgpack, sys; sys.stdout.buffer.write(msgpack.packb({"ok": False, "error": {"code": "ok", "message": "all is well"}}))' > "$T/ok.reply"
"$PY" -c 'import msgpack, sys; sys.stdout.buffer.write(msgpack.packb({"ok": False, "error": {"code": "brand_new", "message": "who knows"}}))' > "$T/new.reply"
fake() {	# fake NAME FILE: a daemon answering FILE's bytes at ipc://$T/NAME.sock
	helper-fakedsecd "ipc://$T/$1.sock" "$2" > "$T/$1.out" 2>&1 &
	fakes="${fakes:-} $!"
	local i
	for i in $(seq 100); do grep -q ready "$T/$1.out" && return 0; sleep 0.05; done
	return 1
}
fake ok "$T/ok.reply"
ok $? "a fake daemon answering code 'ok' listens"
run env DSEC_HOST="ipc://$T/ok.sock" dsec-run -- true
is "$RC" 125 "dsec-run fails (125)"
like "$OUT" "bad reply.*code is 'ok'.*all is well" "... saying the daemon's reply was bad: $OUT"
ok $(printf '%s' "$OUT" | grep -q 'all is well (ok)'; [ $? != 0 ]; echo $?) "... not 'all is well (ok)'"
fake new "$T/new.reply"
run env DSEC_HOST="ipc://$T/new.sock" dsec-run -- true
like "$RC:$OUT" "^125:.*unknown error code 'brand_new'.*who knows" "an unknown code is named: $OUT"
kill $fakes 2>/dev/null
wait $fakes 2>/dev/null
like "$(helper-req "$DSEC_HOST" ping)" '"pong":true' "dsecd still serves"
