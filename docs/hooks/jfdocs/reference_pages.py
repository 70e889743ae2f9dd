"""Generated parts of the hand-written reference pages (pure).

The prose of the reference pages lives in Markdown under `docs/reference/` (store layout,
canonical text, compress.v2, driver protocol, error codes). Each generated part is a marker
line `<!-- jfsm:NAME -->` there, replaced at build time by `FRAGMENTS[NAME]()`; a value inside
a sentence is an inline marker, replaced by `VALUES[NAME]()`. Everything is read from
`spec/` through `jfsm.spec` and from the public definitions of `jfsm`. Each renderer knows the
documented shape of its file and falls back to a plain JSON rendering for anything it does
not know, so a new member in a spec file shows up on the site instead of being dropped.
Inconsistencies between the spec and the reference engine are shown as a red box on the page
(and fail the docs tests), never silently dropped.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jfsm.errors
import jfsm.text
from jfdocs.render import (
    cell,
    code,
    fields_table,
    json_block,
    json_text,
    prose,
    schema_fields,
    schema_type,
    table,
)
from jfsm.compressor import idempotency_key
from jfsm.jcs import canonicalize
from jfsm.spec import constants, layout, load_json, requirements, spec_dir

__all__ = ["FRAGMENTS", "VALUES"]

DECISIONS = "../decisions.md"
SPEC_FILES = "../spec"  # where the hook publishes spec/ (relative to docs/reference/)


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _details(title: str, body: str, kind: str = "abstract") -> str:
    indented = "".join(("    " + line if line else "") + "\n" for line in body.splitlines())
    return f'??? {kind} "{title}"\n\n{indented}\n'


def _download(relative: str) -> str:
    """A link to the published copy of `spec/<relative>`."""
    return f"[`spec/{relative}`]({SPEC_FILES}/{relative})"


def _schema_details(relative: str) -> str:
    """A collapsed JSON block of a spec file, titled with its download link."""
    body = f"Download: {_download(relative)}\n\n" + json_block(load_json(relative))
    return _details(relative.rsplit("/", 1)[-1], body)


def _danger(title: str, problems: list[str]) -> str:
    if not problems:
        return ""
    return f'\n!!! danger "{title}"\n' + "".join(f"    - {p}\n" for p in problems)


# --------------------------------------------------------------------------------------------
# store layout (spec/layout.json)
# --------------------------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"<([a-z]+)>")


def _store_requirements(key: str) -> list[str]:
    """STORE requirements whose statement names the key template (up to its placeholder)."""
    stem = key.split("<")[0].rstrip(".")
    return [
        r["id"] for r in requirements() if r["area"] == "STORE" and f"`{stem}" in r["statement"]
    ]


def _req_links(ids: list[str]) -> str:
    return ", ".join(f"[{r}](requirements.md#{r})" for r in ids)


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
                _req_links(_store_requirements(entry["key"])),
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
            _details(
                f"JSON Schema of {name} (from spec/layout.json)",
                json_block(record),
            )
        )
    return "\n".join(out)


def layout_schema() -> str:
    return _schema_details("layout.json") + _schema_details("schemas/layout.schema.json")


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
    return out + _danger(
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
    data = _load(path)
    renderer = _VECTOR_RENDERERS.get(data.get("kind"))
    head = (
        f"### `{path.name}` {{ #vectors-{path.stem} }}\n\n"
        f"Kind `{data.get('kind')}`, {len(data.get('cases', []))} cases "
        f"({_download('vectors/' + path.name)}). "
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
# compress.v2
# --------------------------------------------------------------------------------------------

_KNOWN_COMPRESS = {
    "$comment",
    "spec_version",
    "service",
    "endpoint",
    "request",
    "reply",
    "limits",
    "outcomes",
    "transport_failures",
    "refusal",
    "retry",
    "idempotency",
    "telemetry",
}


def _kv_table(data: Mapping[str, Any], headers: tuple[str, str] = ("Name", "Meaning")) -> str:
    return table(list(headers), [[f"`{k}`", cell(_plain(v), DECISIONS)] for k, v in data.items()])


def _plain(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(f"`{v}`" if isinstance(v, str) else json.dumps(v) for v in value)
    return "`" + json.dumps(value, ensure_ascii=False) + "`"


def _contract() -> dict[str, Any]:
    data = load_json("compress-v2.json")
    assert isinstance(data, dict)
    return data


def compress_comment() -> str:
    return prose(_contract().get("$comment", ""), DECISIONS) + "\n"


def compress_endpoint() -> str:
    data = _contract()
    endpoint, request = data["endpoint"], data["request"]
    return table(
        ["Aspect", "Value"],
        [
            ["Method", f"`{endpoint['method']}`"],
            ["URL", f"`{endpoint['url']}`"],
            ["Follows redirects", _plain(endpoint.get("follow_redirects"))],
            ["Request body", f"`{request['content_type']}`: {cell(request['encoding'])}"],
        ],
    )


def compress_request() -> str:
    """The request schema's members, then the contract's request rules."""
    request = _contract()["request"]
    schema = load_json(request["schema"])
    return (
        prose(schema.get("description", ""), DECISIONS)
        + "\n\n"
        + fields_table(schema_fields(schema, schema.get("$defs")))
        + "\nRules:\n\n"
        + "".join(f"- {prose(rule, DECISIONS)}\n" for rule in request.get("rules", []))
    )


def compress_headers() -> str:
    return table(
        ["Header", "Required", "Value or derivation", "Rule"],
        [
            [
                f"`{name}`",
                _plain(h.get("required")),
                code(h.get("derivation") or h.get("value", "")),
                cell(h.get("rule", "")),
            ]
            for name, h in _contract()["request"].get("headers", {}).items()
        ],
    )


def compress_reply() -> str:
    """The reply status, the reply schema's variants and the parsing rules."""
    reply = _contract()["reply"]
    schema = load_json(reply["schema"])
    out = [
        f"Only status **{reply['status']}** with a schema-valid body is a reply.\n",
        prose(schema.get("description", ""), DECISIONS) + "\n",
        table(
            ["Variant", "Meaning"],
            [[f"`{k}`", cell(v)] for k, v in reply.get("variants", {}).items()],
        ),
    ]
    for variant in schema.get("oneOf", []):
        out.append(f"**{variant.get('title', 'variant')}** body:\n")
        out.append(fields_table(schema_fields(variant)))
    out.append("Parsing:\n")
    out.append("".join(f"- {prose(p, DECISIONS)}\n" for p in reply.get("parsing", [])))
    return "\n".join(out)


