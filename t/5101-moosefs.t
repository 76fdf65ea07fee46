#!/bin/bash
# MooseFS as fs3's distributed origin (t/lib-moosefs.sh): a master on node 1
# and chunkservers on nodes 2 and 3, each in its namespace; a file written
# on node 1's mount is read on node 2's; an image imported on node 1 into
# the origin on its mount is then run (or pulled) on node 2 from node 2's
# own mount, node 1's being gone by then; node 3, gossiping with node 2,
# fetches the image's objects from node 2 (a member, no image_peers)
# before its own mount of the origin.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-cluster.sh"
. "$(dirname "$0")/lib-moosefs.sh"

need_cluster
need_moosefs
need_cmd dsecctl
WHY_NO_CONTAINER=$(container_images_missing)
cluster_up 3

plan 17

mfs_up 1 2 3
is "$(grep -c "chunkserver register end" "$T/mfs/master.log")" 2 "a MooseFS master on node 1 with the chunkservers of nodes 2 and 3"
like "$(grep -o "ip: [0-9.]*" "$T/mfs/master.log" | sort -u | tr '\n' ' ')" \
	"ip: $(node_addr 2) ip: $(node_addr 3)" "... which registered from their namespaces' addresses"
mfs_mount 1 "$T/mfs1"
mfs_mount 2 "$T/mfs2"
is "$(grep " $T/mfs[12] " /proc/mounts | awk '{print $1, $3}')" \
	"$(printf 'mfs\\043%s:9421 fuse\n' "$(mfs_master)" "$(mfs_master)")" \
	"node 1 and node 2 mount it (FUSE) from the master's address"

head -c 3000000 /dev/urandom > "$T/data"
cp "$T/data" "$T/mfs1/data"
cmp -s "$T/data" "$T/mfs2/data"
ok $? "a file written on node 1's mount is read back on node 2's"
if command -v mfsfileinfo >/dev/null 2>&1; then
	# It asks the master.  The second copy may come a moment after the
	# write (the master replicates up to the goal): looked at for 20 s.
	for i in $(seq 100); do
		run node_exec 2 mfsfileinfo "$T/mfs2/data"
		[[ $OUT == *"$(node_addr 2):9422"* && $OUT == *"$(node_addr 3):9422"* ]] && break
		sleep 0.2
	done
	like "$OUT" "$(node_addr 2):9422" "its chunk has a copy on node 2's chunkserver"
	like "$OUT" "$(node_addr 3):9422" "... and one on node 3's"
else
	skip "needs mfsfileinfo"; skip "needs mfsfileinfo"
fi

# fs3 on it: the origin is a folder of the MooseFS mount, each node sees it
# through its own.
mk_small_root "$T/root" sh cat
echo "hello from the distributed origin" > "$T/root/hello.txt"
run env DSEC_FS3_ORIGIN="$T/mfs1/origin" dsecctl --store "$T/n1/fs3" image import --tag dist:1 "$T/root"
is "$RC" 0 "dsecctl on node 1 imports an image into the origin on its MooseFS mount"
ok $([ -e "$T/mfs2/origin/tags/dist:1" ] && [ ! -e "$T/n1/fs3/origin" ]; echo $?) \
	"... node 2's mount has its tag (and node 1's store has no local origin)"
ok $([ "$(du -s "$T/mfs/cs2/hdd" | cut -f1)" -gt 0 ] && [ "$(du -s "$T/mfs/cs3/hdd" | cut -f1)" -gt 0 ]; echo $?) \
	"... and its objects are on the chunkservers"
mfs_umount "$T/mfs1"
ok $(! mountpoint -q "$T/mfs1"; echo $?) "node 1's mount is gone"

head -c 32 /dev/urandom > "$T/key"
gossip() { echo --set gossip_listen="$(node_addr "$1"):7946" --set gossip_seeds="$(node_addr 2):7946" \
	--set cluster_key_file="$T/key" --set placement=local; }
if [ -z "$WHY_NO_CONTAINER" ]; then
	node_start 2 --set backends=container --set "image_origin=$T/mfs2/origin" $(gossip 2)
	like "$(node_log 2)" "origin $T/mfs2/origin" "a dsecd on node 2 with the origin on its own mount"
	run env DSEC_HOST="$(node_ipc 2)" dsec-run --backend container --image dist:1 -c 'cat /hello.txt'
	is "$OUT" "hello from the distributed origin" "... runs a container sandbox of the image node 1 imported"
	mfs_mount 3 "$T/mfs3"
	node_start 3 --set backends=container --set "image_origin=$T/mfs3/origin" $(gossip 3)
	wait_for 30 eval "node_req 3 info | grep -q '\"name\":\"n2\",\"url\":\"[^\"]*\",\"state\":\"alive\"'"
	run env DSEC_HOST="$(node_ipc 3)" dsec-run --backend container --image dist:1 -c 'cat /hello.txt'
	is "$OUT" "hello from the distributed origin" "node 3, gossiping with node 2, runs one too"
	like "$(node_req 3 info)" '\{"name":"peers","objects":[1-9][0-9]*' \
		"... its objects fetched from node 2, a member, before its own mount of the origin"
	node_stop 3
	mfs_umount "$T/mfs3"
else
	for i in 1 2 3 4; do skip "$WHY_NO_CONTAINER"; done
fi
run dsecctl --store "$T/n3/fs3" --origin "$T/mfs2/origin" image pull dist:1
is "$RC" 0 "dsecctl pulls it into a store of its own from node 2's mount"
ok $([ -n "$(find "$T/n3/fs3" -type f -size +0 | head -1)" ]; echo $?) "... which now holds its objects"

PIDS=$_mfs_pids
cluster_down
left=0
for p in $PIDS; do kill -0 "$p" 2>/dev/null && left=$((left + 1)); done
is "$left:$(grep -c " $T/" /proc/mounts)" "0:0" "teardown: no MooseFS process nor mount left"
