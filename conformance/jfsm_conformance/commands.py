"""The suite's commands of the `jfsm` command line, registered through the entry-point group
`jfsm.commands` (so the engine's `jfsm.cli` never names the suite, decision R104).

Each entry is a loader: called with no argument, it imports the command and the modules
that need the extra's dependencies (Hypothesis, pytest), so that a missing one is found
before any work, and returns its `main(argv) -> int`. Importing this module imports nothing
but the standard library, so the engine can list the commands (`jfsm --help`, each
loader's first docstring line) cheaply; a loader raises `ImportError` when the suite's
extra is not installed, which `jfsm` turns into one line naming the extra (the entry point
declares it: `[conformance]`).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["conformance", "fake_compress", "profile"]

Main = Callable[[list[str]], int]


def conformance() -> Main:
    """Run the conformance suite (see `jfsm conformance --help`)."""
    import jfsm_conformance.run.runner  # noqa: F401  (the extra's dependencies, before any work)
    from jfsm_conformance.run.cli import main

    return main


def profile() -> Main:
    """The compaction safety profile (see `jfsm profile --help`)."""
    import jfsm_conformance.profile.runner  # noqa: F401  (the extra's dependencies)
    from jfsm_conformance.profile.cli import main

    return main


def fake_compress() -> Main:
    """Serve the fake compress.v2 on 127.0.0.1 until interrupted."""
    from jfsm_conformance.fake.compress import command

    return command
