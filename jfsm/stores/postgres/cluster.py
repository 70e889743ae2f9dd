"""A throwaway Patroni cluster on loopback: three PostgreSQL nodes with synchronous
replication and automatic failover, for the failover tests and anyone who wants to watch one.

**The one concept: a production-shaped PostgreSQL cluster that a test can start, fail over in
every way a deployment meets, and stop without leaving a process behind.** (Decision R134.)

`TemporaryCluster` starts, in one fresh temporary directory:

- etcd (Debian's `etcd-server`) as Patroni's DCS: `etcd_members` members (default 1), each on
  two free loopback ports;
- `nodes` Patroni processes (the project's Patroni, installed from PyPI into the environment
  that runs this module; decision R180), each with its own data directory, REST API
  and PostgreSQL port on 127.0.0.1, `synchronous_mode: true` (a commit waits for the
  synchronous standby, and only that standby may be promoted), `primary_start_timeout: 0`
  (a crashed primary fails over at once instead of restarting in place), `use_pg_rewind`
  (a killed primary comes back as a standby) and `trust` authentication for the superuser
  `jfsm` on loopback.

The store reaches the primary through the multi-host connection string of `url()` /
`conninfo()`: every node, `target_session_attrs=read-write` (libpq tries the nodes in turn
and keeps the one that accepts writes; decision R131).

`dcs` adds settings to the cluster's dynamic configuration (`failsafe_mode`,
`synchronous_mode_strict`, `ttl`...), `settings` PostgreSQL parameters.

# Which Patroni (decision R180)

Patroni older than 3.0.3 (Debian 12's 3.0.2 among them) may write the leader key
unconditionally when its node resumes after a stall longer than `ttl`, taking the leadership
back from the promoted standby, which is then demoted and rewound: every write acknowledged
meanwhile is lost (patroni/patroni#2689, first released in 3.0.3). `start` refuses such a
Patroni (`RuntimeError`, one line naming the reason) unless `allow_unsafe_patroni=True`,
which only the test that proves the store notices the loss passes. The Patroni run is the
one installed in this interpreter's environment (`python -m patroni`; the `cluster`
dependency group pins it in `uv.lock`), or the executable named by `patroni=` or the
environment variable `JFSM_PATRONI` (for example `/usr/bin/patroni`). As root the
interpreter must be one the `postgres` user may run: this one, or else the system's
`/usr/bin/pythonX.Y` of the same version reading this environment's packages.

# Faults (a stable API: the failover tests and the randomized nemesis use them)

- `kill_postgres(node)`: `kill -9` of the node's postmaster (Patroni sees it within
  `loop_wait` and fails over).
- `kill_node(node)` / `restart_node(node)`: kill the node's Patroni and its postgres (a lost
  host: the leader key runs out after `ttl`); start its Patroni again.
- `switchover(candidate=None)`: a planned switchover through Patroni's REST API.
- `freeze(node)` / `thaw(node)`: SIGSTOP / SIGCONT of every process of the node (a host cut
  off, its sockets still open).
- `freeze_patroni(node)` / `thaw_patroni(node)`: SIGSTOP / SIGCONT of the node's Patroni
  alone (its postgres runs on).
- `freeze_dcs()` / `thaw_dcs()`: SIGSTOP / SIGCONT of every etcd member (the DCS silent, its
  sockets still open).
- `etcd_down(member=0)` / `etcd_up(member=0)`: `kill -9` of one etcd member; start it again
  on its data (with one member, the default, the whole DCS is down meanwhile).

Not a fault: `reinitialize(node)` asks a standby's Patroni to copy the primary afresh (an
operator's repair of a node that cannot rejoin by itself).

Process management: etcd and each Patroni run in a session of their own; Patroni starts
postgres in yet another session, and every postgres child process is a session of its own
(`postgres_family` finds them under their postmaster).
`stop()` kills all of them: the process groups it started (etcd, each Patroni), and every
postgres process it finds by its data directory (the `postmaster.pid` files, every process
whose command line names this cluster's directory, and their children), resuming frozen ones
first, then removes the directory. It is idempotent and runs from `__exit__`, so a failing
test leaves nothing running. As root, Patroni (and so postgres, which refuses root) runs as
the `postgres` user through `runuser`, in a directory handed over to that user, like
`server.py`.

As a command, `python -m jfsm.stores.postgres.cluster COMMAND...` runs COMMAND while a
cluster runs, with `JFSM_PG_URL` set to the multi-host URL of its empty database `jfsm` and
`JFSM_PG_CLUSTER_API` to the nodes' REST API URLs (comma-separated), then stops the cluster
(whatever COMMAND's outcome) and exits with COMMAND's status.

Errors: `why_unavailable()` says why no cluster can start here (callers skip and say so);
`start` raises `RuntimeError` with the end of the logs when the cluster is not ready in time;
the fault methods raise `RuntimeError` when the node has nothing to kill.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from jfsm.stores.postgres.server import USER, find_binaries, free_port, postgres_family, run_as
from jfsm.stores.postgres.server import why_unavailable as server_unavailable

__all__ = [
    "MIN_PATRONI",
    "ClusterNode",
    "PatroniCommand",
    "TemporaryCluster",
    "find_patroni",
    "main",
    "why_unavailable",
]

HOST = "127.0.0.1"
_READY_SECONDS = 240.0
#: the first Patroni release that never overwrites another node's leader key (R180)
MIN_PATRONI = (3, 0, 3)
PATRONI_ENV = "JFSM_PATRONI"


def _binary(name: str) -> str | None:
    return shutil.which(name) or next(
        (p for p in (f"/usr/bin/{name}", f"/usr/sbin/{name}") if os.path.exists(p)), None
    )


@dataclass(frozen=True)
class PatroniCommand:
    """How to start one Patroni (`argv` + its configuration file), and which release it is."""

    argv: tuple[str, ...]
    version: tuple[int, ...]
    env: tuple[tuple[str, str], ...] = ()

    @property
    def release(self) -> str:
        return ".".join(str(part) for part in self.version)

    def unsafe(self) -> str | None:
        """Why this release must not run a cluster under the store, or None."""
        if self.version >= MIN_PATRONI:
            return None
        least = ".".join(str(part) for part in MIN_PATRONI)
        return (
            f"Patroni {self.release} ({' '.join(self.argv)}) is older than {least}: it may "
            "take the leader key back after a stall longer than ttl and lose every write "
            "acknowledged meanwhile (patroni/patroni#2689); use the project's Patroni "
            "(uv sync) or a newer one"
        )


def _parse_version(text: str) -> tuple[int, ...]:
    numbers = []
    for part in text.strip().split()[-1].split("."):
        digits = "".join(ch for ch in part if ch.isdigit()) if part else ""
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers)


_runnable: dict[tuple[str, ...], bool] = {}


def _runs_as_server_user(argv: list[str], env: dict[str, str]) -> bool:
    """Whether `argv` (a Python) imports Patroni when run as the server's user."""
    key = (*argv, *(f"{name}={value}" for name, value in sorted(env.items())))
    if key not in _runnable:
        try:
            done = subprocess.run(
                [*run_as(), *argv, "-c", "import patroni"],
                env={**os.environ, **env},
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=60,
                check=False,
            )
            _runnable[key] = done.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _runnable[key] = False
    return _runnable[key]


