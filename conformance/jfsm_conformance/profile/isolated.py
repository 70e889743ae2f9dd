"""Run the profile against one release of a library in a throwaway environment.

`jfsm profile --adapter NAME --version X` creates a virtual environment with `uv venv`,
installs this jfsm checkout (editable) with the extras the profile needs (`conformance`,
for Hypothesis, and the adapter's `profile-*` extra, for the library's fakes' helpers) and
`PACKAGE==X` with `uv pip install`, and runs `jfsm profile` there with the same arguments.
Needs `uv` on the PATH and a jfsm checkout (a source tree with `pyproject.toml`); otherwise
it is a harness error (exit code 2). The child's exit code passes through when it is 0 or 1
(a verdict); anything else (a crash, a signal) becomes 2.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["PACKAGES", "run_isolated"]

# adapter name -> the package whose version `--version` pins
PACKAGES = {
    "langchain": "langchain",
    "langchain-sync": "langchain",
    "openai-agents": "openai-agents",
    "langmem": "langmem",
    "llamaindex-summary": "llama-index-core",
}

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
        install_release(venv, package, version, _ROOT)
    except subprocess.CalledProcessError as exc:
        print(f"jfsm profile: could not install {package}=={version}: {exc}", file=sys.stderr)
        return 2
    print(f"jfsm profile: {package}=={version} in {venv}", file=sys.stderr)
    code = subprocess.run([str(venv / "bin" / "jfsm"), "profile", *args]).returncode
    return code if code in (0, 1) else 2


def install_release(
    venv: Path, package: str, version: str, source: Path, extras: tuple[str, ...] = ()
) -> Path:
    """Make `venv` (if missing) and install jfsm from `source` with the `conformance` extra
    (plus `extras`) and `package==version` into it with uv; returns its python. Raises
    `CalledProcessError` if uv fails."""
    python = venv / "bin" / "python"
    pin = f"{package}=={version}"
    wanted = ",".join(["conformance", *extras])
    if not python.exists():
        subprocess.run(["uv", "venv", "-q", "--python", "3.11", str(venv)], check=True)
    subprocess.run(
        ["uv", "pip", "install", "-q", "--python", str(python), "-e", f"{source}[{wanted}]", pin],
        check=True,
    )
    return python
