"""Timing and statistics helpers shared by the benchmark sections.

Every measurement uses `time.perf_counter_ns`; variants are interleaved (A B A B ...) in
one process so machine noise hits them alike, and results are reported as medians (plus
the 90th percentile, which shows pauses such as garbage collection).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "Samples",
    "git",
    "loadavg",
    "now_ns",
    "pct",
    "ratio",
    "run_meta",
    "run_stamp",
    "section_main",
    "summarize",
]

now_ns = time.perf_counter_ns


def pct(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) of `values`, by linear interpolation; NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(ns: Sequence[float]) -> dict[str, Any]:
    """Median, p10, p90, min and count of samples given in nanoseconds, reported in µs."""
    if not ns:
        return {"n": 0, "median_us": None, "p10_us": None, "p90_us": None, "min_us": None}
    return {
        "n": len(ns),
        "median_us": round(statistics.median(ns) / 1000, 3),
        "p10_us": round(pct(ns, 0.10) / 1000, 3),
        "p90_us": round(pct(ns, 0.90) / 1000, 3),
        "min_us": round(min(ns) / 1000, 3),
    }


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b rounded to 3 places, or None when either is missing or b is zero."""
    if a is None or b is None or b == 0 or math.isnan(a) or math.isnan(b):
        return None
    return round(a / b, 3)


class Samples(dict[str, list[int]]):
    """A dict name -> list of nanosecond samples."""

    def add(self, name: str, value: int) -> None:
        self.setdefault(name, []).append(value)


def loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


ROOT = Path(__file__).resolve().parent.parent


def git(*args: str) -> str | None:
    """`git ARGS` in the repository: its stdout stripped, or None when git fails or is
    missing."""
    try:
        proc = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def run_meta(command: str, quick: bool, paths: Sequence[str]) -> dict[str, Any]:
    """What a run records before it starts: its command, the commit (short and full), whether
    `paths` (what it measures) had local changes, the machine and its load."""
    started = time.time()
    head = git("rev-parse", "HEAD")
    return {
        "format": "jfsm-benchmarks/2",
        "command": command,
        "quick": quick,
        "started": started,
        "started_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
        "commit": head[:7] if head else "unknown",
        "commit_full": head,
        "dirty": bool(git("status", "--porcelain", "--", *paths)) if paths else False,
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "cpus": os.cpu_count(),
        "loadavg_before": loadavg(),
        "section_s": {},
        "section_load": {},
    }


def _load(values: Any) -> str:
    return "n/a" if not values else f"{values[0]:g}"


def run_stamp(meta: dict[str, Any], section: str | None = None) -> str:
    """The line every benchmark page opens with: the run that measured it (its command,
    commit, date, machine) and the machine's load, over the run and, for `section`, when that
    section started. Quick runs say their numbers mean nothing."""
    commit = meta.get("commit", "unknown")
    state = "with local changes" if meta.get("dirty") else "clean"
    load = f"load average {_load(meta.get('loadavg_before'))} before the run"
    started = (meta.get("section_load") or {}).get(section) if section else None
    if started:
        load += f", {_load(started)} when this section started"
    load += f", {_load(meta.get('loadavg_after'))} after it"
    total = meta.get("total_s")
    line = (
        f"From one run of `{meta.get('command', 'python -m benchmarks.run')}` on commit "
        f"`{commit}` ({state}), started {meta.get('started_utc', 'n/a')}: Python "
        f"{meta.get('python', 'n/a')}, {meta.get('platform', 'n/a')}, {meta.get('cpus', 'n/a')} "
        f"CPUs; {load} (1-minute averages)"
        + (f"; {total:,.0f} s in all." if total is not None else ".")
    )
    if meta.get("quick"):
        line += (
            " **Quick mode: tiny sizes, a smoke test of the harness; the numbers mean nothing.**"
        )
    return line


def section_main(
    name: str,
    doc: str | None,
    run: Callable[..., dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
    argv: list[str] | None = None,
) -> int:
    """One benchmark section's command, `python -m benchmarks.NAME [--quick] --out DIR`, for
    working on one section: `run(quick=, log=)` with progress on stderr, the run's `meta`
    (`run_meta`), then `NAME.json` and `render(result)` as `NAME.md` written into DIR. The
    docs' pages come from one whole run (`python -m benchmarks.run`), so DIR has no default.
    Returns 0; a usage error (no `--out`) exits 2 with argparse's one line."""
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{name}", description=doc)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke)")
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    args = parser.parse_args(argv)
    command = f"python -m benchmarks.{name}" + (" --quick" if args.quick else "")
    meta = run_meta(command, args.quick, ())
    meta["section_load"][name] = meta["loadavg_before"]
    result = run(quick=args.quick, log=lambda m: print(m, file=sys.stderr, flush=True))
    meta["loadavg_after"] = loadavg()
    meta["total_s"] = round(time.time() - meta["started"], 1)
    result["meta"] = meta
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (args.out / f"{name}.md").write_text(render(result), encoding="utf-8")
    return 0
