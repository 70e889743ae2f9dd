"""Pages generated from `spec/`: requirements, traceability, machines (pure)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from jfdocs.diagrams import mermaid_state_diagram
from jfdocs.render import cell, code, prose, table
from jfdocs.traceability import ConformanceCoverage
from jfsm.spec import load_toml

__all__ = [
    "BCP14",
    "areas",
    "load_requirements",
    "machine_pages",
    "machines_index_page",
    "requirements_page",
    "traceability_page",
]

BCP14 = (
    'The key words "MUST", "MUST NOT", "REQUIRED", "SHALL", "SHALL NOT", "SHOULD", '
    '"SHOULD NOT", "RECOMMENDED", "NOT RECOMMENDED", "MAY", and "OPTIONAL" in this document '
    "are to be interpreted as described in BCP 14 "
    "([RFC 2119](https://www.rfc-editor.org/rfc/rfc2119), "
    "[RFC 8174](https://www.rfc-editor.org/rfc/rfc8174)) when, and only when, they appear in "
    "all capitals, as shown here."
)

_AREA_COMMENT = re.compile(r"^#\s+([A-Z]+):\s+(.+?)\s*$")
_REQ_ID = re.compile(r"\bJF-[A-Z]+-[0-9]{3}\b")
_MACHINE_FILE = re.compile(r"`?spec/machines/([a-z_]+)\.json`?")
_DECISION = re.compile(r"^([DR])([0-9]+)$")
OVERVIEW = "../concepts/overview.md"


def load_requirements() -> dict[str, Any]:
    """The parsed catalog (`spec_version`, `requirement`), read by `jfsm.spec`."""
    return load_toml("requirements.toml")


def areas(spec: Path) -> dict[str, str]:
    """Area code -> heading, from the catalog's section comments (`# TEXT: ...`), in order,
    completed with the schema's area enum for any area without a comment."""
    found: dict[str, str] = {}
    for line in (spec / "requirements.toml").read_text(encoding="utf-8").splitlines():
        match = _AREA_COMMENT.match(line)
        if match and match.group(1) not in found:
            found[match.group(1)] = match.group(2)
    schema = json.loads((spec / "schemas" / "requirements.schema.json").read_text("utf-8"))
    for code_ in schema["$defs"]["area"]["enum"]:
        found.setdefault(code_, code_)
    return found


def _link_ids(text: str, page: str = "") -> str:
    """Link requirement ids and machine table paths inside prose."""
    text = _REQ_ID.sub(lambda m: f"[{m.group()}]({page}#{m.group()})", text)
    return _MACHINE_FILE.sub(
        lambda m: f"[`spec/machines/{m.group(1)}.json`](machines/{m.group(1)}.md)", text
    )


def section_anchor(heading: str) -> str:
    """The anchor of an overview section: `Persistence quota and atomicity` ->
    `persistence-quota-and-atomicity`."""
    return re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-")


def _source(item: str, decisions: str) -> str:
    """A catalog `source` value as a link the reader can follow: `seed:<section>` to that
    section of the site's overview (the brief in the project's words), `D<n>`/`R<n>` to the
    decision."""
    match = _DECISION.match(item)
    if match:
        return f"[{item}]({decisions}#{match.group(1).lower()}{match.group(2)})"
    if item.startswith("seed:"):
        section = item[5:]
        return f"[Overview § {section}]({OVERVIEW}#{section_anchor(section)})"
    return item


def _nodes(nodes: list[str]) -> str:
    return "<br>".join(code(n) for n in nodes) if nodes else "none"


def _node_list(label: str, nodes: list[str]) -> str:
    if not nodes:
        return f"**{label}:** none\n"
    return f"**{label}** ({len(nodes)}):\n\n" + "".join(f"- `{n}`\n" for n in nodes)


