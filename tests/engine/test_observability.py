"""OpenTelemetry (issue 40, decisions R206 to R210): spans and metrics through the API only,
nothing without the extra, and never any text.

A game runs through an in-memory exporter and reader (`otel_helpers.recording`): rounds,
compressions that publish and that fail each way (a refusal with a message, transport
failures, an empty and a not-smaller summary), an intervene and a catalyst scene, against
the suite's fake compress.v2 over real HTTP. Then no span name, event, attribute value or
metric label may hold any 8-character slice of a round's text, a summary, the service's
messages, or a participant's name. Without the extra, a child process proves that nothing
of OpenTelemetry is imported and that the engine's methods are the plain functions.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import async_test
from otel_helpers import leaks, recording, text_values

from jfsm import GameEngine, observability
from jfsm.records import Participant
from jfsm.stores.memory import MemoryStore
from jfsm.transport import HttpCompressor
from jfsm_conformance.fake.compress import FakeCompress
from jfsm_conformance.model.replies import empty, http_status, not_smaller, refuse, success

ROOT = Path(__file__).resolve().parents[2]

# Distinctive texts: invented words no attribute, code or id could hold by chance.
PEOPLE = [
    Participant(id="Zephyrine-Quattlebaum", human=True),
    Participant(id="Orlando-Vexmorrow", human=True, spectator=True),
    Participant(id="Bartholomew-Klinkhammer", human=False),
]


def _round_text(n: int) -> tuple[str, str]:
    return (
        f"Quixotic marmalade zeppelins drift over Vlindersburg, dispatch {n}",
        f"The glimmerwort archivist answers with plumtorial certainty, entry {n}",
    )


SUMMARIES = [
    "Frobisher's lanternfish chronicle condensed",
    "Catalyst digest of wobblecrank negotiations",
]
REFUSAL_MESSAGE = "Service grumblequist refuses: sprocketflume overload"
SCENE_TEXTS = [
    ("Snickerblast envoy proposes a truce at Drollmoor", "Counteroffer of tinsel-bramble ore"),
    ("Jabberwick delegates sulk in the orangery", "Treaty of Mumblethorpe is ratified"),
]
CLOSING = "Closing note: the Mumblethorpe accord endures"
MEANWHILE = "Meanwhile the quillfeather couriers gallop south"
INTERVENED = ("Pause the zanzibarine orchestra immediately", "Very well, the orchestra stops")


def _texts() -> list[str]:
    texts = [t for n in range(1, 12) for t in _round_text(n)]
    texts += [*SUMMARIES, REFUSAL_MESSAGE, CLOSING, MEANWHILE, *INTERVENED]
    texts += [t for pair in SCENE_TEXTS for t in pair]
    texts += [p.id for p in PEOPLE]
    return texts


async def _game(fake: FakeCompress) -> dict[str, Any]:
    """Rounds and compressions of every outcome, an intervene and a catalyst scene."""
    fake.set_participants([p.model_dump() for p in PEOPLE])
    compressor = HttpCompressor(fake.url, max_attempts=2, backoff=0.001, max_backoff=0.002)
    outcomes = []
    async with (
        compressor,
        GameEngine(
            MemoryStore(),
            compressor,
            game_id="otel-game",
            participants=PEOPLE,
            thresholds={"game": 120, "catalyst": 120},
        ) as engine,
    ):
        fake.script(
            refuse("capacity_gone", message=REFUSAL_MESSAGE),
            http_status(503),
            http_status(503),
            empty(),
            not_smaller(),
            success(summary=SUMMARIES[0]),
        )
        for n in range(1, 7):
            await engine.record_round(*_round_text(n))
            outcomes.append((await engine.before_generation()).outcome)
        await engine.intervene(INTERVENED[0], INTERVENED[1], revealed=len(INTERVENED[1]))
        await engine.start_scene("scene-7")
        fake.script(success(summary=SUMMARIES[1]))
        for user, assistant in SCENE_TEXTS:
            await engine.record_scene_exchange("scene-7", user, assistant)
            await engine.record_scene_exchange("scene-7", user + " again", assistant + " again")
        outcomes.append((await engine.before_generation("scene-7")).outcome)
        await engine.publish_scene("scene-7", CLOSING, MEANWHILE)
        for n in range(7, 9):
            await engine.record_round(*_round_text(n))
        telemetry = list(engine.telemetry)
    return {"outcomes": outcomes, "telemetry": telemetry}


@pytest.mark.req("JF-CALL-020", "JF-CALL-021")
@async_test
async def test_a_game_is_traced_and_measured_without_any_text() -> None:
    with FakeCompress() as fake, recording() as recorded:
        played = await _game(fake)
    outcomes = [e["outcome"] for e in played["telemetry"]]
    assert {"published", "refused", "transport", "empty", "not_smaller"} <= set(outcomes)
    spans = recorded.spans()
    names = {span.name for span in spans}
    assert {
        "jfsm.record_round",
        "jfsm.before_generation",
        "jfsm.intervene",
        "jfsm.compression",
        "POST",
        "jfsm.store.commit",
    } <= names, names
    # every attempt is a client span under its compression, with its key and call id
    attempts = [s for s in spans if s.name == "POST"]
    assert len(attempts) == len(played["telemetry"])  # one event per attempt (D18)
    by_id = {s.context.span_id: s for s in spans}
    for attempt in attempts:
        assert attempt.parent is not None
        assert by_id[attempt.parent.span_id].name == "jfsm.compression"
        assert attempt.attributes["jfsm.compression.idempotency_key"].startswith("jfsm-")
    keys = {e["idempotencyKey"] for e in played["telemetry"]}
    assert {a.attributes["jfsm.compression.idempotency_key"] for a in attempts} == keys
    call_ids = {e["callId"] for e in played["telemetry"] if e["callId"]}
    assert call_ids <= {a.attributes.get("jfsm.compression.call_id") for a in attempts}
    failed = [a for a in attempts if a.attributes["jfsm.compression.attempt.outcome"] != "ok"]
    assert any(a.attributes.get("error.type") == "http_503" for a in failed)
    # the compressions by outcome: one per logical compression, the same as the telemetry
    finals = {}
    for event in played["telemetry"]:
        finals[event["idempotencyKey"]] = event["outcome"]
    for outcome in set(finals.values()):
        assert recorded.total("jfsm.compressions", **{"jfsm.compression.outcome": outcome}) == (
            list(finals.values()).count(outcome)
        )
    assert recorded.total("jfsm.compress.attempt.duration") == len(played["telemetry"])
    assert recorded.total("jfsm.store.commit.duration") >= 8
    assert recorded.total("jfsm.store.quota.headroom") == recorded.total("jfsm.store.footprint")
    # no text, ever: the check itself catches a planted leak first
    found = text_values(recorded)
    planted = [*found, ("span planted", f"x{SUMMARIES[1][5:20]}x")]
    assert leaks(_texts(), planted), "the leak check must catch a planted summary"
    assert leaks(_texts(), found) == []


@pytest.mark.req("JF-CALL-021")
def test_without_the_extra_nothing_of_opentelemetry_is_imported(tmp_path: Path) -> None:
    """The extra not installed (an import hook refuses `opentelemetry`): the engine runs a
    game on a file store, imports nothing of OpenTelemetry, and its traced methods are the
    plain functions (the decorator returned them unchanged: zero cost)."""
    script = textwrap.dedent(
        f"""
        import asyncio, importlib.abc, json, sys

        class NotInstalled(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name == "opentelemetry" or name.startswith("opentelemetry."):
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                return None

        sys.meta_path.insert(0, NotInstalled())
        from jfsm import FileStore, GameEngine, observability
        from jfsm.testing import FakeCompressor

        async def main():
            store = await FileStore.open({str(tmp_path / "g")!r})
            async with GameEngine(store, FakeCompressor(), game_id="g",
                                  thresholds={{"game": 60, "catalyst": 60}}) as engine:
                for n in range(4):
                    await engine.record_round("in " * 10, "out " * 10)
                    await engine.before_generation()
                return engine.status()["game"]["summary"]

        summarized = asyncio.run(main())
        print(json.dumps({{
            "summarized": summarized,
            "enabled": observability.ENABLED,
            "imported": sorted(m for m in sys.modules if m.startswith("opentelemetry")),
            "wrapped": hasattr(GameEngine.record_round, "__wrapped__"),
        }}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result == {"summarized": True, "enabled": False, "imported": [], "wrapped": False}


@pytest.mark.req("JF-CALL-021")
def test_with_the_api_and_no_sdk_nothing_is_recorded() -> None:
    """The API installed, no SDK configured (a fresh process): the engine imports the API
    only, never the SDK, and the span current inside a compress.v2 call records nothing.
    With the SDK (below), the same call sees a recording span: the compression's."""
    script = textwrap.dedent(
        """
        import asyncio, json, sys
        from opentelemetry import trace
        from jfsm import GameEngine, observability
        from jfsm.stores.memory import MemoryStore
        from jfsm.testing import FakeCompressor

        seen = []

        class Watching(FakeCompressor):
            async def compress(self, request, participants):
                seen.append(trace.get_current_span().is_recording())
                return await super().compress(request, participants)

        async def main():
            async with GameEngine(MemoryStore(), Watching(), game_id="g",
                                  thresholds={"game": 60, "catalyst": 60}) as engine:
                for n in range(3):
                    await engine.record_round("in " * 10, "out " * 10)
                    await engine.before_generation()

        asyncio.run(main())
        print(json.dumps({
            "seen": seen,
            "enabled": observability.ENABLED,
            "sdk": sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk")),
        }))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["enabled"] is True and result["sdk"] == []
    assert result["seen"] and not any(result["seen"])


@async_test
async def test_a_compression_span_is_current_during_the_call() -> None:
    from opentelemetry import trace

    from jfsm.testing import FakeCompressor

    seen: list[str] = []

    class Watching(FakeCompressor):
        async def compress(self, request: Any, participants: Any) -> Any:
            current = trace.get_current_span()
            seen.append(getattr(current, "name", "") if current.is_recording() else "")
            return await super().compress(request, participants)

    with recording():
        async with GameEngine(
            MemoryStore(), Watching(), game_id="g", thresholds={"game": 60, "catalyst": 60}
        ) as engine:
            for _ in range(3):
                await engine.record_round("in " * 10, "out " * 10)
                await engine.before_generation()
    assert seen and set(seen) == {"jfsm.compression"}


@async_test
async def test_store_errors_and_fenced_writes_are_counted_by_code() -> None:
    """A commit the store refuses ends its span with `error.type` = the error's code (never
    its message) and counts in the commit histogram by that outcome; a fenced one is also a
    `jfsm.lease.fence` span and a `jfsm.store.fenced` count."""
    from jfsm.errors import QuotaExceeded, StoreFenced
    from jfsm.projection import Projection

    class Refusing(MemoryStore):
        error: Exception = QuotaExceeded("over quota: a message with Vlindersburg in it")

        async def commit(self, projection: Projection) -> None:
            raise self.error

    store = Refusing()
    with recording() as recorded:
        engine = GameEngine(store, observability_compressor(), game_id="g")
        with pytest.raises(QuotaExceeded):
            await engine.record_round("in", "out")
        store.error = StoreFenced("newer owner", state="fenced", game="g", token=3)
        with pytest.raises(StoreFenced):
            await engine.record_round("in", "out")
        observability.history_lost()
    commits = [s for s in recorded.spans() if s.name == "jfsm.store.commit"]
    assert [s.attributes["error.type"] for s in commits] == ["quota_exceeded", "store_fenced"]
    assert all(s.status.description is None for s in commits)
    outcome = "jfsm.store.outcome"
    assert recorded.total("jfsm.store.commit.duration", **{outcome: "quota_exceeded"}) == 1
    assert recorded.total("jfsm.store.fenced", **{"jfsm.store.backend": "memory"}) == 1
    fence = [s for s in recorded.spans() if s.name == "jfsm.lease.fence"]
    assert len(fence) == 1 and fence[0].attributes["jfsm.game.id"] == "g"
    assert recorded.total("jfsm.store.history_lost") == 1
    assert leaks(["Vlindersburg"], text_values(recorded)) == []


def observability_compressor() -> Any:
    from jfsm.testing import FakeCompressor

    return FakeCompressor()


def test_the_guide_lists_every_span_and_metric() -> None:
    """`docs/guide/observability.md` names every span and instrument of `SPANS` and
    `METRICS`, and no other `jfsm.` one."""
    import re

    page = (ROOT / "docs" / "guide" / "observability.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:jfsm|db\.client)\.[a-z_.]+)`", page))
    for name in observability.SPANS:
        if name.startswith("jfsm."):
            assert f"`{name}`" in page, name
    for name, (_kind, unit, _) in observability.METRICS.items():
        assert f"`{name}`" in page, name
        assert f"`{unit}`" in page, (name, unit)
    known = set(observability.SPANS) | set(observability.METRICS)
    attributes = {n for n in named if n not in known}
    assert all(n.count(".") >= 2 or n in ("jfsm.game.id", "jfsm.scene.id") for n in attributes), (
        attributes
    )


def test_the_guides_sdk_program_runs_as_printed(tmp_path: Path) -> None:
    """The page's program (a `py` block: it installs global providers, so it runs in a
    process of its own, not in the snippet runner's), as printed: it exports the engine's
    spans and metrics on the console."""
    import re

    page = (ROOT / "docs" / "guide" / "observability.md").read_text(encoding="utf-8")
    (program,) = re.findall(r"```py\n(.*?)```", page, re.DOTALL)
    (tmp_path / "otel_demo.py").write_text(program, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "otel_demo.py"], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    for name in ('"name": "jfsm.compression"', '"name": "jfsm.record_round"', "jfsm.compressions"):
        assert name in done.stdout, name
