"""The detection rates page: rows measured in separate runs merge into one table (the rows
measured now replace the same adapter and release, the others stay), in the results page's
order, each naming its budget and commit; and one findings page serves every cell of one
defect."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.safety_detection import merge_rows, rows_from_reports, write_page


def _expected(adapter: str, version: str, cells: dict[str, str]) -> dict[str, Any]:
    verdicts = [{"id": rid, "verdict": v} for rid, v in cells.items()]
    return {"adapter": adapter, "matrix": {"version": version}, "verdicts": verdicts}


EXPECTED = [
    _expected("langchain-trim", "1.3.14", {"JF-SAFE-003": "fail", "JF-SAFE-001": "pass"}),
    _expected("adk", "2.13.0", {"JF-SAFE-004": "fail"}),
]


def _report(path: Path, verdicts: dict[str, str], seconds: float = 2.0) -> None:
    path.mkdir(parents=True)
    report = {
        "duration_s": seconds,
        "exit_code": 1,
        "examples": 30,
        "steps": 16,
        "verdicts": [{"id": rid, "verdict": v} for rid, v in verdicts.items()],
    }
    (path / "profile.json").write_text(json.dumps(report), "utf-8")


def test_rows_of_separate_runs_merge_into_one_page(tmp_path: Path) -> None:
    base = tmp_path / "detection"
    _report(base / "langchain-trim-1.3.14" / "1", {"JF-SAFE-003": "fail"})
    _report(base / "langchain-trim-1.3.14" / "2", {"JF-SAFE-003": "not exercised"})
    _report(base / "adk-2.13.0" / "1", {"JF-SAFE-004": "fail", "JF-SAFE-009": "fail"})
    trim = rows_from_reports(tmp_path, EXPECTED, adapters=frozenset({"langchain-trim"}))
    assert [(r["adapter"], r["found"], r["runs"]) for r in trim] == [
        ("langchain-trim", {"JF-SAFE-003": 1}, 2)
    ]
    adk = rows_from_reports(tmp_path, EXPECTED, versions=frozenset({"2.13.0"}))
    assert adk[0]["spurious"] == {"JF-SAFE-009": 1}
    assert (adk[0]["examples"], adk[0]["steps"]) == (30, 16)

    # adk measured first, langchain-trim later: both rows, in the results page's order
    merged = merge_rows(merge_rows([], adk, EXPECTED), trim, EXPECTED)
    assert [r["adapter"] for r in merged] == ["langchain-trim", "adk"]
    # measuring langchain-trim again replaces its row and keeps adk's
    again = [{**trim[0], "commit": "abc1234"}]
    merged = merge_rows(merged, again, EXPECTED)
    assert [(r["adapter"], r["commit"] == "abc1234") for r in merged] == [
        ("langchain-trim", True),
        ("adk", False),
    ]

    page = write_page(merged, tmp_path / "detection.md", page_rows=len(EXPECTED))
    assert "2 of the 2 rows" in page
    assert "| langchain-trim | 1.3.14 | JF-SAFE-003 fail | 1/2 | 0 | 0 |" in page
    assert "| 30 x 16 | abc1234 |" in page
    assert "| adk | 2.13.0 | JF-SAFE-004 fail | 1/1 | JF-SAFE-009 1x |" in page
    assert (
        "Lowest rate over all cells: 1/2; cells below 19 in 20: 1; "
        "rows with a spurious verdict or a harness error: 1." in page
    )


def test_one_defect_one_findings_page(tmp_path: Path) -> None:
    from benchmarks.safety_matrix import write_results

    verdicts = [
        {"id": rid, "verdict": v, "title": rid, "example": ["x"], "message": "m", "reason": None}
        for rid, v in (("JF-SAFE-010", "fail"), ("JF-SAFE-011", "fail"), ("JF-SAFE-001", "pass"))
    ]
    report = {
        "adapter": "llamaindex-summary",
        "matrix": {"library": "llama-index-core", "version": "0.14.25", "why": "current"},
        "verdicts": verdicts,
        "summarizer_reached": {},
    }
    page = write_results([report], tmp_path / "results.md")
    link = "[llamaindex-delete-then-set.md](findings/llamaindex-delete-then-set.md)"
    assert f"{link} (one defect with JF-SAFE-011: one page)" in page
    assert f"{link} (one defect with JF-SAFE-010: one page)" in page
