"""Shared helpers of the reference-page fragments (pure): links to the published spec
files, collapsed JSON blocks, red boxes for inconsistencies, key-value tables."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jfdocs.render import cell, json_block, table
from jfsm.spec import load_json, requirements

__all__ = [
    "DECISIONS",
    "danger",
    "details",
    "download",
    "kv_table",
    "load",
    "plain",
    "req_links",
    "schema_details",
    "store_requirements",
]

DECISIONS = "../decisions.md"
SPEC_FILES = "../spec"  # where the hook publishes spec/ (relative to docs/reference/)


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def details(title: str, body: str, kind: str = "abstract") -> str:
    indented = "".join(("    " + line if line else "") + "\n" for line in body.splitlines())
    return f'??? {kind} "{title}"\n\n{indented}\n'


def download(relative: str) -> str:
    """A link to the published copy of `spec/<relative>`."""
    return f"[`spec/{relative}`]({SPEC_FILES}/{relative})"


def schema_details(relative: str) -> str:
    """A collapsed JSON block of a spec file, titled with its download link."""
    body = f"Download: {download(relative)}\n\n" + json_block(load_json(relative))
    return details(relative.rsplit("/", 1)[-1], body)


def danger(title: str, problems: list[str]) -> str:
    if not problems:
        return ""
    return f'\n!!! danger "{title}"\n' + "".join(f"    - {p}\n" for p in problems)


def store_requirements(key: str) -> list[str]:
    """STORE requirements whose statement names the key template (up to its placeholder)."""
    stem = key.split("<")[0].rstrip(".")
    return [
        r["id"] for r in requirements() if r["area"] == "STORE" and f"`{stem}" in r["statement"]
    ]


def req_links(ids: list[str]) -> str:
    return ", ".join(f"[{r}](requirements.md#{r})" for r in ids)


def kv_table(data: Mapping[str, Any], headers: tuple[str, str] = ("Name", "Meaning")) -> str:
    return table(list(headers), [[f"`{k}`", cell(plain(v), DECISIONS)] for k, v in data.items()])


def plain(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(f"`{v}`" if isinstance(v, str) else json.dumps(v) for v in value)
    return "`" + json.dumps(value, ensure_ascii=False) + "`"
