#!/usr/bin/python3
"""An SWE-style rollout: a repository with a failing test goes into a
container sandbox; the "agent" runs the tests, reads the code, edits it,
runs the tests again; the reward is whether they pass.  The agent here
is a fixed script: a trainer's policy would choose these actions."""
import argparse
import asyncio
import sys

import dsec

REPO = {
    "calc/__init__.py": "",
    "calc/ops.py": ("def add(a, b):\n    return a - b  # the bug\n\n\n"
                    "def mul(a, b):\n    return a * b\n"),
    "tests/__init__.py": "",
    "tests/test_ops.py": (
        "import unittest\n"
        "from calc.ops import add, mul\n\n\n"
        "class T(unittest.TestCase):\n"
        "    def test_add(self):\n"
        "        self.assertEqual(add(2, 3), 5)\n\n"
        "    def test_mul(self):\n"
        "        self.assertEqual(mul(2, 3), 6)\n"),
}
# No bytecode cache: an edit within the same second that keeps the file's
# size (as "a - b" -> "a + b" does) would leave Python running the stale
# .pyc, whose check is the source's mtime in seconds and its size.
TESTS = "cd /work/repo && PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s tests -t . 2>&1"


async def rollout(url):
    async with dsec.AsyncClient(url) as c:
        async with c.create(backend="container", labels={"example": "swe"}) as sb:
            for path, text in REPO.items():
                await sb.write_file("/work/repo/" + path, text)
            before = await sb.exec(["sh", "-c", TESTS], timeout=60)
            print("tests before the edit: exit", before.exit_code)
            src = (await sb.read_file("/work/repo/calc/ops.py")).decode()
            await sb.write_file("/work/repo/calc/ops.py", src.replace("a - b", "a + b"))
            after = await sb.exec(["sh", "-c", TESTS], timeout=60)
            print("tests after the edit: exit", after.exit_code)
            reward = 1.0 if after.exit_code == 0 else 0.0
            print("reward", reward)
            return before.exit_code != 0 and "FAILED" in before.stdout and reward == 1.0


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("-H", "--host", default=None, help="the daemon (default $DSEC_HOST)")
    ok = asyncio.run(rollout(ap.parse_args().host))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
