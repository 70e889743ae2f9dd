"""The workers machine over a real PostgreSQL server: K processes of `jfsm driver --store`.

The reference passes with K=2 and K=3 workers and every ownership requirement it observes is
credited; each example broken driver (`jfsm_conformance.examples.broken_owners`) breaks one
ownership rule and fails under that rule's ID; a driver without `sharedStore` (the file
store) gets "not covered" with the reason, never a failure. The server is the tests' own
(`pg_fixtures`), on a Unix socket in a temporary directory.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pg_fixtures import postgres_server  # noqa: F401  (the session's server)

from jfsm.stores.postgres.server import TemporaryServer
from jfsm_conformance.machines.workers import OWNERSHIP_IDS, run_workers
from jfsm_conformance.run.runner import Options, run
from jfsm_conformance.verify.checks import Ledger
from jfsm_conformance.verify.ownership import OwnershipHistory

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def store_url(postgres_server: TemporaryServer) -> str:  # noqa: F811
    from jfsm.stores.postgres.store import migrate

    postgres_server.create_database("jfsm_workers")
    url = postgres_server.url("jfsm_workers")
    migrate(url)
    return url


def _spec(command: str, url: str) -> str:
    """K processes of one command on one database (no state directory: R62)."""
    return f"stdio:{command} --store {url}"


@pytest.mark.slow
@pytest.mark.req(
    "JF-STORE-010",
    "JF-STORE-011",
    "JF-STORE-012",
    "JF-STORE-013",
    "JF-STORE-014",
    "JF-STORE-030",
    "JF-STORE-031",
    "JF-STORE-032",
    "JF-STORE-036",
)
@pytest.mark.parametrize("workers", [2, 3])
def test_the_reference_passes_with_k_workers(store_url: str, tmp_path: Path, workers: int) -> None:
    ledger = Ledger()
    spec = _spec(f"{BIN / 'jfsm'} driver", store_url)
    outcome = run_workers(spec, workers, 1, 10, ledger)
    assert outcome.failures == [], outcome.failures[0][0]
    assert outcome.status == "pass"
    assert {rid for rid in OWNERSHIP_IDS if ledger.passes[rid] == 0} == set()
    assert outcome.fenced_publications > 0  # a held compression was released while fenced
    # it accounts for itself: each worker's opens, refusals, takeovers, releases...
    counted = {what for events in outcome.per_worker.values() for what in events}
    assert {"opens", "takeovers", "refusals", "releases", "fenced writes"} <= counted
    assert {"fenced reads", "implicit opens", "held publications", "kills"} <= counted
    assert {"worker-1", "worker-2"} <= set(outcome.per_worker)
    assert set(outcome.per_worker) <= {f"worker-{n}" for n in range(1, workers + 1)}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("flaw", "rid"),
    [
        ("no_token_check", "JF-STORE-013"),
        ("takeover_same_token", "JF-STORE-012"),
        ("lease_unchecked", "JF-STORE-011"),
        ("fenced_half_write", "JF-STORE-013"),
        ("stale_reads", "JF-STORE-030"),
        ("renew_any_owner", "JF-STORE-031"),
        ("leases_never_expire", "JF-STORE-032"),
    ],
)
def test_each_broken_owner_fails_under_its_id(
    store_url: str, tmp_path: Path, flaw: str, rid: str
) -> None:
    command = f"{sys.executable} -m jfsm_conformance.examples.broken_owners {flaw}"
    outcome = run_workers(_spec(command, store_url), 2, 1, 4, Ledger())
    assert outcome.status == "fail"
    (exc, steps, messages), *_ = outcome.failures
    assert rid in getattr(exc, "ids", ()), exc
    assert steps, "the failure carries the steps of its sequence"
    assert {m["worker"] for m in messages} == {0, 1}, "and every worker's messages"


def test_a_driver_without_the_capability_is_not_covered(tmp_path: Path) -> None:
    result = run(
        Options(
            driver=f"stdio:{BIN / 'jfsm'} driver --state {tmp_path / 'state'}",
            scenarios=["conversion"],
            machines=False,
            report_dir=tmp_path / "report",
            progress=lambda line: None,
        )
    )
    rows = {row["id"]: row for row in result.verdicts}
    for rid in OWNERSHIP_IDS:
        assert rows[rid]["verdict"] == "not covered", rows[rid]
        assert "sharedStore" in rows[rid]["reason"]
    assert result.exit_code == 0


def test_the_checker_sees_a_lost_round_and_a_double_owner() -> None:
    """The history checker alone, fed a history no store should produce."""
    from jfsm_conformance.verify.checks import ConformanceFailure

    history = OwnershipHistory(Ledger())
    history.created(0, "g", {})
    history.opened(0, "g", 1, takeover=False)
    history.appended(0, "g", "g/1", {"ok": True, "result": {"round": 1, "seq": 1}})
    history.acknowledged_store("g", {"jfRounds.1": {"input": "g/1"}})
    with pytest.raises(ConformanceFailure) as double:
        history.opened(1, "g", 2, takeover=False)
    assert double.value.ids == ("JF-STORE-011",)
    history.opened(1, "g", 3, takeover=True)
    with pytest.raises(ConformanceFailure) as lost:
        history.read(1, "g", {})
    assert lost.value.ids == ("JF-STORE-010",)
    assert "g/1" in lost.value.message


@pytest.mark.slow
def test_the_runner_phase_reports_a_failure_with_its_trace(store_url: str, tmp_path: Path) -> None:
    """The phase as the runner runs it: a failure is recorded with its trace and judged."""
    from jfsm_conformance.machines import workers
    from jfsm_conformance.run.runner import _Run, judge, load_catalog

    command = f"{sys.executable} -m jfsm_conformance.examples.broken_owners lease_unchecked"
    options = Options(
        driver=_spec(command, store_url),
        report_dir=tmp_path / "report",
        progress=lambda line: None,
    )
    r = _Run(options)
    workers.phase(r, {"sharedStore": True}, "quick", 2)
    (failure,) = r.failures
    assert failure.source == "machine workers (K=2)"
    assert "JF-STORE-011" in failure.ids
    assert failure.trace is not None and Path(failure.trace).exists()
    rows = {
        row["id"]: row for row in judge(load_catalog(), r.ledger, r.failures, options, {}, {}, {})
    }
    assert rows["JF-STORE-011"]["verdict"] == "fail"
