"""Engine behaviour: when compression starts, what it submits, what it publishes, and that
every failure outcome leaves memory byte-identical (issue 3 acceptance).

Thresholds are the spec's (300,000 / 150,000) in the boundary tests; the other tests use a
small override so the stacks stay tiny.
"""

from __future__ import annotations

import asyncio

import pytest
from engine_helpers import (
    CATALYST_KIND,
    GAME_KIND,
    SUMMARY_ENVELOPE,
    as_text,
    assert_telemetry_has_no_text,
    async_test,
    expected_text,
    fill,
    game_chunks,
    game_meta,
    game_summary,
    make_engine,
    request_bodies,
    snapshot,
    store,
    telemetry_outcomes,
    wait_held,
)

SMALL = {"game": 100, "catalyst": 100}
ROUND_CANARY = "CANARY-ROUND-7f3a"
SUMMARY_CANARY = "CANARY-SUMMARY-91bc"


def fake_call_id(fake, index: int) -> str:  # type: ignore[no-untyped-def]
    """The callId the fake returns for its `index`-th call (1-based), from its recorded key."""
    key = fake.requests[index - 1]["idempotencyKey"]
    return f"fake-{key[-16:]}-{index}"


async def three_rounds(engine) -> None:  # type: ignore[no-untyped-def]
    for i in range(1, 4):
        await engine.record_round(f"in {i} {ROUND_CANARY}", f"out {i} 😀 {ROUND_CANARY}")


# -- the threshold, at the spec's values -------------------------------------------------------
@pytest.mark.req("JF-COMP-001", "JF-TEXT-003", "JF-TEXT-004")
@pytest.mark.parametrize("unit", ["x", "a😀"], ids=["ascii", "astral"])
@pytest.mark.parametrize("delta", [0, 1], ids=["exactly", "one-over"])
@async_test
async def test_game_threshold_boundary_at_spec_value(unit: str, delta: int) -> None:
    engine, fake = make_engine()
    assert engine.thresholds["game"] == 300_000
    output = fill(300_000 + delta - 42 - 3, unit)
    await engine.record_round("abc", output)
    text = expected_text(None, [("abc", output)])
    assert len(text) == 300_000 + delta
    assert engine.canonical_text() == text
    report = await engine.before_generation()
    if delta == 0:
        # Exactly the threshold: not due, whatever UTF-16 or UTF-8 counting would say.
        assert report.outcome == "not_due"
        assert fake.calls == 0 and fake.requests == []
    else:
        assert report.outcome == "published"
        assert fake.calls == 1
        body = fake.requests[0]["body"]
        assert body["kind"] == GAME_KIND
        assert body["input"]["text"] == text
        assert body["input"]["chars"] == 300_001 == len(text)
        assert body["input"]["throughSeq"] == 1


@pytest.mark.req("JF-COMP-001", "JF-TEXT-003", "JF-CALL-002")
@pytest.mark.parametrize("unit", ["y", "😀b"], ids=["ascii", "astral"])
@pytest.mark.parametrize("delta", [0, 1], ids=["exactly", "one-over"])
@async_test
async def test_catalyst_threshold_boundary_at_spec_value(unit: str, delta: int) -> None:
    engine, fake = make_engine()
    assert engine.thresholds["catalyst"] == 150_000
    await engine.start_scene("s1")
    user = fill(150_000 + delta - 42 - 5, unit)
    await engine.record_scene_exchange("s1", user, "12345")
    text = expected_text(None, [(user, "12345")])
    assert engine.canonical_text("s1") == text and len(text) == 150_000 + delta
    report = await engine.before_generation("s1")
    if delta == 0:
        assert report.outcome == "not_due"
        assert fake.calls == 0
    else:
        assert report.outcome == "published"
        [body] = request_bodies(fake)
        assert body["kind"] == CATALYST_KIND
        assert body["scope"] == {"gameId": "g", "catalystId": "s1"}
        assert body["input"] == {"text": text, "chars": 150_001, "throughSeq": 1}


@pytest.mark.req("JF-COMP-001")
@async_test
async def test_a_big_game_stack_does_not_trigger_a_scene_compression() -> None:
    engine, fake = make_engine()
    await engine.record_round("", fill(300_000))
    await engine.start_scene("s1")
    await engine.record_scene_exchange("s1", "u", "a")
    assert (await engine.before_generation("s1")).outcome == "not_due"
    assert fake.calls == 0


