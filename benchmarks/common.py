"""Timing and statistics helpers shared by the benchmark sections.

Every measurement uses `time.perf_counter_ns`; variants are interleaved (A B A B ...) in
one process so machine noise hits them alike, and results are reported as medians (plus
the 90th percentile, which shows pauses such as garbage collection).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["Samples", "now_ns", "pct", "ratio", "summarize"]

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
