"""In-process crash injection (decision R53): the durable reference driver dies at a durable
write boundary the suite picks (`crash` op, capability `crashInjection`), reopens from its
state directory as after `kill -9`, and the suite's kill scenarios run in process, where
the main job runs, with both outcomes, before and after, counted."""

from __future__ import annotations

import asyncio
import itertools
import sys
from pathlib import Path
from typing import Any

import pytest
from suite_helpers import run_scenarios

from jfsm.driver import ReferenceDriver
from jfsm.driver.crash import CrashSwitch
from jfsm.projection import Projection
from jfsm.stores import FileStore
from jfsm.stores.file.crashfs import CrashingFileSystem
from jfsm_conformance.run.runner import Options, run

DURABLE = "python:jfsm.driver:durable_reference_driver"

_ids = itertools.count(1)


def _call(driver: ReferenceDriver, op: str, **args: Any) -> dict[str, Any]:
    return asyncio.run(driver.handle({"id": next(_ids), "op": op, "args": args}))


def _hello(driver: ReferenceDriver) -> dict[str, Any]:
    reply = _call(driver, "hello", protocol=1, compressUrl="http://127.0.0.1:9/")
    assert reply["ok"], reply
    return dict(reply["result"]["capabilities"])


def test_crash_injection_is_offered_on_request_over_file_stores(tmp_path: Path) -> None:
    durable = ReferenceDriver(tmp_path / "a", crash_injection=True)
    assert _hello(durable)["crashInjection"] is True
    for plain in (ReferenceDriver(), ReferenceDriver(tmp_path / "b")):  # stdio, HTTP: SIGKILL
        assert _hello(plain)["crashInjection"] is False
        assert _call(plain, "crash", at=0)["error"]["code"] == "invalid_input"
    for bad in (-1, True, "3"):
        assert _call(durable, "crash", at=bad)["error"]["code"] == "invalid_input"


@pytest.mark.req("JF-ATOM-004")
def test_a_crash_at_each_boundary_reopens_before_or_after(tmp_path: Path) -> None:
    """A round is killed at every write boundary of its commit (and past them): the driver
    answers nothing but errors until it restarts, then shows one round or two, and two
    whenever it answered the round before it died."""
    seen: dict[int, set[int]] = {}
    for at in range(12):
        driver = ReferenceDriver(tmp_path / f"state-{at}", crash_injection=True)
        _hello(driver)
        assert _call(driver, "create_game", game="g")["ok"]
        assert _call(driver, "record_round", game="g", input="one", output="first")["ok"]
        assert _call(driver, "crash", at=at)["ok"]
        answered = _call(driver, "record_round", game="g", input="two", output="x" * 5000)
        if not answered["ok"]:  # died mid-operation: every message is refused until restart
            assert answered["error"]["code"] == "internal_error"
            assert _call(driver, "dump", game="g")["error"]["code"] == "internal_error"
        asyncio.run(driver.restart())
        store = _call(driver, "dump", game="g")["result"]["store"]
        rounds = len([key for key in store if key.startswith("jfRounds.")])
        seen.setdefault(rounds, set()).add(at)
        assert rounds in (1, 2)
        assert answered["ok"] is False or rounds == 2, f"answered, yet lost at boundary {at}"
        assert _call(driver, "record_round", game="g", input="three", output="after")["ok"]
        asyncio.run(driver.close())
    assert set(seen) == {1, 2}, seen  # both outcomes occur


def test_the_switch_numbers_a_commit_as_the_suite_lays_out_its_crash_points(
    tmp_path: Path,
) -> None:
    """`scenarios/durability.py` places its crash points over this numbering: after a
    reopen a commit is an extension and its fsync (0-3), a pwrite (4-6) and its fdatasync
    (7-8); the next one a pwrite and its fdatasync (0-4). The store's own crash tests also
    tear the extension (one boundary more)."""
    with FileStore.open_sync(tmp_path) as store:
        store.commit_sync(Projection.of({"a": 1}))
    for fs, extension in ((CrashSwitch(), 4), (CrashingFileSystem(), 5)):
        with FileStore.open_sync(tmp_path, fs=fs) as store:
            counts = []
            for value in (2, 3):
                start = fs.boundaries
                store.commit_sync(Projection.of({"a": value}))
                counts.append(fs.boundaries - start)
        assert counts == [extension + 5, 5], (type(fs).__name__, counts)
        assert not fs.dead and fs.where == ""


