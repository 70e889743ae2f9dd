"""Hostile input over the protocol (JF-ERR-006 to JF-ERR-010): the probes come from the
spec's limits, the reference passes them, and a driver that lets one limit through fails
under that limit's requirement."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from suite_helpers import run_scenarios

from jfsm.limits import depth
from jfsm.spec import constants
from jfsm_conformance.probes import protocol as H
from jfsm_conformance.run.runner import replay

HOSTILE = ["hostile-ids", "hostile-values", "hostile-slots", "hostile-messages"]
REFERENCE = "python:jfsm_conformance.examples.reference:durable_without_backoff"


def test_probes_come_from_the_spec_limits() -> None:
    lim = H.limits()
    assert lim.id_max == max(n for n in range(1, 300) if lim.valid_id("a" * n))
    assert all(not lim.valid_id(bad) for bad in lim.bad_ids())
    assert "a" * (lim.id_max + 1) in lim.bad_ids()
    assert depth(H.nested(lim.value_max_depth + 1)) == constants().value_max_depth + 1
    [long] = [p for p in H.wire_probes() if p["kind"] == "long"]
    assert len(H.long_message(long["bytes"])) == constants().message_max_bytes + 1
    deep = next(p for p in H.message_probes() if "nesting" in p["what"])["message"]
    assert depth(deep) == constants().message_max_depth + 1
    # every op's every argument slot gets a lone surrogate, a wrong type and bad JSON
    slots = {p["what"].split(":")[0] for p in H.slot_probes()}
    assert {f"{op}.{slot}" for op, args in H.BASE_ARGS.items() for slot in args} <= slots
    json.dumps(H.slot_probes())  # a probe is JSON (traces record it)


def test_reference_passes_every_hostile_probe(tmp_path: Path) -> None:
    result = run_scenarios(tmp_path, REFERENCE, HOSTILE)
    assert result.exit_code == 0, [f.message for f in result.failures]
    verdicts = {v["id"]: v["verdict"] for v in result.verdicts}
    for rid in ("JF-ERR-006", "JF-ERR-007", "JF-ERR-008", "JF-ERR-009", "JF-ERR-010"):
        assert verdicts[rid] == "pass", rid


BROKEN = "python:jfsm_conformance.examples.hostile:"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("factory", "scenario", "requirement"),
    [
        ("long_ids", "hostile-ids", "JF-ERR-006"),
        ("deep_values", "hostile-values", "JF-ERR-007"),
        ("null_id_missing", "hostile-messages", "JF-ERR-008"),
        ("reads_long", "hostile-messages", "JF-ERR-009"),
        ("unknown_op_writes", "hostile-messages", "JF-ERR-010"),
        ("deletes_checked_late", "hostile-slots", "JF-TEXT-001"),
    ],
)
@pytest.mark.req(
    "JF-ERR-006", "JF-ERR-007", "JF-ERR-008", "JF-ERR-009", "JF-ERR-010", "JF-TEXT-001"
)
def test_a_driver_letting_a_limit_through_fails_it(
    tmp_path: Path, factory: str, scenario: str, requirement: str
) -> None:
    result = run_scenarios(tmp_path, BROKEN + factory, [scenario])
    assert result.exit_code == 1
    first = result.failures[0]
    assert requirement in first.ids, first.message
    if factory == "deletes_checked_late":  # the rule it breaks first, not JF-ERR-010 (R148)
        assert first.ids[0] == requirement, first.ids
        verdicts = {v["id"]: v["verdict"] for v in result.verdicts}
        assert verdicts["JF-TEXT-001"] == "fail"
    assert replay(first.trace, progress=lambda line: None) == 1


def _serve(module: str, tmp_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`python -m MODULE [driver] --http 0 --token T --state DIR`: the process and its URL
    (`MODULE:HOLE` adds `--hole HOLE`)."""
    module, _, hole = module.partition(":")
    argv = [sys.executable, "-m", module, *(["driver"] if module == "jfsm.cli" else [])]
    argv += ["--hole", hole] if hole else []
    argv += ["--http", "0", "--token", "hostile-token", "--state", str(tmp_path / "state")]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert proc.stderr is not None
    match = re.search(r"http://127\.0\.0\.1:(\d+)", proc.stderr.readline().decode())
    assert match is not None
    return proc, f"http://127.0.0.1:{match[1]}"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("module", "code", "requirement"),
    [
        ("jfsm.cli", 0, None),
        ("jfsm_conformance.examples.open_http:host", 1, "JF-ERR-011"),
        ("jfsm_conformance.examples.open_http:slots", 1, "JF-ERR-017"),
        ("jfsm_conformance.examples.open_http:order", 1, "JF-ERR-019"),
        ("jfsm_conformance.examples.open_http:slots-last", 1, "JF-ERR-019"),
        ("jfsm_conformance.examples.open_http:slots-last,close", 0, None),
    ],
)
@pytest.mark.req("JF-ERR-011", "JF-ERR-017", "JF-ERR-019")
def test_http_requests_are_guarded(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    module: str,
    code: int,
    requirement: str | None,
) -> None:
    """The reference HTTP driver passes hostile-http (one 408 wait of the spec's auth
    timeout and the slots probe's included); one that answers any Host fails JF-ERR-011, one
    that never closes a silent connection fails JF-ERR-017, one that checks the token before
    the Host fails JF-ERR-019 (R144), and so does one that takes a slot only after the
    Content-Type rule (R236). That one passes when it also closes every connection after
    its answer: slots that cannot be held leave the held-slots probe not covered, never a
    415 blamed on the order."""
    monkeypatch.setenv("JFSM_DRIVER_TOKEN", "hostile-token")
    proc, url = _serve(module, tmp_path)
    try:
        result = run_scenarios(tmp_path / "report", url, ["hostile-http"])
    finally:
        proc.kill()
        proc.wait(10)
    assert result.exit_code == code, [f.message for f in result.failures]
    verdicts = {v["id"]: v["verdict"] for v in result.verdicts}
    if requirement is None:
        assert verdicts["JF-ERR-011"] == verdicts["JF-ERR-012"] == "pass"
        assert verdicts["JF-ERR-017"] == verdicts["JF-ERR-019"] == "pass"
    else:
        assert requirement in result.failures[0].ids
