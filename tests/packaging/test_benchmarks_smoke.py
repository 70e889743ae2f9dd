"""Smoke test of the benchmark harness (`benchmarks.run --quick`): it runs, and its JSON and
Markdown are well-formed. Timings are never asserted: the machine is shared and noisy."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.pages import PAGES, disagreements, not_one_run
from benchmarks.report import render
from benchmarks.run import SECTIONS, main

ROOT = Path(__file__).resolve().parents[2]


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


@pytest.mark.slow
def test_quick_run_writes_every_section(tmp_path: Path) -> None:
    assert main(["--quick", "--out", str(tmp_path)]) == 0

    results = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert results["meta"]["quick"] is True
    for page, sections in PAGES.items():
        data = json.loads((tmp_path / f"{page}.json").read_text(encoding="utf-8"))
        for section in sections:
            shown = data if page != "results" else data[section]
            assert "error" not in shown, shown.get("traceback")
    results |= {
        "concurrency": json.loads((tmp_path / "concurrency.json").read_text("utf-8")),
        "postgres": json.loads((tmp_path / "postgres.json").read_text("utf-8")),
        "observability": json.loads((tmp_path / "observability.json").read_text("utf-8")),
    }
    assert set(SECTIONS) <= set(results)

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

    st = results["startup"]
    assert st["rows"][0]["variant"] == "python -c pass"
    assert all(r["ratio_to_bare_python"] for r in st["rows"]) and isinstance(
        st["goal"]["met"], bool
    )

    ob = results["observability"]
    assert set(ob["variants"]) == {"no extra", "API, no SDK", "SDK, in memory"}
    assert all(v["rounds_per_s"] > 0 for v in ob["variants"].values())
    assert "From one run of" in (tmp_path / "observability.md").read_text("utf-8")

    me = results["memory"]
    assert [c["case"] for c in me["cases"]] == ["built in memory", "reopened from disk"]
    for case in me["cases"]:
        assert case["peak_rss_mib"] > 0 and case["footprint"] > 0

    do = results["docs"]
    assert do["real"]["strict"] is True and do["real"]["warnings"] == 0
    for variant in ("real", "baseline"):
        assert do[variant]["n"] == 1 and do[variant]["cpu_s_median"] > 0, variant
    # Without the generation hook the generated pages are missing from the baseline.
    assert do["baseline"]["pages"] < do["real"]["pages"]
    assert isinstance(do["goal"]["met"], bool)

    # every page of the run (R228): the same meta, named on the page, measures that agree
    pages = {p: json.loads((tmp_path / f"{p}.json").read_text("utf-8")) for p in PAGES}
    assert all(page["meta"] == results["meta"] for page in pages.values())
    commit = results["meta"]["commit"]
    for name in PAGES:
        markdown = (tmp_path / f"{name}.md").read_text(encoding="utf-8")
        assert f"on commit `{commit}`" in markdown.split("\n\n", 2)[1], name
        assert "Quick mode" in markdown, name
        assert pages[name]["measures"], name
    assert not_one_run(tmp_path) == [
        f"{p}.json is from a quick run: its numbers mean nothing" for p in PAGES
    ]
    assert disagreements(tmp_path) == []
    # every plot a page names is drawn by the docs build from the page's JSON
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        from jfdocs.plots import concurrency_plots, postgres_plots, results_plots
    finally:
        sys.path.remove(str(ROOT / "docs" / "hooks"))
    drawers = {"results": results_plots, "concurrency": concurrency_plots}
    drawers["postgres"] = postgres_plots
    for name, draw in drawers.items():
        markdown = (tmp_path / f"{name}.md").read_text(encoding="utf-8")
        named = set(re.findall(r"\]\(([\w-]+\.svg)\)", markdown))
        assert named <= set(draw(pages[name])), name
    assert "results-footprint.svg" in results_plots(pages["results"])


def test_the_main_job_is_measured_once_and_cited() -> None:
    """The suite section's measurement of the main job is what the concurrency page shows
    (R228), under the same measure's name on both pages; a figure only one page has is
    never cited."""
    from benchmarks.pages import MAIN_JOB_WALL, PG_COMMITS, PG_ROUNDS, cite
    from benchmarks.run import _main_job

    after = {"run": True, "wall_s": 14.6, "peak_rss_mib": 550.0, "exit_code": 0}
    suite = {"quick_profile": {"run": True, "after": after}}
    assert _main_job({"suite": suite}) == {**after, "cited_from": "suite"}
    assert _main_job({"suite": {"quick_profile": {"run": False}}}) is None
    rows = [{"games": 64, "rounds_per_s": 6040.4}]
    pages: dict[str, dict[str, Any]] = {
        "results": {"suite": suite},
        "concurrency": {"variants": {"postgres": rows}, "main_job": _main_job({"suite": suite})},
        "postgres": {
            "available": True,
            "pool": {"store_commits_per_s": {"postgres": {"64": 4000.0}}, "old_store": []},
        },
    }
    cite(pages)
    assert pages["results"]["measures"][MAIN_JOB_WALL] == 14.6
    assert pages["concurrency"]["measures"][MAIN_JOB_WALL] == 14.6
    assert pages["concurrency"]["cited"][PG_COMMITS] == 4000.0
    assert pages["postgres"]["cited"] == {PG_ROUNDS: 6040.4}
    del pages["postgres"]
    cite(pages)
    assert PG_COMMITS not in pages["concurrency"]["cited"]


def _assert_well_formed(tables: list[list[str]]) -> None:
    for table in tables:
        width = table[0].count("|")
        assert set(table[1].replace("|", "")) == {"-"}, table[:2]
        for row in table:
            assert row.endswith("|") and row.count("|") == width, row
    cells = [c.strip() for t in tables for row in t for c in row.split("|")]
    assert "None" not in cells and "nan" not in cells


def test_quick_markdown_renders(tmp_path: Path) -> None:
    assert main(["--quick", "--out", str(tmp_path), "--only", "footprint", "durable"]) == 0
    markdown = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert markdown.startswith("# jfsm benchmarks\n")
    for heading in (
        "## Goals",
        "## 1. O(change), not O(store)",
        "## 2. Durable file store vs SQLite",
        "## suite: not run",
        "## docs: not run",
    ):
        assert heading in markdown, heading
    tables = _tables(markdown)
    assert len(tables) >= 6
    _assert_well_formed(tables)


def _docs_result(real_cpu: float) -> dict[str, Any]:
    def build(cpu: float, pages: int, warnings: int, strict: bool) -> dict[str, Any]:
        runs = [{"cpu_s": cpu, "wall_s": cpu + 1, "pages": pages, "warnings": warnings}] * 3
        return {
            "n": 3,
            "cpu_s_median": cpu,
            "wall_s_median": cpu + 1,
            "pages": pages,
            "warnings": warnings,
            "runs": runs,
            "strict": strict,
        }

    return {
        "config": {"repeats": 3},
        "real": build(real_cpu, 40, 0, True),
        "baseline": {**build(4.0, 32, 120, False), "not_strict_because": "pages are missing"},
        "cpu_ratio_real_over_baseline": round(real_cpu / 4.0, 3),
        "wall_ratio_real_over_baseline": round((real_cpu + 1) / 5.0, 3),
        "goal": {"text": "real build median CPU < 20 s", "cpu_s": real_cpu, "met": real_cpu < 20},
    }


def test_docs_section_renders_its_table_ratio_and_goal() -> None:
    meta = {
        "command": "python -m benchmarks.run --only docs",
        "started_utc": "2026-12-03 06:00 UTC",
        "commit": "abc1234",
        "dirty": False,
        "python": "3.11.7",
        "platform": "Linux x86_64",
        "cpus": 2,
        "loadavg_before": [1.0, 1.0, 1.0],
        "loadavg_after": [1.0, 1.0, 1.0],
        "total_s": 50.0,
        "quick": False,
    }
    met = render({"meta": meta, "docs": _docs_result(6.0)})
    assert "## 5. Docs build" in met
    assert "| 5. Docs build CPU | real build median CPU < 20 s | 6.0 s | yes |" in met
    assert "| A. real | yes | 3 | 40 | 0 | 6.00 | 7.00 | 6.00, 6.00, 6.00 |" in met
    assert "| B. no hook | **no** | 3 | 32 | 120 | 4.00 | 5.00 | 4.00, 4.00, 4.00 |" in met
    assert "CPU **1.50×**, wall 1.40×" in met
    assert "B is not strict: pages are missing" in met
    assert met.rstrip().endswith(": met.")
    _assert_well_formed(_tables(met))
    missed = render({"meta": meta, "docs": _docs_result(25.0)})
    assert "| 5. Docs build CPU | real build median CPU < 20 s | 25.0 s | **no** |" in missed
    assert missed.rstrip().endswith("**not met**.")


def test_suite_goals_are_judged_from_the_measured_profiles() -> None:
    """Issue 14's goals (standard under 3 min, the suite's peak RSS under 1 GiB in every
    profile) are rows of the Goals table, judged from the run's numbers, never asserted."""
    from benchmarks.report import _suite_goals

    def profile(wall: float, rss: float) -> dict[str, Any]:
        return {"run": True, "after": {"run": True, "wall_s": wall, "peak_rss_mib": rss}}

    suite = {
        "quick_profile": profile(19.0, 540.0),
        "standard_profile": profile(80.0, 560.0),
        "thorough_profile": {"run": True, "peak_rss_mib": 770.0, "limit_s": 0.0},
    }
    rows = _suite_goals(suite)
    assert rows == [
        [
            "3c. main job (`jfsm conformance`)",
            "wall ≤ 20 s on an idle machine; peak RSS reported",
            "19.0 s; peak RSS 540 MiB (suite), "
            "0 MiB (with the processes it started, sampled every 0.5 s)",
            "yes",
        ],
        ["3a. standard profile", "wall < 180 s on this machine", "80 s", "yes"],
        [
            "3b. suite's peak RSS",
            "< 1024 MiB in every profile",
            "quick 540 MiB, standard 560 MiB, thorough 770 MiB",
            "yes",
        ],
    ]
    suite["thorough_profile"] = {"run": True, "peak_rss_mib": 1183.0, "limit_s": 240.0}
    suite["standard_profile"] = profile(181.0, 560.0)
    suite["quick_profile"] = profile(41.0, 540.0)
    rows = _suite_goals(suite)
    assert rows[0][-1] == rows[1][-1] == rows[2][-1] == "**no**"
    assert "thorough (stopped early) 1183 MiB" in rows[2][2]
    assert _suite_goals({}) == []


