#!/usr/bin/python3
"""sdk-bench - the Python SDK under a trainer's load, next to the C client.

  sdk-bench.py [-H URL] [--backend B] [-s SANDBOXES] [-k COMMANDS] [-c CONCURRENCY]

Creates SANDBOXES sandboxes (in batches), runs COMMANDS commands in each,
one after another (dsec-bench's checked default: /bin/sh -c 'echo "$X"'
with X in its environment, each result checked), with at most CONCURRENCY
in flight over all of them on one connection, destroys them, and prints:
the exec latency p50/p99 and rate, every result right or not, its own CPU
per command while they ran, the process's threads before and at the peak
(no thread per call: they stay what they were; sampled every 50 ms), and
its RSS.  `dsec-bench --mode exec -c CONCURRENCY --sandboxes SANDBOXES`
is the C client's run of the same shape (make bench-sdk runs both): the
SDK's overhead per exec is in the rates and the CPU per command (at
CONCURRENCY in flight both keep the daemon busy; p50s are not comparable
there, as dsec-bench's threads are not served in turn).
Figures only: nothing is asserted.
"""
import argparse
import asyncio
import os
import resource
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib", "python"))
import dsec  # noqa: E402


def threads():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return -1


def cpu():
    """This process's CPU so far (user + system), in seconds."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


async def main(a):
    lat, bad = [], 0
    async with dsec.AsyncClient(a.host) as c:
        t0 = time.monotonic()
        sbs = []
        while len(sbs) < a.sandboxes:
            n = min(256, a.sandboxes - len(sbs))
            got = await c.create_many(n, backend=a.backend)
            errs = [g for g in got if isinstance(g, Exception)]
            if errs:
                raise errs[0]
            sbs += got
        t_create = time.monotonic() - t0
        base_threads = threads()
        sem = asyncio.Semaphore(a.concurrency)
        peak = [base_threads]

        async def one(sb):
            # A rollout's commands, one after another in its sandbox (as
            # dsec-bench's exec mode runs them); the semaphore bounds the
            # commands in flight over all sandboxes.
            nonlocal bad
            for k in range(a.commands):
                async with sem:
                    t = time.monotonic()
                    x = "%s-%d" % (sb.id, k)
                    r = await sb.exec(["/bin/sh", "-c", 'echo "$X"'], env={"X": x})
                    lat.append(time.monotonic() - t)
                    if r.exit_code != 0 or r.stdout != x + "\n":
                        bad += 1

        async def sample():
            while True:
                peak[0] = max(peak[0], threads())
                await asyncio.sleep(0.05)
        sampler = asyncio.ensure_future(sample())
        cpu1 = cpu()
        t1 = time.monotonic()
        await asyncio.gather(*(one(sb) for sb in sbs))
        t_exec = time.monotonic() - t1
        cpu_exec = cpu() - cpu1
        sampler.cancel()
        await c.destroy_many(sbs)
    lat.sort()
    n = len(lat)
    print("sandboxes %d (created in %.2f s), commands %d at concurrency %d" %
          (len(sbs), t_create, n, a.concurrency))
    print("exec p50 %.2f ms p99 %.2f ms, %.1f execs/s; wrong results %d" %
          (lat[n // 2] * 1e3, lat[min(n - 1, n * 99 // 100)] * 1e3, n / t_exec, bad))
    print("client CPU %.0f us/command" % (cpu_exec * 1e6 / max(n, 1)))
    print("threads: %d before the commands, %d at the peak" % (base_threads, peak[0]))
    print("max RSS %.1f MiB" % (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("-H", "--host", default=None)
    ap.add_argument("--backend", default="container")
    ap.add_argument("-s", "--sandboxes", type=int, default=1000)
    ap.add_argument("-k", "--commands", type=int, default=10)
    ap.add_argument("-c", "--concurrency", type=int, default=256)
    asyncio.run(main(ap.parse_args()))
