#!/bin/bash
# Idempotent creates (rlcoord/token.c): a create sent again with its client
# token gets the sandbox the first made, also while the first is still
# making it; a failed create or the sandbox's destruction forgets the
# token; bad tokens are refused with stable codes.
. "$(dirname "$0")/lib.sh"

need_fncall
/usr/bin/python3 -c 'import msgpack' 2>/dev/null || skip_all "needs python3-msgpack"
plan 10

start_dsecd --set backends=fncall || bail "dsecd did not start"
run timeout 120 helper-py "$TOP/t/helper-rl.py" tokens "$DSEC_HOST"
is "$(get same)" true "two creates with one token at once, and a third after: one sandbox ($OUT)"
is "$(get existing)" true "... the third is told it exists"
is "$(get listed)" 1 "... list shows one sandbox"
is "$(get other)" true "another token makes another"
is "$(get renewed)" true "once the sandbox is destroyed its token makes a new one"
is "$(get empty) $(get long) $(get type)" "invalid too_large bad_request" "an empty, a too long and a non-string token are refused"
is "$(get failed)" no_backend "a create that fails ..."
is "$(get after_fail)" true "... forgets its token: sent again right, it makes the sandbox"
is "$(get held)" 3 "info counts the tokens held"
grep -q "token" "$TOP/man/dsec-protocol.7"
ok $? "dsec-protocol(7) documents the token"