def test_concurrency_benchmark_runs_judges_its_goals_and_draws_its_plots(tmp_path: Path) -> None:
    """`benchmarks/concurrency.py` at tiny sizes over the file store: both variants run at
    every N, the goals are judged from the run's numbers (never asserted: the machine is
    shared), the page renders, and the docs build's plots draw from its JSON."""

    from benchmarks import concurrency as bench

    cfg = {**bench.QUICK, "games": [1, 3], "seconds": 0.1, "goal_games": [3]}
    opener = bench._file_opener(str(tmp_path))
    variants = {"filestore": (opener, True), "filestore unfrozen": (opener, False)}
    rows = bench._series(variants, cfg, lambda m: None)
    assert set(rows) == {"filestore", "filestore unfrozen"}
    for series in rows.values():
        assert [r["games"] for r in series] == [1, 3]
        assert all(r["rounds_per_s"] > 0 and r["callback_max_ms"] is not None for r in series)
        for r in series:
            assert r["ready_cpu_ms"] == round(r["games"] * r["cpu_ms_per_round"], 3)
    result = {
        "config": cfg,
        "goal_callback_ms": bench.CALLBACK_GOAL_MS,
        "idle": {"lag": {"max_ms": 0.5, "p99_ms": 0.4}, "callback": {"max_ms": 0.1}},
        "variants": rows,
        "postgres": {"available": False, "reason": "not in this test"},
    }
    result["goals"] = bench._goals(result, cfg)
    [goal] = result["goals"]
    assert goal["met"] == (rows["filestore"][-1]["callback_max_ms"] <= bench.CALLBACK_GOAL_MS)
    page = bench.render(result)
    assert "| longest callback, filestore, 3 games |" in page
    assert "PostgreSQL not run: not in this test" in page
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        from jfdocs.plots import concurrency_plots
    finally:
        sys.path.remove(str(ROOT / "docs" / "hooks"))
    plots = json.loads(json.dumps(result))  # what the JSON file holds
    drawn = concurrency_plots(plots)
    names = {"concurrency-rounds.svg", "concurrency-callback.svg", "concurrency-latency.svg"}
    assert set(drawn) == names and all(f"({name})" in page for name in names)
    assert all(svg.lstrip().startswith("<?xml") and "<svg" in svg for svg in drawn.values())
    assert concurrency_plots({"filestore": {}}) == {}  # a JSON from before issue 32


def test_a_partial_run_needs_its_own_folder(capsys: pytest.CaptureFixture[str]) -> None:
    """`--only` without `--out` is refused (exit 2) before measuring anything: the docs'
    pages come from one whole run (R228)."""
    with pytest.raises(SystemExit) as exited:
        main(["--only", "startup"])
    assert exited.value.code == 2
    assert "give --out DIR" in capsys.readouterr().err
