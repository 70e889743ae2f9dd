"""Section 5: what the docs build costs, and what the project's generation hook adds to it.

Two builds, each in a fresh subprocess (`python -m mkdocs build`, cwd the repository root,
`NO_MKDOCS_2_WARNING=1`, a new empty `--site-dir` each time), interleaved A B A B:

- A, `real`: `mkdocs build --strict` of `mkdocs.yml`, exactly what
  `tests/packaging/test_docs.py` runs.
- B, `baseline`: the same theme, plugins and Markdown extensions without the generation hook
  `docs/hooks/generate.py`: a temporary config that says `INHERIT: <repo>/mkdocs.yml`,
  `hooks: []` (mkdocs deep-merges mappings and replaces lists) and an absolute `docs_dir`
  (relative paths are taken from the directory of the config file that is loaded). Without
  the hook the generated pages (requirements, traceability, machines, worked example), the
  published `spec/` files and the fragment expansion are missing, so the hand-written pages'
  links to them and the nav entries naming them are warnings: B is built without `--strict`
  and its WARNING lines are counted. It must still exit 0.

For each build: CPU time of the child (`resource.getrusage(RUSAGE_CHILDREN)` delta, user +
sys, so the figure does not depend on how busy the shared machine is) and wall time. A/B of
the medians is what the hook's generators, reference pages and diagrams cost on top of
mkdocs. The goal, the old budget of the test that used to time the build: the real build's
median CPU time under `GOAL_CPU_S`. It is reported, never asserted.

A build that fails (non-zero exit, or a WARNING line in the strict build) raises
`RuntimeError` with the end of its output; `benchmarks.run` then records the section as
failed.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import ratio

__all__ = ["GOAL_CPU_S", "baseline_config", "run"]

ROOT = Path(__file__).resolve().parent.parent
GOAL_CPU_S = 20.0
FULL = {"repeats": 3}
QUICK = {"repeats": 1}
TIMEOUT_S = 600


def baseline_config(root: Path = ROOT) -> str:
    """The YAML of the baseline build: the repository's config without its hooks."""
    return (
        f"INHERIT: {(root / 'mkdocs.yml').as_posix()}\n"
        f"docs_dir: {(root / 'docs').as_posix()}\n"
        "hooks: []\n"
    )


def _child_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _build(variant: str, site: Path, config: Path | None) -> dict[str, Any]:
    """One build in a fresh subprocess: its CPU and wall seconds, pages and warnings."""
    command = [sys.executable, "-m", "mkdocs", "build", "--site-dir", str(site)]
    if config is None:
        command.insert(4, "--strict")
    else:
        command += ["--config-file", str(config)]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    cpu0, wall0 = _child_cpu_s(), time.perf_counter()
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
    )
    wall, cpu = time.perf_counter() - wall0, _child_cpu_s() - cpu0
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING")]
    if done.returncode != 0 or (config is None and warnings):
        raise RuntimeError(
            f"{variant} docs build failed (exit {done.returncode}, {len(warnings)} warnings):\n"
            + done.stderr[-3000:]
        )
    return {
        "cpu_s": round(cpu, 3),
        "wall_s": round(wall, 3),
        "pages": sum(1 for _ in site.rglob("*.html")),
        "warnings": len(warnings),
    }


def _median(rows: list[dict[str, Any]], key: str) -> float:
    return round(statistics.median(r[key] for r in rows), 3)


def run(quick: bool = False, log: Any = print) -> dict[str, Any]:
    """Build A and B `repeats` times each, interleaved; the JSON-able results.

    Raises `RuntimeError` when a build fails (see the module's docstring)."""
    cfg = QUICK if quick else FULL
    root = Path(tempfile.mkdtemp(prefix="jfsm-bench-docs-", dir=os.environ.get("JFSM_BENCH_TMP")))
    try:
        config = root / "baseline-mkdocs.yml"
        config.write_text(baseline_config(), encoding="utf-8")
        builds: dict[str, list[dict[str, Any]]] = {"real": [], "baseline": []}
        for rep in range(cfg["repeats"]):
            for variant, variant_config in (("real", None), ("baseline", config)):
                site = root / f"{variant}-{rep}"
                row = _build(variant, site, variant_config)
                shutil.rmtree(site, ignore_errors=True)
                builds[variant].append(row)
                log(
                    f"  docs {variant} #{rep + 1}: {row['cpu_s']:.1f} s CPU, "
                    f"{row['wall_s']:.1f} s wall, {row['pages']} pages"
                )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    summary = {
        variant: {
            "n": len(rows),
            "cpu_s_median": _median(rows, "cpu_s"),
            "wall_s_median": _median(rows, "wall_s"),
            "pages": rows[0]["pages"],
            "warnings": rows[0]["warnings"],
            "runs": rows,
        }
        for variant, rows in builds.items()
    }
    real, base = summary["real"], summary["baseline"]
    return {
        "config": dict(cfg),
        "order": "A B interleaved, real first",
        "real": {**real, "strict": True, "command": "mkdocs build --strict"},
        "baseline": {
            **base,
            "strict": False,
            "command": "mkdocs build --config-file TMP (INHERIT mkdocs.yml, hooks: [])",
            "not_strict_because": "the pages, spec files and fragments the hook generates "
            "are missing, so links and nav entries to them are warnings",
        },
        "cpu_ratio_real_over_baseline": ratio(real["cpu_s_median"], base["cpu_s_median"]),
        "wall_ratio_real_over_baseline": ratio(real["wall_s_median"], base["wall_s_median"]),
        "goal": {
            "text": f"real build median CPU < {GOAL_CPU_S:g} s",
            "cpu_s": real["cpu_s_median"],
            "met": real["cpu_s_median"] < GOAL_CPU_S,
        },
    }