def _section(member: str, headers: tuple[str, str]) -> Callable[[], str]:
    def render() -> str:
        return _kv_table(_contract().get(member, {}), headers)

    return render


def compress_telemetry() -> str:
    tele = _contract().get("telemetry", {})
    return (
        "One event per attempt ([JF-CALL-011](requirements.md#JF-CALL-011)) with: "
        + _plain(tele.get("per_attempt", []))
        + ". Never: "
        + _plain(tele.get("never", []))
        + " ([JF-CALL-012](requirements.md#JF-CALL-012)).\n"
    )


def compress_other() -> str:
    """Members of compress-v2.json this page does not know (nothing when there are none)."""
    unknown = {k: v for k, v in _contract().items() if k not in _KNOWN_COMPRESS}
    if not unknown:
        return ""
    return "## Other members of compress-v2.json\n\n" + json_block(unknown)


def compress_schemas() -> str:
    data = _contract()
    return (
        _schema_details("compress-v2.json")
        + _schema_details(data["request"]["schema"])
        + _schema_details(data["reply"]["schema"])
    )


def _idempotency_example() -> str:
    """The key of one example request, each step shown, cross-checked with the engine."""
    game, catalyst, epoch, through, retry = "game-1", None, 2, 7, 0
    text = "<user>\nhi\n</user>\n"
    text_hash = hashlib.sha256(text.encode("utf-8")).hexdigest()
    material = canonicalize([game, catalyst, epoch, through, text_hash, retry])
    key = "jfsm-" + hashlib.sha256(material.encode("utf-8")).hexdigest()
    engine_key = idempotency_key(game, catalyst, epoch, through, text, retry)
    problems = [] if key == engine_key else [f"the reference engine derives {engine_key}"]
    return (
        '!!! example "Idempotency key, worked"\n'
        f"    For gameId `{game}`, no catalystId, epoch `{epoch}`, throughSeq `{through}`, "
        f"retry `{retry}` and input.text {code(json_text(text))}:\n\n"
        f"    - SHA-256 of the text's UTF-8, hex: `{text_hash}`\n"
        f"    - JCS of the array: `{material}`\n"
        f"    - key: `{key}` (the reference engine's `jfsm.compressor.idempotency_key` "
        "gives the same)\n" + _danger("Idempotency key disagrees", problems)
    )


# --------------------------------------------------------------------------------------------
# driver protocol
# --------------------------------------------------------------------------------------------

DRIVER = "driver"


