"""Scripted compress.v2 replies: the one vocabulary, and what each reply means for the caller.

One vocabulary in two forms. The suite scripts the fake with language-neutral descriptors
(they go into traces verbatim); `to_outcome` turns one into the fake's `Outcome`, which the
builders below (`success`, `refuse`, `http_status`, `hold`...) also make directly, with the
hostile extras a descriptor does not name (`oversized`, `delay`). `jfsm.testing`'s
in-process `FakeCompressor` takes the same descriptors (`queue({"reply": "refuse", ...})`).

```
{"reply": "success", "summary": S, "callId": C}      ok reply (callId optional)
{"reply": "refuse", "code": c, "message": m}          refusal (never retried)
{"reply": "empty", "summary": "  "}                   ok reply, blank summary
{"reply": "not_smaller", "extra": k}                  ok reply, input length + k code points
{"reply": "http_status", "status": 503}               transport failures (retried) ...
{"reply": "malformed"} {"reply": "wrong_schema"} {"reply": "reset"}
{"reply": "hold", "then": <descriptor>}               held until released
{"reply": "default"}                                  the fake's own ok reply (a short hash text)
```

`default` is the reply a fake gives when its script is empty; its length is the fake's
choice, so the suite cannot predict its outcome (`attempt_outcome` refuses it). Tests of the
in-process fake script it to hold an ordinary reply: `{"reply": "hold", "then": {"reply":
"default"}}`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jfsm.spec import constants

__all__ = [
    "COMPLETED",
    "REPLY_KINDS",
    "TRANSPORT",
    "Outcome",
    "attempt_outcome",
    "call_id_of",
    "delay",
    "empty",
    "hold",
    "http_status",
    "malformed_json",
    "not_smaller",
    "output_chars",
    "oversized",
    "refuse",
    "reset",
    "settled",
    "success",
    "summary_of",
    "to_outcome",
    "wrong_schema",
]

# Unicode's White_Space property (not Python's wider str.isspace) and the summary envelope.
WHITE_SPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
SUMMARY_ENVELOPE = constants().summary_envelope

TRANSPORT = frozenset(
    {"http_status", "malformed", "wrong_schema", "reset", "oversized", "hang", "drip", "endless"}
)
COMPLETED = frozenset({"success", "refuse", "empty", "not_smaller"})


# -- the fake's outcomes (what `FakeCompress` answers) -------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    """One scripted answer; build it with the functions below, not directly."""

    kind: str
    chars: int | None = None
    summary: str | None = None
    code: str | None = None
    message: str | None = None
    call_id: str | bool = True
    status: int = 200
    body: bytes | None = None
    n_bytes: int = 0
    chunked: bool = False
    seconds: float = 0.0
    then: Outcome | None = None


def success(
    *, chars: int | None = None, summary: str | None = None, call_id: str | None = None
) -> Outcome:
    """An ok reply: `summary` verbatim, or a hash text of `chars` code points, else the default."""
    if chars is not None and summary is not None:
        raise ValueError("give chars or summary, not both")
    if chars is not None and chars < 0:
        raise ValueError("chars must be >= 0")
    return Outcome("success", chars=chars, summary=summary, call_id=call_id or True)


def refuse(
    code: str = "refused", *, message: str | None = None, call_id: str | bool = True
) -> Outcome:
    """A refusal reply `{"ok": false, "error": {"code"}}`; `call_id=False` omits the callId."""
    return Outcome("refuse", code=code, message=message, call_id=call_id)


def empty(summary: str = "") -> Outcome:
    """An ok reply whose summary is empty (or only the white space given)."""
    if summary.strip():
        raise ValueError("an empty summary may hold only white space")
    return Outcome("empty", summary=summary)


def not_smaller(extra: int = 0) -> Outcome:
    """An ok reply whose summary has the input's code point count plus `extra`."""
    return Outcome("not_smaller", chars=extra)


def http_status(status: int = 500, body: bytes | None = None) -> Outcome:
    """A non-200 status; the default body is refusal-shaped, which must not fool the client."""
    if not 201 <= status <= 599:
        raise ValueError("http_status takes a status from 201 to 599")
    if body is None:
        body = b'{"ok":false,"error":{"code":"internal"}}'
    return Outcome("http_status", status=status, body=body)


