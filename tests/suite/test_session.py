"""The step vocabulary: `Session`'s steps are declared once (`STEPS`), recorded only by
those names, and a trace naming anything else is refused by `replay` before a driver
starts."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from jfsm_conformance.record.traces import TRACE_FORMAT
from jfsm_conformance.run.runner import replay
from jfsm_conformance.steps.session import STEPS, Session

# public methods of `Session` that manage the session rather than act on the driver
NOT_STEPS = {"begin_sequence", "record", "close", "recover", "can_hold"}


def test_steps_are_exactly_the_sessions_step_methods() -> None:
    public = {
        name
        for name, member in inspect.getmembers(Session, inspect.isfunction)
        if not name.startswith("_")
    }
    assert public - NOT_STEPS == STEPS
    assert len(STEPS) == 27  # 25 at the reshape, and hostile and bounded_wait (issue 22)


def test_record_refuses_a_name_outside_the_vocabulary() -> None:
    session = SimpleNamespace(_steps=[])
    with pytest.raises(ValueError, match="teleport"):
        Session.record(session, "teleport", game="g")  # type: ignore[arg-type]
    assert session._steps == []
    Session.record(session, "new_game", game="g")  # type: ignore[arg-type]
    assert session._steps == [{"step": "new_game", "args": {"game": "g"}}]


def test_replay_refuses_a_trace_naming_an_unknown_step(tmp_path: Path) -> None:
    trace = {
        "format": TRACE_FORMAT,
        "driver": "stdio:this-command-is-never-started",
        "steps": [{"step": "new_game", "args": {"game": "g"}}, {"step": "teleport", "args": {}}],
        "failure": {"ids": ["JF-HIST-009"], "message": "recorded"},
    }
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace), encoding="utf-8")
    said: list[str] = []
    assert replay(path, progress=said.append) == 2
    assert any("teleport" in line for line in said), said