@pytest.mark.req("JF-COMP-001")
@async_test
async def test_summary_alone_above_threshold_is_not_due() -> None:
    """Due needs at least one exact chunk: a long summary alone does not trigger."""
    engine, fake = make_engine(thresholds=SMALL)
    await engine.record_round("u", fill(400))
    fake.queue({"reply": "success", "summary": fill(300, "s")})
    assert (await engine.before_generation()).outcome == "published"
    assert engine.index.game.length == 322 > 100 and game_chunks(engine) == []
    assert (await engine.before_generation()).outcome == "not_due"
    assert fake.calls == 1


# -- what is submitted -------------------------------------------------------------------------
@pytest.mark.req("JF-CALL-003", "JF-TEXT-003", "JF-TEXT-004", "JF-COMP-002")
@async_test
async def test_request_text_is_the_canonical_text_with_code_point_count() -> None:
    engine, fake = make_engine(thresholds=SMALL)
    pairs = [("héllo 😀", "wörld 𝄞𝄞"), ("", "🎉" * 40), ("a\nb", "<user>\n</user>")]
    for user, assistant in pairs:
        await engine.record_round(user, assistant)
    measured = engine.canonical_text()
    assert measured == expected_text(None, pairs)
    assert engine.index.game.length == len(measured)
    await engine.before_generation()
    body = fake.requests[0]["body"]
    assert body["input"]["text"] == measured
    assert body["input"]["chars"] == len(measured)
    # Code points, not UTF-16 units (the astral text makes them differ).
    assert body["input"]["chars"] != len(measured.encode("utf-16-le")) // 2
    assert body["input"]["throughSeq"] == 3
    assert body["scope"] == {"gameId": "g"}


@pytest.mark.req("JF-COMP-002", "JF-CALL-003", "JF-TEXT-004")
@async_test
async def test_second_request_represents_summary_plus_exact_chunks() -> None:
    engine, fake = make_engine(thresholds=SMALL)
    await three_rounds(engine)
    fake.queue({"reply": "success", "summary": "first summary  "})
    assert (await engine.before_generation()).outcome == "published"
    await engine.record_round("four", fill(120))
    await engine.record_round("five", "5")
    await engine.before_generation()
    body = fake.requests[1]["body"]
    expected = expected_text("first summary  ", [("four", fill(120)), ("five", "5")])
    assert body["input"] == {"text": expected, "chars": len(expected), "throughSeq": 5}


# -- what is published -------------------------------------------------------------------------
@pytest.mark.req(
    "JF-COMP-004", "JF-COMP-005", "JF-TEXT-002", "JF-STORE-001", "JF-STORE-002", "JF-QUOTA-005"
)
@async_test
async def test_publication_record_and_exact_deletes() -> None:
    engine, fake = make_engine(thresholds=SMALL, recording=True)
    await three_rounds(engine)
    await engine.checkpoint()
    summary = "  Summary, verbatim:\n keep  spaces\t 😀  "
    fake.queue({"reply": "success", "summary": summary})
    report = await engine.before_generation()
    assert report.outcome == "published"
    assert game_summary(engine) == {
        "text": summary,
        "throughSeq": 3,
        "compressionCallId": fake_call_id(fake, 1),
        "kind": GAME_KIND,
    }
    assert report.call_id == fake_call_id(fake, 1)
    assert game_chunks(engine) == []
    log = {e["key"]: e for e in engine.dump()["changeLog"]}
    assert set(log) == {
        "jfGameStack.chunk.1",
        "jfGameStack.chunk.2",
        "jfGameStack.chunk.3",
        "jfGameStack.summary",
    }  # the meta is set back to its checkpoint value: a net no-op, no entry
    assert all(log[f"jfGameStack.chunk.{i}"]["op"] == "delete" for i in (1, 2, 3))
    # One projection: summary set, represented chunks deleted, meta updated.
    last = engine.store.commits[-1]
    assert "jfGameStack.summary" in last.sets
    assert set(last.sets) <= {"jfGameStack.summary", "jfGameStack.meta"}
    assert last.deletes == {f"jfGameStack.chunk.{i}" for i in (1, 2, 3)}
    assert game_meta(engine) == {"nextSeq": 4, "epoch": 0, "forcedCompression": False}


