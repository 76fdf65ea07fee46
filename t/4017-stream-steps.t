#!/bin/bash
# A streamed command (exec_start) as a step of a rollout: its end is in
# the trajectory log (status and the whole output, up to 256 KiB of
# each), so a trainer that re-sends the step after the stream has gone
# (read to its end by the trainer before it, or dropped unread after
# stream_grace) gets the logged stream and reads it whole from the log:
# nothing runs twice.  A step sent again while its stream is still there
# (running, or ended and not yet read to its end) reads it from its start.
# A stream without step is not answered again.
. "$(dirname "$0")/lib.sh"

need_container
/usr/bin/python3 -c 'import msgpack' 2>/dev/null || skip_all "needs python3-msgpack"
plan 24

start_dsecd --set backends=container --set stream_grace=1 || bail "dsecd did not start"

run timeout 120 helper-py - "$DSEC_HOST" <<'PY'
import asyncio, json, sys, dsec
CMD = ["sh", "-c", "echo run >> /work/f; echo one; echo warn >&2; sleep 0.3; echo two; exit 3"]
LONG = ["sh", "-c", "echo run >> /work/f; echo one; echo warn >&2; sleep 1.5; echo two; exit 3"]
async def whole(proc):
    r = await proc.wait()
    return {"out": r.stdout, "err": r.stderr, "exit": r.exit_code, "rep": r.replayed}
async def main():
    res = {}
    url = sys.argv[1]
    async with dsec.AsyncClient(url) as a:
        sb = await a.create(backend="container", trajectory=True)
        # Trainer A reads step 1 to its end; step 2 only in part; step 3 not at all.
        p1 = await sb.start(CMD, step=1)
        res["first"] = await whole(p1)
        res["x1"] = p1.exec_id
        p2 = await sb.start(CMD, step=2)
        part = b""
        while b"one" not in part:
            out, _ = await p2.read(wait=5)
            part += out
        res["part"] = part.decode()
        p3 = await sb.start(CMD, step=3)
        p4 = await sb.start(CMD)
        await p4.wait()
        # Steps 4 (still running) and 5 (ended, not all read) sent again
        # by another trainer at once: the stream is read from its start.
        for k, cmd in ((4, LONG), (5, CMD)):
            p = await sb.start(cmd, step=k)
            part = b""
            while b"one" not in part:
                out, _ = await p.read(wait=5)
                part += out
            if k == 5:
                await asyncio.sleep(0.5)
            async with dsec.AsyncClient(url) as b:
                q = await b.sandbox(sb.id).start(cmd, step=k)
                res["live%d" % k] = dict(await whole(q), started=q.replayed, same=q.exec_id == p.exec_id)
    await asyncio.sleep(2.5)    # the unread ones end and are dropped (stream_grace 1 s)
    async with dsec.AsyncClient(url) as b:
        sb = b.sandbox(sb.id)
        for k, name in ((1, "again1"), (2, "again2"), (3, "again3")):
            p = await sb.start(CMD, step=k)
            res[name] = dict(await whole(p), started=p.replayed, x=p.exec_id)
        res["x1_again"] = res["again1"]["x"]
        res["lines"] = (await sb.exec(["sh", "-c", "wc -l < /work/f"])).stdout.strip()
        try:
            await b.call("exec_read", {"id": sb.id, "exec": p4.exec_id})
            res["nostep"] = "ok"
        except dsec.DsecError as e:
            res["nostep"] = e.code
        # A step whose output passes 256 KiB: the log keeps the first 256 KiB.
        big = await sb.start(["sh", "-c", "head -c 300000 /dev/zero | tr '\\0' a"], step=9)
        await big.wait()
        p = await sb.start(["sh", "-c", "head -c 300000 /dev/zero | tr '\\0' a"], step=9)
        r = await b.call("exec_read", {"id": sb.id, "exec": p.exec_id})
        res["big"] = [len(r["stdout"]), r["stdout_truncated"], r["replayed"]]
        t = await sb.trajectory()
        ends = [e for e in t if e["op"] == "exec_read"]
        res["ends"] = len(ends)
        e1 = [e for e in ends if e["request"].get("exec") == res["x1"]]
        lo = e1[0]["reply"]["result"]["stdout"] if e1 else None
        res["log_out"] = lo.decode() if isinstance(lo, bytes) else lo
        res["log_exit"] = e1[0]["reply"]["result"]["exit_code"] if e1 else None
        res["ids"] = [p1.exec_id, p4.exec_id]
        res["id"] = sb.id
        await sb.destroy()
    for k in ("first", "again1", "again2", "again3", "live4", "live5"):
        for f in ("out", "err"):
            v = res[k][f]
            res[k][f] = v.decode() if isinstance(v, bytes) else v
    print(json.dumps(res))
