#!/bin/bash
# snapshots (pack_diff): a container sandbox's changes become a layer over
# its image, tagged, and new sandboxes start from it: files made, changed,
# deleted (whiteouts) and directories replaced (opaque), with the owners
# seen inside; a snapshot of a snapshot; the sandbox runs on; clear errors.
. "$(dirname "$0")/lib.sh"

need_container_images

plan 40

mk_small_root "$T/root" sh cat ls id env wc stat rm mkdir chown find sleep
mkdir -p "$T/root/data/old"
echo "original" > "$T/root/data/keep.txt"
echo "to change" > "$T/root/data/change.txt"
echo "to delete" > "$T/root/data/gone.txt"
echo "old dir content" > "$T/root/data/old/a.txt"
echo "old dir content" > "$T/root/data/old/b.txt"
export DSEC_FS3_STORE="$T/state/fs3"
mkdir -p "$T/state"
run dsecctl image import --tag snapbase:1 --config env=FROM=base "$T/root"
is "$RC" 0 "dsecctl imports the base image"

start_dsecd --set backends=container || bail "dsecd did not start"

id=$(dsec-run --backend container --image snapbase:1 --keep -c '
	echo new > /data/new.txt
	echo changed > /data/change.txt
	rm /data/gone.txt
	rm -rf /data/old && mkdir /data/old && echo fresh > /data/old/c.txt
	echo mine > /data/user.txt && chown 1000:1000 /data/user.txt
	sleep 1000 </dev/null >/dev/null 2>&1 &
	echo running > /tmp/state' 2>&1 >/dev/null | head -1)
id=${id##* }
like "$id" ':' "a sandbox of the image is modified (new, changed, deleted, replaced, chowned)"

run helper-req "$DSEC_HOST" snapshot id="$id" tag=snap:1
is "$RC" 0 "snapshot succeeds"
like "$OUT" '"image":"sha256:[0-9a-f]{64}"' "... and names the new image by digest"
like "$OUT" '"layers":2' "... of two layers (the base and the diff)"
if no_upper_xattr; then
	skip "a replaced directory, opaque: $NO_UPPER_XATTR"
else
	like "$OUT" '"whiteouts":1,' "... with one whiteout (the replaced dir is opaque instead)"
fi
diag "$(printf '%s' "$OUT" | grep -o '"frozen":[0-9.e-]*,"duration":[0-9.e-]*')"

run dsec-run --id "$id" -c 'cat /tmp/state /data/new.txt'
is "$(echo $OUT)" "running new" "the snapshotted sandbox keeps running with its files"

run dsec-run --backend container --image snap:1 -c '
	cat /data/new.txt /data/change.txt /data/keep.txt; echo $FROM'
is "$(echo $OUT)" "new changed original base" \
	"a new sandbox from the tag has the new and changed files and the image's config"
run dsec-run --backend container --image snap:1 -c 'ls /data; ls /data/old'
if no_upper_xattr; then
	skip "the replaced directory in the snapshot: $NO_UPPER_XATTR"
else
	is "$(echo $OUT)" "change.txt keep.txt new.txt old user.txt c.txt" \
		"... the deleted file is gone (whiteout) and the replaced dir has only its new content"
fi
run dsec-run --backend container --image snap:1 -c \
	'stat -c "%u:%g %n" /data /data/new.txt /data/user.txt /tmp/state'
is "$(echo $OUT)" "0:0 /data 0:0 /data/new.txt 1000:1000 /data/user.txt 0:0 /tmp/state" \
	"owners are the ones seen inside: root's files are root's, a chowned file 1000's"
run dsec-run --backend container --image snap:1 -c 'echo x > /data/keep.txt; cat /data/keep.txt'
is "$OUT" "x" "a sandbox of the snapshot writes over it"

# A snapshot of a snapshot: three layers.
id2=$(dsec-run --backend container --image snap:1 --keep -c \
	'echo third > /data/third.txt; rm /data/new.txt' 2>&1 >/dev/null | head -1)
id2=${id2##* }
run helper-req "$DSEC_HOST" snapshot id="$id2" tag=snap:2
like "$OUT" '"layers":3' "a snapshot of a sandbox of a snapshot has three layers"
run dsec-run --backend container --image snap:2 -c 'ls /data; cat /data/third.txt'
is "$(echo $OUT)" "change.txt keep.txt old third.txt user.txt third" \
	"... and a sandbox of it sees all three"
run dsecctl image inspect snap:2
like "$OUT" "snap:2" "dsecctl inspects the snapshot by its tag"

# The same sandbox again: what changed since is in the second snapshot.
helper-req -q "$DSEC_HOST" exec id="$id" 'argv[]=sh' 'argv[]=-c' \
	'argv[]=echo later > /data/later.txt' >/dev/null
run helper-req "$DSEC_HOST" snapshot id="$id" tag=snap:again
is "$RC" 0 "a sandbox can be snapshotted twice"
run dsec-run --backend container --image snap:again -c 'cat /data/later.txt /data/new.txt'
is "$(echo $OUT)" "later new" "... and the second one has the later change"

# A file written through the API is in the snapshot, owned by root inside.
helper-req -q "$DSEC_HOST" file_write id="$id" path=/data/api.txt data=api >/dev/null
helper-req -q "$DSEC_HOST" snapshot id="$id" tag=snap:api >/dev/null
run dsec-run --backend container --image snap:api -c 'stat -c "%u %n" /data/api.txt; cat /data/api.txt'
is "$(echo $OUT)" "0 /data/api.txt api" "a file written with file_write is in the snapshot, root's"

# A sandbox whose root looks like an OCI image layout is still a tree of
# files: the snapshot keeps them, it does not import them as an image.
oci=$(dsec-run --backend container --image snapbase:1 --keep -c '
	echo "{\"imageLayoutVersion\": \"1.0.0\"}" > /oci-layout
	echo "{\"schemaVersion\": 2, \"manifests\": []}" > /index.json
	mkdir -p /blobs/sha256' 2>&1 >/dev/null | head -1)
oci=${oci##* }
run helper-req "$DSEC_HOST" snapshot id="$oci" tag=snap:oci
like "$OUT" '"layers":2,' "a sandbox with an OCI layout's files at its root is snapshotted"
run dsec-run --backend container --image snap:oci -c 'cat /oci-layout; cat /data/keep.txt'
is "$(echo $OUT)" '{"imageLayoutVersion": "1.0.0"} original' "... as files over its image"
helper-req -q "$DSEC_HOST" destroy id="$oci" >/dev/null

# A command running while the sandbox is frozen for a snapshot just pauses.
dsec-run --id "$id" -c 'for i in 1 2 3 4 5 6; do sleep 0.2; done; echo survived' \
	>"$T/during.out" 2>&1 &
during=$!
sleep 0.3
run helper-req "$DSEC_HOST" snapshot id="$id" tag=snap:during
wait $during
is "$RC $(cat "$T/during.out")" "0 survived" "a command running across a snapshot completes"

# A paused sandbox is snapshotted as it is and stays paused.
helper-req -q "$DSEC_HOST" pause id="$id" >/dev/null
run helper-req "$DSEC_HOST" snapshot id="$id" tag=snap:paused
is "$RC" 0 "a paused sandbox is snapshotted"
run helper-req "$DSEC_HOST" info id="$id"
like "$OUT" '"state":"paused"' "... and stays paused"
run dsec-run --backend container --image snap:paused -c 'cat /data/later.txt'
is "$OUT" "later" "... and a sandbox starts from that snapshot"

# From the command line.
run dsec-run --id "$id" --snapshot snap:cli
like "$OUT" '^sha256:[0-9a-f]{64}$' "dsec-run --id ID --snapshot TAG saves the sandbox, prints the digest"
dsec-run --backend container --image snapbase:1 --keep --snapshot snap:kept \
	-c 'echo kept > /data/kept.txt' >/dev/null 2>&1
run dsec-run --backend container --image snap:kept -c 'cat /data/kept.txt'
is "$OUT" "kept" "dsec-run --keep --snapshot TAG runs the command, then saves the sandbox"

# Errors.
run helper-req "$DSEC_HOST" snapshot id="${id%:*}:00000000deadbeef" tag=x:1
like "$OUT" '"code":"not_found"' "snapshot of an unknown id is not_found"
run helper-req "$DSEC_HOST" snapshot id="$id"
like "$OUT" '"code":"bad_request"' "snapshot without a tag is a bad_request"
run helper-req "$DSEC_HOST" snapshot id="$id" 'tag=bad tag!'
like "$OUT" '"code":"invalid".*not a valid' "a bad tag is refused before anything is copied"
noimg=$(dsec-run --backend container --keep -c true 2>&1 >/dev/null | head -1)
noimg=${noimg##* }
run helper-req "$DSEC_HOST" snapshot id="$noimg" tag=x:1
like "$OUT" '"code":"unsupported".*not made from an image' \
	"a sandbox without an image is refused with a clear error"

# A client's transfers in flight (a staged write's parts, a staged
# download's archive) are not the sandbox's state: neither a snapshot nor a
# fork carries their files, which no stage of the copy would ever remove;
# the sandbox keeps its own and its client goes on.
stg=$(dsec-run --backend container --image snapbase:1 --keep -c 'mkdir /data/in /data/real' \
	2>&1 >/dev/null | head -1)
stg=${stg##* }
run helper-req "$DSEC_HOST" file_write id="$stg" path=/data/in/big data=abc parts?=true
sid=$(printf '%s' "$OUT" | sed -n 's/.*"stage":"\([0-9a-f]*\)".*/\1/p')
helper-req -q "$DSEC_HOST" file_download id="$stg" path=/data/keep.txt archive=/data/in/dl.tar \
	stage?=true >/dev/null
run dsec-run --id "$stg" -c 'echo $(ls -a /data/in)'
is "$OUT" ". .. .dsec-part-$sid dl.tar" "a sandbox with a staged write and a staged download"
run helper-req "$DSEC_HOST" snapshot id="$stg" tag=snap:staged
is "$RC" 0 "... is snapshotted"
run dsec-run --backend container --image snap:staged -c 'echo $(ls -a /data/in)'
is "$OUT" ". .." "... and the snapshot has neither the staged part nor the staged archive"
run helper-req "$DSEC_HOST" fork id="$stg" n#=2
fk=$(printf '%s' "$OUT" | sed -n 's/.*"ids":\["\([^"]*\)".*/\1/p')
like "$fk" ':' "... it forks"
run dsec-run --id "$fk" -c 'echo $(ls -a /data/in)'
is "$OUT" ". .." "... and its forks have neither"
helper-req -q "$DSEC_HOST" file_write id="$stg" path=/data/in/big data=def stage="$sid" \
	commit?=true >/dev/null
run dsec-run --id "$stg" -c 'echo $(cat /data/in/big) $(ls -a /data/in)'
is "$OUT" "abcdef . .. big dl.tar" "... while the sandbox's own staged write goes on to its commit"
# The copy is the sandbox's tree: a directory it swapped for a symlink to
# a host path on the way to a stage's file is not followed out of it.
run helper-req "$DSEC_HOST" file_write id="$stg" path=/data/real/f data=x parts?=true
sid=$(printf '%s' "$OUT" | sed -n 's/.*"stage":"\([0-9a-f]*\)".*/\1/p')
mkdir -p "$T/hostdir"
echo host > "$T/hostdir/.dsec-part-$sid"
dsec-run --id "$stg" -c "mv /data/real /data/gone && ln -s $T/hostdir /data/real" >/dev/null 2>&1
run helper-req "$DSEC_HOST" snapshot id="$stg" tag=snap:swapped
is "$RC:$(cat "$T/hostdir/.dsec-part-$sid")" "0:host" \
	"a snapshot never follows a symlink of the sandbox to remove a stage's file"
helper-req -q "$DSEC_HOST" destroy id="$stg" >/dev/null

# Another node whose store shares the origin starts sandboxes from it.
mkdir -p "$T/state2"
"$TOP/dsecd/dsecd" --foreground --state-dir "$T/state2" --listen "ipc://$T/d2.sock" \
	--backend-dir "$TOP/backends" --helper-dir "$TOP/build/libexec" --node other \
	--set backends=container --set image_origin="$T/state/fs3/origin" \
	--set container.uid_base=3000000000 2>"$T/d2.log" &
d2=$!
for i in $(seq 300); do helper-req -q "ipc://$T/d2.sock" ping >/dev/null 2>&1 && break; sleep 0.1; done
run dsec-run -H "ipc://$T/d2.sock" --backend container --image snap:1 -c \
	'cat /data/new.txt; ls /data/old; stat -c %u /data/user.txt'
if no_upper_xattr; then
	# (its replaced directory could not be replaced: no c.txt)
	is "$(echo $OUT)" "new 1000" "another node sharing the origin starts a sandbox from the snapshot"
else
	is "$(echo $OUT)" "new c.txt 1000" "another node sharing the origin starts a sandbox from the snapshot"
fi
kill -TERM $d2
wait $d2

run dsec-run --id "$id" -c 'cat /tmp/state'
is "$OUT" "running" "the snapshotted sandbox still runs after all that"
ls "$T/state/snapshots" 2>/dev/null | grep -q . 
is "$?" 1 "no staging copies are left behind"
stop_dsecd
is "$?" 0 "dsecd shuts down cleanly"
