"""One shape for opening a store (issue 35, decision R162).

Every durable backend opens with `await X.open(...)` in async code and `X.open_sync(...)`
in blocking code, with the same arguments; a forgotten `await` is a `TypeError` saying to
await; the blocking facade called from a running event loop is a jfsm error naming the
coroutine to await; a store opened with `open_sync` works under `SyncGameEngine` whatever
its backend (they share the process's private loop, `jfsm.private_loop`).
"""

from __future__ import annotations

import asyncio
import inspect
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from jfsm import FileStore, GameEngine, SyncGameEngine
from jfsm.errors import BlockingCallInLoop, InvalidTransition
from jfsm.private_loop import run
from jfsm.stores.file.fsio import OsFileSystem
from jfsm.stores.memory import MemoryStore
from jfsm.testing import FakeCompressor


def _postgres_store() -> type[Any]:
    pytest.importorskip("psycopg", reason="the PostgreSQL store needs the jfsm[postgres] extra")
    from jfsm import PostgresStore

    return PostgresStore


@pytest.mark.parametrize("backend", ["file", "postgres"])
def test_every_backend_opens_the_same_two_ways(backend: str) -> None:
    store = FileStore if backend == "file" else _postgres_store()
    assert inspect.iscoroutinefunction(store.open)
    assert not inspect.iscoroutinefunction(store.open_sync)
    awaited = inspect.signature(store.open).parameters
    blocking = inspect.signature(store.open_sync).parameters
    assert list(awaited) == list(blocking)[: len(awaited)]  # FileStore's adds `fence` last
    for name, parameter in awaited.items():
        assert blocking[name].default == parameter.default, name
        assert blocking[name].kind == parameter.kind, name


def test_awaited_open_reads_the_store_off_the_event_loop(tmp_path: Path) -> None:
    threads: list[int] = []

    class Recording(OsFileSystem):
        def makedirs(self, path: str) -> None:
            threads.append(threading.get_ident())
            super().makedirs(path)

    async def scenario() -> int:
        store = await FileStore.open(tmp_path / "g", fs=Recording())
        await store.close()
        return threading.get_ident()

    loop_thread = asyncio.run(scenario())
    assert threads and loop_thread not in threads


def test_a_forgotten_await_is_a_type_error_saying_to_await(tmp_path: Path) -> None:
    """A coroutine passed as a store (or as `duplicate`'s target) is refused at once; it is
    closed, so no "never awaited" warning follows (pytest turns one into a failure)."""

    async def scenario() -> list[str]:
        messages = []
        with pytest.raises(TypeError) as info:
            GameEngine(FileStore.open(tmp_path / "a"), FakeCompressor(), game_id="a")  # type: ignore[arg-type]
        messages.append(str(info.value))
        engine = GameEngine(MemoryStore(), FakeCompressor(), game_id="b")
        with pytest.raises(TypeError) as info:
            await engine.duplicate(FileStore.open(tmp_path / "c"), "c")  # type: ignore[arg-type]
        messages.append(str(info.value))
        return messages

    for message in asyncio.run(scenario()):
        assert "is a coroutine, not a store: await it" in message
        assert "open_sync" in message
    assert not (tmp_path / "a").exists() and not (tmp_path / "c").exists()  # nothing opened


def test_the_blocking_facade_in_a_running_loop_names_the_coroutine_to_await() -> None:
    game = SyncGameEngine(GameEngine(MemoryStore(), FakeCompressor(), game_id="g"))

    async def scenario() -> BlockingCallInLoop:
        with pytest.raises(BlockingCallInLoop) as info:
            game.record_round("in", "out")
        return info.value

    error = asyncio.run(scenario())
    assert isinstance(error, RuntimeError) and isinstance(error, InvalidTransition)
    assert error.code == "invalid_transition"
    assert "await engine.record_round(...)" in str(error)
    assert game.status()["game"]["chunks"] == 0  # nothing ran
    game.record_round("in", "out")  # outside a loop it works
    assert game.status()["game"]["chunks"] == 1
    game.close()


def test_a_file_store_opened_blocking_serves_the_blocking_engine(tmp_path: Path) -> None:
    with SyncGameEngine(
        GameEngine(FileStore.open_sync(tmp_path / "g"), FakeCompressor(), game_id="g")
    ) as game:
        game.record_round("in", "out")
    with FileStore.open_sync(tmp_path / "g") as store:  # closing the engine closed it
        assert "jfGameStack.meta" in store.image.store_json()


def test_a_postgres_store_opened_blocking_serves_the_blocking_engine(
    pg_database: str,
) -> None:
    """The pool of a store opened with `open_sync` lives on the loop `SyncGameEngine` runs
    on; before issue 35 blocking code had no way to give an engine a PostgreSQL store."""
    PostgresStore = _postgres_store()
    store = PostgresStore.open_sync(pg_database, "opening-blocking", owner="w1")
    with SyncGameEngine(GameEngine(store, FakeCompressor(), game_id="opening-blocking")) as game:
        game.record_round("in", "out")
        assert game.status()["game"]["chunks"] == 1

    async def reopened() -> tuple[int, bool]:
        again = await PostgresStore.open(pg_database, "opening-blocking", owner="w2")
        try:  # the lease ended with close: another owner opens it at once
            return again.seq, "jfGameStack.meta" in again.image.store_json()
        finally:
            await again.close()

    seq, has_meta = asyncio.run(reopened())
    assert seq >= 1 and has_meta

    async def in_loop() -> None:
        with pytest.raises(BlockingCallInLoop, match=r"await PostgresStore\.open"):
            PostgresStore.open_sync(pg_database, "opening-blocking")

    asyncio.run(in_loop())


def test_an_interrupted_blocking_call_ends_its_coroutine_before_going_on() -> None:
    """Ctrl-C while `run` waits: the coroutine is cancelled and has ended (its cleanup ran)
    when the interruption reaches the caller, never left running behind its back."""
    cleaned: list[float] = []

    async def long_write() -> None:
        try:
            await asyncio.sleep(30)
        finally:
            await asyncio.sleep(0.2)  # a write in flight that runs to its end
            cleaned.append(time.monotonic())

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        with pytest.raises(KeyboardInterrupt):
            run(long_write())
        caught = time.monotonic()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert cleaned and cleaned[0] <= caught


@pytest.mark.parametrize("backend", ["memory", "file", "postgres"])
def test_async_with_closes_the_engine_and_every_store(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Issue 40: `async with` for the engine and each store; leaving the block closes them,
    an exception inside it included (a closed store refuses a write, `StoreUnavailable`)."""
    from jfsm.errors import StoreUnavailable
    from jfsm.projection import Projection

    async def opened() -> Any:
        if backend == "memory":
            return MemoryStore()
        if backend == "file":
            return await FileStore.open(tmp_path / "g")
        target = request.getfixturevalue("pg_database")
        return await _postgres_store().open(target, "opening-async-with", owner="w1")

    async def scenario() -> None:
        async with await opened() as store:
            await store.commit(Projection.of({"k": 1}))
        if backend != "memory":  # a memory store has nothing to release
            with pytest.raises(StoreUnavailable):
                await store.commit(Projection.of({"k": 2}))
        with pytest.raises(ZeroDivisionError):
            async with GameEngine(await opened(), FakeCompressor(), game_id="g") as engine:
                await engine.record_round("in", "out")
                raise ZeroDivisionError
        if backend != "memory":
            with pytest.raises(StoreUnavailable):
                await engine.store.commit(Projection.of({"k": 3}))

    asyncio.run(scenario())
