"""Run the benchmarks and write `results.json` and `results.md`.

    uv run python -m benchmarks.run [--quick] [--out DIR] [--only SECTION ...]

`--quick` is the CI smoke: tiny sizes, checks that the harness runs and that the output
files are well-formed, not the numbers. `--out` defaults to `docs/benchmarks`.
Sections: memory (run first, while this process is still small), docs (the mkdocs build,
against the same build without the generation hook), footprint, durable, suite, startup
(the CPU of `import jfsm` and `jfsm --version` against bare `python -c pass`),
observability (rounds/s without OpenTelemetry, with the API alone, with the SDK). A section
that raises is recorded with its error and the others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.common import loadavg

__all__ = ["SECTIONS", "main"]

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "docs" / "benchmarks"
SECTIONS = ("memory", "docs", "footprint", "durable", "suite", "startup", "observability")


def _git(*args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def _section(name: str, quick: bool, log: Any) -> dict[str, Any]:
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
    elif name == "observability":
        from benchmarks import observability as mod  # type: ignore[no-redef]
    else:
        from benchmarks import suite as mod  # type: ignore[no-redef]
    return mod.run(quick=quick, log=log)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (CI smoke)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, help="run only these sections")
    args = parser.parse_args(argv)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    started = time.time()
    status = _git("status", "--porcelain", "--", "jfsm")
    results: dict[str, Any] = {
        "meta": {
            "format": "jfsm-benchmarks/1",
            "command": "python -m benchmarks.run"
            + (" --quick" if args.quick else "")
            + (" --only " + " ".join(args.only) if args.only else ""),
            "quick": args.quick,
            "started_utc": datetime.fromtimestamp(started, UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": (_git("rev-parse", "--short", "HEAD") or "unknown"),
            "dirty": bool(status),
            "python": platform.python_version(),
            "platform": f"{platform.system()} {platform.machine()}",
            "cpus": os.cpu_count(),
            "loadavg_before": loadavg(),
            "section_s": {},
        }
    }
    failed = False
    for name in args.only or SECTIONS:
        log(f"[{name}]")
        t0 = time.perf_counter()
        try:
            results[name] = _section(name, args.quick, log)
        except Exception as exc:
            failed = True
            results[name] = {
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(),
            }
            log(results[name]["traceback"])
        results["meta"]["section_s"][name] = round(time.perf_counter() - t0, 1)
    results["meta"]["loadavg_after"] = loadavg()
    results["meta"]["total_s"] = round(time.time() - started, 1)

    from benchmarks.report import render

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(
        json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    (args.out / "results.md").write_text(render(results), encoding="utf-8")
    log(f"wrote {args.out / 'results.json'} and {args.out / 'results.md'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
