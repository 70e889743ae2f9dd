"""The compaction safety profile: the reference engine passes every property, and each
switchable bug of the toy memory fails exactly the property it breaks (so every check can
fail); library adapters run where their library is installed."""

from __future__ import annotations

import importlib.util
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from jfsm_conformance.profile import PROPERTIES, ProfileOptions, ProfileResult, run_profile
from jfsm_conformance.profile.adapters import ADAPTERS
from jfsm_conformance.profile.report import to_json, to_junit, write_report

ALL = [p.id for p in PROPERTIES]


def _run(adapter: str, examples: int = 25, steps: int = 16, **kw: Any) -> ProfileResult:
    return run_profile(
        ProfileOptions(
            adapter=adapter, examples=examples, steps=steps, progress=lambda _: None, **kw
        )
    )


def _verdicts(result: ProfileResult) -> dict[str, str]:
    return {v["id"]: v["verdict"] for v in result.verdicts}


@pytest.mark.req(
    "JF-SAFE-001",
    "JF-SAFE-002",
    "JF-SAFE-003",
    "JF-SAFE-004",
    "JF-SAFE-005",
    "JF-SAFE-006",
    "JF-SAFE-007",
    "JF-SAFE-008",
    "JF-SAFE-009",
    "JF-SAFE-010",
    "JF-SAFE-011",
    "JF-SAFE-012",
    "JF-SAFE-013",
    "JF-SAFE-014",
)
def test_reference_engine_passes_every_property(tmp_path: Path) -> None:
    result = _run("reference", examples=30)
    assert result.harness_error is None
    # it declares several writers: JF-SAFE-009 is judged in the second search
    assert _verdicts(result) == {**dict.fromkeys(ALL, "pass"), "JF-SAFE-009": "not applicable"}
    assert result.several is not None
    assert _verdicts(result.several) == dict.fromkeys(ALL, "pass")
    assert result.exit_code == 0
    reached = result.recorder.reached + result.several.recorder.reached
    for outcome in ("ok", "raise", "timeout", "empty", "blank", "hold"):
        n = sum(k == outcome or k == f"hold→{outcome}" for k in reached)
        assert n > 0, f"the search never reached the summarizer with {outcome}"
    json_path, md_path = write_report(result, tmp_path)
    data = json.loads(json_path.read_text("utf-8"))
    assert data["counts"] == {"pass": len(ALL) - 1, "not applicable": 1}
    assert data["several_writers"]["counts"] == {"pass": len(ALL)}
    assert "| JF-SAFE-009 | `appends-in-flight-kept` | pass |" in md_path.read_text("utf-8")


# bug -> the properties it must fail (and nothing else)
MUTANTS = {
    "lose-append": {"JF-SAFE-001"},
    "error-as-summary": {"JF-SAFE-002", "JF-SAFE-003"},
    "empty-publishes": {"JF-SAFE-004"},
    "placeholder": {"JF-SAFE-005"},
    "stale-snapshot": {"JF-SAFE-009"},
    "clear-then-add": {"JF-SAFE-010", "JF-SAFE-011"},
    "drop-extra": {"JF-SAFE-006"},
    "keep-summarized": {"JF-SAFE-007", "JF-SAFE-012"},
    "reorder": {"JF-SAFE-008"},
    "resummarize": {"JF-SAFE-013"},
    "drop-summary": {"JF-SAFE-006", "JF-SAFE-014"},
}


def _failed(result: ProfileResult) -> set[str]:
    """The properties either search failed: one writer, and two writers where declared."""
    searches = [result] if result.several is None else [result, result.several]
    return {rid for r in searches for rid, verdict in _verdicts(r).items() if verdict == "fail"}


def test_toy_without_bug_passes() -> None:
    """The toy declares several writers: JF-SAFE-009 is judged in the second search."""
    result = _run("toy")
    assert _verdicts(result) == {**dict.fromkeys(ALL, "pass"), "JF-SAFE-009": "not applicable"}
    assert result.several is not None
    assert _verdicts(result.several) == dict.fromkeys(ALL, "pass")


