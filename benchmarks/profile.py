"""Profiles of the hot paths, for the report (not part of `benchmarks.run`).

    uv run --with pyinstrument python -m benchmarks.profile --out DIR [--only NAME ...]

pyinstrument is installed ad hoc by `uv run --with` and is not a project dependency. Each
target runs its hot path many times under the sampling profiler and writes a text profile
to `DIR/<name>.txt`. The profiles taken at commit `d027c68` are kept as past measurements
in `docs/benchmarks/history/profiles/`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.data import MiB, Text, build_store
from benchmarks.durable import _prefill, projection_sequence
from benchmarks.footprint import MEASURED_INPUT, MEASURED_OUTPUT, NaiveStore
from jfsm.engine import GameEngine
from jfsm.stores.file.store import FileStore
from jfsm.testing import FakeCompressor


def _profile(name: str, out: Path, setup: Callable[[], Any], body: Callable[[Any], None]) -> None:
    from pyinstrument import Profiler

    state = setup()
    profiler = Profiler(interval=0.0001)
    profiler.start()
    body(state)
    profiler.stop()
    text = profiler.output_text(unicode=True, color=False, show_all=False)
    (out / f"{name}.txt").write_text(text, encoding="utf-8")
    print(f"== {name}\n{text}")


def _engine(mib: float, stack: int) -> GameEngine:
    built = build_store(int(mib * MiB), stack)
    return GameEngine(built.store, FakeCompressor(), game_id="bench")


def record_round_29(out: Path) -> None:
    text = Text(99)
    pairs = [(text(MEASURED_INPUT), text(MEASURED_OUTPUT)) for _ in range(64)]

    async def body(engine: GameEngine) -> None:
        for i in range(600):
            await engine.record_round(*pairs[i % 64])

    _profile("record_round_29MiB", out, lambda: _engine(29, 10_000), lambda e: asyncio.run(body(e)))


def before_generation_29(out: Path) -> None:
    async def body(engine: GameEngine) -> None:
        for _ in range(20_000):
            await engine.before_generation()

    _profile(
        "before_generation_29MiB_299999",
        out,
        lambda: _engine(29, 299_999),
        lambda e: asyncio.run(body(e)),
    )


def naive_29(out: Path) -> None:
    text = Text(99)

    def setup() -> GameEngine:
        built = build_store(int(29 * MiB), 10_000)
        return GameEngine(
            NaiveStore(built.store.image.values_bytes()), FakeCompressor(), game_id="bench"
        )

    async def body(engine: GameEngine) -> None:
        for _ in range(3):
            await engine.record_round(text(MEASURED_INPUT), text(MEASURED_OUTPUT))

    _profile("naive_record_round_29MiB", out, setup, lambda e: asyncio.run(body(e)))


def filestore_commit(out: Path) -> None:
    root = tempfile.mkdtemp(prefix="jfsm-prof-")

    def setup() -> tuple[FileStore, list[Any]]:
        store = FileStore.open_sync(os.path.join(root, "s"))
        store.commit_sync(_prefill(1500, 3))
        store.checkpoint_sync()
        return store, projection_sequence(2000, 1500)

    def body(state: tuple[FileStore, list[Any]]) -> None:
        store, sequence = state
        for _, projection in sequence:
            store.commit_sync(projection)
        store.close_sync()

    try:
        _profile("filestore_commit", out, setup, body)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def filestore_open(out: Path) -> None:
    root = tempfile.mkdtemp(prefix="jfsm-prof-")

    def setup() -> str:
        built = build_store(int(29.5 * MiB), 10_000, seed=5)
        directory = os.path.join(root, "s")
        with FileStore.open_sync(directory) as store:
            store.seed_sync(built.store.image.values_bytes())
        return directory

    def body(directory: str) -> None:
        for _ in range(3):
            FileStore.open_sync(directory).close_sync()

    try:
        _profile("filestore_open_29.5MiB", out, setup, body)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def engine_open(out: Path) -> None:
    def setup() -> Any:
        return build_store(int(29 * MiB), 10_000).store

    def body(store: Any) -> None:
        for _ in range(3):
            GameEngine(store, FakeCompressor(), game_id="bench")

    _profile("engine_init_29MiB", out, setup, body)


def suite_quota(out: Path) -> None:
    """The quick profile's slowest part: the quota scenario (fills a game to the quota
    through the protocol, verifying every step), in process."""
    from jfsm_conformance.scenarios import SCENARIOS
    from jfsm_conformance.steps.session import Session
    from jfsm_conformance.verify.checks import Ledger

    scenario = next(s for s in SCENARIOS if s.name == "quota")

    def setup() -> Session:
        return Session("python:jfsm.driver:reference_driver", Ledger())

    def body(session: Session) -> None:
        try:
            scenario.run(session)
        finally:
            session.close()

    _profile("suite_quota_scenario", out, setup, body)


def suite_machine(out: Path) -> None:
    """The suite's state machine at the spec thresholds, in process."""
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis.stateful import run_state_machine_as_test

    from jfsm_conformance.machines.memory import machine_factory
    from jfsm_conformance.steps.session import Session
    from jfsm_conformance.verify.checks import Ledger

    def setup() -> Session:
        return Session("python:jfsm.driver:reference_driver", Ledger())

    def body(session: Session) -> None:
        conf = settings(
            max_examples=6,
            stateful_step_count=20,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.explicit, Phase.generate],
        )
        try:
            run_state_machine_as_test(machine_factory(session), settings=conf)
        finally:
            session.close()

    _profile("suite_machine_spec_thresholds", out, setup, body)


TARGETS = {
    "record_round": record_round_29,
    "before_generation": before_generation_29,
    "naive": naive_29,
    "filestore_commit": filestore_commit,
    "filestore_open": filestore_open,
    "engine_init": engine_open,
    "suite_quota": suite_quota,
    "suite_machine": suite_machine,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.profile")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", nargs="*", choices=sorted(TARGETS))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only or TARGETS:
        TARGETS[name](args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
