# ruff: noqa: E501  (long diagnostic f-strings read better unbroken)
"""A conformance session: one driver, the fake compress.v2, the oracle, and the checks.

Every public operation of `Session` is one *step*: it is recorded (name and arguments, as
JSON) so that a failing sequence can be written as a trace and replayed, it drives the
implementation through the protocol, predicts the result with the oracle, and then verifies
everything observable: the reply, the dumped store against the model, the change log against
the suite's own checkpoint base, the footprint against the suite's own JCS count, the
forced-compression flag, canaries, every compress.v2 request the fake received, and the
telemetry. A check that fails raises `ConformanceFailure` naming requirement IDs.

Compressions are scripted: before an operation that may compress, the session scripts the
fake with reply descriptors (`conformance.replies`) and mirrors that FIFO, so it knows which
reply each attempt received. Idempotent replays of completed replies are mirrored too.
"""

from __future__ import annotations

import copy
import os
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from conformance import checks as C
from conformance.canon import (
    QUOTA,
    beneficiaries,
    change_log,
    footprint,
    idempotency_key,
    jcs,
)
from conformance.checks import Ledger
from conformance.driver_client import DriverClient, HarnessError, Reply
from conformance.fake_compress import FakeCompress
from conformance.oracle import GAME_KIND, Diff, GameModel, InFlight, diff_store, normalize
from conformance.replies import (
    COMPLETED,
    TRANSPORT,
    attempt_outcome,
    call_id_of,
    output_chars,
    settled,
    to_outcome,
)

__all__ = ["SPEC_THRESHOLDS", "Held", "Session"]

SPEC_THRESHOLDS = {"game": 300_000, "catalyst": 150_000}
MAX_ATTEMPTS = 3
IN_FLIGHT_TIMEOUT = 15.0
HISTORY_OPS = {"create_game", "reset", "edit_round", "convert", "duplicate"}


@dataclass
class Held:
    """A compression the fake holds in flight, and the operation waiting on it."""

    game: str
    op: str
    future: Any
    flight: InFlight
    reply: dict[str, Any]
    attempts: list[dict[str, Any]]
    before_length: int
    forced: bool


@dataclass
class Ctx:
    """What the step under verification did, to blame the right requirement on a diff."""

    op: str
    published: list[InFlight] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    refused: bool = False
    verifies: tuple[str, ...] = ()
    summaries: dict[str | None, int] = field(default_factory=dict)


