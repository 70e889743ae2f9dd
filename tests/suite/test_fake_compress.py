"""The fake compress.v2 itself, driven by hand-built HTTP requests (no engine code involved)."""

from __future__ import annotations

import ast
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from jfsm.records import Participant
from jfsm_conformance.fake import compress as fake_compress
from jfsm_conformance.fake.compress import PATH, FakeCompress
from jfsm_conformance.model.replies import (
    delay,
    empty,
    hold,
    http_status,
    malformed_json,
    oversized,
    refuse,
    reset,
    success,
    wrong_schema,
)

ROOT = Path(__file__).resolve().parents[2]
GAME = "paxhistoria.game-agent-stack.v1"
CATALYST = "paxhistoria.catalyst-agent-stack.v1"


def body(text: str = "some canonical text " * 20, **changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "kind": GAME,
        "scope": {"gameId": "g1"},
        "input": {"text": text, "chars": len(text), "throughSeq": 3},
        "beneficiaries": ["alice", "bob"],
    }
    doc.update(changes)
    return doc


def post(
    fake: FakeCompress,
    doc: Any = None,
    *,
    key: str | None = "key-1",
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
    path: str = PATH,
    method: str = "POST",
    timeout: float = 5.0,
) -> httpx.Response:
    content = raw if raw is not None else json.dumps(body() if doc is None else doc).encode()
    sent = {"Content-Type": "application/json"}
    if key is not None:
        sent["Idempotency-Key"] = key
    sent.update(headers or {})
    return _client().request(
        method, fake.url + path, content=content, headers=sent, timeout=timeout
    )


@functools.cache
def _client() -> httpx.Client:
    return httpx.Client()  # one client for the module: creating one per call is slow


@pytest.fixture
def fake() -> Iterator[FakeCompress]:
    with FakeCompress(hold_timeout=3.0) as server:
        yield server


# --------------------------------------------------------------------------- loopback only


def test_binds_only_127_0_0_1(fake: FakeCompress) -> None:
    host, port = fake.address
    assert host == "127.0.0.1"
    assert fake.url == f"http://127.0.0.1:{port}"
    if sys.platform.startswith("linux"):  # all of 127/8 is local there, but we bound one
        with socket.socket() as other, pytest.raises(ConnectionRefusedError):
            other.settimeout(2)
            other.connect(("127.0.0.2", port))


@pytest.mark.parametrize("host", ["0.0.0.0", "", "localhost", "::1", "::", "192.168.1.1"])
def test_refuses_any_other_address(host: str) -> None:
    with pytest.raises(ValueError, match=r"127\.0\.0\.1"):
        FakeCompress(host=host)
    with pytest.raises(ValueError):
        fake_compress.serve(0, host=host)


def test_server_threads_are_daemons_and_close_is_prompt() -> None:
    fake = FakeCompress().start()
    fake.script(delay(30), hold())
    results: list[Any] = []

    def call() -> None:
        try:
            results.append(post(fake, timeout=10))
        except httpx.HTTPError as exc:
            results.append(exc)

    callers = [threading.Thread(target=call, daemon=True) for _ in range(2)]
    for caller in callers:
        caller.start()
    assert fake.wait_requests(2, 5)
    assert fake.wait_held(5)
    assert fake._thread is not None and fake._thread.daemon
    started = time.monotonic()
    fake.close()
    assert time.monotonic() - started < 2.0
    for caller in callers:
        caller.join(5)
    assert len(results) == 2
    assert all(isinstance(r, httpx.HTTPError) for r in results)


def test_serve_prints_its_url_and_stops_on_interrupt() -> None:
    code = "from jfsm_conformance.fake.compress import serve; serve(None)"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        prefix = "jfsm fake-compress listening on http://127.0.0.1:"
        assert line.startswith(prefix), line
        port = int(line[len(prefix) :])
        with httpx.Client(timeout=5) as client:
            reply = client.post(
                f"http://127.0.0.1:{port}{PATH}",
                content=json.dumps(body()).encode(),
                headers={"Content-Type": "application/json", "Idempotency-Key": "k"},
            )
        assert reply.status_code == 200 and reply.json()["ok"] is True
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)


# --------------------------------------------------------------------------- independence


