"""Bounded waits on compress.v2 (JF-CALL-006, JF-CALL-013, JF-CALL-014): one generation
whose first attempt meets a hostile service, judged against a short attempt deadline.

The maxima are normative (`bounds` of `spec/compress-v2.json`, decision R79), but waiting
out the maximum deadline (120 s) per check would make every run minutes longer. So the suite
asks a driver that declares `capabilities.deadlineOverride` for a short deadline
(`TEST_DEADLINE` seconds) with a second `hello` for the length of one case, and says
`hello` again without it afterwards (the driver's own deadline comes back).

A case is a generation scripted with a hostile first attempt (the fake hangs, drips its
reply a byte at a time, trickles an endless body, sends a body past `response_bytes_max`, or
a reply whose `callId` or `error.code` is out of bounds), then a success. The generation
must answer within the deadline of every waited attempt plus `SLACK`, with the first attempt
a transport failure and the success published, nothing lost (the usual store, request,
report and telemetry checks of `Session.generate`), and the driver still serving. A failure
of how the hostile attempt was handled (no retry, a wrong outcome or telemetry, the deadline
passed) names the case's requirement first; one of what the engine sent (a request the fake
rejects for its content) or of the store keeps its own requirements alone (decision R148,
`steps.session.WAIT_CHECKS`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from jfsm_conformance.client.protocol import spec_dir
from jfsm_conformance.verify import checks as C

if TYPE_CHECKING:
    from jfsm_conformance.steps.world import World
    from jfsm_conformance.verify.checks import Ledger

__all__ = ["SLACK", "TEST_DEADLINE", "bounds", "cases", "hello"]

TEST_DEADLINE = 2.0  # seconds: the attempt deadline the suite asks for
SLACK = 8.0  # seconds beyond the waited deadlines a loaded machine may need
HOSTILE_FOR = (
    TEST_DEADLINE + SLACK + 5
)  # how long the fake keeps up a hang, a drip or an endless body


def bounds() -> dict[str, float]:
    """The `bounds` of `spec/compress-v2.json`: name -> value."""
    raw = json.loads((spec_dir() / "compress-v2.json").read_text(encoding="utf-8"))
    return {k: v["value"] for k, v in raw["bounds"].items() if isinstance(v, dict)}


def cases() -> list[dict[str, Any]]:
    """The hostile first attempts, each with the requirement it judges and how many attempt
    deadlines the generation may spend waiting."""
    cap = int(bounds()["response_bytes_max"])
    long_id = "c" * 129
    return [
        {
            "what": "a service that never answers",
            "id": "JF-CALL-014",
            "waits": 1,
            "reply": {"reply": "hang", "seconds": HOSTILE_FOR},
        },
        {
            "what": "a reply dripped a byte every 50 ms",
            "id": "JF-CALL-014",
            "waits": 1,
            "reply": {"reply": "drip", "seconds": HOSTILE_FOR},
        },
        {
            "what": "a body that never ends",
            "id": "JF-CALL-014",
            "waits": 1,
            "reply": {"reply": "endless", "seconds": HOSTILE_FOR},
        },
        {
            "what": f"a body of {cap + 1} bytes (chunked)",
            "id": "JF-CALL-006",
            "waits": 1,
            "reply": {"reply": "oversized", "bytes": cap + 1, "chunked": True},
        },
        {
            "what": f"a Content-Length of {cap + 1}",
            "id": "JF-CALL-006",
            "waits": 1,
            "reply": {"reply": "oversized", "bytes": cap + 1},
        },
        {
            "what": "a callId of 129 characters",
            "id": "JF-CALL-013",
            "waits": 0,
            "reply": {
                "reply": "wrong_schema",
                "body": {"ok": True, "callId": long_id, "summary": "short"},
            },
        },
        {
            "what": "a callId with a newline",
            "id": "JF-CALL-013",
            "waits": 0,
            "reply": {
                "reply": "wrong_schema",
                "body": {"ok": True, "callId": "call\nINJECTED", "summary": "short"},
            },
        },
        {
            "what": "an error.code of 65 characters",
            "id": "JF-CALL-013",
            "waits": 0,
            "reply": {
                "reply": "wrong_schema",
                "body": {"ok": False, "callId": "c-1", "error": {"code": "e" * 65}},
            },
        },
        {
            "what": "an error.code with a space",
            "id": "JF-CALL-013",
            "waits": 0,
            "reply": {
                "reply": "wrong_schema",
                "body": {"ok": False, "error": {"code": "bad code"}},
            },
        },
    ]


def hello(w: World, ledger: Ledger, deadline: float | None) -> None:
    """Say hello again, asking for the attempt deadline `deadline` (None: the driver's own)."""
    args: dict[str, Any] = {"protocol": 1, "compressUrl": w.fake.url}
    if w.override:
        args["thresholds"] = w.override
    if deadline is not None:
        args["compressDeadlineSeconds"] = deadline
    reply = w.client.call("hello", args, timeout=60)
    if not reply.ok:  # a hello accepted judges nothing: no credit (R148)
        ledger.expect(
            C.REPLY if deadline is None else C.BOUNDED_WAITS,
            False,
            f"hello with compressDeadlineSeconds={deadline} refused: {reply.get('error')}",
            ids=("JF-CALL-006",),
        )
