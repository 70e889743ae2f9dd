"""The runner is honest: original failures survive a replay that differs, Hypothesis's flaky
errors never become harness errors, every pass says what it exercised, traces are bounded and
shell-safe, and a `--select` that matches nothing is a usage error."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis.errors import FlakyStrategyDefinition, InvalidArgument

from jfsm_conformance.machines import explore
from jfsm_conformance.machines.explore import NONDETERMINISM_ROW
from jfsm_conformance.record import exercise
from jfsm_conformance.record.traces import TEXT_LIMIT, TRACE_LIMIT, TraceDir, compact, slug, unpack
from jfsm_conformance.run.cli import main
from jfsm_conformance.run.report import to_markdown
from jfsm_conformance.run.runner import Options, RunResult, run, select_error

FLAKY = "python:jfsm_conformance.examples.flaky:"


def _run(tmp_path: Path, driver: str, **kw: Any) -> RunResult:
    return run(Options(driver=driver, report_dir=tmp_path, progress=lambda line: None, **kw))


def _failed(result: RunResult) -> dict[str, dict[str, Any]]:
    return {v["id"]: v for v in result.verdicts if v["verdict"] == "fail"}


@pytest.mark.parametrize("factory", ["glitch_once", "glitch_then_noise", "glitch_then_other"])
def test_a_replay_that_differs_reports_the_original_failure(tmp_path: Path, factory: str) -> None:
    result = _run(tmp_path, FLAKY + factory, scenarios=[])
    assert result.harness_error is None
    assert result.exit_code == 1
    failed = _failed(result)
    # the original failure, under its own requirement, first; never the replay's noise
    assert set(failed) == {"JF-STORE-004", NONDETERMINISM_ROW}, sorted(failed)
    original = failed["JF-STORE-004"]["failures"][0]
    assert "record_round returned" in original["message"]
    assert "this sequence was replayed" in original["message"] or (
        "on replay of the same sequence the implementation failed differently"
        in original["message"]
    )
    trace = json.loads(Path(original["trace"]).read_text(encoding="utf-8"))
    # the trace is the original sequence's: it ends with the record_round that failed
    assert trace["steps"][-1]["step"] == "record_round"
    assert "JF-STORE-004" in trace["failure"]["ids"]
    sent = [m["send"]["op"] for m in trace["messages"] if "send" in m]
    assert "record_round" in sent
    note = failed[NONDETERMINISM_ROW]["failures"][0]["message"]
    assert ("Flaky" in note or "failed another check instead" in note) and "same way" in note
    assert result.verdicts[0]["id"] in (NONDETERMINISM_ROW, "DRIVER-PROTOCOL")
    # what ran is counted
    assert result.exercised["rule"]["start"] >= 1
    assert result.exercised["step"]["record_round"] >= 1
    assert "What was exercised" in to_markdown(result)


def _raising(exc: BaseException) -> Any:
    def fake(*args: Any, **kwargs: Any) -> None:
        raise exc

    return fake


def test_flaky_hypothesis_error_alone_is_a_named_failure_not_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        explore, "run_state_machine_as_test", _raising(FlakyStrategyDefinition("differs"))
    )
    result = _run(tmp_path, "python:jfsm.driver:reference_driver", scenarios=[])
    assert result.harness_error is None
    assert result.exit_code == 1
    assert set(_failed(result)) == {NONDETERMINISM_ROW}


def test_other_hypothesis_errors_are_harness_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(explore, "run_state_machine_as_test", _raising(InvalidArgument("bug")))
    result = _run(tmp_path, "python:jfsm.driver:reference_driver", scenarios=[])
    assert result.exit_code == 2
    assert result.harness_error is not None and "InvalidArgument" in result.harness_error


@pytest.mark.slow
def test_scenarios_count_scripted_replies_and_outcomes(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        "python:jfsm.driver:reference_driver",
        scenarios=["failure-outcomes", "stale-results"],
        machines=False,
    )
    assert result.exit_code == 0
    outcomes = result.exercised["outcome"]
    for outcome in ("published", "refused", "transport", "empty", "not_smaller", "stale"):
        assert outcomes.get(outcome, 0) >= 1, outcomes
    replies = result.exercised["reply"]
    for reply in ("success", "refuse", "http_status", "hold"):
        assert replies.get(reply, 0) >= 1, replies
    assert "rule" not in result.exercised  # the machines did not run
    markdown = to_markdown(result)
    assert "compressions settled, by outcome" in markdown


def test_exercise_counts_only_inside_a_block() -> None:
    exercise.record("rule", "outside")
    with exercise.counting() as counts:
        exercise.record("rule", "inside")
        exercise.record("rule", "inside")
    exercise.record("rule", "after")
    assert counts.table() == {"rule": {"inside": 2}}


def test_select_matching_nothing_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--select", "JF-NOPE", "--report-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "matches no requirement ID" in err and "JF-COMP" in err
    assert select_error("JF-COMP") is None and select_error("") is None
    result = _run(tmp_path, "python:jfsm.driver:reference_driver", select="jf-comp")
    assert result.exit_code == 2 and "matches no requirement" in (result.harness_error or "")


def test_trace_names_are_shell_safe_and_texts_are_cut(tmp_path: Path) -> None:
    source = "machine at small thresholds {'game': 3000, 'catalyst': 1500}; $(rm -rf /)"
    assert set(slug(source)) <= set("abcdefghijklmnopqrstuvwxyz0123456789.-_")
    big = "x" * (TEXT_LIMIT * 50)
    cut = compact({"a": [big, "short"]})
    assert cut["a"][1] == "short"
    assert len(cut["a"][0]) < TEXT_LIMIT + 100 and f"{len(big)} code points" in cut["a"][0]
    assert compact(cut) == cut  # idempotent
    traces = TraceDir(tmp_path / "traces")
    path = traces.write(
        source=source,
        driver="python:x:y",
        thresholds=None,
        failure={"check": "c", "ids": ["JF-X"], "message": "m"},
        steps=[{"step": "record_round", "args": {"user": big}}],
        messages=[{"send": {"op": "dump", "args": {"text": big}}}] * 1000,
    )
    assert path.stat().st_size <= TRACE_LIMIT == 1 << 20  # the cap (R85)
    trace = json.loads(path.read_text(encoding="utf-8"))
    # steps stay exact, packed: replay needs them
    assert unpack(trace["steps"])[0]["args"]["user"] == big
    assert len(json.dumps(trace["steps"])) < 5000
    assert "left out" in trace["messages"][0]["note"]
    # over the cap, the earliest messages go and the failing window (the last ones) stays
    text = "y" * 1900 + "😀" * 50
    window = [{"send": {"op": "dump", "n": i, "a": text, "b": text}} for i in range(900)]
    capped = traces.write(
        source="capped",
        driver="python:x:y",
        thresholds=None,
        failure={"check": "c", "ids": ["JF-X"], "message": "m"},
        steps=[{"step": "record_round", "args": {"user": "\ud800 lone " + "😀" * 5000}}],
        messages=window,
    )
    assert capped.stat().st_size <= TRACE_LIMIT
    kept = json.loads(capped.read_text(encoding="utf-8"))
    assert kept["messages"][-1]["send"]["n"] == 899 and kept["messages"][0]["leftOut"] > 500
    assert unpack(kept["steps"])[0]["args"]["user"] == "\ud800 lone " + "😀" * 5000
    # the printed replay command works in bash as printed
    done = subprocess.run(
        ["bash", "-c", f"test -f {shlex.quote(str(path))} && echo yes"],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert done.stdout.strip() == "yes"
    (tmp_path / "traces" / "keep.txt").write_text("not a trace", encoding="utf-8")
    assert TraceDir(tmp_path / "traces").clear() == 2
    assert [p.name for p in (tmp_path / "traces").iterdir()] == ["keep.txt"]


def test_a_run_keeps_only_its_own_traces(tmp_path: Path) -> None:
    old = tmp_path / "traces" / "07-machine-from-an-earlier-run.json"
    old.parent.mkdir(parents=True)
    old.write_text("{}", encoding="utf-8")
    result = _run(
        tmp_path,
        "python:jfsm_conformance.examples.broken:drop_suffix",
        scenarios=["suffix-survives"],
        machines=False,
    )
    assert result.exit_code == 1
    names = sorted(p.name for p in (tmp_path / "traces").iterdir())
    assert names == ["01-scenario-suffix-survives.json"]
