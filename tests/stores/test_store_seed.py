"""Seeding an empty store (game duplication): base = values, change log empty, durable."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any

import pytest

from jfsm.errors import InvalidInput, QuotaExceeded
from jfsm.jcs import canonical_bytes
from jfsm.projection import Projection
from jfsm.stores import FileStore, MemoryStore

VALUES = {"jfGameStack.meta": canonical_bytes({"nextSeq": 2}), "é": canonical_bytes([1, "😀"])}


def done(result: Any) -> None:
    """Wait for a store call of the async protocol (on a loop of its own)."""
    if inspect.isawaitable(result):
        asyncio.run(result)  # type: ignore[arg-type]


def _stores(tmp_path: Path):  # type: ignore[no-untyped-def]
    return [MemoryStore(), FileStore.open_sync(tmp_path / "s")]


@pytest.mark.req("JF-HIST-008")
def test_seed_gives_values_and_an_empty_log(tmp_path: Path) -> None:
    for store in _stores(tmp_path):
        done(store.seed(VALUES))
        assert store.image.values_bytes() == VALUES
        assert store.image.change_log() == []
        done(store.close())
    with FileStore.open_sync(tmp_path / "s") as reopened:
        assert reopened.image.values_bytes() == VALUES
        assert reopened.image.change_log() == []


def test_seed_refuses_a_non_empty_store(tmp_path: Path) -> None:
    for store in _stores(tmp_path):
        done(store.commit(Projection.of({"x": 1})))
        with pytest.raises(InvalidInput):
            done(store.seed(VALUES))
        assert store.image.store_json() == {"x": 1}
        done(store.close())


@pytest.mark.req("JF-QUOTA-003")
def test_seed_over_quota_writes_nothing(tmp_path: Path) -> None:
    big = {"k": canonical_bytes("x" * 500)}
    for store in (MemoryStore(quota=100), FileStore.open_sync(tmp_path / "q", quota=100)):
        with pytest.raises(QuotaExceeded):
            done(store.seed(big))
        assert store.image.store_json() == {}
        done(store.close())
    with FileStore.open_sync(tmp_path / "q", quota=100) as reopened:
        assert reopened.image.store_json() == {}


def test_seed_accepts_an_emptied_and_checkpointed_store(tmp_path: Path) -> None:
    """Empty means no keys and an empty change log, whatever the store's history."""
    for store in _stores(tmp_path):
        done(store.commit(Projection.of({"x": 1})))
        done(store.commit(Projection.of(deletes=["x"])))
        done(store.checkpoint())
        done(store.seed(VALUES))
        assert store.image.values_bytes() == VALUES
        assert store.image.change_log() == []
        done(store.close())
