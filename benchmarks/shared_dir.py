"""A state directory shared by processes, before and after ownership epochs (decision R173).

Two builds of jfsm side by side in one run: this one (`sys.executable`) and an older one
(`--before PYTHON`: the Python of an environment where `jfsm` is the older build, such as
another checkout's `.venv/bin/python`). Each measurement runs in processes of each build,
interleaved, on the same file system:

- **rounds/s**: one process per build owns a game of its own shared directory
  (`FileStore.open_shared`) and commits round-like projections (a ~2 KiB value each) in
  batches; the batches alternate between the builds (A B B A ...) and the after/before
  ratio of commits/s is taken per pair of batches, then its median. A store of one process
  (`FileStore.open_sync`, this build) runs alongside as the yardstick.
- **opens/s**: the same processes open the game again and again (close, plain open).
- **takeover of a frozen owner**: an owner stopped with `SIGSTOP` between the write of a
  record and its sync (the older build holds the game's lock there), and a takeover from
  another process timed until it returns. The older build waits for the lease to run out
  and ends the owner (R123); this one seals it (R173). Leases of `--lease` seconds.

`uv run python -m benchmarks.shared_dir --before ../main/.venv/bin/python` prints a table
and writes `--out` (JSON) if given. Timings are never asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: the processes of the benchmark, run by either build: commands on stdin, answers on stdout
WORKER = r"""
import json, os, signal, sys, time
from jfsm.projection import Projection
from jfsm.stores.file.store import FileStore

root, role, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
folder = os.path.join(root, "g")
os.makedirs(folder, exist_ok=True)
value = "x" * 2048

def shared(takeover=False):
    return FileStore.open_shared(os.path.join(folder, "store"), game="g", lease_folder=folder,
                                 root=root, owner=role, takeover=takeover, lease_seconds=seconds)

def say(answer):
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()

if role == "taker":
    began = time.perf_counter()
    store = shared(takeover=True)
    say({"seconds": time.perf_counter() - began})
    store.close_sync()
    sys.exit(0)
store = FileStore.open_sync(os.path.join(folder, "store")) if role == "plain" else shared()
n = 0
for line in sys.stdin:
    words = line.split()
    if words[0] == "commits":
        began = time.perf_counter_ns()
        for _ in range(int(words[1])):
            n += 1
            store.commit_sync(Projection.of({f"jfRounds.{n}": {"input": value, "output": "ok"}}))
        say({"ns": time.perf_counter_ns() - began})
    elif words[0] == "opens":
        began = time.perf_counter_ns()
        for _ in range(int(words[1])):
            store.close_sync()
            store = shared()
        say({"ns": time.perf_counter_ns() - began})
    elif words[0] == "freeze":
        import jfsm.stores.file.fsio as fsio
        try:
            import jfsm.stores.file.ownership as ownership
        except ImportError:
            ownership = None
        def frozen(fd, _real=os.fdatasync):
            os.kill(os.getpid(), signal.SIGSTOP)
            _real(fd)
        fsio._fdatasync = frozen
        if ownership is not None:
            ownership._fdatasync = frozen
        say({"ok": True})
        store.commit_sync(Projection.of({"frozen": 1}))
        say({"ok": True})
