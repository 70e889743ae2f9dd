"""A user's own adapter, living outside the package in a temporary directory, run by
`jfsm profile --adapter module:attr`, by the pytest plugin and by `run_profile`."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jfsm_conformance.profile import AdapterSpec, ProfileOptions, Scope, run_profile

MEMORY = textwrap.dedent(
    '''
    """A user's memory: a list, compacted into one summary plus the last exchange."""

    from jfsm_conformance.profile import AdapterSpec, Scope


    class ListMemory:
        def __init__(self, summarizer, publish_empty=False):
            self.summarizer = summarizer
            self.publish_empty = publish_empty
            self.entries = []

        async def append(self, user, assistant):
            self.entries += [user, assistant]

        async def compact(self):
            if len(self.entries) < 4:
                return
            prefix = self.entries[:-2]
            summary = await self.summarizer.summarize("\\n".join(prefix))
            if summary.strip() or self.publish_empty:
                self.entries = [summary, *self.entries[-2:]]

        async def read(self):
            return list(self.entries)

        def observed_states(self):
            return []

        def fail_next_write(self, armed=True):
            pass

        async def close(self):
            pass


    SCOPE = Scope(library="mymem", version="1", entry_point="ListMemory.compact")
    good = AdapterSpec(factory=ListMemory, scope=SCOPE)
    bad = AdapterSpec(factory=lambda s: ListMemory(s, publish_empty=True), scope=SCOPE)
    '''
)


@pytest.fixture
def user_dir(tmp_path: Path) -> Path:
    (tmp_path / "mymem.py").write_text(MEMORY, encoding="utf-8")
    return tmp_path


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return env


@pytest.mark.slow
@pytest.mark.req("JF-SAFE-004")
def test_cli_runs_a_user_adapter_from_outside_the_package(user_dir: Path) -> None:
    jfsm = Path(sys.executable).with_name("jfsm")
    args = [str(jfsm), "profile", "--examples", "15", "--report-dir", "r"]
    bad = subprocess.run(
        [*args, "--adapter", "mymem:bad"],
        cwd=user_dir,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 1, bad.stderr
    report = (user_dir / "r" / "profile.md").read_text("utf-8")
    assert "mymem 1" in report
    assert "| JF-SAFE-004 |" in report and "fail" in report
    good = subprocess.run(
        [*args, "--adapter", "mymem:good"],
        cwd=user_dir,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert good.returncode == 0, good.stderr


def test_broken_references_are_harness_errors(user_dir: Path) -> None:
    jfsm = Path(sys.executable).with_name("jfsm")
    for ref in ("mymem:nothing", "nomodule_here:x", "mymem:SCOPE"):
        proc = subprocess.run(
            [str(jfsm), "profile", "--adapter", ref, "--report-dir", "r"],
            cwd=user_dir,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2, (ref, proc.stderr)
        assert ref in proc.stderr


@pytest.mark.slow
def test_pytest_plugin_runs_a_user_adapter(user_dir: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-n",
            "0",  # one process: the output parsed is pytest's own (R103)
            "-q",
            "--jfsm-safety-adapter",
            "mymem:bad",
            "--jfsm-safety-examples",
            "15",
            "--jfsm-safety-report-dir",
            "r",
        ],
        cwd=user_dir,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "FAILED ::properties.py::JF-SAFE-004" in proc.stdout, proc.stdout[-3000:]
    # one defect, one ID: the empty summary is JF-SAFE-004's alone (not also JF-SAFE-005's);
    # the search's own checks pass (JF-SAFE-020, -021), and JF-SAFE-011 is not applicable
    # to a memory that shows no state during a compaction (R200)
    assert "1 failed, 12 passed, 3 skipped" in proc.stdout, proc.stdout[-3000:]


def test_run_profile_takes_an_adapter_spec_directly() -> None:
    scope = Scope(library="inline", version="1", entry_point="nowhere")
    spec = AdapterSpec(factory=lambda s: (_ for _ in ()).throw(ValueError("boom")), scope=scope)
    result = run_profile(
        ProfileOptions(adapter="inline", examples=3, progress=lambda _: None), spec=spec
    )
    assert result.exit_code == 2
    assert "boom" in (result.harness_error or "")
