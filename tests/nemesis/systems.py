"""The system under test, one a backend: where the games live, how its workers are started,
what faults it takes, and how its final state is read once everything healed.

- `postgres`: a plain server (`jfsm.stores.postgres.server.TemporaryServer`), workers
  `jfsm driver --store URL`;
- `cluster`: the 3-node Patroni cluster (`jfsm.stores.postgres.cluster.TemporaryCluster`)
  reached through its multi-host URL;
- `shared`: a state directory that every worker shares (`jfsm driver --state DIR --shared`).

Each has one embedded worker besides its drivers (`nemesis.embedded`). The final state is
read through a fresh `jfsm driver` on the same store (`open_game` with `takeover`, then
`dump`), so the checker sees what any client would, whatever the store's internals; on
PostgreSQL also each game's recorded footprint (`jfsm_game.footprint`, the documented
schema). Every process a system starts runs in a process group of its own and is ended by
`stop` (the server's and cluster's own `stop` for theirs), which is idempotent.

Errors: `start` raises `RuntimeError` when the backend cannot start here (the reason
first); the fault methods raise `RuntimeError` when the system has nothing to fault.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from jfsm.stores.postgres.server import TemporaryServer, postgres_family

__all__ = ["System", "make_system"]

DRIVER_MODULE = "jfsm.cli"


def jfsm_driver(*args: str) -> list[str]:
    import sys

    code = "import sys; from jfsm.cli import main; sys.exit(main())"
    return [sys.executable, "-c", code, "driver", *args]


class System:
    """What every backend offers (module docstring); subclasses fill it in."""

    backend = ""
    faults: tuple[str, ...] = ()

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.url: str | None = None
        self.state: Path | None = None

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def driver_argv(self, owner: str) -> list[str]:
        if self.url is not None:
            return jfsm_driver("--store", self.url, "--owner", owner)
        assert self.state is not None
        return jfsm_driver("--state", str(self.state), "--shared", "--owner", owner)

    def embedded_argv(self, owner: str) -> list[str]:
        import sys

        where = ["--store", self.url] if self.url is not None else ["--state", str(self.state)]
        return [sys.executable, "-m", "nemesis.embedded", *where, "--owner", owner]

    # -- faults (blocking: the runner calls them in a thread) ------------------------------
    def idle_cut(self) -> int:
        """End every idle session of the store's database on its primary; returns how many."""
        import psycopg

        assert self.url is not None
        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            row = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = current_database() AND state = 'idle'"
                " AND pid <> pg_backend_pid()"
            ).fetchone()
        return 0 if row is None else int(row[0])

    def crash_postgres(self) -> tuple[str, float]:
        """`kill -9` of the primary's postgres: (the node, the instant of the kill)."""
        raise RuntimeError(f"no PostgreSQL to crash on {self.backend}")

    def whole(self, timeout: float) -> None:
        """Return once the store serves again (a primary that accepts writes)."""

    def recorded_footprints(self) -> dict[str, int]:
        """Each game's footprint as the database recorded it (PostgreSQL only)."""
        if self.url is None:
            return {}
        import psycopg

        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            rows = conn.execute("SELECT game_id, footprint FROM jfsm_game").fetchall()
        return {str(row[0]): int(row[1]) for row in rows}

    def leftovers(self) -> list[str]:
        """Unfinished creations left in a state directory (`.new-...` folders)."""
        if self.state is None:
            return []
        return sorted(p.name for p in self.state.iterdir() if p.name.startswith(".new-"))


class PostgresSystem(System):
    backend = "postgres"
    faults = ("idle-cut", "crash-postgres")

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.server = TemporaryServer(max_connections=300)

    def start(self) -> None:
        from jfsm.stores.postgres import migrate

        self.server.start()
        conninfo = self.server.create_database("nemesis")
        self.url = conninfo
        migrate(conninfo)

    def stop(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # a crash's leftovers first
            _kill_family(self.server.postmaster_pid())
        self.server.stop()

    def crash_postgres(self) -> tuple[str, float]:
        """`kill -9` of the server's every process, then a start (WAL replay)."""
        pid = self.server.postmaster_pid()
        _kill_family(pid)
        struck = time.monotonic()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
            time.sleep(0.05)
        self.server.restart("immediate")
        return "server", struck


class ClusterSystem(System):
    backend = "cluster"
    faults = (
        "idle-cut",
        "crash-postgres",
        "switchover",
        "freeze-primary",
        "freeze-patroni",
        "etcd-down",
    )

    def __init__(self, workdir: Path, ttl: int = 10) -> None:
        from jfsm.stores.postgres.cluster import TemporaryCluster

        super().__init__(workdir)
        self.cluster = TemporaryCluster(ttl=ttl)

    def start(self) -> None:
        from jfsm.stores.postgres import migrate

        self.cluster.start()
        self.cluster.create_database("nemesis")
        self.url = self.cluster.url("nemesis", connect_timeout="2")
        migrate(self.url)

    def stop(self) -> None:
        self.cluster.stop()

    def primary(self) -> str:
        return self.cluster.wait_primary(120)

    def crash_postgres(self) -> tuple[str, float]:
        primary = self.primary()
        self.cluster.kill_postgres(primary)
        return primary, time.monotonic()

    def switchover(self) -> tuple[str, float]:
        """A planned switchover: (the old primary, the instant it was asked for)."""
        primary = self.primary()
        struck = time.monotonic()
        self.cluster.switchover()
        return primary, struck

    def whole(self, timeout: float) -> None:
        self.cluster.wait_ready(timeout)


class SharedSystem(System):
    backend = "shared"
    faults = ("bystander-lock",)

    def start(self) -> None:
        self.state = Path(tempfile.mkdtemp(prefix="state-", dir=self.workdir))
        os.chmod(self.state, 0o700)

    def stop(self) -> None:
        if self.state is not None:
            shutil.rmtree(self.state, ignore_errors=True)


def _kill_family(postmaster: int) -> None:
    for pid in [postmaster, *postgres_family(postmaster)]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def make_system(backend: str, workdir: Path, **options: Any) -> System:
    """The system of `backend` (`postgres`, `cluster`, `shared`), not started."""
    if backend == "postgres":
        return PostgresSystem(workdir)
    if backend == "cluster":
        return ClusterSystem(workdir, **options)
    if backend == "shared":
        return SharedSystem(workdir)
    raise ValueError(f"unknown backend {backend!r}")
