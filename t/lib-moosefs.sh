# t/lib-moosefs.sh - MooseFS (Debian's moosefs-master, -chunkserver and
# -client) in a cluster test's namespaces: the distributed file system that
# fs3's origin lives on across nodes.  Source it after t/lib-cluster.sh,
# and call need_moosefs before cluster_up:
#
#     need_cluster; need_moosefs
#     cluster_up 3
#     mfs_up 1 2 3                    # master on node 1, chunkservers on 2, 3
#     mfs_mount 1 "$T/mfs1"; mfs_mount 2 "$T/mfs2"
#
# Every daemon runs in the foreground in a node's network namespace, from
# config files and data folders of its own under $T/mfs (no system service,
# no /etc/mfs), as root; chunkservers listen on their node's address (the
# master refuses loopback ones).  mfsmount runs in node I's network
# namespace but the host's mount namespace (nsenter --net, as every node
# process of t/lib-cluster.sh), so the mount is seen by the test and by a
# dsecd that node_start starts, before or after it.  At exit the mounts are
# unmounted and the daemons stopped before the namespaces go.

_mfs_pids=
_mfs_mounts=
CLUSTER_CLEANUP="$CLUSTER_CLEANUP mfs_down"

# need_moosefs: skip the whole file unless the MooseFS programs and FUSE are here.
need_moosefs() {
	need_cmd mfsmaster
	need_cmd mfschunkserver
	need_cmd mfsmount
	[ -c /dev/fuse ] || skip_all "needs /dev/fuse"
	grep -qw fuse /proc/filesystems || modprobe fuse 2>/dev/null
	grep -qw fuse /proc/filesystems || skip_all "needs FUSE"
	[ -e /var/lib/mfs/metadata.mfs.empty ] || skip_all "needs /var/lib/mfs/metadata.mfs.empty (moosefs-master)"
}

# _mfs_start I NAME CMD...: CMD (a MooseFS daemon) in node I's namespace,
# its output in $T/mfs/NAME.log.
_mfs_start() {
	local i=$1 name=$2
	shift 2
	"$TOP/tools/dsec-netns" --name "$CLUSTER" exec "$i" "$@" >>"$T/mfs/$name.log" 2>&1 &
	_mfs_pids="$_mfs_pids $!"
}

# mfs_master: the master's address (node MFS_MASTER).
mfs_master() { node_addr "$MFS_MASTER"; }

# _mfs_cfg FILE KEY=VALUE...: a daemon's config file: as root, not reniced,
# data in FILE's folder, and the KEYs.
_mfs_cfg() {
	local f=$1 kv
	shift
	{
		printf '%s\n' "WORKING_USER = root" "WORKING_GROUP = root" "NICE_LEVEL = 0" \
			"DATA_PATH = $(dirname "$f")"
		for kv in "$@"; do printf '%s = %s\n' "${kv%%=*}" "${kv#*=}"; done
	} > "$f"
}

# mfs_up MASTER CS...: the master on node MASTER and a chunkserver on each
# node CS; waits (30 s) until every chunkserver has registered.
mfs_up() {
	local m=$1 i d n
	shift
	MFS_MASTER=$m
	d="$T/mfs/master"
	mkdir -p "$d"
	_mfs_cfg "$d/mfsmaster.cfg" EXPORTS_FILENAME="$d/mfsexports.cfg" \
		TOPOLOGY_FILENAME="$d/mfstopology.cfg" MATOML_LISTEN_HOST="$(node_addr "$m")" \
		MATOCS_LISTEN_HOST="$(node_addr "$m")" MATOCL_LISTEN_HOST="$(node_addr "$m")"
	echo '*	/	rw,alldirs,admin,maproot=0:0' > "$d/mfsexports.cfg"
	: > "$d/mfstopology.cfg"
	cp /var/lib/mfs/metadata.mfs.empty "$d/metadata.mfs"
	_mfs_start "$m" master mfsmaster -c "$d/mfsmaster.cfg" -f start
	for i in "$@"; do
		d="$T/mfs/cs$i"
		mkdir -p "$d/hdd"
		_mfs_cfg "$d/mfschunkserver.cfg" HDD_CONF_FILENAME="$d/mfshdd.cfg" \
			BIND_HOST="$(node_addr "$i")" CSSERV_LISTEN_HOST="$(node_addr "$i")" \
			MASTER_HOST="$(node_addr "$m")"
		echo "$d/hdd" > "$d/mfshdd.cfg"
		_mfs_start "$i" "cs$i" mfschunkserver -c "$d/mfschunkserver.cfg" -f start
	done
	n=$#
	wait_for 30 eval '[ "$(grep -c "chunkserver register end" "$T/mfs/master.log")" -ge '"$n"' ]' ||
		bail "the MooseFS chunkservers did not register within 30 s: $(tail -n 5 "$T/mfs/master.log")"
}

# mfs_mount I DIR: MooseFS mounted at DIR by a client in node I's namespace;
# waits (30 s) until it is.
mfs_mount() {
	mkdir -p "$2"
	_mfs_start "$1" "mount$1" mfsmount "$2" -f -H "$(mfs_master)"
	_mfs_mounts="$2 $_mfs_mounts"
	wait_for 30 mountpoint -q "$2" || bail "mfsmount on node $1 did not mount $2 within 30 s"
}

# mfs_umount DIR: unmounts DIR (lazily if busy); its client exits.
mfs_umount() {
	mountpoint -q "$1" || return 0
	umount "$1" 2>/dev/null || umount -l "$1"
}

# mfs_down: unmounts every mount, then stops the clients, chunkservers and
# master (SIGTERM, SIGKILL after 10 s).
mfs_down() {
	local m p
	for m in $_mfs_mounts; do mfs_umount "$m"; done
	for p in $_mfs_pids; do kill -TERM "$p" 2>/dev/null; done
	for p in $_mfs_pids; do
		wait_for 10 eval "! kill -0 $p" || kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	_mfs_pids=
	_mfs_mounts=
}
