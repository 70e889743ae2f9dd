"""The worked example: the reference engine run step by step at build time.

Each `step_*` coroutine below is shown on the page as it is written here (its docstring is
the prose, its body the code) and then run; the page shows what it returned, the store (JCS,
pretty-printed) and the optimized change log after it, the compress.v2 requests it sent and
the telemetry it recorded. Because the page is produced by running the engine, it cannot
drift from what the engine does.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import textwrap
from collections.abc import Awaitable, Callable
from typing import Any

from jfdocs.render import json_text
from jfsm.engine import GameEngine
from jfsm.jcs import canonicalize
from jfsm.records import Participant
from jfsm.stores import MemoryStore
from jfsm.testing import FakeCompressor

__all__ = ["page", "run"]

# Small thresholds so that a few short rounds cross them. This is an EMBEDDING OVERRIDE
# (GameEngine(thresholds=...)); the specification's values are 300,000 and 150,000.
EXAMPLE_THRESHOLDS = {"game": 400, "catalyst": 300}


def make_engine() -> tuple[GameEngine, FakeCompressor]:
    store = MemoryStore()
    fake = FakeCompressor()  # an in-process stand-in for compress.v2
    engine = GameEngine(
        store,
        fake,
        game_id="game-1",
        participants=[
            Participant(id="ada", human=True),
            Participant(id="npc-7", human=False),
            Participant(id="bob", human=True, spectator=True),
        ],
        thresholds=EXAMPLE_THRESHOLDS,
    )
    return engine, fake


async def step_new_game(engine: GameEngine, fake: FakeCompressor) -> Any:
    """A new game starts without agent memory: creating the engine writes nothing, so the
    store holds no `jf` key at all (JF-HIST-009)."""
    return engine.status()["game"]


async def step_record_rounds(engine: GameEngine, fake: FakeCompressor) -> Any:
    """Two canonical rounds are recorded. Each is one projection: the round under
    `jfRounds.<n>`, its exact exchange as the next game chunk (origin `round`), and the
    stack's meta with `nextSeq` advanced."""
    first = await engine.record_round(
        "Send scouts through the northern pass.",
        "The scouts return at dusk: the pass is open, but snow is coming early this year.",
    )
    second = await engine.record_round(
        "Move the army before the snow.",
        "The army crosses in three days and camps above the valley of Orrin.",
    )
    return [first, second]


async def step_check_not_due(engine: GameEngine, fake: FakeCompressor) -> Any:
    """Before the next generation the engine measures the game stack's canonical text. Its
    length is below the threshold, so no compression starts (outcome `not_due`)."""
    report = await engine.before_generation()
    return report.to_json()


async def step_checkpoint(engine: GameEngine, fake: FakeCompressor) -> Any:
    """A checkpoint makes the current store the change log's base: the log becomes empty.
    From here on the log shows the net difference since this point."""
    await engine.checkpoint()
    return engine.dump()["changeLog"]


async def step_compress(engine: GameEngine, fake: FakeCompressor) -> Any:
    """A third round takes the canonical length over the threshold. Before the next
    generation a compression of the whole represented prefix (chunks 1 to 3) goes to
    compress.v2; the valid summary is published in one projection that sets
    `jfGameStack.summary` and deletes exactly the represented chunks. The request carries
    the beneficiaries: humans who are not spectators, sorted."""
    await engine.record_round(
        "Raid the valley's granaries at night.",
        "The raid succeeds; Orrin's reeve swears vengeance and rides for the capital.",
    )
    fake.queue(
        {
            "reply": "success",
            "summary": "The army crossed the northern pass before the snow and raided Orrin.",
        }
    )
    report = await engine.before_generation()
    return report.to_json()


