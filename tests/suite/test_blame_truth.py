"""Blame that is true (issue 31 item 3, R148; item 5, R145): a failure names the rule it
breaks, and no wait requirement is listed for what has nothing to do with waiting."""

from __future__ import annotations

from pathlib import Path

import pytest
from suite_helpers import run_scenarios

from jfsm_conformance.run.model import RunResult

BROKEN = "python:jfsm_conformance.examples.broken:"
MUTANT = "python:jfsm_conformance.examples.mutants:"
WAITS = ("JF-CALL-006", "JF-CALL-013", "JF-CALL-014")


def _verdicts(result: RunResult) -> dict[str, str]:
    return {v["id"]: v["verdict"] for v in result.verdicts}


@pytest.mark.req("JF-CALL-009")
def test_a_rejected_request_in_a_bounded_wait_is_not_a_wait_failure(tmp_path: Path) -> None:
    """Spectators sent as beneficiaries: the fake rejects the request's content. The wait
    scenarios fail JF-CALL-009 alone (before: JF-CALL-006, -013 and -014 first)."""
    scenarios = ["bounded-deadline", "bounded-size", "bounded-identifiers"]
    result = run_scenarios(tmp_path, BROKEN + "spectators_pay", scenarios)
    assert result.exit_code == 1 and result.harness_error is None
    assert [f.source for f in result.failures] == [f"scenario {s}" for s in scenarios]
    for failure in result.failures:
        assert failure.ids == ("JF-CALL-009",), failure.ids
    verdicts = _verdicts(result)
    assert verdicts["JF-CALL-009"] == "fail"
    assert all(verdicts[rid] == "not covered" for rid in WAITS), verdicts


@pytest.mark.req("JF-COMP-009", "JF-COMP-008")
def test_a_refusal_stored_as_the_summary_fails_memory_intact(tmp_path: Path) -> None:
    result = run_scenarios(tmp_path, MUTANT + "refusal_published", ["failure-outcomes"])
    assert result.exit_code == 1
    assert {"JF-COMP-008", "JF-COMP-009"} <= set(result.failures[0].ids)
    assert _verdicts(result)["JF-COMP-009"] == "fail"


@pytest.mark.slow
@pytest.mark.req("JF-COMP-014")
def test_a_generation_reports_the_forced_compression_it_settled(tmp_path: Path) -> None:
    """The reference names it in `forced`; a driver that leaves it out fails JF-COMP-014."""
    good = run_scenarios(
        tmp_path / "ok", "python:jfsm.driver:reference_driver", ["intervene-retry"]
    )
    assert good.exit_code == 0 and _verdicts(good)["JF-COMP-014"] == "pass"
    bad = run_scenarios(tmp_path / "bad", MUTANT + "generate_hides_forced", ["intervene-retry"])
    assert bad.exit_code == 1 and bad.failures[0].ids == ("JF-COMP-014",)
    assert "forced member" in bad.failures[0].message
