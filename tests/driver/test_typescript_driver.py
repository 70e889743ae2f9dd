"""The TypeScript driver skeleton runs as documented: the guide's commands, verbatim, for the
Node version on this machine; the smoke check and the full run report "not covered" (never a
failure) for what the skeleton does not implement."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guide" / "typescript-driver.md"
SKELETON = ROOT / "docs" / "guide" / "jfsm-driver.ts"


def documented_commands(tab: str) -> list[str]:
    """The shell lines of the guide's tab whose title starts with `tab`."""
    text = GUIDE.read_text(encoding="utf-8")
    match = re.search(
        r'^=== "' + re.escape(tab) + r'[^"]*"\n(?:.*\n)*?    ```sh\n((?:    .*\n)*?)    ```',
        text,
        re.MULTILINE,
    )
    assert match, f"no sh block under the tab {tab!r} in {GUIDE.name}"
    # a line ending in a backslash goes on in the next one, as in the shell
    lines = re.split(r"(?<!\\)\n", match.group(1))
    return [line[4:] for line in lines if line.strip()]


def _node_major_minor() -> tuple[int, int] | None:
    node = shutil.which("node")
    if node is None:
        return None
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    major, minor = (int(x) for x in version.stdout.strip().lstrip("v").split(".")[:2])
    return major, minor


def test_the_guide_pins_the_compiler_and_the_node_types() -> None:
    commands = documented_commands("Node 20")
    assert any(re.search(r"typescript@\d+\.\d+", c) for c in commands), commands
    assert any("@types/node@20" in c for c in commands)
    assert any(c.startswith("npx tsc ") and "--types node" in c for c in commands)
    assert any("jfsm conformance smoke" in c for c in commands)


@pytest.mark.slow
def test_the_skeleton_runs_as_documented(tmp_path: Path) -> None:
    version = _node_major_minor()
    if version is None:
        pytest.skip("node is not installed: the TypeScript skeleton cannot run")
    tab = "Node 22.6" if version >= (22, 6) else "Node 20"
    shutil.copy(SKELETON, tmp_path / SKELETON.name)
    env = {
        **os.environ,
        "JFSM": str(ROOT),
        # npm resolves from its cache when it can (no network in CI's sandbox)
        "npm_config_prefer_offline": "true",
        "npm_config_audit": "false",
        "npm_config_fund": "false",
    }
    outputs = []
    for command in documented_commands(tab):
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if command.startswith("npm install") and done.returncode != 0:
            pytest.skip(f"npm could not install the pinned compiler here: {done.stderr[-300:]}")
        outputs.append(done)
        assert done.returncode == 0, (command, done.stdout[-3000:], done.stderr[-3000:])
    smoke = next(o for o in outputs if "conformance smoke" in " ".join(o.args))
    assert "hello             ok    my-engine 0.1.0 (typescript)" in smoke.stdout
    assert "create_game       not implemented" in smoke.stdout
    report = json.loads((tmp_path / "conformance-report" / "report.json").read_text("utf-8"))
    verdicts = {v["id"]: v for v in report["verdicts"]}
    # it stayed up through every op (JF-ERR-020); nothing else could be judged
    assert {i: v["verdict"] for i, v in verdicts.items() if v["verdict"] != "not covered"} == {
        "JF-ERR-020": "pass"
    }
    assert "create_game" in verdicts["JF-HIST-009"]["reason"]
    assert report["exit_code"] == 0
    assert report["implementation_label"] == "my-engine 0.1.0 (typescript)"
