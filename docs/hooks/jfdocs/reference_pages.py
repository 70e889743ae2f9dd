"""Reference pages generated from `spec/` and the public functions of `jfsm` (pure).

Store layout, canonical text and footprint (with every vector), the compress.v2 contract,
the driver protocol and the error codes. Each renderer knows the documented shape of its
file and falls back to a plain JSON rendering for anything it does not know, so a new member
in a spec file shows up on the site instead of being dropped.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jfsm.errors
import jfsm.layout
import jfsm.records
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

__all__ = ["pages"]

DECISIONS = "../decisions.md"


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _generated(source: str) -> str:
    return f"<!-- Generated at build time from {source} by docs/hooks. Do not edit. -->\n"


def _details(title: str, body: str, kind: str = "abstract") -> str:
    indented = "".join(("    " + line if line else "") + "\n" for line in body.splitlines())
    return f'??? {kind} "{title}"\n\n{indented}\n'


# --------------------------------------------------------------------------------------------
# store layout
# --------------------------------------------------------------------------------------------

_LAYOUT_LINE = re.compile(r"^(jf\S+)\s+(.+?)\s*$")


def _layout_rows() -> list[tuple[str, str]]:
    """(key pattern, record) pairs from the key table in `jfsm.layout`'s docstring."""
    doc = inspect.getdoc(jfsm.layout) or ""
    block = doc.split("```", 2)[1] if "```" in doc else ""
    rows = []
    for line in block.splitlines():
        match = _LAYOUT_LINE.match(line.strip())
        if match:
            rows.append((match.group(1), match.group(2)))
    return rows


def _check_layout(rows: list[tuple[str, str]]) -> list[str]:
    """Differences between the docstring's key table and what the layout functions build."""
    scene = jfsm.layout.scene_keys("SCENE")
    built = {
        jfsm.layout.GAME.meta,
        jfsm.layout.GAME.summary,
        jfsm.layout.GAME.chunk("<seq>"),  # type: ignore[arg-type]
        scene.meta.replace("SCENE", "<id>"),
        scene.summary.replace("SCENE", "<id>"),
        scene.chunk("<seq>").replace("SCENE", "<id>"),  # type: ignore[arg-type]
        jfsm.layout.ARCHIVES,
        jfsm.layout.round_key("<n>"),  # type: ignore[arg-type]
    }
    documented = {key for key, _ in rows}
    problems = [f"`{k}` is built by jfsm.layout but not in its table" for k in built - documented]
    problems += [f"`{k}` is in jfsm.layout's table but not built" for k in documented - built]
    return problems


def _record_fields(model: type[Any]) -> str:
    schema = model.model_json_schema(by_alias=True)
    rows = []
    for name, sub in schema.get("properties", {}).items():
        options = sub.get("anyOf", [])
        nullable = any(o.get("type") == "null" for o in options)
        if nullable:
            shown = schema_type(next(o for o in options if o.get("type") != "null"))
            presence = "only when it has a value"
        else:
            shown = schema_type({k: v for k, v in sub.items() if k not in ("title", "default")})
            presence = "always"
        if not nullable and "default" in sub:
            shown += f"; default `{json.dumps(sub['default'])}`"
        rows.append([f"`{name}`", shown, presence])
    return table(["Member", "Type", "Present"], rows)


def _camel_names(doc: str, model: type[Any]) -> str:
    """Python field names in backticks (`after_round`) replaced by the stored names."""
    for field, info in model.model_fields.items():
        alias = info.alias or field
        doc = doc.replace(f"`{field}`", f"`{alias}`").replace(f"`{field} ", f"`{alias} ")
        doc = doc.replace(f" {field}`", f" {alias}`")
    return doc


def _store_requirements(spec: Path, key: str) -> list[str]:
    from jfdocs.spec_pages import load_requirements

    return [
        r["id"]
        for r in load_requirements(spec)["requirement"]
        if r["area"] == "STORE" and f"`{key}" in r["statement"]
    ]


