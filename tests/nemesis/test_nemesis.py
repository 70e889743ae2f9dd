"""The nemesis, tested: its schedule is a pure function of the seed, its checker finds each
kind of violation in a history made to have it (and nothing in a clean one), a bystander's
harm is seen, nothing a run starts outlives it (interrupted or not), the Deploying page's
table is the long runs' results file; and the long runs themselves (marker `nemesis`).

The short runs are `.ci/run`'s own step (`python -m tests.nemesis`, both backends, a seed
that varies per run), not tests here.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from nemesis.bystanders import Bystanders
from nemesis.checker import _replay, check
from nemesis.history import History
from nemesis.runner import MARKER, Options, descendants_env, run
from nemesis.schedule import BACKENDS, DATABASE_FAULTS, Schedule, draw
from nemesis.table import PAGE, RESULTS, page_table, render_table

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


# -- the schedule ----------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_seed_draws_one_schedule_and_its_file_replays_it(backend: str) -> None:
    first = draw(123, backend, 600)
    assert draw(123, backend, 600) == first
    assert Schedule.from_json(json.loads(first.dumps())) == first
    assert draw(124, backend, 600) != first
    kinds = set(first.kinds())
    assert {"kill-worker", "pause-worker", "churn"} <= kinds
    if backend == "cluster":
        assert set(DATABASE_FAULTS) <= kinds
    if backend == "shared":
        assert "bystander-lock" in kinds
    if backend == "postgres":
        assert {"idle-cut", "crash-postgres"} <= kinds


@pytest.mark.parametrize("seed", range(5))
def test_the_schedules_durations_and_overlaps_are_the_issues(seed: int) -> None:
    schedule = draw(seed, "cluster", 900, lease=2.0, ttl=10)
    for fault in schedule.faults:
        assert 0 < fault.at < 900 * 0.85
        if fault.kind == "pause-worker":
            assert 0.1 <= fault.duration <= 3 * 2.0
        if fault.kind in ("freeze-primary", "freeze-patroni"):
            assert 1.0 <= fault.duration <= 4 * 10
    by_worker = itertools.groupby(
        sorted(
            (f for f in schedule.faults if f.kind.endswith("-worker")),
            key=lambda f: (f.target, f.at),
        ),
        key=lambda f: f.target,
    )
    for _, faults in by_worker:  # one fault at a time on a worker
        for earlier, later in itertools.pairwise(list(faults)):
            assert later.at >= earlier.at + earlier.duration
    database = [f for f in schedule.faults if f.kind in DATABASE_FAULTS]
    for earlier, later in itertools.pairwise(database):  # one database fault at a time
        assert later.at >= earlier.at + earlier.duration
    workers = {f.target for f in schedule.faults if f.kind.endswith("-worker")}
    overlapping = [
        (a, b)
        for a, b in itertools.combinations(schedule.faults, 2)
        if a.kind.endswith("-worker")
        and b.kind.endswith("-worker")
        and a.target != b.target
        and a.at <= b.at <= a.at + a.duration
    ]
    assert len(workers) == 4 and overlapping  # several at once


def test_a_schedule_of_another_format_is_refused() -> None:
    data = draw(1, "shared", 30).to_json() | {"format": 99}
    with pytest.raises(ValueError, match="format"):
        Schedule.from_json(data)


# -- the checker -----------------------------------------------------------------------------
class Story:
    """A history written by hand, its clock one tick an event."""

    def __init__(self) -> None:
        self.history = History(started=0.0)
        ticks = itertools.count(1)
        self.history.now = lambda: float(next(ticks))  # type: ignore[method-assign]
        self.n = 0

    def open(self, worker: str, game: str, token: int) -> None:
        invoked = self.history.invoke(f"{worker}.c0", "open_game", worker=worker, game=game)
        self.history.complete(invoked, "ok", token=token)

    def write(
        self, worker: str, game: str, token: int, how: str, number: int | None = None, **extra: Any
    ) -> str:
        self.n += 1
        text = f"{game}/{worker}.1/t{token}/{self.n}"
        invoked = self.history.invoke(
            f"{worker}.c0", "record_round", worker=worker, game=game, text=text, token=token
        )
        if how == "ok":
            self.history.complete(invoked, "ok", round=number)
        elif how != "none":
            self.history.complete(invoked, how, **extra)
        return text

    def churn(self, f: str, game: str, how: str) -> None:
        invoked = self.history.invoke("churn.0", f, worker="w0", game=game)
        self.history.complete(invoked, how)


def _final(**games: list[str]) -> dict[str, Any]:
    return {game: _replay(game, texts) for game, texts in games.items()}


def _clean() -> tuple[Story, list[str]]:
    story = Story()
    story.open("w0", "g0", 5)
    a = story.write("w0", "g0", 5, "ok", 1)
    b = story.write("w0", "g0", 5, "ok", 2)
    story.write("w0", "g0", 5, "info", code="store_unavailable")  # never landed
    story.open("w1", "g0", 7)
    story.write("w0", "g0", 5, "fail", code="store_fenced")
    c = story.write("w1", "g0", 7, "ok", 3)
    return story, [a, b, c]


def _verdict(story: Story, final: dict[str, Any], **more: Any) -> Any:
    more.setdefault("games", ["g0"])
    more.setdefault("churn_ids", ["c0"])
    return check(story.history, final, **more)


def test_a_clean_history_passes_and_is_counted() -> None:
    story, texts = _clean()
    verdict = _verdict(story, _final(g0=texts))
    assert verdict.failed_checks() == []
    assert verdict.counts["acknowledged"] == 3
    assert verdict.counts["unknown_not_landed"] == 1 and verdict.counts["refused"] == 1


def test_a_lost_acknowledged_round_is_found() -> None:
    story, (a, _, c) = _clean()
    assert _verdict(story, _final(g0=[a, c])).failed_checks() == ["lost"]


def test_a_round_number_acknowledged_twice_is_found() -> None:
    story, texts = _clean()
    story.write("w1", "g0", 7, "ok", 3)
    verdict = _verdict(story, _final(g0=texts))
    assert "acknowledged_twice" in verdict.failed_checks()


def test_a_fenced_write_that_landed_is_found() -> None:
    story, (a, b, c) = _clean()
    fenced = story.write("w0", "g0", 5, "fail", code="store_fenced")
    verdict = _verdict(story, _final(g0=[a, b, c, fenced]))
    assert set(verdict.failed_checks()) == {"fenced_landed", "outside_epoch"}


def test_a_write_answered_after_its_owner_was_superseded_is_found() -> None:
    story, (a, b, c) = _clean()
    stale = story.write("w0", "g0", 5, "ok", 4)  # sent after token 7 was handed out
    assert _verdict(story, _final(g0=[a, b, c, stale])).failed_checks() == ["outside_epoch"]


def test_an_unknown_write_of_an_old_epoch_landing_after_a_newer_one_is_found() -> None:
    story = Story()
    story.open("w0", "g0", 5)
    old = story.write("w0", "g0", 5, "none")  # its worker died: never answered
    story.open("w1", "g0", 7)
    new = story.write("w1", "g0", 7, "ok", 1)
    verdict = _verdict(story, _final(g0=[new, old]))
    assert verdict.failed_checks() == ["outside_epoch"]
    assert verdict.counts["unknown_landed"] == 1


def test_an_unknown_write_that_landed_twice_is_unsettled() -> None:
    story, (a, b, c) = _clean()
    twice = story.write("w1", "g0", 7, "info", code="store_unavailable")
    verdict = _verdict(story, _final(g0=[a, b, c, twice, twice]))
    assert verdict.failed_checks() == ["unsettled"]


def test_a_store_unlike_its_ledger_is_found() -> None:
    story, texts = _clean()
    final = _final(g0=texts)
    final["g0"]["footprint"] += 1
    assert _verdict(story, final).failed_checks() == ["footprint"]
    final = _final(g0=texts)
    final["g0"]["store"]["jfGameStack.meta"]["nextSeq"] += 1
    assert _verdict(story, final).failed_checks() == ["footprint"]
    final = _final(g0=texts)
    assert _verdict(story, final, recorded={"g0": 1}).failed_checks() == ["footprint"]


def test_two_creators_of_one_life_are_found_and_a_removal_between_them_clears_them() -> None:
    story, texts = _clean()
    story.churn("create_game", "c0", "ok")
    story.churn("duplicate", "c0", "ok")
    assert _verdict(story, _final(g0=texts)).failed_checks() == ["created_twice"]
    story, texts = _clean()
    story.churn("create_game", "c0", "ok")
    story.churn("forget_games", "c0", "ok")
    story.churn("create_game", "c0", "ok")
    story.churn("remove_game", "c0", "fail")  # refused: removed nothing
    story.churn("create_game", "c0", "fail")
    assert _verdict(story, _final(g0=texts)).failed_checks() == []


def test_harmed_processes_and_internal_errors_are_found() -> None:
    story, texts = _clean()
    story.history.add("observer", "info", "worker-signalled", worker="w1", returncode=-9)
    invoked = story.history.invoke("w1.c0", "open_game", worker="w1", game="g0")
    story.history.complete(invoked, "info", code="internal_error")
    invoked = story.history.invoke("setup", "create_game", worker="w0", game="g1")
    story.history.complete(invoked, "info", code="store_unavailable")
    verdict = _verdict(story, _final(g0=texts), harmed={"lock0": "killed"}, leftovers=[".new-x"])
    assert verdict.failed_checks() == [
        "bystanders_harmed",
        "workers_signalled",
        "internal_errors",
        "setup_errors",
        "leftovers",
    ]


# -- bystanders and leftovers ------------------------------------------------------------------
@pytest.mark.slow
def test_a_killed_bystander_is_harmed_and_one_left_alone_is_not(tmp_path: Path) -> None:
    target = tmp_path / "lease"
    target.write_text("x")
    marker = f"bystander-test-{uuid.uuid4().hex}"
    bystanders = Bystanders(tmp_path, {**os.environ, MARKER: marker}, marker)
    try:
        alone = bystanders.hold_lock(target, "sh", 0.5, fork=False)
        forked = bystanders.hold_lock(target, "sh", 1.0, fork=True)
        victim = bystanders.hold_lock(target, "sh", 3.0, fork=False)
        deadline = time.monotonic() + 10
        while len(victim.lines()) == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        os.killpg(victim.process.pid, signal.SIGKILL)
        harmed = bystanders.check(timeout=20)
    finally:
        bystanders.stop()
    assert set(harmed) == {victim.name}, harmed
    assert "child" in forked.lines()[0] and alone.lines()[-1] == "done"
    assert descendants_env(marker) == []


def _nemesis(args: list[str], marker: str) -> subprocess.Popen[str]:
    env = {**os.environ, MARKER: marker, "PYTHONPATH": str(TESTS)}
    return subprocess.Popen(
        [sys.executable, "-m", "nemesis", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=ROOT,
    )


@pytest.mark.slow
def test_nothing_a_run_started_outlives_it_when_it_is_interrupted(tmp_path: Path) -> None:
    marker = f"nemesis-test-{uuid.uuid4().hex}"
    args = ["--backend", "shared", "--seconds", "20", "--workers", "3", "--out", str(tmp_path)]
    proc = _nemesis(args, marker)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "faults started" in line:
            break
    time.sleep(4)  # workers, clients and faults under way
    running = descendants_env(marker)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert len(running) >= 3, (running, lines)  # it had started its workers at least
    assert proc.returncode == 130, "".join(lines) + out
    assert descendants_env(marker) == []


@pytest.mark.slow
def test_a_short_run_ends_everything_it_started_and_writes_its_replay(tmp_path: Path) -> None:
    marker = f"nemesis-test-{uuid.uuid4().hex}"
    os.environ[MARKER] = marker
    try:
        report = run(Options("shared", 7, seconds=10, workers=3, quiet=2.0, out=tmp_path))
    finally:
        os.environ.pop(MARKER, None)
    assert report["leaked"] == 0 and descendants_env(marker) == []
    assert report["counts"]["acknowledged"] > 0
    schedule = Schedule.from_json(json.loads(Path(report["schedule"]).read_text()))
    assert schedule == draw(7, "shared", 10, workers=3)
    assert f"--seed 7 --seconds 10 --schedule {report['schedule']}" in report["replay"]


# -- the long runs and the Deploying page ------------------------------------------------------
def test_the_deploying_page_shows_the_long_runs_results_file() -> None:
    page = PAGE.read_text(encoding="utf-8")
    results = json.loads(RESULTS.read_text(encoding="utf-8"))
    assert page_table(page) == render_table(results)


@pytest.mark.nemesis  # deselected by default (addopts); 30 minutes: `uv run pytest -m nemesis`
@pytest.mark.parametrize("backend", ["postgres", "shared", "cluster"])
def test_long_run(backend: str, tmp_path: Path) -> None:
    from jfsm.stores.postgres.cluster import why_unavailable as cluster_unavailable
    from jfsm.stores.postgres.server import why_unavailable as server_unavailable

    reason = {"cluster": cluster_unavailable, "postgres": server_unavailable}.get(
        backend, lambda: None
    )()
    if reason is not None:
        pytest.skip(f"the {backend} backend cannot start here: {reason}")
    seconds = float(os.environ.get("JFSM_NEMESIS_SECONDS", "600"))
    seed = int(os.environ.get("JFSM_NEMESIS_SEED") or time.time_ns() % (1 << 31))
    print(f"nemesis: {backend} seed {seed}")
    report = run(Options(backend, seed, seconds=seconds, out=tmp_path))
    from nemesis.table import record, write_table

    record(report)  # the results file, and the Deploying page's table from it
    write_table()
    assert report["leaked"] == 0, report["leaked_processes"]
    assert report["passed"], (report["failed"], report["findings"], report["replay"])
