"""The results page is measured a few rows at a time: `benchmarks.safety_matrix` runs only the
cells chosen by `--only`, `--versions` and `--adapter`, and `--merge` keeps every other row of
the published JSON as it was (no install, no profile run here: `run_cell` is replaced)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from .release_venvs import ROOT


def test_chosen_cells_run_and_the_other_rows_stay_as_they_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks import safety_matrix
    from benchmarks.safety_matrix import Cell

    published = json.loads((ROOT / "docs" / "safety" / "results.json").read_text("utf-8"))
    key = safety_matrix._row_key
    # the published rows less one crewAI row, so that the run adds a row as well as replaces
    dropped = next(r for r in published if key(r) == ("crewai", "1.13.0", "crewai-strict"))
    old = [r for r in published if r is not dropped]
    (tmp_path / "old.json").write_text(json.dumps(old, ensure_ascii=False, indent=1), "utf-8")
    ran: list[tuple[str, str, tuple[str, ...]]] = []

    def fake_run_cell(
        cell: Cell, workdir: Path, examples: int, source: Path, **kw: Any
    ) -> list[dict[str, Any]]:
        adapters = kw.get("adapters") or cell.adapters
        ran.append((cell.library, cell.version, adapters))
        reports = []
        for adapter in adapters:
            report = copy.deepcopy(next(r for r in published if r["adapter"] == adapter))
            report["matrix"] = {"library": cell.library, "version": cell.version, "why": "?"}
            report["duration_s"] = -1.0  # tells the rows run now from the kept ones
            reports.append(report)
        return reports

    monkeypatch.setattr(safety_matrix, "run_cell", fake_run_cell)
    args = ["--workdir", str(tmp_path), "--merge", str(tmp_path / "old.json")]
    out = ["--json", str(tmp_path / "new.json"), "--out", str(tmp_path / "results.md")]
    assert safety_matrix.main(["--only", "crewai", "--versions", "1.13.0", *args, *out]) == 0
    assert ran == [("crewai", "1.13.0", ("crewai", "crewai-strict"))]
    new = json.loads((tmp_path / "new.json").read_text("utf-8"))
    rerun = {("crewai", "1.13.0", "crewai"), ("crewai", "1.13.0", "crewai-strict")}
    assert {key(r) for r in new} == {key(r) for r in published}
    assert [key(r) for r in new] == [key(r) for r in published]  # the page's order
    kept = {key(r): r for r in old}
    for row in new:
        if key(row) in rerun:
            assert row["duration_s"] == -1.0
            assert row["matrix"]["why"] == "two minors back"  # named by MATRIX
        else:  # byte for byte as it was published
            assert json.dumps(row, ensure_ascii=False) == json.dumps(
                kept[key(row)], ensure_ascii=False
            )

    ran.clear()
    again = ["--only", "crewai", "--adapter", "crewai-strict", "--versions", "1.14.7,9.9.9"]
    assert safety_matrix.main([*again, *args, *out]) == 0
    assert ran == [("crewai", "1.14.7", ("crewai-strict",))]
    ran.clear()
    assert safety_matrix.main(["--versions", "9.9.9", *args, *out]) == 0
    assert ran == []
    assert [key(r) for r in json.loads((tmp_path / "new.json").read_text("utf-8"))] == [
        key(r) for r in old
    ]