class Session:
    """See the module docs. `thresholds=None` runs at the spec thresholds."""

    def __init__(
        self,
        driver: str,
        ledger: Ledger | None = None,
        *,
        thresholds: dict[str, int] | None = None,
        timeout: float = 120.0,
    ) -> None:
        self.ledger = ledger or Ledger()
        self.driver_spec = driver
        self.override = thresholds
        self.thresholds = dict(SPEC_THRESHOLDS, **(thresholds or {}))
        self.fake = FakeCompress(hold_timeout=60.0, summary_cap=64).start()
        try:
            self.client = DriverClient(driver, timeout=timeout)
            self.capabilities = self._hello()
        except BaseException:
            self.fake.close()
            raise
        self.games: dict[str, GameModel] = {}
        self.bases: dict[str, dict[str, Any]] = {}
        self.dumps: dict[str, dict[str, Any]] = {}
        self.telemetry_seen: dict[str, int] = {}
        self.steps: list[dict[str, Any]] = []
        self.mirror: deque[dict[str, Any]] = deque()
        self.completed: dict[str, dict[str, Any]] = {}
        self.cursor = 0
        self.held: Held | None = None
        self.unsupported: dict[str, str] = {}
        self.broken: set[str] = set()
        self.trace_start = 0
        self._counter = 0
        self.token = os.urandom(3).hex()

    # -- plumbing ------------------------------------------------------------------------
    def _hello(self) -> dict[str, Any]:
        args: dict[str, Any] = {"protocol": 1, "compressUrl": self.fake.url}
        if self.override:
            args["thresholds"] = self.override
        reply = self.client.call("hello", args, timeout=60)
        if not reply.ok:
            raise HarnessError(f"hello refused: {reply['error']}")
        caps = reply.result["capabilities"]
        if self.override and not caps.get("thresholdOverride"):
            raise HarnessError("the driver does not support thresholdOverride")
        self.implementation = reply.result["implementation"]
        return dict(caps)

    def close(self) -> None:
        """Release anything held, shut the driver down, stop the fake."""
        try:
            if self.held is not None:
                self.fake.release()
                self.client.done(self.held.future, 20)
                self.held = None
            self.client.close()
        finally:
            self.fake.close()

    def fresh(self, stem: str = "g") -> str:
        self._counter += 1
        return f"{stem}{self.token}-{self._counter}"

    def record(self, step: str, **args: Any) -> None:
        self.steps.append({"step": step, "args": copy.deepcopy(args)})

    def _script(self, replies: list[dict[str, Any]]) -> None:
        self.fake.reset_script()
        self.mirror.clear()
        for d in replies:
            self.fake.script(to_outcome(d))
            self.mirror.append(d)

    def _new_requests(self) -> list[dict[str, Any]]:
        requests = self.fake.requests
        fresh = requests[self.cursor :]
        self.cursor = len(requests)
        return fresh

    def _call(self, op: str, args: dict[str, Any], timeout: float | None = None) -> Reply:
        if self.held is not None and timeout is None:
            timeout = IN_FLIGHT_TIMEOUT
        future = self.client.start(op, args)
        if timeout is not None and not self.client.done(future, timeout):
            if self.held is not None:
                self.ledger.expect(
                    C.CONCURRENCY,
                    False,
                    f"{op} did not complete within {timeout:.0f} s while a compression was "
                    "held in flight: it waits on the compression inside the critical section",
                    ids=("JF-CONC-002",),
                )
            raise HarnessError(f"no reply to {op!r} within {timeout:.0f} s")
        reply = self.client.wait(future)
        if not reply.ok and reply.code == "unsupported_op":
            self.unsupported[op] = reply["error"].get("message", "")
        return reply

    def _ok(self, reply: Reply, op: str, ids: tuple[str, ...]) -> Any:
        self.ledger.expect(
            C.ERROR_CODE if reply.code != "unsupported_op" else C.REPLY,
            reply.ok,
            lambda: f"{op} was refused: {reply.get('error')}",
            ids=ids,
        )
        return reply.result

    def _participants_to_fake(self, game: str) -> None:
        self.fake.set_participants(self.games[game].participants)

    # -- verification --------------------------------------------------------------------
    def dump(self, game: str) -> dict[str, Any]:
        reply = self._call("dump", {"game": game})
        if not reply.ok:
            raise HarnessError(f"dump of {game} failed: {reply['error']}")
        self.dumps[game] = reply.result
        return reply.result

    def verify(self, game: str, ctx: Ctx) -> None:
        """Compare everything observable about `game` with the model."""
        model = self.games[game]
        dump = self.dump(game)
        store, log = dump["store"], dump["changeLog"]
        self._check_canaries_in_store(store, log)
        diffs = diff_store(model.store(), normalize(store))
        if diffs:
            for scene in [None, *model.scenes]:
                stack = model.stack(scene)
                if stack is not None and stack.summary is not None:
                    ctx.summaries[scene] = stack.summary["throughSeq"]
            blamed = sorted({i for d in diffs for i in self._blame(d, ctx)})
            self.ledger.expect(
                C.STORE_MODEL,
                False,
                f"after {ctx.op}, the store differs from the model in {len(diffs)} key(s):\n  "
                + "\n  ".join(d.describe() for d in diffs[:6]),
                ids=tuple(blamed),
            )
        self.ledger.credit(C.STORE_MODEL, ctx.verifies or ("JF-ATOM-001",))
        expected_log = change_log(self.bases[game], store)
        self.ledger.expect(
            C.CHANGE_LOG,
            jcs(expected_log) == jcs(log),
            lambda: _log_message(expected_log, log),
            ids=_log_ids(expected_log, log, ctx),
        )
        credited = ["JF-QUOTA-005"]
        if len(log) >= 2:
            credited.append("JF-QUOTA-006")
        if self.bases[game]:
            credited.append("JF-QUOTA-007")
        self.ledger.credit(C.CHANGE_LOG, credited)
        mine = footprint(store, log)
        self.ledger.expect(
            C.FOOTPRINT,
            dump["footprint"] == mine and mine <= QUOTA,
            f"footprint reported {dump['footprint']}, the suite counts {mine} JCS bytes "
            f"(quota {QUOTA})",
        )
        meta = store.get("jfGameStack.meta")
        if isinstance(meta, dict):
            held_intervened = any(
                isinstance(v, dict) and v.get("origin") == "intervene"
                for k, v in store.items()
                if k.startswith("jfGameStack.chunk.")
            )
            self.ledger.expect(
                C.FLAG_INVARIANT,
                meta.get("forcedCompression") is held_intervened,
                f"forcedCompression is {meta.get('forcedCompression')!r} while the game stack "
                f"{'holds' if held_intervened else 'holds no'} exact intervened chunk",
            )

    def _blame(self, d: Diff, ctx: Ctx) -> list[str]:
        key = d.key
        ids: list[str] = []
        if ctx.refused:
            ids += ["JF-ERR-002", "JF-ATOM-001"]
        through = {f.scene: f.through for f in ctx.published}
        if ".chunk." in key:
            prefix, _, seq_text = key.rpartition(".chunk.")
            scene = None if prefix == "jfGameStack" else prefix.split(".", 1)[1]
            seq = int(seq_text) if seq_text.isdigit() else -1
            if scene in through:
                if d.problem == "missing" and seq > through[scene]:
                    ids.append("JF-COMP-003")
                elif d.problem == "unexpected" and seq <= through[scene]:
                    ids += ["JF-COMP-005", "JF-ATOM-003"]
                else:
                    ids.append("JF-COMP-005")
            elif ctx.failed:
                ids.append("JF-COMP-009")
            elif d.problem == "missing" and scene in ctx.summaries and seq > ctx.summaries[scene]:
                ids.append("JF-COMP-003")
            if d.problem == "unexpected" and "SCENE-CANARY" in jcs(d.actual):
                ids += ["JF-CAT-002", "JF-CAT-008"]
            if d.problem == "different" and isinstance(d.actual, dict):
                e, a = d.expected, d.actual
                if (e.get("user"), e.get("assistant")) != (a.get("user"), a.get("assistant")):
                    ids.append("JF-TEXT-002")
                    if e.get("origin") == "intervene":
                        ids += ["JF-INT-002", "JF-INT-010"]
                if (
                    set(a) - set(e)
                    or e.get("origin") != a.get("origin")
                    or (e.get("roundId"), e.get("catalystId"))
                    != (a.get("roundId"), a.get("catalystId"))
                ):
                    ids.append("JF-STORE-003")
                if e.get("seq") != a.get("seq"):
                    ids.append("JF-STORE-004")
                if scene is not None:
                    ids.append("JF-STORE-005")
            if d.problem == "missing" and not ids:
                ids.append("JF-STORE-003")
        elif key.endswith(".summary"):
            ids += ["JF-COMP-004", "JF-STORE-002"]
            if ctx.failed and not ctx.published:
                ids.append("JF-COMP-009")
        elif key.endswith(".meta"):
            e, a = d.expected or {}, d.actual or {}
            if isinstance(a, dict) and isinstance(e, dict):
                if e.get("forcedCompression") != a.get("forcedCompression"):
                    ids += ["JF-INT-006", "JF-INT-005" if ctx.published else "JF-INT-003"]
                if e.get("nextSeq") != a.get("nextSeq"):
                    ids.append("JF-STORE-004")
                if e.get("epoch") != a.get("epoch"):
                    ids.append("JF-HIST-004")
                if set(a) != set(e) and key == "jfGameStack.meta":
                    ids.append("JF-STORE-001")
                if key.startswith("jfCatalystStack."):
                    ids.append("JF-STORE-005")
            if d.problem == "unexpected" and key.startswith("jfCatalystStack."):
                ids += ["JF-CAT-004", "JF-CAT-007", "JF-CAT-009"]
        elif key.startswith("jfCatalystStack."):
            ids += ["JF-CAT-004", "JF-CAT-009", "JF-STORE-005"]
        elif key == "jfCatalystArchives":
            ids += ["JF-CAT-005", "JF-CAT-007", "JF-STORE-006"]
        elif key.startswith("jfRounds."):
            ids.append("JF-STORE-007")
            if isinstance(d.actual, dict) and d.actual.get("intervened"):
                ids += ["JF-INT-002", "JF-INT-003"]
        elif not key.startswith("jf"):
            ids.append("JF-STORE-009")
        if ctx.op in ("reset", "edit_round", "convert"):
            ids += ["JF-HIST-001", "JF-HIST-003"]
            if key.startswith("jfCatalystStack."):
                ids.append("JF-HIST-011")
            if key == "jfCatalystArchives" or (ctx.op == "reset" and key.startswith("jfRounds.")):
                ids.append("JF-HIST-010")
            if ctx.op == "convert":
                ids.append("JF-HIST-002")
        if ctx.op == "duplicate":
            ids.append("JF-HIST-008")
        if ctx.op == "create_game":
            ids.append("JF-HIST-009")
        if ctx.op == "restart":
            ids.append("JF-ATOM-004")
        if ctx.op in ("publish_scene", "cancel_scene"):
            ids += ["JF-CAT-003", "JF-CAT-004"] if ctx.op == "publish_scene" else ["JF-CAT-007"]
        if ctx.op == "intervene":
            ids.append("JF-INT-003")
        return ids or list(ctx.verifies) or ["JF-ATOM-001"]

    def _check_canaries_in_store(self, store: dict[str, Any], log: list[Any]) -> None:
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

    def _check_request_texts(self, requests: list[dict[str, Any]]) -> None:
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
                    f"a game-kind request carried scene transcript text: …{_around(body, 'SCENE-CANARY')}…",
                    ids=("JF-CAT-008",),
                )

    def _violations(self) -> None:
        found = self.fake.violations
        if found:
            v = found[-1]
            ids = {
                "beneficiaries": ("JF-CALL-009",),
                "beneficiaries_order": ("JF-CALL-009",),
                "chars": ("JF-CALL-003", "JF-TEXT-003"),
                "idempotency_key": ("JF-CALL-004",),
                "idempotency_conflict": ("JF-CALL-004",),
                "schema": ("JF-CALL-001", "JF-CALL-010"),
            }.get(v["reason"], ("JF-CALL-001",))
            self.ledger.expect(
                C.REQUEST_CONTRACT,
                False,
                f"the fake compress.v2 rejected request #{v['index']}: {v['reason']} ({v['detail']})",
                ids=ids,
            )

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

    def _begin_flight(self, game: str, scene: str | None, forced: bool) -> InFlight:
        model = self.games[game]
        stack = model.stack(scene)
        assert stack is not None and stack.chunks
        key = idempotency_key(game, scene, stack.epoch, max(stack.chunks), stack.text())
        return model.flight_for(scene, key, forced)

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
        if model.is_stale(flight):
            outcome = "stale"
        elif outcome == "valid":
            if self._publication_fits(game, flight, last):
                model.publish_summary(flight, last["summary"], last["callId"])
                outcome = "published"
            else:
                outcome = "quota"
        self._check_telemetry(game, flight, attempts, outcome)
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

    def _check_telemetry(
        self, game: str, flight: InFlight, attempts: list[dict[str, Any]], outcome: str
    ) -> None:
        reply = self._call("telemetry", {"game": game})
        if not reply.ok:
            self.unsupported.setdefault("telemetry", str(reply.get("error")))
            return
        events = reply.result
        seen = self.telemetry_seen.get(game, 0)
        fresh = events[seen:]
        self.telemetry_seen[game] = len(events)
        dump_text = jcs(events)
        self.ledger.expect(
            C.CANARY_ABSENT,
            "CANARY" not in dump_text and "\u27ea" not in dump_text,
            lambda: (
                f"telemetry holds text: …{_around(dump_text, 'CANARY' if 'CANARY' in dump_text else chr(0x27EA))}…"
            ),
            ids=("JF-CALL-012", "JF-CAT-008", "JF-INT-009"),
        )
        self.ledger.expect(
            C.TELEMETRY,
            len(fresh) == len(attempts),
            f"{len(fresh)} telemetry event(s) for a compression of {len(attempts)} attempt(s)",
            ids=("JF-CALL-011",),
        )
        scope = (
            {"gameId": game}
            if flight.scene is None
            else {"gameId": game, "catalystId": flight.scene}
        )
        numbers = []
        for i, (event, attempt) in enumerate(zip(fresh, attempts, strict=True)):
            final = i == len(attempts) - 1
            d = settled(attempt["reply"])
            want_outcome = outcome if final else "transport"
            problems = []
            if event.get("idempotencyKey") != attempt["request"]["idempotency_key"]:
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
            and numbers == list(range(numbers[0], numbers[0] + len(numbers))),
            f"attempt numbers {numbers} are not consecutive",
            ids=("JF-CALL-011",),
        )
        if outcome == "published":
            summary = self.games[game].stack(flight.scene).summary  # type: ignore[union-attr]
            self.ledger.expect(
                C.CALL_ID,
                summary is not None and fresh[-1].get("callId") == summary["compressionCallId"],
                "telemetry callId differs from the summary's compressionCallId",
                ids=("JF-CALL-011", "JF-COMP-004"),
            )

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
        leftover = flow.get("requests") or deque()
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

    def _check_report(self, op: str, got: dict[str, Any], want: dict[str, Any]) -> None:
        self.ledger.expect(
            C.OUTCOME,
            got.get("outcome") == want["outcome"],
            f"{op} reported outcome {got.get('outcome')!r}, expected {want['outcome']!r}",
            ids=_outcome_ids(want["outcome"]),
        )
        if want["outcome"] in ("not_due", "in_flight"):
            self.ledger.expect(
                C.COMPRESSION_TRIGGER,
                got.get("lengthBefore") == want["lengthBefore"],
                f"lengthBefore {got.get('lengthBefore')} but the canonical length is {want['lengthBefore']}",
                ids=("JF-TEXT-003", "JF-TEXT-004"),
            )
        else:
            self.ledger.expect(
                C.COMPRESSION_TRIGGER,
                got.get("lengthBefore") == want["lengthBefore"]
                and got.get("throughSeq") == want.get("throughSeq"),
                f"lengthBefore/throughSeq {got.get('lengthBefore')}/{got.get('throughSeq')}, the request had "
                f"{want['lengthBefore']}/{want.get('throughSeq')}",
                ids=("JF-CALL-003",),
            )
        if want["outcome"] == "published":
            self.ledger.expect(
                C.OUTCOME,
                got.get("lengthAfter") == want["lengthAfter"],
                f"lengthAfter {got.get('lengthAfter')}, the model's canonical length is {want['lengthAfter']}",
                ids=("JF-TEXT-004", "JF-COMP-003"),
            )

    # =====================================================================================
    # steps
    # =====================================================================================
    def new_game(self, game: str) -> None:
        self.record("new_game", game=game)
        self._script([])
        self._ok(self._call("create_game", {"game": game}), "create_game", ("JF-HIST-009",))
        self.games[game] = GameModel(game)
        self.bases[game] = {}
        self.telemetry_seen[game] = 0
        self._expect_no_request("create_game")
        self.verify(game, Ctx("create_game", verifies=("JF-HIST-009",)))

    def set_participants(self, game: str, participants: list[dict[str, Any]]) -> None:
        self.record("set_participants", game=game, participants=participants)
        self._ok(
            self._call("set_participants", {"game": game, "participants": participants}),
            "set_participants",
            ("JF-CALL-009",),
        )
        self.games[game].participants = copy.deepcopy(participants)
        self._participants_to_fake(game)

    def record_round(self, game: str, user: str, assistant: str) -> None:
        self.record("record_round", game=game, user=user, assistant=assistant)
        self._script([])
        reply = self._call("record_round", {"game": game, "input": user, "output": assistant})
        result = self._ok(reply, "record_round", ("JF-STORE-007",))
        want = self.games[game].record_round(user, assistant)
        self.ledger.expect(
            C.REPLY,
            result == want,
            f"record_round returned {result}, expected {want}",
            ids=("JF-STORE-004",),
        )
        self._expect_no_request("record_round")
        ids: tuple[str, ...] = (
            "JF-STORE-003",
            "JF-STORE-004",
            "JF-STORE-007",
            "JF-TEXT-002",
            "JF-ATOM-001",
            "JF-STORE-001",
        )
        if self.held is not None and self.held.game == game:
            ids += ("JF-CONC-002",)
        self.verify(game, Ctx("record_round", verifies=ids))

    def generate(
        self, game: str, scene: str | None = None, replies: list[dict[str, Any]] | None = None
    ) -> None:
        """A generation on the game (or a scene): forced compression owed first, then the check."""
        replies = replies or []
        self.record("generate", game=game, scene=scene, replies=replies)
        model = self.games[game]
        self._script(replies)
        self._participants_to_fake(game)
        args: dict[str, Any] = {"game": game} if scene is None else {"game": game, "scene": scene}
        before = copy.deepcopy(model)
        reply = self._call("generate", args)
        flow = self._flow(game, scene, forced_first=model.game.flag, check=True, op="generate")
        if "held" in flow:
            raise HarnessError("generate was held without hold_generate")
        if scene is not None and model.scenes.get(scene) and model.scenes[scene].state == "created":
            pass
        if "pending" in flow:
            self.ledger.expect(
                C.ERROR_CODE,
                not reply.ok and reply.code == "compression_pending",
                lambda: (
                    f"a forced compression was owed and ended {flow['pending']}, yet generate "
                    f"answered {reply.get('result') or reply.get('error')} instead of compression_pending"
                ),
                ids=("JF-INT-007", "JF-INT-008"),
            )
            details = reply.get("error", {}).get("details") or {}
            self.ledger.expect(
                C.ERROR_CODE,
                reply["error"].get("retryable") is True and details.get("cause") == flow["pending"],
                f"compression_pending must be retryable and name the cause {flow['pending']!r}: {reply['error']}",
                ids=("JF-INT-008",),
            )
            self._finish(game, flow, "generate")
            self.verify(
                game,
                Ctx(
                    "generate",
                    published=[f for f, o in flow.get("results", []) if o == "published"],
                    failed=[o for _, o in flow.get("results", []) if o != "published"],
                    verifies=("JF-INT-006", "JF-INT-008", "JF-COMP-009"),
                ),
            )
            return
        result = self._ok(reply, "generate", ("JF-COMP-012", "JF-INT-007"))
        if scene is not None and scene in model.scenes:
            model.mark_running(scene)
        self._check_report("generate", result, flow["report"])
        if flow["report"]["outcome"] == "published":
            stack = model.stack(scene)
            assert stack is not None and stack.summary is not None
            stored = stack.summary["compressionCallId"]
            self.ledger.expect(
                C.CALL_ID,
                result.get("callId") == stored,
                f"generate reported callId {result.get('callId')!r}, the fake's was {stored!r}",
                ids=("JF-COMP-004",),
            )
        held = self.held
        if (
            held is not None
            and held.game == game
            and held.flight.scene != scene
            and flow["report"]["outcome"] == "published"
        ):
            self.ledger.credit(C.CONCURRENCY, ("JF-CONC-004",))
        self._finish(game, flow, "generate")
        published = [f for f, o in flow["results"] if o == "published"]
        failed = [o for _, o in flow["results"] if o != "published"]
        verifies: tuple[str, ...] = ("JF-COMP-012",)
        if published:
            verifies += ("JF-COMP-004", "JF-COMP-005", "JF-INT-005", "JF-STORE-002")
        if failed:
            verifies += ("JF-COMP-009",)
        del before
        self.verify(game, Ctx("generate", published=published, failed=failed, verifies=verifies))

    def hold_generate(self, game: str, scene: str | None, reply: dict[str, Any]) -> None:
        """Start a generation whose compression the fake holds in flight."""
        self.record("hold_generate", game=game, scene=scene, reply=reply)
        if self.games[game].game.flag:
            raise HarnessError("hold_generate needs a game without an owed forced compression")
        self._start_held(
            game,
            "generate",
            {"game": game} if scene is None else {"game": game, "scene": scene},
            scene,
            reply,
            forced=False,
        )

    def hold_intervene(
        self, game: str, user: str, output: str, revealed: int, reply: dict[str, Any]
    ) -> None:
        """An intervene whose forced compression the fake holds in flight."""
        self.record(
            "hold_intervene", game=game, user=user, output=output, revealed=revealed, reply=reply
        )
        model = self.games[game]
        self._start_held(
            game,
            "intervene",
            {"game": game, "input": user, "output": output, "revealed": revealed},
            None,
            reply,
            forced=True,
            intervene=(user, output[:revealed]),
        )
        del model

    def _start_held(
        self,
        game: str,
        op: str,
        args: dict[str, Any],
        scene: str | None,
        reply: dict[str, Any],
        *,
        forced: bool,
        intervene: tuple[str, str] | None = None,
    ) -> None:
        if self.held is not None:
            raise HarnessError("only one held compression at a time")
        model = self.games[game]
        self._script([{"reply": "hold", "then": reply}])
        self._participants_to_fake(game)
        future = self.client.start(op, args)
        if intervene is not None:
            model.intervene(*intervene)
        if scene is not None:
            model.mark_running(scene)
            self.ledger.credit(C.REPLY, ("JF-INT-002",))
        deadline = time.monotonic() + 30
        while not self.fake.wait_held(0.05):
            self._violations()
            if self.client.done(future, 0):
                got = self.client.wait(future)
                self._violations()
                self.ledger.expect(
                    C.COMPRESSION_TRIGGER,
                    False,
                    f"{op} was expected to send a compression request and wait; it answered {got}",
                    ids=("JF-INT-004",) if forced else ("JF-COMP-001",),
                )
            if time.monotonic() > deadline:
                raise HarnessError(f"{op}: no compression request reached the fake within 30 s")
        requests: deque[dict[str, Any]] = deque(self._new_requests())
        self._check_request_texts(list(requests))
        self._violations()
        flight = self._begin_flight(game, scene, forced)
        attempts: list[dict[str, Any]] = []
        done = self._run_attempts(game, flight, requests, attempts)
        assert not done
        model.in_flight[scene] = flight
        self.held = Held(game, op, future, flight, reply, attempts, len(flight.text), forced)
        self.verify(
            game,
            Ctx(
                f"{op} (held)",
                verifies=("JF-ATOM-001", "JF-INT-003") if intervene else ("JF-ATOM-001",),
            ),
        )

    def release(self, retries: list[dict[str, Any]] | None = None) -> None:
        """Let the held reply go (then answer retries with `retries`) and check the settle."""
        retries = retries or []
        self.record("release", retries=retries)
        held = self.held
        assert held is not None
        game, model = held.game, self.games[held.game]
        self.fake.reset_script()
        self.mirror.clear()
        for d in retries:
            self.fake.script(to_outcome(d))
            self.mirror.append(d)
        self._participants_to_fake(game)
        self.fake.release()
        reply = self.client.wait(held.future)
        self.held = None
        model.in_flight.pop(held.flight.scene, None)
        requests: deque[dict[str, Any]] = deque(self._new_requests())
        self._check_request_texts(list(requests))
        self._violations()
        attempts = held.attempts
        if settled(held.reply)["reply"] in TRANSPORT:
            self._run_attempts(game, held.flight, requests, attempts)
        outcome = self._settle(game, held.flight, attempts)
        after = model.stack(held.flight.scene)
        want = {
            "outcome": outcome,
            "lengthBefore": len(held.flight.text),
            "lengthAfter": 0 if after is None else after.length(),
            "throughSeq": held.flight.through,
        }
        if held.op == "intervene":
            result = self._ok(reply, "intervene", ("JF-INT-003",))
            if result.get("compression") is not None:
                self._check_report("intervene", result["compression"], want)
            self.ledger.expect(
                C.REPLY,
                result.get("forcedCompression") is model.game.flag,
                f"intervene reported forcedCompression {result.get('forcedCompression')}, "
                f"the model says {model.game.flag}",
                ids=("JF-INT-006",),
            )
        else:
            result = self._ok(reply, "generate", ("JF-COMP-012",))
            self._check_report("generate", result, want)
        self._finish(game, {"requests": requests}, "release")
        verifies: tuple[str, ...] = (
            ("JF-COMP-003", "JF-CONC-002") if outcome == "published" else ("JF-COMP-009",)
        )
        if outcome == "stale":
            verifies += (
                ("JF-COMP-011",)
                if held.flight.scene is None or model.stack(held.flight.scene)
                else ("JF-CAT-009",)
            )
        self.verify(
            game,
            Ctx(
                "release",
                published=[held.flight] if outcome == "published" else [],
                failed=[] if outcome == "published" else [outcome],
                verifies=verifies,
            ),
        )

    def intervene(
        self,
        game: str,
        user: str,
        output: str,
        revealed: int,
        replies: list[dict[str, Any]] | None = None,
    ) -> None:
        replies = replies or []
        self.record(
            "intervene", game=game, user=user, output=output, revealed=revealed, replies=replies
        )
        model = self.games[game]
        self._script(replies)
        self._participants_to_fake(game)
        reply = self._call(
            "intervene", {"game": game, "input": user, "output": output, "revealed": revealed}
        )
        result = self._ok(reply, "intervene", ("JF-INT-001", "JF-INT-003"))
        busy = None in model.in_flight
        want = model.intervene(user, output[:revealed])
        self.ledger.expect(
            C.REPLY,
            result.get("round") == want["round"] and result.get("seq") == want["seq"],
            f"intervene returned round/seq {result.get('round')}/{result.get('seq')}, expected {want}",
            ids=("JF-INT-003", "JF-STORE-004"),
        )
        if busy:
            flow: dict[str, Any] = {"results": [], "requests": deque(self._new_requests())}
            self.ledger.expect(
                C.COMPRESSION_TRIGGER,
                result.get("compression") is None,
                "intervene started a second compression of the game stack while one was in flight",
                ids=("JF-CONC-003",),
            )
        else:
            flow = self._flow(game, None, forced_first=True, check=False, op="intervene")
            flight, outcome = flow["results"][0]
            comp = result.get("compression")
            self.ledger.expect(
                C.COMPRESSION_TRIGGER,
                isinstance(comp, dict),
                "intervene reported no forced compression although none was in flight",
                ids=("JF-INT-004",),
            )
            after = model.game
            self._check_report(
                "intervene",
                comp,
                {
                    "outcome": outcome,
                    "lengthBefore": len(flight.text),
                    "lengthAfter": after.length(),
                    "throughSeq": flight.through,
                },
            )
        self.ledger.expect(
            C.REPLY,
            result.get("forcedCompression") is model.game.flag,
            f"intervene reported forcedCompression {result.get('forcedCompression')}, "
            f"the model says {model.game.flag}",
            ids=("JF-INT-006",),
        )
        self._finish(game, flow, "intervene")
        published = [f for f, o in flow.get("results", []) if o == "published"]
        self.verify(
            game,
            Ctx(
                "intervene",
                published=published,
                failed=[o for _, o in flow.get("results", []) if o != "published"],
                verifies=("JF-INT-002", "JF-INT-003", "JF-INT-004", "JF-INT-010")
                + (("JF-INT-005",) if published else ("JF-INT-006",)),
            ),
        )

    # -- scenes --------------------------------------------------------------------------
    def start_scene(self, game: str, scene: str) -> None:
        self.record("start_scene", game=game, scene=scene)
        self._script([])
        self._ok(
            self._call("start_scene", {"game": game, "scene": scene}),
            "start_scene",
            ("JF-CAT-001",),
        )
        self.games[game].start_scene(scene)
        self._expect_no_request("start_scene")
        self.verify(game, Ctx("start_scene", verifies=("JF-STORE-005", "JF-CAT-001")))

    def scene_exchange(self, game: str, scene: str, user: str, assistant: str) -> None:
        self.record("scene_exchange", game=game, scene=scene, user=user, assistant=assistant)
        self._script([])
        reply = self._call(
            "scene_exchange", {"game": game, "scene": scene, "user": user, "assistant": assistant}
        )
        result = self._ok(reply, "scene_exchange", ("JF-CAT-001",))
        seq = self.games[game].scene_exchange(scene, user, assistant)
        self.ledger.expect(
            C.REPLY,
            result.get("seq") == seq,
            f"scene_exchange returned {result}, expected seq {seq}",
            ids=("JF-STORE-004",),
        )
        self._expect_no_request("scene_exchange")
        self.verify(
            game, Ctx("scene_exchange", verifies=("JF-CAT-002", "JF-STORE-005", "JF-CAT-008"))
        )

    def publish_scene(self, game: str, scene: str, closing: str, meanwhile: str) -> None:
        self.record("publish_scene", game=game, scene=scene, closing=closing, meanwhile=meanwhile)
        self._script([])
        model = self.games[game]
        again = model.scenes[scene].state == "published"
        reply = self._call(
            "publish_scene",
            {"game": game, "scene": scene, "closingSummary": closing, "meanwhileEvent": meanwhile},
        )
        result = self._ok(reply, "publish_scene", ("JF-CAT-001",))
        want = model.archives[scene] if again else model.end_scene(scene, closing, meanwhile)
        got = result
        self.ledger.expect(
            C.REPLY,
            got == want,
            f"publish_scene returned {result}, expected {want}",
            ids=("JF-CAT-006",) if again else ("JF-CAT-005",),
        )
        self._expect_no_request("publish_scene")
        self.verify(
            game,
            Ctx(
                "publish_scene",
                verifies=("JF-CAT-006",)
                if again
                else ("JF-CAT-003", "JF-CAT-004", "JF-CAT-005", "JF-STORE-006"),
            ),
        )

    def cancel_scene(self, game: str, scene: str) -> None:
        self.record("cancel_scene", game=game, scene=scene)
        self._script([])
        model = self.games[game]
        again = model.scenes[scene].state == "cancelled"
        result = self._ok(
            self._call("cancel_scene", {"game": game, "scene": scene}),
            "cancel_scene",
            ("JF-CAT-001",),
        )
        want = model.archives[scene] if again else model.end_scene(scene, None, None)
        got = result
        self.ledger.expect(
            C.REPLY,
            got == want,
            f"cancel_scene returned {result}, expected {want}",
            ids=("JF-CAT-006",) if again else ("JF-CAT-007",),
        )
        self._expect_no_request("cancel_scene")
        self.verify(
            game,
            Ctx(
                "cancel_scene",
                verifies=("JF-CAT-006",) if again else ("JF-CAT-007", "JF-STORE-006"),
            ),
        )

    # -- history -------------------------------------------------------------------------
    def _rebuilt(
        self, game: str, op: str, args: dict[str, Any], apply: Any, ids: tuple[str, ...]
    ) -> None:
        self._script([])
        reply = self._call(op, args)
        result = self._ok(reply, op, ids)
        model = self.games[game]
        apply(model)
        want = {"rounds": len(model.rounds), "chunks": len(model.game.chunks)}
        self.ledger.expect(
            C.REPLY,
            {k: result.get(k) for k in want} == want,
            f"{op} returned {result}, expected {want}",
            ids=("JF-HIST-004",),
        )
        self._expect_no_request(op)
        running = any(sc.state in ("created", "running") for sc in model.scenes.values())
        self.verify(
            game,
            Ctx(
                op,
                verifies=ids
                + ("JF-HIST-004", "JF-HIST-005", "JF-HIST-007")
                + (("JF-HIST-011",) if running else ()),
            ),
        )
        self._check_determinism(game, op)

    def _check_determinism(self, game: str, op: str) -> None:
        store = self.dumps[game]["store"]
        game_keys = {k: v for k, v in store.items() if k.startswith("jfGameStack.")}
        expected = {
            k: v for k, v in self.games[game].store().items() if k.startswith("jfGameStack.")
        }
        self.ledger.expect(
            C.DETERMINISM,
            jcs(game_keys) == jcs(expected),
            f"{op}: the rebuilt game stack is not the deterministic rebuild",
            ids=("JF-HIST-006",),
        )

    def reset(self, game: str, to_round: int) -> None:
        self.record("reset", game=game, to_round=to_round)
        self._rebuilt(
            game,
            "reset",
            {"game": game, "round": to_round},
            lambda m: m.reset(to_round),
            ("JF-HIST-001", "JF-HIST-003", "JF-HIST-010"),
        )

    def edit_round(self, game: str, n: int, user: str, assistant: str) -> None:
        self.record("edit_round", game=game, n=n, user=user, assistant=assistant)
        self._rebuilt(
            game,
            "edit_round",
            {"game": game, "round": n, "input": user, "output": assistant},
            lambda m: m.edit_round(n, user, assistant),
            ("JF-HIST-001", "JF-HIST-003"),
        )

    def convert(self, game: str, rounds: list[dict[str, str]]) -> None:
        self.record("convert", game=game, rounds=rounds)
        self._rebuilt(
            game,
            "convert",
            {"game": game, "rounds": rounds},
            lambda m: m.convert(rounds),
            ("JF-HIST-002", "JF-HIST-003"),
        )

    def duplicate(self, game: str, into: str) -> None:
        self.record("duplicate", game=game, into=into)
        self._script([])
        self._ok(
            self._call("duplicate", {"game": game, "into": into}), "duplicate", ("JF-HIST-008",)
        )
        self._expect_no_request("duplicate")
        source = self.dump(game)["store"]
        self.games[into] = self.games[game].clone(into)
        self.bases[into] = copy.deepcopy(source)
        self.telemetry_seen[into] = 0
        self.verify(into, Ctx("duplicate", verifies=("JF-HIST-008",)))
        copied = {k: v for k, v in self.dumps[into]["store"].items() if k.startswith("jf")}
        original = {k: v for k, v in source.items() if k.startswith("jf")}
        self.ledger.expect(
            C.STORE_MODEL,
            jcs(copied) == jcs(original),
            "the duplicate's jf keys differ from the source's",
            ids=("JF-HIST-008",),
        )
        self.ledger.expect(
            C.CHANGE_LOG,
            self.dumps[into]["changeLog"] == [],
            "the duplicate's change log is not empty",
            ids=("JF-HIST-008",),
        )

    # -- data, checkpoint ----------------------------------------------------------------
    def write(
        self, game: str, sets: dict[str, Any], deletes: list[str] | None = None, cheat: bool = False
    ) -> None:
        deletes = deletes or []
        self.record("write", game=game, sets=sets, deletes=deletes, cheat=cheat)
        op = "cheat" if cheat else "write"
        self._script([])
        model = self.games[game]
        actual = dict(self.dumps[game]["store"]) if game in self.dumps else {}
        for k in deletes:
            actual.pop(k, None)
        actual.update(sets)
        would_be = footprint(actual, change_log(self.bases[game], actual))
        before = self.dumps.get(game, {}).get("footprint")
        reply = self._call(op, {"game": game, "sets": sets, "deletes": deletes})
        if would_be > QUOTA:
            self._expect_refusal(
                game, op, reply, "quota_exceeded", ("JF-QUOTA-003", "JF-QUOTA-002")
            )
            details = (reply.get("error") or {}).get("details") or {}
            self.ledger.expect(
                C.QUOTA_NUMBERS,
                details.get("current") == before
                and details.get("would_be", details.get("wouldBe")) == would_be
                and details.get("quota") == QUOTA,
                f"quota_exceeded details {details}, expected current {before}, would_be {would_be}, quota {QUOTA}",
            )
            return
        result = self._ok(reply, op, ("JF-STORE-009", "JF-QUOTA-001"))
        for k in deletes:
            model.data.pop(k, None)
        model.data.update(copy.deepcopy(sets))
        self.ledger.expect(
            C.FOOTPRINT,
            result.get("footprint") == would_be,
            f"{op} returned footprint {result.get('footprint')}, the suite counts {would_be}",
        )
        self._expect_no_request(op)
        self.verify(game, Ctx(op, verifies=("JF-STORE-009", "JF-QUOTA-001", "JF-QUOTA-002")))

    def checkpoint(self, game: str) -> None:
        self.record("checkpoint", game=game)
        self._ok(self._call("checkpoint", {"game": game}), "checkpoint", ("JF-QUOTA-008",))
        store = self.dump(game)["store"]
        self.bases[game] = copy.deepcopy(store)
        self.verify(game, Ctx("checkpoint", verifies=("JF-QUOTA-008",)))
        self.ledger.expect(
            C.CHANGE_LOG,
            self.dumps[game]["changeLog"] == [],
            "the change log is not empty right after a checkpoint",
            ids=("JF-QUOTA-008",),
        )

    # -- refusals ------------------------------------------------------------------------
    def _expect_refusal(
        self, game: str, op: str, reply: Reply, code: str, ids: tuple[str, ...]
    ) -> None:
        self.ledger.expect(
            C.ERROR_CODE,
            not reply.ok and reply.code == code,
            lambda: (
                f"{op} should be refused with {code}; got {reply.get('result') if reply.ok else reply['error']}"
            ),
            ids=ids,
        )
        stable = self.capabilities and reply.code in self.client.protocol.error_codes
        self.ledger.expect(
            C.ERROR_CODE,
            bool(stable),
            f"error code {reply.code!r} is not a stable code",
            ids=("JF-ERR-001",),
        )
        self.ledger.expect(
            C.ERROR_CODE,
            bool(reply["error"].get("message")),
            "the error has no message",
            ids=("JF-ERR-001",),
        )
        if code == "quota_exceeded" and not reply.ok:
            details = reply["error"].get("details") or {}
            would_be = details.get("would_be", details.get("wouldBe"))
            before = self.dumps.get(game, {}).get("footprint")
            self.ledger.expect(
                C.QUOTA_NUMBERS,
                details.get("current") == before
                and details.get("quota") == QUOTA
                and isinstance(would_be, int)
                and would_be > QUOTA,
                f"quota_exceeded details {details}: expected current {before}, a would_be above "
                f"the quota, and quota {QUOTA}",
            )
        self._expect_no_request(op)
        self.verify(game, Ctx(op, refused=True, verifies=("JF-ERR-002", "JF-ATOM-001", *ids)))

    def invalid(self, game: str, op: str, args: dict[str, Any], code: str, ids: list[str]) -> None:
        """Send an operation that must be refused with `code`, writing nothing."""
        self.record("invalid", game=game, op=op, args=args, code=code, ids=ids)
        self._script([])
        reply = self._call(op, {"game": game, **args})
        self._expect_refusal(game, op, reply, code, tuple(ids))

    def expect_pending_generation(self, game: str, scene: str | None = None) -> None:
        """A generation while the forced compression is in flight: compression_pending (in_flight)."""
        self.record("expect_pending_generation", game=game, scene=scene)
        self._script([])
        reply = self._call(
            "generate", {"game": game} if scene is None else {"game": game, "scene": scene}
        )
        self.ledger.expect(
            C.ERROR_CODE,
            not reply.ok
            and reply.code == "compression_pending"
            and (reply["error"].get("details") or {}).get("cause") == "in_flight",
            lambda: (
                f"generate while the forced compression is in flight answered "
                f"{reply.get('result') or reply.get('error')}; expected compression_pending (cause in_flight)"
            ),
            ids=("JF-INT-008", "JF-CONC-003"),
        )
        self._expect_no_request("generate")
        self.verify(game, Ctx("generate", refused=True, verifies=("JF-INT-008", "JF-CONC-003")))

    def compare_game_stacks(self, a: str, b: str) -> None:
        """Two games rebuilt from the same rounds, archives and epoch: identical game stacks."""
        self.record("compare_game_stacks", a=a, b=b)
        sa = {k: v for k, v in self.dump(a)["store"].items() if k.startswith("jfGameStack.")}
        sb = {k: v for k, v in self.dump(b)["store"].items() if k.startswith("jfGameStack.")}
        self.ledger.expect(
            C.DETERMINISM,
            jcs(sa) == jcs(sb),
            f"games {a} and {b} were rebuilt from the same inputs but their game "
            "stacks differ in JCS",
            ids=("JF-HIST-006",),
        )

    def recover(self) -> None:
        """After a failed step: release anything held, drop the script, skip unread requests.

        The games of the failed sequence are marked broken: their model may be out of step."""
        self.broken.update(st["args"]["game"] for st in self.steps if "game" in st["args"])
        if self.held is not None:
            self.fake.release()
            self.client.done(self.held.future, 30)
            self.held = None
        for model in self.games.values():
            model.in_flight.clear()
        self.fake.reset_script()
        self.mirror.clear()
        self.cursor = len(self.fake.requests)

    # -- durability ----------------------------------------------------------------------
    def restart(self) -> None:
        """Kill and restart the driver; every game must reopen exactly as it was."""
        self.record("restart")
        if self.held is not None:
            raise HarnessError("restart while a compression is held is not supported by the suite")
        before = {g: jcs(self.dump(g)) for g in self.games}
        self.client.restart()
        if self.driver_spec.startswith("stdio:"):
            self._hello()
        for game in self.games:
            if self.games[game].participants:
                self._ok(
                    self._call(
                        "set_participants",
                        {"game": game, "participants": self.games[game].participants},
                    ),
                    "set_participants",
                    ("JF-CALL-009",),
                )
            after = jcs(self.dump(game))
            self.ledger.expect(
                C.DURABILITY,
                after == before[game],
                f"after restart, game {game} differs from its state before",
                ids=("JF-ATOM-004",),
            )
            if game not in self.broken:
                self.verify(game, Ctx("restart", verifies=("JF-ATOM-004",)))
        self.telemetry_seen = {
            g: len(self._call("telemetry", {"game": g}).result or []) for g in self.games
        }

    def kill_during_round(self, game: str, user: str, assistant: str) -> None:
        """stdio only: kill the driver right after sending a round; reopen to before or after."""
        self.record("kill_during_round", game=game, user=user, assistant=assistant)
        model = self.games[game]
        after_model = copy.deepcopy(model)
        after_model.record_round(user, assistant)
        self.client.start("record_round", {"game": game, "input": user, "output": assistant})
        time.sleep(0.01)
        self.client.restart()
        self._hello()
        store = normalize(self.dump(game)["store"])
        before_ok = not diff_store(model.store(), store)
        after_ok = not diff_store(after_model.store(), store)
        self.ledger.expect(
            C.DURABILITY,
            before_ok or after_ok,
            "after a kill during record_round, the store is neither the state before nor after",
            ids=("JF-ATOM-004",),
        )
        if after_ok and not before_ok:
            self.games[game] = after_model
        if model.participants:
            self._call("set_participants", {"game": game, "participants": model.participants})
        self.telemetry_seen = {
            g: len(self._call("telemetry", {"game": g}).result or []) for g in self.games
        }
        self.verify(game, Ctx("restart", verifies=("JF-ATOM-004",)))

    def concurrent_rounds(self, game: str, pairs: list[list[str]]) -> None:
        """Several record_round requests outstanding at once: some serial order must explain them."""
        self.record("concurrent_rounds", game=game, pairs=pairs)
        self._script([])
        futures = [
            self.client.start("record_round", {"game": game, "input": u, "output": a})
            for u, a in pairs
        ]
        results = [self.client.wait(f) for f in futures]
        model = self.games[game]
        order = []
        for (u, a), r in zip(pairs, results, strict=True):
            self.ledger.expect(
                C.REPLY,
                r.ok,
                f"a concurrent record_round failed: {r.get('error')}",
                ids=("JF-CONC-001",),
            )
            order.append((r.result["round"], u, a, r.result["seq"]))
        for n, u, a, seq in sorted(order):
            want = model.record_round(u, a)
            self.ledger.expect(
                C.REPLY,
                want == {"round": n, "seq": seq},
                f"concurrent rounds are not explained by a serial order: got {n}/{seq}, "
                f"the serial order gives {want}",
                ids=("JF-CONC-001",),
            )
        self._expect_no_request("record_round")
        self.verify(game, Ctx("concurrent record_round", verifies=("JF-CONC-001",)))


