"""Engine behaviour: bad input gets a typed error and writes nothing.

Every case runs against the same small game (two rounds, a running scene `s1`, a published
scene `done`), and checks the error's stable `code`, that the dump (store, change log,
footprint) is byte-identical, that the machines did not move, and that no compression ran.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from engine_helpers import async_test, fill, make_engine, snapshot, store

from jfsm.engine import GameEngine
from jfsm.errors import ERROR_CODES, InvalidInput, JfsmError, QuotaExceeded
from jfsm.stores.memory import MemoryStore

LONE = ["\ud800", "a\udfffb", "😀\udc00", "\ud83d"]  # lone high, lone low, after astral, half
NON_TEXT: list[Any] = [None, b"bytes", 1, 1.5, ["x"], {"x": 1}, True]
BAD_SCENE_IDS: list[Any] = ["", "a.b", "a b", "x" * 65, "é", "\ns1", "jf\ud800", None, 7]


async def small_game(quota: int | None = None) -> tuple[GameEngine, Any]:
    engine, fake = make_engine(thresholds={"game": 10**6, "catalyst": 10**6}, quota=quota)
    await engine.record_round("i1", "o1")
    await engine.record_round("i2", "o2")
    await engine.start_scene("s1")
    await engine.record_scene_exchange("s1", "u", "a")
    await engine.start_scene("done")
    await engine.publish_scene("done", "closing", "event")
    await engine.write({"gameData": 1})
    return engine, fake


Op = Callable[[GameEngine, Any], Any]


def text_ops(bad: Any) -> dict[str, Op]:
    """Every text argument of every operation, given the bad value `bad`."""
    return {
        "record_round.input": lambda e, b: e.record_round(b, "o"),
        "record_round.output": lambda e, b: e.record_round("i", b),
        "intervene.input": lambda e, b: e.intervene(b, "out", 1),
        "intervene.output": lambda e, b: e.intervene("in", b, 0),
        "scene_exchange.user": lambda e, b: e.record_scene_exchange("s1", b, "a"),
        "scene_exchange.assistant": lambda e, b: e.record_scene_exchange("s1", "u", b),
        "publish.closing": lambda e, b: e.publish_scene("s1", b, "event"),
        "publish.meanwhile": lambda e, b: e.publish_scene("s1", "closing", b),
        "edit.input": lambda e, b: e.edit_round(1, b, "o"),
        "edit.output": lambda e, b: e.edit_round(1, "i", b),
        "write.key": lambda e, b: e.write({b: 1}),
        "write.value": lambda e, b: e.write({"k": b}),
        "write.nested": lambda e, b: e.write({"k": {"deep": [b]}}),
        "write.delete": lambda e, b: e.write(deletes=[b]),
        "cheat.value": lambda e, b: e.write({"k": b}, cheat=True),
    }


async def assert_refused(engine: GameEngine, fake: Any, op: Any, code: str) -> JfsmError:
    before, status, calls = snapshot(engine), engine.status(), fake.calls
    with pytest.raises(JfsmError) as info:
        await op
    assert info.value.code == code, info.value
    assert info.value.code in ERROR_CODES
    assert snapshot(engine) == before
    assert engine.status() == status
    assert fake.calls == calls
    return info.value


# -- texts -------------------------------------------------------------------------------------
@pytest.mark.req("JF-TEXT-001", "JF-ERR-001", "JF-ERR-002")
@pytest.mark.parametrize("bad", LONE, ids=ascii)
@pytest.mark.parametrize("name", sorted(text_ops("")))
@async_test
async def test_lone_surrogate_in_any_text_is_refused(name: str, bad: str) -> None:
    engine, fake = await small_game()
    if name == "write.key":
        bad = "k" + bad  # a key starting with jf would be refused as reserved instead
    await assert_refused(engine, fake, text_ops(bad)[name](engine, bad), "invalid_input")


@pytest.mark.req("JF-TEXT-001", "JF-HIST-002", "JF-ERR-002")
@pytest.mark.parametrize("bad", LONE + NON_TEXT, ids=ascii)
@pytest.mark.parametrize("field", ["input", "output"])
@async_test
async def test_bad_text_in_conversion_is_refused(field: str, bad: Any) -> None:
    engine, fake = make_engine()
    item = {"input": "i", "output": "o", field: bad}
    await assert_refused(
        engine,
        fake,
        engine.convert_simple_to_live([{"input": "a", "output": "b"}, item]),
        "invalid_input",
    )
    assert store(engine) == {}


NON_TEXT_CASES = [
    pytest.param(name, bad, id=f"{name}-{bad!r}")
    for name in sorted(text_ops(""))
    if not name.startswith(("write.value", "write.nested", "cheat"))  # JSON values, not texts
    for bad in NON_TEXT
    if not (name == "write.key" and isinstance(bad, (list, dict)))  # cannot be a dict key
]


@pytest.mark.req("JF-TEXT-001", "JF-ERR-005", "JF-ERR-002")
@pytest.mark.parametrize(("name", "bad"), NON_TEXT_CASES)
@async_test
async def test_non_string_text_is_refused(name: str, bad: Any) -> None:
    engine, fake = await small_game()
    await assert_refused(engine, fake, text_ops(bad)[name](engine, bad), "invalid_input")


@pytest.mark.req("JF-TEXT-001", "JF-ERR-005")
@pytest.mark.parametrize("bad", ["", *LONE, *NON_TEXT], ids=ascii)
def test_bad_game_id_is_refused(bad: Any) -> None:
    with pytest.raises(InvalidInput):
        GameEngine(MemoryStore(), None, game_id=bad)  # type: ignore[arg-type]


@pytest.mark.req("JF-TEXT-002")
@async_test
async def test_texts_are_stored_exactly() -> None:
    engine, _ = make_engine()
    weird = " \u00e9 e\u0301 \ufeff\u200b \r\n\t 😀 \x00 "
    await engine.record_round(weird, weird[::-1])
    assert store(engine)["jfRounds.1"]["input"] == weird
    chunk = store(engine)["jfGameStack.chunk.1"]
    assert (chunk["user"], chunk["assistant"]) == (weird, weird[::-1])


# -- scene ids ---------------------------------------------------------------------------------
SCENE_OPS: dict[str, Op] = {
    "start": lambda e, s: e.start_scene(s),
    "exchange": lambda e, s: e.record_scene_exchange(s, "u", "a"),
    "publish": lambda e, s: e.publish_scene(s, "c", "e"),
    "cancel": lambda e, s: e.cancel_scene(s),
    "generate": lambda e, s: e.before_generation(s),
}


BAD_SCENE_CASES = [
    pytest.param(op, sid, id=f"{op}-{sid!a}")
    for op in sorted(SCENE_OPS)
    for sid in BAD_SCENE_IDS
    if not (op == "generate" and sid is None)  # before_generation(None): the game's own
]


@pytest.mark.req("JF-ERR-005", "JF-ERR-002", "JF-TEXT-001")
@pytest.mark.parametrize(("op", "sid"), BAD_SCENE_CASES)
@async_test
async def test_bad_scene_id_is_refused(op: str, sid: Any) -> None:
    engine, fake = await small_game()
    await assert_refused(engine, fake, SCENE_OPS[op](engine, sid), "invalid_input")


@pytest.mark.req("JF-ERR-005", "JF-ERR-002")
@async_test
async def test_scene_id_with_trailing_newline_is_refused() -> None:
    engine, fake = await small_game()
    await assert_refused(engine, fake, engine.start_scene("s2\n"), "invalid_input")


@pytest.mark.req("JF-ERR-005", "JF-ERR-002")
@pytest.mark.parametrize("op", sorted(set(SCENE_OPS) - {"start"}))
@async_test
async def test_unknown_scene_id_is_refused(op: str) -> None:
    engine, fake = await small_game()
    await assert_refused(engine, fake, SCENE_OPS[op](engine, "unknown"), "invalid_input")


# -- reserved keys and quota -------------------------------------------------------------------
RESERVED = [
    "jf",
    "jfGameStack.meta",
    "jfGameStack.chunk.1",
    "jfRounds.1",
    "jfCatalystArchives",
    "jfNew",
]


@pytest.mark.req("JF-STORE-008", "JF-ERR-002")
@pytest.mark.parametrize("cheat", [False, True], ids=["write", "cheat"])
@pytest.mark.parametrize("how", ["set", "delete", "mixed"])
@pytest.mark.parametrize("key", RESERVED)
@async_test
async def test_reserved_keys_are_refused(key: str, how: str, cheat: bool) -> None:
    engine, fake = await small_game()
    if how == "set":
        op = engine.write({key: {"forged": True}}, cheat=cheat)
    elif how == "delete":
        op = engine.write(deletes=[key], cheat=cheat)
    else:
        op = engine.write({"fine": 1, key: 2}, deletes=["gameData"], cheat=cheat)
    await assert_refused(engine, fake, op, "invalid_input")


@pytest.mark.req("JF-STORE-009", "JF-QUOTA-001")
@pytest.mark.parametrize("cheat", [False, True], ids=["write", "cheat"])
@async_test
async def test_other_keys_are_game_data(cheat: bool) -> None:
    engine, _ = await small_game()
    footprint = await engine.write(
        {"JFupper": [1, 2], "x.jf": "😀"}, deletes=["gameData"], cheat=cheat
    )
    assert store(engine)["JFupper"] == [1, 2] and store(engine)["x.jf"] == "😀"
    assert "gameData" not in store(engine)
    assert footprint == engine.dump()["footprint"]


@pytest.mark.req("JF-QUOTA-003", "JF-QUOTA-004", "JF-QUOTA-002", "JF-ERR-001")
@pytest.mark.parametrize("cheat", [False, True], ids=["write", "cheat"])
@async_test
async def test_oversized_write_is_refused_with_the_numbers(cheat: bool) -> None:
    engine, fake = await small_game()
    current = engine.dump()["footprint"]
    big = fill(31_457_280)
    error = await assert_refused(
        engine, fake, engine.write({"big": big}, cheat=cheat), "quota_exceeded"
    )
    assert isinstance(error, QuotaExceeded)
    assert error.details["current"] == current
    assert error.details["quota"] == 31_457_280
    assert error.details["would_be"] > 31_457_280


@pytest.mark.req("JF-QUOTA-001", "JF-QUOTA-003")
@async_test
async def test_write_exactly_at_quota_is_allowed_one_byte_more_is_not() -> None:
    probe, _ = make_engine()
    await probe.write({"k": fill(100)})
    quota = probe.dump()["footprint"]
    engine, fake = make_engine(quota=quota)
    await engine.write({"k": fill(100)})
    assert engine.dump()["footprint"] == quota
    await assert_refused(engine, fake, engine.write({"k": fill(101)}), "quota_exceeded")


@pytest.mark.req("JF-QUOTA-002", "JF-QUOTA-003")
@async_test
async def test_every_memory_writer_preflights() -> None:
    probe, _ = await small_game()
    await probe.write({"pad": fill(100)})
    quota = probe.dump()["footprint"]
    engine, fake = await small_game(quota)
    await engine.write({"pad": fill(100)})
    assert engine.dump()["footprint"] == quota  # now every growing change is over quota
    ops = [
        engine.record_round("i", fill(50)),
        engine.intervene("i", fill(50), 50),
        engine.record_scene_exchange("s1", "u", fill(50)),
        engine.publish_scene("s1", fill(50), "e"),
        engine.start_scene("s2"),
        engine.edit_round(1, "i", fill(50)),
    ]
    for op in ops:
        await assert_refused(engine, fake, op, "quota_exceeded")


# -- malformed arguments -----------------------------------------------------------------------
MALFORMED: dict[str, Op] = {
    "reset.str": lambda e, _: e.reset("1"),
    "reset.negative": lambda e, _: e.reset(-1),
    "reset.bool": lambda e, _: e.reset(True),
    "reset.future": lambda e, _: e.reset(3),
    "edit.zero": lambda e, _: e.edit_round(0, "i", "o"),
    "edit.missing": lambda e, _: e.edit_round(9, "i", "o"),
    "edit.float": lambda e, _: e.edit_round(1.0, "i", "o"),
    "convert.str": lambda e, _: e.convert_simple_to_live("rounds"),
    "convert.extra-member": lambda e, _: e.convert_simple_to_live(
        [{"input": "a", "output": "b", "x": 1}]
    ),
    "write.sets-not-mapping": lambda e, _: e.write([("k", 1)]),
    "write.both": lambda e, _: e.write({"k": 1}, deletes=["k"]),
    "write.nan": lambda e, _: e.write({"k": float("nan")}),
    "write.big-int": lambda e, _: e.write({"k": 2**60}),
    "write.object": lambda e, _: e.write({"k": object()}),
    "write.deletes-str": lambda e, _: e.write(deletes="gameData"),
    "write.deletes-int": lambda e, _: e.write({"k": 1}, deletes=5),
    "write.deletes-none": lambda e, _: e.write({"k": 1}, deletes=None),
}


@pytest.mark.req("JF-ERR-005", "JF-ERR-001", "JF-ERR-002")
@pytest.mark.parametrize("name", sorted(MALFORMED))
@async_test
async def test_malformed_arguments_are_invalid_input(name: str) -> None:
    engine, fake = await small_game()
    await assert_refused(engine, fake, MALFORMED[name](engine, None), "invalid_input")
