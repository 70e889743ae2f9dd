"""Reports for CI: JUnit XML (one case per requirement), GitHub annotations, the Markdown
report's implementation line and its quiet driver log on a passing run."""

from __future__ import annotations

import copy
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from jfsm_conformance.run.cli import main
from jfsm_conformance.run.report import to_junit, to_markdown
from jfsm_conformance.run.runner import Options, RunResult, implementation_label, load_catalog, run

BROKEN = "python:jfsm_conformance.examples.broken:"


@pytest.fixture(scope="module")
def dropped(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    """One run against a driver that loses the unrepresented suffix (JF-COMP-003 fails)."""
    return _drop_suffix(tmp_path_factory.mktemp("drop-suffix"))


def _drop_suffix(tmp_path: Path) -> RunResult:
    return run(
        Options(
            driver=BROKEN + "drop_suffix",
            scenarios=["suffix-survives"],
            machines=False,
            report_dir=tmp_path,
            progress=lambda line: None,
        )
    )


def _check_junit(text: str, expected_cases: int) -> ET.Element:
    """The structure of the Jenkins/Ant JUnit schema that CI systems read."""
    root = ET.fromstring(text)
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    for attribute in ("name", "tests", "failures", "errors", "skipped", "time"):
        assert attribute in suite.attrib, attribute
    cases = suite.findall("testcase")
    assert len(cases) == int(suite.get("tests", "-1")) == expected_cases
    failures = [c for c in cases if c.find("failure") is not None]
    skipped = [c for c in cases if c.find("skipped") is not None]
    errors = [c for c in cases if c.find("error") is not None]
    assert len(failures) == int(suite.get("failures", "-1"))
    assert len(skipped) == int(suite.get("skipped", "-1"))
    assert len(errors) == int(suite.get("errors", "-1"))
    for case in cases:
        assert case.get("name") and case.get("classname") and case.get("time") is not None
        outcome = [child.tag for child in case if child.tag in ("failure", "skipped", "error")]
        assert len(outcome) <= 1
        float(case.get("time", "x"))
    return suite


def test_junit_has_one_case_per_requirement_with_expected_got_and_replay(
    dropped: RunResult,
) -> None:
    result = dropped
    suite = _check_junit(to_junit(result), len(load_catalog()))
    case = next(c for c in suite.findall("testcase") if c.get("name", "").startswith("JF-COMP-003"))
    failure = case.find("failure")
    assert failure is not None and failure.get("message")
    assert "jfsm conformance replay " in (failure.text or "")
    assert "trace: " in (failure.text or "")
    assert case.get("classname") == "jfsm.conformance.COMP"
    skipped = [c for c in suite.findall("testcase") if c.find("skipped") is not None]
    assert any("not covered" in (c.find("skipped").get("message") or "") for c in skipped)  # type: ignore[union-attr]


def test_junit_escapes_what_xml_cannot_hold(dropped: RunResult) -> None:
    result = copy.deepcopy(dropped)
    row = next(v for v in result.verdicts if v["verdict"] == "fail")
    row["failures"][0]["message"] = "got 'c\x01\x1f\udc00' expected '\ufffe'"
    text = to_junit(result)
    assert "\\u0001" in text and "\\udc00" in text
    _check_junit(text, len(load_catalog()))


@pytest.mark.slow
def test_cli_writes_junit_and_github_annotations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    code = main(
        [
            "--driver",
            BROKEN + "drop_suffix",
            "--select",
            "JF-COMP-003",
            "--report-dir",
            str(tmp_path / "report"),
            "--junit-xml",
            str(tmp_path / "junit" / "conformance.xml"),
        ]
    )
    assert code == 1
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("::error ")]
    assert lines and lines[0].startswith("::error title=JF-COMP-003 ")
    assert all("\n" not in line for line in lines) and "%0A" in lines[0]
    suite = _check_junit((tmp_path / "junit" / "conformance.xml").read_text("utf-8"), 1)
    assert suite.find("testcase/failure") is not None


