"""The oracle: an independent, deliberately simple model of one game's observable memory.

It knows nothing of the engine. From the operations the suite performed and the replies the
fake compress.v2 gave, it says what the store must hold: the exact exchanges of each stack in
seq order, the summary record, the meta, the canonical rounds, the archives and the game
data. `diff_store` compares a dumped store with the model and names, per differing key, the
requirement the difference breaks (a lost suffix chunk is JF-COMP-003, a represented chunk
that survived its publication JF-COMP-005, and so on).

Every member is compared exactly, as the catalog spells the records out (JF-STORE-001 to
JF-STORE-007): scene metas with `state`, scene exchanges with `origin` = `catalyst` and their
scene id, archive records with their `order`.

The engine's own stateful test (`tests/engine/test_engine_stateful.py`) predicts memory with this
model too (R57): one expected memory for the engine's tests and for the suite.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from jfsm_conformance.model.canon import canonical_text, jcs

__all__ = ["ABSENT", "Diff", "GameModel", "InFlight", "StackModel", "diff_store", "normalize"]

GAME_PREFIX = "jfGameStack"
SCENE_PREFIX = "jfCatalystStack."
ARCHIVES = "jfCatalystArchives"
ROUNDS = "jfRounds."
GAME_KIND = "paxhistoria.game-agent-stack.v1"
SCENE_KIND = "paxhistoria.catalyst-agent-stack.v1"


@dataclass
class StackModel:
    """One stack: optional summary, exact chunks by seq, nextSeq, epoch (and the game flag)."""

    prefix: str
    scene: str | None = None
    exists: bool = False
    summary: dict[str, Any] | None = None
    chunks: dict[int, dict[str, Any]] = field(default_factory=dict)
    next_seq: int = 1
    epoch: int = 0
    flag: bool = False
    state: str = "created"  # a scene stack's meta state: created or running

    @property
    def kind(self) -> str:
        return GAME_KIND if self.scene is None else SCENE_KIND

    def text(self) -> str:
        summary = None if self.summary is None else self.summary["text"]
        ordered = [self.chunks[s] for s in sorted(self.chunks)]
        return canonical_text(summary, [(c["user"], c["assistant"]) for c in ordered])

    def length(self) -> int:
        return len(self.text())

    def through(self) -> int | None:
        return max(self.chunks) if self.chunks else None

    def append(self, chunk: dict[str, Any]) -> int:
        self.exists = True
        seq = self.next_seq
        chunk = {"seq": seq, **chunk}
        self.chunks[seq] = chunk
        self.next_seq += 1
        return seq

    def meta(self) -> dict[str, Any]:
        if self.scene is None:
            return {"nextSeq": self.next_seq, "epoch": self.epoch, "forcedCompression": self.flag}
        return {"nextSeq": self.next_seq, "epoch": self.epoch, "state": self.state}

    def items(self) -> dict[str, Any]:
        if not self.exists:
            return {}
        out: dict[str, Any] = {f"{self.prefix}.meta": self.meta()}
        if self.summary is not None:
            out[f"{self.prefix}.summary"] = self.summary
        for seq, chunk in self.chunks.items():
            out[f"{self.prefix}.chunk.{seq}"] = chunk
        return out


@dataclass
class InFlight:
    """A compression request the implementation sent and the model expects to settle."""

    scene: str | None
    text: str
    through: int
    epoch: int
    summary_text: str | None
    represented: frozenset[int]
    key: str
    kind: str
    forced: bool = False


@dataclass
class SceneModel:
    state: str
    stack: StackModel


class GameModel:
    """The expected memory of one game."""

    def __init__(self, game_id: str) -> None:
        self.game_id = game_id
        self.rounds: dict[int, dict[str, Any]] = {}
        self.game = StackModel(GAME_PREFIX)
        self.scenes: dict[str, SceneModel] = {}
        self.archives: dict[str, dict[str, Any]] = {}
        self.archive_order: list[str] = []
        self.data: dict[str, Any] = {}
        self.participants: list[dict[str, Any]] = []
        self.in_flight: dict[str | None, InFlight] = {}

    def clone(self, game_id: str) -> GameModel:
        other = copy.deepcopy(self)
        other.game_id = game_id
        other.in_flight = {}
        return other

    # -- reading -------------------------------------------------------------------------
    def stack(self, scene: str | None) -> StackModel | None:
        if scene is None:
            return self.game
        found = self.scenes.get(scene)
        return None if found is None or found.state in ("published", "cancelled") else found.stack

    def last_round(self) -> int:
        return max(self.rounds, default=0)

    def store(self) -> dict[str, Any]:
        """The expected store object (normalized form, see `normalize`)."""
        out = dict(self.data)
        out.update(self.game.items())
        for scene in self.scenes.values():
            if scene.state in ("created", "running"):
                out.update(scene.stack.items())
        if self.archives:
            out[ARCHIVES] = copy.deepcopy(self.archives)
        for n, record in self.rounds.items():
            out[f"{ROUNDS}{n}"] = record
        return out

    def summary_seqs(self) -> dict[str | None, int]:
        """`throughSeq` of each live stack's summary (None: the game stack)."""
        out: dict[str | None, int] = {}
        for scene in [None, *self.scenes]:
            stack = self.stack(scene)
            if stack is not None and stack.summary is not None:
                out[scene] = stack.summary["throughSeq"]
        return out

    def due(self, scene: str | None, threshold: int) -> bool:
        stack = self.stack(scene)
        return stack is not None and bool(stack.chunks) and stack.length() > threshold

    # -- operations ----------------------------------------------------------------------
    def record_round(self, user: str, assistant: str) -> dict[str, int]:
        n = self.last_round() + 1
        seq = self.game.append(
            {"user": user, "assistant": assistant, "origin": "round", "roundId": n}
        )
        self.rounds[n] = {"n": n, "input": user, "output": assistant, "intervened": False}
        return {"round": n, "seq": seq}

    def intervene(self, user: str, revealed: str) -> dict[str, int]:
        n = self.last_round() + 1
        seq = self.game.append(
            {"user": user, "assistant": revealed, "origin": "intervene", "roundId": n}
        )
        self.game.flag = True
        self.rounds[n] = {"n": n, "input": user, "output": revealed, "intervened": True}
        return {"round": n, "seq": seq}

    def start_scene(self, scene: str) -> None:
        """A scene's epoch starts at the game stack's (R12, JF-CAT-012), so a request of an
        earlier scene of the same id (freed by a reset, which raised the game's epoch) is stale
        for the new one."""
        self.scenes[scene] = SceneModel(
            "created",
            StackModel(f"{SCENE_PREFIX}{scene}", scene=scene, exists=True, epoch=self.game.epoch),
        )

    def mark_running(self, scene: str) -> None:
        model = self.scenes[scene]
        model.state = model.stack.state = "running"

    def scene_exchange(self, scene: str, user: str, assistant: str) -> int:
        self.mark_running(scene)
        return self.scenes[scene].stack.append(
            {"user": user, "assistant": assistant, "origin": "catalyst", "catalystId": scene}
        )

    def end_scene(self, scene: str, closing: str | None, meanwhile: str | None) -> dict[str, Any]:
        model = self.scenes[scene]
        order = 1 + max((r["order"] for r in self.archives.values()), default=0)
        record: dict[str, Any] = {
            "state": "cancelled",
            "afterRound": self.last_round(),
            "order": order,
        }
        if closing is not None:
            seq = self.game.append(
                {"user": meanwhile, "assistant": closing, "origin": "catalyst", "catalystId": scene}
            )
            record = {
                "state": "published",
                "afterRound": self.last_round(),
                "closingSummary": closing,
                "meanwhileEvent": meanwhile,
                "outcomeSeq": seq,
                "order": order,
            }
        model.state = record["state"]
        self.archives[scene] = record
        self.archive_order.append(scene)
        return record

    def rebuild(self, rounds: dict[int, dict[str, Any]], *, seeded: bool = False) -> None:
        """Reset, edit and conversion: rebuild the game stack from `rounds` and the archives."""
        self.rounds = rounds
        chunks: dict[int, dict[str, Any]] = {}
        seq = 0

        def place(after: int) -> None:
            nonlocal seq
            for scene in self.archive_order:
                record = self.archives.get(scene)
                if record and record["state"] == "published" and record["afterRound"] == after:
                    seq += 1
                    chunks[seq] = {
                        "seq": seq,
                        "user": record["meanwhileEvent"],
                        "assistant": record["closingSummary"],
                        "origin": "catalyst",
                        "catalystId": scene,
                    }
                    record["outcomeSeq"] = seq

        place(0)
        for n in sorted(rounds):
            r = rounds[n]
            seq += 1
            origin = "intervene" if r["intervened"] else ("seed" if seeded else "round")
            chunks[seq] = {
                "seq": seq,
                "user": r["input"],
                "assistant": r["output"],
                "origin": origin,
                "roundId": n,
            }
            place(n)
        game = self.game
        game.epoch = game.epoch + 1 if game.exists else 1
        game.exists = True
        game.summary = None
        game.chunks = chunks
        game.next_seq = seq + 1
        game.flag = any(r["intervened"] for r in rounds.values())

    def reset(self, to_round: int) -> None:
        for scene in [s for s, r in self.archives.items() if r["afterRound"] > to_round]:
            del self.archives[scene]
            self.archive_order.remove(scene)
            self.scenes.pop(scene, None)
        self.rebuild({n: r for n, r in self.rounds.items() if n <= to_round})

    def edit_round(self, n: int, user: str, assistant: str) -> None:
        rounds = dict(self.rounds)
        rounds[n] = {"n": n, "input": user, "output": assistant, "intervened": False}
        self.rebuild(rounds)

    def convert(self, rounds: list[dict[str, str]]) -> None:
        self.rebuild(
            {
                i: {"n": i, "input": r["input"], "output": r["output"], "intervened": False}
                for i, r in enumerate(rounds, start=1)
            },
            seeded=True,
        )

    def publish_summary(self, flight: InFlight, text: str, call_id: str) -> None:
        stack = self.stack(flight.scene)
        assert stack is not None
        stack.summary = {
            "text": text,
            "throughSeq": flight.through,
            "compressionCallId": call_id,
            "kind": flight.kind,
        }
        for seq in [s for s in stack.chunks if s <= flight.through]:
            del stack.chunks[seq]
        if flight.scene is None:
            stack.flag = any(c["origin"] == "intervene" for c in stack.chunks.values())

    def is_stale(self, flight: InFlight) -> bool:
        stack = self.stack(flight.scene)
        if stack is None or stack.epoch != flight.epoch:
            return True
        current = None if stack.summary is None else stack.summary["text"]
        return current != flight.summary_text or not flight.represented <= set(stack.chunks)

    def flight_for(self, scene: str | None, key: str, forced: bool = False) -> InFlight:
        stack = self.stack(scene)
        assert stack is not None and stack.chunks
        return InFlight(
            scene=scene,
            text=stack.text(),
            through=max(stack.chunks),
            epoch=stack.epoch,
            summary_text=None if stack.summary is None else stack.summary["text"],
            represented=frozenset(stack.chunks),
            key=key,
            kind=stack.kind,
            forced=forced,
        )


