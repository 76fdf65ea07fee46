"""The asyncio client: AsyncClient and AsyncSandbox.

Every request is one asynchronous libdsec call on one connection (calls
run at once, each on a REQ context of its own); replies come to a
completion queue whose descriptor the event loop watches, so there is no
thread per call and no thread at all in Python.
"""
import asyncio
import ctypes
import dataclasses
import itertools
import os
import tarfile
import tempfile
from typing import (Any, BinaryIO, Callable, Dict, List, Mapping, Optional, Sequence, Tuple,
                    Union)

import msgpack

from . import _native as N
from .errors import (Busy, DsecError, Internal, Invalid, PermissionDenied, TooLarge, Unavailable,
                     Unsupported, error_for)
from .lease import AsyncLease

PROTO_VERSION = 1
# Seconds a reply may come after the request's own time.
REPLY_SLACK = 30.0
# Seconds exec_write and exec_signal are sent again while "busy".
BUSY_RETRY_MAX = 30.0
# The daemon's default exec_timeout, the time of a command without one.
DEFAULT_EXEC_TIMEOUT = 300.0
# Files and archives move in parts of at most PART_MAX bytes, or what the
# daemon's max_frame (its ping) leaves after FRAME_SLACK; a part the
# daemon still refuses as too_large (a node the request went on to) goes
# again halved, down to PART_MIN.  PART_SMALL fits any daemon: no ping.
PART_MAX = 8 << 20
PART_MIN = 16 << 10
FRAME_SLACK = 64 << 10
PART_SMALL = (256 << 10) - FRAME_SLACK
# Seconds an upload or download through an archive file may take.
ARCHIVE_WAIT = 600.0


def _stage_name(directory: str, kind: str) -> str:
    """A path for an archive staged in directory of the sandbox."""
    return "%s/.dsec-%s-%s.tar" % (directory.rstrip("/"), kind, os.urandom(8).hex())


def _reader(data: Union[bytes, bytearray, memoryview]) -> Callable[[int], bytes]:
    """read(n) over bytes in memory (n < 0: all that is left)."""
    view, pos = memoryview(data).cast("B"), 0

    def read(n: int) -> bytes:
        nonlocal pos
        chunk = view[pos:pos + n] if n >= 0 else view[pos:]
        pos += len(chunk)
        return bytes(chunk)
    return read


def _read_full(read: Callable[[int], bytes], n: int) -> bytes:
    """n bytes of read(n) (n < 0: all), fewer only at the end: a file
    object may return fewer before it."""
    out = bytearray()
    while n < 0 or len(out) < n:
        more = read(n - len(out) if n >= 0 else 1 << 20)
        if not more:
            break
        out += more
    return bytes(out)


def _pack_local(src: str, out: BinaryIO) -> None:
    """A tar (pax) of a local directory's contents or of a file by its
    name, into out; symlinks are packed as links."""
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as t:
        if os.path.isdir(src):
            for name in sorted(os.listdir(src)):
                t.add(os.path.join(src, name), arcname=name)
        else:
            t.add(src, arcname=os.path.basename(src))


def _pack(op: str, fields: Mapping[str, Any]) -> bytes:
    req = {"v": PROTO_VERSION, "op": op}
    req.update({k: v for k, v in fields.items() if v is not None})
    return msgpack.packb(req, use_bin_type=True)


def _unpack(frame: bytes) -> Dict[str, Any]:
    try:
        reply = msgpack.unpackb(frame, raw=False, unicode_errors="surrogateescape",
                                strict_map_key=False)
    except Exception as e:  # any bytes may come: never trust them
        raise Internal("cannot read a reply: %s" % e) from None
    if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
        raise Internal("a reply that breaks the protocol: no 'ok'")
    if reply["ok"]:
        res = reply.get("result")
        if not isinstance(res, dict):
            raise Internal("a reply that breaks the protocol: no 'result' map")
        return res
    err = reply.get("error")
    if not isinstance(err, dict) or not isinstance(err.get("code"), str) or err["code"] == "ok":
        raise Internal("an error reply that breaks the protocol: no 'code'")
    raise error_for(err["code"], str(err.get("message", "")), err)


@dataclasses.dataclass
class ExecResult:
    """What a command did.  A command that timed out is a result
    (timed_out, exit_code -1), not an exception."""
    exit_code: int
    stdout_bytes: bytes
    stderr_bytes: bytes
    signal: int = 0
    timed_out: bool = False
    duration: float = 0.0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    oom_killed: bool = False
    pids_limited: bool = False
    replayed: Optional[int] = None
    seccomp_denied: int = 0     # system calls the seccomp filter refused while it ran

    @property
    def stdout(self) -> str:
        """Standard output as text (undecodable bytes replaced)."""
        return self.stdout_bytes.decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        """Standard error as text (undecodable bytes replaced)."""
        return self.stderr_bytes.decode("utf-8", "replace")

    @classmethod
    def _from(cls, r: Mapping[str, Any]) -> "ExecResult":
        if "exit_code" not in r:
            raise Internal("exec's reply has no 'exit_code'")
        return cls(exit_code=r["exit_code"], stdout_bytes=bytes(r.get("stdout", b"")),
                   stderr_bytes=bytes(r.get("stderr", b"")), signal=r.get("signal", 0),
                   timed_out=bool(r.get("timed_out", False)),
                   duration=float(r.get("duration", 0.0)),
                   stdout_truncated=bool(r.get("stdout_truncated", False)),
                   stderr_truncated=bool(r.get("stderr_truncated", False)),
                   oom_killed=bool(r.get("oom_killed", False)),
                   pids_limited=bool(r.get("pids_limited", False)),
                   seccomp_denied=int(r.get("seccomp_denied", 0)),
                   replayed=r.get("replayed"))


