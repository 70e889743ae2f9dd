"""Scenarios of durability: a clean restart, and kills mid-operation and mid-publication
(SIGKILL over stdio; an injected crash at a chosen write boundary in process)."""

from __future__ import annotations

from jfsm_conformance.model.texts import canary, make_text
from jfsm_conformance.scenarios.registry import GAME_THRESHOLD, fill_to, game, ok, scenario
from jfsm_conformance.steps.session import Session


@scenario("restart", "ATOM-004", needs="durableRestart")
def restart(s: Session) -> None:
    g = game(s)
    s.record_round(g, "r1", make_text(2000, "astral"))
    s.start_scene(g, "kept")
    s.scene_exchange(g, "kept", canary("SCENE", 20), "scene text")
    fill_to(s, g, GAME_THRESHOLD + 1)
    s.generate(g, replies=[ok("before-restart")])
    s.intervene(
        g, "x", "y" + canary("DISCARDED", 7), 1, replies=[{"reply": "refuse", "code": "later"}]
    )
    s.checkpoint(g)
    s.write(g, {"after": "checkpoint"})
    s.restart()
    s.generate(g, replies=[ok("after-restart")])
    s.record_round(g, "r9", "after restart")


# Where the kills land. In process (kill_mode "crash"): durable write boundaries of the
# operation, counted from 0 (before its first write, flush or rename). A commit of the
# reference file store is a write, its middle, its end and a flush (boundaries 0-4),
# preceded after a reopen by an extension of its log and its flush (then 0-8), so the points
# fall before, inside and after one commit, and past it (the operation answers, then the
# driver dies: it must reopen to "after"). A publication in two commits reopens from some of
# them with its chunks gone and no summary. Each kill reopens the driver, so they are few.
# Over stdio: delays in milliseconds after the compression reply left the fake (SIGKILL).
PUBLICATION_CRASH_POINTS = (0, 1, 2, 4, 7)
PUBLICATION_DELAYS_MS = (0.0, 0.5, 2.0, 5.0, 20.0)
ROUND_CRASH_POINTS = (0, 1, 5, 6, 12)


@scenario("kill-mid-publication", "ATOM-008 ATOM-004 ATOM-003", needs="kill+durableRestart")
def kill_mid_publication(s: Session) -> None:
    """The driver is killed while it publishes a summary: before or after, never a mix."""
    g = game(s)
    s.record_round(g, "r1", make_text(5_000, "mixed"))
    if s.kill_mode == "crash":
        points = [(0.0, at) for at in PUBLICATION_CRASH_POINTS]
    else:
        points = [(delay, 0) for delay in PUBLICATION_DELAYS_MS]
    threshold = s.world.thresholds["game"]

    def replay_unpublished() -> None:
        """The reply of a kill that reopened before its publication is replayed to its key:
        a generation now publishes it. Before a new round, which would change the key."""
        if s.world.games[g].due(None, threshold) and not s.can_hold(g, None):
            s.generate(g)

    for i, (delay, at) in enumerate(points):
        replay_unpublished()
        if not s.world.games[g].due(None, threshold):
            fill_to(s, g, GAME_THRESHOLD + 1)
        s.kill_during_publication(g, ok(f"killed-{i}", 300), delay, at)
    replay_unpublished()  # the last kill's too (over stdio, a slow machine may not publish)
    s.record_round(g, "after", "the kills")
    s.generate(g)


@scenario("kill-mid-operation", "ATOM-004 ATOM-001", needs="kill+durableRestart")
def kill_mid_operation(s: Session) -> None:
    g = game(s)
    s.record_round(g, "r1", "one")
    points = ROUND_CRASH_POINTS if s.kill_mode == "crash" else (0, 0, 0)
    for i, at in enumerate(points):
        s.kill_during_round(g, f"killed {i}", make_text(20_000, "mixed"), at)
    s.record_round(g, "r-after", "after the kills")