def find_patroni(executable: str | None = None) -> PatroniCommand | str:
    """The Patroni to run: the executable `executable` (else `$JFSM_PATRONI`), or the one
    installed in this interpreter's environment. Returns a `PatroniCommand`, or a string
    saying why none can run here (never raises)."""
    executable = executable or os.environ.get(PATRONI_ENV) or None
    if executable is not None:
        found = shutil.which(executable)
        if found is None:
            return f"{PATRONI_ENV} or patroni= names {executable!r}, which is not an executable"
        try:
            shown = subprocess.run(
                [found, "--version"], capture_output=True, text=True, timeout=60, check=False
            ).stdout
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{found} --version failed: {exc}"
        version = _parse_version(shown or "0")
        if not version:
            return f"{found} --version printed no version: {shown.strip()[:80]!r}"
        return PatroniCommand((found,), version)
    try:
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as installed
    except ImportError:  # pragma: no cover - the standard library has it
        return "importlib.metadata is missing"
    try:
        version = _parse_version(installed("patroni"))
    except PackageNotFoundError:
        return (
            "Patroni is not installed in this environment (uv sync: the dev dependency "
            "group `cluster` pins it)"
        )
    import sysconfig

    paths = sysconfig.get_paths()
    site = os.pathsep.join(dict.fromkeys([paths["purelib"], paths["platlib"]]))
    here = [sys.executable, "-m", "patroni"]
    if os.geteuid() != 0 or _runs_as_server_user(here[:1], {}):
        return PatroniCommand(tuple(here), version)
    # as root: the server's user may not reach this interpreter (a home directory of mode
    # 0700); the system's Python of the same version reads this environment's packages
    system = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    if not os.path.exists(system):
        return f"the user postgres cannot run {sys.executable}, and there is no {system}"
    env = {"PYTHONPATH": site, "PYTHONNOUSERSITE": "1"}
    if _runs_as_server_user([system], env):
        return PatroniCommand((system, "-m", "patroni"), version, tuple(env.items()))
    # this environment is out of its reach too (a checkout under a 0700 home): a copy of
    # Patroni and the packages it needs, made once, readable by everyone
    try:
        env["PYTHONPATH"] = str(_readable_copy(version))
    except (OSError, ImportError) as exc:
        return f"cannot copy this environment's Patroni where the user postgres reads it: {exc}"
    if _runs_as_server_user([system], env):
        return PatroniCommand((system, "-m", "patroni"), version, tuple(env.items()))
    return f"the user postgres cannot run this environment's Patroni with {system}"


