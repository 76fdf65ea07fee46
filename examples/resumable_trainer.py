#!/usr/bin/python3
"""A trainer that survives its own death: kill it, start it again, and its
rollouts go on where they were, no command run twice.

It keeps one small checkpoint file (the lease's id).  On start it opens a
lease, or takes back the one the checkpoint names; it creates its N
sandboxes with client tokens (the same token gets the same sandbox back,
so a restarted trainer finds them without remembering their ids); then it
drives every rollout step by step, each step numbered.  A step the
sandbox's trajectory log already has is answered from the log without
running: a command that appends to a file shows each line once however
often the trainer was killed.  While the trainer is dead its lease lapses
and its sandboxes are paused; if it never comes back they are destroyed
when the lease's grace ends.

    resumable_trainer.py -H URL --state /tmp/job1 -n 64 --steps 20
    (kill -9 it at any point, run the same command again)
"""
import argparse
import asyncio
import json
import os
import sys
import time

import dsec


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def save(path, state):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


async def rollout(sb, i, steps, delay, stats):
    """One rollout: step k appends a line to /tmp/trace and reads the count."""
    for k in range(steps):
        r = await sb.exec(["sh", "-c", "echo step %d >> /tmp/trace; wc -l < /tmp/trace" % k],
                          step=k)
        if r.replayed is not None:
            stats["replayed"] += 1
        else:
            stats["ran"] += 1
        if int(r.stdout.strip() or 0) != k + 1:
            raise SystemExit("rollout %d: step %d sees %s lines" % (i, k, r.stdout.strip()))
        if delay:
            await asyncio.sleep(delay)


async def train(args):
    state = load(args.state)
    async with dsec.AsyncClient(args.host) as c:
        if state.get("lease"):
            lease = await c.attach_lease(state["lease"], keep=True)
            print("took back lease", lease.id, flush=True)
        else:
            lease = await c.lease(timeout=args.lease_timeout, grace=args.grace,
                                  labels={"job": args.job}, keep=True)
            save(args.state, {"lease": lease.id})
            print("opened lease", lease.id, flush=True)
        lease.start_renewing()
        backend = {"backend": args.backend}
        if args.image:
            backend["image"] = args.image
        sbs = await asyncio.gather(*(lease.create(token="%s-%d" % (lease.id, i), **backend)
                                     for i in range(args.n)))
        stats = {"ran": 0, "replayed": 0}
        t0 = time.monotonic()
        await asyncio.gather(*(rollout(sb, i, args.steps, args.delay, stats)
                               for i, sb in enumerate(sbs)))
        print("steps run %d, answered from the log %d, in %.2f s" %
              (stats["ran"], stats["replayed"], time.monotonic() - t0), flush=True)
        # Score: each trace has each step once.
        traces = await asyncio.gather(*(sb.exec(["cat", "/tmp/trace"]) for sb in sbs))
        want = "".join("step %d\n" % k for k in range(args.steps))
        bad = [i for i, t in enumerate(traces) if t.stdout != want]
        if bad:
            print("rollouts with a step run twice or lost:", bad, file=sys.stderr)
            return 1
        print("all %d rollouts complete, every step once" % len(sbs), flush=True)
        if not args.keep:
            await lease.close()
            os.unlink(args.state)
        return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-H", "--host", default=os.environ.get("DSEC_HOST"))
    ap.add_argument("--state", required=True, help="the trainer's checkpoint file")
    ap.add_argument("-n", type=int, default=8, help="rollouts (sandboxes)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--delay", type=float, default=0.0, help="seconds between steps")
    ap.add_argument("--backend", default="container")
    ap.add_argument("--image", default=None)
    ap.add_argument("--job", default="resumable")
    ap.add_argument("--lease-timeout", type=float, default=5.0)
    ap.add_argument("--grace", type=float, default=300.0)
    ap.add_argument("--keep", action="store_true", help="leave the lease and sandboxes")
    args = ap.parse_args()
    sys.exit(asyncio.run(train(args)))


if __name__ == "__main__":
    main()