def requirements_page(
    spec: Path,
    tests: dict[str, list[str]],
    conformance: ConformanceCoverage,
) -> str:
    """`reference/requirements.md`."""
    catalog = load_requirements()
    reqs = catalog["requirement"]
    by_area: dict[str, list[dict[str, Any]]] = {}
    for req in reqs:
        by_area.setdefault(req["area"], []).append(req)
    levels = Counter(r["level"] for r in reqs)
    verification = Counter(r["verification"] for r in reqs)
    out = [
        "# Requirements\n",
        "<!-- Generated at build time from spec/requirements.toml by docs/hooks. "
        "Do not edit. -->\n",
        f"Specification version **{catalog['spec_version']}**: "
        f"**{len(reqs)}** requirements, each one atomic and testable, with a stable ID "
        "that is never renumbered or reused.\n",
        f'!!! note "Conventions"\n    {BCP14}\n\n'
        '    Each statement uses its level keyword exactly once. "Code point" always '
        'means Unicode scalar value; a "projection" is one planned atomic change set over '
        "the store and its change log (see the [glossary](../concepts/glossary.md)).\n",
        "## At a glance\n",
        table(
            ["Level", "Count"],
            [
                [lvl, str(levels[lvl])]
                for lvl in ("MUST", "MUST NOT", "SHOULD", "MAY")
                if levels[lvl]
            ],
        ),
        "\n**Verification** says who can check a requirement:\n",
        table(
            ["Verification", "Count", "Meaning"],
            [
                [
                    "suite",
                    str(verification["suite"]),
                    "observable through the [driver protocol](driver-protocol.md): the "
                    "conformance suite checks it against any implementation",
                ],
                [
                    "engine",
                    str(verification["engine"]),
                    "checkable only inside an implementation (the reference engine's own tests); "
                    "the reason is given",
                ],
                [
                    "not-observable",
                    str(verification["not-observable"]),
                    "no test can decide it; the reason is given",
                ],
                [
                    "profile",
                    str(verification["profile"]),
                    "a property of any agent memory, checked by the compaction safety "
                    "profile (`jfsm profile`, see [the safety pages](../safety/index.md)) "
                    "through an adapter",
                ],
            ],
        ),
        "\nThe tests of this repository that pin each requirement are listed under it "
        "(collected from `pytest.mark.req` marks); the [traceability](traceability.md) "
        "page has the same data as one table.\n",
    ]
    if conformance.available:
        out.append(f"Conformance checks per requirement: {conformance.note}.\n")
    else:
        out.append(f'!!! info "Conformance checks"\n    {conformance.note}\n')
    for area, heading in areas(spec).items():
        items = by_area.get(area)
        if not items:
            continue
        out.append(f"## {area}: {heading} {{ #area-{area.lower()} }}\n")
        for req in items:
            rid = req["id"]
            sources = ", ".join(_source(s, "../decisions.md") for s in req["source"])
            out.append(f"### {rid} {prose(req['title'])} {{ #{rid} }}\n")
            out.append(
                f"**{req['level']}** · verification: **{req['verification']}** · "
                f"source: {sources}\n"
            )
            out.append("> " + _link_ids(prose(req["statement"], "../decisions.md")) + "\n")
            if "reason" in req:
                out.append(
                    f"*Why not verified by the suite:* {prose(req['reason'], '../decisions.md')}\n"
                )
            out.append(_node_list("Tests", tests.get(rid, [])))
            if conformance.available:
                out.append(f"**Conformance checks:** {_nodes(conformance.checks.get(rid, []))}\n")
    retired = catalog.get("retired", [])
    if retired:
        out.append("## Retired IDs { #retired }\n")
        out.append(
            "IDs no longer in the catalog and never reused (decision R78). Each was a promise "
            "of the reference engine about its own formats, not a requirement on every "
            "implementation, and lives on, under the same ID and still tested, among the "
            "[reference engine's guarantees](engine-guarantees.md).\n"
        )
        for entry in retired:
            rid = entry["id"]
            out.append(
                f"### {rid} {prose(entry['title'])} (retired) {{ #{rid} }}\n\n"
                f"{prose(entry['note'], '../decisions.md')} See "
                f"[{rid}](engine-guarantees.md#{rid}).\n"
            )
    return "\n".join(out)


