"""Engine behaviour: intervene (issue 5 acceptance).

Only the canonical revealed prefix is kept; the discarded continuation appears nowhere; the
sanitized exchange is force-compressed whatever the length; a failure keeps the durable
flag, the next generation retries, and a second failure refuses the generation with
`compression_pending`. The flag invariant (JF-INT-006) is checked after every awaited
engine operation (`FlagChecked`, successful or refused) and explicitly while a compression
is held in flight.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from engine_helpers import (
    GAME_KIND,
    as_text,
    assert_flag_invariant,
    async_test,
    expected_text,
    fill,
    game_chunks,
    game_meta,
    game_summary,
    make_engine,
    snapshot,
    store,
    wait_held,
)

from jfsm.errors import CompressionPending, InvalidInput

DISCARD = "CANARY-DISCARDED-CONTINUATION-3f9e"
MARKERS = ("interven", "[", "…", "redact", "truncat")


def everything(engine, fake) -> str:  # type: ignore[no-untyped-def]
    """Every surface the continuation could leak to: store, change log, requests, telemetry."""
    return as_text([engine.dump(), fake.requests, engine.telemetry])


@pytest.mark.req("JF-INT-002", "JF-INT-003", "JF-INT-009", "JF-INT-010", "JF-TEXT-003")
@pytest.mark.parametrize("reply", ["ok", "refused"])
@async_test
async def test_only_the_revealed_prefix_is_kept(reply: str) -> None:
    engine, fake = make_engine(recording=True, flag_checked=True)
    await engine.record_round("r1", "o1")
    prefix = "Révélé 😀𝄞 a\n"
    output = prefix + DISCARD + " 😀 more"
    fake.queue({"reply": "success", "summary": "s"} if reply == "ok" else {"reply": "refuse"})
    commits = len(engine.store.commits)
    result = await engine.intervene("player input", output, len(prefix))
    assert_flag_invariant(engine)
    assert result["round"] == 2 and result["seq"] == 2
    # One projection records the sanitized round, the exchange and the flag.
    intervene_projection = engine.store.commits[commits]
    assert {"jfRounds.2", "jfGameStack.chunk.2", "jfGameStack.meta"} <= set(
        intervene_projection.sets
    )
    assert store(engine)["jfRounds.2"]["output"] == prefix
    assert store(engine)["jfRounds.2"]["input"] == "player input"
    [body] = [r["body"] for r in fake.requests]
    assert body["kind"] == GAME_KIND
    assert body["input"]["text"] == expected_text(None, [("r1", "o1"), ("player input", prefix)])
    assert body["input"]["throughSeq"] == 2
    if reply == "refused":
        assert game_chunks(engine)[-1] == {
            "seq": 2,
            "user": "player input",
            "assistant": prefix,
            "origin": "intervene",
            "roundId": 2,
        }
    text = everything(engine, fake)
    assert DISCARD not in text and "more" not in text
    texts = [body["input"]["text"], store(engine)["jfRounds.2"]["output"]]
    texts += [t for c in game_chunks(engine) for t in (c["user"], c["assistant"])]
    for marker in MARKERS:
        assert all(marker not in t.lower() for t in texts), marker


@pytest.mark.req("JF-INT-002", "JF-TEXT-003")
@pytest.mark.parametrize("revealed", [0, 1, 2, 3, 4])
@async_test
async def test_revealed_counts_code_points(revealed: int) -> None:
    engine, fake = make_engine(flag_checked=True)
    fake.queue({"reply": "refuse"})
    output = "😀é𝄞x"
    await engine.intervene("in", output, revealed)
    assert store(engine)["jfRounds.1"]["output"] == output[:revealed]
    assert game_chunks(engine)[0]["assistant"] == output[:revealed]
    assert_flag_invariant(engine)


@pytest.mark.req("JF-INT-004", "JF-INT-005", "JF-COMP-004")
@async_test
async def test_forced_compression_below_threshold_clears_flag_in_same_projection() -> None:
    engine, fake = make_engine(recording=True, flag_checked=True)
    await engine.record_round("r1", "o1")
    assert engine.index.game.length < 300_000
    fake.queue({"reply": "success", "summary": "forced summary"})
    result = await engine.intervene("in", "out" + DISCARD, 3)
    assert fake.calls == 1
    assert result["compression"]["outcome"] == "published"
    assert result["forcedCompression"] is False
    assert game_meta(engine)["forcedCompression"] is False
    assert game_summary(engine)["text"] == "forced summary"
    assert game_chunks(engine) == []
    assert_flag_invariant(engine)
    publication = engine.store.commits[-1]
    assert "jfGameStack.summary" in publication.sets
    assert publication.sets["jfGameStack.meta"] is not None
    assert b'"forcedCompression":false' in publication.sets["jfGameStack.meta"]
    assert DISCARD not in everything(engine, fake)


@pytest.mark.req(
    "JF-INT-006", "JF-INT-007", "JF-INT-008", "JF-ERR-001", "JF-ERR-002", "JF-COMP-009"
)
@pytest.mark.parametrize(
    "first, second, cause",
    [
        ({"reply": "refuse"}, {"reply": "http_status", "status": 503}, "transport"),
        ({"reply": "http_status", "status": 503}, {"reply": "empty", "summary": "   "}, "empty"),
        ({"reply": "empty", "summary": ""}, {"reply": "refuse"}, "refused"),
    ],
)
@async_test
async def test_failed_forced_compression_is_retried_then_pending(
    first: dict[str, Any], second: dict[str, Any], cause: str
) -> None:
    engine, fake = make_engine(flag_checked=True)
    await engine.record_round("r1", "o1")
    fake.queue(first)
    result = await engine.intervene("in", "revealed" + DISCARD, 8)
    assert result["forcedCompression"] is True
    assert game_meta(engine)["forcedCompression"] is True
    assert_flag_invariant(engine)
    before = snapshot(engine)
    fake.queue(second)
    with pytest.raises(CompressionPending) as info:
        await engine.before_generation()
    assert info.value.code == "compression_pending"
    assert info.value.retryable is True
    assert info.value.details["cause"] == cause
    assert fake.calls == 2  # the retry happened
    assert snapshot(engine) == before
    assert_flag_invariant(engine)
    # A catalyst generation is held back the same way, and the retry happens again.
    await engine.start_scene("s1")
    fake.queue({"reply": "refuse"})
    with pytest.raises(CompressionPending):
        await engine.before_generation("s1")
    assert fake.calls == 3
    assert store(engine)["jfCatalystStack.s1.meta"]["state"] == "created"
    # Once the service answers, the generation proceeds and the flag clears.
    report = await engine.before_generation("s1")
    assert report.outcome == "not_due"
    assert fake.calls == 4
    assert game_meta(engine)["forcedCompression"] is False
    assert_flag_invariant(engine)
    bodies = [r["body"] for r in fake.requests]
    assert all(b["kind"] == GAME_KIND for b in bodies)
    assert len({b["input"]["text"] for b in bodies}) == 1  # the same sanitized prefix
    assert DISCARD not in everything(engine, fake)


@pytest.mark.req("JF-INT-008", "JF-CONC-003", "JF-CONC-002", "JF-INT-006")
@async_test
async def test_generation_while_forced_compression_held_is_pending_in_flight() -> None:
    engine, fake = make_engine(flag_checked=True)
    await engine.record_round("r1", "o1")
    fake.queue({"reply": "hold", "then": {"reply": "success", "summary": "held"}})
    task = asyncio.create_task(engine.intervene("in", "shown" + DISCARD, 5))
    await wait_held(fake, 1, task)
    assert_flag_invariant(engine)
    with pytest.raises(CompressionPending) as info:
        await engine.before_generation()
    assert info.value.details["cause"] == "in_flight"
    await engine.start_scene("s1")
    with pytest.raises(CompressionPending):
        await engine.before_generation("s1")
    assert fake.calls == 1
    # A round appended meanwhile is the suffix; the flag clears with the publication.
    await engine.record_round("late", "round")
    fake.release()
    result = await task
    assert result["compression"]["outcome"] == "published"
    assert [c["origin"] for c in game_chunks(engine)] == ["round"]
    assert game_meta(engine)["forcedCompression"] is False
    assert_flag_invariant(engine)
    assert (await engine.before_generation()).outcome == "not_due"


@pytest.mark.req("JF-INT-006", "JF-INT-004", "JF-INT-007", "JF-CONC-003", "JF-INT-005")
@async_test
async def test_intervene_during_threshold_compression_is_settled_before_generating() -> None:
    """The intervened chunk is appended after the threshold request was built: that
    publication does not cover it, so the flag stays; the generation that was waiting for
    the threshold compression must not start before the owed forced compression publishes."""
    engine, fake = make_engine(thresholds={"game": 100}, flag_checked=True)
    await engine.record_round("r1", fill(100))
    fake.queue(
        {"reply": "hold", "then": {"reply": "success", "summary": "threshold summary"}},
        {"reply": "success", "summary": "covers it"},
    )
    task = asyncio.create_task(engine.before_generation())
    await wait_held(fake, 1, task)
    result = await engine.intervene("in", "kept" + DISCARD, 4)
    assert result["compression"] is None  # none started: one is already in flight
    assert fake.calls == 1
    assert game_meta(engine)["forcedCompression"] is True
    assert_flag_invariant(engine)
    fake.release()
    report = await task
    assert report.outcome == "published" and report.through_seq == 1
    assert report.forced is not None and report.forced.outcome == "published"
    assert fake.calls == 2
    assert fake.requests[1]["body"]["input"]["throughSeq"] == 2
    assert game_summary(engine)["text"] == "covers it"
    assert game_chunks(engine) == [] and game_meta(engine)["forcedCompression"] is False
    assert DISCARD not in everything(engine, fake)


@pytest.mark.req("JF-INT-006", "JF-INT-007", "JF-INT-008", "JF-COMP-009")
@async_test
async def test_intervene_during_threshold_compression_then_forced_fails() -> None:
    engine, fake = make_engine(thresholds={"game": 100}, flag_checked=True)
    await engine.record_round("r1", fill(100))
    fake.queue(
        {"reply": "hold", "then": {"reply": "success", "summary": "threshold summary"}},
        {"reply": "refuse"},
    )
    task = asyncio.create_task(engine.before_generation())
    await wait_held(fake, 1, task)
    await engine.intervene("in", "kept" + DISCARD, 4)
    fake.release()
    with pytest.raises(CompressionPending) as info:
        await task
    assert info.value.details["cause"] == "refused"
    assert fake.calls == 2
    assert [c["origin"] for c in game_chunks(engine)] == ["intervene"]
    assert game_summary(engine)["text"] == "threshold summary"
    assert game_meta(engine)["forcedCompression"] is True
    fake.queue({"reply": "success", "summary": "later"})
    assert (await engine.before_generation()).forced.outcome == "published"
    assert game_chunks(engine) == [] and game_meta(engine)["forcedCompression"] is False


@pytest.mark.req("JF-INT-006", "JF-INT-005")
@async_test
async def test_second_intervene_while_forced_in_flight_stays_owed() -> None:
    engine, fake = make_engine(flag_checked=True)
    fake.queue({"reply": "hold", "then": {"reply": "success", "summary": "first"}})
    task = asyncio.create_task(engine.intervene("a", "b" + DISCARD, 1))
    await wait_held(fake, 1, task)
    second = await engine.intervene("c", "d" + DISCARD, 1)
    assert second["compression"] is None and fake.calls == 1
    fake.release()
    await task
    assert [c["origin"] for c in game_chunks(engine)] == ["intervene"]
    assert game_meta(engine)["forcedCompression"] is True
    assert_flag_invariant(engine)
    fake.queue({"reply": "success", "summary": "second"})
    assert (await engine.before_generation()).outcome == "not_due"
    assert game_chunks(engine) == []
    assert_flag_invariant(engine)


# -- bad revealed counts -----------------------------------------------------------------------
@pytest.mark.req("JF-INT-001", "JF-ERR-002", "JF-ERR-005", "JF-ERR-001")
@pytest.mark.parametrize("revealed", [6, 7, -1, True, False, 2.0, "2", None, 10**30], ids=repr)
@async_test
async def test_bad_revealed_count_is_invalid_input(revealed: object) -> None:
    engine, fake = make_engine(flag_checked=True)
    await engine.record_round("r1", "o1")
    before, status = snapshot(engine), engine.status()
    with pytest.raises(InvalidInput) as info:
        await engine.intervene("in", "a😀𝄞éb", revealed)  # 5 code points
    assert info.value.code == "invalid_input"
    assert snapshot(engine) == before
    assert engine.status() == status
    assert fake.calls == 0


@pytest.mark.req("JF-INT-001")
@async_test
async def test_revealed_equal_to_length_is_accepted() -> None:
    engine, fake = make_engine(flag_checked=True)
    fake.queue({"reply": "refuse"})
    await engine.intervene("in", "a😀𝄞éb", 5)
    assert game_chunks(engine)[0]["assistant"] == "a😀𝄞éb"
    assert_flag_invariant(engine)
