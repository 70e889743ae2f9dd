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

In the default run the parts that only wait, and the machines, are *lanes* (decision R170):
each on driver sessions of its own, on a thread (the bounded waits, the companions) or in a
process (`jfsm_conformance.run.lane`: the machines, CPU work); `_Run.fold` puts their
records after the root's in the serial order, and up to the first harness error only, so
the report does not depend on timing. `Options.parallel=False` runs the same lanes in turn.

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
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TypedDict

from jfsm_conformance.client import groups
from jfsm_conformance.client.driver import DriverDied, HarnessError, ProtocolViolation
from jfsm_conformance.machines import workers
from jfsm_conformance.machines.explore import (
    PROTOCOL_ROW,
    Found,
    explore,
    unsupported_in,
)
from jfsm_conformance.machines.explore import judges as memory_judges
from jfsm_conformance.record import exercise
from jfsm_conformance.record.traces import TraceDir, TraceError, read_trace, unpack
from jfsm_conformance.run import companions
from jfsm_conformance.scenarios import SCENARIOS, Scenario
from jfsm_conformance.steps.session import STEPS, Session
from jfsm_conformance.verify.checks import DRIVER_UP, ConformanceFailure, Ledger

__all__ = [
    "PROFILES",
    "Failure",
    "Options",
    "Profile",
    "RunResult",
    "interruptible",
    "load_catalog",
    "replay",
    "run",
    "serve_lane",
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


class _Timeouts(TypedDict):
    hello_timeout: float
    timeout: float


def timeouts(options: Options) -> _Timeouts:
    """The run's bounded waits for a new session: `hello`, and every other reply (R195)."""
    return {"hello_timeout": options.hello_timeout, "timeout": options.op_timeout}


def _selected(ids: tuple[str, ...], select: str) -> bool:
    return any(selected(i, select) for i in ids)


DIED_STDERR_LINES = 12  # the stderr lines a failure of a driver that died quotes

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
                    "needs an HTTP driver (the scenario sends its requests over HTTP)",
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


@dataclass
class _Fold:
    """The records of a run and of its lanes, put together in the serial order (R170)."""

    ledger: Ledger
    failures: list[Failure]
    skipped: dict[str, str]
    unsupported: dict[str, str]
    durations: dict[str, float]
    judges: dict[str, Judge]
    companions: dict[str, str]
    phase: str
    harness_error: str | None
    driver_log: str
    dropped: list[_Run]  # lanes after a harness error: the serial run would not have run them


class _Run:
    """One run's records; or, with `root`, those of a lane of it (decision R170): a part of
    the run with its own driver sessions and records, run beside the rest (a thread) or in
    its turn, whose records `fold` puts after those of the lanes before it. A lane given the
    root's `ledger` (one that goes on with the root's session) keeps a copy of what the
    ledger held before it, so that a lane dropped by a harness error credits nothing."""

    def __init__(
        self,
        options: Options,
        *,
        root: _Run | None = None,
        ledger: Ledger | None = None,
        body: Callable[[_Run], None] | None = None,
    ) -> None:
        self.o = options
        self.root = root
        self.ledger = ledger if ledger is not None else Ledger()
        self.shares = ledger is not None  # credits the root's ledger
        self.ledger_before: Ledger | None = None  # what that ledger held when the lane began
        self.failures: list[Failure] = []
        self.skipped: dict[str, str] = {}
        self.unskipped: list[str] = []  # skips of earlier parts this lane judged after all
        self.unsupported: dict[str, str] = {}
        self.durations: dict[str, float] = {}
        self.phase = "starting"
        self.current = "the handshake"  # the scenario or machine running (a harness error names it)
        self.companions: dict[str, str] = {}  # the default run's reference processes (R92)
        # every scenario and machine the selection names, by name, and how it went (R143)
        self.judges: dict[str, Judge] = {}
        self.lanes: list[_Run] = []
        self.body = body
        self.thread: threading.Thread | None = None
        self.started = False
        self.done = threading.Event()
        self.stop = threading.Event()  # the root's: lanes not begun yet need not begin
        self.harness_error: str | None = None
        self.driver_log = ""
        self.bug: BaseException | None = None  # a lane's own exception, raised again at `join`
        self.process: subprocess.Popen[bytes] | None = None  # a lane's own Python process
        if root is None:
            self.traces = TraceDir(options.report_dir / "traces")
            self.shrink = (
                options.shrink if options.shrink is not None else options.profile != "quick"
            )
            self.catalog = load_catalog()
            self.implementation: dict[str, Any] = {}
            self.capabilities: dict[str, Any] = {}
            self.counts = exercise.Counts()
        else:
            self.traces = TraceDir(root.traces.path, prefix=f"lane-{len(root.lanes) + 1}-")
            self.shrink, self.catalog, self.counts = root.shrink, root.catalog, root.counts
            self.implementation, self.capabilities = root.implementation, root.capabilities

    # -- lanes (R170) ------------------------------------------------------------------
    def lane(self, body: Callable[[_Run], None], *, ledger: Ledger | None = None) -> _Run:
        """A new lane of this (root) run whose records fold after those of the lanes before."""
        lane = _Run(self.o, root=self, ledger=ledger, body=body)
        self.lanes.append(lane)
        return lane

    def start(self) -> None:
        """Run this lane on a thread of its own."""
        self.started = True
        self.thread = threading.Thread(target=self.go, name="conformance-lane", daemon=True)
        self.thread.start()

    def go(self) -> None:
        """Run this lane's body here, unless it ran or the run stops. A harness error ends
        the lane (and is its record); another exception is kept for `join`."""
        assert self.root is not None and self.body is not None
        if self.done.is_set():
            return
        self.started = True
        if self.shares:
            self.ledger_before = self.ledger.copy()
        try:
            if not self.root.stop.is_set():
                self.body(self)
        except (HarnessError, ProtocolViolation) as exc:
            if self.root.stop.is_set():  # the run stops (interrupted): the stop's doing
                return
            self.harness_error = f"in {self.current}: {exc}"
            self.o.progress(f"HARNESS ERROR {self.harness_error}")
        except Exception as exc:  # a bug of the suite: raised again in the run's thread
            self.bug = exc
        finally:
            self.done.set()

    def join(self, timeout: float | None = None) -> None:
        """Wait for this lane (at most `timeout` seconds); raise a bug it met."""
        if self.thread is not None:
            self.thread.join(timeout)
        if self.bug is not None:
            bug, self.bug = self.bug, None
            raise bug

    def unskip(self, name: str) -> None:
        """Judge after all `name`, which an earlier part of the run skipped."""
        self.skipped.pop(name, None)
        self.unskipped.append(name)

    def failed_before(self) -> bool:
        """Whether a failure was recorded before this point of the serial order (the lanes
        before this one waited for)."""
        if self.failures:
            return True
        if self.root is None:
            return False
        for lane in self.root.lanes:
            if lane is self:
                break
            lane.join()
            if lane.failures:
                return True
        return bool(self.root.failures)

    def fold(self) -> _Fold:
        """The root's records, then those of each lane in turn, up to the first harness
        error; a lane running on a thread of its own counts only once it ended."""
        failures = list(self.failures)
        skipped, unsupported = dict(self.skipped), dict(self.unsupported)
        durations, judges = dict(self.durations), dict(self.judges)
        companions = dict(self.companions)
        phase, error, logs = self.phase, self.harness_error, [self.driver_log]
        ledgers: list[Ledger] = []  # those of the lanes with ledgers of their own
        dropped: list[_Run] = []
        for lane in self.lanes:
            if error is not None:
                dropped.append(lane)
                continue
            if not (lane.done.is_set() or (lane.started and lane.thread is None)):
                continue
            if not lane.shares:
                ledgers.append(lane.ledger)
            failures += lane.failures
            for name in lane.unskipped:
                skipped.pop(name, None)
            skipped.update(lane.skipped)
            unsupported.update(lane.unsupported)
            durations.update(lane.durations)
            for what, j in lane.judges.items():
                judges.pop(what, None)
                judges[what] = j
            companions.update(lane.companions)
            logs.append(lane.driver_log)
            if lane.harness_error is not None:
                phase, error = lane.phase, lane.harness_error
        # the root's ledger, without the credits of a lane that shares it and was dropped
        shared = [lane.ledger_before for lane in dropped if lane.shares and lane.started]
        ledger = (shared[0] if shared and shared[0] is not None else self.ledger).copy()
        for other in ledgers:
            ledger.add(other)
        return _Fold(
            ledger,
            failures,
            skipped,
            unsupported,
            durations,
            judges,
            companions,
            phase,
            error,
            "\n".join(filter(None, logs)),
            dropped,
        )

    def settle(self) -> _Fold:
        """Once the lanes ended: number their traces in the serial order after the root's,
        and remove those of lanes a harness error dropped."""
        fold = self.fold()
        for lane in self.lanes:
            for failure in lane.failures:
                if failure.trace is None:
                    continue
                if lane in fold.dropped:
                    Path(failure.trace).unlink(missing_ok=True)
                else:
                    failure.trace = self.traces.adopt(failure.trace, failure.source)
        return fold

    def result(
        self,
        harness_error: str | None,
        driver_log: str = "",
        *,
        partial: bool,
        running: bool = False,
    ) -> RunResult:
        """The run's result so far; `running`: a checkpoint of a run that goes on."""
        fold = self.fold()
        verdicts = judge(
            self.catalog,
            fold.ledger,
            fold.failures,
            self.o,
            fold.unsupported,
            fold.skipped,
            self.capabilities,
            judges=list(fold.judges.values()),
            stopped=fold.phase if partial else None,
            running=running,
        )
        return RunResult(
            self.o,
            verdicts,
            fold.failures,
            harness_error,
            self.implementation,
            self.capabilities,
            fold.durations,
            driver_log,
            self.counts.table(),
            fold.skipped,
            partial=partial,
            phase=fold.phase,
            companions=fold.companions,
            judges=list(fold.judges.values()),
        )

    def reached(self, phase: str) -> None:
        """Record the phase reached and, in the run's own thread, hand a partial result to
        `Options.checkpoint`."""
        self.phase = phase
        top = self.root or self
        if self.thread is None:  # the run's own thread: the root's phase too
            top.phase = phase
            checkpoint = self.o.checkpoint
            if checkpoint is not None:
                checkpoint(top.result(None, partial=True, running=True))

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
        if any(not i.startswith("JF-") or selected(i, self.o.select) for i in ids):  # R197
            self.o.progress(f"  FAIL {source}: [{', '.join(ids)}] {message.splitlines()[0][:200]}")

    def not_supported(self, what: str, op: str) -> str:
        self.unsupported.setdefault(op, "unsupported_op")
        reason = f"the driver does not support op {op!r} (unsupported_op)"
        self.skipped[what] = reason
        return reason

    def scenarios(
        self,
        session: Session,
        only: set[str] | None = None,
        label: str = "",
        leave: Iterable[str] = (),
    ) -> None:
        """Run the selected scenarios (`only`: just these; never those to `leave` to a lane)
        against `session`; `label` prefixes the progress lines (a companion's). Each is
        recorded as a `Judge`."""
        chosen = []
        for s in SCENARIOS:
            if not _selected(s.ids, self.o.select) or (only is not None and s.name not in only):
                continue
            if s.name in leave:
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
            if self.root is not None and self.root.stop.is_set():
                return  # the run stops (R170): what this lane would judge is dropped
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
                session.ledger.credit(DRIVER_UP)
            except DriverDied as exc:  # a verdict, and the driver started again (R194)
                self.driver_died(what, scenario.ids[:1], exc, session, start)
                status = "FAIL (the driver died or stopped answering; started again)"
                self.judge_as(what, scenario.ids, "fail")
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
                session.ledger.credit(DRIVER_UP)
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

    def driver_died(
        self,
        what: str,
        ids: Iterable[str],
        exc: DriverDied,
        session: Session,
        start: int,
        found: Found | None = None,
    ) -> None:
        """The driver died or stopped answering during `what`, which exercises `ids`: a
        failure of those and of JF-ERR-020 with its exit status and last stderr lines; then
        the driver is started again (`World.revive`), a `HarnessError` if it cannot complete
        hello again (decision R194). In a run that stops, it is the stop's doing: raised."""
        if (self.root or self).stop.is_set():
            raise exc
        blamed = tuple(dict.fromkeys([*ids, *DRIVER_UP.ids]))
        first, _, tail = str(exc).partition("\n")
        lines = [line for line in tail.splitlines() if line.strip()][-DIED_STDERR_LINES:]
        message = f"the driver died or stopped answering during {what}: {first}"
        if lines:
            message += "\nits last stderr lines:\n" + "\n".join(f"  {x}" for x in lines)
        failure = ConformanceFailure(DRIVER_UP.name, blamed, message)
        if found is None:
            messages = session.world.client.transcript.since(start)
            found = Found(failure, list(session.steps), messages)
        else:
            found = Found(failure, found.steps, found.messages)
        world = session.world
        self.record_failure(what, found, world.driver_spec, world.override)
        self.current = f"the restart of the driver after {what}"
        session.world.revive()
        self.o.progress(f"  the driver was started again after {what}")

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
        shrink = self.shrink and not self.failed_before()
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
        if outcome.status == "died":
            (found,) = outcome.failures
            assert isinstance(found.exc, DriverDied)
            self.driver_died(what, (), found.exc, session, 0, found)
            self.judge_as(what, ids, "fail")
            outcome.failures = []
            status = "fail"
        elif outcome.status == "unsupported" and outcome.unsupported:
            reason = self.not_supported(what, outcome.unsupported)
            status = "not covered: " + reason
            self.judge_as(what, ids, "unsupported", f"op {outcome.unsupported} unsupported", reason)
        else:
            self.judge_as(what, ids, "fail" if outcome.failures else "pass")
            session.ledger.credit(DRIVER_UP)
        for found in outcome.failures:
            if shrink != self.shrink:
                found.note = "; ".join(filter(None, [found.note, NOT_SHRUNK]))
            where = (session.world.driver_spec, session.world.override)
            self.record_failure(f"machine {label}", found, *where, outcome.hypothesis_report)
        if outcome.status not in ("pass", "died"):
            session.recover()
        took = time.monotonic() - began
        self.durations[f"machine {label}"] = took
        self.o.progress(
            f"machine {label}: {status.upper() if status == 'fail' else status} ({took:.1f}s)"
        )
        self.reached(f"machine {label}: done")


# the scenarios that mostly wait on timers (the attempt deadline of a hostile service): in the
# default run they go on beside the rest, on a session of their own (R170)
WAITING = frozenset({"bounded-deadline", "bounded-size", "bounded-identifiers"})
LANE_JOIN_TIMEOUT = 60.0  # how long a run that stopped waits for its lanes
STOP_BUDGET = 1.0  # seconds an interrupted run waits for its lanes and its session (R196)


def _waiting(r: _Run, session: Session) -> list[str]:
    """The scenarios of the run's tail that only wait and can run (`WAITING`), for a lane."""
    names: list[str] = []
    for s in reversed(SCENARIOS):
        if not _selected(s.ids, r.o.select):
            continue
        if s.name not in WAITING:
            break
        if (r.o.scenarios is None or s.name in r.o.scenarios) and _needs_met(s, session) is None:
            names.insert(0, s.name)
    return names


def _companion_needs(r: _Run, session: Session, leave: list[str]) -> dict[str, list[str]]:
    """The scenarios the run's driver will skip for its transport, by what they need
    (`http`, `state`): what the companions run instead (R92)."""
    needing: dict[str, list[str]] = {"http": [], "state": []}
    for s in SCENARIOS:
        if not _selected(s.ids, r.o.select) or s.name in leave:
            continue
        if r.o.scenarios is not None and s.name not in r.o.scenarios:
            continue
        need = _needs_met(s, session)
        if need and "needs an HTTP driver" in need[1]:
            needing["http"].append(s.name)
        elif need and "names {state}" in need[1]:
            needing["state"].append(s.name)
    return needing


def _rest(r: _Run, session: Session, profile: Profile) -> Callable[[_Run], None]:
    """The lane after the scenarios, on the run's own session: the machines (R142)."""
    options = r.o

    def body(lane: _Run) -> None:
        capabilities = r.capabilities
        # a machine runs when the selection names what it judges (R142)
        # (the workers machine's own IDs aside, whatever checks they share)
        judged = memory_judges(capabilities) - workers.OWNERSHIP_IDS
        wanted = any(selected(i, options.select) for i in judged)
        machines = options.machines and wanted
        try:
            if machines:
                lane.machine(session, "at spec thresholds", profile.examples, profile.steps)
            elif wanted:
                what = "machine at spec thresholds"
                lane.judge_as(what, judged, "left out", "left out of this run")
            lane.unsupported.update(session.world.unsupported)
        finally:
            lane.driver_log = session.world.client.stderr_tail()
            session.close()
        small = "at small thresholds (" + ", ".join(f"{k} {v}" for k, v in SMALL_THRESHOLDS.items())
        small += ")"
        if not wanted:
            pass
        elif not capabilities.get("thresholdOverride"):
            reason = "the driver does not declare thresholdOverride"
            lane.skipped[f"machine {small}"] = reason
            why = "needs capability thresholdOverride"
            lane.judge_as(f"machine {small}", judged, "skipped", why, reason)
        elif machines and profile.small_examples:
            lane.current = f"the start of the machine {small}"
            small_session = Session(
                options.driver, lane.ledger, thresholds=SMALL_THRESHOLDS, **timeouts(options)
            )
            try:
                lane.machine(small_session, small, profile.small_examples, profile.small_steps)
                lane.unsupported.update(small_session.world.unsupported)
            finally:
                small_session.close()
        else:
            lane.judge_as(f"machine {small}", judged, "left out", "left out of this run")
        if any(selected(i, options.select) for i in workers.OWNERSHIP_IDS):
            if options.machines:
                lane.workers(capabilities)  # K processes of a sharedStore driver (R81)
            else:  # left out; a capability it lacks is still the truer reason
                label = f"machine workers (K={options.workers})"
                why, reason = "left out of this run", "the run's options left it out"
                status = "left out"
                if not capabilities.get("sharedStore"):
                    why = "needs capability sharedStore"
                    reason = "the driver does not declare capabilities.sharedStore"
                    status = "skipped"
                lane.judge_as(label, workers.OWNERSHIP_IDS, status, why, reason)

    return body


def _waits(names: list[str]) -> Callable[[_Run], None]:
    """The lane of the scenarios that wait (`WAITING`), on a session of its own."""

    def body(lane: _Run) -> None:
        lane.current = "the start of the scenarios that wait"
        session = Session(lane.o.driver, lane.ledger, **timeouts(lane.o))
        try:
            lane.scenarios(session, only=set(names), label="waits")
            lane.unsupported.update(session.world.unsupported)
        finally:
            lane.driver_log = session.world.client.stderr_tail()
            session.close()

    return body


def _machines_apart(r: _Run, profile: Profile) -> Callable[[_Run], None]:
    """The machines' lane in a Python process of its own (`python -m
    jfsm_conformance.run.lane`), on a session of its own: the machines are CPU work, which
    threads of one process cannot share out (R170). Its records come back as JSON."""

    def body(lane: _Run) -> None:
        o = lane.o
        request = {
            "driver": o.driver,
            "profile": profile.name,
            "select": o.select,
            "report_dir": str(o.report_dir),
            "seed": o.seed,
            "shrink": r.shrink,
            "workers": o.workers,
            "machines": o.machines,
            "prefix": lane.traces.prefix,
            "hello_timeout": o.hello_timeout,
            "op_timeout": o.op_timeout,
        }
        lane.current = "the machines' process (python -m jfsm_conformance.run.lane)"
        argv = [sys.executable, "-m", "jfsm_conformance.run.lane"]
        with tempfile.TemporaryFile() as err:
            with groups.spawning():  # a signal waits until its group is recorded
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    start_new_session=True,  # a group of its own, which the run ends (R193)
                )
                groups.started(proc.pid)
            lane.process = proc
            if r.stop.is_set():  # the run stopped while it started: the run's end kills it
                proc.kill()
            assert proc.stdin is not None and proc.stdout is not None
            with proc.stdin:
                proc.stdin.write(json.dumps(request).encode("utf-8"))
            records = None
            for raw in proc.stdout:
                message = json.loads(raw)
                if "progress" in message:
                    o.progress(message["progress"])
                else:
                    records = message["records"]
            status = proc.wait()
            if records is None:
                err.seek(0)
                tail = err.read().decode("utf-8", "replace")[-2000:]
                raise HarnessError(
                    f"the machines' process ended with status {status} before its records:\n" + tail
                )
        _take(lane, records)

    return body


