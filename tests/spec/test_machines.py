"""The machine tables: well-formed, loaded only from `spec/`, total over state x event.

Like h2's sweep, every (state, event) pair of every machine is tried with every combination
of guard values: a pair with no row, or whose rows' guards all fail, must raise
`InvalidTransition` and leave the state unchanged; otherwise the first row whose guard holds
must fire and move to its destination.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jfsm.errors import InvalidTransition
from jfsm.machines import (
    ENGINE_MACHINES,
    MACHINE_NAMES,
    TYPED,
    SceneEvent,
    SceneState,
    StateMachine,
    effect_names,
    handlers,
    table,
)
from jfsm.spec import load_json, spec_dir


@pytest.mark.parametrize("name", MACHINE_NAMES)
def test_table_matches_schema(name: str) -> None:
    schema = load_json("schemas/machine.schema.json")
    jsonschema.validate(load_json(f"machines/{name}.json"), schema)


@pytest.mark.parametrize("name", MACHINE_NAMES)
def test_no_state_helpers(name: str) -> None:
    machine = StateMachine(name, {g: (lambda: True) for g in table(name).guards})
    helpers = [a for a in dir(machine) if a.startswith("to_")]
    assert helpers == []
    for state in table(name).states:
        assert not hasattr(machine, f"to_{state}")


def _expected(name: str, state: str, event: str, guards: dict[str, bool]) -> str | None:
    for row in table(name).rows(state, event):
        if row.guard is not None and not guards[row.guard]:
            continue
        if row.unless is not None and guards[row.unless]:
            continue
        return row.dest
    return None


@st.composite
def sweep_case(draw: st.DrawFn) -> tuple[str, str, str, dict[str, bool]]:
    name = draw(st.sampled_from(MACHINE_NAMES))
    t = table(name)
    state = draw(st.sampled_from(t.states))
    event = draw(st.sampled_from(t.events))
    guards = {g: draw(st.booleans()) for g in t.guards}
    return name, state, event, guards


@pytest.mark.req("JF-ERR-004", "JF-ERR-002")
@given(sweep_case())
def test_sweep_state_by_event(case: tuple[str, str, str, dict[str, bool]]) -> None:
    name, state, event, guards = case
    machine = StateMachine(name, {g: (lambda v=v: v) for g, v in guards.items()}, state=state)
    expected = _expected(name, state, event, guards)
    if expected is None:
        with pytest.raises(InvalidTransition) as info:
            machine.fire(event)
        assert machine.current == state
        assert info.value.state == state
        assert info.value.code == "invalid_transition"
    else:
        row = machine.fire(event)
        assert machine.current == expected == row.dest


@pytest.mark.parametrize("name", MACHINE_NAMES)
def test_exhaustive_sweep(name: str) -> None:
    """The same property, exhaustively: every state, event and guard valuation."""
    t = table(name)
    tried = 0
    for state, event in itertools.product(t.states, t.events):
        for values in itertools.product([False, True], repeat=len(t.guards)):
            guards = dict(zip(t.guards, values, strict=True))
            machine = StateMachine(
                name, {g: (lambda v=v: v) for g, v in guards.items()}, state=state
            )
            expected = _expected(name, state, event, guards)
            if expected is None:
                with pytest.raises(InvalidTransition):
                    machine.fire(event)
                assert machine.current == state
            else:
                assert machine.fire(event).dest == expected == machine.current
            tried += 1
    assert tried == len(t.states) * len(t.events) * 2 ** len(t.guards)


def test_unknown_event_is_invalid_transition() -> None:
    machine = StateMachine("catalyst_scene")
    with pytest.raises(InvalidTransition):
        machine.fire("teleport")
    assert machine.current == "created"


@pytest.mark.parametrize("name", MACHINE_NAMES)
def test_terminal_states_are_final(name: str) -> None:
    t = table(name)
    for row in t.transitions:
        if row.source in t.terminal:
            assert row.dest == row.source


@pytest.mark.parametrize("name", MACHINE_NAMES)
def test_every_state_reachable(name: str) -> None:
    t = table(name)
    seen = {t.initial}
    frontier = [t.initial]
    while frontier:
        state = frontier.pop()
        for row in t.transitions:
            if row.source == state and row.dest not in seen:
                seen.add(row.dest)
                frontier.append(row.dest)
    assert seen == set(t.states)


def test_engine_loads_tables_from_spec(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Change a table in a copy of the spec: the loaded machine changes with it."""
    import shutil

    from jfsm import machines, spec

    copy = tmp_path / "spec"
    shutil.copytree(spec_dir(), copy)
    path = copy / "machines" / "catalyst_scene.json"
    data = json.loads(path.read_text("utf-8"))
    data["transitions"] = [r for r in data["transitions"] if r["event"] != "cancel"]
    path.write_text(json.dumps(data), "utf-8")
    monkeypatch.setenv("JFSM_SPEC_DIR", str(copy))
    spec.spec_dir.cache_clear()
    machines.table.cache_clear()
    try:
        machine = StateMachine("catalyst_scene")
        with pytest.raises(InvalidTransition):
            machine.fire("cancel")
    finally:
        monkeypatch.delenv("JFSM_SPEC_DIR")
        spec.spec_dir.cache_clear()
        machines.table.cache_clear()


