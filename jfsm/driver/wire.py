"""Driver protocol messages on the wire: bytes to a message, a reply to bytes.

Shared by the stdio and the HTTP transport. `decode` never raises: what cannot be read as
a protocol message (not UTF-8, not JSON, `NaN`, nested past the limit, over the size limit)
becomes a `Refusal`, which the transport answers with `refusal_reply` (id null,
`invalid_input`, JF-ERR-008). `encode` always produces valid JSON, even for a reply that
holds a lone surrogate.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from jfsm.spec import constants

__all__ = ["Refusal", "decode", "encode", "error_reply", "refusal_reply"]


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why some bytes are not a protocol message."""

    message: str


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode(data: bytes | bytearray) -> Any:
    """The parsed message, or a `Refusal` (never raises)."""
    limit = constants().message_max_bytes
    if len(data) > limit:
        return Refusal(f"message of {len(data)} bytes exceeds the limit of {limit} bytes")
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        return Refusal(f"not UTF-8: {exc}")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        depth = constants().message_max_depth
        return Refusal(f"message nests deeper than {depth} arrays and objects")
    except ValueError as exc:
        return Refusal(f"not JSON: {exc}")


def error_reply(msg_id: int | None, code: str, message: str) -> dict[str, Any]:
    """An error reply envelope."""
    return {"id": msg_id, "ok": False, "error": {"code": code, "message": message}}


def refusal_reply(refusal: Refusal) -> dict[str, Any]:
    """The reply to bytes that are not a message: id null, `invalid_input`."""
    return error_reply(None, "invalid_input", refusal.message + "; nothing was done")


def encode(reply: dict[str, Any]) -> bytes:
    """A reply as UTF-8 JSON (lone surrogates escaped, so the bytes are always valid)."""
    try:
        return json.dumps(reply, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(reply, ensure_ascii=True, allow_nan=False).encode("ascii")
    except (ValueError, TypeError, RecursionError) as exc:  # a driver bug: still answer
        fallback = error_reply(
            reply.get("id") if isinstance(reply.get("id"), int) else None,
            "internal_error",
            f"reply not encodable: {type(exc).__name__}",
        )
        return json.dumps(fallback).encode("ascii")
