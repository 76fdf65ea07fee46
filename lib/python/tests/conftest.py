"""A private dsecd of the source tree for the SDK's tests: the scripted
"test" backend of t/ (commands: echo, cat, sleep, exit, fail; files in
memory), and fncall when this process may run it (root)."""
import os
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(TOP, "lib", "python"))


def _ping(url):
    return subprocess.run([os.path.join(TOP, "t", "helper-req"), "-q", url, "ping"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def _daemon(node, extra):
    """Starts a dsecd of node's name with extra settings; yields its
    description, stops it at the end."""
    d = tempfile.mkdtemp(prefix="dsec-sdk.")
    url = "ipc://%s/dsecd.sock" % d
    # The backends directory holds fncall.so and container.so; the test
    # backend is in t/.  The real ones need root.
    backends = "test,fncall,container" if os.geteuid() == 0 else "test"
    os.symlink(os.path.join(TOP, "t", "test.so"), os.path.join(d, "test.so"))
    for b in ("fncall", "container"):
        os.symlink(os.path.join(TOP, "backends", b + ".so"), os.path.join(d, b + ".so"))
    log = open(os.path.join(d, "dsecd.log"), "w")
    args = [os.path.join(TOP, "dsecd", "dsecd"), "--foreground", "--node", node,
            "--state-dir", os.path.join(d, "state"), "--listen", url,
            "--backend-dir", d, "--helper-dir", os.path.join(TOP, "build", "libexec"),
            "--set", "backends=" + backends, "--set", "default_backend=test",
            "--set", "container.uid_base=3300000000"]
    for kv in extra:
        args += ["--set", kv]
    p = subprocess.Popen(args, stderr=log)
    for _ in range(300):
        if _ping(url):
            break
        if p.poll() is not None:
            raise RuntimeError("dsecd exited: " + open(os.path.join(d, "dsecd.log")).read())
        time.sleep(0.1)
    yield {"url": url, "fncall": "fncall" in backends, "container": "container" in backends,
           "dir": d}
    p.terminate()
    p.wait(30)
    subprocess.run(["rm", "-rf", d])


@pytest.fixture(scope="session")
def daemon():
    """The daemon's url; stopped at the end of the session."""
    yield from _daemon("sdk", [])


@pytest.fixture(scope="session")
def small_daemon():
    """A daemon of the smallest max_frame (256K: a reply carries 192K of a
    file), whose fncall sandboxes have room for 40 MiB four times."""
    yield from _daemon("small", ["max_frame=256K", "output_cap=64K",
                                 "fncall.scratch=256M"])
