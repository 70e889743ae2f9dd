"""Running the suite: scenarios, then the state machines, then one verdict per requirement.

`run(options)` returns a `RunResult`; `replay(path)` runs a recorded trace again. A failure
of a check becomes a `Failure` with the requirement IDs it blames and a language-neutral trace
(the session's steps plus every protocol message) written next to the report. A driver that
cannot be started, dies or stops answering is a `HarnessError`: the run stops (exit 2).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis.errors import HypothesisException
from hypothesis.reporting import with_reporter
from hypothesis.stateful import run_state_machine_as_test

from conformance.checks import ConformanceFailure, Ledger
from conformance.driver_client import HarnessError, ProtocolViolation
from conformance.machines import machine_factory
from conformance.scenarios import SCENARIOS, Scenario
from conformance.session import Session
from jfsm.spec import requirements

__all__ = [
    "PROFILES",
    "Failure",
    "Options",
    "Profile",
    "RunResult",
    "load_catalog",
    "replay",
    "run",
]

DEFAULT_DRIVER = "python:jfsm.driver:durable_reference_driver"
PROTOCOL_ROW = "DRIVER-PROTOCOL"
TRACE_FORMAT = "jfsm-conformance-trace/1"


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
    select: str = ""
    expected_failures: dict[str, str] = field(default_factory=dict)
    report_dir: Path = Path("conformance-report")
    progress: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)
    seed: int | None = None
    scenarios: list[str] | None = None  # run only these scenarios (None: all)
    machines: bool = True  # run the state machines (only with no narrowing --select)
    shrink: bool | None = None  # shrink machine failures (None: not in the quick profile)


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

    @property
    def exit_code(self) -> int:
        if self.harness_error:
            return 2
        return 1 if any(v["verdict"] == "fail" for v in self.verdicts) else 0


def load_catalog() -> list[dict[str, Any]]:
    """The requirement catalog, in file order."""
    return [dict(req) for req in requirements()]


class _LogCapture(logging.Handler):
    """Keeps log records of in-process drivers for the report instead of printing them."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.name}: {record.getMessage()}")
        del self.lines[:-200]


def _selected(ids: tuple[str, ...], prefix: str) -> bool:
    return not prefix or any(i.startswith(prefix) for i in ids)


def _needs_met(scenario: Scenario, session: Session) -> str | None:
    for need in filter(None, scenario.needs.split("+")):
        if need == "stdio" and not session.driver_spec.startswith("stdio:"):
            return "needs a stdio driver (the runner kills the process mid-operation)"
        if need == "durableRestart" and not session.capabilities.get("durableRestart"):
            return "the driver does not declare capabilities.durableRestart"
    return None