@pytest.mark.slow
def test_no_annotations_outside_github(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    code = main(
        [
            "--driver",
            BROKEN + "drop_suffix",
            "--select",
            "JF-COMP-003",
            "--report-dir",
            str(tmp_path / "report"),
        ]
    )
    assert code == 1
    captured = capsys.readouterr()
    assert "::error" not in captured.out + captured.err
    # verdicts, the first failure in full and the summary on stdout; progress on stderr
    assert "FAIL   JF-COMP-003" in captured.out
    assert re.search(r"^FAIL +JF-COMP-003 ", captured.out, re.MULTILINE)
    assert "Failure 1 of " in captured.out and "differs from the model" in captured.out
    assert "jfGameStack.chunk." in captured.out  # the diff itself, not only its heading
    assert re.search(r"^  trace: +\S+\.json$", captured.out, re.MULTILINE)
    assert re.search(r"^  replay: jfsm conformance replay \S+\.json$", captured.out, re.M)
    assert "[1/" in captured.err and "[1/" not in captured.out


def test_markdown_names_the_implementation_and_hides_injected_faults_on_a_pass(
    tmp_path: Path,
) -> None:
    result = run(
        Options(
            scenarios=["failure-outcomes"],
            machines=False,
            report_dir=tmp_path,
            progress=lambda line: None,
        )
    )
    assert result.exit_code == 0
    text = to_markdown(result)
    assert "- implementation: jfsm 0.1.0 (python)" in text
    assert "{'name'" not in text
    assert "WARNING" not in text  # the fake's refusals and 503s are on purpose
    assert implementation_label({}) == "unknown"
    assert implementation_label({"name": "x", "version": "2", "language": "rust"}) == "x 2 (rust)"


@pytest.mark.slow
def test_pytest_plugin_shows_progress_and_refuses_an_empty_select(tmp_path: Path) -> None:
    import subprocess
    import sys

    empty = tmp_path / "tests"
    empty.mkdir()

    def pytest_run(select: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "-n",
                "0",  # one process: the output parsed is pytest's own (R103)
                "--jfsm-driver",
                BROKEN + "drop_suffix",
                "--jfsm-select",
                select,
                "--jfsm-report-dir",
                str(tmp_path / "report"),
                str(empty),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )

    done = pytest_run("JF-COMP-003")
    assert "1 failed" in done.stdout, done.stdout[-2000:]
    assert "jfsm: [1/" in done.stdout  # the suite's progress, while it runs
    assert "jfsm: implementation jfsm 0.1.0 (python)" in done.stdout
    typo = pytest_run("JF-TYPO")
    assert typo.returncode == 4  # pytest's usage error
    assert "--jfsm-select 'JF-TYPO' matches no requirement ID" in typo.stderr


def test_reports_lead_with_the_first_failure_and_record_the_versions(dropped: RunResult) -> None:
    from jfsm import __version__
    from jfsm.spec import constants
    from jfsm_conformance.run.report import to_json

    report = to_json(dropped)
    assert next(iter(report)) == "format" and list(report)[1] == "first_failure"
    first = report["first_failure"]
    assert first["ids"] == ["JF-COMP-003"] and first["source"] == "scenario suffix-survives"
    assert "differs from the model" in first["message"]
    assert first["trace"] and Path(first["trace"]).is_file()
    assert first["replay"] == f"jfsm conformance replay {first['trace']}"
    assert report["versions"] == {
        "suite": __version__,
        "spec": constants().spec_version,
        "jfsm": __version__,
    }
    markdown = to_markdown(dropped).splitlines()
    assert markdown[2].startswith("**First failure**: [JF-COMP-003] in scenario suffix-survives")
    assert any(first["replay"] in line for line in markdown[:30])


@pytest.mark.slow
def test_a_passing_report_has_no_first_failure_and_records_the_command(tmp_path: Path) -> None:
    code = main(["--select", "JF-CAT-00", "--select", "JF-TEXT-00", "--report-dir", str(tmp_path)])
    assert code == 0
    report = json.loads((tmp_path / "report.json").read_text("utf-8"))
    assert report["first_failure"] is None
    assert report["command"].endswith(
        f"conformance --select JF-CAT-00 --select JF-TEXT-00 --report-dir {tmp_path}"
    )
    ids = {v["id"] for v in report["verdicts"]}
    assert any(i.startswith("JF-CAT-00") for i in ids) and any(i.startswith("JF-TEXT") for i in ids)
    assert all(i.startswith(("JF-CAT-00", "JF-TEXT-00")) for i in ids)
