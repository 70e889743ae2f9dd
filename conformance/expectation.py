# ruff: noqa: E501  (long diagnostic f-strings read better unbroken)
"""Expected compressions: which requests must arrive, what each attempt was answered, and
what the implementation must then have done.

`Expectation._flow` walks a generation (or an intervene) the way the spec's machines do:
an owed forced compression first, then the stack's own check; for each logical compression it
matches the next requests the fake recorded (retries share a body and an Idempotency-Key),
takes the reply each received from the mirrored script (or the idempotent replay of a
completed reply), settles the outcome (published, refused, transport, empty, not_smaller,
quota, stale) on the model, and queues its telemetry check; the session runs those after the
step's store and report checks (`_check_telemetry_due`), so that a wrong publication is blamed
on the rule it breaks rather than on the telemetry event's outcome.
"""

from __future__ import annotations

import copy
from collections import deque
from typing import Any

from conformance import checks as C
from conformance import exercise
from conformance.canon import (
    QUOTA,
    beneficiaries,
    change_log,
    footprint,
    idempotency_key,
    jcs,
)
from conformance.harness import HISTORY_OPS, MAX_ATTEMPTS
from conformance.observation import Observation, _text_mismatch
from conformance.oracle import InFlight
from conformance.replies import (
    COMPLETED,
    TRANSPORT,
    attempt_outcome,
    settled,
)

__all__ = ["Expectation"]


