"""A run says exactly what it judged (issue 31 items 1 and 3, issue 35 item 3; R142, R143,
R147): a `--select` runs every scenario and machine that judges a selected requirement, the
workers machine included; a selection that judges nothing never exits 0; every requirement
left not covered says what really kept it unjudged, in a few words on the terminal; and a
run that could not start says why before anything else."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from jfsm_conformance.run import runner
from jfsm_conformance.run.cli import main
from jfsm_conformance.run.report import to_junit, verdict_lines
from jfsm_conformance.run.runner import Options, Profile, RunResult, run, select_error

REFERENCE = "python:jfsm.driver:reference_driver"
OWNERS = f"{sys.executable} -m jfsm_conformance.examples.broken_owners"
FLAWS = [
    ("no_token_check", "JF-STORE-013"),
    ("takeover_same_token", "JF-STORE-012"),
    ("lease_unchecked", "JF-STORE-011"),
    ("fenced_half_write", "JF-STORE-013"),
]


def _run(tmp_path: Path, driver: str, **kw: object) -> RunResult:
    return run(
        Options(driver=driver, report_dir=tmp_path, progress=lambda line: None, **kw)  # type: ignore[arg-type]
    )


@pytest.mark.slow
@pytest.mark.req("JF-STORE-011", "JF-STORE-012", "JF-STORE-013")
@pytest.mark.parametrize(("flaw", "rid"), FLAWS)
def test_a_selection_runs_the_workers_machine(tmp_path: Path, flaw: str, rid: str) -> None:
    """`--select JF-STORE-01` names only what the workers machine judges: it runs, and each
    broken owner fails under its ID (before: "not covered", exit 0)."""
    result = _run(tmp_path, f"stdio:{OWNERS} {flaw} --state {{state}}", select="JF-STORE-01")
    assert result.harness_error is None, result.harness_error
    assert result.exit_code == 1
    failed = {v["id"] for v in result.verdicts if v["verdict"] == "fail"}
    assert rid in failed, [(v["id"], v["verdict"], v.get("reason")) for v in result.verdicts]
    judges = {j.what: j.status for j in result.judges}
    assert judges == {"machine workers (K=2)": "fail"}


@pytest.mark.slow
@pytest.mark.req("JF-STORE-012")
def test_select_store_with_workers_fails_a_broken_owner_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's command as typed: `--select JF-STORE --workers 2` (every broken owner, in
    the release sweep `tests/suite/test_exit_discipline.py`)."""
    driver = f"stdio:{OWNERS} takeover_same_token --state {{state}}"
    code = main(
        [
            "--select",
            "JF-STORE",
            "--workers",
            "2",
            "--report-dir",
            str(tmp_path),
            "--driver",
            driver,
        ]
    )
    out = capsys.readouterr().out
    assert code == 1, out[-3000:]
    assert "FAIL         JF-STORE-012" in out
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    ran = {j["what"] for j in report["judges"]}
    assert {"machine at spec thresholds", "machine workers (K=2)"} <= ran, ran


def test_a_narrow_selection_runs_the_memory_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a tiny profile: what is judged here is that the machines run, not what they find
    monkeypatch.setitem(runner.PROFILES, "quick", Profile("quick", 1, 4, 1, 4))
    result = _run(tmp_path, REFERENCE, select="JF-COMP-003", profile="quick")
    assert result.exit_code == 0
    judges = {j.what: j.status for j in result.judges}
    assert judges["machine at spec thresholds"] == "pass"
    assert judges["machine at small thresholds (game 3000, catalyst 1500)"] == "pass"
    assert judges["scenario suffix-survives"] == "pass"
    assert result.exercised.get("rule"), "the machine ran its rules"


@pytest.mark.req("JF-STORE-010")
def test_a_selection_that_judges_nothing_exits_2_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every selected requirement needs a capability the driver lacks: one line says so, and
    the run is no green one (exit 2, R142)."""
    code = main(["--select", "JF-STORE-01", "--driver", REFERENCE, "--report-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 2
    assert (
        "Selected, not judged (needs capability sharedStore): JF-STORE-010, JF-STORE-011, "
        "JF-STORE-012, JF-STORE-013, JF-STORE-014"
    ) in out
    assert "JUDGED NOTHING: --select JF-STORE-01 judged nothing" in out
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["exit_code"] == 2 and "sharedStore" in report["judged_nothing"]
    result = _run(tmp_path / "again", REFERENCE, select="JF-STORE-01")
    junit = to_junit(result)
    assert 'errors="1"' in junit and 'type="JudgedNothing"' in junit  # no green CI either


def test_a_selection_of_what_the_suite_never_judges_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--select", "JF-SAFE", "--report-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "selects no requirement jfsm conformance judges" in err and "jfsm profile" in err
    assert not (tmp_path / "report.json").exists()  # nothing ran
    assert select_error("JF-SAFE,JF-COMP") is None  # a selection that judges something


def test_not_covered_says_what_really_kept_it_unjudged(tmp_path: Path) -> None:
    """A scenario that fails before it judges JF-COMP-006 is the reason, not an unrelated
    skipped scenario (before: "not exercised in this run (skipped: hostile-http)")."""
    result = _run(
        tmp_path,
        "python:jfsm_conformance.examples.broken:spectators_pay",
        scenarios=["failure-outcomes", "hostile-http", "restart"],
        machines=False,
    )
    assert result.exit_code == 1
    rows = {v["id"]: v for v in result.verdicts}
    for rid in ("JF-COMP-006", "JF-COMP-007"):
        assert rows[rid]["verdict"] == "not covered"
        assert rows[rid]["why"] == "not reached: scenario failure-outcomes failed first"
        assert "hostile-http" not in rows[rid]["reason"]
    assert rows["JF-ERR-011"]["why"] == "needs an HTTP driver"
    assert rows["JF-SAFE-001"]["why"] == "profile: `jfsm profile`"
    assert rows["JF-ATOM-005"]["why"] == "not observable"
    lines = verdict_lines(result)
    assert (
        "NOT COVERED  JF-COMP-006  An empty result is a failure  "
        "(not reached: scenario failure-outcomes failed first)"
    ) in lines
    assert any(line.endswith("(profile: `jfsm profile`)") for line in lines)


def test_a_missing_capability_is_the_reason_even_for_a_scenario_left_out(tmp_path: Path) -> None:
    result = _run(tmp_path, REFERENCE, scenarios=["conversion"], machines=False)
    rows = {v["id"]: v for v in result.verdicts}
    assert rows["JF-ATOM-004"]["why"] == "needs capability durableRestart"
    assert rows["JF-ERR-012"]["why"] == "needs an HTTP driver"
    assert rows["JF-STORE-010"]["why"] == "needs capability sharedStore"
    assert rows["JF-COMP-006"]["why"] == "left out of this run"


def test_the_harness_error_comes_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run that could not start: the cause is the first line, the verdicts one line
    (before: 126 NOT COVERED lines, then the cause)."""
    code = main(
        [
            "--driver",
            "stdio:nodee-is-no-command build/jfsm-driver.js",
            "--report-dir",
            str(tmp_path),
        ]
    )
    lines = capsys.readouterr().out.splitlines()
    assert code == 2
    assert lines[0].startswith("HARNESS ERROR: in the handshake: cannot start driver")
    assert "nodee-is-no-command" in lines[0]
    assert lines[1].endswith(
        "requirements not judged: the run stopped before it judged any (the harness error above)"
    )
    assert not any(line.startswith("NOT COVERED") for line in lines)
