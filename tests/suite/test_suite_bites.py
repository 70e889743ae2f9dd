"""The conformance suite fails deliberately broken drivers, naming the right requirements,
and passes the reference engine."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from jfsm_conformance.run.cli import main
from jfsm_conformance.run.report import to_markdown
from jfsm_conformance.run.runner import Options, replay, run

BROKEN = "python:jfsm_conformance.examples.broken:"

CASES = [
    ("drop_suffix", ["suffix-survives"], "JF-COMP-003"),
    ("leak_scene", ["catalyst-threshold"], "JF-CAT-008"),
    ("utf16_counts", ["threshold-boundary"], "JF-TEXT-003"),
    ("utf16_counts", ["intervene-forced"], "JF-INT-001"),
    ("spectators_pay", ["threshold-boundary"], "JF-CALL-009"),
    ("convert_compresses", ["conversion-over-threshold"], "JF-HIST-007"),
    ("republish_writes", ["scene-lifecycle"], "JF-CAT-006"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("factory", "scenarios", "requirement"), CASES)
def test_suite_fails_broken_driver(
    tmp_path: Path, factory: str, scenarios: list[str], requirement: str
) -> None:
    options = Options(
        driver=BROKEN + factory,
        scenarios=scenarios,
        machines=False,
        report_dir=tmp_path,
        progress=lambda line: None,
    )
    result = run(options)
    assert result.exit_code == 1
    assert requirement in result.failures[0].ids  # blamed first, not merely somewhere
    verdicts = {v["id"]: v for v in result.verdicts}
    assert verdicts[requirement]["verdict"] == "fail"
    failure = verdicts[requirement]["failures"][0]
    markdown = to_markdown(result)
    assert f"### {requirement} (fail)" in markdown
    assert failure["message"] in markdown or failure["message"].splitlines()[0] in markdown
    trace = json.loads(Path(failure["trace"]).read_text(encoding="utf-8"))
    assert requirement in trace["failure"]["ids"]
    assert trace["steps"] and trace["messages"]
    assert replay(failure["trace"], progress=lambda line: None) == 1


def test_drop_suffix_is_a_lost_suffix_not_a_generic_failure(tmp_path: Path) -> None:
    options = Options(
        driver=BROKEN + "drop_suffix",
        scenarios=["suffix-survives"],
        machines=False,
        report_dir=tmp_path,
        progress=lambda line: None,
    )
    failing = {v["id"] for v in run(options).verdicts if v["verdict"] == "fail"}
    assert failing == {"JF-COMP-003"}


@pytest.mark.slow
def test_expected_failures_turn_into_xfail(tmp_path: Path) -> None:
    listed = tmp_path / "expected.json"
    listed.write_text(
        json.dumps(
            [
                {"id": "JF-CAT-008", "reason": "known leak"},
                {"id": "JF-CAT-002", "reason": "known leak"},
            ]
        ),
        encoding="utf-8",
    )
    code = main(
        [
            "--driver",
            BROKEN + "leak_scene",
            "--select",
            "JF-CAT-008",
            "--expected-failures",
            str(listed),
            "--report-dir",
            str(tmp_path / "report"),
        ]
    )
    report = json.loads((tmp_path / "report" / "report.json").read_text(encoding="utf-8"))
    verdicts = {v["id"]: v["verdict"] for v in report["verdicts"]}
    assert verdicts["JF-CAT-008"] == "xfail"
    assert code == 0


@pytest.mark.slow
def test_reference_passes_quick_profile(tmp_path: Path) -> None:
    result = run(Options(report_dir=tmp_path, progress=lambda line: None))
    failing = [
        (v["id"], v["failures"][0]["message"][:300])
        for v in result.verdicts
        if v["verdict"] == "fail"
    ]
    assert failing == []
    assert result.harness_error is None
    assert result.exit_code == 0
    verdicts = {v["id"]: v["verdict"] for v in result.verdicts}
    assert verdicts["JF-COMP-003"] == "pass"
    assert verdicts["JF-ATOM-005"] == "not covered"
    assert verdicts["JF-CALL-008"] == "not covered"  # backoff: the engine's tests judge it
    assert verdicts["JF-CONC-004"] == "pass"  # the reference compresses stacks concurrently


@pytest.mark.slow
def test_reference_passes_over_stdio_with_durable_state(tmp_path: Path) -> None:
    state = tmp_path / "state"
    spec = f"stdio:uv run jfsm driver --state {state}"
    result = run(
        Options(
            driver=spec,
            report_dir=tmp_path / "report",
            progress=lambda line: None,
            machines=False,
        )
    )
    failing = [
        (v["id"], v["failures"][0]["message"][:300])
        for v in result.verdicts
        if v["verdict"] == "fail"
    ]
    assert failing == []
    verdicts = {v["id"]: v["verdict"] for v in result.verdicts}
    assert verdicts["JF-ATOM-004"] == "pass"
    assert verdicts["JF-CALL-011"] == "pass"  # a duplicate's telemetry is its own (was a bug)


def test_dead_driver_is_a_harness_error(tmp_path: Path) -> None:
    code = main(
        ["--driver", "stdio:python -c 'import sys; sys.exit(3)'", "--report-dir", str(tmp_path)]
    )
    assert code == 2


@pytest.mark.slow
def test_pytest_plugin_reports_one_item_per_requirement(tmp_path: Path) -> None:
    import subprocess
    import sys

    empty = tmp_path / "tests"
    empty.mkdir()
    run_ = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",  # the plugin loads through its pytest11 entry point
            "-p",
            "no:cacheprovider",
            "-n",
            "0",  # one process: the output parsed is pytest's own (R103)
            "--jfsm-driver",
            BROKEN + "leak_scene",
            "--jfsm-select",
            "JF-CAT-008",
            "--jfsm-report-dir",
            str(tmp_path / "report"),
            "-q",
            str(empty),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "1 failed" in run_.stdout, run_.stdout[-2000:]
    assert "JF-CAT-008" in run_.stdout
    assert "scene transcript text reached game memory" in run_.stdout


def test_every_suite_requirement_has_a_named_check() -> None:
    from jfsm_conformance.run.coverage import coverage_rows, uncovered_suite_requirements

    assert uncovered_suite_requirements() == []
    for row in coverage_rows():
        if row["verification"] != "suite":
            assert row["reason"], row["id"]


def test_off_protocol_reply_is_a_protocol_failure(tmp_path: Path) -> None:
    options = Options(
        driver=BROKEN + "off_protocol",
        scenarios=["conversion"],
        machines=False,
        report_dir=tmp_path,
        progress=lambda line: None,
    )
    result = run(options)
    assert result.exit_code == 1
    row = result.verdicts[0]
    assert row["id"] == "DRIVER-PROTOCOL" and row["verdict"] == "fail"
    assert "record_round_result" in row["failures"][0]["message"]
    assert "'seq' is a required property" in row["failures"][0]["message"]


def test_stored_null_renders_as_null_not_absent() -> None:
    from jfsm_conformance.model.oracle import diff_store

    (d,) = diff_store({"k": None}, {})
    assert d.describe() == "k: missing; expected null; got <absent>"
    (d,) = diff_store({}, {"k": None})
    assert d.describe() == "k: unexpected; expected <absent>; got null"
    (d,) = diff_store({"k": 1}, {"k": None})
    assert d.describe() == "k: different; expected 1; got null"


def test_no_credit_for_what_the_suite_cannot_judge() -> None:
    """JF-CALL-008's backoff is judged by the engine's tests: a passing retry check never
    credits it, while an observed violation of its bound still blames it."""
    from jfsm_conformance.verify import checks as C
    from jfsm_conformance.verify.checks import ConformanceFailure, Ledger

    ledger = Ledger()
    ledger.expect(C.RETRIES, True, ids=("JF-CALL-008", "JF-CALL-007"))
    assert ledger.passes["JF-CALL-007"] == 1
    assert "JF-CALL-008" not in ledger.passes
    with pytest.raises(ConformanceFailure) as failed:
        ledger.expect(C.RETRIES, False, "4 attempts", ids=("JF-CALL-008",))
    assert failed.value.ids == ("JF-CALL-008",)


@pytest.mark.slow
def test_reference_without_backoff_passes_the_transport_scenarios(tmp_path: Path) -> None:
    """The no-backoff reference factory is the same implementation: it passes the scenarios
    that script transport failures (it only skips the sleeps between retries)."""
    result = run(
        Options(
            driver="python:jfsm_conformance.examples.reference:durable_without_backoff",
            scenarios=["retry-then-success", "failure-outcomes"],
            machines=False,
            report_dir=tmp_path,
            progress=lambda line: None,
        )
    )
    assert result.exit_code == 0, [f.message[:200] for f in result.failures]
    assert result.capabilities.get("durableRestart") is True


@pytest.mark.slow
def test_pytest_plugin_node_ids_name_the_requirement_and_select_it(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    from jfsm_conformance.client.protocol import spec_dir

    catalog = spec_dir() / "requirements.toml"
    run_ = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-n",
            "0",  # one process: the output parsed is pytest's own (R103)
            "--jfsm-driver",
            "python:jfsm_conformance.examples.reference:durable_without_backoff",
            "--jfsm-report-dir",
            str(tmp_path / "report"),
            "-v",
            f"{catalog}::JF-CAT-001",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run_.returncode == 0, run_.stdout[-2000:] + run_.stderr[-2000:]
    assert re.search(r"requirements\.toml::JF-CAT-001 PASSED", run_.stdout), run_.stdout
    assert "1 passed" in run_.stdout
    report = json.loads((tmp_path / "report" / "report.json").read_text(encoding="utf-8"))
    assert report["select"] == "JF-CAT-001"  # the suite ran for the selected node only
