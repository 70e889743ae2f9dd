"""Running the suite: scenarios, then the state machines, then one verdict per requirement.

**The one concept: one run of the suite, phase by phase, into one ledger and one verdict
per requirement.** What each phase runs lives elsewhere (`jfsm_conformance.scenarios`, the
machines of `jfsm_conformance.machines.explore` and `jfsm_conformance.machines.workers`, the
default run's
reference processes in `jfsm_conformance.run.companions`); what stays here is their order, the
recording of failures with their traces, partial results and the judging.

Phases: the handshake; the scenarios (each skipped, with its reason, when the driver lacks
what it needs); the machine at the spec thresholds; the machine at small thresholds (with
`thresholdOverride`); the workers machine (with `sharedStore`); in the default run only, the
companions, which run over the reference driver's own processes what the in-process driver
had to skip. A `--select` runs every scenario and machine that judges a selected requirement
(`Scenario.ids`, `machines.explore.judges`, `machines.workers.OWNERSHIP_IDS`; decision R142);
each is recorded as a `Judge` with how it went, from which a requirement left not covered
gets its true reason (`judge`, decision R143).

`run(options)` returns a `RunResult`; `replay(path)` runs a recorded trace again. A failure
of a check becomes a `Failure` with the requirement IDs it blames and a language-neutral trace
(the session's steps plus every protocol message) written next to the report. A driver that
cannot be started, dies or stops answering is a `HarnessError`: the run stops (exit 2).

`Options.checkpoint`, if set, is called with a partial `RunResult` (`partial=True`, `phase`
the last phase reached) after the handshake, after each scenario, every few seconds of a
machine phase and after each machine phase; the CLI writes it as the report, so a run killed
by SIGKILL (the OOM killer) still leaves one. A `KeyboardInterrupt` (Ctrl-C, or SIGTERM,
which the CLI turns into one) ends the run with a partial result and exit 2 (decision R55).
"""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import logging
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from jfsm_conformance.client.driver import HarnessError, ProtocolViolation
from jfsm_conformance.machines import workers
from jfsm_conformance.machines.explore import (
    PROTOCOL_ROW,
    Found,
    explore,
    unsupported_in,
)
from jfsm_conformance.machines.explore import judges as memory_judges
from jfsm_conformance.run import companions, exercise
from jfsm_conformance.run.traces import TraceDir, TraceError, read_trace, unpack
from jfsm_conformance.scenarios import SCENARIOS, Scenario
from jfsm_conformance.steps.session import STEPS, Session
from jfsm_conformance.verify.checks import ConformanceFailure, Ledger

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

from jfsm_conformance.run.model import (
    DEFAULT_DRIVER,
    DEFAULT_DRIVER_NOTE,
    PROFILES,
    SMALL_THRESHOLDS,
    SYNTHETIC_ROWS,
    Failure,
    Judge,
    Options,
    Profile,
    RunResult,
    implementation_label,
    load_catalog,
    not_judged_by_suite,
    select_error,
    selected,
)


