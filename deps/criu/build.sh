#!/bin/sh
# deps/criu/build.sh CACHE PREFIX - the criu dsec's container backend may use
# to fork a sandbox with its processes: Debian's criu source package, built
# as one static-free program, PREFIX/sbin/criu.  Optional: nothing else is
# built with it, and what needs it skips where it is missing (`make criu`).
#
# Why not Debian 12's own criu: its 3.17.1 stops at start on kernels from
# 6.13 on, which split the vDSO's data pages into [vvar] and [vvar_vclock]
# (Linux e93d2521b27f, "x86/vdso: Split virtual clock pages into dedicated
# mapping"): `criu check` says "vdso: Unexpected rt vDSO area bounds" and
# nothing can be dumped.  criu learnt the new layout in 4.1 (its PR #2539).
# Debian 12's source package cannot be rebuilt with that fix from the
# mirror this project uses: its criu_3.17.1.orig.tar.xz is not there (the
# .dsc and .debian.tar.xz are), so the build takes criu 4.2.1, Debian's
# source package of unstable, whose upstream tarball the mirror has; its
# .dsc pins that tarball's SHA-256.  It passes `criu check` on 6.18 as it
# is.  Its .debian.tar.xz is not on the mirror either and holds no fix
# criu needs here (packaging, man pages, the Python module).
#
# Ours (deps/criu/*.patch, in order): 0001 lets a tree whose network
# namespace another user namespace owns (the backend's pool: the host's)
# be dumped and restored with that namespace external, a new one given at
# restore (t/3200); 0005 adds NO_NFTABLES=1, as criu has NO_GNUTLS=1.
#
# Built without GnuTLS (the page server's TLS) and libnftables (the
# nftables network lock): dsec uses neither, and the two bring 14 of the
# 24 libraries criu would load at each start.  Without them `criu
# --version` took 4.3 ms against 9.6, and a fork of 16 with processes
# (tools/bench-rl.sh) 0.80-0.86 s against 1.05-1.14 s on one machine.
#
# Built with criu's own flags, not dpkg-buildflags': its parasite and
# restorer blobs run inside the dumped process and must not get
# -fstack-protector or _FORTIFY_SOURCE.  Debian 12's packages it needs:
# libbsd-dev libcap-dev libnet1-dev libnl-3-dev libprotobuf-c-dev
# libprotobuf-dev protobuf-c-compiler protobuf-compiler uuid-dev pkg-config
# (the Makefile's CRIU_DEB_PACKAGES).
#
# The files are fetched once into CACHE (kept by `make clean`) from
# CRIU_MIRROR and checked against deps/criu/sources, as deps/nng/build.sh
# does.  Runs in the source tree's top directory.
set -eu

cache=$1
prefix=$2
here=$(cd "$(dirname "$0")" && pwd)
mirror=${CRIU_MIRROR:-http://deb.debian.org/debian/pool/main/c/criu}
jobs=${CRIU_JOBS:-2}

. "$here/../fetch.sh"
fetch_sources "$cache" "$mirror" "$here/sources" CRIU_MIRROR

orig=$(awk '!/^#/ && /orig\.tar/ { print $2 }' "$here/sources")
dsc=$(awk '!/^#/ && /\.dsc$/ { print $2 }' "$here/sources")
# The tarball's sum as the .dsc gives it, checked again here so that
# sources cannot pin a tarball its .dsc does not name.
want=$(awk -v f="$orig" '$3 == f && length($1) == 64 { print $1 }' "$cache/$dsc")
echo "$want  $cache/$orig" | sha256sum -c --status || {
	echo "$orig is not the tarball $dsc names" >&2
	exit 1
}
src=$prefix/src
rm -rf "$prefix"
mkdir -p "$src" "$prefix/sbin"
tar -xJf "$cache/$orig" -C "$src" --strip-components=1
for p in "$here"/*.patch; do
	[ -f "$p" ] || continue
	patch -s -p1 -d "$src" < "$p"
done
# criu alone: not crit, libcriu, the plugins or the man pages.  Its
# Makefile reads CFLAGS and friends from the environment: clear ours.
env -u CFLAGS -u CPPFLAGS -u LDFLAGS -u MAKEFLAGS -u MFLAGS \
	make -C "$src" -j "$jobs" NO_GNUTLS=1 NO_NFTABLES=1 criu >"$prefix/build.log" 2>&1 ||
	{ tail -20 "$prefix/build.log" >&2; exit 1; }
cp "$src/criu/criu" "$prefix/sbin/criu"
rm -rf "$src"
