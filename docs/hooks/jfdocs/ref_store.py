"""Fragments of the store-layout and canonical-text pages, and the spec downloads (pure).

Read from `spec/layout.json`, `spec/constants.json` and `spec/vectors/` through `jfsm.spec`,
with the reference engine's `jfsm.text` blocks shown and cross-checked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jfsm.text
from jfdocs.ref_common import (
    DECISIONS,
    danger,
    details,
    download,
    load,
    req_links,
    schema_details,
    store_requirements,
)
from jfdocs.render import cell, code, json_block, json_text, prose, schema_type, table
from jfsm.spec import constants, layout, spec_dir

# --------------------------------------------------------------------------------------------
# store layout (spec/layout.json)
# --------------------------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"<([a-z]+)>")


def layout_keys() -> str:
    """The key table of `spec/layout.json`, with its placeholders."""
    data = layout()
    rows = []
    for entry in data["keys"]:
        name = entry["record"]
        shown = f"{{<{entry['map']}>: {name}}}" if "map" in entry else name
        rows.append(
            [
                f"`{entry['key']}`",
                f"[`{shown}`](#{name.lower()})",
                cell(entry["description"], DECISIONS),
                req_links(store_requirements(entry["key"])),
            ]
        )
    out = table(["Key", "Record", "What it holds", "Requirements"], rows)
    out += "\nPlaceholders in keys:\n\n"
    out += "".join(
        f"- `<{name}>`: {prose(p['description'])} (pattern `{p['pattern']}`)\n"
        for name, p in data["placeholders"].items()
    )
    return out


def _member_type(sub: Mapping[str, Any]) -> str:
    shown = schema_type({k: v for k, v in sub.items() if k not in ("description", "default")})
    if "default" in sub:
        shown += f"; default `{json.dumps(sub['default'])}`"
    return shown


def layout_records() -> str:
    """One section per record of `spec/layout.json`: its members and its JSON Schema."""
    records = layout()["records"]
    out = []
    for name, record in records.items():
        required = set(record["required"])
        rows = [
            [
                f"`{member}`",
                _member_type(sub),
                "always" if member in required else "only when it has a value",
                cell(sub.get("description", ""), DECISIONS),
            ]
            for member, sub in record["properties"].items()
        ]
        out.append(f"### {name} {{ #{name.lower()} }}\n")
        out.append(prose(record["description"], DECISIONS) + "\n")
        out.append(table(["Member", "Type", "Present", "Meaning"], rows))
        out.append(
            details(
                f"JSON Schema of {name} (from spec/layout.json)",
                json_block(record),
            )
        )
    return "\n".join(out)


def layout_schema() -> str:
    return schema_details("layout.json") + schema_details("schemas/layout.schema.json")


# --------------------------------------------------------------------------------------------
# canonical text, footprint, vectors
# --------------------------------------------------------------------------------------------


def canonical_blocks() -> str:
    """The two blocks as the reference engine renders them, with the spec's envelopes."""
    c = constants()
    problems = []
    if c.summary_envelope != jfsm.text.SUMMARY_ENVELOPE:
        problems.append(f"jfsm.text.SUMMARY_ENVELOPE = {jfsm.text.SUMMARY_ENVELOPE}")
    if c.exchange_envelope != jfsm.text.EXCHANGE_ENVELOPE:
        problems.append(f"jfsm.text.EXCHANGE_ENVELOPE = {jfsm.text.EXCHANGE_ENVELOPE}")
    out = table(
        ["Block", "Text (JSON string)", "Envelope (code points)"],
        [
            [
                "summary `S`",
                code(json_text(jfsm.text.summary_block("S"))),
                str(c.summary_envelope),
            ],
            [
                "exchange `U`, `A`",
                code(json_text(jfsm.text.exchange_block("U", "A"))),
                str(c.exchange_envelope),
            ],
        ],
    )
    return out + danger(
        "Envelope constants disagree",
        [f"{p} but spec/constants.json says otherwise" for p in problems],
    )


def length_formula() -> str:
    c = constants()
    return (
        "```text\n"
        f"length = ({c.summary_envelope} + len(S) if summary) "
        f"+ Σ over chunks ({c.exchange_envelope} + len(U) + len(A))\n"
        "```\n"
    )


def thresholds() -> str:
    c = constants()
    return table(
        ["Stack", "Threshold (code points)", "compress.v2 kind"],
        [
            ["game", f"{c.game_threshold:,}", f"`{c.game_kind}`"],
            ["catalyst scene", f"{c.catalyst_threshold:,}", f"`{c.catalyst_kind}`"],
        ],
    )


def _text_value(value: Any) -> str:
    """A vector text (a string or `{repeat, times}`) for a table cell."""
    if isinstance(value, Mapping) and "repeat" in value:
        return code(json_text(value["repeat"])) + f" × {value['times']:,}"
    if value is None:
        return "*none*"
    return code(json_text(value))


