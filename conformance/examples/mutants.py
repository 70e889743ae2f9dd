"""Mutants of the reference engine, for `tests/conformance/test_mutants.py`.

Each factory below is a `python:` driver whose engine differs from the reference in ONE
plausible way; the suite must fail every one of them with a fitting requirement ID:

```
jfsm conformance --driver python:conformance.examples.mutants:threshold_inclusive
```

The mutation is always per instance (a `ReferenceDriver` subclass whose `_engine` builds a
`GameEngine` subclass, a compressor subclass handed to the driver, or a protocol-level
wrapper that rewrites messages or replies); the reference modules are never patched.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from jfsm.compression import InFlight, judge
from jfsm.compressor import CompressionRequest, CompressionResult
from jfsm.driver import ReferenceDriver
from jfsm.engine import GameEngine, _Started
from jfsm.errors import QuotaExceeded
from jfsm.history import rebuild_game_stack
from jfsm.layout import ARCHIVES, GAME
from jfsm.machines import StateMachine
from jfsm.memory_index import StackState
from jfsm.projection import Projection
from jfsm.records import ArchiveRecord, Chunk, Summary
from jfsm.stores.base import Store
from jfsm.telemetry import TelemetrySink
from jfsm.transport import HttpCompressor

__all__ = ["MUTANTS"]

MUTANTS: dict[str, str] = {}  # factory name -> the one thing it does wrong


def _engine_driver(engine_cls: type[GameEngine]) -> ReferenceDriver:
    return ReferenceDriver(engine_class=engine_cls)


def _compressor_driver(compressor_cls: type[HttpCompressor]) -> ReferenceDriver:
    return ReferenceDriver(compressor_factory=compressor_cls)


class _Mutant(GameEngine):
    """Keeps duplicates mutant too (the reference builds a plain `GameEngine`)."""

    async def duplicate(
        self, target: Store, game_id: str, *, telemetry: TelemetrySink | None = None
    ) -> GameEngine:
        async with self._lock:
            target.seed(self.store.image.values_bytes())
        return type(self)(
            target,
            self.compressor,
            game_id=game_id,
            participants=self._participants,
            telemetry=telemetry,
            thresholds=self.thresholds,
        )


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


class _ThresholdInclusive(_Mutant):
    def _stack_machine(self, scene_id: str | None) -> StateMachine:
        threshold = self.thresholds["game" if scene_id is None else "catalyst"]

        def stack() -> StackState:
            from jfsm.layout import scene_keys

            found = self.index.stack(scene_id)
            return found if found is not None else StackState(scene_keys(scene_id or "x"))

        return StateMachine(
            "stack_compression",
            {
                "due": lambda: stack().length >= threshold and bool(stack().chunks),
                "has_chunks": lambda: bool(stack().chunks),
            },
        )


@mutant("compresses at length >= threshold instead of >")
def threshold_inclusive() -> ReferenceDriver:
    return _engine_driver(_ThresholdInclusive)


class _SummaryOnlyDue(_Mutant):
    def _stack_machine(self, scene_id: str | None) -> StateMachine:
        threshold = self.thresholds["game" if scene_id is None else "catalyst"]

        def stack() -> StackState:
            from jfsm.layout import scene_keys

            found = self.index.stack(scene_id)
            return found if found is not None else StackState(scene_keys(scene_id or "x"))

        def due() -> bool:
            s = stack()
            return s.length > threshold and (bool(s.chunks) or s.summary is not None)

        return StateMachine(
            "stack_compression",
            {"due": due, "has_chunks": lambda: bool(stack().chunks) or stack().summary is not None},
        )

    def _start(self, scene_id: str | None, event: str) -> _Started | Any:
        stack = self.index.stack(scene_id)
        if stack is None or stack.chunks or stack.summary is None:
            return super()._start(scene_id, event)
        machine = self._stacks[scene_id]
        row = machine.fire(event)
        if row.effect != "build_request":
            return super()._start(scene_id, event)
        text = stack.text()
        epoch = (stack.meta or {}).get("epoch", 0)
        request = CompressionRequest(
            kind=self.kinds["game" if scene_id is None else "catalyst"],
            game_id=self.game_id,
            catalyst_id=scene_id,
            text=text,
            chars=len(text),
            through_seq=stack.summary.through_seq,
            epoch=epoch,
        )
        flight = InFlight(
            request=request,
            represented=frozenset(),
            summary_text=stack.summary.text,
            forced=event == "force",
        )
        return _Started(flight, machine)


@mutant("ignores the 'at least one exact chunk' rule: a long summary alone is compressed")
def summary_only_due() -> ReferenceDriver:
    return _engine_driver(_SummaryOnlyDue)


# -- COMP: publication --------------------------------------------------------------------------


def _publish_with(
    plan: Callable[[InFlight, CompressionResult, StackState, dict[str, Any]], Any],
) -> type[GameEngine]:
    class Engine(_Mutant):
        def _publish(
            self,
            scene_id: str | None,
            flight: InFlight,
            result: CompressionResult,
            stack: StackState,
            machine: StateMachine,
        ) -> str:
            machine.fire("reply_valid")
            meta_update: dict[str, Any] = {}
            if scene_id is None:
                suffix = [c for s, c in stack.chunks.items() if s > flight.request.through_seq]
                meta_update["forcedCompression"] = any(c.origin == "intervene" for c in suffix)
            sets, deletes = plan(flight, result, stack, meta_update)
            try:
                self._commit(Projection.of(sets, deletes, label="publish_summary"))
            except QuotaExceeded:
                machine.fire("commit_refused")
                return "quota"
            machine.fire("commit")
            return "published"

    return Engine


def _plan(
    flight: InFlight,
    result: CompressionResult,
    stack: StackState,
    meta_update: dict[str, Any],
    *,
    text: Callable[[str], str] = lambda s: s,
    call_id: Callable[[InFlight, CompressionResult], str] = lambda f, r: str(r.call_id),
    deleted: Callable[[int, int], bool] = lambda seq, through: seq <= through,
) -> tuple[dict[str, Any], set[str]]:
    assert result.summary is not None
    summary = Summary(
        text=text(result.summary),
        through_seq=flight.request.through_seq,
        compression_call_id=call_id(flight, result),
        kind=flight.request.kind,
    )
    sets: dict[str, Any] = {stack.keys.summary: summary.to_json()}
    meta = dict(stack.meta or {})
    meta.update(meta_update)
    sets[stack.keys.meta] = meta
    deletes = {
        stack.keys.chunk(seq) for seq in stack.chunks if deleted(seq, flight.request.through_seq)
    }
    return sets, deletes


@mutant("publishes the summary but keeps the represented chunks")
def keep_represented() -> ReferenceDriver:
    return _engine_driver(_publish_with(lambda *a: _plan(*a, deleted=lambda s, t: False)))


@mutant("publication deletes seq < throughSeq (one chunk too few)")
def delete_too_few() -> ReferenceDriver:
    return _engine_driver(_publish_with(lambda *a: _plan(*a, deleted=lambda s, t: s < t)))


@mutant("publication deletes seq <= throughSeq + 1 (one chunk too many)")
def delete_too_many() -> ReferenceDriver:
    return _engine_driver(_publish_with(lambda *a: _plan(*a, deleted=lambda s, t: s <= t + 1)))


@mutant("stores the published summary trimmed of white space")
def summary_trimmed() -> ReferenceDriver:
    return _engine_driver(_publish_with(lambda *a: _plan(*a, text=str.strip)))


@mutant("records the request's idempotency key as compressionCallId")
def call_id_is_idempotency_key() -> ReferenceDriver:
    return _engine_driver(
        _publish_with(lambda *a: _plan(*a, call_id=lambda f, r: f.request.idempotency_key))
    )


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


class _StaleIgnored(_Mutant):
    def _settle(self, scene_id: str | None, started: _Started, result: CompressionResult) -> Any:
        stack = self.index.stack(scene_id)
        if stack is not None and started.machine.current != "closed":
            flight = started.flight
            if judge(flight, result, stack) == "stale":
                # forget what the request represented: the old reply publishes over the
                # rebuilt stack
                request = dataclasses.replace(
                    flight.request, epoch=(stack.meta or {}).get("epoch", 0)
                )
                flight = dataclasses.replace(
                    flight,
                    request=request,
                    represented=frozenset(),
                    summary_text=None if stack.summary is None else stack.summary.text,
                )
                started = _Started(flight, started.machine)
        return super()._settle(scene_id, started, result)


@mutant("publishes a stale reply after a reset or edit (only a closed scene is stale)")
def stale_published() -> ReferenceDriver:
    return _engine_driver(_StaleIgnored)


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


class _SummaryInTelemetry(_Mutant):
    def _emit(self, event: dict[str, Any]) -> None:
        summary = self.index.game.summary
        if event.get("outcome") == "published" and summary is not None:
            event = {**event, "detail": "summary: " + summary.text[:200]}
        super()._emit(event)


@mutant("telemetry carries the published summary text")
def telemetry_with_summary() -> ReferenceDriver:
    return _engine_driver(_SummaryInTelemetry)


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


class _NoForced(_Mutant):
    def _start(self, scene_id: str | None, event: str) -> Any:
        if event == "force":
            event = "check"  # the forced compression only runs above the threshold
        return super()._start(scene_id, event)


@mutant("the forced compression of an intervene runs only above the threshold")
def forced_only_above_threshold() -> ReferenceDriver:
    return _engine_driver(_NoForced)


class _NoRetryBeforeScene(_Mutant):
    async def before_generation(self, scene_id: str | None = None) -> Any:
        if scene_id is None:
            return await super().before_generation(None)
        settle = self._settle_forced

        async def nothing() -> None:
            return None

        self._settle_forced = nothing  # type: ignore[method-assign]
        try:
            return await super().before_generation(scene_id)
        finally:
            self._settle_forced = settle  # type: ignore[method-assign]


@mutant("no retry of the owed forced compression before a catalyst generation")
def no_retry_before_scene() -> ReferenceDriver:
    return _engine_driver(_NoRetryBeforeScene)


# -- CAT ----------------------------------------------------------------------------------------


def _end_scene_with(swap: bool = False, cancel_chunk: bool = False) -> type[GameEngine]:
    class Engine(_Mutant):
        def _end_scene(
            self, sid: str, closing_summary: str | None, meanwhile_event: str | None
        ) -> dict[str, Any]:
            from jfsm.layout import scene_keys

            stack = self.index.scenes.get(sid) or StackState(scene_keys(sid))
            order = 1 + max((r.order for r in self.index.archives.values()), default=0)
            record = ArchiveRecord(
                state="cancelled" if closing_summary is None else "published",
                after_round=self._last_round(),
                closing_summary=closing_summary,
                meanwhile_event=meanwhile_event,
                order=order,
            )
            archives = self.index.archives_json()
            with self._stacks[sid].attempt("close"):
                if closing_summary is None and not cancel_chunk:
                    archives[sid] = record.to_json()
                    self._commit(
                        Projection.of({ARCHIVES: archives}, stack.all_keys(), label="cancel")
                    )
                else:
                    seq = self.index.game.stack_meta().next_seq
                    if closing_summary is not None:
                        record = record.model_copy(update={"outcome_seq": seq})
                    archives[sid] = record.to_json()
                    user, assistant = meanwhile_event or "", closing_summary or ""
                    if swap:
                        user, assistant = assistant, user
                    self._append_game(
                        {ARCHIVES: archives},
                        Chunk(
                            seq=seq,
                            user=user,
                            assistant=assistant,
                            origin="catalyst",
                            catalyst_id=sid,
                        ),
                        label="publish_scene",
                        deletes=stack.all_keys(),
                    )
            return record.to_json()

    return Engine


@mutant("the outcome exchange has user and assistant swapped")
def outcome_swapped() -> ReferenceDriver:
    return _engine_driver(_end_scene_with(swap=True))


@mutant("cancelling a scene adds an (empty) exchange to the game stack")
def cancel_adds_chunk() -> ReferenceDriver:
    return _engine_driver(_end_scene_with(cancel_chunk=True))


class _RepublishAppends(_Mutant):
    async def publish_scene(
        self, scene_id: str, closing_summary: str, meanwhile_event: str
    ) -> dict[str, Any]:
        again = isinstance(scene_id, str) and scene_id in self.index.archives
        record = await super().publish_scene(scene_id, closing_summary, meanwhile_event)
        if again and record.get("state") == "published":
            async with self._lock:
                self._append_game(
                    {},
                    Chunk(
                        seq=1,
                        user=meanwhile_event,
                        assistant=closing_summary,
                        origin="catalyst",
                        catalyst_id=scene_id,
                    ),
                    label="republish",
                )
        return record


@mutant("republishing a published scene appends its outcome a second time")
def republish_appends() -> ReferenceDriver:
    return _engine_driver(_RepublishAppends)


# -- HIST ---------------------------------------------------------------------------------------


def _rebuild_with(
    post: Callable[[dict[str, Any]], None],
) -> type[GameEngine]:
    class Engine(_Mutant):
        def _rebuild(
            self,
            rounds: Any,
            archives: Mapping[str, ArchiveRecord],
            *,
            extra_sets: Mapping[str, Any],
            extra_deletes: Iterable[str],
            label: str,
            seeded: bool = False,
        ) -> None:
            sets, deletes = rebuild_game_stack(
                rounds,
                archives,
                self.index.game,
                archives_present=bool(self.index.archives),
                seeded=seeded,
            )
            post(sets)
            sets.update(extra_sets)
            deletes.update(extra_deletes)
            deletes.difference_update(sets)
            self._survivor_intervened = any(r.intervened for r in rounds)
            with self._intervene.attempt("rebuild"), self._stacks[None].attempt("rebuild"):
                self._commit(Projection.of(sets, deletes, label=label))
            for sid in [
                s for s, m in self._scenes.items() if m.table.terminal.issuperset([m.current])
            ]:
                if sid not in self.index.archives:
                    del self._scenes[sid]
                    self._stacks.pop(sid, None)

    return Engine


def _outcomes_first(sets: dict[str, Any]) -> None:
    """Each scene outcome is placed before the round it followed."""
    seqs = sorted(int(k.rsplit(".", 1)[1]) for k in sets if k.startswith(GAME.chunk(0)[:-1]))
    chunks = {s: sets[GAME.chunk(s)] for s in seqs}
    archives = sets.get(ARCHIVES, {})
    for s in seqs:
        before = s - 1
        if (
            chunks[s].get("origin") == "catalyst"
            and before in chunks
            and chunks[before].get("origin") != "catalyst"
        ):
            chunks[s], chunks[before] = chunks[before], chunks[s]
            chunks[s] = {**chunks[s], "seq": s}
            chunks[before] = {**chunks[before], "seq": before}
            sid = chunks[before].get("catalystId")
            if sid in archives:
                archives[sid] = {**archives[sid], "outcomeSeq": before}
    for s in seqs:
        sets[GAME.chunk(s)] = chunks[s]


@mutant("a rebuild places each scene outcome before its round instead of after")
def rebuild_outcome_first() -> ReferenceDriver:
    return _engine_driver(_rebuild_with(_outcomes_first))


class _DuplicateChangeLog(_Mutant):
    async def duplicate(
        self, target: Store, game_id: str, *, telemetry: TelemetrySink | None = None
    ) -> GameEngine:
        async with self._lock:
            target.seed(self.store.image.base_bytes())
            image = self.store.image
            sets = {k: image.get(k) for k in image.values_bytes()}
            deletes = [k for k in image.base_bytes() if k not in sets]
            target.commit(Projection.of(sets, deletes, label="copy"))
        return type(self)(
            target,
            self.compressor,
            game_id=game_id,
            participants=self._participants,
            telemetry=telemetry,
            thresholds=self.thresholds,
        )


@mutant("duplicate copies the change log (the copy's base is the source's checkpoint)")
def duplicate_copies_change_log() -> ReferenceDriver:
    return _engine_driver(_DuplicateChangeLog)


# -- CONC ---------------------------------------------------------------------------------------


class _LockHeld(_Mutant):
    async def _finish_started(self, scene_id: str | None, started: Any) -> Any:
        if isinstance(started, _Started):
            async with self._lock:  # the critical section held across the await
                result = await self.compressor.compress(started.flight.request, self.participants)
            async with self._lock:
                return self._settle(scene_id, started, result)
        return await super()._finish_started(scene_id, started)


@mutant("appends are blocked while a compression is in flight (lock held across the await)")
def lock_across_await() -> ReferenceDriver:
    return _engine_driver(_LockHeld)


# -- QUOTA ----------------------------------------------------------------------------------------


class _PublicationUnchecked(_Mutant):
    def _commit(self, projection: Projection) -> None:
        if projection.label == "publish_summary":
            self.store.image.apply_unchecked(projection)
            image = self.store.image
            for key in projection.touched():
                self.index.observe(key, image.raw(key))
            return
        super()._commit(projection)


@mutant("publications skip the quota preflight")
def publication_skips_quota() -> ReferenceDriver:
    return _engine_driver(_PublicationUnchecked)


class _PreStateQuota(_Mutant):
    def _commit(self, projection: Projection) -> None:
        image = self.store.image
        if image.footprint() > image.quota:
            image.check(projection)  # raises with the numbers
        image.apply_unchecked(projection)
        for key in projection.touched():
            self.index.observe(key, image.raw(key))


@mutant("the quota is checked on the pre-state instead of the post-state")
def quota_on_pre_state() -> ReferenceDriver:
    return _engine_driver(_PreStateQuota)
