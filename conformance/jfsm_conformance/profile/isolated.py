"""Run the profile against one release of a library in a throwaway environment.

`jfsm profile --adapter NAME --version X` creates a virtual environment with `uv venv`,
installs this jfsm checkout (editable) with the extras the profile needs (`conformance`,
for Hypothesis, and the adapter's `profile-*` extra, for the library's fakes' helpers) and
`PACKAGE==X` with `uv pip install`, and runs `jfsm profile` there with the same arguments.
Needs `uv` on the PATH and a jfsm checkout (a source tree with `pyproject.toml`); otherwise
it is a harness error (exit code 2). The child's exit code passes through when it is 0, or
1 with its report written (a verdict); anything else (a crash, a signal, 1 without a
report) becomes 2.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .adapters import ADAPTERS

__all__ = ["PACKAGES", "run_isolated"]

# adapter name -> the package whose version `--version` pins
PACKAGES = {name: entry.package for name, entry in ADAPTERS.items() if entry.package}
# package -> what its releases need installed beside them (camel-ai imports FastMCP from
# mcp.server, which mcp 2 removed)
ALSO: dict[str, tuple[str, ...]] = {"camel-ai": ("mcp<2",)}

_ROOT = Path(__file__).resolve().parents[3]


def run_isolated(adapter: str, version: str, args: list[str], venv_dir: str | None = None) -> int:
    """Install `PACKAGES[adapter]==version` in a fresh venv and run `jfsm profile args` there;
    returns its exit code (2 if the environment cannot be made)."""
    package = PACKAGES.get(adapter)
    if package is None:
        print(
            f"jfsm profile: --version needs a library adapter: {sorted(PACKAGES)}", file=sys.stderr
        )
        return 2
    if shutil.which("uv") is None or not (_ROOT / "pyproject.toml").exists():
        print("jfsm profile: --version needs uv on the PATH and a jfsm checkout", file=sys.stderr)
        return 2
    venv = Path(venv_dir or tempfile.mkdtemp(prefix=f"jfsm-{package}-{version}-"))
    try:
        install_release(venv, package, version, _ROOT, also=ALSO.get(package, ()))
    except subprocess.CalledProcessError as exc:
        print(f"jfsm profile: could not install {package}=={version}: {exc}", file=sys.stderr)
        return 2
    print(f"jfsm profile: {package}=={version} in {venv}", file=sys.stderr)
    report = Path(_option(args, "--report-dir") or "profile-report") / "profile.json"
    began = time.time()
    code = subprocess.run([str(venv / "bin" / "jfsm"), "profile", *args]).returncode
    if code == 1 and args[:1] != ["replay"]:
        # a verdict writes its report first; a crash (an import error) exits 1 without one
        fresh = report.exists() and report.stat().st_mtime >= began - 1
        if not fresh:
            print("jfsm profile: the run in the venv crashed (no report)", file=sys.stderr)
            return 2
    return code if code in (0, 1) else 2


def _option(args: list[str], name: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def install_release(
    venv: Path,
    package: str,
    version: str,
    source: Path,
    extras: tuple[str, ...] = (),
    quiet: bool = True,
    also: tuple[str, ...] = (),
) -> Path:
    """Make `venv` (if missing) and install jfsm from `source` with the `conformance` extra
    (plus `extras`), `package==version` and the requirements `also` into it with uv;
    returns its python. Raises `CalledProcessError` if uv fails (with uv's output in it
    when `quiet` is false)."""
    python = venv / "bin" / "python"
    pin = f"{package}=={version}"
    wanted = ",".join(["conformance", *extras])
    run: dict[str, Any] = {"check": True}
    if not quiet:
        run.update(capture_output=True, text=True)
    if not python.exists():
        subprocess.run(["uv", "venv", "-q", "--python", "3.11", str(venv)], **run)
    subprocess.run(
        [
            *("uv", "pip", "install", "-q", "--python", str(python)),
            *("-e", f"{source}[{wanted}]", pin, *also),
        ],
        **run,
    )
    return python
