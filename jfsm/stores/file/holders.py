"""Who holds a file's `flock`, and ending a holder that is stuck (decision R123).

A game of a shared state directory is locked only for a moment around each write
(`jfsm.stores.file.lease`), but a process can stop in that moment: `SIGSTOP`, a frozen
container, a debugger. Nothing else then gets the lock, so a takeover would wait for that
process however long it stays stopped. A process that holds a game's lock while its lease
has run out has not renewed for a whole lease: the lease package treats it as dead, and
this module makes it so.

- `holders(fd)`: the process ids that hold an `flock` on the file open as `fd`, read from
  `/proc/locks` (Linux; elsewhere, or for a holder in another PID namespace: none found).
- `end_holders(fd)`: send `SIGKILL` to each holder other than this process, through a
  process file descriptor (`pidfd_open`), checking after opening it that the process still
  holds the lock, so that a process id reused meanwhile is never signalled. The kernel
  releases the lock when the holder exits; its write in flight is then a torn tail that the
  next open drops, as after any `kill -9` (JF-STORE-014).

Errors: none raised. A holder that cannot be signalled (another user's, not visible, gone)
is skipped; the caller keeps waiting for the lock.
"""

from __future__ import annotations

import contextlib
import os
import signal

__all__ = ["end_holders", "holders"]

_LOCKS = "/proc/locks"


def holders(fd: int) -> list[int]:
    """Process ids holding an `flock` on the file open as `fd` (waiters not counted)."""
    found = os.fstat(fd)
    device = f"{os.major(found.st_dev):02x}:{os.minor(found.st_dev):02x}:{found.st_ino}"
    pids: list[int] = []
    try:
        with open(_LOCKS, encoding="ascii", errors="replace") as table:
            lines = table.read().splitlines()
    except OSError:
        return pids
    for line in lines:
        fields = line.split()
        # "7: FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0 EOF"; a waiter has "->" after the number
        if len(fields) < 6 or fields[1] != "FLOCK" or fields[5] != device:
            continue
        with contextlib.suppress(ValueError):
            pids.append(int(fields[4]))
    return pids


def end_holders(fd: int) -> list[int]:
    """`SIGKILL` every other process that holds an `flock` on `fd`'s file; returns those
    signalled. Never raises."""
    ended: list[int] = []
    open_pidfd = getattr(os, "pidfd_open", None)
    send = getattr(signal, "pidfd_send_signal", None)
    if open_pidfd is None or send is None:
        return ended
    for pid in holders(fd):
        if pid == os.getpid() or pid <= 0:
            continue
        try:
            process = open_pidfd(pid)
        except OSError:
            continue
        try:
            if pid in holders(fd):  # the process this descriptor names still holds it
                send(process, signal.SIGKILL)
                ended.append(pid)
        except OSError:
            pass
        finally:
            os.close(process)
    return ended
