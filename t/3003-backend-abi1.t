#!/bin/bash
# A backend of another ABI version is refused with a message naming both
# versions (t/be-abi1.c declares ABI 1: its host callbacks would be called
# with the wrong arguments); the daemon serves with the backends it could
# load, and with none it does not start.
. "$(dirname "$0")/lib.sh"
plan 6

D="$TOP/dsecd/dsecd"
run timeout 60 "$D" --foreground --config /dev/null --state-dir "$T/s1" --listen "ipc://$T/s1.sock" \
	--backend-dir "$TOP/t" --set backends=abi1
like "$RC:$(echo "$OUT" | tr '\n' ' ')" \
	"^1:.*cannot load backend '$TOP/t/abi1.so': ABI version 1, this dsecd speaks 2.*no backend could be loaded" \
	"an ABI 1 backend is refused, naming both versions, and alone it is fatal"

start_dsecd --backend-dir "$TOP/t" --set backends=test,abi1 --set default_backend=test
like "$(dsecd_log)" "cannot load backend '$TOP/t/abi1.so': ABI version 1, this dsecd speaks 2" \
	"beside another backend it is refused the same way"
run helper-req "$DSEC_HOST" info
ok "$(printf '%s' "$OUT" | grep -c '"name":"abi1"')" "... does not show in info"
like "$(helper-req "$DSEC_HOST" create backend=abi1)" '"code":"no_backend"' \
	"... nor take creates"
run helper-req "$DSEC_HOST" create
like "$(helper-req "$DSEC_HOST" exec id="$(get id)" argv[]=echo argv[]=two)" '"stdout":"two\\n"' \
	"the ABI 2 test backend beside it serves"
stop_dsecd
is "$?" 0 "dsecd stops cleanly"
