"""The README's test-run section tells a newcomer what to expect (issue 35).

Its prerequisites table names the cause of every skip the tests can take: each environment
variable, program and extra a skip reason names (read from the tests' source: every
`pytest.skip`, `skipif(reason=...)` and `importorskip(reason=...)`) appears in the table;
and it says how long `uv run pytest` takes.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ("chromium", "pgbouncer", "initdb", "pg_ctl", "node", "tsc", "npm")
_CAUSE = re.compile(
    r"\bJFSM_[A-Z_]+\b|\bprofile-|\bjfsm\[\w+\]|\b(?:" + "|".join(PROGRAMS) + r")\b"
)


def _prerequisites() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = re.search(r"^\| prerequisite \|.*?(?=\n\n)", text, re.S | re.M)
    assert table, "README.md has no prerequisites table"
    return table.group(0)


def _skip_reasons() -> dict[str, str]:
    """Every skip reason's text in tests/, by `file:line` (f-strings: their constant parts)."""
    found = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            if name == "skip":
                parts = node.args[:1]
            elif name in ("skipif", "importorskip"):
                parts = [k.value for k in node.keywords if k.arg == "reason"]
            else:
                continue
            text = " ".join(
                s.value
                for part in parts
                for s in ast.walk(part)
                if isinstance(s, ast.Constant) and isinstance(s.value, str)
            )
            if text:
                found[f"{path.relative_to(ROOT)}:{node.lineno}"] = text
    return found


def _causes(text: str) -> set[str]:
    return {m.group(0) for m in _CAUSE.finditer(text)}


def test_the_prerequisites_table_names_every_skip() -> None:
    table = _prerequisites()
    named = set()
    for where, reason in _skip_reasons().items():
        for cause in _causes(reason):
            named.add(cause)
            assert cause in table, f"{where}: its skip names {cause!r}, the README's table not"
    assert {"JFSM_TSC", "profile-", "chromium", "node", "npm"} <= named


def test_the_check_can_fail() -> None:
    assert _causes("needs tsc on PATH or in JFSM_TSC; pip install 'jfsm[postgres]'") == {
        "tsc",
        "JFSM_TSC",
        "jfsm[postgres]",
    }
    assert "JFSM_NOPE" not in _prerequisites()


def _markers() -> set[str]:
    """The markers of pyproject.toml that leave tests out of the default run."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    options = config["tool"]["pytest"]["ini_options"]
    names = {m.split(":")[0].split("(")[0] for m in options["markers"]} - {"req"}
    left_out = set(re.findall(r"not (\w+)", options["addopts"]))
    assert left_out == names, "the default run leaves out exactly the markers but req"
    return names


def test_the_readme_says_how_long_each_run_takes() -> None:
    """A row per run: the default one and one per marker it leaves out, each with a time
    (R234)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\| `(uv run pytest(?: -m \w+)?)` \|.*\| ([^|]+) \|$", text, re.M)
    }
    want = {"uv run pytest"} | {f"uv run pytest -m {name}" for name in _markers()}
    assert set(rows) == want
    for run, took in rows.items():
        assert re.search(r"\d+ (?:s|min)|minutes", took), (run, took)
    assert re.search(r"`uv run pytest` runs [\d,]+ of the [\d,]+ tests\s+in \d+ s", text)
