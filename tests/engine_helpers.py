"""Shared helpers for the engine behaviour tests (`tests/engine/test_engine_*.py`).

No pytest-asyncio: an engine test is an `async def` wrapped by `async_test`, which runs it in
a fresh event loop with `asyncio.run`. The helpers only *read* the engine (its dump, its
telemetry, the fake's recorded requests); they never reach into its machines.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from jfsm.compressor import CompressionRequest, CompressionResult, ParticipantSource
from jfsm.engine import GameEngine
from jfsm.jcs import canonical_bytes
from jfsm.projection import Projection
from jfsm.stores.memory import MemoryStore
from jfsm.testing import FakeCompressor

GAME_KIND = "paxhistoria.game-agent-stack.v1"
CATALYST_KIND = "paxhistoria.catalyst-agent-stack.v1"
SPEC_QUOTA = 31_457_280

# Envelopes of the canonical text, written out here (not imported) so that a drift in the
# engine's own constants is caught by the tests instead of being shared by them.
SUMMARY_ENVELOPE = len("<summary>\n\n</summary>\n")
EXCHANGE_ENVELOPE = len("<user>\n\n</user>\n<assistant>\n\n</assistant>\n")
assert (SUMMARY_ENVELOPE, EXCHANGE_ENVELOPE) == (22, 42)


def async_test(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    """Run an `async def` test body in a fresh event loop."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


# -- an independent canonical text -------------------------------------------------------------
def expected_text(summary: str | None, exchanges: Iterable[tuple[str, str]]) -> str:
    """The canonical text of D3 / JF-TEXT-004, written independently of `jfsm.text`."""
    out = "" if summary is None else "<summary>\n" + summary + "\n</summary>\n"
    for user, assistant in exchanges:
        out += "<user>\n" + user + "\n</user>\n<assistant>\n" + assistant + "\n</assistant>\n"
    return out


# -- stores and compressors --------------------------------------------------------------------
class RecordingStore(MemoryStore):
    """A MemoryStore that remembers every projection committed through it (in order).

    Refused projections (quota) are not recorded: they were never committed.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commits: list[Projection] = []

    async def commit(self, projection: Projection) -> None:
        await super().commit(projection)
        self.commits.append(projection)


class AdaptiveFake(FakeCompressor):
    """A FakeCompressor whose scripted replies may depend on the request.

    `plan(fn, ...)` appends functions `request -> reply descriptor` (the suite's vocabulary,
    `jfsm_conformance.model.replies`); each call consumes one (before the plain `script`), so a
    test can answer, say, "a summary exactly as long as the submitted text" without knowing that
    length in advance. Everything else (recording, hold and
    release) is the FakeCompressor's.
    """

    def __init__(self) -> None:
        super().__init__()
        self.plans: deque[Callable[[CompressionRequest], dict[str, Any]]] = deque()

    def plan(self, *fns: Callable[[CompressionRequest], dict[str, Any]]) -> None:
        self.plans.extend(fns)

    async def compress(
        self, request: CompressionRequest, participants: ParticipantSource
    ) -> CompressionResult:
        if self.plans:
            self.script.appendleft(self.plans.popleft()(request))
        return await super().compress(request, participants)


class FlagChecked:
    """Wraps an engine so that the JF-INT-006 flag invariant is asserted after every
    awaited operation (successful or not); everything else passes through."""

    def __init__(self, engine: GameEngine) -> None:
        self.engine = engine

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.engine, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        async def checked(*args: Any, **kwargs: Any) -> Any:
            try:
                return await attr(*args, **kwargs)
            finally:
                assert_flag_invariant(self.engine)

        return checked


def make_engine(
    *,
    thresholds: dict[str, int] | None = None,
    quota: int | None = None,
    game_id: str = "g",
    recording: bool = False,
    fake: FakeCompressor | None = None,
    flag_checked: bool = False,
) -> tuple[Any, AdaptiveFake]:
    """A fresh engine over an empty in-memory store and an `AdaptiveFake`
    (wrapped in `FlagChecked` when `flag_checked`)."""
    kwargs: dict[str, Any] = {} if quota is None else {"quota": quota}
    store = RecordingStore(**kwargs) if recording else MemoryStore(**kwargs)
    comp = fake if fake is not None else AdaptiveFake()
    engine = GameEngine(store, comp, game_id=game_id, thresholds=thresholds)
    return (FlagChecked(engine) if flag_checked else engine), comp  # type: ignore[return-value]


async def wait_held(
    fake: FakeCompressor, n: int = 1, task: asyncio.Task[Any] | None = None
) -> None:
    """Yield to the loop until `fake.held >= n` (fail fast if `task` ends first)."""
    for _ in range(10_000):
        if fake.held >= n:
            return
        if task is not None and task.done():
            raise AssertionError(f"task ended before a call was held: {task.result()!r}")
        await asyncio.sleep(0)
    raise AssertionError(f"no held call after waiting (held={fake.held}, wanted {n})")


# -- reading the engine ------------------------------------------------------------------------
def snapshot(engine: GameEngine) -> bytes:
    """JCS bytes of the whole dump (store, change log, footprint)."""
    return canonical_bytes(engine.dump())


def store(engine: GameEngine) -> dict[str, Any]:
    return engine.dump()["store"]


def jf_items(engine: GameEngine) -> dict[str, Any]:
    return {k: v for k, v in store(engine).items() if k.startswith("jf")}


def game_items(engine: GameEngine) -> dict[str, Any]:
    return {k: v for k, v in store(engine).items() if k.startswith("jfGameStack.")}


def scene_items(engine: GameEngine, scene_id: str | None = None) -> dict[str, Any]:
    prefix = "jfCatalystStack." if scene_id is None else f"jfCatalystStack.{scene_id}."
    return {k: v for k, v in store(engine).items() if k.startswith(prefix)}


def game_chunks(engine: GameEngine) -> list[dict[str, Any]]:
    """Exact game chunks in seq order, read from the store."""
    items = game_items(engine)
    chunks = [v for k, v in items.items() if k.startswith("jfGameStack.chunk.")]
    for chunk in chunks:
        assert items[f"jfGameStack.chunk.{chunk['seq']}"] is chunk
    return sorted(chunks, key=lambda c: c["seq"])


def scene_chunks(engine: GameEngine, scene_id: str) -> list[dict[str, Any]]:
    prefix = f"jfCatalystStack.{scene_id}.chunk."
    return sorted(
        (v for k, v in store(engine).items() if k.startswith(prefix)), key=lambda c: c["seq"]
    )


def game_meta(engine: GameEngine) -> dict[str, Any] | None:
    return store(engine).get("jfGameStack.meta")


def game_summary(engine: GameEngine) -> dict[str, Any] | None:
    return store(engine).get("jfGameStack.summary")


def model_game_text(engine: GameEngine) -> str:
    """The game stack's canonical text rebuilt from the *store* with the independent formula."""
    summary = game_summary(engine)
    return expected_text(
        None if summary is None else summary["text"],
        ((c["user"], c["assistant"]) for c in game_chunks(engine)),
    )


