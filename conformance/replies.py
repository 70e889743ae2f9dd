"""Scripted compress.v2 replies as plain data, and what each one means for the caller.

The suite scripts the fake with language-neutral descriptors (they go into traces verbatim):

```
{"reply": "success", "summary": S, "callId": C}      ok reply
{"reply": "refuse", "code": c, "message": m}          refusal (never retried)
{"reply": "empty", "summary": "  "}                   ok reply, blank summary
{"reply": "not_smaller", "extra": k}                  ok reply, input length + k code points
{"reply": "http_status", "status": 503}               transport failures (retried) ...
{"reply": "malformed"} {"reply": "wrong_schema"} {"reply": "reset"}
{"reply": "hold", "then": <descriptor>}               held until released
```
"""

from __future__ import annotations

from typing import Any

from conformance import fake_compress as fc
from jfsm.spec import constants

__all__ = ["COMPLETED", "TRANSPORT", "attempt_outcome", "summary_of", "to_outcome"]

# Unicode's White_Space property (not Python's wider str.isspace) and the summary envelope.
WHITE_SPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
SUMMARY_ENVELOPE = constants().summary_envelope

TRANSPORT = frozenset({"http_status", "malformed", "wrong_schema", "reset"})
COMPLETED = frozenset({"success", "refuse", "empty", "not_smaller"})


def to_outcome(d: dict[str, Any]) -> fc.Outcome:
    """The fake's `Outcome` for a descriptor."""
    kind = d["reply"]
    if kind == "success":
        return fc.success(summary=d["summary"], call_id=d["callId"])
    if kind == "refuse":
        return fc.refuse(
            d.get("code", "refused"),
            message=d.get("message"),
            call_id=d.get("callId", False) or False,
        )
    if kind == "empty":
        return fc.empty(d.get("summary", ""))
    if kind == "not_smaller":
        return fc.not_smaller(d.get("extra", 0))
    if kind == "http_status":
        return fc.http_status(d.get("status", 503))
    if kind == "malformed":
        return fc.malformed_json()
    if kind == "wrong_schema":
        return fc.wrong_schema()
    if kind == "reset":
        return fc.reset()
    if kind == "hold":
        return fc.hold(to_outcome(d["then"]))
    raise ValueError(f"unknown reply descriptor {d!r}")


def settled(d: dict[str, Any]) -> dict[str, Any]:
    """The reply a held descriptor finally gives."""
    return settled(d["then"]) if d["reply"] == "hold" else d


def summary_of(d: dict[str, Any], input_chars: int) -> str | None:
    """Length-only stand-in: the summary text when the suite knows it, else None."""
    d = settled(d)
    if d["reply"] in ("success", "empty"):
        return d.get("summary", "")
    return None


def output_chars(d: dict[str, Any], input_chars: int) -> int | None:
    """Code points of the summary the caller received, or None when it received none."""
    d = settled(d)
    if d["reply"] in ("success", "empty"):
        return len(d.get("summary", ""))
    if d["reply"] == "not_smaller":
        return input_chars + d.get("extra", 0)
    return None


def attempt_outcome(d: dict[str, Any], input_chars: int) -> str:
    """The caller's outcome for one attempt answered with `d`, before stale and quota checks:
    `valid`, `refused`, `transport`, `empty` or `not_smaller`."""
    d = settled(d)
    kind = d["reply"]
    if kind in TRANSPORT:
        return "transport"
    if kind == "refuse":
        return "refused"
    if kind == "not_smaller":
        return "not_smaller"
    summary = d.get("summary", "")
    if all(char in WHITE_SPACE for char in summary):
        return "empty"
    if SUMMARY_ENVELOPE + len(summary) >= input_chars:
        return "not_smaller"  # the summary block would not shorten the stack
    return "valid"


def call_id_of(d: dict[str, Any]) -> str | None:
    """The callId the reply carried, if the suite scripted one."""
    d = settled(d)
    if d["reply"] in ("success", "refuse"):
        return d.get("callId") or None
    return None
