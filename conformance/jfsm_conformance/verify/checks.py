"""Named checks, each tagged with the requirement IDs it verifies, and the run's ledger.

Every assertion the suite makes goes through `Ledger.expect(check, ok, message, ids=...)`:
a passing check credits its IDs, a failing one raises `ConformanceFailure` naming them. The
table `CHECKS` is static data: `jfsm_conformance.run.coverage` builds the coverage table from it.
A check may narrow the IDs it blames at failure time (`ids=`), for instance a lost suffix
chunk blames JF-COMP-003 rather than every ID the state comparison can verify.
"""

from __future__ import annotations

import tomllib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from jfsm_conformance.client.protocol import spec_dir

__all__ = ["CHECKS", "Check", "ConformanceFailure", "Ledger"]


@dataclass(frozen=True)
class Check:
    name: str
    ids: tuple[str, ...]
    description: str


CHECKS: dict[str, Check] = {}


def _declare(name: str, ids: str, description: str) -> Check:
    check = Check(name, tuple(f"JF-{i}" for i in ids.split()), description)
    CHECKS[name] = check
    return check


STORE_MODEL = _declare(
    "store-matches-model",
    "COMP-003 COMP-004 COMP-005 COMP-009 COMP-010 COMP-011 CAT-002 CAT-003 CAT-004 CAT-005 "
    "CAT-007 CAT-009 INT-002 INT-003 INT-005 INT-006 INT-010 HIST-001 HIST-002 HIST-003 "
    "HIST-004 HIST-005 HIST-008 HIST-009 HIST-010 HIST-011 STORE-001 STORE-002 STORE-003 "
    "STORE-004 STORE-005 "
    "STORE-006 STORE-007 STORE-009 TEXT-002 ATOM-001 ATOM-003 ATOM-004 ERR-002 QUOTA-003 "
    "CONC-001 CAT-011 CAT-012",
    "After every step the dumped store equals the oracle's independent model key by key: "
    "exact exchanges per stack in seq order, summary record, meta, rounds, archives, game data.",
)
CHANGE_LOG = _declare(
    "change-log-is-net-diff",
    "QUOTA-005 QUOTA-006 QUOTA-007 QUOTA-008 HIST-008",
    "The dumped change log equals the net diff of the store against the suite's own "
    "checkpoint base: one entry per changed key, sorted by UTF-16 key order, no no-op entries.",
)
FOOTPRINT = _declare(
    "footprint-is-jcs-bytes",
    "QUOTA-001",
    "The reported footprint equals the suite's own RFC 8785 byte count of store plus log, "
    "and never exceeds the quota.",
)
FLAG_INVARIANT = _declare(
    "forced-flag-invariant",
    "INT-006",
    "forcedCompression is true iff the game stack holds an exact chunk of origin intervene.",
)
CANARY_ABSENT = _declare(
    "canaries-absent",
    "CAT-008 INT-009 CALL-012",
    "Scene transcript canaries never reach the game stack, game-kind requests or telemetry; "
    "discarded-continuation canaries never reach the store, log, any request or telemetry; "
    "refusal messages never reach telemetry or the store.",
)
REQUEST_CONTRACT = _declare(
    "request-contract",
    "CALL-001 CALL-002 CALL-003 CALL-004 CALL-009 CALL-010 TEXT-003 TEXT-004 COMP-002 HIST-012",
    "Each compress.v2 request the fake received: closed schema, kind and scope of its stack, "
    "input.text equal to the oracle's canonical text of the represented prefix, chars in code "
    "points, throughSeq, the derived Idempotency-Key, and beneficiaries at call time.",
)
COMPRESSION_TRIGGER = _declare(
    "compression-trigger",
    "COMP-001 COMP-012 CONC-003 INT-004 INT-007 HIST-007 TEXT-003",
    "A compression request is sent exactly when due (strictly above the threshold in code "
    "points, or forced), never by history operations, and never a second one in flight.",
)
OUTCOME = _declare(
    "compression-outcome",
    "COMP-006 COMP-007 COMP-008 COMP-010 COMP-011 CAT-009 COMP-012 CALL-005 COMP-013 COMP-014",
    "The reported outcome matches what the fake answered: published, refused, transport, "
    "empty, not_smaller, quota or stale; a generation that settled an owed forced "
    "compression first reports it as its `forced` member, one that settled none has none.",
)
RETRIES = _declare(
    "retries",
    "CALL-004 CALL-007 CALL-008 CALL-009",
    "Retries happen only after transport failures, at most 3 attempts, with the same "
    "Idempotency-Key and beneficiaries read again before each attempt.",
)
TELEMETRY = _declare(
    "telemetry-per-attempt",
    "CALL-011 CALL-012",
    "One telemetry event per attempt with the request's idempotency key, kind, scope, attempt "
    "number, outcome, sizes, and the callId linking summary, fake reply and telemetry.",
)
CALL_ID = _declare(
    "call-id-linkage",
    "COMP-004 CALL-011",
    "summary.compressionCallId == the fake's callId == the telemetry event's callId.",
)
REPLY = _declare(
    "operation-reply",
    "CAT-005 CAT-006 HIST-004 INT-003 STORE-004 CONC-001",
    "Operation results carry the round, seq, archive record and counts the model expects.",
)
ERROR_CODE = _declare(
    "error-code",
    "ERR-001 ERR-004 ERR-005 TEXT-001 INT-001 STORE-008 QUOTA-003 INT-008 CAT-001 CAT-010 HIST-013",
    "A refused operation answers the stable error code the spec prescribes.",
)
QUOTA_NUMBERS = _declare(
    "quota-error-numbers",
    "QUOTA-004",
    "quota_exceeded reports current, would-be and quota bytes, matching the suite's numbers.",
)
PREFLIGHT = _declare(
    "every-writer-preflights",
    "QUOTA-002 QUOTA-003 ATOM-002 ATOM-003 COMP-010",
    "Near the quota each writer is refused exactly when its post-state would exceed the quota, "
    "and accepted when it fits even if an intermediate state would not.",
)
NO_COMPRESSION = _declare(
    "history-sends-nothing",
    "HIST-007",
    "Reset, edit, conversion, duplication and game creation send no compress.v2 request.",
)
CONCURRENCY = _declare(
    "appends-while-in-flight",
    "CONC-002 CONC-003 CONC-004 COMP-003",
    "Rounds, scene exchanges and outcomes recorded while a compression is held complete "
    "before it is released, and survive its publication exactly; a compression of another "
    "stack may publish meanwhile (JF-CONC-004, optional).",
)
DETERMINISM = _declare(
    "deterministic-rebuild",
    "HIST-006",
    "Rebuilding from the same rounds, archives and epoch gives byte-identical JCS.",
)
DURABILITY = _declare(
    "restart-before-or-after",
    "ATOM-004 ATOM-008",
    "After a kill and restart (SIGKILL over stdio, an injected crash at a chosen write "
    "boundary in process) the store equals the state just before or just after the "
    "operation or publication in flight, never a mix; after it if the operation answered.",
)
RESTART_SERVES = _declare(
    "restart-serves-its-games",
    "ERR-018",
    "After a restart (SIGKILL and the command again, or the `restart` op) a driver that "
    "declares durableRestart answers every op on the games it served, none refused with "
    "store_locked or store_fenced because its earlier process still owns them.",
)

