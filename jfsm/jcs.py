"""RFC 8785 JSON Canonicalization Scheme (JCS), the serialization the footprint counts.

- Object members sorted by key, compared as UTF-16 code unit sequences.
- No white space.
- Strings: only `"`, `\\\\` and the C0 controls are escaped (`\\b \\t \\n \\f \\r` short,
  the rest `\\u00xx` in lower-case hex); everything else, non-ASCII included, is literal.
- Numbers: ECMAScript `Number.prototype.toString` of the IEEE 754 double.

Values must be I-JSON: lone surrogates, NaN, infinities and integers whose double prints
as another number raise `ValueError`, as do non-JSON types.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any

__all__ = ["canonical_bytes", "canonicalize", "key_order", "string_bytes"]

_MAX_SAFE_INTEGER = 2**53 - 1
_ESCAPE = re.compile('["\\\\\x00-\x1f\ud800-\udfff]')
_SURROGATE = re.compile("[\ud800-\udfff]")


def _string(value: str) -> str:
    # the standard library's C encoder, without ensure_ascii, escapes exactly what JCS
    # escapes, in the same forms (`tests/spec/test_jcs.py` compares every code point); a
    # regular expression with a Python callback per match was 12 times slower on text
    # with line breaks, and the engine encodes every record it commits
    if _ESCAPE.search(value) is None:
        return '"' + value + '"'
    if not value.isascii():
        lone = _SURROGATE.search(value)
        if lone is not None:
            raise ValueError(f"lone surrogate U+{ord(lone.group()):04X} cannot be serialized")
    return json.dumps(value, ensure_ascii=False)


def key_order(key: str) -> bytes:
    """Sort key giving JCS member order (UTF-16 code units) for a `str` key."""
    return key.encode("utf-16-be", "surrogatepass")


def _number(value: float) -> str:
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"{value!r} is not a JSON number")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    digits_tuple, exponent = Decimal(repr(abs(value))).as_tuple()[1:]
    digits = "".join(map(str, digits_tuple)).rstrip("0")
    assert isinstance(exponent, int)
    exponent += len(digits_tuple) - len(digits)  # absorb the stripped zeros
    k = len(digits)
    n = k + exponent  # value = 0.d1..dk * 10**n
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        text = f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + text


def canonicalize(value: Any) -> str:
    """The JCS text of a JSON value. Raises `ValueError` for anything not I-JSON."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, int):
        if abs(value) <= _MAX_SAFE_INTEGER:
            return str(value)
        text = _number(float(value)) if abs(value) < 2**1024 else "inf"
        if text == "inf" or "e" in text or int(text) != value:
            raise ValueError(f"integer {value} does not survive as an IEEE 754 double")
        return text
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(canonicalize(item) for item in value) + "]"
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise ValueError(f"object key {key!r} is not a string")
        members = sorted(value.items(), key=lambda item: key_order(item[0]))
        return "{" + ",".join(_string(k) + ":" + canonicalize(v) for k, v in members) + "}"
    raise ValueError(f"{type(value).__name__} is not a JSON type")


def canonical_bytes(value: Any) -> bytes:
    """UTF-8 bytes of `canonicalize(value)`."""
    return canonicalize(value).encode("utf-8")


def string_bytes(value: str) -> bytes:
    """UTF-8 bytes of a JCS string literal (a key or a string value)."""
    return _string(value).encode("utf-8")
