"""Mutants of the reference engine, for `tests/conformance/test_mutants.py`.

Each factory below is a `python:` driver whose engine differs from the reference in ONE
plausible way; the suite must fail every one of them with a fitting requirement ID:

```
jfsm conformance --driver python:jfsm_conformance.examples.mutants:threshold_inclusive
```

A mutant breaks one policy through a seam the reference offers (decision R32), never by
copying engine code, so it cannot drift from the engine it mutates:

- a `StackCompression` subclass (its guards `due` / `has_chunks`, `prefix`, `call`,
  `judge`, the `on_plan_publication` handler, `events`), a `ForcedCompression` or `Scene`
  subclass (`before_generation`; `outcome_exchange`, an effect handler), or another
  rebuild planner, installed as a class attribute of a `GameEngine` subclass;
- a `Store` wrapper handed to the engine (the quota and duplication policies);
- a compressor subclass handed to the driver (what goes on the wire);
- a protocol-level wrapper that rewrites messages or replies.

The reference modules are never patched.
"""

from __future__ import annotations

import atexit
import dataclasses
import itertools
import json
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jfsm.compressor import CompressionRequest, CompressionResult
from jfsm.driver import ReferenceDriver
from jfsm.engine import GameEngine
from jfsm.forced import ForcedCompression
from jfsm.history import RebuildPlan, rebuild_game_stack
from jfsm.image import StoreImage
from jfsm.layout import ARCHIVES, GAME
from jfsm.memory_index import StackState
from jfsm.projection import Projection
from jfsm.records import ArchiveRecord, Chunk, Record, Round
from jfsm.scene import Scene
from jfsm.stack_compression import CompressionReport, InFlight, Sets, StackCompression
from jfsm.stores.base import Store
from jfsm.telemetry import TelemetrySink
from jfsm.transport import HttpCompressor

__all__ = ["MUTANTS"]

MUTANTS: dict[str, str] = {}  # factory name -> the one thing it does wrong


def _engine_driver(engine_cls: type[GameEngine]) -> ReferenceDriver:
    return ReferenceDriver(engine_class=engine_cls)


def _with_stack(stack_cls: type[StackCompression]) -> ReferenceDriver:
    """A reference engine whose stacks compress with `stack_cls`."""
    return _engine_driver(type("Engine", (GameEngine,), {"stack_compression": stack_cls}))


def _durable_stack(stack_cls: type[StackCompression]) -> ReferenceDriver:
    """`_with_stack` over durable file stores in a fresh temporary directory (removed when
    the process exits): for mutants only a restart or a crash can tell apart."""
    state = tempfile.mkdtemp(prefix="jfsm-mutant-")
    atexit.register(shutil.rmtree, state, True)
    engine = type("Engine", (GameEngine,), {"stack_compression": stack_cls})
    return ReferenceDriver(state, engine_class=engine, crash_injection=True)


def _compressor_driver(compressor_cls: type[HttpCompressor]) -> ReferenceDriver:
    return ReferenceDriver(compressor_factory=compressor_cls)


