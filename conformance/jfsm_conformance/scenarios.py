"""Deterministic scenarios: fixed step sequences that pin each requirement at least once.

The Hypothesis machines (`jfsm_conformance.machines`) explore interleavings at random; these
scenarios make sure every requirement the suite can observe is exercised in every run, at the
spec thresholds, whatever the random draw. Each scenario names the requirement IDs it targets
(for `--select` and the coverage table) and only calls `Session` steps, so a failing scenario
has a replayable trace like any other failure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jfsm.spec import constants
from jfsm_conformance.session import Session
from jfsm_conformance.texts import canary, make_text

__all__ = ["SCENARIOS", "Scenario"]

HUMANS = [
    {"id": "p-zoë", "human": True, "spectator": False},
    {"id": "p-adam", "human": True, "spectator": False},
    {"id": "bot-1", "human": False, "spectator": False},
    {"id": "p-watcher", "human": True, "spectator": True},
]


@dataclass(frozen=True)
class Scenario:
    name: str
    ids: tuple[str, ...]
    run: Callable[[Session], None]
    needs: str = ""  # a capability the scenario needs: "durableRestart", "stdio"


SCENARIOS: list[Scenario] = []


def scenario(
    name: str, ids: str, needs: str = ""
) -> Callable[[Callable[[Session], None]], Callable[[Session], None]]:
    def wrap(fn: Callable[[Session], None]) -> Callable[[Session], None]:
        SCENARIOS.append(Scenario(name, tuple(f"JF-{i}" for i in ids.split()), fn, needs))
        return fn

    return wrap


def ok(summary_tag: str, chars: int = 40, call: str | None = None) -> dict[str, str]:
    text = make_text(chars, "mixed", f"SUMMARY\u27ea{summary_tag}\u27eb ")
    return {"reply": "success", "summary": text, "callId": call or f"call-{summary_tag}"}


def game(s: Session, participants: list[dict[str, object]] | None = None) -> str:
    g = s.fresh("game-")
    s.new_game(g)
    s.set_participants(g, participants if participants is not None else HUMANS)
    return g


def fill_to(s: Session, g: str, total: int, flavour: str = "ascii", user: str = "fill") -> None:
    """Append one round so the game stack's canonical length becomes exactly `total`."""
    need = total - s.games[g].game.length() - 42 - len(user)
    assert need >= 0, "stack already too long"
    s.record_round(g, user, make_text(need, flavour, f"\u27eaR{len(s.games[g].rounds) + 1}\u27eb"))


# -- COMP: trigger and boundary -----------------------------------------------------------------


@scenario(
    "threshold-boundary",
    "COMP-001 TEXT-002 TEXT-003 TEXT-004 COMP-002 CALL-003 COMP-004 COMP-005 "
    "STORE-001 STORE-002 STORE-003 STORE-004 STORE-007 ATOM-001",
)
def threshold_boundary(s: Session) -> None:
    g = game(s)
    s.record_round(g, make_text(1000, "astral", "\u27eaA\u27eb"), make_text(1000, "combining"))
    fill_to(s, g, 300_000, flavour="astral")  # UTF-16 length far above 300,000
    s.generate(g)  # exactly 300,000 code points: not due
    n = max(s.games[g].rounds)
    r = s.games[g].rounds[n]
    s.edit_round(g, n, r["input"], r["output"] + "\U0001f600")  # 300,001
    # the summary is stored verbatim: leading and trailing white space included
    padded = ok("boundary")
    padded["summary"] = " \n\t" + padded["summary"] + "\r\n  "
    s.generate(g, replies=[padded])
    s.record_round(g, "after", "summary")
    s.generate(g)  # far below: not due


@scenario("summary-alone", "COMP-001 COMP-004 COMP-005")
def summary_alone(s: Session) -> None:
    """A stack that holds only a summary is never due, however long it is."""
    g = game(s)
    fill_to(s, g, 300_101)
    s.generate(g, replies=[ok("alone", 300_050)])  # block of 300,072: smaller, and no suffix
    s.generate(g)  # summary alone, 300,072 > 300,000 code points, no exact chunk: not due
    s.record_round(g, "after", "one exact chunk again")
    s.generate(g, replies=[ok("alone-2")])