class _LogCapture(logging.Handler):
    """Keeps log records of in-process drivers for the report instead of printing them."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.name}: {record.getMessage()}")
        del self.lines[:-200]


def _selected(ids: tuple[str, ...], select: str) -> bool:
    return any(selected(i, select) for i in ids)


NOT_SHRUNK = (
    "not shrunk: a deterministic scenario had already failed, and its trace is the short "
    "replay (decision R80)"
)


def _needs_met(scenario: Scenario, session: Session) -> tuple[str, str] | None:
    """Why `scenario` cannot run against this driver, in a few words and in full (every
    missing capability, the declared-capability ones first), or None."""
    reasons: list[tuple[str, str]] = []
    stdio = session.world.driver_spec.startswith("stdio:")
    http = session.world.driver_spec.startswith(("http:", "https:"))
    capabilities = session.world.capabilities
    needs = list(filter(None, scenario.needs.split("+")))
    needs.sort(key=lambda need: need != "durableRestart")
    for need in needs:
        if need == "durableRestart" and not capabilities.get("durableRestart"):
            reasons.append(
                (
                    "needs capability durableRestart",
                    "the driver does not declare capabilities.durableRestart (the scenario "
                    "restarts the driver and reopens its games)",
                )
            )
        if need == "deadlineOverride" and not capabilities.get("deadlineOverride"):
            reasons.append(
                (
                    "needs capability deadlineOverride",
                    "the driver does not declare capabilities.deadlineOverride",
                )
            )
        if need == "http" and not http:
            reasons.append(
                (
                    "needs an HTTP driver",
                    "needs an HTTP driver (JF-ERR-011 and JF-ERR-012 are about HTTP requests)",
                )
            )
        if need == "state" and getattr(session.world.client.transport, "state", None) is None:
            reasons.append(
                (
                    "needs {state} in the stdio command",
                    "needs a stdio driver whose command names {state} (the suite starts it "
                    "on directories of its own)",
                )
            )
        if need == "stdio" and not stdio:
            reasons.append(
                (
                    "needs a stdio driver",
                    "needs a stdio driver (the runner kills the process mid-operation)",
                )
            )
        if need == "kill" and not stdio and not capabilities.get("crashInjection"):
            reasons.append(
                (
                    "needs stdio or capability crashInjection",
                    "needs a stdio driver or capabilities.crashInjection (to kill it "
                    "mid-operation)",
                )
            )
    if not reasons and "kill" in needs and session.kill_mode is None:
        reasons.append(
            (
                "needs a driver the suite can restart",
                "the driver cannot be restarted in process (to kill it mid-operation)",
            )
        )
    if not reasons:
        return None
    return reasons[0][0], "; ".join(long for _, long in reasons)


class _Run:
    def __init__(self, options: Options) -> None:
        self.o = options
        self.ledger = Ledger()
        self.failures: list[Failure] = []
        self.skipped: dict[str, str] = {}
        self.unsupported: dict[str, str] = {}
        self.durations: dict[str, float] = {}
        self.traces = TraceDir(options.report_dir / "traces")
        self.shrink = options.shrink if options.shrink is not None else options.profile != "quick"
        self.catalog = load_catalog()
        self.implementation: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        self.counts = exercise.Counts()
        self.phase = "starting"
        self.current = "the handshake"  # the scenario or machine running (a harness error names it)
        self.companions: dict[str, str] = {}  # the default run's reference processes (R92)
        # every scenario and machine the selection names, by name, and how it went (R143)
        self.judges: dict[str, Judge] = {}

    def result(
        self,
        harness_error: str | None,
        driver_log: str = "",
        *,
        partial: bool,
        running: bool = False,
    ) -> RunResult:
        """The run's result so far; `running`: a checkpoint of a run that goes on."""
        verdicts = judge(
            self.catalog,
            self.ledger,
            self.failures,
            self.o,
            self.unsupported,
            self.skipped,
            self.capabilities,
            judges=list(self.judges.values()),
            stopped=self.phase if partial else None,
            running=running,
        )
        return RunResult(
            self.o,
            verdicts,
            list(self.failures),
            harness_error,
            self.implementation,
            self.capabilities,
            dict(self.durations),
            driver_log,
            self.counts.table(),
            dict(self.skipped),
            partial=partial,
            phase=self.phase,
            companions=dict(self.companions),
            judges=list(self.judges.values()),
        )

    def reached(self, phase: str) -> None:
        """Record the phase reached and hand a partial result to `Options.checkpoint`."""
        self.phase = phase
        if self.o.checkpoint is not None:
            self.o.checkpoint(self.result(None, partial=True, running=True))

    def record_failure(
        self,
        source: str,
        found: Found,
        driver: str,
        thresholds: dict[str, int] | None,
        hypothesis_report: str = "",
    ) -> None:
        """Record a failure of `source` against `driver` (run at `thresholds`), its trace."""
        exc = found.exc
        if isinstance(exc, ConformanceFailure):
            check, ids, message = exc.check, exc.ids, exc.message
        else:
            check, ids, message = "protocol", (PROTOCOL_ROW,), str(exc)
        if found.note:
            message += f"\n\nNote: {found.note}."
        if hypothesis_report:
            message += "\n\nFalsifying example (Hypothesis):\n" + hypothesis_report
        path = None
        if found.steps:
            path = str(
                self.traces.write(
                    source=source,
                    driver=driver,
                    thresholds=thresholds,
                    failure={"check": check, "ids": list(ids), "message": message},
                    steps=found.steps,
                    messages=found.messages,
                    note=found.note,
                )
            )
        self.failures.append(Failure(source, check, ids, message, path))
        self.o.progress(f"  FAIL {source}: [{', '.join(ids)}] {message.splitlines()[0][:200]}")

    def not_supported(self, what: str, op: str) -> str:
        self.unsupported.setdefault(op, "unsupported_op")
        reason = f"the driver does not support op {op!r} (unsupported_op)"
        self.skipped[what] = reason
        return reason

    def scenarios(self, session: Session, only: set[str] | None = None, label: str = "") -> None:
        """Run the selected scenarios (`only`: just these) against `session`; `label` prefixes
        the progress lines (a companion's). Each is recorded as a `Judge`."""
        chosen = []
        for s in SCENARIOS:
            if not _selected(s.ids, self.o.select) or (only is not None and s.name not in only):
                continue
            if self.o.scenarios is None or s.name in self.o.scenarios:
                chosen.append(s)
                continue
            # left out by the options; a capability it lacks is still the truer reason
            need = _needs_met(s, session)
            why, reason = need or ("left out of this run", "the run's options left it out")
            status = "skipped" if need else "left out"
            self.judge_as(f"scenario {s.name}", s.ids, status, why, reason)
        prefix = f"{label}: " if label else ""
        total_began = time.monotonic()
        for i, scenario in enumerate(chosen, start=1):
            what = f"scenario {scenario.name}"
            need = _needs_met(scenario, session)
            if need:
                self.skipped[scenario.name] = need[1]
                self.judge_as(what, scenario.ids, "skipped", *need)
                self.o.progress(f"{prefix}[{i}/{len(chosen)}] {scenario.name}: skipped ({need[1]})")
                continue
            self.current = what
            session.begin_sequence()
            start = session.world.client.transcript.mark()
            session.trace_start = start
            began = time.monotonic()
            try:
                scenario.run(session)
                status = "pass"
                self.judge_as(what, scenario.ids, "pass")
            except (ConformanceFailure, ProtocolViolation) as exc:
                op = unsupported_in(session)
                if op is not None:
                    reason = self.not_supported(what, op)
                    status = "not covered: " + reason
                    self.judge_as(what, scenario.ids, "unsupported", f"op {op} unsupported", reason)
                else:
                    found = Found(
                        exc,
                        list(session.steps),
                        session.world.client.transcript.since(start),
                    )
                    where = (session.world.driver_spec, session.world.override)
                    self.record_failure(what, found, *where)
                    status = "FAIL"
                    self.judge_as(what, scenario.ids, "fail")
                session.recover()
            took = time.monotonic() - began
            self.durations[what] = took
            left = ""
            spent = time.monotonic() - total_began
            estimate = spent / i * (len(chosen) - i)
            if i < len(chosen) and estimate >= 5:
                left = f", about {estimate:.0f} s of scenarios left"
            self.o.progress(
                f"{prefix}[{i}/{len(chosen)}] {scenario.name}: {status} ({took:.1f}s{left})"
            )
            self.reached(f"scenario {scenario.name} ({i}/{len(chosen)} scenarios)")

    def judge_as(
        self, what: str, ids: Iterable[str], status: str, why: str = "", reason: str = ""
    ) -> None:
        """Record how the scenario or machine `what`, which judges `ids`, went (a later
        record of the same one, a companion's, replaces it)."""
        self.judges.pop(what, None)
        self.judges[what] = Judge(what, frozenset(ids), status, why, reason)

    def workers(self, capabilities: dict[str, Any], spec: str | None = None) -> None:
        """The workers machine (`jfsm_conformance.machines.workers`) over the run's driver
        or `spec`, recorded as a `Judge`."""
        label = f"machine workers (K={self.o.workers})"
        began = len(self.failures)
        workers.phase(self, capabilities, self.o.profile, self.o.workers, spec=spec)
        if label in self.skipped:
            reason = self.skipped[label]
            shared = "sharedStore" in reason
            why = "needs capability sharedStore" if shared else "needs a stdio driver"
            self.judge_as(label, workers.OWNERSHIP_IDS, "skipped", why, reason)
        else:
            failed = any(f.source == label for f in self.failures[began:])
            self.judge_as(label, workers.OWNERSHIP_IDS, "fail" if failed else "pass")

    def machine(self, session: Session, label: str, examples: int, steps: int) -> None:
        what = f"machine {label}"
        ids = memory_judges(session.world.capabilities)
        if examples <= 0:
            self.judge_as(what, ids, "left out", "left out of this run", "no examples asked")
            return
        began = time.monotonic()
        self.current = f"machine {label}"
        self.o.progress(f"machine {label}: {examples} random sequences of up to {steps} steps")
        # a scenario already failed: its trace names the cause; no minutes of shrinking (R80)
        shrink = self.shrink and not self.failures
        outcome = explore(
            session,
            label,
            examples,
            steps,
            seed=self.o.seed,
            shrink=shrink,
            progress=self.o.progress,
            checkpoint=lambda done: self.reached(f"machine {label}: {done}"),
        )
        status = outcome.status
        if outcome.status == "unsupported" and outcome.unsupported:
            reason = self.not_supported(what, outcome.unsupported)
            status = "not covered: " + reason
            self.judge_as(what, ids, "unsupported", f"op {outcome.unsupported} unsupported", reason)
        else:
            self.judge_as(what, ids, "fail" if outcome.failures else "pass")
        for found in outcome.failures:
            if shrink != self.shrink:
                found.note = "; ".join(filter(None, [found.note, NOT_SHRUNK]))
            where = (session.world.driver_spec, session.world.override)
            self.record_failure(f"machine {label}", found, *where, outcome.hypothesis_report)
        if outcome.status != "pass":
            session.recover()
        took = time.monotonic() - began
        self.durations[f"machine {label}"] = took
        self.o.progress(
            f"machine {label}: {status.upper() if status == 'fail' else status} ({took:.1f}s)"
        )
        self.reached(f"machine {label}: done")


