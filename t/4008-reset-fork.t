#!/bin/bash
# reset and fork (rlcoord/reset.c): reset makes a sandbox again, same id,
# from its create (its creation state) or from a checkpoint image (a
# snapshot); fork makes N sandboxes of one as it is now, in one reply;
# bad requests get stable codes.
. "$(dirname "$0")/lib.sh"

need_container
need_cmd dsecctl
/usr/bin/python3 -c 'import msgpack' 2>/dev/null || skip_all "needs python3-msgpack"
plan 15

mk_small_root "$T/base" sh cat ls
export DSEC_FS3_STORE="$T/state/fs3"
mkdir -p "$T/state"
dsecctl image import --tag task:1 "$T/base" >/dev/null || bail "cannot import the image"
start_dsecd --set backends=fncall,container || bail "dsecd did not start"

run timeout 120 helper-py - "$DSEC_HOST" <<'PY'
import asyncio, json, sys, dsec
async def main():
    res = {}
    async with dsec.AsyncClient(sys.argv[1]) as c:
        sb = await c.create(backend="container", image="task:1", trajectory=True,
                            labels={"job": "t4008"})
        ls = lambda s: s.exec(["ls", "/data"])
        await sb.write_file("/data/a", "1")
        await sb.snapshot("ckpt:1")
        await sb.write_file("/data/b", "2")
        r = await c.call("reset", {"id": sb.id})
        res["same_id"] = r["id"] == sb.id
        res["fresh"] = (await ls(sb)).stdout.split()
        r = await c.call("reset", {"id": sb.id, "image": "ckpt:1"})
        res["ckpt"] = (await ls(sb)).stdout.split()
        await c.call("reset", {"id": sb.id})
        res["creation"] = (await ls(sb)).stdout.split()
        res["labels"] = (await sb.info())["labels"].get("job")
        await sb.write_file("/data/c", "3")
        f = await c.call("fork", {"id": sb.id, "n": 4}, wait=120)
        outs = await asyncio.gather(*(c.sandbox(i).exec(["ls", "/data"]) for i in f["ids"]))
        res["forks"] = len(set(f["ids"]))
        res["fork_files"] = "/".join(sorted(set(o.stdout.strip() for o in outs)))
        await c.sandbox(f["ids"][0]).write_file("/data/d", "4")
        res["independent"] = (await ls(c.sandbox(f["ids"][1]))).stdout.split()
        res["log"] = " ".join(e["op"] for e in await sb.trajectory()
                              if e["op"] in ("reset", "fork"))
        # A prepared sandbox, paused: its forks run, with its files; it
        # stays paused.
        await sb.pause()
        pf = await c.call("fork", {"id": sb.id, "n": 2}, wait=120)
        outs = await asyncio.gather(*(c.sandbox(i).exec(["ls", "/data"]) for i in pf["ids"]))
        res["paused_forks"] = "/".join(sorted(set(o.stdout.strip().replace("\n", " ")
                                                  for o in outs)))
        res["still_paused"] = (await sb.info())["state"]
        # With processes on a node without criu: unsupported, and paused
        # again (it was resumed for the checkpoint).
        try:
            await c.call("fork", {"id": sb.id, "n": 1, "processes": True}, wait=60)
            res["paused_procs"] = "made"
        except dsec.DsecError as e:
            res["paused_procs"] = e.code
        res["paused_procs"] += " " + (await sb.info())["state"]
        await c.destroy_many(pf["ids"])
        await sb.resume()
        for name, req in (("n0", {"id": sb.id, "n": 0}), ("n_big", {"id": sb.id, "n": 100000})):
            try:
                await c.call("fork", req)
            except dsec.DsecError as e:
                res[name] = e.code
        fn = await c.create(backend="fncall")
        try:
            await c.call("fork", {"id": fn.id, "n": 2})
        except dsec.DsecError as e:
            res["fncall_fork"] = e.code
        try:
            await c.call("reset", {"id": sb.id, "image": "no-such:1"})
        except dsec.DsecError as e:
            res["bad_image"] = e.code
        res["still"] = (await ls(sb)).stdout.split()
        await c.destroy_many(f["ids"] + [sb.id, fn.id])
        res["left"] = len(await c.list())
    print(json.dumps({k: " ".join(v) if isinstance(v, list) else v for k, v in res.items()},
                     separators=(",", ":")))
asyncio.run(main())
PY
[ "$RC" = 0 ] || printf '%s\n' "$OUT" | sed 's/^/# /' >&2
is "$(get same_id) $(get fresh)" "true " "reset: the same id, the files it had gone ($OUT)"
is "$(get ckpt)" "a" "reset to a checkpoint image: its files"
is "$(get creation)" "" "reset again without image: the creation state, not the checkpoint"
is "$(get labels)" t4008 "... the sandbox's labels stay"
is "$(get forks)" 4 "fork of 4: four new sandboxes"
is "$(get fork_files)" c "... each with the files as they were"
is "$(get independent)" "c" "... and each its own"
is "$(get log)" "reset reset reset fork" "resets and the fork are in the trajectory"
is "$(get paused_forks)" c "a paused sandbox forks: each fork runs, with its files"
is "$(get still_paused)" paused "... and it stays paused"
is "$(get paused_procs)" "unsupported paused" "... with processes on a node without criu: unsupported, and it is paused again"
is "$(get n0) $(get n_big)" "invalid invalid" "fork of 0 or of too many: invalid"
is "$(get fncall_fork)" unsupported "fork of a sandbox that cannot be snapshotted: unsupported"
is "$(get bad_image) $(get still)" "not_found c" "reset to an image that does not exist fails and leaves the sandbox as it was"
is "$(get left)" 0 "nothing left"
