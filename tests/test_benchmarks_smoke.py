"""Smoke test of the benchmark harness (`benchmarks.run --quick`): it runs, and its JSON and
Markdown are well-formed. Timings are never asserted: the machine is shared and noisy."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.run import SECTIONS, main


def _tables(markdown: str) -> list[list[str]]:
    """The Markdown tables of a document, as lists of their lines."""
    tables: list[list[str]] = []
    current: list[str] = []
    for line in markdown.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    if current:
        tables.append(current)
    return tables


def test_quick_run_writes_every_section(tmp_path: Path) -> None:
    assert main(["--quick", "--out", str(tmp_path)]) == 0

    results = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert results["meta"]["quick"] is True
    for section in SECTIONS:
        assert section in results, section
        assert "error" not in results[section], results[section].get("traceback")

    fp = results["footprint"]
    assert fp["cells"] and fp["ratios_largest_over_smallest"] and fp["naive"]
    for cell in fp["cells"]:
        for key in ("record_round", "before_generation", "naive_measure_text"):
            assert cell[key]["n"] > 0 and cell[key]["median_us"] > 0, (cell["cell"], key)
    assert set(fp["goal"]) >= {"met", "record_round_worst_ratio", "before_generation_worst_ratio"}

    du = results["durable"]
    assert du["throughput"]["same_final_state"] is True
    assert du["throughput"]["filestore_commits_per_s"] > 0
    assert du["throughput"]["sqlite_commits_per_s"] > 0
    assert {r["variant"] for r in du["reopen"]} == {"snapshot only", "snapshot + log"}
    assert len(du["io_strategies"]) == 4
    assert isinstance(du["goal"]["met"], bool)

    su = results["suite"]
    assert "available" in su
    if su["available"]:
        for part in ("roundtrips", "machines", "quick_profile"):
            assert part in su

    me = results["memory"]
    assert [c["case"] for c in me["cases"]] == ["built in memory", "reopened from disk"]
    for case in me["cases"]:
        assert case["peak_rss_mib"] > 0 and case["footprint"] > 0


def test_quick_markdown_renders(tmp_path: Path) -> None:
    assert main(["--quick", "--out", str(tmp_path), "--only", "footprint", "durable"]) == 0
    markdown = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert markdown.startswith("# jfsm benchmarks\n")
    for heading in (
        "## Goals",
        "## 1. O(change), not O(store)",
        "## 2. Durable file store vs SQLite",
        "## suite: not run",
    ):
        assert heading in markdown, heading
    tables = _tables(markdown)
    assert len(tables) >= 6
    for table in tables:
        width = table[0].count("|")
        assert set(table[1].replace("|", "")) == {"-"}, table[:2]
        for row in table:
            assert row.endswith("|") and row.count("|") == width, row
    cells = [c.strip() for t in tables for row in t for c in row.split("|")]
    assert "None" not in cells and "nan" not in cells