def store_layout_page(spec: Path) -> str:
    constants = _load(spec / "constants.json")
    rows = _layout_rows()
    problems = _check_layout(rows)
    models = {
        name: getattr(jfsm.records, name)
        for name in jfsm.records.__all__
        if hasattr(getattr(jfsm.records, name), "model_json_schema")
    }
    out = [
        "# Store layout\n",
        _generated(
            "jfsm.layout (key table and key functions), jfsm.records (model JSON "
            "schemas) and spec/constants.json"
        ),
        "Agent memory lives in the game's `workflowStore`, a JSON object from key to value, "
        "next to the game's own data. Each value is one record; every record is a closed JSON "
        "object (no other members). Member names are camelCase.\n",
        f"Every key beginning with `{constants['reserved_key_prefix']}` is reserved for the "
        "workflow: an ordinary write or a cheat that sets or deletes such a key is refused "
        "with `invalid_input` ([JF-STORE-008](requirements.md#JF-STORE-008)); any other key is "
        "game data ([JF-STORE-009](requirements.md#JF-STORE-009)). A newly created game holds "
        "no reserved key at all ([JF-HIST-009](requirements.md#JF-HIST-009)).\n",
        "## Keys\n",
    ]
    key_rows = []
    for key, record in rows:
        model_name = record.strip("{}").split(":")[-1].strip()
        target = f"[`{record}`](#{model_name.lower()})" if model_name in models else f"`{record}`"
        stem = key.split("<")[0].rstrip(".")
        reqs = _store_requirements(spec, stem)
        key_rows.append(
            [
                f"`{key}`",
                target,
                ", ".join(f"[{r}](requirements.md#{r})" for r in reqs),
            ]
        )
    out.append(table(["Key", "Record", "Requirements"], key_rows))
    out.append(
        "\n`<seq>` and `<n>` are decimal integers without leading zeros; `<id>` is a scene id "
        "(1 to 64 characters of `A-Z a-z 0-9 _ -`). `jfCatalystArchives` is a single key whose "
        "value maps each archived scene id to its record (refinement "
        "[R1](../decisions.md#r1)).\n"
    )
    if problems:
        out.append(
            '!!! danger "Layout table out of date"\n' + "".join(f"    - {p}\n" for p in problems)
        )
    out.append("## Records\n")
    out.append(
        "Generated from the reference engine's frozen pydantic models "
        "(`model_json_schema(by_alias=True)`). *Present* says whether the member is always "
        "stored or only when it has a value: a member without a value is omitted, never "
        "stored as `null`.\n"
    )
    documented = []
    for _, rec in rows:
        name = rec.strip("{}").split(":")[-1].strip()
        if name in models and name not in documented:
            documented.append(name)
    for name in documented:
        model = models[name]
        doc = _camel_names(inspect.getdoc(model) or "", model)
        out.append(f"### {name} {{ #{name.lower()} }}\n")
        out.append(prose(doc, DECISIONS) + "\n")
        out.append(_record_fields(model))
        out.append(
            _details(
                f"JSON Schema of {name}",
                json_block(model.model_json_schema(by_alias=True)),
            )
        )
    chunk_origins = constants.get("chunk_origins", [])
    out.append("## Chunk origins\n")
    out.append(
        "A chunk's `origin` is one of "
        + ", ".join(f"`{o}`" for o in chunk_origins)
        + " (`spec/constants.json`): a recorded round, a published scene outcome, an "
        "intervened round's sanitized exchange, or a round imported by simple-to-live "
        "conversion. The worked example shows every key in a live store: "
        "[worked example](../concepts/worked-example.md).\n"
    )
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# canonical text, footprint, vectors
# --------------------------------------------------------------------------------------------


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
        f"Kind `{data.get('kind')}`, {len(data.get('cases', []))} cases. "
        + prose(data.get("description", ""), DECISIONS)
        + "\n\n"
    )
    if renderer is None:
        return head + json_block(data.get("cases", []))
    return head + renderer(data)