# -- messages ---------------------------------------------------------------------------


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


def _text_mismatch(want: str, got: Any) -> str:
    if not isinstance(got, str):
        return f"input.text is {type(got).__name__}, expected the canonical text"
    i = next(
        (k for k, (a, b) in enumerate(zip(want, got, strict=False)) if a != b),
        min(len(want), len(got)),
    )
    return (
        f"input.text differs from the canonical text of the represented prefix at code point {i} "
        f"(expected {len(want)} code points, got {len(got)}): expected …{want[max(0, i - 40) : i + 40]!r}…, "
        f"got …{got[max(0, i - 40) : i + 40]!r}…"
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


def _log_ids(expected: list[Any], got: Any, ctx: Ctx) -> tuple[str, ...]:
    if ctx.op == "checkpoint":
        return ("JF-QUOTA-008",)
    if ctx.op == "duplicate":
        return ("JF-HIST-008",)
    if not isinstance(got, list):
        return ("JF-QUOTA-005",)
    ek = [e["key"] for e in expected]
    gk = [e.get("key") for e in got]
    if sorted(ek) == sorted(gk) and ek != gk:
        return ("JF-QUOTA-006",)
    if set(gk) - set(ek):
        return ("JF-QUOTA-007", "JF-QUOTA-005")
    return ("JF-QUOTA-005",)


def _outcome_ids(outcome: str) -> tuple[str, ...]:
    return {
        "empty": ("JF-COMP-006", "JF-COMP-008"),
        "not_smaller": ("JF-COMP-007", "JF-TEXT-003", "JF-COMP-008"),
        "quota": ("JF-COMP-010", "JF-ATOM-002"),
        "stale": ("JF-COMP-011", "JF-CAT-009"),
        "refused": ("JF-COMP-008",),
        "transport": ("JF-COMP-008", "JF-CALL-005"),
        "published": ("JF-COMP-004", "JF-ATOM-003", "JF-CALL-005"),
        "not_due": ("JF-COMP-001",),
        "in_flight": ("JF-CONC-003",),
    }.get(outcome, ("JF-COMP-008",))
