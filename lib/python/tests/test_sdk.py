"""The Python SDK against a private dsecd: what a trainer relies on."""
import asyncio
import os
import subprocess
import sys
import time

import pytest

import dsec


def run(coro):
    return asyncio.run(coro)


def threads():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return -1


def test_quick_start_async(daemon):
    async def main():
        async with dsec.AsyncClient(daemon["url"]) as c:
            sb = await c.create(backend="test")
            r = await sb.exec(["echo", "hi"])
            await sb.destroy()
            return sb, r
    sb, r = run(main())
    assert sb.id.startswith("sdk:") and sb.node == "sdk" and sb.backend == "test"
    assert (r.exit_code, r.stdout, r.stderr) == (0, "hi\n", "")
    assert isinstance(r.stdout_bytes, bytes) and r.duration >= 0


def test_quick_start_sync(daemon):
    with dsec.Client(daemon["url"]) as c:
        with c.create(backend="test") as sb:
            r = sb.exec(["echo", "sync"])
            sid = sb.id
        with pytest.raises(dsec.NotFound):
            c.sandbox(sid).info()
    assert r.stdout == "sync\n"


def test_context_manager_destroys(daemon):
    async def main():
        async with dsec.AsyncClient(daemon["url"]) as c:
            async with c.create(backend="test") as sb:
                assert (await sb.info())["state"] == "running"
            with pytest.raises(dsec.NotFound):
                await sb.info()
    run(main())


def test_results_and_errors(daemon):
    async def main():
        async with dsec.AsyncClient(daemon["url"]) as c:
            sb = await c.create(backend="test")
            assert (await sb.exec(["exit", "3"])).exit_code == 3
            r = await sb.exec(["cat"], stdin=b"\x00bin\xff")
            assert r.stdout_bytes == b"\x00bin\xff"
            t = await sb.exec(["sleep", "5"], timeout=0.2)
            assert t.timed_out and t.exit_code == -1, "a timeout is a result"
            with pytest.raises(dsec.BackendError) as e:
                await sb.exec(["fail"])
            assert isinstance(e.value, dsec.InfrastructureError)
            assert e.value.code == "backend_error" and "fail" in e.value.message
            with pytest.raises(dsec.NotFound):
                await c.sandbox("sdk:00000000deadbeef").exec(["true"])
            with pytest.raises(dsec.Invalid):
                await c.sandbox("no-colon").exec(["true"])
            with pytest.raises(dsec.UnknownOp):
                await c.call("no_such_op", {})
            with pytest.raises(dsec.NoBackend):
                await c.create(backend="nope")
            await sb.destroy()
            await sb.destroy()  # gone already: not an error
    run(main())


def test_files(daemon):
    async def main():
        async with dsec.AsyncClient(daemon["url"]) as c:
            async with c.create(backend="test") as sb:
                await sb.write_file("/data/a.txt", "hello")
                await sb.write_file("/data/b.bin", bytes(range(256)))
                assert await sb.read_file("/data/a.txt") == b"hello"
                assert await sb.read_file("/data/b.bin") == bytes(range(256))
                assert await sb.read_file("/data/a.txt", offset=1, length=3) == b"ell"
                with pytest.raises(dsec.DsecError):
                    await sb.read_file("/nope")
                with pytest.raises(dsec.Unsupported, match="cannot append"):
                    await sb.write_file("/data/a.txt", "x", append=True)  # no file API
    run(main())


def test_pause_resume_info(daemon):
    async def main():
        async with dsec.AsyncClient(daemon["url"]) as c:
            async with c.create(backend="test") as sb:
                await sb.pause()
                assert (await sb.info())["state"] == "paused"
                await sb.resume()
                assert (await sb.exec(["echo", "back"])).stdout == "back\n"
                node = await c.info()
                assert node["node"] == "sdk" and node["sandboxes"] >= 1
                assert any(s["id"] == sb.id for s in await c.list())
    run(main())


