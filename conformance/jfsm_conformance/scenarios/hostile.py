"""Scenarios of hostile input over the protocol (JF-ERR-006 to JF-ERR-010): what the limits
of `spec/constants.json` forbid, and what is no message at all, in every argument slot of
every op. The probes are built in `jfsm_conformance.probes.protocol`."""

from __future__ import annotations

from jfsm_conformance.probes import protocol as H
from jfsm_conformance.probes.http import held_slots_probe, http_probes, slots_probe
from jfsm_conformance.probes.state import state_probes
from jfsm_conformance.scenarios.registry import game, scenario
from jfsm_conformance.steps.session import Session
from jfsm_conformance.verify.blame import Ctx


def _game_with_scene(s: Session) -> tuple[str, str]:
    g = game(s)
    s.record_round(g, "r1", "one")
    s.write(g, {"kept": {"nested": [1, "two"]}})
    s.start_scene(g, "sc")
    s.scene_exchange(g, "sc", "u", "a")
    return g, "sc"


def _run(s: Session, g: str, scene: str, probes: list[dict[str, object]]) -> None:
    for probe in probes:
        s.hostile(g, scene, probe)
    s._verify(g, Ctx("hostile input", refused=True, verifies=("JF-ERR-010",)))


@scenario("hostile-ids", "ERR-006 ERR-010")
def hostile_ids(s: Session) -> None:
    """Ids out of `limits.id_pattern` in every id slot are refused; the longest id the
    pattern allows is served."""
    g, scene = _game_with_scene(s)
    longest = g + "-" + "x" * (H.limits().id_max - len(g) - 1)
    s.new_game(longest)
    s.start_scene(longest, "s" * H.limits().id_max)
    _run(s, g, scene, [p for p in H.slot_probes() if "JF-ERR-006" in p["ids"]])
    _run(s, g, scene, H.forget_probes())


@scenario("hostile-values", "ERR-007 ERR-010")
def hostile_values(s: Session) -> None:
    """Values one past `limits.value_max_depth` are refused; at the limit they are written."""
    g, scene = _game_with_scene(s)
    s.write(g, {"at-limit": H.nested(H.limits().value_max_depth)})
    s.write(g, {"at-limit-cheat": H.nested(H.limits().value_max_depth)}, cheat=True)
    _run(s, g, scene, H.depth_probes())


@scenario("hostile-slots", "ERR-008 ERR-010")
def hostile_slots(s: Session) -> None:
    """A lone surrogate, a wrong type, bad JSON or nothing in every argument slot of every
    op; unknown ops; args that are not an object."""
    g, scene = _game_with_scene(s)
    _run(s, g, scene, [p for p in H.slot_probes() if "JF-ERR-006" not in p["ids"]])


@scenario("hostile-messages", "ERR-008 ERR-009 ERR-010")
def hostile_messages(s: Session) -> None:
    """What cannot be read as a message (not an object, a bad id, too deep, not UTF-8, not
    JSON, NaN, past `limits.message_max_bytes`) gets one reply with id null, and the next
    message is served."""
    g, scene = _game_with_scene(s)
    _run(s, g, scene, H.message_probes() + H.wire_probes())


@scenario("hostile-http", "ERR-011 ERR-012 ERR-017 ERR-019", needs="http")
def hostile_http(s: Session) -> None:
    """What an HTTP driver refuses before acting (foreign Host or Origin, no or a wrong
    token, a wrong Content-Type, another method or path) and malformed requests (bad,
    duplicated, missing or over-size Content-Length, headers too long or never completed, a
    body that is no JSON): the status of spec/driver/protocol.json, an error reply, nothing
    changed, the next request served; a request breaking several rules, the first one's
    status (JF-ERR-019), every slot held included (503 before 415). Then silent connections
    past the unauthenticated budget: an authorized request on a new connection is answered
    at once, and every silent one is closed after `auth_timeout_seconds`."""
    g, scene = _game_with_scene(s)
    _run(s, g, scene, [*http_probes(), held_slots_probe(), slots_probe()])


@scenario("hostile-state", "ERR-016", needs="state+durableRestart")
def hostile_state(s: Session) -> None:
    """The driver's command started on a state directory that is a symbolic link or open to
    group and others must refuse to start; with symbolic links planted in place of its
    files and folders, it must write nothing through them (`jfsm_conformance.probes.state`)."""
    for probe in state_probes():  # each on processes of its own: the session's games aside
        s.hostile("", "", probe)
