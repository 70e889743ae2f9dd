"""A throwaway PostgreSQL server from the machine's own binaries, for tests and benchmarks.

`TemporaryServer` runs `initdb` into a fresh temporary directory and starts the server on a
Unix socket in that directory only (no TCP port), with `trust` authentication for the
superuser `jfsm`. `stop` shuts it down and removes the directory; `restart("immediate")`
is a server crash (`pg_ctl restart -m immediate`: no shutdown checkpoint, WAL replay on
start).

# A server dies with the process that started it (decision R214)

`pg_ctl` makes the server a daemon, so it would outlive a `jfsm pg-server` (or a test) killed
with SIGKILL, with its folder. So `start` also starts a *watchdog*: a small shell in a
session of its own that reads a pipe whose only writer is the starting process. `stop` tells
it "done" first; when it reads the end of the pipe instead (the process died, however), it
stops the server this process started (`pg_ctl stop -m immediate` on its folder) and removes
the folder. Each folder also holds `owner.json`, naming the starting process (pid, start
time, boot). `leftovers()` finds the folders of the temporary directory whose starting
process is gone: `jfsm pg-server` removes those whose server no longer runs and names, in one
line each, those whose server still runs (a watchdog that was killed too), with the command
that stops it: it signals no process it did not start.

The binaries are found on `PATH` (`initdb`, `pg_ctl`) or in the newest
`/usr/lib/postgresql/*/bin` (Debian's layout). `initdb` refuses to run as root: as root the
server runs as the system user `postgres` (created by Debian's `postgresql` package) through
`runuser`, in a directory handed over to that user; the root client connects through the
socket all the same.

`TemporaryBouncer(server)` starts a real PgBouncer (`/usr/sbin/pgbouncer`) in transaction
pooling mode in front of it, on a free loopback port.

As a command, `jfsm pg-server` or `python -m jfsm.stores.postgres.server [--pgbouncer]
[COMMAND...]`: without COMMAND it prints `JFSM_PG_URL=URL` (the URL of its empty database
`jfsm`) and serves until Ctrl-C or SIGTERM (exit 0), for trying the PostgreSQL store
locally; with COMMAND it runs COMMAND with `JFSM_PG_URL` set (with `--pgbouncer`: the URL
through a temporary PgBouncer, the direct one in `JFSM_PG_DIRECT_URL`), then stops them
(whatever COMMAND's outcome) and exits with COMMAND's status (CI uses this). Either way the
server's data is deleted when it stops. Its errors are one line and exit 2 (decision R160).

**The one concept:** a PostgreSQL server (and a PgBouncer) this process starts for a while
and owns: started, watched, stopped, its folder removed.

Errors: `find_binaries` returns None when the binaries are missing (callers skip and say
so); `start` raises `RuntimeError` with the server's log when initdb or the server fail.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from urllib.parse import quote

from jfsm.usage import UsageParser, usage_error

__all__ = [
    "Leftover",
    "TemporaryBouncer",
    "TemporaryServer",
    "bouncer_unavailable",
    "find_binaries",
    "free_port",
    "leftovers",
    "main",
    "postgres_family",
    "run_as",
    "why_unavailable",
]

USER = "jfsm"
PORT = 5432
PREFIX = "jfsm-pg-"  # the temporary folders' names
OWNER_FILE = "owner.json"  # who started the server of a folder (pid, start time, boot)

# The watchdog (see the module docstring): $1 the folder, the rest the `pg_ctl` command.
_WATCHDOG = """
if IFS= read -r word && [ "$word" = done ]; then exit 0; fi
folder=$1; shift
"$@" -D "$folder/data" -s -m immediate stop >/dev/null 2>&1
rm -rf "$folder"
"""


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
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._alive: int | None = None  # the pipe's write end the watchdog waits on
        self._options = ""

    # -- life cycle ----------------------------------------------------------------------
    def start(self) -> TemporaryServer:
        """initdb and start; raises `RuntimeError` (with the log) if either fails."""
        reason = why_unavailable()
        if reason is not None:
            raise RuntimeError(reason)
        self._bin = find_binaries()
        self.directory = Path(tempfile.mkdtemp(prefix=PREFIX))
        (self.directory / OWNER_FILE).write_text(json.dumps(_process_identity(os.getpid())))
        self._watch()
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
        self._options = options
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

    @contextlib.contextmanager
    def stopped(self, mode: str = "fast") -> Iterator[Path]:
        """Stop the server (`pg_ctl stop -m MODE`) for the block, which gets its data
        directory (a test may copy it, or put an earlier copy in its place: a restore), then
        start it again as it was started. Raises `RuntimeError` when either fails."""
        self._pg_ctl("stop", "-m", mode)
        try:
            yield self.data
        finally:
            self._pg_ctl("start", "-o", self._options, "-l", str(self.log))

    def stop(self) -> None:
        """Stop the server (immediately) and remove its directory. Idempotent."""
        if self.directory is None:
            return
        with contextlib.suppress(RuntimeError):
            if (self.data / "postmaster.pid").exists():
                self._pg_ctl("stop", "-m", "immediate")
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory = None
        self._stand_down()

    def _watch(self) -> None:
        """Start the watchdog that stops this server if this process dies (module docstring)."""
        assert self.directory is not None and self._bin is not None
        read_end, self._alive = os.pipe()  # both not inheritable: only the watchdog reads
        try:
            self._watchdog = subprocess.Popen(
                [
                    *("sh", "-c", _WATCHDOG, "jfsm-pg-watchdog", str(self.directory)),
                    *run_as(),
                    str(self._bin / "pg_ctl"),
                ],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C or a killpg of ours does not reach it
            )
        finally:
            os.close(read_end)

    def _stand_down(self) -> None:
        """Tell the watchdog the server is stopped, and wait for it to end."""
        alive, self._alive = self._alive, None
        if alive is not None:
            with contextlib.suppress(OSError):
                os.write(alive, b"done\n")
            os.close(alive)
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None:
            try:
                watchdog.wait(timeout=30)
            except subprocess.TimeoutExpired:  # ours: started by `_watch`
                watchdog.kill()
                watchdog.wait()

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


def _process_identity(pid: int) -> dict[str, object]:
    """What names process `pid` across pid reuse: its pid, its start time (clock ticks since
    boot, `/proc/PID/stat`) and the boot id; start time and boot are None where there is no
    `/proc`."""
    start: int | None = None
    with (
        contextlib.suppress(OSError, IndexError, ValueError),
        open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat,
    ):
        start = int(stat.read().rsplit(")", 1)[1].split()[19])
    boot: str | None = None
    with contextlib.suppress(OSError):
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return {"pid": pid, "start": start, "boot": boot}


@dataclass(frozen=True)
class Leftover:
    """A temporary server's folder whose starting process is gone: `running` is the pid of
    its postmaster when that still runs (its watchdog was killed too), else None."""

    folder: Path
    owner_pid: int
    running: int | None


def leftovers(tempdir: str | None = None) -> list[Leftover]:
    """The folders `TemporaryServer` made in `tempdir` (default: the temporary directory)
    whose starting process is gone (its `owner.json` names a pid that is no longer that
    process). A folder without a readable `owner.json`, or whose file another user wrote, is
    not provably ours and is never listed."""
    found: list[Leftover] = []
    root = Path(tempdir or tempfile.gettempdir())
    for folder in sorted(root.glob(PREFIX + "*")):
        marker = folder / OWNER_FILE
        try:
            if marker.lstat().st_uid != os.geteuid() or marker.is_symlink():
                continue
            owner = json.loads(marker.read_text())
            pid = int(owner["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if _process_identity(pid) == owner and owner.get("start") is not None:
            continue  # its starting process still runs
        if owner.get("start") is None and _pid_alive(pid):
            continue  # no /proc: a live pid is given the benefit of the doubt
        found.append(Leftover(folder, pid, _postmaster(folder / "data")))
    return found


def _pid_alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists() or _signal_zero(pid)


def _signal_zero(pid: int) -> bool:
    """Whether `pid` exists (signal 0 sends nothing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _postmaster(data: Path) -> int | None:
    """The pid of the postmaster running on `data`, or None (no `postmaster.pid`, or its pid
    is not a live postgres process)."""
    try:
        pid = int((data / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return pid if _signal_zero(pid) else None
    return pid if comm in ("postgres", "postmaster") else None


def clear_leftovers(name: str, tempdir: str | None = None) -> None:
    """Remove the leftover folders whose server no longer runs, and say so; name, in one line
    each, those whose server still runs, with the command that stops it (never signalled
    from here: this process did not start it)."""
    removed = 0
    for leftover in leftovers(tempdir):
        if leftover.running is None:
            shutil.rmtree(leftover.folder, ignore_errors=True)
            removed += 1
            continue
        binaries = find_binaries()
        pg_ctl = str(binaries / "pg_ctl") if binaries else "pg_ctl"
        stop = " ".join(shlex.quote(a) for a in [*run_as(), pg_ctl, "-D"])
        print(
            f"{name}: a server left by a killed jfsm pg-server (pid {leftover.owner_pid}) "
            f"still runs (postmaster {leftover.running}, data in {leftover.folder}); stop it "
            f"with: {stop} {shlex.quote(str(leftover.folder / 'data'))} -m immediate stop "
            f"&& rm -rf {shlex.quote(str(leftover.folder))}",
            file=sys.stderr,
        )
    if removed:
        print(
            f"{name}: removed {removed} folder{'s' if removed > 1 else ''} of throwaway "
            "servers whose jfsm pg-server was killed (their servers had stopped)",
            file=sys.stderr,
        )


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


def build_parser(prog: str = "python -m jfsm.stores.postgres.server") -> argparse.ArgumentParser:
    """`[-h] [--pgbouncer] [COMMAND [ARG...]]` (also `jfsm pg-server`)."""
    parser = UsageParser(
        prog=prog,
        description="A throwaway PostgreSQL server from this machine's binaries, with an "
        "empty database jfsm. Without COMMAND: print its URL (JFSM_PG_URL=...) and serve "
        "until Ctrl-C. With COMMAND: run it with JFSM_PG_URL set to that URL, then exit "
        "with COMMAND's status. Either way the server is stopped and its data deleted.",
    )
    parser.add_argument(
        "--pgbouncer",
        action="store_true",
        help="also start a PgBouncer in transaction pooling mode in front of the server, "
        "and point JFSM_PG_URL at it (the direct URL is JFSM_PG_DIRECT_URL)",
    )
    parser.add_argument(
        "command", metavar="COMMAND ...", nargs=argparse.REMAINDER, help="the program to run"
    )
    return parser


def main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
    """Serve a throwaway server, or run a command while one runs (see the module docstring).

    `-h` prints the usage and exits 0. A missing binary, a server that does not start or
    psycopg missing is one line and exit 2 (R160). Ctrl-C or SIGTERM stops the server: exit
    0 without COMMAND, 130 (one line) while COMMAND runs."""
    parser = build_parser(prog or "python -m jfsm.stores.postgres.server")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    command, bouncer, name = args.command, args.pgbouncer, parser.prog
    if command[:1] == ["--"]:
        command = command[1:]
    try:
        import psycopg  # noqa: F401  (creating the database `jfsm` needs it)
    except ImportError:
        return usage_error(name, "needs the extra jfsm[postgres] (psycopg 3)")
    clear_leftovers(name)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    serving = False
    try:
        with contextlib.ExitStack() as stack:
            try:
                server = stack.enter_context(TemporaryServer())
                server.create_database("jfsm")
                env = {**os.environ, "JFSM_PG_URL": server.url("jfsm")}
                if bouncer:
                    front = stack.enter_context(TemporaryBouncer(server))
                    env["JFSM_PG_URL"] = front.url("jfsm")
                    env["JFSM_PG_DIRECT_URL"] = server.url("jfsm")
            except RuntimeError as exc:  # no binaries, initdb or the server failed
                return usage_error(name, f"cannot start PostgreSQL: {exc}")
            if command:
                try:
                    return subprocess.run(command, env=env, check=False).returncode
                except OSError as exc:  # COMMAND not found or not executable
                    return usage_error(name, f"cannot run {command[0]!r}: {exc.strerror or exc}")
            serving = True  # from here on, Ctrl-C is the way to stop it
            print(f"JFSM_PG_URL={shlex.quote(env['JFSM_PG_URL'])}", flush=True)
            print(
                f"{name}: a throwaway PostgreSQL server (data in {server.directory}, deleted "
                "when it stops); Ctrl-C stops it",
                file=sys.stderr,
                flush=True,
            )
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:  # the server is stopped and its data deleted by now
        if serving:
            return 0
        print(f"{name}: interrupted; the server is stopped", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM stops the server like Ctrl-C."""
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    sys.exit(main())