@scenario("catalyst-threshold", "COMP-001 CALL-002 STORE-005 CAT-002 CAT-008 TEXT-003")
def catalyst_threshold(s: Session) -> None:
    g = game(s)
    s.record_round(g, "start", "the war begins")
    s.start_scene(g, "duel")
    s.scene_exchange(g, "duel", canary("SCENE", 1), make_text(100, "crlf"))
    stack = s.games[g].scenes["duel"].stack
    need = constants().catalyst_threshold - stack.length() - constants().exchange_envelope - 10
    s.scene_exchange(
        g, "duel", make_text(10, "astral"), make_text(need, "astral", canary("SCENE", 2))
    )
    s.generate(g, "duel")  # exactly 150,000: not due
    s.scene_exchange(g, "duel", "", "")  # +42
    s.generate(g, "duel", replies=[ok("scene")])
    s.scene_exchange(g, "duel", canary("SCENE", 3), "after the summary")
    s.generate(g)  # the game stack is small: no request, and no scene text in it
    s.publish_scene(g, "duel", "The duel ended in a draw.", "Meanwhile, in the capital...")


@scenario("suffix-survives", "COMP-003 CONC-002 CONC-003 COMP-005 COMP-004 CALL-011")
def suffix_survives(s: Session) -> None:
    g = game(s)
    fill_to(s, g, 300_001, flavour="mixed")
    s.start_scene(g, "raid")
    s.scene_exchange(g, "raid", canary("SCENE", 4), "raid plan")
    s.hold_generate(g, None, ok("suffix", 100))
    s.record_round(g, "while in flight 1", make_text(500, "astral"))
    s.generate(g)  # a second generation: in_flight, no second request
    s.publish_scene(g, "raid", "The raid failed.", "Smoke rises over the harbour.")
    s.record_round(g, "while in flight 2", make_text(20, "crlf"))
    s.release()
    s.record_round(g, "after", "publication")


@scenario(
    "failure-outcomes",
    "COMP-006 COMP-007 COMP-008 COMP-009 COMP-012 CALL-005 CALL-007 CALL-011 CALL-012 TEXT-003",
)
def failure_outcomes(s: Session) -> None:
    g = game(s)
    fill_to(s, g, 300_010, flavour="controls")
    failures: list[list[dict[str, Any]]] = [
        [{"reply": "refuse", "code": "policy", "message": canary("REFUSAL", 1)}],
        [{"reply": "empty", "summary": " \n\t\u3000\u00a0"}],
        [{"reply": "not_smaller", "extra": 0}],
        [{"reply": "not_smaller", "extra": 5}],
        [{"reply": "http_status", "status": 503}] * 3,
        [{"reply": "malformed"}, {"reply": "wrong_schema"}, {"reply": "reset"}],
    ]
    for i, replies in enumerate(failures):
        s.generate(g, replies=replies)  # fails; the generation is not refused
        s.record_round(g, f"next {i}", "x")  # a new logical compression next time
    # a summary whose block is exactly as long as the input: not smaller
    chars = s.games[g].game.length() - 22
    summary = make_text(chars, "astral", "SUMMARY\u27eaeven\u27eb")
    s.generate(g, replies=[{"reply": "success", "summary": summary, "callId": "call-even"}])
    s.record_round(g, "next even", "x")
    # a block exactly one code point shorter, in astral characters (more UTF-16 units)
    chars = s.games[g].game.length() - 23
    summary = make_text(chars, "astral", "SUMMARY\u27eatight\u27eb")
    s.generate(g, replies=[{"reply": "success", "summary": summary, "callId": "call-tight"}])


@scenario("retry-then-success", "CALL-004 CALL-007 CALL-009 CALL-011 CALL-001 CALL-010")
def retry_then_success(s: Session) -> None:
    g = game(s)
    fill_to(s, g, 300_001)
    s.hold_generate(g, None, {"reply": "http_status", "status": 503})
    # the participants change while the first attempt is in flight: the retry must see them
    s.set_participants(g, [{"id": "p-new", "human": True, "spectator": False}, *HUMANS])
    s.release(retries=[ok("retried")])


