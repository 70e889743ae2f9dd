"""The store layout as data (`spec/layout.json`), checked against the reference engine the way
the machine tables are: the file is valid against its schema, every key template is built by
`jfsm.layout` and nothing else is, every record shape equals its `jfsm.records` model, and a
store the engine actually writes holds only keys of the layout with values its records accept.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jfsm.layout
import jfsm.records
from jfsm.engine import GameEngine
from jfsm.records import Participant
from jfsm.spec import constants, layout, load_json
from jfsm.stores.memory import MemoryStore
from jfsm.testing import FakeCompressor

LAYOUT = layout()
KEYS = {entry["key"]: entry for entry in LAYOUT["keys"]}
PLACEHOLDER = re.compile(r"<([a-z]+)>")

# How the reference engine builds each key template of the layout (placeholder -> value).
BUILDERS: dict[str, Callable[..., str]] = {
    "jfGameStack.meta": lambda: jfsm.layout.GAME.meta,
    "jfGameStack.summary": lambda: jfsm.layout.GAME.summary,
    "jfGameStack.chunk.<seq>": lambda seq: jfsm.layout.GAME.chunk(seq),
    "jfCatalystStack.<id>.meta": lambda id: jfsm.layout.scene_keys(id).meta,
    "jfCatalystStack.<id>.summary": lambda id: jfsm.layout.scene_keys(id).summary,
    "jfCatalystStack.<id>.chunk.<seq>": lambda id, seq: jfsm.layout.scene_keys(id).chunk(seq),
    "jfCatalystArchives": lambda: jfsm.layout.ARCHIVES,
    "jfRounds.<n>": lambda n: jfsm.layout.round_key(n),
}


def key_regex(template: str) -> re.Pattern[str]:
    """The full-match regex of a key template, one named group per placeholder."""
    parts = PLACEHOLDER.split(template)
    out = ""
    for index, part in enumerate(parts):
        if index % 2:
            out += f"(?P<{part}>{LAYOUT['placeholders'][part]['pattern']})"
        else:
            out += re.escape(part)
    return re.compile(out)


REGEXES = {template: key_regex(template) for template in KEYS}


def templates_matching(key: str) -> list[str]:
    return [t for t, regex in REGEXES.items() if regex.fullmatch(key)]


def record_validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(LAYOUT["records"][name])


def test_layout_matches_its_schema() -> None:
    schema = load_json("schemas/layout.schema.json")
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(LAYOUT, schema)
    for record in LAYOUT["records"].values():
        jsonschema.Draft202012Validator.check_schema(record)
    assert {entry["record"] for entry in LAYOUT["keys"]} == set(LAYOUT["records"])
    used = {p for t in KEYS for p in PLACEHOLDER.findall(t)}
    used |= {entry["map"] for entry in LAYOUT["keys"] if "map" in entry}
    assert used == set(LAYOUT["placeholders"])
    assert LAYOUT["spec_version"] == constants().spec_version


def test_every_key_is_reserved_and_origins_agree_with_the_constants() -> None:
    prefix = constants().reserved_key_prefix
    assert prefix == jfsm.layout.RESERVED_PREFIX
    assert all(template.startswith(prefix) for template in KEYS)
    chunk = LAYOUT["records"]["Chunk"]["properties"]["origin"]["enum"]
    assert chunk == list(constants().chunk_origins)


def test_the_engine_builds_exactly_the_layouts_keys() -> None:
    assert set(BUILDERS) == set(KEYS)
    samples = {"seq": 7, "n": 12, "id": "duel_1-B"}
    for template, build in BUILDERS.items():
        names = PLACEHOLDER.findall(template)
        built = build(*(samples[n] for n in names))
        expected = PLACEHOLDER.sub(lambda m: str(samples[m.group(1)]), template)
        assert built == expected
        assert templates_matching(built) == [template]


def test_the_engine_docstring_table_agrees() -> None:
    """`jfsm.layout`'s docstring draws the same table (it is what a reader of the code sees)."""
    doc = inspect.getdoc(jfsm.layout) or ""
    block = doc.split("```", 2)[1]
    rows = [line.split(None, 1) for line in block.strip().splitlines()]
    drawn = {key: record.strip() for key, record in rows}
    expected = {
        entry["key"]: (
            f"{{<{entry['map']}>: {entry['record']}}}" if "map" in entry else entry["record"]
        )
        for entry in LAYOUT["keys"]
    }
    assert drawn == expected


@settings(max_examples=60, deadline=None)
@given(
    seq=st.integers(min_value=1, max_value=10**12),
    scene=st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True),
)
def test_each_built_key_matches_one_template(seq: int, scene: str) -> None:
    for template, build in BUILDERS.items():
        values = {"seq": seq, "n": seq, "id": scene}
        key = build(*(values[n] for n in PLACEHOLDER.findall(template)))
        assert templates_matching(key) == [template]