class _Run:
    def __init__(self, options: Options) -> None:
        self.o = options
        self.ledger = Ledger()
        self.failures: list[Failure] = []
        self.skipped: dict[str, str] = {}
        self.durations: dict[str, float] = {}
        self.trace_dir = options.report_dir / "traces"
        self.shrink = options.shrink if options.shrink is not None else options.profile != "quick"

    def record_failure(
        self,
        source: str,
        exc: BaseException,
        session: Session,
        start: int,
        hypothesis_report: str = "",
    ) -> None:
        if isinstance(exc, ConformanceFailure):
            check, ids, message = exc.check, exc.ids, exc.message
        else:
            check, ids, message = "protocol", (PROTOCOL_ROW,), str(exc)
        if hypothesis_report:
            message += "\n\nFalsifying example (Hypothesis):\n" + hypothesis_report
        path = self.write_trace(source, check, ids, message, session, start)
        self.failures.append(Failure(source, check, ids, message, path))
        self.o.progress(f"  FAIL {source}: [{', '.join(ids)}] {message.splitlines()[0][:200]}")

    def write_trace(
        self,
        source: str,
        check: str,
        ids: tuple[str, ...],
        message: str,
        session: Session,
        start: int,
    ) -> str:
        self.trace_dir.mkdir(parents=True, exist_ok=True)
        path = (
            self.trace_dir
            / f"{len(self.failures) + 1:02d}-{source.replace(' ', '-').replace('/', '-')}.json"
        )
        trace = {
            "format": TRACE_FORMAT,
            "driver": session.driver_spec,
            "thresholds": session.override,
            "source": source,
            "failure": {"check": check, "ids": list(ids), "message": message},
            "steps": session.steps,
            "messages": session.client.transcript[start:],
        }
        path.write_text(json.dumps(trace, ensure_ascii=True, indent=1), encoding="utf-8")
        return str(path)

    def scenarios(self, session: Session) -> None:
        chosen = [
            s
            for s in SCENARIOS
            if _selected(s.ids, self.o.select)
            and (self.o.scenarios is None or s.name in self.o.scenarios)
        ]
        for i, scenario in enumerate(chosen, start=1):
            reason = _needs_met(scenario, session)
            if reason:
                self.skipped[scenario.name] = reason
                self.o.progress(f"[{i}/{len(chosen)}] {scenario.name}: skipped ({reason})")
                continue
            session.steps = []
            start = len(session.client.transcript)
            began = time.monotonic()
            try:
                scenario.run(session)
                status = "pass"
            except (ConformanceFailure, ProtocolViolation) as exc:
                self.record_failure(f"scenario {scenario.name}", exc, session, start)
                session.recover()
                status = "FAIL"
            took = time.monotonic() - began
            self.durations[f"scenario {scenario.name}"] = took
            self.o.progress(f"[{i}/{len(chosen)}] {scenario.name}: {status} ({took:.1f}s)")

    def machine(self, session: Session, label: str, examples: int, steps: int) -> None:
        if examples <= 0:
            return
        began = time.monotonic()
        self.o.progress(f"machine {label}: {examples} random sequences of up to {steps} steps")
        session.trace_start = len(session.client.transcript)
        lines: list[str] = []
        conf = settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            database=None,
            derandomize=self.o.seed is None,
            report_multiple_bugs=False,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.explicit, Phase.reuse, Phase.generate]
            + ([Phase.shrink] if self.shrink else []),
        )
        factory = machine_factory(session)
        try:
            with with_reporter(lambda value: lines.append(str(value))):
                if self.o.seed is not None:
                    from hypothesis import seed as hseed

                    factory = hseed(self.o.seed)(factory)
                run_state_machine_as_test(factory, settings=conf)
            status = "pass"
        except (ConformanceFailure, ProtocolViolation) as exc:
            self.record_failure(
                f"machine {label}", exc, session, session.trace_start, "\n".join(lines[-60:])
            )
            session.recover()
            status = "FAIL"
        except (HypothesisException, ExceptionGroup) as exc:
            # Hypothesis could not replay the failing sequence identically (the driver behaved
            # differently on the second run): report the failure it found, from the context.
            found = _conformance_cause(exc)
            if found is None:
                raise HarnessError(f"machine {label}: {type(exc).__name__}: {exc}") from exc
            self.record_failure(
                f"machine {label} (not reproducible: {type(exc).__name__})",
                found,
                session,
                session.trace_start,
                "\n".join(lines[-60:]),
            )
            session.recover()
            status = "FAIL"
        took = time.monotonic() - began
        self.durations[f"machine {label}"] = took
        self.o.progress(f"machine {label}: {status} ({took:.1f}s)")


def run(options: Options) -> RunResult:
    """Run the suite against `options.driver`; never raises for a failing implementation."""
    if options.profile not in PROFILES:
        raise ValueError(f"unknown profile {options.profile!r}; choose from {sorted(PROFILES)}")
    profile = PROFILES[options.profile]
    r = _Run(options)
    capture = _LogCapture()
    logging.getLogger().addHandler(capture)
    harness_error = None
    implementation: dict[str, Any] = {}
    capabilities: dict[str, Any] = {}
    unsupported: dict[str, str] = {}
    driver_log = ""
    session = None
    try:
        options.progress(f"jfsm conformance: driver {options.driver}, profile {profile.name}")
        session = Session(options.driver, r.ledger)
        implementation, capabilities = session.implementation, session.capabilities
        options.progress(f"implementation {implementation}, capabilities {capabilities}")
        r.scenarios(session)
        broad = options.machines and options.select in ("", "J", "JF", "JF-")
        if broad:
            r.machine(session, "at spec thresholds", profile.examples, profile.steps)
        unsupported.update(session.unsupported)
        driver_log = session.client.stderr_tail()
        session.close()
        session = None
        if not broad:
            r.skipped["state machines"] = "a narrowing --select runs the matching scenarios only"
        elif capabilities.get("thresholdOverride") and profile.small_examples:
            small = Session(options.driver, r.ledger, thresholds=SMALL_THRESHOLDS)
            try:
                r.machine(
                    small,
                    f"at small thresholds {SMALL_THRESHOLDS}",
                    profile.small_examples,
                    profile.small_steps,
                )
                unsupported.update(small.unsupported)
            finally:
                small.close()
        else:
            r.skipped["machine at small thresholds"] = (
                "the driver does not declare thresholdOverride"
            )
    except HarnessError as exc:
        harness_error = str(exc)
        options.progress(f"HARNESS ERROR: {exc}")
        if session is not None:
            driver_log = session.client.stderr_tail()
    finally:
        if session is not None:
            with contextlib.suppress(Exception):
                session.close()
        logging.getLogger().removeHandler(capture)
    driver_log = "\n".join(filter(None, [driver_log, "\n".join(capture.lines[-40:])]))
    verdicts = judge(
        load_catalog(), r.ledger, r.failures, options, unsupported, r.skipped, capabilities
    )
    return RunResult(
        options,
        verdicts,
        r.failures,
        harness_error,
        implementation,
        capabilities,
        r.durations,
        driver_log,
    )