HOSTILE = _declare(
    "hostile-input-refused",
    "ERR-006 ERR-007 ERR-008 ERR-009 ERR-010 TEXT-001",
    "Hostile input over the protocol (ids out of `limits.id_pattern`, values and messages "
    "past the depth limits, a message past `message_max_bytes`, lone surrogates, wrong "
    "types, bad JSON and missing values in every argument slot, unknown ops) gets exactly "
    "one reply with the spec's code (id null for what is no message), leaves the game's "
    "dump unchanged, and the driver answers the next message.",
)
HTTP_GUARD = _declare(
    "http-requests-guarded",
    "ERR-011 ERR-012 ERR-017 ERR-019",
    "An HTTP driver refuses a foreign Host or Origin, a missing token, a wrong Content-Type "
    "and malformed framing (bad, missing or over-size Content-Length) with the 4xx status "
    "of spec/driver/protocol.json and an error reply (a request breaking several rules with "
    "the first one's status), and answers the next request; with "
    "more silent connections open than its unauthenticated budget, it answers an authorized "
    "request on a new connection at once and closes every silent one after "
    "`auth_timeout_seconds`.",
)
STATE_GUARD = _declare(
    "state-directory-guarded",
    "ERR-016",
    "A durable stdio driver whose command names `{state}` refuses to start on a state "
    "directory that is a symbolic link or writable by group and others, writing nothing "
    "there; and after its entries (then the entries one level down) are replaced by "
    "symbolic links to copies outside, nothing in those copies changes while it restarts "
    "and serves a game.",
)

