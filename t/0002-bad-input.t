#!/bin/bash
# Bad input never crashes or stalls dsecd: each frame gets a clear error
# reply with a stable code, and the daemon keeps serving.
. "$(dirname "$0")/lib.sh"
plan 25

start_dsecd --backend-dir "$TOP/t" --set backends=test --set default_backend=test --set max_frame=256K --set output_cap=64K
ok $? "dsecd starts"
req() { helper-req "$DSEC_HOST" "$@"; }
raw() { printf "$1" > "$T/frame"; helper-req --raw "$T/frame" "$DSEC_HOST"; }

like "$(raw 'garbage')" '"code":"bad_request".*trailing' "text is not msgpack: bad_request"
like "$(raw '\x93\x01\x02\x03')" '"code":"bad_request".*not a msgpack map' "an array frame: bad_request"
like "$(raw '\x82\xa1v\x01\xa2op')" '"code":"bad_request".*truncated' "a truncated frame: bad_request"
like "$(raw '\xc1')" '"code":"bad_request"' "the reserved byte 0xc1: bad_request"
like "$(raw '\xdf\xff\xff\xff\xff')" '"ok":false' "a map header claiming 4G entries: an error, no allocation"
like "$(raw '\x80')" '"code":"unsupported_version"' "an empty map has no version"
like "$(helper-req --no-v "$DSEC_HOST" ping)" '"code":"unsupported_version"' "missing v: unsupported_version"
like "$(helper-req --v 2 "$DSEC_HOST" ping)" '"code":"unsupported_version".*version 2' "v 2: unsupported_version naming it"
like "$(helper-req --v -1 "$DSEC_HOST" ping)" '"code":"unsupported_version"' "negative v: unsupported_version"
like "$(req frobnicate)" '"code":"unknown_op".*frobnicate' "unknown op named in the error"
like "$(raw '\x82\xa1v\x01\xa2op\x05')" '"code":"bad_request".*op' "op of the wrong type: bad_request"
like "$(req create ttl=soon)" '"code":"bad_request".*ttl' "wrong type for ttl: bad_request naming the field"
like "$(req create ttl%=-5)" '"code":"invalid"' "negative ttl: invalid"
like "$(req create env.A#=1)" '"code":"bad_request".*env' "env value not a string: bad_request"
like "$(req create limits=big)" '"code":"bad_request".*limits' "limits not a map: bad_request"
like "$(req exec id="$(printf 'x%.0s' $(seq 5000))" argv[]=echo)" '"code":"too_large"' "an overlong id: too_large"
like "$(req call argv[]=echo output_cap#=999999999)" '"code":"invalid".*output_cap' "output_cap over the frame: invalid"
like "$(req call argv[]=cat stdin~=300000)" '"code":"too_large"' "a frame over max_frame gets too_large"
run req call argv[]=cat stdin~=2000000
like "$RC:$OUT" '^(2:.*no reply|1:.*too_large)' "a frame far over max_frame is dropped by nng or refused"
like "$(req ping)" '"pong":true' "still serving after oversized frames"

# A bounded loop of random frames, each must get a reply (or at worst be
# dropped by nng for size), and the daemon must keep answering.
replies=0
for i in $(seq 200); do
	head -c $((RANDOM % 600 + 1)) /dev/urandom > "$T/frame"
	out=$(HELPER_REQ_TIMEOUT=5 helper-req --raw "$T/frame" "$DSEC_HOST" 2>&1)
	case "$out" in *'"ok":false'*|*'"ok":true'*) replies=$((replies + 1));; esac
done
is "$replies" 200 "200 random frames each got a reply"
like "$(req ping)" '"pong":true' "still serving after random frames"
like "$(req call argv[]=echo argv[]=after)" '"stdout":"after\\n"' "and still running commands"
ok "$(kill -0 "$DSECD_PID"; echo $?)" "the daemon process is alive"