@scenario("stale-results", "COMP-011 CAT-009 HIST-007 STORE-005")
def stale_results(s: Session) -> None:
    g = game(s)
    s.record_round(g, "one", "first")
    fill_to(s, g, 300_001)
    s.hold_generate(g, None, ok("stale-reset", 50))
    s.reset(g, 1)
    s.release()
    fill_to(s, g, 300_001)
    s.hold_generate(g, None, ok("stale-edit", 50))
    s.edit_round(g, 1, "one (edited)", "first")
    s.release()
    s.start_scene(g, "ghost")
    s.scene_exchange(g, "ghost", canary("SCENE", 5), make_text(150_001, "ascii"))
    s.hold_generate(g, "ghost", ok("stale-scene", 50))
    s.cancel_scene(g, "ghost")
    s.release()
    s.start_scene(g, "phantom")
    s.scene_exchange(g, "phantom", canary("SCENE", 6), make_text(150_001, "astral"))
    s.hold_generate(g, "phantom", ok("stale-scene-2", 50))
    s.publish_scene(g, "phantom", "The phantom vanished.", "Bells ring at midnight.")
    s.release()


@scenario("outcome-precedence", "COMP-013 COMP-011 CAT-009")
def outcome_precedence(s: Session) -> None:
    """Several outcomes at once: stale comes first, whatever the reply itself says."""
    g = game(s)
    s.record_round(g, "one", "first")
    s.start_scene(g, "refusing")
    s.scene_exchange(g, "refusing", canary("SCENE", 32), make_text(150_001, "mixed"))
    s.hold_generate(g, "refusing", {"reply": "refuse", "code": "busy"})
    s.cancel_scene(g, "refusing")
    s.release()  # refused for a scene ended meanwhile: stale
    s.reset(g, 1)
    fill_to(s, g, 300_001)
    s.hold_generate(g, None, {"reply": "empty", "summary": "  "})
    s.record_round(g, "three", "third")
    s.reset(g, 2)
    s.release()  # empty for a stack rebuilt meanwhile: stale
    s.reset(g, 1)
    fill_to(s, g, 300_001)
    s.hold_generate(g, None, {"reply": "http_status", "status": 503})
    s.edit_round(g, 1, "one (edited again)", "first")
    s.release(retries=[{"reply": "reset"}, {"reply": "malformed"}])  # transport, yet stale


# -- INT -----------------------------------------------------------------------------------------


@scenario("intervene-forced", "INT-001 INT-002 INT-003 INT-004 INT-005 INT-006 INT-009 INT-010")
def intervene_forced(s: Session) -> None:
    g = game(s)
    s.record_round(g, "opening", "the scene is set")
    output = make_text(30, "astral", "revealed ") + canary("DISCARDED", 1) + " never shown"
    for bad in (-1, len(output) + 1, "3", 2.5, None):
        s.invalid(
            g,
            "intervene",
            {"input": "q", "output": output, "revealed": bad},
            "invalid_input",
            ["JF-INT-001", "JF-ERR-005"],
        )
    s.intervene(g, "what happens next?", output, 30, replies=[ok("forced")])
    s.intervene(
        g, "reveal nothing", "\U0001f600" + canary("DISCARDED", 2), 0, replies=[ok("forced-0")]
    )
    s.intervene(g, "reveal all", "all of it \U0001f600", 11, replies=[ok("forced-all")])