def guarantees_page(tests: dict[str, list[str]]) -> str:
    """`reference/engine-guarantees.md`: the reference engine's own guarantees
    (`jfsm/guarantees.toml`), each with the tests that pin it."""
    from jfsm.spec import guarantees

    out = [
        "# Reference engine guarantees\n",
        "<!-- Generated at build time from jfsm/guarantees.toml by docs/hooks. Do not edit. -->\n",
        "Promises the reference engine `jfsm` makes about its own formats and tools: the "
        "file store's layout, manifest, lock and windowed reader, `jfsm inspect`, its "
        "construction options, the reference driver's state directory, its PostgreSQL "
        "store's group commit and what its event loop's garbage collector walks. They are "
        "**not** requirements of the specification: another implementation owes none of "
        "them, the conformance suite does not judge them, and the "
        "[requirements](requirements.md) page does not count them. Those that began in the "
        "catalog keep the IDs they had there, which it lists as "
        "[retired](requirements.md#retired) and never reuses (decision R78); later ones take "
        "IDs the catalog never used. The reference engine's own tests pin each one.\n",
    ]
    for g in guarantees():
        gid = g["id"]
        out.append(f"## {gid} {prose(g['title'])} {{ #{gid} }}\n")
        out.append(f"**{g['level']}** (of the reference engine)\n")
        out.append(
            "> " + _link_ids(prose(g["statement"], "../decisions.md"), "requirements.md") + "\n"
        )
        if g.get("why_not_spec"):
            out.append(
                f"*Why not a spec requirement:* {prose(g['why_not_spec'], '../decisions.md')}\n"
            )
        out.append(_node_list("Tests", tests.get(gid, [])))
    return "\n".join(out)


def traceability_page(
    spec: Path,
    tests: dict[str, list[str]],
    conformance: ConformanceCoverage,
) -> str:
    """`reference/traceability.md`: ID -> tests/checks, and the MUSTs nothing tests."""
    from jfsm.spec import guarantees

    reqs = load_requirements()["requirement"]
    known = {r["id"] for r in (*reqs, *guarantees())}
    absolute = [r for r in reqs if r["level"] in ("MUST", "MUST NOT")]
    untested = [r for r in absolute if not tests.get(r["id"])]
    unchecked = [
        r for r in absolute if not tests.get(r["id"]) and not conformance.checks.get(r["id"])
    ]
    unknown = sorted(set(tests) - known)
    out = [
        "# Traceability\n",
        "<!-- Generated at build time from spec/requirements.toml, tests/ and "
        "conformance.coverage by docs/hooks. Do not edit. -->\n",
        "Requirement ID to the repository tests that pin it (every `pytest.mark.req` mark "
        "under `tests/`, found by parsing the test files) and to the conformance checks "
        "that verify it.\n",
    ]
    if conformance.available:
        out.append(f"Conformance checks: {conformance.note}.\n")
    else:
        out.append(f'!!! info "Conformance checks"\n    {conformance.note}\n')
    out.append("## Who judges each requirement { #coverage }\n")
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for r in reqs:
        by_kind.setdefault(r["verification"], []).append(r)
    out.append(
        f"**{len(by_kind.get('suite', []))}** requirements are checked by the conformance "
        f"suite against any implementation, **{len(by_kind.get('profile', []))}** by the "
        "compaction safety profile; the others are listed here with the reason the suite "
        "cannot judge them. Promises about the reference engine's own formats are not "
        "requirements: they are the [reference engine's guarantees](engine-guarantees.md) "
        "(decision R78).\n"
    )
    others = [r for r in reqs if r["verification"] not in ("suite", "profile")]
    if others:
        out.append(
            table(
                ["ID", "Verification", "Why the suite cannot judge it"],
                [
                    [
                        f"[{r['id']}](requirements.md#{r['id']})",
                        r["verification"],
                        cell(r.get("reason", "")),
                    ]
                    for r in others
                ],
            )
        )
    out.append("## MUST and MUST NOT requirements with no test { #untested }\n")
    out.append(
        f"**{len(untested)}** of the {len(absolute)} MUST and MUST NOT requirements have no "
        "repository test yet"
        + (
            f"; **{len(unchecked)}** have neither a test nor a conformance check"
            if conformance.available
            else ""
        )
        + ".\n"
    )
    if untested:
        out.append(
            table(
                ["ID", "Level", "Verification", "Title"],
                [
                    [
                        f"[{r['id']}](requirements.md#{r['id']})",
                        r["level"],
                        r["verification"],
                        cell(r["title"]),
                    ]
                    for r in untested
                ],
            )
        )
    if unknown:
        out.append(
            '!!! warning "Marks naming unknown requirement IDs"\n'
            + "".join(f"    - `{i}`: {_nodes(tests[i])}\n" for i in unknown)
        )
    out.append("## Table { #table }\n")
    headers = ["ID", "Level", "Verification", "Tests"]
    if conformance.available:
        headers.append("Conformance checks")
    rows = []
    for r in reqs:
        row = [
            f"[{r['id']}](requirements.md#{r['id']})",
            r["level"],
            r["verification"],
            _nodes(tests.get(r["id"], [])),
        ]
        if conformance.available:
            row.append(_nodes(conformance.checks.get(r["id"], [])))
        rows.append(row)
    out.append(table(headers, rows))
    return "\n".join(out)


