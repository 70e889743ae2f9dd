"""Run the profile against one adapter and turn what it found into verdicts per property.

The runner searches with the state machine; when a property fails it records that
property's minimal example (Hypothesis shrinks it), disables the property and searches
again, until a search passes. Verdicts:

- `pass`: checked, never violated;
- `fail`: violated (the report shows the minimal example);
- `by design`: violated, and the adapter's scope documents it with a reason;
- `not applicable`: the adapter's scope does not claim the situation;
- `not exercised`: applicable but never checked;
- `error`: undecided, the search stopped early (a harness error, or `first_failure`).

An adapter whose scope declares several writers (`writers="multi"`) is searched twice, as
two dimensions: with one writer (its scope with `writers="single"`: nothing is appended while
a compaction is held) and with two overlapping writers (a second writer appends while the
first one's summarizer call is held and released with a drawn outcome). `ProfileResult`
holds the single-writer verdicts and, in `several`, the several-writers result;
`ProfileOptions.writers` runs one dimension only. The exit code is the worse of the two.

While it searches or replays, what the library says is captured, not printed between the
verdicts (`said`: its warnings and log records, counted by category and source into the
report's `library_warnings`; decisions R116, R203).

A search that passes must also have reached what it judges (`reach`, decision R200): the
summarizer called at least once where a property needs a call (JF-SAFE-020), and no more
applicable properties *not exercised* than `allow_not_exercised` (JF-SAFE-021). Either
failing makes the exit code 1, never 0.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from .adapter import AdapterFactory, AdapterSpec, Scope, Unavailable
from .adapters import adapter_error, resolve
from .properties import PROPERTIES
from .reach import judge_reach
from .safety_machine import PropertyViolation, Recorder, machine_class
from .said import Said, captured

__all__ = ["TRACE_FORMAT", "ProfileOptions", "ProfileResult", "replay", "run_profile"]

TRACE_FORMAT = "jfsm-profile-trace/1"

_NEEDS = {
    "raise": "a provider that can raise",
    "timeout": "a provider that can time out",
    "empty": "a provider that can return an empty summary",
    "write_fail": "storage whose replacement write can fail",
    "multi": "several writers",
    "hold": "a summarizer call that can be held in flight (async)",
    "observe": "storage whose states it observes, or a summarizer call it can hold",
}


@dataclass
class ProfileOptions:
    """What to run: an adapter by name, how much to search, whether to shrink failures to a
    minimal example, `only` these property IDs, whether to stop at the `first_failure`,
    and a progress sink."""

    adapter: str = "reference"
    examples: int = 30
    steps: int = 16
    seed: int | None = None
    shrink: bool = True
    only: frozenset[str] | None = None
    first_failure: bool = False
    writers: str | None = None  # "single" or "multi": one dimension only (None: both)
    allow_not_exercised: int = 0  # applicable properties that may stay not exercised
    progress: Callable[[str], None] = field(
        default=lambda line: print(line, file=sys.stderr), repr=False
    )


@dataclass
class ProfileResult:
    """Verdicts per property, the scope, counts and the exit code (0, 1 or 2)."""

    options: ProfileOptions
    scope: Scope | None
    verdicts: list[dict[str, Any]]
    recorder: Recorder
    searches: int
    duration_s: float
    exit_code: int
    harness_error: str | None = None
    several: ProfileResult | None = None  # the several-writers dimension, if searched
    writers: str = "single"  # the dimension these verdicts were searched in
    reach: list[dict[str, Any]] = field(default_factory=list)  # JF-SAFE-020, -021 (R200)

    def failed_reach(self) -> list[dict[str, Any]]:
        """The rows of `reach` that failed."""
        return [row for row in self.reach if row["verdict"] == "fail"]


def run_profile(
    options: ProfileOptions,
    *,
    factory: AdapterFactory | None = None,
    scope: Scope | None = None,
    spec: AdapterSpec | None = None,
) -> ProfileResult:
    """Run the profile (see the module docs) against `options.adapter`: a registered name or
    a user's `module:attr`; or pass `spec` (or `factory` and `scope`) for an adapter object
    directly (`options.adapter` then only labels the report). Never raises for the adapter's
    sake: an unknown or broken adapter, a missing library, an adapter that hangs or raises
    outside `compact` is a harness error (`exit_code` 2, `harness_error` says what), never
    a failed property (`exit_code` 1)."""
    began = time.monotonic()
    recorder = Recorder()
    if spec is not None:
        factory, scope = spec.factory, spec.scope
    try:
        if factory is None or scope is None:
            factory, scope = resolve(options.adapter)
    except (KeyError, Unavailable) as exc:
        error = f"adapter: {adapter_error(exc)}"
        return ProfileResult(options, None, [], recorder, 0, 0.0, 2, error)
    if options.writers not in (None, "single", "multi"):
        return ProfileResult(options, scope, [], recorder, 0, 0.0, 2, "writers: single or multi")
    if scope.writers == "multi" and options.writers is None:
        single = _dimension(options, factory, scope.one_writer(), recorder, began, "one writer")
        several = _dimension(
            options, factory, scope, Recorder(), time.monotonic(), "two overlapping writers"
        )
        single.scope, single.several = scope, several
        single.exit_code = max(single.exit_code, several.exit_code)
        single.harness_error = single.harness_error or several.harness_error
        single.duration_s = time.monotonic() - began
        return single
    if options.writers == "single":
        scope = scope.one_writer()
    label = "two overlapping writers" if scope.writers == "multi" else "one writer"
    return _dimension(options, factory, scope, recorder, began, label)


def _dimension(
    options: ProfileOptions,
    factory: AdapterFactory,
    scope: Scope,
    recorder: Recorder,
    began: float,
    label: str,
) -> ProfileResult:
    """One search of the profile (see `run_profile`) with `scope` as given."""
    caps = scope.capabilities()
    enabled = {
        p.id
        for p in PROPERTIES
        if p.needs <= caps
        and p.id not in scope.not_applicable
        and (options.only is None or p.id in options.only)
    }
    failures: dict[str, PropertyViolation] = {}
    conf = settings(
        max_examples=options.examples,
        stateful_step_count=options.steps,
        deadline=None,
        database=None,
        derandomize=options.seed is None,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate] + ([Phase.shrink] if options.shrink else []),
    )
    options.progress(
        f"profile {options.adapter}: {scope.library} {scope.version} via {scope.entry_point}"
        f" ({label})"
    )
    with captured(recorder.warnings):
        searches, harness_error, stopped_early = _search(
            options, factory, scope, enabled, recorder, failures, conf
        )
    undecided = frozenset(enabled) if harness_error or stopped_early else frozenset()
    verdicts = _verdicts(scope, caps, failures, recorder, undecided, options.only)
    reach = judge_reach(
        verdicts,
        reached=recorder.reached,
        requested=recorder.requested,
        unawaited=recorder.warnings.unawaited,
        allowed=options.allow_not_exercised,
        harness_error=harness_error,
        stopped_early=stopped_early,
        selected=options.only,
    )
    failed = any(v["verdict"] == "fail" for v in [*verdicts, *reach])
    code = 2 if harness_error else (1 if failed else 0)
    if code == 1 and (missed := [row for row in reach if row["verdict"] == "fail"]):
        for row in missed:
            options.progress(f"  {row['id']} failed: {row['message']}")
    return ProfileResult(
        options,
        scope,
        verdicts,
        recorder,
        searches,
        time.monotonic() - began,
        code,
        harness_error,
        writers=scope.writers,
        reach=reach,
    )


def _search(
    options: ProfileOptions,
    factory: AdapterFactory,
    scope: Scope,
    enabled: set[str],
    recorder: Recorder,
    failures: dict[str, PropertyViolation],
    conf: settings,
) -> tuple[int, str | None, bool]:
    """Search until a search passes: each violated property is recorded in `failures` and
    taken out of `enabled`. Returns the number of searches, the harness error (if any) and
    whether it stopped at the first failure."""
    searches = 0
    while enabled:
        searches += 1
        cls = machine_class(factory, scope, frozenset(enabled), recorder)
        try:
            if options.seed is not None:
                from hypothesis import seed as hseed

                cls = hseed(options.seed)(cls)
            run_state_machine_as_test(cls, settings=conf)
        except PropertyViolation as exc:
            failures[exc.rid] = exc
            enabled.discard(exc.rid)
            options.progress(f"  {exc.rid} violated: {exc.detail.splitlines()[0][:140]}")
            if options.first_failure:
                return searches, None, True
            continue
        except Exception as exc:
            harness_error = f"{type(exc).__name__}: {exc}"
            options.progress(f"  HARNESS ERROR {harness_error[:300]}")
            return searches, harness_error, False
        break
    return searches, None, False


def _verdicts(
    scope: Scope,
    caps: frozenset[str],
    failures: dict[str, PropertyViolation],
    recorder: Recorder,
    undecided: frozenset[str],
    options_only: frozenset[str] | None = None,
) -> list[dict[str, Any]]:
    rows = []
    for prop in PROPERTIES:
        row: dict[str, Any] = {
            "id": prop.id,
            "check": prop.name,
            "title": prop.title,
            "evaluations": recorder.evaluated.get(prop.id, 0),
            "reason": None,
            "example": None,
            "message": None,
        }
        lacking = sorted(prop.needs - caps)
        if options_only is not None and prop.id not in options_only:
            row["verdict"] = "not exercised"
            row["reason"] = "not selected in this run"
        elif prop.id in scope.not_applicable:
            row["verdict"] = "not applicable"
            row["reason"] = scope.not_applicable[prop.id]
        elif lacking:
            row["verdict"] = "not applicable"
            row["reason"] = "scope: needs " + ", ".join(_NEEDS[n] for n in lacking)
        elif prop.id in failures:
            violation = failures[prop.id]
            row["message"] = violation.detail
            row["example"] = violation.steps
            row["trace"] = violation.trace
            if prop.id in scope.by_design:
                row["verdict"] = "by design"
                row["reason"] = scope.by_design[prop.id]
            else:
                row["verdict"] = "fail"
        elif prop.id in undecided:
            row["verdict"] = "error"
            row["reason"] = "undecided: the search stopped early (harness error or first failure)"
        elif row["evaluations"]:
            row["verdict"] = "pass"
        else:
            row["verdict"] = "not exercised"
            row["reason"] = "the search never reached a state where this check applies"
        rows.append(row)
    return rows


def replay(
    path: str | Path,
    *,
    adapter: str | None = None,
    progress: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> int:
    """Run the steps of a recorded failing example again and judge the property it was
    recorded for (decision R146): 1 if that property still fails on them, 0 if it no longer
    does, 2 on a harness error (bad trace, missing library, a property the adapter's scope
    does not claim, a trace of two overlapping writers against an adapter that declares
    one). The steps run in the dimension the trace was recorded in (the adapter's declared
    scope for a trace that does not say, R202), and the library's output is captured, not
    printed. The other properties the same steps break are listed after it; they do not
    change the exit code, so a library's maintainer can check one fix."""
    try:
        trace = json.loads(Path(path).read_text(encoding="utf-8"))
        if trace.get("format") != TRACE_FORMAT:
            raise ValueError(f"not a {TRACE_FORMAT} trace")
        name = adapter or trace["adapter"]
        recorded = str(trace["property"])
        factory, scope = resolve(name)
        writers = trace.get("writers", scope.writers)  # a trace without it: the declared one
        if writers not in ("single", "multi"):
            raise ValueError(f"writers must be single or multi, not {writers!r}")
    except (KeyError, Unavailable) as exc:
        progress(f"HARNESS ERROR: {adapter_error(exc)}")
        return 2
    except (OSError, ValueError) as exc:
        progress(f"HARNESS ERROR: {exc}")
        return 2
    if writers == "multi" and scope.writers != "multi":
        progress(
            f"HARNESS ERROR: the trace was recorded with two overlapping writers and {name} "
            "declares one writer (its scope's writers): nothing to judge"
        )
        return 2
    if writers == "single":  # recorded in the one-writer search
        scope = scope.one_writer()
    label = "two overlapping writers" if writers == "multi" else "one writer"
    progress(
        f"replaying {len(trace['steps'])} steps of {path} against {name} ({scope.version}, {label})"
    )
    progress(f"recorded: {recorded}: {trace['message'].splitlines()[0]}")
    applicable = {
        p.id
        for p in PROPERTIES
        if p.needs <= scope.capabilities() and p.id not in scope.not_applicable
    }
    if recorded not in applicable:
        progress(f"HARNESS ERROR: {recorded} does not apply to {name}'s scope: nothing to judge")
        return 2
    said = Said()
    try:
        with captured(said):  # the library's output, counted as a run counts it (R116)
            fired = _replayed(trace["steps"], factory, scope, frozenset({recorded}))
            others: list[PropertyViolation] = []
            left = applicable - {recorded}
            while left and (other := _replayed(trace["steps"], factory, scope, frozenset(left))):
                others.append(other)
                left.discard(other.rid)
    except Exception as exc:
        progress(f"HARNESS ERROR: {type(exc).__name__}: {exc}")
        return 2
    if fired is not None:
        progress(f"reproduced: {recorded}: {fired.detail}")
    else:
        progress(f"fixed: {recorded} no longer fails on these steps")
    for other in others:
        progress(
            f"also fails on these steps (not judged by this replay): {other.rid}: {other.detail}"
        )
    if said.total():
        progress(
            f"library warnings and log records: {said.total()} captured ({len(said.groups)} "
            "groups by category and source), not shown"
        )
    return 1 if fired is not None else 0


def _replayed(
    steps: list[dict[str, Any]], factory: AdapterFactory, scope: Scope, enabled: frozenset[str]
) -> PropertyViolation | None:
    """Run `steps` on a fresh machine checking only `enabled`: the first violation, or None."""
    machine = machine_class(factory, scope, enabled, Recorder())()
    try:
        for step in steps:
            getattr(machine, step["step"])(**step["args"])
            machine.general()  # type: ignore[attr-defined]
    except PropertyViolation as exc:
        return exc
    finally:
        machine.teardown()
    return None