def run(options: Options) -> RunResult:
    """Run the suite against `options.driver`; never raises for a failing implementation.

    A `--select` prefix that matches no requirement, or a selection of nothing the suite
    judges, is a harness error (exit 2): nothing would run, and a CI job would pass silently.
    A selection that judged nothing once run exits 2 too (`RunResult.judged_nothing`)."""
    if options.profile not in PROFILES:
        raise ValueError(f"unknown profile {options.profile!r}; choose from {sorted(PROFILES)}")
    profile = PROFILES[options.profile]
    r = _Run(options)
    r.traces.clear()
    r.reached("starting")  # replaces a report left by an earlier run at once
    capture = _LogCapture()
    logging.getLogger().addHandler(capture)
    harness_error = select_error(options.select, r.catalog)
    driver_log = ""
    session = None
    interrupted = False
    stopped = False  # a harness error ended the run before it finished
    try:
        with exercise.counting() as r.counts:
            if harness_error is None:
                options.progress(
                    f"jfsm conformance: driver {options.driver}, profile {profile.name}"
                )
                if options.driver == DEFAULT_DRIVER:
                    options.progress(f"({DEFAULT_DRIVER_NOTE})")
                session = Session(options.driver, r.ledger)
                r.implementation, r.capabilities = (
                    session.world.implementation,
                    session.world.capabilities,
                )
                capabilities = r.capabilities
                flags = ", ".join(k for k, v in sorted(capabilities.items()) if v) or "none"
                options.progress(
                    f"implementation {implementation_label(r.implementation)}; "
                    f"capabilities: {flags}"
                )
                r.reached("handshake")
                r.scenarios(session)
                # a machine runs when the selection names what it judges (R142)
                # (the workers machine's own IDs aside, whatever checks they share)
                judged = memory_judges(capabilities) - workers.OWNERSHIP_IDS
                wanted = any(selected(i, options.select) for i in judged)
                machines = options.machines and wanted
                if machines:
                    r.machine(session, "at spec thresholds", profile.examples, profile.steps)
                elif wanted:
                    what = "machine at spec thresholds"
                    r.judge_as(what, judged, "left out", "left out of this run")
                r.unsupported.update(session.world.unsupported)
                driver_log = session.world.client.stderr_tail()
                session.close()
                session = None
                small = "at small thresholds (" + ", ".join(
                    f"{k} {v}" for k, v in SMALL_THRESHOLDS.items()
                )
                small += ")"
                if not wanted:
                    pass
                elif not capabilities.get("thresholdOverride"):
                    reason = "the driver does not declare thresholdOverride"
                    r.skipped[f"machine {small}"] = reason
                    why = "needs capability thresholdOverride"
                    r.judge_as(f"machine {small}", judged, "skipped", why, reason)
                elif machines and profile.small_examples:
                    r.current = f"the start of the machine {small}"
                    small_session = Session(options.driver, r.ledger, thresholds=SMALL_THRESHOLDS)
                    try:
                        r.machine(small_session, small, profile.small_examples, profile.small_steps)
                        r.unsupported.update(small_session.world.unsupported)
                    finally:
                        small_session.close()
                else:
                    r.judge_as(f"machine {small}", judged, "left out", "left out of this run")
                if any(selected(i, options.select) for i in workers.OWNERSHIP_IDS):
                    if options.machines:
                        r.workers(capabilities)  # K processes of a sharedStore driver (R81)
                    else:  # left out; a capability it lacks is still the truer reason
                        label = f"machine workers (K={options.workers})"
                        why, reason = "left out of this run", "the run's options left it out"
                        status = "left out"
                        if not capabilities.get("sharedStore"):
                            why = "needs capability sharedStore"
                            reason = "the driver does not declare capabilities.sharedStore"
                            status = "skipped"
                        r.judge_as(label, workers.OWNERSHIP_IDS, status, why, reason)
                if options.companions:  # the reference's own processes (R92)
                    companions.phase(r, profile.name)
    except (HarnessError, ProtocolViolation) as exc:  # a violation here: in the handshake
        harness_error = f"in {r.current}: {exc}"
        stopped = True
        options.progress(f"HARNESS ERROR {harness_error}")
        if session is not None:
            driver_log = session.world.client.stderr_tail()
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM turned into one by the CLI (R55)
        interrupted = True
        harness_error = (
            f"interrupted after {r.phase}: the run did not finish; the verdicts cover only "
            "what ran before"
        )
        options.progress(f"INTERRUPTED after {r.phase}")
    finally:
        if session is not None:
            with contextlib.suppress(Exception):
                session.close()
        logging.getLogger().removeHandler(capture)
    driver_log = "\n".join(filter(None, [driver_log, "\n".join(capture.lines[-40:])]))
    if not (interrupted or stopped):
        r.phase = "finished"
    return r.result(harness_error, driver_log, partial=interrupted or stopped)


