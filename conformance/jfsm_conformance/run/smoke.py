"""`jfsm conformance smoke`: is this driver wired up? A handshake and one op of each kind.

In a few seconds, before a full run: start the driver, say `hello`, then send each op of
the driver protocol once, in short chains on fresh games (rounds and compression, scenes,
conversion, restart), every step fully checked by the same session the suite uses. Each
line says `ok`, `not implemented` (the driver answered `unsupported_op`), `FAIL` (with the
check's first line and the requirement IDs) or `not run` (an earlier step of its chain
failed). Each op is listed and counted once, with its worst status: an op that several
chains use (`create_game`) gets a second line only if it does worse there. A driver that
cannot start, prints garbage on stdout or exits is diagnosed at the step where it happened,
with its exit status and stderr tail.

Exit codes: 0 every implemented op behaved, 1 an op failed, 2 the driver could not be
started or stopped answering (the Bowtie habit: `bowtie smoke`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from jfsm_conformance.client.driver import HELLO_TIMEOUT, HarnessError, ProtocolViolation
from jfsm_conformance.machines.explore import unsupported_in
from jfsm_conformance.steps.session import Session
from jfsm_conformance.verify.checks import ConformanceFailure

__all__ = ["CHAINS", "Probe", "smoke"]

Step = Callable[[Session, str], None]
_RANK = {"ok": 0, "not run": 1, "not implemented": 2, "FAIL": 3}


@dataclass(frozen=True)
class Probe:
    op: str
    run: Step


def _summary(tag: str, size: int = 12) -> dict[str, str]:
    return {"reply": "success", "summary": f"smoke {tag} ".ljust(size, "."), "callId": f"c-{tag}"}


def _new(s: Session, g: str) -> None:
    s.new_game(g)


ROUNDS = [
    Probe("create_game", _new),
    Probe(
        "set_participants",
        lambda s, g: s.set_participants(g, [{"id": "p1", "human": True, "spectator": False}]),
    ),
    Probe("record_round", lambda s, g: s.record_round(g, "hello " * 20, "world " * 20)),
    Probe("generate", lambda s, g: s.generate(g)),
    Probe(
        "intervene",
        lambda s, g: s.intervene(g, "and then?", "shown part, hidden", 10, replies=[_summary("i")]),
    ),
    Probe("write", lambda s, g: s.write(g, {"score": {"v": 1}})),
    Probe("cheat", lambda s, g: s.write(g, {"score": {"v": 2}}, cheat=True)),
    Probe("checkpoint", lambda s, g: s.checkpoint(g)),
    Probe("edit_round", lambda s, g: s.edit_round(g, 1, "hello (edited)", "world")),
    Probe("reset", lambda s, g: s.reset(g, 1)),
    Probe("duplicate", lambda s, g: s.duplicate(g, g + "-copy")),
]
SCENES = [
    Probe("create_game", _new),
    Probe("start_scene", lambda s, g: s.start_scene(g, "s1")),
    Probe("scene_exchange", lambda s, g: s.scene_exchange(g, "s1", "a duel", "a draw")),
    Probe("publish_scene", lambda s, g: s.publish_scene(g, "s1", "It ended.", "Meanwhile...")),
    Probe("start_scene", lambda s, g: s.start_scene(g, "s2")),
    Probe("cancel_scene", lambda s, g: s.cancel_scene(g, "s2")),
]
CONVERT = [
    Probe("create_game", _new),
    Probe(
        "convert",
        lambda s, g: s.convert(g, [{"input": "old 1", "output": "old reply"}]),
    ),
]
RESTART = [
    Probe("create_game", _new),
    Probe("record_round", lambda s, g: s.record_round(g, "before", "restart")),
    Probe("restart", lambda s, g: s.restart()),
]
CHAINS = {"rounds": ROUNDS, "scenes": SCENES, "conversion": CONVERT, "restart": RESTART}


def smoke(
    driver: str,
    *,
    say: Callable[[str], None] = print,
    timeout: float = 30.0,
    hello_timeout: float = HELLO_TIMEOUT,
) -> int:
    """Run the smoke check against `driver`, reporting each step through `say`; exit code.
    Every process it starts is ended before it returns (decision R193)."""
    began = time.monotonic()
    say(f"jfsm conformance smoke: driver {driver}")
    try:
        session = Session(driver, timeout=timeout, hello_timeout=hello_timeout)
    except (HarnessError, ProtocolViolation) as exc:
        say(f"  {'hello':<17} FAIL  {_first(exc)}")
        _tail(say, str(exc))
        say("smoke: the driver did not complete the handshake (exit 2)")
        return 2
    from jfsm_conformance.run.runner import implementation_label

    caps = ", ".join(k for k, v in sorted(session.world.capabilities.items()) if v) or "none"
    say(
        f"  {'hello':<17} ok    {implementation_label(session.world.implementation)}; "
        f"capabilities: {caps}"
    )
    status_of: dict[str, str] = {"hello": "ok"}  # each op counted once: its worst status
    try:
        for chain, probes in CHAINS.items():
            if chain == "restart" and not session.world.capabilities.get("durableRestart"):
                say(f"  {'restart':<17} skipped (capabilities.durableRestart is false)")
                continue
            session.begin_sequence()  # a chain is one sequence: the suite forgets earlier chains
            game = session.world.fresh(f"smoke-{chain}-")
            broken: str | None = None
            for probe in probes:
                before = status_of.get(probe.op)
                if broken is not None:
                    if before is None:
                        status_of[probe.op] = "not run"
                        say(f"  {probe.op:<17} not run (after {broken})")
                    continue
                status, detail = _step(session, probe, game)
                if before in (None, "not run") or _RANK[status] > _RANK[before]:
                    status_of[probe.op] = status
                    where = "" if before in (None, "not run") else f" (in the {chain} chain)"
                    say(f"  {probe.op:<17} {status:<5} {detail}{where}".rstrip())
                if status != "ok":
                    broken = f"{probe.op} {'failed' if status == 'FAIL' else 'is not implemented'}"
                    session.recover()
    except HarnessError as exc:
        say(f"  HARNESS ERROR: {_first(exc)}")
        _tail(say, str(exc) + "\n" + session.world.client.stderr_tail())
        say("smoke: the driver stopped answering (exit 2)")
        return 2
    finally:
        session.close()
    took = time.monotonic() - began
    counts = Counter(status_of.values())
    say(
        f"smoke: {counts['ok']} ok, {counts['FAIL']} failed, "
        f"{counts['not implemented']} not implemented, {counts['not run']} not run "
        f"in {took:.1f} s"
    )
    return 1 if counts["FAIL"] else 0


def _step(session: Session, probe: Probe, game: str) -> tuple[str, str]:
    session.steps.clear()  # the trace of one probe; the chain's games stay known
    try:
        probe.run(session, game)
    except (ConformanceFailure, ProtocolViolation) as exc:
        op = unsupported_in(session)
        if op is not None:
            return "not implemented", f"(unsupported_op for {op})"
        if isinstance(exc, ConformanceFailure):
            return "FAIL", f"[{', '.join(exc.ids)}] {_first(exc.message)}"
        return "FAIL", f"[protocol] {_first(exc)}"
    return "ok", ""


def _first(exc: object) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:240]


def _tail(say: Callable[[str], None], text: str) -> None:
    lines = [line for line in text.strip().splitlines()[1:] if line.strip()]
    if lines:
        say("  driver stderr (tail):")
        for line in lines[-15:]:
            say(f"    {line}")