# the marks repeat MUTANTS literally: the docs' traceability scanner reads them statically
@pytest.mark.parametrize(
    "bug",
    [
        pytest.param("lose-append", marks=pytest.mark.req("JF-SAFE-001")),
        pytest.param("error-as-summary", marks=pytest.mark.req("JF-SAFE-002", "JF-SAFE-003")),
        pytest.param("empty-publishes", marks=pytest.mark.req("JF-SAFE-004")),
        pytest.param("placeholder", marks=pytest.mark.req("JF-SAFE-005")),
        pytest.param("stale-snapshot", marks=pytest.mark.req("JF-SAFE-009")),
        pytest.param("clear-then-add", marks=pytest.mark.req("JF-SAFE-010", "JF-SAFE-011")),
        pytest.param("drop-extra", marks=pytest.mark.req("JF-SAFE-006")),
        pytest.param("keep-summarized", marks=pytest.mark.req("JF-SAFE-007", "JF-SAFE-012")),
        pytest.param("reorder", marks=pytest.mark.req("JF-SAFE-008")),
        pytest.param("resummarize", marks=pytest.mark.req("JF-SAFE-013")),
        pytest.param("drop-summary", marks=pytest.mark.req("JF-SAFE-006", "JF-SAFE-014")),
    ],
)
def test_each_bug_fails_its_property(bug: str) -> None:
    """Searching only the bug's properties (no shrinking, stop at the first failure, to keep
    this fast), one of them fails with an example; `jfsm profile` over the full catalog
    names the same ones (see the module docs of `adapters/toy.py`)."""
    result = _run(f"toy:{bug}", only=frozenset(MUTANTS[bug]), shrink=False, first_failure=True)
    failed = _failed(result)
    assert result.exit_code == 1
    assert len(failed) == 1 and failed <= MUTANTS[bug], failed
    rows = result.verdicts + (result.several.verdicts if result.several else [])
    row = next(v for v in rows if v["verdict"] == "fail")
    assert row["example"] and row["message"]
    # the JUnit root counts each search's failure, whichever search found it
    assert ET.fromstring(to_junit(result)).get("failures") == str(
        sum(v["verdict"] == "fail" for v in rows)
    )


def test_full_search_blames_only_the_bugs_property() -> None:
    """Over the whole catalog, with shrinking: the stale snapshot (openai-agents #4679's
    shape) is blamed on JF-SAFE-009 alone, with a short example."""
    result = _run("toy:stale-snapshot", examples=20, steps=12)
    assert result.several is not None
    assert not [v for v in result.verdicts if v["verdict"] == "fail"]  # one writer
    failed = {rid for rid, verdict in _verdicts(result.several).items() if verdict == "fail"}
    assert failed == {"JF-SAFE-009"}
    row = next(v for v in result.several.verdicts if v["id"] == "JF-SAFE-009")
    assert any("while the compaction is held" in step for step in row["example"])
    assert len(row["example"]) <= 6


@pytest.mark.req("JF-SAFE-004", "JF-SAFE-005")
@pytest.mark.parametrize(
    ("bug", "owner"), [("empty-publishes", "JF-SAFE-004"), ("placeholder", "JF-SAFE-005")]
)
def test_one_defect_one_id(bug: str, owner: str) -> None:
    """An empty summary published is JF-SAFE-004's alone, a placeholder JF-SAFE-005's alone:
    the runner disables a property once it failed and searches again, and the defect's
    after-effects are not blamed on another property (machine.py's ownership rule)."""
    result = _run(f"toy:{bug}", examples=25, steps=12, shrink=False)
    failed = {rid for rid, verdict in _verdicts(result).items() if verdict == "fail"}
    assert failed == {owner}


def test_scope_makes_properties_not_applicable() -> None:
    from jfsm_conformance.profile.adapter import Scope
    from jfsm_conformance.profile.adapters import toy

    narrow = Scope(library="toy", version="0", entry_point="x", failures=frozenset({"raise"}))
    result = run_profile(
        ProfileOptions(adapter="toy", examples=10, progress=lambda _: None),
        factory=toy.clear_then_add.factory,
        scope=narrow,
    )
    verdicts = _verdicts(result)
    for rid in ("JF-SAFE-003", "JF-SAFE-004", "JF-SAFE-009", "JF-SAFE-010"):
        assert verdicts[rid] == "not applicable"
    assert verdicts["JF-SAFE-002"] == "pass"


def test_missing_library_is_a_harness_error() -> None:
    result = _run("no-such-adapter")
    assert result.exit_code == 2 and "adapter" in (result.harness_error or "")


