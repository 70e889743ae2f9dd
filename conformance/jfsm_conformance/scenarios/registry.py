"""The scenario registry (`SCENARIOS`, in run order), the `scenario` decorator, and the
helpers every scenario module uses: a game with participants, a scripted success, a round
that brings the game stack to an exact length."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from jfsm.spec import constants
from jfsm_conformance.model.canon import EXCHANGE_ENVELOPE
from jfsm_conformance.model.texts import make_text
from jfsm_conformance.steps.session import Session

__all__ = ["GAME_THRESHOLD", "HUMANS", "SCENARIOS", "Scenario", "fill_to", "game", "ok", "scenario"]

# the spec's game-stack threshold (the scenarios run at the spec thresholds)
GAME_THRESHOLD = constants().game_threshold

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
    # what the scenario needs, joined by "+": "durableRestart", "stdio", "kill" (a driver
    # the suite can kill mid-operation: stdio, or in process with crashInjection)
    needs: str = ""


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
    g = s.world.fresh("game-")
    s.new_game(g)
    s.set_participants(g, participants if participants is not None else HUMANS)
    return g


def fill_to(s: Session, g: str, total: int, flavour: str = "ascii", user: str = "fill") -> None:
    """Append one round so the game stack's canonical length becomes exactly `total`."""
    need = total - s.world.games[g].game.length() - EXCHANGE_ENVELOPE - len(user)
    assert need >= 0, "stack already too long"
    s.record_round(
        g, user, make_text(need, flavour, f"\u27eaR{len(s.world.games[g].rounds) + 1}\u27eb")
    )
