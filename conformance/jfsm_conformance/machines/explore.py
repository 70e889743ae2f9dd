"""The random exploration: one state machine run under Hypothesis, with honest blame.

`explore(session, label, examples, steps, ...)` runs `jfsm_conformance.machines.memory` against the
session and returns an `Outcome`: `"pass"`, the failures to report, or the op the driver
does not support. Three things are added around Hypothesis here:

- Every rule is counted (`jfsm_conformance.record.exercise`, kind `rule`) and the phase prints
  progress with counts and an estimate at most every `PROGRESS_EVERY` seconds.
- Every check failure seen *while Hypothesis explores* is remembered with its own steps and
  messages. Hypothesis then replays the smallest failing sequence once more; if the
  implementation does not fail the same way on that replay (it passes, fails another
  check, or makes Hypothesis see different data), the ORIGINAL failure is reported with its
  own trace, and a separate `NONDETERMINISM_ROW` failure says that the implementation
  behaved differently on replay.
- A Hypothesis health or flaky error (`Flaky`, `FlakyFailure`, `FlakyStrategyDefinition`,
  `FailedHealthCheck`...) raised while the implementation misbehaves is never a harness
  error: it becomes the failures seen, or the named nondeterminism failure (exit 1). Any
  other Hypothesis error with no failure seen is a bug of the suite and raises
  `HarnessError`.

An `unsupported_op` reply that makes a rule fail ends the phase as "not covered", naming
the op (the driver does not implement it), never as a failure. A driver that dies or stops
answering (`DriverDied`) ends the phase at once as `"died"`, with the steps and messages of
the sequence it died in: no rule touches it again, so Hypothesis's replays of that sequence
cost no further waits (decision R194).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.control import current_build_context
from hypothesis.errors import Flaky, HypothesisException
from hypothesis.reporting import with_reporter
from hypothesis.stateful import run_state_machine_as_test

from jfsm_conformance.client.driver import (
    DriverDied,
    HarnessError,
    ProtocolViolation,
    UnsupportedOp,
)
from jfsm_conformance.machines.memory import machine_factory
from jfsm_conformance.record import exercise
from jfsm_conformance.steps.session import Session
from jfsm_conformance.verify import checks as C
from jfsm_conformance.verify.checks import ConformanceFailure

# checks only the probes and the workers machine run (hostile input, HTTP, state directory,
# bounded waits, ownership): what they alone judge, this machine never does
_PROBES = (
    C.HOSTILE,
    C.HTTP_GUARD,
    C.STATE_GUARD,
    C.BOUNDED_WAITS,
    C.ONE_OWNER,
    C.FENCED_WRITES,
    C.FENCED_READS,
    C.LEASES,
    C.NOT_HELD,
    C.ROUNDS_LIST,
)


def judges(capabilities: Mapping[str, Any]) -> frozenset[str]:
    """The requirement IDs the memory machine can judge against a driver declaring `capabilities`
    (a `--select` of any of them runs it): those of the named checks its steps run, less a
    kill's (JF-ATOM-008, only scenarios kill) and, without `durableRestart` (its `restart`
    rule), JF-ATOM-004."""
    steps = {i for check in C.CHECKS.values() if check not in _PROBES for i in check.ids}
    steps.discard("JF-ATOM-008")
    if not capabilities.get("durableRestart"):
        steps.discard("JF-ATOM-004")
    return frozenset(steps)


__all__ = [
    "NONDETERMINISM_ROW",
    "PROTOCOL_ROW",
    "Found",
    "Outcome",
    "explore",
    "judges",
    "unsupported_in",
]

PROTOCOL_ROW = "DRIVER-PROTOCOL"
NONDETERMINISM_ROW = "NONDETERMINISTIC-IMPLEMENTATION"
PROGRESS_EVERY = 10.0
_KEEP_FOUND = 8
_RULE_MARKERS = ("hypothesis_stateful_rule", "hypothesis_stateful_initialize_rule")


@dataclass
class Found:
    """A check failure with the steps and (compacted) messages of its own sequence."""

    exc: BaseException
    steps: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    note: str | None = None

    @property
    def ids(self) -> tuple[str, ...]:
        return getattr(self.exc, "ids", (PROTOCOL_ROW,))

    def same_as(self, other: BaseException) -> bool:
        """Same kind of failure: same exception type, check and blamed IDs (messages may
        differ in game ids and sizes between runs)."""
        return (
            type(other) is type(self.exc)
            and getattr(other, "check", None) == getattr(self.exc, "check", None)
            and getattr(other, "ids", None) == getattr(self.exc, "ids", None)
        )


@dataclass
class Outcome:
    status: str  # pass, fail, unsupported, died (`failures[0].exc` is the `DriverDied`)
    failures: list[Found] = field(default_factory=list)
    unsupported: str | None = None
    hypothesis_report: str = ""


def unsupported_in(session: Session) -> str | None:
    """The op whose `unsupported_op` reply is the last message received, if it is one."""
    for entry in itertools.islice(reversed(session.world.client.transcript), 3):
        got = entry.get("recv")
        if isinstance(got, dict):
            error = got.get("error") if got.get("ok") is False else None
            if isinstance(error, dict) and error.get("code") == "unsupported_op":
                sent: dict[str, Any] = next(
                    (
                        e["send"]
                        for e in reversed(session.world.client.transcript)
                        if "send" in e and e["send"].get("id") == got.get("id")
                    ),
                    {},
                )
                return str(sent.get("op", "?"))
            return None
    return None


class _Tracker:
    """Counts rules and examples, prints progress, remembers failures by rule sequence."""

    def __init__(
        self,
        session: Session,
        label: str,
        examples: int,
        progress: Callable[[str], None],
        checkpoint: Callable[[str], None] | None = None,
    ) -> None:
        self.session = session
        self.checkpoint = checkpoint
        self.label = label
        self.examples = examples
        self.progress = progress
        self.began = self.last = time.monotonic()
        self.run_examples = 0
        self.run_steps = 0
        self.found: OrderedDict[tuple[Any, ...], Found] = OrderedDict()
        self.latest: Found | None = None
        self.final_calls: tuple[Any, ...] | None = None
        self.died: Found | None = None  # the driver died: no rule runs again

    def example(self, machine: Any) -> None:
        if self.died is not None:
            raise self.died.exc
        self.run_examples += 1
        machine._jfsm_calls = []

    def tick(self) -> None:
        now = time.monotonic()
        if now - self.last < PROGRESS_EVERY:
            return
        self.last = now
        elapsed = now - self.began
        done = min(self.run_examples, self.examples)
        line = (
            f"  machine {self.label}: {done}/{self.examples} sequences, "
            f"{self.run_steps} steps, {elapsed:.0f} s"
        )
        if self.latest is not None:
            line += f"; shrinking a failure ({len(self.found)} failing sequence(s) seen)"
        elif 0 < done < self.examples:
            line += f", about {elapsed / done * (self.examples - done):.0f} s left"
        self.progress(line)
        if self.checkpoint is not None:
            self.checkpoint(f"{done}/{self.examples} sequences, {self.run_steps} steps")

    def wrap(self, function: Callable[..., Any]) -> Callable[..., Any]:
        name = function.__name__

        @functools.wraps(function)
        def counted(machine: Any, **kwargs: Any) -> Any:
            exercise.record("rule", name)
            self.run_steps += 1
            calls = machine.__dict__.setdefault("_jfsm_calls", [])
            calls.append((name, repr(sorted(kwargs.items()))))
            self.tick()
            if self.died is not None:
                raise self.died.exc
            try:
                return function(machine, **kwargs)
            except DriverDied as exc:
                s = self.session
                since = s.world.client.transcript.since(s.trace_start)
                self.died = Found(exc, list(s.steps), since)
                raise
            except (ConformanceFailure, ProtocolViolation) as exc:
                op = unsupported_in(self.session)
                if op is not None:
                    raise UnsupportedOp(op) from exc
                self.seen(exc, tuple(calls))
                raise

        return counted

    def seen(self, exc: BaseException, calls: tuple[Any, ...]) -> None:
        if _is_final():
            self.final_calls = calls
            return
        s = self.session
        found = Found(exc, list(s.steps), s.world.client.transcript.since(s.trace_start))
        self.found[calls] = found
        self.found.move_to_end(calls)
        while len(self.found) > _KEEP_FOUND:
            self.found.popitem(last=False)
        self.latest = found

    def machine_class(self, factory: type[Any]) -> type[Any]:
        """`factory` with every rule counted and each example announced to the tracker."""
        tracker = self
        namespace: dict[str, Any] = {}
        for name, member in inspect.getmembers(factory):
            for marker in _RULE_MARKERS:
                rule = getattr(member, marker, None)
                if rule is None:
                    continue
                replaced = dataclasses.replace(rule, function=self.wrap(rule.function))
                proxy = functools.wraps(member)(_proxy(member))
                setattr(proxy, marker, replaced)
                namespace[name] = proxy

        def __init__(machine: Any) -> None:
            factory.__init__(machine)
            tracker.example(machine)

        namespace["__init__"] = __init__
        return type(factory.__name__, (factory,), namespace)


def _proxy(member: Callable[..., Any]) -> Callable[..., Any]:
    def proxy(*args: Any, **kwargs: Any) -> Any:
        return member(*args, **kwargs)

    return proxy


def _is_final() -> bool:
    try:
        return bool(current_build_context().is_final)
    except HypothesisException:
        return False


def _causes(exc: BaseException) -> list[BaseException]:
    """`exc`, its exception-group members and its cause/context chains, breadth first."""
    seen: set[int] = set()
    out: list[BaseException] = []
    pending = [exc]
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        out.append(current)
        pending += list(getattr(current, "exceptions", ()))
        pending += [e for e in (current.__cause__, current.__context__) if e is not None]
    return out


def _nondeterminism(label: str, what: str) -> Found:
    exc = ConformanceFailure(
        "replay-determinism",
        (NONDETERMINISM_ROW,),
        f"machine {label}: {what} The suite replays a failing sequence of operations on "
        "fresh games to confirm it; an implementation must answer the same operations the "
        "same way (no dependence on time, randomness or state outside the game). The "
        "failure first seen is reported under its own requirement with its own trace.",
    )
    return Found(exc, [], [])


def explore(
    session: Session,
    label: str,
    examples: int,
    steps: int,
    *,
    seed: int | None,
    shrink: bool,
    progress: Callable[[str], None],
    checkpoint: Callable[[str], None] | None = None,
) -> Outcome:
    """Run the state machine `examples` times; see the module docs for what is returned.
    `checkpoint` gets a short status (sequences and steps done) with each progress line."""
    tracker = _Tracker(session, label, examples, progress, checkpoint)
    session.trace_start = session.world.client.transcript.mark()
    lines: list[str] = []
    conf = settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        database=None,
        derandomize=seed is None,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.reuse, Phase.generate] + ([Phase.shrink] if shrink else []),
    )
    factory: Any = tracker.machine_class(machine_factory(session))
    if seed is not None:
        factory = hypothesis_seed(seed)(factory)
    try:
        try:
            with with_reporter(lambda value: lines.append(str(value))):
                run_state_machine_as_test(factory, settings=conf)
        except Exception:
            if tracker.died is not None:  # whatever Hypothesis made of it
                return Outcome("died", [tracker.died])
            raise
        return Outcome("pass")
    except UnsupportedOp as exc:
        return Outcome("unsupported", unsupported=exc.op)
    except (ConformanceFailure, ProtocolViolation) as exc:
        report = "\n".join(lines[-60:])
        original = tracker.found.get(tracker.final_calls) if tracker.final_calls else None
        if original is None or original.same_as(exc):
            s = session
            here = Found(exc, list(s.steps), s.world.client.transcript.since(s.trace_start))
            return Outcome("fail", [here], hypothesis_report=report)
        original.note = (
            f"on replay of the same sequence the implementation failed differently: {exc}"
        )
        return Outcome(
            "fail",
            [original, _nondeterminism(label, f"on replay it failed another check instead: {exc}")],
            hypothesis_report=report,
        )
    except (HypothesisException, ExceptionGroup) as exc:
        report = "\n".join(lines[-60:])
        causes = _causes(exc)
        unsupported = next((c for c in causes if isinstance(c, UnsupportedOp)), None)
        if unsupported is not None and tracker.latest is None:
            return Outcome("unsupported", unsupported=unsupported.op)
        original = next(
            (f for c in causes for f in reversed(tracker.found.values()) if f.exc is c),
            tracker.latest,
        )
        flaky = any(isinstance(c, Flaky) for c in causes)
        what = f"Hypothesis stopped with {type(exc).__name__}: {str(exc).splitlines()[0]}."
        if original is not None:
            original.note = (
                "the implementation did not fail the same way when this sequence was replayed "
                f"({type(exc).__name__})"
            )
            return Outcome(
                "fail", [original, _nondeterminism(label, what)], hypothesis_report=report
            )
        if flaky:
            return Outcome("fail", [_nondeterminism(label, what)], hypothesis_report=report)
        raise HarnessError(f"machine {label}: {type(exc).__name__}: {exc}") from exc
