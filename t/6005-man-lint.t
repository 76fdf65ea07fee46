#!/bin/bash
# The manual pages are mandoc -Tlint clean at warning level (what `make
# lint-man` runs), one test per page.
. "$(dirname "$0")/lib.sh"

need_cmd mandoc

pages=("$TOP"/man/*.[1-9])
[ -e "${pages[0]}" ] || skip_all "no man pages in man/"
plan ${#pages[@]}

for p in "${pages[@]}"; do
	run mandoc -Tlint -Wwarning "$p"
	is "$RC:$OUT" "0:" "mandoc -Tlint -Wwarning man/${p##*/}"
done
