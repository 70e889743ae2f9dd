"""Run the benchmarks once and write every benchmark page of the docs from that one run.

    uv run python -m benchmarks.run [--quick] [--out DIR] [--only SECTION ...]

Writes `results`, `concurrency` and `postgres` (`.json` and `.md`) into `--out` (default
`docs/benchmarks`), each naming the run: its command, commit, date, machine and load
(`benchmarks.pages`, decision R228). `--quick` is the CI smoke: tiny sizes, checks that the
harness runs and that the output files are well-formed, not the numbers. `--only` runs some
sections, for working on them; it needs `--out` (a usage error otherwise: the docs' pages
come from one whole run).

Sections, in this order: memory (first, while this process is still small), docs (the
mkdocs build, against the same build without the generation hook), footprint, durable,
suite, startup (the CPU of `import jfsm` and `jfsm --version` against bare `python -c
pass`), observability (rounds/s without OpenTelemetry, with the API alone, with the SDK),
concurrency (one worker, many games; the main job's row is the suite section's
measurement when that ran) and postgres. A section that raises is recorded with its error
and the others still run; the exit code is then 1.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from benchmarks.common import loadavg, run_meta
from benchmarks.pages import MEASURED, write

__all__ = ["SECTIONS", "main"]

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "docs" / "benchmarks"
SECTIONS = (
    "memory",
    "docs",
    "footprint",
    "durable",
    "suite",
    "startup",
    "observability",
    "concurrency",
    "postgres",
)


def _main_job(results: dict[str, Any]) -> dict[str, Any] | None:
    """The suite section's measurement of the main job, when it ran in this run."""
    after = ((results.get("suite") or {}).get("quick_profile") or {}).get("after") or {}
    return {**after, "cited_from": "suite"} if after.get("run") else None


def _section(name: str, quick: bool, log: Any, results: dict[str, Any]) -> dict[str, Any]:
    if name == "memory":
        from benchmarks import memory as mod
    elif name == "docs":
        from benchmarks import docs as mod  # type: ignore[no-redef]
    elif name == "footprint":
        from benchmarks import footprint as mod  # type: ignore[no-redef]
    elif name == "durable":
        from benchmarks import durable as mod  # type: ignore[no-redef]
    elif name == "startup":
        from benchmarks import startup as mod  # type: ignore[no-redef]
    elif name == "concurrency":
        from benchmarks import concurrency

        return concurrency.run(quick=quick, log=log, main_job=_main_job(results))
    elif name == "postgres":
        from benchmarks import postgres as mod  # type: ignore[no-redef]
    elif name == "observability":
        from benchmarks import observability as mod  # type: ignore[no-redef]
    else:
        from benchmarks import suite as mod  # type: ignore[no-redef]
    result: dict[str, Any] = mod.run(quick=quick, log=log)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (CI smoke)")
    parser.add_argument("--out", type=Path, help="output directory (default docs/benchmarks)")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, help="run only these sections")
    args = parser.parse_args(argv)
    if args.only and args.out is None:
        parser.error(
            "--only runs part of the benchmarks: give --out DIR (the docs' pages "
            "come from one whole run)"
        )
    out = args.out or DEFAULT_OUT

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    sections = [s for s in SECTIONS if not args.only or s in args.only]
    command = (
        "python -m benchmarks.run"
        + (" --quick" if args.quick else "")
        + (" --only " + " ".join(args.only) if args.only else "")
    )
    measured = sorted({path for s in sections for path in MEASURED[s]})
    results: dict[str, Any] = {"meta": run_meta(command, args.quick, measured)}
    meta = results["meta"]
    failed = False
    for name in sections:
        log(f"[{name}]")
        meta["section_load"][name] = loadavg()
        t0 = time.perf_counter()
        try:
            results[name] = _section(name, args.quick, log, results)
        except Exception as exc:
            failed = True
            results[name] = {
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(),
            }
            log(results[name]["traceback"])
        meta["section_s"][name] = round(time.perf_counter() - t0, 1)
    meta["loadavg_after"] = loadavg()
    meta["total_s"] = round(time.time() - meta["started"], 1)
    write(out, results, log)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
