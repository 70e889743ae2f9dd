"""The checker over a nemesis run's whole history and the store's final state.

Input: the history (`nemesis.history`), every game's final state as a fresh driver dumps it
once everything healed (`{"store": ..., "footprint": ...}`, None for a game that is not
there), the footprints the database recorded (PostgreSQL), the `.new-` folders left in a
state directory, the bystanders harmed. The ledger games are only ever written by
`record_round` (never removed, never copied into); the churn ids only made, copied into and
removed.

Checks (each a list of findings; the run passes when every list is empty), decision R188:

- `lost`: a round acknowledged (`ok`) whose game does not hold its text at the round number
  its reply gave (JF-STORE-010..014, 040..044: an acknowledged write is never lost);
- `acknowledged_twice`: one round number of one game acknowledged to two writes;
- `fenced_landed`: a write the store refused (`store_fenced`, `store_locked`: definite
  failures) whose text is in the final state;
- `outside_epoch`: a write or a read answered `ok` under token T although an `open_game` of
  the same game had answered a greater token before the write was sent (the writer was
  superseded: JF-STORE-013, 030, 033); and, in the final state, a round written under a
  token smaller than an earlier round's (a superseded owner's write landed after its
  successor's);
- `footprint`: a game whose rounds are not numbered 1..n, hold a text never sent to it or
  twice, differ from the replay of its texts by the reference engine over a memory store
  (the whole store object), whose footprint differs from the JCS bytes of its store and
  change log counted here, or whose recorded footprint (PostgreSQL) differs from those;
- `unsettled`: a write of unknown outcome (`info`) whose text is in the final state twice,
  or in a ledger game it was not sent to (each unknown write is counted as landed or not);
- `created_twice`: two `create_game` / `duplicate` into one churn id acknowledged with no
  removal that may have run between them (two creators of one life of the id);
- `bystanders_harmed`: a bystander process killed or stopped; `workers_signalled`: a serving
  worker killed by a signal the nemesis did not send (a store must never signal a process);
  `workers_exited`: a serving worker that exited by itself;
- `internal_errors`: an `internal_error` reply (a bug by the protocol's own words);
- `setup_errors`: a `create_game` of a ledger game, right after the first worker's `hello`
  and before any fault, answered with an error;
- `leftovers`: `.new-` folders left in a state directory after the last driver's `hello`.

It also counts: faults by kind, acknowledged, unknown landed and not landed, refused, and
the time to serve again after each fault kind (from the fault's start to the first round
acknowledged that was sent after it; by the faulted worker for a worker fault).
"""

from __future__ import annotations

import asyncio
import itertools
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jfsm.engine import GameEngine
from jfsm.jcs import canonical_bytes
from jfsm.stores.memory import MemoryStore
from jfsm.testing import FakeCompressor

from .history import Event, History

__all__ = ["CHECKS", "Verdict", "check"]

CHECKS = (
    "lost",
    "acknowledged_twice",
    "fenced_landed",
    "outside_epoch",
    "footprint",
    "unsettled",
    "created_twice",
    "bystanders_harmed",
    "workers_signalled",
    "workers_exited",
    "internal_errors",
    "setup_errors",
    "leftovers",
)
_TEXT = re.compile(r"^(?P<game>[^/]+)/(?P<worker>[^/]+)/t(?P<token>\d+)/\d+$")
_HUGE = 10**9
_WORKER_FAULTS = ("kill-worker", "pause-worker")
_REMOVALS = ("remove_game", "forget_games")
_CREATIONS = ("create_game", "duplicate")


@dataclass
class Verdict:
    """What the checker found: findings by check, and the run's counts."""

    findings: dict[str, list[str]] = field(default_factory=lambda: {c: [] for c in CHECKS})
    counts: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not any(self.findings.values())

    def failed_checks(self) -> list[str]:
        return [name for name in CHECKS if self.findings[name]]

    def to_json(self, keep: int = 20) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "failed": self.failed_checks(),
            "counts": self.counts,
            "findings": {name: items[:keep] for name, items in self.findings.items() if items},
            "finding_counts": {name: len(items) for name, items in self.findings.items()},
        }


def _replay(game: str, texts: list[str]) -> dict[str, Any]:
    """The dump the reference engine makes of `texts` recorded as rounds, in order."""

    async def replay() -> dict[str, Any]:
        engine = GameEngine(
            MemoryStore(),
            FakeCompressor(),
            game_id=game,
            thresholds={"game": _HUGE, "catalyst": _HUGE},
        )
        for text in texts:
            await engine.record_round(text, "o")
        return engine.dump()

    return asyncio.run(replay())


def _recount(state: Mapping[str, Any]) -> int:
    """JCS(store) + JCS(change log) in bytes (D9), counted here from the dump itself."""
    return len(canonical_bytes(state.get("store", {}))) + len(
        canonical_bytes(state.get("changeLog", []))
    )


