"""The workers machine: K processes of one driver command on one shared store, judged from
outside (decision R81; Maelstrom and Jepsen are the anchors).

**The one concept: a deployment of K workers driven and watched as one history.** The
history checker (`jfsm_conformance.verify.ownership`) judges it; this module only decides
what the workers do, and when.

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
  process start costs about a second);
- a `dump`, `telemetry`, `generate` or an `edit_round` a current owner would refuse, by a
  worker whose ownership another worker superseded (a fenced read: `store_fenced`,
  JF-STORE-030, R238), and a `dump` by a worker that does not hold the game (an implicit
  plain open, JF-STORE-036), also right after its refused plain open (R204).

Every reply goes to `jfsm_conformance.verify.ownership.OwnershipHistory`, which decides every
verdict. The first sequence opens with each of these once (a fixed probe, so that every
requirement is exercised in every run), then with the lease probes (decision R122): the
workers are greeted again with hello's `leaseSeconds` (`LEASE_ASKED`) and state the length in
force; a game is taken over and released while the superseded owner keeps running, and after
one stated length a plain open must succeed (no renewal brought a lease back, JF-STORE-031);
then its owner is killed, and another worker opens it plainly every `LEASE_POLL` seconds: once
the stated length has passed (plus `LEASE_MARGIN`) the open must succeed (JF-STORE-032). A
stated length over `LEASE_WAIT_MAX` leaves those two not exercised, with the reason. Every
sequence ends with a takeover and read of each game. No shrinking: a failure is reported with
the sequence that found it (its steps, each naming its worker, and the protocol messages of
every worker, merged in time order).

The machine accounts for itself: per worker, how many opens, takeovers, refusals, releases,
fenced writes and reads, implicit opens, held publications and kills it made
(`WorkersOutcome.per_worker`, and the run's exercise counts, kind `workers`).

`run_workers(...)` runs the machine; `phase(run, ...)` is the runner's phase (skipped, with
its reason, for a driver without the capability or not over stdio).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import shutil
import time
import uuid
from collections import Counter
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

from jfsm_conformance.client.driver import (
    DriverClient,
    DriverDied,
    HarnessError,
    ProtocolViolation,
    Reply,
    state_folder,
)
from jfsm_conformance.fake.compress import FakeCompress
from jfsm_conformance.model.replies import hold
from jfsm_conformance.verify.checks import DRIVER_UP, ConformanceFailure, Ledger
from jfsm_conformance.verify.ownership import OwnershipHistory

__all__ = ["BUDGET", "OWNERSHIP_IDS", "WorkersOutcome", "phase", "run_workers", "unfit"]

# what only this machine judges: not covered (with that reason) without sharedStore
OWNERSHIP_IDS = frozenset(
    [f"JF-STORE-0{n}" for n in range(10, 15)]
    + ["JF-STORE-030", "JF-STORE-031", "JF-STORE-032", "JF-STORE-036"]
)

# examples x steps of the workers machine per profile
BUDGET = {"quick": (6, 16), "standard": (15, 25), "thorough": (40, 40)}
GAMES = 2  # shared games per sequence
SMALL = {"game": 400, "catalyst": 400}  # thresholds for held generations (thresholdOverride)
KILL_DELAYS = (0.0, 0.001, 0.003, 0.008, 0.02)
KILLS = 1  # SIGKILLs per sequence: each costs a process start (about a second)
TIMEOUT = 60.0
LEASE_ASKED = 2.0  # seconds: hello's leaseSeconds in the lease probes (R122)
# the ops a superseded owner could answer from its own copy of a game without a write
# (JF-STORE-030 lists them: `dump`, `telemetry`, a `generate` with nothing to compress): each
# is sent by a superseded owner in the first sequence, and drawn by the rule after it
READS = ("dump", "telemetry", "generate", "edit_round")
# what a read sends beside its game: `edit_round` of a round no game of the machine reaches,
# refused by a current owner for a reason of its own (its memory shows no such round), by a
# superseded one with store_fenced like every read (JF-STORE-030, decision R238)
READ_ARGS: dict[str, dict[str, Any]] = {
    "edit_round": {"round": 1_000_000, "input": "never", "output": "never"}
}
LEASE_WAIT_MAX = 60.0  # the longest stated lease the probes wait out
LEASE_MARGIN = 0.5  # seconds waited past a stated lease (a quarter of it, if longer; R172)
LEASE_POLL = 0.25  # seconds between plain opens of a killed owner's game (R172)


class WorkerPool:
    """K `DriverClient`s over one stdio command, each greeted with `hello`; a killed worker
    is started again with the same command and greeted again. `{state}` in the command
    becomes one fresh empty directory that every worker shares (R96), removed at `close`.
    Raises `HarnessError` if a worker cannot be started or does not declare `sharedStore`."""

    def __init__(self, spec: str, count: int, fake: FakeCompress) -> None:
        self.state: str | None = None
        if "{state}" in spec:  # one store for all: the same directory for every worker
            self.state = state_folder("jfsm-suite-workers-")
            spec = spec.replace("{state}", self.state)
        self.spec = spec
        self.fake = fake
        self.clients: list[DriverClient] = []
        self.thresholds: dict[str, int] | None = None
        self.stated: list[Any] = []  # each worker's hello leaseSeconds, as last answered
        try:
            for k in range(count):  # `{worker}`: each process's stable name (R82)
                client = DriverClient(spec.replace("{worker}", f"worker-{k + 1}"), timeout=TIMEOUT)
                self.clients.append(client)
                self.stated.append(None)
                caps = self._hello(k)
                if not caps.get("sharedStore"):
                    raise HarnessError(
                        "a worker started from the same command did not declare sharedStore"
                    )
        except BaseException:
            self.close()
            raise

    def _hello(self, worker: int, lease: float | None = None) -> dict[str, Any]:
        """Greet a worker, asking for the small thresholds (honoured only with
        thresholdOverride, without which held generations are not run) and, when given, for
        leases of `lease` seconds; keeps the lease length it states. Returns its
        capabilities."""
        args: dict[str, Any] = {"protocol": 1, "compressUrl": self.fake.url, "thresholds": SMALL}
        if lease is not None:
            args["leaseSeconds"] = lease
        reply = self.clients[worker].call("hello", args)
        if not reply.ok:
            raise HarnessError(f"a worker refused hello: {reply.get('error')}")
        caps = dict(reply.result.get("capabilities", {}))
        self.thresholds = SMALL if caps.get("thresholdOverride") else None
        self.stated[worker] = reply.result.get("leaseSeconds")
        return caps

    def hello_all(self, lease: float | None) -> list[Any]:
        """Greet every worker again, asking for leases of `lease` seconds (None: their own);
        returns the lengths they state."""
        for worker in range(len(self.clients)):
            self._hello(worker, lease)
        return list(self.stated)

    def marks(self) -> list[int]:
        """Where each worker's transcript stands now (for `messages_since`)."""
        return [client.transcript.mark() for client in self.clients]

    def messages_since(self, marks: list[int]) -> list[dict[str, Any]]:
        """Every worker's protocol messages since `marks`, each naming its worker, in the
        order they were sent or received."""
        merged: list[dict[str, Any]] = []
        for k, (client, mark) in enumerate(zip(self.clients, marks, strict=True)):
            merged += [{"worker": k, **entry} for entry in client.transcript.since(mark)]
        return sorted(merged, key=lambda entry: float(entry.get("t", 0.0)))

    def call(self, worker: int, op: str, args: dict[str, Any]) -> Reply:
        return self.clients[worker].call(op, args)

    def kill(self, worker: int) -> None:
        """SIGKILL the worker's process group, start the command again, greet it."""
        client = self.clients[worker]
        client.restart()
        self._hello(worker)

    def close(self) -> None:
        for client in self.clients:
            with contextlib.suppress(Exception):
                client.close()
        if self.state is not None:
            shutil.rmtree(self.state, ignore_errors=True)


