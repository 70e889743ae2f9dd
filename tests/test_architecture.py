"""The shape of the house, checked: which module may import which, and how large one grows.

The reference engine is layered. A module imports only modules of its own or a lower layer,
so the pure core never reaches up into stores, transports, drivers or the CLI, and a
reader can start at the bottom and never meet a name defined above. `LAYERS` is that
picture as data; every module of `jfsm` must appear in it (a new module is placed
deliberately). The suite (`jfsm_conformance`) stays independent of the engine it judges:
outside its example drivers and the profile's reference adapter it imports nothing of
`jfsm` but the spec reader (decision R35). The docs page `guide/architecture.md` draws the
same layers in words.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "conformance" / "jfsm_conformance"

# layer -> modules (names relative to `jfsm`); a module imports only from layers <= its own
LAYERS: dict[int, tuple[str, ...]] = {
    # leaves: the spec reader, error types, canonical JSON, file-system primitives
    0: ("spec", "errors", "jcs", "_version", "stores.fsio", "stores.pg_server"),
    # text rules, machine tables, limits
    1: ("text", "machines", "limits"),
    # value shapes: records, projection of a store, the key layout, the compressor seam
    2: ("records", "projection", "layout", "compressor"),
    # the store image and the seams' implementations (telemetry, HTTP transport, fake)
    3: ("image", "telemetry", "transport", "fake_compressor"),
    # stores and the in-memory index of one game's memory
    4: (
        "memory_index",
        "stores.base",
        "stores.scan",
        "stores.snapshot",
        "stores.records",
        "stores.codec",
        "stores.directory",
        "stores.file",
        "stores.crashfs",
        "stores.memory",
        "stores.pg_schema",
        "stores.pg_fencing",
        "stores.pg_games",
        "stores.postgres",
        "stores.location",
        "stores",
    ),
    # one game's memory: commits through a store; the history planner
    5: ("game_memory", "history"),
    # compression of one stack: its machine, its flight, its retries
    6: ("stack_compression",),
    # forced compression (intervene) and catalyst scenes
    7: ("forced", "scene"),
    # the engine facade
    8: ("engine",),
    # on top of the engine: sync wrapper, read-only inspection, the driver protocol
    9: (
        "sync",
        "inspection",
        "driver_wire",
        "driver_stdio",
        "driver_http",
        "driver_state",
        "driver_crash",
        "driver_shared",
        "driver",
    ),
    # the package's curated API and the command line
    10: ("", "cli"),
}

MAX_LINES = 520  # "about 500": a module past this is split by concept
# the suite may import the engine only where it *is* an implementation under test
SUITE_MAY_IMPORT_ENGINE = ("examples/", "profile/adapters/reference")


def _module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, package_name: str, module: str) -> set[str]:
    """Every absolute `jfsm...` module name `path` imports (function-level imports too)."""
    found: set[str] = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = [package_name, *module.split(".")] if module else [package_name]
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            found.add(name)
            # `from jfsm import engine` imports the module `jfsm.engine`
            found.update(f"{name}.{alias.name}" for alias in node.names)
    return found


def _engine_modules() -> dict[str, Path]:
    package = ROOT / "jfsm"
    return {_module_name(p, package): p for p in sorted(package.rglob("*.py"))}


def _layer_of() -> dict[str, int]:
    return {name: layer for layer, names in LAYERS.items() for name in names}


def test_every_engine_module_has_a_layer() -> None:
    placed = _layer_of()
    modules = set(_engine_modules())
    assert sorted(modules - set(placed)) == [], "place new modules in LAYERS"
    assert sorted(set(placed) - modules) == [], "LAYERS names a module that does not exist"


def test_engine_imports_run_downwards_only() -> None:
    placed = _layer_of()
    modules = _engine_modules()
    upward = []
    for name, path in modules.items():
        for imported in _imports(path, "jfsm", name):
            if imported != "jfsm" and not imported.startswith("jfsm."):
                continue
            target = imported.removeprefix("jfsm").removeprefix(".")
            if target not in modules or target == name:
                continue  # `from jfsm.x import Name` also yields `jfsm.x.Name`
            if placed[target] > placed[name]:
                upward.append(f"{name} (layer {placed[name]}) imports {target} ({placed[target]})")
    assert upward == []


@pytest.mark.parametrize("package", ["jfsm", "conformance/jfsm_conformance"])
def test_modules_stay_small(package: str) -> None:
    large = {
        str(p.relative_to(ROOT)): n
        for p in sorted((ROOT / package).rglob("*.py"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert large == {}


def test_the_suite_imports_only_the_spec_reader_from_the_engine() -> None:
    offenders = []
    for path in sorted(SUITE.rglob("*.py")):
        relative = path.relative_to(SUITE).as_posix()
        if relative.startswith(SUITE_MAY_IMPORT_ENGINE):
            continue
        module = _module_name(path, SUITE)
        for imported in _imports(path, "jfsm_conformance", module):
            if imported.split(".")[0] == "jfsm" and imported.split(".")[:2] != ["jfsm", "spec"]:
                offenders.append(f"{relative}: {imported}")
    assert offenders == []


def test_the_architecture_page_shows_every_module_in_its_layer() -> None:
    page = (ROOT / "docs" / "guide" / "architecture.md").read_text(encoding="utf-8")
    rows = {
        int(cells[1]): cells[2]
        for line in page.splitlines()
        if (cells := [c.strip() for c in line.split("|")]) and len(cells) > 3
        if cells[1].isdigit()
    }
    assert set(rows) == set(LAYERS)
    for layer, names in LAYERS.items():
        for name in names:
            assert f"`{'jfsm.' + name if name else 'jfsm'}`" in rows[layer], (layer, name)


def test_the_layer_check_catches_an_upward_import(tmp_path: Path) -> None:
    """The checker itself can fail: a text module importing the engine is reported."""
    fake = tmp_path / "text.py"
    fake.write_text("from jfsm.engine import GameEngine\n", encoding="utf-8")
    imported = _imports(fake, "jfsm", "text")
    placed = _layer_of()
    assert "jfsm.engine" in imported
    assert placed["engine"] > placed["text"]
