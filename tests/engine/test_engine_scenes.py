"""Engine behaviour: catalyst scenes (isolation, scene compression, terminal publication,
cancellation, stale replies, and scene-private text never reaching game memory)."""

from __future__ import annotations

import asyncio

import pytest
from engine_helpers import (
    CATALYST_KIND,
    GAME_KIND,
    as_text,
    assert_telemetry_has_no_text,
    async_test,
    expected_text,
    fill,
    game_chunks,
    game_items,
    make_engine,
    request_bodies,
    scene_chunks,
    scene_items,
    snapshot,
    store,
    telemetry_outcomes,
    wait_held,
)

from jfsm.errors import InvalidInput, InvalidTransition

SMALL = {"game": 100, "catalyst": 100}
TRANSCRIPT_CANARY = "CANARY-SCENE-TRANSCRIPT-5e1d"
SCENE_SUMMARY_CANARY = "CANARY-SCENE-SUMMARY-0b77"
REASONING_CANARY = "CANARY-SCENE-REASONING-c4a2"


async def scene_with_exchanges(engine, sid: str = "s1", n: int = 2) -> None:  # type: ignore[no-untyped-def]
    await engine.start_scene(sid)
    for i in range(n):
        await engine.record_scene_exchange(
            sid, f"{sid} user {i} {TRANSCRIPT_CANARY}", f"{REASONING_CANARY} {sid} reply {i} 😀"
        )


# -- isolation ---------------------------------------------------------------------------------
@pytest.mark.req("JF-CAT-002", "JF-STORE-005", "JF-CAT-001")
@async_test
async def test_scene_exchanges_live_only_in_their_own_stack() -> None:
    engine, _ = make_engine(thresholds=SMALL)
    await engine.record_round("r1", "o1")
    await engine.start_scene("other")
    await engine.record_scene_exchange("other", "other u", "other a")
    game_before = game_items(engine)
    other_before = scene_items(engine, "other")
    await engine.start_scene("s1")
    assert store(engine)["jfCatalystStack.s1.meta"]["state"] == "created"
    seqs = [await engine.record_scene_exchange("s1", f"u{i}", f"a{i}") for i in range(3)]
    assert seqs == [1, 2, 3]
    assert game_items(engine) == game_before
    assert scene_items(engine, "other") == other_before
    assert [(c["seq"], c["user"], c["assistant"]) for c in scene_chunks(engine, "s1")] == [
        (1, "u0", "a0"),
        (2, "u1", "a1"),
        (3, "u2", "a2"),
    ]
    assert store(engine)["jfCatalystStack.s1.meta"]["state"] == "running"
    assert engine.canonical_text("s1") == expected_text(
        None, [(f"u{i}", f"a{i}") for i in range(3)]
    )
    for key, value in store(engine).items():
        if key.startswith("jfGameStack."):
            assert "u1" not in as_text(value)


@pytest.mark.req("JF-CAT-001")
@async_test
async def test_generation_moves_a_created_scene_to_running() -> None:
    engine, fake = make_engine(thresholds=SMALL)
    await engine.start_scene("s1")
    assert (await engine.before_generation("s1")).outcome == "not_due"
    assert store(engine)["jfCatalystStack.s1.meta"]["state"] == "running"
    assert fake.calls == 0


# -- scene compression -------------------------------------------------------------------------
@pytest.mark.req("JF-CALL-002", "JF-COMP-004", "JF-COMP-005", "JF-STORE-005", "JF-CAT-002")
@async_test
async def test_scene_compression_kind_scope_and_publication() -> None:
    engine, fake = make_engine(thresholds=SMALL)
    await engine.record_round("r1", fill(50))
    game_before = game_items(engine)
    await scene_with_exchanges(engine, "s1", 3)
    text = engine.canonical_text("s1")
    fake.queue({"reply": "success", "summary": f"scene summary {SCENE_SUMMARY_CANARY}"})
    report = await engine.before_generation("s1")
    assert report.outcome == "published"
    [body] = request_bodies(fake)
    assert body["kind"] == CATALYST_KIND
    assert body["scope"] == {"gameId": "g", "catalystId": "s1"}
    assert body["input"] == {"text": text, "chars": len(text), "throughSeq": 3}
    summary = store(engine)["jfCatalystStack.s1.summary"]
    assert summary["kind"] == CATALYST_KIND
    assert summary["text"] == f"scene summary {SCENE_SUMMARY_CANARY}"
    assert summary["throughSeq"] == 3
    assert scene_chunks(engine, "s1") == []
    assert game_items(engine) == game_before
    assert telemetry_outcomes(engine) == ["published"]
    assert engine.telemetry[0]["scope"] == {"gameId": "g", "catalystId": "s1"}


