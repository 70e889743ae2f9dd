"""Scenarios of compression: the trigger and its boundary, publication, failure outcomes,
retries, stale results, outcome precedence, and intervenes with their forced compression."""

from __future__ import annotations

from typing import Any

from jfsm.spec import constants
from jfsm_conformance.model.canon import SUMMARY_ENVELOPE
from jfsm_conformance.model.texts import canary, make_text
from jfsm_conformance.scenarios.registry import GAME_THRESHOLD, HUMANS, fill_to, game, ok, scenario
from jfsm_conformance.steps.session import Session

# -- COMP: trigger and boundary -----------------------------------------------------------------


@scenario(
    "threshold-boundary",
    "COMP-001 TEXT-002 TEXT-003 TEXT-004 COMP-002 CALL-003 COMP-004 COMP-005 "
    "STORE-001 STORE-002 STORE-003 STORE-004 STORE-007 ATOM-001",
)
def threshold_boundary(s: Session) -> None:
    g = game(s)
    s.record_round(g, make_text(1000, "astral", "\u27eaA\u27eb"), make_text(1000, "combining"))
    fill_to(s, g, GAME_THRESHOLD, flavour="astral")  # UTF-16 length far above 300,000
    s.generate(g)  # exactly 300,000 code points: not due
    n = max(s.world.games[g].rounds)
    r = s.world.games[g].rounds[n]
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
    fill_to(s, g, GAME_THRESHOLD + 101)
    # a block of 300,072: smaller, and no suffix
    s.generate(g, replies=[ok("alone", GAME_THRESHOLD + 50)])
    s.generate(g)  # summary alone, 300,072 > 300,000 code points, no exact chunk: not due
    s.record_round(g, "after", "one exact chunk again")
    s.generate(g, replies=[ok("alone-2")])


@scenario("catalyst-threshold", "COMP-001 CALL-002 STORE-005 CAT-002 CAT-008 TEXT-003")
def catalyst_threshold(s: Session) -> None:
    g = game(s)
    s.record_round(g, "start", "the war begins")
    s.start_scene(g, "duel")
    s.scene_exchange(g, "duel", canary("SCENE", 1), make_text(100, "crlf"))
    stack = s.world.games[g].scenes["duel"].stack
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
    fill_to(s, g, GAME_THRESHOLD + 1, flavour="mixed")
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
    fill_to(s, g, GAME_THRESHOLD + 10, flavour="controls")
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
    chars = s.world.games[g].game.length() - SUMMARY_ENVELOPE
    summary = make_text(chars, "astral", "SUMMARY\u27eaeven\u27eb")
    s.generate(g, replies=[{"reply": "success", "summary": summary, "callId": "call-even"}])
    s.record_round(g, "next even", "x")
    # a block exactly one code point shorter, in astral characters (more UTF-16 units)
    chars = s.world.games[g].game.length() - 23
    summary = make_text(chars, "astral", "SUMMARY\u27eatight\u27eb")
    s.generate(g, replies=[{"reply": "success", "summary": summary, "callId": "call-tight"}])


@scenario("retry-then-success", "CALL-004 CALL-007 CALL-009 CALL-011 CALL-001 CALL-010")
def retry_then_success(s: Session) -> None:
    g = game(s)
    fill_to(s, g, GAME_THRESHOLD + 1)
    s.hold_generate(g, None, {"reply": "http_status", "status": 503})
    # the participants change while the first attempt is in flight: the retry must see them
    s.set_participants(g, [{"id": "p-new", "human": True, "spectator": False}, *HUMANS])
    s.release(retries=[ok("retried")])


@scenario("stale-results", "COMP-011 CAT-009 HIST-007 STORE-005")
def stale_results(s: Session) -> None:
    g = game(s)
    s.record_round(g, "one", "first")
    fill_to(s, g, GAME_THRESHOLD + 1)
    s.hold_generate(g, None, ok("stale-reset", 50))
    s.reset(g, 1)
    s.release()
    fill_to(s, g, GAME_THRESHOLD + 1)
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
    fill_to(s, g, GAME_THRESHOLD + 1)
    s.hold_generate(g, None, {"reply": "empty", "summary": "  "})
    s.record_round(g, "three", "third")
    s.reset(g, 2)
    s.release()  # empty for a stack rebuilt meanwhile: stale
    s.reset(g, 1)
    fill_to(s, g, GAME_THRESHOLD + 1)
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


@scenario("intervene-retry", "INT-004 INT-006 INT-007 INT-008 CALL-007 COMP-009 COMP-014")
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
    fill_to(s, g, GAME_THRESHOLD + 1)
    s.hold_generate(g, None, ok("big", 60))
    s.intervene(g, "second twist", "visible " + canary("DISCARDED", 5), 8)
    s.expect_pending_generation(g)
    # the held generation may only start once the owed forced compression published
    s.release(then=[{"reply": "refuse", "code": "not-now"}])
    s.record_round(g, "later", "a new logical compression")
    s.generate(g, replies=[ok("forced-after")])
    fill_to(s, g, GAME_THRESHOLD + 1)
    s.hold_generate(g, None, ok("big-2", 60))
    s.intervene(g, "third twist", "seen " + canary("DISCARDED", 6), 5)
    s.release(then=[ok("forced-in-the-same-generation")])
