"""The workers machine over a state directory shared on one host (decision R95): K processes
of `jfsm driver --state {state} --shared --owner w-{worker}`, no database.

The reference passes with K=2 and K=3 workers, every ownership requirement it observes
credited, and `{state}` is one directory for all the workers (R96); each example broken
driver (`jfsm_conformance.examples.broken_owners ... --state {state}`) breaks one ownership
rule and fails under that rule's ID.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from jfsm_conformance.machines.workers import OWNERSHIP_IDS, run_workers
from jfsm_conformance.verify.checks import Ledger

BIN = Path(sys.executable).parent


@pytest.mark.req("JF-STORE-010", "JF-STORE-011", "JF-STORE-012", "JF-STORE-013", "JF-STORE-014")
@pytest.mark.parametrize("workers", [2, 3])
def test_the_reference_passes_with_k_workers_on_one_directory(workers: int) -> None:
    ledger = Ledger()
    spec = f"stdio:{BIN / 'jfsm'} driver --state {{state}} --shared --owner w-{{worker}}"
    outcome = run_workers(spec, workers, 1, 10, ledger)
    assert outcome.failures == [], outcome.failures[0][0]
    assert outcome.status == "pass"
    assert {rid for rid in OWNERSHIP_IDS if ledger.passes[rid] == 0} == set()
    assert outcome.fenced_publications > 0  # a held compression was released while fenced


@pytest.mark.parametrize(
    ("flaw", "rid"),
    [
        ("no_token_check", "JF-STORE-013"),
        ("takeover_same_token", "JF-STORE-012"),
        ("lease_unchecked", "JF-STORE-011"),
        ("fenced_half_write", "JF-STORE-013"),
    ],
)
def test_each_broken_owner_on_a_directory_fails_under_its_id(flaw: str, rid: str) -> None:
    command = f"{sys.executable} -m jfsm_conformance.examples.broken_owners {flaw}"
    outcome = run_workers(f"stdio:{command} --state {{state}}", 2, 1, 4, Ledger())
    assert outcome.status == "fail"
    (exc, steps, messages), *_ = outcome.failures
    assert rid in getattr(exc, "ids", ()), exc
    assert steps, "the failure carries the steps of its sequence"
