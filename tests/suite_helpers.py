"""Running the conformance suite from a test: one quiet run into a report folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jfsm_conformance.run.model import Options, RunResult
from jfsm_conformance.run.runner import run

__all__ = ["run_scenarios"]


def run_scenarios(report_dir: Path, driver: str, scenarios: list[str], **options: Any) -> RunResult:
    """Run only `scenarios` (no machines, unless `options` say otherwise) against `driver`,
    with no progress lines, writing the report into `report_dir`."""
    options.setdefault("machines", False)
    return run(
        Options(
            driver=driver,
            scenarios=scenarios,
            report_dir=report_dir,
            progress=lambda line: None,
            **options,
        )
    )
