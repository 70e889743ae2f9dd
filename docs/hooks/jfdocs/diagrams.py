"""Mermaid `stateDiagram-v2` text from a machine table of `spec/machines/` (pure).

`mermaid_state_diagram(table)` takes the parsed JSON of one table and returns diagram text
derived from the table and nothing else (like h11's diagrams): change a row and the diagram
changes. Every row of the table is drawn, labelled

    event / effect                 (no guard)
    event [guard] / effect         (the guard must hold)
    event [not guard] / effect     (`unless`: the guard must not hold)

- A row that changes state is an arrow `source --> dest`. Rows with the same source and
  destination share one arrow whose label has one line per row, in table order.
- A row that stays in its state is drawn inside the state's box, one line per row (UML
  internal transitions). Drawn as self-loop arrows, Mermaid's layout stacks parallel loops
  on top of each other and their labels become unreadable.
- `[*]` points at the initial state; each terminal state points at `[*]` and is drawn bold.

States are aliased `s_<name>`, so a state name can never clash with a Mermaid keyword.
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

    Raises `ValueError` when the initial state or a row names a state the table does not
    declare, or a state name is not `[a-z][a-z_]*`.
    """
    states = [s["name"] for s in table["states"]]
    terminal = [s["name"] for s in table["states"] if s.get("terminal")]
    known = set(states)
    if table["initial"] not in known:
        raise ValueError(f"initial state {table['initial']!r} is not declared")
    lines = ["stateDiagram-v2"]
    lines += [f'    state "{name}" as {state_id(name)}' for name in states]
    lines.append(f"    [*] --> {state_id(table['initial'])}")
    arrows: dict[tuple[str, str], list[str]] = {}
    for row in table["transitions"]:
        for end in ("source", "dest"):
            if row[end] not in known:
                raise ValueError(f"transition {dict(row)} names unknown state {row[end]!r}")
        if row["source"] == row["dest"]:
            lines.append(f"    {state_id(row['source'])} : {edge_label(row)}")
        else:
            arrows.setdefault((row["source"], row["dest"]), []).append(edge_label(row))
    for (source, dest), labels in arrows.items():
        lines.append(f"    {state_id(source)} --> {state_id(dest)} : " + "<br/>".join(labels))
    for name in terminal:
        lines.append(f"    {state_id(name)} --> [*]")
    if terminal:
        lines.append("    classDef terminal font-weight:bold,stroke-width:3px")
        lines.append("    class " + ",".join(state_id(n) for n in terminal) + " terminal")
    return "\n".join(lines) + "\n"