@dataclass
class WorkersOutcome:
    status: str  # "pass" or "fail"
    # (the failure, its sequence's steps, every worker's messages of that sequence)
    failures: list[tuple[BaseException, list[dict[str, Any]], list[dict[str, Any]]]] = field(
        default_factory=list
    )
    sequences: int = 0
    generations: int = 0  # generations sent with a held compression
    fenced_publications: int = 0  # ... of which the fake held the request while fenced
    # per worker ("worker-1"...): opens, takeovers, refusals, releases, fenced writes...
    per_worker: dict[str, Counter[str]] = field(default_factory=dict)
    not_run: dict[str, str] = field(default_factory=dict)  # a probe not run -> why

    def count(self, worker: int, what: str) -> None:
        """Count one `what` of `worker` (the runner's phase adds them to the run's exercise
        counts, kind `workers`)."""
        self.per_worker.setdefault(f"worker-{worker + 1}", Counter())[what] += 1


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
            self.marks = pool.marks()
            outcome.sequences += 1

        # -- plumbing ----------------------------------------------------------------------
        def step(self, name: str, worker: int, **args: Any) -> None:
            self.steps.append({"step": name, "args": {"worker": worker, **args}})

        def guard(self, body: Callable[[], object]) -> None:
            try:
                body()
            except (ConformanceFailure, ProtocolViolation) as exc:
                messages = pool.messages_since(self.marks)
                outcome.failures.append((exc, list(self.steps), messages))
                raise _Stop from exc
            except DriverDied as exc:  # a worker died unasked: a verdict, the machine ends (R194)
                first, _, tail = str(exc).partition("\n")
                lines = [line for line in tail.splitlines() if line.strip()][-12:]
                message = f"a worker died or stopped answering: {first}"
                if lines:
                    message += "\nits last stderr lines:\n" + "\n".join(f"  {x}" for x in lines)
                failure = ConformanceFailure(DRIVER_UP.name, DRIVER_UP.ids, message)
                messages = pool.messages_since(self.marks)
                outcome.failures.append((failure, list(self.steps), messages))
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
                    self._lease_probes(v, (v + 1) % k)

            self.guard(body)

        def _probe(self, v: int, u: int, game: str) -> None:
            """The first sequence opens with every rule once: a contended open, a takeover,
            a fenced read and a fenced write (and the read after it), an owner's write, a
            SIGKILL mid-commit, a read, a publication released after a takeover, ops on a game
            not held (before its first open, while another owns it, after a release), and a
            superseded worker's plain open refused, then its op on the game (R204)."""
            self._open(u, game, False)
            self._open(u, game, True)
            for op in READS:  # ops that answer from memory, and a refusal of its own (R238)
                self._fenced_read(v, game, op)
            self._record(v, game)
            self._record(v, game)
            self._kill(v, game, 0.0)
            self._open(u, game, True)
            if pool.thresholds is not None:
                self._fenced_publication(u, game, v, 1)
            other = self.games[1]
            self._not_held(u, other)  # no owner yet: u becomes it
            self._not_held(v, other)  # u's ownership lives: store_locked
            self._release(u, other)
            self._not_held(u, other)  # released: opened again
            self._open(v, other, True)  # u superseded
            self._open(u, other, False)  # refused while v's lease lives: u holds nothing (R204)
            self._release(v, other)

        def _lease_probes(self, v: int, u: int) -> None:
            """Leases renew only their own, and run out (JF-STORE-031, JF-STORE-032; R122)."""
            stated = [
                self.history.stated_lease(w, got, LEASE_ASKED)
                for w, got in enumerate(pool.hello_all(LEASE_ASKED))
            ]
            length = max(stated)
            if length > LEASE_WAIT_MAX:
                outcome.not_run["lease probes"] = (
                    f"the workers state leases of {length:g} s (hello's leaseSeconds), longer "
                    f"than the {LEASE_WAIT_MAX:g} s the suite waits; honour hello's "
                    f"leaseSeconds ({LEASE_ASKED:g} asked)"
                )
                pool.hello_all(None)
                return
            wait = length + max(LEASE_MARGIN, length / 4)
            game = self._create(u, listed=False)
            self._open(v, game, False)
            self._open(u, game, True)  # v superseded, its process running on
            self._release(u, game)
            self.step("wait", u, seconds=round(wait, 2), why="superseded owners renew nothing")
            time.sleep(wait)
            self._lease_open(v, game, "released", wait, length)
            self._record(v, game)
            killed = time.monotonic()
            self.step("kill", v, game=game)
            pool.kill(v)
            outcome.count(v, "kills")
            self.history.killed(v)
            pool.hello_all(LEASE_ASKED)  # the restarted worker too
            while True:  # a plain open by another worker: refused until the lease runs out
                waited = time.monotonic() - killed
                self.step("open_game", u, game=game, takeover=False, after="killed")
                reply = self.call(u, "open_game", game=game, takeover=False)
                outcome.count(u, "opens" if reply.ok else "refusals")
                if reply.ok or waited >= wait:
                    self.history.lease_over(
                        u, game, reply, after="killed", waited=waited, stated=length
                    )
                    self.read(u, game)
                    break
                self.history.open_refused(u, game, reply.code, takeover=False)
                left = min(LEASE_POLL, max(0.05, wait - (time.monotonic() - killed)))
                self.step("wait", u, seconds=round(left, 2), why="a killed owner's lease")
                time.sleep(left)
            self._release(u, game)
            pool.hello_all(None)

        def _lease_open(self, w: int, game: str, after: str, waited: float, stated: float) -> None:
            self.step("open_game", w, game=game, takeover=False, after=after)
            reply = self.call(w, "open_game", game=game, takeover=False)
            outcome.count(w, "opens" if reply.ok else "refusals")
            self.history.lease_over(w, game, reply, after=after, waited=waited, stated=stated)
            self.read(w, game)

        @precondition(lambda self: len(self.games) < GAMES)
        @rule(w=st.integers(0, k - 1))
        def create(self, w: int) -> None:
            self.guard(lambda: self._create(w))

        def _create(self, w: int, listed: bool = True) -> str:
            """A new game, released at once (no owner); `listed`: one the rules may pick."""
            game = f"{self.prefix}-{next(ids)}"
            self.step("create_game", w, game=game)
            self.must(w, "create_game", game=game)
            store = self.must(w, "dump", game=game).result["store"]
            self.must(w, "release_game", game=game)
            if listed:
                self.games.append(game)
            self.history.created(w, game, store)
            return game

        @rule(w=st.integers(0, k - 1), pick=st.integers(0, 7), takeover=st.booleans())
        def open(self, w: int, pick: int, takeover: bool) -> None:
            game = self.games[pick % len(self.games)]
            self.guard(lambda: self._open(w, game, takeover))

        def _open(self, w: int, game: str, takeover: bool) -> None:
            self.step("open_game", w, game=game, takeover=takeover)
            superseded = w in self.history.games[game].fenced
            reply = self.call(w, "open_game", game=game, takeover=takeover)
            outcome.count(w, ("takeovers" if takeover else "opens") if reply.ok else "refusals")
            if reply.ok:
                self.history.opened(w, game, reply.result.get("token"), takeover=takeover)
                self.read(w, game)
            else:
                self.history.open_refused(w, game, reply.code, takeover=takeover)
                if superseded:  # it dropped what it held: its next op opens plainly (R204)
                    self._not_held(w, game)

        def _fenced_read(self, w: int, game: str, op: str = "dump") -> None:
            """A read (`op`, one of `READS`) by `w`, whose ownership another worker
            superseded: store_fenced."""
            self.step(op, w, game=game, superseded=True, **READ_ARGS.get(op, {}))
            reply = self.call(w, op, game=game, **READ_ARGS.get(op, {}))
            outcome.count(w, "fenced reads")
            self.history.fenced_read(w, game, reply, op)

        def _not_held(self, w: int, game: str) -> None:
            """An op (a dump) by `w` on a game it does not hold: a plain open first."""
            self.step("dump", w, game=game, held=False)
            reply = self.call(w, "dump", game=game)
            outcome.count(w, "implicit opens" if reply.ok else "refusals")
            if self.history.not_held(w, game, reply):
                self.history.read(w, game, reply.result["store"])

        def _release(self, w: int, game: str) -> None:
            self.step("release_game", w, game=game)
            self.must(w, "release_game", game=game)
            outcome.count(w, "releases")
            self.history.released(w, game)

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
            outcome.count(w, "writes" if owner else "fenced writes")
            self.history.appended(w, game, text, reply)
            if reply.ok and owner:
                self.acknowledged(w, game)
            elif not owner:  # a fenced write, then a fenced read; the worker takes it back
                self._fenced_read(w, game)
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
            self.guard(lambda: self._release(w, game))

        def superseded(self) -> list[tuple[int, str]]:
            return [(w, g) for g in self.games for w in sorted(self.history.games[g].fenced)]

        @precondition(lambda self: bool(self.superseded()))
        @rule(pick=st.integers(0, 15), op=st.sampled_from(READS))
        def fenced_read(self, pick: int, op: str) -> None:
            """A worker whose game another opened reads it: store_fenced (JF-STORE-030)."""
            w, game = self.superseded()[pick % len(self.superseded())]
            self.guard(lambda: self._fenced_read(w, game, op))

        @rule(w=st.integers(0, k - 1), pick=st.integers(0, 7))
        def not_held(self, w: int, pick: int) -> None:
            """An op on a game the worker does not hold opens it plainly (JF-STORE-036)."""
            game = self.games[pick % len(self.games)]
            if self.history.games[game].held_by(w):
                return
            self.guard(lambda: self._not_held(w, game))

        @precondition(lambda self: self.kills < KILLS and bool(self.owners()))
        @rule(pick=st.integers(0, 15), delay=st.sampled_from(KILL_DELAYS))
        def kill_mid_commit(self, pick: int, delay: float) -> None:
            w, game = self.owners()[pick % len(self.owners())]
            self.guard(lambda: self._kill(w, game, delay))

        def _kill(self, w: int, game: str, delay: float) -> None:
            text = f"{game}/{next(self.rounds)}"
            self.step("kill_mid_commit", w, game=game, input=text, delay=delay)
            self.kills += 1
            outcome.count(w, "kills")
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
            outcome.count(w, "held publications")
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

    Returns the outcome (the first failure with its steps, if any; a worker that died unasked
    or stopped answering in a rule is one, of JF-ERR-020: R194). Raises `HarnessError` when
    a worker cannot be started or greeted, and `ValueError` for fewer than 2 workers."""
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


def unfit(spec: str, capabilities: dict[str, Any]) -> str | None:
    """Why the workers machine cannot run over the driver `spec` with `capabilities`, or
    None: it needs `sharedStore` and a stdio command to start K processes of."""
    if not capabilities.get("sharedStore"):
        return "the driver does not declare capabilities.sharedStore"
    if not spec.startswith("stdio:"):
        return "needs a stdio driver (the suite starts K processes of its command)"
    return None


def phase(
    run: Any, capabilities: dict[str, Any], profile: str, workers: int, spec: str | None = None
) -> None:
    """The runner's workers phase (`run` is the runner's `_Run`) over the run's driver, or
    over `spec` (a companion's command): skipped with a reason for a driver without
    `sharedStore` or not over stdio, else the machine's verdicts."""
    spec = spec or run.o.driver
    label = f"machine workers (K={workers})"
    reason = unfit(spec, capabilities)
    if reason is not None:
        run.skipped[label] = reason
        return
    examples, steps = BUDGET.get(profile, BUDGET["quick"])
    run.o.progress(f"{label}: {examples} random sequences of up to {steps} steps")
    began = time.monotonic()
    outcome = run_workers(spec, workers, examples, steps, run.ledger, seed=run.o.seed)
    for exc, sequence, messages in outcome.failures:
        run.record_failure(label, _found(exc, sequence, messages), spec, None)
    for probe, why in outcome.not_run.items():
        run.skipped[f"{label}: {probe}"] = why
    for worker, events in outcome.per_worker.items():  # what the machine exercised (R128)
        for what, n in events.items():
            run.counts.add("workers", f"{worker} {what}", n)
    took = time.monotonic() - began
    run.durations[label] = took
    run.o.progress(
        f"{label}: {outcome.status.upper() if outcome.failures else 'pass'} ({took:.1f}s)"
    )
    run.reached(f"{label}: done")


def _found(exc: BaseException, steps: list[dict[str, Any]], messages: list[dict[str, Any]]) -> Any:
    from jfsm_conformance.machines.explore import Found

    return Found(exc, steps, messages)
