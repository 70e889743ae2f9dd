"""Shared test configuration: Hypothesis profiles sized for a 2-core CI machine."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

# the shared helpers (`engine_helpers`, `driver_helpers`, `pg_fixtures`...) live at the top of
# `tests/`; the tests import them by name from every folder
sys.path.insert(0, str(Path(__file__).resolve().parent))

settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("JFSM_HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    """Every `req` mark must name requirement IDs that exist in the catalog, or the reference
    engine's own guarantees (`jfsm/guarantees.toml`, IDs the catalog retired)."""
    from jfsm.spec import guarantees, requirements

    known = {r["id"] for r in (*requirements(), *guarantees())}
    for item in items:
        for mark in item.iter_markers("req"):
            unknown = [i for i in mark.args if i not in known]
            if unknown:
                raise ValueError(f"{item.nodeid}: unknown requirement IDs {unknown}")


# Processes that own a game of a shared state directory (tests/file_workers.py).
from file_workers import file_workers  # noqa: E402, F401

# A real PostgreSQL server for the PostgreSQL store's tests (tests/pg_fixtures.py).
from pg_fixtures import (  # noqa: E402, F401
    bouncer_database,
    fresh_database,
    pg_bouncer,
    pg_database,
    pg_target,
    postgres_server,
)
