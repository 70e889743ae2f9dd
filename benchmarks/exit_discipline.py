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
`jfsm_conformance.examples`), `mutants` (`jfsm_conformance.examples.mutants.MUTANTS`),
`restarts` (drivers that declare `durableRestart` and break it, R140 and R141: a lease that
outlives its process over stdio, a restart that forgets in process and over HTTP), `http`
(the reference served over HTTP with one guard left out, `examples.open_http`) and `owners`
(the broken shared-store drivers of `examples.broken_owners`, on a shared `{state}`). A spec
`serve:MODULE ARGS` is served over HTTP for its run (`python -m MODULE ARGS --http 0`, with a
token in the environment) and judged at its URL. Exits 1 when any driver ended otherwise
than in exit 1, so it can gate a release.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["drivers", "label", "main", "served", "sweep"]

FAMILIES = ("broken", "flaky", "hostile", "waits", "mutants", "restarts", "http", "owners")
SERVE = "serve:"  # a spec served over HTTP for its run


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
        if family == "restarts":
            from jfsm_conformance.examples.restarts import LEASE_OUTLIVES

            module = "jfsm_conformance.examples.restarts"
            specs += [
                LEASE_OUTLIVES,
                f"python:{module}:forgets_on_restart",
                f"{SERVE}{module} forgets_on_restart",
            ]
            continue
        if family == "http":
            from jfsm_conformance.examples.open_http import HOLES

            specs += [f"{SERVE}jfsm_conformance.examples.open_http --hole {h}" for h in HOLES]
            continue
        if family == "owners":
            from jfsm_conformance.examples.broken_owners import FLAWS

            python = shlex.quote(sys.executable)
            module = "jfsm_conformance.examples.broken_owners"
            specs += [f"stdio:{python} -m {module} {flaw} --state {{state}}" for flaw in FLAWS]
            continue
        module = importlib.import_module(f"jfsm_conformance.examples.{family}")
        specs += [
            f"python:{module.__name__}:{name}" for name in module.__all__ if name[0].islower()
        ]
    return specs


def label(spec: str) -> str:
    """A short name for a driver spec: the factory, or the command's last words."""
    if spec.startswith("python:"):
        return spec.rsplit(":", 1)[1]
    words = spec.partition(":")[2].split()
    module = next((w for w in words if w.startswith(("jfsm_conformance.", "jfsm."))), "")
    rest = words[words.index(module) + 1 :] if module else words
    rest = [w for w in rest if w not in ("--state", "{state}")]
    how = "http" if spec.startswith(SERVE) else "stdio"
    return f"{module.rsplit('.', 1)[-1]} {' '.join(rest)} ({how})".strip()


@contextlib.contextmanager
def served(spec: str) -> Iterator[tuple[str, dict[str, str]]]:
    """The driver spec to run and the environment to run it in: a `serve:` spec is started
    over HTTP on 127.0.0.1 (and stopped after), any other is itself."""
    if not spec.startswith(SERVE):
        yield spec, dict(os.environ)
        return
    token = secrets.token_urlsafe(16)
    env = dict(os.environ, JFSM_DRIVER_TOKEN=token)
    argv = [sys.executable, "-m", *shlex.split(spec[len(SERVE) :]), "--http", "0"]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        assert proc.stderr is not None
        match = re.search(r"http://127\.0\.0\.1:\d+", proc.stderr.readline().decode())
        if match is None:
            raise RuntimeError(f"{spec} did not announce its URL")
        threading.Thread(target=proc.stderr.read, daemon=True).start()  # drain it
        yield match[0], env
    finally:
        proc.kill()
        proc.wait(10)


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
    with served(spec) as (driver, env), tempfile.TemporaryFile() as err:
        if machines_only:
            argv = [sys.executable, "-c", MACHINES_ONLY, driver, profile, str(report_dir)]
        else:
            argv = [sys.executable, "-m", "jfsm.cli", "conformance", "--driver", driver]
            argv += ["--profile", profile, "--report-dir", str(report_dir)]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env)
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
        "driver": label(spec),
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