def judge(
    catalog: list[dict[str, Any]],
    ledger: Ledger,
    failures: list[Failure],
    options: Options,
    unsupported: dict[str, str],
    skipped: dict[str, str],
    capabilities: dict[str, Any],
    *,
    judges: list[Judge] | None = None,
    stopped: str | None = None,
    running: bool = False,
) -> list[dict[str, Any]]:
    """One verdict per requirement: pass, fail, xfail, xpass or not covered. A not-covered
    row says why, in a few words (`why`: the class the terminal prints) and in full
    (`reason`), from what kept it unjudged: the catalog (profile, not observable), a judge
    that failed first, a run that `stopped` (the phase reached; `running`: a checkpoint of a
    run that goes on), a capability or transport
    the driver lacks, an op it does not support (decision R143)."""
    failed: dict[str, list[Failure]] = {}
    for f in failures:
        for rid in f.ids:
            failed.setdefault(rid, []).append(f)
    rows = []
    for rid, title in SYNTHETIC_ROWS.items():
        if rid in failed:
            rows.append(
                {
                    "id": rid,
                    "level": "MUST",
                    "title": title,
                    "verdict": "fail",
                    "checks": sorted({f.check for f in failed[rid]}),
                    "reason": None,
                    "failures": [_failure_json(f) for f in failed[rid]],
                }
            )
    for req in catalog:
        rid = req["id"]
        if not selected(rid, options.select):
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
            row["why"], row["reason"] = _unjudged(req, judges or [], unsupported, stopped, running)
        rows.append(row)
    return rows


