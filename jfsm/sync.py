"""A blocking facade over `GameEngine`, for callers without an event loop.

Every coroutine method of the engine becomes a blocking method of the same name and
signature, run on the wrapper's own event loop; other attributes pass through. Errors are
the engine's own. Not for use from inside a running event loop (that raises `RuntimeError`).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from typing import Any

from jfsm.engine import GameEngine

__all__ = ["SyncGameEngine"]


class SyncGameEngine:
    """`GameEngine` with blocking methods; use as a context manager to close the loop."""

    def __init__(self, engine: GameEngine) -> None:
        self.engine = engine
        self._runner = asyncio.Runner()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.engine, name)
        if not inspect.iscoroutinefunction(attribute):
            return attribute

        @functools.wraps(attribute)
        def blocking(*args: Any, **kwargs: Any) -> Any:
            return self._runner.run(attribute(*args, **kwargs))

        return blocking

    def duplicate(self, target: Any, game_id: str) -> SyncGameEngine:
        """Duplicate into `target`; returns the new game's blocking engine."""
        return SyncGameEngine(self._runner.run(self.engine.duplicate(target, game_id)))

    def close(self) -> None:
        """Close the store and the event loop (the store's close is awaited on that loop)."""
        try:
            self._runner.run(self.engine.close())
        finally:
            self._runner.close()

    def __enter__(self) -> SyncGameEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
