#!/bin/bash
# Hashes of declared files before and after (rlcoord/watch.c, guard (b)):
# a create's watch files are hashed before its reply, so before any command
# of the agent; watched and grade report each file's hash then and now and
# whether it changed (edited, replaced, removed, planted); the daemon's own
# reads are not entries of the trajectory; bad watch lists get stable codes.
. "$(dirname "$0")/lib.sh"

need_container
need_cmd dsecctl
need_cmd sha256sum
/usr/bin/python3 -c 'import msgpack' 2>/dev/null || skip_all "needs python3-msgpack"
plan 15

mk_small_root "$T/base" sh cat ln rm truncate
mkdir -p "$T/grader/tests"
mk_small_root "$T/grader" sh cat
echo "expected = 42" > "$T/base/etc/task.conf"
echo "same" > "$T/base/etc/alias.conf"
head -c 3000000 /dev/urandom > "$T/base/data/big.bin"	# read in parts
echo 'test -f /etc/task.conf && echo PASS' > "$T/grader/tests/check.sh"
export DSEC_FS3_STORE="$T/state/fs3"
mkdir -p "$T/state"
dsecctl image import --tag task:1 "$T/base" >/dev/null || bail "cannot import the task image"
dsecctl image import --tag grader:1 "$T/grader" >/dev/null || bail "cannot import the grader"
# A small max_frame: big.bin takes several reads of at most a reply each.
start_dsecd --set backends=container --set max_frame=1048576 --set output_cap=65536 || bail "dsecd did not start"

run timeout 120 helper-py - "$DSEC_HOST" <<'PY'
import asyncio, json, sys, dsec
W = ["/etc/task.conf", "/bin/sh", "/data/planted", "/data/big.bin", "/etc", "/data/gone",
     "/etc/alias.conf"]
async def main():
    res = {}
    async with dsec.AsyncClient(sys.argv[1]) as c:
        sb = await c.create(backend="container", image="task:1", trajectory=True, watch=W,
                            grade_layers=["grader:1"])
        w = {e["path"]: e for e in await sb.watched()}
        res["before_conf"] = w["/etc/task.conf"]["before"]
        res["before_big"] = w["/data/big.bin"]["before"]
        res["quiet"] = " ".join(str(e["changed"]) for e in w.values())
        before_alias = w["/etc/alias.conf"]["before"]
        res["dir"] = w["/etc"]["before"]
        res["absent"] = str(w["/data/planted"]["before"])
        await sb.write_file("/etc/task.conf", "expected = 41\n")
        await sb.write_file("/data/planted", "x")
        # A link to a copy of itself, and a sparse 1 GiB file (not read: too large).
        r = await sb.exec(["sh", "-c", "cat /etc/alias.conf > /etc/alias.copy && rm /etc/alias.conf"
                           " && ln -s /etc/alias.copy /etc/alias.conf && truncate -s 1G /data/big.bin"
                           " && ln -s \"$(printf 'x\\377')\" /data/gone"])
        res["link_rc"] = f"{r.exit_code} {r.stderr.strip()}"
        sh = await sb.read_file("/bin/sh")
        await sb.write_file("/bin/sh", bytes(sh) + b"\n")
        w = {e["path"]: e for e in await sb.watched()}
        res["changed"] = " ".join(p for p, e in w.items() if e["changed"])
        res["alias"] = f'{w["/etc/alias.conf"]["after"]} {w["/etc/alias.conf"]["before"] == before_alias}'
        res["big"] = w["/data/big.bin"]["after"]
        res["gone"] = w["/data/gone"]["after"]
        res["after_conf_differs"] = w["/etc/task.conf"]["after"] != w["/etc/task.conf"]["before"]
        r = await c.call("grade", {"id": sb.id, "argv": ["/bin/sh", "/tests/check.sh"]}, wait=120)
        res["grade_changed"] = " ".join(e["path"] for e in r["watched"] if e["changed"])
        ops = [e["op"] for e in await sb.trajectory()]
        res["reads_logged"] = ops.count("file_read")
        res["watched_logged"] = ops.count("watched")
        for bad, key in (([ "etc/x"], "relative"), (["/x"] * 65, "many")):
            try:
                await c.create(backend="container", image="task:1", watch=bad)
            except dsec.DsecError as e:
                res[key] = e.code
        res["left"] = len(await c.list())
    print(json.dumps(res, separators=(",", ":")))
asyncio.run(main())
PY
[ "$RC" = 0 ] || printf '%s\n' "$OUT" | sed 's/^/# /' >&2
is "$(get before_conf)" "sha256:$(sha256sum < "$T/base/etc/task.conf" | cut -d' ' -f1)" \
	"a watch file's hash is taken when the sandbox is made"
is "$(get before_big)" "sha256:$(sha256sum < "$T/base/data/big.bin" | cut -d' ' -f1)" \
	"... also of a file longer than a reply (read in parts)"
is "$(get quiet)" "False False False False False False False" "nothing changed before the agent ran"
is "$(get absent) $(get dir)" "None error:invalid" "a missing file is None, a directory an error"
is "$(get changed)" "/etc/task.conf /bin/sh /data/planted /data/big.bin /data/gone /etc/alias.conf" \
	"an edited file, a replaced /bin/sh, a planted file, a grown one and links are each changed"
is "$(get gone)" "symlink:x$(printf '\357\277\275')" "... a link whose target is not UTF-8 comes back as valid text"
is "$(get link_rc)" "0 " "the agent made a link and a sparse file"
is "$(get alias)" "symlink:/etc/alias.copy True" "... a file replaced by a link to a copy of itself is a link"
is "$(get big)" "error:too_large" "... a sparse 1 GiB file is too large to hash (and is not read)"
is "$(get after_conf_differs)" true "... with the hash of now"
is "$(get grade_changed)" "$(get changed)" "grade reports the same"
is "$(get reads_logged)" 1 "the trajectory has the agent's read of /bin/sh, not the daemon's reads"
is "$(get watched_logged)" 2 "... and each watched is"
is "$(get relative) $(get many)" "invalid invalid" "a relative path, or more than 64: invalid"
is "$(get left)" 1 "no sandbox made by a refused create"
