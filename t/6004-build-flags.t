#!/bin/bash
# The Makefile's flags, in a copy of the Makefile and lib/ (this tree's build
# is left alone): the user's CFLAGS and CPPFLAGS come after the project's and
# drop none of them; objects are rebuilt when the compiler or the flags
# change and only then (build/DSEC-CFLAGS); dsec.pc follows PREFIX
# (build/DSEC-PREFIX) and has lib/dsec.h's version; objects of sub-folders
# are built and their header dependencies followed.
. "$(dirname "$0")/lib.sh"

need_cmd make
need_cmd cc
need_cmd pkg-config

plan 23

W=$T/tree
mkdir -p "$W/lib/sub" "$W/backends"
cp "$TOP/Makefile" "$W/"
cp "$TOP"/lib/*.[ch] "$W/lib/"
# NNG=system: no bundled nng to build; the objects here do not include nng.h.
m() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -C "$W" NNG=system "$@" 2>&1; }
mtime() { stat -c %y "$W/$1"; }

run m build/lib/err.o
like "$RC:$OUT" "^0:.*CC +build/lib/err.o" "an object builds"
run m build/lib/err.o
is "$RC:$(printf '%s' "$OUT" | grep -c 'CC ')" "0:0" "... and is not rebuilt with the same flags"
before=$(mtime build/DSEC-CFLAGS)
run m build/lib/err.o
is "$(mtime build/DSEC-CFLAGS)" "$before" "build/DSEC-CFLAGS is not rewritten when the flags are the same"

run m V=1 CFLAGS=-O0 CPPFLAGS=-DUSER_DEFINE build/lib/err.o
is "$RC" 0 "make CFLAGS=-O0 CPPFLAGS=... builds"
like "$OUT" "new CFLAGS" "... says the flags changed"
cmd=$(printf '%s\n' "$OUT" | grep -- '-c -o build/lib/err.o')
for f in -std=gnu11 -fPIC -MMD -Wall -Wextra -Ilib -D_GNU_SOURCE; do
	like " $cmd " " $f " "... the compile keeps $f"
done
like "$cmd" ' -O2 .* -O0 ' "... the user's -O0 comes after the project's -O2, so it wins"
like "$cmd" ' -DUSER_DEFINE ' "... and the user's CPPFLAGS are there"
run m CFLAGS=-O0 CPPFLAGS=-DUSER_DEFINE build/lib/err.o
is "$(printf '%s' "$OUT" | grep -c 'CC ')" "0" "... not rebuilt again with the same flags"
run m build/lib/err.o
like "$OUT" "CC +build/lib/err.o" "back to the default flags rebuilds"

printf 'int x(void);\nint x(void) { return 0; }\n' > "$W/backends/x.c"
run m -n V=1 CFLAGS=-O0 build/backends/x.o
like "$OUT" '-fvisibility=hidden.*-O0|-O0.*-fvisibility=hidden' \
	"a target's own flags (backends: hidden visibility) stay under the user's CFLAGS"
run m build/backends/x.o
run m build/lib/err.o
is "$RC:$(printf '%s' "$OUT" | grep -c 'CC ')" "0:0" \
	"an object with flags of its own built first does not change the flags of the others"

# A sub-folder: built by the one pattern rule, its dependency file read.
printf '#include "../err.h"\nint sub_y(void);\nint sub_y(void) { return DSEC_E_INTERNAL; }\n' > "$W/lib/sub/y.c"
run m build/lib/sub/y.o
like "$RC:$OUT" "^0:.*CC +build/lib/sub/y.o" "an object of a sub-folder builds"
# Header after object by more than any file system's clock step (a
# touch in the same tick as the compile would give both one mtime).
sleep 1
touch "$W/lib/err.h"
run m build/lib/sub/y.o
like "$OUT" "CC +build/lib/sub/y.o" "... and is rebuilt when a header it includes changes"

run m lib/dsec.pc
is "$(grep '^prefix=' "$W/lib/dsec.pc")" "prefix=/usr/local" "dsec.pc has the default prefix"
run m PREFIX=/opt/dsec lib/dsec.pc
is "$(grep '^prefix=' "$W/lib/dsec.pc")" "prefix=/opt/dsec" "... and is made again when PREFIX changes"
version=$(sed -n 's/^#define DSEC_VERSION "\(.*\)"$/\1/p' "$TOP/lib/dsec.h")
is "$(grep '^Version:' "$W/lib/dsec.pc")" "Version: $version" "dsec.pc has lib/dsec.h's version"
