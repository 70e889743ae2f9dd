"""Section 3: conformance suite throughput against the reference engine.

- Driver round trips: `record_round` and a not-due `generate` through the suite's
  `DriverClient`, in process (`python:jfsm.driver:reference_driver`) and over stdio (`jfsm
  driver` in a subprocess), interleaved call by call.
- Machine steps per second: the suite's Hypothesis state machine
(`jfsm_conformance.machines.memory`)
  over a `Session`, at the spec thresholds and at the small thresholds the quick profile
  also uses, in process and over stdio, interleaved run by run. A step is one `Session`
  operation (each verifies the whole observable state against the oracle).
- The main job (`jfsm conformance`: the quick profile, its default driver and companions)
  is the quick profile's "after" run below: its wall time and peak RSS (the suite's process,
  and the sum over it and the processes it started, sampled every 0.5 s) are a row of the
  Goals table (issue 32).
- The quick and standard profiles before and after issue 14's speed and memory round, one
  after the other in the same run: `jfsm conformance --profile P` in a fresh subprocess (the
  suite's process: suite, fake compress.v2 and the in-process reference driver) with the
  code of commit `BEFORE_COMMIT` (extracted with `git archive`, put first on `PYTHONPATH`)
  and its default driver, then with this commit and its default driver (decision R54).
  Reported: wall time, peak RSS of that process (`ru_maxrss`), verified steps and protocol
  messages per second (messages counted by wrapping `DriverClient.start` in the child).
- The thorough profile (this commit), whole (or, with `THOROUGH_LIMIT_S` set, stopped by
  SIGTERM after that long, leaving a partial report, R55): its peak RSS and its RSS sampled
  every 5 s (flat, or not).

Everything is imported defensively: when the suite (or a part of it) is missing, the
section says "suite not available" with the reason instead of numbers.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

from benchmarks.common import Samples, now_ns, ratio, summarize
from benchmarks.data import Text

__all__ = ["run"]

IN_PROCESS = "python:jfsm.driver:reference_driver"
STDIO = f"stdio:{sys.executable} -m jfsm.cli driver"

FULL = {
    "roundtrip_calls": 400,
    "machine_rounds": 3,
    "spec_examples": 6,
    "spec_steps": 20,
    "small_examples": 10,
    "small_steps": 25,
    "quick_profile": True,
    "standard_profile": True,
}
QUICK = {
    "roundtrip_calls": 10,
    "machine_rounds": 1,
    "spec_examples": 1,
    "spec_steps": 4,
    "small_examples": 1,
    "small_steps": 4,
    "quick_profile": False,
    "standard_profile": False,
}


@contextlib.contextmanager
def _quiet_logging() -> Iterator[None]:
    """Keep the engine's warnings (compress.v2 attempts the machines script to fail) off
    stderr: a root handler stops `logging.lastResort` from printing them."""
    root = logging.getLogger()
    handler = logging.NullHandler()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)


def _unavailable(reason: str) -> dict[str, Any]:
    return {"available": False, "reason": reason}


def _roundtrips(cfg: dict[str, Any]) -> dict[str, Any]:
    from jfsm_conformance.client.driver import DriverClient
    from jfsm_conformance.fake.compress import FakeCompress

    fake = FakeCompress().start()
    clients: dict[str, Any] = {}
    try:
        for name, spec in (("in_process", IN_PROCESS), ("stdio", STDIO)):
            client = DriverClient(spec, timeout=60)
            clients[name] = client
            reply = client.call("hello", {"protocol": 1, "compressUrl": fake.url})
            if not reply.ok:
                raise RuntimeError(f"hello refused by {spec}: {reply}")
            client.call("create_game", {"game": "bench"})
        text = Text(5)
        pairs = [(text(60), text(240)) for _ in range(32)]
        samples = Samples()
        names = list(clients)
        for i in range(cfg["roundtrip_calls"]):
            order = names if i % 2 == 0 else names[::-1]
            for name in order:
                client = clients[name]
                user, assistant = pairs[i % 32]
                t0 = now_ns()
                reply = client.call(
                    "record_round", {"game": "bench", "input": user, "output": assistant}
                )
                samples.add(f"{name}:record_round", now_ns() - t0)
                t0 = now_ns()
                gen = client.call("generate", {"game": "bench"})
                samples.add(f"{name}:generate", now_ns() - t0)
                if not (reply.ok and gen.ok):
                    raise RuntimeError(f"{name}: {reply} {gen}")
        out: dict[str, Any] = {}
        for name in names:
            for op in ("record_round", "generate"):
                s = summarize(samples[f"{name}:{op}"])
                s["ops_per_s"] = round(1e6 / s["median_us"], 1) if s["median_us"] else None
                out[f"{name}:{op}"] = s
        out["stdio_over_in_process_record_round"] = ratio(
            out["stdio:record_round"]["median_us"], out["in_process:record_round"]["median_us"]
        )
        return out
    finally:
        for client in clients.values():
            with contextlib.suppress(Exception):
                client.call("shutdown", {}, timeout=10)
            client.close()
        fake.close()


def _machine_runs(cfg: dict[str, Any]) -> dict[str, Any]:
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis.stateful import run_state_machine_as_test

    from jfsm_conformance.machines.memory import machine_factory
    from jfsm_conformance.run.runner import SMALL_THRESHOLDS
    from jfsm_conformance.steps.session import Session
    from jfsm_conformance.verify.checks import Ledger

    configs = {
        "spec thresholds": (None, cfg["spec_examples"], cfg["spec_steps"]),
        "small thresholds": (SMALL_THRESHOLDS, cfg["small_examples"], cfg["small_steps"]),
    }
    sessions: dict[tuple[str, str], Any] = {}
    counters: dict[tuple[str, str], list[int]] = {}
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    errors: list[str] = []
    try:
        for label, (thresholds, _, _) in configs.items():
            for transport, spec in (("in_process", IN_PROCESS), ("stdio", STDIO)):
                session = Session(spec, Ledger(), thresholds=thresholds)
                count = [0, 0]  # steps, protocol messages sent
                original = session.record
                send = session.world.client.start

                def counted(
                    step: str, _orig: Any = original, _c: list[int] = count, **args: Any
                ) -> None:
                    _c[0] += 1
                    _orig(step, **args)

                def sent(op: str, args: Any, _orig: Any = send, _c: list[int] = count) -> Any:
                    _c[1] += 1
                    return _orig(op, args)

                session.record = counted  # type: ignore[method-assign]
                session.world.client.start = sent  # type: ignore[method-assign]
                sessions[(label, transport)] = session
                counters[(label, transport)] = count
        for rnd in range(cfg["machine_rounds"]):
            for label, (_, examples, steps) in configs.items():
                transports = ["in_process", "stdio"]
                if rnd % 2:
                    transports.reverse()
                for transport in transports:
                    session = sessions[(label, transport)]
                    count = counters[(label, transport)]
                    conf = settings(
                        max_examples=examples,
                        stateful_step_count=steps,
                        deadline=None,
                        database=None,
                        derandomize=True,
                        suppress_health_check=list(HealthCheck),
                        phases=[Phase.explicit, Phase.generate],
                    )
                    before_steps = count[0]
                    before_msgs = count[1]
                    t0 = now_ns()
                    try:
                        run_state_machine_as_test(machine_factory(session), settings=conf)
                        status = "pass"
                    except Exception as exc:  # a failing check is reported, not fatal
                        status = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                        errors.append(f"{label}/{transport}: {status}")
                        with contextlib.suppress(Exception):
                            session.recover()
                    seconds = (now_ns() - t0) / 1e9
                    done = count[0] - before_steps
                    msgs = count[1] - before_msgs
                    results.setdefault((label, transport), []).append(
                        {"steps": done, "messages": msgs, "seconds": seconds, "status": status}
                    )
    finally:
        for session in sessions.values():
            with contextlib.suppress(Exception):
                session.close()
    out = []
    for (label, transport), runs in results.items():
        rates = [r["steps"] / r["seconds"] for r in runs if r["seconds"] > 0]
        msg_rates = [r["messages"] / r["seconds"] for r in runs if r["seconds"] > 0]
        out.append(
            {
                "machine": label,
                "transport": transport,
                "runs": len(runs),
                "steps_per_run": [r["steps"] for r in runs],
                "steps_per_s": round(statistics.median(rates), 1) if rates else None,
                "messages_per_s": round(statistics.median(msg_rates), 1) if msg_rates else None,
                "seconds_per_run": round(statistics.median(r["seconds"] for r in runs), 2),
                "status": sorted({r["status"] for r in runs}),
            }
        )
    return {"runs": out, "errors": errors}


BEFORE_COMMIT = "e2e1584"  # the suite before issue 14's speed and memory round (R54-R56)
BEFORE_DRIVER = "python:jfsm.driver:durable_reference_driver"  # its default driver
THOROUGH_LIMIT_S = 0.0  # stop the thorough profile (SIGTERM) after this long; 0: run it all

# Runs the suite's CLI in this (child) process, counting the protocol messages the suite
# sends (`DriverClient.start`, the same in old and new code) and sampling VmRSS; writes one
# JSON object to the file named by JFSM_BENCH_OUT. With JFSM_BENCH_LIMIT, SIGTERM after that
# many seconds (the CLI writes a partial report and exits 2).
_WRAPPER = """
import json, os, resource, signal, sys, threading, time
from jfsm_conformance.client import driver as driver_client
messages = [0]
start = driver_client.DriverClient.start
def counted(self, op, args):
    messages[0] += 1
    return start(self, op, args)
