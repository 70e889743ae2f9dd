"""One nemesis run, start to end: the system, its workers and clients, the nemesis playing
its schedule, the healing, the final read, the checker, the report; and nothing left running.

`run(options)` does, in order:

1. draws the schedule from the seed (or reads the schedule file given) and writes it to
   `OUT/schedule.json` before anything starts;
2. starts the system (`nemesis.systems`), a fake compress.v2, `workers` - 1 `jfsm driver`
   workers and one embedded engine, and creates the ledger games;
3. runs the clients and the nemesis for `seconds`, then heals every fault, lets the clients
   run on for a quiet stretch (every worker serving), and stops them and the workers;
4. waits for the bystanders' planned ends, reads every game through a fresh driver, and
   checks the history (`nemesis.checker`);
5. writes `OUT/history.jsonl` and `OUT/report.json` (counts, findings, the replay command)
   and returns the report.

Every process it starts carries the run's marker in its environment (`JFSM_NEMESIS_RUN`),
and runs in a process group of its own; whatever happens (a pass, a failure, an exception,
Ctrl-C, SIGTERM under `__main__`), the `finally` path stops the workers, the bystanders, the
fake and the system, then ends any process still carrying the marker and counts it in the
report as `leaked` (0 when every part ended its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .bystanders import Bystanders, ours
from .checker import check
from .clients import Clients
from .faults import Nemesis
from .history import History, message, outcome
from .schedule import Schedule, draw
from .systems import System, make_system
from .workers import Worker

__all__ = ["MARKER", "Options", "replay_command", "run", "sweep"]

MARKER = "JFSM_NEMESIS_RUN"
TESTS = Path(__file__).resolve().parents[1]  # the folder that holds the `nemesis` package
_HUGE = 10**9


@dataclass
class Options:
    """What a run is: the backend, the seed, the length, the sizes, where it writes."""

    backend: str
    seed: int
    seconds: float = 60.0
    workers: int = 4  # the last one is an embedded engine
    clients: int = 2
    games: int = 6
    churn_ids: int = 2
    lease: float = 2.0
    ttl: int = 10
    quiet: float = 6.0  # seconds of clients after healing, every worker serving
    out: Path = Path(tempfile.gettempdir()) / "jfsm-nemesis"
    schedule: Path | None = None


def replay_command(options: Options, schedule_path: Path) -> str:
    """The one command that replays this run's faults exactly (its schedule file)."""
    return (
        f"uv run python -m tests.nemesis --backend {options.backend} --seed {options.seed}"
        f" --seconds {options.seconds:g} --schedule {schedule_path}"
    )


def sweep(marker: str, grace: float = 10.0) -> list[str]:
    """Kill every process whose environment carries `marker` and that is still there after
    `grace` seconds (a server's children end a moment after it); returns their command
    lines."""
    deadline = time.monotonic() + grace
    while True:
        found = [line for line in descendants_env(marker) if int(line.split(":")[0]) != os.getpid()]
        if not found or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    for pid in (int(line.split(":")[0]) for line in found):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
    return found


def run(options: Options) -> dict[str, Any]:
    """One run (module docstring); returns its report (also in `OUT/report.json`)."""
    if options.schedule is not None:
        schedule = Schedule.from_json(json.loads(options.schedule.read_text()))
    else:
        schedule = draw(
            options.seed,
            options.backend,
            options.seconds,
            workers=options.workers,
            lease=options.lease,
            ttl=options.ttl,
        )
    out = options.out / f"{options.backend}-{options.seed}"
    out.mkdir(parents=True, exist_ok=True)
    schedule_path = out / "schedule.json"
    if options.schedule is None or options.schedule.resolve() != schedule_path.resolve():
        schedule_path.write_text(schedule.dumps())
    previous = os.environ.get(MARKER)  # a caller's marker stays a prefix of the run's
    run_id = f"{options.backend}-{options.seed}-{os.getpid()}-{secrets.token_hex(4)}"
    marker = f"{previous}/{run_id}" if previous else run_id
    os.environ[MARKER] = marker  # every process started from here on carries it
    sizes = {"ttl": options.ttl} if options.backend == "cluster" else {}
    system = make_system(options.backend, out, **sizes)
    report: dict[str, Any] = {}
    leaked: list[str] = []
    try:
        system.start()
        report = asyncio.run(_run(options, schedule, system, out, marker))
    finally:
        with contextlib.suppress(Exception):
            system.stop()
        leaked = sweep(marker)
        if previous is None:
            os.environ.pop(MARKER, None)
        else:
            os.environ[MARKER] = previous
    report["leaked"] = len(leaked)
    report["leaked_processes"] = leaked
    report["replay"] = replay_command(options, schedule_path)
    (out / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True))
    return report


