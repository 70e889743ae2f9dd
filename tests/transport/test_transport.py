"""The httpx executor against the fake compress.v2 over real loopback HTTP (D16 to D18)."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import pytest

from jfsm.compressor import CompressionRequest, CompressionResult, beneficiaries
from jfsm.errors import InvalidInput
from jfsm.records import Participant
from jfsm.transport import HttpCompressor, SyncHttpCompressor
from jfsm_conformance.fake.compress import FakeCompress
from jfsm_conformance.model.replies import (
    delay,
    empty,
    hold,
    http_status,
    malformed_json,
    not_smaller,
    oversized,
    refuse,
    reset,
    success,
    wrong_schema,
)

GAME_KIND = "paxhistoria.game-agent-stack.v1"
CATALYST_KIND = "paxhistoria.catalyst-agent-stack.v1"

PEOPLE = [
    Participant(id="bob", human=True),
    Participant(id="alice", human=True),
    Participant(id="watcher", human=True, spectator=True),
    Participant(id="npc", human=False),
]


def make_request(text: str = "", *, kind: str = GAME_KIND, catalyst: str | None = None):
    text = text or "<user>\nhello\n</user>\n<assistant>\nworld\n</assistant>\n" * 20
    return CompressionRequest(
        kind=kind,
        game_id="game-1",
        catalyst_id=catalyst,
        text=text,
        chars=len(text),
        through_seq=7,
        epoch=2,
    )


@pytest.fixture
def fake() -> Iterator[FakeCompress]:
    with FakeCompress() as server:
        server.set_participants(PEOPLE)
        yield server


def executor(fake: FakeCompress, **overrides: Any) -> HttpCompressor:
    options: dict[str, Any] = {
        "timeout": 0.4,
        "connect_timeout": 0.4,
        "backoff": 0.01,
        "max_backoff": 0.02,
    }
    options.update(overrides)
    return HttpCompressor(fake.url, **options)


def run(
    fake: FakeCompress,
    request: CompressionRequest | None = None,
    participants: Sequence[Participant] = PEOPLE,
    **overrides: Any,
) -> CompressionResult:
    async def go() -> CompressionResult:
        async with executor(fake, **overrides) as compressor:
            return await compressor.compress(request or make_request(), lambda: participants)

    return asyncio.run(go())


def details(result: CompressionResult) -> list[str | None]:
    return [a.detail for a in result.attempts]


# --------------------------------------------------------------------------- replies


@pytest.mark.req("JF-CALL-001", "JF-CALL-003", "JF-CALL-005")
def test_ok_reply_carries_summary_call_id_and_exact_body(fake: FakeCompress) -> None:
    request = make_request()
    result = run(fake, request)
    assert result.outcome == "ok"
    assert result.summary and len(result.summary) < request.chars
    assert result.call_id and result.call_id.startswith("fake-")
    (attempt,) = result.attempts
    assert (attempt.number, attempt.outcome, attempt.call_id) == (1, "ok", result.call_id)
    assert attempt.output_chars == len(result.summary)
    assert attempt.duration_ms >= 0
    (sent,) = fake.requests
    assert sent["headers"]["idempotency-key"] == request.idempotency_key
    assert sent["body"] == request.body(["alice", "bob"])
    assert fake.violations == []


@pytest.mark.req("JF-CALL-001", "JF-CALL-002")
def test_catalyst_request_carries_its_scope(fake: FakeCompress) -> None:
    request = make_request(kind=CATALYST_KIND, catalyst="scene-9")
    assert run(fake, request).outcome == "ok"
    assert fake.requests[0]["body"]["scope"] == {"gameId": "game-1", "catalystId": "scene-9"}
    assert fake.violations == []


@pytest.mark.req("JF-CALL-005", "JF-CALL-007")
@pytest.mark.parametrize("call_id", [True, False])
def test_refusal_is_reported_and_never_retried(fake: FakeCompress, call_id: bool) -> None:
    fake.script(refuse("quota_exhausted", message="try later", call_id=call_id), success())
    result = run(fake)
    assert result.outcome == "refused"
    assert result.error_code == "quota_exhausted"
    assert result.summary is None
    assert (result.call_id is not None) is call_id
    assert [(a.outcome, a.detail) for a in result.attempts] == [("refused", "quota_exhausted")]
    assert len(fake.requests) == 1
    assert fake.script_left == 1


@pytest.mark.parametrize("outcome", [empty(), empty("  \n "), not_smaller(), not_smaller(5)])
def test_empty_and_not_smaller_are_ok_replies_for_the_engine_to_judge(
    fake: FakeCompress, outcome: Any
) -> None:
    fake.script(outcome)
    request = make_request()
    result = run(fake, request)
    assert result.outcome == "ok"
    assert result.summary is not None
    if outcome.kind == "empty":
        assert result.summary.strip() == ""
    else:
        assert len(result.summary) >= request.chars
    assert result.attempts[0].output_chars == len(result.summary)


# --------------------------------------------------------------------------- retries


@pytest.mark.req("JF-CALL-004", "JF-CALL-007", "JF-CALL-008")
def test_5xx_is_retried_with_the_same_idempotency_key_then_ok(fake: FakeCompress) -> None:
    fake.script(http_status(500), http_status(503), success(chars=9))
    request = make_request()
    result = run(fake, request)
    assert result.outcome == "ok"
    assert details(result) == ["http_500", "http_503", None]
    assert [a.number for a in result.attempts] == [1, 2, 3]
    assert len(result.summary or "") == 9
    keys = {r["headers"]["idempotency-key"] for r in fake.requests}
    assert keys == {request.idempotency_key}
    assert len(fake.requests) == 3


@pytest.mark.req("JF-CALL-008")
def test_retries_are_bounded(fake: FakeCompress) -> None:
    fake.script(*[http_status(502)] * 5)
    result = run(fake, max_attempts=3)
    assert result.outcome == "transport"
    assert result.error_code == "http_502"
    assert len(result.attempts) == 3
    assert len(fake.requests) == 3
    assert fake.script_left == 2


@pytest.mark.req("JF-CALL-007", "JF-CALL-008")
@pytest.mark.parametrize(("status", "tries"), [(400, 1), (404, 1), (409, 1), (429, 3), (408, 3)])
def test_4xx_statuses_are_retried_only_when_a_retry_can_help(
    fake: FakeCompress, status: int, tries: int
) -> None:
    fake.script(*[http_status(status)] * 3)
    result = run(fake)
    assert result.outcome == "transport"
    assert result.error_code == f"http_{status}"
    assert len(result.attempts) == tries


@pytest.mark.req("JF-CALL-008")
def test_backoff_is_exponential_and_capped(fake: FakeCompress) -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    fake.script(*[http_status(500)] * 5)
    result = run(
        fake, max_attempts=5, backoff=0.1, backoff_factor=2.0, max_backoff=0.5, sleep=sleep
    )
    assert len(result.attempts) == 5
    assert waits == pytest.approx([0.1, 0.2, 0.4, 0.5])


@pytest.mark.req("JF-CALL-009")
def test_beneficiaries_are_reread_before_each_attempt(fake: FakeCompress) -> None:
    rosters = [
        PEOPLE,
        [
            Participant(id="alice", human=True),
            Participant(id="bob", human=True, spectator=True),
            Participant(id="carol", human=True),
        ],
    ]
    calls: list[int] = []

    def participants() -> Sequence[Participant]:
        roster = rosters[min(len(calls), 1)]
        calls.append(1)
        fake.set_participants(roster)  # the game's participants change between attempts
        return roster

    fake.script(http_status(503), success())

    async def go() -> CompressionResult:
        async with executor(fake) as compressor:
            return await compressor.compress(make_request(), participants)

    result = asyncio.run(go())
    assert result.outcome == "ok"
    assert len(calls) == 2
    sent = [r["beneficiaries"] for r in fake.requests]
    assert sent == [["alice", "bob"], ["alice", "carol"]]
    assert sent == [beneficiaries(rosters[0]), beneficiaries(rosters[1])]
    assert fake.violations == []


# --------------------------------------------------------------------------- transport failures


@pytest.mark.req("JF-CALL-006")
def test_timeouts_are_bounded(fake: FakeCompress) -> None:
    fake.script(delay(5), delay(5))
    started = time.monotonic()
    result = run(fake, timeout=0.3, max_attempts=2)
    elapsed = time.monotonic() - started
    assert result.outcome == "transport"
    assert details(result) == ["timeout", "timeout"]
    assert elapsed < 2.0
    assert all(250 <= a.duration_ms < 1500 for a in result.attempts)


@pytest.mark.req("JF-CALL-006")
def test_a_held_reply_past_the_deadline_is_a_timeout(fake: FakeCompress) -> None:
    fake.script(hold())
    result = run(fake, timeout=0.3, max_attempts=1)
    assert details(result) == ["timeout"]
    assert fake.release() in (0, 1)


def test_a_held_request_completes_once_released(fake: FakeCompress) -> None:
    fake.script(hold(then=success(chars=4)))

    async def go() -> CompressionResult:
        async with executor(fake, timeout=5.0) as compressor:
            task = asyncio.create_task(compressor.compress(make_request(), lambda: PEOPLE))
            assert await asyncio.to_thread(fake.wait_held, 5.0)
            assert not task.done()
            assert fake.release() == 1
            return await asyncio.wait_for(task, 5.0)

    result = asyncio.run(go())
    assert result.outcome == "ok"
    assert len(result.summary or "") == 4


@pytest.mark.req("JF-CALL-006")
@pytest.mark.parametrize("chunked", [False, True])
def test_oversized_reply_is_too_large(fake: FakeCompress, chunked: bool) -> None:
    fake.script(*[oversized(256 * 1024, chunked=chunked)] * 3)
    result = run(fake, max_response_bytes=4096, max_attempts=2)
    assert result.outcome == "transport"
    assert details(result) == ["too_large", "too_large"]


@pytest.mark.req("JF-CALL-006")
def test_a_reply_exactly_at_the_cap_is_accepted(fake: FakeCompress) -> None:
    fake.script(oversized(4096))
    result = run(fake, max_response_bytes=4096)
    assert result.outcome == "ok"


def test_connection_reset_without_reply(fake: FakeCompress) -> None:
    fake.script(reset(), reset(), reset())
    result = run(fake)
    assert result.outcome == "transport"
    assert details(result) == ["reset", "reset", "reset"]


def test_connect_refused() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    compressor = HttpCompressor(f"http://127.0.0.1:{port}", timeout=0.5, backoff=0.0)

    async def go() -> CompressionResult:
        async with compressor:
            return await compressor.compress(make_request(), lambda: PEOPLE)

    result = asyncio.run(go())
    assert result.outcome == "transport"
    assert details(result) == ["connect", "connect", "connect"]


@pytest.mark.parametrize(
    ("outcome", "code"),
    [
        (malformed_json(), "malformed"),
        (malformed_json(b"\xff\xfe{}"), "malformed"),
        (malformed_json(b'{"ok":true,"callId":"c","summary":"\\ud800"}'), "malformed"),
        (malformed_json(b'{"ok":true,"callId":"c","callId":"d","summary":"s"}'), "malformed"),
        (malformed_json(b'{"ok":true,"callId":"c","summary":"s","n":NaN}'), "malformed"),
        (wrong_schema(), "schema"),
        (wrong_schema({"ok": True, "callId": "c", "summary": "s", "model": "m"}), "schema"),
        (wrong_schema({"ok": "true", "callId": "c", "summary": "s"}), "schema"),
        (wrong_schema({"ok": False, "error": {"code": 7}}), "schema"),
        (wrong_schema({"ok": True, "callId": "", "summary": "s"}), "schema"),
        (http_status(500), "http_500"),
        (http_status(201, b'{"ok":true,"callId":"c","summary":"s"}'), "http_201"),
    ],
)
@pytest.mark.req("JF-CALL-005")
def test_bodies_outside_the_contract_are_transport_failures(
    fake: FakeCompress, outcome: Any, code: str
) -> None:
    fake.script(outcome)
    result = run(fake, max_attempts=1)
    assert (result.outcome, result.error_code, result.summary) == ("transport", code, None)


# --------------------------------------------------------------------------- privacy


def _all_keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _all_keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _all_keys(v)}
    return set()


@pytest.mark.req("JF-CALL-001", "JF-CALL-010")
def test_request_body_has_no_payer_model_provider_or_pricing_field(fake: FakeCompress) -> None:
    run(fake, make_request(kind=CATALYST_KIND, catalyst="s1"))
    body = fake.requests[0]["body"]
    keys = _all_keys(body)
    assert keys == {
        "kind",
        "scope",
        "gameId",
        "catalystId",
        "input",
        "text",
        "chars",
        "throughSeq",
        "beneficiaries",
    }
    forbidden = ("payer", "model", "provider", "pric", "cost", "billing", "prompt")
    assert not [k for k in keys if any(f in k.lower() for f in forbidden)]
    headers = fake.requests[0]["headers"]
    assert not [h for h in headers if any(f in h for f in forbidden)]


CANARY = "CANARY-7b1e-never-logged-\U0001f99c"


@pytest.mark.parametrize(
    "outcome",
    [
        success(summary=f"short {CANARY}"),
        refuse("policy", message=f"echo {CANARY}"),
        wrong_schema({"ok": True, "callId": "c", "summary": CANARY, "extra": CANARY}),
        http_status(500, f'{{"ok":false,"error":{{"code":"{CANARY}"}}}}'.encode()),
    ],
)
@pytest.mark.req("JF-CALL-012")
def test_canary_text_never_reaches_logs_or_attempts(
    fake: FakeCompress, caplog: pytest.LogCaptureFixture, outcome: Any
) -> None:
    caplog.set_level(logging.DEBUG)
    request = make_request(f"<user>\n{CANARY}\n</user>\n" * 30)
    fake.script(outcome, success(summary=CANARY))
    result = run(fake, request, max_attempts=2)
    assert caplog.records, "the attempts were logged"
    for record in caplog.records:
        assert CANARY not in record.getMessage()
        assert CANARY not in repr(record.__dict__)
    assert CANARY not in repr(result.attempts)
    assert result.error_code is None or CANARY not in result.error_code


def test_each_attempt_is_logged_with_its_fields(
    fake: FakeCompress, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="jfsm.transport")
    fake.script(http_status(500), success(chars=3))
    request = make_request()
    result = run(fake, request)
    records = [r for r in caplog.records if r.name == "jfsm.transport"]
    assert len(records) == len(result.attempts) == 2
    for record, attempt in zip(records, result.attempts, strict=True):
        fields = record.compress_attempt  # type: ignore[attr-defined]
        assert fields["attempt"] == attempt.number
        assert fields["outcome"] == attempt.outcome
        assert fields["detail"] == attempt.detail
        assert fields["call_id"] == attempt.call_id
        assert fields["idempotency_key"] == request.idempotency_key
        assert fields["kind"] == GAME_KIND
        assert fields["input_chars"] == request.chars
        assert fields["output_chars"] == attempt.output_chars
    assert records[0].levelno == logging.WARNING
    assert records[1].levelno == logging.INFO


def test_a_refusal_is_logged_at_info_not_as_a_warning(
    fake: FakeCompress, caplog: pytest.LogCaptureFixture
) -> None:
    """A refusal is an expected answer of the service, not a fault to alarm the operator."""
    caplog.set_level(logging.DEBUG, logger="jfsm.transport")
    fake.script(refuse("busy"))
    result = run(fake, make_request())
    assert result.outcome == "refused"
    records = [r for r in caplog.records if r.name == "jfsm.transport"]
    assert [(r.levelno, r.compress_attempt["outcome"]) for r in records] == [  # type: ignore[attr-defined]
        (logging.INFO, "refused")
    ]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_invalid_request_text_raises_before_anything_is_sent(fake: FakeCompress) -> None:
    with pytest.raises(InvalidInput):
        run(fake, make_request("bad \ud800 text"))
    assert fake.requests == []


# --------------------------------------------------------------------------- sync twin


def test_sync_executor_follows_the_same_contract(fake: FakeCompress) -> None:
    request = make_request()
    fake.script(http_status(500), reset(), success(chars=5), refuse("nope"))
    with SyncHttpCompressor(fake.url, timeout=0.5, backoff=0.0) as compressor:
        first = compressor.compress(request, lambda: PEOPLE)
        second = compressor.compress(make_request("another text " * 10), lambda: PEOPLE)
    assert first.outcome == "ok"
    assert details(first) == ["http_500", "reset", None]
    assert second.outcome == "refused" and second.error_code == "nope"
    assert len(second.attempts) == 1
    assert {r["headers"]["idempotency-key"] for r in fake.requests[:3]} == {request.idempotency_key}
    assert fake.violations == []


@pytest.mark.req("JF-CALL-006")
def test_sync_executor_bounds_timeouts_and_size(fake: FakeCompress) -> None:
    fake.script(delay(5), oversized(100_000, chunked=True))
    started = time.monotonic()
    with SyncHttpCompressor(
        fake.url, timeout=0.3, backoff=0.0, max_attempts=2, max_response_bytes=2048
    ) as compressor:
        result = compressor.compress(make_request(), lambda: PEOPLE)
    assert details(result) == ["timeout", "too_large"]
    assert time.monotonic() - started < 2.0


# --------------------------------------------------------------------------- one fake, two ways


def _script() -> list[Any]:
    return [
        http_status(500),
        reset(),
        success(chars=5),
        refuse("nope", call_id=False),
        malformed_json(),
        wrong_schema(),
        oversized(100_000, chunked=True),
        not_smaller(3),
        empty("  "),
    ]


def _texts() -> list[str]:
    return [f"<user>\nround {i}\n</user>\n<assistant>\nok\n</assistant>\n" * 20 for i in range(7)]


def _seen(result: CompressionResult) -> tuple[Any, ...]:
    return (result.outcome, result.error_code, result.summary, result.call_id, details(result))


def _records(fake: FakeCompress) -> list[tuple[Any, ...]]:
    return [
        (r["outcome"], r["status"], r["idempotency_key"], r["valid"], r["body"])
        for r in fake.requests
    ]


def test_the_in_process_transport_serves_the_same_core_as_http() -> None:
    """`FakeCompress.answer` is the fake: over a socket or in process, one script gives the
    same replies to the executor and the same records."""
    options = {"timeout": 2.0, "backoff": 0.0, "max_response_bytes": 4096}
    seen: dict[str, list[tuple[Any, ...]]] = {}
    records: dict[str, list[tuple[Any, ...]]] = {}
    for way in ("http", "in process"):
        with FakeCompress() as fake:
            fake.set_participants(PEOPLE)
            fake.script(*_script())

            async def go(fake: FakeCompress = fake, way: str = way) -> list[CompressionResult]:
                client = None if way == "http" else httpx.AsyncClient(transport=fake.transport())
                base = fake.url if way == "http" else "http://compress.invalid"
                out = []
                async with HttpCompressor(base, client=client, **options) as compressor:
                    for text in _texts():
                        out.append(await compressor.compress(make_request(text), lambda: PEOPLE))
                if client is not None:
                    await client.aclose()
                return out

            seen[way] = [_seen(result) for result in asyncio.run(go())]
            records[way] = _records(fake)
            assert fake.violations == []
    assert seen["http"] == seen["in process"]
    assert records["http"] == records["in process"]
    outcomes = [s[0] for s in seen["http"]]
    assert outcomes == ["ok", "refused", "transport", "ok", "ok", "ok", "ok"]


def test_the_sync_executor_over_the_in_process_fake() -> None:
    fake = FakeCompress()
    fake.set_participants(PEOPLE)
    fake.script(http_status(503), refuse("busy"))
    with SyncHttpCompressor("http://compress.invalid", transport=fake.transport()) as compressor:
        result = compressor.compress(make_request(), lambda: PEOPLE)
    assert (result.outcome, result.error_code, details(result)) == (
        "refused",
        "busy",
        ["http_503", "busy"],
    )
    assert [r["status"] for r in fake.requests] == [503, 200]
