"""The verifier: what was observed, against what was expected, as named checks.

Every method turns observations (a reply, a dumped store, the requests the fake recorded,
telemetry events) and the expected side (the oracle's model, a predicted `Flow`) into checks
of `jfsm_conformance.checks`, each crediting or blaming requirement IDs through the run's
`Ledger`. A failing check raises `ConformanceFailure`; nothing here talks to the driver.

The session calls these in a fixed order per step, which is the blame order: a fault is
reported first under the requirement it violates (the stored intervene exchange before the
request that carries it, the store before the compression report, the report before
telemetry).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from jfsm.spec import constants
from jfsm_conformance import checks as C
from jfsm_conformance.blame import Ctx, blame, log_ids, outcome_ids
from jfsm_conformance.canon import QUOTA, beneficiaries, jcs
from jfsm_conformance.checks import Ledger
from jfsm_conformance.driver_client import Reply
from jfsm_conformance.oracle import ABSENT, GAME_KIND, Diff, GameModel, InFlight, normalize
from jfsm_conformance.predictor import Compression, Flow
from jfsm_conformance.replies import TRANSPORT, call_id_of, output_chars, settled
from jfsm_conformance.snapshot import BaseCache, Encoded

__all__ = ["MAX_ATTEMPTS", "Verifier"]

MAX_ATTEMPTS = constants().max_attempts
HISTORY_OPS = {"create_game", "reset", "edit_round", "convert", "duplicate"}


class Verifier:
    """Named checks over observations (see the module docs)."""

    def __init__(self, ledger: Ledger, error_codes: Iterable[str]) -> None:
        self.ledger = ledger
        self.error_codes = frozenset(error_codes)
        self.bases = BaseCache()  # each game's checkpoint base, encoded once

    # -- replies -------------------------------------------------------------------------
    def ok(self, reply: Reply, op: str, ids: tuple[str, ...]) -> Any:
        """The operation succeeded; its result."""
        self.ledger.expect(
            C.ERROR_CODE if reply.code != "unsupported_op" else C.REPLY,
            reply.ok,
            lambda: f"{op} was refused: {reply.get('error')}",
            ids=ids,
        )
        return reply.result

    def result(self, op: str, got: Any, want: Any, ids: tuple[str, ...]) -> None:
        """An operation's result equals what the model expects."""
        self.ledger.expect(C.REPLY, got == want, f"{op} returned {got}, expected {want}", ids=ids)

    def blocked(self, op: str, timeout: float) -> None:
        """An operation did not answer while a compression was held: it waits inside the
        critical section."""
        self.ledger.expect(
            C.CONCURRENCY,
            False,
            f"{op} did not complete within {timeout:.0f} s while a compression was held in "
            "flight: it waits on the compression inside the critical section",
            ids=("JF-CONC-002",),
        )

    def refusal(self, op: str, reply: Reply, code: str, ids: tuple[str, ...]) -> None:
        """Refused with the stable `code` and a message."""
        self.ledger.expect(
            C.ERROR_CODE,
            not reply.ok and reply.code == code,
            lambda: (
                f"{op} should be refused with {code}; got "
                f"{reply.get('result') if reply.ok else reply['error']}"
            ),
            ids=ids,
        )
        self.ledger.expect(
            C.ERROR_CODE,
            reply.code in self.error_codes,
            f"error code {reply.code!r} is not a stable code",
            ids=("JF-ERR-001",),
        )
        self.ledger.expect(
            C.ERROR_CODE,
            bool(reply["error"].get("message")),
            "the error has no message",
            ids=("JF-ERR-001",),
        )

    def quota_details(self, reply: Reply, current: Any, would_be: int | None) -> None:
        """quota_exceeded names current, would-be (exact when the suite knows it) and quota."""
        details = (reply.get("error") or {}).get("details") or {}
        got = details.get("would_be", details.get("wouldBe"))
        exact = got == would_be if would_be is not None else isinstance(got, int) and got > QUOTA
        self.ledger.expect(
            C.QUOTA_NUMBERS,
            details.get("current") == current and details.get("quota") == QUOTA and exact,
            f"quota_exceeded details {details}: expected current {current}, would_be "
            f"{would_be if would_be is not None else 'above the quota'}, quota {QUOTA}",
        )

    def pending(self, reply: Reply, cause: str, ids: tuple[str, ...] = ()) -> None:
        """The generation was refused with a retryable compression_pending naming `cause`."""
        self.ledger.expect(
            C.ERROR_CODE,
            not reply.ok and reply.code == "compression_pending",
            lambda: (
                f"a forced compression was owed and ended {cause}, yet generate answered "
                f"{reply.get('result') or reply.get('error')} instead of compression_pending"
            ),
            ids=ids or ("JF-INT-007", "JF-INT-008"),
        )
        details = reply["error"].get("details") or {}
        self.ledger.expect(
            C.ERROR_CODE,
            reply["error"].get("retryable") is True and details.get("cause") == cause,
            f"compression_pending must be retryable and name the cause {cause!r}: {reply['error']}",
            ids=("JF-INT-008",),
        )

    def report(self, op: str, got: dict[str, Any], want: dict[str, Any]) -> None:
        """A compression report: outcome, and the lengths and throughSeq of the request.
        `want["raw"]`: what the reply alone said; a stale result that said something else
        checks the precedence of outcomes (JF-COMP-013)."""
        raw = want.get("raw")
        ids = outcome_ids(want["outcome"])
        if want["outcome"] == "stale" and raw not in (None, "valid"):
            ids = ("JF-COMP-013", *ids)
        self.ledger.expect(
            C.OUTCOME,
            got.get("outcome") == want["outcome"],
            f"{op} reported outcome {got.get('outcome')!r}, expected {want['outcome']!r}"
            + (f" (the reply alone said {raw!r}; stale comes first)" if len(ids) > 2 else ""),
            ids=ids,
        )
        if want["outcome"] in ("not_due", "in_flight"):
            self.ledger.expect(
                C.COMPRESSION_TRIGGER,
                got.get("lengthBefore") == want["lengthBefore"],
                f"lengthBefore {got.get('lengthBefore')} but the canonical length is "
                f"{want['lengthBefore']}",
                ids=("JF-TEXT-003", "JF-TEXT-004"),
            )
        else:
            self.ledger.expect(
                C.COMPRESSION_TRIGGER,
                got.get("lengthBefore") == want["lengthBefore"]
                and got.get("throughSeq") == want.get("throughSeq"),
                f"lengthBefore/throughSeq {got.get('lengthBefore')}/{got.get('throughSeq')}, "
                f"the request had {want['lengthBefore']}/{want.get('throughSeq')}",
                ids=("JF-CALL-003",),
            )
        if want["outcome"] == "published":
            self.ledger.expect(
                C.OUTCOME,
                got.get("lengthAfter") == want["lengthAfter"],
                f"lengthAfter {got.get('lengthAfter')}, the model's canonical length is "
                f"{want['lengthAfter']}",
                ids=("JF-TEXT-004", "JF-COMP-003"),
            )

    # -- the store -----------------------------------------------------------------------
    def store(self, model: GameModel, dump: dict[str, Any], base: dict[str, Any], ctx: Ctx) -> None:
        """Everything observable in a dump: canaries, the store against the model, the change
        log against the suite's base, the footprint, the forced-compression flag."""
        store, log = dump["store"], dump["changeLog"]
        self.canaries_in_store(store, log)
        actual, expected = Encoded(normalize(store)), Encoded(model.store())
        diffs = [] if actual.same_as(expected) else _diffs(expected, actual)
        if diffs:
            ctx.observe(store, model.summary_seqs())
            self.ledger.expect(
                C.STORE_MODEL,
                False,
                f"after {ctx.op}, the store differs from the model in {len(diffs)} key(s):\n  "
                + "\n  ".join(d.describe() for d in diffs[:6]),
                ids=tuple(sorted({i for d in diffs for i in blame(d, ctx)})),
            )
        self.ledger.credit(C.STORE_MODEL, ctx.verifies or ("JF-ATOM-001",))
        expected_log, expected_text = actual.change_log(self.bases.get(base))
        log_text = jcs(log)
        self.ledger.expect(
            C.CHANGE_LOG,
            expected_text == log_text,
            lambda: _log_message(expected_log, log),
            ids=log_ids(expected_log, log, ctx),
        )
        credited = ["JF-QUOTA-005"]
        if len(log) >= 2:
            credited.append("JF-QUOTA-006")
        if base:
            credited.append("JF-QUOTA-007")
        self.ledger.credit(C.CHANGE_LOG, credited)
        mine = actual.size() + len(log_text.encode("utf-8", "surrogatepass"))
        self.ledger.expect(
            C.FOOTPRINT,
            dump["footprint"] == mine and mine <= QUOTA,
            f"footprint reported {dump['footprint']}, the suite counts {mine} JCS bytes "
            f"(quota {QUOTA})",
        )
        meta = store.get("jfGameStack.meta")
        if isinstance(meta, dict):
            held = any(
                isinstance(v, dict) and v.get("origin") == "intervene"
                for k, v in store.items()
                if k.startswith("jfGameStack.chunk.")
            )
            self.ledger.expect(
                C.FLAG_INVARIANT,
                meta.get("forcedCompression") is held,
                f"forcedCompression is {meta.get('forcedCompression')!r} while the game stack "
                f"{'holds' if held else 'holds no'} exact intervened chunk",
            )

    def intervened(self, store: dict[str, Any], n: int, seq: int, revealed: str) -> None:
        """The stored intervened round (and its exchange, while unrepresented) holds exactly
        the revealed prefix: checked before any request that carries it."""
        stored = [store.get(f"jfRounds.{n}"), store.get(f"jfGameStack.chunk.{seq}")]
        texts = [
            r.get("output" if i == 0 else "assistant")
            for i, r in enumerate(stored)
            if isinstance(r, dict)
        ]
        wrong = next((t for t in texts if t != revealed), None)
        if wrong is None:
            self.ledger.credit(C.STORE_MODEL, ("JF-INT-002", "JF-INT-010"))
            return
        if isinstance(wrong, str) and wrong.startswith(revealed) and "DISCARDED-CANARY" in wrong:
            ids: tuple[str, ...] = ("JF-INT-002", "JF-INT-009")
            what = "the discarded continuation too"
        elif isinstance(wrong, str) and revealed in wrong:
            ids, what = ("JF-INT-010", "JF-INT-002"), "an intervention marker"
        else:
            ids, what = ("JF-INT-002",), "a different text"
        self.ledger.expect(
            C.STORE_MODEL,
            False,
            f"the intervened round {n} was stored with {what}: expected the revealed prefix "
            f"{_short(revealed)}, got {_short(wrong)}",
            ids=ids,
        )

    def canaries_in_store(self, store: dict[str, Any], log: list[Any]) -> None:
        public = [v for k, v in store.items() if not k.startswith("jfCatalystStack.")]
        public += [e for e in log if not str(e.get("key", "")).startswith("jfCatalystStack.")]
        leak = _find(public, "SCENE-CANARY")
        self.ledger.expect(
            C.CANARY_ABSENT,
            leak is None,
            lambda: f"scene transcript text reached game memory: …{leak}…",
            ids=("JF-CAT-008", "JF-CAT-002"),
        )
        everything = [store, log]
        leak = _find(everything, "DISCARDED-CANARY")
        self.ledger.expect(
            C.CANARY_ABSENT,
            leak is None,
            lambda: f"the discarded continuation of an intervene was stored: …{leak}…",
            ids=("JF-INT-009",),
        )
        self.ledger.expect(
            C.CANARY_ABSENT,
            _find(everything, "REFUSAL-CANARY") is None,
            "a refusal's free-text message was stored",
            ids=("JF-CALL-012",),
        )

    def rebuilt_stack(self, op: str, dumped: dict[str, Any], model: GameModel) -> None:
        """The rebuilt game stack is the deterministic rebuild."""
        game_keys = {k: v for k, v in dumped.items() if k.startswith("jfGameStack.")}
        expected = {k: v for k, v in model.store().items() if k.startswith("jfGameStack.")}
        self.ledger.expect(
            C.DETERMINISM,
            jcs(game_keys) == jcs(expected),
            f"{op}: the rebuilt game stack is not the deterministic rebuild",
            ids=("JF-HIST-006",),
        )

    # -- compress.v2 requests ------------------------------------------------------------
    def no_request(self, op: str, fresh: Iterable[dict[str, Any]]) -> None:
        """No compress.v2 request arrived during an operation that must not compress."""
        fresh = list(fresh)
        history = op in HISTORY_OPS
        self.ledger.expect(
            C.NO_COMPRESSION if history else C.COMPRESSION_TRIGGER,
            not fresh,
            lambda: (
                f"{op} sent {len(fresh)} compress.v2 request(s) but none was due (first: "
                f"kind {(fresh[0].get('body') or {}).get('kind')}, "
                f"{(fresh[0].get('body') or {}).get('input', {}).get('chars')} chars)"
            ),
            ids=("JF-HIST-007",) if history else ("JF-COMP-001",),
        )

    def request_texts(self, requests: Iterable[dict[str, Any]]) -> None:
        """No canary travels in a request body."""
        for r in requests:
            body = jcs(r.get("body")) if r.get("body") is not None else ""
            self.ledger.expect(
                C.CANARY_ABSENT,
                "DISCARDED-CANARY" not in body,
                "a compress.v2 request carried the discarded continuation of an intervene",
                ids=("JF-INT-009",),
            )
            if isinstance(r.get("body"), dict) and r["body"].get("kind") == GAME_KIND:
                self.ledger.expect(
                    C.CANARY_ABSENT,
                    "SCENE-CANARY" not in body,
                    lambda body=body: (
                        "a game-kind request carried scene transcript text: "
                        f"…{_around(body, 'SCENE-CANARY')}…"
                    ),
                    ids=("JF-CAT-008",),
                )

    def violations(self, violations: list[dict[str, Any]], inherited: bool = False) -> None:
        """The fake's record of contract violations (the last one is blamed); wrong
        beneficiaries of a duplicate that inherited its participants break JF-HIST-012."""
        if violations:
            v = violations[-1]
            ids = {
                "beneficiaries": ("JF-CALL-009",),
                "beneficiaries_order": ("JF-CALL-009",),
                "chars": ("JF-CALL-003", "JF-TEXT-003"),
                "idempotency_key": ("JF-CALL-004",),
                "idempotency_conflict": ("JF-CALL-004",),
                "schema": ("JF-CALL-001", "JF-CALL-010"),
            }.get(v["reason"], ("JF-CALL-001",))
            if inherited and v["reason"].startswith("beneficiaries"):
                ids = ("JF-HIST-012", *ids)
            self.ledger.expect(
                C.REQUEST_CONTRACT,
                False,
                f"the fake compress.v2 rejected request #{v['index']}: {v['reason']} "
                f"({v['detail']})",
                ids=ids,
            )

    def flow(self, flow: Flow, participants: list[dict[str, Any]], inherited: bool = False) -> None:
        """Each compression of a predicted flow, attempt by attempt, in order."""
        for comp in flow.compressions:
            self.compression(comp, participants, inherited)

    def compression(
        self, comp: Compression, participants: list[dict[str, Any]], inherited: bool = False
    ) -> None:
        """The attempts of one compression not checked yet, then whether it was sent at all."""
        flight = comp.flight
        for i in range(comp.checked, len(comp.attempts)):
            attempt = comp.attempts[i]
            self.request(comp.game, flight, attempt.request, participants, inherited)
            self.ledger.expect(
                C.COMPRESSION_TRIGGER,
                attempt.reply is not None,
                "more compress.v2 attempts arrived than the suite scripted",
                ids=("JF-COMP-001", "JF-CONC-003"),
            )
            if i > 0:
                prev = comp.attempts[i - 1].answer
                self.ledger.expect(
                    C.RETRIES,
                    prev in TRANSPORT,
                    f"attempt {i + 1} was sent after a {prev} reply: only transport failures "
                    "are retried",
                    ids=("JF-CALL-007",),
                )
            self.ledger.expect(
                C.RETRIES,
                i + 1 <= MAX_ATTEMPTS,
                f"{i + 1} attempts for one logical compression (at most {MAX_ATTEMPTS})",
                ids=("JF-CALL-008",),
            )
        comp.checked = len(comp.attempts)
        if comp.missing:
            self.ledger.expect(
                C.COMPRESSION_TRIGGER,
                False,
                f"a compression of "
                f"{'scene ' + flight.scene if flight.scene else 'the game stack'} was due "
                f"({'forced' if flight.forced else f'{len(flight.text)} code points'}) but no "
                "compress.v2 request arrived",
                ids=("JF-INT-004", "JF-INT-007")
                if flight.forced
                else ("JF-COMP-001", "JF-TEXT-003"),
            )

    def request(
        self,
        game: str,
        flight: InFlight,
        r: dict[str, Any],
        participants: list[dict[str, Any]],
        inherited: bool = False,
    ) -> None:
        """One request: kind and scope, the canonical text, sizes, key, beneficiaries (of
        participants a duplicate inherited from its source, when `inherited`)."""
        body = r.get("body") or {}
        scope = (
            {"gameId": game}
            if flight.scene is None
            else {"gameId": game, "catalystId": flight.scene}
        )
        self.ledger.expect(
            C.REQUEST_CONTRACT,
            body.get("kind") == flight.kind and body.get("scope") == scope,
            f"request kind/scope {body.get('kind')!r} {body.get('scope')!r}, expected "
            f"{flight.kind!r} {scope!r}",
            ids=("JF-CALL-002",),
        )
        given = body.get("input", {})
        text = given.get("text")
        self.ledger.expect(
            C.REQUEST_CONTRACT,
            text == flight.text,
            lambda: _text_mismatch(flight.text, text),
            ids=("JF-CALL-003", "JF-TEXT-004", "JF-COMP-002"),
        )
        self.ledger.expect(
            C.REQUEST_CONTRACT,
            given.get("throughSeq") == flight.through and given.get("chars") == len(flight.text),
            f"input.throughSeq {given.get('throughSeq')} / chars {given.get('chars')}, expected "
            f"{flight.through} / {len(flight.text)}",
            ids=("JF-COMP-002", "JF-TEXT-003", "JF-CALL-003"),
        )
        self.ledger.expect(
            C.REQUEST_CONTRACT,
            r.get("idempotency_key") == flight.key,
            f"Idempotency-Key {r.get('idempotency_key')!r}, the spec's derivation gives "
            f"{flight.key!r}",
            ids=("JF-CALL-004",),
        )
        expected = beneficiaries(participants)
        self.ledger.expect(
            C.REQUEST_CONTRACT,
            body.get("beneficiaries") == expected,
            f"beneficiaries {body.get('beneficiaries')!r}, participants at call time give "
            f"{expected!r}" + (" (the participants the duplicate copied)" if inherited else ""),
            ids=("JF-HIST-012", "JF-CALL-009") if inherited else ("JF-CALL-009",),
        )
        self.ledger.credit(C.REQUEST_CONTRACT, ("JF-CALL-001", "JF-CALL-010"))

    def leftover(self, op: str, leftover: list[dict[str, Any]], answered: dict[str, str]) -> None:
        """Requests of a step that no expected compression explains."""
        retried = [r for r in leftover if r.get("idempotency_key") in answered]
        if retried:  # a leftover repeating an answered attempt's key is a retry of it
            self.ledger.expect(
                C.RETRIES,
                False,
                f"{op} sent {len(retried)} further attempt(s) with the Idempotency-Key of an "
                f"attempt answered {answered[retried[0]['idempotency_key']]!r}: only transport "
                "failures are retried",
                ids=("JF-CALL-007",),
            )
        self.ledger.expect(
            C.COMPRESSION_TRIGGER,
            not leftover,
            lambda: (
                f"{op} sent {len(leftover)} unexpected compress.v2 request(s): "
                f"{[(r.get('body') or {}).get('kind') for r in leftover]}"
            ),
            ids=("JF-COMP-001", "JF-CONC-003"),
        )

    # -- telemetry -----------------------------------------------------------------------
    def telemetry(
        self, events: list[dict[str, Any]], fresh: list[dict[str, Any]], comp: Compression
    ) -> None:
        """The events of one settled compression: one per attempt, each matching it."""
        flight, attempts, outcome = comp.flight, comp.attempts, comp.outcome
        text = jcs(events)
        self.ledger.expect(
            C.CANARY_ABSENT,
            "CANARY" not in text and "\u27ea" not in text,
            lambda: (
                "telemetry holds text: "
                f"…{_around(text, 'CANARY' if 'CANARY' in text else chr(0x27EA))}…"
            ),
            ids=("JF-CALL-012", "JF-CAT-008", "JF-INT-009"),
        )
        self.ledger.expect(
            C.TELEMETRY,
            len(fresh) == len(attempts),
            f"{len(fresh)} telemetry event(s) for a compression of {len(attempts)} attempt(s)",
            ids=("JF-CALL-011",),
        )
        scope = {"gameId": comp.game}
        if flight.scene is not None:
            scope["catalystId"] = flight.scene
        numbers: list[Any] = []
        for i, (event, attempt) in enumerate(zip(fresh, attempts, strict=True)):
            d = settled(attempt.reply or {"reply": "reset"})
            want_outcome = outcome if i == len(attempts) - 1 else "transport"
            problems = []
            if event.get("idempotencyKey") != attempt.request["idempotency_key"]:
                problems.append("idempotencyKey differs from the request's header")
            if event.get("kind") != flight.kind or event.get("scope") != scope:
                problems.append("kind/scope differ from the request's")
            if event.get("outcome") != want_outcome:
                problems.append(f"outcome {event.get('outcome')!r}, expected {want_outcome!r}")
            if (
                event.get("inputChars") != len(flight.text)
                or event.get("throughSeq") != flight.through
            ):
                problems.append("inputChars/throughSeq differ from the request's")
            want_out = output_chars(d, len(flight.text))
            if want_out is not None and event.get("outputChars") != want_out:
                problems.append(f"outputChars {event.get('outputChars')!r}, expected {want_out}")
            cid = call_id_of(d)
            if cid is not None and event.get("callId") != cid:
                problems.append(f"callId {event.get('callId')!r}, the fake's reply had {cid!r}")
            numbers.append(event.get("attempt"))
            self.ledger.expect(
                C.TELEMETRY,
                not problems,
                f"telemetry event of attempt {i + 1}: " + "; ".join(problems),
                ids=("JF-CALL-011",),
            )
        self.ledger.expect(
            C.TELEMETRY,
            all(isinstance(n, int) for n in numbers)
            and numbers == list(range(numbers[0], numbers[0] + len(numbers)))
            if numbers
            else True,
            f"attempt numbers {numbers} are not consecutive",
            ids=("JF-CALL-011",),
        )
        if outcome == "published":
            self.ledger.expect(
                C.CALL_ID,
                comp.call_id is not None and fresh[-1].get("callId") == comp.call_id,
                "telemetry callId differs from the summary's compressionCallId",
                ids=("JF-CALL-011", "JF-COMP-004"),
            )

    def no_more_telemetry(self, op: str, extra: list[dict[str, Any]]) -> None:
        self.ledger.expect(
            C.TELEMETRY,
            not extra,
            lambda: (
                f"{op} left {len(extra)} telemetry event(s) that match no compress.v2 "
                f"attempt: {[(e.get('outcome'), e.get('kind')) for e in extra]}"
            ),
            ids=("JF-CALL-011",),
        )


