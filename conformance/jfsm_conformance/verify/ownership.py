"""The history checker of the workers machine: one verdict for everything K workers did.

**The one concept: the ownership history of the shared games, judged event by event.**

The machine `jfsm_conformance.machines.workers` drives K processes of one driver command over one
shared store and tells this checker every reply it got, in the order it got them. Nothing
here talks to a driver: `OwnershipHistory` is a pure model of each game (who owns it, which
tokens were handed out, which rounds were acknowledged, refused or left unknown by a kill)
and each event either passes its checks (credited in the ledger) or raises
`ConformanceFailure` naming the requirement it breaks.

What it decides (Jepsen and Maelstrom are the anchors; the rounds check follows Elle's
list-append):

- **One owner at a time** (JF-STORE-010, JF-STORE-011, JF-STORE-012). A plain open is
  accepted only when no other worker's ownership may still live; it may be refused, with
  `store_locked` only, while one does (a killed worker's ownership may live on until the
  store notices: both answers are accepted then). A takeover is always accepted. Every
  accepted open carries a token greater than every earlier one of the game.
- **Fenced writes change nothing** (JF-STORE-012, JF-STORE-013). Once another worker opened
  the game, every write of the earlier owner is refused with `store_fenced`. The next read
  then sees exactly the store the owners last acknowledged, key by key.
- **Fenced reads show nothing** (JF-STORE-030). A worker whose ownership another worker
  superseded answers a read (`dump`, `telemetry`, `generate`), and an op it would refuse
  for a reason of its own (R238), with `store_fenced`, never from its own copy of the game.
- **Games not held are opened plainly** (JF-STORE-036). An op on a game the worker does not
  hold (never opened, released, or held before its process was killed) is answered as a
  plain open would be: `store_locked` while another worker's ownership may live, else the
  worker becomes the owner and the op's reply is a read like any other.
- **Leases renew only their own, and run out** (JF-STORE-031, JF-STORE-032). Once the owner
  released a game, and the stated lease length has passed with superseded owners still
  running, a plain open succeeds; once the owner's process was killed and that length has
  passed since, a plain open by another worker succeeds.
- **Rounds are one list** (JF-STORE-010, JF-STORE-014). Each round the machine records
  carries a unique input, so a game's rounds are a list of appends. An acknowledged append
  answers its 1-based position; every read (the dump an owner makes right after its open)
  must be the list known so far: every acknowledged round once and in reply order, no
  refused round, and a round left unknown by a killed worker present whole or absent. A
  read fixes the unknown ones: a round absent then must never appear later.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jfsm_conformance.verify.checks import (
    FENCED_READS,
    FENCED_WRITES,
    LEASES,
    NOT_HELD,
    ONE_OWNER,
    ROUNDS_LIST,
    Ledger,
)
from jfsm_conformance.verify.excerpts import as_json

__all__ = ["GameHistory", "OwnershipHistory", "rounds_of", "short"]


def short(text: Any) -> str:
    """A round input as the history shows it (a padded one cut after its id)."""
    if isinstance(text, str) and len(text) > 40:
        return f"{text[:40]}... ({len(text)} chars)"
    return repr(text)


def _shown(texts: list[str]) -> str:
    return "[" + ", ".join(short(t) for t in texts) + "]"


def rounds_of(store: dict[str, Any]) -> list[str]:
    """The inputs of a dumped store's rounds in round order (`jfRounds.N` records)."""
    rounds: dict[int, str] = {}
    for key, value in store.items():
        if key.startswith("jfRounds.") and isinstance(value, dict):
            rounds[int(key.split(".", 1)[1])] = str(value.get("input"))
    return [rounds[n] for n in sorted(rounds)]


def _chunk_rounds(store: dict[str, Any]) -> list[int] | None:
    """The round ids of the game stack's exact chunks of origin round, or None when a
    summary represents a prefix (then rounds and chunks are not one to one)."""
    if "jfGameStack.summary" in store:
        return None
    ids = [
        int(value.get("roundId", 0))
        for key, value in store.items()
        if key.startswith("jfGameStack.chunk.")
        and isinstance(value, dict)
        and value.get("origin") == "round"
    ]
    return sorted(ids)


