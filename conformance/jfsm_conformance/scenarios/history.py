"""Scenarios of catalyst scenes and history: the scene life cycle, rebuilds, duplicates,
conversions."""

from __future__ import annotations

from jfsm_conformance.model.canon import EXCHANGE_ENVELOPE
from jfsm_conformance.model.texts import canary, make_text
from jfsm_conformance.scenarios.registry import GAME_THRESHOLD, HUMANS, fill_to, game, ok, scenario
from jfsm_conformance.steps.session import Session

# -- CAT -----------------------------------------------------------------------------------------


@scenario(
    "scene-lifecycle",
    "CAT-001 CAT-002 CAT-003 CAT-004 CAT-005 CAT-006 CAT-007 CAT-008 CAT-010 CAT-012 ERR-004 "
    "ERR-005 STORE-006",
)
def scene_lifecycle(s: Session) -> None:
    g = game(s)
    s.start_scene(g, "early")
    s.publish_scene(g, "early", "An early omen.", "Crows gather.")  # after round 0
    s.record_round(g, "r1", "one")
    s.start_scene(g, "s1")
    s.scene_exchange(g, "s1", canary("SCENE", 10), canary("SCENE", 11))
    s.invalid(g, "start_scene", {"scene": "s1"}, "invalid_input", ["JF-CAT-010", "JF-ERR-005"])
    s.publish_scene(
        g, "s1", "The envoy agreed.\r\nTerms: \U0001f600", "Meanwhile, envoys ride north."
    )
    s.publish_scene(
        g, "s1", "The envoy agreed.\r\nTerms: \U0001f600", "Meanwhile, envoys ride north."
    )
    s.invalid(
        g, "cancel_scene", {"scene": "s1"}, "invalid_transition", ["JF-ERR-004", "JF-CAT-001"]
    )
    s.invalid(
        g,
        "scene_exchange",
        {"scene": "s1", "user": "u", "assistant": "a"},
        "invalid_transition",
        ["JF-ERR-004", "JF-CAT-001"],
    )
    s.invalid(g, "generate", {"scene": "s1"}, "invalid_transition", ["JF-ERR-004", "JF-CAT-001"])
    s.start_scene(g, "s2")
    s.scene_exchange(g, "s2", canary("SCENE", 12), "secret")
    s.cancel_scene(g, "s2")
    s.cancel_scene(g, "s2")
    s.invalid(
        g,
        "publish_scene",
        {"scene": "s2", "closingSummary": "x", "meanwhileEvent": "y"},
        "invalid_transition",
        ["JF-ERR-004", "JF-CAT-001"],
    )
    s.invalid(
        g,
        "scene_exchange",
        {"scene": "nope", "user": "u", "assistant": "a"},
        "invalid_input",
        ["JF-ERR-005"],
    )
    s.start_scene(g, "s3")
    s.invalid(g, "start_scene", {"scene": "s3"}, "invalid_input", ["JF-CAT-010", "JF-ERR-005"])
    s.cancel_scene(g, "s3")  # cancel from created
    for ended in ("s1", "s2", "early"):  # an archived id is not free either (only a reset frees it)
        s.invalid(g, "start_scene", {"scene": ended}, "invalid_input", ["JF-CAT-010", "JF-ERR-005"])


# -- HIST ----------------------------------------------------------------------------------------


@scenario(
    "history-rebuild",
    "HIST-001 HIST-003 HIST-004 HIST-005 HIST-006 HIST-007 HIST-008 HIST-009 HIST-010 HIST-011",
)
def history_rebuild(s: Session) -> None:
    g = game(s)
    s.start_scene(g, "prologue")
    s.publish_scene(g, "prologue", "Before the first round.", "The realm wakes.")
    s.record_round(g, "r1", make_text(50, "mixed"))
    s.start_scene(g, "a")
    s.publish_scene(g, "a", "Outcome A", "Meanwhile A")
    s.intervene(
        g, "r2", "shown " + canary("DISCARDED", 6), 6, replies=[{"reply": "refuse", "code": "no"}]
    )
    s.start_scene(g, "b")
    s.publish_scene(g, "b", "Outcome B", "Meanwhile B")
    s.record_round(g, "r3", make_text(50, "crlf"))
    fill_to(s, g, GAME_THRESHOLD + 1)
    s.generate(g, replies=[ok("pre-rebuild", 80)])  # forced first (the intervene), then the check
    s.start_scene(g, "ongoing")  # running through every rebuild below, untouched (JF-HIST-011)
    s.scene_exchange(g, "ongoing", canary("SCENE", 7), "still running")
    s.edit_round(g, 1, "r1 edited", make_text(60, "astral"))
    s.duplicate(g, g + "-copy")
    s.set_participants(g + "-copy", HUMANS)
    s.reset(g, 2)
    s.reset(g + "-copy", 2)
    s.compare_game_stacks(g, g + "-copy")
    s.reset(g, 1)  # the intervened round 2 goes: flag clears
    s.reset(g, 0)
    s.publish_scene(g, "ongoing", "It went on.", "Meanwhile, after the resets.")
    s.generate(g + "-copy", replies=[ok("copy-forced")])
    # the copy's compression belongs to the copy: the source's telemetry gets nothing of it
    fill_to(s, g, GAME_THRESHOLD + 1)
    s.generate(g, replies=[ok("source-after-copy")])


