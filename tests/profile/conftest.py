"""Fixtures of the profile's tests (see `release_venvs.py`)."""

from __future__ import annotations

import pytest

from .release_venvs import ReleaseVenvs


@pytest.fixture(scope="session")
def release_venvs(tmp_path_factory: pytest.TempPathFactory) -> ReleaseVenvs:
    return ReleaseVenvs(tmp_path_factory.mktemp("release-venvs"))
