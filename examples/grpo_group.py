#!/usr/bin/python3
"""A GRPO group: one prompt, N rollouts from the same starting state.

The starting state is prepared once (files written into one sandbox),
saved as an image (snapshot), and N sandboxes are forked from it in one
batch request; each rollout then acts in its own sandbox (here: writes
its own answer), is graded there, and the group is destroyed in one
batch.  Rewards are normalised within the group, as GRPO does."""
import argparse
import asyncio
import statistics
import sys

import dsec

ANSWERS = ["42", "41", "42", "x", "42", "40", "42", "13"]


async def group(url, image, n):
    async with dsec.AsyncClient(url) as c:
        # Prepare once.
        async with c.create(backend="container", image=image) as base:
            await base.write_file("/data/question.txt", "what is 6 * 7?\n")
            await base.write_file("/data/grade.sh",
                                  '[ "$(cat /data/answer.txt)" = 42 ] && echo 1 || echo 0\n')
            tag = "grpo-example:%s" % base.id.split(":")[1]
            await base.snapshot(tag)
        # Fork the group in one request: all of it or none.
        sbs = await c.create_many(n, backend="container", image=tag, all_or_nothing=True,
                                  labels={"example": "grpo"})
        try:
            await asyncio.gather(*(sb.write_file("/data/answer.txt", ANSWERS[i % len(ANSWERS)])
                                   for i, sb in enumerate(sbs)))
            qs = await c.exec_many(sbs, ["cat", "/data/question.txt"])
            assert all(q.stdout == "what is 6 * 7?\n" for q in qs), "a fork lost the state"
            grades = await c.exec_many(sbs, ["sh", "/data/grade.sh"])
            rewards = [float(g.stdout.strip()) for g in grades]
        finally:
            await c.destroy_many(sbs)
        mean = statistics.mean(rewards)
        sd = statistics.pstdev(rewards) or 1.0
        adv = [(r - mean) / sd for r in rewards]
        print("rewards", rewards)
        print("advantages", ["%.2f" % a for a in adv])
        want = [1.0 if ANSWERS[i % len(ANSWERS)] == "42" else 0.0 for i in range(n)]
        return rewards == want


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-H", "--host", default=None, help="the daemon (default $DSEC_HOST)")
    ap.add_argument("--image", required=True, help="the image the group starts from")
    ap.add_argument("-n", type=int, default=8, help="rollouts in the group")
    a = ap.parse_args()
    sys.exit(0 if asyncio.run(group(a.host, a.image, a.n)) else 1)


if __name__ == "__main__":
    main()