@scenario("intervene-retry", "INT-004 INT-006 INT-007 INT-008 CALL-007 COMP-009")
def intervene_retry(s: Session) -> None:
    g = game(s)
    s.record_round(g, "opening", "the scene is set")
    out = "a tale " + canary("DISCARDED", 3)
    s.intervene(g, "twist", out, 7, replies=[{"reply": "http_status", "status": 503}] * 3)
    s.generate(g, replies=[{"reply": "refuse", "code": "busy", "message": canary("REFUSAL", 2)}])
    # asking again after a completed failure takes a new Idempotency-Key (retry 1): a service
    # that replays completed replies must not pin the refusal on the forced compression
    s.generate(g, replies=[{"reply": "empty", "summary": " "}])
    s.start_scene(g, "side")
    s.generate(g, "side", replies=[{"reply": "refuse", "code": "busy"}])  # refused as well
    s.scene_exchange(g, "side", canary("SCENE", 9), make_text(150_001, "mixed"))
    s.record_round(g, "later", "more")  # a new logical compression
    # one generation, two compressions: the owed forced one, then the scene's own
    s.generate(g, "side", replies=[ok("settled"), ok("side-scene")])
    s.generate(g)


@scenario("intervene-in-flight", "INT-004 INT-005 INT-006 INT-008 CONC-002 CONC-003")
def intervene_in_flight(s: Session) -> None:
    g = game(s)
    s.record_round(g, "opening", "the scene is set")
    s.hold_intervene(g, "twist", "shown " + canary("DISCARDED", 4), 6, ok("held-forced"))
    s.expect_pending_generation(g)
    s.record_round(g, "meanwhile", "a round recorded during the forced compression")
    s.release()
    # a threshold compression is in flight when an intervene arrives: the forced one waits
    fill_to(s, g, 300_001)
    s.hold_generate(g, None, ok("big", 60))
    s.intervene(g, "second twist", "visible " + canary("DISCARDED", 5), 8)
    s.expect_pending_generation(g)
    # the held generation may only start once the owed forced compression published
    s.release(then=[{"reply": "refuse", "code": "not-now"}])
    s.record_round(g, "later", "a new logical compression")
    s.generate(g, replies=[ok("forced-after")])
    fill_to(s, g, 300_001)
    s.hold_generate(g, None, ok("big-2", 60))
    s.intervene(g, "third twist", "seen " + canary("DISCARDED", 6), 5)
    s.release(then=[ok("forced-in-the-same-generation")])


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
    fill_to(s, g, 300_001)
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
    fill_to(s, g, 300_001)
    s.generate(g, replies=[ok("source-after-copy")])


@scenario("duplicate-copies", "HIST-008 HIST-012 CALL-009")
def duplicate_copies(s: Session) -> None:
    """A duplicate holds every key of the source (memory and game data) and compresses for
    the source's participants until they are set otherwise."""
    g = game(s)
    s.write(g, {"map": {"regions": ["north", "south"]}, "score": 3})
    s.record_round(g, "r1", make_text(100, "mixed"))
    s.intervene(g, "r2", "shown " + canary("DISCARDED", 33), 6, replies=[ok("dup-forced")])
    fill_to(s, g, 300_001)
    s.checkpoint(g)
    s.duplicate(g, g + "-copy")
    s.generate(g + "-copy", replies=[ok("copy-inherits", 90)])
    s.set_participants(g + "-copy", [{"id": "p-other", "human": True, "spectator": False}])
    s.record_round(g + "-copy", "more", make_text(300_001, "ascii"))
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
    used = sum(42 + len(r["input"]) + len(r["output"]) for r in rounds)
    last = {"input": "old 5"}
    last["output"] = make_text(300_001 - used - 42 - len(last["input"]), "astral", "\u27eaS5\u27eb")
    s.convert(g, [*rounds, last])  # canonical length 300,001: due, yet no request
    s.record_round(g, "live 6", "the first live round")
    s.generate(g, replies=[ok("seeds", 200)])
    s.reset(g, 5)  # back to the seeds alone: a rebuild, again without a request
    s.generate(g, replies=[ok("seeds-again", 200)])


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
    s.record_round(g, "r1", make_text(150_000, "ascii", "\u27eaQ1\u27eb"))
    s.record_round(g, "r2", make_text(150_000, "ascii", "\u27eaQ2\u27eb"))
    s.start_scene(g, "qs")
    s.checkpoint(g)
    # fill with game data so that the footprint is exactly at (or one below) the quota
    big = _fill_value(s, g, 31_457_280)
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
        {"round": 1, "input": "r1 but longer", "output": make_text(150_000, "ascii")},
        "quota_exceeded",
        ["JF-QUOTA-002"],
    )
    # publication: the summary (6 JCS bytes per control character) does not fit -> quota
    summary = make_text(250_000, "controls", "SUMMARY\u27eaquota\u27eb")
    s.generate(g, replies=[{"reply": "success", "summary": summary, "callId": "call-quota"}])
    # make room for one small round (a new logical compression), then fill up again
    s.write(g, {"big": "x"}, ["pad"] if big[1] is not None else [])
    s.record_round(g, "r3", "a small round")
    big = _fill_value(s, g, 31_457_280)
    s.write(g, {"big": big[0], **({"pad": big[1]} if big[1] is not None else {})})
    # publication whose post-state fits although store + summary would not (ATOM-003)
    fits = make_text(50_000, "ascii", "SUMMARY\u27eafits\u27eb")
    s.generate(g, replies=[{"reply": "success", "summary": fits, "callId": "call-fits"}])
    s.write(g, {}, ["big"] + (["pad"] if big[1] is not None else []))