asyncio.run(main())
PY
[ "$RC" = 0 ] || printf '%s\n' "$OUT" | sed 's/^/# /' >&2
js() { /usr/bin/python3 -c 'import json,sys; v=json.loads(sys.argv[1]);
for k in sys.argv[2].split("."): v=v[k] if not isinstance(v, list) else v[int(k)]
print(json.dumps(v) if not isinstance(v, str) else v)' "$OUT" "$1" 2>/dev/null; }

is "$(js first.out)$(js first.exit)" "$(printf 'one\ntwo\n')3" "a step's stream read to its end: its output and status ($OUT)"
is "$(js again1.started) $(js again1.x)" "1 $(js x1)" "its step sent again: the logged stream, nothing started"
is "$(js again1.out)" "$(printf 'one\ntwo\n')" "... read again from the log: the whole output"
is "$(js again1.err) $(js again1.exit) $(js again1.rep)" "warn 3 1" "... its stderr and exit status, marked replayed"
is "$(js part)" "$(printf 'one\n')" "a step's stream read in part by the trainer before"
is "$(js again2.out)" "$(printf 'one\ntwo\n')" "... read whole after it was dropped unread"
is "$(js again2.exit) $(js again2.rep)" "3 2" "... with its status"
is "$(js again3.out)$(js again3.exit)" "$(printf 'one\ntwo\n')3" "a step's stream nobody read: the same, from the log"
is "$(js live4.started) $(js live4.same)" "4 true" "a step whose stream still runs, sent again: the logged stream"
is "$(js live4.out)$(js live4.exit)" "$(printf 'one\ntwo\n')3" "... read from its start (the trainer before read its first line)"
is "$(js live5.out)$(js live5.err)$(js live5.exit)" "$(printf 'one\ntwo')warn3" "... and a stream that ended, read in part: the same"
is "$(js lines)" 6 "nothing ran twice: 5 steps and 1 stream without step appended 6 lines"
is "$(js nostep)" not_found "a stream without step, read to its end, is not answered again"
is "$(js big)" "[262144, true, 9]" "a stream's output over 256 KiB: the log keeps 256 KiB and says truncated"
is "$(js ends)" 7 "the trajectory has each stream's end: 6 streams and the big one"
is "$(js log_out)" "$(printf 'one\ntwo\n')" "... an exec_read entry with the whole output"
is "$(js log_exit)" 3 "... and the status"
unlike() { if [[ $1 =~ $2 ]]; then ok 1 "$3 (got '$1')"; else ok 0 "$3"; fi; }
ids=$(js ids)
like "$ids" '^\["x[0-9]+", "x[0-9]+"\]$' "stream names are x and a serial ($ids)"
unlike "$ids" '"x[0-9]{1,6}"' "... which begins at random: not x1 on a new daemon"

# dsec-run replay starts each stream again where it was and compares its
# end (outputs and status) where the log has it.
dsec-run trajectory "$(js id)" > "$T/traj" 2>"$T/traj.err"
run dsec-run replay "$T/traj"
is "$RC" 0 "dsec-run replay of the log: streams started again, every result the same"
like "$OUT" "entries replayed, every result the same" "... it says so ($(tail -1 <<<"$OUT"))"
sed '/"op":"exec_read"/s/"exit_code":3/"exit_code":4/' "$T/traj" > "$T/traj2"
run dsec-run replay "$T/traj2"
is "$RC" 1 "a stream's logged end that is not what it does now: replay exits 1"
like "$OUT" 'entry [0-9]+ \(step none, exec_read\) differs' "... naming the entry of its end"
ok $(kill -0 "$DSECD_PID" 2>/dev/null; echo $?) "dsecd still serves"