def _records(lane: _Run) -> dict[str, Any]:
    """A lane's records as JSON (`_take` reads them back)."""
    return {
        "passes": dict(lane.ledger.passes),
        "checks": {rid: sorted(names) for rid, names in lane.ledger.checks_by_id.items()},
        "failures": [[f.source, f.check, list(f.ids), f.message, f.trace] for f in lane.failures],
        "skipped": lane.skipped,
        "unskipped": lane.unskipped,
        "unsupported": lane.unsupported,
        "durations": lane.durations,
        "judges": [
            [j.what, sorted(j.ids), j.status, j.why, j.reason] for j in lane.judges.values()
        ],
        "companions": lane.companions,
        "phase": lane.phase,
        "harness_error": lane.harness_error,
        "driver_log": lane.driver_log,
        "counts": lane.counts.table(),
    }


def _take(lane: _Run, records: dict[str, Any]) -> None:
    """Put the records of a lane's process (`_records`) into `lane`."""
    lane.ledger.passes.update(records["passes"])
    for rid, names in records["checks"].items():
        lane.ledger.checks_by_id.setdefault(rid, set()).update(names)
    for source, check, ids, message, trace in records["failures"]:
        lane.failures.append(Failure(source, check, tuple(ids), message, trace))
    lane.skipped.update(records["skipped"])
    lane.unskipped += records["unskipped"]
    lane.unsupported.update(records["unsupported"])
    lane.durations.update(records["durations"])
    for what, ids, status, why, reason in records["judges"]:
        lane.judge_as(what, ids, status, why, reason)
    lane.companions.update(records["companions"])
    lane.phase, lane.harness_error = records["phase"], records["harness_error"]
    lane.driver_log = records["driver_log"]
    for kind, counts in records["counts"].items():
        for name, n in counts.items():
            lane.counts.add(kind, name, n)


