#!/usr/bin/python3
"""An online judge on FnCall: each submission runs against each test case
in a fresh one-shot sandbox (the protocol's call: created, run,
destroyed in one round trip) with a time limit; the verdict is the
judge's usual: AC, WA, TLE or RE."""
import argparse
import asyncio
import sys

import dsec

CASES = [("2 3\n", "5\n"), ("10 -4\n", "6\n"), ("0 0\n", "0\n")]
SUBMISSIONS = {
    "right": "a, b = map(int, input().split())\nprint(a + b)\n",
    "wrong": "a, b = map(int, input().split())\nprint(a - b)\n",
    "slow": "import time\ntime.sleep(10)\n",
    "crash": "raise SystemExit(3)\n",
}
EXPECTED = {"right": "AC", "wrong": "WA", "slow": "TLE", "crash": "RE"}


def verdict(results):
    for r, (_, want) in zip(results, CASES):
        if r.timed_out:
            return "TLE"
        if r.exit_code != 0:
            return "RE"
        if r.stdout != want:
            return "WA"
    return "AC"


async def judge(url):
    async with dsec.AsyncClient(url) as c:
        async def one(code):
            return await asyncio.gather(*(c.run(code, backend="fncall", runtime="python3",
                                                stdin=inp, timeout=1.0)
                                          for inp, _ in CASES))
        names = list(SUBMISSIONS)
        all_results = await asyncio.gather(*(one(SUBMISSIONS[n]) for n in names))
        verdicts = {n: verdict(rs) for n, rs in zip(names, all_results)}
        for n in names:
            print("%-6s %s" % (n, verdicts[n]))
        return verdicts == EXPECTED


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-H", "--host", default=None, help="the daemon (default $DSEC_HOST)")
    sys.exit(0 if asyncio.run(judge(ap.parse_args().host)) else 1)


if __name__ == "__main__":
    main()
