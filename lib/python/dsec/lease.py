"""Trainer leases (rlcoord): a crashed trainer's sandboxes pause, then go.

    async with c.lease(timeout=30, grace=600, labels={"job": "j1"}) as lease:
        sb = await lease.create(backend="container", image="debian")
        ...

The lease is renewed in the background (every timeout/3) while the block
runs; a trainer that dies stops renewing it, its sandboxes are paused
after timeout and destroyed after grace more.  A trainer started again
takes the lease back with c.attach_lease(ID) (its sandboxes resume on
first use) and re-sends its steps: those the trajectory log has are
answered from it, not run again.
"""
import asyncio
from typing import Any, Dict, List, Mapping, Optional, TYPE_CHECKING

if TYPE_CHECKING:
    from .aio import AsyncClient, AsyncSandbox, _Create


class AsyncLease:
    """A lease of an AsyncClient: create sandboxes in it, pause, resume or
    close them all at once.  An async context manager: renewed while the
    block runs, closed at its end (destroying its sandboxes) unless
    keep=True was given."""

    def __init__(self, client: "AsyncClient", lease_id: str, timeout: float,
                 keep: bool = False):
        self.client = client
        self.id = lease_id
        self.timeout = timeout
        self.keep = keep
        self._task: Optional[asyncio.Task] = None

    def __repr__(self):
        return "AsyncLease(%r)" % self.id

    async def __aenter__(self) -> "AsyncLease":
        self.start_renewing()
        return self

    async def __aexit__(self, *exc) -> None:
        self.stop_renewing()
        if not self.keep:
            await self.close()

    def start_renewing(self) -> None:
        """Renew the lease every timeout/3 in the background."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._renew_loop())

    def stop_renewing(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(self.timeout / 3)
            try:
                await self.renew()
            except asyncio.CancelledError:
                raise
            except Exception:  # the next one may get through; the lease says
                pass

    async def renew(self) -> Dict[str, Any]:
        """The trainer is alive: the lease is active again (its sandboxes
        resume on first use)."""
        return await self.client.call("lease_renew", {"id": self.id})

    async def info(self) -> Dict[str, Any]:
        """Its state (active, lapsed), timeout, grace, labels and the ids
        of its sandboxes."""
        return await self.client.call("lease_info", {"id": self.id})

    def create(self, **kw) -> "_Create":
        """client.create(..., lease=this one)."""
        return self.client.create(lease=self.id, **kw)

    async def pause(self) -> Dict[str, Any]:
        """Pause every sandbox of it ("my job is preempted")."""
        return await self.client.call("lease_pause", {"id": self.id})

    async def resume(self) -> Dict[str, Any]:
        """Resume every sandbox of it."""
        return await self.client.call("lease_resume", {"id": self.id})

    async def close(self, *, destroy: bool = True) -> Dict[str, Any]:
        """End the lease; its sandboxes are destroyed (destroy=False: kept,
        no longer in a lease)."""
        self.stop_renewing()
        return await self.client.call("lease_close", {"id": self.id, "destroy": destroy})
