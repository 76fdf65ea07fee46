#!/bin/bash
# v2-vm.sh - `make check-v2`: test files on a pure cgroup v2 host, in a VM.
#
# Production hosts mount only cgroup v2; this machine's cgroups are hybrid
# (the controllers on v1).  This boots Debian's own kernel (linux-image-amd64,
# 6.1) in QEMU with cgroup_no_v1=all, so cgroup2 at /sys/fs/cgroup has every
# controller, and runs the named test files there: the guest's root is this
# machine's / read-only over 9p (the same build, tools and packages), /tmp
# an ext4 disk of its own (a file here, as a host's /var/lib would be; ext4
# allows the idmapped mounts user namespaces need on 6.1, tmpfs not before
# 6.3), the rest of what is written tmpfs.  Without KVM QEMU emulates the
# CPU (TCG): slow, minutes a file.  Prints each file's TAP and a summary;
# exits 1 when a test failed or the guest did not finish.
#
#   V2_TESTS   test files (default: the cgroup, container, image and fncall basics)
#   V2_CONF    dsecd.conf lines for the guest, ';'-separated (default none)
#   V2_MEM     guest memory in MiB (default 4096)
#   V2_TIMEOUT seconds for the whole guest (default 3600)
#   V2_ACCEL   QEMU accelerator (default tcg; kvm where it can boot a guest)
#
# Needs root, qemu-system-x86_64, a kernel and its modules in /boot and
# /lib/modules (make deps-v2 installs them), busybox (static).
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
TESTS=${V2_TESTS:-"t/c/3000-fncall.t t/3100-container-daemon.t t/3101-container-pause.t t/c/3102-cgroup-freeze.t t/c/3190-container-usage.t t/3191-usage-op.t t/3192-container-cgroup-reuse.t t/c/2002-fs3-mount.t t/3130-container-image.t t/3140-container-userns.t t/4008-reset-fork.t"}
skip() { echo "1..0 # SKIP $*"; exit 0; }
[ "$(id -u)" = 0 ] || skip "needs root"
command -v qemu-system-x86_64 >/dev/null || skip "needs qemu-system-x86_64 (make deps-v2)"
BB=$(command -v busybox) || skip "needs busybox (make deps-v2)"
file -L "$BB" 2>/dev/null | grep -q 'statically linked' || skip "needs a static busybox (busybox-static)"
KIMG=$(ls /boot/vmlinuz-* 2>/dev/null | sort -V | tail -1)
[ -n "$KIMG" ] || skip "needs a kernel in /boot (make deps-v2: linux-image-amd64)"
K=${KIMG#/boot/vmlinuz-}
[ -d "/lib/modules/$K" ] || skip "needs /lib/modules/$K"

W=$(mktemp -d "${TMPDIR:-/tmp}/dsec-v2.XXXXXX")
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/ir/bin" "$W/ir/mod" "$W/ir/newroot" "$W/ir/proc" "$W/ir/dev"
cp "$BB" "$W/ir/bin/busybox"
# The 9p root's modules and theirs, in the order they load.
mods=$(for m in virtio_pci 9pnet_virtio 9p; do modprobe -S "$K" --show-depends "$m"; done |
	awk '$1 == "insmod" && !seen[$2]++ { print $2 }')
order=
for f in $mods; do
	n=$(basename "$f")
	case $f in *.xz) xz -dc "$f" > "$W/ir/mod/${n%.xz}"; n=${n%.xz} ;; *) cp "$f" "$W/ir/mod/$n" ;; esac
	order="$order $n"
done
cat > "$W/ir/init" <<EOF
#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t devtmpfs dev /dev
for m in$order; do /bin/busybox insmod /mod/\$m || echo "insmod \$m failed"; done
/bin/busybox mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=524288,cache=loose hostroot /newroot ||
	{ echo "cannot mount the host's root"; /bin/busybox poweroff -f; }