@pytest.mark.req("JF-COMP-003", "JF-COMP-005", "JF-CONC-002", "JF-STORE-003", "JF-STORE-004")
@async_test
async def test_chunk_appended_while_in_flight_survives_exactly() -> None:
    engine, fake = make_engine(thresholds=SMALL)
    await three_rounds(engine)
    await engine.checkpoint()
    fake.queue({"reply": "hold", "then": {"reply": "success", "summary": "held summary"}})
    task = asyncio.create_task(engine.before_generation())
    await wait_held(fake, 1, task)
    assert (await engine.record_round("late 😀", "suffix stays")) == {"round": 4, "seq": 4}
    suffix = store(engine)["jfGameStack.chunk.4"]
    fake.release()
    report = await task
    assert report.outcome == "published" and report.through_seq == 3
    assert game_chunks(engine) == [suffix]
    assert suffix == {
        "seq": 4,
        "user": "late 😀",
        "assistant": "suffix stays",
        "origin": "round",
        "roundId": 4,
    }
    assert game_summary(engine)["throughSeq"] == 3
    log = {e["key"]: e for e in engine.dump()["changeLog"]}
    assert log["jfGameStack.chunk.4"] == {
        "key": "jfGameStack.chunk.4",
        "op": "set",
        "value": suffix,
    }
    assert engine.canonical_text() == expected_text("held summary", [("late 😀", "suffix stays")])


@pytest.mark.req("JF-TEXT-003", "JF-COMP-007")
@async_test
async def test_astral_summary_one_code_point_shorter_is_published() -> None:
    """A summary block one code point shorter than the request, in astral characters (more
    UTF-16 units than the request): still smaller, and the stack shrinks by one."""
    engine, fake = make_engine(thresholds=SMALL)
    await engine.record_round("u", fill(200))
    fake.plan(
        lambda req: {"reply": "success", "summary": fill(req.chars - SUMMARY_ENVELOPE - 1, "😀")}
    )
    report = await engine.before_generation()
    assert report.outcome == "published"
    assert game_summary(engine)["text"] == fill(243 - SUMMARY_ENVELOPE - 1, "😀")
    assert report.length_after == report.length_before - 1


@pytest.mark.req("JF-COMP-007")
@async_test
async def test_summary_whose_block_is_as_long_as_the_request_is_not_smaller() -> None:
    """Fewer code points than the request, but with its envelope the stack would not shrink."""
    engine, fake = make_engine(thresholds=SMALL)
    await engine.record_round("u", fill(200))
    before = snapshot(engine)
    fake.plan(lambda req: {"reply": "success", "summary": fill(req.chars - SUMMARY_ENVELOPE, "😀")})
    assert (await engine.before_generation()).outcome == "not_smaller"
    assert snapshot(engine) == before


@pytest.mark.req("JF-ATOM-002", "JF-ATOM-003", "JF-QUOTA-001")
@async_test
async def test_publication_is_preflighted_on_its_post_state_only() -> None:
    """Quota == current footprint: the summary cannot be *added*, but the post-state (chunks
    gone) is smaller, so the publication must be accepted."""
    probe, _ = make_engine(thresholds=SMALL)
    await three_rounds(probe)
    quota = probe.dump()["footprint"]
    engine, fake = make_engine(thresholds=SMALL, quota=quota)
    await three_rounds(engine)
    assert engine.dump()["footprint"] == quota
    fake.queue({"reply": "success", "summary": "short"})
    assert (await engine.before_generation()).outcome == "published"
    assert engine.dump()["footprint"] <= quota


# -- failures ----------------------------------------------------------------------------------
FAILURES = {
    "refused": [{"reply": "refuse", "code": "policy"}],
    "transport": [{"reply": "http_status", "status": 503}],
    "empty": [{"reply": "empty", "summary": "   "}],
    "empty-unicode-space": [{"reply": "empty", "summary": " \n\t\u3000\u00a0\u2028\u0085 "}],
    "not_smaller-equal": [lambda req: {"reply": "success", "summary": fill(req.chars, "😀")}],
    "not_smaller-longer": [lambda req: {"reply": "success", "summary": fill(req.chars + 5)}],
}


