"""The reference engine's own processes in the default run (decision R92).

`jfsm conformance` without `--driver` judges the reference engine in process, where it
cannot show what only a process shows: HTTP requests (JF-ERR-011, JF-ERR-012, JF-ERR-017),
a state directory the suite chooses (JF-ERR-016) and several workers on one shared store
(JF-STORE-010 to JF-STORE-014). So the default run then starts the reference driver's own
commands, one per transport, and runs there what the in-process driver had to skip, in the
same ledger, so that the main job's verdicts cover every requirement a driver can show:

- `jfsm driver --http 0 --state DIR` on 127.0.0.1, with a fresh random token (in the
  environment, never on the command line), for the scenarios that need HTTP;
- `jfsm driver --state {state}` over stdio, for those that need a stdio command naming
  `{state}`;
- K processes of `jfsm driver --state DIR --shared --owner main-{worker}` (one directory
  for all of them) for the workers machine.

Each companion is the same engine as the default driver; only its transport differs. A
companion that cannot be started is a harness error (exit 2) naming it. A run with
`--driver` never starts companions: an implementation under test brings its own transports.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from jfsm_conformance.client import groups
from jfsm_conformance.client.driver import HarnessError
from jfsm_conformance.steps.session import Session

__all__ = ["lanes"]

START_TIMEOUT = 60.0
PYTHON = shlex.quote(sys.executable)


@contextlib.contextmanager
def _http_driver() -> Iterator[str]:
    """`jfsm driver --http 0` on a fresh state directory: its URL, with `JFSM_DRIVER_TOKEN`
    set in this process for the suite's HTTP client meanwhile."""
    token = secrets.token_urlsafe(24)
    state = groups.temporary_folder("jfsm-companion-http-")
    env = dict(os.environ, JFSM_DRIVER_TOKEN=token)
    argv = [sys.executable, "-m", "jfsm.cli", "driver", "--http", "0", "--state", state]
    with groups.spawning():  # a signal waits until its group is recorded (R193)
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,  # a group of its own, which the suite ends (R193)
        )
        groups.started(proc.pid)
    previous = os.environ.get("JFSM_DRIVER_TOKEN")
    try:
        url = _announced_url(proc)
        os.environ["JFSM_DRIVER_TOKEN"] = token
        yield url
    finally:
        if previous is None:
            os.environ.pop("JFSM_DRIVER_TOKEN", None)
        else:
            os.environ["JFSM_DRIVER_TOKEN"] = previous
        groups.end(proc.pid)  # SIGTERM to its group, a grace, SIGKILL
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        shutil.rmtree(state, ignore_errors=True)


def _announced_url(proc: subprocess.Popen[bytes]) -> str:
    """The `http://127.0.0.1:PORT` the driver prints on its first stderr line; the rest of
    its stderr is drained in the background. `HarnessError` if it does not say it in time."""
    assert proc.stderr is not None
    found: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            if not found:
                found.append(raw.decode("utf-8", "replace"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + START_TIMEOUT
    while not found and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    match = re.search(r"http://127\.0\.0\.1:\d+", found[0]) if found else None
    if match is None:
        raise HarnessError(
            "the reference HTTP driver (jfsm driver --http 0) did not announce its address: "
            + (found[0].strip() if found else f"exit status {proc.poll()}")
        )
    return match[0]


def _scenarios_over(lane: Any, label: str, spec: str, names: list[str]) -> None:
    """Run the scenarios `names` against a new session on `spec`, in the lane's records."""
    lane.o.progress(f"companion {label}: {', '.join(names)}")
    lane.companions[label] = ", ".join(names)
    lane.current = f"the start of companion {label}"
    session = Session(
        spec, lane.ledger, timeout=lane.o.op_timeout, hello_timeout=lane.o.hello_timeout
    )
    try:
        for name in names:
            lane.unskip(name)
        lane.scenarios(session, only=set(names), label=f"companion {label}")
        lane.unsupported.update(session.world.unsupported)
    finally:
        session.close()


def _over_http(names: list[str]) -> Callable[[Any], None]:
    def body(lane: Any) -> None:
        lane.current = "the start of companion over HTTP (jfsm driver --http)"
        with _http_driver() as url:
            _scenarios_over(lane, "over HTTP (jfsm driver --http)", url, names)

    return body


def _over_state(names: list[str]) -> Callable[[Any], None]:
    def body(lane: Any) -> None:
        stdio = f"stdio:{PYTHON} -m jfsm.cli driver --state {{state}}"
        _scenarios_over(lane, "over stdio (jfsm driver --state)", stdio, names)

    return body


def _workers(lane: Any) -> None:
    label = f"machine workers (K={lane.o.workers})"
    shared = groups.temporary_folder("jfsm-companion-shared-")
    try:
        lane.unskip(label)
        spec = (
            f"stdio:{PYTHON} -m jfsm.cli driver --state {shlex.quote(shared)} --shared "
            "--owner main-{worker}"
        )
        lane.current = f"companion {label}"
        lane.companions[f"{label} (jfsm driver --state DIR --shared)"] = "the workers machine"
        lane.workers({"sharedStore": True}, spec=spec)
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def lanes(run: Any, needing: dict[str, list[str]], *, workers: bool) -> None:
    """Add to `run` (the runner's root `_Run`) one lane per companion (decision R170), in
    the serial order: over HTTP the scenarios `needing["http"]`, over stdio with `{state}`
    those of `needing["state"]` (each skipped by the run's own driver for its transport),
    and the workers machine if `workers` (the run's driver cannot run it)."""
    if needing["http"]:
        run.lane(_over_http(needing["http"]))
    if needing["state"]:
        run.lane(_over_state(needing["state"]))
    if workers:
        run.lane(_workers)
