"""Packaging: the engine installs and runs without the suite's dependencies; the wheels, built
and installed into fresh virtual environments outside the repo, run as the guides say.

The acceptance test (`slow`) builds the sdist and the wheel with `uv build`, then, in
directories outside the checkout, installs them with the versions `uv.lock` resolves
(`uv export` as constraints), fetched from the index when the uv cache is empty (it never
relies on a warm cache; `.ci/run` runs it with an empty `UV_CACHE_DIR`):

- a slim venv (`pip install jfsm`): the README's embedding example runs, `jfsm driver`
  answers, `jfsm conformance` says in one line what to install (exit 2), and that install
  command resolves;
- a suite venv (`jfsm[conformance]`): `smoke` and the quick profile (narrowed to JF-CAT, to
  bound the time) pass against the reference driver, `--junit-xml` is JUnit with one case
  per requirement, an unknown `--select` exits 2;
- the documented commands from an implementer's directory: `uvx --from "jfsm[conformance]
  @ ./WHEEL" ...` and `uv run --project CHECKOUT ...`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

import jfsm
import jfsm_conformance.run.runner
from tests.packaging_helpers import locked_export_command

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
# the suite's top-level package, spelled so that renaming it is one `sed` of `conformance.`
SUITE_ONLY = ("hypothesis", "pytest", "_pytest", jfsm_conformance.run.runner.__name__.split(".")[0])

# Runs in a fresh interpreter where importing any suite-only module fails.
BLOCKED_IMPORTS = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {SUITE_ONLY!r}:
            raise ModuleNotFoundError("No module named " + repr(name) + " (blocked)", name=name)
        return None
sys.meta_path.insert(0, Block())
"""


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCKED_IMPORTS + code, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_engine_stores_transport_and_driver_import_without_the_suite() -> None:
    done = _python(
        "import asyncio, json\n"
        "import jfsm, jfsm.engine, jfsm.stores, jfsm.transport, jfsm.sync, jfsm.driver, jfsm.cli\n"
        "from jfsm.driver import ReferenceDriver\n"
        "d = ReferenceDriver(None)\n"
        "async def go():\n"
        "    a = await d.handle({'id': 1, 'op': 'hello', 'args': "
        "{'protocol': 1, 'compressUrl': 'http://127.0.0.1:9'}})\n"
        "    b = await d.handle({'id': 2, 'op': 'create_game', 'args': {'game': 'g'}})\n"
        "    c = await d.handle({'id': 3, 'op': 'record_round', 'args': "
        "{'game': 'g', 'input': 'hi', 'output': 'there'}})\n"
        "    return [a['ok'], b['ok'], c['ok']]\n"
        "print(json.dumps(asyncio.run(go())))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in " + repr(SUITE_ONLY) + "))\n"
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert json.loads(lines[0]) == [True, True, True]
    assert lines[1] == "[]"


def test_conformance_on_a_slim_install_says_what_to_install_in_one_line() -> None:
    done = _python("from jfsm.cli import main\nsys.exit(main(['conformance']))")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "jfsm[conformance]" in lines[0] and "pip install" in lines[0]


def test_profile_on_a_slim_install_says_what_to_install_in_one_line() -> None:
    done = _python(
        "from jfsm.cli import main\nsys.exit(main(['profile', '--adapter', 'reference']))"
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "jfsm profile needs the extra jfsm[conformance]" in lines[0]


@pytest.mark.parametrize("command", [["conformance"], ["profile", "--adapter", "toy"]])
def test_a_command_whose_dependencies_are_missing_says_what_to_install(command: list[str]) -> None:
    """As on a real slim install: the suite's package is there (the wheel ships it), its
    dependencies are not; the entry point's loader meets that before any work (R104)."""
    blocked = BLOCKED_IMPORTS.replace(repr(SUITE_ONLY), repr(("hypothesis", "pytest", "_pytest")))
    done = subprocess.run(
        [sys.executable, "-c", blocked + f"from jfsm.cli import main\nsys.exit(main({command!r}))"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"jfsm {command[0]} needs the extra jfsm[conformance] (missing: hypothesis)" in lines[0]


def test_metadata_version_license_and_typing() -> None:
    project = PYPROJECT["project"]
    assert project["version"] == jfsm.__version__
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert "MIT License" in (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Typing :: Typed" in project["classifiers"]
    assert (ROOT / "jfsm" / "py.typed").is_file()
    base = " ".join(project["dependencies"])
    for suite_only in ("hypothesis", "pytest"):
        assert suite_only not in base
        assert any(
            d.startswith(suite_only) for d in project["optional-dependencies"]["conformance"]
        )
        dev = PYPROJECT["dependency-groups"]["dev"]  # strings and {include-group = ...}
        assert any(isinstance(d, str) and d.startswith(suite_only) for d in dev)
    for url in project.get("urls", {}).values():
        assert "example" not in url and "TODO" not in url  # no placeholders
    done = subprocess.run(
        [sys.executable, "-m", "jfsm.cli", "--version"], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == f"jfsm {jfsm.__version__}"


# ------------------------------------------------------------------------------------------
# the acceptance test: wheels into fresh venvs outside the repo
# ------------------------------------------------------------------------------------------


def _run(
    args: list[str], cwd: Path, *, timeout: float = 300, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "UV_PROJECT"))}
    env.pop("UV_OFFLINE", None)  # a cold cache fetches from the index
    return subprocess.run(
        args, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=timeout
    )


def _ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, (done.args, done.stdout[-2000:], done.stderr[-2000:])
    return done


def _embedding_example() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Embedding", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match
    return match.group(1)


@pytest.mark.slow
def test_wheels_install_into_fresh_venvs_and_run_as_documented(tmp_path: Path) -> None:
    # the versions the lock resolves, as constraints for every install below
    locked = tmp_path / "locked.txt"
    exported = _ok(_run(locked_export_command(locked), tmp_path))
    assert "h11==" in locked.read_text(encoding="utf-8"), exported.stderr
    constrained = ["-c", str(locked)]
    dist = tmp_path / "dist"
    _ok(_run(["uv", "build", "--out-dir", str(dist), str(ROOT)], tmp_path))
    (wheel,) = dist.glob("jfsm-*-py3-none-any.whl")
    assert list(dist.glob("jfsm-*.tar.gz"))
    # installed import names: only `jfsm` and `jfsm_conformance` (PyPI has an unrelated
    # top-level `conformance`; R52), with the spec, the skeleton and both `py.typed` inside
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode(
            "utf-8"
        )
    assert "License-Expression: MIT" in metadata and "License-File: LICENSE" in metadata
    for label, url in PYPROJECT["project"].get("urls", {}).items():
        assert f"Project-URL: {label}, {url}" in metadata
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"jfsm", "jfsm_conformance"}, top
    for inside in (
        "jfsm/py.typed",
        "jfsm_conformance/py.typed",
        "jfsm/_spec/requirements.toml",
        "jfsm_conformance/skeletons/jfsm-driver.ts",
    ):
        assert inside in names, inside

    # the slim engine install
    slim = tmp_path / "slim"
    _ok(_run(["uv", "venv", "-q", str(slim)], tmp_path))
    _ok(
        _run(
            [
                "uv",
                "pip",
                "install",
                "-q",
                "--python",
                str(slim / "bin" / "python"),
                str(wheel),
                *constrained,
            ],
            tmp_path,
        )
    )
    app = tmp_path / "app"
    app.mkdir()
    (app / "embed.py").write_text(_embedding_example(), encoding="utf-8")
    _ok(_run([str(slim / "bin" / "python"), "embed.py"], app))
    assert (app / "game-42").is_dir()  # the durable store the example opened
    imported = _ok(
        _run(
            [
                str(slim / "bin" / "python"),
                "-c",
                "import importlib.util as u; print([m for m in ('hypothesis', 'pytest') "
                "if u.find_spec(m)])",
            ],
            app,
        )
    )
    assert imported.stdout.strip() == "[]"
    hint = _run([str(slim / "bin" / "jfsm"), "conformance"], app)
    assert hint.returncode == 2 and "jfsm[conformance]" in hint.stderr
    # the hint's command resolves: it names the wheel this venv was installed from
    command = shlex.split(hint.stderr.strip().split("): ", 1)[1])
    assert command[:2] == ["pip", "install"] and wheel.as_uri() in command[-1], command
    _ok(
        _run(
            [
                "uv",
                "pip",
                "install",
                "--dry-run",
                "--python",
                str(slim / "bin" / "python"),
                *constrained,
                *command[2:],
            ],
            app,
        )
    )
    hello = json.dumps(
        {"id": 1, "op": "hello", "args": {"protocol": 1, "compressUrl": "http://127.0.0.1:9"}}
    )
    served = _ok(_run([str(slim / "bin" / "jfsm"), "driver"], app, stdin=hello + "\n", timeout=60))
    assert json.loads(served.stdout.splitlines()[0])["ok"] is True

    # the suite install
    suite = tmp_path / "suite"
    _ok(_run(["uv", "venv", "-q", str(suite)], tmp_path))
    requirement = f"jfsm[conformance] @ {wheel.as_uri()}"
    _ok(
        _run(
            [
                "uv",
                "pip",
                "install",
                "-q",
                "--python",
                str(suite / "bin" / "python"),
                requirement,
                *constrained,
            ],
            tmp_path,
        )
    )
    jfsm_bin = str(suite / "bin" / "jfsm")
    work = tmp_path / "work"
    work.mkdir()
    smoke = _ok(_run([jfsm_bin, "conformance", "smoke"], work))
    assert "0 failed" in smoke.stdout
    # the quick profile, narrowed to the scene requirements to bound the test's time (CI runs
    # the whole quick profile from the checkout, in process and over stdio)
    full = _run(
        [
            jfsm_bin,
            "conformance",
            "--profile",
            "quick",
            "--select",
            "JF-CAT",
            "--junit-xml",
            "junit.xml",
        ],
        work,
        timeout=600,
    )
    assert full.returncode == 0, full.stderr[-3000:]
    suite_xml = ET.parse(work / "junit.xml").getroot().find("testsuite")
    assert suite_xml is not None
    cases = suite_xml.findall("testcase")
    assert len(cases) == int(suite_xml.get("tests", "0")) >= 9
    assert all(c.get("name", "").startswith("JF-CAT-") for c in cases)
    assert sum(c.find("skipped") is None for c in cases) >= 5  # most of them really ran
    assert int(suite_xml.get("failures", "-1")) == 0
    assert (work / "conformance-report" / "report.json").is_file()
    typo = _run([jfsm_bin, "conformance", "--select", "JF-TYPO"], work)
    assert typo.returncode == 2 and "matches no requirement" in typo.stderr
    skeleton = _ok(_run([jfsm_bin, "conformance", "skeleton"], work))
    assert skeleton.stdout.startswith("// jfsm-driver.ts")

    # the documented ways from an implementer's own directory
    mine = tmp_path / "my-engine"
    mine.mkdir()
    (mine / wheel.name).write_bytes(wheel.read_bytes())
    via_uvx = _ok(
        _run(
            [
                "uvx",
                "--from",
                f"jfsm[conformance] @ ./{wheel.name}",
                "jfsm",
                "conformance",
                "smoke",
            ],
            mine,
        )
    )
    assert "0 failed" in via_uvx.stdout
    via_project = _ok(
        _run(["uv", "run", "--project", str(ROOT), "jfsm", "conformance", "smoke"], mine)
    )
    assert "0 failed" in via_project.stdout