@settings(max_examples=60, deadline=None)
@given(scene=st.text(min_size=0, max_size=70))
def test_scene_id_placeholder_agrees_with_the_engine(scene: str) -> None:
    pattern = re.compile(LAYOUT["placeholders"]["id"]["pattern"])
    try:
        jfsm.layout.validate_scene_id(scene)
        accepted = True
    except jfsm.errors.InvalidInput:
        accepted = False
    assert accepted == bool(pattern.fullmatch(scene))


def _pydantic_members(model: type[Any]) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """(member -> normalized schema, members always stored) of a records model."""
    schema = model.model_json_schema(by_alias=True)
    members: dict[str, dict[str, Any]] = {}
    always = set()
    for name, sub in schema["properties"].items():
        options = sub.get("anyOf")
        if options is not None:
            inner = next(o for o in options if o.get("type") != "null")
            assert [o for o in options if o.get("type") == "null"], name
        else:
            inner = sub
            always.add(name)
        members[name] = {k: v for k, v in inner.items() if k != "title"}
        if "default" in sub and sub["default"] is not None:
            members[name]["default"] = sub["default"]
    return members, always


@pytest.mark.parametrize("name", sorted(LAYOUT["records"]))
def test_record_shape_equals_the_engine_model(name: str) -> None:
    record = LAYOUT["records"][name]
    model = getattr(jfsm.records, name)
    members, always = _pydantic_members(model)
    documented = {
        member: {k: v for k, v in sub.items() if k != "description"}
        for member, sub in record["properties"].items()
    }
    assert documented == members
    assert set(record["required"]) == always
    assert model.model_json_schema()["additionalProperties"] is False


def _engine_stores() -> list[dict[str, Any]]:
    """Every store state of a short run that writes every kind of reserved key."""

    async def run() -> list[dict[str, Any]]:
        engine = GameEngine(
            MemoryStore(),
            FakeCompressor(),
            game_id="layout",
            participants=[Participant(id="p1", human=True)],
            thresholds={"game": 400, "catalyst": 300},
        )
        stores = []

        def snap() -> None:
            stores.append(engine.dump()["store"])

        for n in range(1, 4):
            await engine.record_round(f"input {n} " * 10, f"output {n} " * 20)
            snap()
        await engine.before_generation()
        snap()
        await engine.start_scene("duel")
        snap()
        for i in range(3):
            await engine.record_scene_exchange("duel", f"scene user {i} " * 10, "reply " * 20)
        snap()
        await engine.before_generation("duel")
        snap()
        await engine.publish_scene("duel", closing_summary="won", meanwhile_event="meanwhile")
        snap()
        await engine.start_scene("ambush")
        await engine.cancel_scene("ambush")
        snap()
        await engine.intervene("attack", "the attack begins and then", revealed=10)
        snap()
        await engine.close()
        return stores

    return asyncio.run(run())


@pytest.mark.req(
    "JF-STORE-001", "JF-STORE-002", "JF-STORE-003", "JF-STORE-005", "JF-STORE-006", "JF-STORE-007"
)
def test_the_engine_writes_only_layout_keys_with_valid_records() -> None:
    prefix = constants().reserved_key_prefix
    seen: set[str] = set()
    for store in _engine_stores():
        for key, value in store.items():
            if not key.startswith(prefix):
                continue
            found = templates_matching(key)
            assert len(found) == 1, key
            entry = KEYS[found[0]]
            seen.add(found[0])
            validator = record_validator(entry["record"])
            if "map" in entry:
                pattern = re.compile(LAYOUT["placeholders"][entry["map"]]["pattern"])
                assert all(pattern.fullmatch(k) for k in value), key
                for item in value.values():
                    validator.validate(item)
            else:
                validator.validate(value)
            numbers = REGEXES[found[0]].fullmatch(key).groupdict()  # type: ignore[union-attr]
            if "seq" in numbers:
                assert value["seq"] == int(numbers["seq"])
            if "n" in numbers:
                assert value["n"] == int(numbers["n"])
    assert seen == set(KEYS), set(KEYS) - seen


def test_record_schemas_refuse_what_the_engine_refuses() -> None:
    chunk = {"seq": 1, "user": "u", "assistant": "a", "origin": "round", "roundId": 1}
    validator = record_validator("Chunk")
    validator.validate(chunk)
    jfsm.records.parse_record(jfsm.records.Chunk, chunk)
    for bad in (
        {**chunk, "extra": 1},
        {**chunk, "origin": "other"},
        {**chunk, "seq": 0},
        {k: v for k, v in chunk.items() if k != "user"},
    ):
        assert not validator.is_valid(bad)
        with pytest.raises(jfsm.errors.InvalidInput):
            jfsm.records.parse_record(jfsm.records.Chunk, bad)
