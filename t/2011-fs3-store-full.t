#!/bin/bash
# A full store (a small tmpfs): every import that runs out of room says so
# ("no space left on device") and names where, at each step (the check
# before mkfs.erofs, extraction, mkfs.erofs itself, chunks), and leaves no
# staging behind.
. "$(dirname "$0")/lib.sh"

need_root
need_cmd dsecctl
need_cmd mkfs.erofs
need_cmd python3

S="$T/store"
mkdir -p "$S"
mount -t tmpfs -o size=4m dsec-test "$S" 2>/dev/null || skip_all "cannot mount a tmpfs"
trap 'umount -l "$S" 2>/dev/null; _tap_cleanup' EXIT
export DSEC_FS3_STORE="$S"

plan 7

# A tree of 6 MiB of incompressible data, and the same as a tar.
mkdir -p "$T/big/d"
head -c 3M /dev/urandom > "$T/big/a"
head -c 3M /dev/urandom > "$T/big/d/b"
tar -C "$T/big" -cf "$T/big.tar" .

run dsecctl image import "$T/big"
like "$RC:$OUT" "^1:.*cannot build an erofs image of '$T/big' in '$S/tmp/import-[^']*': No space left on device" \
	"a tree larger than the store's free space is refused before mkfs.erofs, naming where"

run dsecctl image import "$T/big.tar"
like "$RC:$OUT" "^1:.*cannot extract '[^']*' from '$T/big.tar' to '$S/tmp/import-[^']*': No space left on device" \
	"a tar that fills the store while it is extracted says so, naming the file"

# Many small files: the check lets them through, mkfs.erofs fills the store.
python3 - "$T/small" <<'EOF'
import os, sys
os.makedirs(sys.argv[1])
for i in range(2000):
    with open(os.path.join(sys.argv[1], "f%d" % i), "wb") as f:
        f.write(os.urandom(3000))
EOF
run dsecctl image import "$T/small"
like "$RC:$OUT" "^1:.*cannot build an erofs image of '$T/small' in '$S/tmp/import-[^']*': No space left on device \(mkfs.erofs exited 1" \
	"mkfs.erofs failing on a full store names the cause, not only its exit status"

# Holes: built chunked, mkfs.erofs fills the store with the data.
mkdir -p "$T/sparse"
truncate -s 200M "$T/sparse/holes"
head -c 5M /dev/urandom >> "$T/sparse/holes"
run dsecctl image import "$T/sparse"
like "$RC:$OUT" "^1:.*No space left on device" "... and so does a chunked build of a sparse tree ($OUT)"

# Room for the image, not for its chunks too (origin and cache).
umount "$S"
mount -t tmpfs -o size=8m dsec-test "$S"
run dsecctl image import "$T/big"
# The cache's write-through may fail first: a warning, logged before the
# error (whether it comes depends on which file fills the store).
OUT=$(printf '%s\n' "$OUT" | grep -v ' warn: cannot cache chunk ')
like "$RC:$OUT" "^1:.*cannot store a chunk of '[^']*' in '$S/origin': No space left on device" \
	"a store that fills with chunks says so, naming the origin"

ok $(ls -A "$S/tmp" | grep -q . ; [ $? = 1 ]; echo $?) "no staging is left behind"

# Room at last: the same tree imports.
umount "$S"
mount -t tmpfs -o size=64m dsec-test "$S"
run dsecctl image import "$T/big"
is "$RC" 0 "with room, the same tree imports ($OUT)"
