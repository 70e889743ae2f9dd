"""Mutants that bend the driver's messages or replies (a protocol-level wrapper), and
telemetry."""

from __future__ import annotations

from typing import Any

from jfsm.compressor import CompressionRequest, CompressionResult
from jfsm.driver import ReferenceDriver
from jfsm.stack_compression import StackCompression
from jfsm_conformance.examples.broken import BrokenDriver
from jfsm_conformance.examples.mutants.seams import _with_stack, mutant

# -- protocol-level wrappers ---------------------------------------------------------------------


__all__ = [
    "change_log_unsorted",
    "generate_hides_forced",
    "history_compresses",
    "intervene_full_output",
    "intervene_marker",
    "pending_not_retryable",
    "telemetry_no_key",
    "telemetry_with_summary",
]


class _ChangeLogReversed(BrokenDriver):
    async def bend_dump(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = await self.inner.handle(message)
        if reply.get("ok"):
            reply["result"]["changeLog"].reverse()
        return reply


@mutant("the change log is not in key order")
def change_log_unsorted() -> BrokenDriver:
    return _ChangeLogReversed()


class _StaleTelemetry(BrokenDriver):
    async def bend_telemetry(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = await self.inner.handle(message)
        if reply.get("ok"):
            for event in reply["result"]:
                event.pop("idempotencyKey", None)
        return reply


@mutant("telemetry events lack the idempotency key")
def telemetry_no_key() -> BrokenDriver:
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


class _NotRetryable(BrokenDriver):
    async def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = await self.inner.handle(message)
        error = reply.get("error")
        if isinstance(error, dict) and error.get("code") == "compression_pending":
            error.pop("retryable", None)
        return reply


@mutant("compression_pending is not marked retryable")
def pending_not_retryable() -> BrokenDriver:
    return _NotRetryable()


class _HidesForced(BrokenDriver):
    async def bend_generate(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = await self.inner.handle(message)
        if reply.get("ok"):
            reply["result"].pop("forced", None)
        return reply


@mutant("a generation's report leaves out the forced compression it settled first")
def generate_hides_forced() -> BrokenDriver:
    return _HidesForced()


class _InterveneMarker(BrokenDriver):
    async def bend_intervene(self, message: dict[str, Any]) -> dict[str, Any]:
        args = dict(message.get("args") or {})
        output, revealed = args.get("output"), args.get("revealed")
        if isinstance(output, str) and isinstance(revealed, int) and 0 <= revealed <= len(output):
            args["output"] = output[:revealed] + " [intervened]"
            args["revealed"] = revealed + len(" [intervened]")
        return await self.inner.handle({**message, "args": args})


@mutant("intervene stores the revealed prefix with an '[intervened]' marker")
def intervene_marker() -> BrokenDriver:
    return _InterveneMarker()


class _InterveneFull(BrokenDriver):
    async def bend_intervene(self, message: dict[str, Any]) -> dict[str, Any]:
        args = dict(message.get("args") or {})
        output, revealed = args.get("output"), args.get("revealed")
        if isinstance(output, str) and isinstance(revealed, int) and 0 <= revealed <= len(output):
            args["revealed"] = len(output)
        return await self.inner.handle({**message, "args": args})


@mutant("intervene stores the full output, discarded continuation included")
def intervene_full_output() -> BrokenDriver:
    return _InterveneFull()


class _ResetCompresses(BrokenDriver):
    async def _then_generate(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = await self.inner.handle(message)
        if reply.get("ok"):
            await self.call("generate", {"game": message["args"]["game"]})
        return reply

    bend_reset = _then_generate
    bend_edit_round = _then_generate


@mutant("reset and edit run the compression check (a compress.v2 request) after rebuilding")
def history_compresses() -> BrokenDriver:
    return _ResetCompresses()
