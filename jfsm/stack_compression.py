"""The compression of one stack: its machine, its request in flight, its retry count.

`StackCompression` owns one `stack_compression` machine (one per stack incarnation: the game
stack, or one run of a catalyst scene) and carries out the effects of its table through
its `on_<effect>` handlers (decision R31). It builds the request when a check or a force is
due (under the engine's lock), awaits compress.v2 *outside* the lock (D19), then judges the
result and, for a valid one, plans and commits the one publication projection (D5 to D7,
D11). The publication sets the new summary, deletes exactly the chunks with
`seq <= throughSeq` and updates the meta, so the summary never coexists with every
represented chunk, not even in the quota arithmetic.

The game stack's forced-compression machine listens through a `CompressionListener`: it is
told when a forced compression could not start, chooses the forced flag a publication
writes, and is told when an attempt ended without publishing.

Seams (decision R32; the example mutants of `jfsm_conformance/examples/mutants/` break one
policy each through them): the guards `due` and `has_chunks`, `prefix` (what a request
represents), `text` (what it submits), `call` (the await), `judge`, the handler
`on_plan_publication`, and `events` (telemetry). A subclass is installed with
`GameEngine.stack_compression`.

Errors: the machine's `InvalidTransition`; a store failure while publishing propagates
after the machines returned to rest and telemetry recorded the attempt as `aborted`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import jfsm.observability as observability
from jfsm.compressor import CompressionRequest, CompressionResult
from jfsm.errors import InvalidInput, JfsmError, QuotaExceeded
from jfsm.game_memory import GameMemory
from jfsm.layout import scene_keys
from jfsm.machines import CompressionEvent, CompressionState, StateMachine, handlers
from jfsm.memory_index import StackState
from jfsm.records import ArchiveRecord, Chunk, Record, Summary
from jfsm.telemetry import attempt_events
from jfsm.text import require_text, summary_cost

__all__ = [
    "WHITE_SPACE",
    "CompressionListener",
    "CompressionReport",
    "InFlight",
    "Sets",
    "StackCompression",
    "is_blank",
    "judge",
    "plan_publication",
]

# The Unicode White_Space property (PropList.txt). Python's `str.isspace` is wider (it also
# counts U+001C..U+001F), so the spec's "empty after trimming white space" is spelled out.
WHITE_SPACE = frozenset(
    "\u0009\u000a\u000b\u000c\u000d\u0020\u0085\u00a0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)

#: The sets of a planned projection: key -> record (`ARCHIVES` -> scene id -> record).
Sets = dict[str, Record | Mapping[str, ArchiveRecord]]


def is_blank(text: str) -> bool:
    """Whether `text` is empty once Unicode White_Space is trimmed."""
    return all(char in WHITE_SPACE for char in text)


@dataclass(frozen=True, slots=True)
class CompressionReport:
    """What a compression check or a forced compression did.

    `outcome`: `not_due`, `in_flight` (one is already running: none started), `published`,
    or a failure outcome (`refused`, `transport`, `empty`, `not_smaller`, `quota`, `stale`).
    """

    outcome: str
    length_before: int
    length_after: int
    call_id: str | None = None
    through_seq: int | None = None
    forced: CompressionReport | None = None

    def to_json(self) -> dict[str, Any]:
        """The report as the driver protocol's JSON (camelCase, as every record); `forced`
        is the owed forced compression run first, if any."""
        out: dict[str, Any] = {
            "outcome": self.outcome,
            "lengthBefore": self.length_before,
            "lengthAfter": self.length_after,
        }
        if self.call_id is not None:
            out["callId"] = self.call_id
        if self.through_seq is not None:
            out["throughSeq"] = self.through_seq
        if self.forced is not None:
            out["forced"] = self.forced.to_json()
        return out


@dataclass(frozen=True, slots=True)
class InFlight:
    """A request in flight and what it represents."""

    request: CompressionRequest
    represented: frozenset[int]
    summary_text: str | None
    forced: bool


def judge(flight: InFlight, result: CompressionResult, stack: StackState | None) -> str:
    """The outcome of a result: `valid` or a failure outcome of D7 (not `quota`)."""
    if stack is None or _is_stale(flight, stack):
        return "stale"
    if result.outcome != "ok":
        return result.outcome
    summary = result.summary
    try:
        require_text(summary, "summary")
        require_text(result.call_id, "callId")
    except InvalidInput:
        return "transport"
    assert summary is not None
    if not result.call_id:
        return "transport"
    if is_blank(summary):
        return "empty"
    if summary_cost(summary) >= flight.request.chars:
        return "not_smaller"  # the summary block would not make the stack shorter
    return "valid"


def _is_stale(flight: InFlight, stack: StackState) -> bool:
    if stack.epoch != flight.request.epoch:
        return True
    current_summary = None if stack.summary is None else stack.summary.text
    if current_summary != flight.summary_text:
        return True
    return not flight.represented.issubset(stack.chunks)


def plan_publication(
    flight: InFlight,
    result: CompressionResult,
    stack: StackState,
    meta_update: Mapping[str, Any],
) -> tuple[Sets, set[str]]:
    """Sets and deletes of the one publication projection of a valid result."""
    assert result.summary is not None and result.call_id is not None
    summary = Summary.trusted(  # judge() validated the text
        text=result.summary,
        through_seq=flight.request.through_seq,
        compression_call_id=result.call_id,
        kind=flight.request.kind,
    )
    meta = stack.current_meta().model_copy(update=dict(meta_update))
    sets: Sets = {stack.keys.summary: summary, stack.keys.meta: meta}
    deletes = {stack.keys.chunk(seq) for seq in stack.chunks if seq <= flight.request.through_seq}
    return sets, deletes


class CompressionListener:
    """What the owner of a stack hears of its compressions (the defaults do nothing)."""

    def not_started(self) -> None:
        """A forced compression was asked for but there was nothing to compress."""

    @contextmanager
    def publishing(self, stack: StackState, through_seq: int) -> Iterator[dict[str, Any]]:
        """Around a publication's plan and commit: yields the meta fields it writes;
        undone if the commit fails."""
        yield {}

    def failed(self) -> None:
        """An attempt ended without publishing (any failure outcome)."""


Ask = Callable[[CompressionRequest], Awaitable[CompressionResult]]


class StackCompression:
    """One stack's compression machine, request in flight and retry count.

    `ask` sends a request to compress.v2 (the engine's compressor, read at call time);
    `threshold` and `kind` are the stack's (game or catalyst).
    """

    def __init__(
        self,
        memory: GameMemory,
        scene_id: str | None,
        *,
        game_id: str,
        kind: str,
        threshold: int,
        ask: Ask,
        listener: CompressionListener | None = None,
    ) -> None:
        self.memory = memory
        self.scene_id = scene_id
        self.game_id = game_id
        self.kind = kind
        self.threshold = threshold
        self.ask = ask
        self.listener = listener or CompressionListener()
        self.keys = scene_keys(scene_id) if scene_id is not None else memory.index.game.keys
        # The last logical compression that ended with a completed reply but did not
        # publish, and how many times: its next ask uses a new Idempotency-Key.
        self._retry: tuple[tuple[int, int, str], int] | None = None
        self.machine = StateMachine(
            "stack_compression",
            {"due": self.due, "has_chunks": self.has_chunks},
            effects=handlers(self),
        )

    @property
    def state(self) -> str:
        """The machine's state."""
        return self.machine.current

    @property
    def stack(self) -> StackState:
        """The stack as indexed now (an empty one once a scene's keys are gone)."""
        found = self.memory.index.stack(self.scene_id)
        return found if found is not None else StackState(self.keys)

    # -- guards (seams) ------------------------------------------------------------------
    def due(self) -> bool:
        """Strictly above the threshold with at least one exact chunk."""
        stack = self.stack
        return stack.length > self.threshold and bool(stack.chunks)

    def has_chunks(self) -> bool:
        """At least one exact chunk (a forced compression has something to compress)."""
        return bool(self.stack.chunks)

    # -- appends, rebuilds, closing --------------------------------------------------------
    async def append(
        self,
        exchange: Mapping[str, Any],
        *,
        label: str,
        meta_update: Mapping[str, Any] | None = None,
        extra: Mapping[str, Record | Mapping[str, ArchiveRecord]] | None = None,
        deletes: Iterable[str] = (),
    ) -> int:
        """Append one exact chunk (`exchange`: its fields but `seq`, texts already
        validated) at the meta's `nextSeq`, with `extra` records in the same projection;
        returns its seq."""
        meta = self.stack.current_meta()
        seq = meta.next_seq
        new_meta = meta.model_copy(update={"next_seq": seq + 1, **(meta_update or {})})
        sets: Sets = dict(extra or {})
        sets[self.keys.chunk(seq)] = Chunk.trusted(seq=seq, **exchange)
        sets[self.keys.meta] = new_meta
        await self.machine.act_async(CompressionEvent.APPEND, sets, deletes, label)
        return seq

    async def on_append_chunk(self, sets: Sets, deletes: Iterable[str], label: str) -> None:
        await self.memory.commit(sets, deletes, label=label)

    async def rebuild(self, sets: Sets, deletes: Iterable[str], label: str) -> None:
        """Replace the stack by a rebuild's projection (its epoch advances)."""
        await self.machine.act_async(CompressionEvent.REBUILD, sets, deletes, label)

    async def on_replace_chunks(self, sets: Sets, deletes: Iterable[str], label: str) -> None:
        await self.memory.commit(sets, deletes, label=label)

    async def close(self, write: Callable[[list[str]], Awaitable[Any]]) -> Any:
        """End the stack: `write` commits the scene's terminal projection, given every key
        of this stack to delete in it; returns what `write` returns."""
        return await self.machine.act_async(CompressionEvent.CLOSE, write)

    async def on_delete_stack(self, write: Callable[[list[str]], Awaitable[Any]]) -> Any:
        return await write(self.stack.all_keys())

    # -- starting --------------------------------------------------------------------------
    def start(self, event: CompressionEvent) -> InFlight | CompressionReport:
        """Fire `check` or `force` (under the lock): the request, if one is due, else the
        report of why none was started."""
        started: InFlight | CompressionReport = self.machine.act(event, event)
        return started

    def on_proceed(self, event: CompressionEvent) -> CompressionReport:
        length = self.stack.length
        outcome = "in_flight" if self.state == CompressionState.IN_FLIGHT else "not_due"
        if event == CompressionEvent.FORCE and outcome == "not_due":
            self.listener.not_started()
        return CompressionReport(outcome, length, length)

    def on_build_request(self, event: CompressionEvent) -> InFlight:
        stack = self.stack
        text = self.text(stack)
        if len(text) != stack.length:
            raise AssertionError(f"canonical length drifted: {stack.length} != {len(text)}")
        through_seq, represented = self.prefix(stack)
        retry = 0
        if self._retry is not None and self._retry[0] == (stack.epoch, through_seq, text):
            retry = self._retry[1]
        request = CompressionRequest(
            kind=self.kind,
            game_id=self.game_id,
            catalyst_id=self.scene_id,
            text=text,
            chars=len(text),
            through_seq=through_seq,
            epoch=stack.epoch,
            retry=retry,
        )
        return InFlight(
            request=request,
            represented=represented,
            summary_text=None if stack.summary is None else stack.summary.text,
            forced=event == CompressionEvent.FORCE,
        )

    def prefix(self, stack: StackState) -> tuple[int, frozenset[int]]:
        """The represented prefix: `throughSeq` and the seqs of its exact chunks."""
        return max(stack.chunks), frozenset(stack.chunks)

    def text(self, stack: StackState) -> str:
        """The canonical text submitted (and measured)."""
        return stack.text()

    # -- awaiting and settling -------------------------------------------------------------
    async def finish(self, started: InFlight | CompressionReport) -> CompressionReport:
        """Await compress.v2 for a started request (outside the lock), then settle its
        result under the lock. A report passes through unchanged."""
        if isinstance(started, CompressionReport):
            return started
        if not observability.tracing_on():
            return await self._finish(started)
        with observability.span("jfsm.compression", self._span_start(started)) as span:
            report = await self._finish(started)
            if span.is_recording():
                span.set_attribute("jfsm.compression.outcome", report.outcome)
                span.set_attribute("jfsm.compression.length_after", report.length_after)
                if report.call_id is not None:
                    span.set_attribute("jfsm.compression.call_id", report.call_id)
            return report

    def _span_start(self, flight: InFlight) -> dict[str, Any]:
        """The attributes of a compression's span: ids, sizes and flags, never its text."""
        request = flight.request
        attributes: dict[str, Any] = {
            "jfsm.game.id": request.game_id,
            "jfsm.stack.kind": "game" if request.catalyst_id is None else "catalyst",
            "jfsm.compression.idempotency_key": request.idempotency_key,
            "jfsm.compression.retry": request.retry,
            "jfsm.compression.input_chars": request.chars,
            "jfsm.compression.through_seq": request.through_seq,
            "jfsm.compression.forced": flight.forced,
        }
        if request.catalyst_id is not None:
            attributes["jfsm.scene.id"] = request.catalyst_id
        return attributes

    async def _finish(self, started: InFlight) -> CompressionReport:
        try:
            result = await self.call(started.request)
        except asyncio.CancelledError:
            # The caller gave up: settle as a transport failure so the machines leave
            # `in_flight` (nothing was written), then let the cancellation through.
            cancelled = CompressionResult(outcome="transport", attempts=(), error_code="cancelled")
            await self.settle(started, cancelled)
            raise
        except Exception as exc:  # a compressor must not raise; treat it as transport
            result = CompressionResult(
                outcome="transport", attempts=(), error_code=type(exc).__name__
            )
        async with self.memory.lock:
            return await self.settle(started, result)

    async def call(self, request: CompressionRequest) -> CompressionResult:
        """Send `request` to compress.v2 (the only await of a compression)."""
        return await self.ask(request)

    def judge(self, flight: InFlight, result: CompressionResult, stack: StackState | None) -> str:
        """`valid` or the failure outcome of a result (see `judge`)."""
        return judge(flight, result, stack)

    async def settle(self, flight: InFlight, result: CompressionResult) -> CompressionReport:
        """Judge a result and publish it or keep the stack exact (under the lock)."""
        stack = self.memory.index.stack(self.scene_id)
        if self.state == CompressionState.CLOSED:
            outcome = self.machine.act(CompressionEvent.REPLY_STALE, flight, result, "stale")
        else:
            outcome = self.judge(flight, result, stack)
            if outcome == "valid":
                assert stack is not None
                outcome = await self._publish(flight, result, stack)
            else:
                event = CompressionEvent.REPLY_STALE if outcome == "stale" else None
                outcome = self.machine.act(
                    event or CompressionEvent.REPLY_FAILED, flight, result, outcome
                )
        if outcome != "published":
            self.listener.failed()
        self._emit(self.events(flight.request, result, outcome))
        after = stack.length if stack is not None else 0
        return CompressionReport(
            outcome,
            flight.request.chars,
            after,
            call_id=result.call_id if outcome == "published" else None,
            through_seq=flight.request.through_seq,
        )

    async def _publish(self, flight: InFlight, result: CompressionResult, stack: StackState) -> str:
        refused = CompressionEvent.COMMIT_REFUSED
        try:
            with self.listener.publishing(stack, flight.request.through_seq) as meta_update:
                sets, deletes = self.machine.act(
                    CompressionEvent.REPLY_VALID, flight, result, stack, meta_update
                )
                try:
                    await self.machine.act_async(CompressionEvent.COMMIT, sets, deletes)
                except QuotaExceeded:
                    self.machine.act(refused, flight, result, "quota")
                    raise
                except BaseException:
                    self.machine.act(refused, flight, result, "aborted")
                    raise
        except QuotaExceeded:
            return "quota"
        except JfsmError:
            # The store refused the publication (I/O failure): nothing was written; the
            # machines are at rest again before the error goes on.
            self.listener.failed()
            self._emit(self.events(flight.request, result, "aborted"))
            raise
        return "published"

    def on_plan_publication(
        self,
        flight: InFlight,
        result: CompressionResult,
        stack: StackState,
        meta_update: Mapping[str, Any],
    ) -> tuple[Sets, set[str]]:
        return plan_publication(flight, result, stack, meta_update)

    async def on_publish(self, sets: Sets, deletes: set[str]) -> None:
        await self.memory.commit(sets, deletes, label="publish_summary")

    def on_keep_exact(self, flight: InFlight, result: CompressionResult, outcome: str) -> str:
        if result.outcome in ("ok", "refused") and outcome not in ("published", "aborted"):
            request = flight.request
            material = (request.epoch, request.through_seq, request.text)
            self._retry = (material, request.retry + 1)
        return outcome

    def events(
        self, request: CompressionRequest, result: CompressionResult, outcome: str
    ) -> list[dict[str, Any]]:
        """The telemetry events of one logical compression (never any text)."""
        return attempt_events(request, result, outcome)

    def _emit(self, events: list[dict[str, Any]]) -> None:
        for event_json in events:
            self.memory.emit(event_json)
        observability.compression_events(events)