# -- messages ---------------------------------------------------------------------------


def _diffs(expected: Encoded, actual: Encoded) -> list[Diff]:
    """Per-key differences between the expected and the dumped store."""
    out = []
    for key in expected.differing(actual):
        if key not in actual.texts:
            out.append(Diff(key, "missing", expected.store[key], ABSENT))
        elif key not in expected.texts:
            out.append(Diff(key, "unexpected", ABSENT, actual.store[key]))
        else:
            out.append(Diff(key, "different", expected.store[key], actual.store[key]))
    return out


def _find(value: Any, needle: str) -> str | None:
    """The context of the first string (or key) inside `value` containing `needle`."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if needle in item:
                return _around(item, needle)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def _around(text: str, needle: str, width: int = 60) -> str:
    i = text.find(needle)
    return text[max(0, i - width) : i + len(needle) + width] if i >= 0 else ""


def _short(value: Any, width: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width // 2] + "…" + text[-width // 2 :]


def _text_mismatch(want: str, got: Any) -> str:
    if not isinstance(got, str):
        return f"input.text is {type(got).__name__}, expected the canonical text"
    i = next(
        (k for k, (a, b) in enumerate(zip(want, got, strict=False)) if a != b),
        min(len(want), len(got)),
    )
    return (
        "input.text differs from the canonical text of the represented prefix at code point "
        f"{i} (expected {len(want)} code points, got {len(got)}): expected "
        f"…{want[max(0, i - 40) : i + 40]!r}…, got …{got[max(0, i - 40) : i + 40]!r}…"
    )


def _log_message(expected: list[Any], got: list[Any]) -> str:
    ek = [(e["key"], e["op"]) for e in expected]
    gk = [(e.get("key"), e.get("op")) for e in got] if isinstance(got, list) else got
    if ek != gk:
        return f"change log entries {gk[:8]}… differ from the net diff {ek[:8]}…"
    for e, g in zip(expected, got, strict=False):
        if jcs(e) != jcs(g):
            return f"change log entry for {e['key']} holds a different value than the store"
    return "change log differs from the net diff"
