"""Fragments of the compress.v2, driver-protocol and error-code pages (pure).

Read from `spec/compress-v2.json`, `spec/driver/` and `spec/constants.json` through
`jfsm.spec`, with the reference engine's idempotency key and exception tree shown and
cross-checked.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jfsm.errors
from jfdocs.ref_common import (
    DECISIONS,
    danger,
    kv_table,
    load,
    plain,
    req_links,
    schema_details,
)
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
from jfsm.spec import constants, load_json, requirements, spec_dir

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
            ["Follows redirects", plain(endpoint.get("follow_redirects"))],
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
                plain(h.get("required")),
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


def section(member: str, headers: tuple[str, str]) -> Callable[[], str]:
    def render() -> str:
        return kv_table(_contract().get(member, {}), headers)

    return render


def compress_telemetry() -> str:
    tele = _contract().get("telemetry", {})
    return (
        "One event per attempt ([JF-CALL-011](requirements.md#JF-CALL-011)) with: "
        + plain(tele.get("per_attempt", []))
        + ". Never: "
        + plain(tele.get("never", []))
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
        schema_details("compress-v2.json")
        + schema_details(data["request"]["schema"])
        + schema_details(data["reply"]["schema"])
    )


def idempotency_example() -> str:
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
        "gives the same)\n" + danger("Idempotency key disagrees", problems)
    )


# --------------------------------------------------------------------------------------------
# driver protocol
# --------------------------------------------------------------------------------------------

DRIVER = "driver"


def _resolve(ref: str, driver: Path) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(schema, defs, name) for `file.json#/$defs/name`."""
    file, _, pointer = ref.partition("#")
    doc = load(driver / file)
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
    return kv_table(_registry().get("transports", {}), ("Transport", "How"))


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
        + kv_table(protocol.get("protocol_error_codes", {}), ("Code", "Meaning"))
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
                    req_links(op.get("requirements", [])),
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
    return "".join(schema_details(f"{DRIVER}/{name}") for name in names)


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
    return out + danger("Inconsistent error codes", problems)


def protocol_error_codes() -> str:
    return kv_table(_registry().get("protocol_error_codes", {}), ("Code", "Meaning"))


def error_details() -> str:
    """The protocol rules about error details, as one inline paragraph."""
    rules = [r for r in _registry().get("rules", []) if "details" in r]
    return " ".join(prose(r, DECISIONS) for r in rules)


def exception_tree() -> str:
    doc = inspect.getdoc(jfsm.errors) or ""
    tree = doc.split("```", 2)[1].strip("\n") if "```" in doc else ""
    return "```text\n" + tree + "\n```\n"


# --------------------------------------------------------------------------------------------
# limits and the HTTP transport (spec/constants.json `limits`, spec/driver/protocol.json `http`)
# --------------------------------------------------------------------------------------------


def limits_table() -> str:
    """The spec's limits (`constants.json` `limits`, described by its schema) as a table."""
    limits = load_json("constants.json").get("limits")
    if not limits:
        return ""
    schema = load_json("schemas/constants.schema.json")
    described = schema["properties"].get("limits", {})
    about = described.get("properties", {})
    rows = [
        [f"`{name}`", code(json.dumps(value)), cell(about.get(name, {}).get("description", ""))]
        for name, value in limits.items()
    ]
    return (
        prose(described.get("description", ""), DECISIONS)
        + " Anything past a limit is refused with `invalid_input` and changes nothing "
        "(`spec/constants.json`).\n\n" + table(["Limit", "Value", "What it bounds"], rows)
    )


def driver_http() -> str:
    """The HTTP transport's rules and the reference driver's bounds."""
    http = _registry().get("http")
    if not http:
        return ""
    out = ["".join(f"- {prose(r, DECISIONS)}\n" for r in http.get("rules", []))]
    limits = http.get("limits", {})
    if limits:
        out.append(
            "\nThe reference driver's bounds (`spec/driver/protocol.json` `http.limits`):\n\n"
            + table(
                ["Limit", "Value", "Meaning"],
                [
                    [f"`{name}`", code(json.dumps(item["value"])), cell(item["description"])]
                    for name, item in limits.items()
                ],
            )
        )
    return "\n".join(out)


def codes_due() -> str:
    """Per error code, the requirements whose statement names it (when each code is due)."""
    rows = []
    for code_ in constants().error_codes:
        named = [r for r in requirements() if f"`{code_}`" in r["statement"]]
        if named:
            links = "<br>".join(
                f"[{r['id']}](requirements.md#{r['id']}) {cell(r['title'])}" for r in named
            )
            rows.append([f"`{code_}`", links])
    return table(["Code", "Requirements"], rows) if rows else ""