async def _run(
    options: Options, schedule: Schedule, system: System, out: Path, marker: str
) -> dict[str, Any]:
    from jfsm_conformance.fake.compress import FakeCompress

    history = History()
    env = {
        **os.environ,
        MARKER: marker,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])),
        "JFSM_PG_LEASE_SECONDS": f"{options.lease:g}",
        "JFSM_LEASE_SECONDS": f"{options.lease:g}",
    }
    bystanders = Bystanders(out, env, marker)
    games = [f"g{n}" for n in range(options.games)]
    churn_ids = [f"c{n}" for n in range(options.churn_ids)]
    workers: list[Worker] = []
    nemesis: Nemesis | None = None
    clients: Clients | None = None
    fake = FakeCompress().start()
    timeout = 90.0 if options.backend == "cluster" else 30.0
    try:
        hello = {
            "protocol": 1,
            "compressUrl": fake.url,
            "leaseSeconds": options.lease,
            "thresholds": {"game": _HUGE, "catalyst": _HUGE},
        }
        for n in range(options.workers):
            name, owner = f"w{n}", f"nemesis-w{n}"
            embedded = n == options.workers - 1
            argv = system.embedded_argv(owner) if embedded else system.driver_argv(owner)
            workers.append(Worker(name, argv, env, out / f"{name}.log", hello))
        remove = None
        if system.url is not None:
            from jfsm.stores.postgres import remove_game

            url = system.url

            async def remove(game: str) -> bool:
                return await asyncio.to_thread(remove_game, url, game)

        clients = Clients(
            history,
            workers,
            games,
            schedule.seed,
            clients=options.clients,
            timeout=timeout,
            remove=remove,
        )
        nemesis = Nemesis(schedule, system, workers, clients, bystanders, history, churn_ids)
        for worker in workers:
            worker._died = nemesis.died
            reply = await worker.start()
            if reply is None or not reply.get("ok"):
                raise RuntimeError(f"{worker.name} did not start: {reply}; see {worker.log}")
        for game in games:  # before any fault: each must succeed at once
            await _create(history, workers[0], game, timeout)
        history.started = time.monotonic()  # the schedule's clock starts now
        clients.start()
        print(f"nemesis: {options.backend} seed {schedule.seed}: faults started", flush=True)
        await nemesis.play()
        rest = schedule.seconds - (time.monotonic() - history.started)
        if rest > 0:
            await asyncio.sleep(rest)
        healing = time.monotonic()
        print(f"nemesis: {options.backend}: faults over, healing", flush=True)
        await nemesis.heal()
        history.add("nemesis", "info", "healed", took=round(time.monotonic() - healing, 2))
        await asyncio.sleep(options.quiet)
        await clients.stop()
        for worker in workers:
            await worker.stop()
        print(f"nemesis: {options.backend}: reading every game", flush=True)
        harmed = await asyncio.to_thread(bystanders.check)
        final, leftovers = await _final_read(system, env, out, hello, games + churn_ids, timeout)
        recorded = await asyncio.to_thread(system.recorded_footprints) if system.url else None
        verdict = await asyncio.to_thread(
            check,
            history,
            final,
            games=games,
            churn_ids=churn_ids,
            recorded=recorded,
            leftovers=leftovers,
            harmed=harmed,
        )
        history.dump(out / "history.jsonl")
        return {
            "backend": options.backend,
            "seed": schedule.seed,
            "seconds": schedule.seconds,
            "schedule": str(out / "schedule.json"),
            "history": str(out / "history.jsonl"),
            "options": {k: str(v) for k, v in asdict(options).items()},
            "bystanders": len(bystanders.all),
            "pids_reused": sum(1 for b in bystanders.all if b.wanted_pid is not None),
            **verdict.to_json(),
        }
    finally:
        if nemesis is not None:
            await nemesis.stop()
        if clients is not None:
            await clients.stop()
        for worker in workers:
            await worker.stop()
        bystanders.stop()
        fake.close()
        if not (out / "history.jsonl").exists():
            history.dump(out / "history.jsonl")


async def _create(history: History, worker: Worker, game: str, timeout: float) -> None:
    """Create a ledger game, recorded as the `setup` process's; tried again after an error
    (the checker reports each one: nothing faulted yet). Raises `RuntimeError` after 10."""
    for attempt in range(10):
        invoked = history.invoke("setup", "create_game", worker=worker.name, game=game)
        reply = await worker.call("create_game", timeout, game=game)
        kind, code = outcome(reply)
        if kind == "ok":
            history.complete(invoked, "ok")
            return
        history.complete(invoked, kind, code=code, message=message(reply))
        if code == "invalid_input" and attempt > 0:
            return  # an earlier attempt made it after all
        await asyncio.sleep(0.5)
    raise RuntimeError(f"could not create {game} in 10 tries; see {worker.log}")


async def _final_read(
    system: System,
    env: dict[str, str],
    out: Path,
    hello: dict[str, Any],
    games: list[str],
    timeout: float,
) -> tuple[dict[str, dict[str, Any] | None], list[str]]:
    """Every game as a fresh driver sees it (`open_game` with takeover, `dump`; None: no
    such game), and the `.new-` folders left after that driver's `hello`."""
    reader = Worker("reader", system.driver_argv("nemesis-reader"), env, out / "reader.log", hello)
    final: dict[str, dict[str, Any] | None] = {}
    try:
        reply = await reader.start()
        if reply is None or not reply.get("ok"):
            raise RuntimeError(f"the final reader did not start: {reply}")
        leftovers = await asyncio.to_thread(system.leftovers)
        for game in games:
            for _ in range(30):
                opened = await reader.call("open_game", timeout, game=game, takeover=True)
                if opened is not None and opened.get("ok"):
                    dumped = await reader.call("dump", timeout, game=game)
                    if dumped is not None and dumped.get("ok"):
                        final[game] = dumped["result"]
                        break
                elif opened is not None and opened["error"].get("code") == "invalid_input":
                    final[game] = None  # no such game
                    break
                await asyncio.sleep(1.0)
            else:
                raise RuntimeError(f"the final reader could not read {game}")
    finally:
        await reader.stop()
    return final, leftovers


def descendants_env(marker: str) -> list[str]:
    """The command lines of live processes carrying `marker` (for the tests)."""
    lines = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and ours(int(entry), marker):
            with contextlib.suppress(OSError):
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
                lines.append(f"{entry}: {cmd.decode(errors='replace')[:200]}")
    return lines