def _exchanges(exchanges: list[Any]) -> str:
    if not exchanges:
        return "*none*"
    return "<br>".join(f"{_text_value(u)}, {_text_value(a)}" for u, a in exchanges)


def _vectors_canonical(data: Mapping[str, Any]) -> str:
    rows = [
        [
            cell(case["description"]),
            _text_value(case["input"]["summary"]),
            _exchanges(case["input"]["exchanges"]),
            code(json_text(case["expected"]["text"])),
            f"**{case['expected']['length']}**",
            str(case["expected"]["utf16Units"]),
            str(case["expected"]["utf8Bytes"]),
        ]
        for case in data["cases"]
    ]
    return table(
        [
            "Case",
            "Summary",
            "Exchanges (user, assistant)",
            "Canonical text (JSON string)",
            "Length",
            "UTF-16 units (wrong)",
            "UTF-8 bytes (wrong)",
        ],
        rows,
    )


def _vectors_threshold(data: Mapping[str, Any]) -> str:
    rows = [
        [
            cell(case["description"]),
            case["stack"],
            _text_value(case["summary"]),
            _exchanges(case["exchanges"]),
            f"{case['expected']['length']:,}",
            "**due**" if case["expected"]["due"] else "not due",
        ]
        for case in data["cases"]
    ]
    return table(["Case", "Stack", "Summary", "Exchanges", "Length", "Compression"], rows)


def _vectors_jcs(data: Mapping[str, Any]) -> str:
    out = table(
        ["Case", "Value", "JCS"],
        [
            [cell(c["description"]), code(json_text(c["value"])), code(visible_jcs(c["expected"]))]
            for c in data["cases"]
        ],
    )
    if data.get("footprint"):
        out += "\n**Footprint** (UTF-8 bytes of JCS(store) + UTF-8 bytes of JCS(changeLog)):\n\n"
        out += table(
            ["Case", "Store", "Change log", "Footprint (bytes)"],
            [
                [
                    cell(c["description"]),
                    code(json_text(c["store"])),
                    code(json_text(c["changeLog"])),
                    f"**{c['expected']}**",
                ]
                for c in data["footprint"]
            ],
        )
    return out


def visible_jcs(text: str) -> str:
    from jfdocs.render import visible

    return visible(text)


def _vectors_change_log(data: Mapping[str, Any]) -> str:
    def steps(items: list[Mapping[str, Any]]) -> str:
        parts = []
        for step in items:
            bits = []
            if "set" in step:
                bits.append("set " + code(json_text(step["set"])))
            if "delete" in step:
                bits.append("delete " + code(json_text(step["delete"])))
            if step.get("checkpoint"):
                bits.append("**checkpoint**")
            parts.append("; ".join(bits))
        return "<br>".join(f"{i}. {p}" for i, p in enumerate(parts, start=1))

    return table(
        ["Case", "Base", "Steps (each one projection)", "Expected change log"],
        [
            [
                cell(c["description"]),
                code(json_text(c["base"])),
                steps(c["steps"]),
                code(json_text(c["expected"])),
            ]
            for c in data["cases"]
        ],
    )


_VECTOR_RENDERERS = {
    "canonical_text": _vectors_canonical,
    "threshold": _vectors_threshold,
    "jcs": _vectors_jcs,
    "change_log": _vectors_change_log,
}


def _vector_section(path: Path) -> str:
    data = load(path)
    renderer = _VECTOR_RENDERERS.get(data.get("kind"))
    head = (
        f"### `{path.name}` {{ #vectors-{path.stem} }}\n\n"
        f"Kind `{data.get('kind')}`, {len(data.get('cases', []))} cases "
        f"({download('vectors/' + path.name)}). "
        + prose(data.get("description", ""), DECISIONS)
        + "\n\n"
    )
    if renderer is None:
        return head + json_block(data.get("cases", []))
    return head + renderer(data)


def vectors() -> str:
    """One section per file of `spec/vectors/`."""
    return "\n".join(_vector_section(p) for p in sorted((spec_dir() / "vectors").glob("*.json")))


# --------------------------------------------------------------------------------------------
# downloads
# --------------------------------------------------------------------------------------------


def spec_downloads() -> str:
    """Every file of the spec directory, linked to its published copy, with its `$id`."""
    root = spec_dir()
    rows = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        relative = path.relative_to(root).as_posix()
        schema_id = ""
        if path.suffix == ".json":
            doc = load(path)
            if isinstance(doc, dict) and "$id" in doc:
                schema_id = f"`{doc['$id']}`"
        rows.append([download(relative), schema_id])
    return table(["File", "JSON Schema `$id`"], rows)
