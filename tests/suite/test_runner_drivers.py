"""Drivers that go wrong are diagnosed at once and precisely; `smoke` checks the wiring in
seconds; `http://` driver specs are taken as written."""

from __future__ import annotations

import json
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jfsm.driver import ReferenceDriver, serve_http
from jfsm_conformance.client.driver import _wire
from jfsm_conformance.run.runner import Options, run
from jfsm_conformance.run.smoke import smoke

PY = sys.executable


def _smoke(driver: str) -> tuple[int, str]:
    lines: list[str] = []
    code = smoke(driver, say=lines.append, timeout=30)
    return code, "\n".join(lines)


def test_smoke_passes_the_reference_driver_with_every_op() -> None:
    code, text = _smoke("python:jfsm.driver:durable_reference_driver")
    assert code == 0, text
    for op in ("hello", "create_game", "intervene", "publish_scene", "convert", "restart"):
        assert any(line.split()[:2] == [op, "ok"] for line in text.splitlines()), (op, text)
    assert "0 failed" in text


def test_smoke_names_a_failing_op_and_its_requirement() -> None:
    code, text = _smoke("python:jfsm_conformance.examples.broken:off_protocol")
    assert code == 1, text
    line = next(x for x in text.splitlines() if x.split()[:1] == ["record_round"])
    assert "FAIL" in line and "protocol" in line
    assert "not run (after record_round failed)" in text


@pytest.mark.slow
def test_garbage_before_any_request_fails_the_next_one_at_once() -> None:
    """A banner printed before the suite sent anything (no request waiting for it) fails the
    next request at once, not after the reply timeout (it raced under load)."""
    import time

    from jfsm_conformance.client.driver import DriverClient
    from jfsm_conformance.client.protocol import ProtocolViolation

    code = "print('Listening on port 3000', flush=True); import time; time.sleep(600)"
    banner = f'stdio:{PY} -c "{code}"'
    client = DriverClient(banner, timeout=60)
    try:
        deadline = time.monotonic() + 30
        while "non-JSON" not in client.stderr_tail() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "non-JSON" in client.stderr_tail()
        with pytest.raises(ProtocolViolation, match="Listening on port 3000"):
            client.call("hello", {"protocol": 1})
    finally:
        client.close()


def test_garbage_on_stdout_is_diagnosed_at_once_with_the_line(tmp_path: Path) -> None:
    driver = f"stdio:{PY} -c \"print('Listening on port 3000'); import time; time.sleep(600)\""
    code, text = _smoke(driver)
    assert code == 2, text
    assert "not JSON" in text and "Listening on port 3000" in text
    assert "stderr" in text.lower()
    result = run(Options(driver=driver, report_dir=tmp_path, progress=lambda line: None))
    assert result.exit_code == 2
    assert "not JSON" in (result.harness_error or "")
    assert "no reply" not in (result.harness_error or "")


def test_a_driver_that_exits_reports_its_status_and_stderr(tmp_path: Path) -> None:
    script = "import sys; sys.stderr.write('boom: no config file\\n'); sys.exit(3)"
    driver = f'stdio:{PY} -c "{script}"'
    code, text = _smoke(driver)
    assert code == 2, text
    assert "exited with status 3" in text and "boom: no config file" in text
    result = run(Options(driver=driver, report_dir=tmp_path, progress=lambda line: None))
    assert result.exit_code == 2
    message = (result.harness_error or "") + result.driver_log
    assert "exited with status 3" in message and "boom: no config file" in message
    assert "stdin closed" not in message


def test_a_driver_that_exits_mid_run_is_named_with_its_status(tmp_path: Path) -> None:
    # answers hello, then dies on the first op
    script = (
        "import json,sys\n"
        "line=sys.stdin.readline(); m=json.loads(line)\n"
        "print(json.dumps({'id':m['id'],'ok':True,'result':{'protocol':1,"
        "'implementation':{'name':'dies','version':'1','language':'python'},"
        "'capabilities':{'durableRestart':False,'concurrent':False,'thresholdOverride':False}}}),"
        "flush=True)\n"
        "sys.stdin.readline(); sys.stderr.write('segfault-ish\\n'); sys.exit(139)\n"
    )
    path = tmp_path / "dies.py"
    path.write_text(script, encoding="utf-8")
    code, text = _smoke(f"stdio:{PY} {path}")
    assert code == 2, text
    assert "dies 1 (python)" in text
    assert "exited with status 139" in text and "segfault-ish" in text


