"""Valid text, counting and canonical text (D1 to D3)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jfsm.errors import InvalidInput
from jfsm.text import (
    EXCHANGE_ENVELOPE,
    SUMMARY_ENVELOPE,
    canonical_length,
    canonical_text,
    require_text,
)

texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)


@pytest.mark.req("JF-TEXT-001")
@pytest.mark.parametrize("bad", ["\ud800", "a\udfffb", "\udc00\ud800"])
def test_lone_surrogates_rejected(bad: str) -> None:
    with pytest.raises(InvalidInput) as info:
        require_text(bad, "user")
    assert info.value.code == "invalid_input"
    assert "user" in info.value.message


@pytest.mark.req("JF-TEXT-001")
@pytest.mark.parametrize("bad", [None, 1, b"bytes", ["a"], 1.5])
def test_non_strings_rejected(bad: object) -> None:
    with pytest.raises(InvalidInput):
        require_text(bad, "assistant")


@pytest.mark.req("JF-TEXT-002")
@given(texts)
def test_valid_text_is_returned_unchanged(text: str) -> None:
    assert require_text(text, "x") is text


def test_envelopes_are_the_spec_constants() -> None:
    assert (SUMMARY_ENVELOPE, EXCHANGE_ENVELOPE) == (22, 42)


@pytest.mark.req("JF-TEXT-003", "JF-TEXT-004", "JF-TEXT-005")
@given(st.none() | texts, st.lists(st.tuples(texts, texts), max_size=6))
def test_length_is_additive_and_counts_code_points(
    summary: str | None, exchanges: list[tuple[str, str]]
) -> None:
    text = canonical_text(summary, exchanges)
    assert canonical_length(summary, exchanges) == len(text)
    expected = (0 if summary is None else 22 + len(summary)) + sum(
        42 + len(u) + len(a) for u, a in exchanges
    )
    assert len(text) == expected


@pytest.mark.req("JF-TEXT-004")
@given(st.lists(st.tuples(texts, texts), min_size=1, max_size=5))
def test_exchanges_appear_in_order_and_verbatim(exchanges: list[tuple[str, str]]) -> None:
    text = canonical_text(None, exchanges)
    position = 0
    for user, assistant in exchanges:
        block = f"<user>\n{user}\n</user>\n<assistant>\n{assistant}\n</assistant>\n"
        assert text.startswith(block, position)
        position += len(block)
    assert position == len(text)