driver_client.DriverClient.start = counted
samples = []
t0 = time.monotonic()
def sample():
    while True:
        with open("/proc/self/status") as f:
            rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        samples.append([round(time.monotonic() - t0, 1), round(rss / 1024, 1)])
        time.sleep(5)
threading.Thread(target=sample, daemon=True).start()
tree_peak = [0]
def tree_rss():
    # this process and every process below it (the companions, R92), summed: KiB
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    tree, todo = set(), [os.getpid()]
    while todo:
        pid = todo.pop()
        tree.add(pid)
        todo.extend(p for p, parent in parents.items() if parent == pid and p not in tree)
    total = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
        except (OSError, ValueError, IndexError):
            pass
    return total
def sample_tree():
    while True:
        tree_peak[0] = max(tree_peak[0], tree_rss())
        time.sleep(0.5)
threading.Thread(target=sample_tree, daemon=True).start()
limit = float(os.environ.get("JFSM_BENCH_LIMIT") or 0)
if limit:
    threading.Timer(limit, os.kill, (os.getpid(), signal.SIGTERM)).start()
from jfsm.cli import main
code = main(sys.argv[1:])
wall = time.monotonic() - t0
# VmHWM: this process image's own peak. ru_maxrss would also count the parent's pages at
# the fork (Linux keeps the pre-exec high-water mark), the benchmark process's, not ours.
try:
    with open("/proc/self/status") as f:
        peak = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
