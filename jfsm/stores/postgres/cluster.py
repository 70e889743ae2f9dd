"""A throwaway Patroni cluster on loopback: three PostgreSQL nodes with synchronous
replication and automatic failover, for the failover tests and anyone who wants to watch one.

**The one concept: a production-shaped PostgreSQL cluster that a test can start, fail over in
every way a deployment meets, and stop without leaving a process behind.** (Decision R134.)

`TemporaryCluster` starts, in one fresh temporary directory:

- one etcd (Debian's `etcd-server`) as Patroni's DCS, on two free loopback ports;
- `nodes` Patroni processes (Debian's `patroni`), each with its own data directory, REST API
  and PostgreSQL port on 127.0.0.1, `synchronous_mode: true` (a commit waits for the
  synchronous standby, and only that standby may be promoted), `primary_start_timeout: 0`
  (a crashed primary fails over at once instead of restarting in place), `use_pg_rewind`
  (a killed primary comes back as a standby) and `trust` authentication for the superuser
  `jfsm` on loopback.

The store reaches the primary through the multi-host connection string of `url()` /
`conninfo()`: every node, `target_session_attrs=read-write` (libpq tries the nodes in turn
and keeps the one that accepts writes; decision R131).

Faults: `kill_postgres(node)` is `kill -9` of a node's postmaster (Patroni sees it within
`loop_wait` and fails over), `kill_node(node)` kills its Patroni and its postgres (a lost
host: the leader key runs out after `ttl`), `restart_node(node)` starts its Patroni again,
`switchover()` asks Patroni for a planned switchover, `freeze(node)` / `thaw(node)` stop and
resume every process of a node (SIGSTOP: a host cut off, its sockets still open),
`freeze_patroni(node)` its Patroni alone (`thaw` resumes it), `freeze_dcs()` / `thaw_dcs()`
etcd.

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

__all__ = ["ClusterNode", "TemporaryCluster", "main", "why_unavailable"]

HOST = "127.0.0.1"
_READY_SECONDS = 240.0


def _binary(name: str) -> str | None:
    return shutil.which(name) or next(
        (p for p in (f"/usr/bin/{name}", f"/usr/sbin/{name}") if os.path.exists(p)), None
    )


def why_unavailable() -> str | None:
    """Why no temporary cluster can be started here, or None when one can."""
    reason = server_unavailable()
    if reason is not None:
        return reason
    for name, package in (("patroni", "patroni"), ("etcd", "etcd-server")):
        if _binary(name) is None:
            return f"{name} not found on PATH nor in /usr/bin (apt-get install -y {package})"
    return None


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
    ) -> None:
        self.size = nodes
        self.ttl, self.loop_wait, self.retry_timeout = ttl, loop_wait, retry_timeout
        self.settings = dict(settings or {})  # more PostgreSQL parameters
        self.directory: Path | None = None
        self.nodes: list[ClusterNode] = []
        self._etcd: subprocess.Popen[bytes] | None = None
        self._etcd_port = 0
        self._frozen: dict[str, list[int]] = {}
        self._scope = f"jfsm-{os.getpid()}-{int(time.monotonic() * 1000) % 100000}"

    # -- life cycle ----------------------------------------------------------------------
    def start(self) -> TemporaryCluster:
        """Start etcd and the nodes; return once there is a primary that accepts writes and a
        streaming synchronous standby. Raises `RuntimeError` (with the logs' ends)."""
        reason = why_unavailable()
        if reason is not None:
            raise RuntimeError(reason)
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
        for process in [node.process for node in self.nodes] + [self._etcd]:
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
        for process in [node.process for node in self.nodes] + [self._etcd]:
            if process is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self._processes_naming_directory():
            time.sleep(0.05)
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory = None
        self.nodes = []
        self._etcd = None

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
        """SIGSTOP the node's Patroni alone (its postgres runs on, unwatched); `thaw` resumes
        it."""
        found = self.node(node)
        if found.process is None:
            raise RuntimeError(f"{found.name} has no running Patroni")
        _signal_group(found.process.pid, signal.SIGSTOP)

    def freeze_dcs(self) -> None:
        """SIGSTOP etcd (the DCS down: every Patroni loses its view); `thaw_dcs` resumes it."""
        if self._etcd is None:
            raise RuntimeError("the cluster has no running etcd")
        _signal_group(self._etcd.pid, signal.SIGSTOP)

    def thaw_dcs(self) -> None:
        """SIGCONT what `freeze_dcs` stopped."""
        if self._etcd is not None:
            _signal_group(self._etcd.pid, signal.SIGCONT)

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
        assert self.directory is not None
        self._etcd_port, peer = free_port(), free_port()
        data = self.directory / "etcd"
        log = open(self.directory / "etcd.log", "wb")  # noqa: SIM115 - the child keeps it
        with log:
            self._etcd = subprocess.Popen(
                [
                    str(_binary("etcd")),
                    "--name=dcs",
                    f"--data-dir={data}",
                    f"--listen-client-urls=http://{HOST}:{self._etcd_port}",
                    f"--advertise-client-urls=http://{HOST}:{self._etcd_port}",
                    f"--listen-peer-urls=http://{HOST}:{peer}",
                    f"--initial-advertise-peer-urls=http://{HOST}:{peer}",
                    f"--initial-cluster=dcs=http://{HOST}:{peer}",
                    "--unsafe-no-fsync",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError, ValueError),
                urllib.request.urlopen(f"http://{HOST}:{self._etcd_port}/health", timeout=1),
            ):
                return
            if self._etcd.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError("etcd did not start")

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
            "etcd3": {"hosts": [f"{HOST}:{self._etcd_port}"]},
            "bootstrap": {
                "dcs": {
                    "ttl": self.ttl,
                    "loop_wait": self.loop_wait,
                    "retry_timeout": self.retry_timeout,
                    "maximum_lag_on_failover": 1 << 20,
                    "synchronous_mode": True,
                    "primary_start_timeout": 0,
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
        log = open(node.directory / "patroni-stdout.log", "ab")  # noqa: SIM115
        with log:
            node.process = subprocess.Popen(
                [*run_as(), str(_binary("patroni")), str(node.directory / "patroni.yml")],
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
