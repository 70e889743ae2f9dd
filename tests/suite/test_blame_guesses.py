"""Issue 22 item 7: an outcome of the game stack never blames a scene requirement
(JF-CAT-009), a history operation that compresses is blamed first on JF-HIST-007, and a
stdio command gets a fresh state directory per run (R80)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from jfsm_conformance.client.driver import DriverClient
from jfsm_conformance.run.runner import Options, run
from jfsm_conformance.verify.checks import ConformanceFailure, Ledger
from jfsm_conformance.verify.verifier import Verifier


def _report_failure(scene: str | None) -> tuple[str, ...]:
    want: dict[str, Any] = {
        "outcome": "stale",
        "raw": "transport",
        "lengthBefore": 10,
        "lengthAfter": 10,
        "throughSeq": 1,
        "scene": scene,
    }
    verifier = Verifier(Ledger(), ["invalid_input"])
    with pytest.raises(ConformanceFailure) as caught:
        verifier.replies.report("generate", {"outcome": "transport"}, want)
    return caught.value.ids


def test_a_game_stack_outcome_is_not_blamed_on_scenes() -> None:
    assert _report_failure(None) == ("JF-COMP-013", "JF-COMP-011")
    assert "JF-CAT-009" in _report_failure("sc")


def test_a_conversion_that_compresses_is_blamed_on_hist_007_first(tmp_path: Path) -> None:
    options = Options(
        driver="python:jfsm_conformance.examples.broken:convert_compresses",
        scenarios=["conversion-over-threshold"],
        machines=False,
        report_dir=tmp_path,
        progress=lambda line: None,
    )
    result = run(options)
    assert result.exit_code == 1
    assert result.failures[0].ids[0] == "JF-HIST-007", result.failures[0].message


def test_a_stdio_command_gets_a_fresh_state_directory_for_the_run() -> None:
    """`{state}` in a stdio command: a new empty directory per run, the same after a
    restart, removed at the end (R80)."""
    command = f"stdio:{sys.executable} -m jfsm.cli driver --state {{state}}"
    client = DriverClient(command)
    try:
        state = Path(client.transport.state)
        assert state.is_dir() and not any(state.iterdir())
        assert str(state) in client.transport.argv
        hello = {"protocol": 1, "compressUrl": "http://127.0.0.1:9"}
        assert client.call("hello", hello).ok
        assert client.call("create_game", {"game": "g"}).ok
        client.restart()
        assert client.call("hello", hello).ok
        assert client.call("dump", {"game": "g"}).ok  # the same directory after a restart
        other = DriverClient(command)
        try:
            assert other.transport.state != client.transport.state
        finally:
            other.close()
    finally:
        client.close()
    assert not state.exists()


def test_machines_do_not_shrink_after_a_scenario_failed(tmp_path: Path) -> None:
    """A deterministic scenario already named the cause: the machines' failures are kept
    unshrunk, and their report says so (R80)."""
    options = Options(
        driver="python:jfsm_conformance.examples.broken:drop_suffix",
        scenarios=["suffix-survives"],
        shrink=True,
        seed=1,
        report_dir=tmp_path,
        progress=lambda line: None,
    )
    result = run(options)
    assert result.exit_code == 1
    first, *machines = result.failures
    assert first.source == "scenario suffix-survives"
    assert machines and all("not shrunk" in f.message for f in machines)
