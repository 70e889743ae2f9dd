"""The nemesis's schedule: which faults happen when, for how long, drawn from one seed.

A schedule is plain data (`Schedule.to_json` / `Schedule.from_json`): the seed, the backend,
the run's length, the lengths it was drawn for (the workers' lease, Patroni's `ttl`) and the
list of faults, each with its start (seconds from the run's start), its kind, its duration
and its target (a worker's index, a file of the state directory by kind and index, ...).
`draw(seed, ...)` is a pure function: the same arguments give the same schedule, on every
machine (`random.Random(seed)` only, no clock, no environment), so a seed alone replays a
run's faults; a schedule file replays them even after `draw` changes.

What is drawn (decision R187):

- per worker, one timeline of `kill-worker` (`kill -9` of its process group, restarted after
  `duration`, the dead pid taken by a pid-reusing bystander where the kernel lets us) and
  `pause-worker` (SIGSTOP, SIGCONT after 0.1 s up to 3 x the lease), never two at once on one
  worker, but the workers' timelines overlap;
- on PostgreSQL: `idle-cut` (the server ends the idle sessions: `pg_terminate_backend`),
  `crash-postgres` (`kill -9` of the primary's postmaster; the plain server is restarted in
  `immediate` mode);
- on the Patroni cluster, one database fault at a time: `crash-postgres`, `switchover`,
  `freeze-primary` (SIGSTOP of the primary's Patroni and postgres for up to 4 x `ttl`),
  `freeze-patroni` (its Patroni alone), `etcd-down` (the DCS frozen), besides `idle-cut`;
- on every backend: `churn` (concurrent `create_game`, `duplicate` and removals of one id),
  and on a state directory `bystander-lock` (an unrelated process holding an `flock` on a
  file or folder of the directory, shared or exclusive, possibly through a child whose
  parent exits, so that the lock's recorded pid is a dead one, then reused).

Errors: `draw` raises `ValueError` for an unknown backend or a run too short to hold a fault;
`from_json` raises `ValueError` for a schedule of another format version.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["BACKENDS", "FORMAT", "Fault", "Schedule", "draw"]

FORMAT = 1
BACKENDS = ("postgres", "cluster", "shared")
#: faults of the database itself: on the cluster at most one at a time
DATABASE_FAULTS = ("crash-postgres", "switchover", "freeze-primary", "freeze-patroni", "etcd-down")
#: files and folders of a shared state directory a bystander may lock
LOCK_TARGETS = ("tokens", "lease", "game-folder", "participants", "store", "telemetry")


@dataclass(frozen=True)
class Fault:
    """One fault: starts `at` seconds into the run, lasts `duration` seconds (0: at once)."""

    at: float
    kind: str
    duration: float = 0.0
    target: int = 0  # a worker's index, a churn id's index, a lock target's index
    detail: str = ""  # a lock's target kind and mode, 'fork' for a lock held by a child

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Schedule:
    """The seed, what the faults were drawn for, and the faults in order of start."""

    seed: int
    backend: str
    seconds: float
    workers: int
    lease: float
    ttl: float
    faults: tuple[Fault, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "seed": self.seed,
            "backend": self.backend,
            "seconds": self.seconds,
            "workers": self.workers,
            "lease": self.lease,
            "ttl": self.ttl,
            "faults": [fault.to_json() for fault in self.faults],
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Schedule:
        if data.get("format") != FORMAT:
            raise ValueError(f"a schedule of format {data.get('format')!r}, not {FORMAT}")
        faults = tuple(Fault(**fault) for fault in data["faults"])
        return cls(
            int(data["seed"]),
            str(data["backend"]),
            float(data["seconds"]),
            int(data["workers"]),
            float(data["lease"]),
            float(data["ttl"]),
            faults,
        )

    def kinds(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for fault in self.faults:
            counts[fault.kind] = counts.get(fault.kind, 0) + 1
        return dict(sorted(counts.items()))


def _times(rng: random.Random, mean_gap: float, start: float, end: float) -> list[float]:
    """Instants in [start, end) with exponential gaps of mean `mean_gap` (a Poisson process)."""
    times, at = [], start + rng.expovariate(1 / mean_gap)
    while at < end:
        times.append(round(at, 3))
        at += rng.expovariate(1 / mean_gap)
    return times


def draw(
    seed: int,
    backend: str,
    seconds: float,
    *,
    workers: int = 4,
    lease: float = 2.0,
    ttl: float = 10.0,
) -> Schedule:
    """The schedule of seed `seed` for a run of `seconds` on `backend` (module docstring).

    Faults start in the first 85 % of the run, so that the rest heals before the end."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r} (one of {', '.join(BACKENDS)})")
    if seconds < 5:
        raise ValueError(f"a run of {seconds:g} s is too short for a fault (at least 5 s)")
    rng = random.Random(f"{backend}:{seed}")  # a str seed hashes the same on every run
    end = seconds * 0.85
    faults: list[Fault] = []
    # each worker: kills and pauses, one at a time, the next one a gap after the last ends
    for worker in range(workers):
        at = 1.0 + rng.uniform(0, lease)
        while True:
            at += rng.expovariate(1 / 8.0)
            if at >= end:
                break
            if rng.random() < 0.45:
                fault = Fault(round(at, 3), "kill-worker", round(rng.uniform(0, 1.5), 3), worker)
            else:
                pause = rng.uniform(0.1, 3 * lease)
                fault = Fault(round(at, 3), "pause-worker", round(pause, 3), worker)
            faults.append(fault)
            at += fault.duration + 0.5
    for at in _times(rng, 9.0, 2.0, end):
        faults.append(Fault(at, "churn", 0.0, rng.randrange(2), str(rng.randrange(3, 7))))
    if backend in ("postgres", "cluster"):
        for at in _times(rng, 7.0, 2.0, end):
            faults.append(Fault(at, "idle-cut"))
    if backend == "postgres":
        for at in _times(rng, 25.0, 4.0, end):
            faults.append(Fault(at, "crash-postgres"))
    if backend == "cluster":
        # one database fault at a time: each starts after the last one's planned end and a
        # pause (the runner also waits for the cluster to be whole again first)
        at, bag = 5.0, []
        while True:
            at += rng.expovariate(1 / 20.0)
            if at >= end:
                break
            if not bag:  # every kind once, in a random order, then again
                bag = rng.sample(DATABASE_FAULTS, len(DATABASE_FAULTS))
            kind = bag.pop()
            if kind in ("freeze-primary", "freeze-patroni"):
                duration = rng.uniform(1.0, 4 * ttl)
            elif kind == "etcd-down":
                duration = rng.uniform(1.0, 2 * ttl)
            else:
                duration = 0.0
            faults.append(Fault(round(at, 3), kind, round(duration, 3)))
            at += duration + 10.0
    if backend == "shared":
        for at in _times(rng, 5.0, 1.0, end):
            # the token counter and the leases most: the files every open locks
            target = rng.choices(LOCK_TARGETS, weights=(3, 4, 1, 1, 1, 1))[0]
            mode = "ex" if rng.random() < 0.3 else "sh"
            fork = "fork" if rng.random() < 0.4 else "own"
            duration = round(rng.uniform(0.2, 2.0 * lease), 3)
            detail = f"{target}:{mode}:{fork}"
            faults.append(Fault(at, "bystander-lock", duration, rng.randrange(1000), detail))
    faults.sort(key=lambda f: (f.at, f.kind, f.target))
    return Schedule(seed, backend, seconds, workers, lease, ttl, tuple(faults))