def canonical_text_page(spec: Path) -> str:
    constants = _load(spec / "constants.json")
    env = constants["envelopes"]
    summary_block = jfsm.text.summary_block("S")
    exchange_block = jfsm.text.exchange_block("U", "A")
    vectors = sorted((spec / "vectors").glob("*.json"))
    problems = []
    if env["summary"] != jfsm.text.SUMMARY_ENVELOPE:
        problems.append(f"jfsm.text.SUMMARY_ENVELOPE = {jfsm.text.SUMMARY_ENVELOPE}")
    if env["exchange"] != jfsm.text.EXCHANGE_ENVELOPE:
        problems.append(f"jfsm.text.EXCHANGE_ENVELOPE = {jfsm.text.EXCHANGE_ENVELOPE}")
    quota = constants["quota_bytes"]
    out = [
        "# Canonical text and footprint\n",
        _generated("spec/constants.json, spec/vectors/ and jfsm.text"),
        "Two measures drive agent memory: the **canonical length** of a stack, in code "
        "points, decides when it compresses; the **footprint** of the store, in bytes, "
        "decides whether a change is allowed at all.\n",
        "## Characters are code points\n",
        "Every character count of the workflow counts **Unicode code points** (scalar "
        "values): canonical lengths, thresholds, the revealed count of an intervene, "
        "`input.chars` and the size comparison of a compression result "
        "([JF-TEXT-003](requirements.md#JF-TEXT-003)). A text containing a lone surrogate is "
        "not a text: it is refused with `invalid_input` and nothing is written "
        "([JF-TEXT-001](requirements.md#JF-TEXT-001)). Texts are never normalized or trimmed "
        "([JF-TEXT-002](requirements.md#JF-TEXT-002)).\n",
        '!!! warning "JavaScript and Java strings"\n'
        "    `String.prototype.length` counts UTF-16 code units: an astral character such as "
        "😀 counts 2. Count with `[...text].length` or a loop over code points instead. "
        "The vectors below give the wrong counts next to the right one so that a test can "
        "catch the mistake.\n",
        "## Canonical text of a stack\n",
        "The canonical text is the one string that is both measured against the threshold "
        "and submitted to compress.v2 ([JF-TEXT-004](requirements.md#JF-TEXT-004), "
        "[JF-CALL-003](requirements.md#JF-CALL-003)). It is the summary block, if the stack "
        "has a summary `S`, followed by one block per exact chunk in ascending `seq` order; "
        "the canonical text of an empty stack is the empty string. Shown here as JSON "
        "strings (rendered by the reference engine's `jfsm.text.summary_block` and "
        "`exchange_block`):\n",
        table(
            ["Block", "Text (JSON string)", "Envelope (code points)"],
            [
                ["summary `S`", code(json_text(summary_block)), str(env["summary"])],
                ["exchange `U`, `A`", code(json_text(exchange_block)), str(env["exchange"])],
            ],
        ),
        "\nNothing inside a text is escaped: a user text that reads `</user>` is copied as "
        "it is. Because the envelopes are constant, the length is additive:\n",
        "```text\n"
        f"length = ({env['summary']} + len(S) if summary) "
        f"+ Σ over chunks ({env['exchange']} + len(U) + len(A))\n"
        "```\n",
        "so an implementation can keep it up to date in constant time per change "
        "([JF-TEXT-005](requirements.md#JF-TEXT-005)).\n",
        "## When compression is due\n",
        "Before a generation, a stack with no compression in flight starts one if and only "
        "if its canonical length is **strictly greater** than its threshold and it holds at "
        "least one exact chunk ([JF-COMP-001](requirements.md#JF-COMP-001)):\n",
        table(
            ["Stack", "Threshold (code points)", "compress.v2 kind"],
            [
                ["game", f"{constants['thresholds']['game']:,}", f"`{constants['kinds']['game']}`"],
                [
                    "catalyst scene",
                    f"{constants['thresholds']['catalyst']:,}",
                    f"`{constants['kinds']['catalyst']}`",
                ],
            ],
        ),
        "\nThe only other way a compression starts is the forced compression of an "
        "[intervene](machines/intervene_retry.md).\n",
        "## Footprint and quota\n",
        "The footprint is the number of UTF-8 bytes of the RFC 8785 (JCS) serialization of "
        "the store object plus that of the change-log array. A change is allowed only if "
        f"the footprint **after** it is at most the quota of **{quota:,} bytes** "
        f"({quota / 1048576:g} MiB) ([JF-QUOTA-001](requirements.md#JF-QUOTA-001)). Every "
        "writer checks this before writing anything, on the post-state alone: a summary "
        "publication is judged with the represented chunks already deleted "
        "([JF-ATOM-002](requirements.md#JF-ATOM-002), "
        "[JF-ATOM-003](requirements.md#JF-ATOM-003)).\n",
        "JCS in brief ([RFC 8785](https://www.rfc-editor.org/rfc/rfc8785)): object members "
        "sorted by key compared as UTF-16 code units, no white space, strings escaping only "
        '`"`, `\\` and the C0 controls (`\\b \\t \\n \\f \\r` short, others `\\u00xx`), '
        "numbers in ECMAScript `Number.prototype.toString` form.\n",
        "## The optimized change log\n",
        "The change log is the net difference between the store at the last checkpoint "
        "and the store now: one entry per key that differs, sorted by key in JCS order "
        "([JF-QUOTA-005](requirements.md#JF-QUOTA-005) to "
        "[JF-QUOTA-008](requirements.md#JF-QUOTA-008)):\n",
        "```text\n"
        '{"key": "<key>", "op": "set", "value": <current value>}\n'
        '{"key": "<key>", "op": "delete"}\n'
        "```\n",
        "A key created and deleted since the checkpoint has no entry, nor has a key whose "
        "value is JCS-identical to its checkpoint value. A checkpoint makes the current store "
        "the base and empties the log.\n",
    ]
    if problems:
        out.append(
            '!!! danger "Envelope constants disagree"\n'
            + "".join(f"    - {p} but spec/constants.json says otherwise\n" for p in problems)
        )
    out.append("## Test vectors\n")
    out.append(
        "Language-neutral cases in `spec/vectors/` (schema "
        "`spec/schemas/vectors.schema.json`). Texts in JSON-string form; `x × n` means the "
        "text `x` repeated `n` times.\n"
    )
    for path in vectors:
        out.append(_vector_section(path))
    return "\n".join(out)


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