async def step_scene(engine: GameEngine, fake: FakeCompressor) -> Any:
    """A catalyst scene runs with its own isolated stack. Its terminal publication is one
    projection: the outcome becomes one direct game exchange (user = the public meanwhile
    event, assistant = the closing summary, verbatim), the archive record is written, and
    every key of the scene's stack is deleted. The scene transcript never reaches the game
    stack."""
    await engine.start_scene("reeve")
    await engine.record_scene_exchange(
        "reeve",
        "The reeve pleads before the queen.",
        "The queen listens, then sends her marshal north with two hundred riders.",
    )
    await engine.before_generation("reeve")  # a scene generation: its own check
    return await engine.publish_scene(
        "reeve",
        closing_summary="The queen's marshal rides north with two hundred riders.",
        meanwhile_event="Meanwhile, riders leave the capital under the queen's banner.",
    )


async def step_intervene(engine: GameEngine, fake: FakeCompressor) -> Any:
    """The player intervenes after the first 30 code points of the generated output were
    revealed.
    One projection records the sanitized round and appends `{input, revealed prefix}`
    (origin `intervene`) and sets `forcedCompression`. The forced compression then runs
    whatever the length; here the fake service refuses it, so the exact sanitized exchange
    and the flag stay durable. The discarded continuation is stored nowhere."""
    fake.queue({"reply": "refuse", "code": "busy"})  # the next call will be refused
    return await engine.intervene(
        "Ambush the riders at the ford.",
        "The ambush is set at the ford. But the marshal, warned by a shepherd, ...",
        revealed=30,
    )


async def step_retry(engine: GameEngine, fake: FakeCompressor) -> Any:
    """Before the next generation the owed forced compression is retried. It publishes:
    the new summary covers the intervened chunk, and the same publication projection
    clears `forcedCompression`. Had it failed again, the generation would have been refused
    with the retryable error `compression_pending`. The report returned is that of the
    stack's own threshold check, which runs after the forced compression (see the
    telemetry for the forced one)."""
    fake.queue(
        {
            "reply": "success",
            "summary": "Orrin raided; the queen's marshal rides north; ambush set.",
        }
    )
    report = await engine.before_generation()
    return {"report": report.to_json(), "intervene machine": engine.status()["game"]["intervene"]}


async def step_reset(engine: GameEngine, fake: FakeCompressor) -> Any:
    """The game is reset to round 3. Memory is rebuilt from the surviving canonical rounds,
    never compressed: no summary, chunks numbered from 1, each round followed by the
    outcomes of the scenes published after it, `epoch` + 1, and the flag set iff a surviving
    round was intervened. Round 4 (the intervened one) is deleted; the scene, which ended
    after round 3, survives, and its archive's `outcomeSeq` is set to the seq of its
    outcome chunk in the rebuilt stack (JF-HIST-010)."""
    return await engine.reset(3)


STEPS: list[tuple[str, Callable[[GameEngine, FakeCompressor], Awaitable[Any]]]] = [
    ("A new game", step_new_game),
    ("Record two rounds", step_record_rounds),
    ("Generation check: not due", step_check_not_due),
    ("Checkpoint", step_checkpoint),
    ("Cross the threshold and compress", step_compress),
    ("Run and publish a catalyst scene", step_scene),
    ("Intervene (the forced compression fails)", step_intervene),
    ("The next generation retries the forced compression", step_retry),
    ("Reset to round 3", step_reset),
]


_REQ = re.compile(r"\bJF-[A-Z]+-[0-9]{3}\b")


def _pretty(value: Any) -> str:
    """JCS, then pretty-printed (JCS member order is kept)."""
    return json_text(json.loads(canonicalize(value)), indent=2)


def _source(function: Callable[..., Any]) -> tuple[str, str]:
    """(docstring, body without the docstring) of a step."""
    lines = inspect.getsource(function).splitlines()
    doc = inspect.getdoc(function) or ""
    text = "\n".join(lines)
    body_start = text.index('"""', text.index('"""') + 3) + 3
    body = textwrap.dedent(text[body_start:].lstrip("\n"))
    return " ".join(doc.split()), body