@pytest.mark.req(
    "JF-COMP-006", "JF-COMP-007", "JF-COMP-008", "JF-COMP-009", "JF-COMP-012", "JF-CALL-011"
)
@pytest.mark.parametrize("case", sorted(FAILURES))
@async_test
async def test_failure_leaves_memory_byte_identical(case: str) -> None:
    outcome = case.split("-")[0]
    engine, fake = make_engine(thresholds=SMALL)
    await three_rounds(engine)
    for reply in FAILURES[case]:
        if isinstance(reply, dict):
            fake.queue(reply)
        else:
            fake.plan(reply)
    before = snapshot(engine)
    report = await engine.before_generation()  # the generation proceeds: no exception
    assert report.outcome == outcome
    assert snapshot(engine) == before
    assert telemetry_outcomes(engine) == [outcome]
    event = engine.telemetry[0]
    assert event["kind"] == GAME_KIND and event["inputChars"] == len(engine.canonical_text())
    # Due again before the next generation, and a good reply then publishes.
    assert (await engine.before_generation()).outcome == "published"
    assert fake.calls == 2
    assert game_chunks(engine) == []


@pytest.mark.req("JF-COMP-010", "JF-COMP-009", "JF-COMP-008", "JF-QUOTA-003")
@async_test
async def test_quota_outcome_publishes_nothing() -> None:
    probe, _ = make_engine(thresholds=SMALL)
    await three_rounds(probe)
    quota = probe.dump()["footprint"] + 10
    engine, fake = make_engine(thresholds=SMALL, quota=quota)
    await three_rounds(engine)
    # Fewer code points than the request, but 4 UTF-8 bytes each: the post-state is bigger.
    fake.plan(
        lambda req: {"reply": "success", "summary": fill(req.chars - SUMMARY_ENVELOPE - 1, "😀")}
    )
    before = snapshot(engine)
    report = await engine.before_generation()
    assert report.outcome == "quota"
    assert snapshot(engine) == before
    assert telemetry_outcomes(engine) == ["quota"]
    assert engine.dump()["footprint"] <= quota


@pytest.mark.req("JF-COMP-011", "JF-COMP-009", "JF-COMP-008")
@async_test
async def test_stale_after_reset_while_in_flight() -> None:
    engine, fake = make_engine(thresholds=SMALL)
    await three_rounds(engine)
    fake.queue({"reply": "hold", "then": {"reply": "success", "summary": "too late"}})
    task = asyncio.create_task(engine.before_generation())
    await wait_held(fake, 1, task)
    await engine.reset(3)  # same rounds, but a rebuild: epoch + 1
    after_reset = snapshot(engine)
    assert game_meta(engine)["epoch"] == 1
    fake.release()
    report = await task
    assert report.outcome == "stale"
    assert snapshot(engine) == after_reset
    assert game_summary(engine) is None and len(game_chunks(engine)) == 3
    assert telemetry_outcomes(engine) == ["stale"]


@pytest.mark.req("JF-COMP-006")
@async_test
async def test_only_unicode_white_space_counts_as_empty() -> None:
    engine, fake = make_engine(thresholds=SMALL)
    await three_rounds(engine)
    fake.queue({"reply": "success", "summary": "\x1c\x1d\x1e\x1f"})
    report = await engine.before_generation()
    assert report.outcome == "published"
    assert game_summary(engine)["text"] == "\x1c\x1d\x1e\x1f"


# -- telemetry carries no text -----------------------------------------------------------------
@pytest.mark.req("JF-CALL-012", "JF-CALL-011", "JF-COMP-004")
@async_test
async def test_telemetry_holds_no_exchange_or_summary_text() -> None:
    engine, fake = make_engine(thresholds=SMALL)
    await three_rounds(engine)
    fake.queue(
        {"reply": "refuse", "code": "nope"},
        {"reply": "success", "summary": f"{SUMMARY_CANARY} short"},
    )
    await engine.before_generation()
    assert (await engine.before_generation()).outcome == "published"
    await engine.record_round(f"more {ROUND_CANARY}", fill(100))
    fake.queue({"reply": "success", "summary": f"{SUMMARY_CANARY}     "})
    await engine.before_generation()  # the summary is *in* the request now
    fake.plan(lambda req: {"reply": "success", "summary": fill(req.chars, SUMMARY_CANARY)})
    await engine.record_round("x", fill(100))
    await engine.before_generation()
    assert telemetry_outcomes(engine) == ["refused", "published", "published", "not_smaller"]
    rendered = as_text(engine.telemetry)
    for canary in (ROUND_CANARY, SUMMARY_CANARY, "short", "out 1"):
        assert canary not in rendered
    texts = [t for r in fake.requests for t in (r["body"]["input"]["text"],)]
    texts += [f"{SUMMARY_CANARY} short", SUMMARY_CANARY, ROUND_CANARY]
    assert_telemetry_has_no_text(engine.telemetry, texts)
    published = engine.telemetry[1]
    assert published["callId"] == fake_call_id(fake, 2)
    assert published["outputChars"] == len(f"{SUMMARY_CANARY} short")