@pytest.fixture
def http_driver(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    token = "smoke-token"
    monkeypatch.setenv("JFSM_DRIVER_TOKEN", token)  # the suite's client sends it (R24)
    ready = threading.Event()
    port: list[int] = []

    def started(bound: int) -> None:
        port.append(bound)
        ready.set()

    thread = threading.Thread(
        target=serve_http,
        args=(ReferenceDriver(None), 0),
        kwargs={"ready": started, "token": token},
    )
    thread.start()
    assert ready.wait(30)
    url = f"http://127.0.0.1:{port[0]}"
    yield url
    body = json.dumps({"id": 1, "op": "shutdown", "args": {}}).encode()
    request = urllib.request.Request(
        url + "/v1/message",
        data=body,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    urllib.request.urlopen(request, timeout=10).read()
    thread.join(30)
    assert not thread.is_alive()


def test_http_driver_spec_is_accepted_as_written(http_driver: str) -> None:
    code, text = _smoke(http_driver)
    assert code == 0, text
    assert "hello             ok" in text


def test_a_driver_that_dies_mid_scenario_is_blamed_and_started_again(tmp_path: Path) -> None:
    """A driver that answers hello, then exits on every first op: each scenario's first
    requirement and JF-ERR-020 fail (exit 1, a complete report); the suite starts it again
    for each (R194; before, the run stopped with exit 2 at the first)."""
    script = (
        "import json,sys\n"
        "line=sys.stdin.readline(); m=json.loads(line)\n"
        "print(json.dumps({'id':m['id'],'ok':True,'result':{'protocol':1,"
        "'implementation':{'name':'dies','version':'1','language':'python'},"
        "'capabilities':{'durableRestart':False,'concurrent':False,'thresholdOverride':False}}}),"
        "flush=True)\n"
        "sys.stdin.readline(); sys.exit(139)\n"
    )
    path = tmp_path / "dies.py"
    path.write_text(script, encoding="utf-8")
    result = run(
        Options(
            driver=f"stdio:{PY} {path}",
            scenarios=["scene-lifecycle", "history-rebuild"],
            machines=False,
            report_dir=tmp_path / "report",
            progress=lambda line: None,
        )
    )
    assert result.exit_code == 1 and result.harness_error is None
    assert result.partial is False and result.phase == "finished"
    blamed = [(f.source, f.ids) for f in result.failures]
    assert blamed == [
        ("scenario scene-lifecycle", ("JF-CAT-001", "JF-ERR-020")),
        ("scenario history-rebuild", ("JF-HIST-001", "JF-ERR-020")),
    ]
    assert "driver exited with status 139" in result.failures[0].message


def test_smoke_lists_and_counts_each_op_once(tmp_path: Path) -> None:
    """A driver that implements only `hello`: `create_game`, which every chain starts with,
    is one line and one "not implemented"; the ops after it are "not run" once each."""
    script = (
        "import json,sys\n"
        "for line in sys.stdin:\n"
        "    m=json.loads(line)\n"
        "    if m['op']=='hello':\n"
        "        r={'id':m['id'],'ok':True,'result':{'protocol':1,"
        "'implementation':{'name':'hello-only','version':'1','language':'python'},"
        "'capabilities':{'durableRestart':False,'concurrent':False,'thresholdOverride':False}}}\n"
        "    else:\n"
        "        r={'id':m['id'],'ok':False,'error':{'code':'unsupported_op','message':'no'}}\n"
        "    print(json.dumps(r),flush=True)\n"
    )
    path = tmp_path / "hello_only.py"
    path.write_text(script, encoding="utf-8")
    code, text = _smoke(f"stdio:{PY} {path}")
    assert code == 0, text
    ops = [line.split()[0] for line in text.splitlines()[1:-1] if line.startswith("  ")]
    assert ops.count("create_game") == 1, text
    assert len(ops) == len(set(ops)), text
    assert "1 ok, 0 failed, 1 not implemented" in text.splitlines()[-1], text


_plain = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(st.characters(), max_size=8),  # lone surrogates included
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


def _round_trip(value: object) -> object:
    return json.loads(json.dumps(value, ensure_ascii=True))


def _containers(value: object) -> list[int]:
    if isinstance(value, dict):
        return [id(value)] + [i for v in value.values() for i in _containers(v)]
    if isinstance(value, list):
        return [id(value)] + [i for v in value for i in _containers(v)]
    return []


@given(_plain)
def test_an_in_process_driver_is_handed_what_the_wire_would_hand_it(value: object) -> None:
    """The in-process transport copies plain JSON values instead of encoding them: the same
    as the JSON round trip, sharing no container with the original."""
    copied = _wire(value, lambda v: pytest.fail(f"{v!r} is plain JSON"))
    assert copied == _round_trip(value)
    assert json.dumps(copied) == json.dumps(_round_trip(value))  # lists for tuples, key order
    assert not set(_containers(copied)) & set(_containers(value))


class _Mapping(dict):  # type: ignore[type-arg]
    pass


@pytest.mark.parametrize(
    "value",
    [{1: "int key"}, {"s": {1, 2}}, [_Mapping(a=1)], {"deep": [[[[]]]], "odd": frozenset()}],
)
def test_what_is_not_plain_json_goes_through_the_json_round_trip(value: object) -> None:
    seen: list[object] = []
    _wire(value, seen.append)
    assert seen == [value]
