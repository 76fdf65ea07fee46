#!/bin/bash
# The Python SDK (lib/python, package dsec) against a private dsecd of the
# tree: its pytest suite (lib/python/tests), one TAP line per test.
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3
[ -x "$PY" ] || skip_all "needs /usr/bin/python3"
"$PY" -c 'import pytest, msgpack' 2>/dev/null || skip_all "needs python3-pytest and python3-msgpack"
[ -e "$TOP/t/test.so" ] || skip_all "needs t/test.so (make tests)"

# helper-py: also right for a tree built with the sanitizers.
out=$(cd "$TOP/lib/python" && timeout 600 helper-py -m pytest -q -rA -p no:cacheprovider tests 2>&1)
rc=$?
lines=$(printf '%s\n' "$out" | grep -E '^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) ')
if [ -z "$lines" ]; then
	plan 1
	printf '%s\n' "$out" | sed 's/^/# /' >&2
	ok 1 "pytest ran the SDK's tests (it ran none: rc $rc)"
	exit 0
fi
plan "$(printf '%s\n' "$lines" | wc -l)"
while read -r status name rest; do
	case $status in
	PASSED) ok 0 "$name" ;;
	SKIPPED) skip "$name $rest" ;;
	*) ok 1 "$status $name $rest" ;;
	esac
done <<< "$lines"
[ "$rc" = 0 ] || printf '%s\n' "$out" | grep -v '^PASSED ' | sed 's/^/# /' >&2
