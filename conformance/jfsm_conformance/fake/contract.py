"""The request contract the fake compress.v2 checks, as pure functions of one request.

Each check returns the first problem as `(status, reason, detail)`, or None: the envelope
(path, method, `Content-Length`, `Content-Type`, one `Idempotency-Key`, strict UTF-8 JSON with
no duplicate keys, NaN or lone surrogates), then the body (the request schema of
`spec/compress-v2.json`, `input.chars`), then the beneficiaries. Nothing here keeps state; the
fake records what these find. From `jfsm` only the spec reader is imported.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator

from jfsm.spec import locate_spec_dir as spec_dir  # the one spec reader (no engine code)
from jfsm_conformance.fake.exchange import MAX_REQUEST_BYTES, PATH, FakeRequest

__all__ = [
    "Problem",
    "beneficiaries_problem",
    "body_problem",
    "envelope_problem",
    "logical_digest",
    "validator",
]

Problem = tuple[int, str, str]
"""A contract problem: the HTTP status answered, the reason recorded, a detail."""


@cache
def validator(name: str) -> Draft202012Validator:
    """The validator of `spec/schemas/<name>`; raises if the schema is missing or invalid."""
    path = spec_dir() / "schemas" / name
    schema = json.loads(path.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _strings_are_scalar(doc: Any) -> bool:
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return False
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def _parse_strict(raw: bytes) -> Any:
    doc = json.loads(
        raw.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_reject_constant
    )
    if not _strings_are_scalar(doc):
        raise ValueError("lone surrogate in a string")
    return doc


def envelope_problem(h: FakeRequest) -> Problem | None:
    """The first problem of the request's method, path, headers and JSON; on success the
    parsed body is left in `h.parsed`."""
    length = h.header("Content-Length")
    size = int(length) if length is not None and length.isdigit() else None
    raw = h.body if h.body is not None else b""
    if h.path != PATH:
        return 404, "path", f"{h.method} {h.path}"
    if h.method != "POST":
        return 405, "method", h.method
    if size is None:
        return 411, "content_length", "missing or invalid Content-Length"
    if size > MAX_REQUEST_BYTES:
        return 413, "too_large", f"{size} bytes"
    media = (h.header("Content-Type") or "").split(";")[0].strip().lower()
    if media != "application/json":
        return 415, "content_type", media or "missing"
    keys = h.header_all("Idempotency-Key")
    if len(keys) != 1 or not keys[0].strip():
        return 400, "idempotency_key", f"{len(keys)} Idempotency-Key headers"
    try:
        h.parsed = _parse_strict(raw)
    except (ValueError, RecursionError) as exc:
        return 400, "json", type(exc).__name__
    return None


def body_problem(doc: Any) -> Problem | None:
    """The first problem of a parsed body: the request schema, then `input.chars`."""
    errors = sorted(
        f"{e.json_path}: {e.validator}"
        for e in validator("compress-request.schema.json").iter_errors(doc)
    )
    if errors:
        return 400, "schema", "; ".join(errors)
    text = doc["input"]["text"]
    if doc["input"]["chars"] != len(text):
        return 400, "chars", f"chars {doc['input']['chars']} != {len(text)} code points"
    return None


def beneficiaries_problem(sent: list[str], expected: list[str] | None) -> Problem | None:
    """Beneficiaries not sorted by code point, or (when `expected` is known) not those."""
    if sent != sorted(sent):
        return 400, "beneficiaries_order", "beneficiaries are not sorted by code point"
    if expected is not None and sent != expected:
        return 400, "beneficiaries", f"sent {len(sent)} ids, expected {len(expected)}"
    return None


def logical_digest(doc: dict[str, Any]) -> str:
    """The SHA-256 of a request's logical compression (kind, scope, input), so a key's first
    use is remembered without its text."""
    logical = json.dumps([doc["kind"], doc["scope"], doc["input"]], sort_keys=True)
    return hashlib.sha256(logical.encode("utf-8", "surrogatepass")).hexdigest()
