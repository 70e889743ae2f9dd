"""RFC 8785 serialization: properties beyond the vectors."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jfsm.jcs import canonicalize

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
