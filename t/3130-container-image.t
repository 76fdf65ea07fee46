#!/bin/bash
# container sandboxes from fs3 images: dsecctl imports a root, dsecd acquires
# it on create (layers mounted once per node, shared), the image's config
# (env, cwd, user) applies under the request's, writes stay in the sandbox,
# and the layers are unmounted when the last sandbox is gone.
. "$(dirname "$0")/lib.sh"

need_container_images

plan 14

# A small root: a shell, a few tools and the libraries they load.
mk_small_root "$T/root" sh cat ls id env wc
echo "hello from the image" > "$T/root/hello.txt"
STORE="$T/state/fs3"
export DSEC_FS3_STORE="$STORE"
mkdir -p "$T/state"
run dsecctl image import --tag test:1 --config env=FOO=image --config env=ONLY=image \
	--config cwd=/data "$T/root"
is "$RC" 0 "dsecctl imports a root directory into the node's store"
run dsecctl image import --tag test:user --config user=1000:1000 "$T/root"
is "$RC" 0 "... and the same root again with another config"

start_dsecd --set backends=container || bail "dsecd did not start"
layers() { grep " erofs " /proc/self/mountinfo | grep -c "$STORE/"; }

run dsec-run --backend container --image test:1 -c 'cat /hello.txt; echo $FOO $ONLY; pwd; ls /bin/wc'
is "$(echo $OUT)" "hello from the image image image /data /bin/wc" \
	"a sandbox runs the image with its env and cwd"
run dsec-run --backend container --image test:1 --env FOO=request --cwd / -c 'echo $FOO $ONLY; pwd'
is "$(echo $OUT)" "request image /" "the request's env and cwd win over the image's"
run dsec-run --backend container --image test:user -c 'id -u; id -g'
is "$(echo $OUT)" "1000 1000" "the image's user runs the commands"

a=$(dsec-run --backend container --image test:1 --keep -c 'echo changed > /hello.txt' 2>&1 >/dev/null | head -1)
a=${a##* }
b=$(dsec-run --backend container --image test:1 --keep -c true 2>&1 >/dev/null | head -1)
b=${b##* }
run dsec-run --id "$a" -c 'cat /hello.txt'
is "$OUT" "changed" "a sandbox writes over the image (overlay upper)"
run dsec-run --id "$b" -c 'cat /hello.txt'
is "$OUT" "hello from the image" "another sandbox of the image does not see it"
is "$(layers)" "1" "two sandboxes and two tags of one root share one layer mount"
run helper-req "$DSEC_HOST" file_read id="$a" path=/hello.txt
like "$OUT" '"data":"changed\\n"' "file_read reads the sandbox's view"

run dsec-run --backend container --image nosuch:1 -c true
like "$OUT" "no such image" "an unknown image is refused with a clear error"
is "$RC" 125 "... and dsec-run exits 125"

helper-req -q "$DSEC_HOST" destroy id="$a" >/dev/null
helper-req -q "$DSEC_HOST" destroy id="$b" >/dev/null
for i in $(seq 50); do [ "$(layers)" = 0 ] && break; sleep 0.1; done
is "$(layers)" "0" "the layer is unmounted when its last sandbox is gone"
is "$(ls -d "$T"/state/backends/container/sb.* 2>/dev/null | wc -l)" "0" \
	"image sandboxes leave no directory behind (their layers' mount points included)"
stop_dsecd
is "$?" 0 "dsecd shuts down cleanly"