def test_many_at_once_no_thread_per_call(daemon):
    """200 sandboxes, 5 commands each, all in flight together on one
    connection: every result right, and the process has no more threads
    at 200 calls in flight than at 1; and those are few, whatever the
    machine's CPUs: the interpreter's, the executor's that connected, and
    libdsec's nng's 7 (2 running callbacks, 1 for timeouts, 1 resolver,
    its poller, timer and reaper)."""
    async def main():
        async with dsec.AsyncClient(daemon["url"]) as c:
            one = await c.create(backend="test")
            await one.exec(["echo", "warm"])
            before = threads()
            sbs = await asyncio.gather(*(c.create(backend="test") for _ in range(200)))
            peak = [0]

            async def work(i, sb):
                outs = []
                for k in range(5):
                    outs.append((await sb.exec(["echo", str(i), str(k)])).stdout)
                    peak[0] = max(peak[0], threads())
                return outs
            res = await asyncio.gather(*(work(i, sb) for i, sb in enumerate(sbs)))
            await asyncio.gather(*(sb.destroy() for sb in sbs), one.destroy())
            return before, peak[0], res
    before, peak, res = run(main())
    assert res == [["%d %d\n" % (i, k) for k in range(5)] for i in range(200)]
    assert peak == before, "threads: %d with one call, %d with 200 in flight" % (before, peak)
    assert before <= 9, "threads: %d in a client process (at most 9)" % before


def test_no_daemon_is_unavailable_at_once(tmp_path):
    async def main():
        async with dsec.AsyncClient("ipc://%s/none.sock" % tmp_path) as c:
            await c.ping()
    t0 = time.monotonic()
    with pytest.raises(dsec.Unavailable):
        run(main())
    assert time.monotonic() - t0 < 5


def test_oneshot_run(daemon):
    async def main():
        async with dsec.AsyncClient(daemon["url"]) as c:
            return await c.run(["echo", "once"], backend="test")
    assert run(main()).stdout == "once\n"


def test_fncall_python(daemon):
    if not daemon["fncall"]:
        pytest.skip("fncall needs root")

    async def main():
        async with dsec.AsyncClient(daemon["url"]) as c:
            async with c.create(backend="fncall", runtime="python3") as sb:
                await sb.write_file("in.txt", "21")
                return await sb.exec("print(int(open('in.txt').read()) * 2)")
    r = run(main())
    assert (r.exit_code, r.stdout) == (0, "42\n")


def test_error_classes_cover_every_code():
    names = set(dsec.BY_CODE)
    assert {"not_found", "capacity", "timeout", "sandbox_lost", "node_lost",
            "unavailable", "busy", "permission"} <= names
    assert dsec.NoCapacity("x").code == "capacity"
    assert isinstance(dsec.error_for("node_lost", "m"), dsec.NodeLost)
    assert type(dsec.error_for("a_future_code", "m")) is dsec.DsecError


def test_pydoc_reads():
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."))
    out = subprocess.run([sys.executable, "-m", "pydoc", "dsec"], capture_output=True, text=True,
                         env=env)
    assert out.returncode == 0
    assert "AsyncClient" in out.stdout and "async with dsec.AsyncClient() as c" in out.stdout