except (OSError, StopIteration):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with open(os.environ["JFSM_BENCH_OUT"], "w") as f:
    json.dump({"code": code, "wall": wall, "peak_kib": peak, "messages": messages[0],
               "rss": samples, "tree_peak_kib": tree_peak[0]}, f)
os._exit(code)
"""


def _before_tree() -> tuple[str | None, str]:
    """The suite at `BEFORE_COMMIT` (`git archive` into a temporary directory), or None and
    why not."""
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tree = tempfile.mkdtemp(prefix="jfsm-bench-before-")
    try:
        archive = subprocess.run(
            ["git", "-C", root, "archive", BEFORE_COMMIT], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", tree], input=archive.stdout, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        shutil.rmtree(tree, ignore_errors=True)
        return None, f"git archive {BEFORE_COMMIT} failed: {exc}"
    return tree, ""


def _profile_run(
    profile: str, driver: str | None = None, tree: str | None = None, limit: float = 0.0
) -> dict[str, Any]:
    """`jfsm conformance --profile PROFILE` in a fresh subprocess (the code of `tree` when
    given): wall time, peak RSS of the suite's process, steps and messages per second."""
    import subprocess

    report_dir = tempfile.mkdtemp(prefix="jfsm-bench-conformance-")
    out_path = os.path.join(report_dir, "bench.json")
    argv = ["conformance", "--profile", profile, "--report-dir", report_dir]
    if driver:
        argv += ["--driver", driver]
    env = dict(os.environ, JFSM_BENCH_OUT=out_path, JFSM_BENCH_LIMIT=str(limit or ""))
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([tree, os.path.join(tree, "conformance")])
    try:
        done = subprocess.run(
            [sys.executable, "-c", _WRAPPER, *argv],
            capture_output=True,
            text=True,
            timeout=3600,
            env=env,
            cwd=report_dir,  # not the checkout: `-c` puts the working directory first
        )
        with open(out_path, encoding="utf-8") as f:
            got = json.load(f)
        durations: dict[str, float] = {}
        counts: dict[str, Any] = {}
        steps = None
        report: dict[str, Any] = {}
        path = os.path.join(report_dir, "report.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                report = json.load(f)
            durations = report.get("durations_s") or {}
            counts = report.get("counts") or {}
            steps = sum((report.get("exercised") or {}).get("step", {}).values())
        wall = float(got["wall"])
        top = sorted(durations.items(), key=lambda kv: -kv[1])[:5]
        return {
            "run": True,
            "driver": driver or "(default)",
            "code": f"commit {BEFORE_COMMIT}" if tree else "this commit",
            "exit_code": int(got["code"]),
            "wall_s": round(wall, 2),
            "peak_rss_mib": round(int(got["peak_kib"]) / 1024, 1),
            "tree_peak_rss_mib": round(int(got.get("tree_peak_kib", 0)) / 1024, 1),
            "steps": steps,
            "messages": got["messages"],
            "steps_per_s": round(steps / wall, 1) if steps else None,
            "messages_per_s": round(got["messages"] / wall, 1),
            "rss_mib_samples": got["rss"],
            "partial": report.get("partial"),
            "phase": report.get("phase"),
            "counts": counts,
            "rules": (report.get("exercised") or {}).get("rule", {}),
            "rules_idle": (report.get("exercised") or {}).get("rule_idle", {}),
            "slowest_parts_s": {k: round(v, 2) for k, v in top},
            "stderr_tail": done.stderr.splitlines()[-3:],
        }
    finally:
        shutil.rmtree(report_dir, ignore_errors=True)


def _before_after(profile: str) -> dict[str, Any]:
    """The profile before (`BEFORE_COMMIT`, its default driver) and after (this commit, the
    default driver), one after the other in this run."""
    tree, why = _before_tree()
    out: dict[str, Any] = {"run": True}
    try:
        if tree is None:
            out["before"] = {"run": False, "reason": why}
        else:
            out["before"] = _profile_run(profile, BEFORE_DRIVER, tree)
        out["after"] = _profile_run(profile)
    finally:
        if tree is not None:
            shutil.rmtree(tree, ignore_errors=True)
    before, after = out["before"], out["after"]
    if before.get("run") and after.get("run"):
        out["wall_ratio"] = ratio(before["wall_s"], after["wall_s"])
        out["rss_ratio"] = ratio(before["peak_rss_mib"], after["peak_rss_mib"])
    return out


def _quick_profile(cfg: dict[str, Any]) -> dict[str, Any]:
    if not cfg["quick_profile"]:
        return {"run": False, "reason": "not run with --quick (it takes tens of seconds)"}
    return _before_after("quick")


def _standard_profile(cfg: dict[str, Any]) -> dict[str, Any]:
    if not cfg["standard_profile"]:
        return {"run": False, "reason": "not run with --quick (it takes minutes)"}
    return _before_after("standard")


def _thorough_profile(cfg: dict[str, Any]) -> dict[str, Any]:
    if not cfg["standard_profile"]:
        return {"run": False, "reason": "not run with --quick (it takes minutes)"}
    return {**_profile_run("thorough", limit=THOROUGH_LIMIT_S), "limit_s": THOROUGH_LIMIT_S}


def run(quick: bool = False, log: Any = print) -> dict[str, Any]:
    cfg = QUICK if quick else FULL
    try:
        import jfsm_conformance.client.driver  # noqa: F401
    except ImportError as exc:
        return {"config": dict(cfg), "available": False, "reason": f"suite not available: {exc}"}
    out: dict[str, Any] = {"config": dict(cfg), "available": True}
    for key, fn in (
        ("roundtrips", _roundtrips),
        ("machines", _machine_runs),
        ("quick_profile", _quick_profile),
        ("standard_profile", _standard_profile),
        ("thorough_profile", _thorough_profile),
    ):
        try:
            with _quiet_logging():
                out[key] = fn(cfg)
        except ImportError as exc:
            out[key] = _unavailable(f"suite not available: {exc}")
        except Exception as exc:  # report, never fake numbers
            out[key] = _unavailable(f"failed: {type(exc).__name__}: {exc}")
        log(f"  suite {key}: done")
    return out
