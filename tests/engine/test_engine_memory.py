"""One representation per commit (decision R34): the engine commits records, encodes each
once, and its memory index learns the same records without decoding what it just wrote.

The index kept that way must equal an index built from scratch by decoding the store (the
path a reopened engine takes), after every kind of operation, texts with astral and escaped
characters included.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jfsm.jcs import canonical_bytes
from jfsm.memory_index import MemoryIndex, StackState
from jfsm.records import (
    ArchiveRecord,
    Chunk,
    Participant,
    Round,
    SceneMeta,
    StackMeta,
    Summary,
)
from tests.engine_helpers import async_test, fill, make_engine

TEXTS = ["plain", 'quote " and \\ and \n and \t', "astral 𝄞 and é", "\u2028 line sep", ""]


def _stack(stack: StackState) -> dict[str, Any]:
    return {
        "meta": None if stack.meta is None else (type(stack.meta).__name__, stack.meta.to_json()),
        "summary": None if stack.summary is None else stack.summary.to_json(),
        "chunks": {chunk.seq: chunk.to_json() for chunk in stack.ordered()},
        "length": stack.length,
    }


def _index(index: MemoryIndex) -> dict[str, Any]:
    return {
        "game": _stack(index.game),
        "scenes": {sid: _stack(s) for sid, s in index.scenes.items()},
        "rounds": sorted(index.rounds),
        "last_round": index.last_round,
        "archives": {scene: record.to_json() for scene, record in index.archives.items()},
    }


def _assert_fresh(engine: Any) -> None:
    assert _index(engine.index) == _index(MemoryIndex(engine.store.image))
    for key, raw in engine.store.image.values_bytes().items():
        assert raw == canonical_bytes(json.loads(raw)), key
    assert engine.index.game.length == len(engine.canonical_text())


@async_test
async def test_learned_index_equals_a_decoded_one_after_every_operation() -> None:
    engine, _ = make_engine(thresholds={"game": 600, "catalyst": 400})
    for i, text in enumerate(TEXTS * 3):
        await engine.record_round(text + str(i), fill(30 + i, "ü"))
        _assert_fresh(engine)
        await engine.before_generation()
        _assert_fresh(engine)
    await engine.intervene("stop 𝄞", "revealed and the rest", 8)
    _assert_fresh(engine)
    await engine.start_scene("s1")
    for text in TEXTS:
        await engine.record_scene_exchange("s1", text, fill(90, "é"))
        _assert_fresh(engine)
    await engine.before_generation("s1")
    _assert_fresh(engine)
    await engine.publish_scene("s1", "closing 𝄞", 'meanwhile "x"')
    _assert_fresh(engine)
    await engine.start_scene("s2")
    await engine.cancel_scene("s2")
    _assert_fresh(engine)
    await engine.edit_round(2, "edited 𝄞", "out\n")
    _assert_fresh(engine)
    await engine.write({"world": {"a": [1, 2.5, "é"]}})
    _assert_fresh(engine)
    await engine.reset(3)
    _assert_fresh(engine)
    assert engine.status()["rounds"] == 3


@async_test
async def test_a_commit_decodes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """After the index is built, rounds, intervenes, scene exchanges and publications are
    learned from their records: decoding JSON during them fails the test."""
    engine, _ = make_engine(thresholds={"game": 400, "catalyst": 400})
    await engine.record_round("warm", "up")

    def no_decode(*args: object, **kwargs: object) -> Any:
        raise AssertionError("the index decoded a value the engine had just encoded")

    monkeypatch.setattr("jfsm.memory_index.json.loads", no_decode)
    for i in range(6):
        await engine.record_round(f"in {i}", fill(80))
        await engine.before_generation()
    await engine.intervene("in", "revealed", 3)
    await engine.start_scene("s")
    await engine.record_scene_exchange("s", "u", fill(500))
    await engine.before_generation("s")
    await engine.publish_scene("s", "closing", "meanwhile")
    monkeypatch.undo()
    _assert_fresh(engine)
    await engine.reset(2)  # a rebuild reads the rounds back from the store
    assert engine.index.game.summary is None
    _assert_fresh(engine)
    assert json.loads(engine.store.image.raw("jfRounds.1")) == {
        "n": 1,
        "input": "warm",
        "output": "up",
        "intervened": False,
    }


@async_test
async def test_rounds_are_counted_not_held_and_read_back_by_a_rebuild() -> None:
    engine, _ = make_engine()
    for i in range(1, 5):
        await engine.record_round(f"in {i} 𝄞", f"out {i}")
    assert set(engine.index.rounds) == {1, 2, 3, 4} and engine.index.last_round == 4
    assert [r.input for r in engine.memory.rounds()] == [f"in {i} 𝄞" for i in range(1, 5)]
    await engine.edit_round(2, "new", "text")
    assert engine.memory.round(2).input == "new"
    assert [c.user for c in engine.index.game.ordered()] == ["in 1 𝄞", "new", "in 3 𝄞", "in 4 𝄞"]


TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
POSITIVE = st.integers(min_value=1, max_value=2**53 - 1)


def _record(model: type[Any], **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Records built by field name (`st.builds` would also fill the camelCase aliases)."""
    return st.fixed_dictionaries(fields).map(lambda values: model(**values))


RECORDS = st.one_of(
    _record(
        Chunk,
        seq=POSITIVE,
        user=TEXT,
        assistant=TEXT,
        origin=st.sampled_from(["round", "catalyst", "intervene", "seed"]),
        round_id=st.none() | POSITIVE,
        catalyst_id=st.none() | TEXT,
    ),
    _record(Summary, text=TEXT, through_seq=POSITIVE, compression_call_id=TEXT, kind=TEXT),
    _record(StackMeta, next_seq=POSITIVE, epoch=POSITIVE, forced_compression=st.booleans()),
    _record(
        SceneMeta,
        next_seq=POSITIVE,
        epoch=POSITIVE,
        state=st.sampled_from(["created", "running"]),
    ),
    _record(
        ArchiveRecord,
        state=st.sampled_from(["published", "cancelled"]),
        after_round=POSITIVE,
        closing_summary=st.none() | TEXT,
        meanwhile_event=st.none() | TEXT,
        outcome_seq=st.none() | POSITIVE,
        order=POSITIVE,
    ),
    _record(Round, n=POSITIVE, input=TEXT, output=TEXT, intervened=st.booleans()),
    _record(Participant, id=TEXT, human=st.booleans(), spectator=st.booleans()),
)


@given(RECORDS)
def test_a_record_encodes_straight_to_the_jcs_of_its_json(record: Any) -> None:
    """`Record.jcs` (fields -> bytes, no dict) is byte for byte the JCS of `to_json()`."""
    assert record.jcs() == canonical_bytes(record.to_json())
