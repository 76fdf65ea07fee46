#!/bin/bash
# container: each sandbox's init is cloned from the backend's base mount
# namespace (basens.c) and chroots into its root: nothing of the host's tree
# is in a sandbox's namespace, above its root is a small read-only tmpfs.
# container.base_ns=false clones from dsecd's namespace and pivots.
. "$(dirname "$0")/lib.sh"

need_container

plan 15

start_dsecd --set backends=container
cr() { dsec-run --backend container "$@"; }
init_of() {
	for d in $(container_cgroups); do cat "$d"/sb.*/cgroup.procs; done 2>/dev/null | head -1
}
# ns_view INIT: a process that entered INIT's mount namespace (its root is
# that namespace's root), for /proc/PID/{mountinfo,root} from here.
ns_view() {
	nsenter -t "$1" -m sleep 10 &
	VIEW=$!
	sleep 0.3
}
# fs_at MOUNTINFO: "TYPE:SOURCE" of what is mounted at / in it.
fs_at() {
	awk '$5 == "/" { split($0, a, " - "); split(a[2], b, " "); print b[1] ":" b[2]; exit }' "$1"
}
hostdev=$(awk '$5 == "/" { print $3 }' /proc/self/mountinfo | head -1)

ok $(grep -q 'no base mount namespace' "$T/dsecd.log"; [ $? = 1 ]; echo $?) \
	"the backend made its base mount namespace"
# sandbox_root WHAT ROOT: a command runs; a kept sandbox's namespace has ROOT
# at /; VIEW is left entered in it.
sandbox_root() {
	run cr -c 'echo hi; cat /etc/hostname'
	is "$(echo $OUT)" "hi sandbox" "$1: a command runs"
	id=$(new_container)
	ns_view "$(init_of)"
	is "$(fs_at "/proc/$VIEW/mountinfo")" "$2" "$1: a sandbox's mount namespace has $2 at /"
}
sandbox_root "base namespace" "tmpfs:dsec-base"
is "$(awk -v d="$hostdev" '$3 == d && $4 == "/"' "/proc/$VIEW/mountinfo" | wc -l)" 0 \
	"the host's root file system is not mounted in it (only binds of the default root's parts)"
# (tmp and run are the base's own empty mount points, for criu: container-criu)
is "$(ls -A "/proc/$VIEW/root/" | grep -cx -e home -e var -e work -e boot -e srv)$(ls -A \
	"/proc/$VIEW/root/tmp/" 2>&1; ls -A "/proc/$VIEW/root/run/" 2>&1)" 0 \
	"above the sandbox's root: no /home, /var, /tmp of the host"
ok $(touch "/proc/$VIEW/root/dsec-x" 2>/dev/null; [ $? != 0 ]; echo $?) "the base root is read-only"
kill "$VIEW" 2>/dev/null; wait "$VIEW" 2>/dev/null
run cr -c 'ls -A /proc/1/root/ | grep -c -e "^lower\." -e "^rw$" -e container-init
	cat /proc/1/mountinfo'
is "$(echo "$OUT" | head -1):$(echo "$OUT" | tail -n +2 > "$T/mi"; fs_at "$T/mi")" \
	"0:overlay:dsec-container" "inside, pid 1's root is the sandbox's own overlay, not the base's"
run cr -c 'chroot / true 2>/dev/null || echo denied
	cd /proc/1/root/.. && ls -A | grep -c "^lower\."'
is "$(echo $OUT)" "denied 0" "chroot is denied and .. of the root is the root"
helper-req -q "$DSEC_HOST" destroy id="$id" >/dev/null

# The host replaces a file the base holds (ldconfig renames a new
# /etc/ld.so.cache over the old, as every apt run that installs a library
# does): the base's bind still holds the old one, so the base is made again.
command -v ldconfig >/dev/null || PATH=$PATH:/sbin:/usr/sbin
if ! [ -w /etc ]; then
	# (make check-v2's guest: the host's / over 9p, read-only)
	skip "the host's /etc is read-only here: ldconfig cannot replace its cache"
	skip "... nor can /etc/services be renamed over"
	skip "... so the base is not made again"
else
	before=$(stat -c %i /etc/ld.so.cache)
	ldconfig
	after=$(stat -c %i /etc/ld.so.cache)
	run cr -c 'stat -c %i /etc/ld.so.cache'
	is "$RC:$OUT:$([ "$before" != "$after" ]; echo $?)" "0:$after:0" \
		"after ldconfig replaced /etc/ld.so.cache, a create works and binds the new file"
	cp -p /etc/services "$T/services" && mv "$T/services" /etc/services
	run cr -c 'grep -c "^ssh" /etc/services'
	is "$RC:$OUT" "0:$(grep -c '^ssh' /etc/services)" "... and so after /etc/services was renamed over"
	is "$(grep -c 'made it again' "$T/dsecd.log")" 2 "the base was made again once for each"
fi

stop_dsecd
ok $([ -z "$(ls -A "$T/state/backends/container" 2>/dev/null)" ]; echo $?) \
	"shutdown leaves no base directory behind"

start_dsecd --set backends=container --set container.base_ns=false
sandbox_root "container.base_ns=false (the init pivoted)" "overlay:dsec-container"
kill "$VIEW" 2>/dev/null; wait "$VIEW" 2>/dev/null
helper-req -q "$DSEC_HOST" destroy id="$id" >/dev/null
stop_dsecd
ok $([ -z "$(ls -A "$T/state/backends/container" 2>/dev/null)" ]; echo $?) \
	"container.base_ns=false: shutdown leaves the state directory empty"
