"""The default run's lanes (R170): what only waits goes on beside the rest, and the report
is the one the same run gives with `parallel=False`, in the same order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jfsm_conformance.run.report import to_json
from jfsm_conformance.run.runner import Options, run

# one of each kind of lane: a scenario of the run's own session, a bounded wait on a session
# of its own, a companion process ({state}), the machines' process and the workers machine
SCENARIOS = ["threshold-boundary", "bounded-size", "hostile-state"]


def _report(tmp_path: Path, parallel: bool) -> dict[str, Any]:
    result = run(
        Options(
            scenarios=SCENARIOS,
            companions=True,
            parallel=parallel,
            report_dir=tmp_path / ("parallel" if parallel else "serial"),
            progress=lambda line: None,
        )
    )
    report = json.loads(json.dumps(to_json(result)))
    del report["durations_s"], report["driver_log"]
    # the workers machine's real processes race by design: how often it exercised each
    # rule varies from run to run, serial runs too; its verdicts are compared, not counts
    report["exercised"].pop("workers", None)
    for row in report["verdicts"]:
        if row["id"].startswith("JF-STORE-"):
            row.pop("passes", None)
    return report


@pytest.mark.slow
def test_the_parallel_run_reports_what_the_serial_run_reports(tmp_path: Path) -> None:
    parallel, serial = _report(tmp_path, True), _report(tmp_path, False)
    assert parallel["exit_code"] == 0, parallel["first_failure"]
    judged = [j["what"] for j in parallel["judges"]]
    assert "scenario bounded-size" in judged and "scenario hostile-state" in judged
    assert any(j.startswith("machine at spec") for j in judged)
    assert parallel["companions"]["over stdio (jfsm driver --state)"] == "hostile-state"
    assert "machine workers (K=2)" in judged
    # the verdicts, their order and passes, the judges' order, the counts: all the same
    assert parallel == serial