def malformed_json(body: bytes | None = None) -> Outcome:
    """A 200 whose body is not valid JSON (default: truncated)."""
    return Outcome("malformed_json", body=body or b'{"ok": true, "callId": "c", "summary": "unt')


def wrong_schema(body: Mapping[str, Any] | bytes | None = None) -> Outcome:
    """A 200 with JSON that violates the reply schema (default: a numeric callId)."""
    if body is None:
        body = {"ok": True, "callId": 42, "summary": "x"}
    raw = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
    return Outcome("wrong_schema", body=raw)


def oversized(n_bytes: int, *, chunked: bool = False) -> Outcome:
    """A 200 with an ok-shaped body of `n_bytes`; `chunked` hides the size from the headers."""
    if n_bytes < 64:
        raise ValueError("oversized needs at least 64 bytes")
    return Outcome("oversized", n_bytes=n_bytes, chunked=chunked)


def reset() -> Outcome:
    """Close the connection without any reply (with a TCP reset)."""
    return Outcome("reset")


def delay(seconds: float, then: Outcome | None = None) -> Outcome:
    """Wait `seconds` (meant to exceed the client's timeout), then answer `then` or the default."""
    return Outcome("delay", seconds=seconds, then=then)


def hold(then: Outcome | None = None) -> Outcome:
    """Block the reply until `release()`, then answer `then` or the default."""
    return Outcome("hold", then=then)


def hang(seconds: float) -> Outcome:
    """Accept the request and send nothing for `seconds` (longer than the caller's attempt
    deadline), then drop the connection (JF-CALL-014)."""
    return Outcome("hang", seconds=seconds)


def drip(seconds: float) -> Outcome:
    """Send an ok reply one byte at a time, for at most `seconds`, so that no read ever
    waits long but the reply never completes in time (JF-CALL-014)."""
    return Outcome("drip", seconds=seconds)


def endless(seconds: float) -> Outcome:
    """A 200 whose chunked ok-shaped body trickles without end (a chunk of 512 bytes every
    50 ms, under any size cap for a while), for at most `seconds` (JF-CALL-014)."""
    return Outcome("endless", seconds=seconds)


REPLY_KINDS = frozenset({"success", "refuse", "empty", "not_smaller", "default"})


def to_outcome(d: dict[str, Any]) -> Outcome:
    """The fake's `Outcome` for a descriptor."""
    kind = d["reply"]
    if kind == "success":
        return success(summary=d["summary"], call_id=d.get("callId"))  # else the fake's
    if kind == "refuse":
        return refuse(
            d.get("code", "refused"),
            message=d.get("message"),
            call_id=d.get("callId", False) or False,
        )
    if kind == "empty":
        return empty(d.get("summary", ""))
    if kind == "not_smaller":
        return not_smaller(d.get("extra", 0))
    if kind == "http_status":
        return http_status(d.get("status", 503))
    if kind == "malformed":
        return malformed_json()
    if kind == "wrong_schema":
        return wrong_schema(d.get("body"))
    if kind == "oversized":
        return oversized(d["bytes"], chunked=d.get("chunked", False))
    if kind in ("hang", "drip", "endless"):
        return {"hang": hang, "drip": drip, "endless": endless}[kind](d["seconds"])
    if kind == "reset":
        return reset()
    if kind == "hold":
        return hold(to_outcome(d["then"]))
    if kind == "default":
        return Outcome("default")
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
    """Code points of the summary the caller received, or None when it received none (or
    got the fake's `default` reply, whose length the suite does not know)."""
    d = settled(d)
    if d["reply"] in ("success", "empty"):
        return len(d.get("summary", ""))
    if d["reply"] == "not_smaller":
        return input_chars + d.get("extra", 0)
    return None


def attempt_outcome(d: dict[str, Any], input_chars: int) -> str:
    """The caller's outcome for one attempt answered with `d`, before stale and quota checks:
    `valid`, `refused`, `transport`, `empty` or `not_smaller`.

    Raises `ValueError` for the `default` reply, whose length only the fake knows."""
    d = settled(d)
    kind = d["reply"]
    if kind == "default":
        raise ValueError("the default reply's outcome depends on the fake's summary length")
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
