"""Blocking store I/O run off the event loop (decisions R65, R155).

`run_blocking(fn, *args)` runs `fn(*args)` on the stores' own threads (a pool of daemon
threads a process, at most `JFSM_STORE_THREADS`, default min(32, CPUs + 4), started as the
work needs them) and returns its result or raises its error. Once started, the call runs to
its end even if the awaiting task is cancelled: the cancellation waits for it, and is then
delivered at the caller's next await (never lost, never counted twice). A store thus never
leaves a write half done on disk with its image not knowing it.

The result comes back as one future the awaiting task cannot cancel (`Unstoppable`), set
from the thread with `loop.call_soon_threadsafe`: no executor future, no wrapping future,
no shield, so a call in flight keeps two objects alive for the garbage collector instead of
about twenty (R155: at 512 games in flight, the collector walks every one of them).

A store writes each operation once, as `Steps`: a generator whose own code runs in the
caller's thread (on the event loop: checks, and the image's change once the write landed)
and which yields each blocking part as a callable, receiving its result. `run_steps` runs
the blocking parts off the loop, one operation at a time under the store's lock;
`run_steps_sync` runs them inline, for callers without an event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable, Generator
from queue import SimpleQueue
from typing import Any, TypeVar

__all__ = ["Steps", "Unstoppable", "await_to_end", "run_blocking", "run_steps", "run_steps_sync"]

T = TypeVar("T")
Steps = Generator[Callable[[], Any], Any, None]


class Unstoppable(asyncio.Future[Any]):
    """A future standing for work that runs to its end: `cancel` refuses (returns False),
    so a task awaiting it is cancelled only once it is done (see `await_to_end`)."""

    def cancel(self, msg: Any = None) -> bool:
        return False


async def await_to_end(future: asyncio.Future[T]) -> T:
    """The result of `future` (an `Unstoppable`), waited for even if the awaiting task is
    cancelled meanwhile: the cancellation is then delivered at the caller's next await,
    counted once. Raises what the future holds."""
    cancelled = False
    try:
        while True:
            try:
                return await future
            except asyncio.CancelledError:
                if future.cancelled():
                    raise
                cancelled = True  # the work goes on: wait for it, then pass the cancel on
    finally:
        task = asyncio.current_task()
        if cancelled and task is not None:
            task.uncancel()  # the request is re-made below, so it is counted once
            task.cancel()  # delivered at the caller's next await


class _Threads:
    """The stores' threads: a queue of work and daemon threads taking it."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.queue: SimpleQueue[tuple[Any, ...]] = SimpleQueue()
        self.idle = threading.Semaphore(0)
        self.started = 0
        self.lock = threading.Lock()

    def submit(self, work: tuple[Any, ...]) -> None:
        self.queue.put(work)
        if self.idle.acquire(blocking=False):
            return  # a thread is waiting for work: it takes this
        with self.lock:
            if self.started < self.size:
                self.started += 1
                name = f"jfsm-store-{self.started}"
                threading.Thread(target=self._work, name=name, daemon=True).start()

    def _work(self) -> None:
        while True:
            loop, future, fn, args = self.queue.get()
            try:
                box: list[Any] = [future, fn(*args), None]
            except BaseException as exc:
                box = [future, None, exc]
            del future, fn, args  # hold nothing of the work once it is handed back (R240)
            self.idle.release()  # before the hand-back: the awaiting task's next call finds me
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for it
                loop.call_soon_threadsafe(_settle, box)
            del loop, box


def _settle(box: list[Any]) -> None:
    """Settle the future in `box` (`[future, result, error]`) and empty the box, so the
    thread that filled it keeps nothing the loop's task may have dropped meanwhile."""
    future, result, error = box
    box.clear()
    if future.done():
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


_threads: _Threads | None = None
_threads_lock = threading.Lock()


def _pool() -> _Threads:
    global _threads
    if _threads is None:
        with _threads_lock:
            if _threads is None:
                size = int(
                    os.environ.get("JFSM_STORE_THREADS") or min(32, (os.cpu_count() or 1) + 4)
                )
                _threads = _Threads(max(1, size))
    return _threads


def _forget_in_child() -> None:
    global _threads
    _threads = None  # a forked child has none of its parent's threads: it starts its own


os.register_at_fork(after_in_child=_forget_in_child)


async def run_blocking(fn: Callable[..., T], /, *args: object) -> T:
    """`fn(*args)` on the stores' threads, awaited to its end (see the module docstring).
    Raises what `fn` raises; `ValueError` at once for a `JFSM_STORE_THREADS` that is not a
    number."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = Unstoppable(loop=loop)
    _pool().submit((loop, future, fn, args))
    return await await_to_end(future)


async def run_steps(serial: asyncio.Lock, steps: Steps) -> None:
    """Run an operation's `steps` holding `serial`, each blocking part with `run_blocking`.
    Raises what a step raises (the operation then stops there)."""
    async with serial:
        try:
            step = next(steps)
            while True:
                step = steps.send(await run_blocking(step))
        except StopIteration:
            return


def run_steps_sync(steps: Steps) -> None:
    """Run an operation's `steps` in the calling thread, each blocking part inline."""
    try:
        step = next(steps)
        while True:
            step = steps.send(step())
    except StopIteration:
        return
