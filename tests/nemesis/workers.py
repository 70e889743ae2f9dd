"""The nemesis's workers: processes that own games of one shared store and answer the
driver protocol over stdio (`spec/driver/`, `docs/reference/driver-protocol.md`).

A `Worker` is either a `jfsm driver` (`--store URL --owner ID`, or `--state DIR --shared
--owner ID`) or an embedded engine (`python -m nemesis.embedded`: the reference
`GameEngine` over a `PostgresStore` or a shared `FileStore`, in a process of its own,
answering the same messages). Each runs in a process group of its own
(`start_new_session`); `kill` is `kill -9` of that group, `pause` / `resume` are SIGSTOP and
SIGCONT of it. Requests may be outstanding at once (the protocol allows it); replies are
matched by id. A worker keeps its owner id across restarts (its leases are reclaimed at once,
R61), and counts its generations (one a start).

`call` never raises for the worker's own failures: no reply (the process died, or stayed
silent past the timeout) is `None`, which the history records as `info`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["Worker"]


class Worker:
    """One worker process (module docstring). `died` is called with the worker and its exit
    status when its process ends, after its `hello` was answered, without the nemesis having
    killed it."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str],
        log: Path,
        hello: dict[str, Any],
        died: Callable[[Worker, int | None], None] | None = None,
    ) -> None:
        self.name, self.argv, self.env, self.log, self.hello = name, argv, env, log, hello
        self.proc: asyncio.subprocess.Process | None = None
        self.generation = 0
        self.pids: list[int] = []
        self.paused = False
        self.killing = False
        self.ready = asyncio.Event()
        self._died = died
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._next = 0
        self._reader: asyncio.Task[None] | None = None
        self._life = asyncio.Lock()  # one start or kill at a time: no process left untracked

    @property
    def kind(self) -> str:
        return "embedded" if "nemesis.embedded" in " ".join(self.argv) else "driver"

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def start(self) -> dict[str, Any] | None:
        """Start the process (ending the one before, if it still runs) and send `hello`;
        returns hello's reply (None: no reply)."""
        async with self._life:
            if self.alive:
                await self._kill()
            return await self._start()

    async def _start(self) -> dict[str, Any] | None:
        with self.log.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                env=self.env,
                start_new_session=True,
                limit=1 << 24,
            )
        self.generation += 1
        self.pids.append(self.proc.pid)
        self.killing = self.paused = False
        self._reader = asyncio.get_running_loop().create_task(self._read(self.proc))
        reply = await self.call("hello", timeout=60, **self.hello)
        if reply is not None and reply.get("ok"):
            self.ready.set()
        return reply

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        with contextlib.suppress(ValueError, ConnectionError):
            while line := await proc.stdout.readline():
                with contextlib.suppress(ValueError):
                    reply = json.loads(line)
                    future = self._waiting.pop(reply.get("id"), None)
                    if future is not None and not future.done():
                        future.set_result(reply)
        code = await proc.wait()
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(ConnectionError("worker gone"))
        self._waiting.clear()
        if self.proc is proc:
            served = self.ready.is_set()  # a start that failed is no death
            self.ready.clear()
            if served and not self.killing and self._died is not None:
                self._died(self, code)

    async def call(self, op: str, timeout: float = 30.0, **args: Any) -> dict[str, Any] | None:
        """Send one request and wait for its reply; None for no reply (see the docstring)."""
        proc = self.proc
        if proc is None or proc.returncode is not None or proc.stdin is None:
            return None
        self._next += 1
        ident = self._next
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[ident] = future
        message = {"id": ident, "op": op, "args": args}
        try:
            proc.stdin.write((json.dumps(message) + "\n").encode())
            return await asyncio.wait_for(future, timeout)
        except (ConnectionError, TimeoutError, RuntimeError):
            return None
        finally:
            self._waiting.pop(ident, None)

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)

    async def kill(self) -> int | None:
        """`kill -9` of the worker's process group; returns the dead process's pid."""
        async with self._life:
            return await self._kill()

    async def _kill(self) -> int | None:
        if self.proc is None:
            return None
        self.killing = True
        self.ready.clear()
        self.signal(signal.SIGKILL)
        self.signal(signal.SIGCONT)
        await self.proc.wait()
        if self._reader is not None:
            await self._reader
        self.paused = False
        return self.proc.pid

    def pause(self) -> None:
        self.paused = True
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)
        self.paused = False

    async def stop(self) -> None:
        """End the process group while its leader lives (idempotent). A dead leader's group
        is never signalled: its id may be another process's now (a pid-reusing bystander)."""
        if self.proc is not None and self.proc.returncode is None:
            await self.kill()


def python_module(module: str, *args: str) -> list[str]:
    """The command that runs `module` (of the tests' folder) with this interpreter."""
    return [sys.executable, "-m", module, *args]
