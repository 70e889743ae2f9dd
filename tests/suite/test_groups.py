"""The suite's record of what it started (`jfsm_conformance.client.groups`, decision R193)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from jfsm_conformance.client import groups

# A process that holds the record's lock (as `started` does, in the main thread) when its
# SIGTERM lands: the handler must end its group, remove its folder and exit 143, not wait on
# a lock its own thread holds.
_HOLDER = r"""
import os, signal, subprocess, sys
from jfsm_conformance.client import groups

groups.exit_on_signal()
folder = groups.temporary_folder("jfsm-groups-test-")
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                         start_new_session=True)
groups.started(child.pid)
print(folder, child.pid, flush=True)
with groups._lock:
    os.kill(os.getpid(), signal.SIGTERM)
    signal.pause()
"""


def test_a_signal_while_the_record_is_locked_still_ends_everything(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, TMPDIR=str(tmp_path)),
    )
    try:
        assert proc.stdout is not None
        folder, child = proc.stdout.readline().split()
        assert proc.wait(30) == 128 + signal.SIGTERM
    finally:
        proc.kill()
    assert not Path(folder).exists()
    assert not list(tmp_path.iterdir())
    outlived = groups.alive(int(child))  # a zombie, which its new parent reaps, is gone
    if outlived:
        os.killpg(int(child), signal.SIGKILL)
    assert not outlived, "the group the process started outlived it"


# A SIGTERM that lands while a process is being started: held back until the process's group
# is recorded, then handled, so the process is ended with the others, never left running.
_SPAWNER = r"""
import os, signal, subprocess, sys, time
from jfsm_conformance.client import groups

groups.exit_on_signal()
with groups.spawning():
    os.kill(os.getpid(), signal.SIGTERM)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             start_new_session=True)
    print(child.pid, flush=True)
    groups.started(child.pid)
time.sleep(60)
"""


def test_a_signal_during_a_spawn_waits_for_its_group_and_ends_it() -> None:
    proc = subprocess.Popen([sys.executable, "-c", _SPAWNER], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert proc.wait(30) == 128 + signal.SIGTERM
    finally:
        proc.kill()
    assert line.strip().isdigit(), "the signal was handled before the spawn it came during"
    child = int(line)
    outlived = groups.alive(child)
    if outlived:
        os.killpg(child, signal.SIGKILL)
    assert not outlived, "the process started while the signal was held back outlived it"


# A stdio driver killed and started again five times, then closed: the client's reader and
# exit-watcher tasks of every process it killed must have ended before its loop closes.
_RESTARTS = r"""
import sys
from jfsm_conformance.client.driver import DriverClient

client = DriverClient(f"stdio:{sys.executable} -m jfsm.cli driver")
client.call("hello", {"protocol": 1, "compressUrl": "http://127.0.0.1:9"})
for _ in range(5):
    client.restart()
client.close()
print("closed", flush=True)
"""


def test_a_killed_stdio_driver_leaves_no_task_of_the_client_pending() -> None:
    """`_Stdio.kill` waits for the tasks it cancels: Python said "Task was destroyed but it is
    pending" for the exit watcher of a killed driver once the client's loop closed (in about
    2 of 3 restarts before)."""
    done = subprocess.run(
        [sys.executable, "-c", _RESTARTS], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "closed", done.stderr[-2000:]
    assert "pending" not in done.stderr, done.stderr[-2000:]
