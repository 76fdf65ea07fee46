#!/bin/bash
# The seccomp rules that look at an argument, attacked with its upper 32
# bits set: the kernel reads only the low 32 bits of socket()'s and
# socketpair()'s family and of ioctl()'s request (they are ints), so a
# filter that compares all 64 lets AF_VSOCK (not namespaced: it reaches the
# hypervisor's host), TIOCSTI, TIOCLINUX and XFS_IOC_SWAPEXT through.  The
# filter is shared by the fncall zygotes and container-init: probed in
# fncall's python3 and sh runtimes and in containers with and without a
# user namespace.
. "$(dirname "$0")/lib.sh"

need_fncall

# Each probe prints NAME=ERRNO (0: the call succeeded).  ioctls go to
# /dev/null, which is no terminal and no XFS file: the kernel says ENOTTY
# (25), the filter EPERM (1).  socketpair() of AF_VSOCK is EOPNOTSUPP (95)
# in the kernel, EAFNOSUPPORT (97) from the filter.  A clone that gets
# through is a fork: the child leaves at once.
PROBE='
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
L = ctypes.c_long
HI = 1 << 32
null = os.open("/dev/null", os.O_RDONLY)
def sc(name, nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(L(nr), *[L(a) for a in args])
    if r == 0 and name.startswith("clone"):
        os._exit(0)
    e = ctypes.get_errno() if r < 0 else 0
    if r > 0 and not name.startswith("clone"):
        os.close(r)
    print("%s=%d" % (name, e))
sv = (ctypes.c_int * 2)()
buf = ctypes.create_string_buffer(256)
sc("socket_vsock", 41, 40, 1, 0)
sc("socket_vsock_hi", 41, HI | 40, 1, 0)
sc("socketpair_vsock_hi", 53, HI | 40, 1, 0, ctypes.addressof(sv))
sc("tiocsti_hi", 16, null, HI | 0x5412, ctypes.addressof(buf))
sc("tioclinux_hi", 16, null, HI | 0x541C, ctypes.addressof(buf))
sc("xfs_swapext_hi", 16, null, HI | 0xC0C0586D, ctypes.addressof(buf))
sc("xfs_swapext96_hi", 16, null, HI | 0xC060586D, ctypes.addressof(buf))
sc("personality_hi", 135, HI | 0x0400000)
sc("clone_newuser_hi", 56, HI | 0x10000000 | 17, 0, 0, 0, 0)
sc("unshare_newuser_hi", 272, HI | 0x10000000)
'
WANT='socket_vsock=97
socket_vsock_hi=97
socketpair_vsock_hi=97
tiocsti_hi=1
tioclinux_hi=1
xfs_swapext_hi=1
xfs_swapext96_hi=1
personality_hi=1
clone_newuser_hi=1
unshare_newuser_hi=1'

# Without vsock in the host kernel socket() fails with EAFNOSUPPORT with
# or without the filter, and the vsock probes prove nothing.
vsock=$(python3 -c 'import socket; socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM); print(1)' 2>/dev/null)
[ "$vsock" = 1 ] || modprobe vsock 2>/dev/null
vsock=$(python3 -c 'import socket; socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM); print(1)' 2>/dev/null)

container=1
[ -e "$TOP/backends/container.so" ] && [ -x "$TOP/build/libexec/container-init" ] || container=
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null
grep -qw overlay /proc/filesystems || container=

plan 8

check() {
	local what=$1 got=$2
	if [ "$vsock" = 1 ]; then
		is "$got" "$WANT" "$what: every argument rule holds with the upper 32 bits set"
	else
		skip "$what: the host kernel has no AF_VSOCK"
	fi
}

start_dsecd --set backends=fncall,container || bail "dsecd did not start"
run dsec-run --backend fncall --runtime python3 -c "$PROBE"
check "fncall python3" "$OUT"
run dsec-run --backend fncall --runtime sh -- python3 -c "$PROBE"
check "fncall sh (python3 executed)" "$OUT"
# The probes left nothing bound on the host's vsock: it can still bind
# any port (a leaked bind holds the port the host then cannot take).
if [ "$vsock" = 1 ]; then
	run python3 -c 'import socket
s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
s.bind((socket.VMADDR_CID_ANY, 7101)); print("bound")'
	is "$OUT" "bound" "the host binds its vsock port after the probes"
else
	skip "the host kernel has no AF_VSOCK"
fi
if [ -n "$container" ]; then
	run dsec-run --backend container -- python3 -c "$PROBE"
	check "container (user namespace)" "$OUT"
	# A sandbox made with --deny-syscall compiles its own filter.
	run dsec-run --backend container --deny-syscall acct -- python3 -c "$PROBE"
	check "container with its own seccomp_deny" "$OUT"
else
	skip "needs the container backend and overlayfs"
	skip "needs the container backend and overlayfs"
fi
stop_dsecd

if [ -n "$container" ]; then
	start_dsecd --set backends=container --set container.userns=false ||
		bail "dsecd did not start"
	run dsec-run --backend container -c 'cat /proc/self/uid_map'
	is "$(echo $OUT)" "0 0 4294967295" "container.userns=false: no user namespace"
	run dsec-run --backend container -- python3 -c "$PROBE"
	check "container (no user namespace)" "$OUT"
	run dsec-run --backend container --deny-syscall acct -- python3 -c "$PROBE"
	check "container (no user namespace) with its own seccomp_deny" "$OUT"
	stop_dsecd
else
	skip "needs the container backend and overlayfs"
	skip "needs the container backend and overlayfs"
	skip "needs the container backend and overlayfs"
fi
