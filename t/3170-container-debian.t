#!/bin/bash
# A real Debian 12 image with python3 (t/mkdebian.sh: debootstrap minbase,
# cached in /var/cache/dsec-test), imported from the debootstrap tree and
# from a `docker save` tarball of the same tree, runs python3 in container
# sandboxes; a modified sandbox of it is snapshotted and a new sandbox
# starts from the snapshot with the modifications.
. "$(dirname "$0")/lib.sh"

need_container_images
need_cmd zstd

N=12
plan $N

"$TOP/t/mkdebian.sh" root "$T/deb" 2>"$T/mkdebian.log"
rc=$?
if [ $rc = 77 ]; then
	# Only an unreachable mirror (and no cached root) skips.
	for i in $(seq $N); do skip "the Debian mirror is unreachable: $(tail -1 "$T/mkdebian.log")"; done
	exit 0
fi
[ $rc = 0 ] || { sed 's/^/# /' "$T/mkdebian.log" >&2; bail "t/mkdebian.sh failed"; }

export DSEC_FS3_STORE="$T/state/fs3"
mkdir -p "$T/state"
run dsecctl image import --tag debian:dir "$T/deb"
is "$RC" 0 "the debootstrap tree imports"
diag "$(printf '%s\n' "$OUT" | tail -1)"
"$TOP/t/mkdebian.sh" docker "$T/deb" "$T/debian-docker.tar"
run dsecctl image import --tag debian:docker "$T/debian-docker.tar"
is "$RC" 0 "a docker save tarball of the same tree imports"
like "$OUT" "docker" "... recognised as docker's format"
rm -rf "$T/deb" "$T/debian-docker.tar"

start_dsecd --set backends=container || bail "dsecd did not start"
py='import sys, os; print("py%d.%d" % sys.version_info[:2], open("/etc/debian_version").read().split(".")[0], os.getuid())'
run dsec-run --backend container --image debian:dir -- python3 -c "$py"
is "$OUT" "py3.11 12 0" "python3 runs in a sandbox of the image from the debootstrap tree"
run dsec-run --backend container --image debian:docker -- python3 -c "$py"
is "$OUT" "py3.11 12 0" "python3 runs in a sandbox of the image from the docker tarball"
run dsec-run --backend container --image debian:docker -c 'echo $LANG'
is "$OUT" "C.UTF-8" "... with the docker config's env"

# Modify a Debian sandbox: a program of our own, a package's file gone, a
# directory replaced, a user's file; then snapshot it.
id=$(dsec-run --backend container --image debian:dir --keep -c '
	mkdir -p /opt/app && printf "print(\"hello from the snapshot\")\n" > /opt/app/hello.py
	rm /etc/debian_version
	rm -rf /usr/share/doc && mkdir /usr/share/doc && echo new > /usr/share/doc/README
	useradd -u 1000 -m agent 2>/dev/null || { mkdir /home/agent; chown 1000:1000 /home/agent; }
	echo mine > /home/agent/notes && chown 1000:1000 /home/agent/notes
	cp -a /usr/lib/python3.11 /opt/python-copy' 2>&1 >/dev/null | head -1)
id=${id##* }
like "$id" ':' "a Debian sandbox is modified"
t0=$(date +%s.%N)
run helper-req "$DSEC_HOST" snapshot id="$id" tag=debian:snap
t1=$(date +%s.%N)
is "$RC" 0 "the modified sandbox is snapshotted"
diag "snapshot of a sandbox with $(dsec-run --id "$id" -c 'du -sh /opt/python-copy | cut -f1') written:" \
	"$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f s end to end", b - a }'), $(printf '%s' "$OUT" |
	grep -o '"files":[0-9]*\|"frozen":[0-9.e-]*\|"duration":[0-9.e-]*' | tr '\n' ' ')"

run dsec-run --backend container --image debian:snap -- python3 /opt/app/hello.py
is "$OUT" "hello from the snapshot" "a new sandbox from the snapshot runs the added program"
run dsec-run --backend container --image debian:snap -c \
	'ls /etc/debian_version 2>&1 | grep -c "No such"; ls /usr/share/doc; stat -c %u:%g /home/agent/notes /opt/app/hello.py'
is "$(echo $OUT)" "1 README 1000:1000 0:0" \
	"... without the deleted file, with the replaced dir, owners as inside"
run dsec-run --id "$id" -- python3 -c 'print("still here")'
is "$OUT" "still here" "the snapshotted sandbox keeps running"
stop_dsecd
is "$?" 0 "dsecd shuts down cleanly"
