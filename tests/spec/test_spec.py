"""The one spec reader, `jfsm.spec`: every part of the repo finds `spec/` through it and reads
its constants from it.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from jfsm import spec

ROOT = Path(__file__).resolve().parents[2]


def test_reader_imports_nothing_from_the_engine() -> None:
    """The suite may import `jfsm.spec` only because it holds no engine code."""
    tree = ast.parse((ROOT / "jfsm" / "spec.py").read_text(encoding="utf-8"))
    imported = [
        alias.name if isinstance(node, ast.Import) else (node.module or "")
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    ]
    assert imported and not [name for name in imported if name.split(".")[0] == "jfsm"]


def test_every_constant_of_constants_json_is_read() -> None:
    data = json.loads((spec.spec_dir() / "constants.json").read_text(encoding="utf-8"))
    c = spec.constants()
    read = {
        "spec_version": c.spec_version,
        "thresholds": {"game": c.game_threshold, "catalyst": c.catalyst_threshold},
        "quota_bytes": c.quota_bytes,
        "kinds": {"game": c.game_kind, "catalyst": c.catalyst_kind},
        "envelopes": {"summary": c.summary_envelope, "exchange": c.exchange_envelope},
        "failure_outcomes": list(c.failure_outcomes),
        "error_codes": list(c.error_codes),
        "chunk_origins": list(c.chunk_origins),
        "reserved_key_prefix": c.reserved_key_prefix,
    }
    if "limits" in data:
        read["limits"] = dict(c.limits)
    data.pop("$schema", None)
    assert read == data
    retry = json.loads((spec.spec_dir() / "compress-v2.json").read_text("utf-8"))["retry"]
    assert c.max_attempts == retry["max_attempts"]
    assert c.threshold("game") == c.game_threshold
    assert c.threshold("catalyst") == c.catalyst_threshold
    with pytest.raises(KeyError):
        c.threshold("scene")


def test_engine_suite_and_docs_read_the_same_spec() -> None:
    from jfsm import image
    from jfsm_conformance.client import protocol
    from jfsm_conformance.fake import compress as fake_compress
    from jfsm_conformance.model import canon, replies
    from jfsm_conformance.steps import world
    from jfsm_conformance.verify import requests

    assert protocol.spec_dir is spec.spec_dir
    assert fake_compress.spec_dir() == spec.spec_dir()
    c = spec.constants()
    assert image.QUOTA_BYTES == canon.QUOTA == c.quota_bytes
    assert {"game": c.game_threshold, "catalyst": c.catalyst_threshold} == world.SPEC_THRESHOLDS
    assert c.max_attempts == requests.MAX_ATTEMPTS
    assert replies.SUMMARY_ENVELOPE == canon.SUMMARY_ENVELOPE == c.summary_envelope
    assert c.exchange_envelope == canon.EXCHANGE_ENVELOPE
    generate = (ROOT / "docs" / "hooks" / "generate.py").read_text(encoding="utf-8")
    assert "spec_dir()" in generate and '/ "spec"' not in generate


def test_override_must_be_a_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JFSM_SPEC_DIR", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="JFSM_SPEC_DIR"):
        spec.locate_spec_dir()
    monkeypatch.setenv("JFSM_SPEC_DIR", str(tmp_path))
    assert spec.locate_spec_dir() == tmp_path


def test_malformed_file_names_its_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    (tmp_path / "broken.toml").write_text("a = ", encoding="utf-8")
    monkeypatch.setenv("JFSM_SPEC_DIR", str(tmp_path))
    spec.spec_dir.cache_clear()
    try:
        with pytest.raises(ValueError, match=r"broken\.json"):
            spec.load_json("broken.json")
        with pytest.raises(ValueError, match=r"broken\.toml"):
            spec.load_toml("broken.toml")
    finally:
        monkeypatch.delenv("JFSM_SPEC_DIR")
        spec.spec_dir.cache_clear()


def test_the_suite_imports_only_the_spec_reader_from_jfsm() -> None:
    """The suite stays independent of the engine: outside its example drivers, the only
    `jfsm` modules it imports are `jfsm.spec` (decision R35) and `jfsm.usage`, the
    one-line usage errors every `jfsm` command shares (R160)."""
    offenders = []
    for path in sorted((ROOT / "conformance" / "jfsm_conformance").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [
                f"{path.name}: {name}"
                for name in names
                if name.split(".")[0] == "jfsm" and name not in ("jfsm.spec", "jfsm.usage")
            ]
    assert offenders == []
