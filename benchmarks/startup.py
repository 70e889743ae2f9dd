"""Start-up cost: the CPU time of `import jfsm` and of `jfsm --version`, each in a fresh
interpreter, side by side with bare `python -c pass` (interleaved A B C A B C ...).

The CPU time of a child is read from `os.wait4`'s resource usage (user + system), so the
load of a shared machine does not count as it would in wall time. The goal (issue 24): under
0.1 s of CPU for each; the ratio to bare Python is the result that travels across machines.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import ratio

__all__ = ["GOAL_CPU_S", "run"]

GOAL_CPU_S = 0.1
JFSM = Path(sys.executable).with_name("jfsm")
VARIANTS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "python -c 'import jfsm'": [sys.executable, "-c", "import jfsm"],
    "jfsm --version": [str(JFSM), "--version"],
}


def cpu_seconds(argv: list[str]) -> float:
    """The user + system CPU seconds of one run of `argv` (its output discarded);
    `RuntimeError` if it exits non-zero."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} exited with {proc.returncode}")
    return usage.ru_utime + usage.ru_stime


def run(*, quick: bool = False, log: Callable[[str], None] = print) -> dict[str, Any]:
    rounds = 3 if quick else 30
    samples: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for _ in range(rounds):
        for name, argv in VARIANTS.items():
            samples[name].append(cpu_seconds(argv))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    bare = medians["python -c pass"]
    rows = [
        {
            "variant": name,
            "n": len(samples[name]),
            "cpu_s_median": round(medians[name], 4),
            "cpu_s_max": round(max(samples[name]), 4),
            "ratio_to_bare_python": ratio(medians[name], bare),
        }
        for name in VARIANTS
    ]
    worst = max(medians["python -c 'import jfsm'"], medians["jfsm --version"])
    measured = ", ".join(f"{r['variant']} {r['cpu_s_median']:.3f} s" for r in rows)
    log(f"startup: {measured}")
    return {
        "rows": rows,
        "goal": {
            "text": f"`import jfsm` and `jfsm --version` under {GOAL_CPU_S} s of CPU",
            "met": worst < GOAL_CPU_S,
            "worst_cpu_s": round(worst, 4),
        },
    }
