"""The implementer's path, run as the guide writes it: every command of the guide's
"Getting the suite" section runs verbatim (`bash -c`), in a directory outside the checkout
holding the built wheel and a driver at `build/jfsm-driver.js`, and so does the replay command
the suite prints for a failure (with its `uvx` prefix when run through uvx).

The driver is a Node script starting the reference engine over stdio (durable, in a state
directory the test names per command); for the runs after the first failure the test sets
`JFSM_STUB_BROKEN`, and the engine loses the suffix of a published stack (JF-COMP-003), so
that there is a failure to replay. The environment, never the commands, carries what the test
chooses: where uv installs tools (`UV_TOOL_DIR`, `UV_TOOL_BIN_DIR` on `PATH`), the versions the
lock resolves (`UV_CONSTRAINT`), `$JFSM` (this checkout) and the stub's settings.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.packaging_helpers import locked_export_command

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guide" / "implementers.md"

STUB_JS = """\
// a stand-in for the implementer's driver: the reference engine behind a Node process
const { spawn } = require("node:child_process");
const path = require("node:path");
const child = spawn(process.env.JFSM_STUB_PYTHON, [path.join(__dirname, "serve.py")], {
  stdio: "inherit",
});
child.on("exit", (code) => process.exit(code === null ? 1 : code));
"""
STUB_PY = """\
import asyncio, os
from jfsm.driver import ReferenceDriver, serve_stdio
from jfsm_conformance.examples.broken import _DropSuffix

inner = ReferenceDriver(os.environ["JFSM_STUB_STATE"])
asyncio.run(serve_stdio(_DropSuffix(inner) if os.environ.get("JFSM_STUB_BROKEN") else inner))
"""


def guide_commands() -> list[str]:
    """The shell lines of the guide's "Getting the suite" section, in order."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("## Getting the suite", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
    # a line ending in a backslash goes on in the next one, as in the shell
    lines = [line for block in blocks for line in re.split(r"(?<!\\)\n", block)]
    return [line for line in lines if line.strip()]


def test_the_guide_names_the_path_it_documents() -> None:
    commands = guide_commands()
    assert commands[0].startswith("uv tool install ")
    kinds = {
        "smoke": "conformance smoke",
        "run": "jfsm conformance --driver",
        "junit": "--junit-xml",
        "uvx": "uvx --from",
        "checkout": 'uv run --project "$JFSM"',
    }
    for kind, needle in kinds.items():
        assert any(needle in c for c in commands), kind
    assert not any(c.startswith("uv run jfsm") for c in commands)  # fails outside a checkout


@pytest.mark.slow
def test_every_command_of_the_implementers_path_runs_verbatim_outside_the_checkout(
    tmp_path: Path,
) -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the guide's driver is `node build/jfsm-driver.js`")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "UV_PROJECT"))}
    env.pop("UV_OFFLINE", None)
    locked = tmp_path / "locked.txt"
    export = locked_export_command(locked)
    subprocess.run(export, check=True, capture_output=True, env=env, timeout=120)
    dist = tmp_path / "dist"
    built = subprocess.run(
        ["uv", "build", "--wheel", "--out-dir", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = dist.glob("jfsm-*-py3-none-any.whl")

    mine = tmp_path / "my-engine"  # the implementer's repository
    (mine / "build").mkdir(parents=True)
    shutil.copy(wheel, mine / wheel.name)
    (mine / "build" / "jfsm-driver.js").write_text(STUB_JS, encoding="utf-8")
    (mine / "build" / "serve.py").write_text(STUB_PY, encoding="utf-8")
    tools = tmp_path / "uv-tools"
    env |= {
        "UV_TOOL_DIR": str(tools),
        "UV_TOOL_BIN_DIR": str(tmp_path / "bin"),
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        "UV_CONSTRAINT": str(locked),
        "JFSM": str(ROOT),
        "JFSM_STUB_PYTHON": str(tools / "jfsm" / "bin" / "python"),
    }
    states = iter(range(1000))

    def sh(command: str, *, broken: bool = False) -> subprocess.CompletedProcess[str]:
        run_env = {**env, "JFSM_STUB_STATE": str(tmp_path / f"state-{next(states)}")}
        if broken:
            run_env["JFSM_STUB_BROKEN"] = "1"
        return subprocess.run(
            ["bash", "-c", command],
            cwd=mine,
            env=run_env,
            capture_output=True,
            text=True,
            timeout=900,
        )

    def replay_line(out: str) -> str:
        match = re.search(r"^  replay: (.+)$", out, re.MULTILINE)
        assert match, out[-3000:]
        return match.group(1)

    commands = guide_commands()
    assert all(wheel.name in c for c in commands if "@ ./jfsm-" in c), wheel.name
    replayed = 0
    for command in commands:
        narrowed = "--select JF-COMP-003" in command
        done = sh(command, broken=narrowed)
        if not narrowed:
            report = mine / "conformance-report" / "report.json"
            first = report.read_text(encoding="utf-8")[:3000] if report.is_file() else ""
            assert done.returncode == 0, (command, first, done.stderr[-3000:])
            if "conformance smoke" in command:
                assert "0 failed" in done.stdout, done.stdout
            continue
        # a failing run: exit 1, the failure told on stdout, replayed as printed
        assert done.returncode == 1, (command, done.stdout[-3000:], done.stderr[-3000:])
        assert re.search(r"^FAIL +JF-COMP-003 ", done.stdout, re.MULTILINE), done.stdout
        assert "differs from the model" in done.stdout
        replay = replay_line(done.stdout)
        prefix = command.split(" conformance ", 1)[0]
        assert replay.startswith(
            ("uvx --from 'jfsm[conformance] @ ./" if prefix.startswith("uvx") else prefix)
            + ("" if prefix.startswith("uvx") else " conformance replay ")
        ), (prefix, replay)
        assert " conformance replay conformance-report/traces/" in replay
        again = sh(replay, broken=True)
        assert again.returncode == 1, (replay, again.stdout[-2000:], again.stderr[-2000:])
        assert "reproduced" in again.stderr
        replayed += 1
    assert replayed == 2  # the installed command and uvx
    junit = ET.parse(mine / "conformance.xml").getroot().find("testsuite")
    assert junit is not None and int(junit.get("failures", "-1")) == 0
    assert int(junit.get("tests", "0")) >= 100