def _readable_copy(version: tuple[int, ...]) -> Path:
    """A copy of the installed `patroni[etcd3,psycopg3]` and every package it needs, in a
    directory of the system's temporary folder that every user reads (made once per Patroni
    release and environment; about 25 MB)."""
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.requirements import Requirement

    needed: dict[str, set[str]] = {}

    def walk(name: str, extras: frozenset[str]) -> None:
        dist = distribution(name)
        key = str(dist.metadata["Name"]).lower()
        if key in needed and extras <= needed[key]:
            return
        needed.setdefault(key, set()).update(extras)
        for line in dist.requires or []:
            req = Requirement(line)
            wanted = sorted(extras) or [""]
            if req.marker and not any(req.marker.evaluate({"extra": e}) for e in wanted):
                continue
            with contextlib.suppress(PackageNotFoundError):
                walk(req.name, frozenset(req.extras))

    walk("patroni", frozenset({"etcd3", "psycopg3"}))
    import hashlib

    where = hashlib.sha256(sys.prefix.encode()).hexdigest()[:10]
    tag = ".".join(map(str, version)) + f"-{os.getuid()}-{where}"
    target = Path(tempfile.gettempdir()) / f"jfsm-patroni-site-{tag}"
    if target.is_dir():
        return target
    staging = Path(tempfile.mkdtemp(prefix="jfsm-patroni-site-"))
    for name in needed:
        for file in distribution(name).files or []:
            if str(file).startswith(".."):  # scripts outside site-packages
                continue
            source = Path(str(file.locate()))
            if source.is_file():
                (staging / str(file)).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, staging / str(file))
    for root, _dirs, files in os.walk(staging):
        os.chmod(root, 0o755)
        for name in files:
            path = os.path.join(root, name)
            os.chmod(path, os.stat(path).st_mode | 0o444)
    try:
        staging.rename(target)
    except OSError:  # another process made it meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    return target


def why_unavailable() -> str | None:
    """Why no temporary cluster can be started here, or None when one can."""
    reason = server_unavailable()
    if reason is not None:
        return reason
    if _binary("etcd") is None:
        return "etcd not found on PATH nor in /usr/bin (apt-get install -y etcd-server)"
    found = find_patroni()
    return found if isinstance(found, str) else None


@dataclass
class ClusterNode:
    """One Patroni node: its name, ports and directory, and the Patroni process."""

    name: str
    pg_port: int
    api_port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def data(self) -> Path:
        return self.directory / "data"

    @property
    def api(self) -> str:
        return f"http://{HOST}:{self.api_port}"

    def postmaster_pid(self) -> int | None:
        """The running postmaster's pid (from `postmaster.pid`), or None."""
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int((self.data / "postmaster.pid").read_text().splitlines()[0])
            if _alive(pid):
                return pid
        return None