def serve_lane() -> int:
    """The machines' lane of a run in this process (`python -m jfsm_conformance.run.lane`):
    its request as JSON on stdin, progress lines and then its records as JSON lines on
    stdout. Exits 0 with the records (a harness error among them); a bug of the suite ends
    it with its traceback on stderr and no records, which the run reports as a harness
    error."""
    groups.exit_on_signal()  # SIGTERM from the run: its drivers' groups end with it (R193)
    request = json.loads(sys.stdin.read())
    out, sys.stdout = sys.stdout, sys.stderr  # what else prints goes to stderr

    def say(message: dict[str, Any]) -> None:
        out.write(json.dumps(message) + "\n")
        out.flush()

    options = Options(
        driver=request["driver"],
        profile=request["profile"],
        select=request["select"],
        report_dir=Path(request["report_dir"]),
        seed=request["seed"],
        shrink=request["shrink"],
        workers=request["workers"],
        machines=request["machines"],
        hello_timeout=request["hello_timeout"],
        op_timeout=request["op_timeout"],
        progress=lambda line: say({"progress": line}),
    )
    r = _Run(options)
    profile = PROFILES[options.profile]

    def body(lane: _Run) -> None:
        lane.current = "the handshake of the machines' session"
        session = Session(options.driver, lane.ledger, **timeouts(options))
        r.implementation.update(session.world.implementation)
        r.capabilities.update(session.world.capabilities)
        _rest(r, session, profile)(lane)

    with exercise.counting() as r.counts:
        lane = r.lane(body)
        lane.counts = r.counts
        lane.traces.prefix = request["prefix"]
        lane.go()
        lane.join()
    say({"records": _records(lane)})
    return 0


