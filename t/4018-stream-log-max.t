#!/bin/bash
# The output logged streams keep for their trajectory entries is bounded
# on the node (stream_log_max): a stream that would pass it keeps what
# fits and its logged end says truncated; what a stream kept is given
# back when it goes, so later streams keep all again.  Sandboxes cannot
# grow dsecd's memory without bound by streaming in many sandboxes.
. "$(dirname "$0")/lib.sh"

need_container
/usr/bin/python3 -c 'import msgpack' 2>/dev/null || skip_all "needs python3-msgpack"
plan 8

start_dsecd --set backends=container --set stream_log_max=100K || bail "dsecd did not start"

run timeout 120 helper-py - "$DSEC_HOST" <<'PY'
import asyncio, json, sys, dsec
def out(ch, n, after):
    return ["sh", "-c", "head -c %d /dev/zero | tr '\\0' %s; sleep %s" % (n, ch, after)]
async def drain(p, want):
    got = 0
    while got < want:
        o, _ = await p.read(wait=5)
        got += len(o)
async def main():
    res = {}
    async with dsec.AsyncClient(sys.argv[1]) as b:
        sb = await b.create(backend="container", trajectory=True)
        # A keeps its 80 KiB and stays; B, while A is there, finds 20 KiB left.
        pa = await sb.start(out("a", 81920, 2), step=1)
        await drain(pa, 81920)
        pb = await sb.start(out("b", 81920, 0), step=2)
        await pb.wait()
        await pa.wait()
        # Both gone: C keeps all of its 80 KiB again.
        pc = await sb.start(out("c", 81920, 0), step=3)
        await pc.wait()
        for k, p, cmd in ((1, pa, out("a", 81920, 2)), (2, pb, out("b", 81920, 0)),
                          (3, pc, out("c", 81920, 0))):
            q = await sb.start(cmd, step=k)
            r = await b.call("exec_read", {"id": sb.id, "exec": q.exec_id})
            res[str(k)] = [len(r["stdout"]), r["stdout_truncated"], r["replayed"], q.exec_id == p.exec_id]
        t = await sb.trajectory()
        res["ends"] = len([e for e in t if e["op"] == "exec_read"])
        await sb.destroy()
    print(json.dumps(res))
asyncio.run(main())
PY
[ "$RC" = 0 ] || printf '%s\n' "$OUT" | sed 's/^/# /' >&2
js() { /usr/bin/python3 -c 'import json,sys; print(json.dumps(json.loads(sys.argv[1])[sys.argv[2]]))' "$OUT" "$1" 2>/dev/null; }

is "$RC" 0 "three streamed steps in a sandbox with a trajectory, stream_log_max 100K"
is "$(js 1)" "[81920, false, 1, true]" "the first stream's 80 KiB are kept whole (its step sent again reads them)"
is "$(js 2)" "[20480, true, 2, true]" "a stream while it holds 80 KiB keeps the 20 KiB left, and says truncated"
is "$(js 3)" "[81920, false, 3, true]" "once both have gone a third keeps all of its 80 KiB again"
is "$(js ends)" 3 "the trajectory has the three streams' ends"
n=$(grep -c 'keeps no more of its output for the trajectory.*stream_log_max' "$T/dsecd.log")
is "$n" 1 "dsecd warns once, for the stream it cut"
run "$TOP/dsecd/dsecd" --check-config --set stream_log_max=lots
ok $([ "$RC" != 0 ]; echo $?) "stream_log_max must be a size ($OUT)"
ok $(kill -0 "$DSECD_PID" 2>/dev/null; echo $?) "dsecd still serves"