def test_kill_scenarios_run_in_process_and_count_outcomes(tmp_path: Path) -> None:
    result = run_scenarios(tmp_path, DURABLE, ["kill-mid-publication", "kill-mid-operation"])
    assert result.harness_error is None
    assert result.exit_code == 0
    assert not [what for what in result.skipped if "kill" in what], result.skipped
    kills = result.exercised["kill"]
    for what in ("publication", "round"):
        assert kills.get(f"{what}: before", 0) >= 1, kills
        assert kills.get(f"{what}: after", 0) >= 1, kills
    assert not [name for name in kills if name.endswith("neither")]
    verdicts = {v["id"]: v["verdict"] for v in result.verdicts}
    assert verdicts["JF-ATOM-008"] == "pass"
    assert verdicts["JF-ATOM-004"] == "pass"


def test_kills_that_all_reopen_before_the_publication_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every kill lands before the publication's first write, the last one included, as a
    slow machine makes a stdio kill 20 ms after the reply land: the reference passes. Stop
    44's CI: the scenario recorded a round after a last kill that reopened "before", so its
    next generation had a new key with no reply scripted ("more compress.v2 attempts arrived
    than the suite scripted", blamed on JF-COMP-001)."""
    from jfsm_conformance.scenarios import durability

    monkeypatch.setattr(durability, "PUBLICATION_CRASH_POINTS", (0, 0, 0))
    result = run_scenarios(tmp_path, DURABLE, ["kill-mid-publication"])
    assert result.harness_error is None
    assert result.exit_code == 0, [f.message for f in result.failures]
    assert result.exercised["kill"] == {"publication: before": 3}, result.exercised["kill"]


def test_a_driver_without_crash_injection_skips_the_kills(tmp_path: Path) -> None:
    result = run_scenarios(tmp_path, "python:jfsm.driver:reference_driver", ["kill-mid-operation"])
    assert result.exit_code == 0
    assert "crashInjection" in " ".join(result.skipped.values()), result.skipped


@pytest.mark.slow
def test_a_stdio_driver_is_still_killed_with_sigkill(tmp_path: Path) -> None:
    """Over stdio the kills stay real: the process group gets SIGKILL (the driver there
    offers no crash op), and the outcomes are counted the same way."""
    jfsm = Path(sys.executable).with_name("jfsm")
    result = run(
        Options(
            driver=f"stdio:{jfsm} driver --state {tmp_path / 'state'}",
            scenarios=["kill-mid-operation"],
            machines=False,
            report_dir=tmp_path / "report",
            progress=lambda line: None,
        )
    )
    assert result.harness_error is None
    assert result.exit_code == 0
    assert result.capabilities.get("crashInjection") is False
    kills = result.exercised["kill"]
    assert sum(kills.values()) == 3, kills
    assert not [name for name in kills if name.endswith("neither")]


def test_a_stdio_driver_without_durable_restart_is_told_the_missing_capability(
    tmp_path: Path,
) -> None:
    jfsm = Path(sys.executable).with_name("jfsm")
    result = run(
        Options(
            driver=f"stdio:{jfsm} driver",  # no --state: memory stores, no durableRestart
            scenarios=["kill-mid-operation", "kill-mid-publication"],
            machines=False,
            report_dir=tmp_path,
            progress=lambda line: None,
        )
    )
    assert result.exit_code == 0
    for name in ("kill-mid-operation", "kill-mid-publication"):
        reason = result.skipped[name]
        assert "durableRestart" in reason and "stdio" not in reason, reason
