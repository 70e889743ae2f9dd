"""What a run is told and what it returns: the profiles, the options, a failure and the
run's result, the default driver, and the requirement catalog the verdicts cover (no I/O
but reading the spec)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jfsm.spec import requirements
from jfsm_conformance.machines.explore import (
    NONDETERMINISM_ROW,
    PROTOCOL_ROW,
)

__all__ = [
    "DEFAULT_DRIVER",
    "DEFAULT_DRIVER_NOTE",
    "PROFILES",
    "SMALL_THRESHOLDS",
    "SYNTHETIC_ROWS",
    "Failure",
    "Options",
    "Profile",
    "RunResult",
    "implementation_label",
    "load_catalog",
    "select_error",
    "selected",
    "selection",
]


# The reference engine over durable file stores, without its retry backoff (decision R54).
DEFAULT_DRIVER = "python:jfsm_conformance.examples.reference:durable_without_backoff"
DEFAULT_DRIVER_NOTE = (
    "the default driver is the reference engine with its compress.v2 retry backoff scaled to "
    "zero: the suite cannot judge the backoff (JF-CALL-008), so it does not wait for it"
)
SYNTHETIC_ROWS = {
    PROTOCOL_ROW: "Replies follow driver protocol v1",
    NONDETERMINISM_ROW: "The implementation answers a replayed sequence of operations as before",
}


@dataclass(frozen=True)
class Profile:
    """How much random exploration follows the scenarios."""

    name: str
    examples: int  # machine examples at the spec thresholds
    steps: int
    small_examples: int  # extra examples at small overridden thresholds (if supported)
    small_steps: int


PROFILES = {
    "quick": Profile("quick", 6, 20, 15, 25),
    "standard": Profile("standard", 30, 30, 80, 40),
    "thorough": Profile("thorough", 150, 50, 400, 60),
}
SMALL_THRESHOLDS = {"game": 3000, "catalyst": 1500}


@dataclass
class Options:
    driver: str = DEFAULT_DRIVER
    profile: str = "quick"
    select: str = ""  # ID prefixes, comma-separated (a repeated --select): see `selection`
    expected_failures: dict[str, str] = field(default_factory=dict)
    report_dir: Path = Path("conformance-report")
    progress: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)
    seed: int | None = None
    scenarios: list[str] | None = None  # run only these scenarios (None: all)
    machines: bool = True  # run the state machines (only with no narrowing --select)
    shrink: bool | None = None  # shrink machine failures (None: not in the quick profile)
    workers: int = 2  # processes of a sharedStore driver in the workers machine (R81)
    # the default run: then the reference driver's own processes (HTTP, stdio with {state},
    # shared workers) run what the in-process driver skips (`jfsm_conformance.run.companions`)
    companions: bool = False
    checkpoint: Callable[[RunResult], object] | None = None  # gets partial results (R55)
    command: str = ""  # the command line as the user typed it (recorded in the report)


@dataclass
class Failure:
    source: str
    check: str
    ids: tuple[str, ...]
    message: str
    trace: str | None = None


@dataclass
class RunResult:
    options: Options
    verdicts: list[dict[str, Any]]
    failures: list[Failure]
    harness_error: str | None
    implementation: dict[str, Any]
    capabilities: dict[str, Any]
    durations: dict[str, float]
    driver_log: str = ""
    exercised: dict[str, dict[str, int]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    partial: bool = False  # the run has not finished (or was interrupted): see `phase`
    phase: str = "finished"  # the last phase reached
    # the default run's companions: each reference process started, and what it ran (R92)
    companions: dict[str, str] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        if self.harness_error:
            return 2
        return 1 if any(v["verdict"] == "fail" for v in self.verdicts) else 0


def implementation_label(implementation: dict[str, Any]) -> str:
    """`name version (language)` from the `hello` reply's implementation object."""
    if not implementation:
        return "unknown"
    name = str(implementation.get("name", "?"))
    version = implementation.get("version")
    language = implementation.get("language")
    return name + (f" {version}" if version else "") + (f" ({language})" if language else "")


def selection(select: str) -> tuple[str, ...]:
    """The ID prefixes of `Options.select` (comma-separated; empty: everything)."""
    return tuple(p.strip() for p in select.split(",") if p.strip())


def selected(rid: str, select: str) -> bool:
    """Whether requirement `rid` is in the selection (`select` empty: every ID is)."""
    prefixes = selection(select)
    return not prefixes or any(rid.startswith(p) for p in prefixes)


def select_error(select: str, catalog: list[dict[str, Any]] | None = None) -> str | None:
    """Why a `--select PREFIX` is unusable (one of the prefixes matches no requirement ID),
    or None."""
    if not select:
        return None
    ids = [r["id"] for r in (catalog if catalog is not None else load_catalog())]
    for prefix in selection(select):
        if not any(i.startswith(prefix) for i in ids):
            areas = sorted({i.rsplit("-", 1)[0] for i in ids})
            return (
                f"--select {prefix!r} matches no requirement ID (IDs start with one of "
                f"{', '.join(areas)}; a prefix such as JF-COMP or JF-COMP-003 selects)"
            )
    return None


def load_catalog() -> list[dict[str, Any]]:
    """The requirement catalog, in file order."""
    return [dict(req) for req in requirements()]
