"""Blame: which requirement a difference breaks, given what the step did.

`blame(diff, ctx)` names the requirement IDs a differing store key breaks (a lost suffix
chunk is JF-COMP-003, a represented chunk that survived its publication JF-COMP-005, a
repeated terminal event that changed the store JF-CAT-006, ...). `log_ids` and
`outcome_ids` do the same for the change log and a compression report. Pure functions of
the difference and the step's `Ctx`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jfsm_conformance.model.canon import jcs
from jfsm_conformance.model.oracle import Diff, InFlight

__all__ = ["Ctx", "blame", "log_ids", "outcome_ids"]


@dataclass
class Ctx:
    """What the step under verification did, to blame the right requirement on a diff."""

    op: str
    published: list[InFlight] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    refused: bool = False
    repeat: bool = False  # a repeated terminal scene event (JF-CAT-006)
    verifies: tuple[str, ...] = ()
    summaries: dict[str | None, int] = field(default_factory=dict)
    # chunk seqs per stack (None: the game stack) present in the dumped store
    chunks: dict[str | None, set[int]] = field(default_factory=dict)

    def observe(self, store: dict[str, Any], summaries: dict[str | None, int]) -> None:
        """Note the model's summaries and the dumped chunk seqs (before blaming diffs)."""
        self.summaries.update(summaries)
        for key in store:
            if ".chunk." in key:
                prefix, _, seq_text = key.rpartition(".chunk.")
                if seq_text.isdigit():
                    owner = None if prefix == "jfGameStack" else prefix.split(".", 1)[1]
                    self.chunks.setdefault(owner, set()).add(int(seq_text))


def blame(d: Diff, ctx: Ctx) -> list[str]:
    """The requirement IDs a differing key breaks, most specific first."""
    key = d.key
    ids: list[str] = []
    if ctx.repeat:
        ids.append("JF-CAT-006")
    if ctx.refused:
        ids += ["JF-ERR-002", "JF-ATOM-001"]
    if ".chunk." in key:
        ids += _chunk(d, ctx)
    elif key.endswith(".summary"):
        if ctx.failed and not ctx.published:  # a failure changed the summary: memory not intact
            ids.append("JF-COMP-009")
        ids += ["JF-COMP-004", "JF-STORE-002"]
    elif key.endswith(".meta"):
        ids += _meta(d, ctx)
    elif key.startswith("jfCatalystStack."):
        ids += ["JF-CAT-004", "JF-CAT-009", "JF-STORE-005"]
    elif key == "jfCatalystArchives":
        ids += ["JF-CAT-005", "JF-CAT-007", "JF-STORE-006"]
    elif key.startswith("jfRounds."):
        ids.append("JF-STORE-007")
        if isinstance(d.actual, dict) and d.actual.get("intervened"):
            ids += ["JF-INT-002", "JF-INT-003"]
    elif not key.startswith("jf"):
        ids.append("JF-STORE-009")
    ids += _by_op(key, ctx)
    return ids or list(ctx.verifies) or ["JF-ATOM-001"]


def _chunk(d: Diff, ctx: Ctx) -> list[str]:
    ids: list[str] = []
    through = {f.scene: f.through for f in ctx.published}
    prefix, _, seq_text = d.key.rpartition(".chunk.")
    scene = None if prefix == "jfGameStack" else prefix.split(".", 1)[1]
    seq = int(seq_text) if seq_text.isdigit() else -1
    if scene in through:
        if d.problem == "missing" and seq > through[scene]:
            ids.append("JF-COMP-003")
            if any(kept > seq for kept in ctx.chunks.get(scene, ())):
                # a later suffix chunk survived: the publication deleted a chunk it does not
                # represent, not the suffix as a whole
                ids.append("JF-COMP-005")
        elif d.problem == "unexpected" and seq <= through[scene]:
            ids += ["JF-COMP-005", "JF-ATOM-003"]
        else:
            ids.append("JF-COMP-005")
    elif ctx.failed:
        ids.append("JF-COMP-009")
    elif d.problem == "missing" and scene in ctx.summaries and seq > ctx.summaries[scene]:
        ids.append("JF-COMP-003")
    if d.problem == "unexpected" and "SCENE-CANARY" in jcs(d.actual):
        ids += ["JF-CAT-002", "JF-CAT-008"]
    if d.problem == "different" and isinstance(d.actual, dict):
        e, a = d.expected, d.actual
        if (e.get("user"), e.get("assistant")) != (a.get("user"), a.get("assistant")):
            if e.get("origin") == "intervene":
                ids += ["JF-INT-002", "JF-INT-010"]
            ids.append("JF-TEXT-002")
        if (
            set(a) - set(e)
            or e.get("origin") != a.get("origin")
            or (e.get("roundId"), e.get("catalystId")) != (a.get("roundId"), a.get("catalystId"))
        ):
            ids.append("JF-STORE-003")
        if e.get("seq") != a.get("seq"):
            ids.append("JF-STORE-004")
        if scene is not None:
            ids.append("JF-STORE-005")
    if d.problem == "missing" and not ids:
        ids.append("JF-STORE-003")
    return ids


