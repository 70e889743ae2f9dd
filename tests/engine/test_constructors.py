"""Constructors refuse nonsense configuration at once (JF-STORE-027): a threshold or a quota
that is not a positive integer is `InvalidInput` when the engine or store is built, not a raw
`TypeError` at the first compression, nor accepted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jfsm.engine import GameEngine
from jfsm.errors import InvalidInput
from jfsm.stores import FileStore, MemoryStore
from jfsm.testing import FakeCompressor


@pytest.mark.req("JF-STORE-027")
@pytest.mark.parametrize(
    "thresholds",
    [{"game": "5"}, {"game": 0}, {"catalyst": -1}, {"game": True}, {"game": 5.0}, {"gaem": 5}],
    ids=["a string", "zero", "negative", "a bool", "a float", "unknown name"],
)
def test_engine_refuses_bad_thresholds_at_construction(thresholds: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        GameEngine(MemoryStore(), FakeCompressor(), game_id="g", thresholds=thresholds)


@pytest.mark.req("JF-STORE-027")
def test_engine_takes_positive_integer_thresholds() -> None:
    engine = GameEngine(
        MemoryStore(), FakeCompressor(), game_id="g", thresholds={"game": 5, "catalyst": 7}
    )
    assert engine.thresholds == {"game": 5, "catalyst": 7}


@pytest.mark.req("JF-STORE-027")
@pytest.mark.parametrize("quota", [-1, 0, "5", 1.5, True])
def test_file_store_refuses_a_bad_quota_and_creates_nothing(tmp_path: Path, quota: Any) -> None:
    with pytest.raises(InvalidInput):
        FileStore.open_sync(tmp_path / "store", quota=quota)
    assert not (tmp_path / "store").exists()
