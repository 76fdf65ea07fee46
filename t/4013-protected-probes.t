#!/bin/bash
# Probes of what a create's grade_layers keep from the agent (container's
# probe.c, dsec-protocol(7) protected_probes): the paths at their top the
# agent's image lacks are empty read-only stand-ins; an agent that does not
# look reads 0, one that looks (ls, cat, find, a Python open loop) sees each
# look counted, exactly, in usage, info, grade and the trajectory log; it
# cannot remove, rename, replace or write into a stand-in; grade sees the
# real files and its own sandbox counts nothing; a flood of 100,000 opens
# is counted exactly while the daemon answers pings within 1 s; so is a
# probe through a file request before any command; a sandbox
# without grade_layers has no count; a reset keeps the count and the
# stand-ins; an idle sandbox with stand-ins costs the daemon no descriptor
# more than one without; a stopped daemon leaves no mount.
. "$(dirname "$0")/lib.sh"

need_container
need_cmd dsecctl
/usr/bin/python3 -c 'import msgpack' 2>/dev/null || skip_all "needs python3-msgpack"
[ -e /dev/fuse ] || skip_all "needs /dev/fuse"
plan 17

# The agent's image: a small root with a Python (-S: its encodings only).
mk_small_root "$T/base" sh cat ls find rm mv rmdir chmod touch ln
PY=$(readlink -f /usr/bin/python3)
cp "$PY" "$T/base/bin/python3"
for lib in $(ldd "$PY" | grep -o '/[^ ]*'); do
	mkdir -p "$T/base$(dirname "$lib")"
	cp -Ln "$lib" "$T/base$lib" 2>/dev/null
done
pylib=$(/usr/bin/python3 -c 'import os; print(os.path.dirname(os.__file__))')
mkdir -p "$T/base$pylib"
cp -r "$pylib/encodings" "$pylib/os.py" "$T/base$pylib/"
# The grade layers: tests, a grader's answers, a flag file, all at the top.
mk_small_root "$T/grader" sh cat
mkdir -p "$T/grader/tests" "$T/grader/grader"
cat > "$T/grader/tests/check.sh" <<'SH'
[ "$(cat /data/answer.txt)" = 42 ] && [ "$(cat /grader/answers.json)" = '{"q":42}' ] &&
	[ "$(cat /flag.txt)" = flag ] && [ ! -e /tests/planted ] && echo PASS || echo FAIL
SH
echo '{"q":42}' > "$T/grader/grader/answers.json"
echo flag > "$T/grader/flag.txt"
export DSEC_FS3_STORE="$T/state/fs3"
mkdir -p "$T/state"
dsecctl image import --tag task:1 "$T/base" >/dev/null || bail "cannot import the task image"
dsecctl image import --tag grader:1 "$T/grader" >/dev/null || bail "cannot import the grader"
start_dsecd --set backends=container || bail "dsecd did not start"

