"""The stdio driver answers every line and never dies on input: lone-surrogate ids, 100k-deep
nesting, over-long lines (bounded memory), garbage; and the line splitter on its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jfsm.driver.stdio import LineSplitter
from jfsm.driver.wire import Refusal, decode
from tests.driver_helpers import HELLO, StdioDriver, spec_with


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("stdio") / "state"


@pytest.fixture(scope="module")
def driver(state: Path):  # type: ignore[no-untyped-def]
    """One driver for the whole module: each test also checks that it is still serving."""
    process = StdioDriver(state)
    assert process.call("hello", HELLO)["ok"]
    assert process.call("create_game", {"game": "g"})["ok"]
    yield process
    process.close()


def _refused_with_null_id(reply: dict[str, object]) -> bool:
    error = reply.get("error")
    return (
        reply.get("id") is None
        and reply.get("ok") is False
        and isinstance(error, dict)
        and error.get("code") == "invalid_input"
    )


@pytest.mark.req("JF-ERR-008", "JF-ERR-010")
@pytest.mark.parametrize(
    "line",
    [
        b'{"id":"\\ud800","op":"x"}',  # a lone-surrogate id: the old driver's task died
        b"[" * 100_000,  # RecursionError in the old driver: no answer
        b'{"id": 1, "op": "dump", "args": {"game": "g", "x": ' + b"[" * 100_000 + b"]}}",
        b'{"id": -1, "op": "dump", "args": {"game": "g"}}',
        b'{"id": true, "op": "dump", "args": {"game": "g"}}',
        b'{"id": NaN, "op": "dump", "args": {"game": "g"}}',
        b"\xff\xfe not utf-8",
        b"42",
        b'"just a string"',
        b"{not json",
    ],
    ids=lambda b: repr(b[:30]),
)
def test_unreadable_lines_get_an_error_with_a_null_id(driver: StdioDriver, line: bytes) -> None:
    driver.send_raw(line + b"\n")
    assert _refused_with_null_id(driver.reply())
    assert driver.call("dump", {"game": "g"})["ok"]  # and the driver goes on
    assert driver.alive()


@pytest.mark.req("JF-ERR-006")
@pytest.mark.parametrize("game", ["x" * 200, "\ud800", "a b", "", "ü"], ids=ascii)
def test_bad_game_ids_are_invalid_input_not_internal_error(
    driver: StdioDriver, game: str, state: Path
) -> None:
    """A 200-character game id was `internal_error` (its folder name was too long) and a
    lone surrogate too (it could not be encoded)."""
    for op, args in (("create_game", {"game": game}), ("duplicate", {"game": "g", "into": game})):
        message = {"id": 7, "op": op, "args": args}
        driver.send_raw(json.dumps(message, ensure_ascii=True).encode() + b"\n")
        reply = driver.reply()
        assert reply["id"] == 7 and reply["error"]["code"] == "invalid_input", reply
    assert sorted(p.name for p in state.iterdir()) == ["game-67"]


@pytest.mark.req("JF-ERR-009")
def test_an_over_long_line_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    """With a 1 MiB message limit, a 96 MiB line is answered with an error as soon as it
    crosses the limit, the rest is discarded, and the driver's peak memory grows by far
    less than the line (the old driver buffered a line whole, up to 1 GiB)."""
    spec = spec_with(tmp_path, limits={"message_max_bytes": 1 << 20})
    process = StdioDriver(spec=spec)
    try:
        assert process.call("hello", HELLO)["ok"]
        assert process.call("create_game", {"game": "g"})["ok"]
        before = process.high_water_kib()
        piece = b"x" * (1 << 20)
        process.send_raw(b'{"id": 5, "op": "record_round", "args": {"input": "')
        for _ in range(96):
            process.send_raw(piece)
        reply = process.reply()
        assert _refused_with_null_id(reply) and "limit" in reply["error"]["message"]
        process.send_raw(b'", "output": "o", "game": "g"}}\n')
        assert process.call("dump", {"game": "g"})["result"]["store"] == {}
        grown = process.high_water_kib() - before
        assert grown < 24 * 1024, f"peak memory grew by {grown} KiB for a 96 MiB line"
    finally:
        process.close()


@pytest.mark.req("JF-ERR-009")
def test_a_message_at_the_limit_is_served(tmp_path: Path) -> None:
    spec = spec_with(tmp_path, limits={"message_max_bytes": 4096})
    process = StdioDriver(spec=spec)
    try:
        assert process.call("hello", HELLO)["ok"]
        assert process.call("create_game", {"game": "g"})["ok"]
        head = b'{"id": 9, "op": "record_round", "args": {"game": "g", "output": "o", "input": "'
        tail = b'"}}'
        body = b"y" * (4096 - len(head) - len(tail))
        process.send_raw(head + body + tail + b"\n")
        assert process.reply() == {"id": 9, "ok": True, "result": {"round": 1, "seq": 1}}
        process.send_raw(head + body + b"y" + tail + b"\n")
        assert _refused_with_null_id(process.reply())
    finally:
        process.close()


def test_line_splitter_bounds_lines_and_resynchronises() -> None:
    splitter = LineSplitter(limit=4)
    assert splitter.feed(b"ab\ncd") == [b"ab"]
    events = splitter.feed(b"efgh\nij\n")
    assert isinstance(events[0], Refusal) and events[1:] == [b"ij"]
    assert splitter.feed(b"k" * 10) == [events[0]]
    assert splitter.feed(b"\nlm") == []
    assert splitter.end() == b"lm"
    assert LineSplitter(limit=4).feed(b"abcd\n") == [b"abcd"]


def test_decode_refuses_without_raising() -> None:
    for data in (b"[" * 10_000, b"\xc3", b"NaN", b'{"a": Infinity}', b""):
        assert isinstance(decode(data), Refusal)
    assert decode(b'{"id": 1}') == {"id": 1}
