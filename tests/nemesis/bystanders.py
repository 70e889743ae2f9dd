"""Bystanders: processes that are no part of the store, living beside it, which it must
never harm.

- A **lock holder** takes an `flock` (shared or exclusive, without blocking: it tries for
  its whole life and gives up quietly) on a file or folder of a shared state directory (the
  token counter, a game's lease, folder, participants, store, telemetry), holds it for its
  duration, then exits 0. With `fork`, a child holds the lock and its parent exits at once,
  so that the kernel's record of the lock (`/proc/locks`) names a dead pid; that pid is then
  taken by a pid reuser.
- A **pid reuser** is started with a pid that a process which just died had (a killed
  worker's, a lock holder's parent's), where the kernel lets us choose (`ns_last_pid`, as
  root): it sleeps a few seconds and exits 0.

Each bystander writes `start PID` then `done` to a status file of its own; one that did not
write `done` by its end (or exited with a status other than 0) was harmed. `Bystanders`
keeps them all: `check` waits for each one's planned end, then says which were harmed;
`stop` ends any still running (only processes of this run: their environment carries the
run's marker).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Bystander", "Bystanders", "lock_target", "pid_reuse_possible"]

NS_LAST_PID = Path("/proc/sys/kernel/ns_last_pid")

_HOLDER = r"""
import fcntl, os, sys, time
path, mode, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
fork, status = sys.argv[4] == "fork", sys.argv[5]
def say(text):
    with open(status, "a") as out:
        out.write(text + "\n")
fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if os.path.isdir(path) else 0))
end = time.monotonic() + seconds
flag = (fcntl.LOCK_EX if mode == "ex" else fcntl.LOCK_SH) | fcntl.LOCK_NB
held = False
while not held and time.monotonic() < end:
    try:
        fcntl.flock(fd, flag)
        held = True
    except BlockingIOError:
        time.sleep(0.02)
if fork and held:
    if os.fork() != 0:
        os._exit(0)  # the parent exits; the child holds the lock the parent took
    say(f"start {os.getpid()} child of {os.getppid()}")
else:
    say(f"start {os.getpid()}" + ("" if held else " never held"))
time.sleep(max(0.0, end - time.monotonic()))
say("done")
"""

_SLEEPER = r"""
import os, sys, time
status = sys.argv[2]
with open(status, "a") as out:
    out.write(f"start {os.getpid()}\n")
time.sleep(float(sys.argv[1]))
with open(status, "a") as out:
    out.write("done\n")
"""


@dataclass
class Bystander:
    """One bystander: what it is, its process, when it should be done, its status file."""

    name: str
    what: str
    process: subprocess.Popen[bytes]
    until: float
    status: Path
    wanted_pid: int | None = None  # a pid reuser: the pid it was to take

    def lines(self) -> list[str]:
        with contextlib.suppress(OSError):
            return self.status.read_text().splitlines()
        return []

    def pids(self) -> list[int]:
        return [int(line.split()[1]) for line in self.lines() if line.startswith("start ")]


def pid_reuse_possible() -> bool:
    """Whether this process may choose the next pid (root and a writable `ns_last_pid`)."""
    return os.geteuid() == 0 and os.access(NS_LAST_PID, os.W_OK)


def lock_target(state: Path, kind: str, index: int) -> Path | None:
    """The file or folder of kind `kind` (schedule's `LOCK_TARGETS`) in the shared state
    directory `state`, the `index`-th of those that exist (modulo their number); None if
    none does. Names from the directory's documented layout (`jfsm.driver.state`)."""
    if kind == "tokens":
        found = [state / "tokens"]
    else:
        games = sorted(p for p in state.glob("game-*") if p.is_dir())
        name = {
            "lease": "lease",
            "participants": "participants.json",
            "store": "store",
            "telemetry": "telemetry.jsonl",
        }.get(kind)
        found = games if name is None else [game / name for game in games]
    found = [path for path in found if path.exists()]
    return found[index % len(found)] if found else None


class Bystanders:
    """Every bystander of a run (module docstring). `env` carries the run's marker."""

    def __init__(self, folder: Path, env: dict[str, str], marker: str) -> None:
        self.folder, self.env, self.marker = folder, env, marker
        self.all: list[Bystander] = []

    def _spawn(self, name: str, what: str, argv: list[str], seconds: float) -> Bystander:
        status = self.folder / f"{name}.status"
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=self.env,
            start_new_session=True,
        )
        bystander = Bystander(name, what, process, time.monotonic() + seconds, status)
        self.all.append(bystander)
        return bystander

    def hold_lock(self, path: Path, mode: str, seconds: float, fork: bool) -> Bystander:
        name = f"lock{len(self.all)}"
        status = self.folder / f"{name}.status"
        argv = [sys.executable, "-c", _HOLDER, str(path), mode, str(seconds)]
        argv += ["fork" if fork else "own", str(status)]
        what = f"{'child-held ' if fork else ''}{mode} flock on {path.name}"
        return self._spawn(name, what, argv, seconds + 1.0)

    def reuse_pid(self, pid: int, seconds: float = 4.0) -> Bystander | None:
        """A sleeper started with pid `pid` (three tries); None when it did not get it (and
        the one started is left to end by itself)."""
        if not pid_reuse_possible():
            return None
        for _ in range(3):
            name = f"reuse{len(self.all)}"
            status = str(self.folder / f"{name}.status")
            argv = [sys.executable, "-c", _SLEEPER, str(seconds), status]
            try:
                NS_LAST_PID.write_text(str(pid - 1))
            except OSError:
                return None
            bystander = self._spawn(name, f"pid reuser of {pid}", argv, seconds + 1.0)
            if bystander.process.pid == pid:
                bystander.wanted_pid = pid
                return bystander
            bystander.what = f"pid reuser that missed {pid}"
        return None

    def harmed(self, bystander: Bystander) -> str | None:
        """Why the bystander was harmed, or None (call after its planned end)."""
        lines = bystander.lines()
        code = bystander.process.poll()
        if code not in (None, 0):
            return f"exited {code}"
        if "done" not in lines:
            return "never finished" if lines else "never started"
        return None

    def check(self, timeout: float = 30.0) -> dict[str, str]:
        """Wait until every bystander's planned end (at most `timeout` more), then return the
        harmed ones: name -> what it was and why."""
        deadline = time.monotonic() + timeout
        harmed = {}
        for bystander in self.all:
            while time.monotonic() < min(deadline, bystander.until + 2.0):
                if "done" in bystander.lines() and bystander.process.poll() is not None:
                    break
                time.sleep(0.05)
            with contextlib.suppress(subprocess.TimeoutExpired):
                bystander.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            why = self.harmed(bystander)
            if why is not None:
                harmed[bystander.name] = f"{bystander.what}: {why}"
        return harmed

    def stop(self) -> None:
        """End every bystander process of this run still running (idempotent)."""
        for bystander in self.all:
            if bystander.process.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(bystander.process.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    bystander.process.wait(timeout=5)
            for pid in bystander.pids():  # a lock holder's child, re-parented
                if pid != bystander.process.pid and ours(pid, self.marker):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)


def ours(pid: int, marker: str) -> bool:
    """Whether live process `pid` carries the run's marker in its environment."""
    try:
        return marker.encode() in Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
