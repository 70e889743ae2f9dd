"""A fault is reported first under the requirement it violates (issue 14, item 3).

The example broken drivers (`conformance/examples/broken.py`) and the mutants whose fault
used to surface first under a neighbouring rule (the request text rather than the stored
intervene exchange, the reply rather than the repeated publication) must each have their
own requirement in the *first* failure the run reports, not merely somewhere in the list.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.runner import Options, run

BROKEN = "python:conformance.examples.broken:"
MUTANT = "python:conformance.examples.mutants:"

CASES = [
    (BROKEN + "drop_suffix", ["suffix-survives"], "JF-COMP-003"),
    (BROKEN + "leak_scene", ["catalyst-threshold"], "JF-CAT-008"),
    (BROKEN + "utf16_counts", ["threshold-boundary"], "JF-TEXT-003"),
    (BROKEN + "spectators_pay", ["threshold-boundary"], "JF-CALL-009"),
    (BROKEN + "republish_writes", ["scene-lifecycle"], "JF-CAT-006"),
    # the stored exchange is judged before the request that carries it
    (MUTANT + "intervene_marker", ["intervene-forced"], "JF-INT-010"),
    (MUTANT + "intervene_full_output", ["intervene-forced"], "JF-INT-002"),
    # a repeated publication that appends again is JF-CAT-006 first
    (MUTANT + "republish_appends", ["scene-lifecycle"], "JF-CAT-006"),
]


@pytest.mark.parametrize(("driver", "scenarios", "requirement"), CASES)
def test_first_failure_names_the_violated_requirement(
    tmp_path: Path, driver: str, scenarios: list[str], requirement: str
) -> None:
    result = run(
        Options(
            driver=driver,
            scenarios=scenarios,
            machines=False,
            report_dir=tmp_path,
            progress=lambda line: None,
        )
    )
    assert result.harness_error is None
    assert result.failures, f"{driver} survived {scenarios}"
    first = result.failures[0]
    assert requirement in first.ids, (
        f"{driver}: first failure blamed {first.ids}, not {requirement}: {first.message[:300]}"
    )
