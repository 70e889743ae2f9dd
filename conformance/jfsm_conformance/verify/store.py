"""Checks of a dumped store: the model, the change log, the footprint, canaries, the flag.

The `store` part of `jfsm_conformance.verify.Verifier` (see there for the blame
order); each check credits or blames requirement IDs through the run's `Ledger`, and a
failing one raises `ConformanceFailure`.
"""

from __future__ import annotations

from typing import Any

from jfsm_conformance.model.canon import QUOTA, jcs
from jfsm_conformance.model.encoded import BaseCache, Encoded
from jfsm_conformance.model.oracle import ABSENT, Diff, GameModel, normalize
from jfsm_conformance.verify import checks as C
from jfsm_conformance.verify.blame import Ctx, blame, log_ids
from jfsm_conformance.verify.checks import Ledger
from jfsm_conformance.verify.excerpts import as_json, find, short

__all__ = ["StoreChecks"]


class StoreChecks:
    """What the store holds, against the model and the suite's checkpoint base."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.bases = BaseCache()  # each game's checkpoint base, encoded once

    def dump(self, model: GameModel, dump: dict[str, Any], base: dict[str, Any], ctx: Ctx) -> None:
        """Everything observable in a dump: canaries, the store against the model, the change
        log against the suite's base, the footprint, the forced-compression flag."""
        store, log = dump["store"], dump["changeLog"]
        self.canaries_in_store(store, log)
        actual, expected = Encoded(normalize(store)), Encoded(model.store())
        diffs = [] if actual.same_as(expected) else _diffs(expected, actual)
        if diffs:
            ctx.observe(store, model.summary_seqs())
            self.ledger.expect(
                C.STORE_MODEL,
                False,
                f"after {ctx.op}, the store differs from the model in {len(diffs)} key(s):\n  "
                + "\n  ".join(d.describe() for d in diffs[:6]),
                ids=tuple(sorted({i for d in diffs for i in blame(d, ctx)})),
            )
        self.ledger.credit(C.STORE_MODEL, ctx.verifies or ("JF-ATOM-001",))
        expected_log, expected_text = actual.change_log(self.bases.get(base))
        log_text = jcs(log)
        self.ledger.expect(
            C.CHANGE_LOG,
            expected_text == log_text,
            lambda: _log_message(expected_log, log),
            ids=log_ids(expected_log, log, ctx),
        )
        credited = ["JF-QUOTA-005"]
        if len(log) >= 2:
            credited.append("JF-QUOTA-006")
        if base:
            credited.append("JF-QUOTA-007")
        self.ledger.credit(C.CHANGE_LOG, credited)
        mine = actual.size() + len(log_text.encode("utf-8", "surrogatepass"))
        self.ledger.expect(
            C.FOOTPRINT,
            dump["footprint"] == mine and mine <= QUOTA,
            f"footprint reported {dump['footprint']}, the suite counts {mine} JCS bytes "
            f"(quota {QUOTA})",
        )
        meta = store.get("jfGameStack.meta")
        if isinstance(meta, dict):
            held = any(
                isinstance(v, dict) and v.get("origin") == "intervene"
                for k, v in store.items()
                if k.startswith("jfGameStack.chunk.")
            )
            self.ledger.expect(
                C.FLAG_INVARIANT,
                meta.get("forcedCompression") is held,
                f"forcedCompression is {as_json(meta.get('forcedCompression'))} while the game "
                "stack "
                f"{'holds' if held else 'holds no'} exact intervened chunk",
            )

    def intervened(self, store: dict[str, Any], n: int, seq: int, revealed: str) -> None:
        """The stored intervened round (and its exchange, while unrepresented) holds exactly
        the revealed prefix: checked before any request that carries it."""
        stored = [store.get(f"jfRounds.{n}"), store.get(f"jfGameStack.chunk.{seq}")]
        texts = [
            r.get("output" if i == 0 else "assistant")
            for i, r in enumerate(stored)
            if isinstance(r, dict)
        ]
        wrong = next((t for t in texts if t != revealed), None)
        if wrong is None:
            self.ledger.credit(C.STORE_MODEL, ("JF-INT-002", "JF-INT-010"))
            return
        if isinstance(wrong, str) and wrong.startswith(revealed) and "DISCARDED-CANARY" in wrong:
            ids: tuple[str, ...] = ("JF-INT-002", "JF-INT-009")
            what = "the discarded continuation too"
        elif isinstance(wrong, str) and revealed in wrong:
            ids, what = ("JF-INT-010", "JF-INT-002"), "an intervention marker"
        else:
            ids, what = ("JF-INT-002",), "a different text"
        self.ledger.expect(
            C.STORE_MODEL,
            False,
            f"the intervened round {n} was stored with {what}: expected the revealed prefix "
            f"{short(revealed)}, got {short(wrong)}",
            ids=ids,
        )

    def canaries_in_store(self, store: dict[str, Any], log: list[Any]) -> None:
        """No scene text in game memory, no discarded continuation nor refusal message at all."""
        public = [v for k, v in store.items() if not k.startswith("jfCatalystStack.")]
        public += [e for e in log if not str(e.get("key", "")).startswith("jfCatalystStack.")]
        leak = find(public, "SCENE-CANARY")
        self.ledger.expect(
            C.CANARY_ABSENT,
            leak is None,
            lambda: f"scene transcript text reached game memory: …{leak}…",
            ids=("JF-CAT-008", "JF-CAT-002"),
        )
        everything = [store, log]
        leak = find(everything, "DISCARDED-CANARY")
        self.ledger.expect(
            C.CANARY_ABSENT,
            leak is None,
            lambda: f"the discarded continuation of an intervene was stored: …{leak}…",
            ids=("JF-INT-009",),
        )
        self.ledger.expect(
            C.CANARY_ABSENT,
            find(everything, "REFUSAL-CANARY") is None,
            "a refusal's free-text message was stored",
            ids=("JF-CALL-012",),
        )

    def rebuilt_stack(self, op: str, dumped: dict[str, Any], model: GameModel) -> None:
        """The rebuilt game stack is the deterministic rebuild."""
        game_keys = {k: v for k, v in dumped.items() if k.startswith("jfGameStack.")}
        expected = {k: v for k, v in model.store().items() if k.startswith("jfGameStack.")}
        self.ledger.expect(
            C.DETERMINISM,
            jcs(game_keys) == jcs(expected),
            f"{op}: the rebuilt game stack is not the deterministic rebuild",
            ids=("JF-HIST-006",),
        )


def _diffs(expected: Encoded, actual: Encoded) -> list[Diff]:
    """Per-key differences between the expected and the dumped store."""
    out = []
    for key in expected.differing(actual):
        if key not in actual.texts:
            out.append(Diff(key, "missing", expected.store[key], ABSENT))
        elif key not in expected.texts:
            out.append(Diff(key, "unexpected", ABSENT, actual.store[key]))
        else:
            out.append(Diff(key, "different", expected.store[key], actual.store[key]))
    return out


def _log_message(expected: list[Any], got: list[Any]) -> str:
    ek = [(e["key"], e["op"]) for e in expected]
    gk = [(e.get("key"), e.get("op")) for e in got] if isinstance(got, list) else got
    if ek != gk:
        return f"change log entries {gk[:8]}… differ from the net diff {ek[:8]}…"
    for e, g in zip(expected, got, strict=False):
        if jcs(e) != jcs(g):
            return f"change log entry for {e['key']} holds a different value than the store"
    return "change log differs from the net diff"
