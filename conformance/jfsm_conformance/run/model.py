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
    "Judge",
    "Options",
    "Profile",
    "RunResult",
    "implementation_label",
    "load_catalog",
    "not_judged_by_suite",
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
    # in the default run, the parts that only wait (the bounded waits, the companions) go on
    # beside the rest, each on its own driver session; False runs them one after another, in
    # the same order and with the same verdicts (decision R170)
    parallel: bool = True
    checkpoint: Callable[[RunResult], object] | None = None  # gets partial results (R55)
    hello_timeout: float = 10.0  # seconds for the reply to hello (`--hello-timeout`, R195)
    op_timeout: float = 120.0  # seconds for any other reply (`--op-timeout`, R195)
    command: str = ""  # the command line as the user typed it (recorded in the report)


@dataclass
class Failure:
    source: str
    check: str
    ids: tuple[str, ...]
    message: str
    trace: str | None = None


@dataclass
class Judge:
    """A scenario or a machine of a run: the requirement IDs it judges, and how it went.

    `status` is `pass`, `fail`, `skipped` (it could not run against this driver: `why` says
    so in a few words, `reason` in full), `unsupported` (the driver answered an op it needs
    with `unsupported_op`) or `left out` (the run's options left it out)."""

    what: str
    ids: frozenset[str]
    status: str
    why: str = ""
    reason: str = ""


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
    # every scenario and machine the selection named, and how it went (`Judge`)
    judges: list[Judge] = field(default_factory=list)
    interrupted: bool = False  # stopped by Ctrl-C or SIGTERM (R196)

    @property
    def exit_code(self) -> int:
        """130 for a run interrupted by Ctrl-C or SIGTERM (decision R196), 2 for a harness
        error or a `--select` that judged nothing (`judged_nothing`), 1 when a requirement
        failed, else 0."""
        if self.interrupted:
            return 130
        if self.harness_error:
            return 2
        if any(v["verdict"] == "fail" for v in self.verdicts):
            return 1
        return 2 if self.judged_nothing else 0

    @property
    def judged_nothing(self) -> str | None:
        """With a `--select`, when no selected requirement got a verdict (every one is not
        covered): one line saying why, else None (decision R142)."""
        if not self.options.select or self.harness_error or self.partial:
            return None
        rows = [v for v in self.verdicts if v["id"].startswith("JF-")]
        if any(v["verdict"] != "not covered" for v in rows):
            return None
        whys = sorted({v.get("why") or "not exercised" for v in rows})
        return (
            f"--select {self.options.select} judged nothing: every selected requirement is "
            f"not covered ({'; '.join(whys)}); nothing about conformance can be concluded"
        )


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
    """Why a `--select PREFIX` is unusable, or None: one of the prefixes matches no
    requirement ID, or the whole selection holds no requirement the suite judges (only
    profile or not-observable ones: it would judge nothing, decision R142)."""
    if not select:
        return None
    rows = catalog if catalog is not None else load_catalog()
    ids = [r["id"] for r in rows]
    for prefix in selection(select):
        if not any(i.startswith(prefix) for i in ids):
            areas = sorted({i.rsplit("-", 1)[0] for i in ids})
            return (
                f"--select {prefix!r} matches no requirement ID (IDs start with one of "
                f"{', '.join(areas)}; a prefix such as JF-COMP or JF-COMP-003 selects)"
            )
    chosen = [r for r in rows if selected(r["id"], select)]
    if not any(r.get("verification", "suite") == "suite" for r in chosen):
        how = sorted({not_judged_by_suite(r)[0] for r in chosen})
        return (
            f"--select {select!r} selects no requirement jfsm conformance judges "
            f"({'; '.join(how)}): it would judge nothing"
        )
    return None


def not_judged_by_suite(requirement: dict[str, Any]) -> tuple[str, str]:
    """For a requirement the catalog says the suite does not verify: why, in a few words
    and in full (the catalog's reason)."""
    how = requirement.get("verification")
    short = {
        "profile": "profile: `jfsm profile`",
        "engine": "the reference engine's own tests",
        "not-observable": "not observable",
    }.get(str(how), str(how))
    return short, f"{how}: {requirement.get('reason', '')}".strip()


def load_catalog() -> list[dict[str, Any]]:
    """The requirement catalog, in file order."""
    return [dict(req) for req in requirements()]