class _StoreWrapper:
    """A store that hands everything to `inner` (a subclass changes one policy)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    @property
    def image(self) -> StoreImage:
        return self.inner.image

    @property
    def durable(self) -> bool:
        return self.inner.durable

    def commit(self, projection: Projection) -> None:
        self.inner.commit(projection)

    def seed(self, values: Mapping[str, bytes]) -> None:
        self.inner.seed(values)

    def checkpoint(self) -> None:
        self.inner.checkpoint()

    def close(self) -> None:
        self.inner.close()


def _with_store(wrapper: Callable[[Store], Store]) -> ReferenceDriver:
    """A reference engine over `wrapper(store)` (its duplicates too: `duplicate` builds
    the engine's own class)."""

    class Engine(GameEngine):
        def __init__(self, store: Store, *args: Any, **kwargs: Any) -> None:
            super().__init__(wrapper(store), *args, **kwargs)

    return _engine_driver(Engine)


class _WrapperBase:
    """The reference driver behind a protocol-level wrapper (as in `broken.py`)."""

    def __init__(self, inner: ReferenceDriver | None = None) -> None:
        self.inner = inner if inner is not None else ReferenceDriver()
        self._ids = itertools.count(10**9)

    async def call(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        return await self.inner.handle({"id": next(self._ids), "op": op, "args": args})

    async def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        bend = getattr(self, "bend_" + str(message.get("op")), None)
        if bend is None:
            return await self.inner.handle(message)
        reply: dict[str, Any] = await bend(message)
        return reply

    def close(self) -> None:
        self.inner.close()


def mutant(doc: str) -> Callable[[Callable[[], Any]], Callable[[], Any]]:
    def wrap(fn: Callable[[], Any]) -> Callable[[], Any]:
        MUTANTS[fn.__name__] = doc
        __all__.append(fn.__name__)
        return fn

    return wrap


# -- COMP: trigger ------------------------------------------------------------------------------


class _ThresholdInclusive(StackCompression):
    def due(self) -> bool:
        return self.stack.length >= self.threshold and self.has_chunks()


@mutant("compresses at length >= threshold instead of >")
def threshold_inclusive() -> ReferenceDriver:
    return _with_stack(_ThresholdInclusive)


class _SummaryAlone(StackCompression):
    def has_chunks(self) -> bool:
        return super().has_chunks() or self.stack.summary is not None

    def due(self) -> bool:
        return self.stack.length > self.threshold and self.has_chunks()

    def prefix(self, stack: StackState) -> tuple[int, frozenset[int]]:
        if stack.chunks or stack.summary is None:
            return super().prefix(stack)
        return stack.summary.through_seq, frozenset()


@mutant("ignores the 'at least one exact chunk' rule: a long summary alone is compressed")
def summary_only_due() -> ReferenceDriver:
    return _with_stack(_SummaryAlone)


# -- COMP: publication --------------------------------------------------------------------------

Plan = tuple[Sets, set[str]]


def _planning(
    change: Callable[[StackCompression, InFlight, CompressionResult, StackState, Plan], Plan],
) -> ReferenceDriver:
    """Stacks whose publication plan is the reference's, changed by `change`."""

    class Stack(StackCompression):
        def on_plan_publication(
            self,
            flight: InFlight,
            result: CompressionResult,
            stack: StackState,
            meta_update: Mapping[str, Any],
        ) -> Plan:
            plan = super().on_plan_publication(flight, result, stack, meta_update)
            return change(self, flight, result, stack, plan)

    return _with_stack(Stack)


def _replanned(**result_fields: Callable[[InFlight, CompressionResult], Any]) -> ReferenceDriver:
    """Stacks that plan the publication of a result with some fields changed."""

    class Stack(StackCompression):
        def on_plan_publication(
            self,
            flight: InFlight,
            result: CompressionResult,
            stack: StackState,
            meta_update: Mapping[str, Any],
        ) -> Plan:
            changed = {name: make(flight, result) for name, make in result_fields.items()}
            result = dataclasses.replace(result, **changed)
            return super().on_plan_publication(flight, result, stack, meta_update)

    return _with_stack(Stack)


@mutant("publishes the summary but keeps the represented chunks")
def keep_represented() -> ReferenceDriver:
    return _planning(lambda unit, flight, result, stack, plan: (plan[0], set()))


@mutant("publication deletes seq < throughSeq (one chunk too few)")
def delete_too_few() -> ReferenceDriver:
    def change(
        unit: StackCompression, f: InFlight, r: CompressionResult, stack: StackState, plan: Plan
    ) -> Plan:
        return plan[0], plan[1] - {stack.keys.chunk(f.request.through_seq)}

    return _planning(change)


@mutant("publication deletes seq <= throughSeq + 1 (one chunk too many)")
def delete_too_many() -> ReferenceDriver:
    def change(
        unit: StackCompression, f: InFlight, r: CompressionResult, stack: StackState, plan: Plan
    ) -> Plan:
        after = f.request.through_seq + 1
        extra = {stack.keys.chunk(after)} if after in stack.chunks else set()
        return plan[0], plan[1] | extra

    return _planning(change)


class _TwoCommits(StackCompression):
    def on_publish(self, sets: Sets, deletes: set[str]) -> None:
        # the quota is judged on the whole publication's post-state, as it must be; only
        # the writing is split: the represented chunks go, then the summary comes
        records = {key: value.jcs() for key, value in sets.items() if isinstance(value, Record)}
        self.memory.store.image.check(Projection.encoded(records, deletes, label="publish"))
        self.memory.commit({}, deletes, label="publish_summary")
        self.memory.commit(sets, (), label="publish_summary")


@mutant("publishes a summary in two commits: the represented chunks go first (durable)")
def publication_in_two_commits() -> ReferenceDriver:
    return _durable_stack(_TwoCommits)


@mutant("stores the published summary trimmed of white space")
def summary_trimmed() -> ReferenceDriver:
    return _replanned(summary=lambda flight, result: str(result.summary).strip())


@mutant("records the request's idempotency key as compressionCallId")
def call_id_is_idempotency_key() -> ReferenceDriver:
    return _replanned(call_id=lambda flight, result: flight.request.idempotency_key)


class _NoCallIdDump(_WrapperBase):
    async def bend_dump(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = await self.inner.handle(message)
        if reply.get("ok"):
            result = reply["result"]
            values = [v for k, v in result["store"].items() if k.endswith(".summary")]
            values += [
                e.get("value") for e in result["changeLog"] if str(e["key"]).endswith(".summary")
            ]
            for value in values:
                if isinstance(value, dict):
                    value.pop("compressionCallId", None)
        return reply


@mutant("does not record compressionCallId in the summary")
def no_call_id() -> _WrapperBase:
    return _NoCallIdDump()


class _StaleIgnored(StackCompression):
    def judge(self, flight: InFlight, result: CompressionResult, stack: StackState | None) -> str:
        if stack is not None:
            # forget what the request represented: the old reply publishes over the
            # rebuilt stack
            request = dataclasses.replace(flight.request, epoch=stack.epoch)
            flight = dataclasses.replace(
                flight,
                request=request,
                represented=frozenset(),
                summary_text=None if stack.summary is None else stack.summary.text,
            )
        return super().judge(flight, result, stack)


@mutant("publishes a stale reply after a reset or edit (only a closed scene is stale)")
def stale_published() -> ReferenceDriver:
    return _with_stack(_StaleIgnored)


# -- CALL: what is submitted -------------------------------------------------------------------


class _WithoutSummaryBlock(HttpCompressor):
    async def compress(self, request: CompressionRequest, participants: Any) -> CompressionResult:
        text = request.text
        if text.startswith("<summary>\n"):
            text = text[text.index("\n</summary>\n") + len("\n</summary>\n") :]
        return await super().compress(dataclasses.replace(request, text=text), participants)


@mutant("submits the chunks without the summary block (chars still the measured length)")
def submit_without_summary() -> ReferenceDriver:
    return _compressor_driver(_WithoutSummaryBlock)


class _Utf8Chars(HttpCompressor):
    async def compress(self, request: CompressionRequest, participants: Any) -> CompressionResult:
        chars = len(request.text.encode("utf-8"))
        return await super().compress(dataclasses.replace(request, chars=chars), participants)


@mutant("sends input.chars in UTF-8 bytes")
def chars_in_utf8() -> ReferenceDriver:
    return _compressor_driver(_Utf8Chars)


class _ModelField(HttpCompressor):
    @staticmethod
    def _encode(request: CompressionRequest, participants: Any) -> bytes:
        import json

        body = json.loads(HttpCompressor._encode(request, participants))
        body["model"] = "gpt-large"
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


@mutant("adds a model field to the compress.v2 body")
def model_in_body() -> ReferenceDriver:
    return _compressor_driver(_ModelField)


class _UnsortedBeneficiaries(HttpCompressor):
    @staticmethod
    def _encode(request: CompressionRequest, participants: Any) -> bytes:
        import json

        body = json.loads(HttpCompressor._encode(request, participants))
        body["beneficiaries"] = list(reversed(body["beneficiaries"]))
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


@mutant("beneficiaries in reverse order")
def beneficiaries_unsorted() -> ReferenceDriver:
    return _compressor_driver(_UnsortedBeneficiaries)


class _BotsPay(HttpCompressor):
    @staticmethod
    def _encode(request: CompressionRequest, participants: Any) -> bytes:
        def everyone() -> list[Any]:
            return [p.model_copy(update={"human": True}) for p in participants()]

        return HttpCompressor._encode(request, everyone)


@mutant("non-human participants are beneficiaries")
def bots_pay() -> ReferenceDriver:
    return _compressor_driver(_BotsPay)


class _RetryRefusal(HttpCompressor):
    @staticmethod
    def _retryable(attempt: Any) -> bool:
        return attempt.outcome in ("transport", "refused")


@mutant("retries a refusal (ok: false) as if it were a transport failure")
def retry_refusal() -> ReferenceDriver:
    return _compressor_driver(_RetryRefusal)


# -- protocol-level wrappers ---------------------------------------------------------------------


class _ChangeLogReversed(_WrapperBase):
    async def bend_dump(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = await self.inner.handle(message)
        if reply.get("ok"):
            reply["result"]["changeLog"].reverse()
        return reply


@mutant("the change log is not in key order")
def change_log_unsorted() -> _WrapperBase:
    return _ChangeLogReversed()


class _StaleTelemetry(_WrapperBase):
    async def bend_telemetry(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = await self.inner.handle(message)
        if reply.get("ok"):
            for event in reply["result"]:
                event.pop("idempotencyKey", None)
        return reply


@mutant("telemetry events lack the idempotency key")
def telemetry_no_key() -> _WrapperBase:
    return _StaleTelemetry()


class _SummaryInTelemetry(StackCompression):
    def events(
        self, request: CompressionRequest, result: CompressionResult, outcome: str
    ) -> list[dict[str, Any]]:
        events = super().events(request, result, outcome)
        if outcome == "published" and result.summary is not None:
            events = [{**e, "detail": "summary: " + result.summary[:200]} for e in events]
        return events


@mutant("telemetry carries the published summary text")
def telemetry_with_summary() -> ReferenceDriver:
    return _with_stack(_SummaryInTelemetry)


class _NotRetryable(_WrapperBase):
    async def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = await self.inner.handle(message)
        error = reply.get("error")
        if isinstance(error, dict) and error.get("code") == "compression_pending":
            error.pop("retryable", None)
        return reply


@mutant("compression_pending is not marked retryable")
def pending_not_retryable() -> _WrapperBase:
    return _NotRetryable()


class _InterveneMarker(_WrapperBase):
    async def bend_intervene(self, message: dict[str, Any]) -> dict[str, Any]:
        args = dict(message.get("args") or {})
        output, revealed = args.get("output"), args.get("revealed")
        if isinstance(output, str) and isinstance(revealed, int) and 0 <= revealed <= len(output):
            args["output"] = output[:revealed] + " [intervened]"
            args["revealed"] = revealed + len(" [intervened]")
        return await self.inner.handle({**message, "args": args})


@mutant("intervene stores the revealed prefix with an '[intervened]' marker")
def intervene_marker() -> _WrapperBase:
    return _InterveneMarker()


class _InterveneFull(_WrapperBase):
    async def bend_intervene(self, message: dict[str, Any]) -> dict[str, Any]:
        args = dict(message.get("args") or {})
        output, revealed = args.get("output"), args.get("revealed")
        if isinstance(output, str) and isinstance(revealed, int) and 0 <= revealed <= len(output):
            args["revealed"] = len(output)
        return await self.inner.handle({**message, "args": args})


@mutant("intervene stores the full output, discarded continuation included")
def intervene_full_output() -> _WrapperBase:
    return _InterveneFull()


class _ResetCompresses(_WrapperBase):
    async def _then_generate(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = await self.inner.handle(message)
        if reply.get("ok"):
            await self.call("generate", {"game": message["args"]["game"]})
        return reply

    bend_reset = _then_generate
    bend_edit_round = _then_generate


@mutant("reset and edit run the compression check (a compress.v2 request) after rebuilding")
def history_compresses() -> _WrapperBase:
    return _ResetCompresses()


# -- INT ----------------------------------------------------------------------------------------


class _ForcedOnlyWhenDue(StackCompression):
    def has_chunks(self) -> bool:
        return self.due()  # the forced compression only runs above the threshold


@mutant("the forced compression of an intervene runs only above the threshold")
def forced_only_above_threshold() -> ReferenceDriver:
    return _with_stack(_ForcedOnlyWhenDue)


class _GameOnlyRetry(ForcedCompression):
    async def before_generation(self, scene_id: str | None) -> CompressionReport | None:
        if scene_id is not None:
            return None
        return await super().before_generation(scene_id)


@mutant("no retry of the owed forced compression before a catalyst generation")
def no_retry_before_scene() -> ReferenceDriver:
    return _engine_driver(type("Engine", (GameEngine,), {"forced_compression": _GameOnlyRetry}))


# -- CAT ----------------------------------------------------------------------------------------


def _with_scene(scene_cls: type[Scene]) -> ReferenceDriver:
    return _engine_driver(type("Engine", (GameEngine,), {"scene": scene_cls}))


class _SwappedOutcome(Scene):
    def outcome_exchange(self, closing_summary: str, meanwhile_event: str) -> tuple[str, str]:
        user, assistant = super().outcome_exchange(closing_summary, meanwhile_event)
        return assistant, user


@mutant("the outcome exchange has user and assistant swapped")
def outcome_swapped() -> ReferenceDriver:
    return _with_scene(_SwappedOutcome)


class _CancelAppends(Scene):
    def on_archive_cancellation(self) -> dict[str, Any]:
        return self.end(self.archive_record("cancelled", None, None), ("", ""))


@mutant("cancelling a scene adds an (empty) exchange to the game stack")
def cancel_adds_chunk() -> ReferenceDriver:
    return _with_scene(_CancelAppends)


class _RepublishAppends(Scene):
    def on_return_archive(self, *repeated_args: str) -> dict[str, Any]:
        record = super().on_return_archive(*repeated_args)
        if repeated_args and record.get("state") == "published":
            closing_summary, meanwhile_event = repeated_args
            user, assistant = self.outcome_exchange(closing_summary, meanwhile_event)
            exchange = {
                "user": user,
                "assistant": assistant,
                "origin": "catalyst",
                "catalyst_id": self.scene_id,
            }
            self.game.append(exchange, label="republish")
        return record


@mutant("republishing a published scene appends its outcome a second time")
def republish_appends() -> ReferenceDriver:
    return _with_scene(_RepublishAppends)


# -- HIST ---------------------------------------------------------------------------------------


def _outcomes_first(
    rounds: Sequence[Round],
    archives: Mapping[str, ArchiveRecord],
    current: StackState,
    **options: Any,
) -> RebuildPlan:
    """The reference plan, then each scene outcome moved before the round it followed."""
    sets, deletes = rebuild_game_stack(rounds, archives, current, **options)
    seqs = sorted(int(k.rsplit(".", 1)[1]) for k in sets if k.startswith(GAME.chunk_prefix))
    chunks = {s: sets[GAME.chunk(s)] for s in seqs}
    archived = sets.get(ARCHIVES)
    moved: dict[str, ArchiveRecord] = dict(archived) if isinstance(archived, Mapping) else {}
    for s in seqs:
        here, before = chunks[s], chunks.get(s - 1)
        assert isinstance(here, Chunk)
        if here.origin == "catalyst" and isinstance(before, Chunk) and before.origin != "catalyst":
            chunks[s] = before.model_copy(update={"seq": s})
            chunks[s - 1] = here.model_copy(update={"seq": s - 1})
            sid = here.catalyst_id
            if sid is not None and sid in moved:
                moved[sid] = moved[sid].model_copy(update={"outcome_seq": s - 1})
    for s in seqs:
        sets[GAME.chunk(s)] = chunks[s]
    if moved:
        sets[ARCHIVES] = moved
    return sets, deletes


@mutant("a rebuild places each scene outcome before its round instead of after")
def rebuild_outcome_first() -> ReferenceDriver:
    engine = type("Engine", (GameEngine,), {"plan_rebuild": staticmethod(_outcomes_first)})
    return _engine_driver(engine)


class _SeededFromBase(_StoreWrapper):
    """A duplicate's store seeded with the source's checkpoint, then the source's changes
    committed on top: the copy's change log is the source's."""

    def __init__(self, inner: Store, source: StoreImage) -> None:
        super().__init__(inner)
        self.source = source

    def seed(self, values: Mapping[str, bytes]) -> None:
        base = self.source.base_bytes()
        self.inner.seed(base)
        sets = {k: json.loads(v) for k, v in values.items() if base.get(k) != v}
        deletes = [k for k in base if k not in values]
        self.inner.commit(Projection.of(sets, deletes, label="copy"))


class _DuplicateChangeLog(GameEngine):
    async def duplicate(
        self, target: Store, game_id: str, *, telemetry: TelemetrySink | None = None
    ) -> GameEngine:
        copy = _SeededFromBase(target, self.store.image)
        return await super().duplicate(copy, game_id, telemetry=telemetry)


@mutant("duplicate copies the change log (the copy's base is the source's checkpoint)")
def duplicate_copies_change_log() -> ReferenceDriver:
    return _engine_driver(_DuplicateChangeLog)


# -- CONC ---------------------------------------------------------------------------------------


class _LockHeld(StackCompression):
    async def call(self, request: CompressionRequest) -> CompressionResult:
        async with self.memory.lock:  # the critical section held across the await
            return await super().call(request)


@mutant("appends are blocked while a compression is in flight (lock held across the await)")
def lock_across_await() -> ReferenceDriver:
    return _with_stack(_LockHeld)


# -- QUOTA ----------------------------------------------------------------------------------------


class _PublicationUnchecked(_StoreWrapper):
    def commit(self, projection: Projection) -> None:
        if projection.label == "publish_summary":
            self.inner.image.apply_unchecked(projection)
        else:
            self.inner.commit(projection)


@mutant("publications skip the quota preflight")
def publication_skips_quota() -> ReferenceDriver:
    return _with_store(_PublicationUnchecked)


class _PreStateQuota(_StoreWrapper):
    def commit(self, projection: Projection) -> None:
        image = self.inner.image
        if image.footprint() > image.quota:
            image.check(projection)  # raises with the numbers
        image.apply_unchecked(projection)


@mutant("the quota is checked on the pre-state instead of the post-state")
def quota_on_pre_state() -> ReferenceDriver:
    return _with_store(_PreStateQuota)
