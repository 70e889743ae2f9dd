"""`jfsm_conformance.model.encoded` derives the diff, the change log and the footprint from per-key
JCS texts; they must equal what `jfsm_conformance.model.canon` computes from the whole objects."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from jfsm_conformance.model.canon import change_log, footprint, jcs
from jfsm_conformance.model.encoded import BaseCache, Encoded
from jfsm_conformance.model.oracle import diff_store

keys = st.sampled_from(["a", "b", "z", "\U0001f600", "\uff5e", "jfGameStack.meta", "é"])
values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
stores = st.dictionaries(keys, values, max_size=6)


@given(base=stores, store=stores)
def test_encoded_store_matches_whole_object_rules(
    base: dict[str, Any], store: dict[str, Any]
) -> None:
    encoded = Encoded(store)
    assert encoded.text() == jcs(store)
    log, text = encoded.change_log(Encoded(base))
    assert log == change_log(base, store)
    assert text == jcs(change_log(base, store))
    assert encoded.size() + len(text.encode("utf-8")) == footprint(store, log)
    assert encoded.differing(Encoded(base)) == [d.key for d in diff_store(store, base)]


def test_base_cache_encodes_a_base_once_and_follows_a_new_one() -> None:
    cache = BaseCache()
    base = {"k": 1}
    assert cache.get(base) is cache.get(base)
    assert cache.get({"k": 1}) is not cache.get(base)
