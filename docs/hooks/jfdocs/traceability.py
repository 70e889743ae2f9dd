"""Which tests and conformance checks cover which requirement (pure, read-only).

Tests are found statically: every `tests/**/*.py` file is parsed with `ast` (never imported)
and each `pytest.mark.req("JF-...")` is attributed to the test node ids it marks:

- a decorator on a test function or method: that test;
- a decorator on a test class, or a `pytestmark` in its body: every test of the class;
- `pytestmark = ...` at module level: every test of the module;
- `TestX = pytest.mark.req(...)(Machine.TestCase)` (a Hypothesis state machine): `TestX`;
- a `pytest.param(..., marks=pytest.mark.req(...))` inside a decorator: its test.

Conformance checks come from `jfsm_conformance.run.coverage`, another product that may not exist
yet: it is imported defensively and any failure is reported as "not yet generated", never raised.
"""

from __future__ import annotations

import ast
import importlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ConformanceCoverage", "conformance_coverage", "scan_tests"]


def _is_req_mark(node: ast.AST) -> bool:
    """`pytest.mark.req` or `mark.req` (the callee of a req mark)."""
    if not isinstance(node, ast.Attribute) or node.attr != "req":
        return False
    inner = node.value
    if isinstance(inner, ast.Attribute) and inner.attr == "mark":
        return True
    return isinstance(inner, ast.Name) and inner.id == "mark"


def _ids_in(node: ast.AST | None) -> list[str]:
    """Every requirement id of every req mark call found anywhere inside `node`."""
    found: list[str] = []
    if node is None:
        return found
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and _is_req_mark(sub.func):
            for arg in sub.args:
                for leaf in ast.walk(arg):
                    if (
                        isinstance(leaf, ast.Constant)
                        and isinstance(leaf.value, str)
                        and leaf.value.startswith("JF-")
                    ):
                        found.append(leaf.value)
    return found


def _pytestmark(body: Iterable[ast.stmt]) -> list[str]:
    ids: list[str] = []
    for stmt in body:
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign):
            targets = list(stmt.targets)
        elif isinstance(stmt, ast.AnnAssign):
            targets = [stmt.target]
        if any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets):
            ids += _ids_in(stmt.value)  # type: ignore[attr-defined]
    return ids


def _tests_in_class(cls: ast.ClassDef, prefix: str, inherited: list[str]) -> dict[str, list[str]]:
    own = inherited + [i for d in cls.decorator_list for i in _ids_in(d)] + _pytestmark(cls.body)
    out: dict[str, list[str]] = {}
    node_prefix = f"{prefix}::{cls.name}"
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name.startswith(
            "test"
        ):
            out[f"{node_prefix}::{stmt.name}"] = own + [
                i for d in stmt.decorator_list for i in _ids_in(d)
            ]
        elif isinstance(stmt, ast.ClassDef) and stmt.name.startswith("Test"):
            out.update(_tests_in_class(stmt, node_prefix, own))
    return out


