"""Hostile input over the driver protocol (JF-ERR-006 to JF-ERR-010, and JF-TEXT-001 for a
lone surrogate where a text is kept): the probes and the check of one probe.

The probes are built from the spec, never copied: the limits of `spec/constants.json`
(`limits.id_pattern`, `value_max_depth`, `message_max_depth`, `message_max_bytes`) and
the argument slots of `spec/driver/ops.schema.json`. A probe is JSON (it is recorded in a
trace and replayed):

- `{"kind": "message", "message": {...}}`: a JSON message the protocol forbids (its `id`
  `"$fresh"` becomes a new message id when sent);
- `{"kind": "bytes", "text": "..."}`: bytes that are no message (the text's code points
  below 256, one byte each: bad JSON, not UTF-8, `NaN`);
- `{"kind": "long", "bytes": N}`: one message of N bytes (past `message_max_bytes`).

Each names the error `code` it must get, whether the reply's id is the message's
(`"same"`) or null (`"null"`), and the requirement `ids` it judges. `run_probe` sends it
unchecked (`DriverClient.send_raw`) and checks: exactly one reply, the code, the reply's
id, the game's dump unchanged before and after, and a driver that still answers. A
transport that cannot carry raw bytes (an in-process driver without `handle_bytes`) leaves
the probe not covered (`NoWire`), never failed.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import TYPE_CHECKING, Any

from jfsm_conformance.client.driver import HarnessError, NoWire
from jfsm_conformance.client.protocol import spec_dir
from jfsm_conformance.verify import checks as C

if TYPE_CHECKING:
    from jfsm_conformance.steps.world import World
    from jfsm_conformance.verify.checks import Ledger

__all__ = [
    "Limits",
    "describe_change",
    "limits",
    "make_probe",
    "message_probes",
    "run_probe",
    "slot_probes",
    "wire_probes",
]

LONE = "bad \ud800 text"
SLOT = "\u0000SLOT\u0000"  # replaced by a bare token in the encoded message (bad JSON)


class Limits:
    """The limits of `spec/constants.json`, and the shortest and longest ids they allow."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.id_pattern = re.compile(raw["id_pattern"])
        self.value_max_depth: int = raw["value_max_depth"]
        self.message_max_depth: int = raw["message_max_depth"]
        self.message_max_bytes: int = raw["message_max_bytes"]
        lengths = re.search(r"\{(\d+),(\d+)\}", raw["id_pattern"])
        self.id_min, self.id_max = (int(lengths[1]), int(lengths[2])) if lengths else (1, 64)

    def valid_id(self, text: str) -> bool:
        return self.id_pattern.fullmatch(text) is not None

    def bad_ids(self) -> list[str]:
        """Ids the pattern refuses: too long, empty, and characters outside it."""
        candidates = [
            "a" * (self.id_max + 1),
            "a" * (self.id_min - 1),
            "has space",
            "dot.ted",
            "sla/sh",
            "\u00fcmlaut",
            "new\nline",
            "nul\u0000",
            LONE,
        ]
        return [c for c in candidates if not self.valid_id(c)]


@cache
def limits() -> Limits:
    raw = json.loads((spec_dir() / "constants.json").read_text(encoding="utf-8"))
    return Limits(raw["limits"])


def nested(depth: int, leaf: Any = 0) -> Any:
    """A value nesting exactly `depth` arrays and objects (alternating)."""
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 == 0 else {"d": value}
    return value


def make_probe(kind: str, what: str, code: str, reply_id: str, ids: list[str], **body: Any) -> dict:
    return {"kind": kind, "what": what, "code": code, "id": reply_id, "ids": ids, **body}


def _message(op: str, args: Any) -> dict[str, Any]:
    return {"id": "$fresh", "op": op, "args": args}


