"""A permanent Hypothesis campaign of hostile driver messages, over stdio and over HTTP.

Wrong types, missing fields, huge and deeply nested values, lone surrogates, unknown ops,
ids of every kind, garbage bytes. For every non-blank line: exactly one reply, a valid
envelope whose id is the request's (or null when the request has no readable id), a typed error code
(never `internal_error`) when refused, the process alive, and, after a refusal, every byte
of the state directory as it was (a refused operation writes nothing).
`JFSM_ATTACK_EXAMPLES` sets the number of examples (default 100 over stdio, half over HTTP).
"""

from __future__ import annotations

import http.server
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jfsm.spec import load_json
from tests.driver_helpers import WAIT, HttpDriver, StdioDriver, tree_hashes

OPS = [op["name"] for op in load_json("driver/protocol.json")["ops"]]
HOSTILE_OPS = [op for op in OPS if op not in {"hello", "shutdown"}]
ARG_NAMES = [
    "game",
    "into",
    "scene",
    "input",
    "output",
    "user",
    "assistant",
    "revealed",
    "round",
    "rounds",
    "participants",
    "sets",
    "deletes",
    "closingSummary",
    "meanwhileEvent",
    "protocol",
    "compressUrl",
]
CODES = set(load_json("constants.json")["error_codes"]) | {"unsupported_op"}


class _Refusing(http.server.BaseHTTPRequestHandler):
    """A compress.v2 that refuses at once (400, never retried): compressions end fast."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"error": {"code": "bad_request", "message": "no"}}'
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.fixture(scope="module")
def compress_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


# -- hostile lines ------------------------------------------------------------------------
text = st.text(st.characters(exclude_categories=()), max_size=20)  # lone surrogates included
ids = st.sampled_from(["g", "h", "nope", "", "a b", "x" * 200, "\ud800"]) | text
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
    | ids
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text | ids, inner, max_size=3),
    max_leaves=12,
)
args = st.dictionaries(st.sampled_from(ARG_NAMES) | text, values, max_size=5)
msg_ids = st.integers(0, 2**40) | st.sampled_from([-1, True, None, "7", 1.5, [], {}, 2**80])
ops = st.sampled_from(HOSTILE_OPS) | text


def _dump(message: Any) -> bytes:
    return json.dumps(message, ensure_ascii=True).encode("ascii")


@st.composite
def messages(draw: st.DrawFn) -> bytes:
    kind = draw(st.integers(0, 9))
    if kind <= 4:  # an envelope with hostile parts, sometimes missing some
        message: dict[str, Any] = {"id": draw(msg_ids), "op": draw(ops), "args": draw(args)}
        for key in draw(st.sets(st.sampled_from(["id", "op", "args"]), max_size=1)):
            del message[key]
        return _dump(message)
    if kind == 5:  # nesting past the limit, in a value or as the whole message
        # far from the depth where CPython's own parser gives up (about 1000), so that the
        # test's parse and the driver's agree on whether the id can be read
        depth = draw(st.integers(60, 600) | st.integers(2000, 3000))
        inner = b"[" * depth + b"]" * depth
        if draw(st.booleans()):
            return inner
        return b'{"id": 5, "op": "write", "args": {"game": "g", "sets": {"k": ' + inner + b"}}}"
    if kind == 6:  # a huge value
        size = draw(st.integers(100_000, 600_000))
        op = draw(st.sampled_from(["record_round", "write", "create_game"]))
        return _dump({"id": 6, "op": op, "args": {"game": "g", "input": "x" * size, "output": "o"}})
    if kind == 7:  # JSON, but not a message
        return _dump(draw(values))
    if kind == 8:  # non-standard JSON tokens and raw surrogate escapes
        return draw(
            st.sampled_from(
                [
                    b'{"id": NaN, "op": "dump", "args": {"game": "g"}}',
                    b'{"id": 1, "op": "write", "args": {"game": "g", "sets": {"k": Infinity}}}',
                    b'{"id": "\\udc00", "op": "\\ud800", "args": {}}',
                    b'{"id": 2, "op": "create_game", "args": {"game": "\\ud800"}}',
                    b'{"id": 3, "op": "write", "args": {"game": "g", "sets": {"\\ud800": 1}}}',
                ]
            )
        )
    garbage = draw(st.binary(min_size=1, max_size=300)).replace(b"\n", b" ")
    return garbage if garbage.strip() else b"?" + garbage  # blank lines are not messages


def _no_nan(name: str) -> Any:
    raise ValueError(name)


def _expected_id(line: bytes) -> int | None:
    """The id the reply must carry: the request's if it can be read, else None."""
    try:
        message = json.loads(line.decode("utf-8"), parse_constant=_no_nan)
    except (ValueError, RecursionError):
        return None
    if isinstance(message, dict):
        found = message.get("id")
        if isinstance(found, int) and not isinstance(found, bool) and found >= 0:
            return found
    return None