# -- comparing ---------------------------------------------------------------------------


def normalize(store: dict[str, Any]) -> dict[str, Any]:
    """The dumped store as compared with the model (the spec now pins every member, so this
    is the identity; it stays the one place to fold implementation-defined members)."""
    return store


class _Absent:
    """The side of a `Diff` where the key does not exist (a stored JSON null is `None`)."""

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "<absent>"


ABSENT: Any = _Absent()


@dataclass
class Diff:
    key: str
    problem: str  # missing | unexpected | different
    expected: Any  # ABSENT when unexpected
    actual: Any  # ABSENT when missing

    def describe(self, limit: int = 300) -> str:
        def short(v: Any) -> str:
            text = "<absent>" if v is ABSENT else jcs(v)
            return text if len(text) <= limit else text[:limit] + f"…(+{len(text) - limit} chars)"

        return (
            f"{self.key}: {self.problem}; expected {short(self.expected)}; got {short(self.actual)}"
        )


def diff_store(expected: dict[str, Any], actual: dict[str, Any]) -> list[Diff]:
    """Per-key differences between the expected and the (normalized) dumped store."""
    if jcs(expected) == jcs(actual):
        return []
    diffs = []
    for key in sorted(set(expected) | set(actual)):
        if key not in actual:
            diffs.append(Diff(key, "missing", expected[key], ABSENT))
        elif key not in expected:
            diffs.append(Diff(key, "unexpected", ABSENT, actual[key]))
        elif jcs(expected[key]) != jcs(actual[key]):
            diffs.append(Diff(key, "different", expected[key], actual[key]))
    return diffs
