#!/bin/bash
# container sandboxes of a base image with extra images stacked over it
# (create's "layers", dsec-run --layer): the extras' files show, shadow the
# base's and hide them with whiteouts, the last listed is highest, the
# config is the base's, writes stay in the sandbox, a bad ref holds nothing,
# and images a sandbox uses as extras outlive `dsecctl image rm` and gc.
. "$(dirname "$0")/lib.sh"

need_container_images

plan 21

mk_small_root "$T/base" sh cat ls rm
echo base > "$T/base/shadow.txt"
echo base > "$T/base/gone.txt"
echo base > "$T/base/order.txt"
mkdir -p "$T/ws/data" "$T/tk"
echo workspace > "$T/ws/ws.txt"
echo extra > "$T/ws/shadow.txt"
echo ws > "$T/ws/order.txt"
mknod "$T/ws/gone.txt" c 0 0		# an overlayfs whiteout
echo toolkit > "$T/tk/tk.txt"
echo tk > "$T/tk/order.txt"
STORE="$T/state/fs3"
export DSEC_FS3_STORE="$STORE"
mkdir -p "$T/state"
run dsecctl image import --tag base:1 --config env=FOO=base --config cwd=/data "$T/base"
is "$RC" 0 "import the base image"
dsecctl image import --tag ws:1 --config env=FOO=ws --config cwd=/ "$T/ws" >/dev/null &&
	dsecctl image import --tag tk:1 "$T/tk" >/dev/null
is "$?" 0 "import a workspace and a toolkit image"
WS=$(dsecctl image inspect ws:1 | sed -n 's/^digest *//p')

start_dsecd --set backends=container || bail "dsecd did not start"
layers() { grep " erofs " /proc/self/mountinfo | grep -c "$STORE/"; }
acquired() { ls "$STORE/acquired" | wc -l; }

run dsec-run --backend container --image base:1 --layer ws:1 -c 'cat /ws.txt /shadow.txt; ls /bin/cat'
is "$(echo $OUT)" "workspace extra /bin/cat" "the extra layer's files show over the base's, which stay"
run dsec-run --backend container --image base:1 --layer ws:1 -c 'ls /gone.txt; echo $FOO; pwd'
like "$OUT" "^base"$'\n'"/data"$'\n'".*No such file" \
	"a whiteout in the extra hides the base's file; env and cwd are the base's"
run dsec-run --backend container --image base:1 --layer ws:1 --layer tk:1 -c 'cat /order.txt /tk.txt /ws.txt'
is "$(echo $OUT)" "tk toolkit workspace" "two extras: the last listed is highest"
run dsec-run --backend container --image base:1 --layer tk:1 --layer ws:1 -c 'cat /order.txt'
is "$OUT" "ws" "... and the order is the request's"
run dsec-run --backend container --image base:1 --layer base:1 --layer "$WS" -c 'cat /ws.txt /shadow.txt /order.txt'
is "$(echo $OUT)" "workspace extra ws" \
	"an extra by digest, and the base again as an extra (its layer once)"

a=$(dsec-run --backend container --image base:1 --layer ws:1 --keep \
	-c 'echo changed > /ws.txt; echo new > /new.txt; rm /shadow.txt' 2>&1 >/dev/null | head -1)
a=${a##* }
run dsec-run --id "$a" -c 'cat /ws.txt /new.txt; ls /shadow.txt'
like "$OUT" "changed"$'\n'"new"$'\n'".*No such file" "the sandbox writes over the stack"
run dsec-run --backend container --image base:1 --layer ws:1 -c 'cat /ws.txt /shadow.txt; ls /new.txt'
like "$OUT" "workspace"$'\n'"extra"$'\n'".*No such file" "another sandbox of the stack does not see it"
run cat $(for m in "$STORE"/mnt/*; do [ -e "$m/ws.txt" ] && echo "$m/ws.txt"; done)
is "$OUT" "workspace" "the extra's layer itself is unchanged"

n0=$(layers); r0=$(acquired)
run dsec-run --backend container --image base:1 --layer ws:1 --layer nosuch:1 -c true
like "$OUT" "cannot resolve 'nosuch:1': no such image" "an unknown extra is refused with a clear error"
is "$RC" 125 "... and dsec-run exits 125"
is "$(layers):$(acquired)" "$n0:$r0" "... holding no layer and no image"
run dsec-run --backend container --layer ws:1 -c true
like "$RC:$OUT" "^125:.*--layer needs --image" "--layer without --image is a usage error"
run dsec-run --backend container --image base:1 $(for i in $(seq 64); do echo --layer tk:1; done) -c true
like "$RC:$OUT" "^125:.*'layers' has 64 images: a stack takes at most 64 layers" \
	"more layers than one overlay mount takes are refused"
run helper-req "$DSEC_HOST" create backend=container image=base:1 layers=notalist
like "$RC:$OUT" "^1:.*layers" "a 'layers' that is no list of strings is refused"

run helper-req "$DSEC_HOST" snapshot id="$a" tag=snap:1
like "$RC:$OUT" "^1:.*runs extra layers over its image" "a sandbox with extras cannot be snapshotted"

# ws:1 loses its tag and gc runs while sandbox $a stacks it.
dsecctl image rm ws:1 >/dev/null && dsecctl image gc >/dev/null
run dsec-run --backend container --image base:1 --layer "$WS" -c 'cat /ws.txt'
is "$OUT" "workspace" "an extra in use outlives dsecctl image rm and gc"
helper-req -q "$DSEC_HOST" destroy id="$a" >/dev/null
for i in $(seq 50); do [ "$(acquired)" = 0 ] && break; sleep 0.1; done
dsecctl image gc >/dev/null
run dsecctl image inspect "$WS"
like "$RC:$OUT" "^1:.*manifest '$WS': no good copy" "... and gc removes it once no sandbox uses it"
for i in $(seq 50); do [ "$(layers)" = 0 ] && break; sleep 0.1; done
is "$(layers)" "0" "every layer is unmounted when the last sandbox is gone"
stop_dsecd
is "$?" 0 "dsecd shuts down cleanly"