def compress_page(spec: Path) -> str:
    data = _load(spec / "compress-v2.json")
    request_schema = _load(spec / data["request"]["schema"])
    reply_schema = _load(spec / data["reply"]["schema"])
    endpoint = data["endpoint"]
    request = data["request"]
    reply = data["reply"]
    out = [
        "# The compress.v2 contract\n",
        _generated(
            "spec/compress-v2.json, spec/schemas/compress-request.schema.json and "
            "spec/schemas/compress-reply.schema.json"
        ),
        prose(data.get("$comment", ""), DECISIONS) + "\n",
        "The workflow owns stack shape, canonical text, thresholds and publication; the "
        "executor only carries one request to the platform's compression service and reports "
        "what came back. Model choice, prompting, billing and quality stay behind the "
        "service.\n",
        "## Endpoint\n",
        table(
            ["Aspect", "Value"],
            [
                ["Method", f"`{endpoint['method']}`"],
                ["URL", f"`{endpoint['url']}`"],
                ["Follows redirects", _plain(endpoint.get("follow_redirects"))],
                ["Request body", f"`{request['content_type']}`: {cell(request['encoding'])}"],
            ],
        ),
        "\n## Request\n",
        prose(request_schema.get("description", ""), DECISIONS) + "\n",
        fields_table(schema_fields(request_schema, request_schema.get("$defs"))),
        "\nA request for the game stack has kind `paxhistoria.game-agent-stack.v1` and no "
        "`scope.catalystId`; a request for a scene's stack has kind "
        "`paxhistoria.catalyst-agent-stack.v1` and `scope.catalystId` = the scene id "
        "(enforced by the schema's conditionals; [JF-CALL-002](requirements.md#JF-CALL-002)).\n",
        "Rules:\n",
        "".join(f"- {prose(rule, DECISIONS)}\n" for rule in request.get("rules", [])),
        "\n### Headers\n",
        table(
            ["Header", "Required", "Value or derivation", "Rule"],
            [
                [
                    f"`{name}`",
                    _plain(h.get("required")),
                    code(h.get("derivation") or h.get("value", "")),
                    cell(h.get("rule", "")),
                ]
                for name, h in request.get("headers", {}).items()
            ],
        ),
        _idempotency_example(),
        "\n## Reply\n",
        f"Only status **{reply['status']}** with a schema-valid body is a reply.\n",
        prose(reply_schema.get("description", ""), DECISIONS) + "\n",
        table(
            ["Variant", "Meaning"],
            [[f"`{k}`", cell(v)] for k, v in reply.get("variants", {}).items()],
        ),
        "\n",
    ]
    for variant in reply_schema.get("oneOf", []):
        out.append(f"**{variant.get('title', 'variant')}** body:\n")
        out.append(fields_table(schema_fields(variant)))
        out.append("")
    out.append("Parsing:\n")
    out.append("".join(f"- {prose(p, DECISIONS)}\n" for p in reply.get("parsing", [])))
    out.append("\n## Outcomes of one attempt\n")
    out.append(_kv_table(data.get("outcomes", {}), ("Outcome", "When")))
    out.append("\n### Transport failure codes\n")
    out.append(_kv_table(data.get("transport_failures", {}), ("Code", "When")))
    if "refusal" in data:
        out.append("\n### Refusals\n")
        out.append(_kv_table(data["refusal"], ("Aspect", "Rule")))
    if "limits" in data:
        out.append("\n## Limits\n")
        out.append(_kv_table(data["limits"], ("Limit", "Rule")))
    if "retry" in data:
        out.append("\n## Retries\n")
        out.append(_kv_table(data["retry"], ("Setting", "Value")))
    if "idempotency" in data:
        out.append("\n## Idempotency and call id\n")
        out.append(_kv_table(data["idempotency"], ("Side", "Rule")))
    if "telemetry" in data:
        tele = data["telemetry"]
        out.append("\n## Telemetry\n")
        out.append(
            "One event per attempt ([JF-CALL-011](requirements.md#JF-CALL-011)) with: "
            + _plain(tele.get("per_attempt", []))
            + ". Never: "
            + _plain(tele.get("never", []))
            + " ([JF-CALL-012](requirements.md#JF-CALL-012)).\n"
        )
    out.append(
        "\n## What the workflow decides after a reply\n\n"
        "The service's reply is only the start: an `ok` summary that is empty or white space "
        "ends as `empty`, one with at least as many code points as the submitted text as "
        "`not_smaller`, a reply for a stack that was rebuilt or changed meanwhile as `stale`, "
        "and a publication that would exceed the quota as `quota` "
        "([JF-COMP-006](requirements.md#JF-COMP-006) to "
        "[JF-COMP-011](requirements.md#JF-COMP-011)). Every failure leaves every exact "
        "exchange and the summary untouched. See the "
        "[stack compression machine](machines/stack_compression.md).\n"
    )
    unknown = {k: v for k, v in data.items() if k not in _KNOWN_COMPRESS}
    if unknown:
        out.append("\n## Other members of compress-v2.json\n")
        out.append(json_block(unknown))
    out.append("\n## Schemas\n")
    out.append(_details("compress-request.schema.json", json_block(request_schema)))
    out.append(_details("compress-reply.schema.json", json_block(reply_schema)))
    return "\n".join(out)


