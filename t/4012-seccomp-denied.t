#!/bin/bash
# Misbehaviour counters, rlcoord's guards (c): the system calls a container
# sandbox's seccomp filter refuses are counted.  An agent that makes N
# refused calls (unshare, mount, keyctl, ptrace, through python3's ctypes)
# gets the errnos it always got, its result says N and the sandbox's
# usage grows by exactly N; a quiet sandbox reads 0; calls through a
# session, a streamed command, a request large enough for the exec helper
# and a create's seccomp_deny count too, and so do those of a process that
# left the command's session (setsid); what the agent does to reach the
# count (signals to the init and its threads, its descriptors, pidfd_getfd)
# leaves it as it was plus those refusals; the usage in the trajectory log
# has the count, an exec entry its own, and grade reports it.
. "$(dirname "$0")/lib.sh"

need_container
/usr/bin/python3 -c 'import msgpack' 2>/dev/null || skip_all "needs python3-msgpack"
plan 17

start_dsecd --set backends=container || bail "dsecd did not start"

run timeout 300 helper-py - "$DSEC_HOST" <<'PY'
import asyncio, json, sys, dsec
from refused_calls import rounds
host = sys.argv[1]
# argv[1] rounds of four refused calls: their errnos, how many.
PROBE = rounds([(272, 0x10000000), (165, 0, 0, 0, 0, 0), (250, 0), (101, 0x4206, 1)])
# A child that leaves the command's session and process group, then is refused.
DETACH = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
pid = os.fork()
if pid == 0:
    os.setsid()
    for _ in range(3):
        libc.syscall(ctypes.c_long(250), ctypes.c_long(0))
    os._exit(0)
os.waitpid(pid, 0)
"""
# What an agent may try against the count: signal the init and each of its
# threads, look for its descriptors, take one with pidfd_getfd (refused).
ATTACK = r"""
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
res = []
for tid in sorted(os.listdir("/proc/1/task")):
    for sig in (signal.SIGKILL, signal.SIGSTOP, signal.SIGTERM):
        try:
            ctypes.set_errno(0)
            libc.syscall(ctypes.c_long(234), ctypes.c_long(1), ctypes.c_long(int(tid)),
                         ctypes.c_long(sig))   # tgkill
        except Exception:
            pass
try:
    os.kill(1, signal.SIGKILL)
except OSError:
    pass
opened = 0
for n in os.listdir("/proc/1/fd"):
    try:
        os.close(os.open("/proc/1/fd/" + n, os.O_RDONLY))
        opened += 1
    except OSError:
        try:
            os.readlink("/proc/1/fd/" + n)
            opened += 1
        except OSError:
            pass
res.append("opened=%d" % opened)
fd = os.pidfd_open(1)
ctypes.set_errno(0)
r = libc.syscall(ctypes.c_long(438), ctypes.c_long(fd), ctypes.c_long(3), ctypes.c_long(0))
res.append("getfd=%d" % (ctypes.get_errno() if r < 0 else 0))
print(" ".join(res))
"""
async def denied(sb):
    return (await sb.usage())["misbehaviour"].get("seccomp_denied")
async def main():
    res = {}
    async with dsec.AsyncClient(host) as c:
        sb = await c.create(backend="container", trajectory=True)
        res["fresh"] = await denied(sb)
        r = await sb.exec(["true"])
        res["quiet"] = r.seccomp_denied
        res["quiet_usage"] = await denied(sb)
        r = await sb.exec(["python3", "-c", PROBE, "5"])
        res["errnos"] = r.stdout.strip()
        res["cmd"] = r.seccomp_denied
        res["usage1"] = await denied(sb)
        r = await sb.exec(["python3", "-c", PROBE, "2"])
        res["usage2"] = f"{r.seccomp_denied} {await denied(sb)}"
        r = await sb.exec(["python3", "-c", DETACH])
        res["detached"] = f"{r.seccomp_denied} {await denied(sb)}"
        async with await sb.session() as s:
            r = await s.run(f"python3 -c '{PROBE}' 1")
            res["session"] = f"{r.stdout.strip()} {r.seccomp_denied} {await denied(sb)}"
        p = await sb.start(["python3", "-c", PROBE, "1"])
        r = await p.wait()
        res["stream"] = f"{r.seccomp_denied} {await denied(sb)}"
        r = await sb.exec(["python3", "-c", PROBE, "1"], env={"BIG": "x" * 70000})
        res["large"] = f"{r.stdout.strip()} {r.seccomp_denied} {await denied(sb)}"
        before = await denied(sb)
        r = await sb.exec(["python3", "-c", ATTACK])
        res["attack"] = r.stdout.strip() or r.stderr.strip()[-200:]
        r = await sb.exec(["python3", "-c", PROBE, "1"])
        res["after_attack"] = f"{r.seccomp_denied} {await denied(sb) - before - 1}"
        log = await sb.trajectory()
        last = [e for e in log if e["op"] == "usage"][-1]
        res["logged"] = last["reply"]["result"]["misbehaviour"]["seccomp_denied"] == await denied(sb)
        ex = [e for e in log if e["op"] == "exec"]
        res["logged_exec"] = ex[1]["reply"]["result"].get("seccomp_denied")
        # recvmsg: the init reads each request with it (its own calls go on).
        other = await c.create(backend="container", seccomp_deny=["getppid", "recvmsg"])
        res["other"] = await denied(other)
        r = await other.exec(["python3", "-c", "import os; print(os.getppid())"])
        res["deny"] = f"{r.stdout.strip()} {r.seccomp_denied} {await denied(other)}"
        r = await other.exec(["true"])
        res["deny_init"] = f"{r.exit_code} {r.seccomp_denied} {await denied(other)}"
        await other.destroy()
        await sb.destroy()
    print(json.dumps(res, separators=(",", ":")))
asyncio.run(main())
PY
[ "$RC" = 0 ] || printf '%s\n' "$OUT" | sed 's/^/# /' >&2
is "$(get fresh) $(get quiet) $(get quiet_usage)" "0 0 0" \
	"a new sandbox and a quiet command read 0"
is "$(get errnos)" "1 20" "20 refused calls (unshare, mount, keyctl, ptrace) each fail EPERM"
is "$(get cmd)" 20 "... the command's result counts each"
is "$(get usage1)" 20 "... and usage grows by exactly that many"
is "$(get usage2)" "8 28" "another command adds its own"
is "$(get detached)" "3 31" "a process that left the command's session is counted"
is "$(get session)" "1 4 4 35" "a session's command: the same errnos, counted in its result and the sandbox's"
is "$(get stream)" "4 39" "a streamed command (the exec helper) is counted"
is "$(get large)" "1 4 4 43" "a request too large for the init's socket (the exec helper) too"
is "$(get attack)" "opened=0 getfd=1" \
	"the agent can open none of the init's descriptors nor take one (pidfd_getfd refused)"
is "$(get after_attack)" "4 4" \
	"after signals to the init and each of its threads the count is as it was, plus those refusals"
is "$(get logged)" true "the usage in the trajectory log has the count"
is "$(get logged_exec)" 20 "... and the exec entry its result's"
is "$(get other)" 0 "another sandbox's count is its own"
is "$(get deny)" "-1 1 1" "a create's seccomp_deny: refused as before (getppid: -EPERM), counted"
is "$(get deny_init)" "0 0 1" \
	"... and one the init's own calls use (recvmsg, for each request) neither stops nor counts them"
ok $(kill -0 "$DSECD_PID"; echo $?) "dsecd is still up"
