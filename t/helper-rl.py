"""helper-rl.py CASE URL [ARGS] - rlcoord's cases for the t/4xxx tests.

Each case drives a private dsecd through the Python SDK and prints one
JSON object of what it saw; the test asserts on it (t/lib.sh's get)."""
import asyncio
import json
import os
import sys
import time

import dsec


def out(**kw):
    print(json.dumps(kw, separators=(",", ":")))


async def lines(sb, path="/work/f"):
    r = await sb.exec(["sh", "-c", "cat %s 2>/dev/null | wc -l" % path])
    return int(r.stdout.strip() or 0)


def step_cmd(k, path="/work/f"):
    return ["sh", "-c", "echo step %d >> %s; wc -l < %s" % (k, path, path)]


async def ff(c, n):
    """n steps run, then all n sent again: each answered from the log."""
    sb = await c.create(backend="fncall", trajectory=True)
    first = [await sb.exec(step_cmd(k), step=k) for k in range(n)]
    ran = sum(1 for r in first if r.replayed is None)
    t0 = time.monotonic()
    again = [await sb.exec(step_cmd(k), step=k) for k in range(n)]
    ff_ms = (time.monotonic() - t0) * 1e3
    t = (await sb.info()).get("trajectory", {})
    out(ran=ran, replayed=sum(1 for k, r in enumerate(again) if r.replayed == k),
        same=all(a.stdout == b.stdout and a.exit_code == b.exit_code
                 for a, b in zip(first, again)),
        lines=await lines(sb), steps=t.get("steps"), last_step=t.get("last_step"),
        ff_ms=round(ff_ms, 2), id=sb.id)


async def diverge(c):
    sb = await c.create(backend="fncall", trajectory=True)
    for k in range(3):
        await sb.exec(step_cmd(k), step=k)
    res = {}
    try:
        await sb.exec(["sh", "-c", "echo other >> /work/f"], step=1)
        res["code"] = "none"
    except dsec.Diverged as e:
        res["code"] = e.code
        res["message"] = e.message
    # The error map names the step and both hashes (raw call: the map).
    try:
        await c.call("exec", {"id": sb.id, "argv": ["true"], "step": 2})
    except dsec.DsecError as e:
        res["code2"] = e.code
    r = await c.call("info", {})
    out(lines=await lines(sb), diverged=r["trajectory"]["diverged"], **res)


async def join(c):
    """The same step sent twice while the first runs: it runs once."""
    sb = await c.create(backend="fncall", trajectory=True)
    cmd = ["sh", "-c", "sleep 0.5; echo once >> /work/f; wc -l < /work/f"]
    a, b = await asyncio.gather(sb.exec(cmd, step=7), sb.exec(cmd, step=7))
    info = await c.call("info", {})
    out(lines=await lines(sb), a=a.stdout.strip(), b=b.stdout.strip(),
        marked=[a.replayed, b.replayed].count(7), joined=info["trajectory"]["joined"])


async def refuse(c):
    res = {}
    plain = await c.create(backend="fncall")
    try:
        await plain.exec(["true"], step=1)
    except dsec.DsecError as e:
        res["nolog"] = e.code
    sb = await c.create(backend="fncall", trajectory=True)
    try:
        await c.call("exec_read", {"id": sb.id, "exec": "x1", "step": 1})
    except dsec.DsecError as e:
        res["notlogged"] = e.code
    try:
        await c.call("exec", {"id": sb.id, "argv": ["true"], "step": -1})
    except dsec.DsecError as e:
        res["negative"] = e.code
    try:
        await c.call("exec", {"id": sb.id, "argv": ["true"], "step": "x"})
    except dsec.DsecError as e:
        res["string"] = e.code
    # A step refused before running is not logged: sent right, it runs.
    try:
        await c.call("exec", {"id": sb.id, "argv": ["true"], "step": 4, "timeout": -1})
    except dsec.DsecError as e:
        res["bad"] = e.code
    r = await sb.exec(step_cmd(4), step=4)
    res["after_bad"] = r.replayed is None and r.stdout.strip() == "1"
    out(**res)


async def export(c, n):
    sb = await c.create(backend="fncall", trajectory=True)
    for k in range(n):
        await sb.exec(step_cmd(k), step=k)
    await sb.write_file("/work/g", "hello", step=n)
    data = await sb.read_file("/work/g", step=n + 1)
    await sb.exec(["true"])		# logged, no step
    entries = await sb.trajectory()
    page = await c.call("trajectory", {"id": sb.id, "from": 2, "limit": 3})
    await sb.destroy()
    after = await sb.trajectory()
    e3 = entries[4]
    out(n=len(entries), ops=",".join(e["op"] for e in entries[:2]) + "," + entries[-3]["op"]
        + "," + entries[-2]["op"] + "," + entries[-1]["op"],
        seqs=[e["seq"] for e in entries] == list(range(len(entries))),
        steps=[e["step"] for e in entries[1:n + 1]] == list(range(n)),
        last_step=entries[-1]["step"], data=data.decode(),
        argv3=e3["request"]["argv"][2], stdout3=e3["reply"]["result"]["stdout"].decode().strip(),
        hash=e3["hash"][:7], page=" ".join(str(e["seq"]) for e in page["entries"]),
        page_next=page["next"], page_end=page["end"], after=len(after), id=sb.id)


async def steps_only(c, n, path):
    """n steps on a new sandbox; its id into path once all are answered."""
    sb = await c.create(backend="fncall", trajectory=True)
    for k in range(n):
        await sb.exec(step_cmd(k), step=k)
    with open(path, "w") as f:
        f.write(sb.id)
    out(id=sb.id)


async def read_log(c, sid):
    entries = await c.sandbox(sid).trajectory()
    out(n=len(entries), steps=" ".join(str(e["step"]) for e in entries if e["step"] is not None))


