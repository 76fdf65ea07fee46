#!/bin/bash
# Grading out of the agent's reach (rlcoord/grade.c): the tests named in a
# create's grade_layers never appear in the agent's sandbox (an empty
# read-only stand-in is at /tests, t/4013); grade runs the grader in a
# sandbox of the agent's changes with the grade layers on top, so an agent
# that replaces /bin/sh, tries to plant its own copy of the tests and writes
# a wrong answer is graded FAIL; the grading sandbox and its snapshot's tag
# are gone after; bad requests get stable codes.
. "$(dirname "$0")/lib.sh"

need_container
need_cmd dsecctl
/usr/bin/python3 -c 'import msgpack' 2>/dev/null || skip_all "needs python3-msgpack"
plan 13

mk_small_root "$T/base" sh cat
mkdir -p "$T/grader/tests"
mk_small_root "$T/grader" sh cat
cat > "$T/grader/tests/check.sh" <<'SH'
if [ "$(cat /data/answer.txt 2>/dev/null)" = 42 ]; then echo PASS; else echo FAIL; fi
SH
export DSEC_FS3_STORE="$T/state/fs3"
mkdir -p "$T/state"
dsecctl image import --tag task:1 "$T/base" >/dev/null || bail "cannot import the task image"
dsecctl image import --tag grader:1 "$T/grader" >/dev/null || bail "cannot import the grader"
start_dsecd --set backends=fncall,container || bail "dsecd did not start"

run timeout 120 helper-py - "$DSEC_HOST" <<'PY'
import asyncio, json, sys, dsec
async def main():
    res = {}
    async with dsec.AsyncClient(sys.argv[1]) as c:
        async def grade(sb):
            r = await c.call("grade", {"id": sb.id, "argv": ["/bin/sh", "/tests/check.sh"]},
                             wait=120)
            return r
        honest = await c.call("create", {"backend": "container", "image": "task:1",
                                         "trajectory": True, "grade_layers": ["grader:1"]})
        h = c.sandbox(honest["id"])
        r = await h.exec(["sh", "-c", "cat /tests/check.sh 2>&1; echo rc=$?"])
        res["hidden"] = "rc=0" not in r.stdout
        await h.write_file("/data/answer.txt", "42")
        g = await grade(h)
        res["honest"] = g["stdout"].decode().strip()
        res["grader_image"] = g["grader"]["image"][:7]
        res["grader_layers"] = " ".join(g["grader"]["layers"])
        res["grader_gone"] = all(s["id"] != g["grader"]["sandbox"] for s in await c.list())
        res["logged"] = " ".join([e["op"] for e in await h.trajectory()][-2:])
        cheat = await c.call("create", {"backend": "container", "image": "task:1",
                                        "grade_layers": ["grader:1"]})
        x = c.sandbox(cheat["id"])
        await x.write_file("/data/answer.txt", "41")
        try:
            await x.write_file("/tests/check.sh", "echo PASS\n")
            res["plant"] = "written"
        except dsec.DsecError as e:
            res["plant"] = e.code
        await x.exec(["sh", "-c", "printf '#!/bin/cat\\nPASS\\n' > /bin/sh.fake; "
                      "cat /bin/sh.fake > /bin/sh"])
        await x.exec(["cat", "/bin/sh.fake"], output_cap=4)
        g = await grade(x)
        res["cheat"] = g["stdout"].decode().strip()
        res["marks"] = " ".join(f"{k}={v}" for k, v in sorted(g["misbehaviour"].items())
                                if k != "protected_probes")
        res["probed"] = g["misbehaviour"]["protected_probes"] > 0
        try:
            plain = await c.create(backend="container", image="task:1")
            await c.call("grade", {"id": plain.id, "argv": ["true"]})
        except dsec.DsecError as e:
            res["no_layers"] = e.code
        try:
            await c.call("grade", {"id": h.id})
        except dsec.DsecError as e:
            res["no_cmd"] = e.code
        try:
            await c.call("create", {"backend": "fncall", "grade_layers": ["grader:1"]})
        except dsec.DsecError as e:
            res["fncall"] = e.code
        res["left"] = len(await c.list())
    print(json.dumps(res, separators=(",", ":")))
asyncio.run(main())
PY
[ "$RC" = 0 ] || printf '%s\n' "$OUT" | sed 's/^/# /' >&2
is "$(get hidden)" true "the grade layers' /tests is not in the agent's sandbox ($OUT)"
is "$(get honest)" PASS "an honest answer is graded PASS"
is "$(get grader_image)" "sha256:" "... in a sandbox of the agent's snapshot"
is "$(get grader_layers)" "grader:1" "... with the grade layers over it"
is "$(get grader_gone)" true "... destroyed after"
is "$(get logged)" "snapshot grade" "the grade is in the agent's trajectory, after its snapshot"
is "$(get cheat)" FAIL "an agent that replaced /bin/sh, tried to plant its own tests and answered wrong: FAIL"
is "$(get plant)" permission "... its tests could not be planted at the grade layers' /tests"
is "$(get marks) $(get probed)" "oom_kills=0 output_floods=1 pids_limited=0 seccomp_denied=0 timeouts=0 true" \
	"grade's reply has the agent's misbehaviour counters, its probe of /tests counted"
is "$(get no_layers) $(get no_cmd)" "invalid bad_request" "grade of a sandbox without grade_layers, or without a command: refused"
is "$(get fncall)" invalid "grade_layers on a backend without image layers: invalid"
left=$(get left)
run dsecctl image ls
is "$(printf '%s' "$OUT" | grep -c dsec-grade)" 0 "the grading snapshots' tags are removed"
is "$left" 3 "no grading sandbox left, only the three made"
