"""A thin runner over the language-neutral vectors in `spec/vectors/`.

Every vector file must have a runner for its `kind`, every case of every file is a test, and
every file validates against `spec/schemas/vectors.schema.json`. `JFSM_SPEC_DIR` points the
runner at another copy of the spec.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from jfsm.image import StoreImage
from jfsm.jcs import canonical_bytes, canonicalize
from jfsm.projection import Projection
from jfsm.spec import constants, spec_dir
from jfsm.text import canonical_length, canonical_text, count

VECTOR_DIR = spec_dir() / "vectors"
FILES = sorted(VECTOR_DIR.glob("*.json"))


def _text(spec: Any) -> str:
    if isinstance(spec, str):
        return spec
    return spec["repeat"] * spec["times"]


def run_canonical(case: dict[str, Any]) -> None:
    summary = case["input"]["summary"]
    exchanges = [(u, a) for u, a in case["input"]["exchanges"]]
    text = canonical_text(summary, exchanges)
    assert text == case["expected"]["text"]
    assert len(text) == canonical_length(summary, exchanges) == case["expected"]["length"]
    assert count(text) == case["expected"]["length"]


def run_jcs(case: dict[str, Any]) -> None:
    assert canonicalize(case["value"]) == case["expected"]


def run_footprint(case: dict[str, Any]) -> None:
    size = len(canonical_bytes(case["store"])) + len(canonical_bytes(case["changeLog"]))
    assert size == case["expected"]


def run_change_log(case: dict[str, Any]) -> None:
    base = {k: canonical_bytes(v) for k, v in case["base"].items()}
    image = StoreImage(base)
    for step in case["steps"]:
        if step.get("checkpoint"):
            image.checkpoint()
            continue
        image.apply(Projection.of(step.get("set"), step.get("delete", [])))
    assert image.change_log() == case["expected"]
    full = len(canonical_bytes(image.store_json())) + len(canonical_bytes(image.change_log()))
    assert image.footprint() == full


def run_threshold(case: dict[str, Any]) -> None:
    summary = None if case["summary"] is None else _text(case["summary"])
    exchanges = [(_text(u), _text(a)) for u, a in case["exchanges"]]
    length = canonical_length(summary, exchanges)
    threshold = getattr(constants(), f"{case['stack']}_threshold")
    assert length == len(canonical_text(summary, exchanges)) == case["expected"]["length"]
    assert (length > threshold and bool(exchanges)) is case["expected"]["due"]


RUNNERS: dict[str, Callable[[dict[str, Any]], None]] = {
    "canonical_text": run_canonical,
    "jcs": run_jcs,
    "change_log": run_change_log,
    "threshold": run_threshold,
}


def _cases() -> list[Any]:
    params = []
    for path in FILES:
        data = json.loads(path.read_text("utf-8"))
        for index, case in enumerate(data["cases"]):
            params.append(
                pytest.param(data["kind"], case, id=f"{path.stem}[{index}] {case['description']}")
            )
        for index, case in enumerate(data.get("footprint", [])):
            params.append(
                pytest.param(
                    "footprint", case, id=f"{path.stem}.footprint[{index}] {case['description']}"
                )
            )
    return params


@pytest.mark.req(
    "JF-TEXT-002", "JF-TEXT-003", "JF-TEXT-004", "JF-COMP-001", "JF-QUOTA-001", "JF-QUOTA-006"
)
@pytest.mark.parametrize(("kind", "case"), _cases())
def test_vector(kind: str, case: dict[str, Any]) -> None:
    runner = RUNNERS.get(kind) or {"footprint": run_footprint}[kind]
    runner(case)


def test_every_vector_file_has_a_runner_and_a_valid_shape() -> None:
    schema = json.loads((spec_dir() / "schemas" / "vectors.schema.json").read_text("utf-8"))
    assert {p.stem for p in FILES} >= {"canonical-text", "jcs", "change-log", "threshold"}
    for path in FILES:
        data = json.loads(path.read_text("utf-8"))
        jsonschema.validate(data, schema)
        assert data["kind"] in RUNNERS, f"{path.name}: no runner for kind {data['kind']!r}"


def test_canonical_vectors_would_catch_wrong_units() -> None:
    """The vectors distinguish code points from UTF-16 units and UTF-8 bytes."""
    data = json.loads((VECTOR_DIR / "canonical-text.json").read_text("utf-8"))
    expected = [c["expected"] for c in data["cases"]]
    assert any(e["length"] != e["utf16Units"] for e in expected)
    assert any(e["length"] != e["utf8Bytes"] for e in expected)
    for e in expected:
        assert len(e["text"].encode("utf-16-le")) // 2 == e["utf16Units"]
        assert len(e["text"].encode("utf-8")) == e["utf8Bytes"]


def test_spec_dir_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`JFSM_SPEC_DIR` points the loaders at another copy of the spec."""
    from jfsm import spec

    copy = tmp_path / "spec"
    shutil.copytree(spec_dir(), copy)
    (copy / "constants.json").write_text(
        (spec_dir() / "constants.json").read_text("utf-8").replace("300000", "12345")
    )
    monkeypatch.setenv("JFSM_SPEC_DIR", str(copy))
    spec.spec_dir.cache_clear()
    spec.constants.cache_clear()
    try:
        assert spec.constants().game_threshold == 12345
    finally:
        monkeypatch.delenv("JFSM_SPEC_DIR")
        spec.spec_dir.cache_clear()
        spec.constants.cache_clear()
