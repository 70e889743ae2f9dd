"""A profile run that reached nothing it judges is no pass (issue 39, decisions R200-R203):
an adapter whose `compact()` forgets an `await` fails JF-SAFE-020 and exits 1, its
never-awaited coroutines are not filed as library warnings, more properties not exercised
than allowed fail JF-SAFE-021, a replay runs in the trace's writers and the adapter's
declared scope and prints nothing of the library's, and warnings are grouped by category
and source."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import pytest

from jfsm_conformance.profile import (
    AdapterSpec,
    ObservedStorage,
    ProfileOptions,
    Scope,
    run_profile,
)
from jfsm_conformance.profile.reach import NEEDS_A_CALL, judge_reach
from jfsm_conformance.profile.report import summary_lines, to_json, to_junit, write_report
from jfsm_conformance.profile.runner import replay

JFSM = Path(sys.executable).with_name("jfsm")

USER_MODULE = textwrap.dedent(
    '''
    """Adapters of a user's own: one forgets an await, one logs, one declares one writer."""

    import dataclasses
    import logging

    from jfsm_conformance.profile import AdapterSpec, Scope
    from jfsm_conformance.profile.adapters import toy


    class Forgetful:
        def __init__(self, summarizer):
            self.summarizer = summarizer
            self.entries = []

        async def append(self, user, assistant):
            self.entries += [user, assistant]

        async def compact(self):
            if len(self.entries) >= 4:
                self.summarizer.summarize("\\n".join(self.entries[:-2]))  # no await

        async def read(self):
            return list(self.entries)

        def observed_states(self):
            return []

        def fail_next_write(self, armed=True):
            pass

        async def close(self):
            pass


    forgot = AdapterSpec(
        factory=Forgetful,
        scope=Scope(library="forgetful", version="1", entry_point="Forgetful.compact"),
    )


    def _loud(summarizer):
        memory = toy.stale_snapshot.factory(summarizer)
        compact = memory.compact

        async def loud_compact():
            logging.getLogger("loudlib").warning("LOUD compacting now")
            await compact()

        memory.compact = loud_compact
        return memory


    loud = AdapterSpec(factory=_loud, scope=toy.stale_snapshot.scope)
    one_writer = AdapterSpec(
        factory=toy.stale_snapshot.factory,
        scope=dataclasses.replace(toy.stale_snapshot.scope, writers="single"),
    )
    '''
)


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "usermem.py").write_text(USER_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _jfsm(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [str(JFSM), "profile", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _quiet(**kw: Any) -> ProfileOptions:
    return ProfileOptions(progress=lambda _: None, **kw)


@pytest.mark.req("JF-SAFE-020")
def test_a_forgotten_await_fails_jf_safe_020(user_dir: Path) -> None:
    """The forgetful memory never changes, so every property that is checked passes and the
    rest are not exercised: before R200 that was exit 0. Now JF-SAFE-020 fails, names the
    coroutine never awaited, and nothing of it is filed as the library's warning."""
    from usermem import forgot  # type: ignore[import-not-found]

    result = run_profile(_quiet(adapter="usermem:forgot", examples=10), spec=forgot)
    assert not any(v["verdict"] == "fail" for v in result.verdicts)  # no property failed
    rows = {row["id"]: row for row in result.reach}
    assert rows["JF-SAFE-020"]["verdict"] == "fail"
    assert "never reached the summarizer" in rows["JF-SAFE-020"]["message"]
    assert "ScriptedSummarizer.summarize" in rows["JF-SAFE-020"]["message"]
    assert rows["JF-SAFE-021"]["verdict"] == "not judged"  # one defect, one ID
    assert result.exit_code == 1
    said = result.recorder.warnings
    assert said.unawaited["ScriptedSummarizer.summarize"] > 0
    assert not any("never awaited" in s for s in [*said.groups, *said.samples.values()])
    data = to_json(result)
    assert data["library_warnings"] == {}
    assert data["coroutines_never_awaited"]["ScriptedSummarizer.summarize"] > 0
    assert any("FAIL" in line and "JF-SAFE-020" in line for line in summary_lines(result))
    assert 'name="JF-SAFE-020"><failure' in to_junit(result)


@pytest.mark.req("JF-SAFE-020")
def test_the_cli_exits_1_for_a_forgotten_await(user_dir: Path) -> None:
    done = _jfsm(
        "--adapter", "usermem:forgot", "--examples", "8", "--report-dir", "r", cwd=user_dir
    )
    assert done.returncode == 1, done.stderr[-3000:]
    assert "JF-SAFE-020" in done.stderr and "never reached the summarizer" in done.stderr
    assert "was never awaited" not in done.stderr  # counted, not printed
    report = (user_dir / "r" / "profile.md").read_text("utf-8")
    assert "| JF-SAFE-020 | the summarizer is reached | fail |" in report


@pytest.mark.req("JF-SAFE-020")
def test_a_memory_without_a_summarizer_call_to_judge_is_not_failed() -> None:
    """Where no property that needs a summarizer call applies (a context that never calls a
    model, AutoGen's), JF-SAFE-020 is not applicable: reaching nothing is its design."""
    verdicts = [{"id": rid, "verdict": "not applicable"} for rid in sorted(NEEDS_A_CALL)]
    verdicts.append({"id": "JF-SAFE-001", "verdict": "pass"})
    rows = judge_reach(verdicts, reached={}, requested={"ok": 9}, unawaited={})
    assert [(r["id"], r["verdict"]) for r in rows] == [
        ("JF-SAFE-020", "not applicable"),
        ("JF-SAFE-021", "pass"),
    ]


@pytest.mark.req("JF-SAFE-021")
def test_not_exercised_above_the_threshold_fails_jf_safe_021() -> None:
    verdicts = [
        {"id": "JF-SAFE-002", "verdict": "pass"},
        {"id": "JF-SAFE-003", "verdict": "not exercised"},
        {"id": "JF-SAFE-004", "verdict": "not exercised"},
        {"id": "JF-SAFE-009", "verdict": "not applicable"},
    ]
    reached = {"ok": 3}

    def verdict(allowed: int, selected: frozenset[str] | None = None) -> str:
        rows = judge_reach(
            verdicts,
            reached=reached,
            requested=reached,
            unawaited={},
            allowed=allowed,
            selected=selected,
        )
        return {r["id"]: r for r in rows}["JF-SAFE-021"]["verdict"]

    assert verdict(0) == "fail"
    assert verdict(1) == "fail"
    assert verdict(2) == "pass"
    # a property the run did not select is not counted against it
    assert verdict(0, frozenset({"JF-SAFE-002", "JF-SAFE-003"})) == "fail"
    assert verdict(1, frozenset({"JF-SAFE-002", "JF-SAFE-003"})) == "pass"
    stopped = judge_reach(verdicts, reached={}, requested={}, unawaited={}, harness_error="x")
    assert {r["verdict"] for r in stopped} == {"not judged"}


@pytest.mark.req("JF-SAFE-021")
def test_a_run_with_a_property_left_unexercised_exits_1() -> None:
    """The reference passes every property with the default budget; with one example of one
    step, most are never reached: exit 1 under JF-SAFE-021 unless the run allows them."""
    tiny = run_profile(_quiet(adapter="toy", examples=1, steps=1, writers="single"))
    idle = [v["id"] for v in tiny.verdicts if v["verdict"] == "not exercised"]
    assert idle and not any(v["verdict"] == "fail" for v in tiny.verdicts)
    row = {r["id"]: r for r in tiny.reach}
    assert tiny.exit_code == 1
    assert row["JF-SAFE-020"]["verdict"] == "fail" or row["JF-SAFE-021"]["verdict"] == "fail"
    allowed = run_profile(
        _quiet(adapter="toy", examples=1, steps=1, writers="single", allow_not_exercised=14)
    )
    if {r["id"]: r for r in allowed.reach}["JF-SAFE-020"]["verdict"] == "pass":
        assert allowed.exit_code == 0


class _Warner:
    """A correct list memory whose library warns three ways, each with changing text."""

    def __init__(self, summarizer: Any) -> None:
        self.summarizer = summarizer
        self.entries: list[str] = []
        self.observed = ObservedStorage()
        self.n = 0

    async def append(self, user: str, assistant: str) -> None:
        self.entries += [user, assistant]

    async def compact(self) -> None:
        self.n += 1
        warnings.warn(f"call {self.n} is deprecated", DeprecationWarning, stacklevel=1)
        warnings.warn(f"slow call {self.n}", UserWarning, stacklevel=1)
        warnings.warn(f"odd call {self.n}", UserWarning, stacklevel=1)
        if len(self.entries) >= 4:
            prefix = self.entries[:-2]
            summary = await self.summarizer.summarize("\n".join(prefix))
            if summary.strip():
                self.entries = [summary, *self.entries[-2:]]

    async def read(self) -> list[str]:
        return list(self.entries)

    def observed_states(self) -> list[list[str]]:
        return self.observed.take()

    def fail_next_write(self, armed: bool = True) -> None:
        self.observed.arm(armed)

    async def close(self) -> None:
        return None


def test_warnings_are_grouped_by_category_and_source(tmp_path: Path) -> None:
    """Three warning calls whose text changes at every compaction are three groups, not one
    per text (the issue's "56 captured (16 distinct)" for 3 kinds)."""
    spec = AdapterSpec(
        factory=_Warner, scope=Scope(library="warner", version="1", entry_point="W.compact")
    )
    result = run_profile(_quiet(adapter="warner", examples=8), spec=spec)
    said = result.recorder.warnings
    assert len(said.groups) == 3, dict(said.groups)
    assert said.total() > 3 * 3
    labels = sorted(said.groups)
    assert sum(label.startswith("DeprecationWarning at ") for label in labels) == 1
    assert sum(label.startswith("UserWarning at ") for label in labels) == 2
    assert all("test_reach.py:" in label for label in labels)
    assert any(sample.startswith("call ") for sample in said.samples.values())
    write_report(result, tmp_path)
    data = json.loads((tmp_path / "profile.json").read_text("utf-8"))
    assert len(data["library_warnings"]) == 3
    assert {v["count"] for v in data["library_warnings"].values()} == {said.total() // 3}
    assert "3 groups by category and source" in (tmp_path / "profile.md").read_text("utf-8")


@pytest.mark.req("JF-SAFE-009")
def test_replay_runs_in_the_traces_writers_and_the_declared_scope(
    user_dir: Path, tmp_path: Path
) -> None:
    """A several-writers trace against an adapter that declares one writer is a harness
    error (before: replayed as one writer, "fixed", exit 0); a trace that does not say its
    writers runs in the adapter's declared scope and reproduces."""
    result = run_profile(
        _quiet(adapter="toy:stale-snapshot", only=frozenset({"JF-SAFE-009"}), examples=20, steps=12)
    )
    write_report(result, tmp_path / "r")
    assert result.several is not None
    trace = tmp_path / "r" / "traces" / "several-writers" / "JF-SAFE-009.json"
    lines: list[str] = []
    assert replay(trace, adapter="usermem:one_writer", progress=lines.append) == 2
    assert not any(line.startswith("fixed") for line in lines)
    assert "two overlapping writers" in lines[-1] and "declares one writer" in lines[-1]
    data = json.loads(trace.read_text("utf-8"))
    del data["writers"]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(data), encoding="utf-8")
    lines.clear()
    assert replay(bare, progress=lines.append) == 1
    assert any(line.startswith("reproduced: JF-SAFE-009") for line in lines)
    assert "two overlapping writers" in lines[0]


def test_replay_prints_none_of_the_librarys_log_lines(user_dir: Path, tmp_path: Path) -> None:
    result = run_profile(
        _quiet(adapter="toy:stale-snapshot", only=frozenset({"JF-SAFE-009"}), examples=20, steps=12)
    )
    write_report(result, tmp_path / "r")
    trace = json.loads(
        (tmp_path / "r" / "traces" / "several-writers" / "JF-SAFE-009.json").read_text("utf-8")
    )
    trace["adapter"] = "usermem:loud"
    (user_dir / "loud.json").write_text(json.dumps(trace), encoding="utf-8")
    done = _jfsm("replay", "loud.json", cwd=user_dir)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "reproduced: JF-SAFE-009" in done.stderr
    assert "LOUD" not in done.stderr + done.stdout
    assert "library warnings and log records:" in done.stderr