# every op's well-formed arguments (beside "game"), the base that each probe breaks one slot
# of; "$scene" names the scene the scenario started, "$into" a new game id
BASE_ARGS: dict[str, dict[str, Any]] = {
    "set_participants": {"participants": [{"id": "p-1", "human": True, "spectator": False}]},
    "record_round": {"input": "in", "output": "out"},
    "generate": {"scene": "$scene"},
    "intervene": {"input": "in", "output": "out", "revealed": 1},
    "start_scene": {"scene": "$new-scene"},
    "scene_exchange": {"scene": "$scene", "user": "u", "assistant": "a"},
    "publish_scene": {"scene": "$scene", "closingSummary": "c", "meanwhileEvent": "m"},
    "cancel_scene": {"scene": "$scene"},
    "reset": {"round": 1},
    "edit_round": {"round": 1, "input": "in", "output": "out"},
    "convert": {"rounds": []},
    "duplicate": {"into": "$into"},
    "write": {"sets": {"k": 1}, "deletes": []},
    "cheat": {"sets": {"k": 1}, "deletes": []},
    "checkpoint": {},
    "dump": {},
    "telemetry": {},
}
ID_SLOTS = ("game", "scene", "into")  # slots that hold a game id or a scene id (JF-ERR-006)
# slots that hold texts kept for storage (JF-TEXT-001): a lone surrogate there breaks that rule
TEXT_SLOTS = {
    "record_round": ("input", "output"),
    "intervene": ("input", "output"),
    "scene_exchange": ("user", "assistant"),
    "publish_scene": ("closingSummary", "meanwhileEvent"),
    "edit_round": ("input", "output"),
    "write": ("sets", "deletes"),
    "cheat": ("sets", "deletes"),
}


def _wrong_type(value: Any) -> Any:
    if isinstance(value, int):  # bool included
        return "1"
    if isinstance(value, str):
        return 42
    return "not a container"


def _lone_in(value: Any) -> Any:
    """`value` with a lone surrogate where a text is (or a lone surrogate instead of it)."""
    if isinstance(value, dict) and value:
        key = next(iter(value))
        return {key: LONE} if key != "id" else value
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return [{**value[0], "id": LONE}]
    if isinstance(value, list):
        return [LONE]
    return LONE


def slot_probes(ops: list[str] | None = None) -> list[dict[str, Any]]:
    """Per op and argument slot: a lone surrogate, a wrong type, bad JSON, an id out of
    pattern (id slots), and the slot missing; plus a key with a lone surrogate in write's
    sets. Each must be refused with invalid_input."""
    lim = limits()
    probes = []
    for op in ops or list(BASE_ARGS):
        base = {"game": "$game", **BASE_ARGS[op]}
        for slot, value in base.items():
            ids = ["JF-ERR-010"] + (["JF-ERR-006"] if slot in ID_SLOTS else [])
            text = ["JF-TEXT-001"] if slot in TEXT_SLOTS.get(op, ()) else []
            where = f"{op}.{slot}"
            for label, bad, blamed in (
                ("a lone surrogate", _lone_in(value), text + ids),
                ("a wrong type", _wrong_type(value), ids),
            ):
                if bad == value:
                    continue
                args = {**base, slot: bad}
                probes.append(
                    make_probe(
                        "message",
                        f"{where}: {label}",
                        "invalid_input",
                        "same",
                        blamed,
                        message=_message(op, args),
                    )
                )
            args = {**base, slot: SLOT}
            probes.append(
                make_probe(
                    "bytes",
                    f"{where}: bad JSON",
                    "invalid_input",
                    "null",
                    ["JF-ERR-008", "JF-ERR-010"],
                    text=_bad_json(_message(op, args), "tru"),
                )
            )
            if slot in ID_SLOTS:
                for bad_id in lim.bad_ids():
                    if bad_id == LONE:
                        continue
                    args = {**base, slot: bad_id}
                    probes.append(
                        make_probe(
                            "message",
                            f"{where}: id {bad_id[:20]!r} ({len(bad_id)} chars)",
                            "invalid_input",
                            "same",
                            ["JF-ERR-006", "JF-ERR-010"],
                            message=_message(op, args),
                        )
                    )
            elif slot in BASE_ARGS[op] and op not in ("write", "cheat"):
                args = {k: v for k, v in base.items() if k != slot}
                probes.append(
                    make_probe(
                        "message",
                        f"{where}: missing",
                        "invalid_input",
                        "same",
                        ["JF-ERR-010"],
                        message=_message(op, args),
                    )
                )
    for op in ("write", "cheat"):
        probes.append(
            make_probe(
                "message",
                f"{op}.sets: a key with a lone surrogate",
                "invalid_input",
                "same",
                ["JF-TEXT-001", "JF-ERR-010"],
                message=_message(op, {"game": "$game", "sets": {LONE: 1}}),
            )
        )
    return probes