run timeout 400 helper-py - "$DSEC_HOST" "$DSECD_PID" <<'PY'
import asyncio, json, os, sys, time, dsec
host, pid = sys.argv[1], int(sys.argv[2])
LOOP = "n = 0\nfor i in range(%d):\n    try: open('/grader/answers.json')\n    except OSError: n += 1\nprint(n)"
def cpu():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
async def main():
    res = {}
    async with dsec.AsyncClient(host) as c:
        async def graded(**kw):
            r = await c.call("create", {"backend": "container", "image": "task:1",
                                        "grade_layers": ["grader:1"], **kw})
            return c.sandbox(r["id"])
        async def probes(sb):
            return (await sb.usage())["misbehaviour"].get("protected_probes")
        quiet = await graded()
        r = await quiet.exec(["sh", "-c", "ls /; ls -l / >/dev/null; cat /bin/none; echo hi"])
        res["visible"] = " ".join(n for n in r.stdout.split() if n in ("tests", "grader", "flag.txt"))
        res["quiet"] = await probes(quiet)

        sb = await graded(trajectory=True)
        steps = []
        for cmd in (["ls", "/tests"], ["cat", "/grader/answers.json"],
                    ["find", "/", "-path", "/proc", "-prune", "-o", "-name", "answers.json", "-print"],
                    ["cat", "/flag.txt"], ["python3", "-S", "-c", LOOP % 1000]):
            await sb.exec(cmd)
            steps.append(str(await probes(sb)))
        res["steps"] = " ".join(steps)
        res["info"] = (await sb.info())["misbehaviour"].get("protected_probes")
        log = await sb.trajectory()
        res["logged"] = [e for e in log if e["op"] == "usage"][-1]["reply"]["result"]["misbehaviour"].get("protected_probes")

        before = await probes(sb)
        out = []
        for cmd in ("rm -rf /tests", "rmdir /tests", "mv /tests /t2", "mv /flag.txt /f",
                    "chmod 777 /tests", "touch /tests/planted", "echo x > /flag.txt",
                    "ln -s /tmp /grader/x"):
            r = await sb.exec(["sh", "-c", cmd + " 2>/dev/null"])
            out.append("refused" if r.exit_code else "done")
        r = await sb.exec(["sh", "-c", "ls -ld /tests /grader /flag.txt; ls -A /tests /grader; cat /flag.txt"])
        res["tamper"] = " ".join(out)
        res["intact"] = " ".join(l.split()[0] if l.startswith(("d", "-")) else l
                                 for l in r.stdout.splitlines() if l)
        try:
            await sb.write_file("/tests/planted", "echo PASS\n")
            res["plant"] = "written"
        except dsec.DsecError as e:
            res["plant"] = e.code
        res["tamper_counted"] = await probes(sb) > before

        await sb.write_file("/data/answer.txt", "42")
        before = await probes(sb)
        g = await sb.grade(["/bin/sh", "/tests/check.sh"], timeout=60)
        res["grade"] = g.stdout.strip()
        gr = await c.call("grade", {"id": sb.id, "argv": ["sh", "-c", "ls -A /tests; cat /flag.txt"]})
        res["grade_sees"] = " ".join(gr["stdout"].decode().split())
        res["grade_marks"] = gr["misbehaviour"].get("protected_probes") == before
        res["grade_counts"] = await probes(sb) - before

        # A flood, with the daemon pinged all along.
        stop = asyncio.Event()
        async def pinger():
            worst = 0.0
            while not stop.is_set():
                t = time.monotonic()
                await c.ping()
                worst = max(worst, time.monotonic() - t)
                await asyncio.sleep(0.01)
            return worst
        before, cpu0, t0 = await probes(sb), cpu(), time.monotonic()
        pt = asyncio.ensure_future(pinger())
        r = await sb.exec(["python3", "-S", "-c", LOOP % 100000], timeout=300)
        stop.set()
        worst = await pt
        res["flood"] = f"{r.stdout.strip()} {await probes(sb) - before}"
        res["flood_ping"] = worst < 1.0
        res["flood_diag"] = f"{time.monotonic() - t0:.2f} s, dsecd CPU {cpu() - cpu0:.2f} s, worst ping {worst * 1000:.1f} ms"

        early = await graded()
        try:
            await early.read_file("/grader/answers.json")
        except dsec.DsecError as e:
            res["early"] = f"{e.code} {await probes(early)}"
        await early.destroy()

        plain = await c.create(backend="container", image="task:1")
        await plain.exec(["ls", "/"])
        res["plain"] = "protected_probes" in (await plain.usage())["misbehaviour"]

        before = await probes(sb)
        await sb.reset()
        r = await sb.exec(["sh", "-c", "ls -ld /tests; ls /tests; cat /data/answer.txt"])
        res["reset"] = f"{r.stdout.split()[0]} {await probes(sb) - before}"

        def fds():	# but the network namespaces the backend keeps for creates
            fd = f"/proc/{pid}/fd"
            return sum(not os.readlink(f"{fd}/{n}").startswith("net:") for n in os.listdir(fd))
        async def idle(n, grade):
            await asyncio.sleep(1)	# the destroys before are done
            f0 = fds()
            made = [await (graded() if grade else c.create(backend="container", image="task:1"))
                    for _ in range(n)]
            for m in made:
                await m.exec(["true"])
            await asyncio.sleep(0.5)
            d = fds() - f0
            for m in made:
                await m.destroy()
            return d
        res["fds"] = f"{await idle(4, False)} {await idle(4, True)}"
        for s in (quiet, sb, plain):
            await s.destroy()
    print(json.dumps(res, separators=(",", ":")))
asyncio.run(main())
PY
[ "$RC" = 0 ] || printf '%s\n' "$OUT" | sed 's/^/# /' >&2
is "$(get visible)" "flag.txt grader tests" "the grade layers' top paths are stand-ins in the agent's root ($OUT)"
is "$(get quiet)" 0 "an agent that does not look: 0 (ls /, ls -l / do not count)"
is "$(get steps)" "1 2 4 5 1005" "ls /tests, cat /grader/answers.json, find / (two), cat /flag.txt, 1000 opens: each counted"
is "$(get info)" 1005 "info has the count"
is "$(get logged)" 1005 "so has the usage in the trajectory log"
is "$(get tamper)" "refused refused refused refused refused refused refused refused" \
	"rm, rmdir, mv of a stand-in, chmod, a file made in one or written over one, a link in one: all refused"
is "$(get intact)" "-r--r--r-- dr-xr-xr-x dr-xr-xr-x /grader: /tests:" "... the stand-ins are as they were, empty"
is "$(get plant) $(get tamper_counted)" "permission true" "a file request cannot plant one either; the attempts counted"
is "$(get grade)" PASS "grade sees the real files (the answers, the flag, no planted test)"
is "$(get grade_sees)" "check.sh flag" "... in the grade layers' /tests and /flag.txt"
is "$(get grade_marks) $(get grade_counts)" "true 0" "grade reports the count before it; its own sandbox counts nothing"
is "$(get flood) $(get flood_ping)" "100000 100000 true" "a flood of 100,000 opens: counted exactly, pings within 1 s"
diag "flood: $(get flood_diag)"
is "$(get early)" "not_found 1" "a probe before any command (a file request) is counted"
is "$(get plain)" false "a sandbox without grade_layers has no count"
is "$(get reset)" "dr-xr-xr-x 1" "a reset keeps the count and makes the stand-ins again"
fds=$(get fds)
is "${fds% *}" "${fds#* }" "an idle sandbox with stand-ins holds the daemon's descriptors one without does ($fds for 4)"
stop_dsecd
is "$(grep -c "$T/state" /proc/self/mounts)" 0 "a stopped daemon leaves no mount of the stand-ins"