# -- terminal publication ----------------------------------------------------------------------
@pytest.mark.req(
    "JF-CAT-003",
    "JF-CAT-004",
    "JF-CAT-005",
    "JF-STORE-003",
    "JF-STORE-006",
    "JF-ATOM-001",
    "JF-TEXT-002",
)
@async_test
async def test_terminal_publication_is_one_projection() -> None:
    engine, fake = make_engine(thresholds=SMALL, recording=True)
    await engine.record_round("r1", "o1")
    await engine.record_round("r2", "o2")
    await scene_with_exchanges(engine, "s1", 3)
    fake.queue({"reply": "success", "summary": f"scene summary {SCENE_SUMMARY_CANARY}"})
    assert (await engine.before_generation("s1")).outcome == "published"
    await engine.record_scene_exchange("s1", "after summary", "still exact")
    scene_keys = set(scene_items(engine, "s1"))
    assert {"jfCatalystStack.s1.summary", "jfCatalystStack.s1.meta"} < scene_keys
    before_chunks = game_chunks(engine)
    await engine.checkpoint()
    commits = len(engine.store.commits)
    closing, event = "  The closing summary 😀 \n", "\tMeanwhile, in the north… "
    record = await engine.publish_scene("s1", closing, event)

    assert len(engine.store.commits) == commits + 1  # exactly one projection
    chunks = game_chunks(engine)
    assert chunks[:-1] == before_chunks
    assert chunks[-1] == {
        "seq": 3,
        "user": event,
        "assistant": closing,
        "origin": "catalyst",
        "catalystId": "s1",
    }
    assert scene_items(engine, "s1") == {}
    archive = store(engine)["jfCatalystArchives"]["s1"]
    assert archive == record
    assert {k: archive[k] for k in ("state", "closingSummary", "meanwhileEvent")} == {
        "state": "published",
        "closingSummary": closing,
        "meanwhileEvent": event,
    }
    assert archive["outcomeSeq"] == 3 and archive["afterRound"] == 2
    log = {e["key"]: e for e in engine.dump()["changeLog"]}
    assert set(log) == scene_keys | {
        "jfGameStack.chunk.3",
        "jfGameStack.meta",
        "jfCatalystArchives",
    }
    assert all(log[k] == {"key": k, "op": "delete"} for k in scene_keys)
    assert log["jfGameStack.chunk.3"]["value"] == chunks[-1]
    projection = engine.store.commits[-1]
    assert projection.deletes == scene_keys
    assert set(projection.sets) >= {"jfGameStack.chunk.3", "jfCatalystArchives"}


@pytest.mark.req("JF-CAT-006", "JF-CAT-001")
@async_test
async def test_republish_returns_the_archive_and_changes_nothing() -> None:
    engine, _ = make_engine(thresholds=SMALL, recording=True)
    await engine.record_round("r1", "o1")
    await scene_with_exchanges(engine)
    first = await engine.publish_scene("s1", "closing", "event")
    before, commits = snapshot(engine), len(engine.store.commits)
    again = await engine.publish_scene("s1", "another closing", "another event")
    assert again == first
    assert snapshot(engine) == before and len(engine.store.commits) == commits
    assert [c["origin"] for c in game_chunks(engine)].count("catalyst") == 1


@pytest.mark.req("JF-CAT-007", "JF-CAT-006", "JF-CAT-001")
@async_test
async def test_cancel_archives_and_adds_nothing_to_game_memory() -> None:
    engine, _ = make_engine(thresholds=SMALL, recording=True)
    await engine.record_round("r1", "o1")
    await scene_with_exchanges(engine)
    game_before = game_items(engine)
    commits = len(engine.store.commits)
    record = await engine.cancel_scene("s1")
    assert len(engine.store.commits) == commits + 1
    assert game_items(engine) == game_before
    assert scene_items(engine) == {}
    assert record["state"] == "cancelled"
    assert store(engine)["jfCatalystArchives"]["s1"] == record
    assert TRANSCRIPT_CANARY not in as_text(store(engine))
    before = snapshot(engine)
    assert await engine.cancel_scene("s1") == record
    assert snapshot(engine) == before