@dataclass
class GameHistory:
    """What the checker knows of one game."""

    game: str
    owner: int | None = None  # the worker whose ownership was acknowledged last
    owner_may_live: bool = False  # its ownership may live (acknowledged, not released)
    owner_killed: bool = False  # ... and its process was killed since (liveness unknown)
    fenced: set[int] = field(default_factory=set)  # workers holding a superseded ownership
    tokens: list[int] = field(default_factory=list)
    taken_over: bool = False  # the current ownership came from a takeover
    expected: list[tuple[str, str]] = field(default_factory=list)  # ("ack"|"maybe", input)
    never: set[str] = field(default_factory=set)  # inputs that must never appear
    store: dict[str, Any] | None = None  # the store the owners last acknowledged
    reads: int = 0
    fenced_writes: int = 0  # writes sent by fenced workers so far
    killed_since_read: bool = False  # its owner's process was killed since the last read

    def held_by(self, worker: int) -> bool:
        """Whether `worker` holds an ownership of the game (current or superseded)."""
        return worker in self.fenced or (
            self.owner == worker and self.owner_may_live and not self.owner_killed
        )

    def live_owner(self, worker: int) -> bool:
        return self.held_by(worker) and worker not in self.fenced


class OwnershipHistory:
    """Every event of the workers machine, checked as it arrives (see the module docstring).

    Each method raises `ConformanceFailure` (through `ledger.expect`) when the event breaks
    a requirement, and otherwise credits the checks it passed."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.games: dict[str, GameHistory] = {}
        self.log: list[str] = []  # one line per event, for the failure message

    def _note(self, line: str) -> None:
        self.log.append(line)
        del self.log[:-60]

    def _context(self) -> str:
        return "\n\nHistory so far (last events):\n  " + "\n  ".join(self.log[-25:])

    # -- ownership -------------------------------------------------------------------------
    def created(self, worker: int, game: str, store: dict[str, Any]) -> None:
        """`worker` created `game` and released it: no owner, `store` is its content."""
        self.games[game] = GameHistory(game, store=store)
        self._note(f"w{worker} create_game {game} (then released)")

    def opened(
        self, worker: int, game: str, token: Any, *, takeover: bool, noted: bool = False
    ) -> None:
        """`worker`'s open (or takeover) of `game` answered `token`; `noted`: the caller
        already put the open in the history (each op shows once, R197)."""
        h = self.games[game]
        what = "takeover" if takeover else "open"
        if not noted:
            self._note(f"w{worker} {what} {game} -> token {as_json(token)}")
        rid = "JF-STORE-012" if takeover else "JF-STORE-010"
        self.ledger.expect(
            ONE_OWNER,
            isinstance(token, int) and all(token > t for t in h.tokens),
            lambda: (
                f"{what} of game {game!r} by worker {worker} answered token {as_json(token)}, "
                f"not greater than every earlier token of the game {h.tokens}: a fenced owner "
                "could not be told from this one" + self._context()
            ),
            ids=(rid,),
        )
        other = h.owner if h.owner is not None and h.owner != worker else None
        if not takeover:
            rival = other is not None and h.owner_may_live and not h.owner_killed
            self.ledger.expect(
                ONE_OWNER,
                not rival,
                lambda: (
                    f"a plain open of game {game!r} by worker {worker} was accepted while "
                    f"worker {other}'s ownership (acknowledged, never released, its process alive) "
                    "lives: two owners accepted at once" + self._context()
                ),
                ids=("JF-STORE-011",),
            )
        if other is not None and h.owner_may_live and not h.owner_killed:
            h.fenced.add(other)
        h.fenced.discard(worker)
        h.owner, h.owner_may_live, h.owner_killed = worker, True, False
        h.taken_over = takeover
        h.tokens.append(token)

    def open_refused(self, worker: int, game: str, code: str | None, *, takeover: bool) -> None:
        h = self.games[game]
        what = "takeover" if takeover else "open"
        self._note(f"w{worker} {what} {game} -> {code}")
        was_owner = h.owner == worker and h.held_by(worker)
        h.fenced.discard(worker)  # a refused open leaves the worker holding nothing
        if h.owner == worker:
            h.owner_may_live = False
        self.ledger.expect(
            ONE_OWNER,
            not takeover,
            lambda: (
                f"a takeover of game {game!r} by worker {worker} was refused ({code}); "
                "a takeover succeeds whatever the previous owner's state" + self._context()
            ),
            ids=("JF-STORE-012",),
        )
        self.ledger.expect(
            ONE_OWNER,
            code == "store_locked",
            lambda: (
                f"a plain open of game {game!r} by worker {worker} was refused with "
                f"{as_json(code)}, not store_locked" + self._context()
            ),
            ids=("JF-STORE-011",),
        )
        rival = h.owner is not None and h.owner != worker and h.owner_may_live
        rival = rival and not was_owner
        # another worker released it: either its release left the lease live, or one of
        # its renewals extended a lease it no longer held (JF-STORE-031); from outside the
        # two look the same, so both are named
        released = h.owner is not None and h.owner != worker and not h.owner_may_live
        self.ledger.expect(
            ONE_OWNER,
            rival,
            lambda: (
                f"a plain open of game {game!r} by worker {worker} was refused "
                f"(store_locked) although no other worker's ownership can live (owner "
                f"{h.owner}, {'released' if not h.owner_may_live else 'this worker'}): the caller "
                "of open becomes the owner"
                + (
                    "; a released game's lease ends with its release, and no renewal extends "
                    "a lease its process does not hold"
                    if released
                    else ""
                )
                + self._context()
            ),
            ids=("JF-STORE-010", "JF-STORE-031") if released else ("JF-STORE-010",),
        )

    def released(self, worker: int, game: str) -> None:
        h = self.games[game]
        self._note(f"w{worker} release_game {game}")
        h.fenced.discard(worker)
        if h.owner == worker:
            h.owner_may_live = False

    def killed(self, worker: int) -> None:
        """`worker`'s process was killed (SIGKILL) and started again: it holds nothing."""
        self._note(f"w{worker} SIGKILL")
        for h in self.games.values():
            h.fenced.discard(worker)
            if h.owner == worker and h.owner_may_live:
                h.owner_killed = True
                h.killed_since_read = True

    # -- reads of a superseded owner, ops on games not held, leases ---------------------------
    def fenced_read(self, worker: int, game: str, reply: dict[str, Any], op: str = "dump") -> None:
        """The reply to `op` (a read: `dump`, `telemetry`, `generate`; or an `edit_round` a
        current owner refuses, R238) sent by `worker`, whose ownership another worker
        superseded."""
        h = self.games[game]
        ok, code = bool(reply.get("ok")), (reply.get("error") or {}).get("code")
        result = reply.get("result")
        store = result.get("store") if isinstance(result, dict) else None
        seen = rounds_of(store or {}) if ok and op == "dump" else []
        shown = (_shown(seen) if op == "dump" else "ok") if ok else code
        self._note(f"w{worker} {op} {game} (superseded) -> {shown}")
        known = [t for _, t in h.expected]
        stale = ok and op == "dump" and seen != known
        self.ledger.expect(
            FENCED_READS,
            not ok and code == "store_fenced",
            lambda: (
                f"worker {worker}, whose ownership of game {game!r} another worker superseded "
                f"(tokens {h.tokens}), answered {op} "
                + (
                    (f"ok with rounds {_shown(seen)}" if op == "dump" else "ok")
                    + (f" while the game holds {_shown(known)}: a stale read" if stale else "")
                    + ": a superseded owner must answer store_fenced, never its own copy"
                    if ok
                    else f"with {as_json(code)}, not store_fenced"
                )
                + self._context()
            ),
            ids=("JF-STORE-030",),
        )

    def not_held(self, worker: int, game: str, reply: dict[str, Any]) -> bool:
        """The reply to an op on `game` (a `dump`) sent by `worker`, which does not hold the
        game: judged as a plain open (JF-STORE-036). Returns whether the worker is now its
        owner; then the machine passes the dump to `read`."""
        h = self.games[game]
        ok, code = bool(reply.get("ok")), (reply.get("error") or {}).get("code")
        self._note(f"w{worker} dump {game} (not held) -> {'ok' if ok else code}")
        other = h.owner if h.owner is not None and h.owner != worker else None
        may_live = other is not None and h.owner_may_live
        lives = may_live and not h.owner_killed
        if ok:
            self.ledger.expect(
                NOT_HELD,
                not lives,
                lambda: (
                    f"worker {worker}, which does not hold game {game!r}, had a dump of it "
                    f"answered while worker {other}'s ownership (acknowledged, never released, "
                    "its process alive) lives: an op on a game not held opens it as a plain "
                    "open_game, refused with store_locked" + self._context()
                ),
                ids=("JF-STORE-036", "JF-STORE-011"),
            )
            h.fenced.discard(worker)
            h.owner, h.owner_may_live, h.owner_killed = worker, True, False
            h.taken_over = False
            return True
        self.ledger.expect(
            NOT_HELD,
            code == "store_locked",
            lambda: (
                f"worker {worker}, which does not hold game {game!r}, had a dump of it refused "
                f"with {as_json(code)}: an op on a game not held opens it plainly, refused only "
                "with store_locked" + self._context()
            ),
            ids=("JF-STORE-036",),
        )
        self.ledger.expect(
            NOT_HELD,
            may_live,
            lambda: (
                f"worker {worker}, which does not hold game {game!r}, had a dump of it refused "
                f"(store_locked) although no worker's ownership can live (owner {h.owner}, "
                f"{'released' if h.owner is not None else 'never opened'}): an op on a game not "
                "held opens it plainly and runs" + self._context()
            ),
            ids=("JF-STORE-036",),
        )
        return False

    def lease_over(
        self,
        worker: int,
        game: str,
        reply: dict[str, Any],
        *,
        after: str,
        waited: float,
        stated: float,
    ) -> None:
        """The reply to a plain `open_game` sent by `worker` `waited` seconds after the game's
        last ownership ended: `after` is "released" (its owner released it while superseded
        owners kept running: their renewals must not bring a lease back, JF-STORE-031) or
        "killed" (its owner's process was killed: its lease runs out within the `stated`
        length, JF-STORE-032). The open must succeed; then it counts as any open."""
        h = self.games[game]
        ok, code = bool(reply.get("ok")), (reply.get("error") or {}).get("code")
        rid = "JF-STORE-031" if after == "released" else "JF-STORE-032"
        superseded = sorted(h.fenced)  # the opener among them: its open closes its old handle
        self._note(
            f"w{worker} open {game} ({waited:.1f} s after its owner was {after}) -> "
            + (f"token {(reply.get('result') or {}).get('token')}" if ok else str(code))
        )
        self.ledger.expect(
            LEASES,
            ok,
            lambda: (
                f"a plain open of game {game!r} by worker {worker} was refused with "
                f"{as_json(code)} "
                + (
                    f"{waited:.1f} s after its owner released it; superseded owners still "
                    f"running (workers {superseded or 'none'}) must renew no lease but their "
                    "own current one"
                    if after == "released"
                    else f"{waited:.1f} s after its owner's process was killed, its leases "
                    f"lasting {stated:g} s by hello's leaseSeconds: a dead owner's lease never "
                    "ran out"
                )
                + self._context()
            ),
            ids=(rid,),
        )
        if h.owner is not None and h.owner != worker and after == "killed":
            h.owner_may_live = False  # its lease ran out: the open below makes no rival
        token = (reply.get("result") or {}).get("token")
        self.opened(worker, game, token, takeover=False, noted=True)

    def stated_lease(self, worker: int, stated: Any, asked: float) -> float:
        """hello's `leaseSeconds` as `worker` answered it (asked for `asked`): a number > 0
        (JF-STORE-032); returns it."""
        self._note(f"w{worker} hello leaseSeconds {asked:g} -> {as_json(stated)}")
        ok = isinstance(stated, (int, float)) and not isinstance(stated, bool) and stated > 0
        self.ledger.expect(
            LEASES,
            ok,
            lambda: (
                f"worker {worker} declares sharedStore but its hello (asked for leaseSeconds "
                f"{asked:g}) states no lease length (leaseSeconds {as_json(stated)}): the suite "
                "cannot tell when a dead owner's lease must have run out" + self._context()
            ),
            ids=("JF-STORE-032",),
        )
        return float(stated)

    # -- writes ----------------------------------------------------------------------------
    def appended(self, worker: int, game: str, text: str, reply: dict[str, Any]) -> None:
        """The reply to `record_round(input=text)` sent by `worker`, which holds the game."""
        h = self.games[game]
        ok, code = bool(reply.get("ok")), (reply.get("error") or {}).get("code")
        answer = as_json(reply.get("result") or code)
        self._note(f"w{worker} record_round {game} {short(text)} -> {answer}")
        if worker in h.fenced:
            ids = ("JF-STORE-012", "JF-STORE-013") if h.taken_over else ("JF-STORE-013",)
            self.ledger.expect(
                FENCED_WRITES,
                not ok and code == "store_fenced",
                lambda: (
                    f"worker {worker}, whose ownership of game {game!r} another worker "
                    f"superseded (tokens {h.tokens}), had its record_round "
                    + ("accepted" if ok else f"refused with {as_json(code)}, not store_fenced")
                    + self._context()
                ),
                ids=ids,
            )
            h.never.add(text)
            h.fenced_writes += 1
            return
        if not ok and code == "store_unavailable":  # outcome unknown: the next read says
            h.expected.append(("maybe", text))
            return
        self.ledger.expect(
            ONE_OWNER,
            ok,
            lambda: (
                f"the owner (worker {worker}) of game {game!r} had record_round refused "
                f"with {as_json(code)}: the caller of open is the game's owner" + self._context()
            ),
            ids=("JF-STORE-010",),
        )
        position = (reply.get("result") or {}).get("round")
        if not any(kind == "maybe" for kind, _ in h.expected):
            known = len(h.expected) + 1
            self.ledger.expect(
                ROUNDS_LIST,
                position == known,
                lambda: (
                    f"record_round {text!r} on game {game!r} answered round {position}, "
                    f"but {known - 1} rounds were acknowledged before it: the owner's game is not "
                    "the list the acknowledged replies make" + self._context()
                ),
                ids=("JF-STORE-010",),
            )
        h.expected.append(("ack", text))
        h.store = None  # until the owner's dump (`acknowledged_store`) says what it is

    def generated(self, worker: int, game: str, reply: dict[str, Any]) -> None:
        """The reply to `generate` by `worker`, which held the game when it sent it; a
        worker fenced meanwhile must not have published (its commit is refused)."""
        h = self.games[game]
        ok, code = bool(reply.get("ok")), (reply.get("error") or {}).get("code")
        outcome = (reply.get("result") or {}).get("outcome") if ok else code
        self._note(f"w{worker} generate {game} -> {outcome}")
        if worker in h.fenced:
            h.fenced_writes += 1
            self.ledger.expect(
                FENCED_WRITES,
                (not ok and code == "store_fenced") or (ok and outcome != "published"),
                lambda: (
                    f"worker {worker}'s compression of game {game!r} was held while "
                    "another worker took the game over; released, it "
                    + (
                        "was published"
                        if ok
                        else f"was refused with {as_json(code)}, not store_fenced"
                    )
                    + self._context()
                ),
                ids=("JF-STORE-013",),
            )

    def in_flight_at_kill(self, game: str, text: str) -> None:
        """`record_round(input=text)` was in flight when its worker was killed."""
        self._note(f"  (record_round {game} {short(text)} in flight at the kill: unknown)")
        self.games[game].expected.append(("maybe", text))

    def acknowledged_store(self, game: str, store: dict[str, Any]) -> None:
        """The owner's dump after its acknowledged write: what the next owner must read."""
        self.games[game].store = store

    # -- reads -----------------------------------------------------------------------------
    def read(self, worker: int, game: str, store: dict[str, Any]) -> None:
        """The dump `worker` made right after its accepted open of `game`."""
        h = self.games[game]
        seen = rounds_of(store)
        self._note(f"w{worker} dump {game} -> rounds {_shown(seen)}")
        expected = h.expected
        unknown = h.killed_since_read or any(kind == "maybe" for kind, _ in expected)
        lost = [t for kind, t in expected if kind == "ack" and t not in seen]
        self.ledger.expect(
            ROUNDS_LIST,
            not lost,
            lambda: (
                f"worker {worker} opened game {game!r} and read rounds {_shown(seen)}: "
                f"acknowledged rounds {_shown(lost)} are lost" + self._context()
            ),
            ids=("JF-STORE-014",) if unknown else ("JF-STORE-010",),
        )
        dup = sorted({t for t in seen if seen.count(t) > 1})
        self.ledger.expect(
            ROUNDS_LIST,
            not dup,
            lambda: (
                f"worker {worker} read game {game!r} with rounds {_shown(dup)} twice: "
                + _shown(seen)
                + self._context()
            ),
            ids=("JF-STORE-014",) if unknown else ("JF-STORE-010",),
        )
        ghosts = [t for t in seen if t in h.never]
        self.ledger.expect(
            FENCED_WRITES,
            not ghosts,
            lambda: (
                f"worker {worker} read game {game!r} with rounds {_shown(ghosts)}, whose "
                "record_round was refused (store_fenced) or had not landed at an earlier read: "
                "a refused write changed the store" + self._context()
            ),
            ids=("JF-STORE-013",),
        )
        known = {t for _, t in expected}
        strangers = [t for t in seen if t not in known and t not in h.never]
        order = self._explains(expected, seen)
        self.ledger.expect(
            ROUNDS_LIST,
            not strangers and order,
            lambda: (
                f"worker {worker} read game {game!r} with rounds {_shown(seen)}; no order of "
                f"the appends {_shown([t for _, t in expected])} (those in flight at a kill "
                "optional) "
                "explains it" + self._context()
            ),
            ids=("JF-STORE-014",) if unknown else ("JF-STORE-010",),
        )
        if unknown:
            chunks = _chunk_rounds(store)
            self.ledger.expect(
                ROUNDS_LIST,
                chunks is None or chunks == list(range(1, len(seen) + 1)),
                lambda: (
                    f"after a worker was killed mid-commit, game {game!r} holds rounds "
                    f"1..{len(seen)} but game-stack chunks of rounds {chunks}: a commit landed "
                    "in part" + self._context()
                ),
                ids=("JF-STORE-014",),
            )
        elif h.store is not None:
            diff = sorted(k for k in set(store) | set(h.store) if store.get(k) != h.store.get(k))
            refused = h.fenced_writes > 0
            self.ledger.expect(
                FENCED_WRITES,
                not diff,
                lambda: (
                    f"worker {worker} opened game {game!r} and read a store other than "
                    f"the one its owners last acknowledged (keys {diff[:8]} differ)"
                    + (": a refused (fenced) write changed it" if refused else "")
                    + self._context()
                ),
                ids=("JF-STORE-013",) if refused else ("JF-STORE-010",),
            )
        for kind, text in expected:
            if kind == "maybe" and text not in seen:
                h.never.add(text)
        h.expected = [("ack", t) for t in seen]
        h.store = store
        h.reads += 1
        h.killed_since_read = False

    @staticmethod
    def _explains(expected: list[tuple[str, str]], seen: list[str]) -> bool:
        """Whether `seen` is `expected` with some of its unknown ("maybe") appends left out."""
        i = 0
        for kind, text in expected:
            if i < len(seen) and seen[i] == text:
                i += 1
            elif kind == "ack":
                return False
        return i == len(seen)
