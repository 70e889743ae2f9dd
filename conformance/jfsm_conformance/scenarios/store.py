"""Scenarios of the store: its key and value rules, invalid input, the quota, and
concurrent appends."""

from __future__ import annotations

from jfsm_conformance.model.canon import QUOTA
from jfsm_conformance.model.texts import canary, make_text
from jfsm_conformance.scenarios.registry import GAME_THRESHOLD, fill_to, game, ok, scenario
from jfsm_conformance.steps.session import Session

# -- STORE, QUOTA, ERR -----------------------------------------------------------------------------


@scenario(
    "store-rules", "STORE-008 STORE-009 TEXT-001 QUOTA-005 QUOTA-006 QUOTA-007 QUOTA-008 ERR-002"
)
def store_rules(s: Session) -> None:
    g = game(s)
    s.write(
        g,
        {
            "zeta": 1,
            "alpha": {"nested": [1, "two"]},
            "\U0001f600key": "astral key",
            "\uff5e": "bmp",
        },
    )
    for key in ("jfGameStack.meta", "jfAnything", "jf"):
        s.invalid(g, "write", {"sets": {key: 1}}, "invalid_input", ["JF-STORE-008"])
        s.invalid(g, "cheat", {"sets": {key: 1}}, "invalid_input", ["JF-STORE-008"])
    s.invalid(g, "write", {"deletes": ["jfRounds.1"]}, "invalid_input", ["JF-STORE-008"])
    for sets in ({"k": "bad \udc00"}, {"bad \ud800": 1}, {"k": {"nested": ["\udfff"]}}):
        s.invalid(g, "write", {"sets": sets}, "invalid_input", ["JF-TEXT-001"])
    s.invalid(
        g, "write", {"sets": {"zeta": 3}, "deletes": ["zeta"]}, "invalid_input", ["JF-STORE-009"]
    )
    s.record_round(g, "r1", "one")
    s.checkpoint(g)
    s.write(g, {"temp": "created after the checkpoint"})
    s.write(g, {}, ["temp"])  # created then deleted: no entry
    s.write(g, {"zeta": 2}, cheat=True)
    s.write(g, {"zeta": 1})  # back to the base value: no entry
    s.write(g, {}, ["alpha"])
    s.checkpoint(g)


@scenario("invalid-input", "TEXT-001 ERR-001 ERR-002 ERR-005 INT-001")
def invalid_input(s: Session) -> None:
    g = game(s)
    s.record_round(g, "r1", "one")
    lone = "bad \ud800 text"
    s.invalid(g, "record_round", {"input": lone, "output": "x"}, "invalid_input", ["JF-TEXT-001"])
    s.invalid(g, "record_round", {"input": "x", "output": 42}, "invalid_input", ["JF-TEXT-001"])
    s.invalid(g, "record_round", {"input": "x"}, "invalid_input", ["JF-ERR-005"])
    s.invalid(
        g,
        "intervene",
        {"input": "x", "output": "a\udfffb", "revealed": 1},
        "invalid_input",
        ["JF-TEXT-001"],
    )
    s.invalid(
        g,
        "edit_round",
        {"round": 1, "input": lone, "output": "x"},
        "invalid_input",
        ["JF-TEXT-001"],
    )
    s.invalid(
        g, "edit_round", {"round": 9, "input": "a", "output": "b"}, "invalid_input", ["JF-ERR-005"]
    )
    s.invalid(g, "reset", {"round": 5}, "invalid_input", ["JF-ERR-005"])
    s.start_scene(g, "sc")
    s.invalid(
        g,
        "scene_exchange",
        {"scene": "sc", "user": lone, "assistant": "a"},
        "invalid_input",
        ["JF-TEXT-001"],
    )
    s.invalid(
        g,
        "publish_scene",
        {"scene": "sc", "closingSummary": lone, "meanwhileEvent": "m"},
        "invalid_input",
        ["JF-TEXT-001"],
    )
    s.invalid(
        g,
        "publish_scene",
        {"scene": "sc", "closingSummary": "c", "meanwhileEvent": None},
        "invalid_input",
        ["JF-TEXT-001"],
    )


