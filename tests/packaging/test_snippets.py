"""Every Python snippet of the README and the guides imports only public names and runs.

The public names are `jfsm.__all__` and `jfsm.testing.__all__` (the in-process fake
compressor); a snippet that reaches into an internal module (`jfsm.engine`,
`jfsm.stores.file`...) fails here. Each snippet runs in a fresh temporary directory, with
`COMPRESS_URL` pointing at the suite's fake compress.v2; a snippet naming a PostgreSQL URL
runs against a throwaway server (`tests/pg_fixtures.py`), so that test skips, saying why,
where PostgreSQL is not installed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import jfsm
import jfsm.testing

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]
PUBLIC = {"jfsm": set(jfsm.__all__), "jfsm.testing": set(jfsm.testing.__all__)}
PG_URL = "postgresql://jfsm@db.internal/jfsm"


def _snippets() -> list[tuple[str, str]]:
    found = []
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        for index, block in enumerate(re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)):
            found.append((f"{path.relative_to(ROOT).as_posix()} #{index + 1}", block))
    return found


SNIPPETS = _snippets()


def _private_imports(source: str) -> list[str]:
    """Every import of `jfsm` that is not a public name of `jfsm` or `jfsm.testing`."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            bad += [
                a.name
                for a in node.names
                if a.name.split(".")[0] == "jfsm" and a.name not in PUBLIC
            ]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "jfsm":
            module = node.module or ""
            if module not in PUBLIC:
                bad.append(module)
                continue
            bad += [f"{module}.{a.name}" for a in node.names if a.name not in PUBLIC[module]]
    return bad


def test_the_documents_hold_snippets() -> None:
    names = {name.split(" #")[0] for name, _ in SNIPPETS}
    assert {"README.md", "docs/guide/embedding.md", "docs/guide/deploying.md"} <= names


@pytest.mark.parametrize(("name", "source"), SNIPPETS, ids=[n for n, _ in SNIPPETS])
def test_snippet_imports_only_public_names(name: str, source: str) -> None:
    assert _private_imports(source) == [], name


def test_the_import_check_can_fail() -> None:
    assert _private_imports("from jfsm.engine import GameEngine\nimport jfsm.stores\n") == [
        "jfsm.engine",
        "jfsm.stores",
    ]
    assert _private_imports("from jfsm import GameEngine, Nope\n") == ["jfsm.Nope"]


@pytest.mark.parametrize(("name", "source"), SNIPPETS, ids=[n for n, _ in SNIPPETS])
def test_snippet_runs(
    name: str,
    source: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    from jfsm_conformance.fake.compress import FakeCompress

    if PG_URL in source:
        database = request.getfixturevalue("fresh_database")
        source = source.replace(PG_URL, database())
    monkeypatch.chdir(tmp_path)
    with FakeCompress() as fake:
        monkeypatch.setenv("COMPRESS_URL", fake.url)
        exec(compile(source, name, "exec"), {"__name__": "__main__"})
        assert fake.violations == []
