#!/bin/sh
# deps/nng/build.sh CACHE PREFIX [client] - the libnng dsec links: Debian 12's nng
# source package (1.5.2-2), its own patches, then ours (deps/nng/*.patch),
# built static with -fPIC and mbedTLS as Debian builds it, installed under
# PREFIX (PREFIX/include, PREFIX/lib/libnng.a).
#
# "client": the build libdsec.so and the tools link, with a fixed, small
# set of threads.  nng starts all of its threads when a program first
# uses it: by default 2 per CPU running callbacks (at most 16), one per
# CPU for timeouts (at most 256) and 4 name resolvers, besides its poller,
# timer and reaper; 13 threads on 2 CPUs, 87 on 64, made and torn down by
# every dsec-run and kept by every trainer.  A client has one connection
# and its own threads make most calls, so 2 + 1 + 1 are plenty: 7 in
# all.  dsecd keeps nng's defaults (it serves thousands of connections).
#
# Why: Debian's libnng 1.5.2 stops accepting on a listener for good once a
# client leaves during the SP handshake (nanomsg/nng#1518), so four bytes
# on dsecd's socket would stop a node.  The fix is upstream from 1.6.0.
# Ours (deps/nng/*.patch, in order): 0001 that fix; 0002 a pipe closed
# mid-transfer; 0003 a peer whose handshake fails no longer makes the
# listener back off 100 ms before its next accept (a client leaving ten
# times a second held every other one off the API).
#
# The source files are fetched once into CACHE (kept by `make clean`) from
# NNG_MIRROR and checked against the SHA-256 sums in deps/nng/sources, so a
# changed or truncated download never builds.  Runs in the source tree's
# top directory (the Makefile's).
set -eu

cache=$1
prefix=$2
variant=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
mirror=${NNG_MIRROR:-http://deb.debian.org/debian/pool/main/n/nng}
jobs=${NNG_JOBS:-2}

. "$here/../fetch.sh"
fetch_sources "$cache" "$mirror" "$here/sources" NNG_MIRROR

orig=$(awk '/orig\.tar/ { print $2 }' "$here/sources")
debian=$(awk '/debian\.tar/ { print $2 }' "$here/sources")
src=$prefix/src
rm -rf "$prefix"
mkdir -p "$src"
tar -xzf "$cache/$orig" -C "$src" --strip-components=1
tar -xJf "$cache/$debian" -C "$src"
# Debian's patches in the order of its series file (commented ones are
# not applied by Debian either), then ours.
while read -r p _; do
	case $p in ''|'#'*) continue ;; esac
	patch -s -p1 -d "$src" < "$src/debian/patches/$p"
done < "$src/debian/patches/series"
for p in "$here"/*.patch; do
	patch -s -p1 -d "$src" < "$p"
done

# Debian's compiler flags (hardening, -O2 -g) where dpkg-buildflags exists.
cflags="-O2 -g"
if command -v dpkg-buildflags >/dev/null 2>&1; then
	cflags="$(dpkg-buildflags --get CFLAGS) $(dpkg-buildflags --get CPPFLAGS)"
fi
case $variant in
'') ;;
client) cflags="$cflags -DNNG_NUM_TASKQ_THREADS=2 -DNNG_EXPIRE_THREADS=1 -DNNG_RESOLV_CONCURRENCY=1" ;;
*) echo "deps/nng/build.sh: unknown variant '$variant'" >&2; exit 2 ;;
esac
cmake -S "$src" -B "$prefix/cmake" -DCMAKE_BUILD_TYPE=None -DCMAKE_C_FLAGS="$cflags" \
	-DCMAKE_INSTALL_PREFIX="$(cd "$prefix" && pwd)" -DCMAKE_INSTALL_LIBDIR=lib \
	-DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
	-DNNG_ENABLE_TLS=ON -DNNG_TESTS=OFF -DNNG_TOOLS=OFF -DNNG_ENABLE_NNGCAT=OFF \
	>"$prefix/cmake.log" 2>&1 || { tail -20 "$prefix/cmake.log" >&2; exit 1; }
cmake --build "$prefix/cmake" -j "$jobs" >>"$prefix/cmake.log" 2>&1 ||
	{ tail -20 "$prefix/cmake.log" >&2; exit 1; }
cmake --install "$prefix/cmake" >>"$prefix/cmake.log" 2>&1 ||
	{ tail -20 "$prefix/cmake.log" >&2; exit 1; }
rm -rf "$src" "$prefix/cmake"
