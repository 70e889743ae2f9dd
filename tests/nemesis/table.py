"""The long nemesis runs' results: the file the long runs write (`long-runs.json` beside this
module, one entry a backend, the latest run's) and the Markdown table the Deploying page
shows of it (`tests/nemesis/test_nemesis.py` checks that the page holds exactly this table,
so the page cannot drift from the runs).

`uv run python -m tests.nemesis.table` prints the table to paste into
`docs/guide/deploying.md` after a long run (`uv run pytest -m nemesis`).
"""

from __future__ import annotations

import datetime
import json
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["RESULTS", "record", "render_table"]

RESULTS = Path(__file__).with_name("long-runs.json")
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
        "| Fenced landed | Bystanders harmed | Time to serve again (median / max) |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
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
        harmed = run["bystanders_harmed"] + run.get("workers_signalled", 0)
        lines.append(
            f"| {_NAMES[backend]} | {run['minutes']:g} min, seed {run['seed']}, "
            f"{run['commit']}, {run['date']} | {faults} | {run['acknowledged']} | {run['lost']} "
            f"| {run['acknowledged_twice']} | {run['fenced_landed']} | {harmed} | {serve} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(render_table(json.loads(RESULTS.read_text())))
