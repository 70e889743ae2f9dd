"""Smoke test of `benchmarks/postgres.py` on the session's server, at tiny sizes: the
measurements run and report the shapes the results page renders. Timings are never
asserted (the machine is shared and noisy); the full run writes docs/benchmarks/postgres.md."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from benchmarks import postgres as bench

TINY: dict[str, Any] = {
    **bench.QUICK,
    "prefill_keys": 5,
    "projections": 12,
    "batch": 4,
    "big_mib": 0.05,
    "small_mib": 0.01,
    "per_op_rounds": 4,
}


def test_postgres_benchmark_smoke(fresh_database: Any, tmp_path: Path) -> None:
    from jfsm.stores.postgres.store import migrate

    conninfo = fresh_database()
    migrate(conninfo)
    commit = bench._commit(conninfo, str(tmp_path), TINY)
    assert commit["same_final_state_and_footprint"] is True
    assert set(commit["commits_per_s"]) == {"postgres", "filestore", "sqlite"}
    scale = bench._per_op_and_reopen(conninfo, TINY)
    assert scale["footprint_bytes"]["big"] > scale["footprint_bytes"]["small"]
    assert scale["ratio_big_over_small"] is not None
    page = bench.render(
        {
            "available": True,
            "commit": commit,
            "scale": scale,
            "workers": [{"workers": 1, "commits_per_s": 1.0, "speedup": 1.0}],
        }
    )
    assert "PostgreSQL / FileStore" in page and "| 1 | 1.0 | 1.0 |" in page


def test_pool_benchmark_smoke(fresh_database: Any) -> None:
    """`benchmarks/postgres_pool.py` at its quick sizes: every section runs and the Goals
    rows render (timings never asserted)."""
    from benchmarks import postgres_pool
    from jfsm.stores.postgres.store import migrate

    conninfo = fresh_database()
    migrate(conninfo)
    result = postgres_pool.measure(conninfo, quick=True, log=lambda _m: None)
    assert set(result["store_commits_per_s"]) == {"postgres"}
    assert list(result["store_commits_per_s"]["postgres"]) == postgres_pool.QUICK["old_games"]
    assert [row["games"] for row in result["old_store"]] == postgres_pool.QUICK["old_games"]
    assert result["old_store"][-1]["connections"] >= postgres_pool.QUICK["old_games"][-1]
    page = "\n".join(postgres_pool.render(result))
    assert page.count("| yes |") + page.count("| **no** |") == len(result["goals"]) == 2
    # the retired rows (R153): "64 games >= 8x one game" and the 512-game storm (a measured
    # ratio such as "1.8x" may contain "8x": look for the rows' own words)
    assert not re.search(r"(>=|≥) ?8 ?[x×]|x one game|× one game", page), page
    assert "storm" not in page


@pytest.mark.slow
def test_concurrency_benchmark_over_postgres_and_the_bare_client(fresh_database: Any) -> None:
    """`benchmarks/concurrency.py`'s PostgreSQL variants at tiny sizes: the store (group
    commit on) and the bare `INSERT; COMMIT` client run at every N, and the ratio goal at
    the top N is judged from the run's numbers (never asserted)."""
    from benchmarks import concurrency as bench
    from jfsm.stores.postgres.store import migrate

    conninfo = fresh_database()
    migrate(conninfo)
    cfg = {**bench.QUICK, "games": [1, 3], "seconds": 0.2, "goal_games": [3]}
    variants = {
        "postgres": (bench._pg_opener(conninfo), True),
        "bare insert": (bench._bare_opener(conninfo), True),
    }
    rows = bench._series(variants, cfg, lambda m: None)
    for series in rows.values():
        assert [r["games"] for r in series] == [1, 3]
        assert all(r["rounds_per_s"] > 0 for r in series)
    result = {"config": cfg, "variants": rows, "postgres": {"available": True}}
    goals = {g["goal"]: g for g in bench._goals(result, cfg)}
    ratio = goals["PostgresStore rounds/s over bare INSERT; COMMIT, 3 games"]
    over = rows["postgres"][-1]["rounds_per_s"] / rows["bare insert"][-1]["rounds_per_s"]
    assert ratio["met"] == (round(over, 3) >= bench.PG_OVER_BARE_GOAL)
