#!/bin/bash
# criu (make criu: build/criu/sbin/criu, deps/criu/) checkpoints a process
# tree in namespaces shaped like a container sandbox's and restores it in
# new ones, the original running on: a shell whose child counts in a loop
# into a file it holds open and into a pipe to a third process.  As in a
# sandbox, root inside is a range of host uids, the root is a tmpfs with the
# host's /usr bound in, and the network namespace is one the host's user
# namespace owns (the backend's pool), named external: the restored tree
# gets another.  The restored counter goes on from the value it had in
# memory, with its file and pipe; the original goes on too.
. "$(dirname "$0")/lib.sh"

need_root
CRIU=${DSEC_CRIU:-$TOP/build/criu/sbin/criu}
[ -x "$CRIU" ] || skip_all "needs criu (make criu builds build/criu/sbin/criu)"
[ -x "$TOP/t/helper-nsrun" ] || skip_all "needs t/helper-nsrun (make tests)"
"$CRIU" check >"$T/check.log" 2>&1 || skip_all "criu check fails here: $(tail -1 "$T/check.log")"
need_cmd ip
plan 10

# The sandbox-like root, made inside the namespaces (pid 1's script): a
# tmpfs, the host's /usr bound read-only, three device nodes, /proc of the
# new pid namespace, /data a tmpfs of its own (criu carries its files), a
# pivot into it; then the workload.
cat > "$T/ct.sh" <<'EOF'
#!/bin/sh
set -eu
R=$1
mount --make-rprivate /
mount -t tmpfs -o size=4m,mode=755 ct-root "$R"
mkdir -p "$R/usr" "$R/proc" "$R/dev" "$R/data" "$R/old"
for l in bin sbin lib lib64; do ln -s usr/$l "$R/$l"; done
mount --rbind /usr "$R/usr"
for d in null zero urandom; do touch "$R/dev/$d"; mount --bind /dev/$d "$R/dev/$d"; done
mount -t proc proc "$R/proc"
mount -t tmpfs -o size=1m,mode=755 ct-data "$R/data"
hostname criu-ct
cd "$R"
pivot_root . old
umount -l /old
rmdir /old
cd /
exec </dev/null >/dev/null 2>&1
exec /bin/sh -c '
  (i=0; while :; do i=$((i+1)); echo "$i" >&3; echo "$i"; sleep 0.05; done) 3>>/data/log |
    cat >> /data/pipelog &
  wait'
EOF
chmod 755 "$T/ct.sh"
chmod 755 "$T"
mkdir -p "$T/root1" "$T/root2" "$T/img"

# lines FILE IN PID: FILE as the namespaces of PID see it (its root).
seen() { nsenter -t "$2" -m -U -r cat "$1" 2>/dev/null; }
# consecutive: stdin is 1, 2, 3, ... N, one a line; prints N (0 if not).
consecutive() { awk '$0 != NR { bad = 1 } END { print (bad || !NR) ? 0 : NR }'; }

PID=$("$TOP/t/helper-nsrun" 300000 "$T/ct.sh" "$T/root1" 2>"$T/nsrun.err") ||
	bail "cannot start the tree: $(cat "$T/nsrun.err")"
killtree() { [ "${1:-0}" != 0 ] && kill -KILL "$1" 2>/dev/null; }
trap 'killtree "$PID"; killtree "${RPID:-}"; _tap_cleanup' EXIT
for i in $(seq 50); do [ "$(seen /data/log "$PID" | wc -l)" -ge 5 ] && break; sleep 0.1; done

NET=$(stat -L -c %i "/proc/$PID/ns/net")
run "$CRIU" dump -t "$PID" -D "$T/img" --leave-running --network-lock skip \
	--external "net[$NET]:sbnet" --ext-mount-map auto -v4 -o dump.log
ok "$RC" "criu dump --leave-running of the tree, its network namespace external ($OUT)"
[ "$RC" = 0 ] || grep -E 'Error' "$T/img/dump.log" | head -5 | sed 's/^/# /' >&2
at_dump=$(seen /data/log "$PID" | wc -l)

# The restored root: the same skeleton on the host (its /data comes from
# the image), owned by root inside.
for d in usr proc dev data; do mkdir -p "$T/root2/$d"; done
for l in bin sbin lib lib64; do ln -s usr/$l "$T/root2/$l"; done
touch "$T/root2/dev/null" "$T/root2/dev/zero" "$T/root2/dev/urandom"
chown -R 300000:300000 "$T/root2"

# A new network namespace of the host's user namespace for the restored
# tree, given as the external one (criu itself runs in it too).
run unshare --net -- sh -c 'ip link set lo up && exec 7</proc/self/ns/net && exec "$@"' sh \
	"$CRIU" restore -D "$T/img" -d --root "$T/root2" --network-lock skip \
	--inherit-fd 'fd[7]:sbnet' --ext-mount-map auto --pidfile "$T/restored.pid" \
	-v4 -o restore.log
ok "$RC" "criu restore into new namespaces ($OUT)"
[ "$RC" = 0 ] || grep -E 'Error' "$T/img/restore.log" | head -5 | sed 's/^/# /' >&2
RPID=$(cat "$T/restored.pid" 2>/dev/null)
[ -n "$RPID" ] || RPID=0	# nothing restored: every check below fails
sleep 1

new=0
[ "$RPID" = 0 ] || for ns in user pid mnt net uts ipc; do
	[ "$(readlink "/proc/$PID/ns/$ns")" != "$(readlink "/proc/$RPID/ns/$ns")" ] &&
		new=$((new + 1))
done
is "$new" 6 "the restored tree has user, pid, mount, network, UTS and IPC namespaces of its own"
is "$(nsenter -t "$RPID" -u hostname 2>/dev/null)" criu-ct "... its host name restored"
is "$(awk '{ print $2, $3 }' "/proc/$RPID/uid_map" 2>/dev/null)" "300000 65536" \
	"... root inside the same host uids"
is "$(ps -o comm= --ppid "$RPID" 2>/dev/null | sort | tr '\n' ' ')" "cat sh " \
	"... the shell's two children restored"

olog=$(seen /data/log "$PID" | consecutive)
rlog=$(seen /data/log "$RPID" | consecutive)
rpipe=$(seen /data/pipelog "$RPID" | consecutive)
diag "counted at the dump: $at_dump; since: original $olog, restored $rlog (pipe $rpipe)"
ok "$([ "$olog" -gt "$at_dump" ]; echo $?)" "the original goes on counting after the dump"
ok "$([ "$rlog" -gt "$at_dump" ] && [ "$rlog" -lt "$olog" ]; echo $?)" \
	"the restored counter goes on from its value in memory: 1..$rlog, no gap or repeat in its open file"
ok "$([ "$rlog" -gt 0 ] && [ "$rpipe" -ge "$((rlog - 1))" ]; echo $?)" "... and through its pipe to cat (1..$rpipe)"
echo restored-only > "$T/mark"
nsenter -t "$RPID" -m -U -r sh -c 'cat >> /data/mark' < "$T/mark" 2>/dev/null
is "$(seen /data/mark "$PID")" "" "the two trees do not share their files"
