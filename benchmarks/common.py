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
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["Samples", "loadavg", "now_ns", "pct", "ratio", "section_main", "summarize"]

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


def section_main(
    name: str,
    doc: str | None,
    run: Callable[..., dict[str, Any]],
    render: Callable[[dict[str, Any]], str],
    argv: list[str] | None = None,
) -> int:
    """One benchmark section's command, `python -m benchmarks.NAME [--quick] [--out DIR]`:
    `run(quick=, log=)` with progress on stderr, the machine and load stamped into its
    result's `meta`, then `NAME.json` and `render(result)` as `NAME.md` written into `--out`
    (default `docs/benchmarks/`). Returns 0; argparse's usage error exits 2."""
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{name}", description=doc)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke)")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parent.parent / "docs" / "benchmarks"
    )
    args = parser.parse_args(argv)
    result = run(quick=args.quick, log=lambda m: print(m, file=sys.stderr, flush=True))
    result["meta"] = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": (
            f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
        ),
        "loadavg": loadavg(),
        "quick": args.quick,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (args.out / f"{name}.md").write_text(render(result), encoding="utf-8")
    return 0