class Expectation(Observation):
    """Expected compressions (see the module docs)."""

    # -- compression expectations --------------------------------------------------------
    def _expect_no_request(self, op: str) -> None:
        fresh = self._new_requests()
        ids = ("JF-HIST-007",) if op in HISTORY_OPS else ("JF-COMP-001",)
        check = C.NO_COMPRESSION if op in HISTORY_OPS else C.COMPRESSION_TRIGGER
        self.ledger.expect(
            check,
            not fresh,
            lambda: (
                f"{op} sent {len(fresh)} compress.v2 request(s) but none was due "
                f"(first: kind {(fresh[0].get('body') or {}).get('kind')}, "
                f"{(fresh[0].get('body') or {}).get('input', {}).get('chars')} chars)"
            ),
            ids=ids,
        )

    def can_hold(self, game: str, scene: str | None) -> bool:
        """Whether a compression of this stack would reach the fake's script now: not if the
        service already completed this logical compression (it would replay its reply)."""
        stack = self.games[game].stack(scene)
        if stack is None or not stack.chunks:
            return False
        return self._key(game, scene) not in self.completed

    def _key(self, game: str, scene: str | None) -> str:
        """The key of the next ask of this stack's logical compression (with its retry)."""
        stack = self.games[game].stack(scene)
        assert stack is not None and stack.chunks
        through, text = max(stack.chunks), stack.text()
        retry = self.retries.get((game, scene, stack.epoch, through, text), 0)
        return idempotency_key(game, scene, stack.epoch, through, text, retry)

    def _begin_flight(self, game: str, scene: str | None, forced: bool) -> InFlight:
        return self.games[game].flight_for(scene, self._key(game, scene), forced)

    def _take_attempt(
        self, game: str, flight: InFlight, requests: deque[dict[str, Any]], first: bool
    ) -> dict[str, Any] | None:
        """Match the next request to `flight`; returns {request, reply} or None."""
        if not requests:
            if first:
                self.ledger.expect(
                    C.COMPRESSION_TRIGGER,
                    False,
                    f"a compression of {'scene ' + flight.scene if flight.scene else 'the game stack'} "
                    f"was due ({'forced' if flight.forced else f'{len(flight.text)} code points'}) "
                    "but no compress.v2 request arrived",
                    ids=("JF-INT-004", "JF-INT-007")
                    if flight.forced
                    else ("JF-COMP-001", "JF-TEXT-003"),
                )
            return None
        r = requests[0]
        body = r.get("body") or {}
        same = (
            body.get("kind") == flight.kind
            and body.get("input", {}).get("text") == flight.text
            and body.get("input", {}).get("throughSeq") == flight.through
        )
        if not first and not same:
            return None
        requests.popleft()
        self._check_request(game, flight, r)
        if r.get("outcome") == "replay":
            reply = self.completed[r["idempotency_key"]]
        else:
            self.ledger.expect(
                C.COMPRESSION_TRIGGER,
                bool(self.mirror),
                "more compress.v2 attempts arrived than the suite scripted",
                ids=("JF-COMP-001", "JF-CONC-003"),
            )
            reply = self.mirror.popleft()
        return {"request": r, "reply": reply}

    def _check_request(self, game: str, flight: InFlight, r: dict[str, Any]) -> None:
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
        text = body.get("input", {}).get("text")
        self.ledger.expect(
            C.REQUEST_CONTRACT,
            text == flight.text,
            lambda: _text_mismatch(flight.text, text),
            ids=("JF-CALL-003", "JF-TEXT-004", "JF-COMP-002"),
        )
        self.ledger.expect(
            C.REQUEST_CONTRACT,
            body.get("input", {}).get("throughSeq") == flight.through
            and body.get("input", {}).get("chars") == len(flight.text),
            f"input.throughSeq {body.get('input', {}).get('throughSeq')} / chars "
            f"{body.get('input', {}).get('chars')}, expected {flight.through} / {len(flight.text)}",
            ids=("JF-COMP-002", "JF-TEXT-003", "JF-CALL-003"),
        )
        self.ledger.expect(
            C.REQUEST_CONTRACT,
            r.get("idempotency_key") == flight.key,
            f"Idempotency-Key {r.get('idempotency_key')!r}, the spec's derivation gives {flight.key!r}",
            ids=("JF-CALL-004",),
        )
        expected = beneficiaries(self.games[game].participants)
        self.ledger.expect(
            C.REQUEST_CONTRACT,
            body.get("beneficiaries") == expected,
            f"beneficiaries {body.get('beneficiaries')!r}, participants at call time give {expected!r}",
            ids=("JF-CALL-009",),
        )
        self.ledger.credit(C.REQUEST_CONTRACT, ("JF-CALL-001", "JF-CALL-010"))

    def _run_attempts(
        self,
        game: str,
        flight: InFlight,
        requests: deque[dict[str, Any]],
        attempts: list[dict[str, Any]],
    ) -> bool:
        """Consume the attempts of one logical compression; True if it is complete."""
        while True:
            got = self._take_attempt(game, flight, requests, first=not attempts)
            if got is None:
                return bool(attempts)
            if attempts:
                prev = settled(attempts[-1]["reply"])["reply"]
                self.ledger.expect(
                    C.RETRIES,
                    prev in TRANSPORT,
                    f"attempt {len(attempts) + 1} was sent after a {prev} reply: only transport "
                    "failures are retried",
                    ids=("JF-CALL-007",),
                )
            attempts.append(got)
            self.ledger.expect(
                C.RETRIES,
                len(attempts) <= MAX_ATTEMPTS,
                f"{len(attempts)} attempts for one logical compression (at most {MAX_ATTEMPTS})",
                ids=("JF-CALL-008",),
            )
            if settled(got["reply"])["reply"] == "hold" or got["request"].get("outcome") == "hold":
                return False
            if settled(got["reply"])["reply"] not in TRANSPORT:
                key = got["request"].get("idempotency_key")
                if key is not None:
                    self.answered[key] = settled(got["reply"])["reply"]
                return True

    def _settle(self, game: str, flight: InFlight, attempts: list[dict[str, Any]]) -> str:
        """Decide the outcome of a finished logical compression and apply it to the model."""
        model = self.games[game]
        last = attempts[-1]["reply"]
        if last["reply"] == "hold":
            last = settled(last)
        for a in attempts:
            d = settled(a["reply"])
            if d["reply"] in COMPLETED:
                self.completed.setdefault(a["request"]["idempotency_key"], d)
        outcome = attempt_outcome(last, len(flight.text))
        if last["reply"] in COMPLETED:  # a completed reply: asking again takes a new key
            material = (game, flight.scene, flight.epoch, flight.through, flight.text)
            self.retries[material] = self.retries.get(material, 0) + 1
        if model.is_stale(flight):
            outcome = "stale"
        elif outcome == "valid":
            if self._publication_fits(game, flight, last):
                model.publish_summary(flight, last["summary"], last["callId"])
                outcome = "published"
            else:
                outcome = "quota"
        call_id = None
        if outcome == "published":
            stack = model.stack(flight.scene)
            assert stack is not None and stack.summary is not None
            call_id = stack.summary["compressionCallId"]
        self.telemetry_due.append((game, flight, attempts, outcome, call_id))
        exercise.record("outcome", outcome)
        return outcome

    def _publication_fits(self, game: str, flight: InFlight, reply: dict[str, Any]) -> bool:
        model = self.games[game]
        before = model.store()
        trial = copy.deepcopy(model)
        trial.publish_summary(flight, reply["summary"], reply["callId"])
        after = trial.store()
        actual = dict(self.dumps[game]["store"]) if game in self.dumps else {}
        for key in set(before) - set(after):
            actual.pop(key, None)
        for key, value in after.items():
            if key not in before or jcs(before[key]) != jcs(value):
                actual[key] = value
        return footprint(actual, change_log(self.bases[game], actual)) <= QUOTA

    # -- the generation flow ---------------------------------------------------------------
    def _flow(
        self,
        game: str,
        scene: str | None,
        *,
        forced_first: bool,
        check: bool,
        op: str,
        future: Any = None,
    ) -> dict[str, Any]:
        """Predict, request by request, what a generation (or an intervene) does.

        Returns {"pending": cause} when the generation must be refused with
        compression_pending, {"report": ...} otherwise, or {"held": Held} when the fake
        holds the request.
        """
        model = self.games[game]
        requests: deque[dict[str, Any]] = deque(self._new_requests())
        self._check_request_texts(list(requests))
        self._violations()
        results: list[tuple[InFlight, str]] = []
        if forced_first:
            if None in model.in_flight or (
                self.held and self.held.game == game and self.held.flight.scene is None
            ):
                return {"pending": "in_flight", "requests": requests}
            flight = self._begin_flight(game, None, forced=True)
            attempts: list[dict[str, Any]] = []
            done = self._run_attempts(game, flight, requests, attempts)
            if not done:
                return {"held": (flight, attempts, True)}
            outcome = self._settle(game, flight, attempts)
            results.append((flight, outcome))
            if model.game.flag and op != "intervene":
                return {"pending": outcome, "results": results, "requests": requests}
        if not check:
            return {"results": results, "requests": requests}
        stack = model.stack(scene)
        busy = scene in model.in_flight or (
            self.held is not None and self.held.game == game and self.held.flight.scene == scene
        )
        length = 0 if stack is None else stack.length()
        if busy:
            return {
                "report": {"outcome": "in_flight", "lengthBefore": length, "lengthAfter": length},
                "results": results,
                "requests": requests,
            }
        if not model.due(scene, self.thresholds["game" if scene is None else "catalyst"]):
            return {
                "report": {"outcome": "not_due", "lengthBefore": length, "lengthAfter": length},
                "results": results,
                "requests": requests,
            }
        flight = self._begin_flight(game, scene, forced=False)
        attempts = []
        done = self._run_attempts(game, flight, requests, attempts)
        if not done:
            return {"held": (flight, attempts, False), "results": results}
        outcome = self._settle(game, flight, attempts)
        results.append((flight, outcome))
        after = model.stack(scene)
        return {
            "report": {
                "outcome": outcome,
                "lengthBefore": len(flight.text),
                "lengthAfter": 0 if after is None else after.length(),
                "throughSeq": flight.through,
            },
            "results": results,
            "requests": requests,
        }

    def _finish(self, game: str, flow: dict[str, Any], op: str) -> None:
        """Leftover requests of a step; its telemetry is checked by `_check_telemetry_due`."""
        leftover = flow.get("requests") or deque()
        answered, self.answered = self.answered, {}
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
        self.fake.reset_script()
        self.mirror.clear()

    def _check_telemetry_due(self, game: str, op: str) -> None:
        """Telemetry of the step's settled compressions, then no events beyond them. Run
        after the step's store and report checks."""
        due, self.telemetry_due = self.telemetry_due, []
        for g, flight, attempts, outcome, call_id in due:
            self._check_telemetry(g, flight, attempts, outcome, call_id)
        reply = self._call("telemetry", {"game": game})
        if reply.ok:
            extra = reply.result[self.telemetry_seen.get(game, 0) :]
            self.ledger.expect(
                C.TELEMETRY,
                not extra,
                lambda: (
                    f"{op} left {len(extra)} telemetry event(s) that match no compress.v2 "
                    f"attempt: {[(e.get('outcome'), e.get('kind')) for e in extra]}"
                ),
                ids=("JF-CALL-011",),
            )
