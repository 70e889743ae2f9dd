"""The long nemesis runs' results: the file the long runs write (`long-runs.json` beside this
module, one entry a backend, the latest run's) and the Markdown table the Deploying page
shows of it (`tests/nemesis/test_nemesis.py` checks that the page holds exactly this table,
so the page cannot drift from the runs).

`uv run python -m tests.nemesis.table` prints the table; with `--write` it replaces the
table in `docs/guide/deploying.md` (between its `nemesis-table` comments), to run after the
long runs (`uv run pytest -m nemesis`).
"""

from __future__ import annotations

import datetime
import json
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["PAGE", "RESULTS", "page_table", "record", "render_table", "write_table"]

RESULTS = Path(__file__).with_name("long-runs.json")
PAGE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "deploying.md"
_START, _END = (
    "<!-- nemesis-table: made by `uv run python -m tests.nemesis.table --write` -->",
    ("<!-- /nemesis-table -->"),
)
_NAMES = {
    "postgres": "PostgreSQL server",
    "cluster": "Patroni cluster",
    "shared": "state directory",
}


def _commit() -> str:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
            cwd=RESULTS.parent,
        )
    except OSError:
        return "unknown"
    return done.stdout.strip() or "unknown"


def record(report: dict[str, Any]) -> None:
    """Keep `report` (a long run's) as its backend's entry of the results file."""
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    counts = report["counts"]
    results[report["backend"]] = {
        "seed": report["seed"],
        "minutes": round(report["seconds"] / 60, 1),
        "commit": _commit(),
        "date": datetime.date.today().isoformat(),
        "passed": report["passed"],
        "failed": report["failed"],
        **{
            key: counts[key]
            for key in (
                "faults",
                "acknowledged",
                "lost",
                "acknowledged_twice",
                "fenced_landed",
                "bystanders_harmed",
                "workers_signalled",
                "outside_epoch",
                "unknown_landed",
                "unknown_not_landed",
                "serve_again_seconds",
            )
        },
    }
    RESULTS.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")


def render_table(results: dict[str, Any]) -> str:
    """The Markdown table of the results file's runs (one row a backend)."""
    lines = [
        "| Backend | Run | Faults by kind | Acknowledged | Lost | Acknowledged twice "
        "| Fenced landed | Outside its epoch | Processes harmed (bystanders + workers) "
        "| Time to serve again (median / max) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for backend in ("postgres", "cluster", "shared"):
        run = results.get(backend)
        if run is None:
            continue
        faults = ", ".join(f"{kind} {n}" for kind, n in sorted(run["faults"].items()))
        serve = ", ".join(
            f"{kind} {t['median']:.1f} / {t['max']:.1f} s"
            for kind, t in sorted(run["serve_again_seconds"].items())
        )
        harmed = f"{run['bystanders_harmed']} + {run['workers_signalled']}"
        lines.append(
            f"| {_NAMES[backend]} | {run['minutes']:g} min, seed {run['seed']}, "
            f"{run['commit']}, {run['date']} | {faults} | {run['acknowledged']} | {run['lost']} "
            f"| {run['acknowledged_twice']} | {run['fenced_landed']} | {run['outside_epoch']} "
            f"| {harmed} | {serve} |"
        )
    return "\n".join(lines)


def page_table(page: str) -> str:
    """The table between the page's `nemesis-table` comments ('' when there are none)."""
    if _START not in page or _END not in page:
        return ""
    return page.split(_START, 1)[1].split(_END, 1)[0].strip()


def write_table() -> None:
    """Replace the Deploying page's table by the results file's."""
    page = PAGE.read_text(encoding="utf-8")
    before, rest = page.split(_START, 1)
    after = rest.split(_END, 1)[1]
    table = render_table(json.loads(RESULTS.read_text()))
    PAGE.write_text(f"{before}{_START}\n\n{table}\n\n{_END}{after}", encoding="utf-8")


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--write"]:
        write_table()
    else:
        print(render_table(json.loads(RESULTS.read_text())))