def _meta(d: Diff, ctx: Ctx) -> list[str]:
    ids: list[str] = []
    e, a = d.expected or {}, d.actual or {}
    if isinstance(a, dict) and isinstance(e, dict):
        if e.get("forcedCompression") != a.get("forcedCompression"):
            ids += ["JF-INT-006", "JF-INT-005" if ctx.published else "JF-INT-003"]
        if e.get("nextSeq") != a.get("nextSeq"):
            ids.append("JF-STORE-004")
        if e.get("epoch") != a.get("epoch"):
            ids.append("JF-CAT-012" if d.key.startswith("jfCatalystStack.") else "JF-HIST-004")
        if set(a) != set(e) and d.key == "jfGameStack.meta":
            ids.append("JF-STORE-001")
        if d.key.startswith("jfCatalystStack."):
            if e.get("state") != a.get("state"):
                ids.append("JF-CAT-011")
            ids.append("JF-STORE-005")
    if d.problem == "unexpected" and d.key.startswith("jfCatalystStack."):
        ids += ["JF-CAT-004", "JF-CAT-007", "JF-CAT-009"]
    return ids


def _by_op(key: str, ctx: Ctx) -> list[str]:
    ids: list[str] = []
    if ctx.op in ("reset", "edit_round", "convert"):
        ids += ["JF-HIST-001", "JF-HIST-003"]
        if key.startswith("jfCatalystStack."):
            ids.append("JF-HIST-011")
        if key == "jfCatalystArchives" or (ctx.op == "reset" and key.startswith("jfRounds.")):
            ids.append("JF-HIST-010")
        if ctx.op == "convert":
            ids.append("JF-HIST-002")
    if ctx.op == "duplicate":
        ids.append("JF-HIST-008")
    if ctx.op == "create_game":
        ids.append("JF-HIST-009")
    if ctx.op == "restart":
        ids.append("JF-ATOM-004")
    if ctx.op == "publish_scene":
        ids += ["JF-CAT-003", "JF-CAT-004"]
    if ctx.op == "cancel_scene":
        ids.append("JF-CAT-007")
    if ctx.op == "intervene":
        ids.append("JF-INT-003")
    return ids


def log_ids(expected: list[Any], got: Any, ctx: Ctx) -> tuple[str, ...]:
    """The requirement a change log that is not the net diff breaks."""
    if ctx.repeat:
        return ("JF-CAT-006",)
    if ctx.op == "checkpoint":
        return ("JF-QUOTA-008",)
    if ctx.op == "duplicate":
        return ("JF-HIST-008",)
    if not isinstance(got, list):
        return ("JF-QUOTA-005",)
    ek = [e["key"] for e in expected]
    gk = [e.get("key") for e in got]
    if sorted(ek) == sorted(gk) and ek != gk:
        return ("JF-QUOTA-006",)
    if set(gk) - set(ek):
        return ("JF-QUOTA-007", "JF-QUOTA-005")
    return ("JF-QUOTA-005",)


def outcome_ids(outcome: str) -> tuple[str, ...]:
    """The requirement a wrong compression outcome breaks, by the outcome expected."""
    return {
        "empty": ("JF-COMP-006", "JF-COMP-008"),
        "not_smaller": ("JF-COMP-007", "JF-TEXT-003", "JF-COMP-008"),
        "quota": ("JF-COMP-010", "JF-ATOM-002"),
        "stale": ("JF-COMP-011", "JF-CAT-009"),
        "refused": ("JF-COMP-008",),
        "transport": ("JF-COMP-008", "JF-CALL-005"),
        "published": ("JF-COMP-004", "JF-ATOM-003", "JF-CALL-005"),
        "not_due": ("JF-COMP-001",),
        "in_flight": ("JF-CONC-003",),
    }.get(outcome, ("JF-COMP-008",))
