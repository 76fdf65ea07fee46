#!/usr/bin/python3
"""sdk-bench - the Python SDK under a trainer's load, next to the C client.

  sdk-bench.py [-H URL] [--backend B] [-s SANDBOXES] [-k COMMANDS] [-c CONCURRENCY]

Creates SANDBOXES sandboxes (in batches), runs COMMANDS commands in each
(`echo N`, each checked) with at most CONCURRENCY in flight on one
connection, destroys them, and prints: the exec latency p50/p99 and rate,
every result right or not, the process's threads at the peak (no thread
per call: they stay what they were), and its RSS.  Run dsec-bench --mode
exec -c CONCURRENCY with the same backend beside it for the C client's
figure: the SDK's overhead per exec is the difference of the p50s.
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

        async def one(sb, k):
            nonlocal bad
            async with sem:
                t = time.monotonic()
                r = await sb.exec(["echo", "%s-%d" % (sb.id, k)])
                lat.append(time.monotonic() - t)
                if r.exit_code != 0 or r.stdout != "%s-%d\n" % (sb.id, k):
                    bad += 1
                peak[0] = max(peak[0], threads())
        t1 = time.monotonic()
        await asyncio.gather(*(one(sb, k) for sb in sbs for k in range(a.commands)))
        t_exec = time.monotonic() - t1
        await c.destroy_many(sbs)
    lat.sort()
    n = len(lat)
    print("sandboxes %d (created in %.2f s), commands %d at concurrency %d" %
          (len(sbs), t_create, n, a.concurrency))
    print("exec p50 %.2f ms p99 %.2f ms, %.1f execs/s; wrong results %d" %
          (lat[n // 2] * 1e3, lat[min(n - 1, n * 99 // 100)] * 1e3, n / t_exec, bad))
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
