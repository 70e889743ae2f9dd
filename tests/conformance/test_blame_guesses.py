"""Blame fixes of issue 22 item 7: an outcome of the game stack never blames a scene
requirement (JF-CAT-009), and a history operation that compresses is blamed first on
JF-HIST-007."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jfsm_conformance.checks import ConformanceFailure, Ledger
from jfsm_conformance.runner import Options, run
from jfsm_conformance.verify import Verifier


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
        verifier.report("generate", {"outcome": "transport"}, want)
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