@pytest.mark.req("JF-CAT-001", "JF-ERR-004", "JF-ERR-002", "JF-ERR-001")
@pytest.mark.parametrize("ended_by", ["publish", "cancel"])
@async_test
async def test_terminal_scenes_refuse_other_events(ended_by: str) -> None:
    engine, fake = make_engine(thresholds=SMALL)
    await scene_with_exchanges(engine)
    if ended_by == "publish":
        await engine.publish_scene("s1", "closing", "event")
    else:
        await engine.cancel_scene("s1")
    before, status = snapshot(engine), engine.status()
    attempts = [
        engine.record_scene_exchange("s1", "u", "a"),
        engine.before_generation("s1"),
        (
            engine.cancel_scene("s1")
            if ended_by == "publish"
            else engine.publish_scene("s1", "closing", "event")
        ),
    ]
    for attempt in attempts:
        with pytest.raises(InvalidTransition) as info:
            await attempt
        assert info.value.code == "invalid_transition"
        assert snapshot(engine) == before
        assert engine.status() == status
    assert fake.calls == 0


# -- stale replies for ended scenes ------------------------------------------------------------
@pytest.mark.req("JF-CAT-009", "JF-COMP-011", "JF-CONC-002")
@pytest.mark.parametrize("ended_by", ["publish", "cancel"])
@async_test
async def test_reply_for_a_scene_ended_in_flight_is_stale(ended_by: str) -> None:
    engine, fake = make_engine(thresholds=SMALL)
    await engine.record_round("r1", "o1")
    await scene_with_exchanges(engine, "s1", 3)
    fake.queue({"reply": "hold", "then": {"reply": "success", "summary": "late scene summary"}})
    task = asyncio.create_task(engine.before_generation("s1"))
    await wait_held(fake, 1, task)
    if ended_by == "publish":
        await engine.publish_scene("s1", "closing", "event")
    else:
        await engine.cancel_scene("s1")
    after_end = snapshot(engine)
    fake.release()
    report = await task
    assert report.outcome == "stale"
    assert snapshot(engine) == after_end
    assert scene_items(engine) == {}
    assert "late scene summary" not in as_text(engine.dump())
    assert telemetry_outcomes(engine) == ["stale"]
    assert engine.telemetry[0]["scope"] == {"gameId": "g", "catalystId": "s1"}


@pytest.mark.req("JF-CAT-009", "JF-COMP-011")
@async_test
async def test_reply_for_a_scene_ended_then_rolled_back_is_stale() -> None:
    engine, fake = make_engine(thresholds=SMALL)
    await engine.record_round("r1", "o1")
    await scene_with_exchanges(engine, "s1", 3)
    fake.queue({"reply": "hold", "then": {"reply": "success", "summary": "late scene summary"}})
    task = asyncio.create_task(engine.before_generation("s1"))
    await wait_held(fake, 1, task)
    await engine.record_round("r2", "o2")
    await engine.publish_scene("s1", "closing", "event")  # afterRound 2
    await engine.reset(1)  # rolls the archive back
    after_reset = snapshot(engine)
    fake.release()
    report = await task
    assert report.outcome == "stale"
    assert snapshot(engine) == after_reset
    assert telemetry_outcomes(engine) == ["stale"]


@pytest.mark.req("JF-CAT-009", "JF-COMP-011", "JF-CAT-002")
@async_test
async def test_old_reply_never_lands_in_a_new_scene_with_the_same_id() -> None:
    engine, fake = make_engine(thresholds=SMALL)
    await engine.record_round("r1", "o1")
    await engine.start_scene("s1")
    await engine.record_scene_exchange("s1", "OLD scene exchange", fill(120))
    fake.queue({"reply": "hold", "then": {"reply": "success", "summary": "OLD-SCENE-SUMMARY"}})
    old = asyncio.create_task(engine.before_generation("s1"))
    await wait_held(fake, 1, old)
    await engine.record_round("r2", "o2")
    await engine.publish_scene("s1", "closing", "event")
    await engine.reset(1)
    await engine.start_scene("s1")
    await engine.record_scene_exchange("s1", "NEW scene exchange", fill(120))
    fake.queue({"reply": "hold", "then": {"reply": "success", "summary": "NEW-SCENE-SUMMARY"}})
    new = asyncio.create_task(engine.before_generation("s1"))
    await wait_held(fake, 2, new)
    fake.release()
    results = await asyncio.gather(old, new, return_exceptions=True)
    assert [getattr(r, "outcome", r) for r in results] == ["stale", "published"]
    assert store(engine)["jfCatalystStack.s1.summary"]["text"] == "NEW-SCENE-SUMMARY"
    assert "OLD-SCENE-SUMMARY" not in as_text(engine.dump())


