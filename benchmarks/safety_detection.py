"""How often the safety profile finds each cell of the results page: fresh runs, one seed each.

```
uv run python -m benchmarks.safety_detection [--runs 20] [--only LIB] [--jobs N]
    [--versions X,Y] [--adapters A,B] [--examples 30] [--steps 16] [--workdir DIR]
    [--expected docs/safety/results.json] [--from-reports] [--fresh]
    [--json docs/safety/detection.json] [--out docs/safety/detection.md]
```

For every `(library, version)` of `benchmarks.safety_matrix.MATRIX` and each of its
adapters, it installs that release into a throwaway venv (reused from `--workdir`), runs
`jfsm profile --adapter A --seed K --no-shrink` for K = 1..runs (a fresh random search each,
at the given budget), and counts in how many runs each non-passing cell of the results page
(`--expected`, the JSON the matrix wrote) came out the same (fail, by design). A verdict the
page does not have (a spurious failure) is counted too. Shrinking is off: it changes the
example, not whether the failure is found. Slow: 20 runs of every adapter are several
minutes per library (installs come from uv's cache), so rows are measured a few at a time:
the rows measured now replace the rows of the same adapter and release in `--json` (the
published data, `docs/safety/detection.json`), the others are kept (`--fresh`: start from
none), and the page `--out` is written whole from the merged rows, in the results page's
order. Each row names its budget and the jfsm commit it was measured at, so rows of
different runs stay told apart. `--from-reports` runs nothing and tabulates the runs already
under `--workdir` (interrupted ones too).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.safety_matrix import MATRIX, ROOT
from jfsm_conformance.profile.isolated import install_release

__all__ = ["main", "measure", "merge_rows", "rows_from_reports", "verdict_map", "write_page"]

_OK = ("pass", "not applicable", "not exercised")


def _run_once(venv: Path, adapter: str, seed: int, out: Path, budget: tuple[int, int]) -> dict:
    subprocess.run(
        [
            str(venv / "bin" / "jfsm"),
            "profile",
            "--adapter",
            adapter,
            "--seed",
            str(seed),
            "--no-shrink",
            "--examples",
            str(budget[0]),
            "--steps",
            str(budget[1]),
            "--report-dir",
            str(out),
        ],
        capture_output=True,
        timeout=1800,
    )
    report = json.loads((out / "profile.json").read_text("utf-8"))
    return {
        "seed": seed,
        "seconds": report["duration_s"],
        "exit_code": report["exit_code"],
        "verdicts": verdict_map(report),
    }


def measure(
    workdir: Path,
    expected: list[dict[str, Any]],
    runs: int,
    budget: tuple[int, int],
    only: str | None = None,
    jobs: int = 1,
    versions: frozenset[str] | None = None,
    adapters: frozenset[str] | None = None,
) -> list[dict[str, Any]]:
    """Run every adapter of every cell `runs` times; one row per adapter and version."""
    want = {(r["adapter"], r["matrix"]["version"]): _cells(r) for r in expected}
    rows = []
    for cell in MATRIX:
        if (only and cell.library != only) or (versions and cell.version not in versions):
            continue
        venv = workdir / f"{cell.package}-{cell.version}"
        install_release(venv, cell.package, cell.version, ROOT, also=cell.also)
        for adapter in cell.adapters:
            if adapters and adapter not in adapters:
                continue
            base = workdir / "detection" / f"{adapter}-{cell.version}"
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                results = list(
                    pool.map(
                        lambda k, v=venv, a=adapter, b=base: _run_once(v, a, k, b / str(k), budget),
                        range(1, runs + 1),
                    )
                )
            row = _row(adapter, cell.version, want.get((adapter, cell.version), {}), results)
            rows.append({**row, "examples": budget[0], "steps": budget[1], "commit": _commit()})
            print(
                f"{adapter} {cell.version}: {row['found']} spurious {row['spurious']} "
                f"median {row['median_s']:.1f}s",
                file=sys.stderr,
            )
    return rows


def _commit() -> str:
    """The jfsm checkout's commit (short), `+` when the profile's code (what decides the
    search) has uncommitted changes; `?` outside git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "conformance/jfsm_conformance/profile"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "?"
    return (head or "?") + ("+" if dirty else "")


