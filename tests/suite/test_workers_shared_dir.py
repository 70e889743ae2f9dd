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
def test_the_reference_passes_with_k_workers_on_one_directory(workers: int) -> None:
    ledger = Ledger()
    spec = f"stdio:{BIN / 'jfsm'} driver --state {{state}} --shared --owner w-{{worker}}"
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
        ("dump_only_reads", "JF-STORE-030"),
        ("renew_any_owner", "JF-STORE-031"),
        ("leases_never_expire", "JF-STORE-032"),
    ],
)
def test_each_broken_owner_on_a_directory_fails_under_its_id(flaw: str, rid: str) -> None:
    command = f"{sys.executable} -m jfsm_conformance.examples.broken_owners {flaw}"
    outcome = run_workers(f"stdio:{command} --state {{state}}", 2, 1, 4, Ledger())
    assert outcome.status == "fail"
    (exc, steps, messages), *_ = outcome.failures
    assert rid in getattr(exc, "ids", ()), exc
    assert steps, "the failure carries the steps of its sequence"
    assert {m["worker"] for m in messages} == {0, 1}, "and every worker's messages"


def test_the_machine_accounts_for_each_worker_and_its_trace_holds_their_messages(
    tmp_path: Path,
) -> None:
    """Issue 31 item 4: the report says what the machine made each worker do, and a failure's
    trace carries the protocol messages of every worker (in time order), not an empty list."""
    import json

    from jfsm_conformance.machines import workers
    from jfsm_conformance.run.report import workers_table
    from jfsm_conformance.run.runner import Options, _Run

    command = f"{sys.executable} -m jfsm_conformance.examples.broken_owners stale_reads"
    options = Options(
        driver=f"stdio:{command} --state {{state}}",
        report_dir=tmp_path / "report",
        progress=lambda line: None,
    )
    r = _Run(options)
    workers.phase(r, {"sharedStore": True}, "quick", 2)
    (failure,) = r.failures
    assert failure.ids == ("JF-STORE-030",)
    assert failure.trace is not None
    trace = json.loads(Path(failure.trace).read_text())
    sent = [m for m in trace["messages"] if "send" in m]
    assert {m["worker"] for m in sent} == {0, 1}
    times = [m["t"] for m in trace["messages"] if "t" in m]
    assert times == sorted(times)
    assert any(m["send"]["op"] == "dump" for m in sent)
    table = workers_table(r.counts.table())
    assert table[0] == "Workers machine, per worker:"
    header = [c.strip() for c in table[2].strip("|").split("|")]
    rows = {line.split("|")[1].strip(): line for line in table[4:] if line.startswith("|")}
    assert set(rows) == {"worker-1", "worker-2"}
    assert {"opens", "takeovers", "fenced reads"} <= set(header)


@pytest.mark.slow
@pytest.mark.req("JF-STORE-030")
def test_an_owner_that_checks_its_token_on_dump_alone_fails_store_030_in_quick(
    tmp_path: Path,
) -> None:
    """Issue 39: JF-STORE-030 lists every op answered from memory (`dump`, `telemetry`, a
    `generate` with nothing to compress); an engine that asks the store only on `dump` fails
    it under the real command in the quick profile, blamed on the op it answered with ok."""
    import json
    import subprocess

    command = f"{sys.executable} -m jfsm_conformance.examples.broken_owners dump_only_reads"
    argv = [sys.executable, "-m", "jfsm.cli", "conformance", "--select", "JF-STORE-030"]
    argv += ["--report-dir", str(tmp_path), "--driver", f"stdio:{command} --state {{state}}"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    (row,) = [v for v in report["verdicts"] if v["id"] == "JF-STORE-030"]
    assert row["verdict"] == "fail"
    message = row["failures"][0]["message"]
    assert "answered telemetry ok" in message or "answered generate ok" in message, message
    assert report["profile"] == "quick"
