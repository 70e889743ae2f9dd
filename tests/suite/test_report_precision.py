"""The report says exactly what was judged (issue 39): a `--select` shows and counts only
the selected requirements' failures, each not-covered reason names its own requirement,
messages show values as JSON (never Python's `None`), and a history shows each op once."""

from __future__ import annotations

from pathlib import Path

from jfsm_conformance.run.model import Failure, Options, RunResult
from jfsm_conformance.run.report import first_failure, first_failure_lines
from jfsm_conformance.run.runner import Judge, _unjudged
from jfsm_conformance.verify.checks import ConformanceFailure, Ledger
from jfsm_conformance.verify.excerpts import as_json
from jfsm_conformance.verify.ownership import OwnershipHistory


def _result(select: str, failures: list[Failure]) -> RunResult:
    options = Options(select=select, report_dir=Path("unused"))
    return RunResult(options, [], failures, None, {}, {}, {})


def test_a_selection_shows_and_counts_only_its_own_failures() -> None:
    """`--select JF-STORE-030`: a failure of the same machine blaming only JF-STORE-036 is
    neither shown nor counted ("Failure 1 of 2" named the unselected ID before)."""
    failures = [
        Failure("machine workers (K=2)", "not-held", ("JF-STORE-036",), "refused"),
        Failure("machine workers (K=2)", "fenced-reads", ("JF-STORE-030",), "answered ok"),
        Failure("scenario x", "protocol", ("DRIVER-PROTOCOL",), "not JSON"),
    ]
    lines = first_failure_lines(_result("JF-STORE-030", failures))
    headers = [line for line in lines if line.startswith("Failure ")]
    assert headers == [
        "Failure 1 of 2: [JF-STORE-030] machine workers (K=2)",
        "Failure 2 of 2: [DRIVER-PROTOCOL] scenario x",
    ]
    assert "JF-STORE-036" not in "\n".join(lines)
    first = first_failure(_result("JF-STORE-030", failures))
    assert first is not None and first["ids"] == ["JF-STORE-030"]
    assert len(first_failure_lines(_result("", failures))) > len(lines)  # no selection: all


def test_each_not_covered_reason_names_its_own_requirement() -> None:
    """JF-ERR-017 and JF-ERR-019 share a skipped scenario with JF-ERR-011: each reason names
    its own ID, none another's."""
    ids = frozenset({"JF-ERR-011", "JF-ERR-012", "JF-ERR-017", "JF-ERR-019"})
    skipped = Judge(
        "scenario hostile-http",
        ids,
        "skipped",
        "needs an HTTP driver",
        "needs an HTTP driver (the scenario sends its requests over HTTP)",
    )
    reasons = {}
    for rid in sorted(ids):
        why, reason = _unjudged({"id": rid, "level": "MUST"}, [skipped], {}, None)
        assert why == "needs an HTTP driver"
        reasons[rid] = reason
    for rid, reason in reasons.items():
        assert reason.startswith(f"{rid}: scenario hostile-http: needs an HTTP driver"), reason
        assert not any(other in reason for other in ids - {rid}), reason


def test_messages_show_values_as_json() -> None:
    assert as_json(None) == "null"
    assert as_json("store_fenced") == '"store_fenced"'
    assert as_json({"round": 1}) == '{"round": 1}'
    history = OwnershipHistory(Ledger())
    try:
        history.stated_lease(0, None, 2.0)
    except ConformanceFailure as exc:
        assert "leaseSeconds null" in exc.message and "None" not in exc.message
    else:
        raise AssertionError("a hello without leaseSeconds must fail JF-STORE-032")


def test_a_history_shows_each_open_once() -> None:
    """An open after a lease ran out is one line of the history, not two."""
    history = OwnershipHistory(Ledger())
    history.created(0, "g", {})
    history.opened(0, "g", 1, takeover=False)
    history.killed(0)
    history.lease_over(
        1, "g", {"ok": True, "result": {"token": 2}}, after="killed", waited=2.5, stated=2
    )
    opens = [line for line in history.log if line.startswith("w1 open g")]
    assert opens == ["w1 open g (2.5 s after its owner was killed) -> token 2"], history.log