# -- machines that act (decision R31) ----------------------------------------------------------


def _owners() -> dict[str, type]:
    from jfsm.forced import ForcedCompression
    from jfsm.scene import Scene
    from jfsm.stack_compression import StackCompression

    return {
        "stack_compression": StackCompression,
        "catalyst_scene": Scene,
        "intervene_retry": ForcedCompression,
    }


def test_engine_machines_have_owners() -> None:
    assert set(_owners()) == set(ENGINE_MACHINES) == set(TYPED)
    assert set(ENGINE_MACHINES) <= set(MACHINE_NAMES)


@pytest.mark.parametrize("name", ENGINE_MACHINES)
def test_typed_states_and_events_match_the_table(name: str) -> None:
    states, events = TYPED[name]
    assert [s.value for s in states] == list(table(name).states)
    assert [e.value for e in events] == list(table(name).events)


@pytest.mark.parametrize("name", ENGINE_MACHINES)
def test_every_effect_has_one_handler_and_every_handler_an_effect(name: str) -> None:
    """The table says what happens, the owner holds the code: `on_<effect>` per effect."""
    owner = _owners()[name]
    assert effect_names(owner) == set(table(name).effects)
    used = {row.effect for row in table(name).transitions}
    assert used == set(table(name).effects), "an effect no row names"


def test_a_changed_table_is_refused_by_its_typed_enums(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import shutil

    from jfsm import machines, spec

    copy = tmp_path / "spec"
    shutil.copytree(spec_dir(), copy)
    path = copy / "machines" / "catalyst_scene.json"
    data = json.loads(path.read_text("utf-8"))
    data["states"].append({"name": "paused", "description": "not in the enum"})
    data["transitions"].append(
        {"source": "running", "event": "record", "dest": "paused", "effect": "append_chunk"}
    )
    path.write_text(json.dumps(data), "utf-8")
    monkeypatch.setenv("JFSM_SPEC_DIR", str(copy))
    spec.spec_dir.cache_clear()
    machines.table.cache_clear()
    try:
        with pytest.raises(ValueError, match="typed states"):
            table("catalyst_scene")
    finally:
        monkeypatch.delenv("JFSM_SPEC_DIR")
        spec.spec_dir.cache_clear()
        machines.table.cache_clear()


def test_effect_handlers_must_match_the_table() -> None:
    effects = {e: (lambda *a, e=e: e) for e in table("catalyst_scene").effects}
    machine = StateMachine("catalyst_scene", effects=effects)
    assert machine.act(SceneEvent.RECORD, "u", "a") == "append_chunk"
    assert machine.current == SceneState.RUNNING
    missing = dict(effects)
    del missing["return_archive"]
    with pytest.raises(ValueError, match="return_archive"):
        StateMachine("catalyst_scene", effects=missing)
    with pytest.raises(ValueError, match="teleport"):
        StateMachine("catalyst_scene", effects={**effects, "teleport": lambda: None})
    with pytest.raises(ValueError, match="no effect handlers"):
        StateMachine("catalyst_scene").act(SceneEvent.RECORD)


def test_act_restores_the_state_when_the_handler_fails() -> None:
    def fail(*args: object) -> None:
        raise RuntimeError("commit failed")

    effects = {e: fail for e in table("catalyst_scene").effects}
    machine = StateMachine("catalyst_scene", effects=effects)
    with pytest.raises(RuntimeError):
        machine.act(SceneEvent.PUBLISH, "closing", "meanwhile")
    assert machine.current == SceneState.CREATED
    ok = {e: (lambda *a: None) for e in table("catalyst_scene").effects}
    machine = StateMachine("catalyst_scene", effects=ok)
    with pytest.raises(RuntimeError), machine.acting(SceneEvent.CANCEL):
        raise RuntimeError("body failed")
    assert machine.current == SceneState.CREATED


def test_handlers_bind_the_most_derived_override() -> None:
    class Base:
        def on_x(self) -> str:
            return "base"

    class Derived(Base):
        def on_x(self) -> str:
            return "derived"

        def not_a_handler(self) -> None:
            return None

    assert effect_names(Derived) == {"x"}
    assert handlers(Derived())["x"]() == "derived"


def test_no_engine_module_branches_on_an_effect_name() -> None:
    """Only `machines.py` reads a row's effect (to call its handler)."""
    import jfsm

    root = Path(jfsm.__file__).parent
    offenders = [
        path.name
        for path in sorted(root.rglob("*.py"))
        if path.name != "machines.py" and ".effect" in path.read_text("utf-8")
    ]
    assert offenders == []
