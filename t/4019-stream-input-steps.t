#!/bin/bash
# A streamed command's input, signals and terminal size as steps of a
# rollout: exec_write, exec_signal and exec_resize are logged in a sandbox
# with a trajectory and take a step, so a trainer that is preempted while
# it talks to a command and sends its steps again writes nothing twice:
# the command's input steps it had sent are answered from the log, the
# next one runs.  dsec-run replay sends them to the command it starts
# again, so a log with interactive commands replays.
. "$(dirname "$0")/lib.sh"

need_container
/usr/bin/python3 -c 'import msgpack' 2>/dev/null || skip_all "needs python3-msgpack"
plan 19

start_dsecd --set backends=container --set stream_grace=1 || bail "dsecd did not start"

run timeout 120 helper-py - "$DSEC_HOST" <<'PY'
import asyncio, json, sys, dsec
ECHO = ["sh", "-c", 'while read l; do echo "got $l"; echo "$l" >> /work/in; done; echo bye']
async def until(p, text):
    got = b""
    while text not in got:
        out, _ = await p.read(wait=5)
        got += out
    return got
async def main():
    res = {}
    url = sys.argv[1]
    async with dsec.AsyncClient(url) as a:
        sb = await a.create(backend="container", trajectory=True)
        # Trainer A talks to a command, two lines, and is preempted.
        p = await sb.start(ECHO, stdin_open=True, step=1)
        await p.write("one\n", step=2)
        await p.write("two\n", step=3)
        await until(p, b"got two")
    # Trainer B sends the same steps again, then goes on.
    async with dsec.AsyncClient(url) as b:
        sb = b.sandbox(sb.id)
        q = await sb.start(ECHO, stdin_open=True, step=1)
        res["same_stream"] = [q.replayed, q.exec_id == p.exec_id]
        r2 = await b.call("exec_write", {"id": sb.id, "exec": q.exec_id, "data": b"one\n", "step": 2})
        r3 = await b.call("exec_write", {"id": sb.id, "exec": q.exec_id, "data": b"two\n", "step": 3})
        res["writes_replayed"] = [r2.get("replayed"), r3.get("replayed")]
        try:
            await b.call("exec_write", {"id": sb.id, "exec": q.exec_id, "data": b"TWO\n", "step": 3})
            res["diverged"] = "ok"
        except dsec.DsecError as e:
            res["diverged"] = e.code
        await q.write("three\n", eof=True, step=4)
        r = await q.wait()
        res["out"] = r.stdout
        res["in"] = (await sb.exec(["cat", "/work/in"])).stdout
        # A signal as a step; sent again, it is not sent again.
        s = await sb.start(["sleep", "30"], step=5)
        await s.signal("TERM", step=6)
        rs = await s.wait()
        res["signal"] = rs.signal
        r6 = await b.call("exec_signal", {"id": sb.id, "exec": s.exec_id, "signal": "TERM", "step": 6})
        res["signal_again"] = r6.get("replayed")
        # A terminal's size as a step.
        t = await sb.start(["sh", "-c", "read x; stty size"], pty=True, step=7)
        await t.resize(30, 100, step=8)
        await t.write("go\n", step=9)
        rt = await t.wait()
        res["size"] = rt.stdout
    await asyncio.sleep(2.5)    # every stream has gone (stream_grace 1 s)
    # Trainer C, after the command has gone: all of it from the log.
    async with dsec.AsyncClient(url) as c:
        sb = c.sandbox(sb.id)
        q = await sb.start(ECHO, stdin_open=True, step=1)
        r4 = await c.call("exec_write", {"id": sb.id, "exec": q.exec_id, "data": b"three\n", "eof": True, "step": 4})
        rq = await q.wait()
        res["gone"] = [q.replayed, r4.get("replayed"), rq.stdout]
        res["in_after"] = (await sb.exec(["cat", "/work/in"])).stdout
        t = await sb.trajectory()
        res["ops"] = [e["op"] for e in t if e["op"] in ("exec_write", "exec_signal", "exec_resize")]
        res["id"] = sb.id
    print(json.dumps(res))
asyncio.run(main())
PY
[ "$RC" = 0 ] || printf '%s\n' "$OUT" | sed 's/^/# /' >&2
js() { /usr/bin/python3 -c 'import json,sys; v=json.loads(sys.argv[1])[sys.argv[2]]
print(json.dumps(v) if not isinstance(v, str) else v)' "$OUT" "$1" 2>/dev/null; }

is "$(js same_stream)" "[1, true]" "the command's step sent again by a new trainer: the same, live command"
is "$(js writes_replayed)" "[2, 3]" "its two input steps sent again: answered from the log"
is "$(js diverged)" diverged "another input at a logged step: diverged"
is "$(js out)" "$(printf 'got one\ngot two\ngot three\nbye')" "the command read each line once, the new one too"
is "$(js in)" "$(printf 'one\ntwo\nthree')" "... and wrote each once"
is "$(js signal)" 15 "a signal as a step ends the command"
is "$(js signal_again)" 6 "... sent again: answered from the log"
like "$(js size)" '30 100' "a terminal's size as a step ($(js size))"
is "$(js gone)" "[1, 4, \"got one\\ngot two\\ngot three\\nbye\\n\"]" "after the command has gone: its step, its input step and its whole output from the log"
is "$(js in_after)" "$(printf 'one\ntwo\nthree')" "... and nothing was written again"
is "$(js ops)" '["exec_write", "exec_write", "exec_write", "exec_signal", "exec_resize", "exec_write"]' \
	"the trajectory has each input, signal and size once"

# dsec-run replay starts each command again and sends it what it was sent.
dsec-run trajectory "$(js id)" > "$T/traj" 2>"$T/traj.err"
run dsec-run replay "$T/traj"
is "$RC" 0 "dsec-run replay of the log: the commands given their input again, every result the same"
like "$OUT" "entries replayed, every result the same" "... it says so ($(tail -1 <<<"$OUT"))"
n=$(grep -c '"op":"exec_write"' "$T/traj")
is "$n" 4 "... its 4 input steps were in the log it replayed"
sed '/"op":"exec_write"/s/"data":"two\\n"/"data":"TWO\\n"/; /"op":"exec_write"/s/74776f0a/54574f0a/' "$T/traj" > "$T/traj2"
run dsec-run replay "$T/traj2"
is "$RC" 1 "an input that is not what was logged: the command's end differs, replay exits 1"
like "$OUT" 'entry [0-9]+ \(step none, exec_read\) differs' "... naming the command's end"
: > "$T/empty"
run dsec-run replay "$T/empty"
is "$RC" 125 "replay of a file with no entry: exit 125, not 0"
like "$OUT" "has no entry of .dsec-run trajectory.: nothing to replay" "... and says why"
ok $(kill -0 "$DSECD_PID" 2>/dev/null; echo $?) "dsecd still serves"
