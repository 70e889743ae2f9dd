"""Every subcommand's usage errors: one line on stderr, exit 2, never a traceback (R160).

Exit 1 means "a requirement failed" to a CI, and Python exits 1 after a traceback, so each
error path below must answer with exactly one line and exit 2. `CASES` walks the error
paths of every subcommand, the engine's and the suite's (in process, through `jfsm.cli.main`,
as the console script runs it); `test_every_subcommand_is_walked` fails when a subcommand
has no case. Ctrl-C, stdin from a file and the throwaway PostgreSQL server run as real
processes below.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jfsm.cli import build_parser, main, plugin_commands
from jfsm_conformance import usage
from jfsm_conformance.record.traces import TRACE_FORMAT

Setup = Callable[[Path], None]


def _write(name: str, text: str) -> Setup:
    def setup(folder: Path) -> None:
        (folder / name).write_text(text, encoding="utf-8")

    return setup


def _trace(**fields: object) -> str:
    trace = {
        "format": TRACE_FORMAT,
        "driver": "python:jfsm_conformance.examples.reference:durable_without_backoff",
        "thresholds": None,
        "source": "scenario x",
        "failure": {"check": "c", "ids": ["JF-TEXT-001"], "message": "m"},
        "steps": [{"step": "new_game", "args": {}}],
    }
    trace.update(fields)
    return json.dumps(trace)


PACKED = {"$jfsm-packed-text": "zlib+base64", "length": 3, "preview": "", "data": "!!"}

# (subcommand, argv, setup in the working folder, a fragment of the one line)
CASES: list[tuple[str, list[str], Setup | None, str]] = [
    ("", [], None, "the following arguments are required: command"),
    ("", ["frobnicate"], None, "invalid choice: 'frobnicate'"),
    ("driver", ["driver", "--bogus"], None, "jfsm driver: error: unrecognized arguments"),
    ("driver", ["driver", "--http", "abc"], None, "'abc' is not a port number"),
    ("driver", ["driver", "--http", "70000"], None, "'70000' is not a port number"),
    ("driver", ["driver", "--store", "host=a..b dbname=x"], None, "not a host name"),
    ("driver", ["driver", "--store", "mysql://h/db"], None, "neither a directory path"),
    ("driver", ["driver", "--shared"], None, "--shared needs --state DIR"),
    ("driver", ["driver", "--state", "file"], _write("file", ""), "Not a directory"),
    (
        "driver",
        ["driver", "--store", "postgresql://u@h/db", "--state", "games"],
        None,
        "--state and --store both say where the games live",
    ),
    ("driver", ["driver", "--trust-state"], None, "--trust-state needs --state DIR"),
    ("driver", ["driver", "--owner", "w1"], None, "--owner needs --store URL"),
    ("driver", ["driver", "--state", "games", "--owner", "w1"], None, "--owner needs"),
    ("driver", ["driver", "--token", "t"], None, "--token needs --http PORT"),
    ("driver", ["driver", "--metrics"], None, "--metrics needs --http PORT"),
    ("inspect", ["inspect"], None, "arguments are required: path"),
    ("inspect", ["inspect", "nothing-here"], None, "no store directory"),
    ("inspect", ["inspect", "host=a..b dbname=x", "--game", "g"], None, "not a host name"),
    ("inspect", ["inspect", ".", "--game", "g"], None, "--game is for a postgresql:// store"),
    ("pg-migrate", ["pg-migrate", "host=a..b dbname=x"], None, "not a host name"),
    ("pg-migrate", ["pg-migrate", "postgresql://a..b/x"], None, "not a host name"),
    ("pg-migrate", ["pg-migrate"], None, "arguments are required: url"),
    ("pg-migrate", ["pg-migrate", "."], None, "'.' is not a PostgreSQL target"),
    ("pg-migrate", ["pg-migrate", ""], None, "'' is not a PostgreSQL target"),
    ("pg-server", ["pg-server", "--bogus"], None, "jfsm pg-server: error: unrecognized"),
    ("conformance", ["conformance", "--bogus"], None, "unrecognized arguments: --bogus"),
    ("conformance", ["conformance", "--profile", "huge"], None, "invalid choice: 'huge'"),
    ("conformance", ["conformance", "--select", "XX-NOPE"], None, "XX-NOPE"),
    ("conformance", ["conformance", "--expected-failures", "no.toml"], None, "no.toml"),
    (
        "conformance",
        ["conformance", "--expected-failures", "x.json"],
        _write("x.json", "{nope"),
        "Expecting property name",
    ),
    (
        "conformance",
        ["conformance", "--expected-failures", "x.json"],
        _write("x.json", "7"),
        "list",
    ),
    (
        "conformance",
        ["conformance", "--report-dir", "taken", "--select", "JF-TEXT-001"],
        _write("taken", "a file"),
        "is a file, not a folder",
    ),
    (
        "conformance",
        ["conformance", "--report-dir", "taken/inside", "--select", "JF-TEXT-001"],
        _write("taken", "a file"),
        "inside a file",
    ),
    (
        "conformance",
        ["conformance", "--report-dir", "/sys/jfsm-report", "--select", "JF-TEXT-001"],
        None,
        "cannot be written",
    ),
    (
        "conformance",
        ["conformance", "--junit-xml", ".", "--select", "JF-TEXT-001"],
        None,
        "is a folder",
    ),
    ("conformance", ["conformance", "replay"], None, "arguments are required: trace"),
    ("conformance", ["conformance", "replay", "gone.json"], None, "no such trace file"),
    ("conformance", ["conformance", "replay", "t.json"], _write("t.json", "{"), "not JSON"),
    ("conformance", ["conformance", "replay", "t.json"], _write("t.json", "[]"), "not a jfsm"),
    (
        "conformance",
        ["conformance", "replay", "t.json"],
        _write("t.json", _trace(steps="x")),
        "damaged",
    ),
    (
        "conformance",
        ["conformance", "replay", "t.json"],
        _write("t.json", _trace(source="machine workers (K=2)")),
        "workers machine",
    ),
    (
        "conformance",
        ["conformance", "replay", "t.json"],
        _write("t.json", _trace(steps=[{"step": "fly", "args": {}}])),
        "steps the suite does not have: fly",
    ),
    (
        "conformance",
        ["conformance", "replay", "t.json"],
        _write("t.json", _trace(steps=[{"step": "new_game", "args": {"game": "g", "worker": 1}}])),
        "unexpected keyword argument 'worker'",
    ),
    (
        "conformance",
        ["conformance", "replay", "t.json"],
        _write("t.json", _trace(steps=[{"step": "write", "args": {"sets": PACKED}}])),
        "packed text of the trace is damaged",
    ),
    ("conformance", ["conformance", "smoke", "--bogus"], None, "unrecognized arguments"),
    ("conformance", ["conformance", "skeleton", "extra"], None, "takes no arguments"),
    ("profile", ["profile", "--bogus"], None, "jfsm profile: error: unrecognized"),
    (
        "profile",
        ["profile", "--report-dir", "taken"],
        _write("taken", "a file"),
        "is a file, not a folder",
    ),
    ("profile", ["profile", "replay"], None, "arguments are required: trace"),
    ("profile", ["profile", "replay", "gone.json"], None, "No such file"),
    ("fake-compress", ["fake-compress", "--port", "x"], None, "'x' is not a port number"),
    ("fake-compress", ["fake-compress", "--bogus"], None, "unrecognized arguments"),
    ("fake-compress", ["fake-compress", "--port", "99999"], None, "'99999' is not a port"),
    ("fake-compress", ["fake-compress", "--port", "-1"], None, "'-1' is not a port number"),
]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse, as the console script would exit
        code = exc.code if isinstance(exc.code, int) else 1
    return code, capsys.readouterr().err


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    ("command", "argv", "setup", "fragment"),
    CASES,
    ids=[" ".join(argv) or "(none)" for _, argv, _, _ in CASES],
)
def test_a_usage_error_is_one_line_and_exit_2(
    command: str,
    argv: list[str],
    setup: Setup | None,
    fragment: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    if setup is not None:
        setup(tmp_path)
    code, err = _run(argv, capsys)
    assert code == 2, err
    assert fragment in _one_line(err)


def test_every_subcommand_is_walked() -> None:
    """A new subcommand (the engine's or a registered one) needs its error paths above."""
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command")
    assert commands.choices is not None
    names = set(commands.choices) | set(plugin_commands())
    walked = {command for command, *_ in CASES}
    assert names - walked == set()
    assert {"conformance", "profile", "fake-compress", "pg-server"} <= names


def test_a_fake_compress_port_in_use_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, err = _run(["fake-compress", "--port", str(port)], capsys)
    assert code == 2
    assert f"cannot listen on port {port}" in _one_line(err)


@pytest.mark.req("JF-STORE-016")
@pytest.mark.parametrize(
    ("user", "password", "shown"),
    [
        ("postgres", "postgres", "'postgresql://postgres:***@127.0.0.1:1/db'"),
        ("u", "p", "'postgresql://u:***@127.0.0.1:1/db'"),
        ("u", "a", "'postgresql://u:***@127.0.0.1:1/db'"),
        ("ql", "t", "'postgresql://ql:***@127.0.0.1:1/db'"),
    ],
)
def test_a_password_is_masked_by_parsing_never_by_replacing_its_letters(
    user: str, password: str, shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 40: `postgres:postgres` printed as `'***ql://***:***@...'`, and a one-letter
    password starred that letter in every word (`***ort 1 failed`, `acce***ting`)."""
    code, err = _run(["pg-migrate", f"postgresql://{user}:{password}@127.0.0.1:1/db"], capsys)
    assert code == 2
    line = _one_line(err)
    assert f"cannot connect to PostgreSQL at {shown}: " in line, line
    assert f":{password}@" not in line
    # the server's reason, word for word (libpq's own text)
    assert 'connection to server at "127.0.0.1", port 1 failed' in line, line
    assert "accepting TCP/IP connections" in line, line


def test_masking_finds_passwords_where_libpq_reads_them() -> None:
    from jfsm.stores.postgres.conninfo import mask, passwords, scrub

    assert mask("host=h password='a b\\' c' dbname=d") == "host=h password=*** dbname=d"
    assert passwords("host=h password='a b\\' c' dbname=d") == {"a b' c"}
    assert mask("postgresql://u@h/db?sslmode=require&password=pw%21") == (
        "postgresql://u@h/db?sslmode=require&password=***"
    )
    assert mask("postgresql://u:p%40ss@h:5/db") == "postgresql://u:***@h:5/db"
    assert passwords("postgresql://u:p%40ss@h:5/db") == {"p%40ss", "p@ss"}
    assert mask("postgresql://u@h/db") == "postgresql://u@h/db"
    # an echoed password (a parse error quotes it) is masked as a token, never inside words
    url = "postgresql://u:s3cr%zzet@h/db"
    assert scrub('invalid percent-encoded token: "s3cr%zzet"', url) == (
        'invalid percent-encoded token: "***"'
    )
    assert scrub("postgres: port 1 failed, accepting", "postgresql://u:p@h/db") == (
        "postgres: port 1 failed, accepting"
    )


@pytest.mark.req("JF-CALL-023")
def test_metrics_without_the_extra_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--metrics` where the SDK or the Prometheus exporter is not installed (the import
    refused here): one line naming the extra, before anything is opened."""
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.prometheus", None)
    code, err = _run(["driver", "--http", "0", "--metrics"], capsys)
    assert code == 2
    line = _one_line(err)
    assert "--metrics needs the extra jfsm[prometheus]" in line, line
    assert "opentelemetry.exporter.prometheus" in line, line


def test_an_http_port_in_use_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("JFSM_DRIVER_TOKEN", "t")  # no token line printed first
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, err = _run(["driver", "--http", str(port)], capsys)
    assert code == 2
    assert f"cannot serve on 127.0.0.1:{port}" in _one_line(err)


def test_a_read_only_report_folder_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """EROFS, as on a read-only mount (root ignores a folder's mode, so it is simulated)."""
    real_open = os.open

    def read_only(path: object, *args: object, **kwargs: object) -> int:
        if str(path).endswith(usage.LOCK_NAME):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(usage.os, "open", read_only)
    report = tmp_path / "report"
    code, err = _run(["conformance", "--report-dir", str(report), "--select", "JF-TEXT"], capsys)
    assert code == 2
    assert "cannot be written: Read-only file system" in _one_line(err)


def test_an_unexpected_exception_is_a_bug_with_exit_2_never_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bug keeps its traceback (for the report), then says it is one, and exits 2."""
    import jfsm.inspection

    def broken(*args: object, **kwargs: object) -> int:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(jfsm.inspection, "inspect_store", broken)
    code, err = _run(["inspect", "x"], capsys)
    assert code == 2
    assert "Traceback" in err
    assert err.strip().splitlines()[-1] == (
        "jfsm inspect: internal error (a bug of jfsm, not a failed requirement): "
        "ZeroDivisionError: a bug"
    )


# -- real processes ---------------------------------------------------------------------


def _jfsm(*args: str) -> list[str]:
    return [sys.executable, "-m", "jfsm.cli", *args]


def test_the_driver_reads_requests_from_a_file(tmp_path: Path) -> None:
    """`jfsm driver < requests.jsonl` answers as `cat requests.jsonl | jfsm driver` does."""
    requests = tmp_path / "requests.jsonl"
    requests.write_text(
        json.dumps({"id": 1, "op": "hello", "args": {"protocol": 1, "compressUrl": "http://x"}})
        + "\n"
        + json.dumps({"id": 2, "op": "create_game", "args": {"game": "g"}})
        + "\n",
        encoding="utf-8",
    )
    with requests.open("rb") as stdin:
        done = subprocess.run(_jfsm("driver"), stdin=stdin, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert sorted(r["id"] for r in replies) == [1, 2]
    assert all(r["ok"] for r in replies), replies


def test_the_driver_ends_at_once_on_an_empty_device() -> None:
    """`jfsm driver < /dev/null`: a device the event loop cannot watch is read in a thread,
    so the driver meets end of input and exits 0 with no reply (it hung before)."""
    with open(os.devnull, "rb") as stdin:
        done = subprocess.run(_jfsm("driver"), stdin=stdin, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"" and b"Traceback" not in done.stderr


@pytest.fixture
def process() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start processes for a test; every one is stopped (killed if need be) at its end."""
    started: list[subprocess.Popen[str]] = []

    def start(argv: list[str], **kwargs: object) -> subprocess.Popen[str]:
        proc = subprocess.Popen(argv, text=True, **kwargs)  # type: ignore[call-overload]
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # the server's own clean stop first
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def test_ctrl_c_stops_the_stdio_driver_quietly(
    process: Callable[..., subprocess.Popen[str]],
) -> None:
    proc = process(
        _jfsm("driver"), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(json.dumps({"id": 1, "op": "create_game", "args": {"game": "g"}}) + "\n")
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 1  # serving
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0
    assert "Traceback" not in proc.stderr.read()


def _require_postgres() -> None:
    from pg_fixtures import require_postgres

    require_postgres()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["python -m", "jfsm pg-server"])
def test_the_throwaway_server_prints_its_url_and_stops_on_ctrl_c(
    how: str, process: Callable[..., subprocess.Popen[str]]
) -> None:
    _require_postgres()
    argv = (
        [sys.executable, "-m", "jfsm.stores.postgres.server"]
        if how == "python -m"
        else _jfsm("pg-server")
    )
    proc = process(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline().strip()
    assert line.startswith("JFSM_PG_URL='postgresql://jfsm@/jfsm?host="), line
    folder = Path(proc.stderr.readline().split("data in ")[1].split(",")[0])
    assert folder.is_dir()
    import psycopg

    url = line.split("=", 1)[1].strip("'")
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("jfsm",)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 0
    assert "Traceback" not in proc.stderr.read()
    assert not folder.exists()  # stopped, and its data deleted


@pytest.mark.slow
def test_ctrl_c_during_the_command_stops_the_server_in_one_line(
    tmp_path: Path, process: Callable[..., subprocess.Popen[str]]
) -> None:
    _require_postgres()
    started = tmp_path / "started"
    command = f'printf %s "$JFSM_PG_URL" > {started}; exec sleep 120'  # dies quietly on SIGINT
    proc = process(
        _jfsm("pg-server", "sh", "-c", command),
        stderr=subprocess.PIPE,
        start_new_session=True,  # Ctrl-C reaches the whole group, as in a terminal
    )
    deadline = time.monotonic() + 120
    while not started.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert started.exists(), proc.poll()
    url = started.read_text()
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    assert proc.stderr is not None
    err = proc.stderr.read()
    assert "Traceback" not in err
    assert _one_line(err).endswith("interrupted; the server is stopped")
    socket_folder = url.split("host=")[1].split("&")[0].replace("%2F", "/")
    assert not Path(socket_folder).exists()


@pytest.mark.slow
def test_a_command_that_cannot_run_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _require_postgres()
    code, err = _run(["pg-server", str(tmp_path / "no-such-program")], capsys)
    assert code == 2
    assert "cannot run" in _one_line(err)


def _postgres_pids(folder: Path) -> list[int]:
    """The live postgres processes serving the data in `folder` (their command lines name
    it): the postmaster and its children."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if str(folder).encode() in cmdline and b"postgres" in cmdline and state != "Z":
                pids.append(int(entry.name))
    return pids


@pytest.mark.slow
def test_a_killed_pg_server_takes_its_server_and_folder_with_it(
    process: Callable[..., subprocess.Popen[str]],
) -> None:
    """Issue 40: SIGKILL left the postgres of `jfsm pg-server` running and its folder; its
    watchdog now stops the server and removes the folder (R214)."""
    _require_postgres()
    proc = process(_jfsm("pg-server"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith("JFSM_PG_URL=")
    folder = Path(proc.stderr.readline().split("data in ")[1].split(",")[0])
    assert _postgres_pids(folder)  # serving
    proc.kill()  # ours: started by this test
    proc.wait(timeout=30)
    deadline = time.monotonic() + 120
    while (folder.exists() or _postgres_pids(folder)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not folder.exists()
    assert _postgres_pids(folder) == []


@pytest.mark.slow
def test_the_next_pg_server_clears_the_leftovers_it_can_prove_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder whose starting process is gone and whose server stopped is removed; one whose
    server still runs (its watchdog killed too) is named with the command that stops it, and
    left alone: `jfsm pg-server` signals no process it did not start. A folder it cannot
    prove its own (no `owner.json`) is never touched."""
    _require_postgres()
    import tempfile

    from jfsm.stores.postgres.server import OWNER_FILE, TemporaryServer

    short = Path(tempfile.mkdtemp(prefix="jfsm-t-", dir="/tmp"))  # a short socket path
    short.chmod(0o755)  # as root, the server runs as `postgres`: it must reach its folder
    monkeypatch.setattr(tempfile, "tempdir", str(short))
    dead = {"pid": 2**22 + 1, "start": 1, "boot": "not-this-boot"}
    stopped = short / "jfsm-pg-stopped"
    (stopped / "data").mkdir(parents=True)
    (stopped / OWNER_FILE).write_text(json.dumps(dead))
    unknown = short / "jfsm-pg-unknown"
    unknown.mkdir()
    server = TemporaryServer()
    try:
        server.start()
        assert server.directory is not None
        running = server.directory
        (running / OWNER_FILE).write_text(json.dumps(dead))  # as if its starter was killed
        done = subprocess.run(
            _jfsm("pg-server", "true"),
            env={**os.environ, "TMPDIR": str(short)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        assert not stopped.exists() and unknown.exists()
        assert running.exists() and _postgres_pids(running)  # named, never signalled
        lines = [line for line in done.stderr.splitlines() if "killed" in line]
        assert len(lines) == 2, done.stderr
        still = next(line for line in lines if "still runs" in line)
        assert str(running / "data") in still and "-m immediate stop" in still
        assert any("removed 1 folder " in line for line in lines), lines
    finally:
        server.stop()
        import shutil

        shutil.rmtree(short, ignore_errors=True)
