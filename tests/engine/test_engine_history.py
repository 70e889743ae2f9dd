"""Engine behaviour: reset, retrospective edit, conversion, duplication and game creation.

None of them compresses; rebuilds are deterministic (checked by a Hypothesis property
against an independent model of the rebuilt stack); a compression in flight across a
rebuild ends stale.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from engine_helpers import (
    as_text,
    assert_flag_invariant,
    async_test,
    fill,
    game_chunks,
    game_meta,
    game_summary,
    jf_items,
    make_engine,
    snapshot,
    store,
    telemetry_outcomes,
    wait_held,
)
from hypothesis import given
from hypothesis import strategies as st

from jfsm.errors import InvalidInput
from jfsm.jcs import canonical_bytes
from jfsm.stores.memory import MemoryStore

SMALL = {"game": 100, "catalyst": 100}


def outline(engine) -> list[tuple[Any, ...]]:  # type: ignore[no-untyped-def]
    """The game stack as (seq, origin, roundId or catalystId, user, assistant)."""
    return [
        (c["seq"], c["origin"], c.get("roundId", c.get("catalystId")), c["user"], c["assistant"])
        for c in game_chunks(engine)
    ]


async def scene(engine, sid: str, closing: str | None) -> None:  # type: ignore[no-untyped-def]
    """Start a scene, give it an exchange, publish it (closing text) or cancel it (None)."""
    await engine.start_scene(sid)
    await engine.record_scene_exchange(sid, f"{sid} private", f"{sid} reasoning")
    if closing is None:
        await engine.cancel_scene(sid)
    else:
        await engine.publish_scene(sid, closing, f"{sid} event")


async def busy_game(engine, fake) -> None:  # type: ignore[no-untyped-def]
    """Z before any round; r1; A; r2 (intervened); C, B (started before C), D cancelled; r3; E."""
    await scene(engine, "Z", "z closing")
    await engine.record_round("i1", "o1")
    await scene(engine, "A", "a closing")
    await engine.start_scene("B")
    fake.queue({"reply": "refuse"})
    await engine.intervene("i2", "o2 hidden", 2)
    await scene(engine, "C", "c closing")
    await engine.publish_scene("B", "b closing", "B event")
    await scene(engine, "D", None)
    await engine.record_round("i3", "o3")
    await scene(engine, "E", "e closing")


# -- nothing compresses ------------------------------------------------------------------------
@pytest.mark.req("JF-HIST-007", "JF-HIST-009")
@async_test
async def test_history_operations_never_call_the_compressor() -> None:
    engine, fake = make_engine(thresholds={"game": 10, "catalyst": 10})
    await engine.convert_simple_to_live([{"input": fill(50), "output": fill(50)}] * 3)
    await engine.record_round("i4", fill(80))
    await engine.start_scene("s1")
    await engine.record_scene_exchange("s1", fill(40), fill(40))
    await engine.edit_round(2, "edited", fill(90))
    await engine.reset(3)
    dup = await engine.duplicate(MemoryStore(), "g2")
    await dup.reset(1)
    GameEngine = type(engine)
    GameEngine(MemoryStore(), fake, game_id="g3", thresholds={"game": 10})
    assert fake.calls == 0 and fake.requests == []
    assert engine.telemetry == [] and dup.telemetry == []


@pytest.mark.req("JF-HIST-009")
@async_test
async def test_a_new_engine_writes_no_key() -> None:
    engine, fake = make_engine()
    assert engine.dump()["store"] == {} and engine.dump()["changeLog"] == []
    assert engine.dump()["footprint"] == len(b"{}") + len(b"[]")
    await engine.write({"gameData": 1})
    assert set(store(engine)) == {"gameData"}
    assert fake.calls == 0


# -- reset -------------------------------------------------------------------------------------
@pytest.mark.req(
    "JF-HIST-001", "JF-HIST-003", "JF-HIST-004", "JF-HIST-005", "JF-HIST-010", "JF-STORE-007"
)
@async_test
async def test_reset_rebuilds_rounds_and_outcomes_in_publication_order() -> None:
    engine, fake = make_engine(recording=True)
    await busy_game(engine, fake)
    await engine.record_round("i4", "o4")
    commits = len(engine.store.commits)
    calls = fake.calls
    await engine.reset(2)
    assert len(engine.store.commits) == commits + 1  # one projection
    assert fake.calls == calls
    assert sorted(k for k in store(engine) if k.startswith("jfRounds.")) == [
        "jfRounds.1",
        "jfRounds.2",
    ]
    assert outline(engine) == [
        (1, "catalyst", "Z", "Z event", "z closing"),
        (2, "round", 1, "i1", "o1"),
        (3, "catalyst", "A", "A event", "a closing"),
        (4, "intervene", 2, "i2", "o2"),
        (5, "catalyst", "C", "C event", "c closing"),
        (6, "catalyst", "B", "B event", "b closing"),
    ]
    assert game_summary(engine) is None
    assert game_meta(engine) == {"nextSeq": 7, "epoch": 1, "forcedCompression": True}
    assert_flag_invariant(engine)
    archives = store(engine)["jfCatalystArchives"]
    assert sorted(archives) == ["A", "B", "C", "D", "Z"]  # E ended after round 2
    assert {s: archives[s].get("outcomeSeq") for s in archives} == {
        "Z": 1,
        "A": 3,
        "C": 5,
        "B": 6,
        "D": None,
    }
    assert archives["D"]["state"] == "cancelled"
    assert "E closing" not in as_text(store(engine))
    # A rolled-back scene is gone: its id is unknown now.
    with pytest.raises(InvalidInput):
        await engine.publish_scene("E", "x", "y")


@pytest.mark.req("JF-HIST-004", "JF-HIST-010", "JF-HIST-005")
@async_test
async def test_reset_to_zero_and_after_a_summary() -> None:
    engine, fake = make_engine(thresholds=SMALL)
    for i in range(3):
        await engine.record_round(f"i{i}", fill(60))
    await scene(engine, "s1", None)
    fake.queue({"reply": "success", "summary": "sum"})
    assert (await engine.before_generation()).outcome == "published"
    assert game_summary(engine) is not None
    await engine.reset(0)
    assert game_summary(engine) is None and game_chunks(engine) == []
    assert game_meta(engine) == {"nextSeq": 1, "epoch": 1, "forcedCompression": False}
    assert not any(k.startswith("jfRounds.") for k in store(engine))
    assert "jfCatalystArchives" not in store(engine)
    assert (await engine.record_round("again", "x")) == {"round": 1, "seq": 1}
    await engine.reset(1)
    assert game_meta(engine)["epoch"] == 2


@pytest.mark.req("JF-HIST-011", "JF-HIST-001", "JF-HIST-003")
@pytest.mark.parametrize("rebuild", ["reset", "edit"])
@async_test
async def test_running_scenes_survive_a_rebuild(rebuild: str) -> None:
    engine, fake = make_engine(thresholds=SMALL)
    await engine.record_round("i1", "o1")
    await engine.record_round("i2", "o2")
    await engine.start_scene("live")
    await engine.record_scene_exchange("live", "u", fill(150))
    fake.queue({"reply": "success", "summary": "scene summary"})
    assert (await engine.before_generation("live")).outcome == "published"
    await engine.record_scene_exchange("live", "u2", "a2")
    await engine.start_scene("fresh")  # created, never ran
    before = {k: v for k, v in store(engine).items() if k.startswith("jfCatalystStack.")}
    if rebuild == "reset":
        await engine.reset(1)
    else:
        await engine.edit_round(1, "edited", "edited")
    after = {k: v for k, v in store(engine).items() if k.startswith("jfCatalystStack.")}
    assert after == before
    record = await engine.publish_scene("live", "closing", "event")
    last_round = 1 if rebuild == "reset" else 2
    assert record["afterRound"] == last_round
    assert outline(engine)[-1] == (last_round + 1, "catalyst", "live", "event", "closing")
    await engine.reset(0)
    assert outline(engine) == []  # the outcome followed round 1 or 2: rolled back with it
    assert "jfCatalystArchives" not in store(engine)


# -- edit --------------------------------------------------------------------------------------
@pytest.mark.req("JF-HIST-001", "JF-HIST-005", "JF-INT-006", "JF-HIST-004")
@async_test
async def test_edit_of_intervened_round_clears_flag() -> None:
    engine, fake = make_engine()
    await engine.record_round("i1", "o1")
    fake.queue({"reply": "refuse"})
    await engine.intervene("i2", "o2 rest", 2)
    assert game_meta(engine)["forcedCompression"] is True
    calls = fake.calls
    await engine.edit_round(2, "i2 edited", "o2 edited in full")
    assert fake.calls == calls
    assert outline(engine) == [
        (1, "round", 1, "i1", "o1"),
        (2, "round", 2, "i2 edited", "o2 edited in full"),
    ]
    assert game_meta(engine) == {"nextSeq": 3, "epoch": 1, "forcedCompression": False}
    edited = store(engine)["jfRounds.2"]
    assert (edited["input"], edited["output"]) == ("i2 edited", "o2 edited in full")
    assert not edited.get("intervened")
    assert_flag_invariant(engine)
    assert (await engine.before_generation()).outcome == "not_due"
    assert fake.calls == calls


@pytest.mark.req("JF-HIST-005", "JF-INT-006")
@async_test
async def test_edit_of_another_round_keeps_flag() -> None:
    engine, fake = make_engine()
    fake.queue({"reply": "refuse"})
    await engine.intervene("i1", "o1", 1)
    await engine.record_round("i2", "o2")
    await engine.edit_round(2, "x", "y")
    assert outline(engine) == [(1, "intervene", 1, "i1", "o"), (2, "round", 2, "x", "y")]
    assert game_meta(engine)["forcedCompression"] is True
    assert_flag_invariant(engine)


# -- conversion --------------------------------------------------------------------------------
@pytest.mark.req("JF-HIST-002", "JF-HIST-004", "JF-HIST-007")
@async_test
async def test_conversion_seeds_direct_exchanges() -> None:
    engine, fake = make_engine(thresholds={"game": 10})
    rounds = [{"input": "a 😀", "output": "b"}, {"input": "", "output": fill(100)}]
    await engine.convert_simple_to_live(rounds)
    assert outline(engine) == [(1, "seed", 1, "a 😀", "b"), (2, "seed", 2, "", fill(100))]
    assert game_meta(engine) == {"nextSeq": 3, "epoch": 1, "forcedCompression": False}
    assert fake.calls == 0


@pytest.mark.req("JF-ERR-005", "JF-ERR-002", "JF-HIST-002")
@pytest.mark.parametrize("memory", ["round", "scene", "summary-only"])
@async_test
async def test_conversion_of_a_game_with_memory_is_invalid_input(memory: str) -> None:
    engine, _ = make_engine(thresholds=SMALL)
    if memory == "round":
        await engine.record_round("i", "o")
    elif memory == "scene":
        await engine.start_scene("s1")
    else:
        await engine.record_round("i", fill(200))
        await engine.before_generation()
        assert game_chunks(engine) == [] and game_summary(engine) is not None
    before = snapshot(engine)
    with pytest.raises(InvalidInput) as info:
        await engine.convert_simple_to_live([{"input": "a", "output": "b"}])
    assert info.value.code == "invalid_input"
    assert snapshot(engine) == before


# -- duplication -------------------------------------------------------------------------------
@pytest.mark.req("JF-HIST-008", "JF-HIST-007", "JF-INT-006", "JF-INT-007")
@async_test
async def test_duplicate_copies_every_key_with_empty_change_log() -> None:
    engine, fake = make_engine(thresholds=SMALL)
    await busy_game(engine, fake)  # leaves the flag set (the intervene was refused)
    await engine.write({"gameData": {"x": [1, "😀"]}})
    await engine.start_scene("live")
    await engine.record_scene_exchange("live", "u", "a")
    assert game_meta(engine)["forcedCompression"] is True
    calls = fake.calls
    source = snapshot(engine)
    dup = await engine.duplicate(MemoryStore(), "g2")
    assert fake.calls == calls
    assert snapshot(engine) == source
    assert dup.dump()["changeLog"] == []
    assert canonical_bytes(dup.dump()["store"]) == canonical_bytes(engine.dump()["store"])
    assert jf_items(dup) == jf_items(engine)
    assert dup.game_id == "g2"
    # The copied flag is live in the new game: its next generation retries the forced one.
    fake.queue({"reply": "success", "summary": "dup forced"})
    await dup.before_generation()
    assert fake.requests[-1]["body"]["scope"] == {"gameId": "g2"}
    assert game_meta(dup)["forcedCompression"] is False
    assert game_meta(engine)["forcedCompression"] is True  # the source is untouched


@pytest.mark.req("JF-HIST-008")
@async_test
async def test_duplicate_keeps_summaries() -> None:
    engine, fake = make_engine(thresholds=SMALL)
    await engine.record_round("i", fill(200))
    fake.queue({"reply": "success", "summary": "kept summary"})
    await engine.before_generation()
    dup = await engine.duplicate(MemoryStore(), "g2")
    assert game_summary(dup) == game_summary(engine)
    assert dup.canonical_text() == engine.canonical_text()


@pytest.mark.req("JF-QUOTA-002", "JF-QUOTA-003", "JF-ERR-001")
@async_test
async def test_duplicate_is_preflighted_against_the_target_quota() -> None:
    engine, _ = make_engine()
    await engine.record_round("i", fill(500))
    target = MemoryStore(quota=100)
    with pytest.raises(Exception) as info:
        await engine.duplicate(target, "g2")
    assert getattr(info.value, "code", None) == "quota_exceeded"
    assert len(target.image) == 0


@pytest.mark.req("JF-ERR-002", "JF-ERR-005")
@async_test
async def test_duplicate_with_bad_game_id_writes_nothing() -> None:
    engine, _ = make_engine()
    await engine.record_round("i", "o")
    target = MemoryStore()
    with pytest.raises(InvalidInput):
        await engine.duplicate(target, "")
    assert len(target.image) == 0


# -- compression across a rebuild --------------------------------------------------------------
@pytest.mark.req("JF-COMP-011", "JF-HIST-004", "JF-COMP-009")
@pytest.mark.parametrize("rebuild", ["reset", "edit"])
@async_test
async def test_compression_in_flight_across_a_rebuild_ends_stale(rebuild: str) -> None:
    engine, fake = make_engine(thresholds=SMALL)
    for i in range(3):
        await engine.record_round(f"i{i}", fill(50))
    fake.queue({"reply": "hold", "then": {"reply": "success", "summary": "stale summary"}})
    task = asyncio.create_task(engine.before_generation())
    await wait_held(fake, 1, task)
    if rebuild == "reset":
        await engine.reset(2)
    else:
        await engine.edit_round(1, "edited", fill(50))
    after = snapshot(engine)
    fake.release()
    assert (await task).outcome == "stale"
    assert snapshot(engine) == after
    assert telemetry_outcomes(engine) == ["stale"]
    assert game_summary(engine) is None


# -- determinism -------------------------------------------------------------------------------
TEXT = st.text(alphabet="ab 😀é\n", max_size=6)

STEP = st.one_of(
    st.tuples(st.just("round"), TEXT, TEXT),
    st.tuples(st.just("intervene"), TEXT, TEXT),
    st.tuples(st.just("publish"), TEXT, TEXT),
    st.tuples(st.just("cancel"), TEXT, TEXT),
    st.tuples(st.just("compress"), TEXT, TEXT),
)


def model_rebuild(steps: list[tuple[str, str, str]], to_round: int) -> list[tuple[Any, ...]]:
    """Independent model of the rebuilt game stack after `reset(to_round)`."""
    rounds: list[tuple[str, Any, str, str]] = []  # (origin, id, user, assistant) in order
    n = 0
    scene_no = 0
    for kind, a, b in steps:
        if kind == "round":
            n += 1
            rounds.append(("round", n, a, b))
        elif kind == "intervene":
            n += 1
            rounds.append(("intervene", n, a, b[: len(b) // 2]))
        elif kind == "publish":
            scene_no += 1
            rounds.append(("catalyst", f"s{scene_no}", b, a))
        elif kind == "cancel":
            scene_no += 1
    survivors = []
    current_round = 0
    for origin, ident, user, assistant in rounds:
        if origin != "catalyst":
            current_round = ident
        if current_round <= to_round:
            survivors.append((origin, ident, user, assistant))
    return [(i, *item) for i, item in enumerate(survivors, start=1)]


async def feed(steps, to_round: int, *, compress: bool, fail_forced: bool):  # type: ignore[no-untyped-def]
    # `busy` compresses at every "compress" step (threshold 1); `plain` never does.
    engine, fake = make_engine(thresholds={"game": 1 if compress else 10**9})
    scene_no = 0
    for kind, a, b in steps:
        if kind == "round":
            await engine.record_round(a, b)
        elif kind == "intervene":
            fake.queue({"reply": "refuse"} if fail_forced else {"reply": "success", "summary": "x"})
            await engine.intervene(a, b, len(b) // 2)
        elif kind in ("publish", "cancel"):
            scene_no += 1
            sid = f"s{scene_no}"
            await engine.start_scene(sid)
            await engine.record_scene_exchange(sid, "private", "private")
            if kind == "publish":
                await engine.publish_scene(sid, a, b)
            else:
                await engine.cancel_scene(sid)
        elif kind == "compress" and compress:
            fake.queue({"reply": "success", "summary": "s"})
            await engine.before_generation()
    await engine.reset(to_round)
    return engine


@pytest.mark.req("JF-HIST-006", "JF-HIST-003", "JF-HIST-004", "JF-HIST-005", "JF-HIST-010")
@given(steps=st.lists(STEP, max_size=12), data=st.data())
def test_rebuild_is_deterministic(steps: list[tuple[str, str, str]], data: st.DataObject) -> None:
    last = sum(kind in ("round", "intervene") for kind, _, _ in steps)
    to_round = data.draw(st.integers(0, last))

    async def both() -> tuple[Any, Any]:
        plain = await feed(steps, to_round, compress=False, fail_forced=True)
        busy = await feed(steps, to_round, compress=True, fail_forced=False)
        return plain, busy

    plain, busy = asyncio.run(both())
    # Same surviving rounds, archives and previous epoch: byte-identical JCS of the jf keys,
    # whatever compressions happened before the rebuild.
    assert canonical_bytes(jf_items(plain)) == canonical_bytes(jf_items(busy))
    assert outline(plain) == model_rebuild(steps, to_round)
    intervened = any(o == "intervene" for _, o, *_ in outline(plain))
    assert game_meta(plain) == {
        "nextSeq": len(outline(plain)) + 1,
        "epoch": 1,
        "forcedCompression": intervened,
    }
    assert game_summary(plain) is None
    assert_flag_invariant(plain)
    archives = store(plain).get("jfCatalystArchives", {})
    for seq, origin, ident, *_ in outline(plain):
        if origin == "catalyst":
            assert archives[ident]["outcomeSeq"] == seq
