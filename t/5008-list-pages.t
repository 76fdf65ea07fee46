#!/bin/bash
# list in pages: the sandboxes in the order of their ids, `limit` of them
# after the id `after`, `total` the number that match and `next` the id to
# ask after while more remain; labels filter before the pages are cut, and
# a page never repeats or skips a sandbox, even when one before it goes.
. "$(dirname "$0")/lib.sh"

need_cmd helper-req
[ -e "$TOP/t/test.so" ] || skip_all "needs t/test.so (make tests)"

plan 10

start_dsecd --backend-dir "$TOP/t" --set backends=test --set default_backend=test
req() { helper-req "$DSEC_HOST" "$@"; }
ids() { printf '%s\n' "$OUT" | grep -o '"id":"[^"]*"' | cut -d'"' -f4; }
next() { printf '%s\n' "$OUT" | sed -n 's/.*"next":"\([^"]*\)".*/\1/p'; }
total() { printf '%s\n' "$OUT" | sed -n 's/.*"total":\([0-9]*\).*/\1/p'; }

for i in $(seq 25); do
	helper-req -q "$DSEC_HOST" create backend=test "labels.half=$((i % 2))" >/dev/null ||
		bail "create $i failed"
done
run req list
all=$(ids)
is "$(echo "$all" | wc -l):$(total):$(next)" "25:25:" \
	"list without limit: all 25, total 25, no next"
is "$all" "$(echo "$all" | sort)" "... in the order of their ids"

run req list 'limit#=10'
p1=$(ids) n1=$(next)
is "$(echo "$p1" | wc -l):$(total):$n1" "10:25:$(echo "$p1" | tail -1)" \
	"limit 10: the first 10, total 25, next the last of them"
run req list 'limit#=10' "after=$n1"
p2=$(ids) n2=$(next)
is "$(echo "$p2" | wc -l)" 10 "after next: the next 10"
# The first of page 2 is destroyed before page 3 is asked: nothing shifts.
helper-req -q "$DSEC_HOST" destroy id="$(echo "$p2" | head -1)" >/dev/null
run req list 'limit#=10' "after=$n2"
p3=$(ids)
is "$(echo "$p3" | wc -l):$(next)" "5:" "the last page: the 5 left, no next"
is "$(printf '%s\n' "$p1" "$p2" "$p3")" "$all" "the pages together are the whole list, each once"

run req list 'limit#=4' labels.half=1
# 13 were made with half=1 (the odd ones); the destroyed 11th was one.
is "$(echo "$(ids)" | wc -l):$(total)" "4:12" "labels filter before the page is cut (12 match)"
half=$(ids)
ok "$(for id in $half; do req info id="$id" | grep -q '"half":"1"' || echo bad; done | grep -c bad |
	grep -qx 0; echo $?)" "... and each of the page has the label"

run req list "after=~"
is "$(ids | wc -l):$(total):$(next)" "0:24:" "after the last id: an empty page"
run req list 'limit=ten'
like "$OUT" '"code":"bad_request"' "a limit that is not a number is refused"
