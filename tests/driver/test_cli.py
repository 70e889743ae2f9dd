"""The `jfsm` command line: inspect, driver over stdio, and usage errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jfsm.cli import main
from jfsm.engine import GameEngine
from jfsm.stores.file.store import FileStore
from jfsm.sync import SyncGameEngine
from jfsm.testing import FakeCompressor


def _make_store(path: Path) -> None:
    engine = GameEngine(FileStore.open_sync(path), FakeCompressor(), game_id="g")
    with SyncGameEngine(engine) as game:
        game.record_round("hello", "world")
        game.start_scene("s1")
        game.record_scene_exchange("s1", "a", "b")


def test_inspect_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _make_store(tmp_path / "store")
    assert main(["inspect", str(tmp_path / "store")]) == 0
    out = capsys.readouterr().out
    assert "game stack" in out and "300,000" in out and "scene s1" in out
    assert "31,457,280 bytes" in out


def test_inspect_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _make_store(tmp_path / "store")
    assert main(["inspect", str(tmp_path / "store"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["game"]["chunks"] == 1
    assert report["game"]["length"] == 42 + len("hello") + len("world")
    assert report["scenes"]["s1"]["chunks"] == 1
    assert report["rounds"] == 1
    assert report["footprint"] <= report["quota"] == 31_457_280


def test_inspect_missing_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(tmp_path / "nothing")]) == 2
    assert "no store directory" in capsys.readouterr().err
    assert not (tmp_path / "nothing").exists()


@pytest.mark.req("JF-ATOM-007")
def test_inspect_locked_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _make_store(tmp_path / "store")
    with FileStore.open_sync(tmp_path / "store"):
        assert main(["inspect", str(tmp_path / "store")]) == 2
    assert "store_locked" in capsys.readouterr().err


def test_driver_over_stdio_answers_and_rejects_before_hello(tmp_path: Path) -> None:
    """One message at a time, each answered before the next is sent (the driver handles
    messages concurrently, so a client waits for a reply before it sends what depends on it;
    R65 made every store operation await I/O off the loop)."""
    messages = [
        {"id": 1, "op": "create_game", "args": {"game": "g"}},
        {"id": 2, "op": "hello", "args": {"protocol": 1, "compressUrl": "http://127.0.0.1:9"}},
        {"id": 3, "op": "create_game", "args": {"game": "g"}},
        {"id": 4, "op": "dump", "args": {"game": "g"}},
        {"id": 5, "op": "frobnicate", "args": {}},
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "jfsm.cli", "driver", "--state", str(tmp_path / "state")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    replies = {}
    try:
        for message in [*messages, "not json"]:
            proc.stdin.write((message if isinstance(message, str) else json.dumps(message)) + "\n")
            proc.stdin.flush()
            reply = json.loads(proc.stdout.readline())
            replies[reply["id"]] = reply
        proc.stdin.write(json.dumps({"id": 6, "op": "shutdown", "args": {}}) + "\n")
        proc.stdin.close()
        assert json.loads(proc.stdout.readline()) == {"id": 6, "ok": True, "result": {}}
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert replies[1]["ok"] is False and replies[1]["error"]["code"] == "invalid_input"
    assert replies[2]["result"]["capabilities"]["durableRestart"] is True
    assert replies[3] == {"id": 3, "ok": True, "result": {}}
    assert replies[4]["result"] == {"store": {}, "changeLog": [], "footprint": 4}
    assert replies[5]["error"]["code"] == "unsupported_op"
    assert replies[None]["error"]["code"] == "invalid_input"  # "not json": one reply, id null


def test_usage_error_exits_2() -> None:
    with pytest.raises(SystemExit) as info:
        main(["no-such-command"])
    assert info.value.code == 2


def test_fake_compress_command_says_where_it_listens_and_stops_on_interrupt() -> None:
    import os
    import signal

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "jfsm.cli", "fake-compress"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("jfsm fake-compress listening on http://127.0.0.1:"), line
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)


def test_driver_help_recommends_the_environment_for_the_token(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--token T` is readable by every local user in /proc/PID/cmdline."""
    with pytest.raises(SystemExit):
        main(["driver", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "prefer the environment variable JFSM_DRIVER_TOKEN" in text
    assert "process list" in text


def test_pg_server_help_is_a_real_parser() -> None:
    """The old `python -m jfsm.stores.postgres.server --help` took --help as the command: it started
    a server and died with a traceback."""
    done = subprocess.run(
        [sys.executable, "-m", "jfsm.stores.postgres.server", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout.startswith("usage:"), done
    assert "Traceback" not in done.stderr and "JFSM_PG_URL" in done.stdout


def test_a_closed_stdout_ends_the_command_quietly(tmp_path: Path) -> None:
    """`jfsm inspect STORE | head`: the reader is gone before the first line is written."""
    _make_store(tmp_path / "store")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jfsm.cli", "inspect", str(tmp_path / "store")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # long before the child has imported jfsm
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, err
    assert err == ""


@pytest.mark.parametrize(
    ("origin", "expected"),
    [
        (
            {"url": "file:///tmp/jfsm.git", "vcs_info": {"vcs": "git", "commit_id": "abc123"}},
            "pip install 'jfsm[conformance] @ git+file:///tmp/jfsm.git@abc123'",
        ),
        (
            {"url": "file:///tmp/dist/jfsm-0.1.0-py3-none-any.whl", "archive_info": {}},
            "pip install 'jfsm[conformance] @ file:///tmp/dist/jfsm-0.1.0-py3-none-any.whl'",
        ),
    ],
)
def test_the_install_hint_names_where_this_jfsm_came_from(
    origin: dict[str, object], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A jfsm installed from a repository is told to install the extra from the same commit
    (issue 40: no package named jfsm is on the index to fall back on)."""
    import importlib.metadata

    from jfsm.cli import install_hint

    class Installed:
        def read_text(self, name: str) -> str | None:
            return json.dumps(origin) if name == "direct_url.json" else None

    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: Installed())
    assert install_hint("conformance") == expected