BOUNDED_WAITS = _declare(
    "bounded-waits",
    "CALL-006 CALL-013 CALL-014",
    "Under the short attempt deadline asked in hello, a compress.v2 that hangs, drips its "
    "reply, sends an endless body, a body past `response_bytes_max` or out-of-bounds "
    "identifiers costs one transport failure within the deadline; the retry publishes, "
    "nothing is lost, and the driver goes on serving.",
)
ONE_OWNER = _declare(
    "one-owner-at-a-time",
    "STORE-010 STORE-011 STORE-012",
    "Among K workers on one shared store (machine workers): an open is accepted only when no "
    "other worker's ownership lives, a takeover always, each with a token greater than every "
    "earlier one of the game; a refused open answers store_locked.",
)
FENCED_WRITES = _declare(
    "fenced-writes-change-nothing",
    "STORE-012 STORE-013",
    "A worker whose game was opened or taken over by another has every write refused with "
    "store_fenced, and the next owner's store is exactly the last one the owners acknowledged.",
)
FENCED_READS = _declare(
    "fenced-reads-show-nothing",
    "STORE-030",
    "A worker whose game another worker opened answers store_fenced to a read of it (dump), "
    "never its own, possibly stale, copy of the game (machine workers).",
)
LEASES = _declare(
    "leases-renew-only-their-own-and-run-out",
    "STORE-031 STORE-032",
    "hello states leaseSeconds; once the owner released a game, or its process was killed and "
    "the stated lease length has passed, a plain open by another worker succeeds, whatever "
    "superseded owners still run (their renewals extend no lease; machine workers).",
)
NOT_HELD = _declare(
    "ops-on-games-not-held-open-plainly",
    "STORE-036",
    "An op on a game the worker does not hold (never opened, released, or held before a "
    "restart) opens it as a plain open_game: store_locked while another worker's ownership "
    "lives, else the worker becomes the owner and the op runs (machine workers).",
)
ROUNDS_LIST = _declare(
    "rounds-list-append",
    "STORE-010 STORE-014",
    "Over the whole history, each game's rounds are one list that explains every reply: each "
    "owner reads every acknowledged round once, in reply order, and a round in flight when "
    "its worker was killed (SIGKILL) landed whole or not at all.",
)

DRIVER_UP = _declare(
    "driver-stays-up",
    "ERR-020",
    "The driver answers every request of a scenario or a machine sequence within the op "
    "timeout, without exiting; one that dies or stops answering is blamed on what it was "
    "exercising, then started again for the rest of the run.",
)


@dataclass(eq=False)
class ConformanceFailure(AssertionError):
    """A check failed: the IDs it blames, what was seen, and the check's name."""

    check: str
    ids: tuple[str, ...]
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"[{', '.join(self.ids)}] {self.check}: {self.message}"


def _judged_elsewhere() -> frozenset[str]:
    """IDs the catalog verifies outside the suite (`verification` other than "suite")."""
    with (spec_dir() / "requirements.toml").open("rb") as handle:
        catalog = tomllib.load(handle)["requirement"]
    return frozenset(r["id"] for r in catalog if r.get("verification", "suite") != "suite")


JUDGED_ELSEWHERE = _judged_elsewhere()


class Ledger:
    """Counts passing checks per requirement ID for one run.

    A passing check never credits an ID the catalog says the suite cannot judge (for
    instance JF-CALL-008's backoff): a verdict claims no more than the suite checked. A
    failing check still blames such an ID when what it saw breaks it."""

    def __init__(self) -> None:
        self.passes: Counter[str] = Counter()
        self.checks_by_id: dict[str, set[str]] = {}

    def credit(self, check: Check, ids: tuple[str, ...] | list[str] | None = None) -> None:
        for rid in ids if ids is not None else check.ids:
            if rid in JUDGED_ELSEWHERE:
                continue
            self.passes[rid] += 1
            self.checks_by_id.setdefault(rid, set()).add(check.name)

    def expect(
        self,
        check: Check,
        ok: bool,
        message: str | Any = "",
        *,
        ids: tuple[str, ...] | list[str] | None = None,
        evidence: dict[str, Any] | None = None,
    ) -> None:
        """Credit `ids` (default: the check's) if `ok`, else raise `ConformanceFailure`."""
        chosen = tuple(ids) if ids is not None else check.ids
        if ok:
            self.credit(check, chosen)
            return
        text = message() if callable(message) else str(message)
        raise ConformanceFailure(check.name, chosen, text, evidence or {})

    def copy(self) -> Ledger:
        """A copy, which later credits to this ledger leave as it is."""
        out = Ledger()
        out.passes = Counter(self.passes)
        out.checks_by_id = {rid: set(names) for rid, names in self.checks_by_id.items()}
        return out

    def add(self, other: Ledger) -> None:
        """Credit here everything `other` credited (a part of the run judged apart)."""
        self.passes.update(other.passes)
        for rid, names in other.checks_by_id.items():
            self.checks_by_id.setdefault(rid, set()).update(names)