def rows_from_reports(
    workdir: Path,
    expected: list[dict[str, Any]],
    versions: frozenset[str] | None = None,
    adapters: frozenset[str] | None = None,
) -> list[dict[str, Any]]:
    """The rows of runs already made under `workdir/detection/ADAPTER-VERSION/K/` (complete
    or interrupted: each finished run counts), in the results page's order; the seconds are
    each run's own search time (`duration_s` of its report), the budget the reports', the
    commit the checkout's now."""
    rows = []
    for rep in expected:
        adapter, version = rep["adapter"], rep["matrix"]["version"]
        if (versions and version not in versions) or (adapters and adapter not in adapters):
            continue
        base = workdir / "detection" / f"{adapter}-{version}"
        paths = sorted(base.glob("*/profile.json"), key=lambda p: int(p.parent.name))
        if not paths:
            continue
        results = []
        for path in paths:
            report = json.loads(path.read_text("utf-8"))
            results.append(
                {
                    "seconds": report["duration_s"],
                    "exit_code": report["exit_code"],
                    "verdicts": verdict_map(report),
                    "budget": (report["examples"], report["steps"]),
                }
            )
        row = _row(adapter, version, _cells(rep), results)
        (examples, steps), _ = Counter(r["budget"] for r in results).most_common(1)[0]
        rows.append({**row, "examples": examples, "steps": steps, "commit": _commit()})
    return rows


def verdict_map(report: dict[str, Any]) -> dict[str, str]:
    """A report's cells: property ID -> verdict, and for the several-writers search of an
    adapter that declares it, `ID (two writers)` -> verdict (each its own cell)."""
    cells = {v["id"]: v["verdict"] for v in report["verdicts"]}
    for v in (report.get("several_writers") or {}).get("verdicts", []):
        cells[f"{v['id']} (two writers)"] = v["verdict"]
    return cells


def _cells(rep: dict[str, Any]) -> dict[str, str]:
    """A results-page row's cells: cell -> verdict, for every one that did not pass."""
    return {rid: verdict for rid, verdict in verdict_map(rep).items() if verdict not in _OK}


