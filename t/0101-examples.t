#!/bin/bash
# The examples (examples/*.py, over the Python SDK) run against a private
# dsecd and check what they show: an SWE-style rollout's reward, a GRPO
# group forked from a snapshot in one batch and graded, an online judge's
# verdicts on FnCall.
. "$(dirname "$0")/lib.sh"

need_container
need_cmd dsecctl
PY=/usr/bin/python3
"$PY" -c 'import msgpack' 2>/dev/null || skip_all "needs python3-msgpack"

plan 3

mk_small_root "$T/root" sh cat
export DSEC_FS3_STORE="$T/state/fs3"
mkdir -p "$T/state"
dsecctl image import --tag grpo-base:1 "$T/root" >/dev/null || bail "cannot import the image"
start_dsecd --set backends=fncall,container || bail "dsecd did not start"
ex() { timeout 300 helper-py "$TOP/examples/$1" -H "$DSEC_HOST" "${@:2}"; }

run ex swe_rollout.py
is "$RC" 0 "swe_rollout.py: the tests fail, the edit makes them pass, reward 1"
[ "$RC" = 0 ] || printf '%s\n' "$OUT" | sed 's/^/# /' >&2
run ex grpo_group.py --image grpo-base:1 -n 8
is "$RC" 0 "grpo_group.py: 8 forks of a snapshot in one batch, each graded"
[ "$RC" = 0 ] || printf '%s\n' "$OUT" | sed 's/^/# /' >&2
run ex judge.py
is "$RC" 0 "judge.py: AC, WA, TLE and RE where they are due"
[ "$RC" = 0 ] || printf '%s\n' "$OUT" | sed 's/^/# /' >&2