# -- one compression in flight per stack -------------------------------------------------------
@pytest.mark.req("JF-CONC-003", "JF-CONC-002")
@async_test
async def test_at_most_one_compression_in_flight_per_stack() -> None:
    engine, fake = make_engine(thresholds=SMALL)
    await three_rounds(engine)
    fake.queue({"reply": "hold", "then": {"reply": "default"}})
    task = asyncio.create_task(engine.before_generation())
    await wait_held(fake, 1, task)
    await engine.record_round("while held", fill(200))
    second = await engine.before_generation()  # proceeds, starts nothing
    assert second.outcome == "in_flight"
    assert fake.calls == 1
    fake.release()
    assert (await task).outcome == "published"
    assert fake.calls == 1
    # The suffix is over the threshold on its own: due again at the next generation.
    assert (await engine.before_generation()).outcome == "published"
    assert fake.calls == 2


@pytest.mark.req("JF-CONC-004", "JF-CALL-002")
@async_test
async def test_game_and_scene_compress_independently() -> None:
    engine, fake = make_engine(thresholds=SMALL)
    await three_rounds(engine)
    await engine.start_scene("s1")
    await engine.record_scene_exchange("s1", "scene u", fill(150))
    fake.queue(
        {"reply": "hold", "then": {"reply": "default"}},
        {"reply": "hold", "then": {"reply": "default"}},
    )
    game_task = asyncio.create_task(engine.before_generation())
    await wait_held(fake, 1, game_task)
    scene_task = asyncio.create_task(engine.before_generation("s1"))
    await wait_held(fake, 2, scene_task)
    kinds = [b["kind"] for b in request_bodies(fake)]
    assert kinds == [GAME_KIND, CATALYST_KIND]
    fake.release()
    assert (await game_task).outcome == "published"
    assert (await scene_task).outcome == "published"
    assert store(engine)["jfCatalystStack.s1.summary"]["kind"] == CATALYST_KIND
    assert game_summary(engine)["kind"] == GAME_KIND


# -- beneficiaries and the closed body ---------------------------------------------------------
@pytest.mark.req("JF-CALL-009", "JF-CALL-010", "JF-CALL-002")
@async_test
async def test_beneficiaries_are_read_at_each_call_and_body_is_closed() -> None:
    engine, fake = make_engine(thresholds=SMALL)
    engine.set_participants(
        [
            {"id": "zoe", "human": True},
            {"id": "bot", "human": False},
            {"id": "watcher", "human": True, "spectator": True},
            {"id": "amy", "human": True, "spectator": False},
            {"id": "zoe", "human": True},
        ]
    )
    await three_rounds(engine)
    fake.queue({"reply": "refuse"})
    await engine.before_generation()
    engine.set_participants([{"id": "bob", "human": True}, {"id": "watcher", "human": True}])
    await engine.before_generation()
    first, second = request_bodies(fake)
    assert first["beneficiaries"] == ["amy", "zoe"]
    assert second["beneficiaries"] == ["bob", "watcher"]
    for body in (first, second):
        assert set(body) == {"kind", "scope", "input", "beneficiaries"}
        assert set(body["input"]) == {"text", "chars", "throughSeq"}
        assert set(body["scope"]) == {"gameId"}


@pytest.mark.req("JF-COMP-008", "JF-COMP-009", "JF-COMP-012", "JF-CALL-012")
@async_test
async def test_a_raising_compressor_counts_as_transport() -> None:
    engine, fake = make_engine(thresholds=SMALL)
    await three_rounds(engine)

    def explode(request):  # type: ignore[no-untyped-def]
        raise ConnectionError(f"boom {ROUND_CANARY}")

    fake.plan(explode)
    before = snapshot(engine)
    report = await engine.before_generation()
    assert report.outcome == "transport"
    assert snapshot(engine) == before
    assert telemetry_outcomes(engine) == ["transport"]
    assert ROUND_CANARY not in as_text(engine.telemetry)
