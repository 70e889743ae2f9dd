"""Blocking store I/O run off the event loop (decision R65).

`run_blocking(fn, *args)` runs `fn(*args)` in the event loop's default executor (a thread
pool; an embedding may size it with `loop.set_default_executor`) and returns its result or
raises its error. Once started, the call runs to its end even if the awaiting task is
cancelled: the cancellation waits for it, and is then delivered at the caller's next await
(never lost, never counted twice). A store thus never leaves a write half done on disk
with its image not knowing it.

A store writes each operation once, as `Steps`: a generator whose own code runs in the
caller's thread (on the event loop: checks, and the image's change once the write landed)
and which yields each blocking part as a callable, receiving its result. `run_steps` runs
the blocking parts off the loop, one operation at a time under the store's lock;
`run_steps_sync` runs them inline, for callers without an event loop.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Generator
from typing import Any, TypeVar

__all__ = ["Steps", "run_blocking", "run_steps", "run_steps_sync"]

T = TypeVar("T")
Steps = Generator[Callable[[], Any], Any, None]


async def run_blocking(fn: Callable[..., T], /, *args: object) -> T:
    """`fn(*args)` in the default executor, awaited to its end (see the module docstring).
    Raises what `fn` raises; `CancelledError` only if the executor itself cancelled it."""
    loop = asyncio.get_running_loop()
    future = loop.run_in_executor(None, functools.partial(fn, *args))
    cancelled = False
    try:
        while True:
            try:
                return await asyncio.shield(future)
            except asyncio.CancelledError:
                if future.cancelled():
                    raise
                cancelled = True  # the work goes on: wait for it, then pass the cancel on
    finally:
        task = asyncio.current_task()
        if cancelled and task is not None:
            task.uncancel()  # the request is re-made below, so it is counted once
            task.cancel()  # delivered at the caller's next await


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