def _cmd_fields(cmd: Union[str, Sequence[str]], timeout, stdin, env, cwd, output_cap):
    f: Dict[str, Any] = {}
    if isinstance(cmd, str):
        f["code"] = cmd
    else:
        f["argv"] = [str(a) for a in cmd]
    if isinstance(stdin, str):
        stdin = stdin.encode()
    f.update(timeout=timeout, stdin=stdin, env=dict(env) if env else None, cwd=cwd,
             output_cap=output_cap)
    return f


class Process:
    """A command started with AsyncSandbox.start: its output is read as it
    comes (read, or `async for stream, data in proc`), its stdin written
    (write), and it can be signalled or, on a terminal, resized.  Once it
    is done, .result holds its ExecResult (its outputs are what was read
    through this object)."""

    def __init__(self, sb: "AsyncSandbox", exec_id: str):
        self.sandbox = sb
        self.exec_id = exec_id
        self.result: Optional[ExecResult] = None
        self.replayed: Optional[int] = None    # the step, when exec_start was answered from the log
        self._out = bytearray()
        self._err = bytearray()

    def __repr__(self):
        return "Process(%r, %r)" % (self.sandbox.id, self.exec_id)

    def _f(self, **kw):
        kw.update(id=self.sandbox.id, exec=self.exec_id)
        return kw

    async def read(self, wait: float = 10.0):
        """(stdout, stderr) bytes that came since the last read, waiting up
        to wait seconds for some; ended with (b"", b"") once done."""
        if self.result is not None:
            return b"", b""
        r = await self.sandbox.client.call("exec_read", self._f(wait=wait), wait=wait)
        out, err = bytes(r.get("stdout", b"")), bytes(r.get("stderr", b""))
        self._out += out
        self._err += err
        if r.get("done"):
            r = dict(r, stdout=bytes(self._out), stderr=bytes(self._err))
            self.result = ExecResult._from(r)
        return out, err

    def __aiter__(self):
        return self._chunks()

    async def _chunks(self):
        while self.result is None:
            out, err = await self.read()
            if out:
                yield "stdout", out
            if err:
                yield "stderr", err

    async def _busy_retry(self, op: str, fields: Dict[str, Any]) -> None:
        """op, again while the daemon says busy: exec_signal in the few
        milliseconds a command takes to start, exec_write until the
        command has read the stdin written before (bounded: 30 s)."""
        delay, spent = 0.005, 0.0
        while True:
            try:
                await self.sandbox.client.call(op, fields)
                return
            except Busy:
                if spent >= BUSY_RETRY_MAX:
                    raise
            await asyncio.sleep(delay)
            spent += delay
            delay = min(delay * 2, 0.2)

    async def write(self, data: Union[bytes, str], *, eof: bool = False,
                    step: Optional[int] = None) -> None:
        """Write to its stdin (started with stdin_open, or on a pty); eof
        closes it after.  Waits while the command has not read what was
        written before.  step: this action's number in the rollout
        (trajectory=True): a step the log has writes nothing again."""
        if isinstance(data, str):
            data = data.encode()
        await self._busy_retry("exec_write", self._f(data=data, eof=eof or None, step=step))

    async def signal(self, sig: Union[int, str], *, step: Optional[int] = None) -> None:
        """Send a signal (15 or "TERM") to its process group (step: as
        write's)."""
        await self._busy_retry("exec_signal", self._f(signal=sig, step=step))

    async def resize(self, rows: int, cols: int, *, step: Optional[int] = None) -> None:
        """Set its terminal's size (pty only; step: as write's)."""
        await self.sandbox.client.call("exec_resize", self._f(rows=rows, cols=cols, step=step))

    async def wait(self) -> ExecResult:
        """Read it to its end; its result."""
        async for _ in self:
            pass
        return self.result


class Session:
    """A persistent shell in a sandbox (AsyncSandbox.session): cd, export
    and shell variables last from one command to the next."""

    def __init__(self, sb: "AsyncSandbox", name: str):
        self.sandbox = sb
        self.name = name

    def __repr__(self):
        return "Session(%r, %r)" % (self.sandbox.id, self.name)

    async def __aenter__(self) -> "Session":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def run(self, cmd: str, *, timeout: Optional[float] = None,
                  output_cap: Optional[int] = None) -> ExecResult:
        """Run one shell command line in the session."""
        r = await self.sandbox.client.call("session_exec", {
            "id": self.sandbox.id, "session": self.name, "cmd": cmd, "timeout": timeout,
            "output_cap": output_cap}, wait=timeout or DEFAULT_EXEC_TIMEOUT)
        return ExecResult._from(r)

    async def close(self) -> None:
        """End the shell and every process of the session."""
        try:
            await self.sandbox.client.call("session_close", {"id": self.sandbox.id,
                                                             "session": self.name})
        except DsecError as e:
            if e.code != "not_found":
                raise