def full_footprint(engine: GameEngine) -> int:
    """Footprint recomputed from scratch: JCS(store) + JCS(change log), UTF-8 bytes."""
    dump = engine.dump()
    return len(canonical_bytes(dump["store"])) + len(canonical_bytes(dump["changeLog"]))


def assert_flag_invariant(engine: GameEngine) -> None:
    """JF-INT-006: forcedCompression iff an exact game chunk has origin intervene."""
    meta = game_meta(engine)
    flag = bool(meta and meta.get("forcedCompression"))
    intervened = any(c["origin"] == "intervene" for c in game_chunks(engine))
    assert flag == intervened, f"forcedCompression={flag} but intervened chunk present={intervened}"


def as_text(value: Any) -> str:
    """A JSON rendering that keeps non-ASCII text literal (for substring searches)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def request_bodies(fake: FakeCompressor, kind: str | None = None) -> list[dict[str, Any]]:
    return [r["body"] for r in fake.requests if kind is None or r["body"]["kind"] == kind]


TELEMETRY_MEMBERS = frozenset(
    {
        "event",
        "callId",
        "idempotencyKey",
        "kind",
        "scope",
        "attempt",
        "outcome",
        "inputChars",
        "throughSeq",
        "outputChars",
        "durationMs",
        "detail",
    }
)


def string_leaves(value: Any) -> list[str]:
    """Every string value inside a JSON-like value (member names excluded)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in string_leaves(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in string_leaves(v)]
    return []


def assert_telemetry_has_no_text(events: list[dict[str, Any]], texts: Iterable[str]) -> None:
    """JF-CALL-012: events carry only known members, and no string in them is a piece (4+
    code points) of any exchange, summary or other text the test used."""
    texts = [t for t in texts if t]
    for event in events:
        assert set(event) <= TELEMETRY_MEMBERS, set(event) - TELEMETRY_MEMBERS
        assert set(event.get("scope") or {}) <= {"gameId", "catalystId"}
        for leaf in string_leaves(event):
            if len(leaf) >= 4:
                assert not any(leaf in t or t in leaf for t in texts), leaf


def telemetry_outcomes(engine: GameEngine) -> list[str]:
    return [e["outcome"] for e in engine.telemetry]


def fill(n: int, unit: str = "x") -> str:
    """A text of exactly `n` code points built from `unit` (which may be astral)."""
    return (unit * (n // len(unit) + 1))[:n]