@scenario("quota", "QUOTA-001 QUOTA-002 QUOTA-003 QUOTA-004 ATOM-002 ATOM-003 COMP-010 ERR-002")
def quota(s: Session) -> None:
    g = game(s)
    s.record_round(g, "r1", make_text(GAME_THRESHOLD // 2, "ascii", "\u27eaQ1\u27eb"))
    s.record_round(g, "r2", make_text(GAME_THRESHOLD // 2, "ascii", "\u27eaQ2\u27eb"))
    s.start_scene(g, "qs")
    s.checkpoint(g)
    # fill with game data so that the footprint is exactly at (or one below) the quota
    big = _fill_value(s, g, QUOTA)
    s.write(g, {"big": big[0], **({"pad": big[1]} if big[1] is not None else {})})
    s.invalid(
        g, "write", {"sets": {"one-more": 1}}, "quota_exceeded", ["JF-QUOTA-003", "JF-QUOTA-001"]
    )
    s.invalid(
        g, "cheat", {"sets": {"one-more": 1}}, "quota_exceeded", ["JF-QUOTA-002", "JF-QUOTA-003"]
    )
    s.invalid(g, "record_round", {"input": "r3", "output": "x"}, "quota_exceeded", ["JF-QUOTA-002"])
    s.invalid(
        g,
        "intervene",
        {"input": "r3", "output": "x", "revealed": 1},
        "quota_exceeded",
        ["JF-QUOTA-002"],
    )
    s.invalid(g, "start_scene", {"scene": "qs2"}, "quota_exceeded", ["JF-QUOTA-002"])
    s.invalid(
        g,
        "scene_exchange",
        {"scene": "qs", "user": "u", "assistant": "a"},
        "quota_exceeded",
        ["JF-QUOTA-002"],
    )
    s.invalid(
        g,
        "publish_scene",
        {"scene": "qs", "closingSummary": "c", "meanwhileEvent": "m"},
        "quota_exceeded",
        ["JF-QUOTA-002"],
    )
    s.invalid(
        g,
        "edit_round",
        {"round": 1, "input": "r1 but longer", "output": make_text(GAME_THRESHOLD // 2, "ascii")},
        "quota_exceeded",
        ["JF-QUOTA-002"],
    )
    # publication: the summary (6 JCS bytes per control character) does not fit -> quota
    summary = make_text(250_000, "controls", "SUMMARY\u27eaquota\u27eb")
    s.generate(g, replies=[{"reply": "success", "summary": summary, "callId": "call-quota"}])
    # make room for one small round (a new logical compression), then fill up again
    s.write(g, {"big": "x"}, ["pad"] if big[1] is not None else [])
    s.record_round(g, "r3", "a small round")
    big = _fill_value(s, g, QUOTA)
    s.write(g, {"big": big[0], **({"pad": big[1]} if big[1] is not None else {})})
    # publication whose post-state fits although store + summary would not (ATOM-003)
    fits = make_text(50_000, "ascii", "SUMMARY\u27eafits\u27eb")
    s.generate(g, replies=[{"reply": "success", "summary": fits, "callId": "call-fits"}])
    s.write(g, {}, ["big"] + (["pad"] if big[1] is not None else []))


def _fill_value(s: Session, g: str, target: int) -> tuple[str, str | None]:
    """One ASCII value (or two) that brings the footprint to `target` or `target - 1`."""
    from jfsm_conformance.model.canon import change_log, footprint

    store = dict(s.world.dumps[g]["store"])
    base = s.world.bases[g]

    def size(sets: dict[str, str]) -> int:
        trial = {**store, **sets}
        return footprint(trial, change_log(base, trial))

    f0 = size({"big": ""})
    gap = target - f0
    if gap % 2 == 0:
        return "x" * (gap // 2), None
    f1 = size({"big": "", "pad": ""})
    gap = target - f1
    if gap % 2 == 0:
        return "x" * (gap // 2), ""
    return "x" * ((target - f0 - 1) // 2), None


@scenario("concurrent-stacks", "CONC-004 CONC-002 COMP-003")
def concurrent_stacks(s: Session) -> None:
    """A scene's compression publishes while the game stack's is in flight, and the other
    way round (JF-CONC-004, optional: credited when the implementation shows it)."""
    g = game(s)
    fill_to(s, g, GAME_THRESHOLD + 1)
    s.start_scene(g, "war")
    s.scene_exchange(g, "war", canary("SCENE", 30), make_text(150_001, "mixed"))
    s.hold_generate(g, None, ok("game-held", 80))
    s.generate(g, "war", replies=[ok("scene-meanwhile", 60)])
    s.release()
    s.scene_exchange(g, "war", canary("SCENE", 31), make_text(150_001, "astral"))
    s.record_round(g, "more", make_text(GAME_THRESHOLD + 1, "ascii"))
    s.hold_generate(g, "war", ok("scene-held", 60))
    s.generate(g, replies=[ok("game-meanwhile", 80)])
    s.release()


@scenario("concurrent-rounds", "CONC-001")
def concurrent_rounds(s: Session) -> None:
    g = game(s)
    s.concurrent_rounds(
        g, [[f"c{i}", make_text(100 * i, "mixed", f"\u27eaC{i}\u27eb")] for i in range(1, 7)]
    )