/bin/busybox umount /proc
/bin/busybox mount --move /dev /newroot/dev
exec /bin/busybox switch_root /newroot $W/guest
EOF
chmod +x "$W/ir/init"
(cd "$W/ir" && find . | cpio -o -H newc 2>/dev/null | gzip -1) > "$W/initrd.gz"

# The guest's init: mounts, then each test file, then power off.
mkdir -p /etc/dsec	# (where the guest's dsecd.conf goes: an empty directory here)
printf '%s\n' "${V2_CONF:-}" | tr ';' '\n' > "$W/dsecd.conf"
cat > "$W/guest" <<EOF
#!/bin/sh
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t cgroup2 cgroup2 /sys/fs/cgroup
modprobe virtio_blk; modprobe ext4
# (a host's boot makes /dev/loop-control, whose open loads loop: kmod-static-nodes)
modprobe loop
for i in \$(seq 50); do [ -b /dev/vda ] && break; sleep 0.1; done
mount -t ext4 /dev/vda /tmp || mount -t tmpfs tmpfs /tmp
for d in /run /var/tmp /root /var/lib /var/log /var/cache /etc/dsec; do mount -t tmpfs tmpfs \$d; done
mkdir -p /dev/pts /dev/shm; mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /dev/shm
# (what a host's boot links in /dev: bash's <(...) opens /dev/fd/N)
ln -sf /proc/self/fd /dev/fd; ln -sf /proc/self/fd/0 /dev/stdin
ln -sf /proc/self/fd/1 /dev/stdout; ln -sf /proc/self/fd/2 /dev/stderr
cp $W/dsecd.conf /etc/dsec/dsecd.conf
ip link set lo up
echo "v2 guest: kernel \$(uname -r), cgroup2 controllers: \$(cat /sys/fs/cgroup/cgroup.controllers), /tmp on \$(stat -f -c %T /tmp)"
cd $TOP
for t in $TESTS; do
	echo "=== \$t"
	if head -c2 "\$t" | grep -q '#!'; then timeout 1200 bash "\$t"; else timeout 1200 "\$t"; fi 2>&1
	echo "=== \$t exit \$?"
done
echo "=== guest done"
/bin/busybox poweroff -f
EOF
chmod +x "$W/guest"
truncate -s 8G "$W/disk.img"
mkfs.ext4 -q -F "$W/disk.img"

echo "# booting $KIMG with cgroup_no_v1=all (QEMU $(qemu-system-x86_64 --version | head -1 | awk '{print $4}'))"
timeout "${V2_TIMEOUT:-3600}" qemu-system-x86_64 -machine q35,accel=${V2_ACCEL:-tcg} -cpu max -smp 2 \
	-m "${V2_MEM:-4096}" -nographic -no-reboot -kernel "$KIMG" -initrd "$W/initrd.gz" \
	-append "console=ttyS0 quiet panic=-1 cgroup_no_v1=all" \
	-virtfs local,path=/,mount_tag=hostroot,security_model=passthrough,readonly=on,multidevs=remap \
	-drive file="$W/disk.img",format=raw,if=virtio,cache=unsafe 2>&1 |
	tr -d '\r' | sed -e 's/\x1b\[[0-9;?]*[a-zA-Z]//g' -e 's/\x1bc//g' | sed -n '/v2 guest:/,$p' | tee "$W/out"
fail=$(grep -c '^not ok' "$W/out")
done_=$(grep -c '^=== guest done' "$W/out")
printf '\ncheck-v2: %s test files, %s ok, %s not ok, %s skipped%s\n' "$(grep -c '^=== .* exit' "$W/out")" \
	"$(grep -c '^ok' "$W/out")" "$fail" "$(grep -c '^ok .*# SKIP' "$W/out")" \
	"$([ "$done_" = 1 ] || echo ', the guest did not finish')"
[ "$fail" = 0 ] && [ "$done_" = 1 ]
