"""`SyncGameEngine` is typed as strictly as `GameEngine`: every coroutine method of the
engine is a blocking method with the same parameters and the awaited return type, and mypy
rejects wrong arguments (`record_round(1, None)`) on the facade as on the engine."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

from jfsm.engine import GameEngine
from jfsm.sync import SyncGameEngine

ROOT = Path(__file__).resolve().parents[2]


def _coroutine_methods() -> list[str]:
    return [
        name
        for name, member in inspect.getmembers(GameEngine)
        if not name.startswith("_") and inspect.iscoroutinefunction(member)
    ]


def test_every_coroutine_method_is_declared_with_the_engines_signature() -> None:
    names = _coroutine_methods()
    assert {"record_round", "before_generation", "duplicate", "write"} <= set(names)
    for name in names:
        ours = inspect.signature(getattr(SyncGameEngine, name))
        theirs = inspect.signature(getattr(GameEngine, name))
        assert list(ours.parameters.values()) == list(theirs.parameters.values()), name
        if name != "duplicate":  # which returns the blocking facade of the new game
            assert ours.return_annotation == theirs.return_annotation, name


def test_mypy_rejects_wrong_arguments_on_the_facade_as_on_the_engine(tmp_path: Path) -> None:
    program = tmp_path / "embed.py"
    program.write_text(
        "from jfsm import FileStore, HttpCompressor, GameEngine, SyncGameEngine\n"
        "engine = GameEngine(FileStore.open_sync('g'), HttpCompressor('http://x'), game_id='g')\n"
        "with SyncGameEngine(engine) as game:\n"
        "    ok: dict[str, int] = game.record_round('in', 'out')\n"
        "    report = game.before_generation()\n"
        "    game.record_round(1, None)\n"
        "    game.record_rounds('a', 'b')\n"
        "    length: int = game.canonical_text()\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--hide-error-context", str(program)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    lines = sorted({int(line.split(":")[1]) for line in errors})
    assert lines == [6, 7, 8], done.stdout + done.stderr  # and none on lines 1-5
    assert any('"record_round"' in e and '"int"' in e for e in errors), errors
