"""RFC 8785 serialization: properties beyond the vectors, and a differential oracle.

`jfsm.jcs` (the engine's) and `jfsm_conformance.model.canon.jcs` (the suite's) are both checked
against the `rfc8785` package, an implementation independent of both (decision R38).
"""

from __future__ import annotations

import json
import math

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from jfsm.jcs import canonicalize
from jfsm_conformance.model import canon

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=["Cs"]), max_size=10)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(st.characters(exclude_categories=["Cs"]), max_size=5), inner, max_size=4
        )
    ),
    max_leaves=20,
)


@pytest.mark.req("JF-QUOTA-001")
@given(values)
def test_round_trip_and_idempotence(value: object) -> None:
    text = canonicalize(value)
    parsed = json.loads(text)
    assert canonicalize(parsed) == text


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_numbers_round_trip_exactly(number: float) -> None:
    assert float(canonicalize(number)) == number or (number == 0 and canonicalize(number) == "0")


@given(st.dictionaries(st.text(max_size=3).filter(lambda s: s.isascii()), st.integers(0, 9)))
def test_ascii_objects_agree_with_sorted_compact_json(value: dict[str, int]) -> None:
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonicalize(value) == expected


@pytest.mark.parametrize(
    "bad", [math.nan, math.inf, -math.inf, 2**53 + 1, 10**400, "\ud800", {1: 2}, object(), b"x"]
)
def test_non_i_json_values_are_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        canonicalize(bad)


# ------------------------------------------------------------------------------------------
# differential oracle: the rfc8785 package (an implementation independent of jfsm.jcs)
# ------------------------------------------------------------------------------------------

# Keys and texts drawn from the whole of Unicode but leaning on the characters where JCS
# implementations disagree: astral characters (UTF-16 surrogate pairs sort *before*
# U+E000..U+FFFF), the C0 controls and the two characters JCS always escapes.
_TRICKY = '\x00\x1f\x7f"\\/\b\f\n\r\t é\u2028\u2029\ue000\uffff\U00010000\U0001f600\U0010ffff'
unicode_text = st.text(
    st.characters(exclude_categories=["Cs"]) | st.sampled_from(_TRICKY), max_size=12
)
safe_integers = st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
finite_floats = st.floats(allow_nan=False, allow_infinity=False)
i_json = st.recursive(
    st.none() | st.booleans() | safe_integers | finite_floats | unicode_text,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(unicode_text, inner, max_size=5),
    max_leaves=25,
)


@given(i_json)
def test_agrees_with_the_rfc8785_package(value: object) -> None:
    assert canonicalize(value).encode("utf-8") == rfc8785.dumps(value)


@given(i_json)
def test_the_suites_jcs_agrees_with_the_rfc8785_package(value: object) -> None:
    """`jfsm_conformance.model.canon.jcs` (C-speed strings, rfc8785 numbers) is RFC 8785 too."""
    assert canon.jcs(value).encode("utf-8") == rfc8785.dumps(value)
    assert canon.jcs_size(value) == len(rfc8785.dumps(value))


@given(finite_floats)
def test_numbers_agree_with_the_rfc8785_package(number: float) -> None:
    assert canonicalize(number) == rfc8785.dumps(number).decode("ascii")


@given(st.dictionaries(unicode_text, safe_integers, min_size=2, max_size=8))
def test_member_order_agrees_with_the_rfc8785_package(value: dict[str, int]) -> None:
    ours = json.loads(canonicalize(value))
    theirs = json.loads(rfc8785.dumps(value))
    assert list(ours) == list(theirs)


@pytest.mark.parametrize("bad", [math.nan, math.inf, "\ud800", {"k": "\udfff"}])
def test_both_refuse_what_is_not_i_json(bad: object) -> None:
    with pytest.raises(ValueError):
        canonicalize(bad)
    with pytest.raises(rfc8785.CanonicalizationError):
        rfc8785.dumps(bad)


def test_every_code_point_is_escaped_as_the_rfc8785_package_escapes_it() -> None:
    """Strings go through the standard library's C encoder (`jfsm.jcs._string`): every
    code point outside the surrogates, alone and in runs, comes out as RFC 8785 writes it."""
    points = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for start in range(0, len(points), 4096):
        run = "".join(map(chr, points[start : start + 4096]))
        assert canonicalize(run).encode("utf-8") == rfc8785.dumps(run)
    for c in range(0x80):
        assert canonicalize(chr(c)).encode("utf-8") == rfc8785.dumps(chr(c))


@pytest.mark.parametrize("text", ["\ud800", "a\udfffb", 'q"\n\udc00', "é\ud83d"])
def test_a_lone_surrogate_is_refused_naming_it(text: str) -> None:
    lone = next(ch for ch in text if 0xD800 <= ord(ch) <= 0xDFFF)
    with pytest.raises(ValueError, match=f"U\\+{ord(lone):04X}"):
        canonicalize(text)