def _check_reply(line: bytes, reply: Any) -> bool:
    """Assert the reply is a valid answer to `line`; True if it is a refusal."""
    assert isinstance(reply, dict) and set(reply) in ({"id", "ok", "result"}, {"id", "ok", "error"})
    assert reply["id"] == _expected_id(line), (line[:200], reply)
    if reply["ok"] is True:
        return False
    assert reply["ok"] is False
    error = reply["error"]
    assert error["code"] in CODES, (line[:200], error)
    assert isinstance(error["message"], str) and error["message"]
    return True


def _setup(call: Any, url: str) -> None:
    assert call("hello", {"protocol": 1, "compressUrl": url})["ok"]
    assert call("create_game", {"game": "g"})["ok"]
    assert call("record_round", {"game": "g", "input": "i", "output": "o"})["ok"]
    assert call("start_scene", {"game": "g", "scene": "s"})["ok"]


CAMPAIGN = settings(
    max_examples=int(os.environ.get("JFSM_ATTACK_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)


@pytest.fixture(scope="module")
def stdio(tmp_path_factory: pytest.TempPathFactory, compress_url: str) -> Iterator[StdioDriver]:
    state = tmp_path_factory.mktemp("attack") / "state"
    driver = StdioDriver(state)
    driver.state = state  # type: ignore[attr-defined]
    _setup(driver.call, compress_url)
    yield driver
    driver.close()


@pytest.mark.req("JF-ERR-008", "JF-ERR-010", "JF-ERR-002", "JF-ERR-006", "JF-ERR-007")
@CAMPAIGN
@given(line=messages())
def test_hostile_lines_over_stdio(stdio: StdioDriver, line: bytes) -> None:
    state: Path = stdio.state  # type: ignore[attr-defined]
    before = tree_hashes(state), stdio.call("dump", {"game": "g"})["result"]
    stdio.send_raw(line + b"\n")
    reply = stdio.reply(WAIT)
    refused = _check_reply(line, reply)
    assert stdio.alive()
    assert stdio.lines.empty()  # exactly one reply per line
    if refused:
        after = tree_hashes(state), stdio.call("dump", {"game": "g"})["result"]
        assert after == before, (line[:200], reply)


@pytest.fixture(scope="module")
def http_driver(
    tmp_path_factory: pytest.TempPathFactory, compress_url: str
) -> Iterator[HttpDriver]:
    state = tmp_path_factory.mktemp("attack-http") / "state"
    driver = HttpDriver("campaign-token", state=state)
    driver.state = state  # type: ignore[attr-defined]
    _setup(driver.call, compress_url)
    yield driver
    driver.close()


@pytest.mark.req("JF-ERR-008", "JF-ERR-010", "JF-ERR-012", "JF-ERR-002")
@settings(CAMPAIGN, max_examples=max(1, CAMPAIGN.max_examples // 2))
@given(line=messages())
def test_hostile_bodies_over_http(http_driver: HttpDriver, line: bytes) -> None:
    state: Path = http_driver.state  # type: ignore[attr-defined]
    before = tree_hashes(state), http_driver.call("dump", {"game": "g"})["result"]
    response = http_driver.client.post(
        http_driver.url + "/v1/message", content=line, headers=http_driver.headers()
    )
    reply = response.json()
    refused = _check_reply(line, reply)
    assert response.status_code == (400 if reply["id"] is None else 200)
    assert http_driver.alive()
    if refused:
        after = tree_hashes(state), http_driver.call("dump", {"game": "g"})["result"]
        assert after == before, (line[:200], reply)