def _alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie is not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _signal_group(pgid: int, sig: int) -> None:
    if pgid <= 1 or pgid == os.getpgrp():
        return  # never our own group, never init's
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _signal(pids: list[int] | set[int], sig: int) -> None:
    for pid in pids:
        if pid > 1 and pid != os.getpid():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)


class TemporaryCluster:
    """A Patroni cluster in a temporary directory; a context manager (`stop` on exit)."""

    def __init__(
        self,
        nodes: int = 3,
        *,
        ttl: int = 10,
        loop_wait: int = 1,
        retry_timeout: int = 4,
        settings: dict[str, str] | None = None,
        dcs: dict[str, Any] | None = None,
        etcd_members: int = 1,
        patroni: str | None = None,
        allow_unsafe_patroni: bool = False,
    ) -> None:
        self.size = nodes
        self.ttl, self.loop_wait, self.retry_timeout = ttl, loop_wait, retry_timeout
        self.settings = dict(settings or {})  # more PostgreSQL parameters
        self.dcs = dict(dcs or {})  # more dynamic configuration (failsafe_mode, ...)
        self.etcd_members = etcd_members
        self.patroni_executable = patroni
        self.allow_unsafe_patroni = allow_unsafe_patroni
        self.patroni: PatroniCommand | None = None  # the Patroni `start` chose
        self.directory: Path | None = None
        self.nodes: list[ClusterNode] = []
        self._etcd: list[subprocess.Popen[bytes] | None] = []
        self._etcd_ports: list[tuple[int, int]] = []  # (client, peer) of each member
        self._frozen: dict[str, list[int]] = {}
        self._scope = f"jfsm-{os.getpid()}-{int(time.monotonic() * 1000) % 100000}"

    # -- life cycle ----------------------------------------------------------------------
    def start(self) -> TemporaryCluster:
        """Start etcd and the nodes; return once there is a primary that accepts writes and a
        streaming synchronous standby. Raises `RuntimeError` (with the logs' ends)."""
        reason = server_unavailable()
        if reason is None and _binary("etcd") is None:
            reason = "etcd not found on PATH nor in /usr/bin (apt-get install -y etcd-server)"
        if reason is not None:
            raise RuntimeError(reason)
        found = find_patroni(self.patroni_executable)
        if isinstance(found, str):
            raise RuntimeError(found)
        unsafe = found.unsafe()
        if unsafe is not None and not self.allow_unsafe_patroni:
            raise RuntimeError(unsafe)
        self.patroni = found
        self.directory = Path(tempfile.mkdtemp(prefix="jfsm-patroni-"))
        try:
            self._start_etcd()
            for n in range(self.size):
                name = f"node{n + 1}"
                node = ClusterNode(name, free_port(), free_port(), self.directory / name)
                node.directory.mkdir()
                self.nodes.append(node)
                self._write_config(node)
            self._hand_over(self.directory)
            for node in self.nodes:
                self._start_patroni(node)
            self.wait_ready(_READY_SECONDS)
        except BaseException:
            logs = self.logs()
            self.stop()
            raise RuntimeError(f"the Patroni cluster did not start:\n{logs}") from None
        return self

    def stop(self) -> None:
        """Kill every process of the cluster (see the module docstring) and remove its
        directory. Idempotent."""
        if self.directory is None:
            return
        groups: set[int] = set()
        for process in [node.process for node in self.nodes] + self._etcd:
            if process is not None:
                groups.add(process.pid)  # start_new_session: its pid is its group
        pids = self._processes_naming_directory()
        for node in self.nodes:
            pid = node.postmaster_pid()
            if pid is not None:
                pids.add(pid)
        for pid in list(pids):  # every postgres child is a session of its own
            pids.update(postgres_family(pid))
        for pgid in groups:
            _signal_group(pgid, signal.SIGCONT)
            _signal_group(pgid, signal.SIGKILL)
        _signal(pids, signal.SIGCONT)
        _signal(pids, signal.SIGKILL)
        for process in [node.process for node in self.nodes] + self._etcd:
            if process is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self._processes_naming_directory():
            time.sleep(0.05)
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory = None
        self.nodes = []
        self._etcd = []

    def __enter__(self) -> TemporaryCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- connecting ----------------------------------------------------------------------
    def conninfo(self, dbname: str = "postgres", **extra: str) -> str:
        """A libpq keyword string naming every node, `target_session_attrs=read-write`."""
        hosts = ",".join(HOST for _ in self.nodes)
        ports = ",".join(str(node.pg_port) for node in self.nodes)
        more = "".join(f" {key}={value}" for key, value in extra.items())
        return (
            f"host={hosts} port={ports} user={USER} dbname={dbname}"
            f" target_session_attrs=read-write{more}"
        )

    def url(self, dbname: str = "postgres", **extra: str) -> str:
        """The same as a `postgresql://` URL."""
        hosts = ",".join(f"{HOST}:{node.pg_port}" for node in self.nodes)
        more = "".join(f"&{key}={value}" for key, value in extra.items())
        return f"postgresql://{USER}@{hosts}/{dbname}?target_session_attrs=read-write{more}"

    def node_conninfo(self, node: str | ClusterNode, dbname: str = "postgres") -> str:
        """A keyword string reaching one node only (whatever its role)."""
        found = self.node(node)
        return f"host={HOST} port={found.pg_port} user={USER} dbname={dbname} connect_timeout=3"

    def create_database(self, name: str) -> str:
        """Create database `name` on the primary and return its multi-host conninfo."""
        import psycopg

        with psycopg.connect(self.conninfo(), autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.conninfo(name)

    # -- looking -------------------------------------------------------------------------
    def node(self, name: str | ClusterNode) -> ClusterNode:
        if isinstance(name, ClusterNode):
            return name
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def members(self) -> list[dict[str, Any]]:
        """Patroni's view of the cluster (`GET /cluster` of the first node that answers):
        each member's `name`, `role` (`leader`, `sync_standby`, `replica`), `state`, ...;
        [] when no node answers."""
        for node in self.nodes:
            with (
                contextlib.suppress(OSError, ValueError),
                urllib.request.urlopen(f"{node.api}/cluster", timeout=2) as reply,
            ):
                members = json.load(reply).get("members", [])
                return list(members) if isinstance(members, list) else []
        return []

    def primary(self) -> str | None:
        """The name of the running leader, as Patroni reports it, or None."""
        for member in self.members():
            leads = member.get("role") in ("leader", "master", "primary")
            if leads and member.get("state") == "running":
                return str(member["name"])
        return None

    def writable(self, node: str | ClusterNode) -> bool:
        """Whether the node's postgres answers and accepts writes now."""
        import psycopg

        try:
            with psycopg.connect(self.node_conninfo(node), autocommit=True) as conn:
                row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
                return row is not None and not row[0]
        except psycopg.Error:
            return False

    def wait_ready(self, timeout: float = 120.0) -> str:
        """Wait until a leader accepts writes and every other node streams from it, one of
        them synchronously; return the leader's name. Raises `TimeoutError`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            members = self.members()
            leader = [m for m in members if m.get("role") in ("leader", "master", "primary")]
            sync = [m for m in members if m.get("role") == "sync_standby"]
            streaming = [
                m
                for m in members
                if m.get("role") in ("replica", "sync_standby")
                and m.get("state") in ("streaming", "running")
            ]
            if (
                len(members) == self.size
                and len(leader) == 1
                and leader[0].get("state") == "running"
                and sync
                and len(streaming) == self.size - 1
                and self.writable(str(leader[0]["name"]))
            ):
                return str(leader[0]["name"])
            time.sleep(0.2)
        raise TimeoutError(f"the cluster is not ready after {timeout:g} s: {self.members()}")

    def wait_primary(self, timeout: float = 60.0, *, other_than: str | None = None) -> str:
        """Wait until a node (not `other_than`) leads and accepts writes; return its name.
        Raises `TimeoutError`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            leader = self.primary()
            if leader is not None and leader != other_than and self.writable(leader):
                return leader
            time.sleep(0.1)
        raise TimeoutError(f"no new primary after {timeout:g} s: {self.members()}")

    def logs(self, tail: int = 1500) -> str:
        """The end of every log of the cluster (etcd, Patroni, postgres)."""
        if self.directory is None:
            return ""
        parts = []
        for path in sorted(self.directory.rglob("*.log")):
            with contextlib.suppress(OSError):
                parts.append(f"--- {path.name} ---\n{path.read_text(errors='replace')[-tail:]}")
        return "\n".join(parts)

    # -- faults --------------------------------------------------------------------------
    def kill_postgres(self, node: str | ClusterNode) -> int:
        """`kill -9` of the node's postmaster; returns its pid. Raises `RuntimeError` when
        the node has no running postgres."""
        found = self.node(node)
        pid = found.postmaster_pid()
        if pid is None:
            raise RuntimeError(f"{found.name} has no running postgres")
        os.kill(pid, signal.SIGKILL)
        return pid

    def kill_node(self, node: str | ClusterNode) -> None:
        """Kill the node's Patroni and its postgres (every process of the host)."""
        found = self.node(node)
        pid = found.postmaster_pid()
        if found.process is not None:
            _signal_group(found.process.pid, signal.SIGKILL)
            found.process.wait(timeout=10)
            found.process = None
        if pid is not None:
            _signal(postgres_family(pid), signal.SIGKILL)

    def restart_node(self, node: str | ClusterNode) -> None:
        """Start a killed node's Patroni again (it rejoins as a standby)."""
        found = self.node(node)
        if found.process is not None and found.process.poll() is None:
            raise RuntimeError(f"{found.name}'s Patroni is still running")
        self._start_patroni(found)

    def freeze(self, node: str | ClusterNode) -> None:
        """SIGSTOP every process of the node: Patroni, the postmaster and every postgres
        process under it (a host cut off: its sockets stay open, nothing answers)."""
        found = self.node(node)
        if found.process is not None:
            _signal_group(found.process.pid, signal.SIGSTOP)  # runuser and Patroni
        pid = found.postmaster_pid()
        family = [] if pid is None else postgres_family(pid)
        _signal(family, signal.SIGSTOP)
        self._frozen[found.name] = family

    def thaw(self, node: str | ClusterNode) -> None:
        """SIGCONT what `freeze` stopped."""
        found = self.node(node)
        _signal(self._frozen.pop(found.name, []), signal.SIGCONT)
        if found.process is not None:
            _signal_group(found.process.pid, signal.SIGCONT)

    def freeze_patroni(self, node: str | ClusterNode) -> None:
        """SIGSTOP the node's Patroni alone (its postgres runs on and still takes writes).
        Raises `RuntimeError` when the node's Patroni is not running."""
        found = self.node(node)
        if found.process is None or found.process.poll() is not None:
            raise RuntimeError(f"{found.name}'s Patroni is not running")
        _signal_group(found.process.pid, signal.SIGSTOP)

    def thaw_patroni(self, node: str | ClusterNode) -> None:
        """SIGCONT what `freeze_patroni` stopped."""
        found = self.node(node)
        if found.process is not None:
            _signal_group(found.process.pid, signal.SIGCONT)

    def freeze_dcs(self) -> None:
        """SIGSTOP every etcd member (the DCS silent: every Patroni loses its view);
        `thaw_dcs` resumes them. Raises `RuntimeError` when no member is running."""
        running = [p for p in self._etcd if p is not None and p.poll() is None]
        if not running:
            raise RuntimeError("the cluster has no running etcd")
        for process in running:
            _signal_group(process.pid, signal.SIGSTOP)

    def thaw_dcs(self) -> None:
        """SIGCONT what `freeze_dcs` stopped."""
        for process in self._etcd:
            if process is not None:
                _signal_group(process.pid, signal.SIGCONT)

    def etcd_down(self, member: int = 0) -> None:
        """`kill -9` of etcd member `member` (with one member: the whole DCS). Raises
        `RuntimeError` when it is not running."""
        process = self._etcd[member] if member < len(self._etcd) else None
        if process is None or process.poll() is not None:
            raise RuntimeError(f"etcd member {member} is not running")
        _signal_group(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        self._etcd[member] = None

    def etcd_up(self, member: int = 0) -> None:
        """Start etcd member `member` again on its data; returns once it answers. Raises
        `RuntimeError` when it is running or does not come back within 30 s."""
        process = self._etcd[member] if member < len(self._etcd) else None
        if process is not None and process.poll() is None:
            raise RuntimeError(f"etcd member {member} is still running")
        self._etcd[member] = self._launch_etcd(member, existing=True)
        self._wait_etcd(member)

    def reinitialize(self, node: str | ClusterNode) -> None:
        """Ask the node's Patroni to reinitialize it from the primary (`POST /reinitialize`,
        forced). Raises `RuntimeError` when Patroni refuses (the node leads, for one)."""
        found = self.node(node)
        request = urllib.request.Request(
            f"{found.api}/reinitialize",
            data=json.dumps({"force": True}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                reply.read()
        except (urllib.error.HTTPError, OSError) as exc:
            raise RuntimeError(f"reinitialize of {found.name} refused: {exc}") from None

    def switchover(self, candidate: str | None = None, timeout: float = 60.0) -> str:
        """A planned switchover through the leader's REST API; returns the new primary's
        name once it accepts writes. Raises `RuntimeError` when Patroni refuses."""
        leader = self.primary()
        if leader is None:
            raise RuntimeError(f"no leader to switch over from: {self.members()}")
        body: dict[str, str] = {"leader": leader}
        if candidate is not None:
            body["candidate"] = candidate
        request = urllib.request.Request(
            f"{self.node(leader).api}/switchover",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as reply:
                reply.read()
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"switchover refused: {exc.code} {exc.read()!r}") from None
        return self.wait_primary(timeout, other_than=leader)

    # -- internals -----------------------------------------------------------------------
    def _processes_naming_directory(self) -> set[int]:
        """The live processes whose command line names our directory (a postmaster, a
        Patroni, etcd, a pg_rewind...: never one of ours)."""
        assert self.directory is not None
        needle = str(self.directory).encode()
        pids: set[int] = set()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            with contextlib.suppress(OSError), open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if needle in cmdline.read() and _alive(int(entry)):
                    pids.add(int(entry))
        pids.discard(os.getpid())
        return pids

    def _hand_over(self, path: Path) -> None:
        if os.geteuid() != 0:
            return
        entry = pwd.getpwnam("postgres")
        for root, dirs, files in os.walk(path):
            for name in [root, *(os.path.join(root, d) for d in dirs)]:
                os.chown(name, entry.pw_uid, entry.pw_gid)
            for name in files:
                os.chown(os.path.join(root, name), entry.pw_uid, entry.pw_gid)

    def _start_etcd(self) -> None:
        self._etcd_ports = [(free_port(), free_port()) for _ in range(self.etcd_members)]
        self._etcd = [self._launch_etcd(n) for n in range(self.etcd_members)]
        for n in range(self.etcd_members):
            self._wait_etcd(n)

    def _launch_etcd(self, member: int, *, existing: bool = False) -> subprocess.Popen[bytes]:
        assert self.directory is not None
        client, peer = self._etcd_ports[member]
        everyone = ",".join(
            f"dcs{n}=http://{HOST}:{peers}" for n, (_, peers) in enumerate(self._etcd_ports)
        )
        log = open(self.directory / f"etcd{member}.log", "ab")  # noqa: SIM115 - the child keeps it
        with log:
            return subprocess.Popen(
                [
                    str(_binary("etcd")),
                    f"--name=dcs{member}",
                    f"--data-dir={self.directory / f'etcd{member}'}",
                    f"--listen-client-urls=http://{HOST}:{client}",
                    f"--advertise-client-urls=http://{HOST}:{client}",
                    f"--listen-peer-urls=http://{HOST}:{peer}",
                    f"--initial-advertise-peer-urls=http://{HOST}:{peer}",
                    f"--initial-cluster={everyone}",
                    f"--initial-cluster-state={'existing' if existing else 'new'}",
                    f"--initial-cluster-token={self._scope}",
                    "--unsafe-no-fsync",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _wait_etcd(self, member: int) -> None:
        process = self._etcd[member]
        assert process is not None
        client = self._etcd_ports[member][0]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError, ValueError),
                urllib.request.urlopen(f"http://{HOST}:{client}/health", timeout=1),
            ):
                return
            if process.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError(f"etcd member {member} did not start")

    def _write_config(self, node: ClusterNode) -> None:
        bin_dir = find_binaries()
        parameters = {
            "unix_socket_directories": str(node.directory),
            "fsync": "off",
            "shared_buffers": "32MB",
            "max_connections": "200",
            "wal_level": "replica",
            "hot_standby": "on",
            "wal_log_hints": "on",
            "max_wal_senders": "10",
            "max_replication_slots": "10",
            "wal_keep_size": "64MB",
            "logging_collector": "off",
            **self.settings,
        }
        config = {
            "scope": self._scope,
            "name": node.name,
            "log": {"level": "INFO", "dir": str(node.directory), "file_num": 1},
            "restapi": {
                "listen": f"{HOST}:{node.api_port}",
                "connect_address": f"{HOST}:{node.api_port}",
            },
            "etcd3": {"hosts": [f"{HOST}:{client}" for client, _ in self._etcd_ports]},
            "bootstrap": {
                "dcs": {
                    "ttl": self.ttl,
                    "loop_wait": self.loop_wait,
                    "retry_timeout": self.retry_timeout,
                    "maximum_lag_on_failover": 1 << 20,
                    "synchronous_mode": True,
                    "primary_start_timeout": 0,
                    **self.dcs,
                    "postgresql": {
                        "use_pg_rewind": True,
                        "use_slots": True,
                        "parameters": {"max_connections": 200, "max_wal_senders": 10},
                    },
                },
                "initdb": [{"encoding": "UTF8"}, {"locale": "C"}, "no-sync"],
            },
            "postgresql": {
                "listen": f"{HOST}:{node.pg_port}",
                "connect_address": f"{HOST}:{node.pg_port}",
                "data_dir": str(node.data),
                "bin_dir": str(bin_dir),
                "pgpass": str(node.directory / "pgpass"),
                "authentication": {
                    "superuser": {"username": USER, "password": "jfsm"},
                    "replication": {"username": "replicator", "password": "replicator"},
                    "rewind": {"username": USER, "password": "jfsm"},
                },
                "pg_hba": [
                    "local all all trust",
                    f"host all all {HOST}/32 trust",
                    f"host replication replicator {HOST}/32 trust",
                ],
                "parameters": parameters,
            },
            "tags": {"nofailover": False, "noloadbalance": False},
        }
        # JSON is YAML: Patroni reads it as is
        (node.directory / "patroni.yml").write_text(json.dumps(config, indent=1))

    def _start_patroni(self, node: ClusterNode) -> None:
        assert self.patroni is not None
        log = open(node.directory / "patroni-stdout.log", "ab")  # noqa: SIM115
        with log:
            node.process = subprocess.Popen(
                [*run_as(), *self.patroni.argv, str(node.directory / "patroni.yml")],
                env={**os.environ, **dict(self.patroni.env)},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # `stop` kills the group: runuser and Patroni
                cwd=node.directory,
            )


def build_parser() -> argparse.ArgumentParser:
    """`python -m jfsm.stores.postgres.cluster [-h] COMMAND [ARG...]`."""
    parser = argparse.ArgumentParser(
        prog="python -m jfsm.stores.postgres.cluster",
        description="Run COMMAND while a throwaway 3-node Patroni cluster runs on loopback, "
        "with JFSM_PG_URL set to the multi-host URL of its empty database jfsm and "
        "JFSM_PG_CLUSTER_API to the nodes' REST API URLs; stop the cluster afterwards and "
        "exit with COMMAND's status.",
    )
    parser.add_argument(
        "command", metavar="COMMAND ...", nargs=argparse.REMAINDER, help="the program to run"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run a command while a temporary cluster runs (see the module docstring). `-h`
    prints the usage and exits 0; no COMMAND prints it and exits 2 (argparse); a cluster
    that cannot start prints one line and exits 2."""
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not args.command:
        parser.error("COMMAND is missing")
    try:
        cluster = TemporaryCluster().start()
    except RuntimeError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "unknown reason"
        print(f"jfsm cluster: {first}", file=sys.stderr)
        return 2
    with cluster:
        cluster.create_database("jfsm")
        env = {
            **os.environ,
            "JFSM_PG_URL": cluster.url("jfsm"),
            "JFSM_PG_CLUSTER_API": ",".join(node.api for node in cluster.nodes),
        }
        return subprocess.run(args.command, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
