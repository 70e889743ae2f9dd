"""Mutation testing of the conformance suite: every mutant of the reference engine in
`jfsm_conformance/examples/mutants/` differs from it in one plausible way, and the suite must
fail it with a requirement ID that names that way.

Each mutant runs only the scenarios that reach its mutation (no state machines), so the
whole file stays within a few minutes; `test_every_mutant_is_tested` keeps the table and the
module in step.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jfsm_conformance.examples.mutants import MUTANTS
from jfsm_conformance.run.runner import Options, run

DRIVER = "python:jfsm_conformance.examples.mutants:"

# mutant -> (scenarios that reach it, requirement IDs of which at least one must fail)
KILLS: dict[str, tuple[list[str], set[str]]] = {
    "threshold_inclusive": (["threshold-boundary"], {"JF-COMP-001"}),
    "summary_only_due": (["summary-alone"], {"JF-COMP-001"}),
    "keep_represented": (["threshold-boundary"], {"JF-COMP-005", "JF-ATOM-003"}),
    "delete_too_few": (["threshold-boundary"], {"JF-COMP-005", "JF-ATOM-003"}),
    "delete_too_many": (["suffix-survives"], {"JF-COMP-005", "JF-ATOM-003"}),
    "publication_in_two_commits": (["kill-mid-publication"], {"JF-ATOM-008"}),
    "summary_trimmed": (["threshold-boundary"], {"JF-TEXT-002", "JF-COMP-004"}),
    "call_id_is_idempotency_key": (["threshold-boundary"], {"JF-COMP-004", "JF-STORE-002"}),
    "no_call_id": (["threshold-boundary"], {"JF-COMP-004", "JF-STORE-002"}),
    "stale_published": (["stale-results"], {"JF-COMP-011"}),
    "refusal_published": (["failure-outcomes"], {"JF-COMP-009"}),
    "submit_without_summary": (["intervene-forced"], {"JF-CALL-003"}),
    "chars_in_utf8": (["threshold-boundary"], {"JF-CALL-003", "JF-TEXT-003"}),
    "model_in_body": (["threshold-boundary"], {"JF-CALL-010"}),
    "beneficiaries_unsorted": (["threshold-boundary"], {"JF-CALL-009"}),
    "bots_pay": (["threshold-boundary"], {"JF-CALL-009"}),
    "retry_refusal": (["intervene-retry"], {"JF-CALL-007"}),
    "change_log_unsorted": (["store-rules"], {"JF-QUOTA-006"}),
    "telemetry_no_key": (["threshold-boundary"], {"JF-CALL-011", "DRIVER-PROTOCOL"}),
    "telemetry_with_summary": (["threshold-boundary"], {"JF-CALL-012"}),
    "pending_not_retryable": (["intervene-retry"], {"JF-INT-008"}),
    "generate_hides_forced": (["intervene-retry"], {"JF-COMP-014"}),
    "intervene_marker": (["intervene-forced"], {"JF-INT-010", "JF-INT-002", "JF-TEXT-004"}),
    "intervene_full_output": (["intervene-forced"], {"JF-INT-009", "JF-INT-002"}),
    "history_compresses": (["history-rebuild"], {"JF-HIST-007"}),
    "forced_only_above_threshold": (["intervene-forced"], {"JF-INT-004"}),
    "no_retry_before_scene": (["intervene-retry"], {"JF-INT-007"}),
    "outcome_swapped": (["scene-lifecycle"], {"JF-CAT-003"}),
    "cancel_adds_chunk": (["scene-lifecycle"], {"JF-CAT-007"}),
    "republish_appends": (["scene-lifecycle"], {"JF-CAT-006", "JF-CAT-003", "JF-CAT-004"}),
    "rebuild_outcome_first": (["history-rebuild"], {"JF-HIST-003", "JF-HIST-010"}),
    "duplicate_copies_change_log": (["history-rebuild"], {"JF-HIST-008"}),
    "lock_across_await": (["suffix-survives"], {"JF-CONC-002"}),
    "publication_skips_quota": (["quota"], {"JF-COMP-010", "JF-QUOTA-002", "JF-QUOTA-003"}),
    "quota_on_pre_state": (["quota"], {"JF-QUOTA-002", "JF-QUOTA-001", "JF-ATOM-002"}),
}


def test_every_mutant_is_tested() -> None:
    assert set(KILLS) == set(MUTANTS)
    assert len(MUTANTS) >= 15


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(KILLS))
def test_suite_kills_mutant(tmp_path: Path, name: str) -> None:
    scenarios, expected = KILLS[name]
    result = run(
        Options(
            driver=DRIVER + name,
            scenarios=scenarios,
            machines=False,
            report_dir=tmp_path,
            progress=lambda line: None,
        )
    )
    assert result.harness_error is None
    failing = {v["id"] for v in result.verdicts if v["verdict"] == "fail"}
    assert result.exit_code == 1, f"mutant {name} ({MUTANTS[name]}) survived"
    first = set(result.failures[0].ids) if result.failures else set()  # first reported
    assert first & expected, (
        f"mutant {name} ({MUTANTS[name]}) was first blamed on {sorted(first)} "
        f"(failing: {sorted(failing)}), not on any of {sorted(expected)}: "
        + "; ".join(f.message.splitlines()[0][:200] for f in result.failures)
    )
