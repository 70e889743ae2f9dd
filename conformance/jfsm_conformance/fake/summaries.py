"""What the fake compress.v2 replies with: made-up summaries that never quote the input.

A summary is hex text derived from the input by SHA-256, about an eighth of its code points
by default; the callId is derived from the idempotency key unless the script names one.
"""

from __future__ import annotations

import hashlib
from typing import Any

from jfsm_conformance.model.replies import Outcome

__all__ = ["hash_text", "oversized_body", "reply_doc"]


def hash_text(seed: str, n: int) -> str:
    """`n` hex code points derived from `seed` (never quotes the seed)."""
    out: list[str] = []
    block = hashlib.sha256(("summary:" + seed).encode("utf-8")).hexdigest()
    while sum(map(len, out)) < n:
        out.append(block)
        block = hashlib.sha256(block.encode("ascii")).hexdigest()
    return "".join(out)[:n]


def reply_doc(
    outcome: Outcome | None, key: str, doc: dict[str, Any], summary_cap: int
) -> dict[str, Any]:
    """The reply document for a valid request `doc` under idempotency `key`: the scripted
    reply `outcome` (ok or refusal), or the default ok reply when it is None."""
    text: str = doc["input"]["text"]
    call_id = "fake-" + hashlib.sha256(("call:" + key).encode("utf-8")).hexdigest()[:24]
    if outcome is not None and isinstance(outcome.call_id, str):
        call_id = outcome.call_id
    if outcome is None or outcome.kind == "default":
        n = max(1, min(summary_cap, len(text) // 8))
        return {"ok": True, "callId": call_id, "summary": hash_text(text, n)}
    if outcome.kind == "refuse":
        error: dict[str, Any] = {"code": outcome.code}
        if outcome.message is not None:
            error["message"] = outcome.message
        reply: dict[str, Any] = {"ok": False, "error": error}
        if outcome.call_id is not False:
            reply["callId"] = call_id
        return reply
    if outcome.kind == "empty":
        summary = outcome.summary or ""
    elif outcome.kind == "not_smaller":
        summary = hash_text(text, len(text) + (outcome.chars or 0))
    elif outcome.summary is not None:
        summary = outcome.summary
    elif outcome.chars is not None:
        summary = hash_text(text, outcome.chars)
    else:
        summary = hash_text(text, max(1, min(summary_cap, len(text) // 8)))
    return {"ok": True, "callId": call_id, "summary": summary}


def oversized_body(n_bytes: int) -> bytes:
    """A syntactically valid ok reply of exactly `n_bytes` bytes."""
    head, tail = b'{"ok":true,"callId":"fake-oversized","summary":"', b'"}'
    return head + b"x" * (n_bytes - len(head) - len(tail)) + tail