def _idempotency_example() -> str:
    game, catalyst, epoch, through, text = "game-1", None, 2, 7, "<user>\nhi\n</user>\n"
    text_hash = hashlib.sha256(text.encode("utf-8")).hexdigest()
    material = canonicalize([game, catalyst, epoch, through, text_hash, 0])
    key = idempotency_key(game, catalyst, epoch, through, text)
    return (
        '\n!!! example "Idempotency key, worked (computed by the reference engine)"\n'
        f"    For gameId `{game}`, no catalystId, epoch `{epoch}`, throughSeq `{through}`, "
        f"input.text {code(json_text(text))} and retry `0` (a first ask):\n\n"
        f"    - SHA-256 of the text's UTF-8, hex: `{text_hash}`\n"
        f"    - JCS of the array: `{material}`\n"
        f"    - key: `{key}`\n"
    )


# --------------------------------------------------------------------------------------------
# driver protocol
# --------------------------------------------------------------------------------------------


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


def driver_page(spec: Path) -> str:
    driver = spec / "driver"
    out = ["# Driver protocol\n"]
    if not driver.is_dir():
        return out[0] + '\n!!! info "Not yet specified"\n    `spec/driver/` does not exist yet.\n'
    files = sorted(p.name for p in driver.glob("*.json"))
    out.append(_generated("spec/driver/ (" + ", ".join(files) + ")"))
    out.append(
        "The conformance suite drives an implementation through a **driver**: a small "
        "adapter the implementer writes, which turns protocol messages into calls of the "
        "implementation and answers with results or typed errors. The "
        "[implementer's guide](../guide/implementers.md) shows a complete skeleton.\n"
    )
    protocol_path = driver / "protocol.json"
    envelope_path = driver / "envelope.schema.json"
    ops_path = driver / "ops.schema.json"
    protocol = _load(protocol_path) if protocol_path.is_file() else None
    envelope = _load(envelope_path) if envelope_path.is_file() else None
    ops_schema = _load(ops_path) if ops_path.is_file() else None
    if protocol is not None:
        out.append(
            f"Protocol version **{protocol.get('protocol')}** (spec "
            f"{protocol.get('spec_version', '?')}). "
            + prose(protocol.get("$comment", ""), DECISIONS)
            + "\n"
        )
        if protocol.get("transports"):
            out.append("## Transports\n")
            out.append(_kv_table(protocol["transports"], ("Transport", "How")))
    else:
        out.append(
            '!!! info "No registry yet"\n    `spec/driver/protocol.json` does not exist '
            "yet; the op list below is derived from `ops.schema.json`.\n"
        )
    if envelope is not None:
        out.append("\n## Messages\n")
        out.append(prose(envelope.get("description", ""), DECISIONS) + "\n")
        defs = envelope.get("$defs", {})
        for name in ("request", "success", "failure", "error"):
            if name in defs:
                out.append(f"### {name.capitalize()} {{ #envelope-{name} }}\n")
                out.append(_object_table(defs[name], defs))
        out.append(
            '```json title="Example exchange"\n'
            '{"id": 1, "op": "create_game", "args": {"game": "g1"}}\n'
            '{"id": 1, "ok": true, "result": {}}\n'
            '{"id": 2, "op": "record_round", "args": {"game": "nope", "input": "a", '
            '"output": "b"}}\n'
            '{"id": 2, "ok": false, "error": {"code": "invalid_input", '
            '"message": "unknown game \'nope\'"}}\n'
            "```\n"
        )
    if protocol is not None:
        if protocol.get("rules"):
            out.append("## Rules\n")
            out.append("".join(f"- {prose(r, DECISIONS)}\n" for r in protocol["rules"]))
        out.append("\n## Error codes\n")
        codes = protocol.get("error_codes", [])
        out.append(
            "An error reply's `error.code` is one of "
            + ", ".join(f"`{c}`" for c in codes)
            + " (the engine's stable codes, see [error codes](errors.md)), or a "
            "protocol-level code:\n"
        )
        out.append(_kv_table(protocol.get("protocol_error_codes", {}), ("Code", "Meaning")))
    ops: list[dict[str, Any]]
    if protocol is not None and protocol.get("ops"):
        ops = protocol["ops"]
    elif ops_schema is not None:
        ops = [
            {
                "name": n[:-5],
                "args": f"ops.schema.json#/$defs/{n}",
                "result": f"ops.schema.json#/$defs/{n[:-5]}_result",
            }
            for n in ops_schema.get("$defs", {})
            if n.endswith("_args")
        ]
    else:
        ops = []
    if ops:
        out.append("\n## Operations\n")
        out.append(
            table(
                ["Op", "Summary", "Requirements exercised"],
                [
                    [
                        f"[`{op['name']}`](#op-{op['name'].replace('_', '-')})",
                        cell(op.get("summary", "")),
                        ", ".join(
                            f"[{r}](requirements.md#{r})" for r in op.get("requirements", [])
                        ),
                    ]
                    for op in ops
                ],
            )
        )
        if ops_schema is not None:
            out.append("\n" + prose(ops_schema.get("description", ""), DECISIONS) + "\n")
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
    if ops_schema is not None:
        shared = {
            k: v
            for k, v in ops_schema.get("$defs", {}).items()
            if not k.endswith(("_args", "_result"))
        }
        if shared:
            out.append("\n## Shared definitions\n")
            for name, schema in shared.items():
                out.append(f"### `{name}` {{ #def-{name.replace('_', '-')} }}\n")
                if isinstance(schema, Mapping) and schema.get("description"):
                    out.append(prose(schema["description"], DECISIONS) + "\n")
                if isinstance(schema, Mapping) and "properties" in schema:
                    out.append(_object_table(schema, ops_schema["$defs"]))
                else:
                    out.append(schema_type(schema, ops_schema["$defs"]) + "\n")
    out.append("\n## Schemas\n")
    for name in files:
        out.append(_details(name, json_block(_load(driver / name))))
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# error codes
# --------------------------------------------------------------------------------------------


