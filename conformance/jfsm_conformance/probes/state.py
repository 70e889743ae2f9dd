"""A hostile state directory (JF-ERR-016, decision R90): what a durable driver must not start
on, and symbolic links planted among its files, judged without knowing its layout.

The probes need a stdio driver whose command names `{state}` (the suite then knows the
directory and can start the same command on others); without one they return False and
JF-ERR-016 stays not covered. Each probe starts the driver's command again, on a directory
of its own, as a separate process beside the session's driver:

- `link-root`: the state directory is a symbolic link to an empty directory. The driver
  must refuse to start (exit, or refuse `hello`) and write nothing into the target.
- `open-root`: the state directory is writable by group and others (mode 0777). The same.
- `links-top` and `links-deep`: the driver serves a game (`create_game`, two rounds) and
  stops; then every entry of the state directory (`links-top`), or every entry one level
  down (`links-deep`), is moved to a directory outside and replaced by a symbolic link to
  it. The driver is started again, greeted, and asked to dump the game, record a round and
  dump again (whatever it answers). Nothing in the moved copies may change: no file
  written, truncated, created or removed through a link. A driver that keeps nothing in
  the directory is not judged (nothing to plant).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import shutil
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jfsm_conformance.client.driver import (
    DriverClient,
    HarnessError,
    ProtocolViolation,
    state_folder,
)
from jfsm_conformance.verify import checks as C

if TYPE_CHECKING:
    from jfsm_conformance.steps.world import World
    from jfsm_conformance.verify.checks import Ledger

__all__ = ["run_state_probe", "state_probes"]

CASES = {
    "link-root": "the state directory is a symbolic link",
    "open-root": "the state directory is writable by group and others (mode 0777)",
    "links-top": "every entry of the state directory replaced by a symbolic link to a copy",
    "links-deep": "every entry one level down replaced by a symbolic link to a copy",
}
TIMEOUT = 60.0
IDS = ("JF-ERR-016",)


def state_probes() -> list[dict[str, Any]]:
    """One probe per case (JSON, like `jfsm_conformance.probes.protocol`'s)."""
    return [
        {"kind": "state", "what": what, "case": case, "ids": list(IDS)}
        for case, what in CASES.items()
    ]


def _command(world: World, directory: Path) -> str | None:
    """The driver's stdio command on `directory` instead of the run's `{state}`, or None."""
    transport = world.client.transport
    state, argv = getattr(transport, "state", None), getattr(transport, "argv", None)
    if not isinstance(state, str) or not isinstance(argv, list):
        return None
    return "stdio:" + shlex.join(arg.replace(state, str(directory)) for arg in argv)


def _start(world: World, command: str) -> tuple[DriverClient | None, str]:
    """Start `command` and greet it: (the client, "") if it serves, (None, what it said) if it
    refused to start (exited, or refused hello)."""
    try:
        client = DriverClient(command, timeout=TIMEOUT)
    except HarnessError as exc:
        return None, str(exc)
    try:
        reply = client.call("hello", {"protocol": 1, "compressUrl": world.fake.url})
    except (HarnessError, ProtocolViolation) as exc:
        client.close()
        return None, str(exc)
    if not reply.ok:
        client.close()
        return None, f"hello refused: {reply.get('error')}"
    return client, ""


def _tree(root: Path) -> dict[str, str]:
    """Every path under `root` (links not followed): a digest of a file's bytes, or its kind."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        mode = path.lstat().st_mode
        if stat.S_ISREG(mode):
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        elif stat.S_ISLNK(mode):
            out[rel] = "link -> " + os.readlink(path)
        else:
            out[rel] = "directory" if stat.S_ISDIR(mode) else "other"
    return out


def _changes(before: dict[str, str], after: dict[str, str]) -> str:
    def how(name: str) -> str:
        return "created" if name not in before else "removed" if name not in after else "changed"

    changed = [
        f"{name}: {how(name)}"
        for name in sorted(set(before) | set(after))
        if before.get(name) != after.get(name)
    ]
    return "; ".join(changed[:8]) + (f" (and {len(changed) - 8} more)" if len(changed) > 8 else "")


def _refuses(world: World, ledger: Ledger, probe: dict[str, Any], base: Path) -> None:
    target = base / "target"
    target.mkdir(mode=0o700)
    if probe["case"] == "link-root":
        directory = base / "state"
        directory.symlink_to(target, target_is_directory=True)
        watched = target
    else:
        directory = watched = base / "state"
        directory.mkdir()
        directory.chmod(0o777)
    command = _command(world, directory)
    assert command is not None
    client, said = _start(world, command)
    if client is not None:
        with contextlib.suppress(Exception):
            client.close()
    ledger.expect(
        C.STATE_GUARD,
        client is None,
        f"{probe['what']}: the driver started and answered hello instead of refusing to start",
        ids=IDS,
    )
    written = sorted(p.name for p in watched.iterdir())
    ledger.expect(
        C.STATE_GUARD,
        not written,
        f"{probe['what']}: the driver wrote {written[:5]} there ({said[:200]})",
        ids=IDS,
    )


def _serve_some(client: DriverClient, game: str, round_no: int) -> None:
    """Ops on `game` whose answers do not matter: only what they write does."""
    client.call("dump", {"game": game})
    client.call("record_round", {"game": game, "input": f"in {round_no}", "output": "out"})
    client.call("dump", {"game": game})


def _plants(world: World, ledger: Ledger, probe: dict[str, Any], base: Path) -> bool:
    directory, trap = base / "state", base / "outside"
    directory.mkdir(mode=0o700)
    trap.mkdir(mode=0o700)
    command = _command(world, directory)
    assert command is not None
    game = world.fresh("game-")
    client, said = _start(world, command)
    if client is None:
        raise HarnessError(f"the driver did not start on a fresh state directory: {said}")
    try:
        reply = client.call("create_game", {"game": game})
        if not reply.ok:
            raise HarnessError(f"create_game refused on a fresh state directory: {reply}")
        for n in (1, 2):
            client.call("record_round", {"game": game, "input": f"in {n}", "output": "out"})
    finally:
        client.close()
    parents = [directory]
    if probe["case"] == "links-deep":
        parents = [p for p in sorted(directory.iterdir()) if p.is_dir() and not p.is_symlink()]
    planted = 0
    for parent in parents:
        for entry in sorted(parent.iterdir()):
            copy = trap / entry.relative_to(directory)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(entry), str(copy))
            entry.symlink_to(copy, target_is_directory=copy.is_dir())
            planted += 1
    if not planted:
        return False  # nothing kept there: nothing to plant, not judged
    before = _tree(trap)
    client, said = _start(world, command)
    if client is not None:
        try:
            _serve_some(client, game, 3)
        except (HarnessError, ProtocolViolation):
            pass  # it may stop serving a directory it distrusts; only what it wrote counts
        finally:
            with contextlib.suppress(Exception):
                client.close()
    after = _tree(trap)
    ledger.expect(
        C.STATE_GUARD,
        after == before,
        lambda: (
            f"{probe['what']} ({planted} links): the driver changed the copies outside "
            f"its state directory through them: {_changes(before, after)}"
        ),
        ids=IDS,
    )
    return True


def run_state_probe(world: World, ledger: Ledger, probe: dict[str, Any]) -> bool:
    """One probe of `state_probes()`; False when the driver's command names no `{state}` or
    it keeps nothing there (not covered). Raises `HarnessError` when the driver does not
    start on a fresh state directory."""
    if _command(world, Path("/")) is None:
        return False
    world.client.transcript.append({"state_probe": probe["case"], "t": time.monotonic()})
    base = Path(state_folder("jfsm-suite-hostile-state-"))
    try:
        if probe["case"] in ("link-root", "open-root"):
            _refuses(world, ledger, probe, base)
            return True
        return _plants(world, ledger, probe, base)
    finally:
        for path in (base / "state", base):
            with contextlib.suppress(OSError):
                path.chmod(0o700)
        shutil.rmtree(base, ignore_errors=True)
