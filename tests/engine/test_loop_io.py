"""No blocking file or socket I/O on the event loop's thread (issue 21, decision R65).

A child process installs an audit hook (`sys.addaudithook`: hooks cannot be removed, hence
the child) that records every audited I/O event raised on a thread that is running an
event loop: `open` (`open()`, `os.open`), renames, removals, directory listings and
creations, truncation, `flock`, socket connects and binds, `time.sleep`, subprocesses.
Each scenario runs twice and only the second run is recorded, so the imports of the first
(which open files) are not counted. The engine over file stores must raise none, and so
must the reference driver with a state directory, plain or shared: its telemetry appends
too run off the loop (decision R151; they were the last I/O on it). `fsync`, `write` and
`pwrite` are not audited by Python; the file store's calls of those are checked by thread
in `test_store_async.py`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import asyncio, json, os, sys, tempfile, threading

    WATCHED = {
        "open", "os.rename", "os.replace", "os.remove", "os.unlink", "os.rmdir", "os.mkdir",
        "os.listdir", "os.scandir", "os.truncate", "os.chmod", "os.link", "os.symlink",
        "shutil.rmtree", "shutil.copyfile", "shutil.move", "fcntl.flock", "fcntl.lockf",
        "socket.connect", "socket.bind", "time.sleep", "subprocess.Popen", "os.system",
    }
    recording = False
    seen = {}

    def hook(event, args):
        if not recording or event not in WATCHED:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # not a loop's thread: an executor worker
        where = sys._getframe(1)
        # the innermost frame of jfsm, past the one opening helper (its caller did the I/O)
        while where is not None and (
            not where.f_code.co_filename.startswith(JFSM)
            or where.f_code.co_filename == FSIO
        ):
            where = where.f_back
        site = "outside jfsm" if where is None else (
            os.path.relpath(where.f_code.co_filename, ROOT) + ":" + where.f_code.co_name
        )
        seen[event + " @ " + site] = seen.get(event + " @ " + site, 0) + 1

    ROOT = sys.argv[1]
    JFSM = os.path.join(ROOT, "jfsm")
    FSIO = os.path.join(JFSM, "stores", "file", "fsio.py")
    sys.addaudithook(hook)

    from jfsm.engine import GameEngine
    from jfsm.testing import FakeCompressor
    from jfsm.stores.file.store import FileStore
    from jfsm.stores.offload import run_blocking

    async def engine_scenario(root):
        a = GameEngine(await FileStore.open(os.path.join(root, "a")),
                       FakeCompressor(), game_id="a", thresholds={"game": 400})
        for n in range(4):
            await a.record_round(f"in {n}", "out " * 40)
        await a.before_generation()
        await a.write({"k": 1})
        await a.checkpoint()
        target = await FileStore.open(os.path.join(root, "b"))
        b = await a.duplicate(target, "b")
        await b.reset(1)
        await b.close()
        await a.close()

    async def driver_scenario(root, shared=False):
        from jfsm.driver import ReferenceDriver
        from jfsm.testing import FakeCompressor
        driver = ReferenceDriver(os.path.join(root, "state"), shared=shared,
                                 compressor_factory=lambda url: FakeCompressor())
        n = iter(range(1000))
        async def call(op, **args):
            reply = await driver.handle({"id": next(n), "op": op, "args": args})
            assert reply["ok"], reply
        await call("hello", protocol=1, compressUrl="http://127.0.0.1:9/", thresholds={"game": 400})
        await call("create_game", game="g")
        await call("set_participants", game="g", participants=[{"id": "p", "human": True}])
        for i in range(4):
            await call("record_round", game="g", input=f"in {i}", output="out " * 40)
        await call("generate", game="g")
        await call("checkpoint", game="g")
        await call("duplicate", game="g", into="h")
        if shared:  # the ownership ops: a lease taken and ended, off the loop
            await call("open_game", game="g", takeover=True)
            await call("release_game", game="g")
            await call("open_game", game="g")
        await call("telemetry", game="g")
        await call("restart")
        await call("dump", game="h")
        await call("forget_games", games=["h"])
        await call("shutdown")

    which = sys.argv[2]
    scenario = {
        "engine": engine_scenario,
        "driver": driver_scenario,
        "shared": lambda root: driver_scenario(root, shared=True),
    }[which]
    for run in (1, 2):
        recording = run == 2
        asyncio.run(scenario(tempfile.mkdtemp()))
    print(json.dumps(seen, sort_keys=True))
    """
)


def _on_loop(which: str) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT), which],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return seen


@pytest.mark.req("JF-CONC-006")
def test_the_engine_over_file_stores_does_no_io_on_the_loop() -> None:
    assert _on_loop("engine") == {}


@pytest.mark.req("JF-CONC-006")
def test_the_driver_does_no_io_on_the_loop() -> None:
    """A new game's folder, participants, telemetry appends and reads, the scan of the
    state directory and every store: all off the loop."""
    assert _on_loop("driver") == {}


@pytest.mark.req("JF-CONC-006")
def test_the_shared_driver_does_no_io_on_the_loop() -> None:
    """`--state DIR --shared` (R95): leases, tokens, fenced writes and telemetry all off
    the loop."""
    assert _on_loop("shared") == {}