def errors_page(spec: Path) -> str:
    constants = _load(spec / "constants.json")
    codes = constants["error_codes"]
    doc = inspect.getdoc(jfsm.errors) or ""
    tree = doc.split("```", 2)[1].strip("\n") if "```" in doc else ""
    classes = [
        getattr(jfsm.errors, name)
        for name in jfsm.errors.__all__
        if isinstance(getattr(jfsm.errors, name), type)
        and issubclass(getattr(jfsm.errors, name), jfsm.errors.JfsmError)
        and getattr(jfsm.errors, name) is not jfsm.errors.JfsmError
    ]
    by_code = {cls.code: cls for cls in classes}
    protocol_path = spec / "driver" / "protocol.json"
    protocol = _load(protocol_path) if protocol_path.is_file() else {}
    problems = []
    if set(by_code) != set(codes):
        problems.append(
            f"jfsm.errors codes {sorted(by_code)} differ from spec/constants.json {codes}"
        )
    if protocol.get("error_codes") and list(protocol["error_codes"]) != list(codes):
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
    out = [
        "# Error codes\n",
        _generated(
            "spec/constants.json (error_codes), spec/driver/protocol.json and the "
            "exception tree of jfsm.errors"
        ),
        "Every error an implementation reports carries exactly one stable code, the same "
        "string in the engine and on the driver protocol "
        "([JF-ERR-001](requirements.md#JF-ERR-001)). An operation refused with an error "
        "leaves the store, the change log and every machine state exactly as they were "
        "([JF-ERR-002](requirements.md#JF-ERR-002)), and its message says which state holds "
        "after it ([JF-ERR-003](requirements.md#JF-ERR-003)).\n",
        "## Stable codes\n",
        table(["Code", "Reference engine class", "Retryable", "Meaning"], rows),
    ]
    proto_codes = protocol.get("protocol_error_codes") or {}
    if proto_codes:
        out.append("\n## Driver protocol codes\n")
        out.append(
            "The [driver protocol](driver-protocol.md) adds codes that belong to the protocol, "
            "not to the engine (refinement [R6](../decisions.md#r6)):\n"
        )
        out.append(_kv_table(proto_codes, ("Code", "Meaning")))
    if "rules" in protocol:
        details_rules = [r for r in protocol["rules"] if "details" in r]
        if details_rules:
            out.append(
                "\n**Details carried by errors:** "
                + " ".join(prose(r, DECISIONS) for r in details_rules)
                + "\n"
            )
    out.append("\n## The reference engine's exception tree\n")
    out.append(
        "From the docstring of `jfsm.errors` (drawn once in code, once here). Every error has "
        "`code`, `message`, `state` (what the affected thing is in after the error) and "
        "`details` (the numbers a caller needs to act); `to_json()` gives the driver "
        "protocol's error object.\n"
    )
    out.append("```text\n" + tree + "\n```\n")
    if problems:
        out.append(
            '!!! danger "Inconsistent error codes"\n' + "".join(f"    - {p}\n" for p in problems)
        )
    return "\n".join(out)


def pages(spec: Path) -> dict[str, str]:
    """Page path -> Markdown for every reference page of this module."""
    return {
        "reference/store-layout.md": store_layout_page(spec),
        "reference/canonical-text.md": canonical_text_page(spec),
        "reference/compress-v2.md": compress_page(spec),
        "reference/driver-protocol.md": driver_page(spec),
        "reference/errors.md": errors_page(spec),
    }
