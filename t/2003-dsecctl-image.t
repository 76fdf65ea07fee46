#!/bin/bash
# dsecctl image: import (dir, tar.gz, tar.zst), ls, inspect, tag, rm, gc,
# usage errors, separate store and origin, concurrent writers.
. "$(dirname "$0")/lib.sh"

need_cmd dsecctl
need_cmd mkfs.erofs
need_cmd zstd

plan 26

export DSEC_FS3_STORE="$T/store"
export DSEC_FS3_ORIGIN="$T/origin"
mkdir -p "$T/src/etc" "$T/src2"
echo "hello" > "$T/src/etc/motd"
python3 -c 'import random, sys; random.seed(7); sys.stdout.buffer.write(random.randbytes(6000000))' > "$T/src/blob"
cp -a "$T/src/." "$T/src2/"
echo "more" > "$T/src2/more"

run dsecctl
is "$RC" 2 "no command: usage, exit 2"
run dsecctl image frob
like "$RC:$OUT" "^2:.*unknown command 'image frob'" "unknown command: exit 2"
run dsecctl image import --config color=red "$T/src"
like "$RC:$OUT" "^2:.*unknown key" "unknown --config key: exit 2"

run dsecctl image import --tag demo:1 --config env=A=1 --config env=B=2 --config cwd=/etc \
	--config user=1000 --config entrypoint=/bin/sh --config entrypoint=-l "$T/src"
like "$RC:$OUT" "^0:sha256:[0-9a-f]{64}"$'\n'"layers 1  logical [0-9]+  chunks [0-9]+  new [0-9]+  stored [0-9]+  dedup [0-9.]+  seconds" \
	"import a directory: digest, then the figures"
D1=$(printf '%s\n' "$OUT" | head -1)
ok $([ -e "$T/origin/tags/demo:1" ] && [ -d "$T/origin/manifests" ] && [ -d "$T/store/cache/chunks" ]; echo $?) \
	"tags and objects in the origin, chunks in the store's cache"

run dsecctl image inspect demo:1
like "$OUT" "digest +$D1" "inspect by tag: the digest"
like "$OUT" $'env +A=1\nenv +B=2\ncwd +/etc\nuser +1000\nentrypoint +/bin/sh -l' "... and the config"
run dsecctl image inspect "${D1:0:19}"
like "$RC:$OUT" "^0:digest +$D1" "inspect by digest prefix"
run dsecctl image inspect nope:1
is "$RC:$OUT" "1:dsecctl: cannot resolve 'nope:1': no such image" "inspect of an unknown image: exit 1, a message"

tar -C "$T/src2" -czf "$T/a.tgz" .
tar -C "$T/src2" --zstd -cf "$T/a.tar.zst" .
run dsecctl image import --tag demo:gz "$T/a.tgz"
is "$RC" 0 "import a gzip tar"
NEW=$(printf '%s\n' "$OUT" | sed -n 's/.* new \([0-9]*\) .*/\1/p')
ALL=$(printf '%s\n' "$OUT" | sed -n 's/.* chunks \([0-9]*\) .*/\1/p')
ok $([ "$NEW" -lt "$ALL" ]; echo $?) "... sharing chunks with the directory ($NEW of $ALL new)"
D2=$(printf '%s\n' "$OUT" | head -1)
run dsecctl image import --tag demo:zst "$T/a.tar.zst"
like "$RC:$OUT" "^0:$D2"$'\n'"layers 1 .* new 0  stored 0 " "a zstd tar of the same tree is the same image, nothing new stored"
echo "only here" > "$T/src2/only"
tar -C "$T/src2" -cf "$T/b.tar" .
run dsecctl image import --tag demo:plain "$T/b.tar"
is "$RC" 0 "import a plain tar of another tree"
printf 'not a tar' > "$T/bad.tar"
run dsecctl image import "$T/bad.tar"
like "$RC:$OUT" "^1:dsecctl: cannot read tar '$T/bad.tar'" "a file that is no tar: exit 1"

run dsecctl image tag demo:1 other/name:x
is "$RC" 0 "tag an image again"
run dsecctl image ls
like "$OUT" "demo:1 +${D1:0:19} .*"$'\n'".*"$'\n'".*"$'\n'".*"$'\n'"other/name:x +${D1:0:19}" "ls lists every tag, sorted"
run dsecctl image tag nope:1 x:y
is "$RC" 1 "tagging an unknown image fails"

run dsecctl image rm demo:plain
is "$RC" 0 "rm a tag"
run dsecctl image rm demo:plain
like "$RC:$OUT" "^1:.*no such image" "rm it again: no such image"
run dsecctl image gc
like "$RC:$OUT" "^0:kept [0-9]+  removed [1-9][0-9]*  freed [0-9]+" "gc removes what only the removed tag held"
run dsecctl image inspect demo:gz
is "$RC" 0 "the other images stay"

run dsecctl image squash --max-size 1M demo:gz
like "$RC:$OUT" "^0:$D2"$'\n'"layers 1 -> 1  runs merged 0 " "squash of one layer: nothing to merge, the same image"
run dsecctl image squash --max-size 0 demo:gz
like "$RC:$OUT" "^2:.*--max-size '0': not a size" "squash --max-size wants a size"
run dsecctl image gc --max-size 1M
like "$RC:$OUT" "^2:.*--max-size goes with 'image squash' only" "--max-size goes with squash only"

# Two writers at once: the flock lets both through.
dsecctl image import --tag par:1 "$T/src" > "$T/p1" 2>&1 &
P1=$!
dsecctl image import --tag par:2 "$T/a.tgz" > "$T/p2" 2>&1 &
P2=$!
wait $P1; R1=$?
wait $P2; R2=$?
is "$R1:$R2" "0:0" "two concurrent imports both succeed"
run dsecctl image inspect par:2
is "$RC" 0 "... and both are there"