def merge_rows(
    earlier: list[dict[str, Any]], new: list[dict[str, Any]], expected: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """`new` rows replace `earlier` rows of the same adapter and release, the rest of
    `earlier` is kept; in the results page's order (`expected`), rows of releases no longer
    on the page last."""
    order = {(r["adapter"], r["matrix"]["version"]): i for i, r in enumerate(expected)}
    replaced = {(r["adapter"], r["version"]) for r in new}
    rows = [r for r in earlier if (r["adapter"], r["version"]) not in replaced] + list(new)
    return sorted(rows, key=lambda r: order.get((r["adapter"], r["version"]), len(order)))


def _row(
    adapter: str, version: str, cells: dict[str, str], results: list[dict[str, Any]]
) -> dict[str, Any]:
    spurious: Counter[str] = Counter(
        rid
        for r in results
        for rid, verdict in r["verdicts"].items()
        if verdict not in _OK and rid not in cells
    )
    seconds = [r["seconds"] for r in results]
    return {
        "adapter": adapter,
        "version": version,
        "expected": cells,
        "found": {
            rid: sum(r["verdicts"].get(rid) == v for r in results) for rid, v in cells.items()
        },
        "spurious": dict(spurious),
        "harness_errors": sum(r["exit_code"] == 2 for r in results),
        "runs": len(results),
        "median_s": statistics.median(seconds),
        "max_s": max(seconds),
    }


def write_page(rows: list[dict[str, Any]], path: Path, page_rows: int = 0) -> str:
    """Write the detection table (Markdown) to `path`; `page_rows`: how many adapter and
    release rows the results page has (to say how many were measured)."""
    measured = f"{len(rows)} of the {page_rows}" if page_rows else f"{len(rows)}"
    lines = [
        "# Detection rates of the safety profile",
        "",
        "<!-- Written by `uv run python -m benchmarks.safety_detection` from "
        "`docs/safety/detection.json`. Do not edit by hand. -->",
        "",
        f"Each adapter and release below ({measured} rows of [the results page](results.md); "
        "a release whose cells a measured release of the same library already shows may be "
        "left out) was run the number of times its `found` column says, at the budget its row "
        "names (examples x steps), each run a fresh random search (`--seed K`, K = 1..N, "
        "`--no-shrink`). A cell counts as found in a run when that run gives it the page's "
        "verdict (✗ or *by design*); a spurious verdict is a failure the page does not have. "
        "`measured at` is the jfsm commit of the run (`+`: with uncommitted changes). The goal: "
        "every cell in at least 19 of 20 runs.",
        "",
        "| adapter | version | cell | found | spurious verdicts | harness errors | "
        "median s per run (search) | max s | budget | measured at |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        cells = sorted(row["expected"]) or ["(every property passes)"]
        spurious = ", ".join(f"{k} {n}x" for k, n in sorted(row["spurious"].items())) or "0"
        for rid in cells:
            found = f"{row['found'][rid]}/{row['runs']}" if rid in row["found"] else "-"
            verdict = row["expected"].get(rid, "")
            lines.append(
                f"| {row['adapter']} | {row['version']} | {rid} {verdict} | {found} | "
                f"{spurious} | {row['harness_errors']} | {row['median_s']:.1f} | "
                f"{row['max_s']:.1f} | {row.get('examples', '?')} x {row.get('steps', '?')} | "
                f"{row.get('commit', '?')} |"
            )
    counts = [(n, r["runs"]) for r in rows for n in r["found"].values()]
    worst = min(counts, key=lambda c: c[0] / c[1], default=(0, 0))
    below = sum(20 * n < 19 * total for n, total in counts)
    spurious_rows = sum(bool(r["spurious"]) or bool(r["harness_errors"]) for r in rows)
    lines += [
        "",
        f"Lowest rate over all cells: {worst[0]}/{worst[1]}; cells below 19 in 20: {below}; "
        f"rows with a spurious verdict or a harness error: {spurious_rows}.",
        "",
    ]
    text = "\n".join(lines)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.safety_detection")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--only", help="only this library")
    parser.add_argument("--jobs", type=int, default=1, help="runs in parallel")
    parser.add_argument("--versions", help="only these releases (comma-separated)")
    parser.add_argument("--adapters", help="only these adapters (comma-separated)")
    parser.add_argument("--examples", type=int, default=30)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--workdir", help="where the venvs go (default: a temporary directory)")
    parser.add_argument("--expected", default=str(ROOT / "docs" / "safety" / "results.json"))
    parser.add_argument("--out", default=str(ROOT / "docs" / "safety" / "detection.md"))
    parser.add_argument(
        "--json",
        default=str(ROOT / "docs" / "safety" / "detection.json"),
        help="the rows: read (rows not measured now are kept) and written back",
    )
    parser.add_argument("--fresh", action="store_true", help="keep no earlier rows of --json")
    parser.add_argument(
        "--commit",
        help="with --from-reports: the commit the runs were made at (default: the checkout's)",
    )
    parser.add_argument(
        "--from-reports",
        action="store_true",
        help="run nothing: tabulate the runs already under --workdir (interrupted ones too)",
    )
    args = parser.parse_args(argv)
    if args.from_reports and not args.workdir:
        parser.error("--from-reports needs --workdir")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="jfsm-detection-"))
    expected = json.loads(Path(args.expected).read_text("utf-8"))
    budget = (args.examples, args.steps)
    versions = frozenset(args.versions.split(",")) if args.versions else None
    adapters = frozenset(args.adapters.split(",")) if args.adapters else None
    if args.from_reports:
        rows = rows_from_reports(workdir, expected, versions, adapters)
        if args.commit:
            rows = [{**r, "commit": args.commit} for r in rows]
    else:
        rows = measure(
            workdir, expected, args.runs, budget, args.only, args.jobs, versions, adapters
        )
    data = Path(args.json)
    earlier = [] if args.fresh or not data.exists() else json.loads(data.read_text("utf-8"))
    merged = merge_rows(earlier, rows, expected)
    data.write_text(json.dumps(merged, indent=1, ensure_ascii=False) + "\n", "utf-8")
    write_page(merged, Path(args.out), len(expected))
    print(f"wrote {args.out} and {args.json} ({len(rows)} rows measured now)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