def forget_probes() -> list[dict[str, Any]]:
    """`forget_games` naming ids out of pattern (only to drivers with `forgetGames`):
    refused with invalid_input, forgetting nothing, the named live game included (R80)."""
    return [
        make_probe(
            "message",
            f"forget_games: id {bad[:20]!r}",
            "invalid_input",
            "same",
            ["JF-ERR-006", "JF-ERR-010"],
            message=_message("forget_games", {"games": ["$game", bad]}),
            needs="forgetGames",
        )
        for bad in limits().bad_ids()
        if bad != LONE
    ]


def depth_probes() -> list[dict[str, Any]]:
    """Values nested one past `value_max_depth` in write and cheat (JF-ERR-007), in a value
    and inside a container of sets."""
    deep = nested(limits().value_max_depth + 1)
    return [
        make_probe(
            "message",
            f"{op}: a value nesting {limits().value_max_depth + 1}",
            "invalid_input",
            "same",
            ["JF-ERR-007", "JF-ERR-010"],
            message=_message(op, {"game": "$game", "sets": {"deep": deep}}),
        )
        for op in ("write", "cheat")
    ]


def message_probes() -> list[dict[str, Any]]:
    """Messages that cannot be read as messages (JF-ERR-008): not an object, a bad id, one
    nesting past `message_max_depth`, an unknown op (unsupported_op, with its id)."""
    lim = limits()
    probes = []
    for text in ("[]", "42", '"hello"', "null", "true", '[{"id": 1}]'):
        probes.append(
            make_probe(
                "bytes",
                f"not an object: {text}",
                "invalid_input",
                "null",
                ["JF-ERR-008", "JF-ERR-010"],
                text=text,
            )
        )
    for bad in (-1, "7", 1.5, True, None):
        probes.append(
            make_probe(
                "message",
                f"id {bad!r}",
                "invalid_input",
                "null",
                ["JF-ERR-008", "JF-ERR-010"],
                message={"id": bad, "op": "dump", "args": {"game": "$game"}},
            )
        )
    probes.append(
        make_probe(
            "message",
            "no id",
            "invalid_input",
            "null",
            ["JF-ERR-008"],
            message={"op": "dump", "args": {"game": "$game"}},
        )
    )
    # the envelope and args count two levels: the whole message nests one past the limit
    too_deep = nested(lim.message_max_depth - 1)
    probes.append(
        make_probe(
            "message",
            f"a message nesting {lim.message_max_depth + 1}",
            "invalid_input",
            "null",
            ["JF-ERR-008", "JF-ERR-010"],
            message={"id": "$fresh", "op": "dump", "args": {"game": "$game", "x": too_deep}},
        )
    )
    probes.append(
        make_probe(
            "message",
            "an unknown op",
            "unsupported_op",
            "same",
            ["JF-ERR-010"],
            message={"id": "$fresh", "op": "drop_everything", "args": {"game": "$game"}},
        )
    )
    probes.append(
        make_probe(
            "message",
            "args not an object",
            "invalid_input",
            "same",
            ["JF-ERR-010"],
            message={"id": "$fresh", "op": "dump", "args": [1]},
        )
    )
    return probes


def wire_probes() -> list[dict[str, Any]]:
    """Bytes that are no message (JF-ERR-008, JF-ERR-010) and one message one byte past
    `message_max_bytes` (JF-ERR-009)."""
    lim = limits()
    probes = [
        make_probe("bytes", label, "invalid_input", "null", ["JF-ERR-008", "JF-ERR-010"], text=text)
        for label, text in (
            ("not UTF-8", '{"id": 1, "op": "dump", "args": {"game": "\u00ff\u00fe"}}'),
            ("truncated JSON", '{"id": 1, "op": "dump", "args": {"game"'),
            ("garbage", "\u0000\u0001garbage\u00c3"),
            ("NaN", '{"id": 1, "op": "dump", "args": {"game": "g"}, "x": NaN}'),
            ("Infinity", '{"id": 1, "op": "dump", "args": {"game": "g"}, "x": -Infinity}'),
            ("nesting far past the limit", "[" * (lim.message_max_depth * 100)),
        )
    ]
    probes.append(
        make_probe(
            "long",
            f"a message of {lim.message_max_bytes + 1} bytes",
            "invalid_input",
            "null",
            ["JF-ERR-009", "JF-ERR-010"],
            bytes=lim.message_max_bytes + 1,
        )
    )
    return probes


