"""A hostile state directory (JF-ERR-016): the reference driver refuses a linked or open
state directory and writes nothing through planted links; a driver that trusts its
directory fails each probe, and one started with an explicit override fails the mode probe
only."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from jfsm_conformance.probes.state import CASES, run_state_probe, state_probes
from jfsm_conformance.run.runner import Options, run
from jfsm_conformance.steps.world import World
from jfsm_conformance.verify.checks import ConformanceFailure, Ledger

REFERENCE = f"stdio:{sys.executable} -m jfsm.cli driver --state {{state}}"
TRUSTING = f"stdio:{sys.executable} -m jfsm_conformance.examples.trusting_state {{state}}"
OVERRIDDEN = REFERENCE + " --trust-state"


def _verdicts(driver: str) -> dict[str, bool]:
    """Each case of `state_probes()` run alone on `driver`: whether it passed."""
    out = {}
    world = World(driver)
    try:
        for probe in state_probes():
            ledger = Ledger()
            try:
                assert run_state_probe(world, ledger, probe) is True
                out[probe["case"]] = True
            except ConformanceFailure as exc:
                assert exc.ids == ("JF-ERR-016",), exc
                out[probe["case"]] = False
    finally:
        world.close()
    return out


@pytest.mark.slow
@pytest.mark.req("JF-ERR-016")
def test_the_reference_passes_every_probe() -> None:
    assert _verdicts(REFERENCE) == dict.fromkeys(CASES, True)


@pytest.mark.req("JF-ERR-016")
def test_a_trusting_driver_fails_every_probe() -> None:
    assert _verdicts(TRUSTING) == dict.fromkeys(CASES, False)


@pytest.mark.slow
@pytest.mark.req("JF-ERR-016")
def test_an_override_in_the_command_fails_the_mode_probe_only() -> None:
    """`--trust-state` is the user's explicit override: the command then does not refuse an
    open directory, which the suite reports (it judges the command it was given)."""
    assert _verdicts(OVERRIDDEN) == dict(dict.fromkeys(CASES, True), **{"open-root": False})


@pytest.mark.req("JF-ERR-016")
def test_the_scenario_fails_the_trusting_driver_and_skips_without_state(tmp_path: Path) -> None:
    result = run(
        Options(
            driver=TRUSTING,
            scenarios=["hostile-state"],
            machines=False,
            report_dir=tmp_path / "a",
            progress=lambda line: None,
        )
    )
    assert result.exit_code == 1
    assert result.failures[0].ids == ("JF-ERR-016",)
    result = run(
        Options(
            driver=f"stdio:{sys.executable} -m jfsm.cli driver",
            scenarios=["hostile-state"],
            machines=False,
            report_dir=tmp_path / "b",
            progress=lambda line: None,
        )
    )
    assert "{state}" in result.skipped["hostile-state"]
    verdict = {v["id"]: v for v in result.verdicts}["JF-ERR-016"]
    assert verdict["verdict"] == "not covered"