def _resolve(ref: str, driver: Path) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(schema, defs, name) for `file.json#/$defs/name`."""
    file, _, pointer = ref.partition("#")
    doc = _load(driver / file)
    name = pointer.rsplit("/", 1)[-1]
    defs = doc.get("$defs", {})
    return defs.get(name, {}), defs, name


def _object_table(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> str:
    seen = 0
    while "$ref" in schema and seen < 5:
        schema = defs.get(str(schema["$ref"]).rsplit("/", 1)[-1], {})
        seen += 1
    if schema.get("type") == "array":
        return f"An array of {schema_type(schema.get('items', True), defs)}.\n"
    fields = schema_fields(schema, defs)
    if not fields:
        if schema.get("maxProperties") == 0:
            return "An empty object `{}`.\n"
        return "An object; no member is required (`{}`).\n"
    closed = schema.get("additionalProperties") is False
    return fields_table(fields) + (
        "\nNo other member is allowed.\n"
        if closed
        else "\nOther members may be present and are ignored.\n"
    )


def _registry() -> dict[str, Any]:
    data = load_json(f"{DRIVER}/protocol.json")
    assert isinstance(data, dict)
    return data


def driver_version() -> str:
    protocol = _registry()
    return (
        f"Protocol version **{protocol.get('protocol')}** (spec "
        f"{protocol.get('spec_version', '?')}). "
        + prose(protocol.get("$comment", ""), DECISIONS)
        + "\n"
    )


def driver_transports() -> str:
    return _kv_table(_registry().get("transports", {}), ("Transport", "How"))


def driver_messages() -> str:
    """The envelope schema's description and one table per message kind."""
    envelope = load_json(f"{DRIVER}/envelope.schema.json")
    defs = envelope.get("$defs", {})
    out = [prose(envelope.get("description", ""), DECISIONS) + "\n"]
    for name in ("request", "success", "failure", "error"):
        if name in defs:
            out.append(f"### {name.capitalize()} {{ #envelope-{name} }}\n")
            out.append(_object_table(defs[name], defs))
    return "\n".join(out)


def driver_rules() -> str:
    return "".join(f"- {prose(r, DECISIONS)}\n" for r in _registry().get("rules", []))


def driver_error_codes() -> str:
    protocol = _registry()
    return (
        "An error reply's `error.code` is one of "
        + ", ".join(f"`{c}`" for c in protocol.get("error_codes", []))
        + " (the engine's stable codes, see [error codes](errors.md)), or a "
        "protocol-level code:\n\n"
        + _kv_table(protocol.get("protocol_error_codes", {}), ("Code", "Meaning"))
    )


def driver_ops() -> str:
    """The op table, then one section per op with its argument and result shapes."""
    ops: list[dict[str, Any]] = _registry().get("ops", [])
    ops_schema = load_json(f"{DRIVER}/ops.schema.json")
    driver = spec_dir() / DRIVER
    out = [
        table(
            ["Op", "Summary", "Requirements exercised"],
            [
                [
                    f"[`{op['name']}`](#op-{op['name'].replace('_', '-')})",
                    cell(op.get("summary", "")),
                    _req_links(op.get("requirements", [])),
                ]
                for op in ops
            ],
        ),
        "\n" + prose(ops_schema.get("description", ""), DECISIONS) + "\n",
    ]
    for op in ops:
        anchor = "op-" + op["name"].replace("_", "-")
        out.append(f"### `{op['name']}` {{ #{anchor} }}\n")
        if op.get("summary"):
            out.append(prose(op["summary"], DECISIONS) + "\n")
        for label, ref in (("Arguments", op.get("args")), ("Result", op.get("result"))):
            if not ref:
                continue
            try:
                schema, defs, _ = _resolve(ref, driver)
            except (OSError, ValueError) as exc:
                out.append(f"**{label}**: `{ref}` could not be read ({exc}).\n")
                continue
            out.append(f"**{label}** (`{ref.split('#')[0]}` `{ref.rsplit('/', 1)[-1]}`):\n")
            out.append(_object_table(schema, defs))
    return "\n".join(out)


def driver_shared() -> str:
    """The shared definitions of ops.schema.json (neither args nor results)."""
    ops_schema = load_json(f"{DRIVER}/ops.schema.json")
    defs = ops_schema.get("$defs", {})
    out = []
    for name, schema in defs.items():
        if name.endswith(("_args", "_result")):
            continue
        out.append(f"### `{name}` {{ #def-{name.replace('_', '-')} }}\n")
        if isinstance(schema, Mapping) and schema.get("description"):
            out.append(prose(schema["description"], DECISIONS) + "\n")
        if isinstance(schema, Mapping) and "properties" in schema:
            out.append(_object_table(schema, defs))
        else:
            out.append(schema_type(schema, defs) + "\n")
    return "\n".join(out)


def driver_schemas() -> str:
    names = sorted(p.name for p in (spec_dir() / DRIVER).glob("*.json"))
    return "".join(_schema_details(f"{DRIVER}/{name}") for name in names)


# --------------------------------------------------------------------------------------------
# error codes
# --------------------------------------------------------------------------------------------


def _error_classes() -> dict[str, type[jfsm.errors.JfsmError]]:
    classes = [
        getattr(jfsm.errors, name)
        for name in jfsm.errors.__all__
        if isinstance(getattr(jfsm.errors, name), type)
        and issubclass(getattr(jfsm.errors, name), jfsm.errors.JfsmError)
        and getattr(jfsm.errors, name) is not jfsm.errors.JfsmError
    ]
    return {cls.code: cls for cls in classes}


