"""The benchmark pages describe the code as it is (R228, R229): they come from one run of
`python -m benchmarks.run`, on a commit that holds every change to the code they measure,
and no two of them disagree on a measure they share.

When `test_the_benchmark_pages_are_one_fresh_run` fails, measure again on a quiet machine
and commit what the run writes: `uv run python -m benchmarks.run` (about half an hour on 2
cores; `uptime` below 2.5 first). The other tests prove the checks can fail.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from benchmarks.common import git
from benchmarks.pages import CITES, MEASURED, PAGES, disagreements, not_one_run, stale

ROOT = Path(__file__).resolve().parents[2]
PAGES_DIR = ROOT / "docs" / "benchmarks"

_HISTORY = git("rev-parse", "--is-shallow-repository")
needs_history = pytest.mark.skipif(
    _HISTORY != "false",
    reason="needs the repository's full git history (not a git checkout, or a shallow clone: "
    "git fetch --unshallow)",
)


def _meta(commit: str, **more: Any) -> dict[str, Any]:
    return {
        "command": "python -m benchmarks.run",
        "quick": False,
        "started_utc": "2026-12-06 10:00 UTC",
        "commit": commit[:7],
        "commit_full": commit,
        "dirty": False,
        **more,
    }


def _write(folder: Path, pages: dict[str, dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for page, data in pages.items():
        (folder / f"{page}.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


@needs_history
def test_the_benchmark_pages_are_one_fresh_run() -> None:
    """Every page of `docs/benchmarks/` (not its past measurements) from one full run, on a
    commit that contains the last change to the code each section measures."""
    problems = not_one_run(PAGES_DIR) + stale(PAGES_DIR) + disagreements(PAGES_DIR)
    assert problems == [], "measure again: uv run python -m benchmarks.run"


def test_every_section_lists_the_code_it_measures() -> None:
    sections = {s for group in PAGES.values() for s in group}
    assert set(MEASURED) == sections
    for section, paths in MEASURED.items():
        assert f"benchmarks/{section}.py" in paths, section
        for path in paths:
            plain = path.removeprefix(":(exclude)")
            assert (ROOT / plain).exists(), (section, path)
    from benchmarks.run import SECTIONS

    assert set(SECTIONS) == sections


@needs_history
def test_the_staleness_check_can_fail(tmp_path: Path) -> None:
    head = git("rev-parse", "HEAD")
    assert head
    fresh = {page: {"meta": _meta(head)} for page in PAGES}
    assert stale(_write(tmp_path / "fresh", fresh)) == []
    # the commit before the last change to the concurrency benchmark's own code
    last = git("log", "-1", "--format=%H", "--", *MEASURED["concurrency"])
    assert last
    before = git("rev-parse", f"{last}^")
    assert before
    old = {**fresh, "concurrency": {"meta": _meta(before)}}
    found = stale(_write(tmp_path / "old", old))
    assert len(found) == 1 and found[0].startswith("concurrency: section concurrency measured at")
    assert last[:7] in found[0]
    dirty = {**fresh, "postgres": {"meta": _meta(head, dirty=True)}}
    assert stale(_write(tmp_path / "dirty", dirty)) == [
        "postgres: measured with local changes to the code it measures"
    ]
    unknown = {**fresh, "results": {"meta": _meta("f" * 40)}}
    assert stale(_write(tmp_path / "unknown", unknown)) == [
        "results: commit fffffff is not in this repository's history"
    ]


def test_pages_from_different_runs_or_a_quick_run_are_refused(tmp_path: Path) -> None:
    one = {page: {"meta": _meta("a" * 40)} for page in PAGES}
    assert not_one_run(_write(tmp_path / "one", one)) == []
    two = {**one, "postgres": {"meta": _meta("a" * 40, started_utc="2026-12-07 10:00 UTC")}}
    [problem] = not_one_run(_write(tmp_path / "two", two))
    assert problem.startswith("the pages come from different runs")
    quick = {**one, "results": {"meta": _meta("a" * 40, quick=True)}}
    assert not_one_run(_write(tmp_path / "quick", quick)) == [
        "results.json is from a quick run: its numbers mean nothing"
    ]
    before = {**one, "concurrency": {"meta": {"when": "2026-12-04 16:54 UTC"}}}
    folder = _write(tmp_path / "before", before)
    (folder / "postgres.json").unlink()
    assert not_one_run(folder) == [
        "postgres.json is missing",
        "concurrency.json names no run (no meta.commit_full: from before R228)",
    ]


def test_two_pages_disagreeing_on_a_measure_are_refused(tmp_path: Path) -> None:
    name = CITES["postgres"][0]
    agree = {
        "concurrency": {"measures": {name: 6040.4, "only here": 1.0}},
        "postgres": {"measures": {name: 6040.4, "store commits/s": 686.7}},
    }
    assert disagreements(_write(tmp_path / "agree", agree)) == []
    differ = {**agree, "postgres": {"measures": {name: 686.7}}}
    assert disagreements(_write(tmp_path / "differ", differ)) == [
        f"{name!r}: 6040.4 on concurrency, 686.7 on postgres"
    ]


def test_the_past_measurements_say_so() -> None:
    """The pages under `history/` are not the run's: each says it is a past measurement and
    names the commits it measured; no page of the run lives there."""
    past = sorted((PAGES_DIR / "history").glob("*.md"))
    assert past
    for page in past:
        text = page.read_text(encoding="utf-8")
        assert '!!! note "A past measurement"' in text.split("\n## ", 1)[0], page.name
        assert re.search(r"commits? `[0-9a-f]{7}`", text), page.name
        assert page.stem not in PAGES
