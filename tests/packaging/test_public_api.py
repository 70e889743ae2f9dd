"""The public API stays curated: every module declares `__all__`, and the names it lists
exist; the package root exports exactly the documented names."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import jfsm

MODULES = sorted(
    name
    for _, name, _ in pkgutil.walk_packages(jfsm.__path__, prefix="jfsm.")
    if not name.startswith("jfsm._")
)


@pytest.mark.parametrize("name", MODULES)
def test_module_declares_its_public_names(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    missing = [item for item in exported if not hasattr(module, item)]
    assert missing == [], f"{name}.__all__ names what it does not define: {missing}"


def test_package_root_api() -> None:
    assert sorted(jfsm.__all__) == sorted(
        [
            "CompressionPending",
            "CompressionReport",
            "Compressor",
            "FileStore",
            "GameEngine",
            "HttpCompressor",
            "InvalidInput",
            "InvalidTransition",
            "JfsmError",
            "MemoryStore",
            "Participant",
            "PostgresStore",
            "Projection",
            "QuotaExceeded",
            "Store",
            "StoreCorrupted",
            "StoreImage",
            "StoreLocked",
            "StoreUnavailable",
            "SyncGameEngine",
            "SyncHttpCompressor",
            "TransportError",
            "__version__",
            "canonical_length",
            "canonical_text",
            "constants",
            "count",
            "migrate_postgres",
        ]
    )


def test_every_error_code_is_in_the_spec() -> None:
    from jfsm.errors import ERROR_CODES
    from jfsm.spec import load_json

    assert list(ERROR_CODES) == load_json("constants.json")["error_codes"]


def test_import_jfsm_and_version_load_no_dependency() -> None:
    """`import jfsm` and `jfsm --version` import none of the engine's dependencies (the
    public names load on first use); their CPU cost is measured in `benchmarks/startup.py`."""
    import subprocess
    import sys

    heavy = ("pydantic", "httpx", "jsonschema", "transitions", "asyncio", "jfsm.engine")
    probe = f"import sys\n{{}}\nprint(sorted(m for m in {heavy!r} if m in sys.modules))"
    for setup in ("import jfsm", "from jfsm.cli import build_parser; build_parser()"):
        done = subprocess.run(
            [sys.executable, "-c", probe.format(setup)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "[]", (setup, done.stdout)
    done = subprocess.run(
        [sys.executable, "-c", "import jfsm; print(jfsm.SyncGameEngine.__module__)"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == "jfsm.sync", done.stderr
