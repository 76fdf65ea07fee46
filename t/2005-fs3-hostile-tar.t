#!/bin/bash
# Hostile tars: nothing they hold may write outside the staging tree, by
# "..", by an absolute path, through a symlink, a hard link or a whiteout,
# nor make an image archive read files outside it.
. "$(dirname "$0")/lib.sh"

need_root
need_cmd dsecctl
need_cmd mkfs.erofs
need_cmd python3

plan 17

export DSEC_FS3_STORE="$T/store"
mkdir -p "$T/outside"
echo "keep me" > "$T/outside/victim"

# mktar NAME ENTRY...: ENTRY is f:PATH (file), d:PATH, l:PATH:TARGET
# (symlink) or h:PATH:TARGET (hard link), optionally followed by
# "|mode=0777,uid=4242,pax=KEY=VALUE" (options, pax headers repeated).
mktar() {
	python3 - "$T/$1" "${@:2}" <<'EOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
    for e in sys.argv[2:]:
        e, _, opts = e.partition("|")
        kind, rest = e.split(":", 1)
        i = tarfile.TarInfo(rest.split(":")[0])
        i.mtime = 1700000000
        for o in filter(None, opts.split(",")):
            k, v = o.split("=", 1)
            if k == "mode":
                i.mode = int(v, 8)
            elif k == "uid":
                i.uid = i.gid = int(v)
            else:
                i.pax_headers.update([v.split("=", 1)])
        if kind == "f":
            t.addfile(i, io.BytesIO(b"x"))
            continue
        if kind == "d":
            i.type = tarfile.DIRTYPE
        elif kind == "l":
            i.type, i.linkname = tarfile.SYMTYPE, rest.split(":", 1)[1]
        else:
            i.type, i.linkname = tarfile.LNKTYPE, rest.split(":", 1)[1]
        t.addfile(i)
EOF
}

mktar dotdot.tar f:ok f:../../evil
run dsecctl image import "$T/dotdot.tar"
like "$RC:$OUT" "^1:.*entry '../../evil' leaves the tree" "an entry with '..' is refused"

# libarchive replaces the symlink by a directory of the tree (UNLINK).
mktar sym.tar "l:lnk:$T/outside" f:lnk/pwned
run dsecctl image import "$T/sym.tar"
ok $([ ! -e "$T/outside/pwned" ]; echo $?) "a file through a symlink stays in the tree"

mktar wh.tar "l:lnk:$T/outside" f:lnk/.wh.victim
run dsecctl image import "$T/wh.tar"
ok $([ "$RC" = 1 ] && [ -f "$T/outside/victim" ]; echo $?) "a whiteout through a symlink is refused ($OUT)"

mktar opq.tar "l:lnk:$T/outside" f:lnk/.wh..wh..opq
run dsecctl image import "$T/opq.tar"
like "$RC:$OUT" "^1:.*not a directory of the tree" "an opaque marker through a symlink is refused"

mktar hl.tar f:a "h:hl:../../../etc/hostname"
run dsecctl image import "$T/hl.tar"
like "$RC:$OUT" "^1:.*link '../../../etc/hostname' leaves the tree" "a hard link out of the tree is refused"

mktar hls.tar "l:lnk:$T/outside" "h:hl:lnk/victim"
run dsecctl image import "$T/hls.tar"
ok $([ "$RC" = 1 ] && [ "$(stat -c %h "$T/outside/victim")" = 1 ]; echo $?) \
	"a hard link through a symlink is refused ($OUT)"

mktar abs.tar d:/abs-fs3-test f:/abs-fs3-test/file
run dsecctl image import "$T/abs.tar"
ok $([ "$RC" = 0 ] && [ ! -e /abs-fs3-test ]; echo $?) "an absolute path lands inside the tree"

# A directory entry whose name leaves the tree is refused like a file's:
# it was taken for the tree's own root ("./") and its mode and owner
# applied to the layer's root.
for e in "d:../../../etc|mode=0777,uid=4242" "d:.." "d:/.." "d:a/../../b" "d:./../x"; do
	name=${e%%|*}
	name=${name#d:}
	mktar dir.tar f:f "$e"
	run dsecctl image import "$T/dir.tar"
	like "$RC:$OUT" "^1:.*entry '$name/' leaves the tree" "a directory entry '$name' is refused"
done

mktar hlroot.tar f:a "h:hl:."
run dsecctl image import "$T/hlroot.tar"
like "$RC:$OUT" "^1:.*link '.' leaves the tree" "a hard link to the tree's root is refused"

# File flags (pax SCHILY.fflags) are not extracted: an immutable or
# append-only file would make the staging tree undeletable.
mktar flags.tar "f:imm|pax=SCHILY.fflags=schg" "f:app|pax=SCHILY.fflags=sappnd" \
	"d:dir|pax=SCHILY.fflags=schg" "f:dir/in|pax=SCHILY.fflags=uappnd"
run dsecctl image import "$T/flags.tar"
ok $([ "$RC" = 0 ] && ! ls "$T/store/tmp" | grep -q .; echo $?) \
	"a tar with file flags imports and leaves no staging behind ($OUT)"

# What a killed import left, made undeletable, goes at the next open.
mkdir -p "$T/store/tmp/import-stale/d"
echo x > "$T/store/tmp/import-stale/d/f"
if chattr +i "$T/store/tmp/import-stale/d/f" 2>/dev/null && chattr +a "$T/store/tmp/import-stale/d"; then
	run dsecctl image ls
	ok $([ ! -e "$T/store/tmp/import-stale" ]; echo $?) \
		"a killed import's staging goes at the next open, immutable files and all"
else
	skip "chattr +i does not work in $T"
fi

# An image archive whose manifest points through a symlink out of it.
mkdir -p "$T/dk/bbbb"
cp "$T/abs.tar" "$T/outside/layer.tar"
cp "$T/abs.tar" "$T/dk/bbbb/layer.tar"
ln -s "$T/outside" "$T/dk/aaaa"
echo '{"config":{}}' > "$T/dk/c.json"
echo '[{"Config":"c.json","Layers":["bbbb/layer.tar","aaaa/layer.tar"]}]' > "$T/dk/manifest.json"
tar -C "$T/dk" -cf "$T/dk.tar" .
run dsecctl image import "$T/dk.tar"
like "$RC:$OUT" "^1:.*layer 1 is not a file inside it" "a docker layer path through a symlink is refused"

ok $(ls "$T/store/tmp" | grep -q . ; [ $? = 1 ]; echo $?) "failed imports leave no staging behind"

# Leave nothing lib.sh cannot remove, whatever failed.
chattr -R -ia "$T/store" 2>/dev/null
