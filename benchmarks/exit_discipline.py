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
        [--machines-only] [--out exit-discipline-standard.md]
```

`--machines-only` runs no scenario (through the Python API, `Options(scenarios=[])`), so the
state machines must find each fault themselves and shrink it as the profile does: the
suite's cost and peak memory while shrinking, as for an implementation whose faults no
deterministic scenario reaches (issue 22 asks for under 1 GiB).

Families: `broken`, `flaky`, `hostile`, `waits` (the example drivers of
`jfsm_conformance.examples`) and `mutants` (`jfsm_conformance.examples.mutants.MUTANTS`).
Exits 1 when any driver ended otherwise than in exit 1, so it can gate a release.
"""

from __future__ import annotations

import argparse
import json
import os
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


MACHINES_ONLY = """
import sys
from pathlib import Path
from jfsm_conformance.run.report import write_report
from jfsm_conformance.run.runner import Options, run
options = Options(driver=sys.argv[1], profile=sys.argv[2], report_dir=Path(sys.argv[3]),
                  scenarios=[])
result = run(options)
write_report(result, options.report_dir)
sys.exit(result.exit_code)
"""


def _one(spec: str, profile: str, report_dir: Path, machines_only: bool) -> dict[str, object]:
    began = time.monotonic()
    if machines_only:
        argv = [sys.executable, "-c", MACHINES_ONLY, spec, profile, str(report_dir)]
    else:
        argv = [sys.executable, "-m", "jfsm.cli", "conformance", "--driver", spec]
        argv += ["--profile", profile, "--report-dir", str(report_dir)]
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    took = time.monotonic() - began
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
        "peak_mib": round(usage.ru_maxrss / 1024),  # KiB on Linux
        "first_failure": first,
        "partial": partial,
        "stderr_tail": stderr.strip().splitlines()[-1:] if proc.returncode != 1 else [],
    }


def sweep(
    specs: list[str],
    profile: str,
    progress: Callable[[str], object] = print,
    *,
    machines_only: bool = False,
) -> list[dict[str, object]]:
    """Run every spec; one row each."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="jfsm-exit-") as tmp:
        for i, spec in enumerate(specs, start=1):
            row = _one(spec, profile, Path(tmp) / f"r{i}", machines_only)
            rows.append(row)
            progress(
                f"[{i}/{len(specs)}] {row['driver']}: exit {row['exit']} in {row['seconds']} s"
                f" ({', '.join(row['first_failure']) or 'no failure'})"  # type: ignore[arg-type]
            )
    return rows


def table(rows: list[dict[str, object]], profile: str, machines_only: bool = False) -> str:
    bad = [r for r in rows if r["exit"] != 1]
    peaks = [r["peak_mib"] for r in rows if isinstance(r["peak_mib"], int)]
    lines = [
        f"# Exit discipline, profile {profile}"
        + (
            ", machines only (no scenario: every fault found and shrunk by a machine)"
            if machines_only
            else ""
        ),
        "",
        f"{len(rows)} drivers; exit 1: {len(rows) - len(bad)}; other: {len(bad)}; "
        f"total {sum(float(r['seconds']) for r in rows):.0f} s"  # type: ignore[arg-type]
        + (f"; largest peak RSS {max(peaks)} MiB" if peaks else ""),
        "",
        "| driver | exit | seconds | peak RSS MiB | first failure |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        ids = ", ".join(r["first_failure"]) or "-"  # type: ignore[arg-type]
        lines.append(f"| {r['driver']} | {r['exit']} | {r['seconds']} | {r['peak_mib']} | {ids} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.exit_discipline")
    parser.add_argument("--profile", default="quick", choices=("quick", "standard", "thorough"))
    parser.add_argument("--only", default=",".join(FAMILIES), help="families, comma-separated")
    parser.add_argument("--out", help="also write the markdown table here")
    parser.add_argument(
        "--machines-only", action="store_true", help="run no scenario: machines find and shrink"
    )
    args = parser.parse_args(argv)
    families = tuple(f for f in args.only.split(",") if f)
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        parser.error(f"unknown families {unknown}; choose from {', '.join(FAMILIES)}")
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    rows = sweep(drivers(families), args.profile, machines_only=args.machines_only)
    text = table(rows, args.profile, args.machines_only)
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0 if all(r["exit"] == 1 for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