def run(options: Options) -> RunResult:
    """Run the suite against `options.driver`; never raises for a failing implementation.

    A `--select` prefix that matches no requirement, or a selection of nothing the suite
    judges, is a harness error (exit 2): nothing would run, and a CI job would pass silently.
    A selection that judged nothing once run exits 2 too (`RunResult.judged_nothing`).

    In the default run (`Options.companions`) the parts that only wait run beside the rest
    (`Options.parallel`), each on its own driver session, and their records are put in the
    serial order: the result is the same as with `parallel=False` (decision R170)."""
    if options.profile not in PROFILES:
        raise ValueError(f"unknown profile {options.profile!r}; choose from {sorted(PROFILES)}")
    profile = PROFILES[options.profile]
    r = _Run(options)
    r.traces.clear()
    r.reached("starting")  # replaces a report left by an earlier run at once
    before = groups.recorded()  # process groups that are not this run's own
    capture = _LogCapture()
    logging.getLogger().addHandler(capture)
    harness_error = select_error(options.select, r.catalog)
    session = None
    rest: _Run | None = None
    interrupted = False
    try:
        with exercise.counting() as r.counts:
            if harness_error is None:
                options.progress(
                    f"jfsm conformance: driver {options.driver}, profile {profile.name}"
                )
                if options.driver == DEFAULT_DRIVER:
                    options.progress(f"({DEFAULT_DRIVER_NOTE})")
                session = Session(options.driver, r.ledger, **timeouts(options))
                r.implementation.update(session.world.implementation)
                r.capabilities.update(session.world.capabilities)
                flags = ", ".join(k for k, v in sorted(r.capabilities.items()) if v) or "none"
                options.progress(
                    f"implementation {implementation_label(r.implementation)}; "
                    f"capabilities: {flags}"
                )
                r.reached("handshake")
                # the lanes, in the serial order (R170): the waits, the machines, companions
                own = options.companions and options.driver == DEFAULT_DRIVER
                waiting = _waiting(r, session) if own else []
                if waiting:
                    r.lane(_waits(waiting))
                # the machines: CPU work, in a process of their own where they can be
                # (a run that shrinks waits to know whether a scenario failed first: R80)
                apart = own and not r.shrink
                if apart:
                    rest = r.lane(_machines_apart(r, profile))
                else:
                    rest = r.lane(_rest(r, session, profile), ledger=r.ledger)
                if options.companions:  # the reference's own processes (R92)
                    machines = options.machines and any(
                        selected(i, options.select) for i in workers.OWNERSHIP_IDS
                    )
                    companions.lanes(
                        r,
                        _companion_needs(r, session, waiting),
                        workers=machines
                        and workers.unfit(options.driver, r.capabilities) is not None,
                    )
                if options.parallel:  # all but a lane going on with the run's own session
                    for lane in r.lanes:
                        if lane is not rest or apart:
                            lane.start()
                r.scenarios(session, leave=waiting)
                if apart:  # the run's own session is done with
                    r.unsupported.update(session.world.unsupported)
                    r.driver_log = session.world.client.stderr_tail()
                    session.close()
                    session = None
                for lane in r.lanes:
                    if any(earlier.harness_error for earlier in r.lanes[: r.lanes.index(lane)]):
                        break  # the serial run would stop there: what follows is dropped
                    if lane.thread is None:
                        lane.go()
                for lane in r.lanes:
                    lane.join()
                    if lane.harness_error is not None:
                        break
    except (HarnessError, ProtocolViolation) as exc:  # a violation here: in the handshake
        r.harness_error = f"in {r.current}: {exc}"
        options.progress(f"HARNESS ERROR {r.harness_error}")
        if session is not None:
            r.driver_log = session.world.client.stderr_tail()
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM turned into one by the CLI (R55, R196)
        interrupted = True
        options.progress(f"INTERRUPTED after {r.phase}")
    finally:
        with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C stops nothing here
            _stop(r, session, rest, interrupted=interrupted, before=before)
        logging.getLogger().removeHandler(capture)
    fold = r.settle()
    if interrupted:
        harness_error = (
            f"interrupted after {r.phase}: the run did not finish; the verdicts cover only "
            "what ran before"
        )
        result = r.result(harness_error, "\n".join(capture.lines[-40:]), partial=True)
        result.interrupted = True
        return result
    harness_error = harness_error or fold.harness_error
    stopped = fold.harness_error is not None
    driver_log = "\n".join(filter(None, [fold.driver_log, "\n".join(capture.lines[-40:])]))
    if not (interrupted or stopped):
        r.phase = "finished"
    return r.result(harness_error, driver_log, partial=interrupted or stopped)