# -- scene-private text never reaches the game -------------------------------------------------
@pytest.mark.req("JF-CAT-008", "JF-CAT-003", "JF-CALL-012")
@async_test
async def test_scene_private_text_stays_out_of_game_memory() -> None:
    engine, fake = make_engine(thresholds=SMALL)
    await engine.record_round("r1", fill(60))
    await scene_with_exchanges(engine, "s1", 3)
    fake.queue({"reply": "success", "summary": f"{SCENE_SUMMARY_CANARY} summary"})
    assert (await engine.before_generation("s1")).outcome == "published"
    await engine.record_scene_exchange("s1", f"late {TRANSCRIPT_CANARY}", REASONING_CANARY)
    await scene_with_exchanges(engine, "s2", 1)
    await engine.cancel_scene("s2")
    await engine.publish_scene("s1", "public closing", "public event")
    for i in range(3):
        await engine.record_round(f"r{i + 2}", fill(60))
    fake.queue({"reply": "success", "summary": "game summary"})
    assert (await engine.before_generation()).outcome == "published"
    await engine.record_round("r9", fill(150))
    fake.queue({"reply": "refuse"})
    await engine.before_generation()  # the summary is in this request

    game_requests = request_bodies(fake, GAME_KIND)
    assert len(game_requests) == 2
    assert "public closing" in game_requests[0]["input"]["text"]
    surfaces = {
        "game stack": as_text(game_items(engine)),
        "game requests": as_text(game_requests),
        "telemetry": as_text(engine.telemetry),
    }
    for where, text in surfaces.items():
        for canary in (TRANSCRIPT_CANARY, SCENE_SUMMARY_CANARY, REASONING_CANARY):
            assert canary not in text, f"{canary} reached the {where}"
    assert [c["origin"] for c in game_chunks(engine)] == ["round"]
    scene_texts = [r["body"]["input"]["text"] for r in fake.requests]
    scene_texts += [TRANSCRIPT_CANARY, SCENE_SUMMARY_CANARY, REASONING_CANARY, "public closing"]
    assert_telemetry_has_no_text(engine.telemetry, scene_texts)


# -- bad scene ids -----------------------------------------------------------------------------
@pytest.mark.req("JF-ERR-005", "JF-ERR-001", "JF-ERR-002")
@async_test
async def test_unknown_scene_is_invalid_input() -> None:
    engine, fake = make_engine(thresholds=SMALL)
    await engine.record_round("r1", "o1")
    await scene_with_exchanges(engine, "known")
    before = snapshot(engine)
    attempts = [
        lambda: engine.record_scene_exchange("nope", "u", "a"),
        lambda: engine.publish_scene("nope", "c", "e"),
        lambda: engine.cancel_scene("nope"),
        lambda: engine.before_generation("nope"),
    ]
    for attempt in attempts:
        with pytest.raises(InvalidInput) as info:
            await attempt()
        assert info.value.code == "invalid_input"
        assert snapshot(engine) == before
    with pytest.raises(InvalidInput):
        engine.canonical_text("nope")
    assert fake.calls == 0


@pytest.mark.req("JF-ERR-005", "JF-ERR-002", "JF-CAT-001")
@pytest.mark.parametrize("end", [None, "publish", "cancel"])
@async_test
async def test_duplicate_scene_id_is_invalid_input(end: str | None) -> None:
    engine, _ = make_engine(thresholds=SMALL)
    await scene_with_exchanges(engine, "s1")
    if end == "publish":
        await engine.publish_scene("s1", "c", "e")
    elif end == "cancel":
        await engine.cancel_scene("s1")
    before, status = snapshot(engine), engine.status()
    with pytest.raises(InvalidInput) as info:
        await engine.start_scene("s1")
    assert info.value.code == "invalid_input"
    assert snapshot(engine) == before and engine.status() == status