async def run() -> list[dict[str, Any]]:
    """Run every step; return what each one did."""
    engine, fake = make_engine()
    results = []
    for title, step in STEPS:
        before = engine.dump()["store"]
        requests_before = len(fake.requests)
        telemetry_before = len(engine.telemetry)
        returned = await step(engine, fake)
        dump = engine.dump()
        after = dump["store"]
        results.append(
            {
                "title": title,
                "step": step,
                "returned": returned,
                "store": after,
                "changeLog": dump["changeLog"],
                "footprint": dump["footprint"],
                "set": sorted(k for k in after if before.get(k, object()) != after[k]),
                "deleted": sorted(k for k in before if k not in after),
                "requests": fake.requests[requests_before:],
                "telemetry": engine.telemetry[telemetry_before:],
                "status": engine.status(),
            }
        )
    return results


def _fence(lang: str, text: str, title: str | None = None, indent: str = "") -> str:
    head = f"```{lang}" + (f' title="{title}"' if title else "")
    block = f"{head}\n{text.rstrip()}\n```\n"
    return "".join(indent + line + "\n" if line else "\n" for line in block.splitlines())


def _tab(title: str, body: str) -> str:
    return (
        f'=== "{title}"\n\n'
        + "".join("    " + line + "\n" if line else "\n" for line in body.splitlines())
        + "\n"
    )


def page() -> str:
    results = asyncio.run(run())
    setup = inspect.getsource(make_engine)
    out = [
        "# Worked example\n",
        "<!-- Generated at build time by running the reference engine (docs/hooks/jfdocs/"
        "worked_example.py). Do not edit. -->\n",
        "This page is produced by **running the reference engine** (`jfsm.engine.GameEngine` "
        "over a `jfsm.stores.MemoryStore`, with the in-process `jfsm.testing."
        "FakeCompressor` standing in for compress.v2) every time the site is built. Each "
        "step shows the code that ran, what it returned, the keys it set or deleted, and "
        "then the whole store (as RFC 8785 JCS, pretty-printed), the optimized change log, "
        "the compress.v2 requests and the telemetry.\n",
        '!!! warning "Thresholds overridden for this example"\n'
        f"    To keep the texts short, the thresholds are lowered to "
        f"**{EXAMPLE_THRESHOLDS['game']}** (game) and **{EXAMPLE_THRESHOLDS['catalyst']}** "
        "(catalyst) code points with `GameEngine(thresholds=...)`, an override meant for "
        "embedding ([R9](../decisions.md#r9)). The specification's thresholds are 300,000 "
        "and 150,000, and the conformance suite always runs at those values.\n",
        "## Setup\n",
        _fence("python", setup),
    ]
    for number, result in enumerate(results, start=1):
        doc, body = _source(result["step"])
        out.append(f"## {number}. {result['title']}\n")
        out.append(_REQ.sub(r"[\g<0>](../reference/requirements.md#\g<0>)", doc) + "\n")
        out.append(_fence("python", body))
        out.append(_fence("json", json_text(result["returned"], indent=2), title="Returned"))
        changed = []
        if result["set"]:
            changed.append("set " + ", ".join(f"`{k}`" for k in result["set"]))
        if result["deleted"]:
            changed.append("deleted " + ", ".join(f"`{k}`" for k in result["deleted"]))
        status = result["status"]["game"]
        out.append(
            ("**Changed:** " + "; ".join(changed) if changed else "**Changed:** nothing")
            + f". **Footprint:** {result['footprint']:,} bytes. "
            f"**Game stack:** canonical length {status['length']}, "
            f"{status['chunks']} exact chunk(s), "
            f"{'a' if status['summary'] else 'no'} summary; machines: compression "
            f"`{status['compression']}`, intervene `{status['intervene']}`.\n"
        )
        tabs = _tab("Store", _fence("json", _pretty(result["store"])))
        tabs += _tab("Change log", _fence("json", _pretty(result["changeLog"])))
        if result["requests"]:
            shown = [
                {"Idempotency-Key": r["idempotencyKey"], "body": r["body"]}
                for r in result["requests"]
            ]
            tabs += _tab("compress.v2 requests", _fence("json", json_text(shown, indent=2)))
        if result["telemetry"]:
            tabs += _tab("Telemetry", _fence("json", json_text(result["telemetry"], indent=2)))
        out.append(tabs)
    return "\n".join(out)
