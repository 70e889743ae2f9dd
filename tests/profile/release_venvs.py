"""Throwaway environments with one pinned release of a library, for the tests that run the
profile or a findings script against it: one venv per release, made once per session under
pytest's temporary directory (`uv venv` + `uv pip install`, from uv's cache or the
registry) and shared by every test that asks for it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from jfsm_conformance.profile.isolated import install_release

ROOT = Path(__file__).resolve().parents[2]
_NETWORK = ("failed to fetch", "connect", "dns", "network", "offline", "timed out", "resolve")


class ReleaseVenvs:
    """`get(package, version)`: the python of a venv holding jfsm and that release."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.made: dict[tuple[str, str], Path] = {}
        self.failed: dict[tuple[str, str], str] = {}

    def get(self, package: str, version: str, also: tuple[str, ...] = ()) -> Path:
        """The venv's python (`also`: more pins installed with the first call, so that
        releases that fit together share one venv); skips the test if the registry is
        unreachable, fails it if the release cannot be installed for another reason."""
        key = (package, version)
        if key in self.failed:
            pytest.skip(self.failed[key])
        if key not in self.made:
            if shutil.which("uv") is None:
                pytest.fail("uv is not on the PATH (the profile's --version runs need it)")
            venv = self.base / f"{package}-{version}"
            try:
                self.made[key] = install_release(
                    venv, package, version, ROOT, quiet=False, also=also
                )
            except subprocess.CalledProcessError as exc:
                output = f"{exc.stderr or ''}{exc.stdout or ''}"
                if any(word in output.lower() for word in _NETWORK):
                    self.failed[key] = (
                        f"the package registry is unreachable ({package}=={version}): "
                        + output.strip().splitlines()[-1][:200]
                    )
                    pytest.skip(self.failed[key])
                raise
        return self.made[key]
