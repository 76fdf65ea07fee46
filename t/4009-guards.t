#!/bin/bash
# Misbehaviour counters and egress by task stage (rlcoord's guards (c) and
# (e)): a fork bomb, a memory bomb, an output flood and a command that hangs
# are each marked in their own result (pids_limited, oom_killed,
# stdout_truncated, timed_out) and counted in the sandbox's usage and info;
# connections its allowlist refuses are counted (egress_denied) and the count
# survives an allowlist change; an install stage reaches the package mirror,
# the solve stage after it does not; both stage changes, the results and the
# counters are in the sandbox's trajectory log; grade reports them.
. "$(dirname "$0")/lib.sh"

need_container_net
/usr/bin/python3 -c 'import msgpack' 2>/dev/null || skip_all "needs python3-msgpack"
plan 16

container_net g 7
MIRROR=$(( 20000 + $$ % 10000 ))
OTHER=$(( MIRROR + 1 ))
# shellcheck disable=SC2086
start_dsecd --set backends=container $CONTAINER_NET || bail "dsecd did not start"
hello_server "$XNS" "$EXT" "$MIRROR"; srv1=$!
hello_server "$XNS" "$EXT" "$OTHER"; srv2=$!
sleep 0.5

run timeout 200 helper-py - "$DSEC_HOST" "$EXT" "$MIRROR" "$OTHER" <<'PY'
import asyncio, json, sys, dsec
host, ext, mirror, other = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
PROBE = """import socket, sys
for port in sys.argv[2:]:
    try:
        s = socket.create_connection((sys.argv[1], int(port)), timeout=3)
        print(s.recv(20).decode() or "empty", end=" ")
    except OSError:
        print("denied", end=" ")
"""
async def main():
    res = {}
    async with dsec.AsyncClient(host) as c:
        sb = await c.create(backend="container", network="allowlist", allow=[],
                            limits={"pids": 24, "memory": 64 << 20}, trajectory=True)
        await c.call("net_allow", {"id": sb.id, "allow": [f"{ext}:{mirror}/tcp"]})  # install
        probe = lambda *ports: sb.exec(["python3", "-c", PROBE, ext, *ports], timeout=20)
        r = await probe(mirror, other)
        res["install"] = r.stdout.strip()
        u = await sb.usage()
        res["denied1"] = u["misbehaviour"]["egress_denied"]
        await c.call("net_allow", {"id": sb.id, "allow": []})   # the solve stage: closed
        r = await probe(mirror)
        res["solve"] = r.stdout.strip()
        u = await sb.usage()
        res["denied2"] = u["misbehaviour"]["egress_denied"]
        r = await sb.exec(["sh", "-c", "bomb() { bomb | bomb & }; bomb; sleep 2"], timeout=20)
        res["fork"] = f"{r.pids_limited} {r.oom_killed}"
        r = await sb.exec(["python3", "-c", "a = []\nwhile True: a.append(bytearray(1 << 20))"],
                          timeout=30)
        res["mem"] = f"{r.oom_killed} {r.pids_limited}"
        r = await sb.exec(["head", "-c", "100000", "/dev/zero"], output_cap=1000)
        res["flood"] = f"{r.stdout_truncated} {len(r.stdout_bytes)}"
        r = await sb.exec(["sleep", "30"], timeout=0.5)
        res["hang"] = f"{r.timed_out}"
        r = await sb.exec(["true"])
        res["clean"] = f"{r.pids_limited} {r.oom_killed} {r.stdout_truncated} {r.timed_out}"
        m = (await sb.usage())["misbehaviour"]
        res["usage"] = " ".join(f"{k}={m[k]}" for k in
                                ("oom_kills", "pids_limited", "output_floods", "timeouts"))
        res["egress_final"] = m["egress_denied"]
        i = (await sb.info())["misbehaviour"]
        res["info"] = " ".join(f"{k}={i[k]}" for k in
                               ("oom_kills", "pids_limited", "output_floods", "timeouts"))
        log = await sb.trajectory()
        res["ops"] = " ".join(e["op"] for e in log)
        stages = [e for e in log if e["op"] == "net_allow"]
        res["stage_logged"] = " | ".join(",".join(e["request"]["allow"]) or "-" for e in stages) if stages else "0"
        last = [e for e in log if e["op"] == "usage"][-1]
        res["usage_logged"] = last["reply"]["result"]["misbehaviour"]["timeouts"]
        forks = [e for e in log if e["op"] == "exec" and e["reply"]["result"].get("pids_limited")]
        res["fork_logged"] = len(forks)
        other_sb = await c.create(backend="container")
        m = (await other_sb.usage())["misbehaviour"]
        res["other"] = " ".join(str(m[k]) for k in
                                ("oom_kills", "pids_limited", "output_floods", "timeouts"))
        res["other_egress"] = "egress_denied" in m
        await other_sb.destroy()
        await sb.destroy()
    print(json.dumps(res, separators=(",", ":")))
asyncio.run(main())
PY
[ "$RC" = 0 ] || printf '%s\n' "$OUT" | sed 's/^/# /' >&2
is "$(get install)" "hello-$MIRROR denied" "the install stage reaches the package mirror and nothing else"
ok $([ "$(get denied1)" -ge 1 ] 2>/dev/null; echo $?) "the refused connection is counted ($(get denied1))"
is "$(get solve)" "denied" "the solve stage (net_allow []) cannot reach the mirror"
ok $([ "$(get denied2)" -gt "$(get denied1)" ] 2>/dev/null; echo $?) \
	"the count survives the allowlist's change and grows ($(get denied1) -> $(get denied2))"
is "$(get fork)" "True False" "a fork bomb's result says it met the pids limit"
is "$(get mem)" "True False" "a memory bomb's result says the OOM killer stopped it"
is "$(get flood)" "True 1000" "an output flood's result says its output was cut at its cap"
is "$(get hang)" "True" "a command that hangs is killed at its timeout"
is "$(get clean)" "False False False False" "a quiet command's result has no mark"
is "$(get usage)" "oom_kills=1 pids_limited=1 output_floods=1 timeouts=1" \
	"usage counts each"
is "$(get info)" "$(get usage)" "... and so does the sandbox's info"
is "$(get stage_logged)" "$EXT:$MIRROR/tcp | -" "the trajectory log has both stages' allowlists"
is "$(get usage_logged)" "1" "... and the counters as usage gave them"
is "$(get fork_logged)" "1" "... and the fork bomb's marked result"
is "$(get other)" "0 0 0 0" "another sandbox's counters are its own"
is "$(get other_egress)" "false" "a sandbox without a network has no egress count"
kill "$srv1" "$srv2" 2>/dev/null
wait "$srv1" "$srv2" 2>/dev/null || true
