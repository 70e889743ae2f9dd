"""What the suite's commands refuse before they run: usage errors, a report folder in use.

Exit 1 means "a requirement failed" to a CI, so a usage error must never end as a traceback,
which Python exits with 1 (decision R160). `UsageParser` is the `argparse` parser of every
suite command (`jfsm conformance`, `jfsm profile`, `jfsm fake-compress`): an error is one
line, `PROG: error: MESSAGE (see PROG --help)`, and exit 2 (argparse prints the usage first
and the error on a second line). `usage_error(prog, message)` prints such a line for an
error found after parsing and returns 2 (both are the engine's `jfsm.usage`, the one module
of the engine besides the spec reader the suite uses: the same rule for every `jfsm`
command).

`hold_report_folder(path)` makes `path` a report folder this process holds for a run
(decision R161): it creates it if missing, then takes an exclusive lock on its `.lock` file
(`flock`, released when the process ends, even by SIGKILL). A second run pointed at the
same folder while the first holds it is refused with `FolderInUse` (naming the first's
pid), so it can neither delete the first's traces nor overwrite its report; a folder that
cannot be one (a file, read-only, not ours to write) is `FolderUnusable`. Both are
`ValueError`s with a one-line message. The `.lock` file is never removed: removing it could
let two runs lock two different files of the same name.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from jfsm.usage import UsageParser, install_hint, port_number, usage_error

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the folder is created, never locked
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "LOCK_NAME",
    "FolderInUse",
    "FolderUnusable",
    "UsageParser",
    "hold_report_folder",
    "install_hint",
    "port_number",
    "usage_error",
]

LOCK_NAME = ".lock"


class FolderUnusable(ValueError):
    """The report folder cannot be created or written (one line)."""


class FolderInUse(ValueError):
    """Another run holds the report folder (one line, naming its pid)."""


@contextlib.contextmanager
def hold_report_folder(path: Path) -> Iterator[Path]:
    """Hold `path` as this run's report folder for the `with` block (module docstring).

    Raises `FolderUnusable` or `FolderInUse` before anything in the folder is touched."""
    fd = _open_lock(path)
    try:
        if fcntl is None:  # pragma: no cover - Windows
            yield path
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown"
            raise FolderInUse(
                f"the report folder {path} is in use by another run (pid {holder}); wait for "
                "it to end, or give this run its own --report-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield path
    finally:
        os.close(fd)  # releases the lock


def _open_lock(path: Path) -> int:
    """The folder's lock file, opened for writing; `FolderUnusable` in one line."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        return os.open(path / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except FileExistsError:
        raise FolderUnusable(f"the report folder {path} is a file, not a folder") from None
    except NotADirectoryError:
        raise FolderUnusable(f"the report folder {path} is inside a file, not a folder") from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise FolderUnusable(f"the report folder {path} cannot be written: {reason}") from None
