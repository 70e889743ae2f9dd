"""One private event loop a process, on which blocking code runs the engine's coroutines.

The engine and its stores are async (decision R65). Code without an event loop drives them
through this loop: `SyncGameEngine` runs every engine call here, and every store opened
with `open_sync` (`FileStore.open_sync`, `PostgresStore.open_sync`) is opened here, so that
a PostgreSQL store's pool, bound to the loop it was opened on, is the loop its engine runs
on (decision R162). The loop runs in a daemon thread, `jfsm-loop`, started on first use; a
forked child starts its own.

`run(coro)` runs `coro` there and returns its result or raises its error in the calling
thread. If the caller is interrupted while it waits (Ctrl-C), the coroutine is cancelled
and `run` waits for it to end before the interruption goes on: a store write in flight runs
to its end (R65), and nothing of the call is left running behind the caller's back.
Calling `run` from the loop's own thread would wait forever: it raises `RuntimeError`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["private_loop", "run", "submit"]

T = TypeVar("T")
_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _forget_in_child() -> None:
    global _loop
    _loop = None  # the loop's thread is the parent's: a forked child starts its own


os.register_at_fork(after_in_child=_forget_in_child)


def private_loop() -> asyncio.AbstractEventLoop:
    """The private loop (started on first use)."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="jfsm-loop", daemon=True)
            thread.start()
            _loop = loop
        return _loop


def submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Start `coro` on the private loop; its future (await it with `asyncio.wrap_future`)."""
    return asyncio.run_coroutine_threadsafe(coro, private_loop())


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on the private loop and return its result (or raise its error); see the
    module docstring for an interrupted wait."""
    loop = private_loop()
    if asyncio._get_running_loop() is loop:
        coro.close()
        raise RuntimeError("jfsm.private_loop.run was called on the private loop itself")
    outcome: concurrent.futures.Future[T] = concurrent.futures.Future()
    tasks: list[asyncio.Task[T]] = []

    def settle(task: asyncio.Task[T]) -> None:
        if task.cancelled():  # finished, as `wait` sees it (a cancelled Future is not)
            outcome.set_exception(asyncio.CancelledError())
        elif task.exception() is not None:
            outcome.set_exception(task.exception())
        else:
            outcome.set_result(task.result())

    def start() -> None:
        task = loop.create_task(coro)
        task.add_done_callback(settle)
        tasks.append(task)

    loop.call_soon_threadsafe(start)
    try:
        return outcome.result()
    except BaseException:
        if outcome.done():  # the coroutine's own error (or its cancellation)
            raise
        loop.call_soon_threadsafe(lambda: tasks[0].cancel())  # `start` ran first (FIFO)
        concurrent.futures.wait([outcome])
        raise
