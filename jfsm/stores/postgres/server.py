"""A throwaway PostgreSQL server from the machine's own binaries, for tests and benchmarks.

`TemporaryServer` runs `initdb` into a fresh temporary directory and starts the server on a
Unix socket in that directory only (no TCP port), with `trust` authentication for the
superuser `jfsm`. `stop` shuts it down and removes the directory; `restart("immediate")`
is a server crash (`pg_ctl restart -m immediate`: no shutdown checkpoint, WAL replay on
start).

The binaries are found on `PATH` (`initdb`, `pg_ctl`) or in the newest
`/usr/lib/postgresql/*/bin` (Debian's layout). `initdb` refuses to run as root: as root the
server runs as the system user `postgres` (created by Debian's `postgresql` package) through
`runuser`, in a directory handed over to that user; the root client connects through the
socket all the same.

`TemporaryBouncer(server)` starts a real PgBouncer (`/usr/sbin/pgbouncer`) in transaction
pooling mode in front of it, on a free loopback port.

As a command, `python -m jfsm.stores.postgres.server [--pgbouncer] COMMAND...` runs COMMAND while
a temporary server runs, with `JFSM_PG_URL` set to the URL of its empty database `jfsm`
(with `--pgbouncer`: the URL through a temporary PgBouncer, the direct one in
`JFSM_PG_DIRECT_URL`), then stops them (whatever COMMAND's outcome) and exits with
COMMAND's status (CI uses this).

Errors: `find_binaries` returns None when the binaries are missing (callers skip and say
so); `start` raises `RuntimeError` with the server's log when initdb or the server fail.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

__all__ = [
    "TemporaryBouncer",
    "TemporaryServer",
    "bouncer_unavailable",
    "find_binaries",
    "free_port",
    "main",
    "postgres_family",
    "run_as",
    "why_unavailable",
]

USER = "jfsm"
PORT = 5432


def find_binaries() -> Path | None:
    """The directory holding `initdb` and `pg_ctl`, or None."""
    candidates = []
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        candidates.append(Path(found).resolve().parent)
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
    )
    candidates += [Path(p) for p in reversed(versions)]
    for directory in candidates:
        if (directory / "initdb").is_file() and (directory / "pg_ctl").is_file():
            return directory
    return None


def run_as() -> list[str]:
    """The command prefix that runs the server as a non-root user ([] when not root)."""
    if os.geteuid() != 0:
        return []
    return ["runuser", "-u", "postgres", "--"]


def why_unavailable() -> str | None:
    """Why no temporary server can be started here, or None when one can."""
    if find_binaries() is None:
        return "PostgreSQL binaries (initdb, pg_ctl) not found on PATH or in /usr/lib/postgresql"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no `postgres` user to run the server as"
        if shutil.which("runuser") is None:
            return "running as root and `runuser` is missing"
    return None


class TemporaryServer:
    """A PostgreSQL server in a temporary directory; a context manager (`stop` on exit)."""

    def __init__(
        self,
        *,
        fsync: bool = False,
        max_connections: int = 300,
        settings: dict[str, str] | None = None,
    ) -> None:
        self.fsync = fsync
        self.max_connections = max_connections
        self.settings = dict(settings or {})  # more `-c name=value` server settings
        self.directory: Path | None = None
        self._bin: Path | None = None

    # -- life cycle ----------------------------------------------------------------------
    def start(self) -> TemporaryServer:
        """initdb and start; raises `RuntimeError` (with the log) if either fails."""
        reason = why_unavailable()
        if reason is not None:
            raise RuntimeError(reason)
        self._bin = find_binaries()
        self.directory = Path(tempfile.mkdtemp(prefix="jfsm-pg-"))
        if os.geteuid() == 0:
            entry = pwd.getpwnam("postgres")
            os.chown(self.directory, entry.pw_uid, entry.pw_gid)
        self._pg(
            "initdb",
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            USER,
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )
        options = (
            f"-k {self.directory} -c listen_addresses='' -p {PORT}"
            f" -c fsync={'on' if self.fsync else 'off'} -c max_connections={self.max_connections}"
            " -c shared_buffers=64MB"
        ) + "".join(f" -c {name}={value}" for name, value in self.settings.items())
        try:
            self._pg_ctl("start", "-o", options, "-l", str(self.log))
        except RuntimeError:
            self.stop()
            raise
        return self

    def postmaster_pid(self) -> int:
        """The running postmaster's pid (`postmaster.pid`); `OSError` when not running."""
        return int((self.data / "postmaster.pid").read_text().splitlines()[0])

    def restart(self, mode: str = "immediate") -> None:
        """`pg_ctl restart -m MODE` (immediate: a crash of the server, WAL replayed)."""
        self._pg_ctl("restart", "-m", mode, "-l", str(self.log))

    def stop(self) -> None:
        """Stop the server (immediately) and remove its directory. Idempotent."""
        if self.directory is None:
            return
        with contextlib.suppress(RuntimeError):
            if (self.data / "postmaster.pid").exists():
                self._pg_ctl("stop", "-m", "immediate")
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory = None

    def __enter__(self) -> TemporaryServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- connecting ----------------------------------------------------------------------
    @property
    def data(self) -> Path:
        assert self.directory is not None, "the server is not started"
        return self.directory / "data"

    @property
    def log(self) -> Path:
        assert self.directory is not None, "the server is not started"
        return self.directory / "server.log"

    def conninfo(self, dbname: str = "postgres") -> str:
        """A libpq key=value connection string for database `dbname`."""
        assert self.directory is not None, "the server is not started"
        return f"host={self.directory} port={PORT} user={USER} dbname={dbname}"

    def url(self, dbname: str = "postgres") -> str:
        """The same as a `postgresql://` URL (socket directory in the `host` parameter)."""
        assert self.directory is not None, "the server is not started"
        return (
            f"postgresql://{USER}@/{dbname}?host={quote(str(self.directory), safe='')}&port={PORT}"
        )

    def create_database(self, name: str) -> str:
        """Create database `name` and return its conninfo."""
        import psycopg

        with psycopg.connect(self.conninfo(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.conninfo(name)

    # -- internals -----------------------------------------------------------------------
    def _pg(self, tool: str, *args: str) -> None:
        assert self._bin is not None
        command = [*run_as(), str(self._bin / tool), *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            log = ""
            if self.directory is not None and self.log.exists():
                log = self.log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{tool} {' '.join(args)} failed: {done.stderr}{done.stdout}{log}")

    def _pg_ctl(self, action: str, *args: str) -> None:
        self._pg("pg_ctl", "-D", str(self.data), "-w", "-s", "-t", "60", action, *args)


PGBOUNCER = "/usr/sbin/pgbouncer"


def bouncer_unavailable() -> str | None:
    """Why no temporary PgBouncer can be started here, or None when one can."""
    if not (shutil.which("pgbouncer") or os.path.exists(PGBOUNCER)):
        return "pgbouncer not found on PATH nor at /usr/sbin/pgbouncer"
    return why_unavailable()


def postgres_family(postmaster: int) -> list[int]:
    """The postmaster `postmaster` and its live children (every postgres process of its
    server: each child is a session of its own, so its process group is not enough)."""
    family = [postmaster]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == postmaster and fields[0] != "Z":
                    family.append(int(entry))
    return family


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TemporaryBouncer:
    """A real PgBouncer in transaction pooling mode on a free loopback port, in front of a
    running `TemporaryServer` (every database name is passed through; `auth_type = any`).
    A context manager; `stop` kills it and removes its directory. `start` raises
    `RuntimeError` with its log when it does not accept connections within 20 s."""

    def __init__(
        self,
        server: TemporaryServer,
        *,
        pool_size: int = 20,
        settings: dict[str, str] | None = None,
    ) -> None:
        self.server = server
        self.pool_size = pool_size
        self.settings = dict(settings or {})  # more `name = value` lines of [pgbouncer]
        self.port = 0
        self.directory: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> TemporaryBouncer:
        reason = bouncer_unavailable()
        if reason is not None:
            raise RuntimeError(reason)
        assert self.server.directory is not None, "start the server first"
        self.directory = Path(tempfile.mkdtemp(prefix="jfsm-bouncer-"))
        self.port = free_port()
        ini = self.directory / "pgbouncer.ini"
        ini.write_text(
            "[databases]\n"
            f"* = host={self.server.directory} port={PORT} user={USER}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            "auth_type = any\npool_mode = transaction\n"
            f"default_pool_size = {self.pool_size}\nmax_client_conn = 5000\n"
            f"logfile = {self.directory / 'pgbouncer.log'}\n"
            "server_reset_query =\nignore_startup_parameters = extra_float_digits,options\n"
            + "".join(f"{name} = {value}\n" for name, value in self.settings.items())
        )
        if os.geteuid() == 0:
            entry = pwd.getpwnam("postgres")
            for path in (self.directory, ini):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        binary = shutil.which("pgbouncer") or PGBOUNCER
        self._process = subprocess.Popen(
            [*run_as(), binary, str(ini)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # `stop` kills the group: runuser and the bouncer under it
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=1),
            ):
                return self
            if self._process.poll() is not None:
                break
            time.sleep(0.05)
        log = self.directory / "pgbouncer.log"
        text = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        self.stop()
        raise RuntimeError(f"pgbouncer did not start: {text}")

    def conninfo(self, dbname: str = "postgres") -> str:
        """A keyword string reaching database `dbname` through the bouncer."""
        return f"host=127.0.0.1 port={self.port} user={USER} dbname={dbname}"

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{dbname}"

    def stop(self) -> None:
        """Kill the bouncer (its whole process group: killing `runuser` alone left the
        bouncer running) and remove its directory. Idempotent."""
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()
            self._process = None
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def __enter__(self) -> TemporaryBouncer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def build_parser() -> argparse.ArgumentParser:
    """`python -m jfsm.stores.postgres.server [-h] [--pgbouncer] COMMAND [ARG...]`."""
    parser = argparse.ArgumentParser(
        prog="python -m jfsm.stores.postgres.server",
        description="Run COMMAND while a throwaway PostgreSQL server runs, with JFSM_PG_URL "
        "set to its empty database jfsm; stop the server afterwards and exit with COMMAND's "
        "status.",
    )
    parser.add_argument(
        "--pgbouncer",
        action="store_true",
        help="also start a PgBouncer in transaction pooling mode in front of the server, "
        "and point JFSM_PG_URL at it",
    )
    parser.add_argument(
        "command", metavar="COMMAND ...", nargs=argparse.REMAINDER, help="the program to run"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run a command while a temporary server runs (see the module docstring). `-h`
    prints the usage and exits 0; no COMMAND prints it and exits 2 (argparse)."""
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    command, bouncer = args.command, args.pgbouncer
    if not command:
        parser.error("COMMAND is missing")
    with TemporaryServer() as server:
        server.create_database("jfsm")
        env = {**os.environ, "JFSM_PG_URL": server.url("jfsm")}
        if not bouncer:
            return subprocess.run(command, env=env, check=False).returncode
        with TemporaryBouncer(server) as front:
            env["JFSM_PG_URL"] = front.url("jfsm")
            env["JFSM_PG_DIRECT_URL"] = server.url("jfsm")
            return subprocess.run(command, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
