"""dsec: sandboxes for training and evaluating AI agents.

A thin layer over libdsec (ctypes): AsyncClient / AsyncSandbox on
asyncio (no thread per call: replies come to a completion queue whose
descriptor the event loop watches), Client / Sandbox synchronous over
them.  Errors are exceptions per stable code (dsec.errors).

    import asyncio, dsec

    async def main():
        async with dsec.AsyncClient() as c:
            sb = await c.create(backend="fncall")
            r = await sb.exec(["sh", "-c", "echo hi"])
            print(r.exit_code, r.stdout)
            await sb.destroy()

    asyncio.run(main())
"""
from .aio import AsyncClient, AsyncSandbox, ExecResult, Process, Session
from .lease import AsyncLease
from .errors import *  # noqa: F401,F403 (the exception classes)
from .errors import BY_CODE, DsecError, InfrastructureError, error_for
from .sync import Client, Lease, Sandbox

__all__ = ["AsyncClient", "AsyncSandbox", "AsyncLease", "Client", "Lease", "Sandbox",
           "ExecResult",
           "Process",
           "Session", "DsecError",
           "InfrastructureError", "error_for"] + [c.__name__ for c in BY_CODE.values()]
__version__ = "0.1.0"