def judge(
    catalog: list[dict[str, Any]],
    ledger: Ledger,
    failures: list[Failure],
    options: Options,
    unsupported: dict[str, str],
    skipped: dict[str, str],
    capabilities: dict[str, Any],
) -> list[dict[str, Any]]:
    """One verdict per requirement: pass, fail, xfail, xpass or not covered (with a reason)."""
    failed: dict[str, list[Failure]] = {}
    for f in failures:
        for rid in f.ids:
            failed.setdefault(rid, []).append(f)
    rows = []
    if PROTOCOL_ROW in failed:
        rows.append(
            {
                "id": PROTOCOL_ROW,
                "level": "MUST",
                "title": "Replies follow driver protocol v1",
                "verdict": "fail",
                "checks": ["protocol"],
                "reason": None,
                "failures": [_failure_json(f) for f in failed[PROTOCOL_ROW]],
            }
        )
    for req in catalog:
        rid = req["id"]
        if options.select and not rid.startswith(options.select):
            continue
        row: dict[str, Any] = {
            "id": rid,
            "level": req["level"],
            "title": req["title"],
            "checks": sorted(ledger.checks_by_id.get(rid, ())),
            "passes": ledger.passes.get(rid, 0),
            "failures": [_failure_json(f) for f in failed.get(rid, [])],
            "reason": None,
        }
        expected = options.expected_failures.get(rid)
        if rid in failed:
            row["verdict"] = "xfail" if expected is not None else "fail"
            if expected is not None:
                row["reason"] = expected
        elif ledger.passes.get(rid):
            row["verdict"] = "xpass" if expected is not None else "pass"
            if expected is not None:
                row["reason"] = f"listed as an expected failure ({expected}) but passed"
        else:
            row["verdict"] = "not covered"
            if req.get("verification") != "suite":
                row["reason"] = f"{req.get('verification')}: {req.get('reason', '')}".strip()
            elif req.get("level") == "MAY":
                row["reason"] = "optional (MAY): credited only when the implementation shows it"
            elif rid == "JF-ATOM-004" and not capabilities.get("durableRestart"):
                row["reason"] = "the driver does not declare capabilities.durableRestart"
            elif unsupported:
                row["reason"] = f"not exercised; the driver does not support {sorted(unsupported)}"
            elif skipped:
                row["reason"] = f"not exercised in this run (skipped: {', '.join(sorted(skipped))})"
            else:
                row["reason"] = "not exercised in this run"
        rows.append(row)
    return rows


def _conformance_cause(exc: BaseException) -> BaseException | None:
    """The first check failure inside `exc`: its cause/context chain or exception group."""
    seen = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, (ConformanceFailure, ProtocolViolation)):
            return current
        pending += list(getattr(current, "exceptions", ()))
        pending += [e for e in (current.__cause__, current.__context__) if e is not None]
    return None


def _failure_json(f: Failure) -> dict[str, Any]:
    return {"source": f.source, "check": f.check, "message": f.message, "trace": f.trace}


def replay(
    path: str | Path,
    *,
    driver: str | None = None,
    progress: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> int:
    """Run the steps of a trace again; 1 if it still fails, 0 if it passes, 2 on harness error."""
    trace = json.loads(Path(path).read_text(encoding="utf-8"))
    if trace.get("format") != TRACE_FORMAT:
        progress(f"{path}: not a {TRACE_FORMAT} trace")
        return 2
    spec = driver or trace["driver"]
    progress(f"replaying {len(trace['steps'])} steps of {path} against {spec}")
    progress(
        f"recorded failure: [{', '.join(trace['failure']['ids'])}] "
        f"{trace['failure']['message'].splitlines()[0]}"
    )
    try:
        session = Session(spec, thresholds=trace.get("thresholds"))
    except HarnessError as exc:
        progress(f"HARNESS ERROR: {exc}")
        return 2
    try:
        for i, step in enumerate(trace["steps"], start=1):
            progress(f"  {i}. {step['step']}({_brief(step['args'])})")
            getattr(session, step["step"])(**step["args"])
    except (ConformanceFailure, ProtocolViolation) as exc:
        progress(f"reproduced: {exc}")
        return 1
    except HarnessError as exc:
        progress(f"HARNESS ERROR: {exc}")
        return 2
    finally:
        with contextlib.suppress(Exception):
            session.close()
    progress("the trace passed: the failure did not reproduce")
    return 0


def _brief(args: dict[str, Any]) -> str:
    out = io.StringIO()
    for k, v in args.items():
        text = json.dumps(v, ensure_ascii=False)
        out.write(f"{k}={text[:60]}{'…' if len(text) > 60 else ''}, ")
    return out.getvalue().rstrip(", ")