async def tokens(c):
    base = len(await c.list())
    a, b = await asyncio.gather(c.create(backend="fncall", token="job-1"),
                                c.create(backend="fncall", token="job-1"))
    d = await c.call("create", {"backend": "fncall", "token": "job-1"})
    listed = len(await c.list()) - base
    other = await c.create(backend="fncall", token="job-2")
    await a.destroy()
    e = await c.create(backend="fncall", token="job-1")
    res = {}
    for name, tok in (("empty", ""), ("long", "x" * 129), ("type", 5)):
        try:
            await c.call("create", {"backend": "fncall", "token": tok})
        except dsec.DsecError as err:
            res[name] = err.code
    try:
        await c.create(backend="nosuch", token="job-3")
    except dsec.DsecError as err:
        res["failed"] = err.code
    f = await c.create(backend="fncall", token="job-3")
    info = await c.call("info", {})
    out(same=a.id == b.id == d["id"], existing=d.get("existing"), listed=listed,
        other=other.id != a.id, renewed=e.id != a.id, after_fail=bool(f.id),
        held=info["tokens"]["held"], **res)


async def lease(c, backend):
    res = {}
    base = len(await c.list())
    # Margins of seconds for a loaded machine: the grace ends long after
    # the checks that want the sandboxes kept.
    L = await c.lease(timeout=1.0, grace=8.0, labels={"job": "t4003"}, keep=True)
    sbs = [await L.create(backend=backend, ttl=3) for _ in range(2)]
    res["traj"] = "trajectory" in await sbs[0].info()
    i = await L.info()
    res["state0"] = i["state"]
    res["n"] = i["sandboxes"]
    await asyncio.sleep(2.5)		# not renewed: lapsed
    i = await L.info()
    res["state1"] = i["state"]
    res["paused1"] = i["paused"]
    res["sbstate"] = (await sbs[0].info())["state"]
    await asyncio.sleep(2.5)		# past the sandboxes' ttl of 3 s: paused, they stay
    res["alive_past_ttl"] = len(await c.list()) - base
    await L.renew()
    r = await sbs[0].exec(["echo", "back"])
    res["back"] = r.stdout.strip()
    res["sbstate2"] = (await sbs[0].info())["state"]
    L.start_renewing()
    res["pause"] = (await L.pause())["done"]
    res["paused2"] = (await L.info())["paused"]
    res["resume"] = (await L.resume())["done"]
    res["paused3"] = (await L.info())["paused"]
    res["closed"] = (await L.close())["destroyed"]
    res["left"] = len(await c.list()) - base
    try:
        await L.info()
    except dsec.NotFound as e:
        res["gone"] = e.code
    # A lease left to lapse and run out: its sandboxes go at its grace's end.
    L2 = await c.lease(timeout=0.5, grace=2.0)
    await L2.create(backend=backend)
    await asyncio.sleep(1.0)
    res["lapsed_n"] = len(await c.list()) - base
    for _ in range(100):		# gone at the grace's end: 2.5 s from its create
        await asyncio.sleep(0.1)
        res["expired_n"] = len(await c.list()) - base
        if not res["expired_n"]:
            break
    for name, f in (("bad_timeout", {"timeout": 0}), ("bad_grace", {"grace": 1e12})):
        try:
            await c.call("lease_open", f)
        except dsec.DsecError as e:
            res[name] = e.code
    for name, lid in (("unknown", c._url_node() + ":l0"), ("foreign", "elsewhere:l1")):
        try:
            await c.create(backend=backend, lease=lid)
        except dsec.DsecError as e:
            res[name] = e.code
    info = await c.call("info", {})
    res["lapses"] = info["leases"]["lapsed"]
    res["expired"] = info["leases"]["expired"]
    out(**res)


async def mk(c):
    """A short rollout whose last step prints the time: replay differs there."""
    sb = await c.create(backend="fncall", trajectory=True)
    await sb.write_file("/work/in", "abc\n", step=0)
    await sb.exec(["sh", "-c", "cat /work/in; echo x >> /work/f; wc -l < /work/f"], step=1)
    await sb.exec(["sh", "-c", "cat /work/nonexist"], step=2)
    await sb.read_file("/work/in", step=3)
    await sb.exec(["sh", "-c", "date +%N"], step=4)
    out(id=sb.id)


async def big(c, n, path):
    """n steps writing 1 MiB of random bytes each: past the journal's 16 MiB."""
    sb = await c.create(backend="fncall", trajectory=True)
    for k in range(n):
        await sb.write_file("/work/r%d" % k, os.urandom(1 << 20), step=k)
    with open(path, "w") as f:
        f.write(sb.id)
    info = await c.call("info", {})
    out(id=sb.id, checkpoints=info["trajectory"]["checkpoints"])


async def main():
    case, url = sys.argv[1], sys.argv[2]
    async with dsec.AsyncClient(url) as c:
        node = (await c.info())["node"]
        c._url_node = lambda: node
        if case == "ff":
            await ff(c, int(sys.argv[3]))
        elif case == "diverge":
            await diverge(c)
        elif case == "join":
            await join(c)
        elif case == "refuse":
            await refuse(c)
        elif case == "export":
            await export(c, int(sys.argv[3]))
        elif case == "steps":
            await steps_only(c, int(sys.argv[3]), sys.argv[4])
        elif case == "read":
            await read_log(c, sys.argv[3])
        elif case == "big":
            await big(c, int(sys.argv[3]), sys.argv[4])
        elif case == "mk":
            await mk(c)
        elif case == "tokens":
            await tokens(c)
        elif case == "lease":
            await lease(c, sys.argv[3])
        else:
            raise SystemExit("no case " + case)


asyncio.run(main())
