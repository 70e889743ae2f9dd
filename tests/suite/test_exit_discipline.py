"""Exit discipline (issue 22): a fault of the implementation ends in exit 1, never 2.

A held compression request that the fake rejected, or an operation that answered without
sending one, is a requirement failure, never a 30 s wait ending in a harness error; and a
request held for a failed step is released by recovery, so later scenarios never wait on it.
The driver here is the durable reference engine over stdio whose compressor sends bots as
beneficiaries (JF-CALL-009): every compression request it sends is rejected by the fake.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from suite_helpers import run_scenarios

from benchmarks.exit_discipline import drivers

DRIVER = """
import asyncio, sys
from jfsm.driver import ReferenceDriver, serve_stdio
from jfsm_conformance.examples.mutants.compression import _BotsPay
asyncio.run(serve_stdio(ReferenceDriver(sys.argv[1], compressor_factory=_BotsPay)))
"""


def test_rejected_held_requests_are_failures_and_recovery_releases_every_hold(
    tmp_path: Path,
) -> None:
    script = tmp_path / "bots_pay_driver.py"
    script.write_text(DRIVER, encoding="utf-8")
    state = tmp_path / "state"
    state.mkdir()
    # a held intervene fails its request check; the kills come after it
    scenarios = ["intervene-in-flight", "concurrent-stacks", "kill-mid-publication"]
    result = run_scenarios(
        tmp_path / "report", f"stdio:{sys.executable} {script} {state}", scenarios
    )
    assert result.harness_error is None, result.harness_error
    assert result.exit_code == 1
    assert {v["id"] for v in result.verdicts if v["verdict"] == "fail"} == {"JF-CALL-009"}
    sources = {f.source for f in result.failures}
    assert "scenario kill-mid-publication" in sources  # judged, not waited on for 30 s


@pytest.mark.release
def test_every_example_broken_driver_exits_1(tmp_path: Path) -> None:
    """Every example broken driver's run ends in exit 1, none in 2: a complete, non-partial
    run with a first failure. A release sweep (`uv run pytest -m release`, about 3 minutes
    on 2 cores; CI runs the rejected-hold case above) over the deterministic scenarios,
    where every one of them is caught, without the bounded-wait ones (each waits out a
    deadline; their own broken drivers are judged in `test_waits.py`) and without the
    machines."""
    from jfsm_conformance.scenarios import SCENARIOS

    scenarios = [s.name for s in SCENARIOS if not s.name.startswith("bounded-")]
    specs = drivers(("broken", "flaky"))  # benchmarks/exit_discipline.py's list
    assert len(specs) >= 15
    wrong = []
    for spec in specs:
        report_dir = tmp_path / spec.rsplit(":", 1)[1]
        result = run_scenarios(report_dir, spec, scenarios)
        if result.exit_code != 1 or result.harness_error is not None:
            wrong.append((spec, result.exit_code, result.harness_error))
            continue
        assert result.partial is False, spec
        assert result.failures and result.failures[0].ids, spec
    assert not wrong, wrong
