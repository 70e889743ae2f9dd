"""The suite's own spec helpers (`jfsm_conformance.model.canon`) against the language-neutral
vectors.

The suite must not share code with the engine, so it carries its own canonical text, JCS,
footprint and change-log helpers; these tests pin them to `spec/vectors/`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jfsm_conformance.client.protocol import spec_dir
from jfsm_conformance.model.canon import canonical_text, change_log, footprint, jcs

VECTORS = spec_dir() / "vectors"


def _cases(name: str) -> list[dict[str, Any]]:
    return json.loads((VECTORS / name).read_text(encoding="utf-8"))["cases"]


def _text(part: Any) -> str:
    return part["repeat"] * part["times"] if isinstance(part, dict) else part


@pytest.mark.parametrize("case", _cases("jcs.json"), ids=lambda c: c["description"])
def test_jcs(case: dict[str, Any]) -> None:
    # Non-integral numbers included: the suite's numbers come from the rfc8785 package (R38).
    assert jcs(case["value"]) == case["expected"]


def test_footprint() -> None:
    cases = json.loads((VECTORS / "jcs.json").read_text(encoding="utf-8"))["footprint"]
    for case in cases:
        assert footprint(case["store"], case["changeLog"]) == case["expected"], case["description"]


@pytest.mark.parametrize("case", _cases("canonical-text.json"), ids=lambda c: c["description"])
def test_canonical_text(case: dict[str, Any]) -> None:
    got = canonical_text(case["input"]["summary"], [tuple(e) for e in case["input"]["exchanges"]])
    assert got == case["expected"]["text"]
    assert len(got) == case["expected"]["length"]


@pytest.mark.parametrize("case", _cases("threshold.json"), ids=lambda c: c["description"])
def test_threshold(case: dict[str, Any]) -> None:
    exchanges = [(_text(u), _text(a)) for u, a in case["exchanges"]]
    summary = None if case["summary"] is None else _text(case["summary"])
    text = canonical_text(summary, exchanges)
    threshold = {"game": 300_000, "catalyst": 150_000}[case["stack"]]
    assert len(text) == case["expected"]["length"]
    assert (len(text) > threshold and bool(exchanges)) == case["expected"]["due"]


@pytest.mark.parametrize("case", _cases("change-log.json"), ids=lambda c: c["description"])
def test_change_log(case: dict[str, Any]) -> None:
    base = dict(case["base"])
    store = dict(base)
    for step in case["steps"]:
        if step.get("checkpoint"):
            base = dict(store)
        store.update(step.get("set", {}))
        for key in step.get("delete", []):
            store.pop(key, None)
    assert change_log(base, store) == case["expected"]


def test_vectors_are_found() -> None:
    assert Path(VECTORS, "jcs.json").is_file()
