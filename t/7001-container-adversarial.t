#!/bin/bash
# An agent attacks from inside a container sandbox: host files, other
# sandboxes' and the host's processes, mounts, modules, raw sockets, the
# network, fork/memory/disk/output bombs, the platform's own tools, file-API
# escapes and dsecd itself.  Each attack must be contained (it fails or only
# hurts its own sandbox), reported (the exec result says what happened), and
# leave dsecd and a neighbour sandbox working.
. "$(dirname "$0")/lib.sh"

need_root
need_cmd dsec-run
need_cmd dsecd
need_cmd helper-req
need_cmd python3
[ -e "$TOP/backends/container.so" ] || skip_all "needs backends/container.so (make)"
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null
grep -qw overlay /proc/filesystems || skip_all "needs overlayfs"
[ -d /sys/fs/cgroup/memory ] || [ -e /sys/fs/cgroup/cgroup.controllers ] || skip_all "needs a memory cgroup"

plan 30

start_dsecd --set backends=container --set container.memory=96M --set container.pids=48 \
	--set container.disk=24M || bail "dsecd did not start"

# The neighbour: a sandbox with a marker process and a file, checked after
# every attack.
nb=$(dsec-run --backend container --keep -c 'echo intact > /root/mark' 2>&1 >/dev/null | head -1)
nb=${nb##* }
[ -n "$nb" ] || bail "cannot create the neighbour sandbox"
neighbour_ok() {
	local out
	out=$(dsec-run --id "$nb" --timeout 10 -c 'cat /root/mark' 2>&1)
	[ "$out" = intact ] && helper-req -q "$DSEC_HOST" ping >/dev/null 2>&1
}
cr() { dsec-run --backend container --timeout 20 "$@"; }
py() { cr -- python3 -c "$1"; }

# --- the host's files and processes ---
run cr -c 'cat /etc/shadow /root/.bash_history 2>&1 | grep -c "No such file"'
is "$OUT" "2" "host secrets are not in the sandbox's root"
run cr -c "ls /proc | grep -c '^[0-9]'; test -e /proc/$DSECD_PID/root && echo visible"
ok $([ "$OUT" -ge 3 ] 2>/dev/null && [ "$OUT" -le 6 ]; echo $?) \
	"no host process is visible (only the sandbox's own few pids: $OUT)"
run cr -c "kill -9 $DSECD_PID $$ 1 2>&1; echo rc=\$?"
sleep 0.3
ok $(kill -0 "$DSECD_PID" && kill -0 $$; echo $?) "kill -9 of dsecd's and the test's host pids does not reach them"
run cr -c 'readlink /proc/self/root; ls /proc/1/root/ >/dev/null 2>&1 || echo denied; ls / | grep -c -x -e home -e srv'
is "$(echo $OUT)" "/ denied 0" "/proc/self/root is the sandbox's root, pid 1's root is off limits"

# Another sandbox's processes: the neighbour runs a long sleep, the attacker
# looks for it and tries its host pid.
dsec-run --id "$nb" --timeout 30 -c 'sleep 7911' >/dev/null 2>&1 &
runner=$!
for i in $(seq 50); do victim=$(pgrep -f 'sleep 7911' | head -1); [ -n "$victim" ] && break; sleep 0.1; done
run cr -c "ps -e -o comm 2>/dev/null | grep -c sleep; kill -9 $victim 2>/dev/null || echo denied"
is "$(echo $OUT)" "0 denied" "another sandbox's processes are invisible and unreachable"
ok $(kill -0 "$victim"; echo $?) "the neighbour's process survives"
kill "$runner" 2>/dev/null; wait "$runner" 2>/dev/null

# --- privileged operations ---
run cr -c 'mount -t proc proc /mnt 2>/dev/null || echo m; mount --bind / /mnt 2>/dev/null || echo b; umount /proc 2>/dev/null || echo u; chroot / true 2>/dev/null || echo c'
is "$(echo $OUT)" "m b u c" "mount, bind mount, umount and chroot are denied"
# init_module/finit_module/delete_module; bpf, perf_event_open, keyctl,
# userfaultfd, kexec_load, open_by_handle_at, ptrace(ATTACH to pid 1),
# unshare(CLONE_NEWUSER), setns: each must fail.
run py '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
calls = {"init_module": (175, 0, 0, 0), "finit_module": (313, 0, 0, 0),
         "delete_module": (176, b"loop", 0), "bpf": (321, 0, 0, 0),
         "perf_event_open": (298, 0, 0, -1, -1, 0), "keyctl": (250, 0, 0),
         "userfaultfd": (323, 0), "kexec_load": (246, 0, 0, 0, 0),
         "open_by_handle_at": (304, 0, 0, 0), "ptrace_attach": (101, 16, 1, 0, 0),
         "unshare_user": (272, 0x10000000), "setns": (308, 0, 0)}
ok = [n for n, a in calls.items() if libc.syscall(*a) != -1]
print("allowed:", ",".join(ok) if ok else "none")'
is "$OUT" "allowed: none" "module, bpf, perf, keyctl, userfaultfd, kexec, handle, ptrace, userns, setns syscalls all fail"
n_mod=$(cat /proc/modules 2>/dev/null | wc -l)
run cr -c 'modprobe dummy 2>/dev/null || insmod /nonexistent.ko 2>/dev/null || echo denied'
is "$OUT" "denied" "module loading is denied"
if [ -e /proc/modules ]; then
	is "$(wc -l < /proc/modules)" "$n_mod" "the host's module list is unchanged"
else
	skip "the host kernel has no loadable modules (/proc/modules absent)"
fi

# --- network ---
run py '
import socket
r = []
for fam, typ, proto in ((socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
                        (socket.AF_PACKET, socket.SOCK_RAW, 0)):
    try:
        socket.socket(fam, typ, proto); r.append("open")
    except OSError:
        r.append("denied")
print(*r)'
is "$OUT" "denied denied" "raw IP and packet sockets are denied"
run py '
import socket
for addr in (("10.0.0.1", 80), ("1.1.1.1", 53), ("192.168.0.1", 443)):
    try:
        socket.create_connection(addr, timeout=2); print("reached", addr[0])
    except OSError as e:
        print(e.errno in (101, 113, 110) and "unreachable" or e)'
is "$(echo $OUT)" "unreachable unreachable unreachable" "no address outside the sandbox is reachable (network none)"

# --- resource bombs (pids=48, memory=96M, disk=24M) ---
run cr --timeout 4 -c 'f() { f | f & }; f; sleep 10'
ok $([ "$RC" = 124 ] || [ "$RC" -lt 125 ]; echo $?) "a fork bomb is contained (exit $RC)"
neighbour_ok; ok $? "dsecd and the neighbour serve after the fork bomb"
for i in $(seq 100); do pgrep -f 'f \| f' >/dev/null || break; sleep 0.1; done
run pgrep -c -f 'f \| f'
ok $([ "${OUT:-0}" = 0 ]; echo $?) "no fork bomb process outlives its command (10 s to die)"

run py 'b = []
while True: b.append(b"x" * (16 << 20))'
is "$RC" 137 "a memory bomb is killed inside its sandbox (SIGKILL)"
like "$OUT" "memory limit was reached" "the kill is reported as the OOM killer's (oom_killed)"
run helper-req "$DSEC_HOST" call backend=container code='kill -9 $$'
like "$OUT" '"oom_killed":false' "a plain SIGKILL is not reported as an OOM kill"
neighbour_ok; ok $? "dsecd and the neighbour serve after the memory bomb"

host_free=$(df --output=avail -k "$T" | tail -1)
run cr -c 'dd if=/dev/zero of=/root/fill bs=1M 2>&1 | grep -c "No space left"; rm -f /root/fill; echo after > /root/a && cat /root/a'
is "$(echo $OUT)" "1 after" "filling the disk stops at the sandbox's cap (ENOSPC) and the sandbox recovers"
now_free=$(df --output=avail -k "$T" | tail -1)
ok $([ $((host_free - now_free)) -lt 20000 ]; echo $?) "the host's disk is not consumed by the fill"

rss0=$(awk '/VmRSS/ {print $2}' /proc/$DSECD_PID/status)
run helper-req "$DSEC_HOST" call backend=container code='yes flood | head -c 30000000' output_cap#=65536
flag=$(echo "$OUT" | grep -o '"stdout_truncated":true'); len=$(echo "$OUT" | wc -c)
ok $([ -n "$flag" ] && [ "$len" -gt 65536 ] && [ "$len" -lt 80000 ]; echo $?) \
	"an output flood is capped at output_cap and reported as truncated ($len bytes of JSON reply for 64 KiB)"
rss1=$(awk '/VmRSS/ {print $2}' /proc/$DSECD_PID/status)
ok $([ $((rss1 - rss0)) -lt 32768 ]; echo $?) "dsecd's memory does not grow with the flood ($rss0 -> $rss1 kB)"

# --- the platform's own tools ---
run cr -c 'cp /bin/false /bin/sh 2>/dev/null || echo ro1; rm -f /usr/bin/dash 2>/dev/null; test -x /usr/bin/dash && echo ro2; echo "exit 7" > /tmp/sh; chmod +x /tmp/sh'
is "$(echo $OUT)" "ro1 ro2" "the sandbox cannot replace the shell the platform runs"
id=$(cr --keep -c 'echo "#!/bin/false" > /etc/profile; ln -sf /tmp/sh /root/sh; echo x > /etc/motd-evil' 2>&1 >/dev/null | head -1)
id=${id##* }
run dsec-run --id "$id" -c 'echo still-works'
is "$OUT" "still-works" "the next exec after tampering still works"
run cr -c 'test -e /etc/motd-evil && echo dirty; grep -q false /etc/profile 2>/dev/null || echo clean'
is "$OUT" "clean" "a fresh sandbox does not see another sandbox's changes"

# --- file API escapes ---
dsec-run --id "$id" -c 'ln -s /proc/self/root /root/pr; ln -s ../../../../etc /root/up; mkdir -p /root/d; ln -s / /root/d/top' >/dev/null 2>&1
bad=0
for p in /proc/self/root/etc/shadow /proc/1/root/etc/shadow /root/pr/etc/shadow /root/up/shadow \
	 ../../etc/shadow /root/d/top/etc/shadow; do
	out=$(helper-req "$DSEC_HOST" file_read id="$id" path="$p" 2>&1)
	case "$out" in *'"ok":true'*root:*) diag "$p read a shadow file: $out"; bad=$((bad + 1));; esac
done
is "$bad" 0 "no file_read path reaches the host's /etc/shadow"
printf 'evil' > "$T/evil"
for p in /proc/self/root/tmp/dsec-evil-$$ /root/up/dsec-evil-$$ ../../../tmp/dsec-evil-$$ /root/d/top/tmp/dsec-evil-$$; do
	helper-req "$DSEC_HOST" file_write id="$id" path="$p" data@="$T/evil" >/dev/null 2>&1
done
ok $([ ! -e /tmp/dsec-evil-$$ ] && [ ! -e /etc/dsec-evil-$$ ]; echo $?) "no file_write path reaches the host"

neighbour_ok; ok $? "after every attack the neighbour sandbox is intact and dsecd serves"
stop_dsecd
is "$?" 0 "dsecd shuts down cleanly"
