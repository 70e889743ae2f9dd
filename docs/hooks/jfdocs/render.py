"""Small Markdown helpers shared by the page generators (pure)."""

from __future__ import annotations

import html
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "cell",
    "code",
    "fields_table",
    "json_block",
    "json_text",
    "prose",
    "schema_fields",
    "schema_type",
    "table",
    "visible",
]

_INVISIBLE = {"Cc", "Cf", "Cs", "Zl", "Zp", "Co", "Cn"}


def visible(text: str) -> str:
    """`text` with control, format and separator characters shown as `\\uXXXX` escapes."""
    out = []
    for char in text:
        if unicodedata.category(char) in _INVISIBLE and char not in "\n":
            out.append(f"\\u{ord(char):04x}" if ord(char) < 0x10000 else f"\\U{ord(char):08x}")
        else:
            out.append(char)
    return "".join(out)


def json_text(value: Any, *, indent: int | None = None) -> str:
    """JSON for display: non-ASCII kept literal, invisible characters escaped."""
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    return visible(text)


def code(text: str) -> str:
    """An inline code span that is safe inside a Markdown table cell."""
    escaped = html.escape(text, quote=False).replace("|", "&#124;").replace("\n", "\\n")
    return f'<code class="jf-value">{escaped}</code>'


_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)


_DECISION = re.compile(r"\bD([1-9]|1[0-9]|20)\b")


def prose(text: str, decisions: str | None = None) -> str:
    """Spec prose made safe for Markdown: outside code spans, `<`, `>`, `*` and `_` that
    would start HTML or emphasis are escaped; code spans are kept as they are. With
    `decisions` (the relative URL of the decisions page), `D1`..`D20` become links."""
    out = []
    last = 0
    for match in _CODE_SPAN.finditer(text):
        out.append(_plain(text[last : match.start()], decisions))
        out.append(match.group())
        last = match.end()
    out.append(_plain(text[last:], decisions))
    return "".join(out)


def _plain(text: str, decisions: str | None) -> str:
    text = _escape_plain(text)
    if decisions is not None:
        text = _DECISION.sub(lambda m: f"[{m.group()}]({decisions}#d{m.group(1)})", text)
    return text


def _escape_plain(text: str) -> str:
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("*", "\\*")
        .replace("_", "\\_")
    )


def cell(text: str, decisions: str | None = None) -> str:
    """Spec prose made safe for a table cell (see `prose`; pipes escaped, newlines joined)."""
    return prose(text, decisions).replace("|", "\\|").replace("\n", " ")


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def json_block(value: Any, *, title: str | None = None) -> str:
    """A fenced JSON code block (optionally titled)."""
    head = "```json" + (f' title="{title}"' if title else "")
    return f"{head}\n{json_text(value, indent=2)}\n```\n"


def schema_type(schema: Mapping[str, Any] | bool, defs: Mapping[str, Any] | None = None) -> str:
    """A short human description of a JSON Schema's type."""
    if schema is True or schema == {}:
        return "any JSON value"
    if schema is False:
        return "nothing"
    assert isinstance(schema, Mapping)
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        target = (defs or {}).get(name)
        if target is not None and isinstance(target, Mapping) and "properties" not in target:
            inner = schema_type(target, defs)
            return inner if name in inner else f"{inner} ({name})"
        return name
    if "const" in schema:
        return "`" + json.dumps(schema["const"], ensure_ascii=False) + "`"
    if "enum" in schema:
        return "one of " + ", ".join(
            "`" + json.dumps(v, ensure_ascii=False) + "`" for v in schema["enum"]
        )
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(schema_type(s, defs) for s in schema[key])
    kind = schema.get("type")
    if isinstance(kind, list):
        text = " or ".join(str(k) for k in kind)
    elif kind == "array":
        items = schema.get("items")
        text = "array" if items is None else f"array of {schema_type(items, defs)}"
    elif kind == "object" and isinstance(schema.get("properties"), Mapping):
        # an inline object shows its members, so a table cell hides none of them
        required = set(schema.get("required", ()))
        members = ", ".join(
            f"`{name}`{'' if name in required else '?'}: {schema_type(sub, defs)}"
            for name, sub in schema["properties"].items()
        )
        text = f"object {{{members}}}"
    elif kind is not None:
        text = str(kind)
    else:
        text = "any JSON value"
    bounds = []
    for key, sign in (("minimum", ">="), ("maximum", "<="), ("exclusiveMinimum", ">")):
        if key in schema:
            bounds.append(f"{sign} {schema[key]}")
    if "minLength" in schema:
        bounds.append(f"length >= {schema['minLength']}")
    if "pattern" in schema:
        bounds.append(f"pattern `{schema['pattern']}`")
    if schema.get("uniqueItems"):
        bounds.append("unique items")
    if "maxProperties" in schema and schema["maxProperties"] == 0:
        bounds.append("no members")
    return text + (f" ({', '.join(bounds)})" if bounds else "")


def fields_table(rows: Sequence[tuple[str, str, str, str]]) -> str:
    """A table of `schema_fields` rows; the notes column only when some row has notes."""
    with_notes = any(note for *_, note in rows)
    headers = ["Member", "Type", "Required"] + (["Notes"] if with_notes else [])
    body = []
    for name, kind, required, note in rows:
        line = [f"`{name}`", cell(kind), required]
        if with_notes:
            line.append(cell(note))
        body.append(line)
    return table(headers, body)


def schema_fields(
    schema: Mapping[str, Any], defs: Mapping[str, Any] | None = None, *, prefix: str = ""
) -> list[tuple[str, str, str, str]]:
    """Rows (member, type, required, description) of an object schema, nested objects
    flattened with dotted names."""
    rows: list[tuple[str, str, str, str]] = []
    required = set(schema.get("required", ()))
    for name, sub in (schema.get("properties") or {}).items():
        full = prefix + name
        description = sub.get("description", "") if isinstance(sub, Mapping) else ""
        if isinstance(sub, Mapping) and "default" in sub:
            description = (description + " " if description else "") + (
                f"Default `{json.dumps(sub['default'])}`."
            )
        rows.append(
            (full, schema_type(sub, defs), "yes" if name in required else "no", description)
        )
        if isinstance(sub, Mapping) and sub.get("type") == "object" and "properties" in sub:
            rows += schema_fields(sub, defs, prefix=full + ".")
    return rows
