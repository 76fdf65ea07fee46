#!/bin/bash
# make install DESTDIR=...: the README's C example, taken from README itself,
# builds through pkg-config against the staged install and against the tree
# uninstalled (lib/dsec-uninstalled.pc), and runs against a private dsecd;
# the .pc's version is the programs' version; make uninstall removes every
# file install put, and dsec's own directories.
. "$(dirname "$0")/lib.sh"

need_fncall
need_cmd make
need_cmd pkg-config
for f in lib/libdsec.so lib/libdsec.so.1 lib/dsec.pc lib/dsec-uninstalled.pc; do
	[ -e "$TOP/$f" ] || skip_all "needs $f (make)"
done

plan 18

CC=${CC:-cc}
# The tree's make, not the caller's: `make check` runs prove with its own
# MAKEFLAGS (jobserver, command-line variables).  -o all: install what is
# built, never rebuild it from a test.  The paths are the ones dsec.pc was
# made with.
pcvar() { pkg-config --variable="$1" "$TOP/lib/dsec.pc"; }
PREFIX=$(pcvar prefix)
LIBDIR=$(pcvar libdir)
INCLUDEDIR=$(pcvar includedir)
tree_make() {
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory -C "$TOP" -o all \
		PREFIX="$PREFIX" LIBDIR="$LIBDIR" INCLUDEDIR="$INCLUDEDIR" DESTDIR="$T/dest" "$@"
}

# The example: the indented block after README's heading "The C client".
awk '/^The C client$/ { sec = 1; next }
	sec && /^    / { code = 1; print substr($0, 5); next }
	sec && code && /^$/ { print ""; next }
	sec && code { exit }' "$TOP/README" > "$T/hello.c"
like "$(cat "$T/hello.c")" '^#include <dsec/dsec.h>$' "README has a C example that includes <dsec/dsec.h>"
like "$(cat "$T/hello.c")" 'pkg-config --cflags --libs dsec' "... and says to build it through pkg-config"

run tree_make install
is "$RC" 0 "make install DESTDIR= installs"
[ "$RC" = 0 ] || diag "$OUT"
ok "$(test -x "$T/dest$PREFIX/sbin/dsecd" && test -e "$T/dest$INCLUDEDIR/dsec/dsec.h" &&
	test -e "$T/dest$LIBDIR/pkgconfig/dsec.pc"; echo $?)" "... the daemon, the header and dsec.pc under DESTDIR"
ok "$(find "$T/dest" -path '*/dsec/backends/*.so' | grep -q . ; echo $?)" "... and the backends"

# Staged: pkg-config finds dsec.pc under DESTDIR and puts DESTDIR before the paths.
staged() {
	PKG_CONFIG_PATH="$T/dest$LIBDIR/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$T/dest" pkg-config "$@"
}
run staged --cflags --libs dsec
like "$RC:$OUT" "^0:.*-I$T/dest$INCLUDEDIR.*-L$T/dest$LIBDIR" "pkg-config gives the staged include and library paths"
run "$CC" $SAN_CFLAGS -Wall -Wextra -Werror -o "$T/hello" "$T/hello.c" $(staged --cflags --libs dsec)
san_quiet
is "$RC:$OUT" "0:" "the README example compiles cleanly against the staged install"

start_dsecd --set backends=fncall
run env LD_LIBRARY_PATH="$T/dest$LIBDIR" "$T/hello"
is "$RC:$OUT" "0:hello" "... and runs: the daemon echoes hello"
like "$(LD_LIBRARY_PATH="$T/dest$LIBDIR" ldd "$T/hello")" "libdsec\.so\.1 => $T/dest$LIBDIR/libdsec\.so\.1" \
	"... with the staged libdsec"

version=$(dsecd --version | awk '{ print $2 }')
like "$version" '^[0-9]+\.[0-9]+\.[0-9]+' "dsecd --version prints a version"
is "$(staged --modversion dsec)" "$version" "dsec.pc has the version dsecd prints"
is "$(dsec-run --version | awk '{ print $2 }')" "$version" "... and dsec-run"

# Uninstalled: lib/ on PKG_CONFIG_PATH, pkg-config takes dsec-uninstalled.pc.
run env PKG_CONFIG_PATH="$TOP/lib" pkg-config --cflags --libs dsec
like "$RC:$OUT" "^0:.*-I$TOP/build/include.*-L$TOP/lib" "the uninstalled dsec.pc points into the tree"
run "$CC" $SAN_CFLAGS -Wall -Wextra -Werror -o "$T/hello-tree" "$T/hello.c" \
	$(PKG_CONFIG_PATH="$TOP/lib" pkg-config --cflags --libs dsec)
san_quiet
is "$RC:$OUT" "0:" "the README example compiles against the tree"
run env LD_LIBRARY_PATH="$TOP/lib" "$T/hello-tree"
is "$RC:$OUT" "0:hello" "... and runs with LD_LIBRARY_PATH=lib"

run tree_make uninstall
is "$RC" 0 "make uninstall DESTDIR= runs"
[ "$RC" = 0 ] || diag "$OUT"
is "$(find "$T/dest" ! -type d)" "" "... and removes every file install put"
is "$(find "$T/dest" -name '*dsec*')" "" "... and dsec's own directories"
