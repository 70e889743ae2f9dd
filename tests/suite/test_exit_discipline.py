"""Exit discipline (issue 22): a fault of the implementation ends in exit 1, never 2.

A held compression request that the fake rejected, or an operation that answered without
sending one, is a requirement failure, never a 30 s wait ending in a harness error; and a
request held for a failed step is released by recovery, so later scenarios never wait on it.
The driver here is the durable reference engine over stdio whose compressor sends bots as
beneficiaries (JF-CALL-009): every compression request it sends is rejected by the fake.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest
from suite_helpers import run_scenarios

from benchmarks.exit_discipline import drivers, label, served, sweep
from jfsm_conformance.examples.broken_owners import FLAWS

DRIVER = """
import asyncio, sys
from jfsm.driver import ReferenceDriver, serve_stdio
from jfsm_conformance.examples.mutants.compression import _BotsPay
asyncio.run(serve_stdio(ReferenceDriver(sys.argv[1], compressor_factory=_BotsPay)))
"""


def test_rejected_held_requests_are_failures_and_recovery_releases_every_hold(
    tmp_path: Path,
) -> None:
    script = tmp_path / "bots_pay_driver.py"
    script.write_text(DRIVER, encoding="utf-8")
    state = tmp_path / "state"
    state.mkdir()
    # a held intervene fails its request check; the kills come after it
    scenarios = ["intervene-in-flight", "concurrent-stacks", "kill-mid-publication"]
    result = run_scenarios(
        tmp_path / "report", f"stdio:{sys.executable} {script} {state}", scenarios
    )
    assert result.harness_error is None, result.harness_error
    assert result.exit_code == 1
    assert {v["id"] for v in result.verdicts if v["verdict"] == "fail"} == {"JF-CALL-009"}
    sources = {f.source for f in result.failures}
    assert "scenario kill-mid-publication" in sources  # judged, not waited on for 30 s


@pytest.mark.release
def test_every_example_broken_driver_exits_1(tmp_path: Path) -> None:
    """Every example broken driver's run ends in exit 1, none in 2: a complete, non-partial
    run with a first failure. A release sweep (`uv run pytest -m release`, about 3 minutes
    on 2 cores; CI runs the rejected-hold case above) over the deterministic scenarios,
    where every one of them is caught, without the bounded-wait ones (each waits out a
    deadline; their own broken drivers are judged in `test_waits.py`) and without the
    machines."""
    from jfsm_conformance.scenarios import SCENARIOS

    scenarios = [s.name for s in SCENARIOS if not s.name.startswith("bounded-")]
    specs = drivers(("broken", "flaky"))  # benchmarks/exit_discipline.py's list
    assert len(specs) >= 15
    wrong = []
    for spec in specs:
        report_dir = tmp_path / spec.rsplit(":", 1)[1]
        result = run_scenarios(report_dir, spec, scenarios)
        if result.exit_code != 1 or result.harness_error is not None:
            wrong.append((spec, result.exit_code, result.harness_error))
            continue
        assert result.partial is False, spec
        assert result.failures and result.failures[0].ids, spec
    assert not wrong, wrong


@pytest.mark.req("JF-ERR-008")
@pytest.mark.parametrize("close", ["fin", "rst"])
def test_an_http_driver_that_drops_a_hostile_request_has_given_no_reply(close: str) -> None:
    """A connection closed without a response to a hostile request is no reply, for the
    probe to fail (JF-ERR-008, exit 1), whether the driver closed it after reading the
    request (`fin`) or reset it (`rst`: closed with the request unread, or SO_LINGER 0);
    before, "unreachable": a harness error (exit 2). A driver nobody listens for stays a
    harness error."""
    import socket
    import struct
    import threading

    from jfsm_conformance.client.driver import DriverClient, HarnessError

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def drop() -> None:
        conn, _ = server.accept()
        conn.recv(65536)
        if close == "rst":
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()  # no response

    thread = threading.Thread(target=drop, daemon=True)
    thread.start()
    client = DriverClient(f"http://127.0.0.1:{port}")
    try:
        status, reply = client.send_raw(b"[]", None)
    finally:
        client.close()
        thread.join(10)
        server.close()
    assert status is None
    assert isinstance(reply, str) and reply.startswith("no reply: the driver closed"), reply

    nobody = DriverClient(f"http://127.0.0.1:{port}")  # the port is closed now
    try:
        with pytest.raises(HarnessError, match="unreachable"):
            nobody.send_raw(b"[]", None)
    finally:
        nobody.close()


def test_the_sweep_serves_http_examples_for_their_run() -> None:
    """A `serve:` spec of the sweep is started over HTTP for its run, with a token in the
    environment, and stopped after."""
    (spec,) = [s for s in drivers(("restarts",)) if s.startswith("serve:")]
    assert label(spec) == "restarts forgets_on_restart (http)"
    with served(spec) as (url, env):
        assert url.startswith("http://127.0.0.1:")
        headers = {"Authorization": f"Bearer {env['JFSM_DRIVER_TOKEN']}"}
        message = {"id": 1, "op": "dump", "args": {"game": "nope"}}
        reply = httpx.post(url + "/v1/message", json=message, headers=headers, timeout=30).json()
        assert reply["id"] == 1 and reply["ok"] is False  # answered: hello comes first
    with pytest.raises(httpx.TransportError):
        httpx.post(url + "/v1/message", json=message, headers=headers, timeout=5)


@pytest.mark.release
def test_restart_and_http_examples_exit_1() -> None:
    """The restart cases (a lease that outlives its process, a restart that forgets, in
    process and over HTTP, R140 and R141) and the HTTP holes end in exit 1 under the real
    command, never 2 (`benchmarks/exit_discipline.py`, families restarts and http)."""
    rows = sweep(drivers(("restarts", "http")), "quick", progress=lambda line: None)
    assert len(rows) == 6
    assert all(r["exit"] == 1 and r["partial"] is False for r in rows), rows
    first = {str(r["driver"]): r["first_failure"] for r in rows}
    assert first["cli driver --shared (stdio)"][0] == "JF-ERR-018"
    assert first["restarts forgets_on_restart (http)"] == ["JF-ATOM-004"]


# each broken owner's flaw and the requirement it breaks (every flaw listed: a new one must say)
FLAW_IDS = {
    "no_token_check": "JF-STORE-013",
    "takeover_same_token": "JF-STORE-012",
    "lease_unchecked": "JF-STORE-011",
    "fenced_half_write": "JF-STORE-013",
    "stale_reads": "JF-STORE-030",
    "dump_only_reads": "JF-STORE-030",
    "renew_any_owner": "JF-STORE-031",
    "leases_never_expire": "JF-STORE-032",
    "refused_open_keeps": "JF-STORE-036",
}
assert set(FLAW_IDS) == set(FLAWS), set(FLAWS) ^ set(FLAW_IDS)


@pytest.mark.release
@pytest.mark.parametrize(
    ("flaw", "rid"),
    sorted(FLAW_IDS.items()),
)
def test_select_store_fails_every_broken_owner_under_its_id(
    tmp_path: Path, flaw: str, rid: str
) -> None:
    """`jfsm conformance --select JF-STORE --workers 2` against each broken owner (issue 31's
    acceptance): exit 1, its flaw's requirement failed."""
    import subprocess

    command = (
        f"{sys.executable} -m jfsm_conformance.examples.broken_owners {flaw} --state {{state}}"
    )
    argv = [sys.executable, "-m", "jfsm.cli", "conformance", "--select", "JF-STORE"]
    argv += ["--workers", "2", "--report-dir", str(tmp_path), "--driver", f"stdio:{command}"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    verdicts = {v["id"]: v["verdict"] for v in report["verdicts"]}
    assert verdicts[rid] == "fail", verdicts
