"""The store image: an O(change) footprint that always equals a full JCS recomputation,
the optimized change log's netting rules, and all-or-nothing quota refusals."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from jfsm.errors import QuotaExceeded
from jfsm.image import StoreImage
from jfsm.jcs import canonical_bytes, key_order
from jfsm.projection import Projection

KEYS = ["a", "b", "é", "😀k", "jfGameStack.chunk.1", "\r"]
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.text(max_size=6).filter(lambda s: not any("\ud800" <= c <= "\udfff" for c in s)),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("xyz"), inner, max_size=3)
    ),
    max_leaves=6,
)


def full_footprint(image: StoreImage) -> int:
    return len(canonical_bytes(image.store_json())) + len(canonical_bytes(image.change_log()))


class ImageMachine(RuleBasedStateMachine):
    """Random projections and checkpoints against a naive model of store, base and log."""

    def __init__(self) -> None:
        super().__init__()
        self.image = StoreImage(quota=2_000)
        self.model: dict[str, object] = {}
        self.base: dict[str, object] = {}

    @rule(
        sets=st.dictionaries(st.sampled_from(KEYS), json_values, max_size=3),
        deletes=st.sets(st.sampled_from(KEYS), max_size=2),
    )
    def project(self, sets: dict[str, object], deletes: set[str]) -> None:
        deletes -= set(sets)
        projection = Projection.of(sets, deletes)
        predicted = self.image.preview(projection)
        before = full_footprint(self.image)
        try:
            self.image.apply(projection)
        except QuotaExceeded as exc:
            assert predicted > self.image.quota
            assert exc.details == {"current": before, "would_be": predicted, "quota": 2_000}
            assert full_footprint(self.image) == before
            return
        for key in deletes:
            self.model.pop(key, None)
        self.model.update(sets)
        assert self.image.footprint() == predicted

    @rule()
    def checkpoint(self) -> None:
        self.image.checkpoint()
        self.base = dict(self.model)
        assert self.image.change_log() == []

    @invariant()
    def agrees_with_model(self) -> None:
        assert self.image.store_json() == self.model
        expected = []
        for key in sorted(set(self.model) | set(self.base), key=key_order):
            now = self.model.get(key, _ABSENT)
            then = self.base.get(key, _ABSENT)
            if now is _ABSENT and then is not _ABSENT:
                expected.append({"key": key, "op": "delete"})
            elif now is not _ABSENT and canonical_bytes(now) != (
                None if then is _ABSENT else canonical_bytes(then)
            ):
                expected.append({"key": key, "op": "set", "value": now})
        assert self.image.change_log() == expected

    @invariant()
    def footprint_is_exact(self) -> None:
        assert self.image.footprint() == full_footprint(self.image)
        assert self.image.footprint() <= self.image.quota


_ABSENT = object()
ImageMachine.TestCase.settings = ImageMachine.TestCase.settings  # profile from conftest
TestImage = pytest.mark.req(
    "JF-QUOTA-001",
    "JF-QUOTA-003",
    "JF-QUOTA-004",
    "JF-QUOTA-005",
    "JF-QUOTA-007",
    "JF-QUOTA-008",
    "JF-ATOM-002",
)(ImageMachine.TestCase)


@pytest.mark.req("JF-QUOTA-003")
def test_refused_projection_changes_nothing() -> None:
    image = StoreImage({"a": b"1"}, quota=60)
    before = (image.store_json(), image.change_log(), image.footprint())
    with pytest.raises(QuotaExceeded) as info:
        image.apply(Projection.of({"b": "x" * 100}))
    assert (image.store_json(), image.change_log(), image.footprint()) == before
    assert info.value.code == "quota_exceeded"
    assert info.value.details["would_be"] > info.value.details["quota"] == 60


@pytest.mark.req("JF-QUOTA-001")
def test_exactly_at_quota_is_allowed() -> None:
    image = StoreImage()
    projection = Projection.of({"k": "v"})
    size = image.preview(projection)
    exact = StoreImage(quota=size)
    exact.apply(projection)
    assert exact.footprint() == size
    with pytest.raises(QuotaExceeded):
        StoreImage(quota=size - 1).apply(projection)


@given(st.dictionaries(st.sampled_from(KEYS), json_values, max_size=4))
def test_image_built_from_values_matches_incremental(values: dict[str, object]) -> None:
    encoded = {k: canonical_bytes(v) for k, v in values.items()}
    built = StoreImage(encoded, base={})
    incremental = StoreImage()
    incremental.apply(Projection.of(values))
    assert built.footprint() == incremental.footprint() == full_footprint(built)
    assert built.change_log() == incremental.change_log()