def _unjudged(
    req: dict[str, Any],
    judges: list[Judge],
    unsupported: dict[str, str],
    stopped: str | None,
    running: bool = False,
) -> tuple[str, str]:
    """Why requirement `req` is not covered: in a few words, and in full."""
    if stopped is not None and running:
        stopped_why = ("not reached yet", f"not reached yet: the run is at {stopped}")
    else:
        stopped_why = (
            "not reached: the run stopped",
            f"not reached: the run stopped after {stopped}, before what judges it ran",
        )
    rid = req["id"]
    if req.get("verification", "suite") != "suite":
        return not_judged_by_suite(req)
    mine = [j for j in judges if rid in j.ids]
    ran = [j for j in mine if j.status == "pass"]
    failing = [j.what for j in mine if j.status == "fail"]
    if failing:
        return (
            f"not reached: {failing[0]} failed first",
            f"not reached: {', '.join(failing)}, which judge it, failed before they judged it "
            "(see the failures)",
        )
    if stopped is not None and not ran:
        return stopped_why
    if req.get("level") == "MAY":
        return (
            "optional, not shown",
            "optional (MAY): credited only when the implementation shows it",
        )
    lacking = [j for j in mine if j.status in ("skipped", "unsupported")]
    if lacking:
        whys = list(dict.fromkeys(j.why for j in lacking))
        return "; ".join(whys), "; ".join(
            dict.fromkeys(f"{j.what}: {j.reason or j.why}" for j in lacking)
        )
    if stopped is not None:
        return stopped_why
    if not judges:  # a caller that recorded no judges (the old way): the run's own notes
        if unsupported:
            return (
                f"op {sorted(unsupported)[0]} unsupported",
                f"not exercised; the driver does not support {sorted(unsupported)}",
            )
        return "not exercised", "not exercised in this run"
    left_out = [j.what for j in mine if j.status == "left out"]
    if left_out and not ran:
        return "left out of this run", f"left out of this run: {', '.join(left_out)}"
    if unsupported and ran:
        ops = sorted(unsupported)
        return (
            f"op {ops[0]} unsupported",
            f"not exercised: {', '.join(j.what for j in ran)} ran, but the driver does not "
            f"support {ops}",
        )
    if ran:
        return (
            "not exercised",
            f"not exercised: {', '.join(j.what for j in ran)} ran and never reached it",
        )
    return "not exercised", "no scenario or machine of this run judges it"


