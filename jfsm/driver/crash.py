"""Crash injection for an in-process driver (the `crash` op, capability `crashInjection`).

Over stdio the conformance suite proves crash atomicity (JF-ATOM-004, JF-ATOM-008) by
killing the driver process with SIGKILL. In process there is no process to kill, so the
durable reference driver (`ReferenceDriver(..., crash_injection=True)`, as
`durable_reference_driver` builds it) opens every `FileStore` over a `CrashSwitch`: the
store's own crash-injecting file system (`jfsm.stores.file.crashfs.CrashingFileSystem`, the one
its crash tests enumerate every crash point with), which numbers the boundaries of every
durable write (before, in the middle of and after each write and pwrite; before and after
each create, log extension, fsync, fdatasync, truncate, rename, remove and directory fsync).
The suite's in-process crash points (`jfsm_conformance.scenarios.durability`) are laid out
over this numbering, which is why the switch does not tear log extensions as the store's
tests do: a commit after a reopen is an extension and its fsync (boundaries 0-3), then a
pwrite (4-6) and its fdatasync (7-8).

The `crash` op calls `arm(at)`: the `at`-th boundary from now (0: the next) is the crash
point. There the switch dies as a killed process would: the call raises `DriverCrashed`,
and so does every later call, so nothing more reaches the disk; its descriptors are closed
and its locks released. The driver then answers every message with an error, and its
`restart()` abandons every engine without closing it and reopens the games from the
directory over a fresh switch.
"""

from __future__ import annotations

from jfsm.stores.file.crashfs import CrashingFileSystem, SimulatedCrash
from jfsm.stores.file.fsio import FileSystem

__all__ = ["CrashSwitch", "DriverCrashed"]

DriverCrashed = SimulatedCrash  # what every call of a crashed driver's stores raises


class CrashSwitch(CrashingFileSystem):
    """The driver's crashing file system over `inner` (the real one by default): it never
    crashes until the `crash` op arms it."""

    def __init__(self, inner: FileSystem | None = None) -> None:
        super().__init__(inner, tear_extensions=False)

    @property
    def used(self) -> bool:
        """Armed at least once (or abandoned): the next restart is a kill, not a close."""
        return self.crash_at is not None or self.dead
