"""The workers machine: K processes of one driver command on one shared store, judged from
outside (decision R81; Maelstrom and Jepsen are the anchors).

A driver that declares `capabilities.sharedStore` promises that every process started from
its command serves the same games, one owner at a time (`spec/driver/protocol.json`,
machine `spec/machines/store_ownership.json`). The suite then starts K of them (`--workers`,
2 by default) over stdio, each with its own `hello`, and a Hypothesis state machine
interleaves them on two shared games:

- `create_game` on one worker, released at once, so games start without an owner;
- `open_game`, plain or with `takeover`, by any worker (and plainly by another worker than
  a live owner: contention); each accepted open is followed by a `dump` on the same
  worker: the read that the history checker judges;
- `record_round` by a worker that holds the game, the current owner or a fenced one, each
  with a unique input (the appends of a list); an acknowledged round is followed by the
  owner's `dump`, the store the next owner must read; a fenced worker then takes the game
  back (a takeover and its read), so what its refused write left is judged at once;
- `generate` by the owner, at a small threshold, with its compression request held by the
  fake while another worker takes the game over; released after: a fenced publication;
- `release_game`;
- SIGKILL of the owner's process in the middle of `record_round` (after a random delay of
  0 to 20 ms), after which it is started again with the same command (once a sequence: a
  process start costs about a second).

Every reply goes to `jfsm_conformance.verify.ownership.OwnershipHistory`, which decides every
verdict. The first sequence opens with each of these once (a fixed probe, so that every
requirement is exercised in every run); every sequence ends with a takeover and read of
each game. No shrinking: a failure is reported with the sequence that found it (its steps,
each naming its worker).

`run_workers(...)` runs the machine; `phase(run, ...)` is the runner's phase (skipped, with
its reason, for a driver without the capability or not over stdio).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.errors import HypothesisException
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

from jfsm_conformance.client.driver import DriverClient, HarnessError, ProtocolViolation, Reply
from jfsm_conformance.fake.compress import FakeCompress
from jfsm_conformance.model.replies import hold
from jfsm_conformance.verify.checks import ConformanceFailure, Ledger
from jfsm_conformance.verify.ownership import OwnershipHistory

__all__ = ["BUDGET", "OWNERSHIP_IDS", "WorkersOutcome", "phase", "run_workers"]

# what only this machine judges: not covered (with that reason) without sharedStore
OWNERSHIP_IDS = frozenset(f"JF-STORE-0{n}" for n in range(10, 15))

# examples x steps of the workers machine per profile
BUDGET = {"quick": (6, 16), "standard": (15, 25), "thorough": (40, 40)}
GAMES = 2  # shared games per sequence
SMALL = {"game": 400, "catalyst": 400}  # thresholds for held generations (thresholdOverride)
KILL_DELAYS = (0.0, 0.001, 0.003, 0.008, 0.02)
KILLS = 1  # SIGKILLs per sequence: each costs a process start (about a second)
TIMEOUT = 60.0


class WorkerPool:
    """K `DriverClient`s over one stdio command, each greeted with `hello`; a killed worker
    is started again with the same command and greeted again. `{state}` in the command
    becomes one fresh empty directory that every worker shares (R96), removed at `close`.
    Raises `HarnessError` if a worker cannot be started or does not declare `sharedStore`."""

    def __init__(self, spec: str, count: int, fake: FakeCompress) -> None:
        self.state: str | None = None
        if "{state}" in spec:  # one store for all: the same directory for every worker
            self.state = tempfile.mkdtemp(prefix="jfsm-suite-workers-")
            spec = spec.replace("{state}", self.state)
        self.spec = spec
        self.fake = fake
        self.clients: list[DriverClient] = []
        self.thresholds: dict[str, int] | None = None
        try:
            for k in range(count):  # `{worker}`: each process's stable name (R82)
                client = DriverClient(spec.replace("{worker}", f"worker-{k + 1}"), timeout=TIMEOUT)
                self.clients.append(client)
                caps = self._hello(client)
                if not caps.get("sharedStore"):
                    raise HarnessError(
                        "a worker started from the same command did not declare sharedStore"
                    )
        except BaseException:
            self.close()
            raise

    def _hello(self, client: DriverClient) -> dict[str, Any]:
        """Greet a worker, asking for the small thresholds (honoured only with
        thresholdOverride, without which held generations are not run)."""
        args = {"protocol": 1, "compressUrl": self.fake.url, "thresholds": SMALL}
        reply = client.call("hello", args)
        if not reply.ok:
            raise HarnessError(f"a worker refused hello: {reply.get('error')}")
        caps = dict(reply.result.get("capabilities", {}))
        self.thresholds = SMALL if caps.get("thresholdOverride") else None
        return caps

    def call(self, worker: int, op: str, args: dict[str, Any]) -> Reply:
        return self.clients[worker].call(op, args)

    def kill(self, worker: int) -> None:
        """SIGKILL the worker's process group, start the command again, greet it."""
        client = self.clients[worker]
        client.restart()
        self._hello(client)

    def close(self) -> None:
        for client in self.clients:
            with contextlib.suppress(Exception):
                client.close()
        if self.state is not None:
            shutil.rmtree(self.state, ignore_errors=True)


