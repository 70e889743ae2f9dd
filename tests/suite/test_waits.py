"""Bounded waits on compress.v2 (JF-CALL-006, JF-CALL-013, JF-CALL-014): the reference
passes under the short deadline it accepts in hello, and a driver that lacks one bound
fails under that bound's requirement."""

from __future__ import annotations

from pathlib import Path

import pytest
from suite_helpers import run_scenarios

from jfsm_conformance.probes import waits
from jfsm_conformance.run.runner import replay

REFERENCE = "python:jfsm_conformance.examples.reference:durable_without_backoff"
BROKEN = "python:jfsm_conformance.examples.waits:"
SCENARIOS = ["bounded-deadline", "bounded-size", "bounded-identifiers"]


def test_bounds_come_from_the_spec() -> None:
    b = waits.bounds()
    assert b["response_bytes_max"] == 8 * 1024 * 1024
    assert 0 < waits.TEST_DEADLINE < b["attempt_deadline_seconds_max"]
    assert any(c["reply"].get("bytes") == b["response_bytes_max"] + 1 for c in waits.cases())
    assert waits.HOSTILE_FOR > waits.TEST_DEADLINE + waits.SLACK  # a fault shows as one


@pytest.mark.slow
def test_reference_passes_every_bounded_wait(tmp_path: Path) -> None:
    result = run_scenarios(tmp_path, REFERENCE, SCENARIOS)
    assert result.exit_code == 0, [f.message for f in result.failures]
    verdicts = {v["id"]: v["verdict"] for v in result.verdicts}
    for rid in ("JF-CALL-006", "JF-CALL-013", "JF-CALL-014"):
        assert verdicts[rid] == "pass", rid


@pytest.mark.slow
@pytest.mark.parametrize(
    ("factory", "scenario", "requirement"),
    [
        ("no_deadline", "bounded-deadline", "JF-CALL-014"),
        ("no_size_cap", "bounded-size", "JF-CALL-006"),
        ("trusts_identifiers", "bounded-identifiers", "JF-CALL-013"),
    ],
)
def test_a_driver_lacking_a_bound_fails_it(
    tmp_path: Path, factory: str, scenario: str, requirement: str
) -> None:
    result = run_scenarios(tmp_path, BROKEN + factory, [scenario])
    assert result.exit_code == 1
    first = result.failures[0]
    assert first.ids[0] == requirement, first.message
    assert replay(first.trace, progress=lambda line: None) == 1