@scenario("duplicate-copies", "HIST-008 HIST-012 CALL-009")
def duplicate_copies(s: Session) -> None:
    """A duplicate holds every key of the source (memory and game data) and compresses for
    the source's participants until they are set otherwise."""
    g = game(s)
    s.write(g, {"map": {"regions": ["north", "south"]}, "score": 3})
    s.record_round(g, "r1", make_text(100, "mixed"))
    s.intervene(g, "r2", "shown " + canary("DISCARDED", 33), 6, replies=[ok("dup-forced")])
    fill_to(s, g, GAME_THRESHOLD + 1)
    s.checkpoint(g)
    s.duplicate(g, g + "-copy")
    s.generate(g + "-copy", replies=[ok("copy-inherits", 90)])
    s.set_participants(g + "-copy", [{"id": "p-other", "human": True, "spectator": False}])
    s.record_round(g + "-copy", "more", make_text(GAME_THRESHOLD + 1, "ascii"))
    s.generate(g + "-copy", replies=[ok("copy-own", 90)])


@scenario("conversion", "HIST-002 HIST-003 HIST-004 HIST-007 HIST-009 HIST-010 HIST-013 ERR-005")
def conversion(s: Session) -> None:
    g = game(s)
    for bad in (
        [{"input": "x"}],
        [{"input": "x", "output": "y", "round": 1}],
        [["x", "y"]],
        {"input": "x", "output": "y"},
        [{"input": "x", "output": 1}],
    ):
        s.invalid(g, "convert", {"rounds": bad}, "invalid_input", ["JF-HIST-013", "JF-ERR-005"])
    s.convert(
        g,
        [
            {"input": "old 1", "output": make_text(40, "astral")},
            {"input": "old 2\r\n", "output": ""},
        ],
    )
    s.invalid(
        g, "convert", {"rounds": [{"input": "x", "output": "y"}]}, "invalid_input", ["JF-ERR-005"]
    )
    s.record_round(g, "live 3", "now live")
    s.start_scene(g, "late")
    s.publish_scene(g, "late", "A late outcome.", "Meanwhile, late.")
    s.reset(g, 2)  # removes the only archive record: jfCatalystArchives is deleted


@scenario("conversion-over-threshold", "HIST-002 HIST-007 COMP-001 COMP-004 COMP-005")
def conversion_over_threshold(s: Session) -> None:
    """Long simple games are the ones converted: the rebuilt stack is over the game threshold,
    the conversion itself sends nothing, and the next generation compresses the seeds."""
    g = game(s)
    rounds = [
        {"input": f"old {i}", "output": make_text(60_000, "mixed", f"\u27eaS{i}\u27eb")}
        for i in range(1, 5)
    ]
    used = sum(EXCHANGE_ENVELOPE + len(r["input"]) + len(r["output"]) for r in rounds)
    last = {"input": "old 5"}
    last["output"] = make_text(
        GAME_THRESHOLD + 1 - used - EXCHANGE_ENVELOPE - len(last["input"]),
        "astral",
        "\u27eaS5\u27eb",
    )
    s.convert(g, [*rounds, last])  # canonical length 300,001: due, yet no request
    s.record_round(g, "live 6", "the first live round")
    s.generate(g, replies=[ok("seeds", 200)])
    s.reset(g, 5)  # back to the seeds alone: a rebuild, again without a request
    s.generate(g, replies=[ok("seeds-again", 200)])
