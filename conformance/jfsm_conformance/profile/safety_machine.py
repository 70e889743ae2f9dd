"""The profile's Hypothesis state machine: random appends and compactions against an adapter.

**The one concept: one random search over one adapter's memory, each step judged against
what was appended.** The properties' checks, the adapters and the report live in the
profile's other modules; what stays here is the machine's steps, their draws and the rule
of which property owns which observation.

Steps: append an exchange; append a burst of 3 to 8 exchanges at once; compact with a
scripted outcome (`ok`, `raise`, `timeout`, `empty`, `blank`, `write_fail`: the summarizer
answers ok and the storage's next write fails once); compact and hold the summarizer call
in flight, then (while held) append, read, and finally release with an outcome. Only
outcomes in the adapter's declared scope are drawn (`blank` with `empty`); hold only when
the adapter declares it, appends while held only with several writers.

The draws aim at the failure shapes seen in real libraries, so that the default budget
finds them (measured by `benchmarks/safety_detection.py`): a burst puts more pending
messages than a summarization budget allows before one compaction (over-budget eviction);
`empty` and `blank` are two kinds of one outcome family (an empty or whitespace summary):
the family is drawn first (ok twice, raise, timeout, empty, write_fail), then its kind, so
`blank` takes no share from raise or timeout; `write_fail` fails the write after the
library may already have cleared its store (a failure after a partial write); a held
compaction with several writers always gets at least one append while it is held (appends
during a slow summary).

A drawn outcome is not wasted on a compaction the library declines: a library compacts only
past its threshold (messages, tokens) and may answer without its model (a trim window with
no user message), and an outcome that never reaches the summarizer tests nothing of its
property. So one compaction step asks up to `REACH_TRIES` times: when an attempt did not
call the summarizer, one short exchange (two messages with empty bodies: past a count or
token threshold, inside a trim window) is appended and the compaction asked again with the
same outcome. Every attempt is judged on its own, the declined ones included (a placeholder
published without a model call is still JF-SAFE-005's). The held compaction retries the
same way. Before this, a timeout (one draw in seven) that never reached the summarizer in a
whole search left JF-SAFE-003 unfound in 2 of 20 fresh runs of `langchain-trim` and
`llamaindex-summary`, although both fail it on every timeout that reaches the model.

After every step each enabled property's check runs on its own and the first violation
raises `PropertyViolation` naming one requirement ID; the runner disables that property and
searches again, so every property gets its own minimal example. A loss already attributed
to a specific property (say JF-SAFE-002 for a raising summarizer) is not blamed again on the
general JF-SAFE-001 or JF-SAFE-014 checks, nor are its after-effects (lost messages coming
back from a library's stale cache, or summarized again) blamed on JF-SAFE-002 to -013.

Which property owns which observation (one defect, one ID; `docs/safety/index.md`):

1. A compaction whose summarizer was reached and answered with a failure (`raise`,
   `timeout`, `empty`, `blank`, held or not), or whose replacement write was made to fail
   (`write_fail`), is judged on the history by that outcome's property alone (JF-SAFE-002,
   -003, -004, -010): every entry it removed or added, foreign text (an error text, an
   empty or whitespace "summary") included, is that property's observation, even after
   that property was disabled. JF-SAFE-005, -006, -007 and -012 judge only compactions
   whose summarizer answered (`ok`) or was never reached; a compaction that published
   foreign text (a placeholder in place of the history) is JF-SAFE-005's, its losses too.
2. Messages appended while the call was held are JF-SAFE-009's; states seen during the
   compaction are JF-SAFE-011's; a summarizer call without new input is JF-SAFE-013's,
   whatever the outcome.
3. A loss blamed once is never blamed again: JF-SAFE-001 and -014 skip what an earlier
   check explained.
4. Each attempt of a compaction step that is asked again (`REACH_TRIES`) is a compaction of
   its own under 1-3: a declined attempt reached no summarizer, so it is never its drawn
   outcome's property's (what it published or removed is JF-SAFE-005's and the general
   checks'), and the exchange appended between attempts is an ordinary append.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from .adapter import AdapterFactory, Scope
from .checks import View, analyze, intact, missing
from .said import Said
from .summarizer import ScriptedSummarizer

__all__ = ["PropertyViolation", "Recorder", "machine_class"]

FAILURES = ("raise", "timeout", "empty", "blank", "write_fail")
OUTCOME_PROPERTY = {
    "raise": "JF-SAFE-002",
    "timeout": "JF-SAFE-003",
    "empty": "JF-SAFE-004",
    "blank": "JF-SAFE-004",
    "write_fail": "JF-SAFE-010",
}
REACH_TRIES = 3  # attempts of one compaction step while the summarizer is not reached
_SPIN = 200  # event-loop turns given to a task before it counts as blocked
_SETTLE_S = 30.0  # harness guard: a held compaction or append that never ends


class PropertyViolation(AssertionError):
    """One property failed: `rid` names it, the message says what and the steps so far."""

    def __init__(
        self, rid: str, message: str, steps: list[str], trace: list[dict[str, Any]]
    ) -> None:
        self.rid = rid
        self.detail = message
        self.steps = list(steps)
        self.trace = list(trace)
        super().__init__(f"{rid}: {message}\nsteps:\n" + "\n".join(f"  {s}" for s in steps))


class HarnessStuck(RuntimeError):
    """An adapter task did not finish: the adapter or library hangs (not a property)."""


@dataclass
class Recorder:
    """What all runs of one profile saw: check evaluations, summarizer outcome counts,
    requested outcomes, adapter exceptions by type, and what the library said (its warnings
    and log records, counted by group, and the coroutines never awaited; `said.captured`)."""

    evaluated: Counter[str] = field(default_factory=Counter)
    reached: Counter[str] = field(default_factory=Counter)
    requested: Counter[str] = field(default_factory=Counter)
    raised: Counter[str] = field(default_factory=Counter)
    warnings: Said = field(default_factory=Said)


_BODY = st.text(alphabet="abcdefghijklmnopqrstuvwxyz éü—’0123456789", min_size=0, max_size=12)


def _outcome(families: list[str]) -> st.SearchStrategy[str]:
    """An outcome: its family from `families` (repeats weigh), then for `empty` its kind
    (`empty` or `blank`)."""
    return st.sampled_from(families).flatmap(
        lambda family: st.sampled_from(["empty", "blank"]) if family == "empty" else st.just(family)
    )


def machine_class(
    factory: AdapterFactory,
    scope: Scope,
    enabled: frozenset[str],
    recorder: Recorder,
) -> type[RuleBasedStateMachine]:
    """A state machine class over `factory`'s adapter, checking the `enabled` property IDs."""
    caps = scope.capabilities()
    # repeats weigh the draw: successes and holds are where most properties are decided
    failures = [o for o in FAILURES if o in caps and o != "blank"]
    release_outcomes = _outcome(["ok", "ok", "ok", *failures])
    outcomes = _outcome(["ok", "ok", *failures])
    can_hold = "hold" in caps
    multi = "multi" in caps

    class ProfileMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.loop = asyncio.new_event_loop()
            self.summarizer = ScriptedSummarizer()
            self.adapter = factory(self.summarizer)
            self.texts: dict[str, str] = {}
            self.seq: dict[str, int] = {}
            self.acked: list[str] = []
            self.steps: list[str] = []
            self.trace: list[dict[str, Any]] = []  # the rules called, with their arguments
            self.explained: set[str] = set()
            self.seen_summaries: set[str] = set()
            self.held: asyncio.Task[None] | None = None
            self.held_before: View | None = None
            self.held_acked: list[str] = []
            self.during: list[tuple[asyncio.Task[None], tuple[str, str]]] = []
            self.reads_while_held: list[list[str]] = []
            self.counter = 0

        # -- helpers ------------------------------------------------------------------
        def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
            return self.loop.run_until_complete(coro)

        def fail(self, rid: str, message: str) -> None:
            if rid in enabled:
                raise PropertyViolation(rid, message, self.steps, self.trace)

        def view(self, entries: list[str] | None = None) -> View:
            if entries is None:
                entries = self.run(self.adapter.read())
            return analyze(entries, self.texts, self.summarizer.summaries)

        def new_message(self, body: str) -> str:
            self.counter += 1
            marker = f"m{self.counter}"
            self.texts[marker] = f"#{marker} {body}".rstrip()
            self.seq[marker] = self.counter
            return marker

        async def spin(self, done: Callable[[], bool]) -> None:
            for _ in range(_SPIN):
                if done():
                    return
                await asyncio.sleep(0)

        async def guarded(self, awaitable: Any) -> Any:
            """Await `awaitable`; `HarnessStuck` if it has not finished after a generous
            guard (a hung adapter), its own exceptions (a `TimeoutError` included) as is."""
            guard = asyncio.timeout(_SETTLE_S)
            try:
                async with guard:
                    return await awaitable
            except TimeoutError as exc:
                if guard.expired():
                    raise HarnessStuck(f"no progress within {_SETTLE_S:.0f} s") from exc
                raise

        # -- rules --------------------------------------------------------------------
        @initialize(bodies=st.lists(st.tuples(_BODY, _BODY), min_size=2, max_size=3))
        def start(self, bodies: list[tuple[str, str]]) -> None:
            self.trace.append({"step": "start", "args": {"bodies": [list(b) for b in bodies]}})
            for user, assistant in bodies:
                self._append(user, assistant)

        @rule(user=_BODY, assistant=_BODY)
        def append(self, user: str, assistant: str) -> None:
            self.trace.append({"step": "append", "args": {"user": user, "assistant": assistant}})
            self._append(user, assistant)

        @precondition(lambda self: self.held is None)
        @rule(count=st.integers(min_value=3, max_value=8))
        def append_burst(self, count: int) -> None:
            """Several exchanges before the next compaction: more pending than a
            summarization budget (over-budget eviction)."""
            self.trace.append({"step": "append_burst", "args": {"count": count}})
            for _ in range(count):
                self._append("", "")

        def _append(self, user: str, assistant: str) -> None:
            if self.held is not None and not multi:
                return  # one writer: nothing may write while the library works
            u, a = self.new_message(user), self.new_message(assistant)
            pair = [self.texts[u], self.texts[a]]
            before = self.run(self.guarded(self.adapter.read()))
            if self.held is None:
                self.run(self.guarded(self.adapter.append(*pair)))
                self.steps.append(f"append({pair[0]!r}, {pair[1]!r})")
            else:
                task = self.loop.create_task(self.adapter.append(*pair))
                self.run(self.spin(task.done))
                self.during.append((task, (u, a)))
                self.steps.append(
                    f"append({pair[0]!r}, {pair[1]!r}) while the compaction is held"
                    + ("" if task.done() else " [waits]")
                )
                if not task.done() or task.exception() is not None:
                    return  # it waits for the compaction (or failed): judged at release
                self.held_acked += [u, a]
            self.acked += [u, a]
            after = self.run(self.guarded(self.adapter.read()))
            recorder.evaluated["JF-SAFE-001"] += 1
            if after != [*before, *pair]:
                self.explain(self.view(before), self.view(after))
                self.fail(
                    "JF-SAFE-001",
                    f"after the append the memory reads {after!r}, expected the previous "
                    f"{len(before)} entries followed by the two new messages verbatim",
                )
            if self.held is not None:
                self.read_while_held()

        @precondition(lambda self: self.held is None)
        @rule(outcome=outcomes)
        def compact(self, outcome: str) -> None:
            """Compact with `outcome`, up to `REACH_TRIES` times while the library does not
            call the summarizer (see the module docs)."""
            self.trace.append({"step": "compact", "args": {"outcome": outcome}})
            for attempt in range(REACH_TRIES):
                if attempt:
                    self.one_more_exchange()
                if self.compact_once(outcome):
                    return

        def one_more_exchange(self) -> None:
            """The previous attempt did not reach the summarizer: append one short exchange."""
            self.steps.append("(the summarizer was not reached: one more exchange, then again)")
            self._append("", "")

        def compact_once(self, outcome: str) -> bool:
            """One compaction with `outcome`; whether it reached the summarizer."""
            recorder.requested[outcome] += 1
            before = self.view()
            calls = len(self.summarizer.calls)
            self.summarizer.script("ok" if outcome == "write_fail" else outcome)
            if outcome == "write_fail":
                self.adapter.fail_next_write()
            self.adapter.observed_states()
            try:
                self.run(self.guarded(self.adapter.compact()))
                result = "returned"
            except HarnessStuck:
                raise
            except Exception as exc:
                recorder.raised[type(exc).__name__] += 1
                result = f"raised {type(exc).__name__}: {str(exc)[:80]}"
            self.adapter.fail_next_write(False)
            reached = [c.outcome for c in self.summarizer.calls[calls:]]
            self.steps.append(
                f"compact({outcome}) {result}; summarizer reached {len(reached)}x"
                + (f" {reached}" if reached else "")
            )
            self.after_compaction(before, self.view(), outcome, calls, [], [])
            return bool(reached)

        @precondition(lambda self: can_hold and self.held is None)
        @rule(
            appends=st.lists(st.tuples(_BODY, _BODY), min_size=1 if multi else 0, max_size=2),
            outcome=release_outcomes,
        )
        def compact_held(self, appends: list[tuple[str, str]], outcome: str) -> None:
            """Hold the summarizer call in flight, append (several writers) and read while it
            is held, then release it with `outcome`."""
            self.trace.append(
                {
                    "step": "compact_held",
                    "args": {"appends": [list(a) for a in appends], "outcome": outcome},
                }
            )
            for attempt in range(REACH_TRIES):
                if attempt:
                    self.one_more_exchange()
                if self.compact_and_hold():
                    break
            else:
                return
            for user, assistant in appends if multi else []:
                self._append(user, assistant)
            self.read_while_held()
            self.finish_hold(outcome)

        def compact_and_hold(self) -> bool:
            recorder.requested["hold"] += 1
            before = self.view()
            self.summarizer.script("hold")
            self.adapter.observed_states()
            calls = len(self.summarizer.calls)
            task = self.loop.create_task(self.adapter.compact())
            self.run(self.spin(lambda: task.done() or self.summarizer.reached_hold()))
            if task.done():
                exc = task.exception()
                self.steps.append(
                    "compact(hold) finished without reaching the summarizer"
                    + (f" (raised {type(exc).__name__})" if exc else "")
                )
                self.after_compaction(before, self.view(), "ok", calls, [], [])
                return False
            if not self.summarizer.reached_hold():
                self.summarizer.release("ok")
                with contextlib.suppress(Exception):
                    self.run(self.guarded(task))
                raise HarnessStuck("compact() neither finished nor reached the summarizer")
            self.steps.append("compact(hold): the summarizer call is now held in flight")
            self.held, self.held_before, self.held_calls = task, before, calls
            self.held_acked, self.during, self.reads_while_held = [], [], []
            return True

        def read_while_held(self) -> None:
            entries = self.run(self.guarded(self.adapter.read()))
            self.reads_while_held.append(entries)
            assert self.held_before is not None
            self.check_states([entries], self.held_before, "a read while the call was held")

        def finish_hold(self, outcome: str) -> None:
            task, before = self.held, self.held_before
            assert task is not None and before is not None
            recorder.requested[f"hold→{outcome}"] += 1
            if outcome == "write_fail":
                self.adapter.fail_next_write()
            self.summarizer.release("ok" if outcome == "write_fail" else outcome)
            try:
                self.run(self.guarded(task))
                result = "returned"
            except HarnessStuck:
                raise
            except Exception as exc:
                recorder.raised[type(exc).__name__] += 1
                result = f"raised {type(exc).__name__}: {str(exc)[:80]}"
            self.adapter.fail_next_write(False)
            for append_task, pair in self.during:
                try:
                    self.run(self.guarded(append_task))
                except HarnessStuck:
                    raise
                except Exception as exc:
                    recorder.raised[type(exc).__name__] += 1
                    continue
                for marker in pair:
                    if marker not in self.acked:
                        self.acked.append(marker)
                        self.held_acked.append(marker)
            during = [m for _, pair in self.during for m in pair]
            self.steps.append(f"release({outcome}): compact {result}")
            self.held, self.held_before = None, None
            self.after_compaction(
                before, self.view(), outcome, self.held_calls, during, self.reads_while_held
            )

        def teardown(self) -> None:
            try:
                if self.held is not None:
                    self.summarizer.release("ok")
                    with contextlib.suppress(Exception):
                        self.run(self.guarded(self.held))
                    for task, _ in self.during:
                        with contextlib.suppress(Exception):
                            self.run(self.guarded(task))
                with contextlib.suppress(Exception):
                    self.run(self.adapter.close())
            finally:
                recorder.reached.update(self.summarizer.counts)
                self.loop.close()

        # -- checks -------------------------------------------------------------------
        def check_states(self, states: list[list[str]], before: View, where: str) -> None:
            held = [m for m in [*before.verbatim, *before.summaries, *before.covered]]
            for state in states:
                recorder.evaluated["JF-SAFE-011"] += 1
                gone = [m for m in missing(self.view(state), held) if m not in self.explained]
                if gone:
                    self.fail(
                        "JF-SAFE-011",
                        f"{where} held {len(state)} entries {state!r}: "
                        f"{', '.join('#' + m for m in gone)} neither verbatim nor summarized",
                    )

        def after_compaction(
            self,
            before: View,
            after: View,
            outcome: str,
            calls: int,
            during: list[str],
            reads: list[list[str]],
        ) -> None:
            new_calls = self.summarizer.calls[calls:]
            published = [k for k in after.summaries if k not in before.summaries]
            during_texts = [self.texts[m] for m in during]
            # the outcome's own property first, if the summarizer was reached at all (a
            # failing write is the storage's: it may fail with no summarizer call)
            rid = OUTCOME_PROPERTY.get(outcome) if new_calls or outcome == "write_fail" else None
            if rid is not None:
                recorder.evaluated[rid] += 1
                gone_already = {self.texts[m] for m in self.explained if m in self.texts}
                kept = [e for e in before.entries if e not in gone_already]
                revived = [self.texts[m] for m in self.explained if m in self.texts]
                diff = intact(kept, after.entries, [*during_texts, *revived])
                if diff is not None:
                    self.explain(before, after)
                    self.explain_markers([m for m in self.acked if not after.holds(m)])
                    self.fail(
                        rid,
                        f"a compaction whose outcome was {outcome} changed the history: {diff}",
                    )
            elif new_calls:
                recorder.evaluated["JF-SAFE-006"] += 1
                removed = [
                    m
                    for m in [*before.verbatim, *before.summaries]
                    if not after.holds(m) and m not in self.explained
                ]
                if removed:
                    self.explain(before, after)
                    self.fail(
                        "JF-SAFE-006",
                        f"the compaction removed {', '.join('#' + m for m in removed)} which "
                        f"no summary in the memory covers (now: {after.entries!r})",
                    )
                for key in published:
                    recorder.evaluated["JF-SAFE-007"] += 1
                    still = sorted(
                        m
                        for m in self.summarizer.summaries[key].inputs
                        if m in after.verbatim and m.startswith("m")
                    )
                    if still:
                        self.fail(
                            "JF-SAFE-007",
                            f"summary #{key} summarizes {', '.join('#' + m for m in still)} "
                            "but they are still held verbatim next to it",
                        )
                recorder.evaluated["JF-SAFE-012"] += 1
                came_back = any(after.holds(m) for m in self.explained)
                if not came_back and len(after.entries) > len(before.entries) + len(during):
                    self.fail(
                        "JF-SAFE-012",
                        f"the compaction grew the history from {len(before.entries)} to "
                        f"{len(after.entries)} entries ({len(during)} appended meanwhile)",
                    )
            if during:
                recorder.evaluated["JF-SAFE-009"] += 1
                lost = [
                    m
                    for m in during
                    if m in self.acked and not after.holds(m) and m not in self.explained
                ]
                if lost:
                    self.explained.update(lost)
                    self.fail(
                        "JF-SAFE-009",
                        f"{', '.join('#' + m for m in lost)}, appended while the summarizer "
                        f"call was in flight, are gone: the memory reads {after.entries!r}",
                    )
            junk = [e for e in after.unknown if e not in before.unknown]
            if rid is None:  # a failed outcome's changes are its own property's (see above)
                recorder.evaluated["JF-SAFE-005"] += 1
            if rid is None and after.unknown:
                self.explain(before, after)  # what a placeholder replaced is its defect's
            if junk and rid is None:
                self.fail(
                    "JF-SAFE-005",
                    f"the compaction published {junk!r}, which is no reply of the summarizer",
                )
            states = [*reads, *self.adapter.observed_states()]
            self.check_states(states, before, "the storage, during the compaction,")
            for call in new_calls:
                recorder.evaluated["JF-SAFE-013"] += 1
                cascade = bool(call.inputs & self.explained)  # from a loss already blamed
                if not cascade and not any(m in before.verbatim for m in call.inputs):
                    self.fail(
                        "JF-SAFE-013",
                        f"the summarizer was called (call {call.number}) with no message held "
                        f"verbatim, only {sorted(call.inputs) or 'nothing'}: re-summarizing "
                        "summaries never settles",
                    )

        def explain(self, before: View, after: View) -> None:
            for m in [*before.verbatim, *before.summaries, *before.covered]:
                if not after.holds(m):
                    self.explained.add(m)

        # -- invariants ---------------------------------------------------------------
        @invariant()
        def general(self) -> None:
            if self.held is not None:
                return
            now = self.view()
            recorder.evaluated["JF-SAFE-008"] += 1
            order = [self.seq[m] for m in now.verbatim]
            if order != sorted(order):
                self.fail(
                    "JF-SAFE-008",
                    f"kept messages are out of append order: {now.entries!r}",
                )
            recorder.evaluated["JF-SAFE-014"] += 1
            gone = [k for k in self.seen_summaries if not now.holds(k) and k not in self.explained]
            if gone:
                self.explain_markers(gone)
                self.fail(
                    "JF-SAFE-014",
                    f"summary {', '.join('#' + k for k in sorted(gone))} is gone and no later "
                    f"summary covers it: {now.entries!r}",
                )
            self.seen_summaries.update(now.summaries)
            recorder.evaluated["JF-SAFE-001"] += 1
            lost = [m for m in self.acked if not now.holds(m) and m not in self.explained]
            if lost:
                self.explain_markers(lost)
                self.fail(
                    "JF-SAFE-001",
                    f"{', '.join('#' + m for m in lost)} neither verbatim nor summarized: "
                    f"{now.entries!r}",
                )

        def explain_markers(self, markers: list[str]) -> None:
            self.explained.update(markers)

    ProfileMachine.__name__ = f"Profile_{scope.library.replace('-', '_')}"
    return ProfileMachine