def test_cli_writes_report_and_junit(tmp_path: Path) -> None:
    from jfsm.cli import main

    junit = tmp_path / "junit.xml"
    code = main(
        [
            "profile",
            "--adapter",
            "toy:reorder",
            "--examples",
            "15",
            "--report-dir",
            str(tmp_path / "r"),
            "--junit-xml",
            str(junit),
        ]
    )
    assert code == 1
    assert "JF-SAFE-008" in (tmp_path / "r" / "profile.md").read_text("utf-8")
    assert '<failure message="kept messages are out of append order' in junit.read_text("utf-8")


LIBRARIES = {
    "openai-agents": "agents",
    "langchain": "langchain",
    "langchain-sync": "langchain",
    "langchain-trim": "langchain",
    "langmem": "langmem",
    "llamaindex-summary": "llama_index",
    "llamaindex-memory": "llama_index",
    "adk": "google.adk",
    "semantic-kernel": "semantic_kernel",
    "strands": "strands",
    "agno": "agno",
    "autogen-unbounded": "autogen_core",
    "autogen-buffered": "autogen_core",
    "autogen-head-tail": "autogen_core",
    "autogen-token-limited": "autogen_core",
    "pydantic-ai": "pydantic_ai",
    "maf": "agent_framework",
    "maf-default-history": "agent_framework",
    "crewai": "crewai",
    "crewai-strict": "crewai",
    "camel": "camel",
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is missing
        return False


@pytest.mark.parametrize("adapter", sorted(LIBRARIES))
def test_library_adapter_runs(adapter: str) -> None:
    if not _installed(LIBRARIES[adapter]):
        extra = ADAPTERS[adapter].extra
        pytest.skip(
            f"{LIBRARIES[adapter]} is not installed (extra {extra}, one of the profile-* extras)"
        )
    result = _run(adapter, examples=6, steps=10, shrink=False)
    assert result.harness_error is None, result.harness_error
    verdicts = _verdicts(result)
    assert set(verdicts) == set(ALL)
    assert result.recorder.reached["ok"] > 0
    for row in result.verdicts:
        if row["verdict"] in ("fail", "by design"):
            assert row["example"], row["id"]


def test_matrix_results_page_writer(tmp_path: Path) -> None:
    from benchmarks.safety_matrix import known_issue, write_results

    result = _run("toy:error-as-summary", only=frozenset({"JF-SAFE-002"}), shrink=False)
    report = json.loads(json.dumps(to_json(result)))
    report["matrix"] = {"library": "langchain", "version": "1.3.14", "why": "test"}
    report["end_to_end"] = {"gone": ["#m1 x"], "messages": ["Here is a summary"]}
    page = write_results([report], tmp_path / "results.md")
    # the verdicts are a picture drawn at build time; each failing cell's link is recorded
    assert "\n<!-- jfsm:safety-matrix -->\n" in page
    assert report["matrix"]["links"] == {
        "JF-SAFE-002": "https://github.com/langchain-ai/langchain/issues/38867"
    }
    assert (
        "[langchain-ai/langchain#38867](https://github.com/langchain-ai/langchain/issues/38867)"
        in page
    )
    assert known_issue("langchain", "JF-SAFE-002", "1.3.15").endswith("failing again?)")
    assert known_issue("langchain", "JF-SAFE-005", "1.3.14", "published ['Here is']") is None
    assert known_issue("langchain", "JF-SAFE-005", "1.3.14", "Error generating summary: x")
    assert (
        known_issue("openai-agents", "JF-SAFE-010", "0.16.0") == "openai/openai-agents-python#3116"
    )
    assert known_issue("langmem", "JF-SAFE-004", "0.0.30") is None


@pytest.mark.req("JF-SAFE-009")
def test_replay_reproduces_a_recorded_failure(tmp_path: Path) -> None:
    from jfsm_conformance.profile.runner import replay

    result = _run("toy:stale-snapshot", only=frozenset({"JF-SAFE-009"}), examples=20, steps=12)
    write_report(result, tmp_path)
    assert result.several is not None
    row = next(v for v in result.several.verdicts if v["id"] == "JF-SAFE-009")
    trace = Path(row["trace_path"])
    assert json.loads(trace.read_text("utf-8"))["property"] == "JF-SAFE-009"
    assert f"jfsm profile replay {trace}" in (tmp_path / "profile.md").read_text("utf-8")
    lines: list[str] = []
    assert replay(trace, progress=lines.append) == 1
    assert any(line.startswith("reproduced: JF-SAFE-009") for line in lines)
    assert replay(trace, adapter="toy", progress=lines.append) == 0


@pytest.mark.req("JF-SAFE-012", "JF-SAFE-007")
def test_replay_judges_the_property_it_was_recorded_for(tmp_path: Path) -> None:
    """A JF-SAFE-012 trace whose steps also break JF-SAFE-007, which the checks meet first:
    the replay judges JF-SAFE-012 and lists JF-SAFE-007 after it (before: "reproduced:
    JF-SAFE-007"); against a fixed library it exits 0 (R146)."""
    from jfsm_conformance.profile.runner import replay

    result = _run("toy:keep-summarized", only=frozenset({"JF-SAFE-012"}), examples=15, steps=10)
    write_report(result, tmp_path)
    row = next(v for v in result.verdicts if v["id"] == "JF-SAFE-012")
    assert row["verdict"] == "fail"
    lines: list[str] = []
    assert replay(Path(row["trace_path"]), progress=lines.append) == 1
    verdicts = [line for line in lines if not line.startswith(("replaying", "recorded"))]
    assert verdicts[0].startswith("reproduced: JF-SAFE-012: the compaction grew the history")
    assert verdicts[1].startswith(
        "also fails on these steps (not judged by this replay): JF-SAFE-007"
    )
    lines.clear()
    assert replay(Path(row["trace_path"]), adapter="toy", progress=lines.append) == 0
    assert "fixed: JF-SAFE-012 no longer fails on these steps" in lines


@pytest.mark.req("JF-SAFE-009")
def test_several_writers_is_a_second_search_beside_one_writer(tmp_path: Path) -> None:
    """An adapter that declares several writers is searched twice: with one writer nothing
    is appended while a compaction is held (JF-SAFE-009 not applicable there), with two
    overlapping writers the stale snapshot fails JF-SAFE-009; the report carries both, and
    the several-writers trace replays in its own dimension."""
    from jfsm_conformance.profile.runner import replay

    result = _run("toy:stale-snapshot", examples=20, steps=12)
    assert result.several is not None
    assert _verdicts(result)["JF-SAFE-009"] == "not applicable"
    assert _verdicts(result.several)["JF-SAFE-009"] == "fail"
    assert result.exit_code == 1
    write_report(result, tmp_path)
    data = json.loads((tmp_path / "profile.json").read_text("utf-8"))
    assert data["scope"]["writers"] == "multi"
    assert {v["id"]: v["verdict"] for v in data["several_writers"]["verdicts"]}[
        "JF-SAFE-009"
    ] == "fail"
    assert "## Verdict per property, two overlapping writers" in (
        tmp_path / "profile.md"
    ).read_text("utf-8")
    trace = tmp_path / "traces" / "several-writers" / "JF-SAFE-009.json"
    assert json.loads(trace.read_text("utf-8"))["writers"] == "multi"
    assert replay(trace, progress=lambda _: None) == 1
    assert replay(trace, adapter="toy", progress=lambda _: None) == 0
    one = _run("toy:stale-snapshot", examples=10, steps=10, writers="single")
    assert one.several is None and _verdicts(one)["JF-SAFE-009"] == "not applicable"


def test_one_writer_adapter_has_no_second_search() -> None:
    from jfsm_conformance.profile.adapter import Scope
    from jfsm_conformance.profile.adapters import toy

    single = Scope(library="toy", version="0", entry_point="x", hold=True)
    result = run_profile(
        ProfileOptions(adapter="toy", examples=5, progress=lambda _: None),
        factory=toy.adapter.factory,
        scope=single,
    )
    assert result.several is None
    assert to_json(result)["several_writers"] is None


def test_version_needs_a_library_adapter() -> None:
    from jfsm.cli import main

    assert main(["profile", "--adapter", "toy", "--version", "1.0"]) == 2


def test_properties_match_the_catalog() -> None:
    """One property per SAFE requirement, and the SAFE requirements say `profile`."""
    from jfsm.spec import requirements

    safe = {r["id"]: r for r in requirements() if r["area"] == "SAFE"}
    assert set(safe) == {p.id for p in PROPERTIES}
    assert all(r["verification"] == "profile" and r["reason"] for r in safe.values())
    assert len({p.name for p in PROPERTIES}) == len(PROPERTIES)