def _machine_tables(spec: Path) -> list[dict[str, Any]]:
    return [
        json.loads(path.read_text(encoding="utf-8"))
        for path in sorted((spec / "machines").glob("*.json"))
    ]


def _guard_text(row: dict[str, Any]) -> str:
    if row.get("guard"):
        return f"`{row['guard']}`"
    if row.get("unless"):
        return f"not `{row['unless']}`"
    return ""


def machine_page(data: dict[str, Any], reqs: list[dict[str, Any]]) -> str:
    """`reference/machines/<machine>.md`."""
    name = data["machine"]
    terminal = {s["name"] for s in data["states"] if s.get("terminal")}
    out = [
        f"# {data['title']}\n",
        f"<!-- Generated at build time from spec/machines/{name}.json by docs/hooks. "
        "Do not edit. -->\n",
        f"Machine `{name}` · table [`spec/machines/{name}.json`](index.md#tables) · "
        f"applies to {data.get('applies_to', 'its owner')} · initial state "
        f"`{data['initial']}`.\n",
        prose(data["description"], "../../decisions.md") + "\n",
        "## Diagram\n",
        "Generated from the transition table below. Every row is drawn and labelled "
        "`event [guard] / effect` (`[not guard]` for a row that fires when the guard does "
        "not hold): a row that changes state is an arrow (rows sharing source and "
        "destination share one arrow, one label line each); a row that stays in its state "
        "is a line inside the state's box (a UML internal transition). Terminal states are "
        "drawn bold and lead to the end marker.\n",
        "```mermaid\n" + mermaid_state_diagram(data) + "```\n",
        "## States\n",
        table(
            ["State", "Kind", "Meaning"],
            [
                [
                    f"`{s['name']}`",
                    ", ".join(
                        k
                        for k, on in (
                            ("initial", s["name"] == data["initial"]),
                            ("terminal", s["name"] in terminal),
                        )
                        if on
                    )
                    or "",
                    cell(s["description"]),
                ]
                for s in data["states"]
            ],
        ),
        "\n## Events\n",
        table(
            ["Event", "Meaning"],
            [[f"`{e['name']}`", cell(e["description"])] for e in data["events"]],
        ),
    ]
    out.append("\n## Guards\n")
    if data["guards"]:
        out.append(
            table(
                ["Guard", "Holds when"],
                [[f"`{g['name']}`", cell(g["description"])] for g in data["guards"]],
            )
        )
    else:
        out.append("This machine has no guards: every row fires unconditionally.\n")
    out += [
        "\n## Effects\n",
        table(
            ["Effect", "What the implementation does"],
            [[f"`{e['name']}`", cell(e["description"])] for e in data["effects"]],
        ),
        "\n## Transition table\n",
        "Rows for the same state and event are tried in order; the first whose guard holds "
        "fires. A state and event with no row, or whose rows' guards all fail, is illegal: "
        "the event is refused with `invalid_transition` and the state does not change "
        "([JF-ERR-004](../requirements.md#JF-ERR-004)).\n",
    ]
    has_reqs = any(row.get("requirements") for row in data["transitions"])
    headers = ["#", "From", "Event", "Guard", "To", "Effect"] + (
        ["Requirements"] if has_reqs else []
    )
    rows = []
    for index, row in enumerate(data["transitions"], start=1):
        line = [
            str(index),
            f"`{row['source']}`",
            f"`{row['event']}`",
            _guard_text(row),
            f"`{row['dest']}`",
            f"`{row['effect']}`",
        ]
        if has_reqs:
            line.append(
                ", ".join(f"[{r}](../requirements.md#{r})" for r in row.get("requirements", []))
            )
        rows.append(line)
    out.append(table(headers, rows))
    out += [
        "\n## Every state and event\n",
        "The same table as a total matrix (in the style of h11): each cell lists the rows "
        "for that pair, or says the event is illegal there.\n",
    ]
    matrix = []
    for state in data["states"]:
        cells = [f"`{state['name']}`"]
        for event in data["events"]:
            found = [
                r
                for r in data["transitions"]
                if r["source"] == state["name"] and r["event"] == event["name"]
            ]
            if found:
                cells.append(
                    "<br>".join(
                        (f"[{_guard_text(r)}] " if _guard_text(r) else "") + f"→ `{r['dest']}`"
                        for r in found
                    )
                )
            else:
                cells.append("*illegal*")
        matrix.append(cells)
    out.append(table(["State \\ event"] + [f"`{e['name']}`" for e in data["events"]], matrix))
    citing = [
        r
        for r in reqs
        if f"spec/machines/{name}.json" in r["statement"]
        or name.replace("_", " ") in r["statement"]
    ]
    if citing:
        out.append("\n## Requirements that cite this machine\n")
        out.append(
            "".join(
                f"- [{r['id']}](../requirements.md#{r['id']}) {prose(r['title'])}\n" for r in citing
            )
        )
    return "\n".join(out)


