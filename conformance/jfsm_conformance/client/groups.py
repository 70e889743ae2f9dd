"""The process groups the suite started, and ending them on every way out (decision R193).

Every process the suite starts (a driver over `stdio:COMMAND`, its restarts, the default
run's companions, the machines' process of a lane) is the leader of a process group of its
own (`start_new_session=True`), recorded here with `started`. `end(pgid)` ends one group:
SIGTERM to the whole group, up to `grace` seconds for it to go, then SIGKILL to the group,
so that what a driver started (a shell's child, a worker pool) goes with it. `end_all` ends
every group still recorded: the runner calls it when a run stops early (Ctrl-C, SIGTERM, a
harness error), and it runs at exit (`atexit`) whatever ended the suite, its own crash
included. `exit_on_signal` makes a process that has no run to report (a lane's process)
end its groups and exit at once on SIGTERM or SIGINT.

A group is gone once none of its members lives (zombies aside, which their parent reaps):
read from `/proc` where there is one, else from `killpg(pgid, 0)`.

**The one concept:** the suite's own process groups, and ending them.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
import time
from pathlib import Path
from types import FrameType

__all__ = ["GRACE", "alive", "end", "end_all", "exit_on_signal", "forget", "started"]

GRACE = 1.0  # seconds between SIGTERM and SIGKILL of a group the suite ends

_lock = threading.Lock()
_groups: set[int] = set()


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


def _on_signal(signum: int, frame: FrameType | None) -> None:
    end_all(grace=0.5)
    os._exit(128 + signum)


def exit_on_signal() -> None:
    """In a process with no run of its own to report: SIGTERM or SIGINT ends its groups and
    the process at once (exit status 128 + the signal's number)."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _on_signal)


atexit.register(end_all)
