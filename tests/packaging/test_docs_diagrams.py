"""The state diagrams of the spec site are generated from the machine tables, not drawn.

`docs/hooks/jfdocs/diagrams.py` turns a table of `spec/machines/` into Mermaid text. These
tests parse that text on their own (no helper shared with the generator) and prove that
every row of every table is in its diagram, attached to the right states, and that changing
a table changes the diagram.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
MACHINES = sorted((ROOT / "spec" / "machines").glob("*.json"))


def _load_diagrams() -> ModuleType:
    path = ROOT / "docs" / "hooks" / "jfdocs" / "diagrams.py"
    spec = importlib.util.spec_from_file_location("jfsm_docs_diagrams", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


diagrams = _load_diagrams()

_ALIAS = re.compile(r'^\s*state "([a-z_]+)" as (s_[a-z_]+)$')
_ARROW = re.compile(r"^\s*(\[\*\]|s_[a-z_]+) --> (\[\*\]|s_[a-z_]+)(?: : (.*))?$")
_INTERNAL = re.compile(r"^\s*(s_[a-z_]+) : (.*)$")


def parse(text: str) -> dict[str, Any]:
    """States, arrows {(source, dest): [label lines]} and internal lines {state: [...]}."""
    lines = text.splitlines()
    assert lines[0] == "stateDiagram-v2"
    aliases: dict[str, str] = {}
    arrows: dict[tuple[str, str], list[str]] = {}
    internal: dict[str, list[str]] = {}
    classes: dict[str, set[str]] = {}
    for line in lines[1:]:
        if m := _ALIAS.match(line):
            aliases[m.group(2)] = m.group(1)
        elif m := _ARROW.match(line):
            ends = tuple(aliases.get(x, x) for x in (m.group(1), m.group(2)))
            labels = m.group(3).split("<br/>") if m.group(3) else []
            arrows.setdefault(ends, []).extend(labels)  # type: ignore[arg-type]
        elif m := _INTERNAL.match(line):
            internal.setdefault(aliases[m.group(1)], []).append(m.group(2))
        elif line.strip().startswith("class "):
            ids, name = line.strip()[6:].rsplit(" ", 1)
            classes[name] = {aliases[i] for i in ids.split(",")}
        elif line.strip() and not line.strip().startswith("classDef "):
            raise AssertionError(f"unexpected diagram line {line!r}")
    return {
        "states": set(aliases.values()),
        "arrows": arrows,
        "internal": internal,
        "classes": classes,
    }


def label(row: dict[str, Any]) -> str:
    text = row["event"]
    if "guard" in row:
        text += f" [{row['guard']}]"
    if "unless" in row:
        text += f" [not {row['unless']}]"
    return f"{text} / {row['effect']}"


def drawn_rows(parsed: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Every (source, dest, label) the diagram draws, arrows and internal lines."""
    rows = [
        (source, dest, text)
        for (source, dest), labels in parsed["arrows"].items()
        if "[*]" not in (source, dest)
        for text in labels
    ]
    rows += [(state, state, text) for state, texts in parsed["internal"].items() for text in texts]
    return rows


@pytest.fixture(params=MACHINES, ids=lambda p: p.stem)
def table(request: pytest.FixtureRequest) -> dict[str, Any]:
    return json.loads(request.param.read_text(encoding="utf-8"))


def test_there_are_machine_tables() -> None:
    assert {p.stem for p in MACHINES} >= {"stack_compression", "catalyst_scene", "intervene_retry"}


def test_every_row_is_drawn_exactly_once_between_its_states(table: dict[str, Any]) -> None:
    parsed = parse(diagrams.mermaid_state_diagram(table))
    expected = sorted((r["source"], r["dest"], label(r)) for r in table["transitions"])
    assert sorted(drawn_rows(parsed)) == expected


def test_every_state_initial_and_terminal_is_drawn(table: dict[str, Any]) -> None:
    parsed = parse(diagrams.mermaid_state_diagram(table))
    assert parsed["states"] == {s["name"] for s in table["states"]}
    assert ("[*]", table["initial"]) in parsed["arrows"]
    terminal = {s["name"] for s in table["states"] if s.get("terminal")}
    assert {d for (s, d) in parsed["arrows"] if d == "[*]"} == ({"[*]"} if terminal else set())
    assert {s for (s, d) in parsed["arrows"] if d == "[*]"} == terminal
    assert parsed["classes"].get("terminal", set()) == terminal


def test_rows_sharing_an_arrow_keep_table_order(table: dict[str, Any]) -> None:
    parsed = parse(diagrams.mermaid_state_diagram(table))
    for (source, dest), labels in parsed["arrows"].items():
        if "[*]" in (source, dest):
            continue
        rows = [
            label(r) for r in table["transitions"] if r["source"] == source and r["dest"] == dest
        ]
        assert labels == rows


def _modified(table: dict[str, Any]) -> dict[str, Any]:
    """A copy of `table` with one more state and one row redirected to it."""
    changed = copy.deepcopy(table)
    changed["states"].append({"name": "audited", "description": "added by the test"})
    changed["transitions"][0]["dest"] = "audited"
    changed["transitions"].append(
        {
            "source": "audited",
            "event": changed["events"][0]["name"],
            "guard": "made_up",
            "dest": table["initial"],
            "effect": "made_up_effect",
        }
    )
    return changed


def test_changing_the_table_changes_the_diagram(table: dict[str, Any]) -> None:
    original = diagrams.mermaid_state_diagram(table)
    changed_table = _modified(table)
    changed = diagrams.mermaid_state_diagram(changed_table)
    assert changed != original
    parsed = parse(changed)
    assert "audited" in parsed["states"]
    first = changed_table["transitions"][0]
    assert (first["source"], "audited", label(first)) in drawn_rows(parsed)
    expected = sorted((r["source"], r["dest"], label(r)) for r in changed_table["transitions"])
    assert sorted(drawn_rows(parsed)) == expected


@pytest.mark.parametrize("field", ["guard", "unless", "effect", "event"])
def test_changing_one_label_part_changes_that_label(table: dict[str, Any], field: str) -> None:
    changed = copy.deepcopy(table)
    row = changed["transitions"][-1]
    row.pop("guard" if field == "unless" else "unless", None)
    row[field] = "renamed_" + field
    text = diagrams.mermaid_state_diagram(changed)
    assert text != diagrams.mermaid_state_diagram(table)
    assert (row["source"], row["dest"], label(row)) in drawn_rows(parse(text))


def test_removing_a_row_removes_it_from_the_diagram(table: dict[str, Any]) -> None:
    changed = copy.deepcopy(table)
    removed = changed["transitions"].pop(1)
    drawn = drawn_rows(parse(diagrams.mermaid_state_diagram(changed)))
    assert drawn.count((removed["source"], removed["dest"], label(removed))) == sum(
        1
        for r in changed["transitions"]
        if (r["source"], r["dest"], label(r))
        == (removed["source"], removed["dest"], label(removed))
    )
    assert len(drawn) == len(changed["transitions"])


def test_unknown_states_are_refused(table: dict[str, Any]) -> None:
    broken = copy.deepcopy(table)
    broken["transitions"][0]["dest"] = "nowhere"
    with pytest.raises(ValueError, match="nowhere"):
        diagrams.mermaid_state_diagram(broken)
    broken = copy.deepcopy(table)
    broken["initial"] = "nowhere"
    with pytest.raises(ValueError, match="nowhere"):
        diagrams.mermaid_state_diagram(broken)
