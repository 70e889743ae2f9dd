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

# (the broken drivers of conformance/examples/broken.py are held to their first failure by
# tests/conformance/test_suite_bites.py)
CASES = [
    # the stored exchange is judged before the request that carries it
    (MUTANT + "intervene_marker", ["intervene-forced"], "JF-INT-010"),
    (MUTANT + "intervene_full_output", ["intervene-forced"], "JF-INT-002"),
    # a repeated publication that appends again is JF-CAT-006 first
    (MUTANT + "republish_appends", ["scene-lifecycle"], "JF-CAT-006"),
]


SPEC_GAPS = [
    pytest.param(
        BROKEN + "duplicate_forgets_participants",
        ["duplicate-copies"],
        "JF-HIST-012",
        marks=pytest.mark.req("JF-HIST-012"),
    ),
    pytest.param(
        BROKEN + "restart_ended_scene",
        ["scene-lifecycle"],
        "JF-CAT-010",
        marks=pytest.mark.req("JF-CAT-010"),
    ),
    pytest.param(
        BROKEN + "scene_stays_created",
        ["catalyst-threshold"],
        "JF-CAT-011",
        marks=pytest.mark.req("JF-CAT-011"),
    ),
    pytest.param(
        BROKEN + "scene_epoch_zero",
        ["stale-results"],  # its scenes start after a reset and an edit: epoch 2
        "JF-CAT-012",
        marks=pytest.mark.req("JF-CAT-012"),
    ),
    pytest.param(
        BROKEN + "stale_last",
        ["outcome-precedence"],
        "JF-COMP-013",
        marks=pytest.mark.req("JF-COMP-013", "JF-COMP-011"),
    ),
    pytest.param(
        BROKEN + "convert_lenient",
        ["conversion"],
        "JF-HIST-013",
        marks=pytest.mark.req("JF-HIST-013"),
    ),
]


@pytest.mark.parametrize(("driver", "scenarios", "requirement"), CASES + SPEC_GAPS)
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
