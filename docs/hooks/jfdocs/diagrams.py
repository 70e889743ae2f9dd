"""Mermaid `stateDiagram-v2` text from a machine table of `spec/machines/` (pure).

`mermaid_state_diagram(table)` takes the parsed JSON of one table and returns diagram text:
one node per state (aliased `s_<name>`, so a state name can never clash with a Mermaid
keyword), an arrow from `[*]` to the initial state, an arrow from each terminal state to
`[*]`, and exactly one edge per transition row, labelled

    event / effect                 (no guard)
    event [guard] / effect         (guard must hold)
    event [not guard] / effect     (unless: guard must not hold)

Like h11's diagrams, the picture is derived from the table and nothing else: change a row
and the diagram changes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["edge_label", "mermaid_state_diagram", "state_id"]

_NAME = re.compile(r"^[a-z][a-z_]*$")


def state_id(name: str) -> str:
    """The Mermaid id of a state (`s_<name>`). Raises `ValueError` on an invalid name."""
    if not _NAME.match(name):
        raise ValueError(f"state name {name!r} does not match {_NAME.pattern}")
    return f"s_{name}"


def edge_label(row: Mapping[str, Any]) -> str:
    """The label of one transition row: `event [guard] / effect`."""
    label = str(row["event"])
    if row.get("guard"):
        label += f" [{row['guard']}]"
    if row.get("unless"):
        label += f" [not {row['unless']}]"
    return f"{label} / {row['effect']}"


def mermaid_state_diagram(table: Mapping[str, Any]) -> str:
    """The `stateDiagram-v2` text of a machine table (see the module docstring).

    Raises `ValueError` when a row names a state the table does not declare.
    """
    states = [s["name"] for s in table["states"]]
    terminal = [s["name"] for s in table["states"] if s.get("terminal")]
    known = set(states)
    lines = ["stateDiagram-v2"]
    for name in states:
        lines.append(f'    state "{name}" as {state_id(name)}')
    if table["initial"] not in known:
        raise ValueError(f"initial state {table['initial']!r} is not declared")
    lines.append(f"    [*] --> {state_id(table['initial'])}")
    for row in table["transitions"]:
        for end in ("source", "dest"):
            if row[end] not in known:
                raise ValueError(f"transition {dict(row)} names unknown state {row[end]!r}")
        source, dest = state_id(row["source"]), state_id(row["dest"])
        lines.append(f"    {source} --> {dest} : {edge_label(row)}")
    for name in terminal:
        lines.append(f"    {state_id(name)} --> [*]")
    if terminal:
        lines.append("    classDef terminal font-weight:bold,stroke-width:3px")
        lines.append("    class " + ",".join(state_id(n) for n in terminal) + " terminal")
    return "\n".join(lines) + "\n"