def _bad_json(message: dict[str, Any], token: str) -> str:
    text = json.dumps(message, ensure_ascii=True)
    return text.replace(json.dumps(SLOT, ensure_ascii=True), token)


def long_message(size: int) -> bytes:
    """One well-formed dump message of exactly `size` bytes (without its newline)."""
    head, tail = b'{"id": 0, "op": "dump", "args": {"game": "', b'"}}'
    return head + b"a" * (size - len(head) - len(tail)) + tail


def _fill(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, list):
        return [_fill(v, names) for v in value]
    if isinstance(value, dict):
        return {_fill(k, names): _fill(v, names) for k, v in value.items()}
    return value


def run_probe(world: World, ledger: Ledger, game: str, scene: str, probe: dict[str, Any]) -> bool:
    """Send one probe and check it; False when the transport cannot carry it (not covered).
    The probe's optional capability (`needs`) is the caller's to check (`Session.hostile`)."""
    client = world.client
    ids = tuple(probe["ids"])
    what = probe["what"]
    extra: list[Any] = getattr(client.transport, "extra_replies", list)()
    ledger.expect(
        C.HOSTILE, not extra, f"a message got more than one reply: {extra[:2]}", ids=("JF-ERR-008",)
    )
    before = world.dump(game, remember=False)
    msg_id: int | None = None
    if probe["kind"] == "message":
        names = {
            "$game": game,
            "$scene": scene,
            "$new-scene": scene + "-new",
            "$into": game + "-copy",
        }
        message = _fill(probe["message"], names)
        if message.get("id") == "$fresh":
            message["id"] = msg_id = client.next_id()
        data = json.dumps(message, ensure_ascii=True).encode("ascii")
    elif probe["kind"] == "bytes":
        data = _fill(probe["text"], {}).replace('"g"', json.dumps(game)).encode("latin-1")
    elif getattr(client.transport, "url", None):
        return False  # over HTTP the size limit is announced, refused before it is read:
        # the hostile-http scenario's over-size Content-Length probe judges it
    else:
        data = long_message(probe["bytes"])
    try:
        status, reply = client.send_raw(data, msg_id)
    except NoWire:
        return False
    except HarnessError:
        raise
    except Exception as exc:  # an in-process driver raised instead of answering
        status, reply = None, f"no reply: the driver raised {exc!r}"
    del data
    got = reply.get("error") if isinstance(reply, dict) and not reply.get("ok") else reply
    ledger.expect(
        C.HOSTILE,
        isinstance(reply, dict)
        and reply.get("ok") is False
        and isinstance(reply.get("error"), dict)
        and reply["error"].get("code") == probe["code"],
        lambda: f"{what}: should be refused with {probe['code']}; got {str(got)[:300]}",
        ids=ids,
    )
    assert isinstance(reply, dict)  # (the check above failed otherwise)
    want = None if probe["id"] == "null" else msg_id
    ledger.expect(
        C.HOSTILE,
        reply.get("id") == want,
        f"{what}: the reply's id is {reply.get('id')!r}, not {want!r}",
        ids=("JF-ERR-008", *[i for i in ids if i not in ("JF-ERR-008", "JF-ERR-010")]),
    )
    if status is not None and probe["kind"] == "long":
        ledger.expect(
            C.HTTP_GUARD,
            status == 413,
            f"{what}: HTTP status {status}, not 413",
            ids=("JF-ERR-012",),
        )
    after = world.dump(game, remember=False)  # the driver still answers
    ledger.expect(  # the probe's own rule first (its text, id or depth "writes nothing")
        C.HOSTILE,
        after == before,
        lambda: f"{what}: the game changed: {describe_change(before, after)}",
        ids=(*[i for i in ids if i != "JF-ERR-010"], "JF-ERR-010"),
    )
    return True


def describe_change(before: dict[str, Any], after: dict[str, Any]) -> str:
    b, a = before.get("store", {}), after.get("store", {})
    keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    if keys:
        return "store keys " + ", ".join(keys[:5])
    return "change log or footprint"
