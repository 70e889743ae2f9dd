"""Two runs never clobber each other; every printed replay command works (issue 35, R161).

A run holds its report folder (`jfsm_conformance.usage.hold_report_folder`): a second
`jfsm conformance` pointed at it meanwhile is refused in one line with exit 2, before it
touches the first's traces or report, so the replay commands the first printed still run.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from jfsm_conformance.usage import FolderInUse, hold_report_folder

BROKEN = "python:jfsm_conformance.examples.broken:drop_suffix"  # fails JF-COMP-003


def _jfsm(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    return subprocess.run(
        ["jfsm", *args], cwd=folder, env=env, capture_output=True, text=True, timeout=600
    )


def _printed_replays(stdout: str) -> list[str]:
    return [line.split("replay: ", 1)[1] for line in stdout.splitlines() if "replay: " in line]


@pytest.mark.slow
def test_a_second_run_is_refused_while_the_first_holds_the_folder(tmp_path: Path) -> None:
    first = _jfsm(tmp_path, "conformance", "--driver", BROKEN, "--select", "JF-COMP-003")
    assert first.returncode == 1, first.stderr
    commands = _printed_replays(first.stdout)
    assert commands, first.stdout
    report = tmp_path / "conformance-report"
    before = {p.name: p.read_bytes() for p in (report / "traces").iterdir()}
    before_report = (report / "report.json").read_bytes()

    with hold_report_folder(report):  # the first run, still going (as a process would)
        second = _jfsm(tmp_path, "conformance", "--select", "JF-TEXT-001")
    assert second.returncode == 2
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in second.stderr, second.stderr
    assert lines[0].startswith("jfsm conformance: the report folder conformance-report is in use")
    assert f"pid {os.getpid()}" in lines[0]
    assert {p.name: p.read_bytes() for p in (report / "traces").iterdir()} == before
    assert (report / "report.json").read_bytes() == before_report

    for command in commands:  # as printed, in the folder the run was started from
        replayed = _jfsm(tmp_path, *shlex.split(command)[1:])
        assert replayed.returncode == 1, (command, replayed.stderr)
        assert "reproduced:" in replayed.stderr


def test_the_folder_is_free_again_once_its_run_ends(tmp_path: Path) -> None:
    held = hold_report_folder(tmp_path / "r")
    held.__enter__()
    try:
        with pytest.raises(FolderInUse, match="in use by another run"):
            hold_report_folder(tmp_path / "r").__enter__()
    finally:
        held.__exit__(None, None, None)
    with hold_report_folder(tmp_path / "r") as held:  # released: the next run takes it
        assert held == tmp_path / "r"