def test_the_fake_imports_nothing_from_jfsm_but_the_spec_reader() -> None:
    """The fake is checked against the spec, not the engine: from `jfsm` it imports only the
    spec reader `jfsm.spec` (decision R35), in any of its modules (`fake/*.py`)."""
    imported: set[str] = set()
    for path in Path(fake_compress.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                imported.add(node.module or "")
    assert [name for name in imported if name.split(".")[0] == "jfsm"] == ["jfsm.spec"]
    probe = (
        "import jfsm_conformance.fake.compress as f; "
        "from jfsm_conformance.fake.contract import validator; "
        "validator('compress-request.schema.json'); print(f.spec_dir())"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(ROOT / "spec")


def test_spec_dir_honours_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JFSM_SPEC_DIR", raising=False)
    assert fake_compress.spec_dir() == ROOT / "spec"
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "compress-request.schema.json").write_text("{}")
    monkeypatch.setenv("JFSM_SPEC_DIR", str(tmp_path))
    assert fake_compress.spec_dir() == tmp_path


# --------------------------------------------------------------------------- default policy


def test_default_reply_is_deterministic_short_and_never_quotes_the_input() -> None:
    canary = "CANARY-f00d-in-the-input"
    text = f"<user>\n{canary}\n</user>\n" * 50
    replies = []
    for _ in range(2):
        with FakeCompress() as fake:
            reply = post(fake, body(text), key="same-key")
            replies.append(reply.json())
    assert replies[0] == replies[1]
    first = replies[0]
    assert first["ok"] is True
    assert first["callId"].startswith("fake-")
    assert 0 < len(first["summary"]) < len(text) // 4
    assert canary not in first["summary"]
    assert first["summary"].strip() == first["summary"]


def test_call_id_derives_from_the_idempotency_key(fake: FakeCompress) -> None:
    a = post(fake, body("one " * 30), key="A").json()["callId"]
    b = post(fake, body("two " * 30), key="B").json()["callId"]
    assert a != b
    with FakeCompress() as other:
        assert post(other, body("three " * 30), key="A").json()["callId"] == a


# --------------------------------------------------------------------------- validation


def closed_violations() -> list[tuple[str, dict[str, Any]]]:
    base = body()
    cases: list[tuple[str, dict[str, Any]]] = [
        ("extra top-level field", {**base, "payer": "u1"}),
        ("extra model field", {**base, "model": "gpt"}),
        ("extra scope field", {**base, "scope": {"gameId": "g1", "region": "eu"}}),
        ("extra input field", {**base, "input": {**base["input"], "prompt": "x"}}),
        ("missing beneficiaries", {k: v for k, v in base.items() if k != "beneficiaries"}),
        ("unknown kind", {**base, "kind": "paxhistoria.other.v1"}),
        ("negative chars", {**base, "input": {**base["input"], "chars": -1}}),
        ("float chars", {**base, "input": {**base["input"], "chars": 1.5}}),
        ("throughSeq 0", {**base, "input": {**base["input"], "throughSeq": 0}}),
        ("duplicate beneficiaries", {**base, "beneficiaries": ["a", "a"]}),
        ("game with catalyst", {**base, "scope": {"gameId": "g", "catalystId": "c"}}),
        ("catalyst without id", {**base, "kind": CATALYST}),
        ("text not a string", {**base, "input": {**base["input"], "text": 5}}),
    ]
    return cases


@pytest.mark.parametrize(
    ("label", "doc"), closed_violations(), ids=[c[0] for c in closed_violations()]
)
def test_schema_violations_are_rejected_and_recorded(
    fake: FakeCompress, label: str, doc: dict[str, Any]
) -> None:
    fake.script(success())
    reply = post(fake, doc)
    assert reply.status_code == 400, label
    assert [v["reason"] for v in fake.violations] == ["schema"]
    assert fake.requests[0]["valid"] is False
    assert fake.script_left == 1, "an invalid request consumes no script entry"


def test_chars_must_count_code_points(fake: FakeCompress) -> None:
    text = "astral \U0001f600 text"
    utf16 = len(text.encode("utf-16-le")) // 2
    reply = post(fake, body(text, input={"text": text, "chars": utf16, "throughSeq": 1}))
    assert reply.status_code == 400
    assert [v["reason"] for v in fake.violations] == ["chars"]
    assert post(fake, body(text)).status_code == 200


@pytest.mark.parametrize(
    ("raw", "label"),
    [
        (b'{"kind": "x",', "truncated"),
        (b"\xff\xfe{}", "not utf-8"),
        (json.dumps(body()).encode()[:-1] + b',"kind":"' + GAME.encode() + b'"}', "dup key"),
        (json.dumps(body("t")).replace('"t"', '"\\ud800"').encode(), "lone surrogate"),
        (json.dumps(body()).encode()[:-1] + b',"x":NaN}', "NaN"),
    ],
)
def test_malformed_request_json_is_rejected(fake: FakeCompress, raw: bytes, label: str) -> None:
    reply = post(fake, raw=raw)
    assert reply.status_code == 400, label
    assert [v["reason"] for v in fake.violations] == ["json"]


def test_wrong_path_method_headers(fake: FakeCompress) -> None:
    assert post(fake, path="/v1/compress").status_code == 404
    assert post(fake, method="GET").status_code == 405
    assert post(fake, method="PUT").status_code == 405
    assert post(fake, key=None).status_code == 400
    assert post(fake, key="").status_code == 400
    assert post(fake, headers={"Content-Type": "text/plain"}).status_code == 415
    reasons = [v["reason"] for v in fake.violations]
    assert reasons == [
        "path",
        "method",
        "method",
        "idempotency_key",
        "idempotency_key",
        "content_type",
    ]
    assert post(fake).status_code == 200


def test_beneficiaries_must_match_the_participants_of_that_moment(fake: FakeCompress) -> None:
    fake.set_participants(
        [
            Participant(id="bob", human=True),
            {"id": "alice", "human": True},
            {"id": "eve", "human": True, "spectator": True},
            {"id": "bot", "human": False},
        ]
    )
    assert fake.expected_beneficiaries() == ["alice", "bob"]
    assert post(fake, body(beneficiaries=["alice", "bob"]), key="k1").status_code == 200
    fake.set_participants([{"id": "alice", "human": True}])
    assert post(fake, body(beneficiaries=["alice", "bob"]), key="k2").status_code == 400
    assert post(fake, body(beneficiaries=["alice"]), key="k2").status_code == 200
    fake.set_participants(None)
    assert post(fake, body(beneficiaries=["bob", "alice"]), key="k3").status_code == 400
    assert [v["reason"] for v in fake.violations] == ["beneficiaries", "beneficiaries_order"]
    records = fake.requests
    assert records[1]["beneficiaries"] == ["alice", "bob"]
    assert records[1]["expected_beneficiaries"] == ["alice"]


# --------------------------------------------------------------------------- idempotency


def test_same_key_replays_the_first_reply_without_consuming_the_script(
    fake: FakeCompress,
) -> None:
    fake.script(success(chars=5), refuse("later"))
    first = post(fake, key="same")
    second = post(fake, body(beneficiaries=["alice"]), key="same")  # roster may change
    assert first.content == second.content
    assert fake.script_left == 1
    assert [r["outcome"] for r in fake.requests] == ["success", "replay"]
    assert post(fake, body("another text " * 9), key="other").json()["error"]["code"] == "later"


def test_refusals_are_replayed_too(fake: FakeCompress) -> None:
    fake.script(refuse("quota", call_id=False))
    assert post(fake, key="r").json() == {"ok": False, "error": {"code": "quota"}}
    assert post(fake, key="r").json() == {"ok": False, "error": {"code": "quota"}}


def test_transport_failures_are_not_replayed(fake: FakeCompress) -> None:
    fake.script(http_status(500), malformed_json(), success(chars=3))
    assert post(fake, key="t").status_code == 500
    assert post(fake, key="t").status_code == 200  # malformed, not stored
    third = post(fake, key="t")
    assert len(third.json()["summary"]) == 3
    assert post(fake, key="t").content == third.content
    assert fake.script_left == 0


def test_a_key_reused_for_another_compression_is_a_violation(fake: FakeCompress) -> None:
    assert post(fake, body("first text"), key="k").status_code == 200
    assert post(fake, body("second text"), key="k").status_code == 400
    assert [v["reason"] for v in fake.violations] == ["idempotency_conflict"]


# --------------------------------------------------------------------------- scripted outcomes


def test_scripted_replies(fake: FakeCompress) -> None:
    fake.script(
        success(summary="exact summary"),
        http_status(503),
        wrong_schema(),
        malformed_json(),
        oversized(5000),
        oversized(70_000, chunked=True),
    )
    ok = post(fake, key="a").json()
    assert ok["summary"] == "exact summary"
    assert post(fake, key="b").status_code == 503
    assert post(fake, key="c").json()["callId"] == 42
    with pytest.raises(json.JSONDecodeError):
        json.loads(post(fake, key="d").content)
    sized = post(fake, key="e")
    assert len(sized.content) == 5000 and sized.headers["content-length"] == "5000"
    chunked = post(fake, key="f")
    assert len(chunked.content) == 70_000 and "content-length" not in chunked.headers
    assert json.loads(chunked.content)["ok"] is True
    outcomes = [r["outcome"] for r in fake.requests]
    assert outcomes == [
        "success",
        "http_status",
        "wrong_schema",
        "malformed_json",
        "oversized",
        "oversized",
    ]


def test_reset_closes_without_reply(fake: FakeCompress) -> None:
    fake.script(reset())
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        post(fake)
    assert fake.requests[0]["outcome"] == "reset"
    assert fake.requests[0]["status"] is None


def test_delay_outlasts_a_client_timeout(fake: FakeCompress) -> None:
    fake.script(delay(3))
    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        post(fake, timeout=0.2)
    assert time.monotonic() - started < 1.5


def test_delay_then_answers(fake: FakeCompress) -> None:
    fake.script(delay(0.2, then=refuse("slow")))
    assert post(fake).json()["error"]["code"] == "slow"


def test_hold_blocks_until_release(fake: FakeCompress) -> None:
    fake.script(hold(then=success(chars=2)))
    replies: list[httpx.Response] = []
    caller = threading.Thread(target=lambda: replies.append(post(fake)), daemon=True)
    caller.start()
    assert fake.wait_held(5)
    time.sleep(0.1)
    assert replies == []
    assert fake.requests[0]["outcome"] == "hold"
    assert fake.release() == 1
    caller.join(5)
    assert len(replies[0].json()["summary"]) == 2
    assert fake.wait_held(0.05) is False


def test_hold_gives_up_after_its_timeout() -> None:
    with FakeCompress(hold_timeout=0.2) as fake:
        fake.script(hold())
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
            post(fake)


def test_request_records(fake: FakeCompress) -> None:
    before = time.time()
    fake.set_participants([{"id": "alice", "human": True}, {"id": "bob", "human": True}])
    post(fake, key="rec")
    (record,) = fake.requests
    assert record["index"] == 0
    assert before <= record["time"] <= time.time()
    assert record["method"] == "POST" and record["path"] == PATH
    assert record["headers"]["idempotency-key"] == "rec"
    assert record["idempotency_key"] == "rec"
    assert record["body"] == body()
    assert record["beneficiaries"] == ["alice", "bob"]
    assert record["valid"] is True
    assert (record["outcome"], record["status"]) == ("default", 200)
    fake.requests[0]["index"] = 99  # a copy: the fake's record is unchanged
    assert fake.requests[0]["index"] == 0
    fake.clear_records()
    assert fake.requests == [] and fake.violations == []


def test_reset_script_drops_pending_outcomes(fake: FakeCompress) -> None:
    fake.script(refuse("x"), refuse("y"))
    fake.reset_script()
    assert fake.script_left == 0
    assert post(fake).json()["ok"] is True


@pytest.mark.parametrize(
    "build",
    [
        lambda: success(chars=1, summary="x"),
        lambda: http_status(200),
        lambda: oversized(10),
        lambda: empty("text"),
    ],
)
def test_outcome_builders_reject_nonsense(build: Any) -> None:
    with pytest.raises(ValueError):
        build()


# -- what the fake keeps (defect 14) ------------------------------------------------------------
def test_records_keep_bodies_only_for_the_last_requests_and_at_most_max_records() -> None:
    with FakeCompress(keep_bodies=2, max_records=5) as fake:
        for i in range(9):
            assert post(fake, body(f"text number {i} " * 50), key=f"k{i}").status_code == 200
        records = fake.requests
        assert [r["index"] for r in records] == [4, 5, 6, 7, 8]
        assert [r["body"] is not None for r in records] == [False, False, False, True, True]
        assert records[-1]["body"]["input"]["text"] == "text number 8 " * 50
        assert len(fake._replies) <= 5 and len(fake._logical) <= 5
        assert all(len(digest) == 64 for digest in fake._logical.values())  # no text kept
        assert post(fake, body("text number 8 " * 50), key="k8").status_code == 200  # replayed
        assert fake.requests[-1]["outcome"] == "replay"


def test_the_suite_fake_keeps_every_record_so_indexes_stay_valid() -> None:
    with FakeCompress(keep_bodies=1) as fake:
        for i in range(4):
            post(fake, body(f"t{i} " * 40), key=f"k{i}")
        assert [r["index"] for r in fake.requests] == [0, 1, 2, 3]
        assert [r["body"] is None for r in fake.requests] == [True, True, True, False]


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")  # pragma: no cover


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc for RSS")
def test_the_service_does_not_grow_with_every_request_body() -> None:
    """Before the fix, 20 requests of 4 MB took `jfsm fake-compress` from 46 to 218 MB."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "jfsm.cli", "fake-compress"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip().rsplit(" ", 1)[-1]
        with httpx.Client(timeout=30) as client:

            def send(i: int) -> None:
                text = f"{i:04d}" + "x" * (4 * 1024 * 1024)
                content = json.dumps(body(text)).encode()
                headers = {"Content-Type": "application/json", "Idempotency-Key": f"big-{i}"}
                assert client.post(url + PATH, content=content, headers=headers).status_code == 200

            send(0)
            send(1)
            before = _rss_kib(proc.pid)
            for i in range(2, 22):
                send(i)
            grown = _rss_kib(proc.pid) - before
        print(f"\nfake-compress RSS grew {grown / 1024:.1f} MiB over 20 requests of 4 MiB")
        assert grown < 40 * 1024  # bodies are dropped; before the fix it grew by 160 MiB here
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()


# -- one vocabulary for both fakes -----------------------------------------------------------
DESCRIPTORS: list[dict[str, Any]] = [
    {"reply": "success", "summary": "a short summary", "callId": "call-1"},
    {"reply": "success", "summary": "no call id: each fake names the call"},
    {"reply": "default"},
    {"reply": "refuse", "code": "policy", "callId": "call-2"},
    {"reply": "empty", "summary": "  "},
    {"reply": "not_smaller", "extra": 2},
    {"reply": "http_status", "status": 404},
    {"reply": "malformed"},
    {"reply": "wrong_schema"},
    {"reply": "hold", "then": {"reply": "refuse", "code": "later"}},
]


@pytest.mark.parametrize(
    "descriptor", DESCRIPTORS, ids=[f"{i}-{d['reply']}" for i, d in enumerate(DESCRIPTORS)]
)
def test_one_descriptor_scripts_both_fakes_alike(descriptor: dict[str, Any]) -> None:
    """The suite's reply descriptors script the HTTP fake (through `to_outcome`) and the
    engine's in-process `FakeCompressor` (through `queue`) to the same result."""
    import asyncio

    from jfsm.compressor import CompressionRequest
    from jfsm.testing import FakeCompressor
    from jfsm.transport import HttpCompressor
    from jfsm_conformance.model.replies import to_outcome

    text = "<user>\nhello there\n</user>\n<assistant>\nworld\n</assistant>\n" * 10
    request = CompressionRequest(GAME, "g1", None, text, len(text), 3, 0)
    people = [Participant(id="alice", human=True)]

    async def both() -> tuple[Any, Any]:
        fake = FakeCompress()
        fake.set_participants(people)
        fake.script(to_outcome(descriptor))
        client = httpx.AsyncClient(transport=fake.transport())
        executor = HttpCompressor("http://compress.invalid", client=client, max_attempts=1)
        held = descriptor["reply"] == "hold"
        over_http = asyncio.ensure_future(executor.compress(request, lambda: people))
        in_process = FakeCompressor()
        in_process.queue(descriptor)
        direct = asyncio.ensure_future(in_process.compress(request, lambda: people))
        if held:
            while not (fake.wait_held(0.01) and in_process.held):
                await asyncio.sleep(0.01)
            fake.release()
            in_process.release()
        results = await asyncio.gather(over_http, direct)
        await client.aclose()
        return results[0], results[1]

    wire, direct = asyncio.run(asyncio.wait_for(both(), 20))
    assert (wire.outcome, wire.error_code) == (direct.outcome, direct.error_code)
    # the fake's own ok reply ("default") is made up by each fake; everything else is equal
    own = descriptor["reply"] in ("not_smaller", "default")
    assert wire.summary == direct.summary or own
    assert (wire.summary is None) == (direct.summary is None)
    if wire.summary is not None and descriptor["reply"] != "default":
        assert len(wire.summary) == len(direct.summary or "")
    if descriptor.get("callId"):
        assert wire.call_id == direct.call_id == descriptor["callId"]