def error_codes() -> str:
    """The stable codes of `spec/constants.json` with the reference engine's classes."""
    codes = list(constants().error_codes)
    by_code = _error_classes()
    registry = _registry()
    problems = []
    if set(by_code) != set(codes):
        problems.append(
            f"jfsm.errors codes {sorted(by_code)} differ from spec/constants.json {codes}"
        )
    if registry.get("error_codes") and list(registry["error_codes"]) != codes:
        problems.append("spec/driver/protocol.json error_codes differ from spec/constants.json")
    rows = []
    for code_ in codes:
        cls = by_code.get(code_)
        rows.append(
            [
                f"`{code_}`",
                f"`{cls.__name__}`" if cls else "*missing*",
                "yes" if cls is not None and cls.retryable else "no",
                cell((inspect.getdoc(cls) or "").replace("\n\n", " ")) if cls else "",
            ]
        )
    out = table(["Code", "Reference engine class", "Retryable", "Meaning"], rows)
    return out + _danger("Inconsistent error codes", problems)


def protocol_error_codes() -> str:
    return _kv_table(_registry().get("protocol_error_codes", {}), ("Code", "Meaning"))


def error_details() -> str:
    """The protocol rules about error details, as one inline paragraph."""
    rules = [r for r in _registry().get("rules", []) if "details" in r]
    return " ".join(prose(r, DECISIONS) for r in rules)


def exception_tree() -> str:
    doc = inspect.getdoc(jfsm.errors) or ""
    tree = doc.split("```", 2)[1].strip("\n") if "```" in doc else ""
    return "```text\n" + tree + "\n```\n"


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
            doc = _load(path)
            if isinstance(doc, dict) and "$id" in doc:
                schema_id = f"`{doc['$id']}`"
        rows.append([_download(relative), schema_id])
    return table(["File", "JSON Schema `$id`"], rows)


# --------------------------------------------------------------------------------------------
# the registry of markers
# --------------------------------------------------------------------------------------------

FRAGMENTS: dict[str, Callable[[], str]] = {
    "layout-keys": layout_keys,
    "layout-records": layout_records,
    "layout-schema": layout_schema,
    "canonical-blocks": canonical_blocks,
    "length-formula": length_formula,
    "thresholds": thresholds,
    "vectors": vectors,
    "compress-comment": compress_comment,
    "compress-endpoint": compress_endpoint,
    "compress-request": compress_request,
    "compress-headers": compress_headers,
    "idempotency-example": _idempotency_example,
    "compress-reply": compress_reply,
    "compress-outcomes": _section("outcomes", ("Outcome", "When")),
    "compress-transport-failures": _section("transport_failures", ("Code", "When")),
    "compress-refusal": _section("refusal", ("Aspect", "Rule")),
    "compress-limits": _section("limits", ("Limit", "Rule")),
    "compress-retry": _section("retry", ("Setting", "Value")),
    "compress-idempotency": _section("idempotency", ("Side", "Rule")),
    "compress-telemetry": compress_telemetry,
    "compress-other": compress_other,
    "compress-schemas": compress_schemas,
    "driver-version": driver_version,
    "driver-transports": driver_transports,
    "driver-messages": driver_messages,
    "driver-rules": driver_rules,
    "driver-error-codes": driver_error_codes,
    "driver-ops": driver_ops,
    "driver-shared": driver_shared,
    "driver-schemas": driver_schemas,
    "error-codes": error_codes,
    "protocol-error-codes": protocol_error_codes,
    "exception-tree": exception_tree,
    "spec-downloads": spec_downloads,
}
"""Block markers: each stands alone on its line."""

VALUES: dict[str, Callable[[], str]] = {
    "game-threshold": lambda: f"{constants().game_threshold:,}",
    "catalyst-threshold": lambda: f"{constants().catalyst_threshold:,}",
    "quota-bytes": lambda: f"{constants().quota_bytes:,}",
    "quota-mib": lambda: f"{constants().quota_bytes / 1048576:g}",
    "summary-envelope": lambda: str(constants().summary_envelope),
    "exchange-envelope": lambda: str(constants().exchange_envelope),
    "reserved-prefix": lambda: f"`{constants().reserved_key_prefix}`",
    "chunk-origins": lambda: ", ".join(f"`{o}`" for o in constants().chunk_origins),
    "game-kind": lambda: f"`{constants().game_kind}`",
    "catalyst-kind": lambda: f"`{constants().catalyst_kind}`",
    "spec-version": lambda: f"`{constants().spec_version}`",
    "error-details": error_details,
}
"""Inline markers: a value inside a sentence."""
