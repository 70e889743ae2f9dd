"""Mutants of compression: when it triggers, what it publishes, what it submits."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

from jfsm.compressor import CompressionRequest, CompressionResult
from jfsm.driver import ReferenceDriver
from jfsm.memory_index import StackState
from jfsm.projection import Projection
from jfsm.records import Record
from jfsm.stack_compression import InFlight, Sets, StackCompression
from jfsm.transport import HttpCompressor
from jfsm_conformance.examples.broken import BrokenDriver
from jfsm_conformance.examples.mutants.seams import (
    _compressor_driver,
    _durable_stack,
    _with_stack,
    mutant,
)

# -- COMP: trigger ------------------------------------------------------------------------------


__all__ = [
    "beneficiaries_unsorted",
    "bots_pay",
    "call_id_is_idempotency_key",
    "chars_in_utf8",
    "delete_too_few",
    "delete_too_many",
    "keep_represented",
    "model_in_body",
    "no_call_id",
    "publication_in_two_commits",
    "refusal_published",
    "retry_refusal",
    "stale_published",
    "submit_without_summary",
    "summary_only_due",
    "summary_trimmed",
    "threshold_inclusive",
]


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
    async def on_publish(self, sets: Sets, deletes: set[str]) -> None:
        # the quota is judged on the whole publication's post-state, as it must be; only
        # the writing is split: the represented chunks go, then the summary comes
        records = {key: value.jcs() for key, value in sets.items() if isinstance(value, Record)}
        self.memory.store.image.check(Projection.encoded(records, deletes, label="publish"))
        await self.memory.commit({}, deletes, label="publish_summary")
        await self.memory.commit(sets, (), label="publish_summary")


@mutant("publishes a summary in two commits: the represented chunks go first (durable)")
def publication_in_two_commits() -> ReferenceDriver:
    return _durable_stack(_TwoCommits)


@mutant("stores the published summary trimmed of white space")
def summary_trimmed() -> ReferenceDriver:
    return _replanned(summary=lambda flight, result: str(result.summary).strip())


@mutant("records the request's idempotency key as compressionCallId")
def call_id_is_idempotency_key() -> ReferenceDriver:
    return _replanned(call_id=lambda flight, result: flight.request.idempotency_key)


class _NoCallIdDump(BrokenDriver):
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
def no_call_id() -> BrokenDriver:
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


class _RefusalPublished(StackCompression):
    async def call(self, request: CompressionRequest) -> CompressionResult:
        result = await super().call(request)
        if result.outcome != "refused":
            return result
        text = f"Error generating summary: {result.error_code}"
        return dataclasses.replace(
            result, outcome="ok", summary=text, call_id=result.call_id or "refused"
        )


@mutant("a refused compression publishes the refusal's text as the summary")
def refusal_published() -> ReferenceDriver:
    return _with_stack(_RefusalPublished)


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


def _bent_body(
    request: CompressionRequest, participants: Any, bend: Callable[[dict[str, Any]], None]
) -> bytes:
    """The reference request body, decoded, changed in place by `bend`, encoded again."""
    body = json.loads(HttpCompressor._encode(request, participants))
    bend(body)
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class _ModelField(HttpCompressor):
    @staticmethod
    def _encode(request: CompressionRequest, participants: Any) -> bytes:
        return _bent_body(request, participants, lambda body: body.update(model="gpt-large"))


@mutant("adds a model field to the compress.v2 body")
def model_in_body() -> ReferenceDriver:
    return _compressor_driver(_ModelField)


class _UnsortedBeneficiaries(HttpCompressor):
    @staticmethod
    def _encode(request: CompressionRequest, participants: Any) -> bytes:
        def reverse(body: dict[str, Any]) -> None:
            body["beneficiaries"].reverse()

        return _bent_body(request, participants, reverse)


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
