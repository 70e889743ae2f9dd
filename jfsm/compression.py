"""Judging a compress.v2 result and planning its publication (decisions D5 to D7, D11).

Pure functions: given the stack as it is now and the in-flight request, say which outcome
the result has and, for a valid one, which single projection publishes it. The publication
sets the new summary, deletes exactly the chunks with `seq <= throughSeq` and updates the
meta, so the summary never coexists with every represented chunk, not even in the quota
arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jfsm.compressor import CompressionRequest, CompressionResult
from jfsm.errors import InvalidInput
from jfsm.memory_index import StackState
from jfsm.records import Summary
from jfsm.text import require_text, summary_cost

__all__ = ["WHITE_SPACE", "InFlight", "is_blank", "judge", "plan_publication"]

# The Unicode White_Space property (PropList.txt). Python's `str.isspace` is wider (it also
# counts U+001C..U+001F), so the spec's "empty after trimming white space" is spelled out.
WHITE_SPACE = frozenset(
    "\u0009\u000a\u000b\u000c\u000d\u0020\u0085\u00a0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)


def is_blank(text: str) -> bool:
    """Whether `text` is empty once Unicode White_Space is trimmed."""
    return all(char in WHITE_SPACE for char in text)


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
    meta_epoch = (stack.meta or {}).get("epoch", 0)
    if meta_epoch != flight.request.epoch:
        return True
    current_summary = None if stack.summary is None else stack.summary.text
    if current_summary != flight.summary_text:
        return True
    return not flight.represented.issubset(stack.chunks)


def plan_publication(
    flight: InFlight,
    result: CompressionResult,
    stack: StackState,
    meta_update: dict[str, Any],
) -> tuple[dict[str, Any], set[str]]:
    """Sets and deletes of the one publication projection of a valid result."""
    assert result.summary is not None and result.call_id is not None
    summary = Summary(
        text=result.summary,
        through_seq=flight.request.through_seq,
        compression_call_id=result.call_id,
        kind=flight.request.kind,
    )
    sets: dict[str, Any] = {stack.keys.summary: summary.to_json()}
    meta = dict(stack.meta or {})
    meta.update(meta_update)
    sets[stack.keys.meta] = meta
    deletes = {stack.keys.chunk(seq) for seq in stack.chunks if seq <= flight.request.through_seq}
    return sets, deletes
