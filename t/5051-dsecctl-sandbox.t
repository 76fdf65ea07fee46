#!/bin/bash
# dsecctl sandbox ls [--label] | inspect | destroy | pause | resume | exec | cp:
# a node's sandboxes from the shell (those of dsec-run --keep included);
# cp of trees and of files larger than a frame (fncall, as root).
. "$(dirname "$0")/lib.sh"

need_cmd dsecctl
need_cmd helper-req
[ -e "$TOP/t/test.so" ] || skip_all "needs t/test.so (make tests)"

plan 20

start_dsecd --backend-dir "$TOP/t" --set backends=test --set default_backend=test ||
	bail "dsecd did not start"
mk() { helper-req "$DSEC_HOST" create "$@" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p'; }
a=$(mk labels.job=a labels.step=1)
b=$(mk labels.job=b)
run dsecctl sandbox ls
like "$(echo $OUT)" "^ID BACKEND STATE AGE IDLE LABELS .*$a test running .*job=a,step=1" "sandbox ls lists them with their labels"
run dsecctl sandbox ls --label job=a
is "$(printf '%s\n' "$OUT" | tail -n +2 | cut -d' ' -f1)" "$a" "--label job=a: only that one"
run dsecctl sandbox inspect "$a"
like "$OUT" $'\nstate: running\n' "sandbox inspect: every field, one a line"
run dsecctl sandbox exec "$a" -- echo hi there
is "$RC $OUT" "0 hi there" "sandbox exec runs a command, its output here"
run dsecctl sandbox exec "$a" exit 7
is "$RC" 7 "... and its exit status is ours"
printf 'bin\0ary\n' > "$T/in"
run dsecctl sandbox cp "$T/in" "$a:/data/f"
run dsecctl sandbox cp "$a:/data/f" "$T/out"
ok $(cmp -s "$T/in" "$T/out"; echo $?) "sandbox cp in and out, byte for byte"
run dsecctl sandbox cp "$T/in" "$T/out2"
like "$RC $OUT" "^1 .*one side of each" "cp between two local files is refused"
run dsecctl sandbox pause "$a"
like "$(dsecctl sandbox ls --label job=a)" "$a +test +paused" "sandbox pause"
run dsecctl sandbox resume "$a"
like "$(dsecctl sandbox ls --label job=a)" "$a +test +running" "sandbox resume"
run dsecctl sandbox ttl "$a" 120
is "$RC $OUT" "0 $a: 120 s left" "sandbox ttl: more time"
run dsecctl sandbox ttl "$a" soon
like "$RC $OUT" "^2 .*seconds more than 0" "... seconds that are not: usage"
run dsecctl sandbox destroy "$a" "$b" "${a%%:*}:00000000deadbeef"
like "$RC $(echo $OUT)" "^1 .*00000000deadbeef: no sandbox" "sandbox destroy: each, the unknown one named"
is "$(dsecctl sandbox ls | wc -l)" 1 "... and the others are gone"
run dsecctl sandbox frob
like "$RC $OUT" "^2 .*expected 'sandbox ls'" "an unknown sandbox command is a usage error"

# Trees and large files, through a fncall node of the smallest max_frame.
if [ "$(id -u)" != 0 ] || [ ! -e "$TOP/backends/fncall.so" ]; then
	for i in $(seq 6); do skip "cp of trees and large files needs root and fncall"; done
	exit 0
fi
start_node f --set backends=fncall --set max_frame=256K --set output_cap=64K \
	--set fncall.scratch=128M
F="ipc://$T/f.sock"
id=$(helper-req "$F" create backend=fncall | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
mkdir -p "$T/tree/sub/deep"
head -c $((3 << 20)) /dev/urandom > "$T/tree/sub/deep/three"
printf 'small\n' > "$T/tree/small"
chmod 750 "$T/tree/sub"
ln -s sub/deep/three "$T/tree/link"
run dsecctl --host "$F" sandbox cp "$T/tree" "$id:/work/tree"
run dsecctl --host "$F" sandbox cp "$id:/work/tree" "$T/back"
run diff -r --no-dereference "$T/tree" "$T/back"
is "$RC:$OUT:$(readlink "$T/back/link"):$(stat -c %a "$T/back/sub")" "0::sub/deep/three:750" \
	"sandbox cp of a tree in and out: the same files, link and modes"
head -c $((20 << 20)) /dev/urandom > "$T/big"
run dsecctl --host "$F" sandbox cp "$T/big" "$id:/work/big"
run dsecctl --host "$F" sandbox cp "$id:/work/big" "$T/big.back"
ok $(cmp -s "$T/big" "$T/big.back"; echo $?) "sandbox cp of 20 MiB in and out, in parts"
mkdir "$T/into"
run dsecctl --host "$F" sandbox cp "$id:/work/tree/small" "$T/into"
is "$(cat "$T/into/small" 2>&1)" "small" "sandbox cp of a file into a local directory puts it there by its name"
mkdir -p "$T/trap" "$T/elsewhere"
ln -s "$T/elsewhere" "$T/trap/sub"
run dsecctl --host "$F" sandbox cp "$id:/work/tree" "$T/trap"
is "$RC:$(ls -A "$T/elsewhere" | wc -l):$(! [ -L "$T/trap/sub" ] && cmp -s "$T/trap/sub/deep/three" \
	"$T/tree/sub/deep/three"; echo $?)" "0:0:0" \
	"sandbox cp out never writes through a symlink already here (libarchive replaces it)"
run helper-req "$F" file_list id="$id" path=/work
ok $(printf '%s' "$OUT" | grep -q '"name":".dsec-'; [ $? = 1 ]; echo $?) \
	"no archive staged in the sandbox is left"
run dsecctl --host "$F" sandbox cp "$id:/work/nope" "$T/nope"
like "$RC:$OUT:$(ls "$T/nope" 2>&1)" "^1:dsecctl: cannot read '/work/nope': .*No such file" \
	"sandbox cp of what is not there fails and makes nothing here"
