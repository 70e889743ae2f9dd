"""Loading the language-neutral spec data in `spec/`.

The spec directory is found, in order: the `JFSM_SPEC_DIR` environment variable, the copy
packaged inside the wheel (`jfsm/_spec`), the `spec/` folder of a source checkout. A missing
or malformed file raises `FileNotFoundError` or `ValueError` naming the path.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["Constants", "constants", "load_json", "requirements", "spec_dir"]


@cache
def spec_dir() -> Path:
    """The directory holding the spec data."""
    override = os.environ.get("JFSM_SPEC_DIR")
    candidates = [Path(override)] if override else []
    here = Path(__file__).resolve().parent
    candidates += [here / "_spec", here.parent / "spec"]
    for candidate in candidates:
        if (candidate / "constants.json").is_file():
            return candidate
    raise FileNotFoundError(f"no spec directory among {[str(c) for c in candidates]}")


def load_json(relative: str) -> Any:
    """Parse `spec/<relative>` as JSON."""
    path = spec_dir() / relative
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: {exc}") from exc


@cache
def requirements() -> tuple[dict[str, Any], ...]:
    """The requirement catalog entries, in file order."""
    path = spec_dir() / "requirements.toml"
    with path.open("rb") as handle:
        return tuple(tomllib.load(handle)["requirement"])


@dataclass(frozen=True, slots=True)
class Constants:
    """The spec's numbers and names."""

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


@cache
def constants() -> Constants:
    """The spec constants from `spec/constants.json`."""
    data = load_json("constants.json")
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
    )
