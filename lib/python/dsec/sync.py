"""The synchronous client: Client and Sandbox, each call run to its end
on a private event loop of the client's (the same code as the asyncio
client's)."""
import asyncio
import threading
from typing import Any, Dict, List, Optional, Tuple

from .aio import AsyncClient, AsyncSandbox, ExecResult
from .lease import AsyncLease


class Sandbox:
    """A sandbox of a Client; a context manager that destroys it."""

    def __init__(self, client: "Client", sb: AsyncSandbox):
        self._client = client
        self._sb = sb
        self.id = sb.id
        self.node = sb.node
        self.backend = sb.backend

    def __repr__(self):
        return "Sandbox(%r)" % self.id

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.destroy()

    def _run(self, coro):
        return self._client._run(coro)

    def exec(self, cmd, **kw) -> ExecResult:
        """As AsyncSandbox.exec."""
        return self._run(self._sb.exec(cmd, **kw))

    def read_file(self, path: str, **kw) -> bytes:
        return self._run(self._sb.read_file(path, **kw))

    def write_file(self, path: str, data, **kw) -> None:
        return self._run(self._sb.write_file(path, data, **kw))

    def read_part(self, path: str, **kw) -> Tuple[bytes, bool]:
        """As AsyncSandbox.read_part."""
        return self._run(self._sb.read_part(path, **kw))

    def upload(self, path: str, src, **kw) -> int:
        """As AsyncSandbox.upload."""
        return self._run(self._sb.upload(path, src, **kw))

    def download(self, path: str, dest=None, **kw):
        """As AsyncSandbox.download."""
        return self._run(self._sb.download(path, dest, **kw))

    def stat(self, path: str) -> Dict[str, Any]:
        return self._run(self._sb.stat(path))

    def list_dir(self, path: str, **kw) -> List[Dict[str, Any]]:
        return self._run(self._sb.list_dir(path, **kw))

    def mkdir(self, path: str, **kw) -> None:
        return self._run(self._sb.mkdir(path, **kw))

    def remove(self, path: str, **kw) -> None:
        return self._run(self._sb.remove(path, **kw))

    def pause(self) -> None:
        return self._run(self._sb.pause())

    def resume(self) -> None:
        return self._run(self._sb.resume())

    def snapshot(self, tag: str) -> str:
        return self._run(self._sb.snapshot(tag))

    def info(self) -> Dict[str, Any]:
        return self._run(self._sb.info())

    def reset(self, **kw) -> None:
        """As AsyncSandbox.reset."""
        return self._run(self._sb.reset(**kw))

    def fork(self, n: int, *, processes: bool = False) -> List["Sandbox"]:
        """As AsyncSandbox.fork."""
        return [Sandbox(self._client, s)
                for s in self._run(self._sb.fork(n, processes=processes))]

    def usage(self) -> Dict[str, Any]:
        """As AsyncSandbox.usage."""
        return self._run(self._sb.usage())

    def set_ttl(self, ttl=None, **kw) -> Dict[str, Any]:
        """As AsyncSandbox.set_ttl."""
        return self._run(self._sb.set_ttl(ttl, **kw))

    def watched(self) -> List[Dict[str, Any]]:
        """As AsyncSandbox.watched."""
        return self._run(self._sb.watched())

    def grade(self, cmd, **kw) -> ExecResult:
        """As AsyncSandbox.grade."""
        return self._run(self._sb.grade(cmd, **kw))

    def trajectory(self, **kw) -> List[Dict[str, Any]]:
        """As AsyncSandbox.trajectory."""
        return self._run(self._sb.trajectory(**kw))

    def destroy(self) -> None:
        return self._run(self._sb.destroy())


