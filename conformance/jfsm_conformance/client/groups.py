"""The process groups the suite started, and ending them on every way out (decision R193).

Every process the suite starts (a driver over `stdio:COMMAND`, its restarts, the default
run's companions, the machines' process of a lane) is the leader of a process group of its
own (`start_new_session=True`), recorded here with `started`. `end(pgid)` ends one group:
SIGTERM to the whole group, up to `grace` seconds for it to go, then SIGKILL to the group,
so that what a driver started (a shell's child, a worker pool) goes with it. `end_all` ends
every group still recorded: the runner calls it when a run stops early (Ctrl-C, SIGTERM, a
harness error), and it runs at exit (`atexit`) whatever ended the suite, its own crash
included. `exit_on_signal` makes a process that has no run to report (a lane's process)
end its groups and exit at once on SIGTERM or SIGINT, after the exit functions it
registered (`atexit`: a temporary folder of the reference engine's) have run.

A process is started inside `spawning()`, which records its group before anything else: a
SIGINT or SIGTERM whose handler is `held_back` waits until the spawn is recorded (a process
started in that moment was never ended before, and could write into a folder after it was
removed). `end_all` waits, a second at most, for what it killed to be gone.

`temporary_folder(prefix)` makes a temporary folder for what the suite starts (a driver's
`{state}`, a companion's state directory): its user removes it when done, and whatever is
left is removed at exit or on that signal, so an interrupted run leaves no folder behind.

A group is gone once none of its members lives (zombies aside, which their parent reaps):
read from `/proc` where there is one, else from `killpg(pgid, 0)`.

**The one concept:** what the suite starts (process groups, their folders), and ending it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

__all__ = [
    "GRACE",
    "alive",
    "end",
    "end_all",
    "exit_on_signal",
    "forget",
    "held_back",
    "spawning",
    "started",
    "temporary_folder",
]

GRACE = 1.0  # seconds between SIGTERM and SIGKILL of a group the suite ends
KILLED = 1.0  # seconds `end_all` waits for the groups it killed to be gone

# Reentrant: `exit_on_signal`'s handler runs in the main thread between two of its
# bytecodes, maybe while that thread holds the lock in `started` (a plain lock: a deadlock).
_lock = threading.RLock()
_groups: set[int] = set()
_folders: set[str] = set()
_spawning = 0  # spawns in progress (`spawning`)
_held: list[int] = []  # signals held back meanwhile, in arrival order


@contextlib.contextmanager
def spawning() -> Iterator[None]:
    """Around starting a process and recording its group with `started`: a signal whose
    handler is `held_back` is handled once the block ends, then at once."""
    global _spawning
    with _lock:
        _spawning += 1
    try:
        yield
    finally:
        with _lock:
            _spawning -= 1
            signum = _held[0] if _held and not _spawning else None
            if signum is not None:
                _held.clear()
        if signum is not None:
            signal.raise_signal(signum)  # its handler runs now, the group recorded


def held_back(
    handler: Callable[[int, FrameType | None], Any],
) -> Callable[[int, FrameType | None], Any]:
    """`handler`, for `signal.signal`, held back while a spawn is in progress (`spawning`)."""

    def held(signum: int, frame: FrameType | None) -> Any:
        if _spawning:  # read without the lock: the handler runs in the main thread
            _held.append(signum)
            return None
        return handler(signum, frame)

    return held


def started(pgid: int) -> None:
    """Record the group of a process the suite started with a session of its own."""
    with _lock:
        _groups.add(pgid)


def forget(pgid: int) -> None:
    """The group is ended (or handed over): stop recording it."""
    with _lock:
        _groups.discard(pgid)


def recorded() -> set[int]:
    """The groups recorded now (a copy)."""
    with _lock:
        return set(_groups)


def alive(pgid: int) -> bool:
    """Whether any process of group `pgid` still lives (a zombie does not count)."""
    proc = Path("/proc")
    if proc.is_dir():
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in "ZX":
                return True
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def end(pgid: int, grace: float = GRACE) -> None:
    """End group `pgid`: SIGTERM, up to `grace` seconds, then SIGKILL (at once with
    `grace=0`), and stop recording it."""
    if grace > 0:
        _signal(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.02)
    _signal(pgid, signal.SIGKILL)
    forget(pgid)


def end_all(grace: float = GRACE, keep: set[int] | frozenset[int] = frozenset()) -> None:
    """End every recorded group but those to `keep`: SIGTERM to all at once, one shared
    grace, SIGKILL."""
    groups = recorded() - keep
    if not groups:
        return
    if grace > 0:
        for pgid in groups:
            _signal(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while any(alive(g) for g in groups) and time.monotonic() < deadline:
            time.sleep(0.02)
    for pgid in groups:
        _signal(pgid, signal.SIGKILL)
        forget(pgid)
    deadline = time.monotonic() + KILLED  # SIGKILL is not instant: a write may still land
    while any(alive(g) for g in groups) and time.monotonic() < deadline:
        time.sleep(0.02)


def temporary_folder(prefix: str) -> str:
    """A new empty folder (`tempfile.mkdtemp`), removed at exit if it is still there.

    Raises `OSError` as `mkdtemp` does."""
    path = tempfile.mkdtemp(prefix=prefix)
    with _lock:
        _folders.add(path)
    return path


def _remove_folders() -> None:
    with _lock:
        folders = set(_folders)
        _folders.clear()
    for path in folders:
        shutil.rmtree(path, ignore_errors=True)


def _at_exit() -> None:
    end_all()  # first the processes, which may still write into the folders
    _remove_folders()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    end_all(grace=0.5)
    exit_functions = getattr(atexit, "_run_exitfuncs", None)  # CPython's: what exit would run
    with contextlib.suppress(Exception):
        if exit_functions is not None:
            exit_functions()
        _remove_folders()
    os._exit(128 + signum)


def exit_on_signal() -> None:
    """In a process with no run of its own to report: SIGTERM or SIGINT ends its groups and
    the process at once (exit status 128 + the signal's number)."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, held_back(_on_signal))


atexit.register(_at_exit)