def test_pip_installs_offline(tmp_path):
    """pip install lib/python, offline, no build isolation: the package
    imports from the install and finds libdsec."""
    src = os.path.join(os.path.dirname(__file__), "..")
    venv = tmp_path / "venv"
    if subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                      capture_output=True).returncode != 0:
        pytest.skip("no venv module (python3-venv)")
    build = tmp_path / "src"
    subprocess.run(["cp", "-r", src, str(build)], check=True)  # keep the tree clean
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-build-isolation",
                        "--no-index", str(build)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lib = os.path.abspath(os.path.join(src, "..", "libdsec.so"))
    r = subprocess.run([str(venv / "bin" / "python"), "-c",
                        "import dsec, sys; print(dsec.__file__); print(dsec.AsyncClient.__name__)"],
                       capture_output=True, text=True, cwd=str(tmp_path),
                       env=dict({k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
                                DSEC_LIBDSEC=lib))
    assert r.returncode == 0, r.stderr
    assert str(venv) in r.stdout and "AsyncClient" in r.stdout


def test_streaming_and_sessions(daemon):
    """container: output as it comes (async iterator, callbacks), stdin,
    signals; a shell session keeps its state."""
    if not daemon["container"]:
        pytest.skip("container needs root")

    async def main():
        async with dsec.AsyncClient(daemon["url"]) as c:
            try:
                sb = await c.create(backend="container")
            except (dsec.Unsupported, dsec.BackendError, dsec.NoBackend) as e:
                pytest.skip("no container sandbox here: %s" % e)
            async with sb:
                proc = await sb.start(["sh", "-c", "echo a; sleep 0.5; echo b >&2; exit 4"])
                seen = [x async for x in proc]
                assert seen == [("stdout", b"a\n"), ("stderr", b"b\n")], seen
                assert proc.result.exit_code == 4 and proc.result.stdout == "a\n"
                cat = await sb.start(["cat"], stdin_open=True)
                await cat.write("to stdin", eof=True)
                assert (await cat.wait()).stdout == "to stdin"
                sl = await sb.start(["sleep", "100"])
                await sl.signal("TERM")
                assert (await sl.wait()).signal == 15
                got = []
                r = await sb.exec_stream("for i in 1 2 3; do echo $i; done",
                                         on_stdout=got.append)
                assert r.exit_code == 0 and b"".join(got) == b"1\n2\n3\n"
                async with await sb.session() as s:
                    await s.run("cd /tmp && export X=kept")
                    r = await s.run("echo $PWD $X")
                    assert r.stdout == "/tmp kept\n"
    run(main())


def test_batches(daemon):
    """One round trip: 16 creates, a command in each, destroy them all;
    errors per entry; all_or_nothing leaves nothing behind."""
    async def main():
        async with dsec.AsyncClient(daemon["url"]) as c:
            before = (await c.info())["sandboxes"]
            sbs = await c.create_many(16, backend="test")
            assert all(isinstance(s, dsec.AsyncSandbox) for s in sbs)
            assert len({s.id for s in sbs}) == 16
            res = await c.exec_many(sbs + ["sdk:00000000deadbeef"], ["echo", "batched"])
            assert [r.stdout for r in res[:16]] == ["batched\n"] * 16
            assert isinstance(res[16], dsec.NotFound)
            mixed = await c.batch([{"op": "ping"}, {"op": "nope"}, {"op": "exec", "id": sbs[0].id,
                                                                  "argv": ["exit", "5"]}])
            assert mixed[0]["pong"] is True and isinstance(mixed[1], dsec.UnknownOp)
            assert mixed[2]["exit_code"] == 5
            nested = await c.batch([{"op": "batch", "requests": [{"op": "ping"}]}])
            assert isinstance(nested[0], dsec.Invalid), "a batch cannot hold a batch"
            await c.destroy_many(sbs)
            assert (await c.info())["sandboxes"] == before
            # One create of the batch fails (image "fail"): none is kept.
            spec = {"op": "create", "backend": "test"}
            with pytest.raises(dsec.BackendError) as e:
                await c.batch([spec] * 5 + [dict(spec, image="fail")] + [spec] * 3,
                              all_or_nothing=True)
            assert "create 6 of the batch's 9 failed" in e.value.message
            assert (await c.info())["sandboxes"] == before, "all_or_nothing left sandboxes"
            with pytest.raises(dsec.Invalid):
                await c.batch([{"op": "ping"}], all_or_nothing=True)
            with pytest.raises(dsec.Invalid):
                await c.batch([{"op": "ping"}] * 1025)
    run(main())


def test_batch_runs_a_window_at_once(daemon):
    """A batch of 100 commands that each take 0.2 s runs at most 32 at once
    (it takes 4 rounds, not 1), so one request cannot start more than
    that on the node."""
    async def main():
        async with dsec.AsyncClient(daemon["url"]) as c:
            sbs = await c.create_many(100, backend="test")
            t0 = time.monotonic()
            res = await c.exec_many(sbs, ["sleep", "0.2"])
            took = time.monotonic() - t0
            await c.destroy_many(sbs)
            return res, took
    res, took = run(main())
    assert all(r.exit_code == 0 and not r.timed_out for r in res)
    assert took >= 0.8, "100 commands of 0.2 s in %.2f s: more than 32 ran at once" % took


def test_labels(daemon):
    with dsec.Client(daemon["url"]) as c:
        a = c.create(backend="test", labels={"job": "j1", "step": "3"})
        b = c.create(backend="test", labels={"job": "j1", "step": "4"})
        x = c.create(backend="test", labels={"job": "j2"})
        assert {s["id"] for s in c.list(labels={"job": "j1"})} == {a.id, b.id}
        assert [s["id"] for s in c.list(labels={"job": "j1", "step": "4"})] == [b.id]
        # Pages: in the order of the ids, each id once, the total in each.
        page, nxt, total = c.list_page(labels={"job": "j1"}, limit=1)
        assert [s["id"] for s in page] == sorted([a.id, b.id])[:1] and total == 2
        page2, nxt2, _ = c.list_page(labels={"job": "j1"}, limit=1, after=nxt)
        assert [s["id"] for s in page2] == sorted([a.id, b.id])[1:] and nxt2 is None
        mine = {a.id, b.id, x.id}
        assert [s["id"] for s in c.list(page=1) if s["id"] in mine] == sorted(mine)
        assert a.info()["labels"] == {"job": "j1", "step": "3"}
        with pytest.raises(dsec.Invalid):
            c.create(backend="test", labels={"bad key": "x"})
        c.destroy_many([a, b, x])


def test_rollouts_steps_tokens_leases(daemon):
    """Steps answered from the trajectory log, Diverged, client tokens,
    a lease that lapses (pausing its sandbox) and is taken back."""
    with dsec.Client(daemon["url"]) as c:
        sb = c.create(backend="test", trajectory=True, token="sdk-rollout-1")
        assert c.create(backend="test", token="sdk-rollout-1").id == sb.id
        r = sb.exec(["echo", "one"], step=0)
        assert r.stdout == "one\n" and r.replayed is None
        again = sb.exec(["echo", "one"], step=0)
        assert again.stdout == "one\n" and again.replayed == 0
        with pytest.raises(dsec.Diverged) as e:
            sb.exec(["echo", "two"], step=0)
        assert e.value.code == "diverged"
        entries = sb.trajectory()
        assert [x["op"] for x in entries] == ["create", "exec"]
        assert entries[1]["step"] == 0 and entries[1]["hash"].startswith("sha256:")
        sb.destroy()
        with c.lease(timeout=0.3, grace=30) as lease:
            s2 = lease.create(backend="test")
            assert "trajectory" in s2.info()
            # Renewed in the background while this thread is blocked in a
            # command three times the lease's timeout long...
            assert s2.exec(["sleep", "1"]).exit_code == 0
            assert lease.info()["state"] == "active" and s2.info()["state"] != "paused"
            # ... and lapses once the renews stop.
            lease.stop_renewing()
            time.sleep(0.8)
            assert lease.info()["state"] == "lapsed"
            assert s2.info()["state"] == "paused"
            back = c.attach_lease(lease.id)
            assert back.info()["state"] == "active"
            assert s2.exec(["echo", "back"], step=1).stdout == "back\n"
        assert c.list(labels=None) == [] or all(x["id"] != s2.id for x in c.list())


@pytest.mark.parametrize("backend", ["fncall", "container"])
def test_files_and_trees_in_parts(small_daemon, backend, tmp_path):
    """Files and archives larger than a reply, through a daemon whose
    replies carry 192K of a file: 40 MiB of random bytes written and read
    back identical (sha256 here and in the sandbox), appended, read in
    parts with eof exactly at the end; a local tree uploaded and
    downloaded through archive files staged in the sandbox, none left."""
    import hashlib
    import io
    import tarfile
    if not small_daemon[backend]:
        pytest.skip("needs root for the %s backend" % backend)
    big = os.urandom(40 << 20)
    digest = hashlib.sha256(big).hexdigest()

    async def main():
        async with dsec.AsyncClient(small_daemon["url"]) as c:
            async with c.create(backend=backend) as sb:
                await sb.write_file("/work/big", big)
                back = await sb.read_file("/work/big")
                assert len(back) == len(big) and hashlib.sha256(back).hexdigest() == digest
                r = await sb.exec(["sh", "-c", "sha256sum /work/big"])
                assert r.stdout.split()[0] == digest
                assert await sb.read_file("/work/big", offset=len(big) - 10, length=100) == big[-10:]
                assert await sb.read_part("/work/big", offset=len(big) - 10, length=10) == \
                    (big[-10:], True)
                assert await sb.read_part("/work/big", offset=len(big) - 11, length=10) == \
                    (big[-11:-1], False)
                assert await sb.read_part("/work/big", offset=len(big)) == (b"", True)
                data, eof = await sb.read_part("/work/big")
                assert len(data) == 196608 and not eof
                with pytest.raises(dsec.TooLarge):
                    await sb.read_part("/work/big", length=1 << 20)
                with pytest.raises(dsec.Invalid):
                    await sb.read_file("/work/big", offset=1 << 63)
                await sb.write_file("/work/ap", "abc")
                # A write in parts replaces the file whole: a reader
                # meanwhile sees its old size or its new one, nothing between.
                new = big[: (20 << 20) + 1]
                sizes = []

                async def watch():
                    while True:
                        sizes.append((await sb.stat("/work/big"))["size"])
                        await asyncio.sleep(0)
                watcher = asyncio.ensure_future(watch())
                await sb.write_file("/work/big", new)
                watcher.cancel()
                assert len(sizes) > 1 and set(sizes) <= {len(big), len(new)}
                assert await sb.read_file("/work/big") == new
                await sb.write_file("/work/ap", "def", append=True)
                await sb.write_file("/work/ap", big[:3 << 20], append=True)
                assert await sb.read_file("/work/ap") == b"abcdef" + big[:3 << 20]
                await sb.mkdir("/work/dir")
                with pytest.raises(dsec.Invalid):
                    await sb.write_file("/work/dir", "x", append=True)
                await sb.remove("/work/ap")

                # A local tree: a file of 5 MiB, a small one, a symlink.
                src = tmp_path / "src"
                (src / "sub").mkdir(parents=True)
                (src / "sub" / "five").write_bytes(big[:5 << 20])
                (src / "small").write_text("small\n")
                os.symlink("sub/five", src / "link")
                assert await sb.upload("/work/up", str(src)) == 4
                assert await sb.read_file("/work/up/sub/five") == big[:5 << 20]
                r = await sb.exec(["sh", "-c", "readlink /work/up/link; cat /work/up/small"])
                assert r.stdout == "sub/five\nsmall\n"
                tar = await sb.download("/work/up")
                with tarfile.open(fileobj=io.BytesIO(tar)) as t:
                    assert sorted(t.getnames()) == ["link", "small", "sub", "sub/five"]
                    assert t.extractfile("sub/five").read() == big[:5 << 20]
                    assert t.getmember("link").issym()
                with open(tmp_path / "down.tar", "wb") as f:
                    assert await sb.download("/work/up", f) == len(tar)
                with open(tmp_path / "down.tar", "rb") as f:
                    assert await sb.upload("/work/copy", f) == 4
                assert await sb.read_file("/work/copy/sub/five") == big[:5 << 20]
                left = await sb.exec(["sh", "-c", "find / -name '.dsec-*' 2>/dev/null | wc -l"])
                assert left.stdout.strip() == "0"
                with pytest.raises(dsec.PermissionDenied):
                    bad = io.BytesIO()
                    with tarfile.open(fileobj=bad, mode="w") as t:
                        i = tarfile.TarInfo("../escape")
                        i.size = 1 << 20
                        t.addfile(i, io.BytesIO(b"x" * (1 << 20)))
                    await sb.upload("/work/bad", bad.getvalue())
                assert (await sb.list_dir("/work/bad")) == []
    run(main())