def _fill_value(s: Session, g: str, target: int) -> tuple[str, str | None]:
    """One ASCII value (or two) that brings the footprint to `target` or `target - 1`."""
    from jfsm_conformance.canon import change_log, footprint

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
    fill_to(s, g, 300_001)
    s.start_scene(g, "war")
    s.scene_exchange(g, "war", canary("SCENE", 30), make_text(150_001, "mixed"))
    s.hold_generate(g, None, ok("game-held", 80))
    s.generate(g, "war", replies=[ok("scene-meanwhile", 60)])
    s.release()
    s.scene_exchange(g, "war", canary("SCENE", 31), make_text(150_001, "astral"))
    s.record_round(g, "more", make_text(300_001, "ascii"))
    s.hold_generate(g, "war", ok("scene-held", 60))
    s.generate(g, replies=[ok("game-meanwhile", 80)])
    s.release()


@scenario("concurrent-rounds", "CONC-001")
def concurrent_rounds(s: Session) -> None:
    g = game(s)
    s.concurrent_rounds(
        g, [[f"c{i}", make_text(100 * i, "mixed", f"\u27eaC{i}\u27eb")] for i in range(1, 7)]
    )


@scenario("restart", "ATOM-004", needs="durableRestart")
def restart(s: Session) -> None:
    g = game(s)
    s.record_round(g, "r1", make_text(2000, "astral"))
    s.start_scene(g, "kept")
    s.scene_exchange(g, "kept", canary("SCENE", 20), "scene text")
    fill_to(s, g, 300_001)
    s.generate(g, replies=[ok("before-restart")])
    s.intervene(
        g, "x", "y" + canary("DISCARDED", 7), 1, replies=[{"reply": "refuse", "code": "later"}]
    )
    s.checkpoint(g)
    s.write(g, {"after": "checkpoint"})
    s.restart()
    s.generate(g, replies=[ok("after-restart")])
    s.record_round(g, "r9", "after restart")


@scenario("kill-mid-publication", "ATOM-004 ATOM-003", needs="stdio+durableRestart")
def kill_mid_publication(s: Session) -> None:
    """The driver is killed while it publishes a summary: before or after, never a mix."""
    g = game(s)
    s.record_round(g, "r1", make_text(5_000, "mixed"))
    for i, delay in enumerate((0.0, 0.5, 2.0, 5.0, 20.0)):
        model = s.games[g]
        if not model.due(None, s.thresholds["game"]):
            fill_to(s, g, 300_001)
        if s.can_hold(g, None):
            s.kill_during_publication(g, ok(f"killed-{i}", 300), delay)
        else:  # the reply of an unpublished kill is replayed to the same key: it publishes
            s.generate(g)
    s.record_round(g, "after", "the kills")
    s.generate(g)


@scenario("kill-mid-operation", "ATOM-004", needs="stdio+durableRestart")
def kill_mid_operation(s: Session) -> None:
    g = game(s)
    s.record_round(g, "r1", "one")
    for i in range(3):
        s.kill_during_round(g, f"killed {i}", make_text(20_000, "mixed"))
    s.record_round(g, "r-after", "after the kills")
