"""The nemesis itself: it plays a schedule's faults against the system at their times, each
for its duration, several at once, and records each as a pair of history events (process
`nemesis`: `invoke` when it starts, `ok` when it ended and what it hit, `info` when it could
not be applied).

- `kill-worker`: `kill -9` of the worker's process group, a pid reuser started with its pid,
  the worker started again (same owner id) after the fault's duration;
- `pause-worker`: SIGSTOP of the worker's group, SIGCONT after the duration;
- `idle-cut`, `crash-postgres`, `switchover`: the system's methods (`nemesis.systems`);
- `freeze-primary`, `freeze-patroni`, `etcd-down`: the cluster helper's `freeze` / `thaw`,
  `freeze_patroni`, `freeze_dcs` / `thaw_dcs`, for the duration;
- `churn`: the clients' concurrent creations, copies and removals of one id;
- `bystander-lock`: a lock holder on a file or folder of the state directory (a pid reuser
  takes its parent's pid when a child holds the lock).

On the cluster one database fault runs at a time, after the cluster is whole again. A
serving worker that dies while the nemesis did not kill it is recorded (`worker-signalled`
or `worker-exited`, process `observer`) and started again. `heal` ends every fault early
(SIGCONT, thaw, restart), so that the run ends with every worker serving and the store
whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from typing import Any

from .bystanders import Bystanders, lock_target
from .clients import Clients
from .history import History
from .schedule import DATABASE_FAULTS, Fault, Schedule
from .systems import System
from .workers import Worker

__all__ = ["Nemesis"]


class Nemesis:
    """Plays `schedule` (module docstring)."""

    def __init__(
        self,
        schedule: Schedule,
        system: System,
        workers: list[Worker],
        clients: Clients,
        bystanders: Bystanders,
        history: History,
        churn_ids: list[str],
    ) -> None:
        self.schedule, self.system, self.workers = schedule, system, workers
        self.clients, self.bystanders, self.history = clients, bystanders, history
        self.churn_ids = churn_ids
        self.database = asyncio.Lock()  # one database fault at a time
        self.frozen: set[str] = set()
        self.dcs_frozen = False
        self.healing = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._restarts: dict[str, asyncio.Task[None]] = {}

    # -- playing -------------------------------------------------------------------------
    async def play(self) -> None:
        """Start each fault at its time; return once the last one has started."""
        loop = asyncio.get_running_loop()
        for index, fault in enumerate(self.schedule.faults):
            delay = fault.at - (time.monotonic() - self.history.started)
            if delay > 0:
                await asyncio.sleep(delay)
            task = loop.create_task(self._run(index, fault))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, index: int, fault: Fault) -> None:
        value: dict[str, Any] = {"index": index, "duration": fault.duration}
        if fault.kind in ("kill-worker", "pause-worker"):
            value["worker"] = self.workers[fault.target % len(self.workers)].name
        if fault.kind in DATABASE_FAULTS and self.system.backend == "cluster":
            async with self.database:
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(self.system.whole, 180)
                await self._apply(index, fault, value)
        else:
            await self._apply(index, fault, value)

    async def _apply(self, index: int, fault: Fault, value: dict[str, Any]) -> None:
        invoked = self.history.invoke("nemesis", fault.kind, **value)
        try:
            result = await self._fault(index, fault, value)
        except Exception as exc:
            self.history.complete(invoked, "info", error=f"{type(exc).__name__}: {exc}"[:300])
            return
        self.history.complete(invoked, "ok", **result)

    async def _fault(self, index: int, fault: Fault, value: dict[str, Any]) -> dict[str, Any]:
        kind, cluster = fault.kind, getattr(self.system, "cluster", None)
        if kind == "kill-worker":
            return await self._kill(self._worker(value), fault.duration)
        if kind == "pause-worker":
            worker = self._worker(value)
            await worker.ready.wait()
            worker.pause()
            await self._hold(fault.duration)
            worker.resume()
            return {"pid": worker.pid}
        if kind == "idle-cut":
            return {"cut": await asyncio.to_thread(self.system.idle_cut)}
        if kind == "crash-postgres":
            node, struck = await asyncio.to_thread(self.system.crash_postgres)
            return {"node": node, "struck": self._at(struck)}
        if kind == "switchover":
            node, struck = await asyncio.to_thread(self.system.switchover)  # type: ignore[attr-defined]
            return {"from": node, "struck": self._at(struck)}
        if kind in ("freeze-primary", "freeze-patroni"):
            assert cluster is not None
            primary = await asyncio.to_thread(cluster.wait_primary, 120)
            freeze = cluster.freeze if kind == "freeze-primary" else cluster.freeze_patroni
            await asyncio.to_thread(freeze, primary)
            struck = self._at(time.monotonic())
            self.frozen.add(primary)
            await self._hold(fault.duration)
            if primary in self.frozen:
                self.frozen.discard(primary)
                await asyncio.to_thread(cluster.thaw, primary)
            return {"node": primary, "struck": struck}
        if kind == "etcd-down":
            assert cluster is not None
            await asyncio.to_thread(cluster.freeze_dcs)
            struck = self._at(time.monotonic())
            self.dcs_frozen = True
            await self._hold(fault.duration)
            if self.dcs_frozen:
                self.dcs_frozen = False
                await asyncio.to_thread(cluster.thaw_dcs)
            return {"struck": struck}
        if kind == "churn":
            game = self.churn_ids[fault.target % len(self.churn_ids)]
            rng = random.Random(f"{self.schedule.seed}:churn:{index}")
            await self.clients.churn(game, int(fault.detail or 3), rng)
            return {"id": game}
        if kind == "bystander-lock":
            return await self._lock(fault)
        raise ValueError(f"unknown fault {kind!r}")

    def _at(self, instant: float) -> float:
        """A `time.monotonic()` instant as the history's time."""
        return round(instant - self.history.started, 4)

    async def _hold(self, seconds: float) -> None:
        """Sleep `seconds`, or less once `heal` began."""
        deadline = time.monotonic() + seconds
        while not self.healing and time.monotonic() < deadline:
            await asyncio.sleep(min(0.1, max(0.0, deadline - time.monotonic())))

    def _worker(self, value: dict[str, Any]) -> Worker:
        return next(w for w in self.workers if w.name == value["worker"])

    async def _kill(self, worker: Worker, down: float) -> dict[str, Any]:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(worker.ready.wait(), 30)
        pending = self._restarts.get(worker.name)
        if pending is not None:
            await pending
        pid = await worker.kill()
        result: dict[str, Any] = {"pid": pid}
        if pid is not None:
            reuser = await asyncio.to_thread(self.bystanders.reuse_pid, pid)
            result["pid_reused"] = reuser is not None
        await self._hold(down)
        reply = await self._start(worker)
        result["restarted"] = bool(reply and reply.get("ok"))
        return result

    async def _start(self, worker: Worker, within: float = 240.0) -> dict[str, Any] | None:
        """Start the worker, again and again while its start fails (a driver on a database it
        cannot reach exits), for at most `within` seconds."""
        reply: dict[str, Any] | None = None
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            reply = await worker.start()
            if reply is not None and reply.get("ok"):
                return reply
            await worker.kill()
            await asyncio.sleep(0.5)
        return reply

    def died(self, worker: Worker, code: int | None) -> None:
        """A worker ended without the nemesis: record it and start it again."""
        kind = "worker-signalled" if code is not None and code < 0 else "worker-exited"
        self.history.add("observer", "info", kind, worker=worker.name, returncode=code)

        async def restart() -> None:
            await asyncio.sleep(0.2)
            await self._start(worker)

        task = asyncio.get_running_loop().create_task(restart())
        self._restarts[worker.name] = task
        task.add_done_callback(lambda _: self._restarts.pop(worker.name, None))

    async def _lock(self, fault: Fault) -> dict[str, Any]:
        assert self.system.state is not None
        target, mode, fork = fault.detail.split(":")
        path = lock_target(self.system.state, target, fault.target)
        if path is None:
            return {"target": None}
        holder = self.bystanders.hold_lock(path, mode, fault.duration, fork == "fork")
        result: dict[str, Any] = {"target": str(path.relative_to(self.system.state))}
        if fork == "fork":  # the parent exits at once: its pid, in the lock's record, is taken
            deadline = time.monotonic() + 2 * fault.duration + 2
            while holder.process.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            if holder.process.poll() == 0 and len(holder.lines()) and "child" in holder.lines()[0]:
                reuser = await asyncio.to_thread(self.bystanders.reuse_pid, holder.process.pid)
                result["pid_reused"] = reuser is not None
        return result

    # -- healing -------------------------------------------------------------------------
    async def heal(self, timeout: float = 240.0) -> None:
        """End every fault (module docstring) and wait (at most `timeout` seconds) until the
        store is whole again: a cluster that is not is recorded (`not-whole`)."""
        self.healing = True
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout)
        cluster = getattr(self.system, "cluster", None)
        if cluster is not None:
            for node in list(self.frozen):
                await asyncio.to_thread(cluster.thaw, node)
            self.frozen.clear()
            if self.dcs_frozen:
                await asyncio.to_thread(cluster.thaw_dcs)
                self.dcs_frozen = False
        for worker in self.workers:
            if worker.paused:
                worker.resume()
        for task in list(self._restarts.values()):
            await task
        for worker in self.workers:
            if not worker.alive:
                await self._start(worker)
        try:
            await asyncio.to_thread(self.system.whole, timeout)
        except TimeoutError as exc:  # recorded; the final read says whether it serves
            self.history.add("nemesis", "info", "not-whole", error=str(exc)[:2000])

    async def stop(self) -> None:
        """Cancel whatever fault still runs (an exit path other than the end of the run)."""
        self.healing = True
        for task in [*self._tasks, *self._restarts.values()]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._restarts.values(), return_exceptions=True)
