#!/bin/bash
# The backend ABI grows by appending: a backend built before fields were
# appended (t/be-oldabi.c: the first ops table, no spec_size) still loads
# and serves, and a create or call that sets a spec field it cannot know
# (seccomp_deny, cpu_weight, network...) is refused as "unsupported"
# instead of silently running less confined than asked.
. "$(dirname "$0")/lib.sh"
plan 11

start_dsecd --backend-dir "$TOP/t" --set backends=test,oldabi --set default_backend=test
req() { helper-req "$DSEC_HOST" "$@"; }
field() { sed -n "s/.*\"$1\":\"\\([^\"]*\\)\".*/\\1/p"; }

like "$(req info)" '"name":"oldabi"' "a backend with the first ABI 1 ops table loads"
like "$(dsecd_log)" 'loaded backend oldabi' "... and says so in the log"
ID=$(req create backend=oldabi | field id)
like "$(req exec id="$ID" argv[]=echo argv[]=old)" '"stdout":"old\\n"' "it creates and runs what it knows"
req destroy id="$ID" >/dev/null
like "$(req create backend=oldabi seccomp_deny[]=mkdir)" \
	'"code":"unsupported".*oldabi.*seccomp_deny' "seccomp_deny for it is refused, naming the field"
like "$(req create backend=oldabi 'limits.cpu_weight#=50')" \
	'"code":"unsupported".*limits.cpu_weight' "so is limits.cpu_weight"
like "$(req create backend=oldabi network=allowlist)" '"code":"unsupported".*network' \
	"so is network"
like "$(req call backend=oldabi seccomp_deny[]=mkdir argv[]=echo argv[]=x)" \
	'"code":"unsupported".*seccomp_deny' "and a one-shot call with seccomp_deny"
like "$(req list)" '"sandboxes":\[\]' "refused creates leave no sandbox behind"
ID=$(req create backend=test seccomp_deny[]=mkdir | field id)
like "$ID" ':' "the current test backend takes the same create"
req destroy id="$ID" >/dev/null
like "$(req ping)" '"pong":true' "dsecd keeps serving"
stop_dsecd
is "$?" 0 "dsecd stops cleanly"
