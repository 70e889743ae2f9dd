"""The default run's companions (R92): what the in-process reference must skip for its
transport runs over the reference driver's own processes, in the same ledger."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jfsm_conformance.run.cli import main
from jfsm_conformance.run.report import to_json
from jfsm_conformance.run.runner import Options, run

EXPLICIT = "python:jfsm.driver:durable_reference_driver"


@pytest.mark.slow
@pytest.mark.req("JF-ERR-011", "JF-ERR-016", "JF-ERR-017")
def test_the_default_run_judges_http_and_state_over_the_references_processes(
    tmp_path: Path,
) -> None:
    result = run(
        Options(
            scenarios=["hostile-http", "hostile-state"],
            machines=False,
            companions=True,
            report_dir=tmp_path,
            progress=lambda line: None,
        )
    )
    assert result.exit_code == 0, [f.message for f in result.failures]
    verdicts = {v["id"]: v["verdict"] for v in result.verdicts}
    for rid in ("JF-ERR-011", "JF-ERR-012", "JF-ERR-016", "JF-ERR-017"):
        assert verdicts[rid] == "pass", rid
    assert "hostile-http" not in result.skipped and "hostile-state" not in result.skipped
    assert set(result.companions.values()) == {"hostile-http", "hostile-state"}
    report = json.loads(json.dumps(to_json(result)))
    assert report["companions"] == result.companions


def test_without_companions_the_in_process_run_skips_them_with_reasons(tmp_path: Path) -> None:
    result = run(
        Options(
            scenarios=["hostile-http", "hostile-state"],
            machines=False,
            report_dir=tmp_path,
            progress=lambda line: None,
        )
    )
    assert "HTTP" in result.skipped["hostile-http"]
    assert "{state}" in result.skipped["hostile-state"]
    assert result.companions == {}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("driver", "companions"),
    [([], {"over stdio (jfsm driver --state)": "hostile-state"}), (["--driver", EXPLICIT], {})],
)
def test_only_the_default_driver_brings_companions(
    tmp_path: Path, driver: list[str], companions: dict[str, str]
) -> None:
    """`--driver` names an implementation, which brings its own transports; one without
    `{state}` in its command leaves the selection judging nothing: exit 2, never a green run
    (R142)."""
    code = main(["--select", "JF-ERR-016", "--report-dir", str(tmp_path), *driver])
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["companions"] == companions
    verdict = {v["id"]: v["verdict"] for v in report["verdicts"]}["JF-ERR-016"]
    assert (code, verdict) == ((0, "pass") if companions else (2, "not covered"))
    if not companions:
        assert "{state}" in report["judged_nothing"]