def _rounds(store: Mapping[str, Any]) -> dict[int, str]:
    rounds = {}
    for key, value in store.items():
        if key.startswith("jfRounds.") and key[9:].isdigit() and isinstance(value, dict):
            rounds[int(key[9:])] = str(value.get("input"))
    return rounds


def check(
    history: History,
    final: Mapping[str, Mapping[str, Any] | None],
    *,
    games: list[str],
    churn_ids: list[str],
    recorded: Mapping[str, int] | None = None,
    leftovers: list[str] | None = None,
    harmed: Mapping[str, str] | None = None,
) -> Verdict:
    """Check the run (module docstring). Pure but for the replays (the reference engine over
    memory stores)."""
    verdict = Verdict()
    found = verdict.findings
    pairs = list(history.pairs())
    writes = [(i, c) for i, c in pairs if i.f == "record_round"]
    by_text: dict[str, tuple[Event, Event | None]] = {
        str(i.value["text"]): (i, c) for i, c in writes
    }

    def kind(completion: Event | None) -> str:
        return "info" if completion is None else completion.type

    # -- acknowledged rounds: present, once --------------------------------------------------
    acked = [(i, c) for i, c in writes if c is not None and c.type == "ok"]
    stores = {game: (final.get(game) or {}).get("store", {}) for game in games}
    rounds = {game: _rounds(store) for game, store in stores.items()}
    slots: dict[tuple[str, int], list[str]] = defaultdict(list)
    for invoked, done in acked:
        game, text, number = str(invoked.game), str(invoked.value["text"]), int(done.value["round"])
        slots[(game, number)].append(text)
        if rounds.get(game, {}).get(number) != text:
            held = rounds.get(game, {}).get(number)
            found["lost"].append(f"{game} round {number}: acknowledged {text!r}, holds {held!r}")
    for (game, number), texts in sorted(slots.items()):
        if len(texts) > 1:
            found["acknowledged_twice"].append(f"{game} round {number}: {texts}")

    # -- the final state of each ledger game -------------------------------------------------
    landed_unknown = 0
    for game in games:
        state = final.get(game)
        if state is None:
            found["footprint"].append(f"{game}: not in the final state")
            continue
        numbered = rounds[game]
        texts = [numbered[n] for n in sorted(numbered)]
        if sorted(numbered) != list(range(1, len(numbered) + 1)):
            found["footprint"].append(f"{game}: rounds numbered {sorted(numbered)[:10]}...")
        seen: Counter[str] = Counter(texts)
        highest, highest_at = 0, 0
        for n in sorted(numbered):
            text = numbered[n]
            sent = by_text.get(text)
            if sent is None or sent[0].game != game:
                found["footprint"].append(f"{game} round {n}: {text!r} was never sent to it")
                continue
            outcome = kind(sent[1])
            if outcome == "fail":
                code = sent[1].value.get("code") if sent[1] is not None else ""
                found["fenced_landed"].append(f"{game} round {n}: {text!r} refused {code}")
            if seen[text] > 1:
                where = "unsettled" if outcome == "info" else "footprint"
                found[where].append(f"{game}: {text!r} landed {seen[text]} times")
            match = _TEXT.match(text)
            if match is not None:
                token = int(match["token"])
                if token < highest:
                    found["outside_epoch"].append(
                        f"{game} round {n}: {text!r} (token {token}) landed after round "
                        f"{highest_at} of token {highest}"
                    )
                elif token > highest:
                    highest, highest_at = token, n
        replay = _replay(game, texts)
        if replay["store"] != state.get("store"):
            differ = sorted(
                k
                for k in {*replay["store"], *state.get("store", {})}
                if replay["store"].get(k) != state.get("store", {}).get(k)
            )
            found["footprint"].append(f"{game}: store unlike its ledger's replay at {differ[:6]}")
        recount = _recount(state)
        if recount != state.get("footprint"):
            found["footprint"].append(
                f"{game}: footprint {state.get('footprint')}, its store and log's {recount}"
            )
        for entry in state.get("changeLog", []):
            if entry.get("op") == "set" and entry.get("value") != state["store"].get(entry["key"]):
                found["footprint"].append(f"{game}: log entry {entry['key']} unlike the store")
        if recorded is not None and game in recorded and recorded[game] != state.get("footprint"):
            found["footprint"].append(
                f"{game}: recorded footprint {recorded[game]}, recounted {state.get('footprint')}"
            )
    landed_texts = {text for game in games for text in rounds[game].values()}
    unknown = [(i, c) for i, c in writes if kind(c) == "info"]
    for invoked, _ in unknown:
        if str(invoked.value["text"]) in landed_texts:
            landed_unknown += 1
    for churned in churn_ids:
        state = final.get(churned)
        if state is None:
            continue
        if (
            recorded is not None
            and churned in recorded
            and recorded[churned] != state.get("footprint")
        ):
            found["footprint"].append(
                f"{churned}: recorded footprint {recorded[churned]}, "
                f"recounted {state.get('footprint')}"
            )
        numbered = _rounds(state.get("store", {}))
        if sorted(numbered) != list(range(1, len(numbered) + 1)):
            found["footprint"].append(f"{churned}: rounds numbered {sorted(numbered)[:10]}...")

    # -- epochs in the history: nothing answered after a later open ------------------------
    opens: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for invoked, done in pairs:
        if invoked.f == "open_game" and done is not None and done.type == "ok":
            opens[str(invoked.game)].append((done.time, int(done.value["token"])))
    for invoked, done in pairs:
        if invoked.f not in ("record_round", "dump") or done is None or done.type != "ok":
            continue
        token = invoked.value.get("token")
        if token is None:
            continue
        later = [t for at, t in opens[str(invoked.game)] if at < invoked.time and t > token]
        if later:
            found["outside_epoch"].append(
                f"{invoked.f} {invoked.value.get('text', '')!r} on {invoked.game} by "
                f"{invoked.worker} under token {token} answered ok, sent after token "
                f"{max(later)} was handed out"
            )

    # -- churn: one creator a life ---------------------------------------------------------
    for churned in churn_ids:
        made = sorted(
            (c.time, i.time, i.f)
            for i, c in pairs
            if i.game == churned and i.f in _CREATIONS and c is not None and c.type == "ok"
        )
        removals = [
            (i.time, c.time if c is not None else float("inf"))
            for i, c in pairs
            if i.game == churned and i.f in _REMOVALS and kind(c) != "fail"
        ]
        for (_, first_sent, first), (second_done, _, second) in itertools.pairwise(made):
            if not any(start < second_done and end > first_sent for start, end in removals):
                found["created_twice"].append(
                    f"{churned}: {first} and then {second} both acknowledged, no removal between"
                )

    # -- processes -------------------------------------------------------------------------
    for name, why in sorted((harmed or {}).items()):
        found["bystanders_harmed"].append(f"{name}: {why}")
    for event in history.events:
        if event.f in ("worker-signalled", "worker-exited"):
            where = "workers_signalled" if event.f == "worker-signalled" else "workers_exited"
            found[where].append(f"{event.worker} at {event.time:.1f} s: {event.value}")
    for invoked, done in pairs:
        if done is not None and done.value.get("code") == "internal_error":
            found["internal_errors"].append(f"{invoked.f} on {invoked.game} by {invoked.worker}")
    for invoked, done in pairs:
        if invoked.process == "setup" and (done is None or done.type != "ok"):
            value = {} if done is None else done.value
            found["setup_errors"].append(
                f"{invoked.f} {invoked.game} on {invoked.worker} before any fault: "
                f"{value.get('code', 'no reply')} {value.get('message', '')}"
            )
    found["leftovers"].extend(leftovers or [])

    # -- counts ----------------------------------------------------------------------------
    faults = [(i, c) for i, c in pairs if i.process == "nemesis"]
    verdict.counts = {
        "faults": dict(sorted(Counter(i.f for i, _ in faults).items())),
        "acknowledged": len(acked),
        "refused": sum(1 for _, c in writes if kind(c) == "fail"),
        "unknown": len(unknown),
        "unknown_landed": landed_unknown,
        "unknown_not_landed": len(unknown) - landed_unknown,
        "opens": sum(1 for i, c in pairs if i.f == "open_game" and kind(c) == "ok"),
        "ops": len(pairs),
        **{f"{name}": len(items) for name, items in found.items()},
        "serve_again_seconds": _serve_again(faults, acked),
    }
    return verdict


def _serve_again(
    faults: list[tuple[Event, Event | None]], acked: list[tuple[Event, Event]]
) -> dict[str, dict[str, float]]:
    """Per fault kind: the median and the longest seconds from a fault's start (the instant
    it struck, for a database fault) to the first round acknowledged that was sent after it
    (by the faulted worker for a worker fault)."""
    times: dict[str, list[float]] = defaultdict(list)
    for fault, done in faults:
        worker = fault.value.get("worker") if fault.f in _WORKER_FAULTS else None
        struck = float((done.value if done is not None else {}).get("struck", fault.time))
        after = [
            c.time for i, c in acked if i.time >= struck and (worker is None or i.worker == worker)
        ]
        if after:
            times[fault.f].append(round(min(after) - struck, 3))
    return {
        kind: {"median": round(statistics.median(ts), 3), "max": max(ts), "n": len(ts)}
        for kind, ts in sorted(times.items())
    }
