#!/bin/bash
# set_ttl: a live sandbox gets more time (its TTL from now, within
# max_ttl; a new idle TTL) and is not destroyed when its first TTL would
# have run out; a paused one keeps its TTL stopped with the new time left;
# what cannot be given is refused with stable codes.  Test backend.
. "$(dirname "$0")/lib.sh"

[ -e "$TOP/t/test.so" ] || skip_all "needs t/test.so (make tests)"
plan 9

start_dsecd --backend-dir "$TOP/t" --set backends=test --set default_backend=test \
	--set max_ttl=60 --set ttl=30 --set idle_ttl=30 || bail "dsecd did not start"
req() { helper-req "$DSEC_HOST" "$@"; }
id=$(req create backend=test ttl%=1.5 | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
run req set_ttl "id=$id" ttl%=20
like "$OUT" '"ok":true,"result":\{"id":"'"$id"'","ttl":2[01](\.[0-9]*)?,"left":(19|20)(\.[0-9]*)?,"idle_ttl"' \
	"set_ttl: 20 s from now (its lifetime from creation, the time left)"
sleep 2.5
like "$(req info id="$id")" '"state":"running"' "... it outlives the 1.5 s it was made with"
run req set_ttl "id=$id" ttl%=59
like "$OUT" '"code":"invalid".*over max_ttl of 60 s' "more than max_ttl allows in all: invalid"
like "$(req info id="$id")" '"state":"running"' "... and its TTL is as it was"
run req set_ttl "id=$id" idle_ttl%=0.5
like "$OUT" '"ok":true.*"idle_ttl":0\.5' "a new idle TTL"
sleep 1.5
like "$(req info id="$id")" '"code":"not_found"' "... which destroys it once it is idle that long"
p=$(req create backend=test ttl%=30 | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
req pause "id=$p" >/dev/null
run req set_ttl "id=$p" ttl%=10
like "$OUT" '"left":10[,}]' "a paused sandbox: its TTL stays stopped, with the new 10 s left"
run req set_ttl "id=$p"
like "$OUT" '"code":"bad_request"' "neither ttl nor idle_ttl: bad_request"
run req set_ttl "id=${p%%:*}:00000000000000ff" ttl%=5
like "$OUT" '"code":"not_found"' "no such sandbox: not_found"