def scan_file(path: Path, nodeid_prefix: str) -> dict[str, list[str]]:
    """Test node id -> requirement ids for one test file (tests without marks included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    module_ids = _pytestmark(tree.body)
    out: dict[str, list[str]] = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name.startswith(
            "test"
        ):
            out[f"{nodeid_prefix}::{stmt.name}"] = module_ids + [
                i for d in stmt.decorator_list for i in _ids_in(d)
            ]
        elif isinstance(stmt, ast.ClassDef) and stmt.name.startswith("Test"):
            out.update(_tests_in_class(stmt, nodeid_prefix, module_ids))
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name) and target.id.startswith("Test"):
                    out[f"{nodeid_prefix}::{target.id}"] = module_ids + _ids_in(stmt.value)
                elif (
                    isinstance(target, ast.Attribute)
                    and target.attr == "pytestmark"
                    and isinstance(target.value, ast.Name)
                ):
                    key = f"{nodeid_prefix}::{target.value.id}"
                    out[key] = out.get(key, list(module_ids)) + _ids_in(stmt.value)
    return out


def scan_tests(root: Path) -> dict[str, list[str]]:
    """Requirement id -> sorted test node ids, over `root/tests/**/*.py`.

    Test files are `test_*.py` and `*_test.py`; node ids are relative to `root`.
    """
    coverage: dict[str, set[str]] = defaultdict(set)
    tests_dir = root / "tests"
    if not tests_dir.is_dir():
        return {}
    for path in sorted(tests_dir.rglob("*.py")):
        if not (path.name.startswith("test_") or path.name.endswith("_test.py")):
            continue
        prefix = path.relative_to(root).as_posix()
        for nodeid, ids in scan_file(path, prefix).items():
            for req in ids:
                coverage[req].add(nodeid)
    return {req: sorted(nodes) for req, nodes in sorted(coverage.items())}


@dataclass
class ConformanceCoverage:
    """Conformance checks per requirement, or why there are none."""

    available: bool
    note: str
    checks: dict[str, list[str]] = field(default_factory=dict)


_ROW_ID_FIELDS = ("requirement", "requirement_id", "requirementId", "req", "id")
_ROW_CHECK_FIELDS = ("check", "checks", "name", "test", "tests", "scenario", "scenarios")
_FUNCTIONS = (
    "coverage_rows",
    "requirement_coverage",
    "rows",
    "coverage",
    "traceability",
)


def _field(row: Any, names: Iterable[str]) -> Any:
    for name in names:
        if isinstance(row, Mapping) and name in row:
            return row[name]
        if not isinstance(row, Mapping) and hasattr(row, name):
            return getattr(row, name)
    return None


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Iterable):
        return [str(v["name"]) if isinstance(v, Mapping) and "name" in v else str(v) for v in value]
    return [str(value)]


def _rows_to_checks(rows: Any) -> dict[str, list[str]]:
    checks: dict[str, set[str]] = defaultdict(set)
    if isinstance(rows, Mapping):
        items: Iterable[Any] = ({"requirement": k, "checks": v} for k, v in rows.items())
    else:
        items = rows
    for row in items:
        if isinstance(row, (tuple, list)) and len(row) >= 2:
            req, names = row[0], _as_list(row[1])
        else:
            req = _field(row, _ROW_ID_FIELDS)
            names = _as_list(_field(row, _ROW_CHECK_FIELDS))
            if isinstance(row, Mapping) and "checks" in row:
                names += [f"scenario {name}" for name in _as_list(row.get("scenarios"))]
        if isinstance(req, str) and req.startswith("JF-"):
            checks[req].update(names)
    return {req: sorted(names) for req, names in sorted(checks.items())}


def conformance_coverage() -> ConformanceCoverage:
    """Read `jfsm_conformance.run.coverage` if it exists; never raises."""
    try:
        module = importlib.import_module("jfsm_conformance.run.coverage")
    except ModuleNotFoundError as exc:
        if exc.name in ("jfsm_conformance", "jfsm_conformance.run.coverage"):
            return ConformanceCoverage(False, "conformance coverage: not yet generated")
        return ConformanceCoverage(
            False, f"conformance coverage: not yet generated (import failed: {exc})"
        )
    except Exception as exc:  # another product, mid-flight: report, never crash the build
        return ConformanceCoverage(
            False, f"conformance coverage: not yet generated (import failed: {exc!r})"
        )
    for name in _FUNCTIONS:
        function = getattr(module, name, None)
        if callable(function):
            try:
                checks = _rows_to_checks(function())
            except Exception as exc:
                return ConformanceCoverage(
                    False,
                    f"conformance coverage: not yet generated "
                    f"(`jfsm_conformance.run.coverage.{name}()` failed: {exc!r})",
                )
            source = f"from `jfsm_conformance.run.coverage.{name}()`"
            return ConformanceCoverage(True, source, checks)
    return ConformanceCoverage(
        False,
        "conformance coverage: not yet generated (`jfsm_conformance.run.coverage` has none of "
        + ", ".join(f"`{n}()`" for n in _FUNCTIONS)
        + ")",
    )