def machine_pages(spec: Path) -> dict[str, str]:
    """Page path -> Markdown for every machine table."""
    reqs = load_requirements()["requirement"]
    return {
        f"reference/machines/{data['machine']}.md": machine_page(data, reqs)
        for data in _machine_tables(spec)
    }


def machines_index_page(spec: Path) -> str:
    """`reference/machines/index.md`."""
    schema = json.loads((spec / "schemas" / "machine.schema.json").read_text("utf-8"))
    rows = []
    for data in _machine_tables(spec):
        terminal = [s["name"] for s in data["states"] if s.get("terminal")]
        rows.append(
            [
                f"[{data['title']}]({data['machine']}.md)",
                f"`{data['machine']}`",
                cell(data.get("applies_to", "")),
                str(len(data["states"])) + (f" ({len(terminal)} terminal)" if terminal else ""),
                str(len(data["events"])),
                str(len(data["transitions"])),
            ]
        )
    return "\n".join(
        [
            "# State machines\n",
            "<!-- Generated at build time from spec/machines/ by docs/hooks. Do not edit. -->\n",
            "The behaviour of agent memory is fixed by these machines, each one table of plain "
            "data in `spec/machines/`. The reference engine loads these tables and adds no "
            "transition of its own; the pages below, their diagrams included, are generated from "
            "the same files.\n",
            table(["Machine", "Name", "Applies to", "States", "Events", "Rows"], rows),
            "\n## How to read a table { #tables }\n",
            prose(schema["description"]) + "\n",
            "- **states**: name, meaning, and whether the state is terminal (a terminal state is "
            "never left; a row from it leads back to it).\n"
            "- **events**: what happens to the owner of the machine.\n"
            "- **guards**: named conditions evaluated when an event arrives. A row with `guard` "
            "fires only when it holds, a row with `unless` only when it does not.\n"
            "- **effects**: what the implementation carries out when the row fires.\n"
            "- **transitions**: `source`, `event`, optional `guard` or `unless`, `dest`, "
            "`effect`.\n",
            "The schema of a table is `spec/schemas/machine.schema.json`.\n",
        ]
    )