class AsyncSandbox:
    """A sandbox: run commands, move files, pause, snapshot, destroy.

    An async context manager: the sandbox is destroyed when the block ends.
    """

    def __init__(self, client: "AsyncClient", sandbox_id: str, node: str = "",
                 backend: str = ""):
        self.client = client
        self.id = sandbox_id
        self.node = node or sandbox_id.rsplit(":", 1)[0]
        self.backend = backend

    def __repr__(self):
        return "AsyncSandbox(%r)" % self.id

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.destroy()

    async def exec(self, cmd: Union[str, Sequence[str]], *, timeout: Optional[float] = None,
                   stdin: Union[bytes, str, None] = None, env: Optional[Mapping[str, str]] = None,
                   cwd: Optional[str] = None, output_cap: Optional[int] = None,
                   step: Optional[int] = None) -> ExecResult:
        """Run cmd (an argv list, or a string for the backend's shell or
        runtime) to its end; its output comes whole.

        step: this action's number in the rollout, on a sandbox created
        with trajectory=True.  A step the sandbox's trajectory log has is
        answered from it without running (the result's .replayed is the
        step); the same step with another command raises Diverged."""
        f = _cmd_fields(cmd, timeout, stdin, env, cwd, output_cap)
        f["id"] = self.id
        f["step"] = step
        r = await self.client.call("exec", f, wait=timeout or DEFAULT_EXEC_TIMEOUT)
        return ExecResult._from(r)

    async def start(self, cmd: Union[str, Sequence[str]], *, timeout: Optional[float] = None,
                    stdin: Union[bytes, str, None] = None, stdin_open: bool = False,
                    pty: bool = False, rows: Optional[int] = None, cols: Optional[int] = None,
                    env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
                    output_cap: Optional[int] = None, step: Optional[int] = None) -> Process:
        """Start cmd and return at once: read its output as it comes
        (streaming exec; backends with it: container).

        step: this action's number in the rollout (trajectory=True).  A
        step the log has starts nothing: the Process is the logged one
        (.replayed is the step), read from its start: while that stream
        is still there, again from its first byte; once gone, its whole
        output and status from the log (up to 256 KiB of each output)."""
        f = _cmd_fields(cmd, timeout, stdin, env, cwd, output_cap)
        f.update(id=self.id, stdin_open=stdin_open or None, pty=pty or None, rows=rows,
                 cols=cols, step=step)
        r = await self.client.call("exec_start", f)
        if not isinstance(r.get("exec"), str):
            raise Internal("exec_start's reply has no 'exec'")
        proc = Process(self, r["exec"])
        proc.replayed = r.get("replayed")
        return proc

    async def exec_stream(self, cmd: Union[str, Sequence[str]], *,
                          on_stdout: Optional[Callable[[bytes], Any]] = None,
                          on_stderr: Optional[Callable[[bytes], Any]] = None,
                          **kw) -> ExecResult:
        """Run cmd to its end, calling on_stdout / on_stderr with each
        piece of output as it comes (a coroutine function is awaited)."""
        proc = await self.start(cmd, **kw)
        async for stream, data in proc:
            cb = on_stdout if stream == "stdout" else on_stderr
            if cb is not None:
                r = cb(data)
                if asyncio.iscoroutine(r):
                    await r
        return proc.result

    async def session(self, name: Optional[str] = None, *, shell: Optional[str] = None,
                      env: Optional[Mapping[str, str]] = None,
                      cwd: Optional[str] = None) -> Session:
        """Open a persistent shell session (container backend)."""
        r = await self.client.call("session_open", {"id": self.id, "session": name,
                                                    "shell": shell,
                                                    "env": dict(env) if env else None,
                                                    "cwd": cwd})
        if not isinstance(r.get("session"), str):
            raise Internal("session_open's reply has no 'session'")
        return Session(self, r["session"])

    async def read_file(self, path: str, *, offset: int = 0, length: int = 0,
                        step: Optional[int] = None) -> bytes:
        """The bytes of a file from offset: length of them (fewer at its
        end), or with length 0 all to its end.  Any length: it takes as
        many requests as it needs, each up to what a reply carries, until
        one says the file ends there (a file growing meanwhile is read up
        to an end one of them saw).  With step (a step of a rollout's
        log) it is one request, up to what a reply carries."""
        if step is not None:
            data, _ = await self.read_part(path, offset=offset, length=length, step=step)
            return data
        out = bytearray()
        part = PART_MAX
        while not length or len(out) < length:
            want = min(length - len(out), part) if length else 0
            try:
                data, eof = await self.read_part(path, offset=offset + len(out), length=want)
            except TooLarge:
                if not want or want // 2 < PART_MIN:
                    raise
                part = want // 2
                continue
            out += data
            if eof or not data:
                break
        return bytes(out)

    async def read_part(self, path: str, *, offset: int = 0, length: int = 0,
                        step: Optional[int] = None) -> Tuple[bytes, bool]:
        """One request of a read: up to length bytes from offset (0: as
        many as a reply carries; more than that raises TooLarge), and
        whether they end where the file did (eof)."""
        r = await self.client.call("file_read", {"id": self.id, "path": path,
                                                 "offset": offset or None,
                                                 "length": length or None, "step": step})
        data = bytes(r.get("data", b""))
        eof = r.get("eof")
        if not isinstance(eof, bool):  # a daemon before eof
            eof = not length or len(data) < length
        return data, eof

    async def write_file(self, path: str, data: Union[bytes, bytearray, memoryview, str], *,
                         mode: Optional[int] = None, uid: Optional[int] = None,
                         gid: Optional[int] = None, append: bool = False,
                         step: Optional[int] = None) -> None:
        """Write a whole file (made or replaced; parents made), or with
        append add data at the end of a regular file (made when missing;
        mode, uid and gid then apply).  Any length: what one request
        cannot carry goes in parts.  A write in parts is staged: readers
        see the old file or the whole new one, and a failure part way
        leaves the file as it was (a daemon before staged writes: the
        first part replaces the file and the others are appended, and the
        exception's message says how much went in).  An append in parts
        may be seen part way.  With step (a step of a rollout's log) it
        is one request."""
        if isinstance(data, str):
            data = data.encode()
        fields = {"mode": mode, "uid": uid, "gid": gid}
        if step is not None:
            await self.client.call("file_write", dict(fields, id=self.id, path=path, data=data,
                                                      append=append or None, step=step))
            return
        await self._write_parts(path, _reader(data), len(data), fields, append)

    async def _write_parts(self, path: str, read: Callable[[int], bytes], size: Optional[int],
                           fields: Mapping[str, Any], append: bool,
                           keep: bool = False) -> Tuple[int, Optional[str]]:
        """Writes what read(n) returns (b"" at the end; size bytes, None:
        not known) to path; returns how many bytes, and with keep the id
        of the staged write left uncommitted (None from a daemon before
        staged writes: path holds them).  More than one request is a
        staged write (dsec-protocol(7) file_write with parts): path is
        replaced whole by the last part, or left as it was on failure."""
        part = PART_SMALL
        if append or keep or size is None or size > PART_SMALL:
            part = await self.client._part_size()
            if not part and append:
                raise Unsupported("cannot append to '%s': the daemon cannot append" % path)
        single = not part  # a daemon before parts: one request
        if single:
            part = max(size, 1) if size is not None else PART_MAX
        pending, ended, done = bytearray(), False, 0
        stage: Optional[str] = None
        legacy = False  # the daemon wrote the first part to path
        ok = False
        try:
            while True:
                want = part + (1 if not done and not single else 0)
                while len(pending) < want and not ended:
                    more = read(want - len(pending))
                    ended = not more
                    pending += more
                n = min(part, len(pending))
                last = ended and len(pending) == n
                req = dict(fields, id=self.id, path=path, data=bytes(pending[:n]))
                if append or legacy or single or (not done and last and not keep):
                    req["append"] = (append or legacy or done > 0) or None
                elif stage is None:
                    req["parts"] = True
                else:
                    req = {"id": self.id, "path": path, "data": req["data"], "stage": stage,
                           "commit": (last and not keep) or None}
                try:
                    r = await self.client.call("file_write", req)
                except TooLarge:
                    if n // 2 < PART_MIN:
                        raise
                    part = n // 2
                    continue
                if req.get("parts"):
                    stage = r.get("stage")
                    legacy = stage is None
                del pending[:n]
                done += n
                if last:
                    ok = True
                    return done, stage if keep else None
        except DsecError as e:
            if stage is not None:
                e.message = "'%s' is as it was: %s" % (path, e.message)
                e.args = (e.message,)
            elif done:
                e.message = "'%s' has %d bytes of what was written: %s" % (path, done,
                                                                          e.message)
                e.args = (e.message,)
            raise
        finally:
            if stage is not None and not ok:
                await self._abort_quietly(path, stage)

    async def _abort_quietly(self, path: str, stage: str) -> None:
        """Ends a staged write without a commit; what it cannot the daemon
        removes after its stage_grace."""
        try:
            await self.client.call("file_write", {"id": self.id, "path": path, "stage": stage,
                                                  "abort": True})
        except DsecError:
            pass

    async def upload(self, path: str, src: Union[bytes, bytearray, memoryview, BinaryIO, str,
                                                 os.PathLike], *,
                     format: Optional[str] = None, uid: Optional[int] = None,
                     gid: Optional[int] = None) -> int:
        """Unpack a tar archive into directory path of the sandbox (made
        with its parents when missing); returns the members unpacked.
        src is the archive (format "tar", the default, or "tar.zst"): bytes
        or a binary file object read to its end; or a local directory
        (its contents) or file (by its name), packed here as a tar.
        uid, gid: the owner of everything made.  The sandbox checks the
        archive whole first: one with a member that would leave path (a
        name, a link) is refused, PermissionDenied, and unpacks nothing.
        Any length: an archive longer than one request carries is written
        in parts to a staged write in path and unpacked from there; what a
        client that dies half way sent the daemon removes after its
        stage_grace."""
        if isinstance(src, (str, os.PathLike)):
            if format not in (None, "tar"):
                raise Invalid("a local directory or file is packed as a tar, not %r" % format)
            with tempfile.TemporaryFile() as f:
                _pack_local(os.fspath(src), f)
                f.seek(0)
                return await self.upload(path, f, uid=uid, gid=gid)
        read = src.read if hasattr(src, "read") else _reader(src)
        fields = {"id": self.id, "path": path, "format": format, "uid": uid, "gid": gid}
        head = _read_full(read, PART_SMALL + 1)
        part = await self.client._part_size() if len(head) > PART_SMALL else PART_SMALL
        if len(head) > PART_SMALL and not part:
            head += _read_full(read, -1)  # a daemon before parts: one request
        elif len(head) > PART_SMALL and part > PART_SMALL:
            head += _read_full(read, part + 1 - len(head))
        if not part or len(head) <= part:
            try:
                r = await self.client.call("file_upload", dict(fields, data=head))
                return int(r.get("entries", 0))
            except TooLarge:
                if not part:
                    raise
        await self.client.call("file_mkdir", {"id": self.id, "path": path, "parents": True,
                                              "uid": uid, "gid": gid})
        stage = _stage_name(path, "upload")
        rest = _reader(head)

        def chained(n: int) -> bytes:
            return rest(n) or read(n)
        staged: Optional[str] = None
        try:
            # Staged, the archive never is a file of its own: the upload
            # ends the stage, and when this client dies before, the daemon
            # removes it after its stage_grace.
            _, staged = await self._write_parts(stage, chained, None, {"mode": 0o600}, False,
                                                keep=True)
            where = {"stage": staged} if staged else {"archive": stage, "remove_archive": True}
            r = await self.client.call("file_upload", dict(fields, **where), wait=ARCHIVE_WAIT)
            return int(r.get("entries", 0))
        except BaseException:
            if not staged:
                await self._remove_quietly(stage)
            raise

    async def download(self, path: str, dest: Optional[BinaryIO] = None, *,
                       format: Optional[str] = None) -> Union[bytes, int]:
        """A tar archive (format "tar", the default, or "tar.zst") of a file
        (by its name) or a directory (its contents) of the sandbox: its
        bytes, or with dest (a binary file object) written there and its
        length returned.  Symlinks are packed as links; sockets, fifos and
        devices are left out.  Any length: an archive longer than a reply
        carries is packed into a file in the sandbox (in path when it is a
        directory, else beside it; in /tmp when that cannot be written),
        read in parts, then removed (by the daemon after its stage_grace
        when this client dies first)."""
        try:
            r = await self.client.call("file_download", {"id": self.id, "path": path,
                                                         "format": format})
            data = bytes(r.get("data", b""))
            if dest is None:
                return data
            dest.write(data)
            return len(data)
        except TooLarge:
            if not await self.client._part_size():
                raise
        stage = await self._download_stage(path, format)
        try:
            if dest is None:
                return await self.read_file(stage)
            off = 0
            while True:
                data, eof = await self.read_part(stage, offset=off)
                dest.write(data)
                off += len(data)
                if eof or not data:
                    return off
        finally:
            await self._remove_quietly(stage)

    async def _download_stage(self, path: str, format: Optional[str]) -> str:
        """Packs path into an archive file in the sandbox; its path."""
        try:
            is_dir = (await self.stat(path)).get("type") == "dir"
        except DsecError:
            is_dir = False
        where = path if is_dir else path.rsplit("/", 1)[0] or "/" if "/" in path else "."
        fields = {"id": self.id, "path": path, "format": format}
        stage = _stage_name(where, "download")
        try:
            await self.client.call("file_download", dict(fields, archive=stage, stage=True),
                                   wait=ARCHIVE_WAIT)
            return stage
        except PermissionDenied as first:
            stage = _stage_name("/tmp", "download")
            try:
                await self.client.call("file_download", dict(fields, archive=stage, stage=True),
                                       wait=ARCHIVE_WAIT)
                return stage
            except DsecError:
                raise first from None

    async def _remove_quietly(self, path: str) -> None:
        """Removes a staged archive; what it cannot is left."""
        try:
            await self.client.call("file_remove", {"id": self.id, "path": path})
        except DsecError:
            pass

    async def stat(self, path: str) -> Dict[str, Any]:
        """A file's type, size, mode, owner and times."""
        return await self.client.call("file_stat", {"id": self.id, "path": path})

    async def list_dir(self, path: str, *, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """A directory's entries, sorted by name."""
        r = await self.client.call("file_list", {"id": self.id, "path": path, "limit": limit})
        return list(r.get("entries", []))

    async def mkdir(self, path: str, *, mode: Optional[int] = None, parents: bool = True) -> None:
        """Make a directory (and its parents, unless parents is False)."""
        await self.client.call("file_mkdir", {"id": self.id, "path": path, "mode": mode,
                                              "parents": parents})

    async def remove(self, path: str, *, recursive: bool = False) -> None:
        """Remove a file, or a tree with recursive."""
        await self.client.call("file_remove", {"id": self.id, "path": path,
                                               "recursive": recursive or None})

    async def set_ttl(self, ttl: Optional[float] = None, *,
                      idle_ttl: Optional[float] = None) -> Dict[str, Any]:
        """More time: it lives ttl seconds from now (its lifetime within the
        node's max_ttl) and/or gets a new idle TTL.  Returns {id, ttl (its
        lifetime from creation), left, idle_ttl}."""
        return await self.client.call("set_ttl", {"id": self.id, "ttl": ttl,
                                                  "idle_ttl": idle_ttl})

    async def pause(self) -> None:
        """Freeze it; its memory stays, its TTLs stop."""
        await self.client.call("pause", {"id": self.id})

    async def resume(self) -> None:
        """Let a paused sandbox run again."""
        await self.client.call("resume", {"id": self.id})

    async def snapshot(self, tag: str) -> str:
        """Save its files as a new image tagged tag; returns its digest."""
        r = await self.client.call("snapshot", {"id": self.id, "tag": tag}, wait=600)
        return r["image"]

    async def info(self) -> Dict[str, Any]:
        """What the node knows of it: state, backend, TTLs, sessions..."""
        return await self.client.call("info", {"id": self.id})

    async def usage(self) -> Dict[str, Any]:
        """What it uses now (cpu_ns, memory, memory_peak, pids, disk: those
        its backend measures) and its misbehaviour counters: oom_kills,
        pids_limited, output_floods, timeouts, egress_denied (packets its
        allowlist refused, networked sandboxes), seccomp_denied (system
        calls its seccomp filter refused, where its backend counts them:
        container, fncall), protected_probes (looks into the stand-ins of
        what its create's grade_layers keep from it: opens of them, lookups
        below them; container)."""
        return await self.client.call("usage", {"id": self.id})

    async def watched(self) -> List[Dict[str, Any]]:
        """The files its create's watch named: for each path, its hash
        when the sandbox was made and now ("sha256:HEX", None when not
        there, "symlink:TARGET" for a link, "error:CODE"), and changed."""
        r = await self.client.call("watched", {"id": self.id}, wait=600)
        return list(r.get("watched", []))

    async def grade(self, cmd: Union[str, Sequence[str]], *, timeout: Optional[float] = None,
                    env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
                    step: Optional[int] = None) -> ExecResult:
        """Run a grader in a fresh sandbox of this one's changes with its
        create's grade_layers on top (nothing the agent changed can hijack
        it); the grader's result."""
        f = _cmd_fields(cmd, timeout, None, env, cwd, None)
        f.update(id=self.id, step=step)
        r = await self.client.call("grade", f, wait=(timeout or DEFAULT_EXEC_TIMEOUT) + 600)
        return ExecResult._from(r)

    async def reset(self, *, image: Optional[str] = None) -> None:
        """Make it again, same id: from its create (its creation state), or
        from image (a checkpoint: an image snapshot() made of it).  Its
        processes, sessions and files are the new ones'."""
        await self.client.call("reset", {"id": self.id, "image": image}, wait=600)

    async def fork(self, n: int, *, processes: bool = False) -> List["AsyncSandbox"]:
        """n new sandboxes of this one's files as they are now, in one
        request (all or none).  processes: the processes of its shell
        sessions too, where the backend can (the container backend with
        container.criu set; Unsupported elsewhere)."""
        r = await self.client.call("fork", {"id": self.id, "n": n,
                                            "processes": processes or None}, wait=600)
        return [AsyncSandbox(self.client, i, backend=self.backend) for i in r.get("ids", [])]

    async def trajectory(self, *, start: int = 0, replica: bool = False) -> List[Dict[str, Any]]:
        """Its trajectory log from entry start on (a sandbox created with
        trajectory=True; also after it is destroyed): each entry a dict of
        seq, step (or None), op, hash, t, dur_us, code, request, reply.
        replica: read the copy the node this client talks to keeps (one of
        the log's two peers), as after the death of the sandbox's node."""
        out: List[Dict[str, Any]] = []
        while True:
            r = await self.client.call("trajectory", {"id": self.id, "from": start,
                                                      "replica": replica or None})
            out.extend(r.get("entries", []))
            if r.get("end", True) or r.get("next", start) <= start:
                return out
            start = r["next"]

    async def destroy(self) -> None:
        """Destroy it (one already gone is not an error)."""
        try:
            await self.client.call("destroy", {"id": self.id})
        except DsecError as e:
            if e.code != "not_found":
                raise


class _Create:
    """client.create(...): awaitable (gives the sandbox) and an async
    context manager (destroys it at the end of the block)."""

    def __init__(self, client: "AsyncClient", fields: Dict[str, Any]):
        self._client = client
        self._fields = fields
        self._sb: Optional[AsyncSandbox] = None

    async def _make(self) -> AsyncSandbox:
        r = await self._client.call("create", self._fields, wait=600)
        if not isinstance(r.get("id"), str):
            raise Internal("create's reply has no 'id'")
        return AsyncSandbox(self._client, r["id"], r.get("node", ""), r.get("backend", ""))

    def __await__(self):
        return self._make().__await__()

    async def __aenter__(self) -> AsyncSandbox:
        self._sb = await self._make()
        return self._sb

    async def __aexit__(self, *exc) -> None:
        if self._sb is not None:
            await self._sb.destroy()


class AsyncClient:
    """A connection to a dsec node (any node of a cluster serves any
    sandbox).

    url: the node's address ("ipc:///run/dsec/dsecd.sock",
    "tls+tcp://host:port"); None: $DSEC_HOST, then the local socket.
    tls_ca, tls_cert, tls_server_name: PEM files for a tls+tcp:// address
    (None: $DSEC_TLS_CA, $DSEC_TLS_CERT, $DSEC_TLS_SERVER_NAME).
    timeout: seconds a request may wait for the node to take it.

        async with dsec.AsyncClient() as c:
            sb = await c.create(backend="fncall")
            r = await sb.exec(["sh", "-c", "echo hi"])
            print(r.exit_code, r.stdout)
            await sb.destroy()
    """

    def __init__(self, url: Optional[str] = None, *, tls_ca: Optional[str] = None,
                 tls_cert: Optional[str] = None, tls_server_name: Optional[str] = None,
                 timeout: float = 30.0):
        self.url = url
        self._tls = (tls_ca, tls_cert, tls_server_name)
        self._timeout = timeout
        self._c = ctypes.c_void_p()
        self._cq = ctypes.c_void_p()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._pending: Dict[int, asyncio.Future] = {}
        self._tags = itertools.count(1)
        self._max_frame: Optional[int] = None  # the daemon's (ping); 0: no parts

    async def __aenter__(self) -> "AsyncClient":
        await self.open()
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()

    def _connect(self) -> None:
        """Dials now (blocking: a TCP host that does not answer takes the
        system's connect timeout), so that no daemon there is Unavailable
        at once; later breaks are remade in the background."""
        err = N.Err()
        tls = N.Tls(*(s.encode() if s else None for s in self._tls))
        url = (self.url or "").encode() or None
        c = ctypes.c_void_p()
        if N.lib.dsec_connect_tls(ctypes.byref(c), url, None, ctypes.byref(tls),
                                  ctypes.byref(err)) < 0:
            raise error_for(N.code_name(err.code), err.msg.decode(errors="replace"))
        N.lib.dsec_set_timeout(c, self._timeout)
        self._c = c

    async def open(self) -> None:
        """Connect: the dial runs on the loop's executor (the one thread
        the client ever uses), a node not listening is Unavailable."""
        if self._c:
            return
        err = N.Err()
        self._loop = asyncio.get_running_loop()
        if not self._cq:
            if N.lib.dsec_cq_new(ctypes.byref(self._cq), ctypes.byref(err)) < 0:
                raise error_for(N.code_name(err.code), err.msg.decode(errors="replace"))
            self._loop.add_reader(N.lib.dsec_cq_fd(self._cq), self._ready)
        await self._loop.run_in_executor(None, self._connect)

    def close(self) -> None:
        """Close the connection; requests still in flight end with
        Unavailable."""
        if not self._cq:
            return
        if self._c:
            N.lib.dsec_close(self._c)  # every call in flight ends on the queue
            self._c = ctypes.c_void_p()
        self._ready()
        self._loop.remove_reader(N.lib.dsec_cq_fd(self._cq))
        N.lib.dsec_cq_free(self._cq)
        self._cq = ctypes.c_void_p()
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(Unavailable("the client was closed"))
        self._pending.clear()

    def _ready(self) -> None:
        c = N.Completion()
        while N.lib.dsec_cq_next(self._cq, ctypes.byref(c)) == 0:
            fut = self._pending.pop(c.tag or 0, None)
            try:
                if fut is None or fut.done():
                    continue
                if c.rc < 0:
                    e = c.err.contents
                    fut.set_exception(error_for(N.code_name(e.code),
                                                e.msg.decode(errors="replace")))
                else:
                    fut.set_result(ctypes.string_at(c.reply, c.reply_len))
            finally:
                N.lib.dsec_completion_free(ctypes.byref(c))

    async def call(self, op: str, fields: Mapping[str, Any], *,
                   wait: float = 0.0) -> Dict[str, Any]:
        """Send any request of dsec-protocol(7) (None fields left out) and
        return its result map; an error reply raises its exception.  wait:
        what the request itself may take."""
        if not self._c:
            await self.open()
        frame = _pack(op, fields)
        tag = next(self._tags)
        fut = self._loop.create_future()
        self._pending[tag] = fut
        err = N.Err()
        if N.lib.dsec_call_async(self._c, self._cq, frame, len(frame), wait + REPLY_SLACK,
                                 ctypes.c_void_p(tag), None, ctypes.byref(err)) < 0:
            del self._pending[tag]
            raise error_for(N.code_name(err.code), err.msg.decode(errors="replace"))
        return _unpack(await fut)

    def create(self, *, backend: Optional[str] = None, image: Optional[str] = None,
               runtime: Optional[str] = None, layers: Optional[Sequence[str]] = None,
               limits: Optional[Mapping[str, Any]] = None, ttl: Optional[float] = None,
               idle_ttl: Optional[float] = None, env: Optional[Mapping[str, str]] = None,
               cwd: Optional[str] = None, network: Optional[str] = None,
               allow: Optional[Sequence[str]] = None, dns: Optional[str] = None,
               seccomp_deny: Optional[Sequence[str]] = None,
               labels: Optional[Mapping[str, str]] = None,
               trajectory: Optional[bool] = None, token: Optional[str] = None,
               lease: Optional[str] = None,
               grade_layers: Optional[Sequence[str]] = None,
               watch: Optional[Sequence[str]] = None) -> _Create:
        """A new sandbox: await it, or `async with c.create(...) as sb:`.
        labels: what list finds it by (job, step, rollout group).
        trajectory: keep its trajectory log (every command and its result,
        durable before the reply), so that steps re-sent are answered
        from it (the default in a lease).  token: a name of this create
        of the caller's choosing: sent again with it, the create gets the
        sandbox the first made, never a second one.  lease: the id of the
        lease it belongs to (see lease()).  grade_layers: images (tests,
        graders, trusted tools) that never reach this sandbox;
        AsyncSandbox.grade runs a grader over its changes with them on
        top.  watch: absolute paths of files (at most 64) whose SHA-256
        is taken before the create returns; AsyncSandbox.watched and grade
        report them then and now."""
        return _Create(self, {
            "backend": backend, "image": image, "runtime": runtime,
            "layers": list(layers) if layers else None, "limits": dict(limits) if limits else None,
            "ttl": ttl, "idle_ttl": idle_ttl, "env": dict(env) if env else None, "cwd": cwd,
            "network": network, "allow": list(allow) if allow else None, "dns": dns,
            "seccomp_deny": list(seccomp_deny) if seccomp_deny else None,
            "labels": dict(labels) if labels else None, "trajectory": trajectory,
            "token": token, "lease": lease,
            "grade_layers": list(grade_layers) if grade_layers else None,
            "watch": list(watch) if watch else None})

    async def lease(self, *, timeout: float = 30.0, grace: float = 600.0,
                    labels: Optional[Mapping[str, str]] = None,
                    keep: bool = False) -> AsyncLease:
        """Open a trainer's lease (use as `async with await c.lease() as
        l:`): sandboxes created in it are paused when it is not renewed
        for timeout seconds and destroyed grace seconds later."""
        r = await self.call("lease_open", {"timeout": timeout, "grace": grace,
                                           "labels": dict(labels) if labels else None})
        return AsyncLease(self, r["id"], float(r.get("timeout", timeout)), keep=keep)

    async def attach_lease(self, lease_id: str, *, keep: bool = False) -> AsyncLease:
        """Take back a lease a trainer before this one opened (renewed
        now; its sandboxes resume on first use)."""
        r = await self.call("lease_renew", {"id": lease_id})
        return AsyncLease(self, lease_id, float(r.get("timeout", 30.0)), keep=keep)

    async def batch(self, requests: Sequence[Mapping[str, Any]], *,
                    all_or_nothing: bool = False, wait: float = 600.0) -> List[Any]:
        """Several requests in one round trip (each a map with "op" and its
        fields, None fields left out): their results in order, or the
        exception of each that failed in its place."""
        reqs = [{k: v for k, v in r.items() if v is not None} for r in requests]
        res = await self.call("batch", {"requests": reqs,
                                        "all_or_nothing": all_or_nothing or None}, wait=wait)
        out = []
        for rep in res.get("replies", []):
            try:
                out.append(_unpack(msgpack.packb(rep, use_bin_type=True)))
            except DsecError as e:
                out.append(e)
        if len(out) != len(reqs):
            raise Internal("batch's reply has %d replies for %d requests" % (len(out), len(reqs)))
        return out

    async def create_many(self, n: int, *, all_or_nothing: bool = False,
                          **spec) -> List[Union[AsyncSandbox, DsecError]]:
        """n sandboxes of one spec (as create's keywords) in one request:
        a sandbox or the exception of each; with all_or_nothing all are
        made or none (the batch's failure raised)."""
        fields = self.create(**spec)._fields
        out = await self.batch([dict(fields, op="create") for _ in range(n)],
                               all_or_nothing=all_or_nothing)
        return [r if isinstance(r, DsecError) else
                AsyncSandbox(self, r["id"], r.get("node", ""), r.get("backend", "")) for r in out]

    async def exec_many(self, sandboxes: Sequence[Union[AsyncSandbox, str]],
                        cmd: Union[str, Sequence[str]], *, timeout: Optional[float] = None,
                        **kw) -> List[Union[ExecResult, DsecError]]:
        """One command in each sandbox, in one request: a result or the
        exception of each."""
        f = _cmd_fields(cmd, timeout, kw.get("stdin"), kw.get("env"), kw.get("cwd"),
                        kw.get("output_cap"))
        ids = [s.id if isinstance(s, AsyncSandbox) else s for s in sandboxes]
        out = await self.batch([dict(f, op="exec", id=i) for i in ids],
                               wait=timeout or DEFAULT_EXEC_TIMEOUT)
        return [r if isinstance(r, DsecError) else ExecResult._from(r) for r in out]

    async def destroy_many(self, sandboxes: Sequence[Union[AsyncSandbox, str]]) -> None:
        """Destroy each (those gone already are not an error)."""
        ids = [s.id if isinstance(s, AsyncSandbox) else s for s in sandboxes]
        for r in await self.batch([{"op": "destroy", "id": i} for i in ids]):
            if isinstance(r, DsecError) and r.code != "not_found":
                raise r

    def sandbox(self, sandbox_id: str) -> AsyncSandbox:
        """A sandbox made before (by this client or another)."""
        return AsyncSandbox(self, sandbox_id)

    async def recover(self, sandbox_id: str) -> Tuple[AsyncSandbox, Dict[str, Any]]:
        """Make a dead node's sandbox (created with a trajectory, in a
        cluster) again from the copy of its log the node this client talks
        to keeps: its create (or its last snapshot's image, when the node
        can read it: steps up to the snapshot are then logged, not run),
        then its logged steps in order.  Returns the new sandbox, to which
        the steps can be sent again (each answered from its log), and the
        report: entries, replayed, skipped (what could not be recovered),
        differs (steps whose result is not the logged one), snapshot (the
        image it was made of, or None), restored and imported.  A sandbox that is not lost (its node alive) raises
        Invalid; on a node without a cluster, one of its own that is gone
        (destroyed, or lost with a restart) is made again from its log."""
        r = await self.call("recover", {"id": sandbox_id}, wait=3600)
        return AsyncSandbox(self, r["id"]), r

    async def run(self, cmd: Union[str, Sequence[str]], *, backend: Optional[str] = None,
                  runtime: Optional[str] = None, image: Optional[str] = None,
                  timeout: Optional[float] = None, stdin: Union[bytes, str, None] = None,
                  env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
                  output_cap: Optional[int] = None) -> ExecResult:
        """Run one command in a fresh sandbox that is gone afterwards
        (the protocol's call: one round trip)."""
        f = _cmd_fields(cmd, timeout, stdin, env, cwd, output_cap)
        f.update(backend=backend, runtime=runtime, image=image)
        r = await self.call("call", f, wait=timeout or DEFAULT_EXEC_TIMEOUT)
        return ExecResult._from(r)

    async def ping(self) -> Dict[str, Any]:
        """Check the node answers."""
        return await self.call("ping", {})

    async def _part_size(self) -> int:
        """Bytes of a file one request or reply carries at most to and
        from this daemon; 0 for one that moves no parts (no max_frame in
        its ping).  Asked once."""
        if self._max_frame is None:
            mf = (await self.ping()).get("max_frame")
            self._max_frame = mf if isinstance(mf, int) and mf > FRAME_SLACK else 0
        return min(PART_MAX, self._max_frame - FRAME_SLACK) if self._max_frame else 0

    async def info(self) -> Dict[str, Any]:
        """The node: its sandboxes, backends, images, cluster."""
        return await self.call("info", {})

    async def list(self, *, labels: Optional[Mapping[str, str]] = None,
                   page: int = 1000) -> List[Dict[str, Any]]:
        """The node's sandboxes (those with all of labels), in the order
        of their ids, asked for in pages of page (see list_page)."""
        out: List[Dict[str, Any]] = []
        after: Optional[str] = None
        while True:
            got, after, _ = await self.list_page(labels=labels, limit=page, after=after)
            out += got
            if after is None:
                return out

    async def list_page(self, *, labels: Optional[Mapping[str, str]] = None,
                        limit: Optional[int] = None, after: Optional[str] = None
                        ) -> Tuple[List[Dict[str, Any]], Optional[str], int]:
        """One page of the node's sandboxes, in the order of their ids: at
        most limit (None: all) of those with all of labels whose id sorts
        after after.  Returns (sandboxes, next, total): next is the after
        of the next page, None after the last one; total counts every
        sandbox that matches."""
        r = await self.call("list", {"labels": dict(labels) if labels else None,
                                     "limit": limit, "after": after})
        sbs = list(r.get("sandboxes", []))
        return sbs, r.get("next"), int(r.get("total", len(sbs)))