class Lease:
    """A lease of a Client (as AsyncLease, synchronous).  In a with block it
    is renewed every timeout/3 by a thread of its own on a connection of its
    own, so a trainer blocked in a long exec keeps it; outside one, call
    renew() more often than its timeout (or start_renewing()), or it lapses
    and its sandboxes pause."""

    def __init__(self, client: "Client", lease: AsyncLease):
        self._client = client
        self._lease = lease
        self.id = lease.id
        self.timeout = lease.timeout
        self._stop: Optional[threading.Event] = None
        self._thread: Optional[threading.Thread] = None

    def __repr__(self):
        return "Lease(%r)" % self.id

    def __enter__(self) -> "Lease":
        self.start_renewing()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_renewing()
        if not self._lease.keep:
            self.close()

    def start_renewing(self) -> None:
        """Renew the lease every timeout/3 from a background thread."""
        if self._thread is not None:
            return
        stop = self._stop = threading.Event()
        url, kw, lid, every = self._client._url, self._client._kw, self.id, self.timeout / 3

        def renew_loop():
            try:
                with Client(url, **kw) as c:
                    while not stop.wait(every):
                        try:
                            c._run(c._ac.call("lease_renew", {"id": lid}))
                        except Exception:  # the next one may get through
                            pass
            except Exception:  # no connection: the lease says so when it lapses
                pass

        self._thread = threading.Thread(target=renew_loop, name="dsec-lease-renew",
                                        daemon=True)
        self._thread.start()

    def stop_renewing(self) -> None:
        """Stop the background renews (the lease lapses after its timeout)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=max(5.0, self.timeout))
            self._thread = None

    def _run(self, coro):
        return self._client._run(coro)

    def renew(self) -> Dict[str, Any]:
        return self._run(self._lease.renew())

    def info(self) -> Dict[str, Any]:
        return self._run(self._lease.info())

    def create(self, **kw) -> Sandbox:
        return self._client.create(lease=self.id, **kw)

    def pause(self) -> Dict[str, Any]:
        return self._run(self._lease.pause())

    def resume(self) -> Dict[str, Any]:
        return self._run(self._lease.resume())

    def close(self, **kw) -> Dict[str, Any]:
        return self._run(self._lease.close(**kw))


class Client:
    """As AsyncClient, synchronous:

        with dsec.Client() as c:
            with c.create(backend="fncall") as sb:
                print(sb.exec(["echo", "hi"]).stdout)
    """

    def __init__(self, url: Optional[str] = None, **kw):
        self._url, self._kw = url, kw
        self._loop = asyncio.new_event_loop()
        self._ac = AsyncClient(url, **kw)

    def _run(self, coro):
        return self._loop.run_until_complete(coro)

    def __enter__(self) -> "Client":
        self._run(self._ac.open())
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection and the client's loop."""
        if not self._loop.is_closed():
            self._ac.close()
            self._loop.close()

    def create(self, **kw) -> Sandbox:
        """As AsyncClient.create."""
        return Sandbox(self, self._run(self._ac.create(**kw)._make()))

    def lease(self, **kw) -> Lease:
        """As AsyncClient.lease (see Lease: renewed in a with block)."""
        return Lease(self, self._run(self._ac.lease(**kw)))

    def attach_lease(self, lease_id: str, **kw) -> Lease:
        """As AsyncClient.attach_lease."""
        return Lease(self, self._run(self._ac.attach_lease(lease_id, **kw)))

    def batch(self, requests, **kw):
        """As AsyncClient.batch."""
        return self._run(self._ac.batch(requests, **kw))

    def create_many(self, n: int, **kw):
        """As AsyncClient.create_many (Sandbox objects)."""
        out = self._run(self._ac.create_many(n, **kw))
        return [x if isinstance(x, Exception) else Sandbox(self, x) for x in out]

    def exec_many(self, sandboxes, cmd, **kw):
        """As AsyncClient.exec_many."""
        return self._run(self._ac.exec_many([s.id if isinstance(s, Sandbox) else s
                                             for s in sandboxes], cmd, **kw))

    def destroy_many(self, sandboxes) -> None:
        return self._run(self._ac.destroy_many([s.id if isinstance(s, Sandbox) else s
                                                for s in sandboxes]))

    def sandbox(self, sandbox_id: str) -> Sandbox:
        return Sandbox(self, self._ac.sandbox(sandbox_id))

    def recover(self, sandbox_id: str):
        """As AsyncClient.recover: (the new Sandbox, the report)."""
        sb, rep = self._run(self._ac.recover(sandbox_id))
        return Sandbox(self, sb), rep

    def run(self, cmd, **kw) -> ExecResult:
        return self._run(self._ac.run(cmd, **kw))

    def call(self, op: str, fields, **kw) -> Dict[str, Any]:
        return self._run(self._ac.call(op, fields, **kw))

    def ping(self) -> Dict[str, Any]:
        return self._run(self._ac.ping())

    def info(self) -> Dict[str, Any]:
        return self._run(self._ac.info())

    def list(self, **kw) -> List[Dict[str, Any]]:
        return self._run(self._ac.list(**kw))

    def list_page(self, **kw) -> Tuple[List[Dict[str, Any]], Optional[str], int]:
        return self._run(self._ac.list_page(**kw))