def _stop(
    r: _Run, session: Session | None, rest: _Run | None, *, interrupted: bool, before: set[int]
) -> None:
    """The end of a run, however it ended: the lanes are told to stop; the processes of an
    interrupted run (every driver's group, the machines' process) are ended at once and its
    lanes waited for `STOP_BUDGET` seconds in all (R196); those of a run that ended are
    waited for, and its session closed; any group the run started that is still recorded
    is ended (R193; `before`: the groups recorded before the run, which are not its own)."""
    r.stop.set()
    began = time.monotonic()
    if interrupted:
        groups.end_all(grace=0.3, keep=before)  # a lane waiting on a driver: answered
    for lane in r.lanes:  # a lane's process still running: the run stops (its thread too)
        if lane.process is not None and lane.process.poll() is None:
            groups.end(lane.process.pid, 0.5)  # SIGTERM: it ends its drivers' groups
            with contextlib.suppress(subprocess.TimeoutExpired):
                lane.process.wait(5)
    for lane in r.lanes:
        if lane.thread is not None:
            left = STOP_BUDGET - (time.monotonic() - began) if interrupted else LANE_JOIN_TIMEOUT
            lane.thread.join(max(left, 0.01))
    if session is not None and (rest is None or not rest.started or not rest.shares):
        closing = threading.Thread(target=_quietly, args=(session.close,), daemon=True)
        closing.start()
        closing.join(max(STOP_BUDGET - (time.monotonic() - began), 0.01) if interrupted else None)
    groups.end_all(grace=0 if interrupted else groups.GRACE, keep=before)


def _quietly(action: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):
        action()


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
    if lacking:  # each reason names its own requirement, never another's (R197)
        whys = list(dict.fromkeys(j.why for j in lacking))
        return "; ".join(whys), f"{rid}: " + "; ".join(
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


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM ends the run like Ctrl-C: a partial report, exit 130 (R196)."""
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """For a command's run: SIGTERM (and Ctrl-C, where it has Python's own handler) raise
    `KeyboardInterrupt`, held back while the suite starts a process until its group is
    recorded (R193, R196); the handlers are put back after. Off the main thread (an
    embedding) nothing changes."""
    handlers = {}
    with contextlib.suppress(ValueError):  # not the main thread: the handlers stay
        handlers[signal.SIGTERM] = signal.signal(signal.SIGTERM, groups.held_back(_interrupt))
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            held = groups.held_back(signal.default_int_handler)
            handlers[signal.SIGINT] = signal.signal(signal.SIGINT, held)
    try:
        yield
    finally:
        for signum, previous in handlers.items():
            signal.signal(signum, previous)


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
