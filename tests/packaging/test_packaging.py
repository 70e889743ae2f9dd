"""Packaging: the engine installs and runs without the suite's dependencies; the wheels, built
and installed into fresh virtual environments outside the repo, run as the guides say.

The acceptance test (`slow`) builds the sdist and the wheel with `uv build`, then, in
directories outside the checkout, installs them with the versions `uv.lock` resolves
(`uv export` as constraints), fetched from the index when the uv cache is empty (it never
relies on a warm cache; `.ci/run` runs it in the slow run on a CI machine whose cache
started empty, R234):

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


# ------------------------------------------------------------------------------------------
# the ways without the package index, and the CI recipe, as the implementer's guide prints
# them (issue 40)
# ------------------------------------------------------------------------------------------
GUIDE = ROOT / "docs" / "guide" / "implementers.md"


def _section(title: str) -> str:
    text = GUIDE.read_text(encoding="utf-8")
    return text.split(f"\n## {title}", 1)[1].split("\n## ", 1)[0]


def _sh_lines(section: str) -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def test_the_guide_prints_every_way_without_the_index() -> None:
    lines = _sh_lines(_section("Without the package index"))
    assert any('@ git+$JFSM_GIT" jfsm conformance' in line for line in lines), lines
    assert any('@ $JFSM" jfsm conformance' in line for line in lines), lines
    assert any(line.startswith("uv build ") for line in lines), lines
    assert any(line.startswith("uv tool install ") for line in lines), lines
    assert any("pip install " in line for line in lines), lines
    script = _section("In your CI")
    assert "--report-dir" in script and "--junit-xml" in script


def test_no_page_installs_from_the_index() -> None:
    """No package named jfsm is on the index yet: no page, nor the README, may tell a reader
    to install it from there (R211)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    from_index = re.compile(
        r"""(pip install|uv add|uv pip install) +['"]?jfsm(\[[a-z,-]+\])?['"]?(?! *@)(\s|$|`)"""
    )
    found = [
        f"{page.relative_to(ROOT)}: {line.strip()}"
        for page in pages
        if page.name != "decisions.md" and page.parent.name != "findings"
        for line in page.read_text(encoding="utf-8").splitlines()
        if from_index.search(line)
    ]
    assert found == []
    assert from_index.search("run `pip install 'jfsm[postgres]'` first")  # the check bites


@pytest.mark.slow
def test_the_ways_without_the_index_run_as_printed(tmp_path: Path) -> None:
    """Every line of the guide's "Without the package index" section, verbatim (`bash -c`),
    from a folder outside the checkout: `$JFSM_GIT` is a bare clone of this repository (its
    `file://` URL), `$JFSM` this checkout; the environment carries the lock's versions
    (`UV_CONSTRAINT`, `PIP_CONSTRAINT`) and where uv puts its tools, never the commands."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "UV_PROJECT"))}
    env.pop("UV_OFFLINE", None)
    locked = tmp_path / "locked.txt"
    _ok(_run(locked_export_command(locked), tmp_path))
    bare = tmp_path / "jfsm.git"
    _ok(_run(["git", "clone", "-q", "--bare", str(ROOT), str(bare)], tmp_path))
    mine = tmp_path / "my-engine"
    mine.mkdir()
    env |= {
        "JFSM_GIT": bare.as_uri(),
        "JFSM": str(ROOT),
        "UV_CONSTRAINT": str(locked),
        "PIP_CONSTRAINT": str(locked),
        "UV_TOOL_DIR": str(tmp_path / "uv-tools"),
        "UV_TOOL_BIN_DIR": str(tmp_path / "bin"),
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{env.get('PATH', '')}",
    }
    lines = _sh_lines(_section("Without the package index"))
    for line in lines:
        done = subprocess.run(
            ["bash", "-c", line], cwd=mine, env=env, capture_output=True, text=True, timeout=900
        )
        assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-3000:])
        if "conformance smoke" in line:
            assert "0 failed" in done.stdout, (line, done.stdout[-2000:])
    installed = subprocess.run(
        [str(tmp_path / "bin" / "jfsm"), "--version"], capture_output=True, text=True, env=env
    )
    assert installed.stdout.strip() == f"jfsm {jfsm.__version__}", installed.stderr
    pip_venv = mine / ".venv" / "bin"
    smoke = _ok(_run([str(pip_venv / "jfsm"), "conformance", "smoke"], mine))
    assert "0 failed" in smoke.stdout


@pytest.mark.slow
def test_the_ci_script_runs_as_printed_and_keeps_its_reports(tmp_path: Path) -> None:
    """The guide's `conformance.sh`, saved as printed and run with `sh` against the reference
    engine (narrowed with an argument the script passes on): exit 0, the report folder with
    `report.json` and the JUnit file kept; a failing run keeps them too, and exits 1. The
    GitHub Actions job runs that script and uploads its folder even after a failure."""
    import yaml

    section = _section("In your CI")
    script = re.findall(r"```sh\n(.*?)```", section, re.DOTALL)[0]
    (tmp_path / "conformance.sh").write_text(script, encoding="utf-8")
    locked = tmp_path / "locked.txt"
    _ok(_run(locked_export_command(locked), tmp_path))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "UV_PROJECT"))}
    env.pop("UV_OFFLINE", None)
    env |= {
        "JFSM_SOURCE": str(ROOT),
        "JFSM_DRIVER": "python:jfsm_conformance.examples.reference:durable_without_backoff",
        "UV_CONSTRAINT": str(locked),
    }

    def run(*args: str, **more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["sh", "conformance.sh", *args],
            cwd=tmp_path,
            env={**env, **more},
            capture_output=True,
            text=True,
            timeout=900,
        )

    passed = run("--select", "JF-CAT-001")
    assert passed.returncode == 0, (passed.stdout[-2000:], passed.stderr[-2000:])
    out = tmp_path / "conformance-out"
    assert json.loads((out / "report" / "report.json").read_text(encoding="utf-8"))
    assert ET.parse(out / "junit.xml").getroot().find("testsuite") is not None
    broken = "python:jfsm_conformance.examples.broken:drop_suffix"
    failed = run("--select", "JF-COMP-003", JFSM_DRIVER=broken, OUT="failed")
    assert failed.returncode == 1, (failed.stdout[-2000:], failed.stderr[-2000:])
    assert (tmp_path / "failed" / "report" / "report.json").is_file()
    suite = ET.parse(tmp_path / "failed" / "junit.xml").getroot().find("testsuite")
    assert suite is not None and int(suite.get("failures", "0")) >= 1
    # the GitHub Actions job: runs the script, keeps its folder whatever the outcome
    job = yaml.safe_load(re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)[0])
    steps = job["jobs"]["conformance"]["steps"]
    assert any(step.get("run") == "sh conformance.sh" for step in steps)
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    assert upload["if"] == "always()" and upload["with"]["path"].rstrip("/") == "conformance-out"
    assert "JFSM_SOURCE" in script and "JFSM_DRIVER" in script
