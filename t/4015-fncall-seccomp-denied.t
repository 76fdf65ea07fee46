#!/bin/bash
# Misbehaviour counters for fncall: the system calls a call's seccomp
# filter refuses are counted, as the container counts them (t/4012).  A
# command that makes N refused calls (unshare(CLONE_NEWUSER), keyctl,
# ptrace, sethostname, through python3's ctypes; unshare -U in the sh
# runtime) gets the errnos it always got, its result says N and its
# sandbox's usage grows by exactly N; a quiet command and a new sandbox
# read 0; another sandbox's count is its own; a command killed at its
# timeout and a one-shot call count too; a flood of 100000 refused
# calls is counted, every one, while dsecd answers pings within a second,
# and answered at most 20,000 a second (the zygote's time is bounded).
. "$(dirname "$0")/lib.sh"

need_fncall
/usr/bin/python3 -c 'import msgpack' 2>/dev/null || skip_all "needs python3-msgpack"
plan 18

start_dsecd --set backends=fncall || bail "dsecd did not start"

run timeout 300 helper-py - "$DSEC_HOST" <<'PY'
import asyncio, json, sys, time, dsec
from refused_calls import rounds
host = sys.argv[1]
# argv[1] rounds of four refused calls: their errnos, how many.
PROBE = rounds([(272, 0x10000000), (250, 0), (101, 0x4206, 1), (170, 0, 0)])
FLOOD = r"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
f, a = libc.syscall, ctypes.c_long(250)
bad = sum(1 for _ in range(100000) if f(a, a) != -1 or ctypes.get_errno() != 1)
print(bad)
"""
async def denied(sb):
    return (await sb.usage())["misbehaviour"].get("seccomp_denied")
async def main():
    res = {}
    async with dsec.AsyncClient(host) as c:
        sb = await c.create(backend="fncall", runtime="python3")
        res["fresh"] = await denied(sb)
        r = await sb.exec(["python3", "-c", "pass"])
        res["quiet"] = f"{r.exit_code} {r.seccomp_denied} {await denied(sb)}"
        r = await sb.exec(["python3", "-c", PROBE, "5"])
        res["errnos"] = r.stdout.strip() or r.stderr.strip()[-200:]
        res["cmd"] = f"{r.seccomp_denied} {await denied(sb)}"
        r = await sb.exec(["python3", "-c", PROBE, "2"])
        res["again"] = f"{r.seccomp_denied} {await denied(sb)}"
        other = await c.create(backend="fncall", runtime="python3")
        res["other"] = await denied(other)
        r = await other.exec(["python3", "-c", PROBE, "1"])
        res["other_cmd"] = f"{r.seccomp_denied} {await denied(other)} {await denied(sb)}"
        # Killed at its timeout after its refused calls: its report is the reap's.
        r = await other.exec(["python3", "-c", PROBE + "\nimport time; time.sleep(60)", "1"],
                             timeout=5)
        res["timeout"] = f"{r.timed_out} {r.seccomp_denied} {await denied(other)}"
        r = await c.run(["python3", "-c", PROBE, "3"], backend="fncall", runtime="python3")
        res["oneshot"] = f"{r.stdout.strip()} {r.seccomp_denied}"
        # At the same time in three sandboxes: each its own, exactly.
        many = [await c.create(backend="fncall", runtime="python3") for _ in range(3)]
        rs = await asyncio.gather(*[m.exec(["python3", "-c", PROBE, str(k)])
                                    for m, k in zip(many, (30, 50, 70))])
        res["together"] = " ".join([f"{r.seccomp_denied}/{await denied(m)}"
                                    for r, m in zip(rs, many)])
        for m in many:
            await m.destroy()
        sh = await c.create(backend="fncall", runtime="sh")
        r = await sh.exec("unshare -U true; echo $?")
        res["sh"] = f"{r.stdout.strip()} {r.seccomp_denied} {await denied(sh)}"
        # The flood, while pings go on: the slowest answer.
        f0 = time.monotonic()
        task = asyncio.ensure_future(sb.exec(["python3", "-c", FLOOD], timeout=240))
        worst, pings = 0.0, 0
        while not task.done():
            t0 = time.monotonic()
            await asyncio.wait_for(c.ping(), 10)
            worst = max(worst, time.monotonic() - t0)
            pings += 1
            await asyncio.sleep(0.05)
        r = await task
        res["flood_s"] = f"{time.monotonic() - f0:.2f}"
        res["flood"] = f"{r.exit_code} {r.stdout.strip()} {r.seccomp_denied} {await denied(sb)}"
        res["pings"] = f"{pings} {worst:.3f}"
        res["ping_ok"] = worst < 1.0
        await other.destroy()
        await sh.destroy()
        await sb.destroy()
    print(json.dumps(res, separators=(",", ":")))
asyncio.run(main())
PY
[ "$RC" = 0 ] || printf '%s\n' "$OUT" | sed 's/^/# /' >&2
diag "pings during the flood (how many, slowest s): $(get pings)"
is "$(get errnos)" "1 20" "20 refused calls (unshare, keyctl, ptrace, sethostname) each fail EPERM, as before"
if [ "$(get fresh)" = null ]; then
	# The kernel has no USER_NOTIF (before Linux 5.0): nothing counts.
	dsecd_log | grep "not counted" | sed "s/^/# /" >&2
	for _ in $(seq 13); do skip "the zygote does not count refused calls here (see dsecd.log)"; done
else
	is "$(get fresh)" 0 "a new sandbox reads 0"
	is "$(get quiet)" "0 0 0" "a quiet command reads 0, and so does its sandbox"
	is "$(get cmd)" "20 20" "the command's result counts each, and usage grows by exactly that many"
	is "$(get again)" "8 28" "another command adds its own"
	is "$(get other)" 0 "another sandbox reads 0"
	is "$(get other_cmd)" "4 4 28" "... and counts its own, not the first one's"
	is "$(get timeout)" "True 4 8" "a command killed at its timeout still reports its refused calls"
	is "$(get oneshot)" "1 12 12" "a one-shot call's result counts its own"
	is "$(get together)" "120/120 200/200 280/280" \
		"three sandboxes' commands at the same time: each counts its own"
	is "$(get sh)" "1 1 1" "the sh runtime: unshare -U fails as before, counted"
	is "$(get flood)" "0 0 100000 100028" "a flood of 100000 refused calls: each EPERM, each counted"
	is "$(get ping_ok)" true "dsecd answers pings within a second meanwhile"
	# The watcher answers at most 20,000 a second (its time is not the
	# sandbox's): 100000 take 5 s at least, whatever the machine.
	ok $(awk -v s="$(get flood_s)" 'BEGIN { exit !(s >= 4.5) }'; echo $?) \
		"... answered at most 20,000 a second: the flood took $(get flood_s) s"
fi
ok $(kill -0 "$DSECD_PID"; echo $?) "dsecd is still up"

# Where the zygote cannot load the counting filter (here: dsecd runs under a
# filter that already has a listener, so the kernel says EBUSY, as an older
# one without USER_NOTIF would refuse it) it loads the plain one: calls fail
# as before, results say 0, usage has no count, and the log says why.
stop_dsecd
cat > "$T/listen.py" <<'PY'
import ctypes, os, signal, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
ins = ctypes.create_string_buffer(struct.pack("HBBI", 0x06, 0, 0, 0x7fff0000))  # ALLOW
prog = Prog(1, ctypes.addressof(ins))
# seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog)
fd = libc.syscall(ctypes.c_long(317), ctypes.c_long(1), ctypes.c_long(8), ctypes.byref(prog))
if fd < 0:
    sys.exit(77)
# The listener lives as long as dsecd (a child of ours that dies with it).
if os.fork() == 0:
    libc.prctl(1, signal.SIGKILL)	# PR_SET_PDEATHSIG
    signal.pause()
    os._exit(0)
os.execv(sys.argv[1], sys.argv[1:])
PY
mkdir -p "$T/s2"
/usr/bin/python3 "$T/listen.py" "$TOP/dsecd/dsecd" --foreground --state-dir "$T/s2" \
	--listen "ipc://$T/s2.sock" --backend-dir "$TOP/backends" --helper-dir "$TOP/build/libexec" \
	--set backends=fncall 2>"$T/s2.log" &
DSECD_PID=$!
for _ in $(seq 300); do
	helper-req -q "ipc://$T/s2.sock" ping >/dev/null 2>&1 && break
	kill -0 "$DSECD_PID" 2>/dev/null || break
	sleep 0.1
done
if ! helper-req -q "ipc://$T/s2.sock" ping >/dev/null 2>&1; then
	wait "$DSECD_PID"
	[ $? = 77 ] || { sed 's/^/# /' "$T/s2.log" >&2; bail "dsecd under a listener did not start"; }
	DSECD_PID=
	for _ in 1 2 3; do skip "the kernel makes no seccomp listener here"; done
else
	run timeout 120 helper-py - "ipc://$T/s2.sock" <<'PY'
import asyncio, json, sys, dsec
from refused_calls import each
PROBE = each([(272, 0x10000000), (250, 0), (101, 0x4206, 1), (170, 0, 0)])
async def main():
    async with dsec.AsyncClient(sys.argv[1]) as c:
        sb = await c.create(backend="fncall", runtime="python3")
        r = await sb.exec(["python3", "-c", PROBE])
        u = (await sb.usage())["misbehaviour"].get("seccomp_denied")
        print(json.dumps({"plain": f"{r.stdout.strip()} {r.seccomp_denied} {u}"}, separators=(",", ":")))
        await sb.destroy()
asyncio.run(main())
PY
	[ "$RC" = 0 ] || printf '%s\n' "$OUT" | sed 's/^/# /' >&2
	is "$(get plain)" "1 1 1 1 0 None" \
		"without the counting filter: the same errnos, a result of 0, no count in usage"
	diag "$(grep -m1 "not counted" "$T/s2.log")"
	ok $(grep -q "refused calls are not counted" "$T/s2.log"; echo $?) "... and the log says so"
	ok $(kill -0 "$DSECD_PID"; echo $?) "that dsecd is up too"
fi