def _failure_json(f: Failure) -> dict[str, Any]:
    return {"source": f.source, "check": f.check, "message": f.message, "trace": f.trace}


def replay(
    path: str | Path,
    *,
    driver: str | None = None,
    progress: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> int:
    """Run the steps of a trace again; 1 if it still fails, 0 if it passes, 2 on harness error
    or when the trace is not a trace of this suite (another format, or a step outside
    `session.STEPS`)."""
    try:
        trace = read_trace(path)
    except TraceError as exc:  # missing, unreadable, not a trace (one line, R160)
        progress(str(exc))
        return 2
    unknown = sorted({step["step"] for step in trace["steps"]} - STEPS)
    if unknown:
        progress(f"{path}: names steps the suite does not have: {', '.join(unknown)}")
        return 2
    steps: list[tuple[str, dict[str, Any]]] = []
    try:
        for step in trace["steps"]:
            args = unpack(step["args"])
            inspect.signature(getattr(Session, step["step"])).bind(None, **args)
            steps.append((step["step"], args))
    except (TypeError, ValueError) as exc:  # a damaged packed text, or arguments a step lacks
        progress(f"{path}: step {len(steps) + 1}: {exc}")
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
        for i, (name, args) in enumerate(steps, start=1):
            progress(f"  {i}. {name}({_brief(args)})")
            getattr(session, name)(**args)
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
