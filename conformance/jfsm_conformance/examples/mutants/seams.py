"""The seams the mutants break the reference through (decision R32): drivers over an engine,
stack, store or compressor class, a store wrapper, a protocol-level wrapper, and the
`mutant` decorator that registers a factory in `MUTANTS` with the one thing it does wrong."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

from jfsm.driver import ReferenceDriver
from jfsm.engine import GameEngine
from jfsm.image import StoreImage
from jfsm.projection import Projection
from jfsm.stack_compression import StackCompression
from jfsm.stores.base import Store
from jfsm.transport import HttpCompressor

__all__ = [
    "MUTANTS",
    "mutant",
]

MUTANTS: dict[str, str] = {}  # factory name -> the one thing it does wrong


def _engine_driver(engine_cls: type[GameEngine]) -> ReferenceDriver:
    return ReferenceDriver(engine_class=engine_cls)


def _with_stack(stack_cls: type[StackCompression]) -> ReferenceDriver:
    """A reference engine whose stacks compress with `stack_cls`."""
    return _engine_driver(type("Engine", (GameEngine,), {"stack_compression": stack_cls}))


def _durable_stack(stack_cls: type[StackCompression]) -> ReferenceDriver:
    """`_with_stack` over durable file stores in a fresh temporary directory (removed when
    the process exits): for mutants only a restart or a crash can tell apart."""
    state = tempfile.mkdtemp(prefix="jfsm-mutant-")
    atexit.register(shutil.rmtree, state, True)
    engine = type("Engine", (GameEngine,), {"stack_compression": stack_cls})
    return ReferenceDriver(state, engine_class=engine, crash_injection=True)


def _compressor_driver(compressor_cls: type[HttpCompressor]) -> ReferenceDriver:
    return ReferenceDriver(compressor_factory=compressor_cls)


class _StoreWrapper:
    """A store that hands everything to `inner` (a subclass changes one policy)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    @property
    def image(self) -> StoreImage:
        return self.inner.image

    @property
    def durable(self) -> bool:
        return self.inner.durable

    async def commit(self, projection: Projection) -> None:
        await self.inner.commit(projection)

    async def seed(self, values: Mapping[str, bytes]) -> None:
        await self.inner.seed(values)

    async def checkpoint(self) -> None:
        await self.inner.checkpoint()

    async def close(self) -> None:
        await self.inner.close()


def _with_store(wrapper: Callable[[Store], Store]) -> ReferenceDriver:
    """A reference engine over `wrapper(store)` (its duplicates too: `duplicate` builds
    the engine's own class)."""

    class Engine(GameEngine):
        def __init__(self, store: Store, *args: Any, **kwargs: Any) -> None:
            super().__init__(wrapper(store), *args, **kwargs)

    return _engine_driver(Engine)


def mutant(doc: str) -> Callable[[Callable[[], Any]], Callable[[], Any]]:
    def wrap(fn: Callable[[], Any]) -> Callable[[], Any]:
        MUTANTS[fn.__name__] = doc
        return fn

    return wrap
