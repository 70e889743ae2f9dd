"""Exit discipline of the whole suite: every example broken driver and mutant, one profile.

Issue 22 asks that every example broken driver and mutant ends in exit 1 (a requirement
failed), never 2 (harness error), under the quick and the standard profile. The release test
`tests/suite/test_exit_discipline.py` sweeps the deterministic scenarios in process; this
script runs the real command, `jfsm conformance --driver SPEC --profile P`, in a fresh
subprocess per driver (scenarios and machines, shrinking as the profile does), and reports
for each driver its exit code, wall time, the suite's peak RSS (`ru_maxrss` of the child)
and the IDs of the first failure.

```
uv run python -m benchmarks.exit_discipline --profile standard [--only broken,flaky]
        [--out exit-discipline-standard.md]
```

Families: `broken`, `flaky`, `hostile`, `waits` (the example drivers of
`jfsm_conformance.examples`) and `mutants` (`jfsm_conformance.examples.mutants.MUTANTS`).
Exits 1 when any driver ended otherwise than in exit 1, so it can gate a release.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["drivers", "main", "sweep"]

FAMILIES = ("broken", "flaky", "hostile", "waits", "mutants")


def drivers(families: tuple[str, ...] = FAMILIES) -> list[str]:
    """The driver specs of `families`, in order."""
    import importlib

    specs = []
    for family in families:
        if family == "mutants":
            from jfsm_conformance.examples.mutants import MUTANTS

            module = "jfsm_conformance.examples.mutants"
            specs += [f"python:{module}:{name}" for name in MUTANTS]
            continue
        module = importlib.import_module(f"jfsm_conformance.examples.{family}")
        specs += [
            f"python:{module.__name__}:{name}" for name in module.__all__ if name[0].islower()
        ]
    return specs


def _one(spec: str, profile: str, report_dir: Path) -> dict[str, object]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    began = time.monotonic()
    argv = [sys.executable, "-m", "jfsm.cli", "conformance", "--driver", spec]
    proc = subprocess.run(
        [*argv, "--profile", profile, "--report-dir", str(report_dir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    took = time.monotonic() - began
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    first: list[str] = []
    partial = None
    with_report = report_dir / "report.json"
    if with_report.is_file():
        report = json.loads(with_report.read_text(encoding="utf-8"))
        partial = report.get("partial")
        first = list((report.get("first_failure") or {}).get("ids") or [])
    return {
        "driver": spec.rsplit(":", 1)[1],
        "exit": proc.returncode,
        "seconds": round(took, 1),
        # RUSAGE_CHILDREN's peak is the largest child so far: exact when it grew
        "peak_mib": round(peak / 1024) if peak > before else None,
        "first_failure": first,
        "partial": partial,
        "stderr_tail": proc.stderr.strip().splitlines()[-1:] if proc.returncode != 1 else [],
    }


def sweep(
    specs: list[str], profile: str, progress: Callable[[str], object] = print
) -> list[dict[str, object]]:
    """Run every spec; one row each."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="jfsm-exit-") as tmp:
        for i, spec in enumerate(specs, start=1):
            row = _one(spec, profile, Path(tmp) / f"r{i}")
            rows.append(row)
            progress(
                f"[{i}/{len(specs)}] {row['driver']}: exit {row['exit']} in {row['seconds']} s"
                f" ({', '.join(row['first_failure']) or 'no failure'})"  # type: ignore[arg-type]
            )
    return rows


def table(rows: list[dict[str, object]], profile: str) -> str:
    bad = [r for r in rows if r["exit"] != 1]
    peaks = [r["peak_mib"] for r in rows if isinstance(r["peak_mib"], int)]
    lines = [
        f"# Exit discipline, profile {profile}",
        "",
        f"{len(rows)} drivers; exit 1: {len(rows) - len(bad)}; other: {len(bad)}; "
        f"total {sum(float(r['seconds']) for r in rows):.0f} s"  # type: ignore[arg-type]
        + (f"; largest peak RSS {max(peaks)} MiB" if peaks else ""),
        "",
        "| driver | exit | seconds | first failure |",
        "|---|---|---|---|",
    ]
    for r in rows:
        ids = ", ".join(r["first_failure"]) or "-"  # type: ignore[arg-type]
        lines.append(f"| {r['driver']} | {r['exit']} | {r['seconds']} | {ids} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.exit_discipline")
    parser.add_argument("--profile", default="quick", choices=("quick", "standard", "thorough"))
    parser.add_argument("--only", default=",".join(FAMILIES), help="families, comma-separated")
    parser.add_argument("--out", help="also write the markdown table here")
    args = parser.parse_args(argv)
    families = tuple(f for f in args.only.split(",") if f)
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        parser.error(f"unknown families {unknown}; choose from {', '.join(FAMILIES)}")
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    rows = sweep(drivers(families), args.profile)
    text = table(rows, args.profile)
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0 if all(r["exit"] == 1 for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
