"""The profile's API page documents every name the safety pages' examples use from
`jfsm_conformance.profile`: each has its `:::` entry, and every entry names a real object."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

import jfsm_conformance.profile as profile

SAFETY = Path(__file__).resolve().parents[2] / "docs" / "safety"


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def _used_names() -> dict[str, set[str]]:
    """Module -> names the safety pages' Python examples import from the profile's modules,
    or use (by a name the profile exports) without importing."""
    used: dict[str, set[str]] = {}
    for page in sorted(SAFETY.glob("*.md")):
        for block in _python_blocks(page.read_text("utf-8")):
            tree = ast.parse(block)
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "jfsm_conformance.profile"
                ):
                    assert node.module is not None
                    used.setdefault(node.module, set()).update(a.name for a in node.names)
                elif isinstance(node, ast.Name) and node.id in profile.__all__:
                    used.setdefault("jfsm_conformance.profile", set()).add(node.id)
    return used


def _entries() -> set[str]:
    text = (SAFETY / "api.md").read_text("utf-8")
    return set(re.findall(r"^::: (\S+)$", text, re.M))


def test_every_name_the_examples_use_has_an_entry() -> None:
    used = _used_names()
    assert {"SummarizerFailed", "SummarizerTimeout", "ObservedStorage"} <= used[
        "jfsm_conformance.profile"
    ]
    documented = {entry.rsplit(".", 1)[-1]: entry for entry in _entries()}
    missing = sorted(
        f"{module}.{name}"
        for module, names in used.items()
        for name in names
        if name not in documented
    )
    assert missing == []


def test_every_entry_names_a_real_object_and_the_import_block_imports() -> None:
    for entry in _entries():
        module, _, name = entry.rpartition(".")
        try:
            assert hasattr(importlib.import_module(module), name), entry
        except ImportError:  # an adapter module whose library is not installed here: read it
            path = Path(importlib.util.find_spec(module).origin)  # type: ignore[union-attr,arg-type]
            tree = ast.parse(path.read_text("utf-8"))
            defined = {getattr(n, "name", None) for n in tree.body}
            assert name in defined, entry
    text = (SAFETY / "api.md").read_text("utf-8")
    block = _python_blocks(text)[0]
    namespace: dict[str, object] = {}
    exec(compile(block, "api.md", "exec"), namespace)
    imported = {n for n in namespace if not n.startswith("__")}
    assert imported >= {"SummarizerFailed", "SummarizerTimeout", "Unavailable"}
    assert imported <= set(profile.__all__)
    assert {entry.rsplit(".", 1)[-1] for entry in _entries()} >= imported
