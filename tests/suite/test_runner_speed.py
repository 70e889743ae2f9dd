"""Speed and memory (issue 14): every machine rule runs a fair share of the quick profile,
the machines draw data independently of the implementation's answers, the report survives a
killed run, and the in-process durable driver bounds the games it keeps open."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from jfsm.driver import ReferenceDriver
from jfsm_conformance.machines.memory import MemoryMachine
from jfsm_conformance.record.traces import MESSAGE_LIMIT, TEXT_LIMIT, Transcript, compact_messages
from jfsm_conformance.run.cli import main
from jfsm_conformance.run.report import to_markdown
from jfsm_conformance.run.runner import DEFAULT_DRIVER, Options, run
from jfsm_conformance.scenarios.registry import game as new_game
from jfsm_conformance.steps.session import Session

# Verified steps per rule in the quick profile. Hypothesis's choice of rules is derandomized
# but not the same in every context (it differs between a script, the CLI and pytest), so the
# bound is low; the share bound below catches a rule that swamps the others.
MIN_RUNS = 1


def _rules() -> dict[str, Any]:
    """name -> Hypothesis rule object, for every rule of the machine (initialize excluded)."""
    out = {}
    for _, member in inspect.getmembers(MemoryMachine):
        rule = getattr(member, "hypothesis_stateful_rule", None)
        if rule is not None:  # an alias (a weight) is the same rule under its own name
            out[rule.function.__name__] = rule
    return out


@pytest.mark.slow
def test_every_machine_rule_runs_in_the_quick_profile(tmp_path: Path) -> None:
    """The quick profile exactly as `jfsm conformance --profile quick` runs it."""
    assert main(["--profile", "quick", "--report-dir", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["partial"] is False and report["phase"] == "finished"
    called = report["exercised"]["rule"]
    idle = report["exercised"].get("rule_idle", {})
    ran = {name: called.get(name, 0) - idle.get(name, 0) for name in _rules()}
    assert len(ran) >= 20
    assert all(n >= MIN_RUNS for n in ran.values()), json.dumps(ran)
    # no rule takes the lion's share
    assert max(ran.values()) <= 0.3 * sum(ran.values()), json.dumps(ran)
    # the scripted outcomes each happened
    outcomes = report["exercised"]["outcome"]
    for outcome in ("published", "refused", "transport", "empty", "not_smaller", "stale"):
        assert outcomes.get(outcome, 0) >= 1, outcomes
    assert sum(report["exercised"]["message"].values()) > sum(report["exercised"]["step"].values())
    markdown = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "| rule | called | ran | share of steps |" in markdown
    assert "| `release` |" in markdown


@pytest.mark.parametrize("held", [None, object()])
def test_preconditions_never_read_what_a_reply_can_change(held: object) -> None:
    """Which rules Hypothesis may draw must not depend on the implementation: a
    precondition may read the hello capabilities (fixed for a run), never the compression
    held, the games or the models the replies update."""
    rules = _rules()
    assert "release" in rules and "generate_while_held" in rules
    for caps in ({"durableRestart": True}, {}):
        quiet_world = SimpleNamespace(held=None, games={}, capabilities=caps)
        busy_world = SimpleNamespace(held=held, games={"x": 1}, capabilities=caps)
        quiet = SimpleNamespace(s=SimpleNamespace(world=quiet_world), g="g", scenes=[])
        busy = SimpleNamespace(s=SimpleNamespace(world=busy_world), g="g", scenes=["s1"])
        for name, rule in rules.items():
            for condition in rule.preconditions:
                assert bool(condition(quiet)) == bool(condition(busy)), name


def _report(path: Path) -> dict[str, Any] | None:
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def _start_cli(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    report_dir = tmp_path / "report"
    argv = [sys.executable, "-m", "jfsm.cli", "conformance", "--profile", "quick"]
    argv += ["--report-dir", str(report_dir)]
    (tmp_path / "tmp").mkdir()  # the run's temporary folders, and nothing else
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"))
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return proc, report_dir / "report.json"


def _wait_for(path: Path, proc: subprocess.Popen[bytes], phase_prefix: str) -> dict[str, Any]:
    """Poll until the report exists with a phase starting with `phase_prefix` (no timing is
    asserted: the loop ends when the child does)."""
    while proc.poll() is None:
        report = _report(path)
        if report is not None and str(report.get("phase", "")).startswith(phase_prefix):
            return report
        time.sleep(0.05)
    raise AssertionError(f"the run ended (exit {proc.returncode}) before phase {phase_prefix}")


@pytest.mark.slow
def test_a_run_killed_by_sigkill_leaves_a_partial_report(tmp_path: Path) -> None:
    proc, path = _start_cli(tmp_path)
    try:
        _wait_for(path, proc, "scenario")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    report = _report(path)
    assert report is not None  # parses: written atomically, never half a file
    assert report["partial"] is True
    assert report["phase"].startswith("scenario ")
    assert report["verdicts"] and report["format"] == "jfsm-conformance-report/1"
    markdown = (path.parent / "report.md").read_text(encoding="utf-8")
    assert "Partial report" in markdown
    assert not [p for p in os.listdir(path.parent) if p.endswith(".tmp")]


@pytest.mark.slow
def test_sigterm_writes_a_partial_report_and_exits_130(tmp_path: Path) -> None:
    """SIGTERM ends the run as Ctrl-C does: a partial report that says it was interrupted,
    exit 130 (R196; before, 2)."""
    proc, path = _start_cli(tmp_path)
    try:
        _wait_for(path, proc, "scenario")
        while proc.poll() is None and not list((tmp_path / "tmp").glob("jfsm-suite-state-*")):
            time.sleep(0.05)  # the companions' lane is under way: a stdio driver's {state}
        time.sleep(1.5)  # and into its scenarios (where a cut-short lane left its folders)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 130
    report = _report(path)
    assert report is not None
    assert report["partial"] is True and report["exit_code"] == 130
    assert report["interrupted"] is True
    assert "interrupted after scenario" in report["harness_error"]
    # its companions' folders and the engine's own are removed too (the lanes' threads and
    # the machines' process are cut short, their `finally` never runs: R193's exit path)
    assert sorted(p.name for p in (tmp_path / "tmp").iterdir()) == []


def test_a_finished_run_is_not_partial(tmp_path: Path) -> None:
    result = run(
        Options(
            scenarios=["summary-alone"],
            machines=False,
            report_dir=tmp_path,
            progress=lambda line: None,
        )
    )
    assert result.exit_code == 0
    assert result.partial is False and result.phase == "finished"
    assert result.options.driver == DEFAULT_DRIVER
    assert "retry backoff scaled to zero" in to_markdown(result)


def _call(driver: ReferenceDriver, op: str, **args: Any) -> dict[str, Any]:
    reply = asyncio.run(driver.handle({"id": 1, "op": op, "args": args}))
    assert reply["ok"], reply
    return dict(reply["result"])


def test_durable_driver_keeps_few_games_open_and_reopens_the_others(tmp_path: Path) -> None:
    driver = ReferenceDriver(tmp_path / "state", max_open=2)
    _call(driver, "hello", protocol=1, compressUrl="http://127.0.0.1:9")
    games = [f"g{i}" for i in range(5)]
    for game in games:
        _call(driver, "create_game", game=game)
        _call(driver, "record_round", game=game, input=f"hi {game}", output="hello")
    assert len(driver.games) == 2
    assert list(driver.games) == games[-2:]  # the most recently used
    dump = _call(driver, "dump", game="g0")  # closed: reopened from its folder
    assert any("hi g0" in json.dumps(v) for v in dump.values())
    assert len(driver.games) == 2 and "g0" in driver.games
    refused = asyncio.run(driver.handle({"id": 2, "op": "create_game", "args": {"game": "g1"}}))
    assert refused["error"]["code"] == "invalid_input"  # a closed game still exists
    was_open = list(driver.games)
    asyncio.run(driver.restart())  # reopens the open games now, the others when named
    assert list(driver.games) == was_open
    again = _call(driver, "dump", game="g2")
    assert any("hi g2" in json.dumps(v) for v in again.values())
    asyncio.run(driver.close())


def test_memory_driver_keeps_every_game(tmp_path: Path) -> None:
    driver = ReferenceDriver(max_open=2)
    _call(driver, "hello", protocol=1, compressUrl="http://127.0.0.1:9")
    for i in range(4):
        _call(driver, "create_game", game=f"g{i}")
    assert len(driver.games) == 4  # closing a memory store would lose the game


@pytest.mark.parametrize("durable", [False, True])
def test_forgotten_games_are_released(tmp_path: Path, durable: bool) -> None:
    """`forget_games` (R59) releases the named games, their folders too, ignores unknown
    ids, and keeps the others; a released game is then unknown."""
    driver = ReferenceDriver(tmp_path / "state" if durable else None)
    hello = _call(driver, "hello", protocol=1, compressUrl="http://127.0.0.1:9")
    assert hello["capabilities"]["forgetGames"] is True
    for i in range(3):
        _call(driver, "create_game", game=f"g{i}")
        _call(driver, "record_round", game=f"g{i}", input="hi", output="hello")
    assert _call(driver, "forget_games", games=["g0", "g2", "never-seen"]) == {}
    assert list(driver.games) == ["g1"]
    if durable:
        assert driver.state is not None
        assert [driver.state.exists(g) for g in ("g0", "g1", "g2")] == [False, True, False]
        assert len([p for p in (tmp_path / "state").iterdir() if p.is_dir()]) == 1
    gone = asyncio.run(driver.handle({"id": 2, "op": "dump", "args": {"game": "g0"}}))
    assert gone["ok"] is False and gone["error"]["code"] == "invalid_input"
    assert "hello" in json.dumps(_call(driver, "dump", game="g1"))
    bad = asyncio.run(driver.handle({"id": 3, "op": "forget_games", "args": {"games": "g1"}}))
    assert bad["error"]["code"] == "invalid_input" and list(driver.games) == ["g1"]
    asyncio.run(driver.close())


def test_the_suite_tells_the_driver_which_games_it_forgot() -> None:
    """Each new sequence sends the games of the one that ended (R59), so that an in-memory
    driver holds one sequence's games, not the run's; a driver without the capability is
    never sent the op."""
    for forget in (True, False):
        session = Session("python:jfsm.driver:reference_driver")
        driver = session.world.client.transport.driver
        try:
            if not forget:
                session.world.capabilities["forgetGames"] = False
            for _ in range(4):
                session.begin_sequence()
                for _ in range(3):
                    new_game(session)
            held = len(driver.games)
        finally:
            session.close()
        assert held == (3 if forget else 12), (forget, held)


def test_the_transcript_holds_a_bounded_compacted_tail() -> None:
    """The protocol transcript keeps what a trace shows, no more (R58): each entry compacted
    when recorded, at most `MESSAGE_LIMIT` of them, and a note for what was left out."""
    transcript = Transcript()
    big = "x" * (TEXT_LIMIT * 100)
    mark = transcript.mark()
    for i in range(MESSAGE_LIMIT + 50):
        transcript.append({"recv": {"id": i, "result": {"store": {"big": big}}}})
    assert len(transcript) == MESSAGE_LIMIT and transcript.mark() == mark + MESSAGE_LIMIT + 50
    held = list(transcript)
    assert all(len(e["recv"]["result"]["store"]["big"]) < TEXT_LIMIT + 100 for e in held)
    assert held[0]["recv"]["id"] == 50 and held[-1]["recv"]["id"] == MESSAGE_LIMIT + 49
    since = transcript.since(mark)
    assert since[0] == {"note": "50 earlier message(s) left out of this trace", "leftOut": 50}
    assert since[1:] == held
    # a trace written from it keeps all 400 and counts the 50, not the note as a message
    written = compact_messages(since)
    assert written[0]["leftOut"] == 50 and written[1:] == held
    later = transcript.mark()
    transcript.append({"send": {"op": "dump"}})
    assert transcript.since(later) == [{"send": {"op": "dump"}}]
    assert transcript.since(transcript.mark()) == []


@pytest.mark.slow
def test_the_suite_holds_no_copy_of_a_big_store_per_step() -> None:
    """The suite's memory is bounded by one sequence's state, not by its steps: dumping a
    store of about 10 MB twenty more times leaves the suite's (and the in-process driver's)
    Python allocations where they were after two dumps. Before R58 the transcript kept every
    reply whole, about 10 MB more per step."""
    session = Session(DEFAULT_DRIVER)
    try:
        g = new_game(session)
        session.write(g, {"big": "x" * 5_000_000})
        tracemalloc.start()
        try:
            for _ in range(2):
                session.write(g, {"small": 1})
            settled = tracemalloc.get_traced_memory()[0]
            for i in range(20):
                session.write(g, {"small": i})
            grown = tracemalloc.get_traced_memory()[0] - settled
        finally:
            tracemalloc.stop()
    finally:
        session.close()
    assert grown < 5_000_000, f"the suite grew by {grown:,} bytes over 20 steps"
