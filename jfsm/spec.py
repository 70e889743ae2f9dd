"""Reading the language-neutral spec data in `spec/`: the one reader every part uses.

The engine, the conformance suite and the docs hooks all find and read `spec/` here, so
they cannot disagree about where it is or what a constant says. This module is pure spec
plumbing: it imports nothing else from `jfsm` (a test pins that), so the suite may use it
and stay independent of the engine.

The spec directory is, in order:

1. `$JFSM_SPEC_DIR` when set: used as given (it must be a directory; a file missing in it
   raises when read, naming the path, with no silent fallback to another copy);
2. the copy packaged inside the wheel (`jfsm/_spec`);
3. the `spec/` folder of a source checkout (next to the `jfsm` package).

A missing directory or file raises `FileNotFoundError`; a malformed file raises
`ValueError` naming the path.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

__all__ = [
    "Constants",
    "constants",
    "guarantees",
    "layout",
    "load_json",
    "load_toml",
    "locate_spec_dir",
    "requirements",
    "spec_dir",
]

_MARKER = "constants.json"


def locate_spec_dir() -> Path:
    """The spec directory, looked up now (reads `$JFSM_SPEC_DIR` on every call)."""
    override = os.environ.get("JFSM_SPEC_DIR")
    if override:
        path = Path(override)
        if not path.is_dir():
            raise FileNotFoundError(f"JFSM_SPEC_DIR={override!r} is not a directory")
        return path
    here = Path(__file__).resolve().parent
    candidates = [here / "_spec", here.parent / "spec"]
    for candidate in candidates:
        if (candidate / _MARKER).is_file():
            return candidate
    raise FileNotFoundError(f"no spec directory among {[str(c) for c in candidates]}")


@cache
def spec_dir() -> Path:
    """The spec directory (looked up once; `spec_dir.cache_clear()` looks again)."""
    return locate_spec_dir()


def load_json(relative: str) -> Any:
    """Parse `spec/<relative>` as JSON."""
    path = spec_dir() / relative
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: {exc}") from exc


def load_toml(relative: str) -> dict[str, Any]:
    """Parse `spec/<relative>` as TOML."""
    path = spec_dir() / relative
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: {exc}") from exc


@cache
def requirements() -> tuple[dict[str, Any], ...]:
    """The requirement catalog entries, in file order."""
    return tuple(load_toml("requirements.toml")["requirement"])


@cache
def guarantees() -> tuple[dict[str, Any], ...]:
    """The reference engine's own guarantees (`jfsm/guarantees.toml`, R78): promises about
    its formats and tools that are not spec requirements, under IDs the catalog retired.
    `ValueError` if the file does not parse."""
    path = Path(__file__).with_name("guarantees.toml")
    try:
        return tuple(tomllib.loads(path.read_text(encoding="utf-8"))["guarantee"])
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: {exc}") from exc


@cache
def layout() -> dict[str, Any]:
    """The store layout (`spec/layout.json`): key patterns and record shapes."""
    data = load_json("layout.json")
    if not isinstance(data, dict):
        raise ValueError(f"{spec_dir() / 'layout.json'}: not a JSON object")
    return data


@dataclass(frozen=True, slots=True)
class Constants:
    """The spec's numbers and names (`spec/constants.json`, and the compress.v2 retry budget
    of `spec/compress-v2.json`)."""

    spec_version: str
    game_threshold: int
    catalyst_threshold: int
    quota_bytes: int
    game_kind: str
    catalyst_kind: str
    # limits (JF-ERR-006 to JF-ERR-009)
    id_pattern: str
    value_max_depth: int
    message_max_depth: int
    message_max_bytes: int
    summary_envelope: int
    """Code points a summary block adds around its text."""
    exchange_envelope: int
    """Code points an exchange block adds around its two texts."""
    failure_outcomes: tuple[str, ...]
    error_codes: tuple[str, ...]
    chunk_origins: tuple[str, ...]
    reserved_key_prefix: str
    max_attempts: int
    """Attempts per compression call (first try plus retries)."""
    limits: Mapping[str, Any]
    """The `limits` object of `spec/constants.json`, empty when the file has none."""

    def threshold(self, stack: str) -> int:
        """The threshold of `"game"` or `"catalyst"`; raise `KeyError` for anything else."""
        return {"game": self.game_threshold, "catalyst": self.catalyst_threshold}[stack]


@cache
def constants() -> Constants:
    """The spec constants from `spec/constants.json` (and `spec/compress-v2.json`)."""
    data = load_json("constants.json")
    retry = load_json("compress-v2.json")["retry"]
    return Constants(
        spec_version=data["spec_version"],
        game_threshold=data["thresholds"]["game"],
        catalyst_threshold=data["thresholds"]["catalyst"],
        quota_bytes=data["quota_bytes"],
        game_kind=data["kinds"]["game"],
        catalyst_kind=data["kinds"]["catalyst"],
        id_pattern=data["limits"]["id_pattern"],
        value_max_depth=data["limits"]["value_max_depth"],
        message_max_depth=data["limits"]["message_max_depth"],
        message_max_bytes=data["limits"]["message_max_bytes"],
        summary_envelope=data["envelopes"]["summary"],
        exchange_envelope=data["envelopes"]["exchange"],
        failure_outcomes=tuple(data["failure_outcomes"]),
        error_codes=tuple(data["error_codes"]),
        chunk_origins=tuple(data["chunk_origins"]),
        reserved_key_prefix=data["reserved_key_prefix"],
        max_attempts=retry["max_attempts"],
        limits=dict(data.get("limits", {})),
    )
