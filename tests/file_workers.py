"""Processes that own a game of a shared state directory, driven line by line.

`Worker(root, game, owner, seconds)` starts `tests/stores/shared_file_worker.py` (see there
for its commands) and reads its JSON answers on a thread; every wait is bounded by `WAIT`,
so a hung worker fails its test instead of hanging it. The fixture `file_workers` starts
workers and kills every one still running when the test ends.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["WAIT", "WORKER", "Worker", "file_workers", "stopped"]

WORKER = Path(__file__).with_name("stores") / "shared_file_worker.py"
WAIT = 30.0  # bound on every reply: a hung worker fails the test, never hangs it


def stopped(pid: int) -> bool:
    """Whether process `pid` is stopped (SIGSTOP, or its own `stop` command)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "T"


class Worker:
    """One `shared_file_worker.py` process owning (or trying to own) game `game`."""

    def __init__(self, root: Path, game: str, owner: str, seconds: float = 30.0) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), str(root), game, owner, str(seconds)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.answers: list[dict[str, Any]] = []
        self._ready = threading.Condition()
        self._read = 0
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._ready:
                self.answers.append(json.loads(line))
                self._ready.notify_all()

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def next(self) -> dict[str, Any]:
        """The next answer; fails (AssertionError) after `WAIT` seconds without one."""
        with self._ready:
            got = self._ready.wait_for(lambda: len(self.answers) > self._read, WAIT)
            assert got, f"no answer from the worker (exit {self.proc.poll()})"
            self._read += 1
            return self.answers[self._read - 1]

    def ask(self, command: str) -> dict[str, Any]:
        self.send(command)
        return self.next()

    def stopped(self) -> bool:
        return stopped(self.proc.pid)

    def wait_stopped(self) -> None:
        """Wait until the worker stopped itself at its point; fails if it died or never did."""
        deadline = time.monotonic() + WAIT
        while not self.stopped():
            assert self.proc.poll() is None, "the worker died"
            assert time.monotonic() < deadline, "the worker never stopped at its point"
            time.sleep(0.005)

    def kill(self) -> None:
        """SIGKILL, stopped or not (our own child), and reap it."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a stopped worker dies all the same
            self.proc.kill()
        self.proc.wait(WAIT)

    def stop(self) -> None:
        """End it cleanly: close its stdin and wait for its exit."""
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(WAIT)


@pytest.fixture
def file_workers() -> Iterator[Callable[..., Worker]]:
    """Start workers (`file_workers(root, game, owner)`); those still running are killed."""
    started: list[Worker] = []

    def start(*args: Any) -> Worker:
        started.append(Worker(*args))
        return started[-1]

    yield start
    for each in started:
        each.kill()