@dataclass
class WorkersOutcome:
    status: str  # "pass" or "fail"
    failures: list[tuple[BaseException, list[dict[str, Any]]]] = field(default_factory=list)
    sequences: int = 0
    generations: int = 0  # generations sent with a held compression
    fenced_publications: int = 0  # ... of which the fake held the request while fenced


class _Stop(Exception):
    """Ends Hypothesis at the first failure, which the outcome keeps."""


def _machine(
    pool: WorkerPool, ledger: Ledger, outcome: WorkersOutcome
) -> type[RuleBasedStateMachine]:
    k = len(pool.clients)
    ids = itertools.count(1)

    class Workers(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.history = OwnershipHistory(ledger)
            self.steps: list[dict[str, Any]] = []
            self.games: list[str] = []
            self.prefix = "wk-" + uuid.uuid4().hex[:8]
            self.rounds = itertools.count(1)
            self.kills = 0
            outcome.sequences += 1

        # -- plumbing ----------------------------------------------------------------------
        def step(self, name: str, worker: int, **args: Any) -> None:
            self.steps.append({"step": name, "args": {"worker": worker, **args}})

        def guard(self, body: Callable[[], None]) -> None:
            try:
                body()
            except (ConformanceFailure, ProtocolViolation) as exc:
                outcome.failures.append((exc, list(self.steps)))
                raise _Stop from exc

        def call(self, worker: int, op: str, **args: Any) -> Reply:
            return pool.call(worker, op, args)

        def must(self, worker: int, op: str, **args: Any) -> Reply:
            reply = self.call(worker, op, **args)
            if not reply.ok:
                raise ConformanceFailure(
                    "one-owner-at-a-time",
                    ("JF-STORE-010",),
                    f"worker {worker}: {op} {args} was refused: {reply.get('error')}",
                )
            return reply

        def holders(self) -> list[tuple[int, str]]:
            return [
                (w, g) for g in self.games for w in range(k) if self.history.games[g].held_by(w)
            ]

        def owners(self) -> list[tuple[int, str]]:
            return [
                (w, g) for g in self.games for w in range(k) if self.history.games[g].live_owner(w)
            ]

        def read(self, worker: int, game: str) -> None:
            dump = self.must(worker, "dump", game=game).result
            self.history.read(worker, game, dump["store"])

        def acknowledged(self, worker: int, game: str) -> None:
            dump = self.must(worker, "dump", game=game).result
            self.history.acknowledged_store(game, dump["store"])

        # -- rules -------------------------------------------------------------------------
        @initialize(w=st.integers(0, k - 1), v=st.integers(0, k - 1))
        def first_games(self, w: int, v: int) -> None:
            def body() -> None:
                self._create(w)
                self._create(v)
                game = self.games[0]
                self._open(v, game, False)
                if outcome.sequences == 1:
                    self._probe(v, (v + 1) % k, game)

            self.guard(body)

        def _probe(self, v: int, u: int, game: str) -> None:
            """The first sequence opens with every rule once: a contended open, a takeover,
            a fenced write (and its read), an owner's write, a SIGKILL mid-commit, a read, and
            a publication released after a takeover."""
            self._open(u, game, False)
            self._open(u, game, True)
            self._record(v, game)
            self._record(v, game)
            self._kill(v, game, 0.0)
            self._open(u, game, True)
            if pool.thresholds is not None:
                self._fenced_publication(u, game, v, 1)

        @precondition(lambda self: len(self.games) < GAMES)
        @rule(w=st.integers(0, k - 1))
        def create(self, w: int) -> None:
            self.guard(lambda: self._create(w))

        def _create(self, w: int) -> None:
            game = f"{self.prefix}-{next(ids)}"
            self.step("create_game", w, game=game)
            self.must(w, "create_game", game=game)
            store = self.must(w, "dump", game=game).result["store"]
            self.must(w, "release_game", game=game)
            self.games.append(game)
            self.history.created(w, game, store)

        @rule(w=st.integers(0, k - 1), pick=st.integers(0, 7), takeover=st.booleans())
        def open(self, w: int, pick: int, takeover: bool) -> None:
            game = self.games[pick % len(self.games)]
            self.guard(lambda: self._open(w, game, takeover))

        def _open(self, w: int, game: str, takeover: bool) -> None:
            self.step("open_game", w, game=game, takeover=takeover)
            reply = self.call(w, "open_game", game=game, takeover=takeover)
            if reply.ok:
                self.history.opened(w, game, reply.result.get("token"), takeover=takeover)
                self.read(w, game)
            else:
                self.history.open_refused(w, game, reply.code, takeover=takeover)

        @precondition(lambda self: bool(self.holders()))
        @rule(pick=st.integers(0, 15))
        def record(self, pick: int) -> None:
            w, game = self.holders()[pick % len(self.holders())]
            self.guard(lambda: self._record(w, game))

        def _record(self, w: int, game: str, pad: int = 0) -> None:
            text = f"{game}/{next(self.rounds)}"
            self.step("record_round", w, game=game, input=text, pad=pad)
            text += " " + "x" * pad if pad else ""
            reply = self.call(w, "record_round", game=game, input=text, output="ok")
            owner = self.history.games[game].live_owner(w)
            self.history.appended(w, game, text, reply)
            if reply.ok and owner:
                self.acknowledged(w, game)
            elif not owner:  # a fenced write: the worker takes the game back, and reads
                self._open(w, game, True)

        @precondition(lambda self: bool(self.owners()))
        @rule(pick=st.integers(0, 15), step=st.integers(1, 2))
        def contend(self, pick: int, step: int) -> None:
            """Another worker opens a game whose owner lives: refused, store_locked."""
            w, game = self.owners()[pick % len(self.owners())]
            self.guard(lambda: self._open((w + step) % k, game, False))

        @precondition(lambda self: bool(self.holders()))
        @rule(pick=st.integers(0, 15))
        def release(self, pick: int) -> None:
            w, game = self.holders()[pick % len(self.holders())]

            def body() -> None:
                self.step("release_game", w, game=game)
                self.must(w, "release_game", game=game)
                self.history.released(w, game)

            self.guard(body)

        @precondition(lambda self: self.kills < KILLS and bool(self.owners()))
        @rule(pick=st.integers(0, 15), delay=st.sampled_from(KILL_DELAYS))
        def kill_mid_commit(self, pick: int, delay: float) -> None:
            w, game = self.owners()[pick % len(self.owners())]
            self.guard(lambda: self._kill(w, game, delay))

        def _kill(self, w: int, game: str, delay: float) -> None:
            text = f"{game}/{next(self.rounds)}"
            self.step("kill_mid_commit", w, game=game, input=text, delay=delay)
            self.kills += 1
            client = pool.clients[w]
            future = client.start("record_round", {"game": game, "input": text, "output": "ok"})
            if delay:
                time.sleep(delay)
            pool.kill(w)
            answered = future.done() and future.exception(0) is None
            if answered:
                reply = client.wait(future, 0)
                self.history.appended(w, game, text, reply)
            else:
                self.history.in_flight_at_kill(game, text)
            self.history.killed(w)

        @precondition(lambda self: pool.thresholds is not None and len(pool.clients) > 1)
        @rule(pick=st.integers(0, 15), other=st.integers(1, 2), rounds=st.integers(1, 3))
        def fenced_publication(self, pick: int, other: int, rounds: int) -> None:
            candidates = self.owners()
            if not candidates:
                return
            w, game = candidates[pick % len(candidates)]
            self.guard(lambda: self._fenced_publication(w, game, (w + other) % k, rounds))

        def _fenced_publication(self, w: int, game: str, rival: int, rounds: int) -> None:
            """The owner's compression is held by the fake while `rival` takes the game over
            and records a round; released after, its publication must land nothing."""
            for i in range(rounds):
                self._record(w, game, pad=SMALL["game"] + 40 if i == rounds - 1 else 0)
                if not self.history.games[game].live_owner(w):
                    return
            client = pool.clients[w]
            pool.fake.script(hold())
            self.step("generate", w, game=game, held=True)
            outcome.generations += 1
            future = client.start("generate", {"game": game})
            deadline = time.monotonic() + 10
            held = False
            while not held and not future.done() and time.monotonic() < deadline:
                held = pool.fake.wait_held(0.05)
            if not held:  # nothing was due, or answered at once: an ordinary generation
                pool.fake.reset_script()
                self._generated(w, game, client.wait(future))
                return
            self._open(rival, game, True)
            outcome.fenced_publications += 1
            if self.history.games[game].live_owner(rival):
                self._record(rival, game)
            self.step("release held compression", w, game=game)
            pool.fake.release()
            pool.fake.reset_script()
            self._generated(w, game, client.wait(future))
            if self.history.games[game].live_owner(rival):
                self._open(rival, game, True)  # read again: the publication landed nothing

        def _generated(self, w: int, game: str, reply: Reply) -> None:
            self.history.generated(w, game, reply)
            if reply.ok and self.history.games[game].live_owner(w):
                self.acknowledged(w, game)

        def teardown(self) -> None:
            if outcome.failures:
                return
            try:
                for i, game in enumerate(self.games):
                    self.guard(functools.partial(self._open, i % k, game, True))
                for game in self.games:
                    for w in range(k):
                        with contextlib.suppress(Exception):
                            pool.call(w, "release_game", {"game": game})
            except _Stop:
                pass

    return Workers


def run_workers(
    spec: str,
    count: int,
    examples: int,
    steps: int,
    ledger: Ledger,
    *,
    seed: int | None = None,
) -> WorkersOutcome:
    """Run the workers machine with `count` processes of the stdio driver `spec`.

    Returns the outcome (the first failure with its steps, if any). Raises `HarnessError`
    when a worker cannot be started, dies unasked, or stops answering, and `ValueError` for
    fewer than 2 workers."""
    if count < 2:
        raise ValueError(f"the workers machine needs at least 2 workers, not {count}")
    outcome = WorkersOutcome("pass")
    with FakeCompress() as fake:
        pool = WorkerPool(spec, count, fake)
        try:
            machine = _machine(pool, ledger, outcome)
            conf = settings(
                max_examples=examples,
                stateful_step_count=steps,
                deadline=None,
                database=None,
                derandomize=seed is None,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
                report_multiple_bugs=False,
            )
            machine.TestCase.settings = conf
            try:
                if seed is not None:
                    from hypothesis import seed as hypothesis_seed

                    hypothesis_seed(seed)(machine.TestCase.runTest)
                run_state_machine_as_test(machine, settings=conf)
            except _Stop:
                pass
            except HypothesisException:
                if not outcome.failures:
                    raise
        finally:
            pool.close()
    if outcome.failures:
        outcome.status = "fail"
    return outcome


def phase(
    run: Any, capabilities: dict[str, Any], profile: str, workers: int, spec: str | None = None
) -> None:
    """The runner's workers phase (`run` is the runner's `_Run`) over the run's driver, or
    over `spec` (a companion's command): skipped with a reason for a driver without
    `sharedStore` or not over stdio, else the machine's verdicts."""
    spec = spec or run.o.driver
    label = f"machine workers (K={workers})"
    if not capabilities.get("sharedStore"):
        run.skipped[label] = "the driver does not declare capabilities.sharedStore"
        return
    if not spec.startswith("stdio:"):
        run.skipped[label] = "needs a stdio driver (the suite starts K processes of its command)"
        return
    examples, steps = BUDGET.get(profile, BUDGET["quick"])
    run.o.progress(f"{label}: {examples} random sequences of up to {steps} steps")
    began = time.monotonic()
    outcome = run_workers(spec, workers, examples, steps, run.ledger, seed=run.o.seed)
    for exc, sequence in outcome.failures:
        run.record_failure(label, _found(exc, sequence), spec, None)
    took = time.monotonic() - began
    run.durations[label] = took
    run.o.progress(
        f"{label}: {outcome.status.upper() if outcome.failures else 'pass'} ({took:.1f}s)"
    )
    run.reached(f"{label}: done")


def _found(exc: BaseException, steps: list[dict[str, Any]]) -> Any:
    from jfsm_conformance.machines.explore import Found

    return Found(exc, steps, [])
