# ruff: noqa: E501  (long diagnostic f-strings read better unbroken)
"""What the suite observes after every step, compared with the oracle.

`Observation.verify` dumps a game and checks the store against the model (blaming the
requirement each differing key breaks), the change log against the suite's own checkpoint
base, the footprint against its own JCS count, the forced-compression flag invariant and the
canaries; the other methods check compress.v2 requests, fake-side violations, telemetry and
compression reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from conformance import checks as C
from conformance.canon import (
    QUOTA,
    change_log,
    footprint,
    jcs,
)
from conformance.driver_client import HarnessError
from conformance.harness import Harness
from conformance.oracle import GAME_KIND, Diff, InFlight, diff_store, normalize
from conformance.replies import (
    call_id_of,
    output_chars,
    settled,
)

__all__ = ["Ctx", "Observation"]


@dataclass
class Ctx:
    """What the step under verification did, to blame the right requirement on a diff."""

    op: str
    published: list[InFlight] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    refused: bool = False
    verifies: tuple[str, ...] = ()
    summaries: dict[str | None, int] = field(default_factory=dict)
    # chunk seqs per stack (None: the game stack) present in the dumped store
    chunks: dict[str | None, set[int]] = field(default_factory=dict)


class Observation(Harness):
    """Checks of observable state (see the module docs)."""

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
            for key in store:
                if ".chunk." in key:
                    prefix, _, seq_text = key.rpartition(".chunk.")
                    if seq_text.isdigit():
                        owner = None if prefix == "jfGameStack" else prefix.split(".", 1)[1]
                        ctx.chunks.setdefault(owner, set()).add(int(seq_text))
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
                    if any(kept > seq for kept in ctx.chunks.get(scene, ())):
                        # a later suffix chunk survived: the publication deleted a chunk it
                        # does not represent, not the suffix as a whole
                        ids.append("JF-COMP-005")
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

    def _check_telemetry(
        self,
        game: str,
        flight: InFlight,
        attempts: list[dict[str, Any]],
        outcome: str,
        summary_call_id: str | None = None,
    ) -> None:
        """`summary_call_id`: the compressionCallId of the summary this compression
        published, taken when it settled (the model may have moved on since)."""
        reply = self._call("telemetry", {"game": game})
        if not reply.ok:
            self.unsupported.setdefault("telemetry", str(reply.get("error")))
            return
        events = reply.result
        seen = self.telemetry_seen.get(game, 0)
        # one operation may run several compressions (an owed forced one, then the check):
        # this compression's events are the next len(attempts) ones
        fresh = events[seen : seen + len(attempts)]
        self.telemetry_seen[game] = seen + len(fresh)
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
            self.ledger.expect(
                C.CALL_ID,
                summary_call_id is not None and fresh[-1].get("callId") == summary_call_id,
                "telemetry callId differs from the summary's compressionCallId",
                ids=("JF-CALL-011", "JF-COMP-004"),
            )

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