"""


class Process:
    """One benchmark process of a build."""

    def __init__(self, python: str, root: Path, role: str, lease: float) -> None:
        self.proc = subprocess.Popen(
            [python, "-c", WORKER, str(root), role, str(lease)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
            cwd=root,  # never this checkout: `-c` would import its `jfsm` for either build
        )

    def ask(self, command: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"a benchmark process ended (exit {self.proc.poll()})")
        return json.loads(line)

    def end(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGCONT)  # its own group, which we made
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(60)


def _stopped(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


def rates(builds: dict[str, str], base: Path, batches: int, batch: int, lease: float) -> Any:
    """Commits/s and opens/s per build, interleaved batch by batch."""
    roots = {name: Path(tempfile.mkdtemp(dir=base, prefix=f"{name}-")) for name in builds}
    procs = {name: Process(python, roots[name], "a", lease) for name, python in builds.items()}
    plain_root = Path(tempfile.mkdtemp(dir=base, prefix="plain-"))
    plain = Process(sys.executable, plain_root, "plain", lease)
    commits: dict[str, list[float]] = {name: [] for name in [*builds, "plain"]}
    opens: dict[str, list[float]] = {name: [] for name in builds}
    try:
        order = list(builds)
        for i in range(batches):
            for name in order if i % 2 == 0 else reversed(order):
                ns = procs[name].ask(f"commits {batch}")["ns"]
                commits[name].append(batch / (ns / 1e9))
                ns = procs[name].ask(f"opens {max(1, batch // 10)}")["ns"]
                opens[name].append(max(1, batch // 10) / (ns / 1e9))
            commits["plain"].append(batch / (plain.ask(f"commits {batch}")["ns"] / 1e9))
    finally:
        for each in [*procs.values(), plain]:
            each.end()
        for root in [*roots.values(), plain_root]:
            shutil.rmtree(root, ignore_errors=True)
    return commits, opens


def takeovers(builds: dict[str, str], base: Path, repeats: int, lease: float) -> Any:
    """Seconds a takeover takes while the owner is stopped mid-write, per build."""
    seconds: dict[str, list[float]] = {name: [] for name in builds}
    for _ in range(repeats):
        for name, python in builds.items():
            root = Path(tempfile.mkdtemp(dir=base, prefix=f"frozen-{name}-"))
            owner = Process(python, root, "a", lease)
            try:
                owner.ask("commits 3")
                owner.ask("freeze")
                deadline = time.monotonic() + 60
                while not _stopped(owner.proc.pid):
                    if time.monotonic() > deadline:
                        raise RuntimeError("the owner never stopped")
                    time.sleep(0.005)
                taker = Process(python, root, "taker", lease)
                try:
                    assert taker.proc.stdout is not None
                    seconds[name].append(json.loads(taker.proc.stdout.readline())["seconds"])
                finally:
                    taker.end()
            finally:
                owner.end()
                shutil.rmtree(root, ignore_errors=True)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.shared_dir")
    parser.add_argument("--before", help="the Python of an environment with the older jfsm")
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--batch", type=int, default=100, help="commits a batch")
    parser.add_argument("--repeats", type=int, default=3, help="frozen-owner takeovers")
    parser.add_argument("--lease", type=float, default=2.0, help="lease seconds")
    parser.add_argument("--dir", default=None, help="where the directories go (a real disk)")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    builds = {"after": sys.executable}
    if args.before:
        builds = {"before": args.before, **builds}
    base = Path(tempfile.mkdtemp(dir=args.dir, prefix="jfsm-bench-shared-"))
    try:
        commits, opens = rates(builds, base, args.batches, args.batch, args.lease)
        frozen = takeovers(builds, base, args.repeats, args.lease)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    result: dict[str, Any] = {
        "commits_per_s": {k: round(statistics.median(v), 1) for k, v in commits.items()},
        "opens_per_s": {k: round(statistics.median(v), 1) for k, v in opens.items()},
        "frozen_takeover_s": {k: [round(s, 3) for s in v] for k, v in frozen.items()},
        "lease_s": args.lease,
        "batches": args.batches,
        "batch": args.batch,
        "loadavg": os.getloadavg(),
    }
    if "before" in builds:
        pairs = zip(commits["after"], commits["before"], strict=True)
        result["commits_after_over_before"] = round(statistics.median(a / b for a, b in pairs), 3)
        pairs = zip(opens["after"], opens["before"], strict=True)
        result["opens_after_over_before"] = round(statistics.median(a / b for a, b in pairs), 3)
    pairs = zip(commits["after"], commits["plain"], strict=True)
    result["commits_shared_over_plain"] = round(statistics.median(a / b for a, b in pairs), 3)
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
